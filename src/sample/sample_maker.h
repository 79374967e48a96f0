// One sample from one record, without threads: read its members (or a cache
// hit), decode, plan the geometry from (seed, epoch, record), apply it to
// every spatial field with the field's own kernel, and write each field into
// its place in a batch buffer. The loader's workers each own a Scratch and
// call make(); tests call it directly.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cache/auto_cache.h"
#include "cache/ram_rewrite.h"
#include "cache/sample_cache.h"
#include "decode/decode.h"
#include "stats/counters.h"
#include "stats/trace.h"
#include "stoker/fields.h"
#include "stoker/options.h"
#include "stoker/source.h"
#include "source/paired_folder.h"
#include "sample/volume_maker.h"
#include "transform/boxes.h"
#include "transform/mask_plan.h"
#include "transform/pipeline.h"
#include "util/thread_annotations.h"

namespace stoker::detail {

// One tensor of a batch: `batch_size` samples of `bytes` each, starting at
// `offset` in the batch buffer.
struct OutputSpec {
  std::string name;                // its key in the batch
  std::string descr;               // NumPy dtype string ("<f4", "|u1", "<i8", ...)
  std::vector<std::int64_t> dims;  // one sample's shape
  std::size_t bytes = 0;           // one sample's bytes
  std::size_t offset = 0;          // where the tensor starts in the batch buffer (64-byte aligned)
  // Entries per sample: a volume's patches are `per_record` consecutive
  // entries of the batch tensor ([N * per_record, dims...]); `bytes` is all
  // of a sample's.
  int per_record = 1;
};

// A field of the schema, resolved: where its bytes come from and which
// outputs it writes.
struct FieldSpec {
  Field field;
  bool primary = false;     // read with Source::read (the record itself), not read_member
  std::string member;       // else: the member read (for "json:<key>", "json")
  std::string json_key;     // "json:<key>" members: the key
  std::shared_ptr<const PairedFolder> folder;  // Field::folder: the paired folder it is read from
  int part = -1;            // index of its bytes among the record's parts (-1: reads nothing)
  int output = -1;          // its first output
  int mask_bytes = 1;       // kMask: bytes per pixel as stored (1 or 2), as record 0's
  std::string tensor_descr;  // kTensor: dtype, shape and item size, as record 0's
  std::vector<std::int64_t> tensor_dims;
  std::size_t tensor_item = 0;
};

// What one sample of a batch is, decided once from the options and record 0.
struct SampleSpec {
  bool arrays = false;  // the default schema of .npy arrays (no transforms)
  bool named = false;   // the user gave a schema (batches are dicts)
  std::vector<FieldSpec> fields;
  std::vector<OutputSpec> outputs;
  int image = -1;         // the image field, if any
  int label_output = -1;  // the first label output, if any (Batch::labels())
  int parts = 0;          // members read per record
  std::size_t batch_bytes = 0;  // one batch buffer: every output for batch_size samples
  // Output 0 (the default schema's images or arrays), for the single-tensor API.
  std::size_t bytes = 0;
  std::vector<std::int64_t> dims;
  std::string descr;
};

// LoaderOptions::hook: the image of the sample in hand, at its own size.
struct HookImage {
  std::vector<float> data;  // float-aligned; uint8 samples use its bytes
  int width = 0, height = 0;
};

// A worker's reusable state: buffers, decoders, where stage times go.
struct Scratch {
  StageCounters* counters = nullptr;  // may be null (no counting)
  TraceBuffer* trace = nullptr;       // tracing only
  std::vector<std::uint8_t> file;     // the image's bytes (one-part records)
  std::vector<std::vector<std::uint8_t>> members;  // each part's bytes
  std::vector<std::uint8_t> bundle;   // parts concatenated, for the cache
  std::vector<std::uint64_t> ends;
  std::vector<std::pair<const std::uint8_t*, std::size_t>> part;  // where each part's bytes are now
  ImageDecoder decoder, mask_decoder;
  ImageBuffer decoded;
  SamplePlan plan;  // the image's read plan
  SamplePlan geo;   // the geometric plan, full-resolution frame
  Workspace workspace;
  MaskBuffer mask, stored_mask;
  MaskWorkspace mask_ws;
  std::vector<BoxRow> boxes;
  std::vector<SamplePlan> view_plans;  // LoaderOptions::views: each copy's plan
  ImageBuffer stored;  // cache=kDecoded: the image at its stored size
  SampleCache::EntryPtr hit;  // the cache entry the sample in hand reads
  bool grid = false;  // the image bytes in hand are in the random-access form (cache=kRam's rewrite)
  RewriteScratch rewrite;  // cache=kRam: the rewrite's buffers and this worker's allowance
  VolumeScratch volume;  // a volume schema's buffers
  HookImage hooked;      // LoaderOptions::hook: the image handed to it
};

class StageTimer;  // sample_maker.cc: one sample's stage times

// Where one sample goes: position `pos` of the batch buffer `batch`.
struct SampleOut {
  std::uint8_t* batch = nullptr;
  std::size_t pos = 0;
};

class SampleMaker {
 public:
  // Decides the spec (reading record 0 when the kind is not evident from its
  // name, or a mask's or tensor's dtype is needed). Throws
  // Error(kInvalidArgument) for options that cannot apply. `cache` (may be
  // null) is shared by every worker; source and cache must outlive the maker.
  SampleMaker(const Source& source, const LoaderOptions& options, SampleCache* cache);
  ~SampleMaker();

  // A volume schema's sample path (null for the others).
  VolumeMaker* volumes() const { return volumes_.get(); }

