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

// How long probes measure. Each loader timed (the one as configured and one
// per change) first runs a warm-up epoch (which fills a cache, so cached
// modes are timed in steady state); then they run in turn, round after round,
// each round a whole number of epochs of at least kProbeRoundSeconds per
// loader (whole epochs: a loader not running then has nothing in flight),
// for at least kProbeMinRounds rounds and kProbeMinSeconds; then until every
// median (each loader's rate, each change's ratio) has a standard error of
// at most kProbeTargetSe of itself, or kProbeMaxRounds, or about
// kProbeMaxSeconds: a noisy machine gets more rounds, not a wider range,
// while the time allows.
constexpr double kProbeRoundSeconds = 0.2;
constexpr int kProbeMinRounds = 6;
constexpr int kProbeMaxRounds = 20;
constexpr double kProbeMinSeconds = 4.0;
constexpr double kProbeMaxSeconds = 18.0;
constexpr double kProbeTargetSe = 0.04;

// The standard error of a median from its rounds' quartiles, as a share of
// it: IQR / 1.35 (sigma for a normal spread) / sqrt(rounds) / median. 1 when
// there is nothing to go on.
double relative_se(double median, double q1, double q3, int rounds);

struct Cost {
  bool ok = false;
  std::string error;
  std::size_t records = 0;
  double per_sample_s = 0;  // busy seconds per sample: read + decode + transform
  double read_s = 0, decode_s = 0, transform_s = 0;  // per sample
  double cache_bytes_per_sample = 0;                 // cache="decoded"/"ram": bytes kept per sample
  // Samples/s delivered to the replayed consumer: the median round, and the
  // lower and upper quartiles of the rounds (the probe's own spread).
  double rate = 0, rate_lo = 0, rate_hi = 0;
  // This loader's rate over the one as configured, round by round (the
  // machine's drift cancels): median and quartiles. 1 for the configured one.
  double ratio = 0, ratio_lo = 0, ratio_hi = 0;
  int rounds = 0;
  double seconds = 0;  // wall time: its preparation (packing), then the interleaved rounds
  // Other processes' runnable threads while the rounds ran (the machine's,
  // less the doctor's own), sampled after each; -1: not sampled.
  double others_runnable = -1;
};

// Runnable threads now (running or waiting for a core) of processes other
// than this one: /proc/stat's procs_running less this process's threads in
// state R; -1 when /proc/stat does not say.
double others_runnable_now();

// What a probe changes from the loader as configured.
enum class Change { kNone, kDecoded, kUInt8, kPacked256, kLossless };
const char* change_name(Change c);

// The training loop as the run measured it, replayed by the probes: per
// sample, the consumer's own time between batches (the step, plus taking the
// batch); busy (CPU work, as when training on the CPU) or asleep (waiting on
// a GPU).
struct Consumer {
  double step_per_sample_s = 0;
  bool busy = true;
  // The run's epoch, in samples: rates are given for epochs of this length
  // (0: the probe's own).
  double epoch_samples = 0;
  // The step as the run measured it on the consuming thread, when it did
  // (`split`; then step_per_sample_s and busy are not used): its CPU time per
  // sample, replayed as CPU work (spinning until the thread's CPU clock has
  // advanced by it, so that the probe's loader threads and the machine's
  // other processes lengthen it as they would the real step), and its time
  // off the CPU other than waiting for a core (a GPU, I/O, sleeps), replayed
  // as a sleep. The run's wait for a core is not replayed: the probe's own
  // contention takes its place.
  bool split = false;
  double cpu_per_sample_s = 0, sleep_per_sample_s = 0;
};

struct LoaderSetup {
  std::vector<std::string> sources;
  std::string mixture;  // a mixture's JSON (stoker/mixture.h) instead of sources
  LoaderOptions options;
  Consumer consumer;
};

// Which records of n a probe measures: at most max_records, spread evenly
// (record j * n / m for j < m), so that every part of the set (every class
// of an image folder, every shard) is in the sample.
//
// NOTE: not every k-th record with an integer k: with 256 records and 192
// wanted, k is 1 and the sample was the first 192, the first class and a
// half, whose decode cost was 6% below the set's in the doctor's bench.
std::vector<std::size_t> sample_records(std::size_t n, std::size_t max_records);

// The loader's settings from its channel snapshot. Throws std::runtime_error
// when the snapshot lacks them (a loader created from a Source object).
LoaderSetup setup_from_snapshot(const nlohmann::json& snap);

// At most max_records records spread over the source on `threads` threads,
// consumed by setup.consumer, as configured (result 0) and with each change
// (results 1...), interleaved as above. A change that cannot be measured
// (packing records already in shards, say) has ok = false and its error.
std::vector<Cost> measure(const LoaderSetup& setup, const std::vector<Change>& changes, std::size_t max_records,
                          int threads);
// The loader as configured alone.
Cost measure(const LoaderSetup& setup, std::size_t max_records, int threads);
// Image files (a DataLoader's), through stoker with RandomResizedCrop(224) +
// flip + Normalize, float32.
// `transforms`: the script's own pipeline as stoker runs it (a JSON array of
// the options codec's transforms, and "dtype" beside them: {"transforms":
// [...], "dtype": "float32"}); "" for RandomResizedCrop(224) + flip + Normalize.
// `consumer`: the run's loop replayed after every batch (none by default);
// `batch_size`: the script's (0: 64).
Cost measure_files(const std::vector<std::string>& files, int threads, const std::string& transforms = "",
                   const Consumer& consumer = {}, std::size_t batch_size = 0);
// The same files as a loader setup (for the sweep): a list file of them
// written into `dir` (which must outlive the setup's use), with the script's
// pipeline `transforms` (as above) or RandomResizedCrop(224) + flip +
// Normalize. Throws std::runtime_error when there are no files.
LoaderSetup files_setup(const std::vector<std::string>& files, const std::string& transforms, const std::string& dir);

}  // namespace stoker::doctor
