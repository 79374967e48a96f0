// The sample maker alone, on the test's own thread: its samples are the
// loader's (the loader's output is checked against torchvision in
// tests/python), and an exception in the sample path becomes a counted
// sample error, in the loader as here, never std::terminate.
#include "sample/sample_maker.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "stoker/loader.h"
#include "test_util.h"

namespace stoker {
namespace {

using testing::TempDir;

std::string jpeg_list(const TempDir& d, int n) {
  std::string list = "path,label\n";
  for (int i = 0; i < n; ++i) {
    const int w = 40 + 9 * i, h = 30 + 5 * i;
    const std::string name = std::string("i") + std::to_string(i) + ".jpg";
    testing::write_file(d.file(name),
                        testing::encode_jpeg(testing::test_pixels(w, h, static_cast<std::uint32_t>(i)), w, h));
    list += name;
    list += ',';
    list += std::to_string(10 + i);
    list += '\n';
  }
  testing::write_file(d.file("list.csv"), list);
  return d.file("list.csv");
}

// Sample 0's label in a batch buffer.
std::int64_t label_of(const detail::SampleMaker& maker, const std::vector<std::uint8_t>& batch) {
  std::int64_t label;
  std::memcpy(&label, batch.data() + maker.spec().outputs.at(static_cast<std::size_t>(maker.spec().label_output)).offset,
              sizeof label);
  return label;
}

LoaderOptions opts(Cache cache) {
  LoaderOptions o;
  o.batch_size = 1;
  o.threads = 1;
  o.seed = 7;
  o.cache.mode = cache;
  o.transforms = {RandomResizedCrop{24, 20}, RandomHorizontalFlip{},
                  Normalize{{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}}};
  return o;
}

// Each record's sample from make() on this thread is the loader's, byte for
// byte (batch_size 1, unshuffled: batch r is record r), for every cache mode
// and over two epochs (their random draws differ).
TEST(SampleMakerTest, MakesTheLoadersSamplesWithoutThreads) {
  TempDir d;
  const std::string list = jpeg_list(d, 5);
  for (Cache cache : {Cache::kMmap, Cache::kRam, Cache::kDecoded}) {
    const LoaderOptions o = opts(cache);
    std::shared_ptr<const Source> src(open_source(list));
    std::unique_ptr<detail::SampleCache> sc;
    if (cache != Cache::kMmap) sc = std::make_unique<detail::SampleCache>(src->size(), 1 << 26);
    detail::SampleMaker maker(*src, o, sc.get());
    EXPECT_FALSE(maker.spec().arrays);
    EXPECT_EQ(maker.spec().dims, (std::vector<std::int64_t>{3, 24, 20}));
    EXPECT_EQ(maker.spec().descr, "<f4");
    ASSERT_EQ(maker.spec().bytes, 3u * 24 * 20 * sizeof(float));
    Loader loader(list, o);
    detail::Scratch scratch;
    std::vector<std::uint8_t> out(maker.spec().batch_bytes);
    for (std::uint64_t epoch = 0; epoch < 2; ++epoch) {
      loader.set_epoch(epoch);
      std::uint32_t rec = 0;
      for (const Batch& b : loader) {
        ASSERT_TRUE(maker.make(rec, o.seed, epoch, {out.data(), 0}, &scratch).ok());
        EXPECT_EQ(label_of(maker, out), 10 + rec);
        EXPECT_EQ(std::memcmp(out.data(), testing::images_of(b), maker.spec().bytes), 0)
            << "record " << rec << " epoch " << epoch;
        ++rec;
      }
      EXPECT_EQ(rec, 5u);
    }
  }
}

// The loader's decode_scratch account is what its workers' Scratch holds
// (Scratch::bytes(), capacities): with one worker over an unshuffled epoch,
// exactly what make() over the same records leaves in a Scratch here. It
// was reserved from the first records' largest estimate, twice (threads x),
// which covers the scratch of those records; batch()
// charges a Scratch of its own and gives it back.
TEST(SampleMakerTest, TheDecodeScratchAccountIsTheWorkersScratchBytes) {
  TempDir d;
  const std::string list = jpeg_list(d, 5);
  LoaderOptions o = opts(Cache::kMmap);
  o.batch_size = 2;
  std::shared_ptr<const Source> src(open_source(list));
  detail::SampleMaker maker(*src, o, nullptr);
  detail::Scratch first, all;
  std::vector<std::uint8_t> out(maker.spec().batch_bytes);
  ASSERT_TRUE(maker.make(0, o.seed, 0, {out.data(), 0}, &first).ok());
  EXPECT_GT(first.bytes(), 0u);
  EXPECT_GE(maker.scratch_estimate(0), first.bytes());
  for (std::uint32_t rec = 0; rec < 5; ++rec) ASSERT_TRUE(maker.make(rec, o.seed, 0, {out.data(), 0}, &all).ok());
  EXPECT_GT(all.bytes(), first.bytes()) << "records grow: so do the buffers";
  std::uint64_t estimate = 0;
  for (std::uint32_t rec = 0; rec < 5; ++rec) estimate = std::max(estimate, maker.scratch_estimate(rec));
  EXPECT_GE(estimate, all.bytes());

  Loader loader(list, o);
  Stats s = loader.stats();
  EXPECT_EQ(s.memory.accounts.at("decode_scratch"), 0u) << "no sample made yet";
  EXPECT_EQ(s.memory.reserved.at("decode_scratch"), 2 * estimate);  // one worker
  std::size_t batches = 0;
  for (const Batch& b : loader) batches += b.size() > 0;
  EXPECT_EQ(batches, 3u);
  s = loader.stats();
  EXPECT_EQ(s.memory.accounts.at("decode_scratch"), all.bytes());
  EXPECT_EQ(s.memory.over_bytes, 0u);
  const Batch again = loader.batch(0, 2);
  EXPECT_EQ(again.size(), 1u);
  EXPECT_EQ(loader.stats().memory.accounts.at("decode_scratch"), all.bytes()) << "batch()'s scratch given back";
}

TEST(SampleMakerTest, ExceptionBecomesTheSamplesStatus) {
  TempDir d;
  std::shared_ptr<const Source> src(open_source(jpeg_list(d, 3)));
  const LoaderOptions o = opts(Cache::kMmap);
  detail::SampleMaker maker(*src, o, nullptr);
  detail::Scratch scratch;
  std::vector<std::uint8_t> out(maker.spec().batch_bytes);
  detail::testing::throw_in_sample(1);
  EXPECT_TRUE(maker.make(0, 0, 0, {out.data(), 0}, &scratch).ok());
  Status st = maker.make(1, 0, 0, {out.data(), 0}, &scratch);
  EXPECT_EQ(st.code(), Code::kInternal);
  EXPECT_NE(st.message().find("injected"), std::string::npos) << st.message();
  EXPECT_EQ(label_of(maker, out), -1);
  detail::testing::throw_in_sample(2, /*bad_alloc=*/true);
  EXPECT_EQ(maker.make(2, 0, 0, {out.data(), 0}, &scratch).code(), Code::kResourceExhausted);
  detail::testing::throw_in_sample(-1);
  EXPECT_TRUE(maker.make(2, 0, 0, {out.data(), 0}, &scratch).ok());
  EXPECT_EQ(label_of(maker, out), 12);
}

// In the loader, on its worker threads: the process lives, the error is
// counted by reason, and the user's policy applies.
TEST(SampleMakerTest, WorkerExceptionIsACountedErrorUnderThePolicy) {
  TempDir d;
  const std::string list = jpeg_list(d, 6);
  LoaderOptions o = opts(Cache::kMmap);
  o.batch_size = 2;
  o.threads = 2;
  detail::testing::throw_in_sample(3);
  {
    Loader skip(list, o);  // on_corrupt=skip: the next sample of the epoch takes its place
    std::vector<std::int64_t> labels;
    for (const Batch& b : skip) labels.insert(labels.end(), testing::labels_of(b), testing::labels_of(b) + b.size());
    EXPECT_EQ(labels, (std::vector<std::int64_t>{10, 11, 12, 14, 14, 15}));
    const Stats s = skip.stats();
    EXPECT_EQ(s.corrupt, 1u);
    EXPECT_EQ(s.corrupt_by_reason.at("internal"), 1u);
    ASSERT_EQ(s.corrupt_examples.size(), 1u);
    EXPECT_NE(s.corrupt_examples[0].find("record 3 '"), std::string::npos) << s.corrupt_examples[0];
  }
  {
    o.on_corrupt = OnCorrupt::kRaise;
    Loader raise(list, o);
    ASSERT_TRUE(raise.next().has_value());
    try {
      (void)raise.next();
      ADD_FAILURE() << "batch 1 holds record 3: next() should throw";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Code::kInternal);
      EXPECT_NE(std::string(e.what()).find("record 3 '"), std::string::npos) << e.what();
    }
    ASSERT_TRUE(raise.next().has_value());  // iteration goes on after it
    EXPECT_EQ(raise.stats().corrupt_by_reason.at("internal"), 1u);
  }
  detail::testing::throw_in_sample(-1);
}

}  // namespace
}  // namespace stoker
