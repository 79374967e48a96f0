#include "cache/cache_service.h"

#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "stoker/names.h"
#include "stoker/status.h"

namespace stoker::detail {

CacheService::CacheService(const Source& source, LoaderOptions* opt, std::shared_ptr<MemoryBudget> budget,
                           Client client)
    : source_(source), client_(std::move(client)) {
  const bool automatic = opt->cache.mode == Cache::kAuto;
  const std::uint64_t room = budget->room(MemoryAccount::kSampleCache);
  const auto local = static_cast<std::uint64_t>(local_ranks());
  // NOTE: a cache to be shared is decided with the node's budget, the
  // segment's size (this rank's room times the ranks on the node).
  if (automatic) choose(opt, share_wanted(*opt) ? room * local : room);
  mode_ = opt->cache.mode;
  if (mode_ == Cache::kMmap) {
    shared_why_ = "off: cache=\"mmap\" keeps no cache";
    return;
  }
  cache_ = make_cache(*opt, std::move(budget));
  if (automatic && !cache_->shared() && share_wanted(*opt)) {
    // Chosen for the node's budget, but the segment could not be had: decided again for this rank's.
    decide(opt, room);
    mode_ = opt->cache.mode;
    if (mode_ == Cache::kMmap) {
      cache_.reset();
      return;
    }
  }
  if (opt->cache.progress != Progress::kOff && share_wanted(*opt)) {
    std::fprintf(stderr, "stoker: cache=\"%s\": %s\n", cache_name(mode_), shared_why_.c_str());
  }
  if (mode_ != Cache::kRam) return;
  if (opt->cache.rewrite && client_.image_part >= 0) {
    rewrite_ = std::make_unique<RamRewrite>(cache_.get(), client_.image_part, source_.reads_again_locally());
  }
  // NOTE: a streaming source is read in the epoch's order (its plan), not
  // the preload's record order.
  if (!opt->cache.preload || source_.wants_plan()) return;
  constexpr int kPreloadThreads = 4;
  Preloader::StoreRecord store;
  if (rewrite_) {
    for (int i = 0; i < kPreloadThreads; ++i) {
      preload_scratch_.push_back(std::make_unique<RewriteScratch>());
      preload_scratch_.back()->first_epoch = false;
      preload_scratch_.back()->reader = false;
    }
    // NOTE: each record is rewritten by the preload thread that stores it,
    // at idle priority (RamRewrite::on_miss; a mixture with a remote part,
    // whose records are kept as read, is rewritten by its readers later).
    store = [this](int t, std::size_t i, const std::vector<std::uint8_t>& bytes, const std::vector<std::uint64_t>* ends) {
      SampleCache::Insert in = SampleCache::Insert::kAlreadyHeld;
      rewrite_->on_miss(static_cast<std::uint32_t>(i), bytes.data(), bytes.size(), ends,
                        preload_scratch_[static_cast<std::size_t>(t)].get(), &in);
      return in;
    };
  }
  // NOTE: with a shared cache each local rank's preload begins at its own
  // part of the set (LOCAL_RANK, else rank modulo the local ranks).
  std::size_t start = 0;
  const SharedSegment* seg = cache_->shared();
  if (seg) {
    std::size_t me = static_cast<std::size_t>(opt->rank) % local;
    if (const char* env = std::getenv("LOCAL_RANK")) me = std::strtoul(env, nullptr, 10) % local;
    start = source_.size() * me / local;
  }
  const Priority priority = store ? Priority::kIdle : Priority::kBackground;
  preload_ = std::make_unique<Preloader>(source_, client_.read_record, cache_.get(), opt->cache.progress, kPreloadThreads,
                                         start, std::move(store), seg ? "node-shared cache " + seg->path() : "",
                                         priority);
}

CacheService::~CacheService() { stop(); }

namespace {

// What the data is, for the shared segment's name: the source, its first
// and last keys, and the directory relative paths start from.
std::string source_identity(const Source& source) {
  // NOTE: appended piece by piece: GCC 12 warns (-Wrestrict) on "|" + string.
  std::string id = source.describe();
  id.append("|").append(std::to_string(source.size()));
  if (source.size()) id.append("|").append(source.key(0)).append("|").append(source.key(source.size() - 1));
  std::error_code ec;
  id.append("|").append(std::filesystem::current_path(ec).string());
  return id;
}

// Everything that decides the cache's entries: the source and every option
// but those known not to change a stored entry (order, scheduling,
// reporting, budget). NOTE: a list of what may differ, not of what must
// match, so an option added later keeps loaders apart until it is listed.
std::string cache_key(const Source& source, const LoaderOptions& opt) {
  nlohmann::json j = nlohmann::json::parse(options_to_json(opt));
  for (const char* k : {"batch_size", "shuffle", "seed", "shuffle_window", "drop_last", "threads", "max_threads",
                        "prefetch", "rank", "world_size", "on_corrupt", "max_consecutive_corrupt", "memory_budget",
                        "preload", "progress", "stage_timing", "trace", "share_cache", "share_cache_dir",
                        "remote_connections", "remote_retries", "cache_dir", "cache_limit"}) {
    j.erase(k);
  }
  return "v1|" + source_identity(source) + "|" + j.dump();
}

}  // namespace

bool CacheService::share_wanted(const LoaderOptions& opt) const {
  const std::size_t n = source_.size();
  return opt.cache.share != ShareCache::kOff && (opt.cache.share == ShareCache::kOn || local_ranks() > 1) && n > 0 &&
         n <= UINT32_MAX;
}

std::unique_ptr<SampleCache> CacheService::make_cache(const LoaderOptions& opt, std::shared_ptr<MemoryBudget> budget) {
  const std::size_t n = source_.size();
  const int local = local_ranks();
  if (!share_wanted(opt)) {
    shared_why_ = opt.cache.share == ShareCache::kOff ? "off: share_cache=\"off\": a cache of this process's own"
                  : n == 0 || n > UINT32_MAX
                      ? "off: " + std::to_string(n) + " records: a cache of this process's own"
                      : "off: one rank on this node (" + local_ranks_source() + "): a cache of this process's own";
    return std::make_unique<SampleCache>(n, std::move(budget));
  }
  const std::uint64_t room = budget->room(MemoryAccount::kSampleCache);
  SharedSegmentOptions so;
  so.dir = opt.cache.share_dir;
  so.group = source_identity(source_);
  so.key = cache_key(source_, opt);
  so.records = static_cast<std::uint32_t>(n);
  so.capacity = room * static_cast<std::uint64_t>(local);
  std::shared_ptr<SharedSegment> seg;
  try {
    seg = SharedSegment::attach(so);
  } catch (const Error& e) {
    const std::string msg = std::string(e.what()) + "; fix: a smaller memory_budget, a larger " + so.dir +
                            " (docker run --shm-size=...), share_cache_dir= a directory on a larger tmpfs, or "
                            "share_cache=\"off\"";
    if (opt.cache.share == ShareCache::kOn) throw Error(e.code(), msg);
    std::fprintf(stderr, "stoker: %s; this loader keeps a cache of its own\n", msg.c_str());
    shared_why_ = "off: " + msg;
    return std::make_unique<SampleCache>(n, std::move(budget));
  }
  // Loaders of the same data with other cache options keep apart: said once.
  std::error_code ec;
  const std::string mine = std::filesystem::path(seg->path()).filename().string();
  const std::string prefix = SharedSegment::prefix(so.group);
  for (const auto& f : std::filesystem::directory_iterator(so.dir, ec)) {
    const std::string name = f.path().filename().string();
    if (name != mine && name.rfind(prefix, 0) == 0) {
      std::fprintf(stderr,
                   "stoker: another loader on this node caches %s with other cache options (%s): this one keeps "
                   "its own shared cache, %s\n",
                   source_.describe().c_str(), name.c_str(), seg->path().c_str());
      break;
    }
  }
  if (seg->reclaimed_stale()) {
    std::fprintf(stderr, "stoker: reclaimed a stale shared cache left by processes that ended: %s\n",
                 seg->path().c_str());
  }
  shared_why_ = "shared: " + seg->path() + " (" + (seg->created() ? "created" : "attached") +
                (seg->reclaimed_stale() ? ", a stale one reclaimed" : "") + "; node-shared: " + std::to_string(local) +
                (local == 1 ? " rank" : " ranks") + " on this node, " + local_ranks_source() + ")";
  return std::make_unique<SampleCache>(n, std::move(budget), std::move(seg));
}

void CacheService::stop() { preload_.reset(); }

void CacheService::first_batch_out() {
  if (preload_) preload_->go();
}

// cache="auto": a sampled header pass (at most 32 records, spread over the
// set), then the rule of cache/auto_cache.h.
void CacheService::choose(LoaderOptions* opt, std::uint64_t budget) {
  SetFootprint& f = footprint_;
  f.records = source_.size();
  f.image = client_.image;
  f.output_side = client_.output_side;
  const std::size_t m = std::min<std::size_t>(source_.size(), 32);
  for (std::size_t j = 0; j < m; ++j) {
    const RecordFootprint fp = client_.footprint(j * source_.size() / m);
    if (!fp.ok) continue;
    ++f.sampled;
    f.encoded_bytes += static_cast<double>(fp.encoded);
    f.decoded_bytes += static_cast<double>(fp.decoded);
    f.max_short_side = std::max(f.max_short_side, fp.short_side);
  }
  if (f.sampled) {
    f.encoded_bytes /= static_cast<double>(f.sampled);
    f.decoded_bytes /= static_cast<double>(f.sampled);
  }
  decide(opt, budget);
}

void CacheService::decide(LoaderOptions* opt, std::uint64_t budget) {
  const CacheChoice c = choose_cache(footprint_, budget, opt->cache.max_side);
  opt->cache.mode = c.mode;
  why_ = c.why;
  if (opt->cache.progress != Progress::kOff) std::fprintf(stderr, "stoker: cache=\"auto\" chose %s\n", c.why.c_str());
}

void CacheService::add_stats(Stats* s, std::uint64_t batches) const {
  s->cache_mode = cache_name(mode_);
  s->cache_auto = why_;
  if (cache_) {
    s->cache_hits = cache_->hits();
    s->cache_misses = cache_->misses();
    s->cache_records = cache_->records();
    s->cache_bytes = cache_->bytes();
    s->cache_holes_bytes = cache_->holes();
    s->cache_budget_bytes = cache_->budget();
    if (const SharedSegment* seg = cache_->shared()) {
      s->shared_cache_entries = seg->entries();
      s->shared_cache_bytes = seg->bytes();
      s->shared_cache_hits = cache_->hits();
      s->shared_cache_filled = cache_->filled();
    }
  }
  s->shared_cache = shared_why_;
  Preloader::Report p;
  if (preload_) {
    p = preload_->report();
    s->cache_preload = p.state;
    s->cache_preload_records = p.records;
    s->cache_preload_bytes = p.bytes;
    s->cache_preload_s = p.seconds;
    if (p.errors) s->thread_errors["preload"] += p.errors;
  }
  if (rewrite_) {
    // No more records are coming: the preload ended, or an epoch has read
    // every record (or the budget is spent). NOTE: both: at idle priority
    // the preload may end long after the workers stored the rest.
    const bool all_in = (preload_ && p.state != "loading") ||
                        (batches > 0 && (cache_->full() || cache_->records() + rewrite_->refused() >= source_.size()));
    rewrite_->add_stats(s, all_in);
  }
}

}  // namespace stoker::detail
