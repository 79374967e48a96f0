#include "doctor/channel.h"

#include <dirent.h>

#include <fstream>
#include <sstream>

#include "stats/stats_table.h"

namespace stoker::doctor {

void Channel::poll() {
  DIR* d = ::opendir(dir_.c_str());
  if (!d) return;
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n.size() > 5 && n.compare(n.size() - 5, 5, ".json") == 0) names.push_back(n);
  }
  ::closedir(d);
  for (const std::string& n : names) {
    std::ifstream f(dir_ + "/" + n);
    std::stringstream ss;
    ss << f.rdbuf();
    auto j = nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("stats")) continue;
    const std::string key = n.substr(0, n.size() - 5);
    Series& s = series_[key];
    s.key = key;
    s.kind = j.value("kind", "");
    const double t = static_cast<double>(j.value("time_ns", std::int64_t{0}) - start_ns_) * 1e-9;
    if (!s.points.empty() && s.points.back().t >= t) continue;  // unchanged
    s.last = std::move(j);
    if (s.kind == "loader") {
      const Stats st = s.loader_stats();
      s.points.push_back({t, static_cast<double>(st.samples), st.consumer_wait_s, st.consumer_active_s});
    } else {  // stoker.profile's stats
      const auto& st = s.last["stats"];
      const double wait = st.value("wait_s", 0.0);
      s.points.push_back({t, st.value("samples", 0.0), wait, wait + st.value("step_s", 0.0)});
    }
  }
}

Stats Series::loader_stats() const {
  const auto it = last.find("stats");
  return it == last.end() ? Stats{} : detail::stats_from_json(*it);
}

}  // namespace stoker::doctor
