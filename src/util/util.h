// Small helpers every stage uses, defined once: the monotonic clock, the
// cores this process may run on, argument errors, suffix tests, writing
// a file so that readers never see half of it, and a buffer's bytes.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "stoker/status.h"

namespace stoker::detail {

// CLOCK_MONOTONIC in nanoseconds (std::chrono::steady_clock): the clock of
// stage timings, traces and the doctor's channel (Python's time.monotonic_ns()).
inline std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The cores this process may run on (its affinity mask: taskset, cgroups
// cpusets), at least 1; hardware_concurrency() when the mask is unavailable.
int available_cores();

// Throws Error(kInvalidArgument, msg): a bad option or argument.
[[noreturn]] void invalid(const std::string& msg);

// s ends with suffix (case-sensitive).
inline bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
// s ends with suffix, ASCII case-insensitive (".JPG" is ".jpg").
bool ends_with_nocase(std::string_view s, std::string_view suffix);

// Writes `data` to `path` through a temporary file in the same directory
// renamed into place: a reader sees the old file or the new one, never a
// part. Messages name the path.
Status write_file_atomically(const std::string& path, std::string_view data);

// The bytes a reused buffer holds: its capacity, not its size (a vector
// keeps what it grew to).
template <typename T>
std::uint64_t capacity_bytes(const std::vector<T>& v) {
  return static_cast<std::uint64_t>(v.capacity()) * sizeof(T);
}

}  // namespace stoker::detail
