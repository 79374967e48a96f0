// Remote shards' bytes: see remote_bytes.h.
#include "source/remote/remote_bytes.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

#include "source/file_reader.h"
#include "stoker/stats.h"
#include "util/thread.h"
#include "util/util.h"

namespace stoker::detail {

// A shard's state: a few bytes per shard, whatever the data set's size;
// what a fetch holds lives in `held`, allocated when the fetch starts and
// freed when the shard is released (null exactly while kAbsent).
struct RemoteShardBytes::Shard {
  // Held in memory (bytes [lo, hi) of the object), or in the node cache
  // (the whole object, in entry->fd()). Stable while readers > 0 or while
  // fetching.
  struct Held {
    Buffer mem{nullptr, ArenaFree{nullptr}};
    std::uint64_t mem_capacity = 0;
    std::unique_ptr<NodeCache::Entry> entry;
    std::uint64_t lo = 0, hi = 0;
    std::uint64_t received = 0;  // bytes [lo, lo + received) are in
    std::uint64_t charged = 0;   // bytes of it counted in resident_
    Status error;                // kFailed: why
    std::int64_t started_ns = 0;
    ObjectInfo info;   // the identity each response is checked against
    std::string name;  // the URL in messages and cache keys: no user:password@
  };
  enum class State : std::uint8_t { kAbsent, kFetching, kReady, kFailed };
  State state = State::kAbsent;
  bool release_pending = false;
  bool ahead = false;  // fetched for the epoch expected next
  int readers = 0;     // reads copying out of it now
  std::unique_ptr<Held> held;
};

namespace {
constexpr int kMaxDepth = 32;
// Shards' worth of fetch-ahead reserved beyond the plan's peak.
constexpr std::uint64_t kAheadShards = 2;
}

// A resident shard can serve a use: not failed, and its bytes cover the span.
bool RemoteShardBytes::holds(const Shard& sh, const Use& u) {
  return sh.held && sh.state != Shard::State::kFailed && sh.held->lo <= u.lo && sh.held->hi >= u.hi;
}

std::string RemoteShardBytes::url(std::uint32_t shard) const { return urls_[shard]; }
ObjectInfo RemoteShardBytes::info(std::uint32_t shard) const {
  return infos_.empty() ? ObjectInfo{urls_.row(shard)->bytes, ""} : infos_[shard];
}
std::uint64_t RemoteShardBytes::size_of(std::uint32_t shard) const {
  return infos_.empty() ? urls_.row(shard)->bytes : infos_[shard].size;
}
std::uint32_t RemoteShardBytes::index_of(const Shard* sh) const {
  return static_cast<std::uint32_t>(sh - shards_.data());
}

RemoteShardBytes::RemoteShardBytes(ShardNames urls, std::vector<ObjectInfo> infos, std::shared_ptr<Transport> transport,
                                   std::shared_ptr<RemoteCounters> counters, std::shared_ptr<NodeCache> cache,
                                   const RemoteBytesOptions& opt)
    : shards_(urls.size()),
      urls_(std::move(urls)),
      infos_(std::move(infos)),
      transport_(std::move(transport)),
      counters_(std::move(counters)),
      cache_(std::move(cache)),
      opt_(opt) {
  if (!infos_.empty() && infos_.size() != urls_.size()) {
    throw Error(Code::kInternal, "remote shards: " + std::to_string(urls_.size()) + " URLs, " +
                                     std::to_string(infos_.size()) + " identities");
  }
  plan_index_.assign(shards_.size(), SIZE_MAX);
  const int n = std::max(1, opt_.connections);
  try {
    for (int i = 0; i < n; ++i) {
      fetchers_.push_back(spawn("stoker-fetch", Priority::kNormal, [this] { fetch_main(); },
                                [this](const Status& st) { fetcher_died(st); }));
    }
  } catch (...) {  // no more threads: those started are stopped and joined
    stop();
    throw;
  }
}

RemoteShardBytes::~RemoteShardBytes() {
  stop();
  std::lock_guard<std::mutex> lock(mu_);
  if (memory_) {
    memory_->release(MemoryAccount::kRemoteShards, resident_);
    (void)memory_->reserve(MemoryAccount::kRemoteShards, 0);
  }
}

void RemoteShardBytes::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  transport_->cancel();
  fetch_cv_.notify_all();
  data_cv_.notify_all();
  for (auto& t : fetchers_) {
    if (t.joinable()) t.join();
  }
}

