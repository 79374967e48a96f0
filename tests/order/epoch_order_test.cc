// The order as a closed form (order/bijection.h, order/order.h EpochOrder):
// the bijection is a permutation; the view yields what the documented list
// algorithms yield (a materialised reference below); every record once per
// epoch across ranks; elastic resume's pool built from the view; the view
// of a billion records holds no per-record memory.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <random>
#include <set>
#include <tuple>
#include <unordered_set>

#include "order/bijection.h"
#include "order/order.h"
#include "order/rng.h"

namespace stoker::detail {
namespace {

TEST(BijectionTest, IsAPermutationForEverySmallN) {
  for (std::uint64_t seed : {0ULL, 1ULL, 42ULL, 0xdeadbeefULL}) {
    for (std::uint64_t n = 1; n <= 2000; ++n) {
      const Bijection b(n, mix_key(seed, n, kStreamOrder, 0));
      std::vector<char> seen(n, 0);
      for (std::uint64_t i = 0; i < n; ++i) {
        const std::uint64_t v = b(i);
        ASSERT_LT(v, n) << "n=" << n << " seed=" << seed;
        ASSERT_FALSE(seen[v]) << "n=" << n << " seed=" << seed << " i=" << i;
        seen[v] = 1;
      }
    }
  }
}

TEST(BijectionTest, WithoutShuffleIsTheIdentityAndKeysDiffer) {
  const Bijection id(1000, 7, /*shuffle=*/false);
  for (std::uint64_t i = 0; i < 1000; ++i) ASSERT_EQ(id(i), i);
  const Bijection a(1000, 1), b(1000, 2);
  std::size_t same = 0;
  for (std::uint64_t i = 0; i < 1000; ++i) same += a(i) == b(i);
  EXPECT_LT(same, 20u);  // two keys agree at ~1 position of 1000 by chance
}

// n = 10^7: 10^5 distinct positions sampled; their images never collide, and
// their residues mod 7 are uniform: for a uniform permutation the statistic
// is chi-square with 6 degrees of freedom, P(X > 40) = e^-20 (1 + 20 + 200)
// < 5e-7.
TEST(BijectionTest, LargeNSampledNoCollisionsAndUniformResidues) {
  const std::uint64_t n = 10'000'000;
  for (std::uint64_t seed : {3ULL, 11ULL}) {
    const Bijection b(n, mix_key(seed, 0, kStreamOrder, 0));
    std::mt19937_64 gen(seed);
    std::unordered_set<std::uint64_t> positions, images;
    std::vector<double> counts(7, 0.0);
    while (positions.size() < 100'000) {
      const std::uint64_t i = gen() % n;
      if (!positions.insert(i).second) continue;
      const std::uint64_t v = b(i);
      ASSERT_LT(v, n);
      ASSERT_TRUE(images.insert(v).second) << "collision at " << i;
      counts[v % 7] += 1;
    }
    double chi = 0;
    for (double c : counts) chi += (c - 1e5 / 7) * (c - 1e5 / 7) / (1e5 / 7);
    EXPECT_LT(chi, 40.0) << "seed " << seed;
  }
}

// The documented algorithms (order.h: epoch_order), materialised: what the
// view must equal. Shuffling a list applies a Bijection: l'[j] = l[b(j)].
void permute(std::vector<std::uint32_t>* l, std::uint64_t key, bool shuffle) {
  const Bijection b(l->size(), key, shuffle);
  const auto c = *l;
  for (std::size_t j = 0; j < c.size(); ++j) (*l)[j] = c[b(j)];
}

std::vector<std::uint32_t> reference(const OrderParams& p, std::uint64_t epoch) {
  const std::size_t n = p.dataset_size, w = static_cast<std::size_t>(p.world_size), S = p.shard_starts.size();
  const std::size_t share = p.drop_last ? n / w : (n + w - 1) / w, per_rank = samples_per_rank(p);
  auto strided = [&](const std::vector<std::uint32_t>& all) {
    std::vector<std::uint32_t> out;
    for (std::size_t k = 0; k < per_rank && !all.empty(); ++k) out.push_back(all[(p.rank + k * w) % all.size()]);
    return out;
  };
  const bool windowed = p.shuffle_window > 0 && S > 0, split = split_by_shard(p);
  if (!windowed && !split) {
    std::vector<std::uint32_t> all(n);
    std::iota(all.begin(), all.end(), 0u);
    permute(&all, mix_key(p.seed, epoch, kStreamOrder, 0), p.shuffle);
    return strided(all);
  }
  std::vector<std::size_t> shards(S);
  std::iota(shards.begin(), shards.end(), std::size_t{0});
  if (p.shuffle) {
    Rng rng(mix_key(p.seed, epoch, kStreamOrder, 1));
    for (std::size_t i = S; i-- > 1;) std::swap(shards[i], shards[rng.below(i + 1)]);
  }
  const std::size_t m = split ? w : 1;
  std::vector<std::vector<std::uint32_t>> lists(m);
  std::vector<std::vector<std::size_t>> shard_of(m);
  for (std::size_t k = 0; k < S; ++k) {
    const std::size_t s = shards[k], end = s + 1 < S ? p.shard_starts[s + 1] : n;
    for (std::size_t i = p.shard_starts[s]; i < end; ++i) {
      lists[k % m].push_back(static_cast<std::uint32_t>(i));
      shard_of[k % m].push_back(s);
    }
  }
  if (!windowed) {
    for (std::size_t q = 0; q < m; ++q) permute(&lists[q], mix_key(p.seed, epoch, kStreamOrder, 2 + q), p.shuffle);
  }
  if (split) {  // balance
    std::vector<std::uint32_t> surplus;
    std::vector<std::size_t> surplus_shard;
    for (std::size_t q = 0; q < m; ++q) {
      for (std::size_t i = share; i < lists[q].size(); ++i) {
        surplus.push_back(lists[q][i]);
        surplus_shard.push_back(shard_of[q][i]);
      }
      if (lists[q].size() > share) lists[q].resize(share), shard_of[q].resize(share);
    }
    std::size_t next = 0;
    for (std::size_t q = 0; q < m; ++q) {
      while (lists[q].size() < share && next < surplus.size()) {
        shard_of[q].push_back(surplus_shard[next]);
        lists[q].push_back(surplus[next++]);
      }
    }
  }
  if (windowed && p.shuffle) {
    for (std::size_t q = 0; q < m; ++q) {
      std::size_t begin = 0, window = 0;
      while (begin < lists[q].size()) {
        std::size_t end = begin;
        for (std::size_t runs = 0; runs < p.shuffle_window && end < lists[q].size(); ++runs) {
          const std::size_t s = shard_of[q][end];
          while (end < lists[q].size() && shard_of[q][end] == s) ++end;
        }
        std::vector<std::uint32_t> part(lists[q].begin() + begin, lists[q].begin() + end);
        permute(&part, mix_key(p.seed, epoch, kStreamWindow, (static_cast<std::uint64_t>(q) << 32) | window), true);
        std::copy(part.begin(), part.end(), lists[q].begin() + begin);
        begin = end;
        ++window;
      }
    }
  }
  if (!split) return strided(lists[0]);
  std::size_t k = 0;  // pad, as order.cc's comment says
  for (auto& l : lists) {
    while (l.size() < share) l.push_back(lists[0].empty() ? 0u : lists[0][k++ % lists[0].size()]);
  }
  auto out = lists[static_cast<std::size_t>(p.rank)];
  out.resize(per_rank);
  return out;
}

std::vector<std::size_t> random_shards(std::size_t n, std::size_t count, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<std::size_t> cuts{0};
  for (std::size_t i = 1; i < count; ++i) cuts.push_back(gen() % (n + 1));  // empty shards too
  std::sort(cuts.begin(), cuts.end());
  return cuts;
}

// (world, drop_last, shards (0: none), window)
class ViewTest : public ::testing::TestWithParam<std::tuple<int, bool, int, int>> {};

TEST_P(ViewTest, EqualsTheReferenceAndHoldsEveryRecordOncePerEpoch) {
  const auto [world, drop_last, shards, window] = GetParam();
  for (std::size_t n : {0u, 1u, 5u, 37u, 100u, 257u}) {
    for (bool shuffle : {false, true}) {
      OrderParams p;
      p.dataset_size = n;
      p.batch_size = 4;
      p.shuffle = shuffle;
      p.seed = 9;
      p.drop_last = drop_last;
      p.world_size = world;
      if (shards > 0) p.shard_starts = random_shards(n, static_cast<std::size_t>(shards), n * 31 + 7);
      p.shuffle_window = static_cast<std::size_t>(window);
      if (p.shard_starts.empty()) p.shuffle_window = 0;
      std::vector<std::size_t> times(n, 0);
      std::size_t total = 0;
      const EpochOrder view(p, 3);
      for (int r = 0; r < world; ++r) {
        p.rank = r;
        const auto got = epoch_order(p, 3);
        ASSERT_EQ(got, reference(p, 3)) << "n=" << n << " rank " << r << " shuffle " << shuffle;
        ASSERT_EQ(got.size(), samples_per_rank(p));
        for (std::size_t k = 0; k < got.size(); ++k) ASSERT_EQ(view.at(r, k), got[k]);
        for (std::uint32_t rec : got) ++times[rec];
        total += got.size();
      }
      // Once each; padding (no drop_last) repeats fewer than `world`
      // records once more; drop_last leaves fewer than world * (batch + 1) out.
      std::size_t missing = 0, twice = 0;
      if (n < static_cast<std::size_t>(world)) {  // padding repeats records more often
        for (std::size_t t : times) EXPECT_GE(t, drop_last ? 0u : 1u);
        continue;
      }
      for (std::size_t t : times) {
        ASSERT_LE(t, 2u);
        missing += t == 0;
        twice += t == 2;
      }
      if (drop_last) {
        EXPECT_EQ(twice, 0u);
        EXPECT_EQ(total + missing, n);
      } else {
        EXPECT_EQ(missing, 0u) << "n=" << n;
        EXPECT_EQ(total, n + twice);
        EXPECT_LT(twice, static_cast<std::size_t>(world));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, ViewTest,
                         ::testing::Combine(::testing::Values(1, 2, 3, 7, 8), ::testing::Bool(),
                                            ::testing::Values(0, 5, 16), ::testing::Values(0, 2)));

// An elastic resume where a padding record is still to come on two old
// ranks (its own place and a padding place): the pool, built from the view,
// holds it once, as it holds every record no rank handed out once; the new
// ranks' padding repeats the pool's first records only.
TEST(ElasticViewTest, PaddedRecordStillToComeOnTwoOldRanksIsPooledOnce) {
  std::size_t cases = 0;
  for (std::uint64_t seed = 0; seed < 200 && cases < 5; ++seed) {
    OrderParams p;
    p.dataset_size = 41;  // 4 ranks of 11: 3 padding records
    p.batch_size = 1;
    p.shuffle = true;
    p.seed = seed;
    p.world_size = 4;
    p.shard_starts = random_shards(41, 6, seed);
    const std::size_t done_batches = 1, cut = done_batches * p.batch_size;
    std::vector<std::size_t> to_come(41, 0), handed(41, 0), ranks_to_come(41, 0);
    for (int r = 0; r < 4; ++r) {
      p.rank = r;
      const auto l = epoch_order(p, 0);
      std::vector<char> here(41, 0);
      for (std::size_t i = 0; i < l.size(); ++i) {
        if (i < cut) {
          ++handed[l[i]];
        } else {
          ++to_come[l[i]];
          if (!here[l[i]]) ++ranks_to_come[l[i]], here[l[i]] = 1;
        }
      }
    }
    std::uint32_t x = 41;
    for (std::uint32_t rec = 0; rec < 41; ++rec) {
      if (handed[rec] == 0 && ranks_to_come[rec] == 2) x = rec;
    }
    if (x == 41) continue;
    ++cases;
    for (int new_world : {3, 5}) {
      p.world_size = new_world;
      p.rank = 0;
      const std::vector<Segment> done{{4, 1, done_batches}};
      const auto pool = resume_pool(p, 0, done);
      EXPECT_EQ(std::count(pool.begin(), pool.end(), x), 1) << "seed " << seed;
      for (std::uint32_t rec = 0; rec < 41; ++rec) {
        EXPECT_EQ(static_cast<std::size_t>(std::count(pool.begin(), pool.end(), rec)), handed[rec] ? 0u : 1u);
      }
      std::vector<std::size_t> times(41, 0);
      for (int r = 0; r < new_world; ++r) {
        p.rank = r;
        for (std::uint32_t rec : resumed_order(p, 0, done)) ++times[rec];
      }
      const std::size_t share = (pool.size() + new_world - 1) / new_world;
      for (std::size_t i = 0; i < pool.size(); ++i) {
        const std::size_t pads = i < share * new_world - pool.size() ? 1 : 0;
        EXPECT_EQ(times[pool[i]], 1 + pads) << "pool[" << i << "]";
      }
    }
    p.world_size = 4;
  }
  EXPECT_GE(cases, 1u) << "no configuration with a padding record still to come on two ranks";
}

// A billion records: the view holds per-shard and per-rank tables only, and
// a rank's k-th record takes O(1) (plain) or O(log shards) time.
TEST(ViewMemoryTest, BillionRecordsWithoutPerRecordMemory) {
  OrderParams p;
  p.dataset_size = 1'000'000'000;
  p.batch_size = 256;
  p.shuffle = true;
  p.seed = 1;
  p.world_size = 1000;
  const EpochOrder plain(p, 0);
  EXPECT_EQ(plain.table_bytes(), 0u);
  EXPECT_EQ(plain.size(), 1'000'000u);
  std::set<std::uint32_t> first;
  for (int r = 0; r < 1000; r += 97) {
    for (std::size_t k = 0; k < 256; ++k) ASSERT_TRUE(first.insert(plain.at(r, k)).second);
  }
  p.shard_starts.clear();
  for (std::size_t s = 0; s < 100'000; ++s) p.shard_starts.push_back(s * 10'000);
  const EpochOrder sharded(p, 0);
  EXPECT_LT(sharded.table_bytes(), 100'000u * 64 + 1000u * 256);  // per shard and per rank, not per record
  p.shuffle_window = 4;
  const EpochOrder windowed(p, 0);
  EXPECT_LT(windowed.table_bytes(), 100'000u * 64 + 1000u * 256);
  std::mt19937_64 gen(5);
  for (const EpochOrder* v : {&plain, &sharded, &windowed}) {
    const auto t0 = std::chrono::steady_clock::now();
    std::uint64_t sum = 0;
    for (int i = 0; i < 100'000; ++i) sum += v->at(static_cast<int>(gen() % 1000), gen() % v->size());
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / 1e5;
    std::printf("k-th record of a random rank: %.0f ns (tables %zu bytes; checksum %llu)\n", ns, v->table_bytes(),
                static_cast<unsigned long long>(sum));
  }
}

}  // namespace
}  // namespace stoker::detail
