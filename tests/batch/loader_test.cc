#include "stoker/loader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <numeric>
#include <set>
#include <thread>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace stoker {
namespace {

using testing::TempDir;
using testing::numbered_list;
using testing::write_file;

LoaderOptions small(std::size_t batch, int threads = 2) {
  LoaderOptions o;
  o.batch_size = batch;
  o.threads = threads;
  o.transforms = {RandomResizedCrop{16, 16}, RandomHorizontalFlip{}};
  return o;
}

std::vector<std::int64_t> epoch_ids(Loader& l) {
  std::vector<std::int64_t> ids;
  for (const Batch& b : l) ids.insert(ids.end(), testing::labels_of(b), testing::labels_of(b) + b.size());
  return ids;
}

std::vector<std::vector<float>> epoch_pixels(Loader& l) {
  std::vector<std::vector<float>> out;
  for (const Batch& b : l) {
    auto* p = static_cast<const float*>(testing::images_of(b));
    out.emplace_back(p, p + testing::image_bytes_of(b) / sizeof(float));
  }
  return out;
}

TEST(LoaderTest, BatchesInOrderWithShapes) {
  TempDir d;
  Loader l(numbered_list(d, 21), small(/*batch=*/8));
  EXPECT_EQ(l.num_batches(), 3u);
  EXPECT_EQ(l.num_samples(), 21u);
  std::vector<std::size_t> sizes;
  std::vector<std::int64_t> ids;
  for (const Batch& b : l) {
    sizes.push_back(b.size());
    EXPECT_EQ(b.tensors().at(0).dims, (std::vector<std::int64_t>{static_cast<std::int64_t>(b.size()), 3, 16, 16}));
    ids.insert(ids.end(), testing::labels_of(b), testing::labels_of(b) + b.size());
  }
  EXPECT_EQ(sizes, (std::vector<std::size_t>{8, 8, 5}));
  std::vector<std::int64_t> want(21);
  std::iota(want.begin(), want.end(), 0);
  EXPECT_EQ(ids, want);
}

TEST(LoaderTest, ShuffledEpochsArePermutations) {
  TempDir d;
  auto o = small(4);
  o.shuffle = true;
  o.seed = 9;
  Loader l(numbered_list(d, 30), o);
  std::vector<std::vector<std::int64_t>> epochs;
  for (int e = 0; e < 3; ++e) {
    auto ids = epoch_ids(l);  // the epoch advances by itself
    auto sorted = ids;
    std::sort(sorted.begin(), sorted.end());
    for (std::int64_t i = 0; i < 30; ++i) ASSERT_EQ(sorted[static_cast<std::size_t>(i)], i);
    epochs.push_back(ids);
  }
  EXPECT_NE(epochs[0], epochs[1]);
  l.set_epoch(1);
  EXPECT_EQ(epoch_ids(l), epochs[1]);
}

TEST(LoaderTest, SameSeedSameBatchesWithOneTwoAndFourThreads) {
  TempDir d;
  auto list = numbered_list(d, 40);
  std::vector<std::vector<std::vector<float>>> runs;
  for (int threads : {1, 2, 4}) {
    auto o = small(6, threads);
    o.shuffle = true;
    o.seed = 5;
    Loader l(list, o);
    l.set_epoch(2);
    runs.push_back(epoch_pixels(l));
  }
  EXPECT_EQ(runs[0], runs[1]);
  EXPECT_EQ(runs[0], runs[2]);
}

TEST(LoaderTest, HeldBatchIsNeverOverwritten) {
  TempDir d;
  auto o = small(3);
  o.prefetch = 2;
  o.shuffle = true;
  Loader l(numbered_list(d, 30), o);
  l.start_epoch();
  Batch held = *l.next();
  std::vector<std::uint8_t> copy(static_cast<const std::uint8_t*>(testing::images_of(held)),
                                 static_cast<const std::uint8_t*>(testing::images_of(held)) + testing::image_bytes_of(held));
  std::vector<Batch> all;
  while (auto b = l.next()) all.push_back(*b);
  EXPECT_EQ(all.size(), 9u);
  EXPECT_EQ(std::memcmp(copy.data(), testing::images_of(held), copy.size()), 0);
}

TEST(LoaderTest, BatchOutlivesLoader) {
  TempDir d;
  std::optional<Batch> b;
  std::vector<std::int64_t> ids;
  {
    Loader l(numbered_list(d, 10), small(4));
    b = l.next();
    ids.assign(testing::labels_of(*b), testing::labels_of(*b) + b->size());
  }
  EXPECT_EQ(std::vector<std::int64_t>(testing::labels_of(*b), testing::labels_of(*b) + b->size()), ids);
}

// This process's thread ids. A joined thread can still be listed for a
// moment: pthread_join returns once the kernel clears the thread's tid,
// slightly before the task leaves /proc/self/task.
std::set<int> thread_ids() {
  std::set<int> out;
  DIR* dir = opendir("/proc/self/task");
  while (dirent* e = readdir(dir))
    if (e->d_name[0] != '.') out.insert(std::atoi(e->d_name));
  closedir(dir);
  return out;
}

// Bounded poll (5 s, 1 ms steps) until none of `gone` is listed any more;
// returns those still listed.
std::set<int> still_listed(const std::set<int>& gone) {
  std::set<int> left;
  for (int i = 0; i < 5000; ++i) {
    left.clear();
    for (int t : thread_ids())
      if (gone.count(t)) left.insert(t);
    if (left.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return left;
}

TEST(LoaderTest, DestroyMidEpochJoinsEveryThread) {
  TempDir d;
  auto list = numbered_list(d, 50);
  { Loader warm(list, small(2, 1)); }  // sanitizer runtimes start a helper thread with the first thread
  std::set<int> started;
  for (int i = 0; i < 10; ++i) {
    const auto before = thread_ids();
    std::set<int> mine;
    {
      auto o = small(2, 4);
      Loader l(list, o);
      auto b = l.next();
      ASSERT_TRUE(b.has_value());
      for (int t : thread_ids())
        if (!before.count(t)) mine.insert(t);
      EXPECT_EQ(mine.size(), 4u) << "a loader with threads=4 runs four workers";
    }
    EXPECT_TRUE(still_listed(mine).empty()) << "worker threads alive after the loader was destroyed";
    started.insert(mine.begin(), mine.end());
  }
  EXPECT_TRUE(still_listed(started).empty());
}

// cache=kRam preload: background threads load every record while (and
// after) batches are made; the batches are those of an uncached loader, the
// preload ends "done" with every record held, and a loader destroyed while
// its preload is held back or running joins every thread.
TEST(LoaderTest, RamPreloadLoadsEveryRecordAndChangesNoBatch) {
  TempDir d;
  auto list = numbered_list(d, 40);
  auto o = small(6);
  o.shuffle = true;
  Loader plain(list, o);
  o.cache.mode = Cache::kRam;
  Loader ram(list, o);
  EXPECT_EQ(epoch_pixels(plain), epoch_pixels(ram));
  for (int spins = 0; ram.stats().cache_preload == "loading"; ++spins) {
    ASSERT_LT(spins, 12000) << "the preload never ended";  // a hang guard (2 minutes), not a time bound
    usleep(10000);
  }
  const Stats s = ram.stats();
  EXPECT_EQ(s.cache_preload, "done");
  EXPECT_EQ(s.cache_records, 40u);
  EXPECT_LE(s.cache_preload_records, 40u);  // the workers may have stored them all first
  plain.set_epoch(1);
  ram.set_epoch(1);
  EXPECT_EQ(epoch_pixels(plain), epoch_pixels(ram));
  EXPECT_EQ(ram.stats().cache_misses, s.cache_misses);
  {
    Loader idle(list, o);  // never iterated: the preload alone loads the set, after its hold-back
    for (int spins = 0; idle.stats().cache_preload == "loading"; ++spins) {
      ASSERT_LT(spins, 12000) << "the preload never ended";
      usleep(10000);
    }
    EXPECT_EQ(idle.stats().cache_preload, "done");
    EXPECT_EQ(idle.stats().cache_preload_records, 40u);
    EXPECT_EQ(idle.stats().cache_misses, 0u);
  }
  for (int i = 0; i < 5; ++i) {
    Loader held(list, o);  // destroyed while its preload is held back
    Loader running(list, o);
    ASSERT_TRUE(running.next().has_value());
  }
}

// cache=kRam over local files (read again cheaply) stores a record only in
// its final form: the first epoch keeps only what it rewrote on the read
// path (preload off), the second epoch stores every record it reads, so the
// rewrite is done when it ends, with or without a preload (which runs at
// idle priority, maybe behind); no entry is ever replaced (no holes), and
// the batches are an uncached loader's.
TEST(LoaderTest, RamCacheOverLocalFilesStoresRecordsOnlyInTheirFinalForm) {
  TempDir d;
  auto list = numbered_list(d, 40);
  auto o = small(6);
  o.shuffle = true;
  Loader plain(list, o);
  o.cache.mode = Cache::kRam;
  for (const bool preload : {false, true}) {
    o.cache.preload = preload;
    Loader ram(list, o);
    std::uint64_t misses = 0;  // after the second epoch
    for (std::uint64_t epoch = 0; epoch < 3; ++epoch) {
      plain.set_epoch(epoch);
      ram.set_epoch(epoch);
      EXPECT_EQ(epoch_pixels(plain), epoch_pixels(ram)) << "epoch " << epoch << " preload " << preload;
      const Stats s = ram.stats();
      EXPECT_EQ(s.cache_holes_bytes, 0u);
      if (epoch == 0 && !preload) {
        EXPECT_EQ(s.cache_misses, 40u);
        EXPECT_EQ(s.cache_records, s.cache_rewrite_settled) << "only final forms stored";
      }
      if (epoch >= 1) {
        EXPECT_EQ(s.cache_records, 40u) << "preload " << preload;
        EXPECT_EQ(s.cache_rewrite, "done") << "preload " << preload;
      }
      if (epoch == 1) misses = s.cache_misses;
      if (epoch == 2) {
        EXPECT_EQ(s.cache_misses, misses) << "the third epoch finds every record in RAM";
      }
    }
  }
}

// stats().memory: the named accounts, summing to `used`, never above
// memory_budget, while the preload and the workers fill a RAM cache that does
// not fit it (checked after every batch); the batches are as without it.
TEST(LoaderTest, MemoryAccountsNeverSumAboveTheBudget) {
  TempDir d;
  auto list = numbered_list(d, 40);
  auto o = small(6);
  o.shuffle = true;
  o.dtype = DType::kUInt8;
  Loader plain(list, o);
  const Stats p = plain.stats();
  ASSERT_TRUE(p.memory.active);
  o.cache.mode = Cache::kRam;
  // Room for the batch buffers' and the workers' scratch's reservations and
  // about half of the records.
  std::uint64_t records = 0;
  for (std::size_t i = 0; i < plain.source().size(); ++i) {
    std::vector<std::uint8_t> bytes;
    ASSERT_TRUE(plain.source().read(i, &bytes).ok());
    records += bytes.size();
  }
  Loader sized(list, o);  // cache="ram": the scratch's reservation counts the rewrite's copies
  o.memory_budget = sized.stats().memory.reserved.at("batch_buffers") +
                    sized.stats().memory.reserved.at("decode_scratch") + records / 2;
  Loader ram(list, o);
  for (int epoch = 0; epoch < 2; ++epoch) {
    plain.set_epoch(static_cast<std::uint64_t>(epoch));
    ram.set_epoch(static_cast<std::uint64_t>(epoch));
    std::vector<std::vector<std::uint8_t>> got;
    for (const Batch& b : ram) {
      auto* px = static_cast<const std::uint8_t*>(testing::images_of(b));
      got.emplace_back(px, px + testing::image_bytes_of(b));
      const Stats s = ram.stats();
      std::uint64_t sum = 0;
      for (const auto& [name, bytes] : s.memory.accounts) sum += bytes;
      ASSERT_EQ(sum, s.memory.used);
      ASSERT_LE(s.memory.used, o.memory_budget);
      ASSERT_GT(s.memory.accounts.at("decode_scratch"), 0u) << "a batch was made";
    }
    std::vector<std::vector<std::uint8_t>> want;
    for (const Batch& b : plain) {
      auto* px = static_cast<const std::uint8_t*>(testing::images_of(b));
      want.emplace_back(px, px + testing::image_bytes_of(b));
    }
    EXPECT_EQ(got, want);
  }
  const Stats s = ram.stats();
  EXPECT_EQ(s.memory.budget, o.memory_budget);
  EXPECT_LE(s.memory.peak, o.memory_budget);
  EXPECT_EQ(s.memory.over_bytes, 0u);
  std::vector<std::string> names;
  for (const auto& [name, bytes] : s.memory.accounts) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"batch_buffers", "decode_scratch", "remote_shards", "sample_cache",
                                             "volume_cache"}));
  EXPECT_LE(s.memory.accounts.at("decode_scratch"), s.memory.reserved.at("decode_scratch"))
      << "the workers' scratch within its reservation: the cache left it room";
  EXPECT_GT(s.cache_records, 0u);
  EXPECT_LT(s.cache_records, 40u);  // the cache got what the buffers left: about half
  EXPECT_GE(s.memory.accounts.at("sample_cache"), s.cache_bytes);
  EXPECT_GE(s.memory.accounts.at("batch_buffers"), s.batch_buffer_bytes);
  EXPECT_GT(s.batch_buffer_bytes, 0u);
}

