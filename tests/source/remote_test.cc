// Remote shards through the pipe: transport (a real command, `cat`), so the
// fetcher threads, the plan, the release after last use and the errors run in
// the C++ suite (and under the sanitizers); tests/python/test_remote.py covers
// HTTP and S3 against real servers.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <cstring>
#include <thread>
#include <string>
#include <vector>

#include "order/order.h"
#include "source/remote/transport.h"
#include "source/shard_source.h"
#include "source/tar.h"
#include "stoker/loader.h"
#include "stoker/source.h"
#include "stoker/stats.h"
#include "test_util.h"

namespace stoker {
namespace {

using testing::TempDir;

// `shards` shards of `per` records each: a JPEG (sizes vary) and its label.
std::string make_shards(const TempDir& d, int shards, int per) {
  int n = 0;
  for (int s = 0; s < shards; ++s) {
    detail::TarWriter w(d.file("s-" + std::to_string(s) + ".tar"));
    EXPECT_TRUE(w.open().ok());
    for (int k = 0; k < per; ++k, ++n) {
      const int width = 20 + (n * 7) % 40, height = 18 + (n * 11) % 30;
      const auto jpg = testing::encode_jpeg(testing::test_pixels(width, height, static_cast<std::uint32_t>(n)), width, height);
      std::string key = "r";  // NOTE: not "r" + to_string(n): GCC 12's -Wrestrict false positive
      key += std::to_string(n);
      const std::string label = std::to_string(n);
      EXPECT_TRUE(w.add(key + ".jpg", jpg.data(), jpg.size(), 0).ok());
      EXPECT_TRUE(w.add(key + ".cls", reinterpret_cast<const std::uint8_t*>(label.data()), label.size(), 0).ok());
    }
    EXPECT_TRUE(w.finish().ok());
  }
  return d.path() + "/s-{0.." + std::to_string(shards - 1) + "}.tar";
}

LoaderOptions options(std::size_t window) {
  LoaderOptions o;
  o.batch_size = 4;
  o.threads = 3;
  o.shuffle = true;
  o.seed = 11;
  o.shuffle_window = window;
  o.dtype = DType::kUInt8;
  o.transforms = {RandomResizedCrop{16, 16}, RandomHorizontalFlip{}};
  o.remote.connections = 2;
  return o;
}

std::vector<std::vector<std::uint8_t>> epoch(Loader& l, std::uint64_t e) {
  l.set_epoch(e);
  std::vector<std::vector<std::uint8_t>> out;
  for (const Batch& b : l) {
    auto* p = static_cast<const std::uint8_t*>(testing::images_of(b));
    out.emplace_back(p, p + testing::image_bytes_of(b));
    auto* y = reinterpret_cast<const std::uint8_t*>(testing::labels_of(b));
    out.back().insert(out.back().end(), y, y + b.size() * sizeof(std::int64_t));
  }
  return out;
}

TEST(RemoteTest, UrlsAreShownWithoutUserAndPassword) {
  EXPECT_EQ(detail::redact_url("https://u:p@host:8/a/b.tar"), "https://host:8/a/b.tar");
  EXPECT_EQ(detail::redact_url("http://host/a@b.tar"), "http://host/a@b.tar");  // an '@' in the path stays
  EXPECT_EQ(detail::redact_url("https://u:p@w@host/x"), "https://host/x");
  EXPECT_EQ(detail::redact_url("s3://bucket/k.tar"), "s3://bucket/k.tar");
  EXPECT_EQ(detail::redact_url("pipe:curl https://u:p@h/x"), "pipe:curl https://u:p@h/x");  // a command is shown as given
  EXPECT_EQ(detail::redact_url("data/x.tar"), "data/x.tar");
}

TEST(RemoteTest, PipeRecordsEqualLocalOnes) {
  TempDir d;
  const std::string local = make_shards(d, 3, 5);
  auto here = open_shards({local});
  auto there = open_shards({"pipe:cat " + local});
  ASSERT_EQ(there->size(), here->size());
  EXPECT_EQ(there->shard_starts(), here->shard_starts());
  EXPECT_TRUE(there->wants_plan());
  EXPECT_FALSE(here->wants_plan());
  std::vector<std::uint8_t> a, b;
  for (std::size_t i = 0; i < here->size(); ++i) {  // no plan: every read is a stray one
    EXPECT_EQ(there->label(i), here->label(i));
    ASSERT_TRUE(here->read(i, &a).ok());
    ASSERT_TRUE(there->read(i, &b).ok());
    EXPECT_EQ(a, b) << i;
  }
  Stats s;
  there->io_stats(&s);
  EXPECT_TRUE(s.remote.active);
  EXPECT_EQ(s.remote.index, "scan");
  EXPECT_EQ(s.remote.stray_reads, here->size());
}

TEST(RemoteTest, PipeBatchesEqualLocalAndShardsAreReleasedAfterUse) {
  TempDir d;
  const std::string local = make_shards(d, 6, 7);
  for (std::size_t window : {0u, 1u, 2u}) {
    Loader here(local, options(window));
    Loader there("pipe:cat " + local, options(window));
    for (std::uint64_t e : {0u, 1u}) {
      EXPECT_EQ(epoch(there, e), epoch(here, e)) << "window " << window << " epoch " << e;
      const Stats s = there.stats();
      EXPECT_TRUE(s.remote.active);
      EXPECT_EQ(s.corrupt, 0u);
    }
    const Stats s = there.stats();
    // Each shard is fetched once per epoch (plus the scan at open, the next
    // epoch's first ones ahead, and a stray read at most for the record the
    // loader looks at before its plan).
    EXPECT_LE(s.remote.requests, 6u * 4 + 2) << "window " << window;
    EXPECT_EQ(s.remote.retries.at("pipe"), 0u);
  }
}

TEST(RemoteTest, ShardsAreHeldFromFirstToLastUseAndReleasedAfter) {
  TempDir d;
  const std::string local = make_shards(d, 4, 6);
  RemoteOptions r;
  r.connections = 2;
  auto src = open_shards({"pipe:cat " + local}, "cls", "", r);
  auto here = open_shards({local});
  std::vector<std::uint32_t> order(src->size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::uint32_t>(order.size() - 1 - i);
  struct Listed final : RecordOrder {  // the epoch's records by position, as a list
    const std::vector<std::uint32_t>* list;
    explicit Listed(const std::vector<std::uint32_t>* l) : list(l) {}
    std::size_t size() const override { return list->size(); }
    std::uint32_t at(std::size_t pos) const override { return (*list)[pos]; }
  };
  src->plan(Listed(&order), 0);
  std::vector<std::uint8_t> a, b;
  for (std::size_t p = 0; p < order.size(); ++p) {
    ASSERT_TRUE(src->read(order[p], &a).ok());
    ASSERT_TRUE(here->read(order[p], &b).ok());
    EXPECT_EQ(a, b);
    src->progress(p + 1);
  }
  // Released once read through (a fetch still finishing, its command
  // exiting, is released when it ends: waited for, bounded).
  Stats s;
  src->io_stats(&s);
  for (int i = 0; i < 1000 && s.remote.resident_bytes > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    src->io_stats(&s);
  }
  EXPECT_EQ(s.remote.resident_bytes, 0u);
  EXPECT_EQ(s.remote.stray_reads, 0u);  // every read was planned
  EXPECT_EQ(s.remote.requests, 4u + 4u);  // the scans at open, then each shard once
}

// The plan per shard (issue 39): with plan_walk 2 every window but the
// epoch's first and last positions is planned as a whole (plan_uses), not
// position by position; read in order, each shard the rank uses is fetched
// once, no read falls outside the plan, the bytes are the local shards',
// and every shard is released once read through.
TEST(RemoteTest, APerShardPlanFetchesEachShardOnceAndReleasesIt) {
  TempDir d;
  const std::string local = make_shards(d, 8, 9);
  auto here = open_shards({local});
  struct Case {
    std::size_t window;
    int world, rank;
  };
  for (const Case c : {Case{2, 1, 0}, Case{2, 2, 1}, Case{3, 3, 2}, Case{0, 1, 0}, Case{0, 2, 0}}) {
    detail::ShardOptions opt;
    opt.plan_walk = 2;
    RemoteOptions r;
    r.connections = 2;
    auto src = detail::open_remote_shards({"pipe:cat " + local}, opt, r);
    detail::OrderParams p;
    p.dataset_size = src->size();
    p.shard_starts = src->shard_starts();
    p.batch_size = 4;
    p.shuffle = true;
    p.seed = 3;
    p.shuffle_window = c.window;
    p.world_size = c.world;
    p.rank = c.rank;
    const detail::RankOrder order(p, 1, {});
    std::set<std::size_t> shards;
    for (std::size_t k = 0; k < order.size(); ++k) {
      const auto rec = order.at(k);
      shards.insert(static_cast<std::size_t>(
          std::upper_bound(p.shard_starts.begin(), p.shard_starts.end(), rec) - p.shard_starts.begin() - 1));
    }
    src->plan(order, 0);
    std::vector<std::uint8_t> a, b;
    for (std::size_t k = 0; k < order.size(); ++k) {
      ASSERT_TRUE(src->read(order.at(k), &a).ok());
      ASSERT_TRUE(here->read(order.at(k), &b).ok());
      EXPECT_EQ(a, b);
      src->progress(k + 1);
    }
    Stats s;
    src->io_stats(&s);
    for (int i = 0; i < 1000 && s.remote.resident_bytes > 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      src->io_stats(&s);
    }
    const std::string what = "window " + std::to_string(c.window) + " world " + std::to_string(c.world);
    EXPECT_EQ(s.remote.resident_bytes, 0u) << what;
    EXPECT_EQ(s.remote.stray_reads, 0u) << what;
    EXPECT_EQ(s.remote.requests, 8u + shards.size()) << what << ": the scans at open, then each shard used once";
  }
}

TEST(RemoteTest, AnEpochThatCannotFitItsBudgetIsRefusedNamingTheWindowThatFits) {
  TempDir d;
  const std::string local = make_shards(d, 6, 7);
  LoaderOptions o = options(0);
  o.memory_budget = 1;  // smaller than any shard
  try {
    Loader l("pipe:cat " + local, o);
    FAIL() << "a full shuffle over 6 shards fits in 1 byte?";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("shuffle_window="), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cache_dir="), std::string::npos) << e.what();
  }
}

TEST(RemoteTest, AFailingCommandIsNamedAndNeverSkipped) {
  TempDir d;
  (void)make_shards(d, 2, 3);
  RemoteOptions r;
  r.retries = 1;
  try {
    (void)open_shards({"pipe:echo no such bucket >&2; exit 7"}, "cls", "", r);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::kUnavailable);
    const std::string m = e.what();
    EXPECT_NE(m.find("pipe:echo no such bucket"), std::string::npos) << m;
    EXPECT_NE(m.find("status 7"), std::string::npos) << m;
    EXPECT_NE(m.find("no such bucket"), std::string::npos) << m;
    EXPECT_NE(m.find("2 attempts"), std::string::npos) << m;
  }
  // A command that works at open (the index scan) and fails later: the
  // batch raises whatever on_corrupt says, and nothing is counted corrupt.
  testing::write_file(d.file("once.sh"), "if [ -e " + d.file("ran") + " ]; then echo shard gone >&2; exit 9; fi\n"
                                         "touch " + d.file("ran") + "; cat " + d.file("s-1.tar") + "\n");
  LoaderOptions o = options(0);
  o.shuffle = false;
  o.remote.retries = 0;
  o.on_corrupt = OnCorrupt::kSkip;
  Loader l("pipe:{cat " + d.file("s-0.tar") + ",sh " + d.file("once.sh") + "}", o);
  bool raised = false;
  try {
    for (const Batch& b : l) (void)b;
  } catch (const Error& e) {
    raised = true;
    EXPECT_EQ(e.code(), Code::kUnavailable);
    EXPECT_NE(std::string(e.what()).find("once.sh"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("shard gone"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(raised);
  EXPECT_EQ(l.stats().corrupt, 0u);
}

}  // namespace
}  // namespace stoker
