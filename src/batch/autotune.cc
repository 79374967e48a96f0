#include "batch/autotune.h"

#include <algorithm>
#include <cstdio>

namespace stoker::detail {

Tuner::Tuner(int max_threads, int threads, bool tune_threads, int min_depth, int max_depth, int depth, bool tune_depth)
    : max_threads_(std::max(1, max_threads)),
      tune_threads_(tune_threads),
      min_depth_(std::max(1, min_depth)),
      max_depth_(std::max(min_depth_, max_depth)),
      tune_depth_(tune_depth),
      threads_(std::clamp(threads, 1, max_threads_)),
      depth_(std::clamp(depth, min_depth_, max_depth_)) {}

const char* Tuner::state() const {
  if (!tune_threads_ && !tune_depth_) return "off";
  return stable_ >= kStableWindows ? "settled" : "tuning";
}

void Tuner::change(const TuneWindow& w, int threads, int depth, const std::string& why) {
  char head[160];
  std::snprintf(head, sizeof(head), "batch %llu: ", static_cast<unsigned long long>(w.first_batch + w.batches));
  std::string line = head;
  if (threads != threads_) line += "threads " + std::to_string(threads_) + "->" + std::to_string(threads) + " ";
  if (depth != depth_) line += "prefetch " + std::to_string(depth_) + "->" + std::to_string(depth) + " ";
  line += why;
  log_.push_back(std::move(line));
  threads_ = threads;
  depth_ = depth;
  stable_ = 0;
}

bool Tuner::observe(const TuneWindow& w) {
  if ((!tune_threads_ && !tune_depth_) || w.wall_s <= 0) return false;
  const double wait = w.wait_s / w.wall_s;      // share of wall time the consumer waited
  const double used = w.busy_s / w.wall_s;      // cores the workers used
  const double blocked = w.ring_blocked_s / w.wall_s;
  char ev[200];
  std::snprintf(ev, sizeof(ev), "(consumer waited %.1f%% of %.2f s; workers used %.2f of %d cores, idle for ring space %.2f)",
                100 * wait, w.wall_s, used, threads_, blocked);
  const bool was_probing = probing_;
  probing_ = false;

  if (wait > kHigh) {
    if (was_probing && tune_threads_) {
      floor_ = threads_ + 1;
      change(w, threads_ + 1, depth_, std::string("back: parking a worker made the consumer wait ") + ev);
      return true;
    }
    if (tune_threads_ && threads_ < max_threads_) {
      change(w, threads_ + 1, depth_, std::string("input-bound ") + ev);
      return true;
    }
    if (tune_depth_ && depth_ < max_depth_ && blocked > 0.1) {
      change(w, threads_, depth_ + 1, std::string("bursty consumer: workers idle for ring space while it waited ") + ev);
      return true;
    }
  } else if (wait < kLow && tune_threads_ && threads_ > floor_ && used < (threads_ - 1) * kBusyShare) {
    probing_ = true;
    change(w, threads_ - 1, depth_, std::string("loader ahead of the consumer, a core given back ") + ev);
    return true;
  }
  if (stable_ < kStableWindows) ++stable_;
  return false;
}

}  // namespace stoker::detail
