// The tuner's rules on synthetic measurement windows, and a running loader
// tuning itself against a slow and a fast consumer.
#include "batch/autotune.h"

#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <thread>

#include "stoker/loader.h"
#include "test_util.h"

namespace stoker {
namespace {

using detail::Tuner;
using detail::TuneWindow;

TuneWindow window(double wait_share, double cores_used, double ring_blocked = 0) {
  TuneWindow w;
  w.wall_s = 1.0;
  w.wait_s = wait_share;
  w.busy_s = cores_used;
  w.ring_blocked_s = ring_blocked;
  w.batches = 10;
  return w;
}

TEST(AutotuneTest, ComputeBoundGivesCoresBackDownToOneAndSettles) {
  Tuner t(/*max_threads=*/4, 4, true, 4, 8, 4, true);
  EXPECT_STREQ(t.state(), "tuning");
  for (int i = 0; i < 10; ++i) t.observe(window(0.0, 0.3));
  EXPECT_EQ(t.threads(), 1);
  EXPECT_EQ(t.depth(), 4);
  EXPECT_STREQ(t.state(), "settled");
  ASSERT_EQ(t.log().size(), 3u);
  EXPECT_NE(t.log()[0].find("threads 4->3"), std::string::npos) << t.log()[0];
  EXPECT_NE(t.log()[0].find("consumer waited 0.0%"), std::string::npos) << t.log()[0];
}

TEST(AutotuneTest, KeepsWorkersThatAreBusy) {
  // No wait, but 3.6 of 4 cores busy: parking one would starve the consumer.
  Tuner t(4, 4, true, 4, 8, 4, true);
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(t.observe(window(0.0, 3.6)));
  EXPECT_EQ(t.threads(), 4);
  EXPECT_STREQ(t.state(), "settled");
}

TEST(AutotuneTest, ProbeThatHurtsIsRevertedAndNeverRetried) {
  Tuner t(4, 4, true, 4, 8, 4, true);
  EXPECT_TRUE(t.observe(window(0.0, 2.0)));  // 4 -> 3
  EXPECT_EQ(t.threads(), 3);
  EXPECT_TRUE(t.observe(window(0.2, 2.9)));  // the consumer waits: back to 4
  EXPECT_EQ(t.threads(), 4);
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(t.observe(window(0.0, 2.0)));
  EXPECT_EQ(t.threads(), 4);
  EXPECT_STREQ(t.state(), "settled");
  EXPECT_NE(t.log().back().find("back"), std::string::npos);
}

TEST(AutotuneTest, InputBoundAddsWorkersThenDeepensRingOnlyWhenWorkersWaitForIt) {
  Tuner t(4, 2, true, 2, 4, 2, true);
  EXPECT_TRUE(t.observe(window(0.5, 2.0)));
  EXPECT_TRUE(t.observe(window(0.5, 3.0)));
  EXPECT_EQ(t.threads(), 4);
  EXPECT_FALSE(t.observe(window(0.5, 4.0)));  // all cores busy: nothing a deeper ring can do
  EXPECT_EQ(t.depth(), 2);
  for (int i = 0; i < 5; ++i) t.observe(window(0.3, 3.0, /*ring_blocked=*/0.8));  // bursty consumer
  EXPECT_EQ(t.depth(), 4);                                                      // capped
  EXPECT_EQ(t.threads(), 4);
}

TEST(AutotuneTest, FixedValuesNeverChange) {
  Tuner t(2, 2, false, 3, 3, 3, false);
  EXPECT_STREQ(t.state(), "off");
  EXPECT_FALSE(t.observe(window(0.0, 0.1)));
  EXPECT_FALSE(t.observe(window(0.9, 2.0, 0.9)));
  EXPECT_EQ(t.threads(), 2);
  EXPECT_EQ(t.depth(), 3);
}

TEST(AutotuneTest, NeverLeavesItsBoundsOnAnyMeasurements) {
  std::mt19937 gen(7);
  std::uniform_real_distribution<double> u(0, 1);
  for (int trial = 0; trial < 200; ++trial) {
    const int max_threads = 1 + trial % 6;
    Tuner t(max_threads, max_threads, true, 2, 5, 2, true);
    for (int i = 0; i < 200; ++i) {
      const double r = u(gen);
      TuneWindow w = window(r < 0.3 ? 0.0 : u(gen), u(gen) * max_threads, u(gen));
      t.observe(w);
      ASSERT_GE(t.threads(), 1);
      ASSERT_LE(t.threads(), max_threads);
      ASSERT_GE(t.depth(), 2);
      ASSERT_LE(t.depth(), 5);
    }
  }
}

// A list of n small JPEGs.
std::string small_list(const testing::TempDir& d, int n) {
  std::string list = "path,label\n";
  for (int i = 0; i < n; ++i) {
    const std::string name = "img" + std::to_string(i) + ".jpg";
    testing::write_file(d.file(name), testing::encode_jpeg(testing::test_pixels(40, 32, i), 40, 32));
    list += name + "," + std::to_string(i) + "\n";
  }
  testing::write_file(d.file("list.csv"), list);
  return d.file("list.csv");
}

LoaderOptions autotuned(int max_threads) {
  LoaderOptions o;
  o.batch_size = 2;
  o.threads = 0;
  o.max_threads = max_threads;
  o.transforms = {RandomResizedCrop{16, 16}};
  return o;
}

TEST(AutotuneTest, LoaderBehindASlowStepParksWorkersAndSettles) {
  testing::TempDir d;
  Loader l(small_list(d, 64), autotuned(4));
  EXPECT_EQ(l.stats().threads, 4);  // starts at full speed
  for (int epoch = 0; epoch < 5 && std::string(l.stats().autotune) != "settled"; ++epoch) {
    for (const Batch& b : l) {
      (void)b;
      std::this_thread::sleep_for(std::chrono::milliseconds(25));  // the "model step"
      ASSERT_GE(l.stats().threads, 1);
      ASSERT_LE(l.stats().threads, 4);
    }
  }
  Stats s = l.stats();
  EXPECT_EQ(s.threads_max, 4);
  EXPECT_EQ(s.threads, 1);
  EXPECT_EQ(s.autotune, "settled");
  EXPECT_EQ(s.autotune_log.size(), 3u);
  EXPECT_NE(s.to_json().find("\"autotune\":\"settled\""), std::string::npos);
}

// Wraps a source; every read takes `delay` (slow storage).
class SlowSource : public Source {
 public:
  SlowSource(std::unique_ptr<Source> inner, std::chrono::milliseconds delay) : inner_(std::move(inner)), delay_(delay) {}
  std::size_t size() const override { return inner_->size(); }
  std::string key(std::size_t i) const override { return inner_->key(i); }
  std::int64_t label(std::size_t i) const override { return inner_->label(i); }
  Status read(std::size_t i, std::vector<std::uint8_t>* out) const override {
    std::this_thread::sleep_for(delay_);
    return inner_->read(i, out);
  }
  const std::vector<std::string>& classes() const override { return inner_->classes(); }
  std::string describe() const override { return "slow " + inner_->describe(); }

