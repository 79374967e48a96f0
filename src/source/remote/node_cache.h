// The node-local disk cache that remote shards land in (`cache_dir=`,
// `cache_limit=`), shared by every process on the machine through `flock`:
// one entry per (URL, ETag, size), a `.part` renamed into place when
// complete, LRU kept in the entry lock files' mtimes, a byte limit that holds
// with concurrent processes, and a killed downloader's `.part` resumed by the
// next one. docs/remote-shards-design.md section 6 is the design.
//
// Layout under <dir>/stoker-v1/: `lock` (the global lock: space accounting
// and entry lock files' creation and removal happen under it), `e/<h>.tar`,
// `e/<h>.meta`, `e/<h>.lock`, `e/<h>.part`, `e/<h>.part.meta`, `idx/<h>.idx`.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "stoker/status.h"

namespace stoker::detail {

// SHA-256 of `data` as 64 lower-case hex digits (FIPS 180-4).
std::string sha256_hex(std::string_view data);

struct NodeCacheStats {
  std::uint64_t hits = 0, misses = 0, bytes_written = 0, evictions = 0, bypass = 0;
};

// Thread-safe; any number of NodeCache objects (in any processes) may share a
// directory. A NodeCache outlives the Entries it opened.
class NodeCache {
 public:
  // <dir>/stoker-v1/{e,idx} created (mode 0777 & umask), with any missing
  // parents. limit: bytes stoker's files there may take; 0 = 80% of (the file
  // system's free space at open + usage()), at most UINT64_MAX. Throws
  // stoker::Error naming the dir and strerror.
  NodeCache(std::string dir, std::uint64_t limit);
  NodeCache(const NodeCache&) = delete;
  NodeCache& operator=(const NodeCache&) = delete;

  // One shard object's entry, keyed by (url, etag, size).
  class Entry {
   public:
    enum class State { kHit, kDownload, kBypass };
    State state() const { return state_; }
    // kHit: the complete file, open O_RDONLY (O_RDWR after commit()).
    // kDownload: the .part, open O_RDWR (the caller pwrite()s bytes
    // [resume_from(), size) into it, in order, and may pread() what it wrote).
    // kBypass: -1 (no room: the caller streams through memory).
    int fd() const { return fd_; }
    // kDownload: bytes already in the .part (a killed or failed earlier download's), else 0.
    std::uint64_t resume_from() const { return state_ == State::kDownload ? resume_from_ : 0; }
    std::uint64_t size() const { return size_; }
    // kDownload, every byte written: .meta written atomically, .part renamed
    // to .tar, the lock converted to shared; fd() stays valid and the state
    // becomes kHit. An error (naming the path and errno, e.g. ENOSPC, or a
    // .part shorter than the size) leaves the .part for a later resume.
    Status commit();
    // Releases the lock (an uncommitted .part stays, resumable).
    ~Entry();
    Entry(const Entry&) = delete;
    Entry& operator=(const Entry&) = delete;

   private:
    friend class NodeCache;
    Entry(NodeCache* cache, std::string key, std::string meta, std::uint64_t size)
        : cache_(cache), key_(std::move(key)), meta_(std::move(meta)), size_(size) {}

    NodeCache* cache_;
    std::string key_;   // the 32 hex digits
    std::string meta_;  // the .meta text this entry must carry
    std::uint64_t size_;
    State state_ = State::kBypass;
    int fd_ = -1;
    int lock_fd_ = -1;
    std::uint64_t resume_from_ = 0;
  };

  // Waits (polling every 20 ms, never a blocking flock, calling `cancelled()`
  // each time and returning kCancelled when it says so) while another process
  // or another Entry in this process downloads the same object; then: the
  // complete file (kHit), or this caller becomes the downloader (kDownload,
  // resuming a dead downloader's .part whose meta matches), or kBypass when
  // the limit cannot be met even after evicting every entry not in use (or
  // when `size` alone exceeds it). Space for a download (its full size) is
  // reserved before kDownload is returned. An entry is in use while any Entry
  // for it is alive in any process, and is never evicted while in use. Each
  // kHit/kDownload touches the entry's lock-file mtime (the LRU clock).
  // Errors (kIOError) name the path and strerror.
  Status open(const std::string& url, const std::string& etag, std::uint64_t size,
              const std::function<bool()>& cancelled, std::unique_ptr<Entry>* out);

  // Small side files (a shard's index text), keyed by (url, etag); counted in
  // usage(); written atomically. load_index: false when absent or written for
  // another key. store_index: best effort (nothing stored when there is no
  // room or the write fails).
  bool load_index(const std::string& url, const std::string& etag, std::string* text) const;
  void store_index(const std::string& url, const std::string& etag, const std::string& text);

  std::uint64_t limit() const { return limit_; }
  // Bytes of complete entries and their metas + reserved sizes of .part
  // entries + index files, scanned now.
  std::uint64_t usage() const;
  // This object's counters. bytes_written: bytes committed by this object's
  // downloads (size - resume_from each).
  NodeCacheStats stats() const;
  const std::string& dir() const { return dir_; }

  // The entry name <h>: the first 32 hex digits of sha256(url "\n" etag "\n" size).
  static std::string entry_key(const std::string& url, const std::string& etag, std::uint64_t size);
  // <dir>/stoker-v1/e/<h>; append ".tar", ".part", ... (tests look at the files).
  std::string entry_path(const std::string& key) const { return e_dir_ + "/" + key; }

 private:
  struct Scan;
  Scan scan() const;
  // Under the global lock: evicts entries not in use (oldest lock mtime first,
  // never `keep`) until `need` more bytes fit beside everything else except
  // entry `keep` and `replaced` bytes; false (nothing evicted) when they cannot.
  bool make_room(const std::string& keep, std::uint64_t need, std::uint64_t replaced);
  std::string index_path(const std::string& url, const std::string& etag) const;

  std::string dir_, root_, e_dir_, idx_dir_, lock_path_;
  std::uint64_t limit_ = 0;
  std::atomic<std::uint64_t> hits_{0}, misses_{0}, bytes_written_{0}, evictions_{0}, bypass_{0};
};

}  // namespace stoker::detail
