// The doctor's verdict rules and predictions on synthetic runs (fake probes),
// and its HTML pieces. The end-to-end scenarios (real training loops under
// `stoker doctor`) are in tests/python/test_doctor.py.
#include "doctor/verdict.h"

#include <gtest/gtest.h>

#include <cmath>

#include <algorithm>
#include <fstream>
#include <iterator>

#include "doctor/html.h"
#include "memory/memory_budget.h"
#include "stats/stats_table.h"
#include "stoker/stats.h"

namespace stoker::doctor {
namespace {

using nlohmann::json;

// A run of `seconds` on 2 cores where the loop consumed `samples` samples,
// waited `wait` seconds (of `active`), and the loader's workers spent the
// given busy seconds per stage.
RunFacts run(double samples, double active, double wait, double read, double decode, double transform,
             double cores_busy = 1.9) {
  RunFacts f;
  f.cores = 2;
  f.wall_s = active + 1;
  f.mem_available_mib = 16384;
  for (int i = 0; i < 4; ++i) {
    Sample s;
    s.t = i * 0.5;
    s.core_busy = {cores_busy / 2, cores_busy / 2};
    f.samples.push_back(s);
  }
  Series l;
  l.key = "loader-1-0";
  l.kind = "loader";
  l.last = json{{"kind", "loader"},
                {"describe", "image folder 'x'"},
                {"sources", json::array({"x"})},
                {"dataset_size", 1000},
                {"options",
                 {{"batch_size", 64},
                  {"cache", "mmap"},
                  {"threads", 0},
                  {"dtype", "float32"},
                  {"labels", "json:y"},
                  {"decode_scale", "auto"},
                  {"layout", "NHWC"},
                  {"cache_max_side", 320},
                  {"transforms", json::array({json{{"name", "RandomResizedCrop"},
                                                   {"size", {224, 224}},
                                                   {"scale", {0.08, 1.0}},
                                                   {"ratio", {0.75, 1.3333333}}}})}}},
                {"stats",
                 {{"samples", samples},
                  {"read_s", read},
                  {"decode_s", decode},
                  {"transform_s", transform},
                  {"consumer_wait_s", wait},
                  {"consumer_active_s", active},
                  {"wall_s", active},
                  {"threads", 2},
                  {"threads_max", 2},
                  {"bytes_read", samples * 100000},
                  {"autotune", "settled"}}}};
  l.points = {{0, 0, 0}, {active, samples, wait}};
  f.series[l.key] = l;
  return f;
}

// Probes that return fixed costs: per_sample_s of work, a rate (with the
// run's consumer replayed) of 1 / per_sample_s, and the ratio to the loader
// as configured, its quartiles +-2% over 8 rounds (so a prediction's range is
// 15% model error + 2 standard errors).
Cost fixed(double per_sample_s, double base_per_sample_s) {
  Cost c;
  c.ok = true;
  c.records = 192;
  c.per_sample_s = per_sample_s;
  c.rate = 1 / per_sample_s;
  c.rate_lo = 0.98 * c.rate;
  c.rate_hi = 1.02 * c.rate;
  c.ratio = base_per_sample_s / per_sample_s;
  c.ratio_lo = 0.98 * c.ratio;
  c.ratio_hi = 1.02 * c.ratio;
  c.rounds = 8;
  c.seconds = 2;
  c.cache_bytes_per_sample = 300000;
  return c;
}

// Also records the consumer the probes replayed and the changes asked for.
Probes fake(double base, double decoded, double packed, double uint8 = 0, double lossless = 0,
            std::vector<Consumer>* seen = nullptr, std::vector<Change>* asked = nullptr) {
  Probes p;
  p.measure = [=](const LoaderSetup& s, const std::vector<Change>& changes, std::size_t, int) {
    if (seen) seen->push_back(s.consumer);
    if (asked) *asked = changes;
    std::vector<Cost> out = {fixed(base, base)};
    for (Change c : changes) {
      const double t = c == Change::kDecoded     ? decoded
                       : c == Change::kUInt8     ? uint8
                       : c == Change::kPacked256 ? packed
                       : c == Change::kLossless  ? (lossless > 0 ? lossless : base)
                                                 : base;
      out.push_back(fixed(t, base));
    }
    return out;
  };
  return p;
}

// The half-width of a range: 15% + 2 x (4% IQR / 1.35 / sqrt(8 rounds)).
const double kHalfWidth = 0.15 + 2 * (0.04 / 1.35 / std::sqrt(8.0));

const Suggestion* find(const Verdict& v, const std::string& text) {
  for (const auto& s : v.suggestions) {
    if (s.action.find(text) != std::string::npos) return &s;
  }
  return nullptr;
}

TEST(DoctorTest, ShortWaitIsComputeBound) {
  Verdict v = diagnose(run(1000, 10, 0.5, 0.1, 2, 0.5), fake(1e-3, 1e-4, 5e-4));
  EXPECT_EQ(v.kind, Bottleneck::kCompute);
  EXPECT_NEAR(v.wait_share, 0.05, 1e-9);
  EXPECT_NEAR(v.rate, 100, 1e-9);
  ASSERT_FALSE(v.suggestions.empty());
  EXPECT_EQ(v.suggestions[0].predicted_rate, 0);  // a faster model step: not predicted
}

TEST(DoctorTest, DecodeBoundPredictsFromTheProbeRatio) {
  // 1000 samples in 10 s, waiting 9 s: 100 samples/s and 1 ms of step per
  // sample ((10 - 9) s / 1000); the workers' time is mostly decoding.
  std::vector<Consumer> seen;
  std::vector<Change> asked;
  Verdict v = diagnose(run(1000, 10, 9, 0.5, 17, 1.5),
                       fake(/*base=*/10e-3, /*decoded=*/1e-3, /*packed=*/2.5e-3, 0, 0, &seen, &asked));
  EXPECT_EQ(asked, (std::vector<Change>{Change::kDecoded, Change::kPacked256, Change::kLossless}));
  EXPECT_EQ(v.kind, Bottleneck::kDecode);
  const Suggestion* d = find(v, "cache=\"decoded\"");
  const Suggestion* p = find(v, "--max-side 256");
  ASSERT_TRUE(d && p);
  // The mean of the run's rate times the change's ratio to the loader as
  // configured, and the changed probe's own rate (equal here).
  EXPECT_NEAR(p->predicted_rate, 100 * 4.0, 1e-6);
  EXPECT_NEAR(d->predicted_rate, 100 * 10.0, 1e-6);
  EXPECT_NEAR(d->gain, 10.0, 1e-9);
  EXPECT_NEAR(d->predicted_lo, 1000 * (1 - kHalfWidth), 1e-6);
  EXPECT_NEAR(d->predicted_hi, 1000 * (1 + kHalfWidth), 1e-6);
  EXPECT_LT(kHalfWidth, 0.25);
  EXPECT_EQ(&v.suggestions[0], d);  // ranked by gain
  // One interleaved probe replayed the run's consumer: 1 ms of step per
  // sample, as CPU work (no GPU sampled), over epochs of the run's length.
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_NEAR(seen[0].step_per_sample_s, 1e-3, 1e-12);
  EXPECT_TRUE(seen[0].busy);
  EXPECT_EQ(seen[0].epoch_samples, 1000);
  EXPECT_GT(v.probe_s, 0);
}

TEST(DoctorTest, PartialFitBlendsTheCachedAndUncachedTime) {
  // 1,000,000 samples x 300 kB = 286 GB: half the available 16 GiB holds 2.86% of it.
  RunFacts f = run(1000, 10, 9, 0.5, 17, 1.5);
  f.series["loader-1-0"].last["dataset_size"] = 1000000;
  Verdict v = diagnose(f, fake(10e-3, 1e-3, 2.5e-3));
  const Suggestion* d = find(v, "cache=\"decoded\"");
  ASSERT_TRUE(d);
  const double fit = 0.5 * 16384 / (300000.0 * 1e6 / (1 << 20));
  EXPECT_NEAR(d->predicted_rate, 1 / (fit * 1e-3 + (1 - fit) * 10e-3), 1e-6);
  EXPECT_NE(d->action.find("fits in part"), std::string::npos);
}

TEST(DoctorTest, LosslessPackSuggestedOnlyWhereItHelps) {
  // Decode-bound as above; --lossless measured at 7 ms instead of 10.
  Verdict v = diagnose(run(1000, 10, 9, 0.5, 17, 1.5), fake(10e-3, 1e-3, 2.5e-3, 0, /*lossless=*/7e-3));
  const Suggestion* l = find(v, "--lossless");
  ASSERT_TRUE(l);
  EXPECT_NEAR(l->predicted_rate, 100 * 10.0 / 7.0, 1e-6);
  // Measured no faster (PNGs, say), or within the probes' spread: not suggested.
  Verdict w = diagnose(run(1000, 10, 9, 0.5, 17, 1.5), fake(10e-3, 1e-3, 2.5e-3));
  EXPECT_EQ(find(w, "--lossless"), nullptr);
  Verdict x = diagnose(run(1000, 10, 9, 0.5, 17, 1.5), fake(10e-3, 1e-3, 2.5e-3, 0, /*lossless=*/9.7e-3));
  EXPECT_EQ(find(x, "--lossless"), nullptr);
}

TEST(DoctorTest, TransformBoundSuggestsUint8Output) {
  Verdict v = diagnose(run(1000, 10, 8, 0.2, 3, 14), fake(10e-3, 8e-3, 9e-3, /*uint8=*/5e-3));
  EXPECT_EQ(v.kind, Bottleneck::kTransform);
  const Suggestion* u = find(v, "uint8");
  ASSERT_TRUE(u);
  EXPECT_GT(u->gain, 1.0);
  EXPECT_EQ(find(v, "--max-side"), nullptr);  // packing does not help transforms
}

TEST(DoctorTest, PythonOnTheWorkersDominatingSaysSoAndPredictsNothing) {
  RunFacts f = run(1000, 10, 8, 0.2, 3, 2);
  f.series.begin()->second.last["stats"]["python_s"] = 12.0;
  Verdict v = diagnose(f, fake(10e-3, 8e-3, 9e-3, 5e-3));
  EXPECT_EQ(v.kind, Bottleneck::kTransform);
  const Suggestion* s = find(v, "runs in Python");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->predicted_rate, 0);
  EXPECT_EQ(find(v, "uint8"), nullptr);  // no probe of a pipeline it cannot run
  bool evidence = false;
  for (const auto& e : v.evidence) evidence = evidence || e.find("Python on the workers") != std::string::npos;
  EXPECT_TRUE(evidence);
}

TEST(DoctorTest, ReadsDominatingIsStorageBound) {
  Verdict v = diagnose(run(1000, 10, 9.5, 15, 2, 1, /*cores_busy=*/0.3), fake(10e-3, 1e-3, 2e-3));
  EXPECT_EQ(v.kind, Bottleneck::kStorage);
  EXPECT_NE(find(v, "cache=\"ram\""), nullptr);
  EXPECT_NE(find(v, "Pack the records"), nullptr);
  // The probe reads from the page cache, faster than the run's storage: a
  // change that removes reads is predicted at the probe's own rate.
  const Suggestion* d = find(v, "cache=\"decoded\"");
  ASSERT_TRUE(d);
  EXPECT_NEAR(d->predicted_rate, 1000, 1e-6);
}

TEST(DoctorTest, IdleCoresSuggestMoreThreads) {
  RunFacts f = run(1000, 10, 9, 0.5, 8, 1, /*cores_busy=*/0.9);
  f.series["loader-1-0"].last["stats"]["threads"] = 1;
  f.series["loader-1-0"].last["options"]["threads"] = 1;
  Verdict v = diagnose(f, Probes{}, /*probe=*/false);
  const Suggestion* t = find(v, "threads=2");
  ASSERT_TRUE(t) << (v.suggestions.empty() ? "" : v.suggestions[0].action);
  // 10 ms -> 5 ms of input per sample, but (9.5 + 1) / 2 cores = 5.25 ms of CPU.
  EXPECT_NEAR(t->gain, 1 / 5.25e-3 / 100, 1e-6);
}

TEST(DoctorTest, HostToDeviceCopyDominatingTheWait) {
  RunFacts f = run(1000, 10, 1, 0.1, 1.5, 0.4);
  Series p;
  p.key = "profile-1-0";
  p.kind = "profile";
  p.last = json{{"kind", "profile"},
                {"info", {{"stoker_loader", true}}},
                {"stats", {{"name", "Loader"}, {"samples", 1000}, {"wait_s", 6.0}, {"step_s", 4.0}, {"h2d_s", 4.5},
                           {"h2d_bytes", 6e8}}}};
  p.points = {{0, 0, 0}, {10, 1000, 6}};
  f.series[p.key] = p;
  Verdict v = diagnose(f, Probes{}, false);
  EXPECT_EQ(v.kind, Bottleneck::kHostToDevice);
  ASSERT_NE(find(v, "uint8"), nullptr);
  // 10 ms per sample, of which 4.5 ms copying; uint8 saves three quarters of it.
  const Suggestion* u = find(v, "uint8");
  EXPECT_NEAR(u->predicted_rate, 1 / (10e-3 - 0.75 * 4.5e-3), 1e-6);
  // No probe ran: the range is the model's error and the run's own noise (too few snapshots here to measure it).
  EXPECT_NEAR(u->predicted_lo, u->predicted_rate * (1 - 0.25), 1e-6);
  EXPECT_NEAR(u->predicted_hi, u->predicted_rate * (1 + 0.25), 1e-6);
}

// Sampled runs without any report: 20 samples of the given means.
RunFacts sampled(double main_cpu, char main_state, double root_cpu, double tree_cpu, double iowait = 0,
                 double cores_busy = 1.9) {
  RunFacts f = run(1, 1, 0, 0, 0, 0);
  f.series.clear();
  f.samples.clear();
  for (int i = 0; i < 20; ++i) {
    Sample s;
    s.t = i * 0.5;
    s.core_busy = {cores_busy / 2, cores_busy / 2};
    s.main_thread_cpu = main_cpu;
    s.main_thread_state = main_state;
    s.root_cpu = root_cpu;
    s.tree_cpu = tree_cpu;
    s.iowait = iowait;
    f.samples.push_back(s);
  }
  return f;
}

TEST(DoctorTest, NothingReportedIsInferredFromSampling) {
  // Main thread mostly asleep while child processes (DataLoader workers) use 1.3 cores: waiting for input.
  Verdict in = diagnose(sampled(0.1, 'S', 0.15, 1.45));
  EXPECT_TRUE(in.inferred);
  EXPECT_EQ(in.kind, Bottleneck::kDecode);
  // Main thread busy (the step): compute-bound.
  Verdict busy = diagnose(sampled(0.95, 'R', 1.0, 1.4));
  EXPECT_TRUE(busy.inferred);
  EXPECT_EQ(busy.kind, Bottleneck::kCompute);
  // Main thread in disk wait, cores idle: storage.
  Verdict disk = diagnose(sampled(0.05, 'D', 0.1, 0.1, /*iowait=*/0.3, /*cores_busy=*/0.3));
  EXPECT_EQ(disk.kind, Bottleneck::kStorage);
  // Nothing ran: no data, and how to get it.
  Verdict none = diagnose(sampled(0, 'S', 0, 0, 0, 0.1));
  EXPECT_EQ(none.kind, Bottleneck::kNoData);
  ASSERT_FALSE(none.notes.empty());
  EXPECT_NE(none.notes.back().find("stoker.profile"), std::string::npos);
  EXPECT_NE(none.notes.back().find("sitecustomize"), std::string::npos);
}

TEST(DoctorTest, ChartsAreSvgWithEscapedText) {
  ChartOptions o;
  o.title = "a < b & c";
  std::string svg = svg_line_chart({{"s", {0, 1, 2}, {1, 3, 2}}}, o);
  EXPECT_NE(svg.find("<polyline"), std::string::npos);
  EXPECT_NE(svg.find("a &lt; b &amp; c"), std::string::npos);
  std::string bars = svg_stacked_bars({"l"}, {"read", "decode"}, {{1, 2}}, "t", "ms");
  EXPECT_EQ(std::count(bars.begin(), bars.end(), '<') > 5, true);
  EXPECT_NE(html_page("t", svg).find("<!DOCTYPE html>"), std::string::npos);
}

}  // namespace
}  // namespace stoker::doctor

