// What a field of the schema is while a loader runs (FieldOp), made by its
// kind's definition (fields/field_def.h) from the options and the first
// records, and what it sees of the sample in hand (Sample).
//
// The sample loop (SampleMaker::make): the maker reads the record's members
// (or a cache entry); the geometry owner (Image or Volume) opens its
// reference and plans the sample from (seed, epoch, draw); then every field
// applies that plan with its own kernel and writes its outputs. Virtual calls
// are per field per sample, never per pixel.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cache/auto_cache.h"
#include "memory/memory_budget.h"
#include "sample/fields/field_def.h"
#include "sample/sample.h"
#include "stoker/hook.h"
#include "stoker/options.h"
#include "stoker/stats.h"
#include "transform/plan.h"

namespace stoker::detail {

class RamRewrite;
struct VolumePatches;  // fields/volume.h

// The geometry the owner planned for the sample in hand.
struct Geometry {
  // Image: the geometric plan (crops, resizes, flips) in the frame of a
  // width x height image: the full-resolution image, or its stored form
  // under cache="decoded" (Sample::stored).
  const SamplePlan* plan = nullptr;
  int width = 0, height = 0;
  // Volume: each patch's plan and every volume field's voxels.
  const VolumePatches* volume = nullptr;
};

// The sample in hand, as its fields see it.
struct Sample {
  std::uint32_t rec = 0;
  std::uint64_t draw = 0, seed = 0, epoch = 0;  // its random draws are keyed by (seed, epoch, draw)
  SampleOut out;
  Scratch* s = nullptr;
  StageTimer* timer = nullptr;
  RamRewrite* rewrite = nullptr;  // cache="ram"'s rewrite (may be null)
  // cache="decoded": the parts are the stored forms; the image's is
  // stored_width x stored_height (the full-resolution image is
  // full_width x full_height while the forms are made).
  bool stored = false;
  int stored_width = 0, stored_height = 0;
  int full_width = 0, full_height = 0;
  Geometry geo;  // the owner's plan (set by its plan())

  // Field f's bytes: its part, as read or as stored.
  std::pair<const std::uint8_t*, std::size_t> bytes(const FieldSpec& f) const {
    if (f.part < 0) return {nullptr, 0};
    return s->part[static_cast<std::size_t>(f.part)];
  }
};

// Making a field: what its kind's make() and declare() are given.
struct FieldSetup {
  const Source& source;
  const LoaderOptions& opt;
  SampleSpec& spec;
  FieldSpec& field;
  int index = 0;                   // its position in the schema
  const FieldOp* owner = nullptr;  // the schema's geometry owner, made before the other fields (null: none)

  // Adds an output (`per_record` entries of `dims` items of `item` bytes);
  // `own`: it is the field's first output (FieldSpec::output).
  void add_output(std::string name, std::string descr, std::vector<std::int64_t> dims, std::size_t item,
                  int per_record = 1, bool own = true);
};

// A field of the schema, of one kind. Immutable once made: any number of
// workers use it at once, each with its own scratch.
class FieldOp {
 public:
  explicit FieldOp(const FieldSetup& setup)
      : source_(setup.source), opt_(setup.opt), spec_(setup.spec), f_(setup.field), index_(setup.index) {}
  FieldOp(const FieldOp&) = delete;
  FieldOp& operator=(const FieldOp&) = delete;
  virtual ~FieldOp() = default;

  // Declares its outputs; called in schema order once every field is made.
  virtual void declare(FieldSetup& setup) = 0;
  // A worker's state for this field (null: none).
  virtual std::unique_ptr<FieldScratch> scratch() const { return nullptr; }
  // What a worker's scratch for it will hold (FieldScratch::bytes()),
  // estimated from one record's bytes of the field (n of them; none: the
  // field reads none, or they could not be read): the loader reserves its
  // workers' decode_scratch from it before the caches fill. By default
  // twice its bytes and its first output's; kinds that decode say what
  // they decode to (image, mask, raster).
  virtual std::uint64_t scratch_estimate(const std::uint8_t* bytes, std::size_t n) const;