// spawn()'s sink: something reached a fetcher's top outside a fetch (those
// are caught in fetch_main), so the thread is gone and a shard it would have
// fetched may never be. NOTE: every read that would wait for bytes not yet
// here then fails with kUnavailable (a ConnectionError in Python; never
// skipped as corrupt) rather than waiting forever; bytes already here are
// still served.
void RemoteShardBytes::fetcher_died(const Status& st) {
  counters_->thread_errors.fetch_add(1, std::memory_order_relaxed);
  Status why;
  try {
    why = Status(Code::kUnavailable, "remote shards: a fetcher thread stopped: " + st.message());
  } catch (...) {
    why = Status(Code::kUnavailable, "fetcher stopped");  // short: no allocation
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_.ok()) broken_ = std::move(why);
  }
  data_cv_.notify_all();
}

bool RemoteShardBytes::whole(const Use& u) const {
  return cache_ || 2 * (u.hi - u.lo) >= size_of(u.shard);
}

std::uint64_t RemoteShardBytes::fetch_bytes(const Use& u) const {
  return whole(u) ? size_of(u.shard) : u.hi - u.lo;
}

std::uint64_t RemoteShardBytes::peak_bytes(const std::vector<Use>& uses) const {
  // The most bytes the plan holds at once: a shard from its first use to its
  // last, as it is fetched (fetch_bytes).
  std::vector<std::pair<std::size_t, std::int64_t>> events;
  for (const Use& u : uses) {
    const std::uint64_t bytes = fetch_bytes(u);
    events.push_back({u.first, static_cast<std::int64_t>(bytes)});
    events.push_back({u.last + 1, -static_cast<std::int64_t>(bytes)});
  }
  std::sort(events.begin(), events.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : a.second < b.second;  // releases first
  });
  std::int64_t now = 0, peak = 0;
  for (const auto& e : events) peak = std::max(peak, now += e.second);
  return static_cast<std::uint64_t>(peak);
}

MemoryBudget& RemoteShardBytes::memory_locked() const {
  if (!memory_) memory_ = MemoryBudget::for_option(opt_.memory_budget);
  return *memory_;
}

bool RemoteShardBytes::reserve_locked(std::uint64_t need) const {
  if (need <= limit_) return true;
  if (opt_.memory_budget && need > opt_.memory_budget) return false;
  limit_ = memory_locked().reserve(MemoryAccount::kRemoteShards, need);
  return need <= limit_;
}

void RemoteShardBytes::use_memory(const std::shared_ptr<MemoryBudget>& budget) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (memory_ == budget) return;
  if (memory_) {
    memory_->release(MemoryAccount::kRemoteShards, resident_);
    (void)memory_->reserve(MemoryAccount::kRemoteShards, 0);
  }
  memory_ = budget;
  limit_ = 0;
  if (resident_ > 0 && !memory_->try_charge(MemoryAccount::kRemoteShards, resident_)) {
    memory_->charge_required(MemoryAccount::kRemoteShards, resident_);
  }
}

