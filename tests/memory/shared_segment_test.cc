// The node-shared cache's segment: processes (fork()ed) filling one segment
// at once store each record once and read each other's entries; a process
// SIGKILLed mid-write leaves no visible half entry and its claim is taken
// over; a stale segment of a dead job is reclaimed; a full file system gives
// a named error or refused stores, never SIGBUS; the last process to detach
// removes the file; random operations from several threads keep the index's
// invariants.
#include "memory/shared_segment.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cache/sample_cache.h"
#include "stoker/status.h"
#include "util/temp_dir.h"

namespace stoker::detail {
namespace {

constexpr std::uint32_t kRecords = 300;

// Record i's bytes.
std::vector<std::uint8_t> record_bytes(std::uint32_t i) {
  std::vector<std::uint8_t> b(100 + (i * 37) % 5000);
  for (std::size_t k = 0; k < b.size(); ++k) b[k] = static_cast<std::uint8_t>(i * 131 + k * 7);
  return b;
}

SharedSegmentOptions options(const std::string& dir, const std::string& key = "k1") {
  SharedSegmentOptions o;
  o.dir = dir;
  o.group = "test set";
  o.key = "test set|" + key;
  o.records = kRecords;
  o.capacity = std::uint64_t{64} << 20;
  return o;
}

bool holds(const SharedSegment& s, std::uint32_t i) {
  SharedSegment::Block b;
  if (!s.find(i, &b)) return false;
  const auto want = record_bytes(i);
  return b.size == want.size() && std::memcmp(b.data, want.data(), want.size()) == 0 &&
         b.width == static_cast<int>(i) && b.ends.size() == 2 && b.ends[1] == want.size();
}

SharedSegment::Store store(SharedSegment& s, std::uint32_t i) {
  const auto b = record_bytes(i);
  const std::vector<std::uint64_t> ends{b.size() / 2, b.size()};
  return s.store(i, b.data(), b.size(), {static_cast<int>(i), 1, false, &ends});
}

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& f : std::filesystem::directory_iterator(dir)) names.push_back(f.path().filename().string());
  return names;
}

// Runs f in a child process; its exit status (f's return value, or 100 +
// the signal that killed it).
template <typename F>
pid_t spawn(F f) {
  const pid_t pid = fork();
  if (pid == 0) {
    int rc = 1;
    try {
      rc = f();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: %s\n", e.what());
    }
    _exit(rc);
  }
  return pid;
}
int wait_for(pid_t pid) {
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st);
}

TEST(SharedSegmentTest, ForkedProcessesFillOnceAndReadEachOthersEntries) {
  TempDir dir("stoker-seg");
  auto parent = SharedSegment::attach(options(dir.path()));
  EXPECT_TRUE(parent->created());
  // Each child stores every record, in its own order, and reports how many
  // it stored (on a pipe) once it sees every record published.
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  std::vector<pid_t> kids;
  for (int c = 0; c < 4; ++c) {
    kids.push_back(spawn([&, c] {
      auto seg = SharedSegment::attach(options(dir.path()));
      if (seg->created()) return 200;
      std::vector<std::uint32_t> order(kRecords);
      for (std::uint32_t i = 0; i < kRecords; ++i) order[i] = i;
      std::shuffle(order.begin(), order.end(), std::mt19937(static_cast<unsigned>(c)));
      for (std::uint32_t i : order) {
        const auto r = store(*seg, i);
        if (r != SharedSegment::Store::kStored && r != SharedSegment::Store::kHeld) return 201;
      }
      for (std::uint32_t i = 0; i < kRecords; ++i) {
        while (!holds(*seg, i)) std::this_thread::yield();  // another child may be writing it
      }
      const std::uint64_t n = seg->filled();
      return write(fds[1], &n, sizeof n) == sizeof n ? 0 : 202;
    }));
  }
  std::uint64_t stored = 0;
  for (pid_t k : kids) {
    ASSERT_EQ(wait_for(k), 0);
    std::uint64_t n = 0;
    ASSERT_EQ(read(fds[0], &n, sizeof n), static_cast<ssize_t>(sizeof n));
    stored += n;
  }
  close(fds[0]);
  close(fds[1]);
  EXPECT_EQ(stored, kRecords);  // each record stored once, node-wide
  EXPECT_EQ(parent->entries(), kRecords);
  for (std::uint32_t i = 0; i < kRecords; ++i) ASSERT_TRUE(holds(*parent, i)) << i;
  EXPECT_EQ(store(*parent, 5), SharedSegment::Store::kHeld);
  const std::string path = parent->path();
  EXPECT_TRUE(std::filesystem::exists(path));
  parent.reset();  // the last one attached
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_TRUE(files_in(dir.path()).empty());
}

