#include "source/tar.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "source/shard_index.h"
#include "source/shard_source.h"
#include "stoker/source.h"
#include "test_util.h"

namespace stoker::detail {
namespace {

// A tar written by TarWriter, read back into memory.
std::vector<std::uint8_t> make_tar(const std::vector<std::pair<std::string, std::string>>& files) {
  testing::TempDir d;
  TarWriter w(d.file("t.tar"));
  EXPECT_TRUE(w.open().ok());
  for (const auto& [name, data] : files) {
    EXPECT_TRUE(w.add(name, reinterpret_cast<const std::uint8_t*>(data.data()), data.size(), 0).ok());
  }
  EXPECT_TRUE(w.finish().ok());
  std::vector<std::uint8_t> bytes;
  FILE* f = std::fopen(d.file("t.tar").c_str(), "rb");
  int c;
  while ((c = std::fgetc(f)) != EOF) bytes.push_back(static_cast<std::uint8_t>(c));
  std::fclose(f);
  return bytes;
}

Status scan(const std::vector<std::uint8_t>& tar, std::vector<TarMember>* out) {
  auto read_at = [&](std::uint8_t* b, std::size_t n, std::uint64_t off) -> long long {
    if (off >= tar.size()) return 0;
    n = std::min<std::size_t>(n, tar.size() - off);
    std::memcpy(b, tar.data() + off, n);
    return static_cast<long long>(n);
  };
  return scan_tar(read_at, tar.size(), "t.tar", out);
}

TEST(TarTest, WriterOutputScansBack) {
  const std::string long_name = "dir/" + std::string(150, 'k') + ".jpg";
  auto tar = make_tar({{"a.jpg", "hello"}, {"a.cls", "3"}, {long_name, std::string(1000, 'z')}, {"empty.txt", ""}});
  EXPECT_EQ(tar.size() % 512, 0u);
  std::vector<TarMember> m;
  ASSERT_TRUE(scan(tar, &m).ok());
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0].name, "a.jpg");
  EXPECT_EQ(std::string(tar.begin() + static_cast<long>(m[0].offset), tar.begin() + static_cast<long>(m[0].offset + m[0].size)), "hello");
  EXPECT_EQ(m[2].name, long_name);  // via a pax header
  EXPECT_EQ(m[2].size, 1000u);
  EXPECT_EQ(m[3].size, 0u);
}

