// An exception on each kind of stoker thread is counted or raised as
// documented (include/stoker/stats.h thread_errors, src/util/README.md), and
// the process lives: a worker outside the sample (its batch raises), a worker
// at its top (the loader raises from then on), the cache="ram" rewrite and
// preload (stats say "error: ..."; no batch changes), a remote fetcher (the
// shard's batches raise kUnavailable; the next epoch fetches it again), a
// remote index opener (the open raises kUnavailable), a pack worker (the
// pack raises). Each is injected with detail::testing::throw_on_thread.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "source/tar.h"
#include "stoker/loader.h"
#include "stoker/pack.h"
#include "stoker/source.h"
#include "stoker/stats.h"
#include "test_util.h"
#include "util/thread.h"

namespace stoker {
namespace {

using detail::ThreadSite;
using detail::testing::throw_on_thread;
using testing::TempDir;

// Clears every injection when a test ends, whatever happened in it.
struct Cleared {
  ~Cleared() {
    for (int s = 0; s < static_cast<int>(ThreadSite::kCount); ++s) throw_on_thread(static_cast<ThreadSite>(s), -1);
  }
};

using testing::numbered_list;

// `shards` tar shards of `per` records each (a JPEG and its label); the brace pattern naming them.
std::string make_shards(const TempDir& d, int shards, int per) {
  int n = 0;
  for (int s = 0; s < shards; ++s) {
    detail::TarWriter w(d.file("s-" + std::to_string(s) + ".tar"));
    EXPECT_TRUE(w.open().ok());
    for (int k = 0; k < per; ++k, ++n) {
      const int width = 20 + (n * 7) % 40, height = 18 + (n * 11) % 30;
      const auto jpg = testing::encode_jpeg(testing::test_pixels(width, height, static_cast<std::uint32_t>(n)), width, height);
      std::string key = "r";
      key += std::to_string(n);
      const std::string label = std::to_string(n);
      EXPECT_TRUE(w.add(key + ".jpg", jpg.data(), jpg.size(), 0).ok());
      EXPECT_TRUE(w.add(key + ".cls", reinterpret_cast<const std::uint8_t*>(label.data()), label.size(), 0).ok());
    }
    EXPECT_TRUE(w.finish().ok());
  }
  return d.path() + "/s-{0.." + std::to_string(shards - 1) + "}.tar";
}

LoaderOptions small(std::size_t batch, int threads = 2) {
  LoaderOptions o;
  o.batch_size = batch;
  o.threads = threads;
  o.dtype = DType::kUInt8;
  o.transforms = {RandomResizedCrop{16, 16}, RandomHorizontalFlip{}};
  return o;
}

struct Raised {
  std::size_t call;  // the next() call that raised (0-based)
  Code code;
  std::string what;
};
struct Epoch {
  std::vector<std::size_t> delivered;  // batch indexes
  std::vector<std::vector<std::uint8_t>> pixels;
  std::vector<Raised> raised;
};

// Epoch `e` through next(), going on after each error (at most `calls` calls: a hang guard).
Epoch run_epoch(Loader& l, std::uint64_t e, std::size_t calls = 1000) {
  Epoch out;
  l.set_epoch(e);
  l.start_epoch();
  for (std::size_t i = 0; i < calls; ++i) {
    try {
      auto b = l.next();
      if (!b) break;
      out.delivered.push_back(b->index());
      auto* p = static_cast<const std::uint8_t*>(testing::images_of(*b));
      out.pixels.emplace_back(p, p + testing::image_bytes_of(*b));
    } catch (const Error& err) {
      out.raised.push_back({i, err.code(), err.what()});
    }
  }
  return out;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

template <typename Pred>
bool wait_for(Pred pred, int seconds = 120) {
  for (int i = 0; i < seconds * 100; ++i) {
    if (pred()) return true;
    usleep(10000);
  }
  return pred();
}

std::uint64_t thread_errors(const Stats& s, const std::string& kind) {
  auto it = s.thread_errors.find(kind);
  return it == s.thread_errors.end() ? 0 : it->second;
}

// A worker that cannot have batch 2's buffer (the pool's allocation throws):
// batch 2 raises where the consumer reaches it, under either on_corrupt, the
// rest of the epoch comes, and the buffers are all back after it.
TEST(ThreadErrorsTest, AWorkersExceptionOutsideTheSampleFailsItsBatchOnly) {
  Cleared cleared;
  TempDir d;
  const std::string list = numbered_list(d, 22);
  Loader ref(list, small(4));
  const Epoch want = run_epoch(ref, 0);
  ASSERT_EQ(want.delivered.size(), 6u);
  for (OnCorrupt policy : {OnCorrupt::kRaise, OnCorrupt::kSkip}) {
    for (bool bad_alloc : {false, true}) {
      auto o = small(4);
      o.on_corrupt = policy;
      Loader l(list, o);
      throw_on_thread(ThreadSite::kWorker, 2, bad_alloc);
      const Epoch got = run_epoch(l, 0);
      throw_on_thread(ThreadSite::kWorker, -1);
      EXPECT_EQ(got.delivered, (std::vector<std::size_t>{0, 1, 3, 4, 5}));
      ASSERT_EQ(got.raised.size(), 1u);
      EXPECT_EQ(got.raised[0].call, 2u);
      EXPECT_EQ(got.raised[0].code, bad_alloc ? Code::kResourceExhausted : Code::kInternal);
      EXPECT_TRUE(contains(got.raised[0].what, "worker: batch buffer")) << got.raised[0].what;
      for (std::size_t k = 0; k < got.delivered.size(); ++k) {
        EXPECT_EQ(got.pixels[k], want.pixels[got.delivered[k]]) << "batch " << got.delivered[k];
      }
      const Stats s = l.stats();
      EXPECT_EQ(thread_errors(s, "worker"), 1u);
      EXPECT_EQ(s.corrupt, 0u) << "no sample was at fault";
      EXPECT_EQ(s.batch_buffers_in_use, 0u) << "every buffer is back once the batches are gone";
      EXPECT_NE(s.to_json().find("\"thread_errors\":{\"worker\":1}"), std::string::npos) << s.to_json();
      // The next epoch is whole.
      const Epoch again = run_epoch(l, 0);
      EXPECT_TRUE(again.raised.empty());
      EXPECT_EQ(again.pixels, want.pixels);
    }
  }
}

// A worker that dies at its top (outside any task): the loader cannot count
// on its share, so next() raises (no hang), and a new loader works.
TEST(ThreadErrorsTest, AWorkerThatStopsMakesTheLoaderRaiseNeverHang) {
  Cleared cleared;
  TempDir d;
  const std::string list = numbered_list(d, 40);
  throw_on_thread(ThreadSite::kWorkerStart, 0);
  Loader l(list, small(2, 2));
  ASSERT_TRUE(wait_for([&] { return thread_errors(l.stats(), "worker") == 1; }));
  throw_on_thread(ThreadSite::kWorkerStart, -1);
  const Epoch got = run_epoch(l, 0, 30);
  ASSERT_FALSE(got.raised.empty()) << "an epoch of 20 batches went through with a worker gone";
  EXPECT_EQ(got.raised[0].code, Code::kInternal);
  EXPECT_TRUE(contains(got.raised[0].what, "worker thread stoker-w0 stopped")) << got.raised[0].what;
  EXPECT_TRUE(contains(got.raised[0].what, "injected")) << got.raised[0].what;
  Loader fresh(list, small(2, 2));
  EXPECT_EQ(run_epoch(fresh, 0).delivered.size(), 20u);
}

// cache="ram": a preload thread's exception stops the preload, which says
// so; the workers read the rest as usual and no batch changes.
TEST(ThreadErrorsTest, APreloadExceptionStopsThePreloadAndIsReported) {
  Cleared cleared;
  TempDir d;
  const std::string list = numbered_list(d, 30);
  auto o = small(5);
  Loader ref(list, o);
  const Epoch want = run_epoch(ref, 0);
  for (bool bad_alloc : {false, true}) {
    o.cache.mode = Cache::kRam;
    o.cache.rewrite = false;
    throw_on_thread(ThreadSite::kPreload, 7, bad_alloc);
    Loader l(list, o);
    ASSERT_TRUE(wait_for([&] { return l.stats().cache_preload != "loading"; })) << "the preload never ended";
    throw_on_thread(ThreadSite::kPreload, -1);
    const Stats s = l.stats();
    EXPECT_TRUE(contains(s.cache_preload, "error: preload thread: ")) << s.cache_preload;
    EXPECT_TRUE(contains(s.cache_preload, bad_alloc ? "out of memory" : "injected")) << s.cache_preload;
    EXPECT_EQ(thread_errors(s, "preload"), 1u);
    for (std::uint64_t e : {0u, 1u}) {
      const Epoch got = run_epoch(l, e);
      EXPECT_TRUE(got.raised.empty());
      EXPECT_EQ(got.pixels, e == 0 ? want.pixels : run_epoch(ref, 1).pixels);
    }
    EXPECT_EQ(l.stats().corrupt, 0u);
    EXPECT_EQ(l.stats().cache_records, 30u) << "the workers stored what the preload did not";
  }
}

// cache="ram" rewrite: an exception while rewriting a record leaves it as it
// was (correct, only slower), stops the rewrite, and says so.
TEST(ThreadErrorsTest, ARewriteExceptionKeepsTheRecordAndStopsTheRewrite) {
  Cleared cleared;
  TempDir d;
  const std::string list = numbered_list(d, 12);
  auto o = small(4);
  Loader ref(list, o);
  o.cache.mode = Cache::kRam;
  throw_on_thread(ThreadSite::kRewrite, 5);
  Loader l(list, o);
  std::uint64_t e = 0;
  // The preload threads rewrite on idle CPU once the set is in; the workers
  // from the second epoch on: epochs (and idle time) until it happened.
  ASSERT_TRUE(wait_for([&] {
    const Epoch got = run_epoch(l, e % 2);
    EXPECT_TRUE(got.raised.empty());
    ++e;
    return contains(l.stats().cache_rewrite, "error");
  }));
  throw_on_thread(ThreadSite::kRewrite, -1);
  const Stats s = l.stats();
  EXPECT_TRUE(contains(s.cache_rewrite, "error: rewrite of a cached record: injected")) << s.cache_rewrite;
  EXPECT_EQ(thread_errors(s, "rewrite"), 1u);
  EXPECT_EQ(s.corrupt, 0u);
  for (std::uint64_t k : {0u, 1u}) EXPECT_EQ(run_epoch(l, k).pixels, run_epoch(ref, k).pixels);
  EXPECT_TRUE(contains(l.stats().cache_rewrite, "error")) << "the rewrite stays stopped";
}

// Remote shards: a fetcher's exception fails that shard like a network
// error: the batches reading it raise kUnavailable (never skipped), the
// others come, and the next epoch fetches it again.
TEST(ThreadErrorsTest, AFetchersExceptionFailsItsShardsBatchesWithUnavailable) {
  Cleared cleared;
  TempDir d;
  const std::string local = make_shards(d, 3, 8);
  auto o = small(4, 3);
  o.on_corrupt = OnCorrupt::kSkip;
  o.remote.connections = 2;
  Loader here(local, o);
  const Epoch want = run_epoch(here, 0);
  for (bool bad_alloc : {false, true}) {
    throw_on_thread(ThreadSite::kFetcher, 1, bad_alloc);  // NOTE: before the loader: it starts fetching at once
    Loader there("pipe:cat " + local, o);
    const Epoch got = run_epoch(there, 0);
    throw_on_thread(ThreadSite::kFetcher, -1);
    // Shard 1 holds records 8-15: batches 2 and 3.
    EXPECT_EQ(got.delivered, (std::vector<std::size_t>{0, 1, 4, 5}));
    ASSERT_EQ(got.raised.size(), 2u);
    for (const Raised& r : got.raised) {
      EXPECT_EQ(r.code, Code::kUnavailable) << r.what;
      EXPECT_TRUE(contains(r.what, "s-1.tar: fetch: ")) << r.what;
      EXPECT_TRUE(contains(r.what, bad_alloc ? "out of memory" : "injected")) << r.what;
    }
    const Stats s = there.stats();
    EXPECT_GE(thread_errors(s, "fetcher"), 1u);
    EXPECT_EQ(s.corrupt, 0u);
    const Epoch again = run_epoch(there, 0);
    EXPECT_TRUE(again.raised.empty());
    EXPECT_EQ(again.pixels, want.pixels);
  }
}

// Remote shards: an exception while opening a shard's index is an error of
// the open, kUnavailable, on the caller's thread.
TEST(ThreadErrorsTest, AnOpenersExceptionFailsTheOpenWithUnavailable) {
  Cleared cleared;
  TempDir d;
  const std::string local = make_shards(d, 4, 3);
  RemoteOptions r;
  r.connections = 4;
  for (bool bad_alloc : {false, true}) {
    throw_on_thread(ThreadSite::kOpener, 2, bad_alloc);
    try {
      (void)open_shards({"pipe:cat " + local}, "cls", "", r);
      ADD_FAILURE() << "the open went through";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Code::kUnavailable);
      EXPECT_TRUE(contains(e.what(), "s-2.tar")) << e.what();
      EXPECT_TRUE(contains(e.what(), bad_alloc ? "out of memory" : "injected")) << e.what();
    }
  }
  throw_on_thread(ThreadSite::kOpener, -1);
  EXPECT_EQ(open_shards({"pipe:cat " + local}, "cls", "", r)->size(), 12u);
}

// stoker pack: a worker's exception fails the pack with its message.
TEST(ThreadErrorsTest, APackWorkersExceptionFailsThePack) {
  Cleared cleared;
  TempDir d;
  const std::string list = numbered_list(d, 20);
  PackOptions o;
  o.out_pattern = d.file("out/p-%05d.tar");
  o.threads = 3;
  for (bool bad_alloc : {false, true}) {
    throw_on_thread(ThreadSite::kPack, 11, bad_alloc);
    try {
      (void)pack(list, o);
      ADD_FAILURE() << "the pack went through";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), bad_alloc ? Code::kResourceExhausted : Code::kInternal);
      EXPECT_TRUE(contains(e.what(), "pack worker stoker-pack")) << e.what();
    }
  }
  throw_on_thread(ThreadSite::kPack, -1);
  EXPECT_EQ(pack(list, o).records_written, 20u);
}

}  // namespace
}  // namespace stoker
