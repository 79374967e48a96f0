// Where a SampleCache's entries live: this process's huge-page arena
// (ProcessStore) or a segment of shared memory every loader on the node with
// the same cache key maps (SegmentStore, memory/shared_segment.h). The
// SampleCache above keeps what is per process either way (the budget's
// charges, hits and misses, the rewrite's per-record states, the order this
// process stored in); a store holds entries and nothing else.
// Thread-safe: any number of threads may find, store and refuse at once.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "memory/arena.h"
#include "memory/shared_segment.h"
#include "util/thread_annotations.h"

namespace stoker::detail {

// A cached record as a reader sees it: a view of its bytes, valid while the
// EntryPtr that gave it is held.
struct CacheEntry {
  const std::uint8_t* data = nullptr;  // encoded bytes, or RGB8 pixels (then other fields' stored forms)
  std::size_t size = 0;
  int width = 0;  // pixels only
  int height = 0;
  // Records of several members (a schema reading a mask, boxes, ...): the
  // end of each member's bytes; empty for one member.
  std::span<const std::uint64_t> ends;
  bool grid = false;  // cache="ram": the image was rewritten into the random-access form (cache/ram_rewrite.h)
};

// A found entry and what keeps its bytes alive: the entry itself in a
// process arena (a replace() leaves the old one to the readers holding it),
// the segment in shared memory (its blocks never move). NOTE: no heap
// allocation per lookup: a copy of the view and of one shared_ptr.
class EntryPtr {
 public:
  EntryPtr() = default;
  EntryPtr(std::shared_ptr<const void> keep, const CacheEntry& e) : keep_(std::move(keep)), e_(e), set_(true) {}
  const CacheEntry* get() const { return set_ ? &e_ : nullptr; }
  const CacheEntry* operator->() const { return &e_; }
  const CacheEntry& operator*() const { return e_; }
  explicit operator bool() const { return set_; }
  // Which stored entry this is (ProcessStore::replace compares it).
  const void* owner() const { return keep_.get(); }
  // The same entry (its bytes in the same place), or both null.
  friend bool operator==(const EntryPtr& a, const EntryPtr& b) {
    return a.set_ == b.set_ && (!a.set_ || a.e_.data == b.e_.data);
  }

 private:
  std::shared_ptr<const void> keep_;
  CacheEntry e_;
  bool set_ = false;
};

struct EntryMeta {
  int width = 0, height = 0;
  const std::vector<std::uint64_t>* ends = nullptr;
  bool grid = false;
};

class CacheStore {
 public:
  virtual ~CacheStore() = default;
  enum class Stored { kStored, kHeld, kNoRoom, kRefused };

  // What storing an entry of n bytes and `ends` member ends costs (charged
  // to the budget before store() or replace()).
  virtual std::uint64_t cost(std::size_t n, std::size_t ends) const = 0;
  virtual EntryPtr find(std::size_t i) const = 0;
  virtual bool contains(std::size_t i) const = 0;
  // A copy of data[0, n) as record i's entry, unless it is held (or being
  // stored by another thread or process), refused, or there is no room.
  virtual Stored store(std::size_t i, const std::uint8_t* data, std::size_t n, const EntryMeta& m) = 0;
  // Record i's entry is never stored again; returns the cost it freed (0:
  // none, or not this process's to give back).
  virtual std::uint64_t refuse(std::size_t i) = 0;
  // Whether a stored entry is final: replace() is refused (a segment: a block
  // another process may be reading is never freed, so the RAM rewrite stores
  // records rewritten in the first place).
  virtual bool entries_final() const = 0;
  // Puts a copy of data in place of `old` (record i's entry as found): true
  // and *now set when it did; false when the entry is no longer `old`.
  virtual bool replace(std::size_t i, const EntryPtr& old, const std::uint8_t* data, std::size_t n,
                       const EntryMeta& m, EntryPtr* now) = 0;

