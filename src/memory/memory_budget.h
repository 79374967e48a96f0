// A loader's memory budget: one byte limit, resolved once (memory_budget, or
// within the process's: half of the memory available, shared by every loader
// left at memory_budget=0), and a named account for every part that
// holds memory under it. Every holder charges its account before it keeps
// bytes and releases them when it lets them go; a charge that would take the
// accounts' sum above the limit fails, and the holder then does what it does
// when its budget is spent (a cache stops admitting, the remote store fetches
// fewer shards ahead). Thread-safe: any thread may charge or release.
//
// How the limit is shared (src/memory/README.md):
//  - batch_buffers first: the loader reserves its deepest ring plus the two
//    batches a loop holds, and charges each buffer as it is allocated
//    whatever the limit (charge_required): it cannot run without them;
//  - remote_shards reserve what their epoch's plan holds at once plus their
//    fetch-ahead (reserve()): no other account may take a reservation's
//    unused part, so the sample cache filling up never starves a fetch
//    (a shard needed now beyond it evicts shards used later, or waits);
//  - decode_scratch next: the loader reserves threads x twice a worker's
//    estimate (each field kind's, from the first records' bytes; twice: a
//    vector keeps up to twice what it needed), and each worker charges
//    its scratch's growth, required when the budget has no room: a worker
//    cannot run without its buffers;
//  - volume_cache and sample_cache take what is left, charge by charge.
// The sum of the accounts never exceeds the limit, except by required
// charges when the limit is below what the loader needs to run at all, or
// a worker's scratch outgrew its estimate once the caches took the rest
// (over_bytes() counts it).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "util/thread_annotations.h"

namespace stoker {
struct Stats;
}

namespace stoker::detail {

// kDecodeScratch: the workers' reusable buffers (each field kind's decoded
// pixels and workspaces, the record's bytes: Scratch::bytes(), sample/),
// charged as they grow; a decoder library's own state (libjpeg's) is not
// counted.
enum class MemoryAccount : std::uint8_t { kBatchBuffers, kRemoteShards, kVolumeCache, kSampleCache, kDecodeScratch };
inline constexpr std::size_t kMemoryAccounts = 5;
// The account's name as stats()["memory"]["accounts"] and the doctor spell
// it ("sample_cache", ...): the one table of them.
const char* memory_account_name(MemoryAccount a);

// The limit every loader left at memory_budget=0 in one process shares:
// each such loader's budget charges what its accounts hold here too, so
// together they stay within it (a training and a validation loader, or a
// mixture's, never take two halves of the memory). Resolved once, when the
// first of them is made; lives while any of them does.
class ProcessMemory {
 public:
  explicit ProcessMemory(std::uint64_t limit) : limit_(limit) {}
  std::uint64_t limit() const { return limit_; }
  // Adds n bytes when they fit; false, nothing added, otherwise.
  [[nodiscard]] bool try_add(std::uint64_t n) EXCLUDES(mu_);
  // Adds n bytes whatever the limit; returns how far the sum is above it.
  std::uint64_t add(std::uint64_t n) EXCLUDES(mu_);
  void sub(std::uint64_t n) EXCLUDES(mu_);
  // One holder's `held` bytes changed to `want`, or as much of it as the
  // limit has room for, never below `floor`; returns the new held bytes.
  std::uint64_t resize(std::uint64_t held, std::uint64_t want, std::uint64_t floor) EXCLUDES(mu_);
  std::uint64_t held() const EXCLUDES(mu_);

 private:
  const std::uint64_t limit_;
  mutable Mutex mu_;
  std::uint64_t held_ GUARDED_BY(mu_) = 0;
};

class MemoryBudget {
 public:
  // A budget of `limit` bytes, charging `process` too when given (then
  // within both).
  explicit MemoryBudget(std::uint64_t limit, std::shared_ptr<ProcessMemory> process = nullptr)
      : limit_(limit), process_(std::move(process)) {}
  MemoryBudget(const MemoryBudget&) = delete;
  MemoryBudget& operator=(const MemoryBudget&) = delete;
  // Gives the process back whatever its accounts still hold or reserve.
  ~MemoryBudget();

  // The budget for the option memory_budget: a budget of its own when it
  // is given; when 0, one within the process's (default_memory_budget(),
  // resolved by the first such loader alive), shared by every loader of
  // this process that left it at 0.
  static std::shared_ptr<MemoryBudget> for_option(std::uint64_t option);

  std::uint64_t limit() const { return limit_; }

  // Charges n bytes to `a` when the accounts (each counted at least at its
  // reservation) stay within the limit; false, nothing charged, otherwise.
  [[nodiscard]] bool try_charge(MemoryAccount a, std::uint64_t n) EXCLUDES(mu_);
  // Charges n bytes whatever the limit: memory the loader needs to run at
  // all. What this puts above the limit is counted in over_bytes().
  void charge_required(MemoryAccount a, std::uint64_t n) EXCLUDES(mu_);
  // Returns n bytes charged to `a` (never more than it holds).
  void release(MemoryAccount a, std::uint64_t n) EXCLUDES(mu_);
  // Sets `a`'s reservation to at most `want` bytes: as much of it as the
  // limit has room for beside the other accounts. Returns the reservation
  // (>= what `a` holds now, which is never taken back).
  std::uint64_t reserve(MemoryAccount a, std::uint64_t want) EXCLUDES(mu_);
  // What a try_charge of `a` could take now (its reservation's unused part
  // included).
  std::uint64_t room(MemoryAccount a) const EXCLUDES(mu_);