void RemoteShardBytes::plan(std::vector<Use> uses, std::size_t from) const {
  const std::uint64_t peak = cache_ ? 0 : peak_bytes(uses);
  std::uint64_t largest = 1;
  for (const Use& u : uses) largest = std::max(largest, fetch_bytes(u));
  std::unique_lock<std::mutex> lock(mu_);
  if (!cache_) {
    // NOTE: the budget's remote_shards account reserves the plan's peak and
    // a little fetch-ahead before the caches fill: a shuffle needs its peak
    // to run at all, the caches only speed it up.
    std::uint64_t want = std::max(peak + kAheadShards * largest, resident_);
    if (opt_.memory_budget) want = std::max(peak, std::min(want, opt_.memory_budget));
    if (!reserve_locked(want) && !reserve_locked(peak)) {
      const std::uint64_t budget = memory_locked().limit(), room = limit_;
      lock.unlock();
      std::uint64_t biggest = 1;
      for (const Use& u : uses) biggest = std::max(biggest, size_of(u.shard));
      const std::uint64_t cap = opt_.memory_budget ? std::min(opt_.memory_budget, room) : room;
      const std::uint64_t fits = std::max<std::uint64_t>(1, cap / (2 * biggest));
      const auto mib = [](std::uint64_t b) { return std::to_string((b + (1 << 20) - 1) >> 20) + " MiB"; };
      throw Error(Code::kInvalidArgument,
                  "remote shards: this epoch holds up to " + mib(peak) + " of shards in memory at once (a shuffle reads "
                  "every shard it spans at once), more than the memory budget of " + mib(budget) + " has room for (" +
                  mib(cap) + " beside the loader's batch buffers and caches: stats()[\"memory\"]): shuffle within "
                  "windows of shards (shuffle_window=" + std::to_string(fits) +
                  " fits), give cache_dir= (shards then wait on local disk), or raise memory_budget");
    }
  }
  // The most shards the plan uses at once (a window's): that many beyond
  // those needed now are fetched ahead, plus the depth.
  std::vector<std::pair<std::size_t, int>> events;
  for (const Use& u : uses) {
    events.push_back({u.first, 1});
    events.push_back({u.last + 1, -1});
  }
  std::sort(events.begin(), events.end());
  int live = 0, concurrency = 1;
  for (const auto& e : events) concurrency = std::max(concurrency, live += e.second);
  std::vector<std::size_t> index(shards_.size(), SIZE_MAX);
  for (std::size_t k = 0; k < uses.size(); ++k) index[uses[k].shard] = k;
  for (std::size_t s = 0; s < shards_.size(); ++s) {
    Shard* sh = &shards_[s];
    if (sh->state == Shard::State::kAbsent) continue;
    // Kept only when the new plan uses it, among the shards it starts with
    // (those the fetchers would hold now anyway: the peak reserved models a
    // shard held from its first use, so one kept longer in memory could push
    // a shard needed later beyond the reservation), and it holds what the
    // plan reads.
    const bool soon = cache_ || index[s] < static_cast<std::size_t>(concurrency + depth_);
    const bool keep = index[s] != SIZE_MAX && soon && holds(*sh, uses[index[s]]);
    if (keep) {
      sh->release_pending = false;
    } else {
      release_locked(sh);
    }
  }
  concurrency_ = concurrency;
  plan_ = std::move(uses);
  plan_index_ = std::move(index);
  ahead_.clear();
  ahead_index_.clear();
  ahead_next_ = 0;
  next_ = 0;
  demand_ = std::min<std::size_t>(1, plan_.size());
  done_ = from;
  last_release_ns_ = -1;
  lock.unlock();
  fetch_cv_.notify_all();
}

void RemoteShardBytes::plan_ahead(std::vector<Use> uses) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ahead_ = std::move(uses);
    ahead_next_ = 0;
    ahead_index_.assign(shards_.size(), SIZE_MAX);
    for (std::size_t k = 0; k < ahead_.size(); ++k) ahead_index_[ahead_[k].shard] = k;
  }
  fetch_cv_.notify_all();
}

void RemoteShardBytes::progress(std::size_t done) const {
  std::lock_guard<std::mutex> lock(mu_);
  done_ = std::max(done_, done);
  int released = 0;
  for (std::size_t k = 0; k < next_ && k < plan_.size(); ++k) {
    const Use& u = plan_[k];
    Shard* sh = &shards_[u.shard];
    if (u.last >= done_ || plan_index_[u.shard] != k || sh->state == Shard::State::kAbsent) continue;
    plan_index_[u.shard] = SIZE_MAX;  // read through: a later read of it is a stray one
    ++released;
    // NOTE: one of the next epoch's first shards stays (within the budget),
    // rather than being fetched again for it soon after.
    const std::size_t a = ahead_index_.empty() ? SIZE_MAX : ahead_index_[u.shard];
    if (a < static_cast<std::size_t>(ahead_count()) && holds(*sh, ahead_[a]) && (cache_ || resident_ <= limit_)) {
      continue;
    }
    release_locked(sh);
  }
  if (released > 0) {
    // The consumption time of a shard: the time since the last release over
    // the shards released now (a window's shards end together).
    const std::int64_t now = now_ns();
    if (last_release_ns_ >= 0) {
      const double s = static_cast<double>(now - last_release_ns_) * 1e-9 / released;
      consume_s_ewma_ = consume_s_ewma_ == 0 ? s : 0.7 * consume_s_ewma_ + 0.3 * s;
    }
    last_release_ns_ = now;
  }
  // NOTE: shards whose first use the consumer has reached are needed now.
  while (demand_ < plan_.size() && plan_[demand_].first <= done_) ++demand_;
  fetch_cv_.notify_all();
}

