// Batch buffers: allocated once, reused across batches and epochs.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

#include "memory/memory_budget.h"
#include "util/thread_annotations.h"

namespace stoker::detail {

// One batch buffer: every tensor of a batch (the sample spec's outputs, each
// at its offset), in one allocation.
struct Slot {
  struct Free {
    void operator()(std::uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<std::uint8_t, Free> data;
};

// Owns every batch buffer; shared by the loader and the batches it handed
// out, so a batch outlives its loader. Thread-safe.
//
// A buffer is allocated only when none is free, so the pool's size is the
// most buffers ever in use at once: the ring's (batches being made or ready,
// at most the ring depth D) plus those handed out and not yet released (the
// consumer's, H). Hence allocated() <= D_max + held_peak(), whatever the
// schedule (tests/batch/slot_pool_test.cc checks it on scripted consumers).
class SlotPool {
 public:
  // Each buffer is charged to the budget's batch_buffers account (null: none)
  // as it is allocated, whatever the limit: the loader needs it to run.
  explicit SlotPool(std::size_t batch_bytes, std::shared_ptr<MemoryBudget> budget = nullptr)
      : batch_bytes_(batch_bytes), memory_(std::move(budget), MemoryAccount::kBatchBuffers) {}

  // A free buffer, or a new one when all are in the ring or held by batches.
  // Throws std::bad_alloc when a new one cannot be allocated (the loader
  // then fails that batch, not the process).
  Slot* acquire() EXCLUDES(mu_) {
    MutexLock lock(mu_);
    if (!free_.empty()) {
      Slot* s = free_.back();
      free_.pop_back();
      ++in_use_;
      return s;
    }
    auto slot = std::make_unique<Slot>();
    const std::size_t align = alignment(), bytes = buffer_bytes();
    auto* p = static_cast<std::uint8_t*>(std::aligned_alloc(align, bytes));
    if (!p) throw std::bad_alloc();
    if (align == kHugePage) (void)::madvise(p, bytes, MADV_HUGEPAGE);  // advice only: fine if refused
    slot->data.reset(p);
    all_.push_back(std::move(slot));  // NOTE: counted only once it is had (a throw above counts nothing)
    memory_.charge_required(bytes);
    ++in_use_;
    return all_.back().get();
  }
  // A buffer of the ring (never handed out) goes back.
  void release(Slot* s) EXCLUDES(mu_) {
    MutexLock lock(mu_);
    --in_use_;
    free_.push_back(s);
  }
  // A ring buffer becomes the consumer's (next() hands it out); it comes
  // back through release_held() when the last copy of its batch is gone.
  void hand_out() EXCLUDES(mu_) {
    MutexLock lock(mu_);
    held_peak_ = std::max(held_peak_, ++held_);
  }
  void release_held(Slot* s) EXCLUDES(mu_) {
    MutexLock lock(mu_);
    --held_;
    --in_use_;
    free_.push_back(s);
  }
  struct Counts {
    std::size_t allocated = 0;  // buffers in all: the peak of in_use
    std::size_t in_use = 0;     // in the ring or held by the consumer now
    std::size_t held = 0;       // handed out and not released yet
    std::size_t held_peak = 0;  // the most held at once
  };
  Counts counts() const EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return {all_.size(), in_use_, held_, held_peak_};
  }
  std::size_t allocated() const { return counts().allocated; }
  std::size_t batch_bytes() const { return batch_bytes_; }
  // What one buffer takes: batch_bytes() rounded up to its alignment.
  std::size_t buffer_bytes() const {
    const std::size_t align = alignment();
    return (std::max<std::size_t>(batch_bytes_, 1) + align - 1) / align * align;
  }

 private:
  // NOTE: batches of MBs are aligned to 2 MiB and offered to transparent
  // huge pages: a fresh batch buffer is then ~20 page faults instead of
  // ~10,000 (what the first batch of a loader, or a grown pool, pays).
  static constexpr std::size_t kHugePage = std::size_t{2} << 20;
  std::size_t alignment() const { return batch_bytes_ >= kHugePage ? kHugePage : 64; }

  const std::size_t batch_bytes_;
  MemoryCharge memory_;  // every buffer's bytes, released with the pool
  mutable Mutex mu_;
  std::vector<std::unique_ptr<Slot>> all_ GUARDED_BY(mu_);
  std::vector<Slot*> free_ GUARDED_BY(mu_);
  std::size_t in_use_ GUARDED_BY(mu_) = 0;
  std::size_t held_ GUARDED_BY(mu_) = 0;
  std::size_t held_peak_ GUARDED_BY(mu_) = 0;
};

}  // namespace stoker::detail

namespace stoker::detail {
// A consumer's claim on one buffer (counted by SlotPool::hand_out() when
// next() took it from the ring); the last copy returns it to the pool.
struct SlotLease {
  SlotLease(std::shared_ptr<SlotPool> p, Slot* s) : pool(std::move(p)), slot(s) {}
  ~SlotLease() { pool->release_held(slot); }
  SlotLease(const SlotLease&) = delete;
  SlotLease& operator=(const SlotLease&) = delete;
  std::shared_ptr<SlotPool> pool;
  Slot* slot;
};
}  // namespace stoker::detail
