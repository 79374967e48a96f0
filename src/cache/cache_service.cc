#include "cache/cache_service.h"

#include <algorithm>
#include <cstdio>

namespace stoker::detail {

CacheService::CacheService(const Source& source, LoaderOptions* opt, std::shared_ptr<MemoryBudget> budget,
                           Client client)
    : source_(source), client_(std::move(client)) {
  if (opt->cache.mode == Cache::kAuto) choose(opt, budget->room(MemoryAccount::kSampleCache));
  mode_ = opt->cache.mode;
  if (mode_ == Cache::kMmap) return;
  cache_ = std::make_unique<SampleCache>(source_.size(), std::move(budget));
  if (mode_ != Cache::kRam) return;
  if (opt->cache.rewrite && client_.image_part >= 0) {
    rewrite_ = std::make_unique<RamRewrite>(cache_.get(), client_.image_part);
  }
  // NOTE: a streaming source is read in the epoch's order (its plan), not
  // the preload's record order.
  if (!opt->cache.preload || source_.wants_plan()) return;
  constexpr int kPreloadThreads = 4;
  Preloader::IdleWork idle;
  if (rewrite_) {
    for (int i = 0; i < kPreloadThreads; ++i) idle_scratch_.push_back(std::make_unique<RewriteScratch>());
    idle = [this](int t) { return rewrite_->rewrite_next(idle_scratch_[static_cast<std::size_t>(t)].get(), cache_->size()); };
  }
  preload_ = std::make_unique<Preloader>(source_, client_.read_record, cache_.get(), opt->cache.progress, kPreloadThreads,
                                         std::move(idle));
}

CacheService::~CacheService() { stop(); }

void CacheService::stop() { preload_.reset(); }

void CacheService::first_batch_out() {
  if (preload_) preload_->go();
}

// cache="auto": a sampled header pass (at most 32 records, spread over the
// set), then the rule of cache/auto_cache.h.
void CacheService::choose(LoaderOptions* opt, std::uint64_t budget) {
  SetFootprint f;
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
  const CacheChoice c = choose_cache(f, budget, opt->cache.max_side);
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
  }
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
    // No more records are coming: the preload ended, or without one, an
    // epoch has read every record (or the budget is spent).
    const bool all_in = preload_ ? p.state != "loading"
                                 : batches > 0 && (cache_->full() || cache_->records() + rewrite_->refused() >= source_.size());
    rewrite_->add_stats(s, all_in);
  }
}

}  // namespace stoker::detail
