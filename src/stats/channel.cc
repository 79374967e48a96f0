#include "stats/channel.h"

#include <unistd.h>

#include <cstdlib>

#include "util/util.h"

namespace stoker::detail {

DoctorChannel::DoctorChannel(std::string kind, int id) : kind_(std::move(kind)), id_(id) {
  if (const char* d = std::getenv("STOKER_DOCTOR"); d && *d) dir_ = d;
}

void DoctorChannel::publish(bool final, const std::string& fields) {
  if (!on()) return;
  const std::int64_t now = now_ns();
  published_ns_ = now;
  const std::string pid = std::to_string(::getpid());
  const std::string j = "{\"kind\":\"" + kind_ + "\",\"pid\":" + pid + ",\"id\":" + std::to_string(id_) +
                        ",\"time_ns\":" + std::to_string(now) + ",\"final\":" + (final ? "true" : "false") + "," +
                        fields + "}\n";
  (void)write_file_atomically(dir_ + "/" + kind_ + "-" + pid + "-" + std::to_string(id_) + ".json", j);
}

}  // namespace stoker::detail
