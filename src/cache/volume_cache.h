// Volumes kept between epochs (cache="auto"/"ram"/"decoded" with a volume
// schema): gzipped volumes inflated once (MONAI CacheDataset's pattern: the
// whole-volume cost paid once, then patches cut from memory), every volume
// with cache="ram"/"decoded", and each label volume's foreground index
// (every mode: 1/8 byte per voxel), all under memory_budget, charged before
// they are kept. Keyed by (record, field). Thread-safe; entries are
// immutable and shared, so a reader keeps its entry alive.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "decode/volume_format.h"
#include "memory/memory_budget.h"
#include "image/label_index.h"

namespace stoker::detail {

// A volume's voxels in memory; h.data_offset is 0.
struct VolumeEntry {
  VolumeHeader h;
  std::vector<std::uint8_t> data;
};

class VolumeCache {
 public:
  // Entries are charged to the budget's volume_cache account.
  explicit VolumeCache(std::shared_ptr<MemoryBudget> budget)
      : budget_(budget->limit()), memory_(std::move(budget), MemoryAccount::kVolumeCache) {}
  // The same entries charged to `budget` instead (those that do not fit it
  // are dropped, last first): record 0's, kept while the schema was decided,
  // move to the loader's budget.
  // REQUIRES: no other thread uses the cache yet.
  void rebind(std::shared_ptr<MemoryBudget> budget);
  // Room kept for label indexes: volumes fill at most budget - reserve.
  void set_reserve(std::uint64_t reserve) { reserve_ = std::min(reserve, budget_); }

  static std::uint64_t key(std::uint32_t record, int field) { return (static_cast<std::uint64_t>(record) << 8) | static_cast<std::uint64_t>(field); }

  std::shared_ptr<const VolumeEntry> volume(std::uint64_t key) const;
  std::shared_ptr<const LabelIndex> index(std::uint64_t key) const;
  // Keeps it when it fits the budget (false: not kept).
  bool put(std::uint64_t key, std::shared_ptr<const VolumeEntry> v);
  bool put(std::uint64_t key, std::shared_ptr<const LabelIndex> x);

  std::uint64_t budget() const { return budget_; }
  MemoryBudget* memory() const { return memory_.budget(); }
  std::uint64_t bytes() const { return bytes_.load(std::memory_order_relaxed); }
  std::uint64_t entries() const;

 private:
  bool charge(std::uint64_t n, std::uint64_t limit);
  void uncharge(std::uint64_t n);

  std::uint64_t budget_;
  MemoryCharge memory_;  // bytes_, in the budget's volume_cache account
  std::uint64_t reserve_ = 0;
  std::atomic<std::uint64_t> bytes_{0};
  mutable std::mutex mu_;
  std::unordered_map<std::uint64_t, std::shared_ptr<const VolumeEntry>> volumes_;
  std::unordered_map<std::uint64_t, std::shared_ptr<const LabelIndex>> indexes_;
};

}  // namespace stoker::detail