TEST(LoaderTest, RestartMidEpoch) {
  TempDir d;
  Loader l(numbered_list(d, 20), small(3));
  l.start_epoch();
  (void)l.next();
  l.set_epoch(0);
  auto ids = epoch_ids(l);
  EXPECT_EQ(ids.size(), 20u);
  EXPECT_EQ(ids.front(), 0);
}

TEST(LoaderTest, CorruptSkippedAndCounted) {
  TempDir d;
  auto o = small(4);
  o.on_corrupt = OnCorrupt::kSkip;
  Loader l(numbered_list(d, 12, /*corrupt=*/{1, 6}), o);
  auto ids = epoch_ids(l);
  EXPECT_EQ(ids, (std::vector<std::int64_t>{0, 2, 2, 3, 4, 5, 7, 7, 8, 9, 10, 11}));
  Stats s = l.stats();
  EXPECT_EQ(s.corrupt, 2u);
  EXPECT_EQ(s.corrupt_by_reason.at("corrupt"), 2u);
  ASSERT_EQ(s.corrupt_examples.size(), 2u);
  // NOTE: in the order the workers met them: record 6's may come first on a busy machine.
  const std::string& first = s.corrupt_examples[0].find("img1.jpg") != std::string::npos ? s.corrupt_examples[0]
                                                                                         : s.corrupt_examples[1];
  EXPECT_NE(first.find("img1.jpg"), std::string::npos) << s.corrupt_examples[0] << " / " << s.corrupt_examples[1];
  EXPECT_NE(first.find("truncated"), std::string::npos) << first;
}