// The fallocate stand-in of a child about to be killed: says so on a pipe,
// then waits for the signal (a process killed with its claim held).
int g_pipe = -1;
int hang(int, std::int64_t, std::int64_t) {
  const char c = 'x';
  if (write(g_pipe, &c, 1) != 1) _exit(3);
  for (;;) pause();
}

TEST(SharedSegmentTest, ProcessKilledMidWriteLeavesNoHalfEntryAndItsClaimIsTakenOver) {
  TempDir dir("stoker-seg");
  auto parent = SharedSegment::attach(options(dir.path()));
  ASSERT_EQ(store(*parent, 1), SharedSegment::Store::kStored);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t kid = spawn([&] {
    auto seg = SharedSegment::attach(options(dir.path()));
    g_pipe = fds[1];
    SharedSegment::set_fallocate_for_tests(&hang);
    // Record 2's block needs the data area's next extent: the child claims
    // the record, then hangs allocating it (its bytes not yet written).
    const std::vector<std::uint8_t> big(std::size_t{9} << 20, 7);
    seg->store(2, big.data(), big.size(), {});
    return 4;
  });
  char c = 0;
  ASSERT_EQ(read(fds[0], &c, 1), 1);
  // Claimed by a live process: others neither see an entry nor store one.
  SharedSegment::Block b;
  EXPECT_FALSE(parent->find(2, &b));
  EXPECT_EQ(store(*parent, 2), SharedSegment::Store::kHeld);
  kill(kid, SIGKILL);
  EXPECT_EQ(wait_for(kid), 100 + SIGKILL);
  close(fds[0]);
  close(fds[1]);
  EXPECT_FALSE(parent->find(2, &b));  // nothing half written is visible
  EXPECT_EQ(store(*parent, 2), SharedSegment::Store::kStored);  // the dead claim is taken over
  EXPECT_TRUE(holds(*parent, 2));
  EXPECT_TRUE(holds(*parent, 1));
  EXPECT_EQ(parent->entries(), 2u);
  // A restarted process attaches to the same segment.
  const pid_t again = spawn([&] {
    auto seg = SharedSegment::attach(options(dir.path()));
    return !seg->created() && holds(*seg, 1) && holds(*seg, 2) && store(*seg, 3) == SharedSegment::Store::kStored
               ? 0
               : 5;
  });
  EXPECT_EQ(wait_for(again), 0);
  EXPECT_TRUE(holds(*parent, 3));
  parent.reset();
  EXPECT_TRUE(files_in(dir.path()).empty());
}

TEST(SharedSegmentTest, StaleSegmentOfADeadJobIsReclaimed) {
  TempDir dir("stoker-seg");
  const pid_t kid = spawn([&] {
    auto seg = SharedSegment::attach(options(dir.path()));
    store(*seg, 7);
    kill(getpid(), SIGKILL);  // dies attached: the file stays
    return 6;
  });
  EXPECT_EQ(wait_for(kid), 100 + SIGKILL);
  ASSERT_EQ(files_in(dir.path()).size(), 1u);
  auto seg = SharedSegment::attach(options(dir.path()));
  EXPECT_TRUE(seg->created());
  EXPECT_TRUE(seg->reclaimed_stale());
  EXPECT_EQ(seg->entries(), 0u);
  SharedSegment::Block b;
  EXPECT_FALSE(seg->find(7, &b));
  seg.reset();
  EXPECT_TRUE(files_in(dir.path()).empty());
}

