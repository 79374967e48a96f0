#include "sample/sample_maker.h"

#include <algorithm>
#include <atomic>
#include <new>
#include <stdexcept>

#include "decode/decode.h"
#include "decode/npy.h"
#include "sample/fields/field.h"

namespace stoker::detail {
namespace {

std::atomic<std::int64_t> g_throw_rec{-1};
std::atomic<bool> g_throw_bad_alloc{false};

// fn(i, bytes, n): field i's part of a record read whole (read_record's
// `all` and `ends`), for each field that reads one.
template <typename Fn>
void each_part(const SampleSpec& spec, const std::vector<std::uint8_t>& all, const std::vector<std::uint64_t>& ends,
               Fn&& fn) {
  for (std::size_t i = 0; i < spec.fields.size(); ++i) {
    const int part = spec.fields[i].part;
    if (part < 0) continue;
    const auto k = static_cast<std::size_t>(part);
    const std::uint64_t begin = k == 0 ? 0 : ends[k - 1], end = ends.empty() ? all.size() : ends[k];
    fn(i, all.data() + begin, static_cast<std::size_t>(end - begin));
  }
}

}  // namespace

namespace testing {
void throw_in_sample(std::int64_t rec, bool bad_alloc) {
  g_throw_bad_alloc.store(bad_alloc, std::memory_order_relaxed);
  g_throw_rec.store(rec, std::memory_order_release);
}
}  // namespace testing

SampleMaker::SampleMaker(const Source& source, const LoaderOptions& options, SampleCache* cache)
    : source_(source), opt_(options), cache_(cache) {
  resolve_schema();
  if (opt_.hook && (spec_.named || spec_.arrays || spec_.image < 0)) {
    invalid("a Python stage (a transform stoker has no kernel for, target_transform, collate_fn) applies to the "
            "default schema of images and labels, not to fields, views or .npy arrays");
  }
  make_fields();
  place_outputs();
}

SampleMaker::~SampleMaker() = default;

// The schema the options give, or the default one; where each field's bytes
// come from (its kind says what it reads without a member).
void SampleMaker::resolve_schema() {
  std::vector<Field> fields = opt_.fields;
  spec_.named = !fields.empty() || !opt_.views.empty();
  if (fields.empty()) {
    decide_default_schema();
    fields = {spec_.arrays ? TensorField("array") : ImageField("image"), LabelField("label")};
  }
  for (std::size_t i = 0; i < fields.size(); ++i) {
    FieldSpec f;
    f.field = fields[i];
    const FieldDef& def = field_def(f.field.kind);
    const std::string& m = f.field.member;
    if (m.empty() && (def.member == DefaultMember::kRecord || (!spec_.named && i == 0))) {
      f.primary = true;  // the default schema's image or array is the record itself
    } else if (m.rfind("json:", 0) == 0 && def.json_member) {
      f.member = "json";
      f.json_key = m.substr(5);
    } else if (!m.empty()) {
      f.member = m;
    } else if (def.member == DefaultMember::kOwnName) {
      f.member = f.field.name;
    }
    if (!f.field.folder.empty()) {
      f.member.clear();
      f.folder = std::make_shared<const PairedFolder>(f.field.folder);
    }
    if (!def.reads_itself && (f.primary || !f.member.empty() || f.folder)) f.part = spec_.parts++;
    // The owner the maker reads as a part is the image (the cache service's).
    if (def.role == Role::kOwner && f.part >= 0) spec_.image = static_cast<int>(i);
    spec_.fields.push_back(std::move(f));
  }
}

// The default schema: images, or (kAuto, kArray) .npy arrays when record 0
// is a .npy that is not a uint8 image (or any .npy under kArray).
void SampleMaker::decide_default_schema() {
  if (opt_.kind == SampleKind::kImage) return;
  if (opt_.kind == SampleKind::kAuto) {  // no read at start-up when the name says "image"
    const FormatInfo* f = format_of_name(source_.key(0));
    if (f && f->format != Format::kNpy) return;
  }
  std::vector<std::uint8_t> bytes;
  NpyHeader h;
  const bool npy = source_.read(0, &bytes).ok() && sniff_format(bytes.data(), bytes.size()) == Format::kNpy &&
                   parse_npy_header(bytes.data(), bytes.size(), &h).ok();
  if (!npy) {
    if (opt_.kind == SampleKind::kArray) {
      invalid("kind=array: record 0 '" + source_.key(0) + "' is not a readable .npy");
    }
    return;
  }
  const bool image_like = (h.descr == "|u1" || h.descr == "<u1") && !h.fortran_order &&
                          (h.shape.size() == 2 || (h.shape.size() == 3 && (h.shape[2] == 1 || h.shape[2] == 3 ||
                                                                            h.shape[2] == 4 || h.shape[0] == 1 ||
                                                                            h.shape[0] == 3)));
  if (opt_.kind == SampleKind::kAuto && image_like) return;
  if (h.fortran_order) invalid("kind=array: record 0 '" + source_.key(0) + "' is in Fortran order");
  if (!opt_.transforms.empty()) {
    invalid("transforms apply to images; the samples are .npy arrays (dtype " + h.descr +
            ") batched as they are: pass transforms=[] (or kind='image' for uint8 image arrays)");
  }
  spec_.arrays = true;
}

// Each field made by its kind: the geometry owner first (the others follow
// it), then the rest in schema order; then the outputs, in schema order.
void SampleMaker::make_fields() {
  const std::size_t n = spec_.fields.size();
  fields_.resize(n);
  for (std::size_t i = 0; i < n && owner_ < 0; ++i) {
    if (field_def(spec_.fields[i].field.kind).role == Role::kOwner) owner_ = static_cast<int>(i);
  }
  const FieldOp* owner = nullptr;
  auto setup = [&](std::size_t i) { return FieldSetup{source_, opt_, spec_, spec_.fields[i], static_cast<int>(i), owner}; };
  if (owner_ >= 0) {
    FieldSetup s = setup(static_cast<std::size_t>(owner_));
    fields_[static_cast<std::size_t>(owner_)] = field_def(s.field.field.kind).make(s);
    owner = fields_[static_cast<std::size_t>(owner_)].get();
  }
  stores_ = owner && !owner->keeps_own_cache();
  if (opt_.cache.mode == Cache::kDecoded && !owner) {
    invalid(spec_.arrays ? "cache='decoded' applies to images; use cache='ram' for arrays"
                         : "cache='decoded' keeps decoded images, and the schema has no image field: use cache='ram'");
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (static_cast<int>(i) == owner_) continue;
    FieldSetup s = setup(i);
    const FieldDef& def = field_def(s.field.field.kind);
    if (def.role == Role::kOwner) invalid("field '" + s.field.field.name + "': a schema has one geometry owner");
    if (def.role == Role::kFollower && (!owner || owner->spec().field.kind != def.follows)) {
      invalid("field '" + s.field.field.name + "' (" + def.name + ") " + def.without_owner);
    }
    fields_[i] = def.make(s);
  }
  for (std::size_t i = 0; i < n; ++i) {
    FieldSetup s = setup(i);
    fields_[i]->declare(s);
  }
}

// Each output's region of the batch buffer, 64-byte aligned, in order.
void SampleMaker::place_outputs() {
  const OutputSpec& o0 = spec_.outputs.front();
  spec_.bytes = o0.bytes;
  spec_.dims = o0.dims;
  spec_.descr = o0.descr;
  std::size_t offset = 0;
  for (OutputSpec& o : spec_.outputs) {
    o.offset = offset;
    offset += (o.bytes * opt_.batch_size + 63) / 64 * 64;
  }
  spec_.batch_bytes = offset;
}

// A field's error names the field (with a user's schema; the default
// schema's messages are the file's reason alone, as they always were).
Status SampleMaker::tag(const FieldSpec& f, const Status& st) const {
  return st.ok() || !spec_.named ? st : Status(st.code(), field_name(f) + ": " + st.message());
}

void SampleMaker::init_scratch(Scratch* s) const {
  s->fields.clear();
  for (const auto& f : fields_) s->fields.push_back(f->scratch());
  s->fields_for = this;
}

Status SampleMaker::make(std::uint32_t rec, std::uint64_t draw, std::uint64_t seed, std::uint64_t epoch, SampleOut out,
                         Scratch* s) const noexcept {
  Status st;
  // NOTE: the exception barrier: nothing thrown while making a sample may
  // reach the worker thread's top (std::terminate would end the training
  // process, Python and all); it becomes this sample's error, counted and
  // handled under the user's on_corrupt policy like a corrupt file.
  try {
    if (g_throw_rec.load(std::memory_order_acquire) == static_cast<std::int64_t>(rec)) {
      if (g_throw_bad_alloc.load(std::memory_order_relaxed)) throw std::bad_alloc();
      throw std::runtime_error("injected by testing::throw_in_sample");
    }
    if (s->fields_for != this) init_scratch(s);
    StageTimer timer(opt_.stage_timing, s, rec);
    Sample x{.rec = rec, .draw = draw, .seed = seed, .epoch = epoch, .out = out, .s = s, .timer = &timer,
             .rewrite = rewrite_, .geo = {}};
    st = run(&x);
    if (owner_ >= 0) fields_[static_cast<std::size_t>(owner_)]->finish(s->fields[static_cast<std::size_t>(owner_)].get());
  } catch (const std::bad_alloc&) {
    st = Status::ResourceExhausted("out of memory while making the sample");
  } catch (const std::exception& e) {
    st = Status::Internal(std::string("exception while making the sample: ") + e.what());
  } catch (...) {
    st = Status::Internal("unknown exception while making the sample");
  }
  if (!st.ok()) {
    for (const auto& f : fields_) f->fail(out);
  }
  return st;
}

Status SampleMaker::describe(std::uint32_t rec, std::uint64_t draw, std::uint64_t seed, std::uint64_t epoch, Scratch* s,
                             std::string* json) const noexcept {
  *json = "null";
  if (owner_ < 0) return Status::Ok();
  try {
    if (s->fields_for != this) init_scratch(s);
    s->members.resize(static_cast<std::size_t>(spec_.parts));
    s->part.resize(static_cast<std::size_t>(spec_.parts));
    const auto o = static_cast<std::size_t>(owner_);
    const FieldSpec& f = spec_.fields[o];
    if (f.part >= 0) {  // the owner's member alone (a volume opens its own)
      auto& buf = s->members[static_cast<std::size_t>(f.part)];
      Status st = read_field(source_, f, rec, &buf);
      if (!st.ok()) return tag(f, st);
      s->part[static_cast<std::size_t>(f.part)] = {buf.data(), buf.size()};
    }
    StageTimer timer(false, s, rec);
    Sample x{.rec = rec, .draw = draw, .seed = seed, .epoch = epoch, .out = {}, .s = s, .timer = &timer, .geo = {}};
    Status st = fields_[o]->describe(&x, s->fields[o].get(), json);
    fields_[o]->finish(s->fields[o].get());
    return st;
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted("out of memory while describing the sample");
  } catch (const std::exception& e) {
    return Status::Internal(std::string("exception while describing the sample: ") + e.what());
  } catch (...) {
    return Status::Internal("unknown exception while describing the sample");
  }
}

// The sample loop: the record's members (or their stored forms), the
// owner's plan, then every field under it.
Status SampleMaker::run(Sample* x) const {
  // NOTE: opt_.cache is read here, not at construction: cache="auto" is
  // resolved by the loader's cache service after the maker is made.
  const bool decoded = stores_ && opt_.cache.mode == Cache::kDecoded;
  Status st = decoded ? read_stored(x) : Status::Ok();
  if (!decoded) {
    std::size_t size = 0;
    st = read_parts(x->rec, x->s, &size);
    x->timer->read(size);
  }
  if (!st.ok()) return st;
  if (owner_ >= 0) {
    const auto o = static_cast<std::size_t>(owner_);
    st = fields_[o]->plan(x, x->s->fields[o].get());
    if (!st.ok()) return st;
  } else {
    x->timer->decode();  // no geometry: labels and tensors
  }
  for (std::size_t i = 0; i < fields_.size() && st.ok(); ++i) {
    st = tag(spec_.fields[i], fields_[i]->apply(*x, x->s->fields[i].get()));
  }
  x->timer->transform();
  return st;
}

Status SampleMaker::read_record(std::uint32_t rec, std::vector<std::uint8_t>* bytes,
                                std::vector<std::uint64_t>* ends) const {
  bytes->clear();
  ends->clear();
  if (spec_.parts == 1) {
    const FieldSpec& f = *std::find_if(spec_.fields.begin(), spec_.fields.end(), [](const FieldSpec& x) { return x.part == 0; });
    return tag(f, read_field(source_, f, rec, bytes));
  }
  std::vector<std::uint8_t> buf;
  for (const FieldSpec& f : spec_.fields) {
    if (f.part < 0) continue;
    Status st = read_field(source_, f, rec, &buf);
    if (!st.ok()) return tag(f, st);
    bytes->insert(bytes->end(), buf.begin(), buf.end());
    ends->push_back(bytes->size());
  }
  return Status::Ok();
}

RecordFootprint SampleMaker::footprint(std::uint32_t rec) const {
  RecordFootprint f;
  std::vector<std::uint8_t> bytes;
  std::vector<std::uint64_t> ends;
  if (!read_record(rec, &bytes, &ends).ok()) return f;
  f.encoded = bytes.size();
  f.decoded = bytes.size();
  f.ok = true;
  each_part(spec_, bytes, ends, [&](std::size_t i, const std::uint8_t* p, std::size_t n) {
    f.ok = f.ok && fields_[i]->footprint(p, n, &f);
  });
  return f;
}

std::uint64_t SampleMaker::scratch_estimate(std::uint32_t rec) const {
  std::vector<std::uint8_t> bytes;
  std::vector<std::uint64_t> ends;
  const bool read = read_record(rec, &bytes, &ends).ok();
  // The record's bytes: its members and the cache's bundle (cache="ram": and the rewrite's copies).
  std::uint64_t n = read ? bytes.size() * (opt_.cache.mode == Cache::kRam ? 4 : 2) : 0;
  for (std::size_t i = 0; i < fields_.size(); ++i) {
    if (!read || spec_.fields[i].part < 0) n += fields_[i]->scratch_estimate(nullptr, 0);
  }
  if (read) {
    each_part(spec_, bytes, ends, [&](std::size_t i, const std::uint8_t* p, std::size_t k) {
      n += fields_[i]->scratch_estimate(p, k);
    });
  }
  return n;
}

// s->part[k]: part k of a record kept as one buffer (`ends`: each part's
// end; empty for one part).
void SampleMaker::point_parts(const std::uint8_t* bytes, std::size_t size, std::span<const std::uint64_t> ends,
                              Scratch* s) const {
  s->part.resize(static_cast<std::size_t>(spec_.parts));
  std::uint64_t begin = 0;
  for (int k = 0; k < spec_.parts; ++k) {
    const std::uint64_t end = spec_.parts == 1 ? size : ends[static_cast<std::size_t>(k)];
    s->part[static_cast<std::size_t>(k)] = {bytes + begin, end - begin};
    begin = end;
  }
}

Status SampleMaker::read_parts(std::uint32_t rec, Scratch* s, std::size_t* bytes_read, bool look_up) const {
  s->part.resize(static_cast<std::size_t>(spec_.parts));
  *bytes_read = 0;
  s->hit = cache_ && look_up ? cache_->find(rec) : SampleCache::EntryPtr();  // held while the sample uses its bytes
  s->grid = false;
  if (s->hit && rewrite_) s->hit = rewrite_->on_hit(rec, std::move(s->hit), &s->rewrite);
  if (const SampleCache::Entry* hit = s->hit.get()) {
    s->grid = hit->grid;
    point_parts(hit->data, hit->size, hit->ends, s);
    *bytes_read = hit->size;
    return Status::Ok();
  }
  if (spec_.parts == 1) {  // one member: no copy into a bundle
    const FieldSpec& f = *std::find_if(spec_.fields.begin(), spec_.fields.end(), [](const FieldSpec& x) { return x.part == 0; });
    Status st = read_field(source_, f, rec, &s->file);
    *bytes_read = s->file.size();
    if (!st.ok()) return tag(f, st);
    s->part[0] = {s->file.data(), s->file.size()};
    if (rewrite_) {
      if (rewrite_->on_miss(rec, s->file.data(), s->file.size(), nullptr, &s->rewrite)) {
        s->part[0] = {s->rewrite.record.data(), s->rewrite.record.size()};
        s->grid = true;
      }
    } else if (cache_ && opt_.cache.mode == Cache::kRam) {
      cache_->insert(rec, s->file.data(), s->file.size());
    }
    return Status::Ok();
  }
  s->members.resize(static_cast<std::size_t>(spec_.parts));
  for (const FieldSpec& f : spec_.fields) {
    if (f.part < 0) continue;
    auto& buf = s->members[static_cast<std::size_t>(f.part)];
    Status st = read_field(source_, f, rec, &buf);
    *bytes_read += buf.size();
    if (!st.ok()) return tag(f, st);
    s->part[static_cast<std::size_t>(f.part)] = {buf.data(), buf.size()};
  }
  if (cache_ && opt_.cache.mode == Cache::kRam) {
    s->bundle.clear();
    s->ends.clear();
    for (const auto& m : s->members) {
      s->bundle.insert(s->bundle.end(), m.begin(), m.end());
      s->ends.push_back(s->bundle.size());
    }
    if (!rewrite_) {
      cache_->insert(rec, s->bundle.data(), s->bundle.size(), 0, 0, &s->ends);
    } else if (rewrite_->on_miss(rec, s->bundle.data(), s->bundle.size(), &s->ends, &s->rewrite)) {
      point_parts(s->rewrite.record.data(), s->rewrite.record.size(), s->rewrite.ends, s);
      s->grid = true;
    }
  }
  return Status::Ok();
}

// cache=kDecoded: every sample is made from its stored forms, made once and
// kept when the budget allows (each kind's own: the image with its shorter
// side at most cache_max_side, masks resized with it, boxes rescaled, other
// members as read), so the output does not depend on whether it was a hit.
Status SampleMaker::read_stored(Sample* x) const {
  Scratch* s = x->s;
  s->hit = cache_ ? cache_->find(x->rec) : SampleCache::EntryPtr();
  if (const SampleCache::Entry* hit = s->hit.get()) {
    point_parts(hit->data, hit->size, hit->ends, s);
    x->stored = true;
    x->stored_width = hit->width;
    x->stored_height = hit->height;
    return Status::Ok();
  }
  std::size_t size = 0;
  Status st = read_parts(x->rec, s, &size, /*look_up=*/false);  // just missed: not counted twice
  x->timer->read(size);
  if (!st.ok()) return st;
  // NOTE: before the loader's first batch, an image the cache would keep as
  // decoded (not downscaled) is made from its region alone, exactly as the
  // stored form would give it (decode_scale exact: a region decode is the
  // crop of the full decode): the first batch then costs what it costs
  // without the cache. The record is stored later in the first epoch, by
  // fill_deferred(), so the second epoch does not pay for it.
  const bool may_defer = first_batch_ && first_batch_->load(std::memory_order_relaxed) && spec_.parts == 1 &&
                         opt_.decode_scale == DecodeScale::kExact;
  bool deferred = false;
  st = store(x, may_defer, &deferred);
  if (!st.ok()) {
    x->timer->decode();
    return st;
  }
  if (deferred) {
    if (cache_) {
      MutexLock lock(deferred_mu_);
      deferred_.push_back(x->rec);
      has_deferred_.store(true, std::memory_order_relaxed);
    }
    return Status::Ok();  // the live path, from the parts as read
  }
  // From here on the stored form is used, hit or not.
  point_parts(s->bundle.data(), s->bundle.size(), s->ends, s);
  x->stored = true;
  return Status::Ok();
}

Status SampleMaker::store(Sample* x, bool may_defer, bool* deferred) const {
  Scratch* s = x->s;
  const auto o = static_cast<std::size_t>(owner_);
  Status st = fields_[o]->prepare_store(x, s->fields[o].get(), may_defer, deferred);
  if (!st.ok() || *deferred) return st;
  s->bundle.clear();
  s->ends.clear();
  for (int k = 0; k < spec_.parts; ++k) {
    for (std::size_t i = 0; i < fields_.size(); ++i) {
      if (spec_.fields[i].part != k) continue;
      st = fields_[i]->store(*x, s->fields[i].get(), &s->bundle);
      if (!st.ok()) return tag(spec_.fields[i], st);
      s->ends.push_back(s->bundle.size());
    }
  }
  if (cache_) {
    cache_->insert(x->rec, s->bundle.data(), s->bundle.size(), x->stored_width, x->stored_height,
                   spec_.parts > 1 ? &s->ends : nullptr);
  }
  return Status::Ok();
}

bool SampleMaker::fill_deferred(Scratch* s) const {
  if (!has_deferred_.load(std::memory_order_relaxed) || (first_batch_ && first_batch_->load(std::memory_order_relaxed))) {
    return false;
  }
  std::uint32_t rec = 0;
  {
    MutexLock lock(deferred_mu_);
    if (deferred_.empty()) return false;
    rec = deferred_.back();
    deferred_.pop_back();
    if (deferred_.empty()) has_deferred_.store(false, std::memory_order_relaxed);
  }
  if (cache_->contains(rec)) return true;
  if (s->fields_for != this) init_scratch(s);
  Sample x;
  x.rec = rec;
  x.s = s;
  std::size_t size = 0;
  bool deferred = false;
  // NOTE: an error leaves the record out; the sample that next reads it
  // meets the same error and counts it under on_corrupt, as without the
  // cache.
  if (read_parts(rec, s, &size, /*look_up=*/false).ok()) (void)store(&x, /*may_defer=*/false, &deferred);
  return true;
}

void SampleMaker::hook_sample(std::uint32_t rec, const Scratch& s, HookSample* out) const {
  out->record = rec;
  out->label = source_.label(rec);
  for (std::size_t i = 0; i < fields_.size(); ++i) fields_[i]->hook(s.fields[i].get(), out);
}

bool SampleMaker::keeps_own_cache() const {
  return owner_ >= 0 && fields_[static_cast<std::size_t>(owner_)]->keeps_own_cache();
}
void SampleMaker::set_own_cache(const std::shared_ptr<MemoryBudget>& budget, bool all) {
  for (const auto& f : fields_) f->set_own_cache(budget, all);
}
void SampleMaker::add_stats(Stats* stats) const {
  for (const auto& f : fields_) f->add_stats(stats);
}

}  // namespace stoker::detail