TEST(LoaderTest, CorruptRaisedInOrder) {
  TempDir d;
  auto o = small(4);
  o.on_corrupt = OnCorrupt::kRaise;
  Loader l(numbered_list(d, 12, {6}), o);
  l.start_epoch();
  EXPECT_TRUE(l.next().has_value());
  try {
    (void)l.next();
    FAIL() << "batch 1 holds record 6";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::kCorrupt);
    EXPECT_NE(std::string(e.what()).find("img6.jpg"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(l.next().has_value());  // iteration continues after the error
  EXPECT_FALSE(l.next().has_value());
  EXPECT_EQ(l.stats().corrupt, 1u);
}

TEST(LoaderTest, SkipGivesUpWhenEverythingIsCorrupt) {
  TempDir d;
  auto o = small(2);
  o.max_consecutive_corrupt = 5;
  Loader l(numbered_list(d, 6, {0, 1, 2, 3, 4, 5}), o);
  EXPECT_THROW((void)l.next(), Error);
}

TEST(LoaderTest, BadOptionsThrowInvalidArgument) {
  TempDir d;
  auto list = numbered_list(d, 3);
  auto expect_invalid = [&](LoaderOptions o, const char* what) {
    try {
      Loader l(list, o);
      ADD_FAILURE() << "no error for " << what;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Code::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  auto o = small(0);
  expect_invalid(o, "batch_size must be > 0, got 0");
  o = small(1);
  o.rank = 3;
  o.world_size = 2;
  expect_invalid(o, "rank");
  o = small(1);
  o.transforms = {Resize{32, 0, 0}};
  expect_invalid(o, "same size");
}

TEST(LoaderTest, RestoreResumesExactlyWithAnyThreadCount) {
  TempDir d;
  auto list = numbered_list(d, 23);
  auto o = small(4, 2);
  o.shuffle = true;
  o.seed = 3;
  Loader ref(list, o);
  ref.set_epoch(1);
  auto full = epoch_pixels(ref);
  for (std::size_t stop : {std::size_t{0}, std::size_t{1}, std::size_t{3}, full.size() - 1}) {
    Loader a(list, o);
    a.set_epoch(1);
    a.start_epoch();
    for (std::size_t i = 0; i < stop; ++i) (void)a.next();
    Loader::State st = a.state_dict();
    EXPECT_EQ(st.epoch, 1u);
    EXPECT_EQ(st.batches_done, stop);
    auto o2 = o;
    o2.threads = 1;
    o2.seed = 99;  // the state's seed wins
    Loader b(list, o2);
    b.load_state_dict(st);
    auto rest = epoch_pixels(b);
    EXPECT_EQ(rest, std::vector<std::vector<float>>(full.begin() + static_cast<long>(stop), full.end())) << stop;
  }
  auto o3 = o;
  o3.shuffle = false;
  Loader c(list, o3);
  EXPECT_THROW(c.load_state_dict(ref.state_dict()), Error);
}

// Loader::batch(epoch, index) is the epoch's batch `index`, made alone (any
// order, another thread count), and batch_provenance names its records.
TEST(LoaderTest, AnyBatchIsMadeAgainAndItsRecordsNamed) {
  TempDir d;
  auto list = numbered_list(d, 29);
  for (int rank : {0, 1}) {
    auto o = small(4, 3);
    o.shuffle = true;
    o.seed = 17;
    o.rank = rank;
    o.world_size = 2;
    o.transforms.push_back(ColorJitter{{0.7, 1.3}, {0.7, 1.3}, {0.7, 1.3}, {-0.1, 0.1}});
    Loader ref(list, o);
    ref.set_epoch(3);
    std::vector<std::vector<float>> pixels;
    std::vector<std::vector<std::int64_t>> ids;
    for (const Batch& b : ref) {
      auto* p = static_cast<const float*>(testing::images_of(b));
      pixels.emplace_back(p, p + testing::image_bytes_of(b) / sizeof(float));
      ids.emplace_back(testing::labels_of(b), testing::labels_of(b) + b.size());
    }
    ASSERT_EQ(pixels.size(), 4u);  // 15 of 29 (padded) in batches of 4
    o.threads = 1;
    Loader again(list, o);
    for (std::size_t i = pixels.size(); i-- > 0;) {
      const Batch b = again.batch(3, i);
      EXPECT_EQ(b.index(), i);
      auto* p = static_cast<const float*>(testing::images_of(b));
      EXPECT_EQ(std::vector<float>(p, p + testing::image_bytes_of(b) / sizeof(float)), pixels[i]) << rank << " " << i;
      const auto j = nlohmann::json::parse(again.batch_provenance(3, i));
      std::vector<std::int64_t> records;
      for (const auto& s : j["samples"]) {
        records.push_back(s["record"].get<std::int64_t>());
        EXPECT_EQ(s["plan"]["plan"]["steps"][1]["resize"], nlohmann::json::array({16, 16}));
        EXPECT_EQ(s["plan"]["plan"]["image_ops"].size(), 4u);  // ColorJitter's four ops
      }
      EXPECT_EQ(records, ids[i]);
    }
    EXPECT_EQ(again.stats().batches, 0u);  // iteration did not move
    EXPECT_THROW((void)again.batch(3, 4), Error);
    EXPECT_THROW((void)again.batch_provenance(3, 4), Error);
  }
}

TEST(LoaderTest, StatsCountStages) {
  TempDir d;
  Loader l(numbered_list(d, 10), small(4));
  (void)epoch_ids(l);
  Stats s = l.stats();
  EXPECT_EQ(s.samples, 10u);
  EXPECT_EQ(s.batches, 3u);
  EXPECT_GT(s.decode_s, 0);
  EXPECT_GE(s.time_to_first_batch_s, 0);
  EXPECT_NE(s.to_json().find("\"samples\":10"), std::string::npos);
}

}  // namespace
}  // namespace stoker

namespace stoker {
namespace {
// One codec for the options: every field survives the round trip.
TEST(LoaderTest, OptionsJsonRoundTripsEveryField) {
  LoaderOptions o;
  o.batch_size = 7;
  o.shuffle = true;
  o.seed = 1234567890123ull;
  o.drop_last = true;
  o.shuffle_window = 4;
  o.threads = 3;
  o.max_threads = 5;
  o.prefetch = 4;
  o.rank = 1;
  o.world_size = 3;
  o.on_corrupt = OnCorrupt::kRaise;
  o.max_consecutive_corrupt = 9;
  o.dtype = DType::kUInt8;
  o.layout = Layout::kNHWC;
  o.kind = SampleKind::kImage;
  o.decode_scale = DecodeScale::kAuto;
  o.cache.mode = Cache::kDecoded;
  o.memory_budget = 123456789;
  o.cache.preload = false;
  o.cache.progress = Progress::kOn;
  o.cache.max_side = 300;
  o.cache.rewrite = false;
  o.cache.share = ShareCache::kOn;
  o.cache.share_dir = "/run/shm";
  o.remote.cache_dir = "/tmp/shards";
  o.remote.cache_limit = 1 << 30;
  o.remote.connections = 3;
  o.remote.retries = 2;
  o.transforms = {RandomResizedCrop{32, 40, {0.25, 0.9}, {0.5, 2.0}}, Resize{50, 0, 80}, CenterCrop{30, 31},
                  RandomHorizontalFlip{0.3}, RandomVerticalFlip{0.2}, RandomGrayscale{0.7},
                  Normalize{{0.1f, 0.2f, 0.3f}, {0.4f, 0.5f, 0.6f}}};
  o.max_image_pixels = 999;
  o.labels = "json:target";
  o.coco.image_root = "images";
  o.coco.skip_empty = true;
  o.coco.keep_crowd = true;
  o.stage_timing = false;
  o.trace = true;
  o.fields = {ImageField("im"), MaskField("seg", 255, "seg.png"), BoxesField("b", 7, BoxFormat::kCXCYWH, "json:boxes"),
              LabelField("y", "cls"), TensorField("depth")};
  o.fields[4].folder = "depths";
  o.views = {{"global", 2, {RandomResizedCrop{32, 32, {0.4, 1.0}}}}};
  o.max_volume_voxels = 1 << 20;
  NormalizeIntensity norm;
  norm.subtrahend = {1.0, 2.0};
  norm.channel_wise = true;
  o.volume_transforms = {SpatialPad{{-1, 40, 40}, PadMethod::kEnd},
                         RandCropByPosNegLabel{{32, 32, 16}, "seg", 2.0, 1.0, 4},
                         RandSpatialCrop{{8, 8, 8}, false, false},
                         RandSpatialCropSamples{{8, 8, 8}, 3, true, false},
                         CenterSpatialCrop{{7, 7, 7}},
                         RandFlip{0.3, {0, 2}},
                         RandRotate90{0.2, 2, {1, 2}},
                         ScaleIntensityRange{-1000, 1000, 0.0, std::nullopt, true},
                         norm};
  const std::string j = options_to_json(o);
  const LoaderOptions r = options_from_json(j);
  EXPECT_EQ(options_to_json(r), j);
  EXPECT_EQ(r.seed, o.seed);
  EXPECT_EQ(r.labels, "json:target");
  EXPECT_EQ(r.cache.share, ShareCache::kOn);
  EXPECT_EQ(r.cache.share_dir, "/run/shm");
  EXPECT_EQ(std::get<RandomVerticalFlip>(r.transforms[4]).p, 0.2);
  EXPECT_EQ(std::get<RandomGrayscale>(r.transforms[5]).p, 0.7);
  EXPECT_EQ(std::get<Normalize>(r.transforms[6]).std[2], 0.6f);
  EXPECT_EQ(std::get<RandomResizedCrop>(r.transforms[0]).scale[0], 0.25);
  ASSERT_EQ(r.fields.size(), 5u);
  EXPECT_EQ(r.fields[1].kind, FieldKind::kMask);
  EXPECT_EQ(r.fields[1].fill, 255);
  EXPECT_EQ(r.fields[1].member, "seg.png");
  EXPECT_EQ(r.fields[2].max_boxes, 7);
  EXPECT_EQ(r.fields[2].format, BoxFormat::kCXCYWH);
  EXPECT_EQ(r.fields[4].kind, FieldKind::kTensor);
  EXPECT_EQ(r.fields[4].folder, "depths");
  ASSERT_EQ(r.views.size(), 1u);
  EXPECT_EQ(r.views[0].name, "global");
  EXPECT_EQ(r.views[0].count, 2);
  EXPECT_EQ(std::get<RandomResizedCrop>(r.views[0].transforms[0]).scale[0], 0.4);
  EXPECT_EQ(r.coco.image_root, "images");
  EXPECT_TRUE(r.coco.skip_empty && r.coco.keep_crowd);
  EXPECT_EQ(r.remote.cache_dir, "/tmp/shards");
  EXPECT_EQ(r.remote.cache_limit, 1u << 30);
  EXPECT_EQ(r.remote.connections, 3);
  EXPECT_EQ(r.remote.retries, 2);
  ASSERT_EQ(r.volume_transforms.size(), 9u);
  EXPECT_EQ(std::get<RandCropByPosNegLabel>(r.volume_transforms[1]).label_key, "seg");
  EXPECT_EQ(std::get<RandCropByPosNegLabel>(r.volume_transforms[1]).num_samples, 4);
  EXPECT_EQ(std::get<SpatialPad>(r.volume_transforms[0]).method, PadMethod::kEnd);
  EXPECT_EQ(std::get<RandFlip>(r.volume_transforms[5]).spatial_axis, (std::vector<int>{0, 2}));
  EXPECT_FALSE(std::get<ScaleIntensityRange>(r.volume_transforms[7]).b_max.has_value());
  EXPECT_EQ(std::get<NormalizeIntensity>(r.volume_transforms[8]).subtrahend, (std::vector<double>{1.0, 2.0}));
  EXPECT_EQ(r.max_volume_voxels, 1u << 20);
  // Missing fields keep their defaults; malformed input is a clear error.
  EXPECT_EQ(options_from_json("{}").batch_size, LoaderOptions{}.batch_size);
  EXPECT_THROW(options_from_json("not json"), Error);
  // The test sets every option away from its default (so none is left out
  // of the codec unnoticed): each key of the JSON differs from the default's.
  const auto set = nlohmann::json::parse(j), defaults = nlohmann::json::parse(options_to_json(LoaderOptions{}));
  std::size_t keys = 0;
  for (const auto& [key, value] : defaults.items()) {
    EXPECT_NE(set.at(key), value) << "option '" << key << "' keeps its default in this test";
    ++keys;
  }
  EXPECT_EQ(keys, 40u);
  // Errors name the option and what it must be.
  auto message = [](const std::string& js) {
    try {
      (void)options_from_json(js);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Code::kInvalidArgument);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message(R"({"cache":"disk"})"), "cache must be one of 'mmap', 'ram', 'decoded', 'auto', got 'disk'");
  EXPECT_EQ(message(R"({"batch_size":2.5})"), "batch_size must be an integer, got 2.5");
  EXPECT_EQ(message(R"({"batch_size":-3})"), "batch_size must be a non-negative integer, got -3");
  EXPECT_EQ(message(R"({"shuffle":1})"), "shuffle must be true or false, got 1");
  EXPECT_EQ(message(R"({"labels":5})"), "labels must be a string, got 5");
  EXPECT_EQ(message(R"({"threads":99999999999})"), "threads must be a smaller integer, got 99999999999");
  EXPECT_EQ(message(R"({"batch_sise":8})"), "unknown option 'batch_sise'");
  EXPECT_EQ(message(R"({"transforms":[{"name":"Blur"}]})"), "transforms: unknown transform 'Blur'");
  EXPECT_EQ(message(R"({"fields":[{"name":"x","kind":"pixels"}]})"),
            "field 'x': kind must be one of 'image', 'mask', 'boxes', 'label', 'tensor', 'volume', 'label_volume', "
            "'bytes', got 'pixels'");
  EXPECT_EQ(message(R"({"fields":[{"name":"x"}]})"),
            "field 'x': no kind (one of image, mask, boxes, label, tensor, volume, label_volume, bytes)");
  EXPECT_EQ(message(R"({"volume_transforms":[{"name":"RandFlip","prob":2}]})"), "RandFlip: prob must be in [0, 1], got 2.000000");
  EXPECT_EQ(message(R"({"volume_transforms":[{"name":"RandFlip","axis":1}]})"), "RandFlip: unknown parameter 'axis'");
  EXPECT_EQ(message(R"({"fields":[{"name":"b","kind":"boxes","format":"yxyx"}]})"),
            "field 'b': format must be one of 'xyxy', 'xywh', 'cxcywh', got 'yxyx'");
}

// A schema's rules are checked at construction, naming the field.
TEST(LoaderTest, SchemaErrorsNameTheField) {
  auto message = [](std::vector<Field> fields, std::vector<Transform> transforms = {}) {
    LoaderOptions o;
    o.fields = std::move(fields);
    o.transforms = std::move(transforms);
    try {
      validate_options(o);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Code::kInvalidArgument);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message({ImageField("x"), MaskField("x")}), "field 'x': the name 'x' is used twice in the batch");
  EXPECT_EQ(message({ImageField("image"), BoxesField("b"), LabelField("b_count")}),
            "field 'b_count': the name 'b_count' is used twice in the batch");
  EXPECT_EQ(message({MaskField("seg"), LabelField("label")}),
            "field 'seg' (mask) follows an image's geometry, but the schema has no image field");
  EXPECT_EQ(message({ImageField("a"), ImageField("b")}), "field 'b' (image): a schema has at most one image field");
  EXPECT_EQ(message({ImageField("a"), MaskField("m", 70000)}), "field 'm' (mask): fill must be in [0, 65535], got 70000");
  EXPECT_EQ(message({ImageField("a"), BoxesField("b", 0)}), "field 'b' (boxes): max_boxes must be >= 1, got 0");
  EXPECT_EQ(message({TensorField("t")}, {CenterCrop{}}),
            "transforms apply to an image field, and the schema has none: pass transforms=[]");
  EXPECT_EQ(message({Field{"", FieldKind::kLabel, ""}}), "fields: a field has an empty name");
  EXPECT_EQ(message({ImageField("image"), LabelField("label")}, {CenterCrop{}}), "no error");
}
}  // namespace
}  // namespace stoker

namespace stoker {
namespace {

// A schema of named fields: a batch holds one tensor per output, in schema
// order, each the records' members; a missing member is a counted sample
// error naming the record, the field and the member.
TEST(LoaderTest, SchemaBatchesAreNamedTensors) {
  testing::TempDir d;
  std::string csv = "image,depth,boxes,label\n";
  for (int i = 0; i < 5; ++i) {
    const std::string n = std::to_string(i);
    testing::write_file(d.file("im" + n + ".jpg"), testing::encode_jpeg(testing::test_pixels(40, 30, i), 40, 30));
    const std::vector<std::int16_t> depth = {static_cast<std::int16_t>(i), -2, 3, 4, 5, 6};
    testing::write_file(d.file("d" + n + ".npy"), testing::npy_bytes("<i2", "(2, 3)", depth.data(), 12));
    const std::vector<float> boxes = {2, 3, 12, 13, 7};  // one box, class 7
    testing::write_file(d.file("b" + n + ".npy"), testing::npy_bytes("<f4", "(1, 5)", boxes.data(), 20));
    csv += "im" + n + ".jpg," + (i == 3 ? "" : "d" + n + ".npy") + ",b" + n + ".npy," + std::to_string(20 + i) + "\n";
  }
  testing::write_file(d.file("list.csv"), csv);
  LoaderOptions o;
  o.batch_size = 2;
  o.threads = 2;
  o.dtype = DType::kUInt8;
  o.transforms = {Resize{15, 20}};
  o.fields = {ImageField("image"), TensorField("depth"), BoxesField("boxes", 3), LabelField("label")};
  Loader l(d.file("list.csv"), o);
  std::vector<std::int64_t> labels;
  for (const Batch& b : l) {
    std::vector<std::string> names;
    for (const TensorView& t : b.tensors()) names.push_back(t.name);
    ASSERT_EQ(names, (std::vector<std::string>{"image", "depth", "boxes", "boxes_labels", "boxes_count", "label"}));
    const auto n = static_cast<std::int64_t>(b.size());
    EXPECT_EQ(b.tensor("image")->dims, (std::vector<std::int64_t>{n, 3, 15, 20}));
    EXPECT_EQ(b.tensor("depth")->descr, "<i2");
    EXPECT_EQ(b.tensor("depth")->dims, (std::vector<std::int64_t>{n, 2, 3}));
    EXPECT_EQ(b.tensor("boxes")->dims, (std::vector<std::int64_t>{n, 3, 4}));
    EXPECT_EQ(b.tensor("label")->descr, "<i8");
    EXPECT_EQ(b.tensor("nothing"), nullptr);
    for (std::int64_t k = 0; k < n; ++k) {
      const std::int64_t label = testing::labels_of(b)[k];
      labels.push_back(label);
      EXPECT_EQ(static_cast<const std::int16_t*>(b.tensor("depth")->data)[6 * k], label - 20);
      // The box scaled by the resize (40x30 -> 20x15: halved), its class, the padding.
      const float* box = static_cast<const float*>(b.tensor("boxes")->data) + 12 * k;
      EXPECT_EQ(std::vector<float>(box, box + 8), (std::vector<float>{1, 1.5f, 6, 6.5f, 0, 0, 0, 0}));
      EXPECT_EQ(static_cast<const std::int64_t*>(b.tensor("boxes_labels")->data)[3 * k], 7);
      EXPECT_EQ(static_cast<const std::int64_t*>(b.tensor("boxes_labels")->data)[3 * k + 1], -1);
      EXPECT_EQ(static_cast<const std::int64_t*>(b.tensor("boxes_count")->data)[k], 1);
    }
  }
  EXPECT_EQ(labels, (std::vector<std::int64_t>{20, 21, 22, 24, 24}));  // record 3 skipped: the next takes its place
  const Stats s = l.stats();
  EXPECT_EQ(s.corrupt, 1u);
  EXPECT_EQ(s.corrupt_by_reason.at("not_found"), 1u);
  ASSERT_EQ(s.corrupt_examples.size(), 1u);
  EXPECT_NE(s.corrupt_examples[0].find("im3.jpg"), std::string::npos) << s.corrupt_examples[0];
  EXPECT_NE(s.corrupt_examples[0].find("field 'depth'"), std::string::npos) << s.corrupt_examples[0];
}

}  // namespace
}  // namespace stoker

namespace stoker {
namespace {

// A mixture through the C++ API: the epoch's draws by source, the source
// index as a field, the state naming the sources, and a mid-epoch resume
// equal to the uninterrupted run.
TEST(LoaderTest, MixtureDrawsTheWeightsAndResumesExactly) {
  testing::TempDir a, b;
  Mixture mix;
  mix.sources = {{"a", {numbered_list(a, 9)}, 1.0, 0, {}}, {"b", {numbered_list(b, 4)}, 3.0, 100, {}}};
  mix.samples_per_epoch = 40;
  LoaderOptions o = small(/*batch=*/6);
  o.shuffle = true;
  o.fields = {ImageField("image"), LabelField("label"), LabelField("source", "mix:source")};
  Loader l(mix, o);
  EXPECT_EQ(l.num_samples(), 40u);
  EXPECT_EQ(l.source().size(), 13u);
  std::vector<std::vector<float>> ref;
  std::vector<std::int64_t> labels, sources;
  l.set_epoch(3);
  for (const Batch& batch : l) {
    const TensorView* src = batch.tensor("source");
    ASSERT_NE(src, nullptr);
    const auto* s = static_cast<const std::int64_t*>(src->data);
    sources.insert(sources.end(), s, s + batch.size());
    labels.insert(labels.end(), testing::labels_of(batch), testing::labels_of(batch) + batch.size());
    const auto* p = static_cast<const float*>(testing::images_of(batch));
    ref.emplace_back(p, p + batch.size() * 3 * 16 * 16);
  }
  ASSERT_EQ(sources.size(), 40u);
  EXPECT_EQ(std::count(sources.begin(), sources.end(), 1), 30) << "3/4 of 40 draws";
  for (std::size_t i = 0; i < 40; ++i) EXPECT_EQ(labels[i] >= 100, sources[i] == 1) << i;
  const Stats st = l.stats();
  ASSERT_EQ(st.mixture.size(), 2u);
  EXPECT_EQ(st.mixture[1].per_epoch, 30u);
  EXPECT_EQ(st.mixture[1].drawn, 30u);
  EXPECT_DOUBLE_EQ(st.mixture[1].weight_share, 0.75);

  Loader first(mix, o);
  first.set_epoch(3);
  first.start_epoch();
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(first.next());
  const Loader::State state = first.state_dict();
  ASSERT_EQ(state.mixture.size(), 2u);
  EXPECT_EQ(state.mixture[0].name, "a");
  EXPECT_EQ(state.mixture[0].size, 9u);
  EXPECT_EQ(state.mixture[0].count, 10u);
  Loader resumed(mix, o);
  resumed.load_state_dict(state);
  std::size_t k = 2;
  for (const Batch& batch : resumed) {
    const auto* p = static_cast<const float*>(testing::images_of(batch));
    ASSERT_LT(k, ref.size());
    EXPECT_EQ(std::vector<float>(p, p + batch.size() * 3 * 16 * 16), ref[k]) << "batch " << k;
    ++k;
  }
  EXPECT_EQ(k, ref.size());
}

}  // namespace
}  // namespace stoker
