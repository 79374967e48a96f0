#include "source/remote/node_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

#include "util/util.h"

namespace stoker::detail {
namespace {

// ---- SHA-256 (FIPS 180-4) ----

constexpr std::uint32_t kSha256K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

std::uint32_t rotr(std::uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

void sha256_block(std::uint32_t h[8], const unsigned char* p) {
  std::uint32_t w[64];
  for (int i = 0; i < 16; ++i) {
    w[i] = std::uint32_t{p[4 * i]} << 24 | std::uint32_t{p[4 * i + 1]} << 16 | std::uint32_t{p[4 * i + 2]} << 8 |
           std::uint32_t{p[4 * i + 3]};
  }
  for (int i = 16; i < 64; ++i) {
    const std::uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    const std::uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  std::uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
  for (int i = 0; i < 64; ++i) {
    const std::uint32_t t1 = k + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + kSha256K[i] + w[i];
    const std::uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    k = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += k;
}

// ---- files ----

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  int get() const { return fd_; }
  bool ok() const { return fd_ >= 0; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_;
};

Status errno_status(const std::string& path, const std::string& what, int e) {
  return Status::IOError(path + ": " + what + ": " + std::strerror(e));
}

// NOTE: failures ignored: "not there" is success, and a file that cannot be
// removed stays counted in usage(), so the limit still holds.
void remove_file(const std::string& path) { (void)::unlink(path.c_str()); }

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// The whole of a small file (at most 1 MiB); false when it cannot be read.
bool read_small(const std::string& path, std::string* out) {
  out->clear();
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.ok()) return false;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) return true;
    out->append(buf, static_cast<std::size_t>(n));
    if (out->size() > (1u << 20)) return false;
  }
}

std::atomic<std::uint64_t> g_tmp_counter{0};

// Writes `data` to `path` through a uniquely named temporary file renamed into
// place. Errors name the path and errno text (ENOSPC, EDQUOT).
// NOTE: not util's write_file_atomically: its temporary name is per process,
// so two threads writing one path would share it, its fopen is not O_CLOEXEC
// and a failed write loses errno; here the caller must see "No space left".
Status write_atomically(const std::string& path, std::string_view data) {
  Fd fd;
  std::string tmp;
  for (int attempt = 0; !fd.ok(); ++attempt) {
    tmp = path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(g_tmp_counter.fetch_add(1)) + "-" +
          std::to_string(static_cast<std::uint64_t>(now_ns()) % 1000000);
    fd.reset(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666));
    if (!fd.ok() && (errno != EEXIST || attempt >= 8)) return errno_status(tmp, "cannot create", errno);
  }
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd.get(), data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = n < 0 ? errno : EIO;
      remove_file(tmp);
      return errno_status(path, "cannot write", e);
    }
    done += static_cast<std::size_t>(n);
  }
  if (::close(fd.release()) != 0) {
    const int e = errno;
    remove_file(tmp);
    return errno_status(path, "cannot write", e);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    remove_file(tmp);
    return errno_status(path, "cannot rename into place", e);
  }
  return Status::Ok();
}

// flock without blocking: 1 locked, 0 held elsewhere, -1 error (errno set).
int try_flock(int fd, int op) {
  for (;;) {
    if (::flock(fd, op | LOCK_NB) == 0) return 1;
    if (errno == EINTR) continue;
    return errno == EWOULDBLOCK ? 0 : -1;
  }
}

// Takes the global lock on a new open file description of `path`.
// NOTE: polled, never a blocking flock: it is held for milliseconds (a
// directory scan, a few renames), but a blocking call could not be cancelled.
Status lock_global(const std::string& path, const std::function<bool()>* cancelled, Fd* out) {
  Fd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666));
  if (!fd.ok()) return errno_status(path, "cannot open", errno);
  int delay_us = 250;
  for (;;) {
    const int r = try_flock(fd.get(), LOCK_EX);
    if (r == 1) break;
    if (r < 0) return errno_status(path, "cannot lock", errno);
    if (cancelled && *cancelled && (*cancelled)()) {
      return Status(Code::kCancelled, path + ": cancelled while waiting for the cache's lock");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
    delay_us = std::min(delay_us * 2, 20000);
  }
  *out = std::move(fd);
  return Status::Ok();
}

