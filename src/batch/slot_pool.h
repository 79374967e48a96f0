// Batch buffers: allocated once, reused across batches and epochs.
#pragma once

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
    std::size_t bytes = (image_bytes_ + 63) / 64 * 64;
    auto* p = static_cast<std::uint8_t*>(std::aligned_alloc(64, bytes > 0 ? bytes : 64));
    if (!p) throw std::bad_alloc();
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
