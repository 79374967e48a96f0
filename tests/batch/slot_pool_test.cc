// The batch pool's bound, on scripted consumers: no timing involved.
//   batch_buffers <= ring depth (max) + the most batches the consumer held at once
// and buffers are reused once released.
#include "batch/slot_pool.h"

#include <gtest/gtest.h>

#include <deque>
#include <memory>
#include <random>
#include <set>

#include "stoker/loader.h"
#include "test_util.h"

namespace stoker {
namespace {

using detail::Slot;
using detail::SlotLease;
using detail::SlotPool;
using testing::TempDir;
using testing::write_file;

// The pool driven the way the loader drives it: a ring that is refilled up
// to `depth` buffers, a consumer that takes the oldest and keeps each batch
// for a scripted number of further batches (at most `keep`).
TEST(SlotPoolTest, NeverExceedsRingPlusHeldOnScriptedConsumers) {
  for (int depth : {1, 2, 4, 8}) {
    for (int keep : {0, 1, 3, 7}) {
      auto pool = std::make_shared<SlotPool>(256);
      std::mt19937 rng(static_cast<unsigned>(depth * 100 + keep));  // fixed seeds: the same schedules every run
      std::deque<Slot*> ring;
      std::deque<std::pair<int, std::shared_ptr<SlotLease>>> held;  // (release at step, lease)
      std::set<const std::uint8_t*> seen;
      for (int step = 0; step < 20000; ++step) {
        // Workers fill the ring; some steps they fill only part of it.
        const int fill = static_cast<int>(rng() % 3 == 0 ? rng() % (depth + 1) : depth);
        while (static_cast<int>(ring.size()) < fill) {
          Slot* s = pool->acquire();
          seen.insert(s->data.get());
          ring.push_back(s);
        }
        if (ring.empty()) continue;
        // The consumer takes the next batch and decides how long to keep it.
        pool->hand_out();
        auto lease = std::make_shared<SlotLease>(pool, ring.front());
        ring.pop_front();
        const int until = step + static_cast<int>(keep ? rng() % (keep + 1) : 0);
        held.emplace_back(until, std::move(lease));
        // Batches whose time is up are dropped, in any order.
        for (auto it = held.begin(); it != held.end();) it = it->first <= step ? held.erase(it) : std::next(it);
        const SlotPool::Counts c = pool->counts();
        ASSERT_EQ(c.in_use, ring.size() + held.size());
        ASSERT_EQ(c.held, held.size());
        ASSERT_LE(c.held_peak, static_cast<std::size_t>(keep) + 1);
        ASSERT_LE(c.allocated, static_cast<std::size_t>(depth) + c.held_peak) << "depth " << depth << " keep " << keep;
      }
      // Released buffers were reused: every address seen is one of the pool's.
      EXPECT_EQ(seen.size(), pool->counts().allocated);
      while (!ring.empty()) {
        pool->release(ring.front());
        ring.pop_front();
      }
      held.clear();
      EXPECT_EQ(pool->counts().in_use, 0u);
    }
  }
}

std::string tiny_list(const TempDir& d, int n) {
  std::string list = "path,label\n";
  for (int i = 0; i < n; ++i) {
    const std::string name = "img" + std::to_string(i) + ".jpg";
    write_file(d.file(name), testing::encode_jpeg(testing::test_pixels(20, 18, static_cast<std::uint32_t>(i)), 20, 18));
    list += name + "," + std::to_string(i) + "\n";
  }
  write_file(d.file("list.csv"), list);
  return d.file("list.csv");
}

// The real loader over many epochs, consumers keeping batches in scripted
// patterns, fixed and autotuned ring depth.
TEST(SlotPoolTest, LoaderStaysWithinItsBoundOverManyEpochs) {
  TempDir d;
  const std::string list = tiny_list(d, 40);
  for (int prefetch : {0, 1, 3}) {
    for (int keep : {0, 2, 5}) {
      LoaderOptions o;
      o.batch_size = 4;
      o.threads = 2;
      o.prefetch = prefetch;
      o.shuffle = true;
      o.transforms = {RandomResizedCrop{8, 8}};
      Loader loader(list, o);
      std::mt19937 rng(static_cast<unsigned>(prefetch * 10 + keep));
      std::deque<Batch> kept;
      std::set<const void*> seen;
      for (int epoch = 0; epoch < 60; ++epoch) {
        for (const Batch& b : loader) {
          seen.insert(testing::images_of(b));
          if (keep && rng() % 2) kept.push_back(b);  // keep about half of the batches...
          while (static_cast<int>(kept.size()) > keep) kept.pop_front();  // ...and at most `keep` of them
        }
        if (epoch % 7 == 0) kept.clear();
      }
      const Stats s = loader.stats();
      const int ring_max = prefetch > 0 ? prefetch : 2 * 2;
      EXPECT_EQ(s.ring_depth_max, ring_max);
      // At most `keep` kept, plus the loop's current batch (alive while next() runs) and the one handed out.
      EXPECT_LE(s.batch_buffers_held_peak, static_cast<std::uint64_t>(keep) + 2);
      EXPECT_LE(s.batch_buffers, static_cast<std::uint64_t>(s.ring_depth_max) + s.batch_buffers_held_peak)
          << "prefetch " << prefetch << " keep " << keep;
      EXPECT_EQ(seen.size(), s.batch_buffers);  // every buffer handed out is one of the pool's: reused
      EXPECT_EQ(s.batch_buffers_held, kept.size());
      kept.clear();
      EXPECT_EQ(loader.stats().batch_buffers_held, 0u);
    }
  }
}

}  // namespace
}  // namespace stoker
