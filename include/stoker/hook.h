// A stage of the caller's own after stoker's (LoaderOptions::hook): the
// Python bindings run torchvision transforms stoker has no kernel for, a
// target_transform and the collate through it, on the loader's workers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "stoker/status.h"

namespace stoker {

// One sample as stoker made it, handed to SampleHook::sample(). Its image
// has this sample's own size (with a hook, transforms need not end at a
// fixed size); it is valid during the call only.
struct HookSample {
  std::uint32_t record = 0;           // the record read (after any skip of a corrupt one)
  std::int64_t label = -1;            // Source::label(record)
  const void* image = nullptr;        // the image after stoker's transforms; null without an image
  std::string descr;                  // its NumPy dtype string: "|u1" or "<f4"
  std::vector<std::int64_t> dims;     // {3, H, W} (NCHW) or {H, W, 3} (NHWC)
};

// Implemented by the caller; every call comes from a worker thread, several
// at once. `run` tells epochs (and restarts of one) apart: the loader never
// mixes calls of two runs for one (batch, pos).
class SampleHook {
 public:
  virtual ~SampleHook() = default;
  // Sample `pos` of batch `batch`. An error makes the sample corrupt under
  // LoaderOptions::on_corrupt (skipped: the next record of the epoch is made
  // into the same position and handed here again), counted by its code.
  virtual Status sample(std::uint64_t run, std::uint64_t epoch, std::size_t batch, std::size_t pos,
                        const HookSample& sample) = 0;
  // Every sample of the batch (`size` of them) went through sample(): the
  // batch is complete. Called on the worker that made its last sample,
  // before Loader::next() can hand it out; an error fails the batch.
  virtual Status batch(std::uint64_t run, std::uint64_t epoch, std::size_t batch, std::size_t size) = 0;
};

}  // namespace stoker
