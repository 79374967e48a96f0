// cache="ram": the lossless rewrite of cached JPEGs into the random-access
// form (restart markers on the grid of decode/jpeg_restart.h), so a crop
// decodes only the restart segments it covers. The same coefficients, so
// the same pixels: batches never change, only their cost.
//
// When a record is rewritten (LoaderOptions::cache_rewrite):
//  - as a worker is about to decode it (first read, or a hit on the
//    original), when its allowance says so: in the loader's first epoch the
//    rewrites' net cost (the rewrite's time less the decode time it saves on
//    that very sample, measured) stays under 1% of the worker's sample time,
//    so the first epoch is at most that much slower than cache="mmap"; in
//    later epochs every record read is rewritten first (a net cost of about
//    one Huffman pass each, once), so the rewrite is done when the second
//    epoch ends;
//  - in the background: the preload threads' idle CPU (a record rewritten as
//    it is stored, or, for the originals a streamed source stored, in the
//    order they entered the cache) and the workers' share (at most 9% of
//    their sample time from the second epoch on) take the records not read
//    yet.
// Where the records can be read again cheaply (Source::reads_again_locally:
// local files, in the page cache once read), a record is stored
// only in its final form (`stores_final()`): a first-epoch miss not rewritten
// on the read path is not stored at all (the sample reads the bytes the
// worker holds, as with cache="mmap"); the preload threads, at idle
// priority, and the later epochs' reads store it rewritten. So the first
// epoch copies nothing into the cache that the rewrite would replace, and
// the cache never holds a record twice. Other sources' records (streamed
// in: read again only by fetching them again) are stored as they arrive: in this process's
// arena the original, replaced by its rewritten form later; in a segment
// shared by the node's loaders (a block another process may read is never
// freed) rewritten first, whatever the first epoch's allowance.
// Thread-safe; one RewriteScratch per thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "cache/sample_cache.h"
#include "decode/jpeg_restart_insert.h"
#include "decode/jpeg_transcode.h"
#include "stoker/stats.h"
#include "util/thread_annotations.h"
#include "util/util.h"

namespace stoker::detail {

// One thread's buffers and, for a worker, its allowance.
struct RewriteScratch {
  JpegRestartInserter inserter;
  JpegTranscoder transcoder;  // what the inserter does not rewrite
  std::vector<std::uint8_t> jpeg;    // the image rewritten
  std::size_t image_before = 0;      // ... its size before
  std::vector<std::uint8_t> record;  // the record rewritten (every member)
  std::vector<std::uint64_t> ends;   // its members' ends (several members)
  // A worker's: its rewrites are on the read path (a preload thread's: false).
  bool reader = true;
  // A worker's: set by the loader before each sample (a preload thread's:
  // false, it has no first-epoch allowance).
  bool first_epoch = true;
  std::int64_t sample_ns = 0;  // its time in samples (from the second epoch on: the background share's base)
  std::int64_t first_ns = 0;   // ... in the first epoch
  std::int64_t debt_ns = 0;    // its first-epoch rewrites' net cost
  std::int64_t share_ns = 0;   // its background share's time
  // What its buffers hold (their capacity). NOTE: the inserter's and the
  // transcoder's own tables and libjpeg state are not counted.
  std::uint64_t bytes() const { return capacity_bytes(jpeg) + capacity_bytes(record) + capacity_bytes(ends); }
};

class RamRewrite {
 public:
  // `image_part`: which member of a cached record is the image (-1: none,
  // nothing to rewrite). `reads_again_locally`: the source's records can be
  // read again cheaply (Source::reads_again_locally), so only their final
  // forms are stored.
  RamRewrite(SampleCache* cache, int image_part, bool reads_again_locally)
      : cache_(cache),
        image_part_(image_part),
        stores_final_(reads_again_locally || cache->entries_final()),
        store_on_read_(!reads_again_locally && cache->entries_final()) {}
  RamRewrite(const RamRewrite&) = delete;
  RamRewrite& operator=(const RamRewrite&) = delete;

