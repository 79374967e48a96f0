// The writer's side of `stoker doctor`'s stats channel: with
// STOKER_DOCTOR=<dir> in the environment, each loader replaces
// <dir>/<kind>-<pid>-<id>.json with a JSON snapshot of itself every
// kPublishNs while batches flow, and once more when it is destroyed. The
// doctor's reader is tools/doctor/channel.{h,cc}; stoker.profile (Python)
// writes the same envelope.
#pragma once

#include <cstdint>
#include <string>

namespace stoker::detail {

class DoctorChannel {
 public:
  static constexpr std::int64_t kPublishNs = 250'000'000;

  // Off unless STOKER_DOCTOR names a directory.
  DoctorChannel(std::string kind, int id);
  bool on() const { return !dir_.empty(); }
  // A snapshot is due (kPublishNs since the last one).
  bool due(std::int64_t now_ns) const { return on() && now_ns - published_ns_ >= kPublishNs; }

  // Writes {"kind", "pid", "id", "time_ns", "final", <fields>}: `fields` is
  // the rest of the object's members, comma-separated, without braces.
  // Through a temporary file renamed into place (the doctor never reads
  // half a file); a failure is ignored (the doctor reports a loader that
  // went silent).
  void publish(bool final, const std::string& fields);

 private:
  std::string kind_;
  int id_;
  std::string dir_;
  std::int64_t published_ns_ = 0;
};

}  // namespace stoker::detail