  const SampleSpec& spec() const { return spec_; }
  // Output k's place for sample `out.pos`.
  std::uint8_t* dest(SampleOut out, int k) const {
    const OutputSpec& o = spec_.outputs[static_cast<std::size_t>(k)];
    return out.batch + o.offset + out.pos * o.bytes;
  }

  // Makes record `rec`'s sample of `epoch` into `out`, its random draws
  // keyed by (seed, epoch, draw): the record itself, or for a mixture the
  // position of the epoch's draws. Never throws: an exception escaping the
  // sample path (a bug, or std::bad_alloc) becomes a kInternal
  // (kResourceExhausted) Status like any other bad sample. On failure its
  // label outputs are -1. Messages carry the reason (and the field): the
  // caller names the record.
  Status make(std::uint32_t rec, std::uint64_t draw, std::uint64_t seed, std::uint64_t epoch, SampleOut out,
              Scratch* s) const noexcept;
  Status make(std::uint32_t rec, std::uint64_t seed, std::uint64_t epoch, SampleOut out, Scratch* s) const noexcept {
    return make(rec, rec, seed, epoch, out, s);
  }

  // LoaderOptions::hook: the sample make() just made into `s`, as the hook
  // takes it (viewing s's buffer).
  void hook_sample(std::uint32_t rec, const Scratch& s, HookSample* out) const;


  // cache="auto": record `rec`'s footprint (cache/auto_cache.h).
  RecordFootprint footprint(std::uint32_t rec) const;
  // The cache the workers share and, with cache="ram", its rewrite (set
  // once, before any make(); either may be null).
  void set_cache(SampleCache* cache, RamRewrite* rewrite) {
    cache_ = cache;
    rewrite_ = rewrite;
  }
  // cache=kDecoded: true until the loader's first batch is out (see
  // process_decoded); null: never.
  void set_first_batch_flag(const std::atomic<bool>* before_first_batch) { first_batch_ = before_first_batch; }
  // cache=kDecoded: once the first batch is out, decodes and stores one of
  // the records the first batch made without storing (process_decoded), so
  // the next epoch finds them; false when none is left. A worker calls it
  // after its task, so the first epoch pays for them, not the second.
  bool fill_deferred(Scratch* s) const;

  // Every member the schema reads of record `rec`, concatenated into *bytes,
  // part k ending at (*ends)[k]: what cache="ram" keeps (the preload uses it).
  Status read_record(std::uint32_t rec, std::vector<std::uint8_t>* bytes, std::vector<std::uint64_t>* ends) const;

 private:
  void resolve_schema();
  void decide_default_schema();
  void decide_from_samples();
  void add_output(FieldSpec* f, std::string name, std::string descr, std::vector<std::int64_t> dims,
                  std::size_t item, int per_record = 1);
  void place_outputs();
  // look_up false: the cache was just asked (no second look-up, no second miss counted).
  Status read_parts(std::uint32_t rec, Scratch* s, std::size_t* bytes_read, bool look_up = true) const;
  Status store_decoded(std::uint32_t rec, Scratch* s, int* width, int* height) const;
  Status process(std::uint32_t rec, std::uint64_t draw, std::uint64_t seed, std::uint64_t epoch, SampleOut out,
                 Scratch* s) const;
  Status from_parts(std::uint32_t rec, std::uint64_t draw, std::uint64_t seed, std::uint64_t epoch, SampleOut out,
                    Scratch* s, StageTimer* timer) const;
  Status process_decoded(std::uint32_t rec, std::uint64_t draw, std::uint64_t seed, std::uint64_t epoch,
                         SampleOut out, Scratch* s) const;
  void* image_out(SampleOut out, const FieldSpec& image, const ImageView& region, Scratch* s) const;
  Status other_fields(std::uint32_t rec, int width, int height, SampleOut out, Scratch* s, bool stored) const;
  Status make_views(const ImageView* stored, std::uint64_t draw, std::uint64_t seed, std::uint64_t epoch,
                    SampleOut out, Scratch* s, StageTimer* timer) const;
  Status read_field(const FieldSpec& f, std::size_t rec, std::vector<std::uint8_t>* out) const;
  Status tag(const FieldSpec& f, const Status& st) const;
  Status decode_mask(const FieldSpec& f, const std::uint8_t* bytes, std::size_t n, int width, int height,
                     Scratch* s, int rows = -1) const;
  Status copy_array(const OutputSpec& o, const std::uint8_t* data, std::size_t size, void* out) const;

  const Source& source_;
  const LoaderOptions& opt_;
  SampleCache* cache_;
  RamRewrite* rewrite_ = nullptr;
  const std::atomic<bool>* first_batch_ = nullptr;
  mutable Mutex deferred_mu_;
  mutable std::vector<std::uint32_t> deferred_ GUARDED_BY(deferred_mu_);  // see fill_deferred
  mutable std::atomic<bool> has_deferred_{false};
  std::optional<Pipeline> pipeline_;  // with an image field (without views)
  std::vector<Pipeline> views_;       // LoaderOptions::views: one pipeline per view
  std::vector<int> view_outputs_;     // each view's output
  mutable std::atomic<bool> warned_truncated_{false};  // boxes past max_boxes: said once per loader
  SampleSpec spec_;
  std::unique_ptr<VolumeMaker> volumes_;
};

namespace testing {
// Test hook: make() throws while making record `rec` (std::bad_alloc when
// bad_alloc, else std::runtime_error), until cleared with rec = -1. For
// tests of the exception barrier; costs one relaxed load per sample.
void throw_in_sample(std::int64_t rec, bool bad_alloc = false);
}  // namespace testing

}  // namespace stoker::detail
