// The voxels of a volume schema's fields (Volume, LabelVolume): where they
// lie for the record in hand (a mapped file or tar member via
// Source::member_extent, so a patch of an uncompressed volume reads only its
// bytes; a member read whole from other sources; an inflated or resampled
// volume from the volume cache), the volume cache with the label indexes,
// the progress line, and stats()["volume"]. One per volume schema, owned by
// its Volume field (sample/fields/volume.cc); thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cache/volume_cache.h"
#include "sample/sample.h"
#include "source/mapped_range.h"
#include "stoker/options.h"
#include "stoker/stats.h"
#include "transform/volume/defs.h"
#include "transform/volume/ops.h"

namespace stoker::detail {

class VolumeStore {
 public:
  // One field of the record in hand: where its voxels are.
  struct Opened {
    MappedRange map;
    std::shared_ptr<const VolumeEntry> entry;  // a cache entry or an inflated volume
    VolumeView view;
    std::string where;            // the file, for messages
    std::int64_t inflate_ns = 0;  // spent inflating it
    bool memory = false;          // voxels in memory (a cache entry, an inflated or a whole read): patches read no file
    // As made: nothing open (mappings unmapped, cache entries let go).
    void reset() {
      map.reset();
      entry.reset();
      view = {};
      where.clear();
      inflate_ns = 0;
      memory = false;
    }
  };

  // `prog` (the schema's volume transforms) must outlive the store.
  VolumeStore(const Source& source, const LoaderOptions& opt, const VolumeProgram& prog);

  // Field `fi`'s voxels of record `rec`: as stored (a mapping, a read into
  // *buf, a cache entry, an inflated .nii.gz), resampled by Spacing (and
  // kept) when the list has it.
  Status open(const FieldSpec& f, int fi, std::uint32_t rec, std::vector<std::uint8_t>* buf, Opened* out) const;
  // The foreground index of label field `fi` of record `rec`: kept, else
  // built from its voxels and kept; *hold keeps it alive.
  const LabelIndex* index(std::uint32_t rec, int fi, const Opened& label, std::shared_ptr<const LabelIndex>* hold) const;

  // What record 0 said (the Volume field's probe): its voxel bytes, every
  // volume field, and its label index's (0: no label index).
  void set_record0(std::uint64_t voxel_bytes, std::uint64_t index_bytes) {
    record0_bytes_ = voxel_bytes;
    record0_index_bytes_ = index_bytes;
  }
  // The loader's budget: volumes kept under it, in its volume_cache account
  // (gzipped or resampled ones; every one when `all`); label indexes are
  // kept in every mode. REQUIRES: before any worker uses the store.
  void set_cache(std::shared_ptr<MemoryBudget> budget, bool all);

  void count_load() const { loads_.fetch_add(1, std::memory_order_relaxed); }
  void count_patches(int n, std::uint64_t bytes_read) const {
    patches_.fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
    bytes_read_.fetch_add(bytes_read, std::memory_order_relaxed);
  }
  void count_read(std::uint64_t bytes) const { bytes_read_.fetch_add(bytes, std::memory_order_relaxed); }
  void count_one_class() const { one_class_.fetch_add(1, std::memory_order_relaxed); }
  void add_stats(Stats* stats, int num_samples) const;

 private:
  // The progress line (LoaderOptions::progress): volumes inflated or
  // resampled and kept, and once when the cache is full.
  void progress(bool kept) const;
  // A volume cache entry serves it.
  Status hit(std::shared_ptr<const VolumeEntry> e, Opened* o) const;
  // As stored; `transient`: never kept.
  Status open_raw(const FieldSpec& f, int fi, std::uint32_t rec, std::vector<std::uint8_t>* buf, Opened* out,
                  bool transient) const;

  const Source& source_;
  const LoaderOptions& opt_;
  const VolumeProgram& prog_;
  std::unique_ptr<VolumeCache> cache_;
  bool cache_volumes_ = true, cache_all_ = false;
  std::uint64_t record0_bytes_ = 0;        // record 0's voxel bytes, every volume field
  std::uint64_t record0_index_bytes_ = 0;  // its label index's
  bool tight_ = false;                     // the set's voxels (estimated) exceed the cache's budget
  mutable std::atomic<std::uint64_t> patches_{0}, loads_{0}, bytes_read_{0}, inflate_bytes_{0}, inflate_ns_{0},
      hits_{0}, misses_{0}, index_builds_{0}, one_class_{0}, resample_ns_{0}, kept_{0}, kept_bytes_{0};
  bool tty_ = false, progress_ = false;
  mutable std::atomic<std::int64_t> printed_ns_{0};
  mutable std::atomic<bool> said_full_{false};
};

}  // namespace stoker::detail