namespace stoker::doctor {
namespace {
// The probes rebuild the loader the user ran: every option comes through the channel.
TEST(DoctorTest, SetupCarriesEveryOptionOfTheSnapshot) {
  const RunFacts f = run(1000, 10, 9, 0.5, 17, 1.5);
  const LoaderSetup s = setup_from_snapshot(f.series.at("loader-1-0").last);
  EXPECT_EQ(s.sources, std::vector<std::string>{"x"});
  EXPECT_EQ(s.options.labels, "json:y");
  EXPECT_EQ(s.options.decode_scale, DecodeScale::kAuto);
  EXPECT_EQ(s.options.layout, Layout::kNHWC);
  EXPECT_EQ(s.options.cache.max_side, 320);
  ASSERT_EQ(s.options.transforms.size(), 1u);
  EXPECT_EQ(std::get<RandomResizedCrop>(s.options.transforms[0]).ratio[1], 1.3333333);
}

// Options -> the loader's snapshot -> the probe's options: equal, a schema of
// named fields and every other option included.
TEST(DoctorTest, SnapshotRoundTripsEveryOptionAndTheSchema) {
  LoaderOptions o;
  o.batch_size = 3;
  o.max_consecutive_corrupt = 5;
  o.labels = "json:t";
  o.cache.mode = Cache::kDecoded;
  o.cache.max_side = 200;
  o.transforms = {RandomResizedCrop{64, 48}, RandomVerticalFlip{0.25}};
  o.fields = {ImageField("img", "jpeg"), MaskField("seg", 255), BoxesField("b", 9, BoxFormat::kXYWH, "json:boxes"),
              LabelField("y"), TensorField("depth", "depth.npy")};
  const json snap = {{"kind", "loader"}, {"sources", json::array({"a.csv"})}, {"options", json::parse(options_to_json(o))}};
  const LoaderSetup s = setup_from_snapshot(snap);
  EXPECT_EQ(options_to_json(s.options), options_to_json(o));
  ASSERT_EQ(s.options.fields.size(), 5u);
  EXPECT_EQ(s.options.fields[2].member, "json:boxes");
  EXPECT_EQ(s.options.fields[2].format, BoxFormat::kXYWH);
}
}  // namespace
}  // namespace stoker::doctor

