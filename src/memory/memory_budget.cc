#include "memory/memory_budget.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>

#include "stoker/stats.h"

namespace stoker::detail {
namespace {

// By MemoryAccount: the one spelling of each account's name.
constexpr std::array<const char*, kMemoryAccounts> kAccountNames = {"batch_buffers", "remote_shards", "volume_cache",
                                                                     "sample_cache"};

std::size_t index(MemoryAccount a) { return static_cast<std::size_t>(a); }

std::uint64_t read_number(const char* path) {
  std::ifstream in(path);
  std::string s;
  if (!(in >> s) || s == "max") return UINT64_MAX;
  try {
    return std::stoull(s);
  } catch (const std::exception&) {
    return UINT64_MAX;
  }
}

}  // namespace

const char* memory_account_name(MemoryAccount a) { return kAccountNames[index(a)]; }

std::uint64_t MemoryBudget::resolve(std::uint64_t option) { return option ? option : default_memory_budget(); }

void MemoryBudget::charged_locked(std::size_t k, std::uint64_t n) {
  const std::uint64_t before = held_locked(k);
  used_[k] += n;
  committed_ = committed_ - before + held_locked(k);
  total_ += n;
  peak_ = std::max(peak_, total_);
}

bool MemoryBudget::try_charge(MemoryAccount a, std::uint64_t n) {
  const std::size_t k = index(a);
  MutexLock lock(mu_);
  const std::uint64_t after = std::max(used_[k] + n, reserved_[k]);
  if (committed_ - held_locked(k) + after > limit_) return false;
  charged_locked(k, n);
  return true;
}

void MemoryBudget::charge_required(MemoryAccount a, std::uint64_t n) {
  const std::size_t k = index(a);
  MutexLock lock(mu_);
  charged_locked(k, n);
  if (committed_ > limit_) over_ = std::max(over_, committed_ - limit_);
}

void MemoryBudget::release(MemoryAccount a, std::uint64_t n) {
  const std::size_t k = index(a);
  MutexLock lock(mu_);
  n = std::min(n, used_[k]);
  const std::uint64_t before = held_locked(k);
  used_[k] -= n;
  committed_ = committed_ - before + held_locked(k);
  total_ -= n;
}

std::uint64_t MemoryBudget::reserve(MemoryAccount a, std::uint64_t want) {
  const std::size_t k = index(a);
  MutexLock lock(mu_);
  const std::uint64_t others = committed_ - held_locked(k);
  const std::uint64_t room = limit_ > others ? limit_ - others : 0;
  reserved_[k] = std::max(std::min(want, room), used_[k]);
  committed_ = others + held_locked(k);
  return reserved_[k];
}

std::uint64_t MemoryBudget::room(MemoryAccount a) const {
  const std::size_t k = index(a);
  MutexLock lock(mu_);
  const std::uint64_t others = committed_ - held_locked(k);
  const std::uint64_t cap = limit_ > others ? limit_ - others : 0;
  return cap > used_[k] ? cap - used_[k] : 0;
}

std::uint64_t MemoryBudget::used(MemoryAccount a) const {
  MutexLock lock(mu_);
  return used_[index(a)];
}
std::uint64_t MemoryBudget::reserved(MemoryAccount a) const {
  MutexLock lock(mu_);
  return reserved_[index(a)];
}
std::uint64_t MemoryBudget::used() const {
  MutexLock lock(mu_);
  return total_;
}
std::uint64_t MemoryBudget::peak() const {
  MutexLock lock(mu_);
  return peak_;
}
std::uint64_t MemoryBudget::over_bytes() const {
  MutexLock lock(mu_);
  return over_;
}

void MemoryBudget::add_stats(Stats* s) const {
  MutexLock lock(mu_);
  s->memory.active = true;
  s->memory.budget = limit_;
  s->memory.used = total_;
  s->memory.peak = peak_;
  s->memory.over_bytes = over_;
  for (std::size_t k = 0; k < kMemoryAccounts; ++k) {
    s->memory.accounts[kAccountNames[k]] = used_[k];
    if (reserved_[k] > 0) s->memory.reserved[kAccountNames[k]] = reserved_[k];
  }
}

bool MemoryCharge::try_charge(std::uint64_t n) {
  if (budget_ && !budget_->try_charge(account_, n)) return false;
  bytes_.fetch_add(n, std::memory_order_relaxed);
  return true;
}

void MemoryCharge::charge_required(std::uint64_t n) {
  if (budget_) budget_->charge_required(account_, n);
  bytes_.fetch_add(n, std::memory_order_relaxed);
}

void MemoryCharge::release(std::uint64_t n) {
  bytes_.fetch_sub(n, std::memory_order_relaxed);
  if (budget_) budget_->release(account_, n);
}

void MemoryCharge::release_all() {
  const std::uint64_t n = bytes_.exchange(0, std::memory_order_relaxed);
  if (budget_ && n) budget_->release(account_, n);
}

std::uint64_t default_memory_budget() {
  std::uint64_t available = 0;
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  std::uint64_t kb = 0;
  std::string unit;
  while (meminfo >> key >> kb) {
    std::getline(meminfo, unit);
    if (key == "MemAvailable:") available = kb * 1024;
  }
  std::uint64_t budget = available / 2;
  std::uint64_t limit = read_number("/sys/fs/cgroup/memory.max");
  std::uint64_t current = read_number("/sys/fs/cgroup/memory.current");
  if (limit == UINT64_MAX) {
    limit = read_number("/sys/fs/cgroup/memory/memory.limit_in_bytes");
    current = read_number("/sys/fs/cgroup/memory/memory.usage_in_bytes");
  }
  if (limit != UINT64_MAX && current != UINT64_MAX && limit > current) budget = std::min(budget, (limit - current) / 2);
  // NOTE: torchrun starts LOCAL_WORLD_SIZE ranks on a node, each with its
  // own loader and cache, all seeing the same available memory: each takes
  // its share, or together they would ask for that many halves of it.
  return budget / static_cast<std::uint64_t>(local_ranks());
}

int local_ranks() {
  if (const char* env = std::getenv("LOCAL_WORLD_SIZE")) {
    char* end = nullptr;
    const long ranks = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && ranks > 1) return static_cast<int>(std::min<long>(ranks, 1 << 16));
  }
  return 1;
}

}  // namespace stoker::detail
