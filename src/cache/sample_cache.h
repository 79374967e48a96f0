// In-memory caches of samples under one byte budget: encoded bytes
// (cache="ram") or decoded, downscaled pixels (cache="decoded"). Filled as
// records are first read (and, for cache="ram", by a background preload that
// never delays a batch); when the budget is spent, the
// rest of the data set is served by the slower path. Thread-safe; an entry
// never changes once published (cache="ram" may put a rewritten one in its
// place: readers hold what they found through a shared pointer).
// With a shared segment (memory/shared_segment.h) the entries live there,
// shared by every process on the node with the same cache key: each record
// stored once per node; the per-process parts (hits, misses, the rewrite's
// per-record state, the order this process stored in) stay here.
#pragma once

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "memory/arena.h"
#include "memory/memory_budget.h"
#include "memory/shared_segment.h"
#include "image/pixels.h"
#include "util/thread_annotations.h"

namespace stoker::detail {

class SampleCache {
 public:
  // Entries are charged to the budget's sample_cache account (with what
  // other accounts hold or reserve, the cache gets what is left).
  SampleCache(std::size_t records, std::shared_ptr<MemoryBudget> budget)
      : budget_(budget->limit()), memory_(std::move(budget), MemoryAccount::kSampleCache), entries_(records),
        state_(records) {}
  // Entries in a shared segment. NOTE: an entry is charged to the budget of
  // the process that stores it, so the node's entries are charged once in
  // all, whatever the number of processes reading them.
  SampleCache(std::size_t records, std::shared_ptr<MemoryBudget> budget, std::shared_ptr<SharedSegment> shared)
      : SampleCache(records, std::move(budget)) {
    shared_ = std::move(shared);
  }
  // A budget of its own (tests, benchmarks).
  SampleCache(std::size_t records, std::uint64_t budget_bytes)
      : SampleCache(records, std::make_shared<MemoryBudget>(budget_bytes)) {}
  SampleCache(const SampleCache&) = delete;
  SampleCache& operator=(const SampleCache&) = delete;

  struct Entry {
    ArenaBytes bytes;  // encoded bytes, or RGB8 pixels (then other fields' stored forms)
    int width = 0;                    // pixels only
    int height = 0;
    // Records of several members (a schema reading a mask, boxes, ...): the
    // end of each member's bytes; empty for one member.
    std::vector<std::uint64_t> ends;
    bool grid = false;  // cache="ram": the image was rewritten into the random-access form (cache/ram_rewrite.h)
    std::uint64_t shared_block = 0;  // in a shared segment: its block (SharedSegment::Block::offset)
    ImageView view() const { return {bytes.data(), width, height, static_cast<std::ptrdiff_t>(width) * 3}; }
    std::uint64_t cost() const { return bytes.size() + sizeof(Entry) + 64 + ends.size() * sizeof(std::uint64_t); }
  };
  // NOTE: an entry never changes once published, but cache="ram" may
  // replace it by its rewritten form (replace()); a reader keeps the one it
  // found alive by holding this pointer while it uses the bytes. The
  // pointers are guarded by striped mutexes (held for a pointer copy):
  // libstdc++ 12's std::atomic<std::shared_ptr> guards them with a lock bit
  // ThreadSanitizer cannot see, and an uncontended mutex costs ~20 ns of a
  // sample's milliseconds.
  using EntryPtr = std::shared_ptr<const Entry>;

  // The entry of record i, or null (counted as a hit or a miss).
  EntryPtr find(std::size_t i) {
    EntryPtr e = peek(i);
    (e ? hits_ : misses_).fetch_add(1, std::memory_order_relaxed);
    return e;
  }
  // The entry of record i, or null, not counted (the rewrite's look-ups).
  EntryPtr peek(std::size_t i) const {
    if (shared_) return shared_entry(i);
    MutexLock lock(stripe(i));
    return entries_[i];
  }

