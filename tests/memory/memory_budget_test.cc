// The memory budget: charges never take the accounts' sum above the limit
// (from 4 threads at once), a refused charge charges nothing, released bytes
// can be charged again, reservations keep their room from other accounts,
// and the holders (sample cache, volume cache, batch buffers) charge their
// accounts and release them when they go.
#include "memory/memory_budget.h"

#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "batch/slot_pool.h"
#include "cache/sample_cache.h"
#include "cache/volume_cache.h"
#include "stoker/stats.h"

namespace stoker::detail {
namespace {

constexpr MemoryAccount kAll[] = {MemoryAccount::kBatchBuffers, MemoryAccount::kRemoteShards,
                                  MemoryAccount::kVolumeCache, MemoryAccount::kSampleCache,
                                  MemoryAccount::kDecodeScratch};

std::uint64_t sum_of_accounts(const MemoryBudget& b) {
  std::uint64_t sum = 0;
  for (MemoryAccount a : kAll) sum += b.used(a);
  return sum;
}

TEST(MemoryBudgetTest, AccountsAreNamedOnce) {
  std::vector<std::string> names;
  for (MemoryAccount a : kAll) names.push_back(memory_account_name(a));
  EXPECT_EQ(names, (std::vector<std::string>{"batch_buffers", "remote_shards", "volume_cache", "sample_cache",
                                             "decode_scratch"}));
}

// A worker's scratch charge (MemoryCharge::grow_to): it only grows (a
// vector keeps its capacity), within its reservation and the room left,
// else as required, counted in over_bytes.
TEST(MemoryBudgetTest, AScratchChargeGrowsWithinTheBudgetElseAsRequired) {
  auto b = std::make_shared<MemoryBudget>(/*limit=*/1000);
  EXPECT_EQ(b->reserve(MemoryAccount::kDecodeScratch, 300), 300u);
  MemoryCharge scratch(b, MemoryAccount::kDecodeScratch);
  scratch.grow_to(200);
  EXPECT_EQ(b->used(MemoryAccount::kDecodeScratch), 200u);
  EXPECT_FALSE(b->try_charge(MemoryAccount::kSampleCache, 701)) << "the reservation's unused part is the scratch's";
  EXPECT_TRUE(b->try_charge(MemoryAccount::kSampleCache, 600));
  scratch.grow_to(150);  // never down
  EXPECT_EQ(scratch.bytes(), 200u);
  scratch.grow_to(400);  // within the reservation and the 100 bytes left
  EXPECT_EQ(b->used(MemoryAccount::kDecodeScratch), 400u);
  EXPECT_EQ(b->over_bytes(), 0u);
  scratch.grow_to(450);  // no room: required
  EXPECT_EQ(b->used(MemoryAccount::kDecodeScratch), 450u);
  EXPECT_EQ(b->over_bytes(), 50u);
  scratch.release_all();
  EXPECT_EQ(b->used(MemoryAccount::kDecodeScratch), 0u);
}

TEST(MemoryBudgetTest, ARefusedChargeChargesNothingAndAReleaseMakesRoom) {
  MemoryBudget b(/*limit=*/1000);
  EXPECT_TRUE(b.try_charge(MemoryAccount::kSampleCache, 600));
  EXPECT_TRUE(b.try_charge(MemoryAccount::kVolumeCache, 400));
  EXPECT_FALSE(b.try_charge(MemoryAccount::kSampleCache, 1));  // full: exactly at the limit
  EXPECT_EQ(b.used(MemoryAccount::kSampleCache), 600u);
  EXPECT_EQ(b.used(), 1000u);
  b.release(MemoryAccount::kVolumeCache, 150);
  EXPECT_EQ(b.room(MemoryAccount::kSampleCache), 150u);
  EXPECT_FALSE(b.try_charge(MemoryAccount::kSampleCache, 151));
  EXPECT_TRUE(b.try_charge(MemoryAccount::kSampleCache, 150));
  EXPECT_EQ(b.used(MemoryAccount::kSampleCache), 750u);
  EXPECT_EQ(b.peak(), 1000u);
  EXPECT_EQ(b.over_bytes(), 0u);
  b.release(MemoryAccount::kSampleCache, 10'000);  // never below zero
  EXPECT_EQ(b.used(MemoryAccount::kSampleCache), 0u);
  EXPECT_EQ(b.used(), 250u);
}

TEST(MemoryBudgetTest, AReservationKeepsItsRoomFromTheOtherAccounts) {
  MemoryBudget b(/*limit=*/1000);
  EXPECT_EQ(b.reserve(MemoryAccount::kRemoteShards, 300), 300u);
  EXPECT_EQ(b.room(MemoryAccount::kSampleCache), 700u);
  EXPECT_TRUE(b.try_charge(MemoryAccount::kSampleCache, 700));
  EXPECT_FALSE(b.try_charge(MemoryAccount::kSampleCache, 1));
  // The reserved account charges within its reservation though the rest is full...
  EXPECT_TRUE(b.try_charge(MemoryAccount::kRemoteShards, 300));
  // ...and not beyond it.
  EXPECT_FALSE(b.try_charge(MemoryAccount::kRemoteShards, 1));
  // A reservation is granted only as far as there is room, never below what is held.
  EXPECT_EQ(b.reserve(MemoryAccount::kRemoteShards, 5000), 300u);
  EXPECT_EQ(b.reserve(MemoryAccount::kRemoteShards, 0), 300u);
  b.release(MemoryAccount::kRemoteShards, 300);
  EXPECT_EQ(b.reserve(MemoryAccount::kRemoteShards, 0), 0u);
  EXPECT_EQ(b.room(MemoryAccount::kSampleCache), 300u);
}

TEST(MemoryBudgetTest, RequiredChargesGoOverTheLimitAndSaySo) {
  MemoryBudget b(/*limit=*/100);
  b.charge_required(MemoryAccount::kBatchBuffers, 80);
  EXPECT_EQ(b.over_bytes(), 0u);
  EXPECT_FALSE(b.try_charge(MemoryAccount::kSampleCache, 21));
  b.charge_required(MemoryAccount::kBatchBuffers, 50);
  EXPECT_EQ(b.used(), 130u);
  EXPECT_EQ(b.over_bytes(), 30u);
  EXPECT_EQ(b.room(MemoryAccount::kSampleCache), 0u);
  EXPECT_FALSE(b.try_charge(MemoryAccount::kSampleCache, 1));
}

// 4 threads charge and release random amounts to every account; a fifth
// reads the sum meanwhile: it never exceeds the limit, and what is left
// charged at the end is exactly what the threads kept.
TEST(MemoryBudgetTest, ConcurrentChargesNeverExceedTheLimit) {
  constexpr std::uint64_t kLimit = 1'000'000;
  MemoryBudget b(kLimit);
  (void)b.reserve(MemoryAccount::kRemoteShards, 100'000);
  std::atomic<bool> done{false};
  std::atomic<std::uint64_t> refused{0};
  std::vector<std::uint64_t> kept(4 * kMemoryAccounts, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t + 1));
      std::vector<std::vector<std::uint64_t>> held(kMemoryAccounts);
      for (int i = 0; i < 50'000; ++i) {
        const std::size_t k = rng() % kMemoryAccounts;
        const MemoryAccount a = kAll[k];
        if (!held[k].empty() && rng() % 2 == 0) {
          b.release(a, held[k].back());
          held[k].pop_back();
        } else {
          const std::uint64_t n = 1 + rng() % 20'000;
          if (b.try_charge(a, n)) {
            held[k].push_back(n);
          } else {
            refused.fetch_add(1, std::memory_order_relaxed);
          }
        }
      }
      for (std::size_t k = 0; k < kMemoryAccounts; ++k) {
        for (std::uint64_t n : held[k]) kept[static_cast<std::size_t>(t) * kMemoryAccounts + k] += n;
      }
    });
  }
  std::uint64_t samples = 0;
  std::thread watcher([&] {
    while (!done.load()) {
      const std::uint64_t used = b.used();
      ASSERT_LE(used, kLimit);
      ++samples;
    }
  });
  for (auto& t : threads) t.join();
  done = true;
  watcher.join();
  EXPECT_GT(refused.load(), 0u) << "the test never reached the limit";
  EXPECT_GT(samples, 0u);
  EXPECT_LE(b.peak(), kLimit);
  EXPECT_EQ(b.over_bytes(), 0u);
  std::uint64_t total = 0;
  for (std::size_t k = 0; k < kMemoryAccounts; ++k) {
    std::uint64_t account = 0;
    for (int t = 0; t < 4; ++t) account += kept[static_cast<std::size_t>(t) * kMemoryAccounts + k];
    EXPECT_EQ(b.used(kAll[k]), account) << memory_account_name(kAll[k]);
    total += account;
  }
  EXPECT_EQ(b.used(), total);
  EXPECT_EQ(sum_of_accounts(b), total);
}

