#include "order/order.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <tuple>

namespace stoker::detail {
namespace {

OrderParams params(std::size_t n, std::size_t batch, bool shuffle, bool drop_last, int rank = 0, int world = 1) {
  OrderParams p;
  p.dataset_size = n;
  p.batch_size = batch;
  p.shuffle = shuffle;
  p.seed = 42;
  p.drop_last = drop_last;
  p.rank = rank;
  p.world_size = world;
  return p;
}

TEST(OrderTest, NoShuffleIsIdentity) {
  auto seq = epoch_order(params(/*n=*/10, /*batch=*/3, /*shuffle=*/false, /*drop_last=*/false), 5);
  std::vector<std::uint32_t> want(10);
  std::iota(want.begin(), want.end(), 0u);
  EXPECT_EQ(seq, want);
}

TEST(OrderTest, EachEpochIsADifferentPermutation) {
  auto p = params(1000, 16, true, false);
  std::set<std::vector<std::uint32_t>> seen;
  for (std::uint64_t e = 0; e < 5; ++e) {
    auto seq = epoch_order(p, e);
    auto sorted = seq;
    std::sort(sorted.begin(), sorted.end());
    for (std::uint32_t i = 0; i < 1000; ++i) ASSERT_EQ(sorted[i], i);
    EXPECT_EQ(seq, epoch_order(p, e)) << "a function of (seed, epoch)";
    seen.insert(seq);
  }
  EXPECT_EQ(seen.size(), 5u);
  auto other_seed = p;
  other_seed.seed = 43;
  EXPECT_NE(epoch_order(p, 0), epoch_order(other_seed, 0));
}

TEST(OrderTest, ShufflePositionsAreUniform) {
  // Where record 0 lands over many epochs: roughly uniform over 8 positions.
  auto p = params(8, 8, true, false);
  std::map<std::size_t, int> where;
  for (std::uint64_t e = 0; e < 8000; ++e) {
    auto seq = epoch_order(p, e);
    where[static_cast<std::size_t>(std::find(seq.begin(), seq.end(), 0u) - seq.begin())]++;
  }
  for (const auto& [pos, count] : where) EXPECT_NEAR(count, 1000, 150) << "position " << pos;
}

class ShardTest : public ::testing::TestWithParam<std::tuple<std::size_t, std::size_t, int, bool>> {};

TEST_P(ShardTest, RanksCoverTheEpochWithEqualBatchCounts) {
  auto [n, batch, world, drop_last] = GetParam();
  std::vector<int> count(n, 0);
  std::set<std::size_t> batch_counts, sample_counts;
  std::size_t total = 0;
  for (int r = 0; r < world; ++r) {
    auto p = params(n, batch, true, drop_last, r, world);
    auto seq = epoch_order(p, 3);
    EXPECT_EQ(seq.size(), samples_per_rank(p));
    batch_counts.insert(batches_per_rank(p));
    sample_counts.insert(seq.size());
    if (drop_last) {
      EXPECT_EQ(seq.size() % batch, 0u);
    }
    for (auto i : seq) count[i]++;
    total += seq.size();
  }
  EXPECT_EQ(batch_counts.size(), 1u);
  EXPECT_EQ(sample_counts.size(), 1u);
  if (drop_last) {
    for (int c : count) EXPECT_LE(c, 1);
    EXPECT_GE(total + static_cast<std::size_t>(world) * batch, n);
  } else {
    for (int c : count) EXPECT_GE(c, 1);
    EXPECT_LT(total - n, static_cast<std::size_t>(world)) << "padding only";
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, ShardTest,
                         ::testing::Combine(::testing::Values(1, 7, 37, 64, 1000), ::testing::Values(1, 4, 64),
                                            ::testing::Values(1, 2, 3), ::testing::Bool()));

}  // namespace
}  // namespace stoker::detail

namespace stoker::detail {
namespace {

// Shard layouts: uneven sizes; (dataset size, shard sizes...).
class ByShardTest : public ::testing::TestWithParam<std::tuple<std::vector<std::size_t>, std::size_t, int, bool>> {};

TEST_P(ByShardTest, RanksSplitByShardWithTheSameGuarantees) {
  auto [sizes, batch, world, drop_last] = GetParam();
  OrderParams p;
  p.batch_size = batch;
  p.shuffle = true;
  p.seed = 9;
  p.drop_last = drop_last;
  p.world_size = world;
  for (std::size_t s : sizes) {
    p.shard_starts.push_back(p.dataset_size);
    p.dataset_size += s;
  }
  ASSERT_EQ(split_by_shard(p), sizes.size() >= static_cast<std::size_t>(world) && world > 1);
  std::vector<int> count(p.dataset_size, 0);
  std::set<std::size_t> lens;
  std::size_t total = 0;
  for (int r = 0; r < world; ++r) {
    p.rank = r;
    auto seq = epoch_order(p, 4);
    lens.insert(seq.size());
    EXPECT_EQ(seq, epoch_order(p, 4));
    for (auto i : seq) count[i]++;
    total += seq.size();
  }
  EXPECT_EQ(lens.size(), 1u);
  if (drop_last) {
    for (int c : count) EXPECT_LE(c, 1);
  } else {
    for (int c : count) EXPECT_GE(c, 1);
    EXPECT_LT(total - p.dataset_size, static_cast<std::size_t>(world));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, ByShardTest,
    ::testing::Combine(::testing::Values(std::vector<std::size_t>{10, 10, 10, 10}, std::vector<std::size_t>{50, 3, 7},
                                         std::vector<std::size_t>{1, 1, 1, 1, 1, 30}, std::vector<std::size_t>{5}),
                       ::testing::Values(1, 4), ::testing::Values(1, 2, 3), ::testing::Bool()));

TEST(ByShardTest, RanksReadMostlyTheirOwnShards) {
  OrderParams p;
  p.batch_size = 8;
  p.shuffle = true;
  p.world_size = 2;
  for (int s = 0; s < 8; ++s) {
    p.shard_starts.push_back(p.dataset_size);
    p.dataset_size += 100;
  }
  for (int r = 0; r < 2; ++r) {
    p.rank = r;
    std::set<std::size_t> shards;
    for (auto i : epoch_order(p, 0)) shards.insert(i / 100);
    EXPECT_EQ(shards.size(), 4u) << "rank " << r << " reads 4 of the 8 shards";
  }
}

}  // namespace
}  // namespace stoker::detail

// Elastic resume: an epoch run on a chain of topologies (world_size,
// batch_size, batches each rank handed out), the last run to its end.
namespace stoker::detail {
namespace {

struct Topo {
  int world;
  std::size_t batch;
  std::size_t done;  // ignored for the last: it runs to the end
};

// (dataset size, shard sizes or none, drop_last, the chain)
using ElasticCase = std::tuple<std::size_t, bool, bool, std::vector<Topo>>;
class ElasticTest : public ::testing::TestWithParam<ElasticCase> {};

TEST_P(ElasticTest, EveryRecordOnceAcrossTheChainWithEqualSharesPerSegment) {
  auto [n, sharded, drop_last, chain] = GetParam();
  OrderParams base = params(n, 1, true, drop_last);
  if (sharded) {
    for (std::size_t s = 0; s < n; s += 7) base.shard_starts.push_back(s);  // shards of 7
  }
  const std::uint64_t epoch = 3;
  std::vector<Segment> done;
  std::vector<int> count(n, 0);
  std::size_t padding = 0;
  for (std::size_t s = 0; s < chain.size(); ++s) {
    const Topo& t = chain[s];
    const bool last = s + 1 == chain.size();
    std::set<std::size_t> lens;
    std::vector<int> seg_count(n, 0);
    std::size_t seg_total = 0;
    for (int r = 0; r < t.world; ++r) {
      OrderParams p = base;
      p.world_size = t.world;
      p.rank = r;
      p.batch_size = t.batch;
      auto seq = resumed_order(p, epoch, done);
      if (done.empty()) {
        EXPECT_EQ(seq, epoch_order(p, epoch)) << "no earlier part: a fresh epoch";
      }
      EXPECT_EQ(seq, resumed_order(p, epoch, done)) << "a function of its inputs";
      if (drop_last) {
        EXPECT_EQ(seq.size() % t.batch, 0u) << "drop_last: whole batches";
      }
      lens.insert(seq.size());
      const std::size_t upto = last ? seq.size() : std::min(seq.size(), t.done * t.batch);
      for (std::size_t i = 0; i < upto; ++i) {
        ++count[seq[i]];
        ++seg_count[seq[i]];
      }
      seg_total += seq.size();
    }
    EXPECT_EQ(lens.size(), 1u) << "segment " << s << ": every rank the same count";
    std::size_t distinct = 0;
    for (int c : seg_count) distinct += c > 0;
    if (last) padding += seg_total - distinct;  // repeats within the last segment are its padding
    if (!last) {
      for (std::size_t i = 0; i < n; ++i) padding += seg_count[i] > 1 ? static_cast<std::size_t>(seg_count[i] - 1) : 0;
      done.push_back({t.world, t.batch, t.done});
    }
  }
  std::size_t extra = 0, missing = 0;
  for (int c : count) {
    extra += c > 1 ? static_cast<std::size_t>(c - 1) : 0;
    missing += c == 0;
  }
  EXPECT_EQ(extra, padding) << "a record handed out twice other than as padding";
  const Topo& end = chain.back();
  if (drop_last) {
    EXPECT_EQ(extra, 0u);
    // Only the last segment drops: fewer than one record per rank, or the
    // partial batches (at most world * batch).
    EXPECT_LT(missing, static_cast<std::size_t>(end.world) * end.batch + static_cast<std::size_t>(end.world));
  } else {
    EXPECT_EQ(missing, 0u) << "every record of the epoch handed out";
    EXPECT_LT(padding, static_cast<std::size_t>(end.world) * chain.size());
  }
}

INSTANTIATE_TEST_SUITE_P(
    Chains, ElasticTest,
    ::testing::Combine(::testing::Values(std::size_t{1}, std::size_t{37}, std::size_t{100}), ::testing::Bool(),
                       ::testing::Bool(),
                       ::testing::Values(std::vector<Topo>{{2, 4, 2}, {1, 4, 0}}, std::vector<Topo>{{2, 4, 2}, {3, 4, 0}},
                                         std::vector<Topo>{{2, 3, 1}, {3, 5, 0}},
                                         std::vector<Topo>{{3, 2, 4}, {2, 5, 1}, {4, 3, 0}},
                                         std::vector<Topo>{{2, 4, 0}, {3, 4, 0}})));

// Resuming on the saved topology with no earlier part is the same order.
TEST(ElasticTest, NoEarlierPartIsTheFreshOrder) {
  for (int world : {1, 2, 3}) {
    for (int r = 0; r < world; ++r) {
      auto p = params(50, 4, true, false, r, world);
      EXPECT_EQ(resumed_order(p, 1, {}), epoch_order(p, 1));
    }
  }
}

// After a split-by-shard part, each new rank reads on from few old lists:
// the rest of the epoch keeps most of its shard locality.
TEST(ElasticTest, ShardSplitLocalityMostlySurvives) {
  OrderParams p = params(400, 8, true, false);
  for (std::size_t s = 0; s < 400; s += 20) p.shard_starts.push_back(s);  // 20 shards of 20
  std::vector<Segment> done{{4, 8, 3}};
  p.world_size = 2;
  for (int r = 0; r < 2; ++r) {
    p.rank = r;
    auto seq = resumed_order(p, 0, done);
    std::set<std::size_t> shards;
    for (auto rec : seq) shards.insert(rec / 20);
    // 4 old ranks held 5 shards each; a new rank takes the rest of two old lists.
    EXPECT_LE(shards.size(), 11u) << "rank " << r;
  }
}

}  // namespace
}  // namespace stoker::detail

namespace stoker::detail {
namespace {

// shuffle_window: (shard sizes, window, world, drop_last).
class WindowTest
    : public ::testing::TestWithParam<std::tuple<std::vector<std::size_t>, std::size_t, int, bool>> {
 protected:
  OrderParams layout(bool shuffle) const {
    const auto& [sizes, window, world, drop_last] = GetParam();
    OrderParams p;
    p.batch_size = 4;
    p.shuffle = shuffle;
    p.seed = 5;
    p.drop_last = drop_last;
    p.world_size = world;
    p.shuffle_window = window;
    for (std::size_t s : sizes) {
      p.shard_starts.push_back(p.dataset_size);
      p.dataset_size += s;
    }
    return p;
  }
  static std::size_t shard_of(const OrderParams& p, std::uint32_t rec) {
    return static_cast<std::size_t>(std::upper_bound(p.shard_starts.begin(), p.shard_starts.end(), rec) -
                                    p.shard_starts.begin()) - 1;
  }
  // The most shards "open" at once along seq: begun and not yet finished
  // (padding, at the end, left out: it repeats the epoch's first records).
  static std::size_t most_open(const OrderParams& p, const std::vector<std::uint32_t>& seq, std::size_t real) {
    std::map<std::size_t, std::pair<std::size_t, std::size_t>> span;  // shard -> first, last position
    for (std::size_t t = 0; t < real; ++t) {
      const std::size_t s = shard_of(p, seq[t]);
      auto it = span.find(s);
      if (it == span.end()) {
        span[s] = {t, t};
      } else {
        it->second.second = t;
      }
    }
    std::size_t most = 0;
    for (std::size_t t = 0; t < real; ++t) {
      std::size_t open = 0;
      for (const auto& [s, fl] : span) open += fl.first <= t && t <= fl.second;
      most = std::max(most, open);
    }
    return most;
  }
};

TEST_P(WindowTest, WithoutShuffleItIsTheUsualOrder) {
  OrderParams p = layout(false), plain = p;
  plain.shuffle_window = 0;
  for (int r = 0; r < p.world_size; ++r) {
    p.rank = plain.rank = r;
    EXPECT_EQ(epoch_order(p, 3), epoch_order(plain, 3)) << "rank " << r;
  }
}

TEST_P(WindowTest, EveryRecordOnceAndAtMostWindowShardsOpenPerRank) {
  OrderParams p = layout(true);
  const auto world = static_cast<std::size_t>(p.world_size);
  std::vector<int> count(p.dataset_size, 0);
  std::set<std::size_t> lens;
  std::size_t total = 0;
  for (int r = 0; r < p.world_size; ++r) {
    p.rank = r;
    const auto seq = epoch_order(p, 7);
    EXPECT_EQ(seq, epoch_order(p, 7));  // a function of (seed, epoch)
    lens.insert(seq.size());
    total += seq.size();
    for (auto i : seq) count[i]++;
    // Each shard is one run of a rank's list (a surplus tail another's),
    // and windows are whole runs: at most W shards are read at once. (Not
    // checked where padding repeats the epoch's first records at the end.)
    if (p.drop_last || world == 1) {
      EXPECT_LE(most_open(p, seq, seq.size()), p.shuffle_window) << "rank " << r;
    }
  }
  EXPECT_EQ(lens.size(), 1u);
  if (p.drop_last) {
    for (int c : count) EXPECT_LE(c, 1);
  } else {
    for (int c : count) EXPECT_GE(c, 1);
    EXPECT_LT(total - p.dataset_size, world);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, WindowTest,
    ::testing::Combine(::testing::Values(std::vector<std::size_t>{10, 10, 10, 10, 10, 10},
                                         std::vector<std::size_t>{50, 3, 7, 20, 1}, std::vector<std::size_t>{5}),
                       ::testing::Values(1, 2, 100), ::testing::Values(1, 2, 3), ::testing::Bool()));

TEST(WindowOrderTest, ShufflesWithinWindowsAndDiffersByEpoch) {
  OrderParams p;
  p.batch_size = 8;
  p.shuffle = true;
  p.seed = 1;
  p.shuffle_window = 2;
  for (std::size_t s = 0; s < 200; s += 20) p.shard_starts.push_back(s);  // 10 shards of 20
  p.dataset_size = 200;
  const auto a = epoch_order(p, 0), b = epoch_order(p, 1);
  EXPECT_NE(a, b);
  // Each block of 40 holds exactly two whole shards, not in index order.
  for (std::size_t w = 0; w < 5; ++w) {
    std::set<std::size_t> shards;
    for (std::size_t t = w * 40; t < w * 40 + 40; ++t) shards.insert(a[t] / 20);
    EXPECT_EQ(shards.size(), 2u) << "window " << w;
    EXPECT_FALSE(std::is_sorted(a.begin() + static_cast<std::ptrdiff_t>(w * 40),
                                a.begin() + static_cast<std::ptrdiff_t>(w * 40 + 40)));
  }
  // Resuming on the same topology goes on exactly where the epoch stopped.
  std::vector<std::uint32_t> rest(a.begin() + 24, a.end());
  EXPECT_EQ(resumed_order(p, 0, {{1, 8, 3}}), rest);
  // Elastic: 2 ranks handed out 3 batches each, the rest on 3 ranks: every
  // record of the epoch exactly once (drop_last off: padding repeats some).
  OrderParams q = p;
  std::vector<int> count(200, 0);
  for (int r = 0; r < 2; ++r) {
    q.world_size = 2;
    q.rank = r;
    const auto seq = epoch_order(q, 0);
    for (std::size_t t = 0; t < 24; ++t) count[seq[t]]++;
  }
  for (int r = 0; r < 3; ++r) {
    q.world_size = 3;
    q.rank = r;
    for (auto rec : resumed_order(q, 0, {{2, 8, 3}})) count[rec]++;
  }
  for (int c : count) EXPECT_GE(c, 1);
  EXPECT_LE(std::accumulate(count.begin(), count.end(), 0), 200 + 2);
}

}  // namespace
}  // namespace stoker::detail