 private:
  std::unique_ptr<Source> inner_;
  std::chrono::milliseconds delay_;
};

TEST(AutotuneTest, LoaderFeedingAWaitingConsumerKeepsEveryWorker) {
  testing::TempDir d;
  auto source = std::make_shared<SlowSource>(open_list_file(small_list(d, 128)), std::chrono::milliseconds(10));
  Loader l(source, autotuned(2));
  // "settled" takes three windows without a change, so the tuner has judged
  // at least three windows of a consumer that waits for every batch.
  for (int epoch = 0; epoch < 8 && std::string(l.stats().autotune) != "settled"; ++epoch) {
    for (const Batch& b : l) (void)b;
  }
  Stats s = l.stats();
  EXPECT_EQ(s.autotune, "settled");
  EXPECT_EQ(s.threads, 2);
  EXPECT_EQ(s.threads_max, 2);
  // NOTE: no change of threads at any point. A deeper ring is allowed: on a
  // loaded machine the woken consumer can wait for a core while the workers
  // wait for ring space, which the tuner rightly reads as a bursty consumer.
  for (const std::string& line : s.autotune_log) EXPECT_EQ(line.find("threads "), std::string::npos) << line;
}

TEST(AutotuneTest, FixedThreadsAndPrefetchAreKept) {
  testing::TempDir d;
  LoaderOptions o = autotuned(0);
  o.threads = 3;
  o.prefetch = 5;
  Loader l(small_list(d, 16), o);
  for (const Batch& b : l) (void)b;
  Stats s = l.stats();
  EXPECT_EQ(s.threads, 3);
  EXPECT_EQ(s.prefetch, 5);
  EXPECT_EQ(s.autotune, "off");
}

}  // namespace
}  // namespace stoker
