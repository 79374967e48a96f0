// Batch buffers: allocated once, reused across batches and epochs.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <vector>

namespace stoker::detail {

struct Slot {
  struct Free {
    void operator()(std::uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<std::uint8_t, Free> images;
  std::vector<std::int64_t> labels;
};

// Owns every batch buffer; shared by the loader and the batches it handed
// out, so a batch outlives its loader. Thread-safe.
class SlotPool {
 public:
  SlotPool(std::size_t image_bytes, std::size_t batch_size) : image_bytes_(image_bytes), batch_size_(batch_size) {}

  // A free buffer, or a new one when all are in the ring or held by batches.
  Slot* acquire() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!free_.empty()) {
      Slot* s = free_.back();
      free_.pop_back();
      return s;
    }
    auto slot = std::make_unique<Slot>();
    // NOTE: batches of MBs are aligned to 2 MiB and offered to transparent
    // huge pages: a fresh batch buffer is then ~20 page faults instead of
    // ~10,000 (what the first batch of a loader, or a grown pool, pays).
    constexpr std::size_t kHuge = 2u << 20;
    const std::size_t align = image_bytes_ >= kHuge ? kHuge : 64;
    std::size_t bytes = (std::max<std::size_t>(image_bytes_, 1) + align - 1) / align * align;
    auto* p = static_cast<std::uint8_t*>(std::aligned_alloc(align, bytes));
    if (!p) throw std::bad_alloc();
    if (align == kHuge) (void)::madvise(p, bytes, MADV_HUGEPAGE);  // advice only: fine if refused
    slot->images.reset(p);
    slot->labels.resize(batch_size_);
    all_.push_back(std::move(slot));
    return all_.back().get();
  }
  void release(Slot* s) {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(s);
  }
  std::size_t allocated() const {
    std::lock_guard<std::mutex> lock(mu_);
    return all_.size();
  }
  std::size_t image_bytes() const { return image_bytes_; }

 private:
  const std::size_t image_bytes_;
  const std::size_t batch_size_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Slot>> all_;
  std::vector<Slot*> free_;
};

}  // namespace stoker::detail

namespace stoker::detail {
// A consumer's claim on one buffer; the last copy returns it to the pool.
struct SlotLease {
  SlotLease(std::shared_ptr<SlotPool> p, Slot* s) : pool(std::move(p)), slot(s) {}
  ~SlotLease() { pool->release(slot); }
  SlotLease(const SlotLease&) = delete;
  SlotLease& operator=(const SlotLease&) = delete;
  std::shared_ptr<SlotPool> pool;
  Slot* slot;
};
}  // namespace stoker::detail
