// Measurements the doctor makes itself, after the command ends, to predict
// what a change would gain: the same loader settings on a sample of the same
// records, as they are and with the change applied (cache="decoded",
// packed at --max-side 256, uint8 output), so that the ratio of per-sample
// costs carries over to the user's run.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "stoker/options.h"

namespace stoker::doctor {

// How long a probe measures: after a warm-up epoch (which fills a cache, so
// cached modes are timed in steady state), at least kProbeMinSeconds and one
// whole epoch of the sample, at most kProbeMaxSeconds; the timed span is cut
// into kProbeChunks runs of equal sample counts whose rates give the spread.
constexpr double kProbeMinSeconds = 1.5;
constexpr double kProbeMaxSeconds = 3.0;
constexpr int kProbeChunks = 8;

struct Cost {
  bool ok = false;
  std::string error;
  std::size_t records = 0;
  double per_sample_s = 0;  // busy seconds per sample: read + decode + transform
  double read_s = 0, decode_s = 0, transform_s = 0;  // per sample
  double cache_bytes_per_sample = 0;                 // cache="decoded"/"ram": bytes kept per sample
  // Samples/s delivered to the simulated consumer: the median chunk, and the
  // lower and upper quartiles of the chunks (the probe's own spread).
  double rate = 0, rate_lo = 0, rate_hi = 0;
  double seconds = 0;  // the probe's wall time, warm-up included
};

// The training loop as the run measured it, replayed by the probes: per
// sample, the consumer's own time between batches (the step, plus taking the
// batch); busy (CPU work, as when training on the CPU) or asleep (waiting on
// a GPU).
struct Consumer {
  double step_per_sample_s = 0;
  bool busy = true;
};

struct LoaderSetup {
  std::vector<std::string> sources;
  LoaderOptions options;
  Consumer consumer;
};

// The loader's settings from its channel snapshot. Throws std::runtime_error
// when the snapshot lacks them (a loader created from a Source object).
LoaderSetup setup_from_snapshot(const nlohmann::json& snap);

// At most max_records records spread over the source on `threads` threads,
// consumed by setup.consumer: a warm-up epoch, then timed epochs (above).
Cost measure(const LoaderSetup& setup, std::size_t max_records, int threads);
// The same records packed once with `stoker pack --max-side max_side` (JPEG
// q95, as the CLI does), or with `--lossless` when max_side is 0, into a
// temporary shard, then measured as above. Image folders and list files only.
Cost measure_packed(const LoaderSetup& setup, std::size_t max_records, int max_side, int threads);
// Image files (a DataLoader's), through stoker with RandomResizedCrop(224) +
// flip + Normalize, float32.
Cost measure_files(const std::vector<std::string>& files, int threads);

}  // namespace stoker::doctor
