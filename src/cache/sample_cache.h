// In-memory caches of samples under one byte budget: encoded bytes
// (cache="ram") or decoded, downscaled pixels (cache="decoded"). Filled as
// records are first read (and, for cache="ram", by a background preload that
// never delays a batch); when the budget is spent, the
// rest of the data set is served by the slower path. Thread-safe; an entry
// never changes once published (cache="ram" may put a rewritten one in its
// place: readers hold what they found through a shared pointer).
// The entries live in a CacheStore (cache/cache_store.h): this process's
// arena, or a segment shared by every process on the node with the same
// cache key (each record stored once per node; its entries final). The
// per-process parts (the budget's charges, hits, misses, the rewrite's
// per-record state, the order this process stored in) are here.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "cache/cache_store.h"
#include "memory/memory_budget.h"
#include "memory/shared_segment.h"
#include "util/thread_annotations.h"

namespace stoker::detail {

class SampleCache {
 public:
  // Entries in this process's arena, charged to the budget's sample_cache
  // account (with what other accounts hold or reserve, the cache gets what
  // is left).
  SampleCache(std::size_t records, std::shared_ptr<MemoryBudget> budget)
      : budget_(budget->limit()), memory_(std::move(budget), MemoryAccount::kSampleCache),
        store_(std::make_unique<ProcessStore>(records, chunk())), state_(records) {}
  // Entries in a shared segment. NOTE: an entry is charged to the budget of
  // the process that stores it, so the node's entries are charged once in
  // all, whatever the number of processes reading them.
  SampleCache(std::size_t records, std::shared_ptr<MemoryBudget> budget, std::shared_ptr<SharedSegment> shared)
      : budget_(budget->limit()), memory_(std::move(budget), MemoryAccount::kSampleCache),
        store_(std::make_unique<SegmentStore>(std::move(shared))), state_(records) {}
  // A budget of its own (tests, benchmarks).
  SampleCache(std::size_t records, std::uint64_t budget_bytes)
      : SampleCache(records, std::make_shared<MemoryBudget>(budget_bytes)) {}
  SampleCache(const SampleCache&) = delete;
  SampleCache& operator=(const SampleCache&) = delete;

  using Entry = CacheEntry;
  // NOTE: an entry never changes once published, but in a process arena
  // cache="ram" may replace it by its rewritten form (replace()); a reader
  // keeps the one it found alive by holding its EntryPtr while it uses the
  // bytes.
  using EntryPtr = detail::EntryPtr;

  // The entry of record i, or null (counted as a hit or a miss).
  EntryPtr find(std::size_t i) {
    EntryPtr e = store_->find(i);
    (e ? hits_ : misses_).fetch_add(1, std::memory_order_relaxed);
    return e;
  }
  // The entry of record i, or null, not counted (the rewrite's look-ups).
  EntryPtr peek(std::size_t i) const { return store_->find(i); }
  // Whether record i is held (not counted as a hit or a miss).
  bool contains(std::size_t i) const { return store_->contains(i); }

  enum class Insert { kStored, kAlreadyHeld, kNoRoom, kRefused };
  // Stores a copy of `data` as record i's entry when the budget allows (and
  // the record was not refused: see refuse()).
  Insert insert(std::size_t i, const std::uint8_t* data, std::size_t size, int width = 0, int height = 0,
                const std::vector<std::uint64_t>* ends = nullptr, bool grid = false) {
    if (state(i) == kRefused) return Insert::kRefused;
    if (contains(i)) return Insert::kAlreadyHeld;
    const std::uint64_t cost = store_->cost(size, ends ? ends->size() : 0);
    if (!charge(cost)) return Insert::kNoRoom;
    switch (store_->store(i, data, size, {width, height, ends, grid})) {
      case CacheStore::Stored::kStored: {
        filled_.fetch_add(1, std::memory_order_relaxed);
        MutexLock log(log_mu_);
        log_.push_back(static_cast<std::uint32_t>(i));
        return Insert::kStored;
      }
      case CacheStore::Stored::kHeld:
        uncharge(cost);
        return Insert::kAlreadyHeld;
      case CacheStore::Stored::kNoRoom:
        uncharge(cost);
        full_.store(true, std::memory_order_relaxed);
        return Insert::kNoRoom;
      case CacheStore::Stored::kRefused:
        break;
    }
    uncharge(cost);
    return Insert::kRefused;
  }