namespace stoker::doctor {
namespace {
// The loop's start-up (the first epoch here: workers starting, a cache
// filling) is left out of the rate, the wait share and the step the
// predictions start from.
TEST(DoctorTest, RateIsTheSteadyStateAfterTheFirstEpoch) {
  RunFacts f = run(5000, 15, 13.9, 0.5, 17, 1.5);
  // 1000 samples (one epoch) in the first 5 s, waiting 4.9 s; then 4000 in
  // 10 s, waiting 9 s: 400 samples/s, 90% waiting, 0.25 ms of step per sample.
  f.series["loader-1-0"].points = {{0.0, 0, 0, 0}, {2.5, 400, 2.45, 2.5}, {5.0, 1000, 4.9, 5.0},
                                   {10.0, 3000, 9.4, 10.0}, {15.0, 5000, 13.9, 15.0}};
  Verdict v = diagnose(f, fake(10e-3, 1e-3, 2.5e-3), /*probe=*/false);
  EXPECT_NEAR(v.rate, 400, 1e-9);
  EXPECT_NEAR(v.wait_share, 0.9, 1e-9);
  EXPECT_NEAR(v.step_per_sample_s, 0.25e-3, 1e-12);
  ASSERT_FALSE(v.evidence.empty());
  EXPECT_NE(v.evidence[0].find("its 10.0 s after the first epoch (5.0 s of start-up left out)"), std::string::npos)
      << v.evidence[0];
}

// An epoch longer than half the loop: its first fifth is the start-up.
TEST(DoctorTest, RateLeavesOutTheFirstFifthWhenNoEpochEnded) {
  RunFacts f = run(1100, 10, 9, 0.5, 17, 1.5);
  f.series["loader-1-0"].last["dataset_size"] = 1000000;
  // 100 samples in the first 2 s (of 10), then 1000 in 8 s, waiting 7.2 s.
  f.series["loader-1-0"].points = {{0.0, 0, 0, 0}, {2.0, 100, 1.8, 2.0}, {6.0, 600, 5.4, 6.0}, {10.0, 1100, 9.0, 10.0}};
  Verdict v = diagnose(f, fake(10e-3, 1e-3, 2.5e-3), /*probe=*/false);
  EXPECT_NEAR(v.rate, 125, 1e-9);
  EXPECT_NEAR(v.wait_share, 0.9, 1e-9);
  EXPECT_NE(v.evidence[0].find("after the first fifth of the loop (2.0 s of start-up left out)"), std::string::npos)
      << v.evidence[0];
}

// Too short a timeline to split: the whole loop.
TEST(DoctorTest, RateIsTheWholeLoopWhenTooShortToSplit) {
  RunFacts f = run(1000, 1.2, 1.0, 0.5, 17, 1.5);
  f.series["loader-1-0"].points = {{0.0, 0, 0, 0}, {0.6, 400, 0.5, 0.6}, {1.2, 1000, 1.0, 1.2}};
  Verdict v = diagnose(f, fake(10e-3, 1e-3, 2.5e-3), /*probe=*/false);
  EXPECT_NEAR(v.rate, 1000 / 1.2, 1e-9);
  EXPECT_NE(v.evidence[0].find("of its 1.2 s ("), std::string::npos) << v.evidence[0];
}

// The probe's sample is spread over the whole set (every class of a folder
// sorted by class), never its first records only.
TEST(DoctorTest, ProbeSampleSpreadsOverTheSet) {
  const auto s = sample_records(256, 192);
  ASSERT_EQ(s.size(), 192u);
  EXPECT_EQ(s.front(), 0u);
  EXPECT_GE(s.back(), 254u);
  EXPECT_TRUE(std::is_sorted(s.begin(), s.end()));
  EXPECT_EQ(std::adjacent_find(s.begin(), s.end()), s.end());  // distinct
  EXPECT_EQ(std::count_if(s.begin(), s.end(), [](std::size_t i) { return i < 128; }), 96);
  EXPECT_EQ(sample_records(10, 192), (std::vector<std::size_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  const auto big = sample_records(1000000, 192);
  ASSERT_EQ(big.size(), 192u);
  EXPECT_GE(big.back(), 1000000u - 1000000u / 192 - 1);  // within one step of the end
  EXPECT_TRUE(sample_records(0, 192).empty());
}
}  // namespace
}  // namespace stoker::doctor

namespace stoker::doctor {
namespace {
// A loader's "remote" stats (Stats::Remote as stats.cc writes it): 60 MB
// fetched in 40 requests, the given fetch wait, 500 ms p50 time to first byte,
// and the prefetcher's depth (a shard takes 1.6 s to fetch, 0.2 s to consume).
json remote_stats(double fetch_wait_s, int depth = 8) {
  return json{{"bytes_fetched", 60000000},
              {"requests", 40},
              {"retries", {{"timeout", 2}, {"connect", 0}, {"reset", 0}, {"http_429", 0}, {"http_5xx", 3}, {"pipe", 0}}},
              {"fetch_wait_s", fetch_wait_s},
              {"latency_p50_ms", 500},
              {"latency_p99_ms", 1900},
              {"prefetch_depth", depth},
              {"shard_fetch_s", 1.6},
              {"shard_consume_s", 0.2},
              {"prefetch_log", json::array({"prefetch depth 2 -> " + std::to_string(depth) +
                                            ": a shard takes 1.600 s to fetch, 0.200 s to consume"})},
              {"resident_bytes", 12000000},
              {"stray_reads", 0},
              {"index", "sidecar"},
              {"index_scanned_bytes", 0},
              {"cache_dir_hits", 0},
              {"cache_dir_misses", 0},
              {"cache_dir_bytes_written", 0},
              {"cache_dir_evictions", 0},
              {"cache_dir_bypass", 0}};
}

bool has(const std::vector<std::string>& lines, const std::string& text) {
  return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) { return l.find(text) != std::string::npos; });
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

// Reads 15 s of the workers' 18, of which 12 s waiting for remote bytes (at
// least half the read time): storage-bound, and the storage is remote.
TEST(DoctorTest, RemoteFetchWaitIsRemoteStorageBound) {
  RunFacts f = run(1000, 10, 9.5, 15, 2, 1, /*cores_busy=*/0.3);
  auto& snap = f.series["loader-1-0"].last;
  snap["describe"] = "10 tar shards ('train-000000.tar', ...; 1000 records)";
  snap["options"]["remote_connections"] = 8;
  snap["stats"]["remote"] = remote_stats(12);
  Verdict v = diagnose(f, fake(10e-3, 1e-3, 2e-3));
  EXPECT_EQ(v.kind, Bottleneck::kRemoteStorage);
  EXPECT_STREQ(bottleneck_name(v.kind), "input-bound on storage (remote)");
  // The numbers: 60 MB over the loader's 10 s, latency, retries by cause, depth against its limit.
  const std::string e = joined(v.evidence);
  EXPECT_TRUE(has(v.evidence, "6.0 MB/s fetched (60.0 MB in 40 requests")) << e;
  EXPECT_TRUE(has(v.evidence, "p50 500 ms, p99 1900 ms")) << e;
  EXPECT_TRUE(has(v.evidence, "retries: 5 (http_5xx 3, timeout 2)")) << e;
  EXPECT_TRUE(has(v.evidence, "waited 12.0 s for shard bytes not yet arrived: 80% of their read time")) << e;
  EXPECT_TRUE(has(v.evidence, "prefetch depth 8 shards ahead with 8 connections (at the connections' limit")) << e;
  EXPECT_TRUE(has(v.evidence, "shard indexes from: sidecar")) << e;
  EXPECT_FALSE(has(v.evidence, "cache_dir:")) << e;  // not in use
  // cache_dir: the wait (12 of the workers' 18 s) gone from the second epoch:
  // 10 ms per sample -> 3.33 ms, the CPU left (6 ms per sample on 2 cores
  // with the 0.5 ms step) below it: 300 samples/s.
  const Suggestion* c = find(v, "cache_dir=");
  ASSERT_TRUE(c);
  EXPECT_NEAR(c->predicted_rate, 300, 1e-6);
  EXPECT_GT(c->predicted_lo, 0);
  EXPECT_NE(c->action.find("about 100 MB"), std::string::npos) << c->action;  // 100 kB x 1000 samples
  // Depth 8 = 8 connections: twice the connections halve the wait: 10 ms -> 6.67 ms.
  const Suggestion* k = find(v, "remote_connections=16 (now 8)");
  ASSERT_TRUE(k);
  EXPECT_NEAR(k->predicted_rate, 150, 1e-6);
  // 500 ms before the first byte of a 1.6 s fetch (31%): larger shards, not predicted.
  const Suggestion* s = find(v, "Larger shards (now about 10 MB each)");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->predicted_rate, 0);
  EXPECT_NE(s->action.find("500 ms, is 31% of a shard's 1.60 s fetch"), std::string::npos) << s->action;
  // Not the local storage's suggestions: the prefetcher fetches the plan's
  // shards whether cached in RAM or not; more workers would wait the same.
  EXPECT_EQ(find(v, "cache=\"ram\""), nullptr);
  EXPECT_EQ(find(v, "Pack the records"), nullptr);
  EXPECT_EQ(find(v, "threads="), nullptr);
  EXPECT_TRUE(has(v.notes, "every shard is still fetched each epoch")) << joined(v.notes);
  // cache_dir predicted above the run's rate; ranked by gain.
  EXPECT_GT(c->gain, 1);
  EXPECT_GT(c->gain, k->gain);
}

// Connections are suggested only when the depth reached them; larger shards
// only when latency is a large part of a fetch; with cache_dir set and
// evicting, a larger cache_limit instead of cache_dir.
TEST(DoctorTest, RemoteSuggestionsFollowTheirConditions) {
  RunFacts f = run(1000, 10, 9.5, 15, 2, 1, /*cores_busy=*/0.3);
  auto& snap = f.series["loader-1-0"].last;
  snap["options"]["remote_connections"] = 8;
  snap["options"]["cache_dir"] = "/local/cache";
  snap["options"]["cache_limit"] = 50000000;
  json r = remote_stats(12, /*depth=*/4);
  r["latency_p50_ms"] = 20;
  r["cache_dir_misses"] = 30;
  r["cache_dir_bytes_written"] = 60000000;
  r["cache_dir_evictions"] = 12;
  snap["stats"]["remote"] = r;
  Verdict v = diagnose(f, Probes{}, /*probe=*/false);
  EXPECT_EQ(v.kind, Bottleneck::kRemoteStorage);
  EXPECT_EQ(find(v, "remote_connections="), nullptr);
  EXPECT_EQ(find(v, "Larger shards"), nullptr);
  EXPECT_EQ(find(v, "cache_dir=\""), nullptr);
  const Suggestion* l = find(v, "A larger cache_limit (now 50 MB)");
  ASSERT_TRUE(l);
  EXPECT_NE(l->action.find("12 shards were evicted"), std::string::npos) << l->action;
  EXPECT_TRUE(has(v.evidence, "cache_dir: 0 shards found there, 30 fetched into it (60.0 MB written), 12 evicted"))
      << joined(v.evidence);
  EXPECT_TRUE(has(v.evidence, "(below the connections' limit)")) << joined(v.evidence);
}

// Local data ("remote": null, as stats.cc writes it): the local storage verdict as before.
TEST(DoctorTest, LocalStorageBoundWithRemoteNullIsUnchanged) {
  RunFacts f = run(1000, 10, 9.5, 15, 2, 1, /*cores_busy=*/0.3);
  f.series["loader-1-0"].last["stats"]["remote"] = nullptr;
  Verdict v = diagnose(f, fake(10e-3, 1e-3, 2e-3));
  EXPECT_EQ(v.kind, Bottleneck::kStorage);
  EXPECT_STREQ(bottleneck_name(v.kind), "input-bound on storage");
  EXPECT_NE(find(v, "cache=\"ram\""), nullptr);
  EXPECT_NE(find(v, "Pack the records"), nullptr);
  EXPECT_EQ(find(v, "cache_dir="), nullptr);
  EXPECT_FALSE(has(v.evidence, "remote shards")) << joined(v.evidence);
  // The same as a snapshot from before remote shards (no key).
  Verdict old = diagnose(run(1000, 10, 9.5, 15, 2, 1, 0.3), fake(10e-3, 1e-3, 2e-3));
  EXPECT_EQ(old.kind, Bottleneck::kStorage);
  EXPECT_EQ(old.evidence, v.evidence);
  ASSERT_EQ(old.suggestions.size(), v.suggestions.size());
  for (std::size_t i = 0; i < v.suggestions.size(); ++i) {
    EXPECT_EQ(old.suggestions[i].action, v.suggestions[i].action);
    EXPECT_EQ(old.suggestions[i].predicted_rate, v.suggestions[i].predicted_rate);
  }
}

// Remote shards, but the workers were decoding (reads 0.5 s of 19): decode-bound;
// and reads dominating with little of them waiting on fetches: local storage.
TEST(DoctorTest, RemoteWithLowFetchWaitIsNotRemoteBound) {
  RunFacts f = run(1000, 10, 9, 0.5, 17, 1.5);
  f.series["loader-1-0"].last["stats"]["remote"] = remote_stats(0.3);
  Verdict v = diagnose(f, fake(10e-3, 1e-3, 2.5e-3));
  EXPECT_EQ(v.kind, Bottleneck::kDecode);
  EXPECT_EQ(find(v, "cache_dir="), nullptr);
  EXPECT_EQ(find(v, "remote_connections="), nullptr);
  EXPECT_NE(find(v, "cache=\"decoded\""), nullptr);
  EXPECT_TRUE(has(v.evidence, "remote shards: 6.0 MB/s fetched")) << joined(v.evidence);  // facts still shown

  RunFacts g = run(1000, 10, 9.5, 15, 2, 1, /*cores_busy=*/0.3);
  g.series["loader-1-0"].last["stats"]["remote"] = remote_stats(7.4);  // under half of the 15 s of reads
  Verdict w = diagnose(g, Probes{}, /*probe=*/false);
  EXPECT_EQ(w.kind, Bottleneck::kStorage);
  EXPECT_EQ(find(w, "cache_dir="), nullptr);
}

// The doctor reads a loader's "remote" through the stats codec (stats/stats_table.h).
Stats::Remote remote_facts(const json& stats) { return detail::stats_from_json(stats).remote; }
Stats::Volume volume_facts(const json& stats) { return detail::stats_from_json(stats).volume; }

TEST(DoctorTest, RemoteFactsParse) {
  EXPECT_FALSE(remote_facts(json{{"samples", 1}, {"remote", nullptr}}).active);
  EXPECT_FALSE(remote_facts(json{{"samples", 1}}).active);
  EXPECT_FALSE(remote_facts(json{{"remote", "?"}}).active);
  EXPECT_FALSE(remote_facts(json()).active);
  const Stats::Remote r = remote_facts(json{{"remote", remote_stats(2.5, 6)}});
  EXPECT_TRUE(r.active);
  EXPECT_EQ(r.bytes_fetched, 6e7);
  EXPECT_EQ(r.fetch_wait_s, 2.5);
  EXPECT_EQ(r.prefetch_depth, 6);
  std::map<std::string, std::uint64_t> nonzero;
  for (const auto& [cause, n] : r.retries) {
    if (n) nonzero[cause] = n;
  }
  EXPECT_EQ(nonzero, (std::map<std::string, std::uint64_t>{{"http_5xx", 3}, {"timeout", 2}}));  // non-zero causes
  EXPECT_NEAR(r.shard_fetch_s, 1.6, 1e-12);
  EXPECT_NEAR(r.shard_consume_s, 0.2, 1e-12);
  EXPECT_EQ(r.index, "sidecar");
  // Fields missing or of another type read as 0.
  const Stats::Remote odd = remote_facts(json{{"remote", {{"fetch_wait_s", "x"}, {"prefetch_log", 3}}}});
  EXPECT_TRUE(odd.active);
  EXPECT_EQ(odd.fetch_wait_s, 0);
  EXPECT_TRUE(odd.prefetch_log.empty());
}

// The memory budget as a loader writes it (MemoryBudget::add_stats, then
// Stats::to_json): the verdict shows the budget, then a line per account with
// its bytes and share, the reservation beside its account.
TEST(DoctorTest, MemoryAccountsAreShownWithTheirShareOfTheBudget) {
  detail::MemoryBudget b(/*limit=*/1000 << 20);
  b.charge_required(detail::MemoryAccount::kBatchBuffers, 100 << 20);
  (void)b.reserve(detail::MemoryAccount::kRemoteShards, 300 << 20);
  ASSERT_TRUE(b.try_charge(detail::MemoryAccount::kRemoteShards, 200 << 20));
  ASSERT_TRUE(b.try_charge(detail::MemoryAccount::kSampleCache, 250 << 20));
  Stats st;
  b.add_stats(&st);
  const json stats = json::parse(st.to_json());
  // Through the codec, as the doctor reads a loader's snapshot.
  const Stats::Memory m = detail::stats_from_json(stats).memory;
  ASSERT_TRUE(m.active);
  EXPECT_EQ(m.budget, 1000u << 20);
  EXPECT_EQ(m.used, 550u << 20);
  ASSERT_EQ(m.accounts.size(), 5u);
  const std::vector<std::string> lines = memory_lines(m);
  EXPECT_TRUE(has(lines, "memory budget 1000 MiB (memory_budget): its accounts hold 550 MiB now (55%)"))
      << joined(lines);
  EXPECT_TRUE(has(lines, "memory account batch_buffers: 100.0 MiB (10% of the budget)")) << joined(lines);
  EXPECT_TRUE(has(lines, "memory account remote_shards: 200.0 MiB (20% of the budget), 300.0 MiB reserved (30%)"))
      << joined(lines);
  EXPECT_TRUE(has(lines, "memory account sample_cache: 250.0 MiB (25% of the budget)")) << joined(lines);
  EXPECT_TRUE(has(lines, "memory account volume_cache: 0.0 MiB (0% of the budget)")) << joined(lines);
  EXPECT_TRUE(has(lines, "memory account decode_scratch: 0.0 MiB (0% of the budget)")) << joined(lines);
  {  // a loader left at memory_budget=0: the process's budget, and what its loaders hold together
    auto process = std::make_shared<detail::ProcessMemory>(1000 << 20);
    detail::MemoryBudget mine(1000 << 20, process), other(1000 << 20, process);
    ASSERT_TRUE(mine.try_charge(detail::MemoryAccount::kSampleCache, 100 << 20));
    ASSERT_TRUE(other.try_charge(detail::MemoryAccount::kSampleCache, 300 << 20));
    Stats sp;
    mine.add_stats(&sp);
    const std::vector<std::string> shared = memory_lines(detail::stats_from_json(json::parse(sp.to_json())).memory);
    EXPECT_TRUE(has(shared, "memory budget 1000 MiB (the process's, shared by its loaders left at memory_budget=0: "
                            "together they hold 400 MiB): its accounts hold 100 MiB now (10%)"))
        << joined(shared);
  }

  RunFacts f = run(1000, 10, 9.5, 15, 2, 1);
  f.series["loader-1-0"].last["stats"]["memory"] = stats["memory"];
  const Verdict v = diagnose(f, Probes{}, /*probe=*/false);
  EXPECT_TRUE(has(v.evidence, "memory account sample_cache: 250.0 MiB (25% of the budget)"))
      << joined(v.evidence);

  EXPECT_FALSE(detail::stats_from_json(json{{"memory", nullptr}}).memory.active);  // a loader from before the budget
  EXPECT_FALSE(detail::stats_from_json(json{{"samples", 1}}).memory.active);
}

// A rank on a node-shared cache (stats' shared_cache): the doctor reports the
// node's cache once, with the segment's bytes (not a rank's share, nor their
// sum); a cache of the process's own gives no such line.
TEST(DoctorTest, NodeSharedCacheIsReportedOnceForTheNode) {
  Stats st;
  st.shared_cache = "shared: /dev/shm/stoker-ab-cd.seg (attached; node-shared: 4 ranks on this node, LOCAL_WORLD_SIZE=4)";
  st.shared_cache_entries = 2000;
  st.shared_cache_bytes = std::uint64_t{160} << 20;
  st.shared_cache_filled = 500;
  st.shared_cache_hits = 1500;
  const json stats = json::parse(st.to_json());
  const std::string want =
      "node memory: the node-shared cache /dev/shm/stoker-ab-cd.seg holds 160.0 MiB for the node's 2000 records, "
      "counted once whatever the number of ranks (a rank's sample_cache account holds what it stored: this one 500 "
      "records; it found 1500 samples there)";
  EXPECT_EQ(shared_cache_line(detail::stats_from_json(stats)), want);
  RunFacts f = run(1000, 10, 9.5, 15, 2, 1);
  for (const char* k : {"shared_cache", "shared_cache_entries", "shared_cache_bytes", "shared_cache_filled",
                        "shared_cache_hits"}) {
    f.series["loader-1-0"].last["stats"][k] = stats[k];
  }
  const Verdict v = diagnose(f, Probes{}, /*probe=*/false);
  EXPECT_EQ(std::count(v.evidence.begin(), v.evidence.end(), want), 1) << joined(v.evidence);
  Stats own;
  own.shared_cache = "off: share_cache=\"off\": a cache of this process's own";
  EXPECT_EQ(shared_cache_line(own), "");
}
}  // namespace
}  // namespace stoker::doctor