  // Owners: open the reference member, plan the sample's geometry from
  // (seed, epoch, draw) into x->geo, and mark the stages they ran on
  // x->timer (a decode, a read). Errors name the field.
  virtual Status plan(Sample* /*x*/, FieldScratch* /*s*/) const { return Status::Ok(); }
  // Owners: the sample's draws as JSON for batch provenance
  // (Loader::batch_provenance): the plan drawn exactly as plan() draws it,
  // from (seed, epoch, draw) and what the plan needs of the reference (an
  // image's header: no pixel decoded; a volume's header, and its label volume
  // for RandCropByPosNegLabel). Other kinds draw nothing: "null".
  virtual Status describe(Sample* /*x*/, FieldScratch* /*s*/, std::string* json) const {
    *json = "null";
    return Status::Ok();
  }
  // Owners: what their followers' outputs are shaped after: the sample's
  // spatial size (Image: {height, width}; Volume: the patch) and the batch
  // entries per sample (a volume's patches).
  virtual std::vector<std::int64_t> spatial_dims() const { return {}; }
  virtual int entries() const { return 1; }
  // Owners: the sample is done (made or failed): let go of what plan() held
  // (a volume's mappings and cache entries).
  virtual void finish(FieldScratch* /*s*/) const {}

  // The live path: the field's outputs for sample x under the owner's plan.
  virtual Status apply(const Sample& x, FieldScratch* s) const = 0;
  // A failed sample: what it leaves in the field's outputs (a label: -1).
  virtual void fail(SampleOut /*out*/) const {}

  // cache="decoded", the owner first: opens its reference and sets the
  // stored frame (x->stored_width/height, x->full_width/height); with
  // `may_defer`, *deferred when the stored form is the reference as is (the
  // sample is made live now, stored later).
  virtual Status prepare_store(Sample* /*x*/, FieldScratch* /*s*/, bool /*may_defer*/, bool* /*deferred*/) const {
    return Status::Ok();
  }
  // cache="decoded": appends the field's stored form to *out (by default its
  // bytes as read); apply() reads it back with x.stored.
  virtual Status store(const Sample& x, FieldScratch* s, std::vector<std::uint8_t>* out) const;
  // cache="auto": how its stored form's size differs from its bytes' (n of
  // them); false when they cannot be read.
  virtual bool footprint(const std::uint8_t* /*bytes*/, std::size_t /*n*/, RecordFootprint* /*f*/) const {
    return true;
  }

  // Kinds that keep their own cache (volumes): its budget (`all`: every
  // record, as cache="ram"/"decoded" ask), and their stats.
  virtual bool keeps_own_cache() const { return false; }
  virtual void set_own_cache(const std::shared_ptr<MemoryBudget>& /*budget*/, bool /*all*/) {}
  virtual void add_stats(Stats* /*stats*/) const {}
  // LoaderOptions::hook: the field's part of the sample handed to it.
  virtual void hook(const FieldScratch* /*s*/, HookSample* /*out*/) const {}

  const FieldSpec& spec() const { return f_; }

 protected:
  // The field's output k (counted from its first) for sample `out`.
  std::uint8_t* dest(SampleOut out, int k = 0) const { return detail::dest(spec_, out, f_.output + k); }
  const OutputSpec& output(int k = 0) const { return spec_.outputs[static_cast<std::size_t>(f_.output + k)]; }
  // An error naming the field (with a user's schema; the default schema's
  // messages are the file's reason alone).
  Status tag(const Status& st) const {
    return st.ok() || !spec_.named ? st : Status(st.code(), field_name(f_) + ": " + st.message());
  }
  // "field 'seg' (mask)".
  std::string what() const;
  // The first readable one of the first `records` records' bytes: `probe`
  // returns ok once it learned what it needs. Throws Error(kInvalidArgument)
  // saying what could not be learned (`unknown`) when none is readable.
  template <typename Probe>
  void probe_first(std::size_t records, const std::string& unknown, Probe&& probe) const;

  const Source& source_;
  const LoaderOptions& opt_;
  const SampleSpec& spec_;
  const FieldSpec& f_;
  const int index_;
};

template <typename Probe>
void FieldOp::probe_first(std::size_t records, const std::string& unknown, Probe&& probe) const {
  std::vector<std::uint8_t> bytes;
  std::string first_error;
  for (std::size_t r = 0; r < std::min(source_.size(), records); ++r) {
    Status st = read_field(source_, f_, r, &bytes);
    if (st.ok()) st = probe(bytes);
    if (st.ok()) return;
    if (first_error.empty()) first_error = "record " + std::to_string(r) + " '" + source_.key(r) + "': " + st.message();
  }
  invalid(field_name(f_) + " (" + field_def(f_.field.kind).name + "): none of the first records has a readable one, so its " +
          unknown + " is unknown; " + first_error);
}

}  // namespace stoker::detail
