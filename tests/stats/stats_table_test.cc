// The stats table and its codec: stats()'s JSON is the table's, every stat
// has a doc, and the round trip through the codec is lossless.
#include "stats/stats_table.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "stoker/loader.h"
#include "test_util.h"

namespace stoker {
namespace {

using detail::StatInfo;
using detail::StatKind;
using nlohmann::json;
using testing::numbered_list;
using testing::TempDir;

// Every field of Stats set to a value unlike its default (and unlike the others).
Stats filled() {
  Stats s;
  s.read_s = 1.25;
  s.decode_s = 2.5e-7;
  s.transform_s = 1.0 / 3.0;  // not exact in 9 digits: the codec keeps every bit
  s.python_s = 0.125;
  s.samples = 101;
  s.bytes_read = (1ull << 53) + 1;  // past a double's integers
  s.batches = 7;
  s.consumer_wait_s = 0.1;
  s.consumer_active_s = 10.5;
  s.time_to_first_batch_s = 0.75;
  s.wall_s = 12.0;
  s.threads = 3;
  s.threads_max = 4;
  s.prefetch = 6;
  s.autotune = "settled";
  s.autotune_log = {"threads 4->3 \"quoted\"", "tab\there"};
  s.batch_buffers = 9;
  s.batch_buffer_bytes = 9ull << 30;
  s.batch_buffers_in_use = 5;
  s.batch_buffers_held = 2;
  s.batch_buffers_held_peak = 3;
  s.ring_depth_max = 8;
  s.cache_mode = "ram";
  s.cache_auto = "ram: the set fits";
  s.cache_hits = 11;
  s.cache_misses = 12;
  s.cache_records = 13;
  s.cache_bytes = 14;
  s.cache_holes_bytes = 15;
  s.cache_budget_bytes = 16;
  s.shard_files_open = 17;
  s.shard_file_opens = 18;
  s.cache_preload = "done";
  s.cache_preload_records = 19;
  s.cache_preload_bytes = 20;
  s.cache_preload_s = 2.125;
  s.cache_rewrite = "rewriting";
  s.cache_rewritten = 21;
  s.cache_rewrite_on_read = 22;
  s.cache_rewrite_settled = 23;
  s.cache_rewrite_bytes_before = 24;
  s.cache_rewrite_bytes_after = 25;
  s.cache_rewrite_cpu_s = 3.5;
  s.corrupt = 26;
  s.corrupt_by_reason = {{"corrupt", 20}, {"io_error", 6}};
  s.corrupt_examples = {"a.tar: member 'x.jpg': JPEG truncated", "b"};
  s.thread_errors = {{"worker", 1}, {"preload", 2}};
  s.boxes_dropped = 27;
  s.boxes_truncated = 28;
  s.mixture = {{"a", 0.25, 100, 40}, {"b", 0.75, 300, 120}};
  s.remote.active = true;
  s.remote.bytes_fetched = 29;
  s.remote.requests = 30;
  s.remote.retries = {{"timeout", 2}, {"reset", 0}};
  s.remote.fetch_wait_s = 4.5;
  s.remote.latency_p50_ms = 12.5;
  s.remote.latency_p99_ms = 80.25;
  s.remote.prefetch_depth = 5;
  s.remote.shard_fetch_s = 1.6;
  s.remote.shard_consume_s = 0.2;
  s.remote.prefetch_log = {"depth 4->5"};
  s.remote.fetched_ahead_bytes = 31;
  s.remote.resident_bytes = 32;
  s.remote.stray_reads = 33;
  s.remote.index = "sidecar+scan";
  s.remote.index_scanned_bytes = 34;
  s.remote.cache_dir_hits = 35;
  s.remote.cache_dir_misses = 36;
  s.remote.cache_dir_bytes_written = 37;
  s.remote.cache_dir_evictions = 38;
  s.remote.cache_dir_bypass = 39;
  s.volume.active = true;
  s.volume.num_samples = 4;
  s.volume.patches = 40;
  s.volume.loads = 10;
  s.volume.bytes_read = 41;
  s.volume.bytes_per_patch = 1.025;
  s.volume.inflate_bytes = 42;
  s.volume.inflate_s = 5.5;
  s.volume.cache_hits = 43;
  s.volume.cache_misses = 44;
  s.volume.cache_entries = 45;
  s.volume.cache_bytes = 46;
  s.volume.cache_budget_bytes = 47;
  s.volume.label_index_builds = 48;
  s.volume.posneg_one_class = 49;
  s.volume.resample_s = 6.5;
  s.memory.active = true;
  s.memory.budget = 1ull << 33;
  s.memory.used = 52;
  s.memory.peak = 53;
  s.memory.over_bytes = 54;
  s.memory.scope = "process";
  s.memory.process_held = 60;
  s.memory.accounts = {{"batch_buffers", 55}, {"remote_shards", 0}, {"sample_cache", 56}, {"volume_cache", 57}};
  s.memory.reserved = {{"batch_buffers", 58}, {"remote_shards", 59}};
  s.per_thread = {{0.5, 0.25, 0.125, 0.0625, 50}, {1.5, 1.25, 1.125, 1.0625, 51}};
  return s;
}

TEST(StatsTableTest, RoundTripIsLossless) {
  const Stats s = filled();
  const Stats back = Stats::from_json(s.to_json());
  EXPECT_TRUE(back == s) << s.to_json() << "\n" << back.to_json();
  EXPECT_EQ(back.to_json(), s.to_json());
  // Each field read back (operator== is defaulted; these show which one differs).
  EXPECT_EQ(back.bytes_read, s.bytes_read);
  EXPECT_EQ(back.transform_s, s.transform_s);
  EXPECT_EQ(back.remote.retries, s.remote.retries);  // zero counts kept
  EXPECT_EQ(back.per_thread, s.per_thread);
  EXPECT_EQ(back.mixture, s.mixture);
  // Defaults: groups not in use are null and read back as such.
  const Stats d;
  EXPECT_TRUE(Stats::from_json(d.to_json()) == d);
  const json j = json::parse(d.to_json());
  EXPECT_TRUE(j["remote"].is_null());
  EXPECT_TRUE(j["volume"].is_null());
  EXPECT_EQ(j["time_to_first_batch_s"], -1.0);
}

// stats()'s keys before the table (the hand-written writer's, in its order):
// the user's dict is unchanged.
TEST(StatsTableTest, KeysAreThoseStatsAlwaysHad) {
  const std::vector<std::string> want = {
      "read_s", "decode_s", "transform_s", "python_s", "samples", "bytes_read", "batches", "consumer_wait_s",
      "consumer_active_s", "time_to_first_batch_s", "wall_s", "threads", "threads_max", "prefetch", "autotune",
      "batch_buffers", "batch_buffer_bytes", "batch_buffers_in_use", "batch_buffers_held", "batch_buffers_held_peak",
      "ring_depth_max", "cache_hits", "cache_misses", "cache_records", "cache_bytes", "cache_holes_bytes",
      "cache_budget_bytes", "shared_cache", "shared_cache_entries", "shared_cache_bytes", "shared_cache_hits",
      "shared_cache_filled", "shard_files_open", "shard_file_opens", "cache_preload", "cache_preload_records",
      "cache_preload_bytes", "cache_preload_s", "cache_mode", "cache_auto", "cache_rewrite", "cache_rewritten",
      "cache_rewrite_on_read", "cache_rewrite_settled", "cache_rewrite_bytes_before", "cache_rewrite_bytes_after",
      "cache_rewrite_cpu_s", "corrupt", "corrupt_by_reason", "thread_errors", "boxes_dropped", "boxes_truncated",
      "corrupt_examples", "per_thread", "mixture", "remote", "volume", "memory", "autotune_log"};
  std::vector<std::string> got;
  const nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(filled().to_json());
  for (const auto& [k, v] : ordered.items()) got.push_back(k);
  EXPECT_EQ(got, want);
  const json j = json::parse(filled().to_json());
  std::set<std::string> remote, volume, thread, mixture;
  for (const auto& [k, v] : j["remote"].items()) remote.insert(k);
  for (const auto& [k, v] : j["volume"].items()) volume.insert(k);
  for (const auto& [k, v] : j["per_thread"][0].items()) thread.insert(k);
  for (const auto& [k, v] : j["mixture"][0].items()) mixture.insert(k);
  EXPECT_EQ(remote, (std::set<std::string>{"bytes_fetched", "requests", "retries", "fetch_wait_s", "latency_p50_ms",
                                           "latency_p99_ms", "prefetch_depth", "shard_fetch_s", "shard_consume_s",
                                           "fetched_ahead_bytes", "prefetch_log", "resident_bytes", "stray_reads",
                                           "index", "index_scanned_bytes", "cache_dir_hits", "cache_dir_misses",
                                           "cache_dir_bytes_written", "cache_dir_evictions", "cache_dir_bypass"}));
  EXPECT_EQ(volume, (std::set<std::string>{"num_samples", "patches", "loads", "bytes_read", "bytes_per_patch",
                                           "inflate_bytes", "inflate_s", "cache_hits", "cache_misses",
                                           "cache_entries", "cache_bytes", "cache_budget_bytes",
                                           "label_index_builds", "posneg_one_class", "resample_s"}));
  std::set<std::string> memory;
  for (const auto& [k, v] : j["memory"].items()) memory.insert(k);
  EXPECT_EQ(memory, (std::set<std::string>{"budget", "scope", "process_held", "used", "peak", "over_bytes", "accounts",
                                           "reserved"}));
  EXPECT_EQ(thread, (std::set<std::string>{"read_s", "decode_s", "transform_s", "python_s", "samples"}));
  EXPECT_EQ(mixture, (std::set<std::string>{"name", "weight_share", "per_epoch", "drawn"}));
}

// Every key of the JSON is a stat of the table with a doc, and the other way
// (the table's Python-only stats aside: the Python Loader adds them).
void check_level(const json& j, const std::vector<StatInfo>& table, const std::string& where) {
  std::set<std::string> keys, names;
  for (const auto& [k, v] : j.items()) keys.insert(k);
  for (const StatInfo& s : table) {
    EXPECT_GT(std::string(s.doc).size(), 8u) << where << s.name << ": no doc";
    EXPECT_FALSE(std::string(s.from).empty()) << where << s.name;
    if (std::string(s.from) == "stoker.Loader (Python)") continue;
    names.insert(s.name);
    if (s.kind == StatKind::kGroup) check_level(j[s.name], s.fields, where + s.name + ".");
    if (s.kind == StatKind::kRows) check_level(j[s.name][0], s.fields, where + s.name + "[0].");
  }
  EXPECT_EQ(keys, names) << where;
}

TEST(StatsTableTest, EveryKeyIsInTheTableWithADoc) {
  check_level(json::parse(filled().to_json()), detail::stats_table(), "");
}

// A reader of another version's snapshot: missing stats keep their
// defaults, values of another type read as the default, unknown keys are
// ignored; a group's object turns it on, null or anything else off.
TEST(StatsTableTest, ReadsLeniently) {
  const Stats s = detail::stats_from_json(json{{"samples", 5},
                                               {"read_s", "x"},
                                               {"bytes_read", 6e7},
                                               {"batches", -3},
                                               {"no_such_stat", 1},
                                               {"autotune_log", 3},
                                               {"remote", {{"fetch_wait_s", "x"}, {"requests", 4}}},
                                               {"volume", 3}});
  EXPECT_EQ(s.samples, 5u);
  EXPECT_EQ(s.read_s, 0);
  EXPECT_EQ(s.bytes_read, 60000000u);
  EXPECT_EQ(s.batches, 0u);
  EXPECT_TRUE(s.autotune_log.empty());
  EXPECT_EQ(s.time_to_first_batch_s, -1);  // missing: Stats' default
  EXPECT_TRUE(s.remote.active);
  EXPECT_EQ(s.remote.requests, 4u);
  EXPECT_EQ(s.remote.fetch_wait_s, 0);
  EXPECT_FALSE(s.volume.active);
  EXPECT_FALSE(detail::stats_from_json(json{{"remote", nullptr}}).remote.active);
  EXPECT_FALSE(detail::stats_from_json(json()).remote.active);
  EXPECT_THROW(Stats::from_json("{\"samples\": "), Error);
  EXPECT_THROW(Stats::from_json("[1]"), Error);
}

// A real loader's stats, round trip.
TEST(StatsTableTest, LoaderStatsRoundTrip) {
  TempDir d;
  LoaderOptions o;
  o.batch_size = 4;
  o.threads = 2;
  o.transforms = {RandomResizedCrop{16, 16}};
  Loader l(numbered_list(d, 10, /*corrupt=*/{3}), o);
  for (const Batch& b : l) (void)b;
  const Stats s = l.stats();
  ASSERT_EQ(s.corrupt, 1u);
  ASSERT_EQ(s.per_thread.size(), 2u);
  EXPECT_TRUE(Stats::from_json(s.to_json()) == s) << s.to_json();
}

}  // namespace
}  // namespace stoker
