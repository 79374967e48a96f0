#include "memory/memory_budget.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>

#include "stoker/stats.h"

namespace stoker::detail {
namespace {

// By MemoryAccount: the one spelling of each account's name.
constexpr std::array<const char*, kMemoryAccounts> kAccountNames = {"batch_buffers", "remote_shards", "volume_cache",
                                                                     "sample_cache", "decode_scratch"};

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

bool ProcessMemory::try_add(std::uint64_t n) {
  MutexLock lock(mu_);
  if (held_ + n > limit_) return false;
  held_ += n;
  return true;
}

std::uint64_t ProcessMemory::add(std::uint64_t n) {
  MutexLock lock(mu_);
  held_ += n;
  return held_ > limit_ ? held_ - limit_ : 0;
}

void ProcessMemory::sub(std::uint64_t n) {
  MutexLock lock(mu_);
  held_ -= std::min(n, held_);
}

std::uint64_t ProcessMemory::resize(std::uint64_t held, std::uint64_t want, std::uint64_t floor) {
  MutexLock lock(mu_);
  const std::uint64_t others = held_ - std::min(held, held_);
  const std::uint64_t room = limit_ > others ? limit_ - others : 0;
  const std::uint64_t now = std::max(std::min(want, room), floor);
  held_ = others + now;
  return now;
}

std::uint64_t ProcessMemory::held() const {
  MutexLock lock(mu_);
  return held_;
}

std::shared_ptr<MemoryBudget> MemoryBudget::for_option(std::uint64_t option) {
  if (option) return std::make_shared<MemoryBudget>(option);
  // NOTE: a weak reference: the process's limit lives while a loader uses
  // it, so one made after every other is gone resolves the memory anew.
  static std::mutex mu;
  static std::weak_ptr<ProcessMemory> shared;
  std::shared_ptr<ProcessMemory> process;
  {
    std::lock_guard<std::mutex> lock(mu);
    process = shared.lock();
    if (!process) {
      process = std::make_shared<ProcessMemory>(default_memory_budget());
      shared = process;
    }
  }
  return std::make_shared<MemoryBudget>(process->limit(), process);
}

MemoryBudget::~MemoryBudget() {
  MutexLock lock(mu_);
  if (process_) process_->sub(committed_);
}

std::uint64_t MemoryBudget::charged_locked(std::size_t k, std::uint64_t n) {
  const std::uint64_t before = held_locked(k);
  used_[k] += n;
  const std::uint64_t grew = held_locked(k) - before;
  committed_ += grew;
  total_ += n;
  peak_ = std::max(peak_, total_);
  return grew;
}

void MemoryBudget::over_locked(std::uint64_t process_over) {
  const std::uint64_t own = committed_ > limit_ ? committed_ - limit_ : 0;
  over_ = std::max({over_, own, process_over});
}

bool MemoryBudget::try_charge(MemoryAccount a, std::uint64_t n) {
  const std::size_t k = index(a);
  MutexLock lock(mu_);
  const std::uint64_t after = std::max(used_[k] + n, reserved_[k]);
  const std::uint64_t grow = after - held_locked(k);
  if (committed_ + grow > limit_) return false;
  if (process_ && grow > 0 && !process_->try_add(grow)) return false;
  (void)charged_locked(k, n);
  return true;
}

void MemoryBudget::charge_required(MemoryAccount a, std::uint64_t n) {
  const std::size_t k = index(a);
  MutexLock lock(mu_);
  const std::uint64_t grew = charged_locked(k, n);
  over_locked(process_ && grew > 0 ? process_->add(grew) : 0);
}

void MemoryBudget::release(MemoryAccount a, std::uint64_t n) {
  const std::size_t k = index(a);
  MutexLock lock(mu_);
  n = std::min(n, used_[k]);
  const std::uint64_t before = held_locked(k);
  used_[k] -= n;
  const std::uint64_t shrank = before - held_locked(k);
  committed_ -= shrank;
  total_ -= n;
  if (process_ && shrank > 0) process_->sub(shrank);
}

std::uint64_t MemoryBudget::reserve(MemoryAccount a, std::uint64_t want) {
  const std::size_t k = index(a);
  MutexLock lock(mu_);
  const std::uint64_t held = held_locked(k);
  const std::uint64_t others = committed_ - held;
  const std::uint64_t room = limit_ > others ? limit_ - others : 0;
  std::uint64_t now = std::max(std::min(want, room), used_[k]);
  // NOTE: the process's room beside every other loader decides too (in one
  // step under its lock, so two loaders reserving at once both fit).
  if (process_) now = process_->resize(held, now, used_[k]);
  reserved_[k] = now;
  committed_ = others + held_locked(k);
  return reserved_[k];
}

std::uint64_t MemoryBudget::room(MemoryAccount a) const {
  const std::size_t k = index(a);
  MutexLock lock(mu_);
  const std::uint64_t others = committed_ - held_locked(k);
  std::uint64_t cap = limit_ > others ? limit_ - others : 0;
  if (process_) {
    const std::uint64_t held = process_->held(), k_held = held_locked(k);
    const std::uint64_t process_others = held - std::min(held, k_held);
    cap = std::min(cap, process_->limit() > process_others ? process_->limit() - process_others : 0);
  }
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
  s->memory.scope = process_ ? "process" : "loader";
  s->memory.process_held = process_ ? process_->held() : 0;
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

namespace {

struct LocalRanks {
  Mutex mu;
  int ranks GUARDED_BY(mu) = 0;  // 0: not set
  std::string source GUARDED_BY(mu);
};
LocalRanks& local_ranks_set() {
  static LocalRanks* r = new LocalRanks();  // NOTE: never destroyed: read by loaders freed at exit
  return *r;
}

int env_local_ranks() {
  if (const char* env = std::getenv("LOCAL_WORLD_SIZE")) {
    char* end = nullptr;
    const long ranks = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && ranks > 1) return static_cast<int>(std::min<long>(ranks, 1 << 16));
  }
  return 1;
}

}  // namespace

int local_ranks() {
  LocalRanks& r = local_ranks_set();
  {
    MutexLock lock(r.mu);
    if (r.ranks > 0) return r.ranks;
  }
  return env_local_ranks();
}

std::string local_ranks_source() {
  LocalRanks& r = local_ranks_set();
  {
    MutexLock lock(r.mu);
    if (r.ranks > 0) return r.source;
  }
  const char* env = std::getenv("LOCAL_WORLD_SIZE");
  return env ? std::string("LOCAL_WORLD_SIZE=") + env : std::string("LOCAL_WORLD_SIZE unset");
}

void set_local_ranks(int ranks, std::string source) {
  LocalRanks& r = local_ranks_set();
  MutexLock lock(r.mu);
  r.ranks = std::clamp(ranks, 1, 1 << 16);
  r.source = std::move(source);
}

}  // namespace stoker::detail