namespace stoker::doctor {
namespace {
// A loader's "volume" stats (Stats::Volume as stats.cc writes it): 250 loads
// of an image and a label volume (.nii.gz) over 2.5 epochs of 100 records, 4
// patches each; 400 misses (20 MB inflated each) and 100 hits; the volume
// cache at `cache_bytes` of its 1 GiB budget.
json volume_stats(double inflate_s, double cache_bytes) {
  return json{{"num_samples", 4},
              {"patches", 1000},
              {"loads", 250},
              {"bytes_read", 0},
              {"bytes_per_patch", 0},
              {"inflate_bytes", 8e9},
              {"inflate_s", inflate_s},
              {"cache_hits", 100},
              {"cache_misses", 400},
              {"cache_entries", 50},
              {"cache_bytes", cache_bytes},
              {"cache_budget_bytes", 1073741824},
              {"label_index_builds", 40},
              {"posneg_one_class", 0},
              {"resample_s", 2.5}};
}

// Decode 17 s of the workers' 19, 16 s of it inflating, the cache full.
RunFacts volume_run(double inflate_s = 16, double cache_bytes = 1.0e9) {
  RunFacts f = run(1000, 10, 9, 0.5, 17, 1.5);
  auto& snap = f.series["loader-1-0"].last;
  snap["describe"] = "100 volume records ('ct/', ...)";
  snap["dataset_size"] = 100;
  snap["stats"]["volume"] = volume_stats(inflate_s, cache_bytes);
  return f;
}

TEST(DoctorTest, InflatingVolumesIsDecompressionBound) {
  Verdict v = diagnose(volume_run(), Probes{}, /*probe=*/false);
  EXPECT_EQ(v.kind, Bottleneck::kDecompression);
  EXPECT_STREQ(bottleneck_name(v.kind), "input-bound on decompression (.nii.gz)");
  const std::string e = joined(v.evidence);
  EXPECT_TRUE(has(v.evidence, "volumes: 1000 patches from 250 loads; 0.00 MB read per patch; 8.00 GB inflated (.nii.gz) "
                              "in 16.0 s; volume cache: 100 hits, 400 misses, 954 of 1024 MiB of its budget used "
                              "(50 entries); resampling (Spacing) 2.5 s"))
      << e;
  // The set: 20 MB per miss x 100 records x 2 volumes per load = 4e9 bytes
  // (3815 MiB), plus 10%, in whole MiB: 4197 MiB. Decoding (17 of 19 s) gone:
  // 10 ms per sample -> 1.05 ms, bounded by the cores: (2 ms of CPU + 1 ms
  // step) / 2 cores = 1.5 ms: 667 samples/s.
  const Suggestion* b = find(v, "memory_budget=4400873472 (now 1073741824;");
  ASSERT_TRUE(b) << (v.suggestions.empty() ? "" : v.suggestions[0].action);
  EXPECT_NEAR(b->predicted_rate, 1 / 1.5e-3, 1e-6);
  EXPECT_NE(b->action.find("about 3815 MiB"), std::string::npos) << b->action;
  EXPECT_NE(b->basis.find("400 cache misses against 200 volumes loaded per epoch"), std::string::npos) << b->basis;
  EXPECT_NE(b->basis.find("20.0 MB per miss (inflate_bytes / cache_misses) x 200 volumes (dataset_size 100 records x "
                          "2.00 volumes per load"),
            std::string::npos)
      << b->basis;
  const Suggestion* u = find(v, "the volumes uncompressed (.nii or .npy): a patch then reads only its bytes");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->predicted_rate, 0);
  EXPECT_EQ(&v.suggestions[0], b);  // ranked by gain
  EXPECT_EQ(find(v, "cache=\"ram\""), nullptr);
}

// The same run without volumes ("volume": null, as stats.cc writes it, or no
// key): decode-bound as before.
TEST(DoctorTest, DecodeBoundWithVolumeNullIsUnchanged) {
  RunFacts f = volume_run();
  f.series["loader-1-0"].last["stats"]["volume"] = nullptr;
  Verdict v = diagnose(f, Probes{}, /*probe=*/false);
  EXPECT_EQ(v.kind, Bottleneck::kDecode);
  EXPECT_EQ(find(v, "memory_budget="), nullptr);
  EXPECT_EQ(find(v, "uncompressed"), nullptr);
  EXPECT_FALSE(has(v.evidence, "volumes:")) << joined(v.evidence);
  f.series["loader-1-0"].last["stats"].erase("volume");
  Verdict old = diagnose(f, Probes{}, /*probe=*/false);
  EXPECT_EQ(old.kind, Bottleneck::kDecode);
  EXPECT_EQ(old.evidence, v.evidence);
}

// Volumes, but cutting patches (transforms) dominates: transform-bound; the
// volume line is still in the evidence. Inflating under half the decode
// time: decode-bound.
TEST(DoctorTest, VolumesNotDecompressionBoundElsewhere) {
  RunFacts f = run(1000, 10, 8, 0.2, 3, 14);
  f.series["loader-1-0"].last["stats"]["volume"] = volume_stats(2.9, 1.0e9);
  Verdict v = diagnose(f, Probes{}, /*probe=*/false);
  EXPECT_EQ(v.kind, Bottleneck::kTransform);
  EXPECT_EQ(find(v, "memory_budget="), nullptr);
  EXPECT_TRUE(has(v.evidence, "volumes: 1000 patches from 250 loads")) << joined(v.evidence);
  Verdict d = diagnose(volume_run(/*inflate_s=*/8), Probes{}, /*probe=*/false);
  EXPECT_EQ(d.kind, Bottleneck::kDecode);
}

// The cache below 90% of its budget: volumes stay once inflated; no
// memory_budget suggestion, storing them uncompressed still.
TEST(DoctorTest, VolumeCacheNotFullSuggestsNoMemoryBudget) {
  Verdict v = diagnose(volume_run(16, /*cache_bytes=*/5e8), Probes{}, /*probe=*/false);
  EXPECT_EQ(v.kind, Bottleneck::kDecompression);
  EXPECT_EQ(find(v, "memory_budget="), nullptr);
  EXPECT_NE(find(v, "the volumes uncompressed"), nullptr);
  EXPECT_TRUE(has(v.notes, "the volume cache holds 477 of its 1024 MiB")) << joined(v.notes);
  // Full, but no more misses than one epoch's volumes (the first epoch): none either.
  RunFacts g = volume_run();
  g.series["loader-1-0"].last["dataset_size"] = 1000;
  Verdict w = diagnose(g, Probes{}, /*probe=*/false);
  EXPECT_EQ(w.kind, Bottleneck::kDecompression);
  EXPECT_EQ(find(w, "memory_budget="), nullptr);
  EXPECT_TRUE(has(w.notes, "no volume is known to be inflated twice yet")) << joined(w.notes);
}

TEST(DoctorTest, VolumeFactsParse) {
  EXPECT_FALSE(volume_facts(json{{"samples", 1}, {"volume", nullptr}}).active);
  EXPECT_FALSE(volume_facts(json{{"samples", 1}}).active);
  EXPECT_FALSE(volume_facts(json{{"volume", 3}}).active);
  EXPECT_FALSE(volume_facts(json()).active);
  const Stats::Volume r = volume_facts(json{{"volume", volume_stats(16, 1e9)}});
  EXPECT_TRUE(r.active);
  EXPECT_EQ(r.loads, 250u);
  EXPECT_EQ(r.inflate_bytes, 8e9);
  EXPECT_EQ(r.cache_budget_bytes, 1073741824u);
  EXPECT_EQ(r.resample_s, 2.5);
  const Stats::Volume odd = volume_facts(json{{"volume", {{"inflate_s", "x"}}}});
  EXPECT_TRUE(odd.active);
  EXPECT_EQ(odd.inflate_s, 0);
}
}  // namespace
}  // namespace stoker::doctor