// Loaders left at memory_budget=0 share the process's limit: what one
// holds or reserves the other cannot take, and each gets it back when the
// other releases; a given memory_budget is a loader's own.
TEST(MemoryBudgetTest, LoadersOfOneProcessShareItsLimit) {
  auto process = std::make_shared<ProcessMemory>(1000);
  MemoryBudget a(1000, process), b(1000, process);
  EXPECT_TRUE(a.try_charge(MemoryAccount::kSampleCache, 600));
  EXPECT_FALSE(b.try_charge(MemoryAccount::kSampleCache, 500)) << "a and b together above the process's limit";
  EXPECT_EQ(b.used(), 0u);
  EXPECT_EQ(b.room(MemoryAccount::kSampleCache), 400u);
  EXPECT_EQ(b.reserve(MemoryAccount::kRemoteShards, 700), 400u) << "a reservation gets the process's room, no more";
  EXPECT_EQ(process->held(), 1000u);
  EXPECT_FALSE(a.try_charge(MemoryAccount::kSampleCache, 1)) << "b's reservation is kept from a";
  EXPECT_TRUE(b.try_charge(MemoryAccount::kRemoteShards, 400)) << "within its own reservation";
  b.charge_required(MemoryAccount::kBatchBuffers, 50);
  EXPECT_EQ(b.over_bytes(), 50u) << "a required charge above the process's limit says how far";
  EXPECT_EQ(a.over_bytes(), 0u);
  b.release(MemoryAccount::kBatchBuffers, 50);
  a.release(MemoryAccount::kSampleCache, 600);
  EXPECT_EQ(process->held(), 400u);
  EXPECT_TRUE(a.try_charge(MemoryAccount::kSampleCache, 600));
  b.release(MemoryAccount::kRemoteShards, 400);
  EXPECT_EQ(b.reserve(MemoryAccount::kRemoteShards, 0), 0u);
  EXPECT_EQ(process->held(), 600u);
  Stats s;
  a.add_stats(&s);
  EXPECT_EQ(s.memory.scope, "process");
  EXPECT_EQ(s.memory.process_held, 600u);
  {
    MemoryBudget gone(1000, process);
    ASSERT_TRUE(gone.try_charge(MemoryAccount::kSampleCache, 100));
    EXPECT_EQ(gone.reserve(MemoryAccount::kBatchBuffers, 200), 200u);
    EXPECT_EQ(process->held(), 900u);
  }
  EXPECT_EQ(process->held(), 600u) << "a budget gone gives back what it held and reserved";
  MemoryBudget own(1000);
  Stats t;
  own.add_stats(&t);
  EXPECT_EQ(t.memory.scope, "loader");
}

