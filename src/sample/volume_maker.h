// The sample path of a volume schema (VolumeField, LabelVolumeField): for
// one record, each volume's header (a mapped file, a shard member, a cache
// entry or an inflated .nii.gz), the label's foreground index, then per patch
// one plan drawn from (seed, epoch, record, patch) and shared by every field,
// each field's window copied out of its voxels (only the patch's bytes are
// read from an uncompressed file) and the steps after the crop applied,
// straight into the batch buffer. SampleMaker delegates to it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cache/volume_cache.h"
#include "stoker/options.h"
#include "stoker/source.h"
#include "stoker/stats.h"
#include "stats/counters.h"
#include "transform/volume_ops.h"

namespace stoker::detail {

struct FieldSpec;
struct SampleSpec;

// A worker's reusable buffers for volumes.
struct VolumeScratch {
  std::vector<std::uint8_t> bytes;               // a member read whole (sources without extents)
  std::vector<std::vector<std::uint8_t>> read;   // per field: bytes read whole
  std::vector<float> f_own, f_spare;
  std::vector<std::uint8_t> u8_own, u8_spare;
  std::vector<std::int32_t> i32_own, i32_spare;
};

class VolumeMaker {
 public:
  using ReadField = std::function<Status(const FieldSpec&, std::size_t, std::vector<std::uint8_t>*)>;
  using AddOutput = std::function<void(FieldSpec*, std::string, std::string, std::vector<std::int64_t>, std::size_t, int)>;
  // Decides the patch size, channels and label dtypes from the first
  // readable records, and adds the outputs. Throws Error(kInvalidArgument)
  // for a list that cannot apply.
  VolumeMaker(const Source& source, const LoaderOptions& opt, std::vector<FieldSpec>* fields, ReadField read,
              const AddOutput& add_output);
  ~VolumeMaker();

  // cache != mmap: volumes kept under `budget` (gzipped ones; every one
  // when `all`); label indexes are kept in every mode.
  void set_cache(std::uint64_t budget, bool volumes, bool all);

  int num_samples() const { return prog_.num_samples; }

  // Makes record `rec`'s patches at batch position `pos` of `batch`.
  Status make(std::uint32_t rec, std::uint64_t draw, std::uint64_t seed, std::uint64_t epoch, const SampleSpec& spec,
              std::uint8_t* batch, std::size_t pos, VolumeScratch* s, StageCounters* counters) const;

  void add_stats(Stats* stats) const;

 private:
  // The progress line (LoaderOptions::progress): volumes inflated or
  // resampled and kept, and once when the cache is full.
  void progress(bool kept) const;
  struct Opened;
  // A field's voxels for this record: open_raw's, resampled by Spacing (and kept) when the list has it.
  Status open_field(const FieldSpec& f, int fi, std::uint32_t rec, VolumeScratch* s, Opened* out) const;
  // A volume cache entry serves it.
  Status hit(std::shared_ptr<const VolumeEntry> e, Opened* o) const;
  // As stored (a mapping, a read, a cache entry, an inflated .nii.gz); `transient`: never kept.
  Status open_raw(const FieldSpec& f, int fi, std::uint32_t rec, VolumeScratch* s, Opened* out, bool transient) const;

  const Source& source_;
  const LoaderOptions& opt_;
  const std::vector<FieldSpec>& fields_;
  ReadField read_;
  VolumeProgram prog_;
  Shape3 patch_{0, 0, 0};
  int volume_field_ = -1;   // the kVolume field
  int label_field_ = -1;    // RandCropByPosNegLabel's label field
  std::vector<int> channels_;      // per field: channels (record 0's)
  std::vector<bool> label_u8_;     // per label field: uint8 output
  std::unique_ptr<VolumeCache> cache_;
  bool cache_volumes_ = true, cache_all_ = false;
  std::uint64_t record0_bytes_ = 0;  // record 0's voxel bytes, every volume field
  std::uint64_t record0_index_bytes_ = 0;  // its label index's
  bool tight_ = false;               // the set's voxels (estimated) exceed the cache's budget
  mutable std::atomic<std::uint64_t> patches_{0}, loads_{0}, bytes_read_{0}, inflate_bytes_{0}, inflate_ns_{0},
      hits_{0}, misses_{0}, index_builds_{0}, one_class_{0}, resample_ns_{0}, kept_{0}, kept_bytes_{0};
  bool tty_ = false, progress_ = false;
  mutable std::atomic<std::int64_t> printed_ns_{0};
  mutable std::atomic<bool> said_full_{false};
};

}  // namespace stoker::detail