namespace stoker::doctor {
namespace {

// A DataLoader loop timed in Python (the doctor's sitecustomize): `wait` and
// `step` seconds over `samples`, with `num_workers` (null: not a DataLoader),
// the loop's epochs, and 20 machine samples of the given CPU means.
RunFacts profiled(double samples, double wait, double step, json num_workers, json info_extra = json::object(),
                  double main_cpu = 0.9, double root_cpu = 0.95, double tree_cpu = 0.95, double cores_busy = 1.0,
                  int processes = 1) {
  RunFacts f = run(1, 1, 0, 0, 0, 0);
  f.series.clear();
  f.samples.clear();
  for (int i = 0; i < 20; ++i) {
    Sample s;
    s.t = i * 0.5;
    s.core_busy = {cores_busy / 2, cores_busy / 2};
    s.main_thread_cpu = main_cpu;
    s.main_thread_state = 'R';
    s.root_cpu = root_cpu;
    s.tree_cpu = tree_cpu;
    s.processes = processes;
    s.pss_mib = 100;
    f.samples.push_back(s);
  }
  json info = {{"type", "torch.utils.data.dataloader.DataLoader"},
               {"dataset", "torchvision.datasets.folder.ImageFolder"},
               {"num_workers", num_workers},
               {"batch_size", 8},
               {"auto", true},
               {"files", json::array({"/data/a.jpg", "/data/b.jpg"})}};
  info.update(info_extra);
  Series p;
  p.key = "profile-7-1048576";
  p.kind = "profile";
  p.last = json{{"kind", "profile"},
                {"info", info},
                {"stats", {{"name", "DataLoader"}, {"samples", samples}, {"batches", samples / 8}, {"wait_s", wait},
                           {"step_s", step}}},
                {"loop", {{"iterations", 3}, {"setup_s", 0.6}, {"between_s", 4.5}}}};
  p.points = {{0, 0, 0, 0}, {wait + step, samples, wait, wait + step}};
  f.series[p.key] = p;
  return f;
}

bool any_has(const std::vector<std::string>& lines, const std::string& text) {
  return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) { return l.find(text) != std::string::npos; });
}