  std::uint64_t used(MemoryAccount a) const EXCLUDES(mu_);
  std::uint64_t reserved(MemoryAccount a) const EXCLUDES(mu_);
  std::uint64_t used() const EXCLUDES(mu_);
  // The most the accounts held at once, and the most required charges put
  // above the limit.
  std::uint64_t peak() const EXCLUDES(mu_);
  std::uint64_t over_bytes() const EXCLUDES(mu_);

  // stats()["memory"]: the limit, the sum, its peak, each account.
  void add_stats(Stats* s) const EXCLUDES(mu_);

 private:
  // What an account counts for against the limit: its charges, or its
  // reservation when that is more.
  std::uint64_t held_locked(std::size_t k) const REQUIRES(mu_) {
    return used_[k] > reserved_[k] ? used_[k] : reserved_[k];
  }
  // Adds n bytes to account k; returns how much its held bytes grew.
  std::uint64_t charged_locked(std::size_t k, std::uint64_t n) REQUIRES(mu_);
  void over_locked(std::uint64_t process_over) REQUIRES(mu_);

  const std::uint64_t limit_;
  const std::shared_ptr<ProcessMemory> process_;
  mutable Mutex mu_;
  std::array<std::uint64_t, kMemoryAccounts> used_ GUARDED_BY(mu_){};
  std::array<std::uint64_t, kMemoryAccounts> reserved_ GUARDED_BY(mu_){};
  std::uint64_t committed_ GUARDED_BY(mu_) = 0;  // the sum of held_locked() over the accounts
  std::uint64_t total_ GUARDED_BY(mu_) = 0;      // the sum of used_
  std::uint64_t peak_ GUARDED_BY(mu_) = 0;
  std::uint64_t over_ GUARDED_BY(mu_) = 0;
};

// Bytes charged to one account of a budget, released on destruction; a
// holder's own tally of what it charged. Thread-safe as the budget is.
// Without a budget (null) every charge succeeds and nothing is counted.
class MemoryCharge {
 public:
  MemoryCharge() = default;
  MemoryCharge(std::shared_ptr<MemoryBudget> budget, MemoryAccount a) : budget_(std::move(budget)), account_(a) {}
  MemoryCharge(const MemoryCharge&) = delete;
  MemoryCharge& operator=(const MemoryCharge&) = delete;
  ~MemoryCharge() { release_all(); }

  [[nodiscard]] bool try_charge(std::uint64_t n);
  void charge_required(std::uint64_t n);
  void release(std::uint64_t n);
  void release_all();
  // Brings the charge up to `n` bytes (never down: a holder's buffers keep
  // their capacity): the growth is try_charge'd, else charged as required
  // (over_bytes counts it). Nothing grew: one load, no lock.
  // REQUIRES: one thread grows it (a worker its own scratch's).
  void grow_to(std::uint64_t n) {
    const std::uint64_t held = bytes();
    if (n > held && !try_charge(n - held)) charge_required(n - held);
  }
  // Releases everything and charges `budget` from now on.
  // REQUIRES: no other thread charges or releases meanwhile.
  void reset(std::shared_ptr<MemoryBudget> budget) {
    release_all();
    budget_ = std::move(budget);
  }
  std::uint64_t bytes() const { return bytes_.load(std::memory_order_relaxed); }
  MemoryBudget* budget() const { return budget_.get(); }
  const std::shared_ptr<MemoryBudget>& shared() const { return budget_; }
  MemoryAccount account() const { return account_; }

 private:
  std::shared_ptr<MemoryBudget> budget_;
  MemoryAccount account_ = MemoryAccount::kSampleCache;
  std::atomic<std::uint64_t> bytes_{0};
};

// Default memory budget: half of MemAvailable, never above half of what the
// cgroup (v2 memory.max, or v1 limit) still allows, divided among the ranks
// torchrun starts on this node (LOCAL_WORLD_SIZE).
std::uint64_t default_memory_budget();
// The ranks on this node: what set_local_ranks() said (Python: the ranks of
// an initialised torch.distributed group on this host), else
// LOCAL_WORLD_SIZE (what torchrun sets), else 1.
int local_ranks();
// Where local_ranks() comes from, for stats() and messages:
// "LOCAL_WORLD_SIZE=4", the caller's words, or "LOCAL_WORLD_SIZE unset".
std::string local_ranks_source();
// For the rest of the process: `ranks` on this node (> 0), `source` saying
// how they were counted. Call before the first loader resolves its budget.
void set_local_ranks(int ranks, std::string source);

}  // namespace stoker::detail