  virtual std::uint64_t entries() const = 0;  // records held (a segment: node-wide)
  virtual std::uint64_t bytes() const = 0;    // bytes held (a segment: node-wide, holes included)
  // Memory freed entries still hold that this process is charged for.
  virtual std::uint64_t holes() const = 0;
  virtual const SharedSegment* segment() const = 0;  // null for a process arena
};

// Entries in this process's arena of huge-page mappings, one shared_ptr per
// record behind 64 striped mutexes (src/cache/README.md says why not atomics).
class ProcessStore final : public CacheStore {
 public:
  // `chunk`: the arenas' mapping size.
  ProcessStore(std::size_t records, std::size_t chunk);
  std::uint64_t cost(std::size_t n, std::size_t ends) const override {
    return n + sizeof(CacheEntry) + 64 + ends * sizeof(std::uint64_t);
  }
  EntryPtr find(std::size_t i) const override;
  bool contains(std::size_t i) const override;
  Stored store(std::size_t i, const std::uint8_t* data, std::size_t n, const EntryMeta& m) override;
  std::uint64_t refuse(std::size_t i) override;
  bool entries_final() const override { return false; }
  bool replace(std::size_t i, const EntryPtr& old, const std::uint8_t* data, std::size_t n, const EntryMeta& m,
               EntryPtr* now) override;
  std::uint64_t entries() const override { return count_.load(std::memory_order_relaxed); }
  std::uint64_t bytes() const override { return live_.load(std::memory_order_relaxed); }
  std::uint64_t holes() const override { return arena_->holes() + replacements_->holes(); }
  const SharedSegment* segment() const override { return nullptr; }

 private:
  struct Owned;  // an entry's bytes and ends, and its view
  std::shared_ptr<const Owned> make(const std::shared_ptr<Arena>& arena, const std::uint8_t* data, std::size_t n,
                                    const EntryMeta& m) const;
  static EntryPtr ptr(const std::shared_ptr<const Owned>& o);
  Mutex& stripe(std::size_t i) const { return stripes_[i % stripes_.size()]; }

  // Entries' bytes (held by each, so it outlives them).
  std::shared_ptr<Arena> arena_;
  // The replacing entries' (the rewrite's): apart, so the first entries'
  // mappings hold only first entries, and empty (are returned whole) as
  // the rewrite replaces them in the order they were stored.
  std::shared_ptr<Arena> replacements_;
  // NOTE: entries_[i] is guarded by stripe(i), a per-element lock the
  // annotations cannot name: every access is inside a MutexLock on stripe(i).
  std::vector<std::shared_ptr<const Owned>> entries_;
  mutable std::array<Mutex, 64> stripes_;
  std::atomic<std::uint64_t> count_{0}, live_{0};
};

// Entries in a segment shared by the node's loaders: each record stored once
// per node, read in place by every process (no copy, no allocation).
class SegmentStore final : public CacheStore {
 public:
  explicit SegmentStore(std::shared_ptr<SharedSegment> segment) : seg_(std::move(segment)) {}
  std::uint64_t cost(std::size_t n, std::size_t ends) const override { return SharedSegment::block_bytes(n, ends); }
  EntryPtr find(std::size_t i) const override;
  bool contains(std::size_t i) const override;
  Stored store(std::size_t i, const std::uint8_t* data, std::size_t n, const EntryMeta& m) override;
  // NOTE: the block stays a hole in the segment, and was charged to
  // whichever process stored it: nothing for this one to give back.
  std::uint64_t refuse(std::size_t i) override {
    seg_->refuse(static_cast<std::uint32_t>(i));
    return 0;
  }
  bool entries_final() const override { return true; }
  bool replace(std::size_t, const EntryPtr&, const std::uint8_t*, std::size_t, const EntryMeta&, EntryPtr*) override {
    return false;  // entries_final()
  }
  std::uint64_t entries() const override { return seg_->entries(); }
  std::uint64_t bytes() const override { return seg_->bytes(); }
  std::uint64_t holes() const override { return 0; }
  const SharedSegment* segment() const override { return seg_.get(); }

 private:
  std::shared_ptr<SharedSegment> seg_;
  std::atomic<bool> said_full_{false};  // the segment's being full, said on stderr
};

}  // namespace stoker::detail