void RemoteShardBytes::release_locked(Shard* sh) const {
  if (sh->readers > 0 || sh->state == Shard::State::kFetching) {
    sh->release_pending = true;
    return;
  }
  if (Shard::Held* h = sh->held.get()) {
    resident_ -= h->charged;
    if (h->charged) memory_locked().release(MemoryAccount::kRemoteShards, h->charged);
    if (h->mem) {
      // NOTE: kept for the next shard (its pages are faulted in already: a
      // fresh buffer per shard cost as much CPU as the transfer), a few at most.
      if (spares_.size() < static_cast<std::size_t>(concurrency_ + ahead_count())) {
        spares_.push_back({h->mem_capacity, std::move(h->mem)});
      }
    }
    // The node cache's lock goes with it (entry): the entry may be evicted from here.
    sh->held.reset();
  }
  sh->state = Shard::State::kAbsent;
  sh->release_pending = false;
}

bool RemoteShardBytes::may_start_locked(std::size_t k) const {
  // NOTE: shards ahead of those needed now start only within depth and the
  // reservation. One needed now (a worker waits for it: the ring reads ahead
  // of the consumer, further than the plan's peak models) starts when it
  // fits; else shards the plan uses only after it (kept from the last epoch,
  // fetched for the next) make room, to be fetched again; else it waits for
  // the consumer to read through shards: every shard still resident is then
  // used before this one, so the consumer reaches them and releases them
  // (the reservation holds the plan's peak), and the budget is never passed.
  if (k >= demand_ + static_cast<std::size_t>(ahead_count())) return false;
  if (fits_locked(plan_[k])) return true;
  if (k >= demand_) return false;
  for (Shard& shard : shards_) {
    Shard* sh = &shard;
    const std::size_t j = plan_index_[index_of(sh)];
    if (sh->state != Shard::State::kReady || sh->readers > 0 || (j != SIZE_MAX && j <= k)) continue;
    release_locked(sh);
    if (fits_locked(plan_[k])) return true;
  }
  return false;
}

void RemoteShardBytes::charge_locked(Shard* sh, std::uint64_t span) const {
  sh->held->charged = span;
  resident_ += span;
  // NOTE: within the reservation fits_locked() made for it this never fails;
  // a shard needed now that fits nowhere (larger than the reservation, with
  // nothing else resident; or a cache_dir shard bypassing a full disk) is
  // fetched anyway and counted in stats()["memory"]["over_bytes"].
  (void)reserve_locked(resident_);
  MemoryBudget& m = memory_locked();
  if (!m.try_charge(MemoryAccount::kRemoteShards, span)) m.charge_required(MemoryAccount::kRemoteShards, span);
}

bool RemoteShardBytes::fits_locked(const Use& u) const {
  if (cache_) return true;
  return resident_ == 0 || reserve_locked(resident_ + fetch_bytes(u));
}

void RemoteShardBytes::tune_locked(double fetch_s, std::uint64_t bytes) const {
  (void)bytes;
  fetch_s_ewma_ = fetch_s_ewma_ == 0 ? fetch_s : 0.7 * fetch_s_ewma_ + 0.3 * fetch_s;
  if (consume_s_ewma_ <= 0) return;
  // Enough shards in flight to cover one fetch's time at the consumption
  // rate, plus one.
  const int want = std::clamp(static_cast<int>(std::ceil(fetch_s_ewma_ / consume_s_ewma_)) + 1, 1, kMaxDepth);
  if (want != depth_) {
    char line[160];
    std::snprintf(line, sizeof line, "prefetch depth %d -> %d: a shard takes %.3f s to fetch, %.3f s to consume", depth_,
                  want, fetch_s_ewma_, consume_s_ewma_);
    if (depth_log_.size() < 64) depth_log_.push_back(line);
    depth_ = want;
  }
}

