// The data set manifest (source/manifest.h): its text round trips; a damaged,
// truncated or inconsistent one is an error naming it; a source opened from
// it reads no shard before a record of that shard is read, gives the records
// a source opened from every index gives, and finds a shard that changed
// since the manifest was written, naming both.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "source/manifest.h"
#include "source/shard_bytes.h"
#include "source/shard_source.h"
#include "source/tar.h"
#include "stoker/source.h"
#include "stoker/stats.h"
#include "test_util.h"

namespace stoker {
namespace {

using testing::TempDir;

// Shard s holds `per[s]` records "r<n>": a payload of n-dependent size, its .cls label and a .json.
void write_shard(const std::string& path, int first, int per) {
  detail::TarWriter w(path);
  ASSERT_TRUE(w.open().ok());
  for (int n = first; n < first + per; ++n) {
    std::string key = "r";
    key += std::to_string(n);
    const std::string payload(static_cast<std::size_t>(10 + n % 17), static_cast<char>('a' + n % 26));
    const std::string label = std::to_string(n % 5), json = "{\"n\": " + std::to_string(n) + "}";
    auto add = [&](const std::string& name, const std::string& bytes) {
      ASSERT_TRUE(w.add(name, reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size(), 0).ok());
    };
    add(key + ".npy", payload);
    add(key + ".cls", label);
    if (n % 2 == 0) add(key + ".json", json);
  }
  ASSERT_TRUE(w.finish().ok());
}

std::vector<std::string> make_shards(const TempDir& d, const std::vector<int>& per) {
  std::vector<std::string> paths;
  int n = 0;
  for (std::size_t s = 0; s < per.size(); ++s) {
    paths.push_back(d.file("train-" + std::to_string(s) + ".tar"));
    write_shard(paths.back(), n, per[s]);
    n += per[s];
  }
  return paths;
}

std::uint64_t opens(const Source& src) {
  Stats s;
  src.io_stats(&s);
  return s.shard_file_opens;
}

TEST(ManifestTest, TextRoundTrips) {
  detail::Manifest m;
  m.labels = "json:y";
  m.pack = "max_side=256 quality=95\tand a tab";
  m.members = {{"cls", 7}, {"jpg", 9}, {"seg.png", 2}};
  m.shards = {{"a-0.tar", 4, 4096}, {"sub/b\\1.tar", 5, 10240}, {"/abs/c.tar", 0, 1024}};
  const std::string text = detail::serialize_manifest(m);
  detail::Manifest back;
  ASSERT_TRUE(detail::parse_manifest(text, "m.manifest", &back).ok());
  EXPECT_EQ(back, m);
  EXPECT_EQ(back.records(), 9u);
  EXPECT_EQ(detail::serialize_manifest(back), text);
}

TEST(ManifestTest, DamagedTruncatedOrInconsistentIsAnErrorNamingIt) {
  detail::Manifest m;
  m.shards = {{"a-0.tar", 4, 4096}, {"a-1.tar", 5, 10240}};
  const std::string text = detail::serialize_manifest(m);
  detail::Manifest out;
  // Every truncation (a copy cut short) is refused.
  for (std::size_t cut = 0; cut < text.size(); ++cut) {
    const Status st = detail::parse_manifest(text.substr(0, cut), "d/a.manifest", &out);
    ASSERT_EQ(st.code(), Code::kCorrupt) << "cut at " << cut;
    EXPECT_NE(st.message().find("manifest 'd/a.manifest'"), std::string::npos) << st.message();
  }
  // Every flipped byte of the body is refused (the checksum covers it).
  for (std::size_t i = 0; i < text.rfind("checksum"); ++i) {
    std::string bad = text;
    bad[i] = static_cast<char>(bad[i] ^ 0x04);
    EXPECT_FALSE(detail::parse_manifest(bad, "d/a.manifest", &out).ok()) << "byte " << i;
  }
  // A manifest whose counts do not add up (checksummed as written) is refused by reason.
  std::string body = text.substr(0, text.rfind("checksum"));
  body.replace(body.find("records 9"), 9, "records 8");
  char sum[40];
  std::snprintf(sum, sizeof(sum), "checksum %016llx\n",
                static_cast<unsigned long long>(detail::fnv1a64(body.data(), body.size())));
  const Status st = detail::parse_manifest(body + sum, "d/a.manifest", &out);
  EXPECT_NE(st.message().find("its shards hold 9 records, its header says 8"), std::string::npos) << st.message();
}

TEST(ManifestTest, NameBesideAPattern) {
  EXPECT_EQ(detail::manifest_beside("out/train-{000000..000099}.tar"), "out/train.manifest");
  EXPECT_EQ(detail::manifest_beside("out/train-%06d.tar"), "out/train.manifest");
  EXPECT_EQ(detail::manifest_beside("/d/val_*.tar"), "/d/val.manifest");
  EXPECT_EQ(detail::manifest_beside("{0..9}.tar"), "shards.manifest");
  EXPECT_EQ(detail::manifest_beside("d/one.tar"), "d/one.manifest");
  EXPECT_EQ(detail::manifest_shard_path("/d/x.manifest", "a.tar"), "/d/a.tar");
  EXPECT_EQ(detail::manifest_shard_path("/d/x.manifest", "/e/a.tar"), "/e/a.tar");
  EXPECT_EQ(detail::manifest_shard_name("/d/x.manifest", "/d/sub/a.tar"), "sub/a.tar");
  EXPECT_EQ(detail::manifest_shard_name("/d/x.manifest", "/e/a.tar"), "/e/a.tar");
}

TEST(ManifestTest, OpensShardsOnlyWhenReadAndGivesTheSameRecords) {
  TempDir d;
  const std::vector<int> per = {3, 5, 4, 6};
  const auto paths = make_shards(d, per);
  const std::string pattern = d.path() + "/train-{0..3}.tar";
  const std::string manifest = write_manifest(pattern);
  EXPECT_EQ(manifest, d.file("train.manifest"));
  detail::Manifest m;
  ASSERT_TRUE(detail::read_manifest(manifest, &m).ok());
  ASSERT_EQ(m.shards.size(), 4u);
  EXPECT_EQ(m.shards[1], (detail::ManifestShard{"train-1.tar", 5, std::filesystem::file_size(paths[1])}));
  EXPECT_EQ(m.members, (std::vector<std::pair<std::string, std::uint64_t>>{{"cls", 18}, {"json", 9}, {"npy", 18}}));

  const auto every = open_shards(paths);  // a list of paths: every index read at open, no manifest
  for (const std::string& spec : {pattern, manifest}) {
    const auto lazy = open_shards({spec});
    ASSERT_EQ(lazy->size(), 18u);
    EXPECT_EQ(lazy->shard_starts(), every->shard_starts());
    EXPECT_EQ(opens(*lazy), 0u) << "no shard opened before a read";
    std::vector<std::uint8_t> a, b;
    ASSERT_TRUE(lazy->read(9, &a).ok());  // shard 2's second record
    EXPECT_EQ(opens(*lazy), 1u) << "only the shard read";
    for (std::size_t i = 0; i < lazy->size(); ++i) {
      ASSERT_TRUE(lazy->read(i, &a).ok());
      ASSERT_TRUE(every->read(i, &b).ok());
      EXPECT_EQ(a, b) << i;
      EXPECT_EQ(lazy->key(i), every->key(i));
      EXPECT_EQ(lazy->label(i), every->label(i));
      EXPECT_EQ(lazy->members(i), every->members(i));
      EXPECT_EQ(lazy->read_member(i, "json", &a).code(), every->read_member(i, "json", &b).code());
      EXPECT_EQ(a, b);
    }
    EXPECT_NE(lazy->describe().find("manifest '" + manifest + "'"), std::string::npos) << lazy->describe();
  }
}

TEST(ManifestTest, AShardChangedSinceTheManifestIsAnErrorNamingBoth) {
  TempDir d;
  const auto paths = make_shards(d, {3, 5, 4});
  const std::string manifest = write_manifest(d.path() + "/train-*.tar");
  write_shard(paths[1], 3, 6);  // rewritten with another record count (so another size)
  const auto src = open_shards({manifest});
  std::vector<std::uint8_t> out;
  EXPECT_TRUE(src->read(0, &out).ok()) << "the shards that did not change read";
  const Status st = src->read(4, &out);
  EXPECT_EQ(st.code(), Code::kUnavailable);
  EXPECT_NE(st.message().find("manifest '" + manifest + "' is stale: shard '" + paths[1] + "' is "),
            std::string::npos) << st.message();
  // The same size, another record count: found when its index is read.
  TempDir e;
  const auto p2 = make_shards(e, {4, 4});
  const std::string m2 = write_manifest(e.path() + "/train-*.tar");
  detail::Manifest m;
  ASSERT_TRUE(detail::read_manifest(m2, &m).ok());
  m.shards[1].records = 3;
  m.shards[0].records = 5;
  testing::write_file(m2, detail::serialize_manifest(m));
  const auto src2 = open_shards({m2});
  const Status st2 = src2->read(0, &out);
  EXPECT_EQ(st2.code(), Code::kUnavailable);
  EXPECT_NE(st2.message().find("shard '" + p2[0] + "' holds 4 records, the manifest says 5"), std::string::npos)
      << st2.message();
  // A shard the pattern names that the manifest does not list: refused at open.
  write_shard(e.file("train-2.tar"), 8, 2);
  try {
    open_shards({e.path() + "/train-*.tar"});
    ADD_FAILURE() << "opened";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("does not list shard '" + e.file("train-2.tar") + "'"), std::string::npos)
        << err.what();
  }
  // A damaged manifest beside the pattern: refused at open, naming it.
  std::string text = detail::serialize_manifest(m);
  testing::write_file(m2, text.substr(0, text.size() / 2));
  try {
    open_shards({e.path() + "/train-{0..1}.tar"});
    ADD_FAILURE() << "opened";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("manifest '" + m2 + "'"), std::string::npos) << err.what();
  }
}

