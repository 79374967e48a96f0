// Resume: whether a saved Loader::State applies to a loader. The position is
// (epoch, batches handed out, and the parts of the epoch run on other
// topologies); the order and every sample's randomness are functions of
// (seed, epoch, record), so a loader with the same data and the settings
// that define the order continues the uninterrupted run exactly, at any
// thread count or ring depth, and on another topology continues the epoch
// with the records not yet handed out (order/order.h: resumed_order).
#pragma once

#include <cstdint>

#include <string>
#include <vector>

#include "order/order.h"
#include "stoker/loader.h"

namespace stoker::detail {

// Throws Error(kInvalidArgument) naming the first setting of `saved` that
// differs from the loader's (`now`: its own state) and why it matters, or a
// value out of range (a world_size or batch_size < 1). world_size and
// batch_size may differ: that is an elastic resume.
void check_restorable(const Loader::State& saved, const Loader::State& now);

// The earlier parts of `saved`'s epoch and the saved one, as the order module
// takes them, without parts that handed out nothing. Throws
// Error(kInvalidArgument) when a part's batches_done is past the end of its
// share of the epoch (`order`: the loader's order parameters).
std::vector<Segment> saved_segments(const Loader::State& saved, const OrderParams& order);

// The state as JSON, with the keys of Python's state_dict() (the one
// definition of them: the bindings and `stoker inspect-state` use these).
std::string state_to_json(const Loader::State& st);
// Throws Error(kInvalidArgument) "load_state_dict: ..." naming a missing key
// or a value of the wrong type or sign. A version 1 state (a "rank", no
// "earlier") reads as it is.
Loader::State state_from_json(const std::string& json);

}  // namespace stoker::detail