void RemoteShardBytes::fetch_main() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    while (next_ < plan_.size() && shards_[plan_[next_].shard].state != Shard::State::kAbsent) ++next_;
    Use u;
    bool ahead = false;
    if (next_ < plan_.size()) {
      if (!may_start_locked(next_)) {
        fetch_cv_.wait(lock);
        continue;
      }
      u = plan_[next_++];
    } else {
      // Every shard of this epoch started: the next epoch's first ones (not
      // used again in this one), so its first batch does not wait for them.
      while (ahead_next_ < ahead_.size() && (shards_[ahead_[ahead_next_].shard].state != Shard::State::kAbsent ||
                                             plan_index_[ahead_[ahead_next_].shard] != SIZE_MAX)) {
        ++ahead_next_;
      }
      if (ahead_next_ >= ahead_.size() || ahead_next_ >= static_cast<std::size_t>(ahead_count()) ||
          !fits_locked(ahead_[ahead_next_])) {
        fetch_cv_.wait(lock);
        continue;
      }
      u = ahead_[ahead_next_++];
      ahead = true;
    }
    Shard* sh = &shards_[u.shard];
    sh->held = std::make_unique<Shard::Held>();
    Shard::Held* h = sh->held.get();
    h->info = info(u.shard);
    h->name = redact_url(urls_[u.shard]);
    sh->state = Shard::State::kFetching;
    h->lo = whole(u) ? 0 : u.lo;
    h->hi = h->lo + fetch_bytes(u);
    h->started_ns = now_ns();
    sh->ahead = ahead;
    if (!cache_) charge_locked(sh, h->hi - h->lo);
    lock.unlock();
    // NOTE: an exception in a fetch (out of memory for its buffer, a bug)
    // fails that shard as a network error does: its reads raise kUnavailable
    // (never skipped as corrupt), the next plan that needs it fetches it
    // again, and this fetcher goes on with the next.
    try {
      fetch(sh);
    } catch (...) {
      counters_->thread_errors.fetch_add(1, std::memory_order_relaxed);
      Status st = exception_status(h->name + ": fetch");
      std::lock_guard<std::mutex> failed(mu_);
      sh->state = Shard::State::kFailed;
      h->error = Status(Code::kUnavailable, st.message());
    }
    lock.lock();
    if (sh->state == Shard::State::kReady) {
      tune_locked(static_cast<double>(now_ns() - h->started_ns) * 1e-9, h->hi - h->lo);
    }
    if (sh->release_pending) release_locked(sh);
    data_cv_.notify_all();
    fetch_cv_.notify_all();
  }
}

