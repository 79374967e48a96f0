// A loader's caching policy in one place: which cache (cache="auto"
// decides here), the sample cache under the memory budget, the preload
// that moves the set into RAM, the cache="ram" rewrite and its CPU
// allowance, and their stats. The loader keeps scheduling; the sample maker
// reads and stores through cache() and rewrite().
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cache/auto_cache.h"
#include "cache/preload.h"
#include "cache/ram_rewrite.h"
#include "cache/sample_cache.h"
#include "stoker/options.h"
#include "stoker/source.h"
#include "stoker/stats.h"

namespace stoker::detail {

class CacheService {
 public:
  // What the service needs of the sample path.
  struct Client {
    std::function<RecordFootprint(std::size_t)> footprint;  // cache="auto"'s sampled header pass
    Preloader::ReadRecord read_record;                      // a record as cache="ram" keeps it
    bool image = false;    // the schema has an image field
    int output_side = 0;   // the larger side of the transforms' output
    int image_part = -1;   // which member of a stored record is the image
  };
  // Resolves opt->cache when it is kAuto (the mode chosen is written back:
  // options() and the doctor's snapshot say it) and, unless it is kMmap,
  // makes the cache; with cache="ram", the preload (unless opt->preload is
  // false or the source is read in its plan's order) and the rewrite
  // (opt->cache_rewrite). The preload threads wait for first_batch_out().
  // The cache charges the budget's sample_cache account: it gets what the
  // other accounts leave (cache="auto" decides from what is left now).
  CacheService(const Source& source, LoaderOptions* opt, std::shared_ptr<MemoryBudget> budget, Client client);
  ~CacheService();  // stop()
  CacheService(const CacheService&) = delete;
  CacheService& operator=(const CacheService&) = delete;

  SampleCache* cache() const { return cache_.get(); }      // null with cache="mmap"
  RamRewrite* rewrite() const { return rewrite_.get(); }   // null unless cache="ram" rewrites

  void first_batch_out();  // the preload may start
  // After each sample, on its worker: the rewrite's background share.
  void after_sample(RewriteScratch* s, std::int64_t sample_ns) noexcept {
    if (rewrite_) rewrite_->after_sample(s, sample_ns);
  }
  // Stops the preload threads (each finishes the record in hand) and joins them.
  void stop();
  // `batches`: handed out so far (without a preload, the rewrite is done
  // once an epoch has read every record).
  void add_stats(Stats* s, std::uint64_t batches) const;

 private:
  // cache="auto": samples the set's footprint, then decide()s.
  void choose(LoaderOptions* opt, std::uint64_t budget);
  // cache="auto"'s rule on the footprint for `budget`: opt->cache.mode and why_.
  void decide(LoaderOptions* opt, std::uint64_t budget);
  // Whether the cache is to be shared by the node's loaders (share_cache,
  // the ranks on the node, the set's size).
  bool share_wanted(const LoaderOptions& opt) const;
  // The sample cache: in a segment shared by the node's loaders when
  // opt.cache.share says so and the directory can hold it, else this
  // process's own (shared_why_ says which and why).
  std::unique_ptr<SampleCache> make_cache(const LoaderOptions& opt, std::shared_ptr<MemoryBudget> budget);

  const Source& source_;
  Client client_;
  Cache mode_ = Cache::kMmap;
  std::string why_;  // cache="auto": what it chose and why
  SetFootprint footprint_;  // cache="auto": the sampled set
  std::string shared_why_ = "off";  // stats()["shared_cache"]
  std::unique_ptr<SampleCache> cache_;
  std::unique_ptr<RamRewrite> rewrite_;
  // The preload threads', for the rewrite (when they store, or in idle time).
  std::vector<std::unique_ptr<RewriteScratch>> preload_scratch_;
  std::unique_ptr<Preloader> preload_;
};

}  // namespace stoker::detail
