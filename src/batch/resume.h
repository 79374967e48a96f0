// Exact resume: whether a saved Loader::State applies to a loader. The
// position is (epoch, batches handed out); the order and every sample's
// randomness are functions of (seed, epoch, record), so a loader with the
// same data and the settings that define the order continues the
// uninterrupted run exactly, at any thread count or ring depth.
#pragma once

#include <cstdint>

#include "stoker/loader.h"

namespace stoker::detail {

// Throws Error(kInvalidArgument) naming the first setting of `saved` that
// differs from the loader's (`now`: its own state) and why it matters, or a
// position past the end of the epoch (`num_batches` per epoch).
void check_restorable(const Loader::State& saved, const Loader::State& now, std::uint64_t num_batches);

}  // namespace stoker::detail
