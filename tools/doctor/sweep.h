// Throughput against thread count and cache mode on a sample of a loader's
// records: `stoker bench --sweep threads` and `stoker doctor --sweep`.
#pragma once

#include <string>
#include <vector>

#include "doctor/probe.h"

namespace stoker::doctor {

struct SweepPoint {
  std::string cache;  // the cache mode's name (stoker/names.h): "mmap", "ram", "decoded"
  int threads = 0;
  double rate = 0;    // samples/s, timed epoch after a warm-up epoch
};

std::vector<SweepPoint> sweep(const LoaderSetup& setup, std::size_t max_records, int max_threads,
                              const std::vector<Cache>& caches);
// A Markdown table: one row per thread count, one column per cache mode.
std::string sweep_table(const std::vector<SweepPoint>& points);
// An SVG chart: samples/s against threads, one line per cache mode.
std::string sweep_chart(const std::vector<SweepPoint>& points, const std::string& title);

}  // namespace stoker::doctor
