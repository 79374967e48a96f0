// LoaderOptions::hook: each sample reaches the caller's stage at its own
// size after stoker's transforms, a batch stage runs once per batch, and the
// stage's errors follow on_corrupt.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "stoker/hook.h"
#include "stoker/loader.h"
#include "test_util.h"
#include "util/thread.h"

namespace stoker {
namespace {

using testing::TempDir;
using testing::numbered_list;

// Records what it is handed; fails the samples of `bad_records`.
class Recorder final : public SampleHook {
 public:
  std::set<std::uint32_t> bad_records;
  bool fail_batches = false;

  Status sample(std::uint64_t run, std::uint64_t, std::size_t batch, std::size_t pos, const HookSample& s) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (bad_records.count(s.record)) return Status(Code::kPython, "ValueError: record " + std::to_string(s.record));
    Seen& seen = samples_[{run, batch}][pos];
    seen.record = s.record;
    seen.label = s.label;
    seen.dims = s.dims;
    seen.descr = s.descr;
    seen.first = *static_cast<const std::uint8_t*>(s.image);
    return Status::Ok();
  }
  Status batch(std::uint64_t run, std::uint64_t, std::size_t batch, std::size_t size) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++batch_calls_[{run, batch}];
    sizes_[{run, batch}] = size;
    if (fail_batches) return Status(Code::kPython, "RuntimeError: collate");
    return Status::Ok();
  }

  struct Seen {
    std::uint32_t record = 0;
    std::int64_t label = -1;
    std::vector<std::int64_t> dims;
    std::string descr;
    std::uint8_t first = 0;
  };
  std::map<std::pair<std::uint64_t, std::size_t>, std::map<std::size_t, Seen>> samples_;
  std::map<std::pair<std::uint64_t, std::size_t>, int> batch_calls_;
  std::map<std::pair<std::uint64_t, std::size_t>, std::size_t> sizes_;

 private:
  std::mutex mu_;
};

LoaderOptions hooked(std::shared_ptr<SampleHook> hook) {
  LoaderOptions o;
  o.batch_size = 4;
  o.threads = 2;
  o.dtype = DType::kUInt8;
  o.layout = Layout::kNHWC;
  o.transforms = {Resize{16, 0}};  // the shorter side 16: samples keep their own aspect, so sizes differ
  o.hook = std::move(hook);
  return o;
}

TEST(HookTest, EachSampleAtItsOwnSizeAndOneBatchCallPerBatch) {
  TempDir d;
  auto hook = std::make_shared<Recorder>();
  Loader l(numbered_list(d, 10), hooked(hook));
  std::size_t batches = 0;
  for (const Batch& b : l) {
    (void)b;
    ++batches;
  }
  ASSERT_EQ(batches, 3u);
  ASSERT_EQ(hook->batch_calls_.size(), 3u);
  std::set<std::uint32_t> records;
  for (const auto& [key, n] : hook->batch_calls_) {
    EXPECT_EQ(n, 1);
    const auto& samples = hook->samples_.at(key);
    EXPECT_EQ(samples.size(), hook->sizes_.at(key));
    for (const auto& [pos, s] : samples) {
      records.insert(s.record);
      EXPECT_EQ(s.label, static_cast<std::int64_t>(s.record));
      EXPECT_EQ(s.descr, "|u1");
      ASSERT_EQ(s.dims.size(), 3u);
      const int w = 24 + static_cast<int>(s.record * 7) % 50, h = 20 + static_cast<int>(s.record * 13) % 40;
      // torchvision's Resize(16): the shorter side 16, the other int(16 * long / short)
      const std::int64_t eh = h <= w ? 16 : 16 * h / w, ew = w <= h ? 16 : 16 * w / h;
      EXPECT_EQ(s.dims, (std::vector<std::int64_t>{eh, ew, 3})) << "record " << s.record;
    }
  }
  EXPECT_EQ(records.size(), 10u);
  EXPECT_GT(l.stats().python_s, 0.0);
}