void RemoteShardBytes::fetch(Shard* sh) const {
  injection_point(ThreadSite::kFetcher, index_of(sh));
  // NOTE: sh->held is this fetch's until it ends (kFetching: never released).
  Shard::Held* h = sh->held.get();
  const std::string url = urls_[index_of(sh)];
  auto arrived = [this, sh, h](std::uint64_t n) {
    if (sh->ahead) ahead_bytes_.fetch_add(n, std::memory_order_relaxed);
    bool wake;
    {
      std::lock_guard<std::mutex> lock(mu_);
      h->received += n;
      wake = waiting_ > 0;
    }
    if (wake) data_cv_.notify_all();
  };
  auto finish = [this, sh, h](Status st) {
    std::lock_guard<std::mutex> lock(mu_);
    if (st.ok()) {
      sh->state = Shard::State::kReady;
    } else {
      sh->state = Shard::State::kFailed;
      // NOTE: whatever the cause (network, a full cache disk), the bytes are
      // not there: kUnavailable, which on_corrupt="skip" never skips.
      h->error = st.code() == Code::kUnavailable || st.code() == Code::kCancelled
                      ? st
                      : Status(Code::kUnavailable, h->name + ": " + st.message());
    }
  };
  const std::uint64_t size = h->info.size;
  if (cache_) {
    std::unique_ptr<NodeCache::Entry> e;
    Status st = cache_->open(h->name, h->info.etag, size, [this] { return transport_->cancelled(); }, &e);
    if (!st.ok()) return finish(st);
    if (e->state() == NodeCache::Entry::State::kHit) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        h->entry = std::move(e);
        h->received = size;
      }
      return finish(Status::Ok());
    }
    if (e->state() == NodeCache::Entry::State::kDownload) {
      const int fd = e->fd();
      const std::uint64_t have = e->resume_from();
      NodeCache::Entry* entry = e.get();
      {
        std::lock_guard<std::mutex> lock(mu_);
        h->entry = std::move(e);
        h->received = have;
      }
      data_cv_.notify_all();
      std::uint64_t pos = have;
      const std::string part = cache_->dir();
      st = transport_->get(url, have, size - have, &h->info, [&](const std::uint8_t* p, std::size_t n) {
        std::size_t done = 0;
        while (done < n) {
          const ssize_t w = ::pwrite(fd, p + done, n - done, static_cast<off_t>(pos + done));
          if (w < 0) {
            if (errno == EINTR) continue;
            return Status::IOError("cache_dir '" + part + "': writing " + h->name + ": " + std::strerror(errno));
          }
          done += static_cast<std::size_t>(w);
        }
        pos += n;
        arrived(n);
        return Status::Ok();
      });
      if (st.ok()) st = entry->commit();
      return finish(st);
    }
    // kBypass: no room in cache_dir; the whole shard through memory (lo, hi
    // say so already: with cache_dir every fetch is of a whole shard).
  }
  const std::uint64_t span = h->hi - h->lo;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto best = spares_.end();
    for (auto it = spares_.begin(); it != spares_.end(); ++it) {
      if (it->first >= span && (best == spares_.end() || it->first < best->first)) best = it;
    }
    if (best != spares_.end()) {
      h->mem = std::move(best->second);
      h->mem_capacity = best->first;
      spares_.erase(best);
    } else {
      // NOTE: a little room, so the buffer serves the next shards of about this size.
      const std::uint64_t cap = (span + span / 8 + 65535) & ~std::uint64_t{65535};
      h->mem = Buffer(arena_.alloc(static_cast<std::size_t>(cap)), ArenaFree{&arena_});
      h->mem_capacity = cap;
    }
    // Charged when it started (fetch_main), except a cache_dir shard that
    // has no room on disk: it comes through memory now.
    if (h->charged == 0) charge_locked(sh, span);
  }
  std::uint8_t* dst = h->mem.get();
  std::uint64_t pos = 0;
  Status st = transport_->get(url, h->lo, span, &h->info, [&](const std::uint8_t* p, std::size_t n) {
    if (pos + n > span) return Status::Internal(h->name + ": more bytes than asked for");
    std::memcpy(dst + pos, p, n);
    pos += n;
    arrived(n);
    return Status::Ok();
  });
  finish(st);
}

