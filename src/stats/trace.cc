#include "stats/trace.h"

#include <cinttypes>
#include <cstdio>

namespace stoker::detail {

void TraceBuffer::append_json(std::string* out, int pid, int tid, const std::string& thread_name) const {
  static const char* const kNames[] = {"read", "decode", "transform", "wait for batch"};
  char buf[256];
  auto put = [&](int n) {
    if (!out->empty()) out->push_back(',');
    out->append(buf, static_cast<std::size_t>(n));
  };
  put(std::snprintf(buf, sizeof(buf), R"({"ph":"M","name":"thread_name","pid":%d,"tid":%d,"args":{"name":"%s"}})", pid,
                    tid, thread_name.c_str()));
  std::lock_guard<std::mutex> lock(mu_);
  for (const Event& e : events_) {
    const char* name = kNames[e.stage < 4 ? e.stage : 0];
    if (e.stage == kTraceWait) {
      put(std::snprintf(buf, sizeof(buf), R"({"ph":"X","name":"%s","cat":"stoker","pid":%d,"tid":%d,"ts":%.3f,"dur":%.3f,"args":{"batch":%u}})",
                        name, pid, tid, static_cast<double>(e.start_ns) * 1e-3, static_cast<double>(e.dur_ns) * 1e-3,
                        e.record));
    } else {
      put(std::snprintf(buf, sizeof(buf), R"({"ph":"X","name":"%s","cat":"stoker","pid":%d,"tid":%d,"ts":%.3f,"dur":%.3f,"args":{"record":%u}})",
                        name, pid, tid, static_cast<double>(e.start_ns) * 1e-3, static_cast<double>(e.dur_ns) * 1e-3,
                        e.record));
    }
  }
  if (dropped_) {
    put(std::snprintf(buf, sizeof(buf),
                      "{\"ph\":\"i\",\"name\":\"%" PRIu64 " spans dropped (buffer full)\",\"pid\":%d,\"tid\":%d,\"ts\":0,\"s\":\"t\"}",
                      dropped_, pid, tid));
  }
}

}  // namespace stoker::detail