TEST(DoctorTest, AFailedCommandGetsNoVerdict) {
  RunFacts f = profiled(1000, 1, 9, 2);
  f.exit_code = 1;
  f.wall_s = 1.6;
  f.stderr_tail = "epoch 0\nTraceback (most recent call last):\n  File \"train.py\", line 3\nKeyError: 'label'\n";
  bool probed = false;
  Probes p;
  p.measure_files = [&](const std::vector<std::string>&, int, const std::string&, const Consumer&, std::size_t) {
    probed = true;
    return Cost{};
  };
  const Verdict v = diagnose(f, p);
  EXPECT_TRUE(v.failed);
  EXPECT_EQ(v.failure, "the command failed (exit 1) after 1.6 s: no verdict");
  ASSERT_FALSE(v.stderr_lines.empty());
  EXPECT_EQ(v.stderr_lines.back(), "KeyError: 'label'");
  EXPECT_EQ(v.stderr_lines.front(), "epoch 0");
  EXPECT_TRUE(v.suggestions.empty());
  EXPECT_TRUE(v.evidence.empty());
  EXPECT_FALSE(probed);
  // Interrupted by the user (Ctrl-C passed on): a verdict on the run until then.
  f.interrupted = true;
  f.exit_code = 130;
  const Verdict i = diagnose(f, p);
  EXPECT_FALSE(i.failed);
  EXPECT_EQ(i.kind, Bottleneck::kCompute);
  EXPECT_TRUE(any_has(i.notes, "interrupted (exit 130)"));
}

TEST(DoctorTest, NoWorkersMeansNoWorkersInTheEvidence) {
  // num_workers=0, the loop's thread busy loading: input-bound, attributed to the main thread, no worker processes;
  // another process on the machine used a core.
  Probes none;
  none.measure_files = [](const std::vector<std::string>&, int, const std::string&, const Consumer&, std::size_t) {
    Cost c;
    c.error = "not in this test";
    return c;
  };
  const Verdict v = diagnose(profiled(1000, 6, 4, 0, json::object(), 0.95, 1.0, 1.0, 1.95), none);
  EXPECT_EQ(v.kind, Bottleneck::kDecode);
  EXPECT_TRUE(any_has(v.evidence, "num_workers=0"));
  EXPECT_TRUE(any_has(v.evidence, "no child processes"));
  EXPECT_TRUE(any_has(v.evidence, "other processes on the machine used 0.95 cores"));
  EXPECT_TRUE(any_has(v.evidence, "no worker processes"));
  EXPECT_FALSE(any_has(v.evidence, "worker processes used"));
  EXPECT_FALSE(any_has(v.evidence, "PIL"));
  EXPECT_NEAR(v.cpu_main_process, 1.0, 1e-9);
  EXPECT_NEAR(v.cpu_children, 0, 1e-9);
  EXPECT_NEAR(v.cpu_others, 0.95, 1e-9);
  // Compute-bound with num_workers=0 and a child process of the program's: not called a worker.
  const Verdict c = diagnose(profiled(1000, 0.5, 9.5, 0, json::object(), 0.95, 1.0, 1.6, 1.9, 2), none);
  EXPECT_EQ(c.kind, Bottleneck::kCompute);
  EXPECT_FALSE(any_has(c.evidence, "worker process"));  // the compute verdict names no loading at all
  EXPECT_TRUE(any_has(c.evidence, "its child process (1 on average) 0.60"));
  // Two workers: named, with their count and their cores.
  const Verdict w = diagnose(profiled(1000, 6, 4, 2, json::object(), 0.2, 0.25, 1.85, 1.9, 3), none);
  EXPECT_TRUE(any_has(w.evidence, "the DataLoader's 2 worker processes used 1.60 cores"));
  EXPECT_TRUE(any_has(w.evidence, "2 workers"));
  const Verdict one = diagnose(profiled(1000, 6, 4, 1, json::object(), 0.2, 0.25, 1.2, 1.9, 2), none);
  EXPECT_TRUE(any_has(one.evidence, "1 worker;"));
  EXPECT_FALSE(any_has(one.evidence, "1 workers"));
}

TEST(DoctorTest, SetupIsWaitAndTimeBetweenEpochsIsNotTheStep) {
  const Verdict v = diagnose(profiled(1000, 1, 9, 2), Probes{}, false);
  EXPECT_EQ(v.iterations, 3);
  EXPECT_NEAR(v.setup_s, 0.6, 1e-9);
  EXPECT_NEAR(v.between_s, 4.5, 1e-9);
  EXPECT_NEAR(v.step_per_sample_s, 9e-3, 1e-12);  // the loop's steps only, not the 4.5 s between epochs
  EXPECT_TRUE(any_has(v.evidence, "between epochs: 4.5 s outside the loop (evaluation, checkpoints, other loops), "
                                  "kept out of the step; creating its iterator each epoch (the DataLoader starting its "
                                  "2 workers): 0.60 s over 3 iterations, counted as waiting for data"));
}

