#include "cache/volume_cache.h"

namespace stoker::detail {

std::shared_ptr<const VolumeEntry> VolumeCache::volume(std::uint64_t key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = volumes_.find(key);
  return it == volumes_.end() ? nullptr : it->second;
}

std::shared_ptr<const LabelIndex> VolumeCache::index(std::uint64_t key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = indexes_.find(key);
  return it == indexes_.end() ? nullptr : it->second;
}

// NOTE: within the cache's own limit (volumes leave room for the label
// indexes) and then in the budget's account (beside what the other accounts
// hold).
bool VolumeCache::charge(std::uint64_t n, std::uint64_t limit) {
  std::uint64_t cur = bytes_.load(std::memory_order_relaxed);
  do {
    if (cur + n > limit) return false;
  } while (!bytes_.compare_exchange_weak(cur, cur + n, std::memory_order_relaxed));
  if (memory_.try_charge(n)) return true;
  bytes_.fetch_sub(n, std::memory_order_relaxed);
  return false;
}

void VolumeCache::uncharge(std::uint64_t n) {
  bytes_.fetch_sub(n, std::memory_order_relaxed);
  memory_.release(n);
}

void VolumeCache::rebind(std::shared_ptr<MemoryBudget> budget) {
  std::lock_guard<std::mutex> lock(mu_);
  memory_.reset(budget);
  budget_ = budget->limit();
  reserve_ = std::min(reserve_, budget_);
  std::uint64_t kept = 0;
  for (auto it = volumes_.begin(); it != volumes_.end();) {
    const std::uint64_t n = it->second->data.size() + sizeof(VolumeEntry);
    if (kept + n <= budget_ - reserve_ && memory_.try_charge(n)) {
      kept += n;
      ++it;
    } else {
      it = volumes_.erase(it);
    }
  }
  for (auto it = indexes_.begin(); it != indexes_.end();) {
    const std::uint64_t n = it->second->bytes() + sizeof(LabelIndex);
    if (kept + n <= budget_ && memory_.try_charge(n)) {
      kept += n;
      ++it;
    } else {
      it = indexes_.erase(it);
    }
  }
  bytes_.store(kept, std::memory_order_relaxed);
}

bool VolumeCache::put(std::uint64_t key, std::shared_ptr<const VolumeEntry> v) {
  const std::uint64_t n = v->data.size() + sizeof(VolumeEntry);
  if (!charge(n, budget_ - reserve_)) return false;
  std::lock_guard<std::mutex> lock(mu_);
  if (!volumes_.emplace(key, std::move(v)).second) uncharge(n);  // another worker's is there
  return true;
}

bool VolumeCache::put(std::uint64_t key, std::shared_ptr<const LabelIndex> x) {
  const std::uint64_t n = x->bytes() + sizeof(LabelIndex);
  if (!charge(n, budget_)) return false;
  std::lock_guard<std::mutex> lock(mu_);
  if (!indexes_.emplace(key, std::move(x)).second) uncharge(n);
  return true;
}

std::uint64_t VolumeCache::entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return volumes_.size() + indexes_.size();
}

}  // namespace stoker::detail
