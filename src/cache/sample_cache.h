// In-memory caches of samples under one byte budget: encoded bytes
// (cache="ram") or decoded, downscaled pixels (cache="decoded"). Filled as
// records are first read (and, for cache="ram", by a background preload that
// never delays a batch); when the budget is spent, the
// rest of the data set is served by the slower path. Thread-safe, lock-free
// on the read path: an entry is published once and never changes.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "decode/image.h"

namespace stoker::detail {

class SampleCache {
 public:
  SampleCache(std::size_t records, std::uint64_t budget_bytes)
      : entries_(records), budget_(budget_bytes) {}
  ~SampleCache() {
    for (auto& e : entries_) delete e.load(std::memory_order_relaxed);
  }
  SampleCache(const SampleCache&) = delete;
  SampleCache& operator=(const SampleCache&) = delete;

  struct Entry {
    std::vector<std::uint8_t> bytes;  // encoded bytes, or RGB8 pixels (then other fields' stored forms)
    int width = 0;                    // pixels only
    int height = 0;
    // Records of several members (a schema reading a mask, boxes, ...): the
    // end of each member's bytes; empty for one member.
    std::vector<std::uint64_t> ends;
    ImageView view() const { return {bytes.data(), width, height, static_cast<std::ptrdiff_t>(width) * 3}; }
  };

  // The entry of record i, or nullptr (counted as a hit or a miss).
  const Entry* find(std::size_t i) {
    const Entry* e = entries_[i].load(std::memory_order_acquire);
    (e ? hits_ : misses_).fetch_add(1, std::memory_order_relaxed);
    return e;
  }

  // Whether record i is held (not counted as a hit or a miss).
  bool contains(std::size_t i) const { return entries_[i].load(std::memory_order_acquire) != nullptr; }

  enum class Insert { kStored, kAlreadyHeld, kNoRoom };
  // Stores a copy of `data` as record i's entry when the budget allows.
  Insert insert(std::size_t i, const std::uint8_t* data, std::size_t size, int width = 0, int height = 0,
                const std::vector<std::uint64_t>* ends = nullptr) {
    const std::uint64_t cost = size + sizeof(Entry) + 64 + (ends ? ends->size() * sizeof(std::uint64_t) : 0);
    std::uint64_t used = used_.load(std::memory_order_relaxed);
    do {
      if (used + cost > budget_) {
        full_.store(true, std::memory_order_relaxed);
        return Insert::kNoRoom;
      }
    } while (!used_.compare_exchange_weak(used, used + cost, std::memory_order_relaxed));
    auto* e = new Entry;
    e->bytes.assign(data, data + size);
    e->width = width;
    e->height = height;
    if (ends) e->ends = *ends;
    Entry* expected = nullptr;
    if (!entries_[i].compare_exchange_strong(expected, e, std::memory_order_acq_rel)) {
      delete e;  // another thread stored it first
      used_.fetch_sub(cost, std::memory_order_relaxed);
      return Insert::kAlreadyHeld;
    }
    count_.fetch_add(1, std::memory_order_relaxed);
    return Insert::kStored;
  }

  std::uint64_t hits() const { return hits_.load(std::memory_order_relaxed); }
  std::uint64_t misses() const { return misses_.load(std::memory_order_relaxed); }
  std::uint64_t bytes() const { return used_.load(std::memory_order_relaxed); }
  std::uint64_t records() const { return count_.load(std::memory_order_relaxed); }
  std::uint64_t budget() const { return budget_; }
  bool full() const { return full_.load(std::memory_order_relaxed); }

 private:
  std::vector<std::atomic<Entry*>> entries_;
  const std::uint64_t budget_;
  std::atomic<std::uint64_t> used_{0}, hits_{0}, misses_{0}, count_{0};
  std::atomic<bool> full_{false};
};

// Default memory budget: half of MemAvailable, never above half of what the
// cgroup (v2 memory.max, or v1 limit) still allows, divided among the ranks
// torchrun starts on this node (LOCAL_WORLD_SIZE).
std::uint64_t default_memory_budget();

}  // namespace stoker::detail
