// Local shards through a bounded pool of file descriptors: every read gets
// its shard's bytes however few descriptors may be open, the pool never
// holds more than its limit once reads are done, and a shard replaced
// behind the loader's back is an error naming it, never another file's bytes.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "source/shard_bytes.h"
#include "test_util.h"

namespace stoker::detail {
namespace {

LocalShardBytes::File file_of(const std::string& path) {
  struct stat st;
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return {path, static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino),
          static_cast<std::uint64_t>(st.st_size),
          static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec, true};
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

TEST(ShardFilesTest, TheDefaultLimitIsAQuarterOfTheProcesssDescriptors) {
  const std::size_t m = LocalShardBytes::default_max_open();
  EXPECT_GE(m, 16u);
  EXPECT_LE(m, 1024u);
}

}  // namespace
}  // namespace stoker::detail