TEST(DoctorTest, AWrappedStokerLoaderTakesTheLoopFromPython) {
  RunFacts f = run(1000, 20, 1, 0.5, 17, 1.5);  // the C++ clock: 20 s active, 19 s of it "step"
  Series p;
  p.key = "profile-1-0";
  p.kind = "profile";
  p.last = json{{"kind", "profile"},
                {"info", {{"type", "stoker.Loader"}, {"stoker_loader", true}, {"auto", true},
                          {"where", "train.py:12 in train_one_epoch"}}},
                {"stats", {{"name", "Loader"}, {"samples", 1000}, {"batches", 16}, {"wait_s", 2}, {"step_s", 8}}},
                {"loop", {{"iterations", 2}, {"setup_s", 0.1}, {"between_s", 10}}}};
  p.points = {{0, 0, 0, 0}, {20, 1000, 2, 10}};
  f.series[p.key] = p;
  const Verdict v = diagnose(f, Probes{}, false);
  EXPECT_NEAR(v.wait_share, 0.2, 1e-9);
  EXPECT_NEAR(v.step_per_sample_s, 8e-3, 1e-12);
  EXPECT_NEAR(v.between_s, 10, 1e-9);
  EXPECT_EQ(series_label(p), "stoker.Loader in train_one_epoch (train.py:12)");
  // Not timed in Python: said so.
  const Verdict c = diagnose(run(1000, 20, 1, 0.5, 17, 1.5), Probes{}, false);
  EXPECT_TRUE(any_has(c.notes, "not timed in Python"));
}

TEST(DoctorTest, TheProbeRunsTheScriptsPipelineAndNamesIt) {
  const json port = {{"probe", {{"transforms", json::array({json{{"name", "CenterCrop"}, {"size", {8, 8}}}})},
                                {"dtype", "float32"}}},
                     {"script_pipeline", {"CenterCrop(size=(8, 8))", "ToTensor()"}},
                     {"probed_pipeline", {"CenterCrop(size=(8, 8))", "ToTensor()"}},
                     {"pipeline", "the script's transforms: CenterCrop(size=(8, 8)) + ToTensor()"}};
  std::string seen;
  Probes p;
  p.measure_files = [&](const std::vector<std::string>& files, int, const std::string& t, const Consumer&, std::size_t) {
    seen = t;
    Cost c = fixed(1e-3, 1e-3);
    c.records = files.size();
    c.decode_s = 6e-4;
    c.transform_s = 4e-4;
    return c;
  };
  const Verdict v = diagnose(profiled(1000, 6, 4, 2, json{{"port", port}}), p);
  EXPECT_EQ(json::parse(seen), port["probe"]);  // the script's pipeline, as stoker runs it
  EXPECT_TRUE(any_has(v.evidence, "the doctor's probe ran 2 of the same files through stoker with the script's "
                                  "transforms: CenterCrop(size=(8, 8)) + ToTensor()"));
  EXPECT_GT(v.probe_s, 0);  // the probe's time, whichever branch ran it
  // Nothing maps: said so, and no other pipeline timed.
  seen = "(not called)";
  const json none = {{"python", "MyAugment(...)"}, {"script_pipeline", {"MyAugment(...)"}},
                     {"probed_pipeline", json::array()}};
  const Verdict n = diagnose(profiled(1000, 6, 4, 2, json{{"port", none}}), p);
  EXPECT_EQ(seen, "(not called)");
  EXPECT_TRUE(any_has(n.notes, "none of the script's transforms maps to stoker's (MyAugment(...) would run as Python)"));
  // Part of it maps: the part timed is named, and the rest.
  json part = port;
  part["python"] = "MyAugment(...)";
  part["probed_pipeline"] = {"CenterCrop(size=(8, 8))"};
  const Verdict q = diagnose(profiled(1000, 6, 4, 2, json{{"port", part}}), p);
  EXPECT_TRUE(any_has(q.evidence, "the part of the script's transforms stoker runs: CenterCrop(size=(8, 8)); not timed: "
                                  "MyAugment(...) (would run as Python)"));
}

TEST(DoctorTest, ChartsBreakWhereALoopWasNotRunning) {
  ChartOptions o;
  const double nan = std::nan("");
  const std::string svg = svg_line_chart({{"train_one_epoch", {0, 1, 2, 3, 4}, {5, 6, nan, 7, 8}}}, o);
  std::size_t lines = 0;
  for (auto i = svg.find("<polyline"); i != std::string::npos; i = svg.find("<polyline", i + 1)) ++lines;
  EXPECT_EQ(lines, 2u);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
}

}  // namespace
}  // namespace stoker::doctor

