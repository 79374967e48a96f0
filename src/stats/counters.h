// Per-thread stage counters and the corrupt-sample log behind Loader::stats().
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "stoker/stats.h"
#include "stoker/status.h"

namespace stoker::detail {

// Written by one worker thread, read by stats(); relaxed atomics keep reads
// race-free at the cost of plain adds. One cache line per worker.
struct alignas(64) StageCounters {
  std::atomic<std::uint64_t> read_ns{0}, decode_ns{0}, transform_ns{0}, python_ns{0}, samples{0}, bytes{0};
  std::atomic<std::uint64_t> boxes_dropped{0}, boxes_truncated{0};

  void add_read(std::int64_t ns, std::size_t n) {
    read_ns.fetch_add(static_cast<std::uint64_t>(ns), std::memory_order_relaxed);
    bytes.fetch_add(n, std::memory_order_relaxed);
  }
  void add_decode(std::int64_t ns) { decode_ns.fetch_add(static_cast<std::uint64_t>(ns), std::memory_order_relaxed); }
  void add_transform(std::int64_t ns) {
    transform_ns.fetch_add(static_cast<std::uint64_t>(ns), std::memory_order_relaxed);
    samples.fetch_add(1, std::memory_order_relaxed);
  }
  void add_python(std::int64_t ns) { python_ns.fetch_add(static_cast<std::uint64_t>(ns), std::memory_order_relaxed); }
  void add_boxes(std::size_t dropped, std::size_t truncated) {
    if (dropped) boxes_dropped.fetch_add(dropped, std::memory_order_relaxed);
    if (truncated) boxes_truncated.fetch_add(truncated, std::memory_order_relaxed);
  }
  std::uint64_t busy_ns() const {
    return read_ns.load(std::memory_order_relaxed) + decode_ns.load(std::memory_order_relaxed) +
           transform_ns.load(std::memory_order_relaxed) + python_ns.load(std::memory_order_relaxed);
  }
  void add_to(Stats* s) const {
    Stats::Thread t;
    t.read_s = static_cast<double>(read_ns.load(std::memory_order_relaxed)) * 1e-9;
    t.decode_s = static_cast<double>(decode_ns.load(std::memory_order_relaxed)) * 1e-9;
    t.transform_s = static_cast<double>(transform_ns.load(std::memory_order_relaxed)) * 1e-9;
    t.python_s = static_cast<double>(python_ns.load(std::memory_order_relaxed)) * 1e-9;
    t.samples = samples.load(std::memory_order_relaxed);
    s->per_thread.push_back(t);
    s->read_s += static_cast<double>(read_ns.load(std::memory_order_relaxed)) * 1e-9;
    s->decode_s += static_cast<double>(decode_ns.load(std::memory_order_relaxed)) * 1e-9;
    s->transform_s += static_cast<double>(transform_ns.load(std::memory_order_relaxed)) * 1e-9;
    s->python_s += t.python_s;
    s->samples += samples.load(std::memory_order_relaxed);
    s->bytes_read += bytes.load(std::memory_order_relaxed);
    s->boxes_dropped += boxes_dropped.load(std::memory_order_relaxed);
    s->boxes_truncated += boxes_truncated.load(std::memory_order_relaxed);
  }
};

// Every corrupt sample is counted by reason; the first kMaxExamples messages
// are kept. Thread-safe.
class CorruptLog {
 public:
  static constexpr std::size_t kMaxExamples = 16;
  void add(const Status& s) {
    std::lock_guard<std::mutex> lock(mu_);
    ++total_;
    ++by_reason_[code_name(s.code())];
    if (examples_.size() < kMaxExamples) examples_.push_back(s.to_string());
  }
  void add_to(Stats* s) const {
    std::lock_guard<std::mutex> lock(mu_);
    s->corrupt = total_;
    s->corrupt_by_reason = by_reason_;
    s->corrupt_examples = examples_;
  }

 private:
  mutable std::mutex mu_;
  std::uint64_t total_ = 0;
  std::map<std::string, std::uint64_t> by_reason_;
  std::vector<std::string> examples_;
};

}  // namespace stoker::detail