// A LocalShardBytes that counts the indexes it loads.
class CountingBytes final : public detail::ShardBytes {
 public:
  explicit CountingBytes(std::unique_ptr<detail::LocalShardBytes> inner) : inner_(std::move(inner)) {}
  Status read_at(std::uint32_t shard, std::uint64_t off, std::uint64_t size, std::vector<std::uint8_t>* out) const override {
    return inner_->read_at(shard, off, size, out);
  }
  Status load_index(std::uint32_t shard, detail::ShardIndex* out) const override {
    ++loads;
    return inner_->load_index(shard, out);
  }
  mutable std::atomic<int> loads{0};

 private:
  std::unique_ptr<detail::LocalShardBytes> inner_;
};

// Indexes past the budget are evicted, least recently used first, and read again when needed; records stay right.
TEST(ManifestTest, IndexesPastTheBudgetAreEvictedAndReadAgain) {
  TempDir d;
  const auto paths = make_shards(d, {3, 5, 4});
  const auto every = open_shards(paths);
  for (const std::size_t budget : {std::size_t{100}, std::size_t{6}}) {
    std::vector<detail::LocalShardBytes::File> files;
    for (const auto& p : paths) {
      detail::LocalShardBytes::File f;
      f.path = p;
      f.size = std::filesystem::file_size(p);
      f.pinned = false;
      files.push_back(f);
    }
    auto local = std::make_unique<detail::LocalShardBytes>(files, std::vector<int>{}, 0, "m.manifest");
    local->set_index_options(detail::ShardOptions{});
    auto counting = std::make_unique<CountingBytes>(std::move(local));
    const CountingBytes* c = counting.get();
    const auto src = detail::make_manifest_shard_source(paths, {3, 5, 4}, {0, 0, 0}, "m.manifest", budget,
                                                        std::move(counting));
    std::vector<std::uint8_t> a, b;
    for (const std::size_t i : {0, 1, 3, 7, 2, 4, 9}) {  // shards 0, 0, 1, 1, 0, 1, 2
      ASSERT_TRUE(src->read(i, &a).ok());
      ASSERT_TRUE(every->read(i, &b).ok());
      EXPECT_EQ(a, b) << i;
      EXPECT_EQ(src->key(i), every->key(i));
    }
    // A budget of 100 records holds all three; one of 6 holds one shard at a time (the one being read is kept):
    // 0, 1, 0 again, 1 again, 2.
    EXPECT_EQ(c->loads.load(), budget == 100 ? 3 : 5) << "budget " << budget;
  }
}

}  // namespace
}  // namespace stoker
