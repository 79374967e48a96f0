// Trace spans for Chrome / Perfetto (trace-event JSON): one buffer per
// worker thread (and one for the consumer), bounded, written only by its
// owner; read under its lock when the trace is exported.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace stoker::detail {

enum TraceStage : std::uint8_t { kTraceRead, kTraceDecode, kTraceTransform, kTraceWait };

class TraceBuffer {
 public:
  // Spans kept per buffer; later ones are counted as dropped.
  static constexpr std::size_t kMaxEvents = 1u << 18;

  void add(std::int64_t start_ns, std::int64_t dur_ns, std::uint32_t record, std::uint8_t stage) {
    std::lock_guard<std::mutex> lock(mu_);
    if (events_.size() >= kMaxEvents) {
      ++dropped_;
      return;
    }
    events_.push_back({start_ns, dur_ns, record, stage});
  }
  // Appends ",{...}" per span (complete events, "ph":"X", microseconds) and
  // a thread-name record, comma-separated after whatever *out holds.
  void append_json(std::string* out, int pid, int tid, const std::string& thread_name) const;

 private:
  struct Event {
    std::int64_t start_ns, dur_ns;
    std::uint32_t record;
    std::uint8_t stage;
  };
  mutable std::mutex mu_;
  std::vector<Event> events_;
  std::uint64_t dropped_ = 0;
};

}  // namespace stoker::detail
