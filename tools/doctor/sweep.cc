#include "doctor/sweep.h"

#include <cstdio>
#include <map>

#include "doctor/html.h"
#include "stoker/names.h"

namespace stoker::doctor {

std::vector<SweepPoint> sweep(const LoaderSetup& setup, std::size_t max_records, int max_threads,
                              const std::vector<Cache>& caches) {
  std::vector<SweepPoint> out;
  for (const Cache mode : caches) {
    LoaderSetup s = setup;
    s.options.cache.mode = mode;
    const std::string cache = name_of(mode);
    for (int t = 1; t <= max_threads; ++t) {
      const Cost c = measure(s, max_records, t);
      if (!c.ok) throw std::runtime_error("sweep: cache=" + cache + ", " + std::to_string(t) + " threads: " + c.error);
      out.push_back({cache, t, c.rate});
    }
  }
  return out;
}

std::string sweep_table(const std::vector<SweepPoint>& points) {
  std::map<int, std::map<std::string, double>> rows;
  std::vector<std::string> caches;
  for (const auto& p : points) {
    rows[p.threads][p.cache] = p.rate;
    if (std::find(caches.begin(), caches.end(), p.cache) == caches.end()) caches.push_back(p.cache);
  }
  std::string t = "| threads |";
  for (const auto& c : caches) t += " cache=" + c + " (samples/s) |";
  t += "\n|---:|";
  for (std::size_t i = 0; i < caches.size(); ++i) t += "---:|";
  t += "\n";
  char b[64];
  for (const auto& [threads, by] : rows) {
    t += "| " + std::to_string(threads) + " |";
    for (const auto& c : caches) {
      std::snprintf(b, sizeof(b), " %.0f |", by.count(c) ? by.at(c) : 0.0);
      t += b;
    }
    t += "\n";
  }
  return t;
}

std::string sweep_chart(const std::vector<SweepPoint>& points, const std::string& title) {
  std::vector<ChartSeries> series;
  for (const auto& p : points) {
    auto it = std::find_if(series.begin(), series.end(), [&](const ChartSeries& s) { return s.name == "cache=" + p.cache; });
    if (it == series.end()) {
      series.push_back({"cache=" + p.cache, {}, {}});
      it = series.end() - 1;
    }
    it->x.push_back(p.threads);
    it->y.push_back(p.rate);
  }
  ChartOptions o;
  o.title = title;
  o.x_label = "threads";
  o.y_label = "samples/s";
  o.points = true;
  return svg_line_chart(series, o);
}

}  // namespace stoker::doctor