TEST(SharedSegmentTest, DifferentKeysNeverShareAndTwoAttachersInOneProcessDo) {
  TempDir dir("stoker-seg");
  auto a = SharedSegment::attach(options(dir.path(), "cache=ram"));
  auto b = SharedSegment::attach(options(dir.path(), "cache=decoded"));
  auto a2 = SharedSegment::attach(options(dir.path(), "cache=ram"));
  EXPECT_TRUE(a->created());
  EXPECT_TRUE(b->created());
  EXPECT_FALSE(a2->created());
  EXPECT_NE(a->path(), b->path());
  EXPECT_EQ(a->path(), a2->path());
  EXPECT_EQ(a->path().rfind(dir.path() + "/" + SharedSegment::prefix("test set"), 0), 0u);
  ASSERT_EQ(store(*a, 9), SharedSegment::Store::kStored);
  EXPECT_TRUE(holds(*a2, 9));
  SharedSegment::Block blk;
  EXPECT_FALSE(b->find(9, &blk));
  a.reset();
  EXPECT_TRUE(std::filesystem::exists(a2->path()));  // a2 still attached
  a2.reset();
  b.reset();
  EXPECT_TRUE(files_in(dir.path()).empty());
}

// Under a file-size limit (ulimit -f) the segment is capped to it: stores
// beyond it are refused, never a SIGXFSZ or SIGBUS; a limit below the index
// is a named error.
TEST(SharedSegmentTest, FileSizeLimitCapsTheSegmentOrGivesANamedError) {
  TempDir dir("stoker-seg");
  const pid_t kid = spawn([&] {
    struct rlimit r {};
    r.rlim_cur = r.rlim_max = std::uint64_t{256} << 10;  // smaller than the segment asked for, and the records
    if (setrlimit(RLIMIT_FSIZE, &r) != 0) return 10;
    auto seg = SharedSegment::attach(options(dir.path()));
    if (seg->capacity() >= r.rlim_cur) return 11;
    std::uint32_t i = 0;
    while (i < kRecords && store(*seg, i) == SharedSegment::Store::kStored) ++i;
    if (i == 0 || i == kRecords || store(*seg, i) != SharedSegment::Store::kNoRoom) return 12;
    for (std::uint32_t k = 0; k < i; ++k) {
      if (!holds(*seg, k)) return 13;
    }
    r.rlim_cur = 4096;  // below the index
    if (setrlimit(RLIMIT_FSIZE, &r) != 0) return 14;
    try {
      SharedSegment::attach(options(dir.path(), "other"));
    } catch (const Error& e) {
      const std::string m = e.what();
      return e.code() == Code::kResourceExhausted && m.find("ulimit -f") != std::string::npos &&
                     m.find(dir.path()) != std::string::npos
                 ? 0
                 : 15;
    }
    return 16;
  });
  EXPECT_EQ(wait_for(kid), 0);
  EXPECT_TRUE(files_in(dir.path()).empty());  // the child's files removed: one detached, one failed to attach
}

int no_space(int, std::int64_t offset, std::int64_t) { return offset == 0 ? 0 : ENOSPC; }

TEST(SharedSegmentTest, FullFileSystemRefusesStoresWithTheReason) {
  TempDir dir("stoker-seg");
  SharedSegment::set_fallocate_for_tests(&no_space);
  auto seg = SharedSegment::attach(options(dir.path()));
  EXPECT_EQ(store(*seg, 0), SharedSegment::Store::kNoRoom);
  SharedSegment::Block b;
  EXPECT_FALSE(seg->find(0, &b));
  EXPECT_NE(seg->full().find(dir.path()), std::string::npos) << seg->full();
  EXPECT_NE(seg->full().find(std::strerror(ENOSPC)), std::string::npos) << seg->full();
  SharedSegment::set_fallocate_for_tests(nullptr);
  EXPECT_EQ(store(*seg, 0), SharedSegment::Store::kStored);  // room again: the claim was let go
  // A directory that cannot hold the segment at all.
  auto o = options(dir.path(), "huge");
  o.capacity = std::uint64_t{1} << 62;
  try {
    SharedSegment::attach(o);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::kResourceExhausted);
    EXPECT_NE(std::string(e.what()).find(dir.path() + " has"), std::string::npos) << e.what();
  }
  seg.reset();
  EXPECT_TRUE(files_in(dir.path()).empty());
}