TEST(TarTest, DamageIsNamedWithOffset) {
  auto tar = make_tar({{"a.jpg", std::string(2000, 'x')}, {"b.jpg", "y"}});
  std::vector<TarMember> m;
  auto cut = tar;
  cut.resize(1024);  // header + part of a's data
  Status s = scan(cut, &m);
  EXPECT_EQ(s.code(), Code::kCorrupt);
  EXPECT_NE(s.message().find("t.tar: offset 0"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("runs past the end"), std::string::npos);

  cut = tar;
  cut.resize(512 * 7);  // both members, no end blocks
  s = scan(cut, &m);
  EXPECT_NE(s.message().find("truncated"), std::string::npos) << s.message();

  auto garbage = tar;
  garbage[10] ^= 0x55;
  s = scan(garbage, &m);
  EXPECT_NE(s.message().find("garbage tar header"), std::string::npos) << s.message();
}

TEST(TarTest, PaxRecords) {
  std::string path;
  std::uint64_t size = UINT64_MAX;
  EXPECT_TRUE(parse_pax("16 path=abc.jpg\n13 size=1234\n", &path, &size));
  EXPECT_EQ(path, "abc.jpg");
  EXPECT_EQ(size, 1234u);
  EXPECT_FALSE(parse_pax("99 path=x\n", &path, &size));    // length past the data
  EXPECT_FALSE(parse_pax("5 path=x\n", &path, &size));     // length too short
  EXPECT_FALSE(parse_pax("x path=y\n", &path, &size));
  EXPECT_FALSE(parse_pax("13 size=12a4\n", &path, &size));
}

TEST(TarTest, WebDatasetKeyRule) {
  std::string key, suffix;
  ASSERT_TRUE(split_key("dir/n01440764_10026.JPEG", &key, &suffix));
  EXPECT_EQ(key, "dir/n01440764_10026");
  EXPECT_EQ(suffix, "jpeg");
  ASSERT_TRUE(split_key("a.seg.png", &key, &suffix));
  EXPECT_EQ(key, "a");
  EXPECT_EQ(suffix, "seg.png");
  EXPECT_FALSE(split_key("dir/README", &key, &suffix));
  EXPECT_FALSE(split_key("dir/.hidden", &key, &suffix));
}

TEST(ShardSpecTest, BraceExpansion) {
  EXPECT_EQ(expand_braces("t-{000..002}.tar"), (std::vector<std::string>{"t-000.tar", "t-001.tar", "t-002.tar"}));
  EXPECT_EQ(expand_braces("{a,b}-{1..2}"), (std::vector<std::string>{"a-1", "a-2", "b-1", "b-2"}));
  EXPECT_EQ(expand_braces("plain.tar"), (std::vector<std::string>{"plain.tar"}));
  EXPECT_THROW(expand_braces("t-{3..1}.tar"), Error);
  EXPECT_THROW(expand_braces("t-{1..x}.tar"), Error);
  EXPECT_THROW(expand_braces("t-{1..2.tar"), Error);
}

std::string slurp(const std::string& path) {
  std::string out;
  if (FILE* f = std::fopen(path.c_str(), "rb")) {
    int c;
    while ((c = std::fgetc(f)) != EOF) out.push_back(static_cast<char>(c));
    std::fclose(f);
  }
  return out;
}

TEST(IndexTest, RoundTripAndTamperDetection) {
  ShardIndex idx;
  idx.shard_size = 10000;
  idx.shard_mtime_ns = 42;
  idx.records.push_back({"dir/a\tb", "jpg", 512, 100, 7, "", {{"jpg", 512, 100}, {"seg.png", 1024, 30}, {"cls", 2048, 1}}});
  idx.records.push_back({"c", "", 0, 0, -1, "sample has no image member", {{"t\tx\\y", 3072, 5}}});
  std::string text = serialize_index(idx);
  EXPECT_EQ(text.rfind("stoker-index " + std::to_string(kIndexVersion) + "\n", 0), 0u);
  ShardIndex back;
  ASSERT_TRUE(parse_index(text, &back).ok());
  ASSERT_EQ(back.records.size(), 2u);
  EXPECT_EQ(back.records[0].key, "dir/a\tb");
  EXPECT_EQ(back.records[0].label, 7);
  EXPECT_EQ(back.records[0].members, idx.records[0].members);
  EXPECT_EQ(back.records[1].members, idx.records[1].members);  // suffixes escaped like keys
  EXPECT_EQ(back.records[1].error, "sample has no image member");
  // A member outside the shard is refused.
  ShardIndex out = idx;
  out.records[0].members[1].offset = 9990;
  EXPECT_FALSE(parse_index(serialize_index(out), &back).ok());
  for (std::size_t i = 0; i < text.size(); i += 7) {  // any flipped byte is caught
    std::string bad = text;
    bad[i] ^= 1;
    EXPECT_FALSE(parse_index(bad, &back).ok()) << "byte " << i;
  }
  EXPECT_FALSE(parse_index(text.substr(0, text.size() / 2), &back).ok());
}

// Numbers with leading zeros (an index edited by hand or written by another tool, checksum
// recomputed) are read as their values, and serialize back without them (F6, fuzz/index_fuzz.cc):
// accepted, not refused, so that such an index keeps being used rather than the shard indexed again.
TEST(IndexTest, LeadingZerosReadAsTheirValues) {
  std::string body =
      "stoker-index 0003\nshard_size 010000\nshard_mtime_ns 00000000000170431860\nlabels cls\nrecords 01\n"
      "k\tjpg\t0512\t00100\t007\t\tjpg\t000512\t0100\n";
  char sum[40];
  std::snprintf(sum, sizeof(sum), "checksum %016llx\n",
                static_cast<unsigned long long>(fnv1a64(body.data(), body.size())));
  ShardIndex idx;
  Status s = parse_index(body + sum, &idx);
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(idx.shard_size, 10000u);
  EXPECT_EQ(idx.shard_mtime_ns, 170431860);
  ASSERT_EQ(idx.records.size(), 1u);
  EXPECT_EQ(idx.records[0].offset, 512u);
  EXPECT_EQ(idx.records[0].size, 100u);
  EXPECT_EQ(idx.records[0].label, 7);
  EXPECT_EQ(idx.records[0].members, (std::vector<IndexMember>{{"jpg", 512, 100}}));
  const std::string canonical = serialize_index(idx);
  EXPECT_NE(canonical.find("shard_mtime_ns 170431860\n"), std::string::npos) << canonical;
  EXPECT_NE(canonical.find("k\tjpg\t512\t100\t7\t\tjpg\t512\t100\n"), std::string::npos) << canonical;
  ShardIndex back;
  ASSERT_TRUE(parse_index(canonical, &back).ok());
  EXPECT_EQ(serialize_index(back), canonical);
}

TEST(IndexTest, BuildGroupsMembersIntoSamples) {
  auto tar = make_tar({{"k1.jpg", "J"}, {"k1.cls", "4"}, {"k1.json", "{}"}, {"k2.txt", "t"}, {"k3.png", "P"},
                       {"k3.cls", "x"}, {"k4.npy", "N"}});
  auto read_at = [&](std::uint8_t* b, std::size_t n, std::uint64_t off) -> long long {
    std::memcpy(b, tar.data() + off, n);
    return static_cast<long long>(n);
  };
  ShardIndex idx;
  ASSERT_TRUE(build_index(read_at, tar.size(), "t.tar", "cls", &idx).ok());
  ASSERT_EQ(idx.records.size(), 4u);
  EXPECT_EQ(idx.records[0].label, 4);
  EXPECT_EQ(idx.records[0].suffix, "jpg");
  EXPECT_NE(idx.records[1].error.find("no image member"), std::string::npos);
  EXPECT_NE(idx.records[2].error.find("not an integer"), std::string::npos);
  EXPECT_EQ(idx.records[3].label, -1);  // no label member
  EXPECT_TRUE(idx.records[3].error.empty());
  // Every member of a sample is in its member table, in tar order.
  ASSERT_EQ(idx.records[0].members.size(), 3u);
  EXPECT_EQ(idx.records[0].members[1].suffix, "cls");
  const auto& js = idx.records[0].members[2];
  EXPECT_EQ(std::string(tar.begin() + static_cast<std::ptrdiff_t>(js.offset),
                        tar.begin() + static_cast<std::ptrdiff_t>(js.offset + js.size)), "{}");
  EXPECT_EQ(idx.records[1].members.size(), 1u);  // "txt": no image member, still listed
}

// Members of shard samples by suffix; an index of version 1 (no member table)
// beside the shard is indexed again and replaced, never misread.
TEST(IndexTest, MembersAreReadByNameAndAnOldIndexIsRebuilt) {
  testing::TempDir data;
  const std::string shard = data.file("m.tar");
  {
    TarWriter w(shard);
    ASSERT_TRUE(w.open().ok());
    auto add = [&](const std::string& name, const std::string& bytes) {
      ASSERT_TRUE(w.add(name, reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size(), 0).ok());
    };
    add("a.jpg", "JPEG-A");
    add("a.seg.png", "MASK-A");
    add("a.cls", "1");
    add("b.jpg", "JPEG-B");
    add("b.cls", "2");
    ASSERT_TRUE(w.finish().ok());
  }
  struct stat st;
  ASSERT_EQ(::stat(shard.c_str(), &st), 0);
  const std::int64_t mtime = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec;
  // A version-1 sidecar that matches the shard's size and time.
  std::string v1 = "stoker-index 1\nshard_size " + std::to_string(st.st_size) + "\nshard_mtime_ns " +
                   std::to_string(mtime) + "\nlabels cls\nrecords 2\na\tjpg\t512\t6\t1\t\nb\tjpg\t2560\t6\t2\t\n";
  char sum[40];
  std::snprintf(sum, sizeof(sum), "checksum %016llx\n", static_cast<unsigned long long>(fnv1a64(v1.data(), v1.size())));
  testing::write_file(shard + ".idx", v1 + sum);
  auto src = open_shards({shard});
  EXPECT_EQ(slurp(shard + ".idx").rfind("stoker-index " + std::to_string(kIndexVersion) + "\n", 0), 0u)
      << "rebuilt in the current format";
  std::vector<std::uint8_t> out;
  ASSERT_TRUE(src->read_member(0, "seg.png", &out).ok());
  EXPECT_EQ(std::string(out.begin(), out.end()), "MASK-A");
  ASSERT_TRUE(src->read(1, &out).ok());
  EXPECT_EQ(std::string(out.begin(), out.end()), "JPEG-B");
  EXPECT_EQ(src->members(0), (std::vector<std::string>{"jpg", "seg.png", "cls"}));
  const Status missing = src->read_member(1, "seg.png", &out);
  EXPECT_EQ(missing.code(), Code::kNotFound);
  EXPECT_EQ(missing.message(), "no member 'seg.png' (members: .jpg, .cls)");
  // A schema names a member without its format: "seg" is the one "seg.<ext>".
  ASSERT_TRUE(src->read_member(0, "seg", &out).ok());
  EXPECT_EQ(std::string(out.begin(), out.end()), "MASK-A");
  // A source of one file per record has no other members, and says so.
  testing::write_file(data.file("list.csv"), "path,label\n" + shard + ",0\n");
  EXPECT_EQ(open_source(data.file("list.csv"))->read_member(0, "seg.png", &out).code(), Code::kNotFound);
}


// With index_dir, a sidecar that must be built goes there; the one beside the
// shard (the user's) is read when it matches and never rewritten.
TEST(IndexTest, IndexDirKeepsTheShardFolderUntouched) {
  testing::TempDir data, idx;
  const std::string shard = data.file("s.tar");
  {
    TarWriter w(shard);
    ASSERT_TRUE(w.open().ok());
    const std::string jpg = "J", js = R"({"y": 3})", cls = "5";
    ASSERT_TRUE(w.add("a.jpg", reinterpret_cast<const std::uint8_t*>(jpg.data()), jpg.size(), 0).ok());
    ASSERT_TRUE(w.add("a.json", reinterpret_cast<const std::uint8_t*>(js.data()), js.size(), 0).ok());
    ASSERT_TRUE(w.add("a.cls", reinterpret_cast<const std::uint8_t*>(cls.data()), cls.size(), 0).ok());
    ASSERT_TRUE(w.finish().ok());
  }
  // The user's loader writes its sidecar (json labels) beside the shard.
  EXPECT_EQ(open_shards({shard}, "json:y")->label(0), 3);
  const std::string user_idx = slurp(shard + ".idx");
  ASSERT_FALSE(user_idx.empty());
  // Another label rule needs another index: built into index_dir, not beside the shard.
  EXPECT_EQ(open_shards({shard}, "cls", idx.path())->label(0), 5);
  EXPECT_EQ(slurp(shard + ".idx"), user_idx);
  std::string flat = shard + ".idx";
  std::replace(flat.begin(), flat.end(), '/', '%');
  EXPECT_FALSE(slurp(idx.file(flat)).empty());
  // The same rule as the user's: their sidecar is read as it is.
  EXPECT_EQ(open_shards({shard}, "json:y", idx.path())->label(0), 3);
  EXPECT_EQ(open_shards({shard}, "cls", idx.path())->label(0), 5);  // found in index_dir this time
  EXPECT_EQ(slurp(shard + ".idx"), user_idx);
}

}  // namespace
}  // namespace stoker::detail
