// The doctor's side of the stats channel: the directory named by
// STOKER_DOCTOR, where every stoker loader (C++) and stoker.profile (Python)
// of the training command replaces its JSON snapshot a few times a second.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "stoker/stats.h"

namespace stoker::doctor {

// One loader or profiled iterable over the run.
struct Series {
  std::string key;   // file name without .json: "loader-<pid>-<n>" / "profile-<pid>-<n>"
  std::string kind;  // "loader" or "profile"
  nlohmann::json last;
  struct Point {
    double t;        // seconds since the command started
    double samples;  // samples delivered so far
    double wait_s;   // consumer wait so far
    double active_s = 0;  // the consumer's time in the loop so far (its waits and steps)
  };
  std::vector<Point> points;

  double samples() const { return points.empty() ? 0 : points.back().samples; }
  // A loader's last stats, typed: read through the stats table's codec
  // (stats/stats_table.h), so a stat missing from the snapshot (another
  // version's) keeps its default. Not for "profile" series (stoker.profile's
  // own stats).
  Stats loader_stats() const;
};

class Channel {
 public:
  // start_ns: the command's start on CLOCK_MONOTONIC (snapshots carry
  // their own time on that clock).
  Channel(std::string dir, std::int64_t start_ns) : dir_(std::move(dir)), start_ns_(start_ns) {}
  // Reads every snapshot that changed since the last call.
  void poll();
  const std::map<std::string, Series>& series() const { return series_; }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  std::int64_t start_ns_;
  std::map<std::string, Series> series_;
};

}  // namespace stoker::doctor