// Property: any mix of store, refuse and find from several threads (two
// segments attached in one process, as two processes would be) leaves every
// record empty, refused, or holding the whole of its bytes; entries() equals
// the records holding them and entry_bytes() their blocks' bytes; bytes()
// holds at most one block per record published or refused (none written
// twice: the holes are refused records' blocks only).
TEST(SharedSegmentTest, RandomOperationsKeepTheIndexInvariants) {
  TempDir dir("stoker-seg");
  auto a = SharedSegment::attach(options(dir.path()));
  auto b = SharedSegment::attach(options(dir.path()));
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      SharedSegment& s = t % 2 ? *a : *b;
      std::mt19937 rng(static_cast<unsigned>(t));
      for (int k = 0; k < 3000; ++k) {
        const std::uint32_t i = rng() % kRecords;
        const int op = static_cast<int>(rng() % 10);
        SharedSegment::Block blk;
        if (op < 5) {
          store(s, i);
        } else if (op == 8 && i % 10 == 0) {
          s.refuse(i);
        } else if (s.find(i, &blk) && !holds(s, i)) {
          bad.fetch_add(1);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  std::uint64_t published = 0, published_bytes = 0, at_most = 0;
  for (std::uint32_t i = 0; i < kRecords; ++i) {
    SharedSegment::Block blk;
    if (a->find(i, &blk)) {
      ++published;
      published_bytes += SharedSegment::block_bytes(blk.size, blk.ends.size());
      EXPECT_TRUE(holds(*a, i)) << i;
      EXPECT_FALSE(a->refused(i));
    }
    if (a->find(i, &blk) || a->refused(i)) at_most += SharedSegment::block_bytes(record_bytes(i).size(), 2);
    if (a->refused(i)) {
      EXPECT_EQ(store(*a, i), SharedSegment::Store::kRefused);
    }
  }
  EXPECT_EQ(a->entries(), published);
  EXPECT_EQ(a->entry_bytes(), published_bytes);
  EXPECT_EQ(b->entry_bytes(), published_bytes);
  EXPECT_LE(a->bytes(), at_most);
}

// The sample cache over a shared segment: entries stored through one are
// found by the other, charged once by each for its share, not per entry.
TEST(SharedSegmentTest, SampleCacheOverASegmentSharesEntries) {
  TempDir dir("stoker-seg");
  auto budget = std::make_shared<MemoryBudget>(std::uint64_t{256} << 20);
  auto budget2 = std::make_shared<MemoryBudget>(std::uint64_t{256} << 20);
  SampleCache one(kRecords, budget, SharedSegment::attach(options(dir.path())));
  SampleCache two(kRecords, budget2, SharedSegment::attach(options(dir.path())));
  const auto bytes = record_bytes(4);
  EXPECT_EQ(one.insert(4, bytes.data(), bytes.size(), 3, 2), SampleCache::Insert::kStored);
  EXPECT_EQ(two.insert(4, bytes.data(), bytes.size(), 3, 2), SampleCache::Insert::kAlreadyHeld);
  auto e = two.find(4);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->width, 3);
  ASSERT_EQ(e->size, bytes.size());
  EXPECT_EQ(std::memcmp(e->data, bytes.data(), bytes.size()), 0);
  EXPECT_EQ(one.filled(), 1u);
  EXPECT_EQ(two.filled(), 0u);
  EXPECT_EQ(two.records(), 1u);
  EXPECT_EQ(two.hits(), 1u);
  // Charged once: to the process that stored it.
  EXPECT_EQ(budget->used(MemoryAccount::kSampleCache), SharedSegment::block_bytes(bytes.size(), 0));
  EXPECT_EQ(budget2->used(MemoryAccount::kSampleCache), 0u);
  // Entries in a segment are final (another process may be reading a block,
  // without a lock): a replacement is refused, nothing is charged for it,
  // and the segment holds the one entry's block, no hole.
  EXPECT_TRUE(one.entries_final());
  const std::vector<std::uint8_t> ten(10, 1);
  EXPECT_FALSE(one.replace(4, e, ten.data(), ten.size(), {}));
  auto now = two.find(4);
  ASSERT_TRUE(now);
  EXPECT_FALSE(now->grid);
  EXPECT_EQ(now->size, bytes.size());
  EXPECT_EQ(budget->used(MemoryAccount::kSampleCache), SharedSegment::block_bytes(bytes.size(), 0));
  EXPECT_EQ(one.shared()->bytes(), one.shared()->entry_bytes());
  // A budget with no room left refuses the store, as a cache of its own does.
  auto small = std::make_shared<MemoryBudget>(100);
  SampleCache three(kRecords, small, SharedSegment::attach(options(dir.path())));
  EXPECT_EQ(three.insert(5, bytes.data(), bytes.size()), SampleCache::Insert::kNoRoom);
  EXPECT_FALSE(three.contains(5));
}

}  // namespace
}  // namespace stoker::detail
