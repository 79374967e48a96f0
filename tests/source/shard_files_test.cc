// Local shards through a bounded pool of file descriptors: every read gets
// its shard's bytes however few descriptors may be open, the pool never
// holds more than its limit once reads are done, and a shard replaced
// behind the loader's back is an error naming it, never another file's bytes.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "source/manifest.h"
#include "source/shard_bytes.h"
#include "test_util.h"

namespace stoker::detail {
namespace {

LocalShardBytes::File file_of(const std::string& path) {
  struct stat st;
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  LocalShardBytes::File f;
  f.path = path;
  f.dev = static_cast<std::uint64_t>(st.st_dev);
  f.ino = static_cast<std::uint64_t>(st.st_ino);
  f.size = static_cast<std::uint64_t>(st.st_size);
  f.mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec;
  return f;
}

std::string content(std::size_t shard) {
  std::string s(3000 + shard * 7, '\0');
  for (std::size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>((i * 31 + shard * 17) & 0xff);
  return s;
}

TEST(ShardFilesTest, ManyShardsReadThroughAFewDescriptors) {
  testing::TempDir d;
  constexpr std::size_t kShards = 40, kMaxOpen = 4;
  std::vector<LocalShardBytes::File> files;
  std::vector<int> fds;
  for (std::size_t s = 0; s < kShards; ++s) {
    const std::string path = d.file("s-" + std::to_string(s) + ".tar");
    testing::write_file(path, content(s));
    files.push_back(file_of(path));
    fds.push_back(s < 10 ? ::open(path.c_str(), O_RDONLY | O_CLOEXEC) : -1);  // as construction leaves them
  }
  LocalShardBytes bytes(files, fds, kMaxOpen);
  EXPECT_EQ(bytes.max_open(), kMaxOpen);
  EXPECT_EQ(bytes.open_now(), kMaxOpen) << "the descriptors past the limit were closed at once";
  // 4 threads, each reading 300 random ranges of random shards.
  std::vector<int> bad(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t + 1));
      std::vector<std::uint8_t> out;
      for (int i = 0; i < 300; ++i) {
        const std::size_t s = rng() % kShards;
        const std::string want = content(s);
        const std::size_t off = rng() % (want.size() - 100), n = 1 + rng() % 99;
        const Status st = bytes.read_at(static_cast<std::uint32_t>(s), off, n, &out);
        bad[static_cast<std::size_t>(t)] += !st.ok() || std::string(out.begin(), out.end()) != want.substr(off, n);
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int b : bad) EXPECT_EQ(b, 0);
  EXPECT_LE(bytes.open_now(), kMaxOpen);
  EXPECT_GT(bytes.opens(), kShards) << "shards were closed and opened again";
  // A read past a shard's end is still an error naming it.
  std::vector<std::uint8_t> out;
  const Status past = bytes.read_at(3, files[3].size - 10, 20, &out);
  EXPECT_EQ(past.code(), Code::kIOError);
  EXPECT_NE(past.message().find("s-3.tar: shard shrank"), std::string::npos) << past.message();
}

TEST(ShardFilesTest, AShardReplacedAfterOpeningIsAnErrorNamingIt) {
  testing::TempDir d;
  std::vector<LocalShardBytes::File> files;
  for (std::size_t s = 0; s < 3; ++s) {
    const std::string path = d.file("s-" + std::to_string(s) + ".tar");
    testing::write_file(path, content(s));
    files.push_back(file_of(path));
  }
  LocalShardBytes bytes(files, {}, 1);
  std::vector<std::uint8_t> out;
  ASSERT_TRUE(bytes.read_at(0, 0, 10, &out).ok());
  // Shard 1 replaced by another file of the same size (a re-pack renamed into place).
  const std::string tmp = d.file("new.tar");
  std::string other = content(1);
  std::reverse(other.begin(), other.end());
  testing::write_file(tmp, other);
  ASSERT_EQ(std::rename(tmp.c_str(), files[1].path.c_str()), 0);
  const Status st = bytes.read_at(1, 0, 10, &out);
  EXPECT_EQ(st.code(), Code::kIOError);
  EXPECT_NE(st.message().find("s-1.tar' changed since the loader opened it"), std::string::npos) << st.message();
  // Shard 0, unchanged, is reopened (the pool holds one) and read.
  ASSERT_TRUE(bytes.read_at(2, 0, 10, &out).ok());
  ASSERT_TRUE(bytes.read_at(0, 5, 10, &out).ok());
  EXPECT_EQ(std::string(out.begin(), out.end()), content(0).substr(5, 10));
}

// Shards named by a manifest's rows (in another order than the manifest's):
// each path is the row's, joined to the manifest's folder; reads get that
// file's bytes; a shard whose size is not its row's is a stale manifest
// naming both; a shard changed after its first open is an error naming it.
TEST(ShardFilesTest, ManifestRowsNameThePathsAndSizes) {
  testing::TempDir d;
  const std::string mpath = d.file("m.manifest");
  auto m = std::make_shared<Manifest>();
  for (std::size_t s = 0; s < 4; ++s) {
    const std::string name = "s-" + std::to_string(s) + ".tar";
    testing::write_file(d.file(name), content(s));
    m->shards.push_back({name, 1, content(s).size()});
  }
  m->shards[2].bytes += 1;  // stale: shard s-2.tar grew since
  const std::vector<std::uint32_t> rows = {3, 0, 2};
  LocalShardBytes bytes(ShardNames(m, mpath, rows), 1, mpath);
  std::vector<std::uint8_t> out;
  for (std::uint32_t k : {0u, 1u}) {
    EXPECT_EQ(bytes.local_path(k), d.file("s-" + std::to_string(rows[k]) + ".tar"));
    ASSERT_TRUE(bytes.read_at(k, 7, 50, &out).ok());
    EXPECT_EQ(std::string(out.begin(), out.end()), content(rows[k]).substr(7, 50));
  }
  const Status stale = bytes.read_at(2, 0, 10, &out);
  EXPECT_EQ(stale.code(), Code::kUnavailable);
  EXPECT_NE(stale.message().find("manifest '" + mpath + "' is stale: shard '" + d.file("s-2.tar") + "' is " +
                                 std::to_string(content(2).size()) + " bytes, the manifest says " +
                                 std::to_string(content(2).size() + 1)),
            std::string::npos)
      << stale.message();
  // Shard 0 (s-3.tar), pinned at its first open and closed since (a pool of
  // one), replaced by another file of its size: an error naming it.
  std::string other = content(3);
  std::reverse(other.begin(), other.end());
  testing::write_file(d.file("new.tar"), other);
  ASSERT_EQ(std::rename(d.file("new.tar").c_str(), d.file("s-3.tar").c_str()), 0);
  const Status changed = bytes.read_at(0, 0, 10, &out);
  EXPECT_EQ(changed.code(), Code::kIOError);
  EXPECT_NE(changed.message().find("s-3.tar' changed since the loader opened it"), std::string::npos)
      << changed.message();
}

TEST(ShardFilesTest, TheDefaultLimitIsAQuarterOfTheProcesssDescriptors) {
  const std::size_t m = LocalShardBytes::default_max_open();
  EXPECT_GE(m, 16u);
  EXPECT_LE(m, 1024u);
}

}  // namespace
}  // namespace stoker::detail