TEST(MemoryBudgetTest, ConcurrentChargesOfTwoLoadersNeverExceedTheProcessLimit) {
  constexpr std::uint64_t kLimit = 500'000;
  auto process = std::make_shared<ProcessMemory>(kLimit);
  MemoryBudget budgets[2] = {MemoryBudget(kLimit, process), MemoryBudget(kLimit, process)};
  std::atomic<bool> done{false};
  std::atomic<std::uint64_t> refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      MemoryBudget& b = budgets[t % 2];
      std::mt19937 rng(static_cast<unsigned>(t + 11));
      std::vector<std::pair<MemoryAccount, std::uint64_t>> held;
      for (int i = 0; i < 20'000; ++i) {
        const MemoryAccount a = kAll[rng() % kMemoryAccounts];
        if (!held.empty() && rng() % 2 == 0) {
          b.release(held.back().first, held.back().second);
          held.pop_back();
        } else if (rng() % 16 == 0) {
          (void)b.reserve(MemoryAccount::kRemoteShards, rng() % 100'000);
        } else {
          const std::uint64_t n = 1 + rng() % 20'000;
          if (b.try_charge(a, n)) {
            held.push_back({a, n});
          } else {
            refused.fetch_add(1, std::memory_order_relaxed);
          }
        }
      }
      for (const auto& [a, n] : held) b.release(a, n);
    });
  }
  std::thread watcher([&] {
    while (!done.load()) ASSERT_LE(process->held(), kLimit);
  });
  for (auto& t : threads) t.join();
  done = true;
  watcher.join();
  EXPECT_GT(refused.load(), 0u) << "the test never reached the limit";
  for (auto& b : budgets) {
    EXPECT_EQ(b.used(), 0u);
    EXPECT_EQ(b.over_bytes(), 0u);
    (void)b.reserve(MemoryAccount::kRemoteShards, 0);
  }
  EXPECT_EQ(process->held(), 0u) << "every byte held was given back to the process";
}

