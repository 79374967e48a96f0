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

bool VolumeCache::charge(std::uint64_t n, std::uint64_t limit) {
  std::uint64_t cur = bytes_.load(std::memory_order_relaxed);
  do {
    if (cur + n > limit) return false;
  } while (!bytes_.compare_exchange_weak(cur, cur + n, std::memory_order_relaxed));
  return true;
}

bool VolumeCache::put(std::uint64_t key, std::shared_ptr<const VolumeEntry> v) {
  const std::uint64_t n = v->data.size() + sizeof(VolumeEntry);
  if (!charge(n, budget_ - reserve_)) return false;
  std::lock_guard<std::mutex> lock(mu_);
  if (!volumes_.emplace(key, std::move(v)).second) bytes_.fetch_sub(n, std::memory_order_relaxed);  // another worker's is there
  return true;
}

bool VolumeCache::put(std::uint64_t key, std::shared_ptr<const LabelIndex> x) {
  const std::uint64_t n = x->bytes() + sizeof(LabelIndex);
  if (!charge(n, budget_)) return false;
  std::lock_guard<std::mutex> lock(mu_);
  if (!indexes_.emplace(key, std::move(x)).second) bytes_.fetch_sub(n, std::memory_order_relaxed);
  return true;
}

std::uint64_t VolumeCache::entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return volumes_.size() + indexes_.size();
}

}  // namespace stoker::detail
