// Mixtures: per-epoch draw counts, per-pass walks, the epoch's table, and the
// spread of sources through a shuffled, sharded epoch.
#include "order/mixture.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <numeric>
#include <set>

#include "order/order.h"

namespace stoker::detail {
namespace {

TEST(MixtureTest, CountsAreTheWeightsRoundedByLargestRemainder) {
  EXPECT_EQ(mixture_counts({0.8, 0.2}, 1000), (std::vector<std::uint64_t>{800, 200}));
  // 10 * (1/3, 1/3, 1/3) = 3.33 each: the one left over goes to the first.
  EXPECT_EQ(mixture_counts({1, 1, 1}, 10), (std::vector<std::uint64_t>{4, 3, 3}));
  // 7 * (0.5, 0.3, 0.2) = 3.5, 2.1, 1.4: remainders .5 > .4 > .1.
  EXPECT_EQ(mixture_counts({5, 3, 2}, 7), (std::vector<std::uint64_t>{4, 2, 1}));
  EXPECT_EQ(mixture_counts({0, 3, 0}, 5), (std::vector<std::uint64_t>{0, 5, 0}));
  for (std::uint64_t n : {1ull, 2ull, 999ull, 1000003ull}) {
    const auto c = mixture_counts({0.1, 0.7, 1e-9, 0.2}, n);
    EXPECT_EQ(std::accumulate(c.begin(), c.end(), std::uint64_t{0}), n) << n;
  }
}

TEST(MixtureTest, PassesArePermutationsANewOnePerPass) {
  const auto p0 = mixture_pass(7, true, 1, 0, 50), p1 = mixture_pass(7, true, 1, 1, 50);
  EXPECT_EQ(std::set<std::uint32_t>(p0.begin(), p0.end()).size(), 50u);
  EXPECT_EQ(std::set<std::uint32_t>(p1.begin(), p1.end()).size(), 50u);
  EXPECT_NE(p0, p1);
  EXPECT_NE(p0, mixture_pass(7, true, 2, 0, 50)) << "sources walk differently";
  EXPECT_NE(p0, mixture_pass(8, true, 1, 0, 50)) << "seeds walk differently";
  EXPECT_EQ(p0, mixture_pass(7, true, 1, 0, 50)) << "a function of (seed, source, pass)";
  std::vector<std::uint32_t> id(50);
  std::iota(id.begin(), id.end(), 0u);
  EXPECT_EQ(mixture_pass(7, false, 1, 3, 50), id);
}

// Source 1 (11 records) is drawn 30 times an epoch: across epochs its draws
// are whole passes, each a permutation, then a prefix of the next one; so
// after any number of epochs each record is drawn floor or ceil of
// draws / size times.
TEST(MixtureTest, EpochsContinueEachSourcesPasses) {
  const std::vector<std::uint64_t> sizes{40, 11}, starts{0, 40}, counts{20, 30};
  std::vector<std::uint32_t> all;  // source 1's draws, in draw order, over epochs
  for (std::uint64_t e = 0; e < 6; ++e) {
    const auto t = mixture_draws(sizes, starts, counts, 3, true, e);
    ASSERT_EQ(t.size(), 50u);
    for (std::size_t i = 0; i < 20; ++i) EXPECT_LT(t[i], 40u) << "source 0's positions come first";
    for (std::size_t i = 20; i < 50; ++i) {
      ASSERT_GE(t[i], 40u);
      all.push_back(t[i] - 40);
    }
    std::map<std::uint32_t, int> n;
    for (auto r : all) ++n[r];
    for (std::uint32_t r = 0; r < 11; ++r) {
      EXPECT_GE(n[r], static_cast<int>(all.size() / 11)) << "epoch " << e << " record " << r;
      EXPECT_LE(n[r], static_cast<int>((all.size() + 10) / 11)) << "epoch " << e << " record " << r;
    }
  }
  for (std::size_t pass = 0; pass < all.size() / 11; ++pass) {
    std::vector<std::uint32_t> want = mixture_pass(3, true, 1, pass, 11), got(all.begin() + 11 * pass,
                                                                             all.begin() + 11 * (pass + 1));
    EXPECT_EQ(got, want) << "pass " << pass;
  }
  // Source 0 (40 records, 20 an epoch): epochs 0 and 1 are pass 0, disjoint halves.
  const auto e0 = mixture_draws(sizes, starts, counts, 3, true, 0), e1 = mixture_draws(sizes, starts, counts, 3, true, 1);
  std::set<std::uint32_t> both(e0.begin(), e0.begin() + 20);
  both.insert(e1.begin(), e1.begin() + 20);
  EXPECT_EQ(both.size(), 40u);
}

TEST(MixtureTest, WithoutShuffleSourcesRunInTurnInIndexOrder) {
  const auto t = mixture_draws({3, 2}, {0, 3}, {4, 3}, 0, false, 1);
  // Source 0's draws 4..7 (passes 1, 2: 1 2 0 1), source 1's draws 3..5 (1 0 1).
  EXPECT_EQ(t, (std::vector<std::uint32_t>{1, 2, 0, 1, 4, 3, 4}));
}

// The epoch's positions shuffled and strided over ranks: a rank's share, and
// any part of it, holds each source about at its weight. Source 0's count
// in a window of m of rank 0's positions is hypergeometric (drawn without
// replacement from the epoch), so within the binomial 99.9% bound
// (3.29 standard deviations) with probability above 99.9%; seeds fixed.
TEST(MixtureTest, ShuffledEpochSpreadsSourcesAtTheirWeights) {
  const std::uint64_t n = 1'000'000;
  const auto counts = mixture_counts({0.8, 0.2}, n);
  ASSERT_EQ(counts[0], 800'000u);
  OrderParams p;
  p.dataset_size = n;
  p.batch_size = 256;
  p.shuffle = true;
  p.seed = 11;
  p.world_size = 4;
  for (int rank = 0; rank < 4; ++rank) {
    p.rank = rank;
    const auto seq = epoch_order(p, 5);
    ASSERT_EQ(seq.size(), n / 4);
    for (std::size_t m : {std::size_t{1000}, std::size_t{20'000}, n / 4}) {
      std::size_t first = 0;
      for (std::size_t i = 0; i < m; ++i) first += mixture_part_of_position(counts, seq[i]) == 0;
      const double mean = 0.8 * static_cast<double>(m), sd = std::sqrt(static_cast<double>(m) * 0.8 * 0.2);
      EXPECT_LE(std::abs(static_cast<double>(first) - mean), 3.29 * sd) << "rank " << rank << " window " << m;
    }
  }
}

}  // namespace
}  // namespace stoker::detail