Status RemoteShardBytes::read_at(std::uint32_t shard, std::uint64_t off, std::uint64_t size,
                                 std::vector<std::uint8_t>* out) const {
  Shard* sh = &shards_[shard];
  auto name = [&] { return redact_url(urls_[shard]); };  // messages only: not per read
  std::unique_lock<std::mutex> lock(mu_);
  const std::size_t k = plan_index_[shard];
  if (k != SIZE_MAX && sh->state == Shard::State::kAbsent && off >= plan_[k].lo && off + size <= plan_[k].hi) {
    // Planned, not started: needed now.
    if (demand_ <= k) {
      demand_ = k + 1;
      fetch_cv_.notify_all();
    }
    wait_locked(lock, [&] {
      return stop_ || !broken_.ok() || sh->state != Shard::State::kAbsent || plan_index_[shard] != k;
    });
    if (!stop_ && !broken_.ok() && sh->state == Shard::State::kAbsent) return broken_;
  }
  if (stop_) return Status(Code::kCancelled, name() + ": the source is closing");
  using State = Shard::State;
  if ((sh->state == State::kFetching || sh->state == State::kReady) && off >= sh->held->lo &&
      off + size <= sh->held->hi) {
    const std::uint64_t need = off + size - sh->held->lo;
    if (sh->held->received < need && sh->state == State::kFetching) {
      wait_locked(lock, [&] {
        return stop_ || !broken_.ok() || sh->state != State::kFetching || sh->held->received >= need;
      });
      if (stop_) return Status(Code::kCancelled, name() + ": the source is closing");
      if (sh->state == State::kFetching && sh->held->received < need) return broken_;
    }
    if (sh->state == State::kFailed) return sh->held->error;
    // NOTE: looked at again: while this read waited, the shard may have been
    // released (held gone) or fetched anew (another span).
    Shard::Held* h = sh->held.get();
    if (h && off >= h->lo && off + size <= h->hi && h->received >= off + size - h->lo) {
      ++sh->readers;
      lock.unlock();
      out->resize(static_cast<std::size_t>(size));
      Status st;
      if (h->mem) {
        std::memcpy(out->data(), h->mem.get() + (off - h->lo), static_cast<std::size_t>(size));
      } else {
        const long long n = pread_full(h->entry->fd(), out->data(), out->size(), off);
        if (n != static_cast<long long>(size)) {
          st = Status(Code::kUnavailable, name() + ": cache_dir file read failed at " + std::to_string(off) + ": " +
                                              (n < 0 ? std::strerror(errno) : "short read"));
        }
      }
      lock.lock();
      if (--sh->readers == 0 && sh->release_pending) {
        release_locked(sh);
        fetch_cv_.notify_all();  // room for a shard waiting to start
      }
      return st;
    }
  }
  if (sh->state == State::kFailed && k != SIZE_MAX) return sh->held->error;
  lock.unlock();
  out->resize(static_cast<std::size_t>(size));
  if (cache_) {
    // A complete entry in cache_dir serves it. NOTE: read through its own fd,
    // which keeps the bytes even if another process evicts the entry now.
    const ObjectInfo pinned = info(shard);
    const std::string path = cache_->entry_path(NodeCache::entry_key(name(), pinned.etag, pinned.size)) + ".tar";
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      struct stat st;
      const bool complete = ::fstat(fd, &st) == 0 && static_cast<std::uint64_t>(st.st_size) == pinned.size;
      const long long n = complete ? pread_full(fd, out->data(), out->size(), off) : -1;
      ::close(fd);
      if (n == static_cast<long long>(size)) return Status::Ok();
    }
  }
  // NOTE: a read outside the plan (a probe, a sample, a replacement for a
  // corrupt record): one ranged request of its own.
  counters_->stray_reads.fetch_add(1, std::memory_order_relaxed);
  std::uint64_t pos = 0;
  ObjectInfo pinned = info(shard);
  Status st = transport_->get(urls_[shard], off, size, &pinned, [&](const std::uint8_t* p, std::size_t n) {
    if (pos + n > size) return Status::Internal(name() + ": more bytes than asked for");
    std::memcpy(out->data() + pos, p, n);
    pos += n;
    return Status::Ok();
  });
  if (st.ok() && pos != size) st = Status(Code::kUnavailable, name() + ": short read at " + std::to_string(off));
  if (!st.ok() && st.code() != Code::kUnavailable && st.code() != Code::kCancelled) {
    st = Status(Code::kUnavailable, st.message());
  }
  return st;
}

void RemoteShardBytes::io_stats(Stats* s) const {
  Stats::Remote& r = s->remote;
  r.active = true;
  r.bytes_fetched = counters_->bytes_fetched.load(std::memory_order_relaxed);
  r.requests = counters_->requests.load(std::memory_order_relaxed);
  for (int c = 0; c < static_cast<int>(RetryCause::kCount); ++c) {
    r.retries[kRetryCauseNames[c]] = counters_->retries[c].load(std::memory_order_relaxed);
  }
  r.fetch_wait_s = static_cast<double>(counters_->fetch_wait_ns.load(std::memory_order_relaxed)) * 1e-9;
  r.latency_p50_ms = counters_->latency.quantile(0.5);
  r.latency_p99_ms = counters_->latency.quantile(0.99);
  r.stray_reads = counters_->stray_reads.load(std::memory_order_relaxed);
  r.index = opt_.index_how;
  r.index_scanned_bytes = counters_->index_scanned_bytes.load(std::memory_order_relaxed);
  if (const std::uint64_t n = counters_->thread_errors.load(std::memory_order_relaxed)) s->thread_errors["fetcher"] += n;
  {
    std::lock_guard<std::mutex> lock(mu_);
    r.prefetch_depth = depth_;
    r.shard_fetch_s = fetch_s_ewma_;
    r.shard_consume_s = consume_s_ewma_;
    r.fetched_ahead_bytes = ahead_bytes_.load(std::memory_order_relaxed);
    r.prefetch_log = depth_log_;
    r.resident_bytes = resident_;
  }
  if (cache_) {
    const NodeCacheStats c = cache_->stats();
    r.cache_dir_hits = c.hits;
    r.cache_dir_misses = c.misses;
    r.cache_dir_bytes_written = c.bytes_written;
    r.cache_dir_evictions = c.evictions;
    r.cache_dir_bypass = c.bypass;
  }
}

}  // namespace stoker::detail