  // Whether stored entries are final (a shared segment): replace() is then
  // never done, so cache="ram" rewrites a record before storing it.
  bool entries_final() const { return store_->entries_final(); }

  // Puts a copy of data[0, n) (with `ends`, the rewrite's form) in place of
  // `old` (record i's entry as found), charged to the budget; the new entry,
  // or null (nothing changed) when the entry is no longer `old`, the budget
  // has no room for it, or entries are final. Readers holding `old` keep it
  // until done. NOTE: charged before it is allocated, and charged whole:
  // the memory the entry it replaces frees is a hole until the rest of its
  // mapping is freed too (charge() counts the holes).
  EntryPtr replace(std::size_t i, const EntryPtr& old, const std::uint8_t* data, std::size_t n,
                   const std::vector<std::uint64_t>& ends) {
    if (store_->entries_final()) return {};
    const std::uint64_t cost = store_->cost(n, ends.size());
    if (!charge(cost)) return {};
    EntryPtr now;
    if (!store_->replace(i, old, data, n, {0, 0, &ends, /*grid=*/true}, &now)) {
      uncharge(cost);
      return {};
    }
    to_holes(store_->cost(old->size, old->ends.size()));
    return now;
  }

  // Drops record i's entry and never stores it again (a record whose bytes
  // cannot be rewritten: corrupt; its reads take the uncached path, where
  // the loader counts them under on_corrupt as always).
  void refuse(std::size_t i) {
    state_[i].store(kRefused, std::memory_order_release);
    if (const std::uint64_t freed = store_->refuse(i)) to_holes(freed);
  }

  // The record stored k-th by this process (records enter once: a refused
  // one never again); false when fewer were stored.
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
  std::size_t size() const { return state_.size(); }

  std::uint64_t hits() const { return hits_.load(std::memory_order_relaxed); }
  std::uint64_t misses() const { return misses_.load(std::memory_order_relaxed); }
  // The entries' bytes and records (with a shared segment: the node's; its
  // bytes include its holes).
  std::uint64_t bytes() const { return store_->bytes(); }
  std::uint64_t records() const { return store_->entries(); }
  // The shared segment (null for a cache of this process's own).
  const SharedSegment* shared() const { return store_->segment(); }
  // The records this process stored (in a shared segment: charged to this
  // process's budget, their bytes in its sample_cache account).
  std::uint64_t filled() const { return filled_.load(std::memory_order_relaxed); }
  // The loader's whole budget (other accounts may hold part of it).
  std::uint64_t budget() const { return budget_; }
  // Memory freed entries still hold (memory/arena.h), charged to the budget.
  std::uint64_t holes() const { return store_->holes(); }
  bool full() const { return full_.load(std::memory_order_relaxed); }

 private:
  // The budget is charged before the entry is published (the budget's
  // account, under its lock), so concurrent inserts can never overshoot it.
  // The account also holds the memory that freed entries (replaced by their
  // rewritten form, or refused) still hold until the rest of their mapping
  // is freed too: an entry's cost moves to holes_charged_ when it goes, and
  // each charge settles holes_charged_ to the store's holes.
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
    return true;
  }
  void uncharge(std::uint64_t cost) { memory_.release(cost); }
  // A freed entry's cost: a hole until its mapping is returned (charge()
  // settles it).
  void to_holes(std::uint64_t cost) EXCLUDES(charge_mu_) {
    MutexLock lock(charge_mu_);
    holes_charged_ += cost;
  }

  // NOTE: an arena's mappings are populated whole when mapped, so their
  // size is kept to an eighth of the budget (2-32 MiB): the unused rest of
  // the last one is what the cache holds beyond its budget.
  std::size_t chunk() const {
    return static_cast<std::size_t>(std::clamp<std::uint64_t>(budget_ / 8, std::uint64_t{2} << 20, std::uint64_t{32} << 20));
  }

  const std::uint64_t budget_;
  MemoryCharge memory_;  // entries and holes_charged_, in the budget's sample_cache account
  Mutex charge_mu_;
  std::uint64_t holes_charged_ GUARDED_BY(charge_mu_) = 0;
  std::unique_ptr<CacheStore> store_;
  mutable Mutex log_mu_;
  std::vector<std::uint32_t> log_ GUARDED_BY(log_mu_);  // records in the order this process stored them
  std::vector<std::atomic<std::uint8_t>> state_;
  std::atomic<std::uint64_t> hits_{0}, misses_{0}, filled_{0};
  std::atomic<bool> full_{false};
};

}  // namespace stoker::detail