  // Whether record i is held (not counted as a hit or a miss).
  bool contains(std::size_t i) const {
    SharedSegment::Block b;
    return shared_ ? shared_->find(static_cast<std::uint32_t>(i), &b) : peek(i) != nullptr;
  }

  enum class Insert { kStored, kAlreadyHeld, kNoRoom, kRefused };
  // Stores a copy of `data` as record i's entry when the budget allows (and
  // the record was not refused: see refuse()).
  Insert insert(std::size_t i, const std::uint8_t* data, std::size_t size, int width = 0, int height = 0,
                const std::vector<std::uint64_t>* ends = nullptr, bool grid = false) {
    if (state(i) == kRefused) return Insert::kRefused;
    if (contains(i)) return Insert::kAlreadyHeld;
    if (shared_) {
      const std::uint64_t block = SharedSegment::block_bytes(size, ends ? ends->size() : 0);
      if (!charge(block)) return Insert::kNoRoom;
      const Insert r = insert_shared(i, data, size, width, height, ends, grid);
      if (r != Insert::kStored) uncharge(block);
      return r;
    }
    const std::uint64_t cost = size + sizeof(Entry) + 64 + (ends ? ends->size() * sizeof(std::uint64_t) : 0);
    if (!charge(cost)) return Insert::kNoRoom;
    auto e = std::make_shared<Entry>();
    e->bytes = ArenaBytes(arena_, size);
    if (size) std::memcpy(e->bytes.data(), data, size);
    e->width = width;
    e->height = height;
    if (ends) e->ends = *ends;
    e->grid = grid;
    {
      MutexLock lock(stripe(i));
      if (!entries_[i]) {
        entries_[i] = std::move(e);
        count_.fetch_add(1, std::memory_order_relaxed);
        MutexLock log(log_mu_);
        log_.push_back(static_cast<std::uint32_t>(i));
        return Insert::kStored;
      }
    }
    uncharge(cost);  // another thread stored it first
    return Insert::kAlreadyHeld;
  }

  // An entry of n bytes (uninitialised) and `ends` member ends in this
  // cache's memory, charged to the budget, for replace(); null when the
  // budget has no room for it. NOTE: charged before it is allocated, and
  // charged whole: the memory the entry it replaces frees is a hole until
  // the rest of its mapping is freed too (charge() counts the holes).
  std::shared_ptr<Entry> charged_entry(std::size_t n, std::size_t ends) {
    if (!charge(shared_ ? SharedSegment::block_bytes(n, ends) : n + sizeof(Entry) + 64 + ends * sizeof(std::uint64_t))) {
      return nullptr;
    }
    auto e = std::make_shared<Entry>();
    e->bytes = ArenaBytes(replacements_, n);
    e->ends.resize(ends);
    return e;
  }

  // Puts `next` (from charged_entry(), with its ends filled in) in place of
  // `old` (record i's entry as found); false (nothing changed, `next`'s
  // charge returned) when the entry is no longer `old`. Readers holding
  // `old` keep it until done.
  bool replace(std::size_t i, const EntryPtr& old, EntryPtr next) {
    if (shared_) {
      // NOTE: the old block stays a hole in the segment (blocks are never
      // reused); another process may have replaced it first.
      // The charge stays with the block it stored.
      const SharedSegment::Meta m{next->width, next->height, next->grid, &next->ends};
      if (shared_->replace(static_cast<std::uint32_t>(i), old->shared_block, next->bytes.data(), next->bytes.size(),
                           m)) {
        return true;
      }
      uncharge(SharedSegment::block_bytes(next->bytes.size(), next->ends.size()));
      return false;
    }
    const std::uint64_t was = old->cost(), now = next->cost();
    EntryPtr gone;  // freed outside the lock
    {
      MutexLock lock(stripe(i));
      if (entries_[i] == old) {
        gone = std::exchange(entries_[i], std::move(next));
      }
    }
    if (gone) {
      to_holes(was);
    } else {
      uncharge(now);
    }
    return gone != nullptr;
  }

