#include "source/remote/node_cache.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

namespace stoker::detail {
namespace {

using State = NodeCache::Entry::State;
using Clock = std::chrono::steady_clock;

// Every wait in these tests gives up after this long (a hang fails, it does not block the suite).
constexpr auto kBound = std::chrono::seconds(30);

// A fresh directory under /tmp, removed by the destructor.
class TmpDir {
 public:
  TmpDir() {
    char tmpl[] = "/tmp/stoker-node-cache-XXXXXX";
    const char* p = ::mkdtemp(tmpl);
    path_ = p ? p : "";
  }
  ~TmpDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string object_bytes(std::size_t size, unsigned seed) {
  std::string s(size, '\0');
  for (std::size_t i = 0; i < size; ++i) s[i] = static_cast<char>((i * 131 + seed * 7 + (i >> 9)) & 0xff);
  return s;
}

bool pwrite_all(int fd, const std::string& data, std::size_t from, std::size_t to) {
  while (from < to) {
    const ssize_t n = ::pwrite(fd, data.data() + from, to - from, static_cast<off_t>(from));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    from += static_cast<std::size_t>(n);
  }
  return true;
}

std::string pread_all(int fd, std::size_t size) {
  std::string s(size, '\0');
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, s.data() + done, size - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  s.resize(done);
  return s;
}

// -1 when absent.
long long file_size(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<long long>(st.st_size) : -1;
}

std::string slurp(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  struct stat st;
  std::string s = ::fstat(fd, &st) == 0 ? pread_all(fd, static_cast<std::size_t>(st.st_size)) : "";
  ::close(fd);
  return s;
}

std::int64_t mtime_s(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<std::int64_t>(st.st_mtim.tv_sec) : -1;
}

void set_mtime_s(const std::string& path, std::int64_t sec) {
  struct timespec ts[2] = {{static_cast<time_t>(sec), 0}, {static_cast<time_t>(sec), 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), ts, 0), 0) << path;
}

// The child's exit code, or 100 + signal; -1 (after SIGKILL) when it has not ended within kBound.
int wait_child(pid_t pid) {
  const auto deadline = Clock::now() + kBound;
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
    if (r < 0 && errno != EINTR) return -2;
    if (Clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// One byte from `fd` within kBound.
bool read_byte(int fd) {
  struct pollfd p = {fd, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(std::chrono::milliseconds(kBound).count())) != 1) return false;
  char c;
  return ::read(fd, &c, 1) == 1;
}

// A `cancelled` that gives up after kBound (so no wait in a test is unbounded).
std::function<bool()> bounded() {
  const auto deadline = Clock::now() + kBound;
  return [deadline] { return Clock::now() > deadline; };
}

// Downloads `data` for (url, etag) through `cache` from scratch and commits; the Entry (kHit) is returned.
std::unique_ptr<NodeCache::Entry> download(NodeCache& cache, const std::string& url, const std::string& etag,
                                           const std::string& data) {
  std::unique_ptr<NodeCache::Entry> e;
  Status st = cache.open(url, etag, data.size(), bounded(), &e);
  EXPECT_TRUE(st.ok()) << st.to_string();
  if (!e) return e;
  EXPECT_EQ(e->state(), State::kDownload);
  if (e->state() != State::kDownload) return e;
  EXPECT_TRUE(pwrite_all(e->fd(), data, e->resume_from(), data.size()));
  st = e->commit();
  EXPECT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(e->state(), State::kHit);
  return e;
}

TEST(NodeCacheTest, Sha256KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  // 55, 56 and 64 bytes: the padding's edge cases.
  EXPECT_EQ(sha256_hex(std::string(55, 'a')), "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
  EXPECT_EQ(sha256_hex(std::string(56, 'a')), "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
  EXPECT_EQ(sha256_hex(std::string(64, 'a')), "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
  const std::string k = NodeCache::entry_key("http://h/a.tar", "\"e\"", 10);
  EXPECT_EQ(k, sha256_hex("http://h/a.tar\n\"e\"\n10").substr(0, 32));
}

TEST(NodeCacheTest, MissThenHitWithSameBytes) {
  TmpDir tmp;
  NodeCache cache(tmp.path(), 1 << 30);
  const std::string data = object_bytes(100000, 1), url = "http://h/shard-0.tar";
  auto e = download(cache, url, "\"v1\"", data);
  ASSERT_TRUE(e);
  EXPECT_EQ(pread_all(e->fd(), data.size()), data);  // fd() stays valid after commit
  e.reset();
  EXPECT_EQ(cache.stats().misses, 1u);
  EXPECT_EQ(cache.stats().hits, 0u);
  EXPECT_EQ(cache.stats().bytes_written, data.size());

  ASSERT_TRUE(cache.open(url, "\"v1\"", data.size(), bounded(), &e).ok());
  ASSERT_EQ(e->state(), State::kHit);
  EXPECT_EQ(e->resume_from(), 0u);
  EXPECT_EQ(pread_all(e->fd(), data.size() + 10), data);
  EXPECT_EQ(cache.stats().hits, 1u);
  EXPECT_EQ(cache.stats().misses, 1u);

  const std::string base = cache.entry_path(NodeCache::entry_key(url, "\"v1\"", data.size()));
  EXPECT_EQ(file_size(base + ".tar"), static_cast<long long>(data.size()));
  EXPECT_GT(file_size(base + ".meta"), 0);
  EXPECT_EQ(file_size(base + ".lock"), 0);
  EXPECT_EQ(file_size(base + ".part"), -1);
  EXPECT_EQ(file_size(base + ".part.meta"), -1);
  EXPECT_NE(base.find(tmp.path() + "/stoker-v1/e/"), std::string::npos);
  EXPECT_GE(cache.usage(), data.size());
  EXPECT_LE(cache.usage(), data.size() + 1000);

  // A second NodeCache on the directory (another rank) hits too.
  NodeCache other(tmp.path(), 1 << 30);
  std::unique_ptr<NodeCache::Entry> e2;
  ASSERT_TRUE(other.open(url, "\"v1\"", data.size(), bounded(), &e2).ok());
  EXPECT_EQ(e2->state(), State::kHit);
  EXPECT_EQ(other.stats().hits, 1u);
}

TEST(NodeCacheTest, DifferentEtagOrSizeIsDifferentEntry) {
  TmpDir tmp;
  NodeCache cache(tmp.path(), 1 << 30);
  const std::string url = "http://h/x.tar", a = object_bytes(5000, 1), b = object_bytes(5000, 2);
  ASSERT_TRUE(download(cache, url, "e1", a));
  std::unique_ptr<NodeCache::Entry> e;
  ASSERT_TRUE(cache.open(url, "e2", b.size(), bounded(), &e).ok());
  EXPECT_EQ(e->state(), State::kDownload);
  e.reset();
  ASSERT_TRUE(cache.open(url, "e1", a.size() + 1, bounded(), &e).ok());
  EXPECT_EQ(e->state(), State::kDownload);
  e.reset();
  ASSERT_TRUE(cache.open(url, "", a.size(), bounded(), &e).ok());  // no ETag (a `pipe:` command)
  EXPECT_EQ(e->state(), State::kDownload);
  e.reset();
  ASSERT_TRUE(cache.open(url, "e1", a.size(), bounded(), &e).ok());
  ASSERT_EQ(e->state(), State::kHit);
  EXPECT_EQ(pread_all(e->fd(), a.size()), a);
  EXPECT_NE(NodeCache::entry_key(url, "e1", 5000), NodeCache::entry_key(url, "e2", 5000));
  EXPECT_EQ(cache.stats().misses, 4u);
  EXPECT_EQ(cache.stats().hits, 1u);
}

TEST(NodeCacheTest, UncommittedPartIsResumed) {
  TmpDir tmp;
  NodeCache cache(tmp.path(), 1 << 30);
  const std::string data = object_bytes(64000, 3), url = "pipe:cat a.tar";
  const std::size_t half = data.size() / 2;
  std::unique_ptr<NodeCache::Entry> e;
  ASSERT_TRUE(cache.open(url, "", data.size(), bounded(), &e).ok());
  ASSERT_EQ(e->state(), State::kDownload);
  EXPECT_EQ(e->resume_from(), 0u);
  ASSERT_TRUE(pwrite_all(e->fd(), data, 0, half));
  // Committing a short .part fails, naming it, and leaves it.
  Status st = e->commit();
  EXPECT_EQ(st.code(), Code::kIOError);
  EXPECT_NE(st.message().find(".part"), std::string::npos) << st.message();
  EXPECT_EQ(e->state(), State::kDownload);
  e.reset();  // without commit: the .part stays

  const std::string base = cache.entry_path(NodeCache::entry_key(url, "", data.size()));
  EXPECT_EQ(file_size(base + ".part"), static_cast<long long>(half));
  EXPECT_EQ(file_size(base + ".tar"), -1);
  // Its full size stays reserved.
  EXPECT_GE(cache.usage(), data.size());

  ASSERT_TRUE(cache.open(url, "", data.size(), bounded(), &e).ok());
  ASSERT_EQ(e->state(), State::kDownload);
  EXPECT_EQ(e->resume_from(), half);
  EXPECT_EQ(pread_all(e->fd(), half), data.substr(0, half));
  ASSERT_TRUE(pwrite_all(e->fd(), data, half, data.size()));
  ASSERT_TRUE(e->commit().ok());
  EXPECT_EQ(e->resume_from(), 0u);
  e.reset();
  EXPECT_EQ(cache.stats().bytes_written, data.size() - half);
  ASSERT_TRUE(cache.open(url, "", data.size(), bounded(), &e).ok());
  ASSERT_EQ(e->state(), State::kHit);
  EXPECT_EQ(pread_all(e->fd(), data.size()), data);
  EXPECT_EQ(cache.stats().misses, 2u);
  EXPECT_EQ(cache.stats().hits, 1u);
}

TEST(NodeCacheTest, KilledDownloaderIsResumedByTheNext) {
  TmpDir tmp;
  const std::string data = object_bytes(1 << 20, 4), url = "http://h/big.tar", etag = "\"k\"";
  const std::size_t quarter = data.size() / 4, half = data.size() / 2;
  int ready[2];
  ASSERT_EQ(::pipe2(ready, O_CLOEXEC), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(ready[0]);
    NodeCache cache(tmp.path(), 1 << 30);
    std::unique_ptr<NodeCache::Entry> e;
    if (!cache.open(url, etag, data.size(), bounded(), &e).ok() || e->state() != State::kDownload) ::_exit(2);
    if (!pwrite_all(e->fd(), data, 0, quarter)) ::_exit(3);
    if (::write(ready[1], "r", 1) != 1) ::_exit(4);
    // Keeps writing, slowly, up to half; killed somewhere along the way.
    for (std::size_t off = quarter; off < half; off += 4096) {
      if (!pwrite_all(e->fd(), data, off, std::min(off + 4096, half))) ::_exit(5);
      ::usleep(200);
    }
    for (int i = 0; i < 3000; ++i) ::usleep(10000);  // bounded: 30 s
    ::_exit(6);
  }
  ::close(ready[1]);
  ASSERT_TRUE(read_byte(ready[0]));
  ::close(ready[0]);
  NodeCache cache(tmp.path(), 1 << 30);
  const std::string base = cache.entry_path(NodeCache::entry_key(url, etag, data.size()));
  EXPECT_EQ(file_size(base + ".tar"), -1);
  EXPECT_GE(file_size(base + ".part"), static_cast<long long>(quarter));

  // The child downloads: this open waits; its first poll kills the child, the next one takes over.
  int polls = 0, child_status = 0;
  std::unique_ptr<NodeCache::Entry> e;
  Status st = cache.open(
      url, etag, data.size(),
      [&] {
        if (polls++ == 0) {
          ::kill(pid, SIGKILL);
          child_status = wait_child(pid);
          EXPECT_EQ(file_size(base + ".tar"), -1);
        }
        return polls > 1000;
      },
      &e);
  if (polls == 0) {
    ::kill(pid, SIGKILL);
    child_status = wait_child(pid);
  }
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_GE(polls, 1);
  EXPECT_EQ(child_status, 100 + SIGKILL);
  ASSERT_EQ(e->state(), State::kDownload);
  const long long part_size = file_size(base + ".part");
  EXPECT_EQ(e->resume_from(), static_cast<std::uint64_t>(part_size));
  EXPECT_GE(e->resume_from(), quarter);
  EXPECT_LE(e->resume_from(), half);
  EXPECT_EQ(file_size(base + ".tar"), -1);
  ASSERT_TRUE(pwrite_all(e->fd(), data, e->resume_from(), data.size()));
  EXPECT_EQ(file_size(base + ".tar"), -1);
  ASSERT_TRUE(e->commit().ok());
  EXPECT_EQ(file_size(base + ".tar"), static_cast<long long>(data.size()));
  EXPECT_EQ(slurp(base + ".tar"), data);  // the dead child's prefix and our rest
  EXPECT_EQ(file_size(base + ".part"), -1);
  EXPECT_EQ(cache.stats().misses, 1u);
}

TEST(NodeCacheTest, ConcurrentProcessesDownloadOnce) {
  TmpDir tmp;
  const std::string data = object_bytes(300000, 5), url = "s3://b/k.tar", etag = "\"abc\"";
  constexpr int kChildren = 4;
  constexpr int kDownloaded = 10, kHit = 11;
  int go[2];
  ASSERT_EQ(::pipe2(go, O_CLOEXEC), 0);
  std::vector<pid_t> pids;
  for (int i = 0; i < kChildren; ++i) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(go[1]);
      char c;
      if (::read(go[0], &c, 1) != 0) ::_exit(2);  // EOF: everyone starts at once
      NodeCache cache(tmp.path(), 1 << 30);
      std::unique_ptr<NodeCache::Entry> e;
      if (!cache.open(url, etag, data.size(), bounded(), &e).ok()) ::_exit(3);
      if (e->state() == State::kDownload) {
        for (std::size_t off = 0; off < data.size(); off += 30000) {  // slowly, so that the others wait
          if (!pwrite_all(e->fd(), data, off, std::min(off + 30000, data.size()))) ::_exit(4);
          ::usleep(2000);
        }
        if (!e->commit().ok() || cache.stats().misses != 1) ::_exit(5);
        ::_exit(pread_all(e->fd(), data.size()) == data ? kDownloaded : 6);
      }
      if (e->state() == State::kHit && cache.stats().hits == 1) {
        ::_exit(pread_all(e->fd(), data.size() + 1) == data ? kHit : 7);
      }
      ::_exit(8);
    }
    pids.push_back(pid);
  }
  ::close(go[0]);
  ::close(go[1]);
  int downloaded = 0, hits = 0;
  for (pid_t pid : pids) {
    const int code = wait_child(pid);
    if (code == kDownloaded) {
      ++downloaded;
    } else if (code == kHit) {
      ++hits;
    } else {
      ADD_FAILURE() << "child exit " << code;
    }
  }
  EXPECT_EQ(downloaded, 1);
  EXPECT_EQ(hits, kChildren - 1);
  NodeCache cache(tmp.path(), 1 << 30);
  std::unique_ptr<NodeCache::Entry> e;
  ASSERT_TRUE(cache.open(url, etag, data.size(), bounded(), &e).ok());
  EXPECT_EQ(e->state(), State::kHit);
}

TEST(NodeCacheTest, LimitEvictsLeastRecentlyUsed) {
  TmpDir tmp;
  constexpr std::size_t kSize = 64 * 1024;
  NodeCache cache(tmp.path(), kSize * 5 / 2);
  EXPECT_EQ(cache.limit(), kSize * 5 / 2);
  auto url = [](int i) { return "http://h/s-" + std::to_string(i) + ".tar"; };
  auto base = [&](int i) { return cache.entry_path(NodeCache::entry_key(url(i), "e", kSize)); };
  for (int i = 0; i < 4; ++i) {
    auto e = download(cache, url(i), "e", object_bytes(kSize, static_cast<unsigned>(i)));
    ASSERT_TRUE(e);
    e.reset();
    EXPECT_LE(cache.usage(), cache.limit()) << i;
    // The LRU clock, set explicitly (file times are coarse): entry i used at second 1000 + i.
    set_mtime_s(base(i) + ".lock", 1000 + i);
    if (i == 1) {
      // Using entry 0 again makes it the most recent: entry 1 goes first.
      ASSERT_TRUE(cache.open(url(0), "e", kSize, bounded(), &e).ok());
      EXPECT_EQ(e->state(), State::kHit);
      e.reset();
      EXPECT_GT(mtime_s(base(0) + ".lock"), 1000 + 1);
    }
  }
  EXPECT_EQ(cache.stats().evictions, 2u);
  EXPECT_EQ(cache.stats().misses, 4u);
  EXPECT_EQ(cache.stats().bypass, 0u);
  EXPECT_EQ(file_size(base(0) + ".tar"), static_cast<long long>(kSize));
  EXPECT_EQ(file_size(base(1) + ".tar"), -1);
  EXPECT_EQ(file_size(base(1) + ".lock"), -1);
  EXPECT_EQ(file_size(base(1) + ".meta"), -1);
  EXPECT_EQ(file_size(base(2) + ".tar"), -1);
  EXPECT_EQ(file_size(base(3) + ".tar"), static_cast<long long>(kSize));
  std::unique_ptr<NodeCache::Entry> e;
  ASSERT_TRUE(cache.open(url(0), "e", kSize, bounded(), &e).ok());
  ASSERT_EQ(e->state(), State::kHit);
  EXPECT_EQ(pread_all(e->fd(), kSize), object_bytes(kSize, 0));
}

TEST(NodeCacheTest, EntriesInUseAreNotEvicted) {
  TmpDir tmp;
  constexpr std::size_t kSize = 64 * 1024;
  NodeCache cache(tmp.path(), kSize * 5 / 2);
  auto url = [](int i) { return "http://h/u-" + std::to_string(i) + ".tar"; };
  auto base = [&](int i) { return cache.entry_path(NodeCache::entry_key(url(i), "", kSize)); };
  auto a = download(cache, url(0), "", object_bytes(kSize, 0));
  auto b = download(cache, url(1), "", object_bytes(kSize, 1));
  ASSERT_TRUE(a && b);
  std::unique_ptr<NodeCache::Entry> c;
  ASSERT_TRUE(cache.open(url(2), "", kSize, bounded(), &c).ok());
  EXPECT_EQ(c->state(), State::kBypass);
  EXPECT_EQ(c->fd(), -1);
  EXPECT_EQ(cache.stats().bypass, 1u);
  EXPECT_EQ(cache.stats().evictions, 0u);
  EXPECT_EQ(file_size(base(0) + ".tar"), static_cast<long long>(kSize));
  EXPECT_EQ(file_size(base(1) + ".tar"), static_cast<long long>(kSize));
  EXPECT_EQ(file_size(base(2) + ".lock"), -1);  // a bypass leaves nothing behind
  EXPECT_LE(cache.usage(), cache.limit());

  b.reset();  // b no longer in use: it goes, a stays
  ASSERT_TRUE(cache.open(url(2), "", kSize, bounded(), &c).ok());
  ASSERT_EQ(c->state(), State::kDownload);
  EXPECT_EQ(cache.stats().evictions, 1u);
  EXPECT_EQ(file_size(base(0) + ".tar"), static_cast<long long>(kSize));
  EXPECT_EQ(file_size(base(1) + ".tar"), -1);
  EXPECT_LE(cache.usage(), cache.limit());
  // A download in progress holds its reservation: nothing else fits now.
  std::unique_ptr<NodeCache::Entry> d;
  ASSERT_TRUE(cache.open(url(3), "", kSize, bounded(), &d).ok());
  EXPECT_EQ(d->state(), State::kBypass);
  EXPECT_EQ(cache.stats().bypass, 2u);
  // An object larger than the limit bypasses at once.
  ASSERT_TRUE(cache.open(url(4), "", kSize * 3, bounded(), &d).ok());
  EXPECT_EQ(d->state(), State::kBypass);
  EXPECT_EQ(cache.stats().evictions, 1u);
  EXPECT_EQ(pread_all(a->fd(), kSize), object_bytes(kSize, 0));
}

TEST(NodeCacheTest, NothingIsEvictedForADownloadThatBypasses) {
  TmpDir tmp;
  constexpr std::size_t kSize = 64 * 1024;
  NodeCache cache(tmp.path(), kSize * 5 / 2);
  auto a = download(cache, "http://h/a.tar", "", object_bytes(kSize, 0));      // in use
  ASSERT_TRUE(download(cache, "http://h/b.tar", "", object_bytes(kSize, 1)));  // released
  // 2 entries' size: fits only if `a` went too, so `b` is not sacrificed for nothing.
  std::unique_ptr<NodeCache::Entry> c;
  ASSERT_TRUE(cache.open("http://h/c.tar", "", 2 * kSize, bounded(), &c).ok());
  EXPECT_EQ(c->state(), State::kBypass);
  EXPECT_EQ(cache.stats().evictions, 0u);
  const std::string b = cache.entry_path(NodeCache::entry_key("http://h/b.tar", "", kSize));
  EXPECT_EQ(file_size(b + ".tar"), static_cast<long long>(kSize));
}

TEST(NodeCacheTest, EntryInUseByAnotherProcessIsNotEvicted) {
  TmpDir tmp;
  constexpr std::size_t kSize = 64 * 1024;
  const std::string data = object_bytes(kSize, 9);
  {
    NodeCache cache(tmp.path(), 1 << 30);
    ASSERT_TRUE(download(cache, "http://h/p.tar", "", data));
  }
  int ready[2];
  ASSERT_EQ(::pipe2(ready, O_CLOEXEC), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(ready[0]);
    NodeCache cache(tmp.path(), 1 << 30);
    std::unique_ptr<NodeCache::Entry> e;
    if (!cache.open("http://h/p.tar", "", kSize, bounded(), &e).ok() || e->state() != State::kHit) ::_exit(2);
    if (::write(ready[1], "r", 1) != 1) ::_exit(3);
    for (int i = 0; i < 3000; ++i) ::usleep(10000);  // holds it (bounded: 30 s) until killed
    ::_exit(4);
  }
  ::close(ready[1]);
  const bool child_ready = read_byte(ready[0]);
  ::close(ready[0]);
  NodeCache cache(tmp.path(), kSize * 3 / 2);
  std::unique_ptr<NodeCache::Entry> e;
  const Status st = cache.open("http://h/q.tar", "", kSize, bounded(), &e);
  ::kill(pid, SIGKILL);
  EXPECT_EQ(wait_child(pid), 100 + SIGKILL);
  ASSERT_TRUE(child_ready);
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(e->state(), State::kBypass);
  EXPECT_EQ(cache.stats().evictions, 0u);
  // The holder died (the kernel dropped its lock): now it can go.
  ASSERT_TRUE(cache.open("http://h/q.tar", "", kSize, bounded(), &e).ok());
  EXPECT_EQ(e->state(), State::kDownload);
  EXPECT_EQ(cache.stats().evictions, 1u);
}

TEST(NodeCacheTest, CancelledStopsTheWait) {
  TmpDir tmp;
  NodeCache cache(tmp.path(), 1 << 30);
  std::unique_ptr<NodeCache::Entry> first, second;
  ASSERT_TRUE(cache.open("http://h/c.tar", "e", 1000, bounded(), &first).ok());
  ASSERT_EQ(first->state(), State::kDownload);
  // Another Entry in the same process waits for it like another process would (flock, not fcntl).
  int calls = 0;
  const Status st = cache.open(
      "http://h/c.tar", "e", 1000, [&] { return ++calls >= 3; }, &second);
  EXPECT_EQ(st.code(), Code::kCancelled);
  EXPECT_NE(st.message().find("http://h/c.tar"), std::string::npos) << st.message();
  EXPECT_EQ(calls, 3);
  EXPECT_FALSE(second);
  EXPECT_EQ(cache.stats().misses, 1u);
  EXPECT_EQ(cache.stats().hits, 0u);
}

TEST(NodeCacheTest, WaiterInAnotherThreadGetsTheCommittedFile) {
  TmpDir tmp;
  NodeCache cache(tmp.path(), 1 << 30);
  const std::string data = object_bytes(20000, 6);
  std::unique_ptr<NodeCache::Entry> first;
  ASSERT_TRUE(cache.open("http://h/t.tar", "e", data.size(), bounded(), &first).ok());
  ASSERT_EQ(first->state(), State::kDownload);
  std::atomic<bool> waiting{false};
  Status waiter_status;
  std::unique_ptr<NodeCache::Entry> second;
  std::thread waiter([&] {
    auto limit = bounded();
    waiter_status = cache.open(
        "http://h/t.tar", "e", data.size(),
        [&] {
          waiting = true;
          return limit();
        },
        &second);
  });
  const auto deadline = Clock::now() + kBound;
  while (!waiting && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_TRUE(waiting);
  EXPECT_TRUE(pwrite_all(first->fd(), data, 0, data.size()));
  EXPECT_TRUE(first->commit().ok());
  waiter.join();
  ASSERT_TRUE(waiter_status.ok()) << waiter_status.to_string();
  ASSERT_EQ(second->state(), State::kHit);
  EXPECT_EQ(pread_all(second->fd(), data.size()), data);
  EXPECT_EQ(cache.stats().misses, 1u);
  EXPECT_EQ(cache.stats().hits, 1u);
}

TEST(NodeCacheTest, ForeignMetaIsNeverServed) {
  TmpDir tmp;
  NodeCache cache(tmp.path(), 1 << 30);
  const std::string data = object_bytes(4096, 7);
  ASSERT_TRUE(download(cache, "http://h/m.tar", "e", data));
  const std::string base = cache.entry_path(NodeCache::entry_key("http://h/m.tar", "e", data.size()));
  // As if another object (a hash collision) had written this entry.
  const std::string other = slurp(base + ".meta");
  ASSERT_FALSE(other.empty());
  {
    const int fd = ::open((base + ".meta").c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    std::string forged = other;
    forged.replace(forged.find("http://h/m.tar"), 14, "http://h/n.tar");
    EXPECT_EQ(::write(fd, forged.data(), forged.size()), static_cast<ssize_t>(forged.size()));
    ::close(fd);
  }
  std::unique_ptr<NodeCache::Entry> e;
  ASSERT_TRUE(cache.open("http://h/m.tar", "e", data.size(), bounded(), &e).ok());
  EXPECT_EQ(e->state(), State::kDownload);
  EXPECT_EQ(e->resume_from(), 0u);
  EXPECT_EQ(file_size(base + ".tar"), -1);
}

TEST(NodeCacheTest, IndexRoundTrip) {
  TmpDir tmp;
  NodeCache cache(tmp.path(), 1 << 30);
  std::string text;
  EXPECT_FALSE(cache.load_index("http://h/i.tar", "e", &text));
  const std::string idx = "stoker-index 2\nsize 123\n" + std::string("a\0b\n\\t", 6) + std::string(5000, 'x');
  const std::uint64_t before = cache.usage();
  cache.store_index("http://h/i.tar", "e", idx);
  ASSERT_TRUE(cache.load_index("http://h/i.tar", "e", &text));
  EXPECT_EQ(text, idx);
  EXPECT_GE(cache.usage(), before + idx.size());
  EXPECT_FALSE(cache.load_index("http://h/i.tar", "e2", &text));
  EXPECT_FALSE(cache.load_index("http://h/j.tar", "e", &text));
  cache.store_index("http://h/i.tar", "e", "short");
  ASSERT_TRUE(cache.load_index("http://h/i.tar", "e", &text));
  EXPECT_EQ(text, "short");
  EXPECT_LT(cache.usage(), before + idx.size());
  // Another NodeCache on the directory reads it; one with no room stores nothing.
  NodeCache tiny(tmp.path(), 10);
  ASSERT_TRUE(tiny.load_index("http://h/i.tar", "e", &text));
  tiny.store_index("http://h/k.tar", "e", idx);
  EXPECT_FALSE(tiny.load_index("http://h/k.tar", "e", &text));
}

TEST(NodeCacheTest, DirectoryErrorsAndDefaultLimit) {
  TmpDir tmp;
  const std::string file = tmp.path() + "/file";
  {
    const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0);
    ::close(fd);
  }
  try {
    NodeCache bad(file + "/cache", 0);
    ADD_FAILURE() << "no error";
  } catch (const Error& err) {
    EXPECT_EQ(err.code(), Code::kIOError);
    EXPECT_NE(std::string(err.what()).find(file + "/cache"), std::string::npos) << err.what();
    EXPECT_NE(std::string(err.what()).find(std::strerror(ENOTDIR)), std::string::npos) << err.what();
  }
  NodeCache cache(tmp.path() + "/new/nested", 0);  // created, with its parents
  EXPECT_GT(cache.limit(), 0u);
  EXPECT_EQ(cache.dir(), tmp.path() + "/new/nested");
  struct stat st;
  EXPECT_EQ(::stat((tmp.path() + "/new/nested/stoker-v1/e").c_str(), &st), 0);
  EXPECT_EQ(::stat((tmp.path() + "/new/nested/stoker-v1/idx").c_str(), &st), 0);
  EXPECT_EQ(cache.usage(), 0u);
}

}  // namespace
}  // namespace stoker::detail
