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
