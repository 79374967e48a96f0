// One sample from one record, without threads. The schema's fields are made
// by their kinds (sample/fields/: one definition per kind); make() is one
// loop for every schema: read the record's members (or a cache entry), let
// the geometry owner (Image or Volume) plan from (seed, epoch, record), then
// apply each field with its own kernel into its place in a batch buffer.
// The loader's workers each own a Scratch and call make(); tests call it
// directly.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cache/auto_cache.h"
#include "cache/ram_rewrite.h"
#include "cache/sample_cache.h"
#include "sample/sample.h"
#include "stoker/hook.h"
#include "stoker/options.h"
#include "stoker/source.h"
#include "stoker/stats.h"
#include "util/thread_annotations.h"

namespace stoker::detail {

class FieldOp;
struct Sample;

class SampleMaker {
 public:
  // Decides the spec (reading record 0 when the kind is not evident from its
  // name, or a field's dtype or shape is needed). Throws
  // Error(kInvalidArgument) for options that cannot apply. `cache` (may be
  // null) is shared by every worker; source and cache must outlive the maker.
  SampleMaker(const Source& source, const LoaderOptions& options, SampleCache* cache);
  ~SampleMaker();

  const SampleSpec& spec() const { return spec_; }
  // Output k's place for sample `out.pos`.
  std::uint8_t* dest(SampleOut out, int k) const { return detail::dest(spec_, out, k); }

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

  // Record `rec`'s draws for `epoch` as make() would draw them (keyed by
  // (seed, epoch, draw)), as JSON into *json: the geometry owner's plan
  // (FieldOp::describe), "null" for a schema without one. Reads the owner's
  // member alone (never the caches), decodes no pixels. Never throws; a record whose plan
  // cannot be drawn (unreadable, a bad header) is its error, naming the field.
  Status describe(std::uint32_t rec, std::uint64_t draw, std::uint64_t seed, std::uint64_t epoch, Scratch* s,
                  std::string* json) const noexcept;

  // LoaderOptions::hook: the sample make() just made into `s`, as the hook
  // takes it (viewing s's buffers).
  void hook_sample(std::uint32_t rec, const Scratch& s, HookSample* out) const;

  // cache="auto": record `rec`'s footprint (cache/auto_cache.h).
  RecordFootprint footprint(std::uint32_t rec) const;
  // What a worker's Scratch will hold (Scratch::bytes()), estimated from
  // record `rec` (each field kind's FieldOp::scratch_estimate): the loader
  // reserves its workers' decode_scratch with it. Reads the record; one that
  // cannot be read leaves each kind its estimate without bytes.
  std::uint64_t scratch_estimate(std::uint32_t rec) const;
  // The cache the workers share and, with cache="ram", its rewrite (set
  // once, before any make(); either may be null).
  void set_cache(SampleCache* cache, RamRewrite* rewrite) {
    cache_ = cache;
    rewrite_ = rewrite;
  }
  // cache=kDecoded: true until the loader's first batch is out (see
  // read_stored); null: never.
  void set_first_batch_flag(const std::atomic<bool>* before_first_batch) { first_batch_ = before_first_batch; }
  // cache=kDecoded: once the first batch is out, stores one of the records
  // the first batch made without storing (read_stored), so the next epoch
  // finds them; false when none is left. A worker calls it after its task,
  // so the first epoch pays for them, not the second.
  bool fill_deferred(Scratch* s) const;

  // Every member the schema reads of record `rec`, concatenated into *bytes,
  // part k ending at (*ends)[k]: what cache="ram" keeps (the preload uses it).
  Status read_record(std::uint32_t rec, std::vector<std::uint8_t>* bytes, std::vector<std::uint64_t>* ends) const;

  // A schema whose fields keep their own cache (volumes): the sample cache
  // has no part in it; set_own_cache() gives it the loader's budget (`all`:
  // keep every record, as cache="ram"/"decoded" ask). add_stats(): the
  // fields' own stats (stats()["volume"]).
  bool keeps_own_cache() const;
  void set_own_cache(const std::shared_ptr<MemoryBudget>& budget, bool all);
  void add_stats(Stats* stats) const;

 private:
  void resolve_schema();
  void decide_default_schema();
  void make_fields();
  void place_outputs();
  // The loop: members, the owner's plan, each field.
  Status run(Sample* x) const;
  // Points s->part at each member's bytes: a cache entry's, or read now (and
  // offered to the cache). look_up false: the cache was just asked (no
  // second look-up, no second miss counted).
  Status read_parts(std::uint32_t rec, Scratch* s, std::size_t* bytes_read, bool look_up = true) const;
  // cache=kDecoded: the parts' stored forms, from the cache or made now.
  Status read_stored(Sample* x) const;
  // cache=kDecoded: the stored forms of the parts in hand into s->bundle
  // (part order), offered to the cache; see FieldOp::prepare_store.
  Status store(Sample* x, bool may_defer, bool* deferred) const;
  void point_parts(const std::uint8_t* bytes, std::size_t size, std::span<const std::uint64_t> ends, Scratch* s) const;
  void init_scratch(Scratch* s) const;
  Status tag(const FieldSpec& f, const Status& st) const;

  const Source& source_;
  const LoaderOptions& opt_;
  SampleCache* cache_;
  RamRewrite* rewrite_ = nullptr;
  const std::atomic<bool>* first_batch_ = nullptr;
  mutable Mutex deferred_mu_;
  mutable std::vector<std::uint32_t> deferred_ GUARDED_BY(deferred_mu_);  // see fill_deferred
  mutable std::atomic<bool> has_deferred_{false};
  SampleSpec spec_;
  std::vector<std::unique_ptr<FieldOp>> fields_;  // by schema position
  int owner_ = -1;                                // the geometry owner's position, if any
  bool stores_ = false;                           // the owner has a stored form (cache=kDecoded applies)
};

namespace testing {
// Test hook: make() throws while making record `rec` (std::bad_alloc when
// bad_alloc, else std::runtime_error), until cleared with rec = -1. For
// tests of the exception barrier; costs one relaxed load per sample.
void throw_in_sample(std::int64_t rec, bool bad_alloc = false);
}  // namespace testing

}  // namespace stoker::detail
