// Every stat of Loader::stats(), declared once (as the options are in
// options/options.cc): its name as stats() shows it, its type, unit, a one-line
// doc and the part that fills it. The JSON codec below writes stats()'s JSON
// (and through it the Python dict and the doctor's snapshot) from a typed
// Stats, and reads one back, both from this table; the doctor reads a
// child's stats through it, so it reads fields, not strings.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "stoker/stats.h"

namespace stoker::detail {

// What a stat holds. Groups are objects of their own stats (null when the
// part is not in use); rows are lists of such objects.
enum class StatKind { kCounter, kGauge, kSeconds, kBytes, kText, kTextList, kCounts, kGroup, kRows };
const char* stat_kind_name(StatKind k);

// A stat as the table describes it (its accessors stay in stats_table.cc).
struct StatInfo {
  const char* name;
  StatKind kind;
  const char* unit;              // "s", "ms", "bytes", "samples", ...; "" for text
  const char* doc;               // one line
  const char* from;              // the part that fills it
  std::vector<StatInfo> fields;  // a group's or a row's stats
};

// Every stat of Stats, in the order stats() lists them.
const std::vector<StatInfo>& stats_table();

// Stats as stats()'s JSON object (every stat of the table, in its order).
nlohmann::ordered_json stats_to_json(const Stats& s);
// The inverse, lenient as a reader of other versions' snapshots must be: a
// stat missing, or of another type, keeps its default; unknown keys are
// ignored. stats_from_json(stats_to_json(s)) == s.
Stats stats_from_json(const nlohmann::json& j);

}  // namespace stoker::detail
