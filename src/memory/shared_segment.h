// A cache's entries in one file of shared memory (a tmpfs such as /dev/shm)
// that every process on the machine with the same key maps: each record
// stored once per node, read by all. Thread- and process-safe: any number of
// SharedSegment objects, in any processes, may use one file at once.
//
// Layout of <dir>/stoker-<source hash>-<key hash>.seg:
//   [0, 4096)        Header: magic, version, record count, key hash, capacity,
//                    bump pointer, counters;
//   [4096, ...)      the index: one 64-bit word per record (records are dense
//                    0..n-1, so the index is a table, not a hash);
//   then the key's text (compared whole on attach), then the data area, a
//   bump allocator of blocks (a block header, the member ends, the bytes).
// An index word is 0 (empty), kClaimBit | pid (being written by pid),
// kRefused, or the offset of a published block. A writer claims the word by
// compare-exchange, writes its block and publishes it with a release store:
// a reader never sees half an entry. A claim whose process is dead (a
// SIGKILL mid-write) is taken over by the next writer; the block it was
// writing is a hole. A published block is final: never replaced or freed
// while the file lives (another process may be reading it, without a lock),
// so what is stored must be the entry's final form (cache/README.md: the
// RAM rewrite happens before the store).
//
// Lifetime, by open-file-description locks on the file (released by the
// kernel when a process dies): byte 0 serialises attach and detach, byte 1 is
// held shared by every process attached. The attacher that finds byte 1 free
// (re)initialises the file (a stale segment, left by processes that died, is
// reclaimed then); the one that detaches last removes the file.
//
// The data area is allocated in the file system (posix_fallocate) before a
// block is written into it, 8 MiB at a time: a full tmpfs refuses a store
// (SharedSegment::store returns kNoRoom, full() says why) instead of killing
// the process with SIGBUS on a write to its mapping.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "util/thread_annotations.h"

namespace stoker::detail {

struct SharedSegmentOptions {
  std::string dir = "/dev/shm";
  std::string group;  // what the data is (the source): part of the file name
  std::string key;    // everything that decides the entries' bytes (group included)
  std::uint32_t records = 0;
  std::uint64_t capacity = 0;  // the data area's bytes, when this attacher creates the file
};

class SharedSegment {
 public:
  // Attaches to the live segment of opt.key in opt.dir, or creates it.
  // Throws stoker::Error (kResourceExhausted, kIOError) naming the directory,
  // the bytes needed and the fix when the directory cannot hold it.
  static std::shared_ptr<SharedSegment> attach(const SharedSegmentOptions& opt);
  ~SharedSegment();  // detaches; the last process attached removes the file
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;

  // A published entry, read in place: the bytes and the member ends stay
  // valid while the segment is attached (blocks are never reused).
  struct Block {
    const std::uint8_t* data = nullptr;
    std::uint64_t size = 0;
    int width = 0, height = 0;
    bool grid = false;
    std::span<const std::uint64_t> ends;
    std::uint64_t offset = 0;  // where the block is (tests)
  };
  struct Meta {
    int width = 0, height = 0;
    bool grid = false;
    const std::vector<std::uint64_t>* ends = nullptr;
  };
  // Record i's entry; false when none is published.
  bool find(std::uint32_t i, Block* out) const;
  bool refused(std::uint32_t i) const;

  enum class Store { kStored, kHeld, kNoRoom, kRefused };
  // Stores a copy of data[0, size) as record i's entry, unless another
  // process or thread has stored or is storing it (kHeld), it was refused,
  // or the data area (or the file system under it) is full.
  Store store(std::uint32_t i, const std::uint8_t* data, std::uint64_t size, const Meta& meta);
  // Record i is never stored again (and its entry, if any, dropped).
  void refuse(std::uint32_t i);

  std::uint64_t entries() const;   // published entries, node-wide
  std::uint64_t bytes() const;     // the data area's bytes handed out (holes included), node-wide
  // The published entries' blocks' bytes, node-wide: bytes() less the holes
  // (blocks of writers killed mid-write, or stored and then refused).
  std::uint64_t entry_bytes() const;
  std::uint64_t capacity() const;  // the data area's size
  std::uint32_t records() const { return records_; }
  std::uint64_t filled() const { return filled_.load(std::memory_order_relaxed); }  // stored by this object
  const std::string& path() const { return path_; }
  // Whether this object (re)initialised the file, and whether that
  // reclaimed a stale one.
  bool created() const { return created_; }
  bool reclaimed_stale() const { return stale_; }
  // Why stores are refused for lack of room ("" while there is room).
  std::string full() const EXCLUDES(full_mu_);

  // What a block of `size` bytes and `ends` member ends takes of the data area.
  static std::uint64_t block_bytes(std::uint64_t size, std::size_t ends) {
    return (24 + 8 * static_cast<std::uint64_t>(ends) + size + 15) / 16 * 16;
  }

  // The file name's prefix for `group` in dir (tests: what is left there).
  static std::string prefix(const std::string& group);

  // NOTE: tests only: posix_fallocate's stand-in (returns an errno value),
  // to simulate a full file system without one.
  using FallocateFn = int (*)(int fd, std::int64_t offset, std::int64_t len);
  static void set_fallocate_for_tests(FallocateFn fn);

  struct Header;

 private:
  SharedSegment() = default;
  std::atomic<std::uint64_t>& word(std::uint32_t i) const;
  // Allocates n bytes of the data area (in the file system too); the
  // block's offset, or 0 when there is no room.
  std::uint64_t allocate(std::uint64_t n);
  std::uint64_t write_block(std::uint64_t n_bytes, const std::uint8_t* data, const Meta& meta);
  void note_full(const std::string& why) EXCLUDES(full_mu_);

  int fd_ = -1;
  std::string path_;
  std::string dir_;
  std::uint8_t* base_ = nullptr;
  std::uint64_t mapped_ = 0;
  Header* header_ = nullptr;
  std::uint32_t records_ = 0;
  std::uint64_t data_offset_ = 0;
  std::uint64_t pid_ = 0;
  bool created_ = false, stale_ = false;
  std::atomic<std::uint64_t> filled_{0};
  mutable Mutex full_mu_;
  std::string full_why_ GUARDED_BY(full_mu_);  // the first refusal's reason
};

}  // namespace stoker::detail
