#include "memory/shared_segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>

#include "stoker/status.h"

namespace stoker::detail {
namespace {

constexpr std::uint64_t kMagic = 0x314745534B4F5453ULL;  // "STOKSEG1"
constexpr std::uint32_t kVersion = 2;
constexpr std::uint64_t kHeaderBytes = 4096;
constexpr std::uint64_t kClaimBit = std::uint64_t{1} << 63;
constexpr std::uint64_t kRefusedWord = std::uint64_t{1} << 62;
constexpr std::uint64_t kPidMask = (std::uint64_t{1} << 32) - 1;
// The data area is allocated in the file system this much at a time.
constexpr std::uint64_t kExtent = std::uint64_t{8} << 20;

std::uint64_t align_up(std::uint64_t n, std::uint64_t a) { return (n + a - 1) / a * a; }

std::uint64_t fnv1a(const std::string& s) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

std::string hex16(std::uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

std::string mib(std::uint64_t n) {
  char b[64];
  std::snprintf(b, sizeof b, "%llu bytes (%.1f MiB)", static_cast<unsigned long long>(n),
                static_cast<double>(n) / (1 << 20));
  return b;
}

int real_fallocate(int fd, std::int64_t offset, std::int64_t len) { return posix_fallocate(fd, offset, len); }
std::atomic<SharedSegment::FallocateFn> g_fallocate{&real_fallocate};

// An open-file-description lock on byte `at` (released when the file's
// last descriptor closes, so also when the process dies). 0 or errno.
int lock_byte(int fd, off_t at, short type, bool wait) {
  struct flock fl {};
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = at;
  fl.l_len = 1;
  while (fcntl(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &fl) != 0) {
    if (errno != EINTR) return errno;
  }
  return 0;
}

bool alive(std::uint64_t pid) { return kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM; }

[[noreturn]] void fail(Code code, const std::string& msg) { throw Error(code, "shared cache: " + msg); }

struct BlockHeader {
  std::uint64_t size;
  std::int32_t width, height;
  std::uint32_t n_ends;
  std::uint32_t grid;
};
static_assert(sizeof(BlockHeader) == 24);

}  // namespace

struct SharedSegment::Header {
  std::uint64_t magic;
  std::uint32_t version;
  std::uint32_t records;
  std::uint64_t key_hash;
  std::uint64_t key_size;
  std::uint64_t capacity;
  std::uint64_t data_offset;
  std::atomic<std::uint64_t> bump;       // data-area bytes handed out
  std::atomic<std::uint64_t> allocated;  // data-area bytes allocated in the file system
  std::atomic<std::uint64_t> entries;
  std::atomic<std::uint64_t> entry_bytes;  // the published blocks' bytes
};
static_assert(sizeof(SharedSegment::Header) <= kHeaderBytes);
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);

void SharedSegment::set_fallocate_for_tests(FallocateFn fn) { g_fallocate.store(fn ? fn : &real_fallocate); }

std::string SharedSegment::prefix(const std::string& group) { return "stoker-" + hex16(fnv1a(group)) + "-"; }

std::shared_ptr<SharedSegment> SharedSegment::attach(const SharedSegmentOptions& opt) {
  std::shared_ptr<SharedSegment> s(new SharedSegment());
  s->dir_ = opt.dir;
  s->path_ = opt.dir + "/" + prefix(opt.group) + hex16(fnv1a(opt.key)) + ".seg";
  s->pid_ = static_cast<std::uint64_t>(getpid()) & kPidMask;
  const std::uint64_t key_hash = fnv1a(opt.key);
  for (int tries = 0;; ++tries) {
    if (tries == 100) fail(Code::kIOError, s->path_ + ": removed by other processes 100 times while attaching");
    const int fd = open(s->path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
      fail(errno == ENOSPC ? Code::kResourceExhausted : Code::kIOError,
           "cannot create " + s->path_ + ": " + std::strerror(errno) + " (is " + opt.dir + " a writable directory?)");
    }
    s->fd_ = fd;  // closed by the destructor from here on
    if (const int e = lock_byte(fd, 0, F_WRLCK, true)) fail(Code::kIOError, s->path_ + ": lock: " + std::strerror(e));
    struct stat mine {}, named {};
    if (fstat(fd, &mine) != 0 || stat(s->path_.c_str(), &named) != 0 || mine.st_ino != named.st_ino ||
        mine.st_nlink == 0) {
      close(fd);  // removed by the last process detaching meanwhile: open it again
      s->fd_ = -1;
      continue;
    }
    if (lock_byte(fd, 1, F_WRLCK, false) == 0) {
      // Nobody is attached: a new file, or a stale one whose processes died.
      s->stale_ = mine.st_size > 0;
      s->created_ = true;
      const std::uint64_t data_offset = align_up(kHeaderBytes + 8ULL * opt.records + opt.key.size(), 4096);
      // NOTE: a file-size limit (RLIMIT_FSIZE, `ulimit -f`) caps the
      // segment: growing a file past it fails with EFBIG and sends SIGXFSZ,
      // which would kill the process.
      struct rlimit fsize {};
      std::uint64_t capacity = opt.capacity;
      if (getrlimit(RLIMIT_FSIZE, &fsize) == 0 && fsize.rlim_cur != RLIM_INFINITY) {
        const auto limit = static_cast<std::uint64_t>(fsize.rlim_cur);
        if (limit <= data_offset) {
          fail(Code::kResourceExhausted, "the file size limit (ulimit -f: " + mib(limit) + ") cannot hold " +
                                             s->path_ + "'s index (" + mib(data_offset) + ")");
        }
        capacity = std::min(capacity, limit - data_offset);
      }
      const std::uint64_t total = data_offset + capacity;
      if (ftruncate(fd, 0) != 0) fail(Code::kIOError, s->path_ + ": truncate: " + std::strerror(errno));
      struct statvfs vfs {};
      if (fstatvfs(fd, &vfs) == 0) {
        const std::uint64_t free_bytes = static_cast<std::uint64_t>(vfs.f_bavail) * vfs.f_frsize;
        if (free_bytes < total) {
          fail(Code::kResourceExhausted, opt.dir + " has " + mib(free_bytes) + " free, the shared cache needs " +
                                             mib(total));
        }
      }
      if (ftruncate(fd, static_cast<off_t>(total)) != 0) {
        fail(Code::kResourceExhausted, "cannot size " + s->path_ + " to " + mib(total) + ": " + std::strerror(errno));
      }
      if (const int e = g_fallocate.load()(fd, 0, static_cast<std::int64_t>(data_offset))) {
        fail(Code::kResourceExhausted, opt.dir + " cannot hold the shared cache's index (" + mib(data_offset) +
                                           "): " + std::strerror(e));
      }
      void* p = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (p == MAP_FAILED) fail(Code::kIOError, s->path_ + ": mmap: " + std::strerror(errno));
      s->base_ = static_cast<std::uint8_t*>(p);
      s->mapped_ = total;
      auto* h = new (p) Header{};
      h->version = kVersion;
      h->records = opt.records;
      h->key_hash = key_hash;
      h->key_size = opt.key.size();
      h->capacity = capacity;
      h->data_offset = data_offset;
      h->allocated.store(0);
      std::memcpy(s->base_ + kHeaderBytes + 8ULL * opt.records, opt.key.data(), opt.key.size());
      std::atomic_ref<std::uint64_t>(h->magic).store(kMagic, std::memory_order_release);
      // NOTE: byte 0 is held, so nobody tests byte 1 while it changes from
      // exclusive to shared (not atomic for fcntl locks).
      if (const int e = lock_byte(fd, 1, F_RDLCK, false)) fail(Code::kIOError, s->path_ + ": lock: " + std::strerror(e));
    } else {
      if (const int e = lock_byte(fd, 1, F_RDLCK, true)) fail(Code::kIOError, s->path_ + ": lock: " + std::strerror(e));
      const std::uint64_t size = static_cast<std::uint64_t>(mine.st_size);
      if (size < kHeaderBytes) fail(Code::kIOError, s->path_ + ": truncated (" + mib(size) + ")");
      void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (p == MAP_FAILED) fail(Code::kIOError, s->path_ + ": mmap: " + std::strerror(errno));
      s->base_ = static_cast<std::uint8_t*>(p);
      s->mapped_ = size;
      const auto* h = static_cast<const Header*>(p);
      const bool same = std::atomic_ref<std::uint64_t>(const_cast<std::uint64_t&>(h->magic)).load(std::memory_order_acquire) == kMagic &&
                        h->version == kVersion && h->key_hash == key_hash && h->records == opt.records &&
                        h->key_size == opt.key.size() && h->data_offset + h->capacity == size &&
                        std::memcmp(s->base_ + kHeaderBytes + 8ULL * opt.records, opt.key.data(), opt.key.size()) == 0;
      if (!same) fail(Code::kInvalidArgument, s->path_ + " holds another cache (its key differs)");
    }
    s->header_ = static_cast<Header*>(static_cast<void*>(s->base_));
    s->records_ = opt.records;
    s->data_offset_ = s->header_->data_offset;
    lock_byte(fd, 0, F_UNLCK, false);
    return s;
  }
}

SharedSegment::~SharedSegment() {
  if (base_) munmap(base_, mapped_);
  if (fd_ < 0) return;
  // The last one attached removes the file.
  if (lock_byte(fd_, 0, F_WRLCK, true) == 0) {
    lock_byte(fd_, 1, F_UNLCK, false);
    struct stat mine {}, named {};
    if (lock_byte(fd_, 1, F_WRLCK, false) == 0 && fstat(fd_, &mine) == 0 && stat(path_.c_str(), &named) == 0 &&
        mine.st_ino == named.st_ino) {
      unlink(path_.c_str());
    }
  }
  close(fd_);  // releases this description's locks
}

std::atomic<std::uint64_t>& SharedSegment::word(std::uint32_t i) const {
  return *reinterpret_cast<std::atomic<std::uint64_t>*>(base_ + kHeaderBytes + 8ULL * i);
}

bool SharedSegment::find(std::uint32_t i, Block* out) const {
  const std::uint64_t v = word(i).load(std::memory_order_acquire);
  if (v == 0 || (v & (kClaimBit | kRefusedWord))) return false;
  BlockHeader bh;
  std::memcpy(&bh, base_ + v, sizeof bh);
  const std::uint8_t* p = base_ + v + sizeof bh;
  // NOTE: blocks are 16-byte aligned and their header is 24 bytes, so the ends are 8-byte aligned.
  out->ends = {reinterpret_cast<const std::uint64_t*>(p), bh.n_ends};
  out->data = p + 8ULL * bh.n_ends;
  out->size = bh.size;
  out->width = bh.width;
  out->height = bh.height;
  out->grid = bh.grid != 0;
  out->offset = v;
  return true;
}

bool SharedSegment::refused(std::uint32_t i) const { return word(i).load(std::memory_order_acquire) == kRefusedWord; }

std::uint64_t SharedSegment::allocate(std::uint64_t n) {
  Header* h = header_;
  const std::uint64_t off = h->bump.fetch_add(n, std::memory_order_relaxed);
  if (off + n > h->capacity) {
    note_full("its " + mib(h->capacity) + " are in use");
    return 0;
  }
  const std::uint64_t end = off + n;
  std::uint64_t have = h->allocated.load(std::memory_order_acquire);
  while (have < end) {
    const std::uint64_t want = std::min(h->capacity, align_up(end, kExtent));
    if (const int e = g_fallocate.load()(fd_, static_cast<std::int64_t>(data_offset_ + have),
                                        static_cast<std::int64_t>(want - have))) {
      note_full(dir_ + " could not allocate " + mib(want - have) + " more: " + std::strerror(e));
      return 0;
    }
    // Allocating a range twice is harmless: whoever moves the mark first wins.
    if (h->allocated.compare_exchange_strong(have, want, std::memory_order_acq_rel)) have = want;
  }
  return data_offset_ + off;
}

std::uint64_t SharedSegment::write_block(std::uint64_t n, const std::uint8_t* data, const Meta& meta) {
  const std::uint32_t ne = meta.ends ? static_cast<std::uint32_t>(meta.ends->size()) : 0;
  const std::uint64_t off = allocate(block_bytes(n, ne));
  if (!off) return 0;
  const BlockHeader bh{n, meta.width, meta.height, ne, meta.grid ? 1U : 0U};
  std::uint8_t* p = base_ + off;
  std::memcpy(p, &bh, sizeof bh);
  if (ne) std::memcpy(p + sizeof bh, meta.ends->data(), 8ULL * ne);
  if (n) std::memcpy(p + sizeof bh + 8ULL * ne, data, n);
  return off;
}

SharedSegment::Store SharedSegment::store(std::uint32_t i, const std::uint8_t* data, std::uint64_t size,
                                          const Meta& meta) {
  std::atomic<std::uint64_t>& w = word(i);
  const std::uint64_t mine = kClaimBit | pid_;
  std::uint64_t v = w.load(std::memory_order_acquire);
  for (;;) {
    if (v == kRefusedWord) return Store::kRefused;
    if (v != 0 && !(v & kClaimBit)) return Store::kHeld;
    if (v & kClaimBit) {
      // Being written: by this process (another thread) or a live one, or
      // left by a process killed mid-write, whose claim is taken over.
      const std::uint64_t holder = v & kPidMask;
      if (holder == pid_ || alive(holder)) return Store::kHeld;
    }
    if (w.compare_exchange_weak(v, mine, std::memory_order_acq_rel, std::memory_order_acquire)) break;
  }
  const std::uint64_t off = write_block(size, data, meta);
  if (!off) {
    std::uint64_t c = mine;
    w.compare_exchange_strong(c, 0, std::memory_order_acq_rel);
    return Store::kNoRoom;
  }
  // The block is written before the release store publishes it.
  std::uint64_t c = mine;
  if (!w.compare_exchange_strong(c, off, std::memory_order_acq_rel)) return Store::kRefused;  // refused meanwhile
  header_->entries.fetch_add(1, std::memory_order_relaxed);
  header_->entry_bytes.fetch_add(block_bytes(size, meta.ends ? meta.ends->size() : 0), std::memory_order_relaxed);
  filled_.fetch_add(1, std::memory_order_relaxed);
  return Store::kStored;
}

void SharedSegment::refuse(std::uint32_t i) {
  const std::uint64_t v = word(i).exchange(kRefusedWord, std::memory_order_acq_rel);
  if (v != 0 && !(v & (kClaimBit | kRefusedWord))) {
    // NOTE: the block stays (a reader may hold it): a hole from now on.
    BlockHeader bh;
    std::memcpy(&bh, base_ + v, sizeof bh);
    header_->entries.fetch_sub(1, std::memory_order_relaxed);
    header_->entry_bytes.fetch_sub(block_bytes(bh.size, bh.n_ends), std::memory_order_relaxed);
  }
}

std::uint64_t SharedSegment::entries() const { return header_->entries.load(std::memory_order_relaxed); }
std::uint64_t SharedSegment::entry_bytes() const { return header_->entry_bytes.load(std::memory_order_relaxed); }
std::uint64_t SharedSegment::bytes() const {
  return std::min(header_->bump.load(std::memory_order_relaxed), header_->capacity);
}
std::uint64_t SharedSegment::capacity() const { return header_->capacity; }

void SharedSegment::note_full(const std::string& why) {
  MutexLock lock(full_mu_);
  if (full_why_.empty()) full_why_ = why;
}

std::string SharedSegment::full() const {
  MutexLock lock(full_mu_);
  return full_why_;
}

}  // namespace stoker::detail