std::uint64_t add_sat(std::uint64_t a, std::uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

std::string length_prefixed(const char* name, const std::string& s) {
  return std::string(name) + " " + std::to_string(s.size()) + ":" + s + "\n";
}

// The .meta / .part.meta text: compared byte for byte, so a hash collision
// can never serve another object's bytes. The size is on the second line
// (usage() reads a .part's reservation there).
std::string meta_text(const std::string& url, const std::string& etag, std::uint64_t size) {
  return "stoker-node-cache-entry 1\nsize " + std::to_string(size) + "\n" + length_prefixed("url", url) +
         length_prefixed("etag", etag);
}

std::string index_header(const std::string& url, const std::string& etag) {
  return "stoker-node-cache-index 1\n" + length_prefixed("url", url) + length_prefixed("etag", etag);
}

bool meta_size(const std::string& meta, std::uint64_t* size) {
  const std::size_t a = meta.find("\nsize ");
  if (a == std::string::npos) return false;
  const std::size_t b = meta.find('\n', a + 6);
  if (b == std::string::npos) return false;
  auto [p, ec] = std::from_chars(meta.data() + a + 6, meta.data() + b, *size);
  return ec == std::errc() && p == meta.data() + b;
}

bool is_key_prefix(const std::string& name) {
  if (name.size() < 32) return false;
  for (int i = 0; i < 32; ++i) {
    const char c = name[static_cast<std::size_t>(i)];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// Opens <base>.tar when it is the complete file of the object `meta` names.
bool open_complete(const std::string& base, const std::string& meta, std::uint64_t size, Fd* out) {
  std::string have;
  if (!read_small(base + ".meta", &have) || have != meta) return false;
  Fd fd(::open((base + ".tar").c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st;
  if (!fd.ok() || ::fstat(fd.get(), &st) != 0 || static_cast<std::uint64_t>(st.st_size) != size) return false;
  *out = std::move(fd);
  return true;
}

void make_dir(const std::string& dir, const std::string& path) {
  if (::mkdir(path.c_str(), 0777) == 0 || errno == EEXIST) {
    struct stat st;
    if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return;
    if (errno == EEXIST) errno = ENOTDIR;
  }
  throw Error(Code::kIOError, "cache_dir '" + dir + "': cannot create " + path + ": " + std::strerror(errno));
}

}  // namespace

std::string sha256_hex(std::string_view data) {
  std::uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  std::size_t n = data.size();
  for (; n >= 64; n -= 64, p += 64) sha256_block(h, p);
  unsigned char tail[128] = {};
  if (n > 0) std::memcpy(tail, p, n);
  tail[n] = 0x80;
  const std::size_t len = n < 56 ? 64 : 128;
  const std::uint64_t bits = static_cast<std::uint64_t>(data.size()) * 8;
  for (int i = 0; i < 8; ++i) tail[len - 1 - static_cast<std::size_t>(i)] = static_cast<unsigned char>(bits >> (8 * i));
  sha256_block(h, tail);
  if (len == 128) sha256_block(h, tail + 64);
  static const char kHex[] = "0123456789abcdef";
  std::string out(64, '0');
  for (int i = 0; i < 32; ++i) {
    const unsigned byte = (h[i / 4] >> (24 - 8 * (i % 4))) & 0xff;
    out[static_cast<std::size_t>(2 * i)] = kHex[byte >> 4];
    out[static_cast<std::size_t>(2 * i + 1)] = kHex[byte & 15];
  }
  return out;
}

// ---- the directory scan ----

struct NodeCache::Scan {
  struct Item {
    std::uint64_t bytes = 0;    // its files, a .part counted at its reserved size
    std::int64_t mtime_ns = 0;  // of its .lock (the LRU clock); 0 without one: evicted first
    std::vector<std::string> files;
  };
  std::map<std::string, Item> entries;
  std::uint64_t other = 0;  // index files and anything else under stoker-v1/

  std::uint64_t total() const {
    std::uint64_t t = other;
    for (const auto& [key, item] : entries) t = add_sat(t, item.bytes);
    return t;
  }
};

NodeCache::Scan NodeCache::scan() const {
  Scan s;
  struct Part {
    std::uint64_t size = 0, reserved = 0;
  };
  std::map<std::string, Part> parts;
  auto list = [](const std::string& dir, const std::function<void(const std::string&, const struct stat&)>& f) {
    DIR* d = ::opendir(dir.c_str());  // glibc opens it O_CLOEXEC
    if (!d) return;
    while (struct dirent* de = ::readdir(d)) {
      const std::string name = de->d_name;
      struct stat st;
      if (name == "." || name == ".." || ::fstatat(::dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      if (S_ISREG(st.st_mode)) f(name, st);
    }
    ::closedir(d);
  };
  list(e_dir_, [&](const std::string& name, const struct stat& st) {
    const auto bytes = static_cast<std::uint64_t>(st.st_size);
    if (!is_key_prefix(name)) {
      s.other = add_sat(s.other, bytes);
      return;
    }
    const std::string key = name.substr(0, 32), suffix = name.substr(32);
    Scan::Item& item = s.entries[key];
    item.files.push_back(name);
    if (suffix == ".lock") {
      item.mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    } else if (suffix == ".part") {
      parts[key].size = bytes;
    } else {
      item.bytes = add_sat(item.bytes, bytes);
      std::string meta;
      if (suffix == ".part.meta" && read_small(e_dir_ + "/" + name, &meta)) meta_size(meta, &parts[key].reserved);
    }
  });
  // NOTE: a .part counts at its full expected size from the moment it is
  // created (the reservation), also when its downloader died, until it is
  // resumed or evicted; so concurrent downloads never overshoot the limit.
  for (const auto& [key, p] : parts) s.entries[key].bytes = add_sat(s.entries[key].bytes, std::max(p.size, p.reserved));
  list(idx_dir_, [&](const std::string&, const struct stat& st) {
    s.other = add_sat(s.other, static_cast<std::uint64_t>(st.st_size));
  });
  return s;
}

// ---- NodeCache ----

NodeCache::NodeCache(std::string dir, std::uint64_t limit) : dir_(std::move(dir)) {
  if (dir_.empty()) throw Error(Code::kInvalidArgument, "cache_dir: empty path");
  // Every missing component of dir_, then stoker-v1/{e,idx}.
  for (std::size_t p = dir_.find('/', 1); p != std::string::npos; p = dir_.find('/', p + 1)) {
    const std::string prefix = dir_.substr(0, p);
    struct stat st;
    if (::stat(prefix.c_str(), &st) != 0) make_dir(dir_, prefix);
  }
  make_dir(dir_, dir_);
  root_ = dir_ + "/stoker-v1";
  e_dir_ = root_ + "/e";
  idx_dir_ = root_ + "/idx";
  lock_path_ = root_ + "/lock";
  make_dir(dir_, root_);
  make_dir(dir_, e_dir_);
  make_dir(dir_, idx_dir_);
  Fd lock(::open(lock_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666));
  if (!lock.ok()) {
    throw Error(Code::kIOError, "cache_dir '" + dir_ + "': cannot open " + lock_path_ + ": " + std::strerror(errno));
  }
  limit_ = limit;
  if (limit_ == 0) {
    struct statvfs vfs;
    if (::statvfs(root_.c_str(), &vfs) != 0) {
      throw Error(Code::kIOError, "cache_dir '" + dir_ + "': cannot statvfs " + root_ + ": " + std::strerror(errno));
    }
    const std::uint64_t avail = vfs.f_bavail, unit = vfs.f_frsize ? vfs.f_frsize : vfs.f_bsize;
    const std::uint64_t free_bytes = unit != 0 && avail > UINT64_MAX / unit ? UINT64_MAX : avail * unit;
    // NOTE: stoker's own files count as free: they can be evicted. Otherwise
    // each run would start from 80% of what the previous one left free, and
    // a full cache would shrink by a fifth per run.
    const std::uint64_t bytes = add_sat(free_bytes, usage());
    limit_ = bytes / 10 * 8 + bytes % 10 * 8 / 10;
  }
}

std::string NodeCache::entry_key(const std::string& url, const std::string& etag, std::uint64_t size) {
  return sha256_hex(url + "\n" + etag + "\n" + std::to_string(size)).substr(0, 32);
}

std::string NodeCache::index_path(const std::string& url, const std::string& etag) const {
  return idx_dir_ + "/" + sha256_hex(url + "\n" + etag).substr(0, 32) + ".idx";
}

std::uint64_t NodeCache::usage() const { return scan().total(); }

NodeCacheStats NodeCache::stats() const {
  NodeCacheStats s;
  s.hits = hits_.load();
  s.misses = misses_.load();
  s.bytes_written = bytes_written_.load();
  s.evictions = evictions_.load();
  s.bypass = bypass_.load();
  return s;
}

bool NodeCache::make_room(const std::string& keep, std::uint64_t need, std::uint64_t replaced) {
  Scan s = scan();
  std::uint64_t used = s.total();
  if (auto it = s.entries.find(keep); it != s.entries.end()) used -= std::min(used, it->second.bytes);
  used -= std::min(used, replaced);
  auto fits = [&] { return need <= limit_ && used <= limit_ - need; };
  if (fits()) return true;
  std::vector<std::pair<std::int64_t, std::string>> order;  // (lock mtime, key): oldest first
  for (const auto& [key, item] : s.entries) {
    if (key != keep) order.emplace_back(item.mtime_ns, key);
  }
  std::sort(order.begin(), order.end());
  // Can it be taken now? No O_CREAT: an entry without a lock file is in use by nobody.
  auto lock_entry = [&](const std::string& key, Fd* fd) {
    fd->reset(::open((e_dir_ + "/" + key + ".lock").c_str(), O_RDWR | O_CLOEXEC));
    return fd->ok() ? try_flock(fd->get(), LOCK_EX) == 1 : errno == ENOENT;
  };
  // NOTE: first count what could go, so that nothing is evicted for a
  // download that will bypass anyway. Under the global lock entries only
  // become free (Entries close outside it, locks are taken inside it), so
  // the second pass finds at least what the first did.
  std::uint64_t freeable = 0;
  bool enough = false;
  for (const auto& [mtime, key] : order) {
    Fd fd;
    if (lock_entry(key, &fd)) freeable = add_sat(freeable, s.entries[key].bytes);
    if (need <= limit_ && used - std::min(used, freeable) <= limit_ - need) {
      enough = true;
      break;
    }
  }
  if (!enough) return false;
  for (const auto& [mtime, key] : order) {
    if (fits()) break;
    Fd fd;
    if (!lock_entry(key, &fd)) continue;
    Scan::Item& item = s.entries[key];
    // The lock file last: while it exists with our LOCK_EX, nobody else starts using the entry.
    for (const std::string& f : item.files) {
      if (f != key + ".lock") remove_file(e_dir_ + "/" + f);
    }
    remove_file(e_dir_ + "/" + key + ".lock");
    used -= std::min(used, item.bytes);
    evictions_.fetch_add(1);
  }
  return fits();
}

Status NodeCache::open(const std::string& url, const std::string& etag, std::uint64_t size,
                       const std::function<bool()>& cancelled, std::unique_ptr<Entry>* out) {
  out->reset();
  const std::string key = entry_key(url, etag, size);
  const std::string base = entry_path(key), lock_path = base + ".lock";
  std::unique_ptr<Entry> entry(new Entry(this, key, meta_text(url, etag, size), size));
  const std::string& meta = entry->meta_;
  for (;;) {
    Fd global;
    Status st = lock_global(lock_path_, &cancelled, &global);
    if (!st.ok()) return st;
    // NOTE: entry lock files are created (and unlinked, by eviction) only
    // under the global lock, and taken before it is released: an fd opened
    // here cannot name a file an evictor has just unlinked.
    Fd lock(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666));
    if (!lock.ok()) return errno_status(lock_path, "cannot open", errno);
    const int ex = try_flock(lock.get(), LOCK_EX);
    if (ex < 0) return errno_status(lock_path, "cannot lock", errno);
    if (ex == 1) {
      Fd tar;
      if (open_complete(base, meta, size, &tar)) {
        // NOTE: not atomic (the lock is dropped, then taken shared), but
        // nobody can take it meanwhile: exclusive attempts happen under the
        // global lock, which we hold.
        if (try_flock(lock.get(), LOCK_SH) != 1) return errno_status(lock_path, "cannot lock shared", errno);
        ::futimens(lock.get(), nullptr);
        hits_.fetch_add(1);
        entry->state_ = Entry::State::kHit;
        entry->fd_ = tar.release();
        entry->lock_fd_ = lock.release();
        *out = std::move(entry);
        return Status::Ok();
      }
      // Not complete: a .tar or .meta here is damaged or another object's (a
      // hash collision), and nobody uses it (we hold LOCK_EX).
      remove_file(base + ".tar");
      remove_file(base + ".meta");
      const std::uint64_t need = add_sat(size, 2 * meta.size());  // the .part, its .part.meta, then the .meta
      if (!make_room(key, need, 0)) {
        if (!exists(base + ".part") && !exists(base + ".part.meta")) remove_file(lock_path);
        bypass_.fetch_add(1);
        entry->state_ = Entry::State::kBypass;
        *out = std::move(entry);
        return Status::Ok();
      }
      std::string part_meta;
      Fd part;
      std::uint64_t from = 0;
      const std::string part_path = base + ".part";
      if (read_small(base + ".part.meta", &part_meta) && part_meta == meta) {
        part.reset(::open(part_path.c_str(), O_RDWR | O_CLOEXEC));
        struct stat pst;
        if (part.ok() && ::fstat(part.get(), &pst) == 0 && static_cast<std::uint64_t>(pst.st_size) <= size) {
          from = static_cast<std::uint64_t>(pst.st_size);  // a dead or failed download's bytes: resumed
        } else {
          part.reset();
        }
      }
      if (!part.ok()) {
        remove_file(part_path);  // another object's, or longer than the object: not ours to resume
        if (part_meta != meta) {
          st = write_atomically(base + ".part.meta", meta);
          if (!st.ok()) return st;
        }
        part.reset(::open(part_path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666));
        if (!part.ok()) return errno_status(part_path, "cannot create", errno);
      }
      ::futimens(lock.get(), nullptr);
      misses_.fetch_add(1);
      entry->state_ = Entry::State::kDownload;
      entry->resume_from_ = from;
      entry->fd_ = part.release();
      entry->lock_fd_ = lock.release();
      *out = std::move(entry);
      return Status::Ok();
    }
    const int sh = try_flock(lock.get(), LOCK_SH);
    if (sh < 0) return errno_status(lock_path, "cannot lock", errno);
    if (sh == 1) {
      Fd tar;
      if (open_complete(base, meta, size, &tar)) {
        ::futimens(lock.get(), nullptr);
        hits_.fetch_add(1);
        entry->state_ = Entry::State::kHit;
        entry->fd_ = tar.release();
        entry->lock_fd_ = lock.release();
      } else {
        // NOTE: in use by others yet not this object's complete file (a hash
        // collision with an entry in use, or a damaged one): leave it alone.
        bypass_.fetch_add(1);
        entry->state_ = Entry::State::kBypass;
      }
      *out = std::move(entry);
      return Status::Ok();
    }
    // Held exclusively: another process, or another Entry of this one, downloads it.
    lock.reset();
    global.reset();
    if (cancelled && cancelled()) {
      return Status(Code::kCancelled, url + ": cancelled while another download filled " + base + ".part");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

bool NodeCache::load_index(const std::string& url, const std::string& etag, std::string* text) const {
  std::string data;
  const std::string header = index_header(url, etag);
  if (!read_small(index_path(url, etag), &data) || data.compare(0, header.size(), header) != 0) return false;
  *text = data.substr(header.size());
  return true;
}

void NodeCache::store_index(const std::string& url, const std::string& etag, const std::string& text) {
  Fd global;
  if (!lock_global(lock_path_, nullptr, &global).ok()) return;
  const std::string path = index_path(url, etag);
  struct stat st;
  const std::uint64_t old = ::stat(path.c_str(), &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
  const std::string data = index_header(url, etag) + text;
  if (!make_room("", data.size(), old)) return;
  (void)write_atomically(path, data);  // best effort: a missing index is fetched or scanned again
}

// ---- Entry ----

Status NodeCache::Entry::commit() {
  const std::string base = cache_->entry_path(key_);
  const std::string part = base + ".part", tar = base + ".tar";
  if (state_ != State::kDownload) return Status::InvalidArgument(base + ": commit() of an entry not downloading");
  struct stat st;
  if (::fstat(fd_, &st) != 0) return errno_status(part, "cannot stat", errno);
  if (static_cast<std::uint64_t>(st.st_size) != size_) {
    return Status::IOError(part + ": has " + std::to_string(st.st_size) + " of " + std::to_string(size_) +
                           " bytes; not committed");
  }
  Fd global;
  Status s = lock_global(cache_->lock_path_, nullptr, &global);
  if (!s.ok()) return s;
  s = write_atomically(base + ".meta", meta_);
  if (!s.ok()) return s;
  if (::rename(part.c_str(), tar.c_str()) != 0) {
    const int e = errno;
    remove_file(base + ".meta");
    return errno_status(part, "cannot rename to " + tar, e);
  }
  remove_file(base + ".part.meta");
  // NOTE: dropping LOCK_EX for LOCK_SH is not atomic, but under the global
  // lock nobody can take the entry in between (see open()). Were it to fail
  // anyway, the entry would merely look unused (an evictor unlinks names; our
  // fd keeps the bytes), so the commit stands.
  (void)try_flock(lock_fd_, LOCK_SH);
  ::futimens(lock_fd_, nullptr);
  cache_->bytes_written_.fetch_add(size_ - resume_from_);
  state_ = State::kHit;
  return Status::Ok();
}

NodeCache::Entry::~Entry() {
  if (fd_ >= 0) ::close(fd_);
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

}  // namespace stoker::detail