  // Drops record i's entry and never stores it again (a record whose bytes
  // cannot be rewritten: corrupt; its reads take the uncached path, where
  // the loader counts them under on_corrupt as always).
  void refuse(std::size_t i) {
    state_[i].store(kRefused, std::memory_order_release);
    if (shared_) {
      shared_->refuse(static_cast<std::uint32_t>(i));
      return;
    }
    EntryPtr e;
    {
      MutexLock lock(stripe(i));
      e = std::move(entries_[i]);
      entries_[i] = nullptr;
    }
    if (e) {
      to_holes(e->cost());
      count_.fetch_sub(1, std::memory_order_relaxed);
    }
  }

  // The record stored k-th (records enter once: a refused one never again);
  // false when fewer were stored.
  bool inserted(std::size_t k, std::size_t* i) const {
    MutexLock lock(log_mu_);
    if (k >= log_.size()) return false;
    *i = log_[k];
    return true;
  }

  // Per-record rewrite state (cache="ram"): not yet looked at, being
  // rewritten, final (rewritten, or needing none), refused.
  enum : std::uint8_t { kPending = 0, kBusy = 1, kFinal = 2, kRefused = 3 };
  std::uint8_t state(std::size_t i) const { return state_[i].load(std::memory_order_acquire); }
  // kPending -> kBusy; false when another thread has it or it is settled.
  bool claim(std::size_t i) {
    std::uint8_t want = kPending;
    return state_[i].compare_exchange_strong(want, kBusy, std::memory_order_acq_rel);
  }
  void settle(std::size_t i, std::uint8_t st) { state_[i].store(st, std::memory_order_release); }
  std::size_t size() const { return entries_.size(); }

  std::uint64_t hits() const { return hits_.load(std::memory_order_relaxed); }
  std::uint64_t misses() const { return misses_.load(std::memory_order_relaxed); }
  // With a shared segment: the node's (its bytes include replaced entries'
  // holes, which holes() then leaves out).
  std::uint64_t bytes() const { return shared_ ? shared_->bytes() : used_.load(std::memory_order_relaxed); }
  std::uint64_t records() const { return shared_ ? shared_->entries() : count_.load(std::memory_order_relaxed); }
  // The shared segment (null for a cache of this process's own), and the
  // records this process stored (in a shared segment: charged to this
  // process's budget, their bytes in its sample_cache account).
  const SharedSegment* shared() const { return shared_.get(); }
  std::uint64_t filled() const { return count_.load(std::memory_order_relaxed); }
  // The loader's whole budget (other accounts may hold part of it).
  std::uint64_t budget() const { return budget_; }
  // Memory freed entries still hold (memory/arena.h), charged to the budget.
  std::uint64_t holes() const { return shared_ ? 0 : arena_->holes() + replacements_->holes(); }
  bool full() const { return full_.load(std::memory_order_relaxed); }

 private:
  EntryPtr shared_entry(std::size_t i) const {
    SharedSegment::Block b;
    if (!shared_->find(static_cast<std::uint32_t>(i), &b)) return nullptr;
    auto e = std::make_shared<Entry>();
    e->bytes = ArenaBytes(std::shared_ptr<const void>(shared_), b.data, b.size);
    e->width = b.width;
    e->height = b.height;
    e->ends = std::move(b.ends);
    e->grid = b.grid;
    e->shared_block = b.offset;
    return e;
  }
  Insert insert_shared(std::size_t i, const std::uint8_t* data, std::size_t size, int width, int height,
                       const std::vector<std::uint64_t>* ends, bool grid) {
    const SharedSegment::Meta m{width, height, grid, ends};
    switch (shared_->store(static_cast<std::uint32_t>(i), data, size, m)) {
      case SharedSegment::Store::kStored: {
        count_.fetch_add(1, std::memory_order_relaxed);
        MutexLock log(log_mu_);
        log_.push_back(static_cast<std::uint32_t>(i));
        return Insert::kStored;
      }
      case SharedSegment::Store::kHeld:
        return Insert::kAlreadyHeld;
      case SharedSegment::Store::kNoRoom:
        full_.store(true, std::memory_order_relaxed);
        if (!said_full_.exchange(true, std::memory_order_relaxed)) {
          std::fprintf(stderr, "stoker: shared cache %s is full (%s): records not in it are read as usual\n",
                       shared_->path().c_str(), shared_->full().c_str());
        }
        return Insert::kNoRoom;
      case SharedSegment::Store::kRefused:
        break;
    }
    return Insert::kRefused;
  }