TEST(HookTest, AFailedSampleIsSkippedAndCountedOrRaised) {
  TempDir d;
  const std::string list = numbered_list(d, 8);
  {
    auto hook = std::make_shared<Recorder>();
    hook->bad_records = {5};
    auto o = hooked(hook);
    o.on_corrupt = OnCorrupt::kSkip;
    Loader l(list, o);
    for (const Batch& b : l) (void)b;
    std::set<std::uint32_t> records;
    for (const auto& [key, samples] : hook->samples_) {
      for (const auto& [pos, s] : samples) records.insert(s.record);
    }
    EXPECT_EQ(records.count(5), 0u);
    const Stats st = l.stats();
    EXPECT_EQ(st.corrupt, 1u);
    EXPECT_EQ(st.corrupt_by_reason.at("python"), 1u);
    ASSERT_EQ(st.corrupt_examples.size(), 1u);
    EXPECT_NE(st.corrupt_examples[0].find("img5.jpg"), std::string::npos) << st.corrupt_examples[0];
  }
  {
    auto hook = std::make_shared<Recorder>();
    hook->bad_records = {5};
    auto o = hooked(hook);
    o.on_corrupt = OnCorrupt::kRaise;
    Loader l(list, o);
    l.start_epoch();
    EXPECT_TRUE(l.next().has_value());
    try {
      (void)l.next();
      FAIL() << "batch 1 holds record 5";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Code::kPython);
      EXPECT_NE(std::string(e.what()).find("ValueError: record 5"), std::string::npos) << e.what();
    }
  }
}

TEST(HookTest, AFailedBatchStageFailsThatBatch) {
  TempDir d;
  auto hook = std::make_shared<Recorder>();
  hook->fail_batches = true;
  Loader l(numbered_list(d, 8), hooked(hook));
  l.start_epoch();
  try {
    (void)l.next();
    FAIL() << "the batch stage failed";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::kPython);
    EXPECT_NE(std::string(e.what()).find("collate"), std::string::npos);
  }
}

TEST(HookTest, OnlyTheDefaultSchemaOfImages) {
  TempDir d;
  auto o = hooked(std::make_shared<Recorder>());
  o.fields = {ImageField("image"), LabelField("label")};
  EXPECT_THROW(Loader(numbered_list(d, 4), o), Error);
}

TEST(HookTest, CloseStopsTheWorkersAndNextSaysSo) {
  TempDir d;
  auto hook = std::make_shared<Recorder>();
  Loader l(numbered_list(d, 8), hooked(hook));
  l.start_epoch();
  EXPECT_TRUE(l.next().has_value());
  l.close();
  l.close();  // idempotent
  EXPECT_THROW((void)l.next(), Error);
}

// Frees the loader it runs in from its first sample on, the way Python's
// garbage collector can free a loader on one of its own workers; then says
// what its threads were named. Calling close() there is refused.
class Freer final : public SampleHook {
 public:
  std::unique_ptr<Loader>* owner = nullptr;
  std::mutex mu;
  std::string close_error;
  bool freed = false;

  Status sample(std::uint64_t, std::uint64_t, std::size_t, std::size_t, const HookSample&) override {
    std::unique_ptr<Loader> mine;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (freed) return Status::Ok();
      try {
        (*owner)->close();
      } catch (const Error& e) {
        close_error = e.what();
      }
      mine = std::move(*owner);
      freed = true;
    }
    mine.reset();  // ~Loader on its own worker: closed and destroyed on a thread of its own
    return Status::Ok();
  }
  Status batch(std::uint64_t, std::uint64_t, std::size_t, std::size_t) override { return Status::Ok(); }
};

std::size_t threads_named(const std::string& prefix) {
  std::size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream f(e.path() / "comm");
    std::string name;
    if (std::getline(f, name) && name.rfind(prefix, 0) == 0) ++n;
  }
  return n;
}

TEST(HookTest, ALoaderFreedOnItsOwnWorkerIsClosedOnAThreadOfItsOwn) {
  TempDir d;
  const std::string list = numbered_list(d, 12);
  for (int round = 0; round < 3; ++round) {
    auto hook = std::make_shared<Freer>();
    auto loader = std::make_unique<Loader>(list, hooked(hook));
    hook->owner = &loader;
    loader->start_epoch();
    // The worker frees the loader while it makes the first batch; the
    // facade is gone before next() could be called on it, so this waits
    // until the hook has run (bounded: 10 s).
    for (int i = 0; i < 1000; ++i) {
      {
        std::lock_guard<std::mutex> lock(hook->mu);
        if (hook->freed) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    {
      std::lock_guard<std::mutex> lock(hook->mu);
      ASSERT_TRUE(hook->freed);
      EXPECT_NE(hook->close_error.find("own worker threads"), std::string::npos) << hook->close_error;
    }
    EXPECT_EQ(loader, nullptr);
    detail::join_deferred();  // the thread that closed it, and so its workers, have ended
    EXPECT_EQ(threads_named("stoker-"), 0u);
  }
}

}  // namespace
}  // namespace stoker
