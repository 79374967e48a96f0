// The caches' memory: blocks are writable and distinct, freed blocks are
// counted as holes until their whole mapping is returned, and the cache's
// budget counts those holes.
#include "memory/arena.h"
#include "cache/sample_cache.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

namespace stoker::detail {
namespace {

constexpr bool kHeap = kArenaOnHeap;

TEST(ArenaTest, BlocksAreDistinctAlignedAndKeepTheirBytes) {
  auto arena = std::make_shared<Arena>(std::size_t{1} << 20);
  std::mt19937 rng(7);
  std::vector<ArenaBytes> blocks;
  for (int i = 0; i < 400; ++i) {
    // Sizes from 0 to past a quarter chunk (those get a mapping of their own).
    const std::size_t n = i % 50 == 0 ? (std::size_t{300} << 10) : rng() % 20000;
    blocks.emplace_back(arena, n);
    ASSERT_EQ(blocks.back().size(), n);
    ASSERT_EQ(reinterpret_cast<std::uintptr_t>(blocks.back().data()) % 16, 0u);
    std::memset(blocks.back().data(), i & 0xff, n);
  }
  for (int i = 0; i < 400; ++i) {
    const auto& b = blocks[static_cast<std::size_t>(i)];
    for (std::size_t k = 0; k < b.size(); k += 97) ASSERT_EQ(b.data()[k], i & 0xff) << i << " " << k;
  }
  if (!kHeap) {
    EXPECT_GE(arena->live(), 400u * 16);
  }
  blocks.clear();
  EXPECT_EQ(arena->live(), 0u);
}

TEST(ArenaTest, FreedBlocksAreHolesUntilTheirMappingIsReturned) {
  if (kHeap) GTEST_SKIP() << "heap blocks under AddressSanitizer";
  auto arena = std::make_shared<Arena>(std::size_t{1} << 20);
  // 2 MiB chunks at first (then doubling up to the 1 MiB asked: so 1 MiB).
  std::vector<ArenaBytes> a;
  for (int i = 0; i < 100; ++i) a.emplace_back(arena, 10000);  // fills most of the first chunk
  const std::uint64_t live = arena->live();
  EXPECT_EQ(arena->holes(), 0u);
  for (int i = 0; i < 100; i += 2) a[static_cast<std::size_t>(i)] = ArenaBytes();
  EXPECT_EQ(arena->holes(), live / 2);
  EXPECT_EQ(arena->live(), live / 2);
  // Moving on to a new chunk seals the old one; freeing the rest returns it.
  std::vector<ArenaBytes> b;
  for (int i = 0; i < 300; ++i) b.emplace_back(arena, 10000);
  a.clear();
  EXPECT_LT(arena->holes(), std::uint64_t{1} << 20);  // at most the current chunk's freed blocks
  b.clear();
  EXPECT_EQ(arena->live(), 0u);
}

// Several threads allocating and freeing at once (the workers filling and
// rewriting a cache): a chunk is populated ahead by one thread outside the
// lock while others bump and free in it, and a sealed chunk whose blocks are
// all freed during a populate is unmapped only after it (TSan and ASan run
// this too).
TEST(ArenaTest, ConcurrentAllocAndFreeKeepEveryBlocksBytes) {
  auto arena = std::make_shared<Arena>(std::size_t{8} << 20);
  constexpr int kThreads = 4, kRounds = 3000;
  std::vector<std::thread> threads;
  std::vector<int> bad(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(100 + t));
      std::vector<std::pair<ArenaBytes, std::uint8_t>> held;
      for (int i = 0; i < kRounds; ++i) {
        // Mostly JPEG-sized blocks, some past a quarter chunk (a mapping of their own).
        const std::size_t n = i % 500 == 0 ? (std::size_t{3} << 20) : 20000 + rng() % 100000;
        const auto v = static_cast<std::uint8_t>(rng());
        held.emplace_back(ArenaBytes(arena, n), v);
        std::memset(held.back().first.data(), v, n);
        if (held.size() > 40 || rng() % 3 == 0) {  // free a random one, checking its bytes first
          const std::size_t k = rng() % held.size();
          const auto& [b, w] = held[k];
          for (std::size_t j = 0; j < b.size(); j += 4099) bad[static_cast<std::size_t>(t)] += b.data()[j] != w;
          bad[static_cast<std::size_t>(t)] += b.data()[b.size() - 1] != w;
          held.erase(held.begin() + static_cast<std::ptrdiff_t>(k));
        }
      }
      for (const auto& [b, w] : held) bad[static_cast<std::size_t>(t)] += b.data()[0] != w;
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(bad[static_cast<std::size_t>(t)], 0) << "thread " << t;
  EXPECT_EQ(arena->live(), 0u);
}

TEST(ArenaTest, CacheBudgetCountsTheHolesOfReplacedEntries) {
  if (kHeap) GTEST_SKIP() << "heap blocks under AddressSanitizer";
  const std::size_t n = 64, size = 20000;
  const std::uint64_t per = size + sizeof(SampleCache::Entry) + 64;
  SampleCache cache(2 * n, 2 * per * n);
  std::vector<std::uint8_t> bytes(size, 1);
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(cache.insert(i, bytes.data(), size), SampleCache::Insert::kStored);
  // Replacing every other entry by one of half the size frees those
  // originals' memory only when their whole mapping empties (here never:
  // the others live on in it); what it cannot return yet counts against
  // the budget, so the entries' bytes plus the holes stay under it.
  const std::vector<std::uint8_t> half(size / 2, 2);
  for (std::size_t i = 0; i < n; i += 2) {
    auto old = cache.peek(i);
    ASSERT_TRUE(cache.replace(i, old, half.data(), half.size(), {}));
  }
  const std::uint64_t budget = 2 * per * n;
  EXPECT_GT(cache.holes(), 0u);
  // Counting the entries alone, (budget - bytes) / per more would fit.
  const std::uint64_t by_entries = (budget - cache.bytes()) / per;
  ASSERT_GE(by_entries, n);  // all of the second half
  std::uint64_t stored = 0;
  for (std::size_t i = n; i < 2 * n; ++i) stored += cache.insert(i, bytes.data(), size) == SampleCache::Insert::kStored;
  EXPECT_LT(stored, by_entries);
  EXPECT_LE(cache.bytes() + cache.holes(), budget);
  EXPECT_EQ(cache.peek(0)->size, size / 2);
  EXPECT_EQ(cache.peek(0)->data[0], 2);
  EXPECT_EQ(cache.peek(n)->data[size - 1], 1);
}

}  // namespace
}  // namespace stoker::detail
