// The doctor's verdict rules and predictions on synthetic runs (fake probes),
// and its HTML pieces. The end-to-end scenarios (real training loops under
// `stoker doctor`) are in tests/python/test_doctor.py.
#include "doctor/verdict.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "doctor/html.h"

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

// Probes that return fixed per-sample costs.
Probes fake(double base, double decoded, double packed, double uint8 = 0, double lossless = 0) {
  Probes p;
  p.measure = [=](const LoaderSetup& s, std::size_t, int) {
    Cost c;
    c.ok = true;
    c.records = 192;
    c.per_sample_s = s.options.cache == Cache::kDecoded ? decoded
                     : s.options.dtype == DType::kUInt8  ? uint8
                                                          : base;
    c.cache_bytes_per_sample = 300000;
    return c;
  };
  p.measure_packed = [=](const LoaderSetup&, std::size_t, int max_side, int) {
    Cost c;
    c.ok = true;
    c.records = 192;
    c.per_sample_s = max_side == 0 ? (lossless > 0 ? lossless : base) : packed;
    return c;
  };
  return p;
}

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
  // 1000 samples in 10 s, waiting 9 s: 10 ms per sample of loop time; the
  // workers spent 19 ms of CPU per sample, mostly decoding.
  Verdict v = diagnose(run(1000, 10, 9, 0.5, 17, 1.5), fake(/*base=*/10e-3, /*decoded=*/1e-3, /*packed=*/2.5e-3));
  EXPECT_EQ(v.kind, Bottleneck::kDecode);
  const Suggestion* d = find(v, "cache=\"decoded\"");
  const Suggestion* p = find(v, "--max-side 256");
  ASSERT_TRUE(d && p);
  // Packed: a quarter of the work: the input side's 10 ms -> 2.5 ms; the CPU
  // bound (19 ms x 0.25 + 1 ms of step) / 2 cores = 2.875 ms is the larger.
  EXPECT_NEAR(p->predicted_rate, 1 / 2.875e-3, 1e-6);
  // Decoded: a tenth: 1 ms of input vs (1.9 + 1) / 2 = 1.45 ms CPU bound.
  EXPECT_NEAR(d->predicted_rate, 1 / 1.45e-3, 1e-6);
  EXPECT_NEAR(d->gain, d->predicted_rate / 100, 1e-9);
  EXPECT_EQ(&v.suggestions[0], d);  // ranked by gain
}

TEST(DoctorTest, LosslessPackSuggestedOnlyWhereItHelps) {
  // Decode-bound as above; --lossless measured at 7 ms instead of 10.
  Verdict v = diagnose(run(1000, 10, 9, 0.5, 17, 1.5), fake(10e-3, 1e-3, 2.5e-3, 0, /*lossless=*/7e-3));
  const Suggestion* l = find(v, "--lossless");
  ASSERT_TRUE(l);
  // The input side's 10 ms -> 7 ms; CPU bound (19 x 0.7 + 1) / 2 = 7.15 ms is the larger.
  EXPECT_NEAR(l->predicted_rate, 1 / 7.15e-3, 1e-6);
  // Measured no faster (PNGs, say): not suggested.
  Verdict w = diagnose(run(1000, 10, 9, 0.5, 17, 1.5), fake(10e-3, 1e-3, 2.5e-3));
  EXPECT_EQ(find(w, "--lossless"), nullptr);
}

TEST(DoctorTest, TransformBoundSuggestsUint8Output) {
  Verdict v = diagnose(run(1000, 10, 8, 0.2, 3, 14), fake(10e-3, 8e-3, 9e-3, /*uint8=*/5e-3));
  EXPECT_EQ(v.kind, Bottleneck::kTransform);
  const Suggestion* u = find(v, "uint8");
  ASSERT_TRUE(u);
  EXPECT_GT(u->gain, 1.0);
  EXPECT_EQ(find(v, "--max-side"), nullptr);  // packing does not help transforms
}

TEST(DoctorTest, ReadsDominatingIsStorageBound) {
  Verdict v = diagnose(run(1000, 10, 9.5, 15, 2, 1, /*cores_busy=*/0.3), fake(10e-3, 1e-3, 2e-3));
  EXPECT_EQ(v.kind, Bottleneck::kStorage);
  EXPECT_NE(find(v, "cache=\"ram\""), nullptr);
  EXPECT_NE(find(v, "Pack the records"), nullptr);
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
  EXPECT_NEAR(find(v, "uint8")->predicted_rate, 1 / (10e-3 - 0.75 * 4.5e-3), 1e-6);
}

TEST(DoctorTest, NothingReportedSaysHowToGetData) {
  RunFacts f = run(1, 1, 0, 0, 0, 0);
  f.series.clear();
  Verdict v = diagnose(f);
  EXPECT_EQ(v.kind, Bottleneck::kNoData);
  EXPECT_NE(v.evidence[0].find("stoker.profile"), std::string::npos);
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
  EXPECT_EQ(s.options.cache_max_side, 320);
  ASSERT_EQ(s.options.transforms.size(), 1u);
  EXPECT_EQ(std::get<RandomResizedCrop>(s.options.transforms[0]).ratio[1], 1.3333333);
}
}  // namespace
}  // namespace stoker::doctor