namespace stoker::doctor {
namespace {

// `stoker doctor --sweep` on a DataLoader: its files as a list-file source, with the script's pipeline.
TEST(DoctorTest, ADataLoadersFilesBecomeALoaderSetupForTheSweep) {
  const std::string dir = ::testing::TempDir();
  const LoaderSetup s = files_setup({"/data/a.jpg", "/data/b.jpg"},
                                    R"({"transforms": [{"name": "CenterCrop", "size": [8, 8]}], "dtype": "float32"})", dir);
  ASSERT_EQ(s.sources.size(), 1u);
  std::ifstream list(s.sources[0]);
  std::string all((std::istreambuf_iterator<char>(list)), std::istreambuf_iterator<char>());
  EXPECT_EQ(all, "/data/a.jpg,0\n/data/b.jpg,0\n");
  ASSERT_EQ(s.options.transforms.size(), 1u);
  EXPECT_EQ(s.options.dtype, DType::kFloat32);
  EXPECT_EQ(files_setup({"/data/a.jpg"}, "", dir).options.transforms.size(), 3u);  // unknown: the default pipeline
  EXPECT_THROW(files_setup({}, "", dir), std::runtime_error);
}


// The issue's case: a loop whose step waited for a core half of its time
// while the input pipeline's workers used 1.5 cores. A change that makes the
// input 4x cheaper frees those cores: the step gets a larger share of a core
// (a fair share: cores / runnable threads), and the loop runs faster even
// though it was as much step-bound as input-bound. Keeping the step as
// measured (the old model) predicts no gain at all.
TEST(DoctorTest, TheStepModelFreesTheCoresTheInputTook) {
  StepModel m;
  m.cores = 2;
  m.loader_time = 4e-3;  // 250 samples/s now
  m.step = 4e-3;
  m.input_cpu = 6e-3;    // 1.5 cores at 250 samples/s
  m.input_cores = 1.5;
  const double kept = m.rate(0.25, 1.5e-3);
  EXPECT_NEAR(kept, 250, 1e-9);  // the step's wait for a core not measured: the step stays 4 ms
  m.step_cpu = 2e-3;
  m.step_runq = 2e-3;
  EXPECT_NEAR(m.share_now(), 0.5, 1e-12);
  EXPECT_NEAR(m.step_after(1.5), 4e-3, 1e-15);  // the same competition: the same step
  EXPECT_NEAR(m.step_after(0), 2e-3, 1e-15);    // nothing competing: its CPU (and nothing off the CPU)
  EXPECT_NEAR(m.rate(1.0, 6e-3), 250, 1e-6);    // the run as it was
  // After: the input uses 1.5e-3 / t cores, 3e-3 / t threads at the share of 0.5 they had, so the step's share
  // is 2 / (1 + 3e-3 / t) and the step 1e-3 + 3e-6 / t; the loop runs at that fixed point (above the input's
  // 1 ms and the cores' 1.75 ms).
  const double t = (1e-3 + std::sqrt(1e-6 + 12e-6)) / 2;
  EXPECT_NEAR(m.rate(0.25, 1.5e-3), 1 / t, 1e-6);
  // Other processes' load stays: 1.5 cores at a share of 0.5 are 3 runnable threads, so without the input the
  // step's fair share goes from 2 / 7 to 2 / 4 of a core: its share from 0.5 to 0.875.
  m.other_cores = 1.5;
  EXPECT_NEAR(m.step_after(0), 2e-3 / 0.875, 1e-12);
  EXPECT_NEAR(m.step_after(1.5), 4e-3, 1e-15);
  // Other processes' runnable threads sampled (3): the share is at most the fair share, 2 / (3 + 1) without the
  // input. A step thread that slept while the loop waited got more than that on waking; a step that is the
  // bottleneck does not.
  m.other_threads = 3;
  EXPECT_NEAR(m.step_after(0), 2e-3 / 0.5, 1e-12);
}

// A DataLoader profile with the consuming thread's step split ("sched"):
// 9 s of step over 1000 samples, 4 s of it on the CPU and 3 s waiting for a
// core.
RunFacts split_profile(double wait, double step, json sched, json info_extra = json::object()) {
  RunFacts f = profiled(1000, wait, step, 2, info_extra, 0.9, 0.95, 1.6, 1.9, 3);
  f.series.begin()->second.last["sched"] = sched;
  return f;
}

const json kPortInfo = {{"port", {{"diff", "--- a/train.py\n+++ b/train.py\n@@ -1 +1 @@\n-from torch.utils.data import "
                                           "DataLoader\n+from stoker import DataLoader\n"},
                                  {"probe", {{"transforms", json::array()}, {"dtype", "uint8"}}},
                                  {"pipeline", "the script's dataset has no transform (decode only)"}}}};

TEST(DoctorTest, TheStepIsSplitAndThePortReplaysItBesideStokersThreads) {
  const json sched = {{"batches", 125}, {"step_cpu_s", 4.0}, {"step_runq_s", 3.0}, {"wait_cpu_s", 0.5},
                      {"wait_runq_s", 0.1}};
  std::vector<Consumer> seen;
  std::vector<int> threads;
  std::vector<std::size_t> batch;
  Probes p;
  p.measure_files = [&](const std::vector<std::string>&, int t, const std::string&, const Consumer& c,
                        std::size_t b) {
    seen.push_back(c);
    threads.push_back(t);
    batch.push_back(b);
    Cost cost = fixed(1 / 150.0, 1 / 150.0);
    cost.decode_s = 0.7 * cost.per_sample_s;
    cost.transform_s = 0.3 * cost.per_sample_s;
    return cost;
  };
  // Compute-bound (10% waiting), the workers using 0.65 cores: the port is predicted at the probe's own rate.
  const Verdict c = diagnose(split_profile(1, 9, sched, kPortInfo), p);
  EXPECT_EQ(c.kind, Bottleneck::kCompute);
  EXPECT_NEAR(c.step_cpu_s, 4e-3, 1e-12);
  EXPECT_NEAR(c.step_runq_s, 3e-3, 1e-12);
  EXPECT_NEAR(c.step_other_s, 2e-3, 1e-12);
  EXPECT_NEAR(c.input_cores, 0.65, 1e-9);
  EXPECT_TRUE(any_has(c.evidence, "the step, 9.00 ms per sample: 4.00 ms on the CPU, 3.00 ms (33%) waiting for a "
                                  "core (runnable, not running), 2.00 ms off the CPU otherwise (a GPU, I/O, sleeps); "
                                  "competing for the cores: the DataLoader's workers 0.65 cores, other processes 0.30"));
  const Suggestion* port = find(c, "stoker.DataLoader and stoker.datasets");
  ASSERT_NE(port, nullptr);
  EXPECT_NEAR(port->predicted_rate, 150, 1e-6);
  EXPECT_NEAR(port->predicted_lo, 150 * (1 - kHalfWidth), 1e-6);
  EXPECT_NE(port->basis.find("the loop's step replayed after each batch: its 4.00 ms of CPU per sample as CPU work "
                             "and 2.00 ms off the CPU as a sleep"),
            std::string::npos)
      << port->basis;
  // The probe replayed the step as measured (its CPU as CPU work, the rest off the CPU as a sleep, its wait for
  // a core left out), with the port's threads (num_workers=2) and the script's batch size.
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_TRUE(seen[0].split);
  EXPECT_NEAR(seen[0].cpu_per_sample_s, 4e-3, 1e-12);
  EXPECT_NEAR(seen[0].sleep_per_sample_s, 2e-3, 1e-12);
  EXPECT_EQ(threads[0], 2);
  EXPECT_EQ(batch[0], 8u);
  // Input-bound: the same probe, the same prediction.
  const Verdict i = diagnose(split_profile(6, 4, sched, kPortInfo), p);
  EXPECT_EQ(i.kind, Bottleneck::kDecode);
  ASSERT_NE(find(i, "stoker.DataLoader and stoker.datasets"), nullptr);
  EXPECT_NEAR(find(i, "stoker.DataLoader and stoker.datasets")->predicted_rate, 150, 1e-6);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_TRUE(seen[1].split);
  // Other processes' runnable threads sampled: 6 in the run, 2 while the probe ran. Said, not scaled by.
  RunFacts loaded = split_profile(1, 9, sched, kPortInfo);
  for (Sample& x : loaded.samples) x.procs_running = 7;  // 6 others and the sampler
  Probes lp = p;
  lp.measure_files = [&](const std::vector<std::string>& fl, int t, const std::string& x, const Consumer& co,
                         std::size_t b) {
    Cost cost = p.measure_files(fl, t, x, co, b);
    cost.others_runnable = 2;
    return cost;
  };
  const Verdict l = diagnose(loaded, lp);
  const Suggestion* lport = find(l, "stoker.DataLoader and stoker.datasets");
  ASSERT_NE(lport, nullptr);
  EXPECT_NEAR(lport->predicted_rate, 150, 1e-6);
  EXPECT_NE(lport->basis.find("the probe ran while other processes had 2.0 runnable threads on average (the run: "
                              "6.0)"),
            std::string::npos)
      << lport->basis;
  EXPECT_TRUE(any_has(l.evidence, "other processes 0.30 (6.0 threads runnable on average)"));
  seen.pop_back();
  // No wait for a core from the kernel (no schedstat): said so, and the step replayed whole, as CPU work.
  json no_runq = sched;
  no_runq["step_runq_s"] = nullptr;
  const Verdict n = diagnose(split_profile(6, 4, no_runq, kPortInfo), p);
  EXPECT_LT(n.step_runq_s, 0);
  EXPECT_TRUE(any_has(n.notes, "the step's wait for a core was not measured"));
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_FALSE(seen[2].split);
  EXPECT_TRUE(seen[2].busy);
  EXPECT_NEAR(seen[2].step_per_sample_s, 4e-3, 1e-12);
}

// Time inside next() runnable but not running while other processes held
// the cores is the machine's contention, not waiting for data: 2 s of wait in
// a 10 s loop, 1.2 s of it in the run queue, while other processes used 0.95
// cores and the workers 0.05: 95% of that 1.2 s is left out, 0.86 s of wait
// remain: compute-bound. Where the workers held the cores, it is theirs.
TEST(DoctorTest, WaitingForACoreOtherProcessesHeldIsNotWaitingForData) {
  const json sched = {{"batches", 125}, {"step_cpu_s", 7.0}, {"step_runq_s", 1.0}, {"wait_cpu_s", 0.2},
                      {"wait_runq_s", 1.2}};
  RunFacts f = profiled(1000, 2, 8, 2, json::object(), 0.9, 0.95, 1.0, 1.95, 3);
  f.series.begin()->second.last["sched"] = sched;
  const Verdict v = diagnose(f, Probes{}, false);
  EXPECT_NEAR(v.wait_share, 0.2, 1e-9);
  EXPECT_NEAR(v.wait_runq_share, 0.12 * 0.95, 1e-9);
  EXPECT_EQ(v.kind, Bottleneck::kCompute);
  EXPECT_TRUE(any_has(v.evidence, "the training loop waited for data 9% of its 10.0 s"));
  EXPECT_TRUE(any_has(v.evidence, "11% of its time it was inside next() runnable but not running, waiting for a "
                                  "core that other processes held"));
  // The workers used 0.65 cores, other processes 0.3: most of the run-queue wait is the input's.
  const Verdict w = diagnose(split_profile(2, 8, sched), Probes{}, false);
  EXPECT_NEAR(w.wait_runq_share, 0.12 * 0.3 / 0.95, 1e-9);
  EXPECT_NE(w.kind, Bottleneck::kCompute);
  json none = sched;
  none["wait_runq_s"] = 0.0;
  const Verdict i = diagnose(split_profile(2, 8, none), Probes{}, false);
  EXPECT_EQ(i.wait_runq_share, 0);
  EXPECT_NE(i.kind, Bottleneck::kCompute);
}

TEST(DoctorTest, ACollateFnTakingMostOfTheWorkersIsCollateBound) {
  const json sched = {{"batches", 125}, {"step_cpu_s", 3.0}, {"step_runq_s", 0.5}, {"wait_cpu_s", 0.5},
                      {"wait_runq_s", 0.1}};
  bool probed = false;
  Probes p;
  p.measure_files = [&](const std::vector<std::string>&, int, const std::string&, const Consumer&, std::size_t) {
    probed = true;
    return fixed(1e-3, 1e-3);
  };
  // The workers used 0.65 cores at 100 samples/s: 6.5 ms of CPU per sample, 4 ms of it in the collate_fn.
  RunFacts f = split_profile(6, 4, sched, kPortInfo);
  f.series.begin()->second.last["collate"] = {{"fn", "train.my_collate"}, {"default", false}, {"cpu_s", 4.0},
                                              {"calls", 125}, {"samples", 1000}};
  const Verdict v = diagnose(f, p);
  EXPECT_EQ(v.kind, Bottleneck::kCollate);
  EXPECT_STREQ(bottleneck_name(v.kind), "input-bound on collate");
  EXPECT_TRUE(any_has(v.evidence, "collate: train.my_collate took 32.00 ms of CPU per batch of 8 (4.000 ms per "
                                  "sample), 62% of the loading's CPU (the workers' 6.50 ms per sample)"));
  const Suggestion* s = find(v, "Speed up the collate_fn (train.my_collate)");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->predicted_rate, 0);
  // The port would run the collate_fn as Python on stoker's threads: not probed, not predicted, and why.
  EXPECT_FALSE(probed);
  const Suggestion* port = find(v, "stoker.DataLoader and stoker.datasets");
  ASSERT_NE(port, nullptr);
  EXPECT_EQ(port->predicted_rate, 0);
  EXPECT_NE(port->basis.find("would run as Python on stoker's threads"), std::string::npos);
  // The default collate taking a small share: decode-bound as before, the port probed.
  f.series.begin()->second.last["collate"] = {{"fn", "torch.utils.data._utils.collate.default_collate"},
                                              {"default", true}, {"cpu_s", 0.5}, {"calls", 125}, {"samples", 1000}};
  const Verdict d = diagnose(f, p);
  EXPECT_NE(d.kind, Bottleneck::kCollate);
  EXPECT_TRUE(probed);
}

}  // namespace
}  // namespace stoker::doctor