  // The budget is charged before the entry is published (the budget's
  // account, under its lock), so concurrent inserts can never overshoot it.
  // The account also holds the memory that freed entries (replaced by their
  // rewritten form, or refused) still hold until the rest of their mapping
  // is freed too: an entry's cost moves to holes_charged_ when it goes, and
  // each charge settles holes_charged_ to the arenas' holes.
  bool charge(std::uint64_t cost) EXCLUDES(charge_mu_) {
    MutexLock lock(charge_mu_);
    const std::uint64_t freed = holes();
    if (freed < holes_charged_) {
      memory_.release(holes_charged_ - freed);
      holes_charged_ = freed;
    }
    if (!memory_.try_charge(cost + (freed - holes_charged_))) {
      full_.store(true, std::memory_order_relaxed);
      return false;
    }
    holes_charged_ = freed;
    used_.fetch_add(cost, std::memory_order_relaxed);
    return true;
  }
  void uncharge(std::uint64_t cost) {
    used_.fetch_sub(cost, std::memory_order_relaxed);
    memory_.release(cost);
  }
  // A freed entry's cost: a hole until its mapping is returned (charge()
  // settles it).
  void to_holes(std::uint64_t cost) EXCLUDES(charge_mu_) {
    MutexLock lock(charge_mu_);
    used_.fetch_sub(cost, std::memory_order_relaxed);
    holes_charged_ += cost;
  }

  Mutex& stripe(std::size_t i) const { return stripes_[i % stripes_.size()]; }

  const std::uint64_t budget_;
  MemoryCharge memory_;  // entries and holes_charged_, in the budget's sample_cache account
  Mutex charge_mu_;
  std::uint64_t holes_charged_ GUARDED_BY(charge_mu_) = 0;
  // NOTE: an arena's mappings are populated whole when mapped, so their
  // size is kept to an eighth of the budget (2-32 MiB): the unused rest of
  // the last one is what the cache holds beyond its budget.
  std::size_t chunk() const {
    return static_cast<std::size_t>(std::clamp<std::uint64_t>(budget_ / 8, std::uint64_t{2} << 20, std::uint64_t{32} << 20));
  }
  // Entries' bytes (held by each, so it outlives them).
  std::shared_ptr<Arena> arena_ = std::make_shared<Arena>(chunk());
  // The replacing entries' (the rewrite's): apart, so the first entries'
  // mappings hold only first entries, and empty (are returned whole) as
  // the rewrite replaces them in the order they were stored.
  std::shared_ptr<Arena> replacements_ = std::make_shared<Arena>(chunk());
  // NOTE: entries_[i] is guarded by stripe(i), a per-element lock the
  // annotations cannot name: every access is inside a MutexLock on stripe(i).
  std::vector<EntryPtr> entries_;
  mutable Mutex log_mu_;
  std::vector<std::uint32_t> log_ GUARDED_BY(log_mu_);  // records in the order they were stored
  mutable std::array<Mutex, 64> stripes_;
  std::vector<std::atomic<std::uint8_t>> state_;
  std::atomic<std::uint64_t> used_{0}, hits_{0}, misses_{0}, count_{0};
  std::atomic<bool> full_{false};
  std::shared_ptr<SharedSegment> shared_;
  std::atomic<bool> said_full_{false};  // the segment's being full, said on stderr
};

}  // namespace stoker::detail