  // The read path, on a worker about to decode record `rec`.
  // A hit: `hit` is the entry found. Returns the entry to read: a rewritten
  // one when this call rewrote it, else `hit`.
  SampleCache::EntryPtr on_hit(std::uint32_t rec, SampleCache::EntryPtr hit, RewriteScratch* s) noexcept;
  // A miss: the record's bytes as the cache keeps them were just read
  // (`ends` null for one member). Stores them in the cache, rewritten when
  // the allowance says so (where only final forms are stored, not at all otherwise); true
  // when s->record (with s->ends) then holds the rewritten bytes, which the
  // sample should read. `stored` (may be null): what the cache said to the
  // store (kAlreadyHeld when none was tried). The preload stores through it
  // too, except a streamed source's originals into this process's arena.
  bool on_miss(std::uint32_t rec, const std::uint8_t* data, std::size_t size, const std::vector<std::uint64_t>* ends,
               RewriteScratch* s, SampleCache::Insert* stored = nullptr) noexcept;
  // The sample's image decode took `ns`, from rewritten bytes (grid) or
  // from an original JPEG: the running means of both are the saving the
  // first epoch's allowance counts.
  void note_decode(bool grid, std::int64_t ns);
  // After each sample, from the worker: its background share.
  void after_sample(RewriteScratch* s, std::int64_t sample_ns) noexcept;
  // The next cached record not yet looked at, among at most `scan`, in the
  // order they entered the cache; false when none was found or the rewrite
  // has stopped (the preload threads' idle work, and the workers' share):
  // the originals a streamed source stored in this process's arena.
  bool rewrite_next(RewriteScratch* s, std::size_t scan) noexcept;

  // `all_in`: no more records are coming into the cache.
  void add_stats(Stats* st, bool all_in) const;
  // Whether only final forms are stored (and replace() is never needed).
  bool stores_final() const { return stores_final_; }
  std::uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }

 private:
  enum class Outcome { kRewritten, kAsIs, kCorrupt };
  // Record bytes (members as the cache keeps them) -> s->record/s->ends.
  Outcome rewrite_bytes(const std::uint8_t* data, std::size_t size, std::span<const std::uint64_t> ends,
                        RewriteScratch* s);
  // Rewrites the entry of claimed record `rec` (cached) and settles it;
  // returns the entry now held (the new one when rewritten).
  SampleCache::EntryPtr rewrite_entry(std::uint32_t rec, const SampleCache::EntryPtr& old, RewriteScratch* s);
  bool running() const;  // an image to rewrite, and not stopped by an exception
  bool allowed(const RewriteScratch& s) const;
  void charge(RewriteScratch* s, std::int64_t ns);
  void settle(std::uint32_t rec, SampleCache::Insert in);
  // `claimed`: this thread holds record rec's claim (settled as it was).
  void failed(std::uint32_t rec, bool claimed = true) noexcept;

  SampleCache* cache_;
  const int image_part_;
  // Only final forms are stored: the source reads again locally, or the
  // cache's entries are final (a shared segment).
  const bool stores_final_;
  // A record read is rewritten before it is stored, whatever the first
  // epoch's allowance: a streamed source's, into a shared segment (each
  // record rewritten once per node, where caches of their own rewrite every
  // record once per rank).
  const bool store_on_read_;
  std::atomic<std::size_t> cursor_{0};
  std::atomic<std::uint64_t> rewritten_{0}, before_{0}, after_{0}, cpu_ns_{0}, on_read_{0};
  std::atomic<std::uint64_t> settled_{0}, refused_{0};
  // Running means of a sample's image decode, from rewritten bytes and from
  // original JPEGs (ns, exponentially weighted; 0: none seen yet).
  std::atomic<std::int64_t> grid_ns_{0}, original_ns_{0};
  std::atomic<bool> stopped_{false};  // an exception stopped it
  std::atomic<std::uint64_t> errors_{0};
  mutable Mutex mu_;
  std::string error_ GUARDED_BY(mu_);  // the first one's message
};

}  // namespace stoker::detail
