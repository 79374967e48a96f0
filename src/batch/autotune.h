// Autotuning of the worker count and ring depth (threads=0, prefetch=0).
//
// The loader starts at full speed (every worker active, no probing delay
// before the first batch) and, once batches flow, hands the tuner one window
// of measurements at a time: wall time, the consumer's wait, the workers'
// busy time and the time workers sat idle because the ring was full. The
// tuner is a pure function of those windows, so its rules are tested with
// synthetic measurements as well as with a running loader.
//
// Rules (kHigh = 5%, kLow = 2% of the window's wall time):
//   * consumer waited > kHigh: input-bound. Add a worker if one is parked;
//     else deepen the ring when workers were idle for ring space (bursty
//     consumer); else nothing more can be done here (the verdict says so).
//   * consumer waited < kLow and the workers used less than (active - 1) x
//     85% of a core each: the loader is ahead of the model; park one worker
//     to give its core back to the training step, then watch the next window.
//     If the consumer then waits > kHigh, the worker comes back and the count
//     is final (never probed below again).
//   * three windows without a change: settled. A settled tuner still adds a
//     worker back if the consumer starts waiting.
// Bounds: 1 <= threads <= max_threads (the available cores unless the user
// said otherwise), min_depth <= depth <= max_depth.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace stoker::detail {

struct TuneWindow {
  double wall_s = 0;
  double wait_s = 0;          // consumer blocked in next()
  double busy_s = 0;          // summed over workers: read + decode + transform
  double ring_blocked_s = 0;  // summed over workers: idle because the ring was full
  std::uint64_t batches = 0;
  std::uint64_t first_batch = 0;  // the window's first batch, counted over the loader's life
};

class Tuner {
 public:
  static constexpr double kHigh = 0.05, kLow = 0.02, kBusyShare = 0.85;
  static constexpr int kStableWindows = 3;

  // tune_threads / tune_depth: false keeps that value as given.
  Tuner(int max_threads, int threads, bool tune_threads, int min_depth, int max_depth, int depth, bool tune_depth);

  // Takes one window; returns true when threads() or depth() changed.
  bool observe(const TuneWindow& w);

  int threads() const { return threads_; }
  int depth() const { return depth_; }
  // "off" (nothing to tune), "tuning" or "settled".
  const char* state() const;
  // One line per change, with the measurements that caused it.
  const std::vector<std::string>& log() const { return log_; }

 private:
  void change(const TuneWindow& w, int threads, int depth, const std::string& why);

  const int max_threads_;
  const bool tune_threads_;
  const int min_depth_, max_depth_;
  const bool tune_depth_;
  int threads_, depth_;
  int floor_ = 1;           // never probe below this again
  bool probing_ = false;    // the last change parked a worker; the next window judges it
  int stable_ = 0;
  std::vector<std::string> log_;
};

}  // namespace stoker::detail
