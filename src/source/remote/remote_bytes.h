// Remote shards' bytes (shard_bytes.h): fetched in the epoch's order of first
// use, a few shards ahead, held while the epoch needs them, read while they
// arrive.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "memory/arena.h"
#include "memory/memory_budget.h"
#include "source/manifest.h"
#include "source/remote/node_cache.h"
#include "source/remote/transport.h"
#include "source/shard_bytes.h"
#include "util/util.h"

namespace stoker::detail {

struct RemoteBytesOptions {
  int connections = 8;             // fetches at once
  // The most shard bytes in memory at once (0: no cap of its own); within
  // the loader's budget either way (use_memory()).
  std::uint64_t memory_budget = 0;
  std::string index_how;           // Stats::Remote::index
};

class RemoteShardBytes final : public ShardBytes {
 public:
  // `counters` and `transport` outlive this; `cache` may be null. `infos`:
  // each shard's identity pinned at open; empty when `urls` are a manifest's
  // rows (each shard's size is its row's, no ETag), so nothing per shard is
  // copied from the manifest.
  RemoteShardBytes(ShardNames urls, std::vector<ObjectInfo> infos, std::shared_ptr<Transport> transport,
                   std::shared_ptr<RemoteCounters> counters, std::shared_ptr<NodeCache> cache,
                   const RemoteBytesOptions& opt);
  ~RemoteShardBytes() override;

  Status read_at(std::uint32_t shard, std::uint64_t off, std::uint64_t size, std::vector<std::uint8_t>* out) const override;
  bool wants_plan() const override { return true; }
  void plan(std::vector<Use> uses, std::size_t from) const override;
  void plan_ahead(std::vector<Use> uses) const override;
  void progress(std::size_t done) const override;
  void io_stats(Stats* s) const override;
  void use_memory(const std::shared_ptr<MemoryBudget>& budget) const override;
  // Shard `shard`'s URL and the identity given at construction.
  std::string url(std::uint32_t shard) const;
  ObjectInfo info(std::uint32_t shard) const;
  // Shards named by a manifest: how a shard's index is fetched when first needed (remote_shards.cc).
  using IndexLoader = std::function<Status(std::uint32_t shard, ShardIndex* out)>;
  void set_index_loader(IndexLoader load) { load_index_ = std::move(load); }
  Status load_index(std::uint32_t shard, ShardIndex* out) const override {
    return load_index_ ? load_index_(shard, out) : ShardBytes::load_index(shard, out);
  }

 private:
  IndexLoader load_index_;
  struct Shard;
  std::uint64_t size_of(std::uint32_t shard) const;
  std::uint32_t index_of(const Shard* sh) const;
  void stop();
  void fetcher_died(const Status& st);
  void fetch_main();
  void fetch(Shard* sh) const;
  void release_locked(Shard* sh) const;
  bool may_start_locked(std::size_t k) const;
  bool fits_locked(const Use& u) const;
  // Counts `span` bytes of sh as resident and charges them to the budget's
  // remote_shards account: when its fetch starts, under the same lock as the
  // fits_locked() that admitted it, so fetchers starting together each see
  // the others' shards.
  void charge_locked(Shard* sh, std::uint64_t span) const;
  // The budget (one of the store's own, from opt_.memory_budget, until the
  // loader gives its: use_memory()).
  MemoryBudget& memory_locked() const;
  // Room for `need` bytes resident: the reservation grown to it when the
  // budget has room (never above opt_.memory_budget).
  bool reserve_locked(std::uint64_t need) const;
  // Shards started beyond those needed now: the plan's concurrency (a
  // window's shards) plus the depth less one.
  int ahead_count() const { return concurrency_ + depth_ - 1; }
  void tune_locked(double fetch_s, std::uint64_t bytes) const;
  std::uint64_t peak_bytes(const std::vector<Use>& uses) const;
  // A use is fetched whole when its records span at least half the shard
  // (or into cache_dir, whose entries are whole objects), else as its span.
  bool whole(const Use& u) const;
  static bool holds(const Shard& sh, const Use& u);
  std::uint64_t fetch_bytes(const Use& u) const;
  // A reader's wait for bytes not yet arrived (counted in fetch_wait).
  template <typename Pred>
  void wait_locked(std::unique_lock<std::mutex>& lock, Pred ready) const {
    const std::int64_t t0 = now_ns();
    ++waiting_;
    data_cv_.wait(lock, ready);
    --waiting_;
    counters_->fetch_wait_ns.fetch_add(static_cast<std::uint64_t>(now_ns() - t0), std::memory_order_relaxed);
  }

  // Shard buffers: huge-page mappings populated at once (a 4 KiB fault per
  // page of a fresh malloc'd buffer cost as much CPU as the transfer).
  struct ArenaFree {
    Arena* arena;
    void operator()(std::uint8_t* p) const noexcept { arena->free(p); }
  };
  using Buffer = std::unique_ptr<std::uint8_t, ArenaFree>;
  mutable Arena arena_{std::size_t{4} << 20};

  // NOTE: one small state per shard (remote_bytes.cc); URLs and sizes are
  // read from urls_ (a manifest's table) when a shard is fetched.
  mutable std::vector<Shard> shards_;
  const ShardNames urls_;
  const std::vector<ObjectInfo> infos_;
  std::shared_ptr<Transport> transport_;
  std::shared_ptr<RemoteCounters> counters_;
  std::shared_ptr<NodeCache> cache_;
  const RemoteBytesOptions opt_;

  mutable std::mutex mu_;
  mutable std::condition_variable fetch_cv_;  // fetchers: a fetch may start
  mutable std::condition_variable data_cv_;   // readers: bytes arrived, a fetch ended
  mutable std::vector<Use> plan_;             // by first use
  mutable std::vector<std::size_t> plan_index_;  // shard -> its index in plan_, SIZE_MAX when unplanned
  mutable std::size_t next_ = 0;             // plan_ items below this have been started (or skipped)
  mutable std::size_t demand_ = 0;           // plan_ items below this are needed now (read or first)
  mutable std::size_t done_ = 0;             // positions below this are all read
  mutable std::uint64_t resident_ = 0;       // bytes in memory (fetched or being fetched), charged to memory_
  // The budget's remote_shards account, and its reservation: what the plan
  // holds at once plus kAheadShards of fetch-ahead, grown while the budget
  // has room (the caches take what is left).
  mutable std::shared_ptr<MemoryBudget> memory_;
  mutable std::uint64_t limit_ = 0;
  mutable int depth_ = 2;                    // autotuned: ceil(fetch time / consumption time) + 1
  mutable int concurrency_ = 1;              // the most shards the plan uses at once
  mutable std::vector<Use> ahead_;           // the next epoch's plan (plan_ahead), by first use
  mutable std::size_t ahead_next_ = 0;
  mutable std::vector<std::size_t> ahead_index_;  // shard -> its index in ahead_, SIZE_MAX when not there
  mutable std::atomic<std::uint64_t> ahead_bytes_{0};  // bytes that arrived for shards fetched ahead
  mutable std::vector<std::pair<std::uint64_t, Buffer>> spares_;  // released buffers, by capacity
  mutable int waiting_ = 0;                  // readers waiting on data_cv_
  mutable double fetch_s_ewma_ = 0, consume_s_ewma_ = 0;
  mutable std::int64_t last_release_ns_ = -1;
  mutable std::vector<std::string> depth_log_;
  bool stop_ = false;
  Status broken_;  // a fetcher thread stopped (fetcher_died): every read that would wait fails with it
  std::vector<std::thread> fetchers_;
};

}  // namespace stoker::detail