TEST(MemoryBudgetTest, TheOptionZeroSharesOneProcessBudgetAGivenOneDoesNot) {
  auto a = MemoryBudget::for_option(0), b = MemoryBudget::for_option(0), own = MemoryBudget::for_option(12345);
  EXPECT_EQ(a->limit(), b->limit());
  EXPECT_EQ(own->limit(), 12345u);
  ASSERT_TRUE(a->try_charge(MemoryAccount::kSampleCache, 1000));
  Stats s, t;
  b->add_stats(&s);
  own->add_stats(&t);
  EXPECT_EQ(s.memory.scope, "process");
  EXPECT_EQ(s.memory.process_held, 1000u) << "b's stats see what a holds";
  EXPECT_EQ(t.memory.scope, "loader");
  a->release(MemoryAccount::kSampleCache, 1000);
}

// Two caches under one budget: together they stay within it, the second
// gets what the first left, and each returns its bytes when it goes.
TEST(MemoryBudgetTest, CachesShareOneBudgetAndReturnItWhenGone) {
  auto b = std::make_shared<MemoryBudget>(std::uint64_t{1} << 20);
  (void)b->reserve(MemoryAccount::kRemoteShards, 256 << 10);
  std::vector<std::uint8_t> bytes(10'000, 7);
  auto cache = std::make_unique<SampleCache>(1000, b);
  std::size_t stored = 0;
  for (std::size_t i = 0; i < 1000; ++i) {
    stored += cache->insert(i, bytes.data(), bytes.size()) == SampleCache::Insert::kStored;
  }
  EXPECT_GT(stored, 0u);
  EXPECT_LT(stored, 1000u);  // the budget ran out
  EXPECT_TRUE(cache->full());
  EXPECT_EQ(b->used(MemoryAccount::kSampleCache), cache->bytes());
  EXPECT_LE(b->used(MemoryAccount::kSampleCache), (std::uint64_t{1} << 20) - (256 << 10));  // the reservation kept
  auto volumes = std::make_unique<VolumeCache>(b);
  auto v = std::make_shared<VolumeEntry>();
  v->data.resize(20000);
  EXPECT_FALSE(volumes->put(1, v)) << "room left beside a full sample cache?";
  cache.reset();
  EXPECT_EQ(b->used(MemoryAccount::kSampleCache), 0u);
  EXPECT_TRUE(volumes->put(1, v));
  EXPECT_EQ(b->used(MemoryAccount::kVolumeCache), volumes->bytes());
  volumes.reset();
  EXPECT_EQ(b->used(), 0u);
}

// A volume cache's entries move to another budget (record 0's, kept while
// the schema was decided, to the loader's): what fits is kept and charged.
TEST(MemoryBudgetTest, AVolumeCacheRebindsItsEntries) {
  auto own = std::make_shared<MemoryBudget>(std::uint64_t{1} << 30);
  VolumeCache c(own);
  auto v = std::make_shared<VolumeEntry>();
  v->data.resize(100'000);
  ASSERT_TRUE(c.put(VolumeCache::key(0, 0), v));
  auto loader = std::make_shared<MemoryBudget>(std::uint64_t{1} << 20);
  c.rebind(loader);
  EXPECT_EQ(own->used(), 0u);
  EXPECT_NE(c.volume(VolumeCache::key(0, 0)), nullptr);
  EXPECT_EQ(loader->used(MemoryAccount::kVolumeCache), c.bytes());
  auto tiny = std::make_shared<MemoryBudget>(1000);
  c.rebind(tiny);
  EXPECT_EQ(c.volume(VolumeCache::key(0, 0)), nullptr);  // does not fit: dropped
  EXPECT_EQ(c.bytes(), 0u);
  EXPECT_EQ(loader->used(), 0u);
  EXPECT_EQ(tiny->used(), 0u);
}

TEST(MemoryBudgetTest, BatchBuffersAreChargedAsAllocatedAndReleasedWithThePool) {
  auto b = std::make_shared<MemoryBudget>(/*limit=*/1000);  // smaller than the buffers: they are needed anyway
  {
    auto pool = std::make_shared<SlotPool>(400, b);
    Slot* s1 = pool->acquire();
    Slot* s2 = pool->acquire();
    EXPECT_EQ(b->used(MemoryAccount::kBatchBuffers), 2 * pool->buffer_bytes());
    pool->release(s1);
    Slot* s3 = pool->acquire();  // reused: nothing more charged
    EXPECT_EQ(s3, s1);
    EXPECT_EQ(b->used(MemoryAccount::kBatchBuffers), 2 * pool->buffer_bytes());
    pool->release(s2);
    pool->release(s3);
    for (int i = 0; i < 2; ++i) (void)pool->acquire();
    (void)pool->acquire();
    EXPECT_EQ(b->used(MemoryAccount::kBatchBuffers), 3 * pool->buffer_bytes());
    EXPECT_EQ(b->over_bytes(), 3 * pool->buffer_bytes() - 1000);
  }
  EXPECT_EQ(b->used(), 0u);
}

}  // namespace
}  // namespace stoker::detail
