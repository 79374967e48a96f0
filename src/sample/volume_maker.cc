#include "sample/volume_maker.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <utility>

#include "order/rng.h"
#include "sample/sample_maker.h"
#include "source/mapped_range.h"
#include "transform/volume_defs.h"
#include "transform/volume_resample.h"
#include "util/util.h"

namespace stoker::detail {
namespace {

// Records read at construction to learn channels and dtypes.
constexpr std::size_t kProbeRecords = 8;

// Inflates a gzipped volume file whole into *out (its voxels at
// out->h.data_offset of out->data): see inflate_gzip_volume.
Status inflate_volume(const std::uint8_t* data, std::size_t n, std::uint64_t max_voxels, VolumeEntry* out) {
  return inflate_gzip_volume(data, n, max_voxels, &out->h, &out->data);
}

}  // namespace

// One field of the record in hand: where its voxels are.
struct VolumeMaker::Opened {
  MappedRange map;
  std::shared_ptr<const VolumeEntry> entry;  // a cache entry or an inflated volume
  VolumeView view;
  std::string where;  // the file, for messages
  std::int64_t inflate_ns = 0;  // spent inflating it
  bool memory = false;  // voxels in memory (a cache entry, an inflated or a whole read): patches read no file
};

VolumeMaker::VolumeMaker(const Source& source, const LoaderOptions& opt, std::vector<FieldSpec>* fields,
                         ReadField read, const AddOutput& add_output)
    : source_(source), opt_(opt), fields_(*fields), read_(std::move(read)) {
  tty_ = ::isatty(2) != 0;
  progress_ = opt.progress == Progress::kOn || (opt.progress == Progress::kAuto && tty_);
  // NOTE: set_cache() replaces it with the loader's budget; record 0's probe below may use it.
  cache_ = std::make_unique<VolumeCache>(opt.memory_budget ? opt.memory_budget : default_memory_budget());
  std::vector<std::string> labels;
  for (std::size_t i = 0; i < fields->size(); ++i) {
    const Field& f = (*fields)[i].field;
    if (f.kind == FieldKind::kVolume) volume_field_ = static_cast<int>(i);
    if (f.kind == FieldKind::kLabelVolume) labels.push_back(f.name);
  }
  prog_ = compile_volume_program(opt.volume_transforms, labels);
  for (std::size_t i = 0; i < fields->size(); ++i) {
    if ((*fields)[i].field.kind == FieldKind::kLabelVolume && (*fields)[i].field.name == prog_.label_key) {
      label_field_ = static_cast<int>(i);
    }
  }
  channels_.assign(fields->size(), 1);
  label_u8_.assign(fields->size(), true);
  // Record 0 (or the first readable of the first records) decides the
  // patch size, each field's channels and each label's dtype.
  std::string first_error;
  bool found = false;
  VolumeScratch s;
  s.read.resize(fields->size());
  for (std::size_t r = 0; r < std::min(source.size(), kProbeRecords) && !found; ++r) {
    Status st;
    Shape3 shape{0, 0, 0};
    record0_bytes_ = 0;
    for (std::size_t i = 0; i < fields->size() && st.ok(); ++i) {
      const FieldSpec& f = (*fields)[i];
      if (f.field.kind != FieldKind::kVolume && f.field.kind != FieldKind::kLabelVolume) continue;
      Opened o;
      st = open_field(f, static_cast<int>(i), static_cast<std::uint32_t>(r), &s, &o);
      if (!st.ok()) {
        st = Status(st.code(), "field '" + f.field.name + "': " + st.message());
        break;
      }
      channels_[i] = o.view.h.channels;
      record0_bytes_ += o.view.h.data_bytes;
      if (f.field.kind == FieldKind::kVolume) shape = o.view.h.shape;
      if (static_cast<int>(i) == label_field_) {
        const auto voxels = static_cast<std::uint64_t>(o.view.h.shape[0] * o.view.h.shape[1] * o.view.h.shape[2]);
        record0_index_bytes_ = voxels / 8 + voxels / 128 + sizeof(LabelIndex) + 64;
      }
      if (f.field.kind == FieldKind::kLabelVolume) label_u8_[i] = o.view.h.type == VoxelType::kU8;
    }
    if (st.ok()) {
      std::string why;
      if (!volume_output_shape(prog_.ops, shape, &patch_, &why)) {
        st = Status::InvalidArgument(why);
      } else {
        found = true;
      }
    }
    if (!st.ok() && first_error.empty()) first_error = "record " + std::to_string(r) + " '" + source.key(r) + "': " + st.message();
  }
  if (!found) invalid("volumes: none of the first records could be read to learn the patch size; " + first_error);
  for (const VolumeTransform& t : prog_.ops) {
    const auto* ni = std::get_if<NormalizeIntensity>(&t);
    const int c = channels_[static_cast<std::size_t>(volume_field_)];
    for (const auto* v : {ni ? &ni->subtrahend : nullptr, ni ? &ni->divisor : nullptr}) {
      if (v && v->size() > 1 && static_cast<int>(v->size()) != c) {
        invalid("NormalizeIntensity: " + std::to_string(v->size()) + " values per channel, the volumes have " +
                std::to_string(c) + " channels");
      }
    }
  }
  for (std::size_t i = 0; i < fields->size(); ++i) {
    FieldSpec& f = (*fields)[i];
    const int n = prog_.num_samples;
    const std::vector<std::int64_t> dims = {channels_[i], patch_[0], patch_[1], patch_[2]};
    switch (f.field.kind) {
      case FieldKind::kVolume:
        add_output(&f, f.field.name, "<f4", dims, 4, n);
        add_output(nullptr, f.field.name + "_start", "<i8", {3}, 8, n);
        add_output(nullptr, f.field.name + "_affine", "<f8", {4, 4}, 8, n);
        break;
      case FieldKind::kLabelVolume:
        if (label_u8_[i] && f.field.fill > 255) {
          invalid("field '" + f.field.name + "' (label_volume): fill=" + std::to_string(f.field.fill) +
                  " does not fit its uint8 labels (as record 0's)");
        }
        add_output(&f, f.field.name, label_u8_[i] ? "|u1" : "<i4", dims, label_u8_[i] ? 1 : 4, n);
        break;
      case FieldKind::kLabel:
        add_output(&f, f.field.name, "<i8", {}, 8, n);
        break;
      default:
        invalid("field '" + f.field.name + "': a volume schema holds Volume, LabelVolume and Label fields");
    }
    if (f.field.kind == FieldKind::kLabel && f.part >= 0) {
      invalid("field '" + f.field.name + "' (label): with volumes, a Label is the source's label (no member=)");
    }
  }
}

VolumeMaker::~VolumeMaker() = default;

void VolumeMaker::set_cache(std::uint64_t budget, bool volumes, bool all) {
  if (cache_->budget() != budget) cache_ = std::make_unique<VolumeCache>(budget);  // else record 0's entries stay
  cache_volumes_ = volumes;
  cache_all_ = all;
  // The set's voxels, estimated from record 0's: more than the budget, and
  // only what is worth keeping is kept.
  tight_ = static_cast<double>(record0_bytes_) * static_cast<double>(source_.size()) > static_cast<double>(budget);
  // Label indexes (1/8 + 1/128 byte per voxel) are small and cost a whole label to rebuild: room is kept for them.
  if (label_field_ >= 0) cache_->set_reserve(static_cast<std::uint64_t>(record0_index_bytes_ * 1.25) * source_.size());
}

Status VolumeMaker::hit(std::shared_ptr<const VolumeEntry> e, Opened* o) const {
  hits_.fetch_add(1, std::memory_order_relaxed);
  o->view = {e->data.data(), e->h};
  o->entry = std::move(e);
  o->memory = true;
  return Status();
}

Status VolumeMaker::open_field(const FieldSpec& f, int fi, std::uint32_t rec, VolumeScratch* s, Opened* o) const {
  if (prog_.spacing < 0) return open_raw(f, fi, rec, s, o, false);
  const std::uint64_t key = VolumeCache::key(rec, fi);
  if (auto e = cache_->volume(key)) return hit(std::move(e), o);
  Opened raw;
  Status st = open_raw(f, fi, rec, s, &raw, true);
  if (!st.ok()) return st;
  o->where = raw.where;
  o->inflate_ns = raw.inflate_ns;
  if (!raw.memory) bytes_read_.fetch_add(raw.view.h.data_bytes, std::memory_order_relaxed);
  const std::int64_t t0 = now_ns();
  auto e = std::make_shared<VolumeEntry>();
  const VolumeHeader& h = raw.view.h;
  const Spacing& sp = std::get<Spacing>(prog_.ops[static_cast<std::size_t>(prog_.spacing)]);
  const SpacingPlan plan = spacing_plan(h.shape, h.affine, sp.pixdim);
  const Shape3& os = plan.out_shape;
  const std::uint64_t out_vox = static_cast<std::uint64_t>(os[0] * os[1] * os[2]) * static_cast<std::uint64_t>(h.channels);
  if (out_vox == 0 || out_vox > opt_.max_volume_voxels) {
    return Status::ResourceExhausted("Spacing: the resampled volume " + shape_text(os) + " has " + std::to_string(out_vox) +
                                     " voxels (max_volume_voxels " + std::to_string(opt_.max_volume_voxels) + ")");
  }
  PatchPlan whole;
  whole.start = {0, 0, 0};
  whole.size = h.shape;
  e->h = h;
  e->h.swap = false;
  e->h.scaled = false;
  e->h.shape = os;
  e->h.strides = {os[0] * os[1] * os[2], os[1] * os[2], os[2], 1};
  e->h.data_offset = 0;
  e->h.affine = plan.out_affine;
  const std::size_t in_vox = static_cast<std::size_t>(h.shape[0] * h.shape[1] * h.shape[2] * h.channels);
  if (f.field.kind == FieldKind::kVolume) {
    std::vector<float> in(in_vox);
    Block<float> b{h.channels, h.shape, in.data()};
    gather(raw.view, whole, prog_, {}, 0.0f, &b);
    e->h.type = VoxelType::kF32;
    e->data.resize(out_vox * sizeof(float));
    resample_linear(in.data(), h.channels, h.shape, plan, reinterpret_cast<float*>(e->data.data()));
  } else {
    auto run = [&](auto zero, VoxelType type) {
      using T = decltype(zero);
      std::vector<T> in(in_vox);
      Block<T> b{h.channels, h.shape, in.data()};
      gather_label<T>(raw.view, whole, T{0}, &b);
      e->h.type = type;
      e->data.resize(out_vox * sizeof(T));
      resample_nearest<T>(in.data(), h.channels, h.shape, plan, reinterpret_cast<T*>(e->data.data()));
    };
    if (h.type == VoxelType::kU8) {
      run(std::uint8_t{}, VoxelType::kU8);
    } else {
      run(std::int32_t{}, VoxelType::kI32);
    }
  }
  e->h.data_bytes = e->data.size();
  for (int a = 0; a < 3; ++a) {
    const std::size_t ia = static_cast<std::size_t>(a);
    e->h.spacing[ia] = std::sqrt(plan.out_affine[ia] * plan.out_affine[ia] + plan.out_affine[4 + ia] * plan.out_affine[4 + ia] +
                                 plan.out_affine[8 + ia] * plan.out_affine[8 + ia]);
  }
  resample_ns_.fetch_add(static_cast<std::uint64_t>(now_ns() - t0), std::memory_order_relaxed);
  progress(cache_->put(key, std::shared_ptr<const VolumeEntry>(e)));
  o->entry = e;
  o->view = {e->data.data(), e->h};
  o->memory = true;
  return Status();
}

Status VolumeMaker::open_raw(const FieldSpec& f, int fi, std::uint32_t rec, VolumeScratch* s, Opened* o,
                             bool transient) const {
  const std::uint64_t key = VolumeCache::key(rec, fi);
  if (cache_volumes_ && !transient) {
    if (auto e = cache_->volume(key)) return hit(std::move(e), o);
  }
  // Where the bytes are: a local file (mapped: a patch reads only its pages), else read whole.
  Source::Extent ext;
  bool local = false;
  if (f.folder) {
    std::string path;
    Status st = f.folder->find(source_.relative_key(rec), &path);
    if (!st.ok()) return st;
    ext = {path, 0, UINT64_MAX};
    local = true;
  } else {
    local = source_.member_extent(rec, f.primary ? "" : f.member, &ext);
  }
  const std::uint8_t* data = nullptr;
  std::uint64_t size = 0;
  if (local) {
    Status st = o->map.map(ext.path, ext.offset, ext.size);
    if (!st.ok()) return st;
    data = o->map.data();
    size = o->map.size();
    o->where = ext.path;
  } else {
    std::vector<std::uint8_t>& buf = s->read[static_cast<std::size_t>(fi)];
    Status st = read_(f, rec, &buf);
    if (!st.ok()) return st;
    bytes_read_.fetch_add(buf.size(), std::memory_order_relaxed);
    data = buf.data();
    size = buf.size();
    o->memory = true;
  }
  auto named = [&](const Status& st) {
    return st.ok() || o->where.empty() || f.primary ? st : Status(st.code(), o->where + ": " + st.message());
  };
  if (is_gzip(data, size)) {
    if (cache_volumes_) misses_.fetch_add(1, std::memory_order_relaxed);
    auto e = std::make_shared<VolumeEntry>();
    const std::int64_t t0 = now_ns();
    Status st = inflate_volume(data, size, opt_.max_volume_voxels, e.get());
    if (!st.ok()) return named(st);
    o->inflate_ns = now_ns() - t0;
    inflate_ns_.fetch_add(static_cast<std::uint64_t>(o->inflate_ns), std::memory_order_relaxed);
    inflate_bytes_.fetch_add(e->data.size(), std::memory_order_relaxed);
    o->map.reset();
    // NOTE: when the set will not fit (tight_), volumes that inflate 8x or more
    // (labels: mostly runs of one value) are not kept: they inflate fast
    // again, and their room holds volumes whose inflation costs more per byte.
    const bool worth = !tight_ || size * 8 > e->data.size();
    if (cache_volumes_ && !transient && worth) progress(cache_->put(key, e));
    o->entry = e;
    o->view = {e->data.data(), e->h};
    o->memory = true;
    return Status();
  }
  VolumeHeader h;
  Status st = parse_volume_header(data, size, size, opt_.max_volume_voxels, &h);
  if (!st.ok()) return named(st);
  if (cache_volumes_ && cache_all_ && !transient) {
    misses_.fetch_add(1, std::memory_order_relaxed);
    auto e = std::make_shared<VolumeEntry>();
    e->h = h;
    e->data.assign(data + h.data_offset, data + h.data_offset + h.data_bytes);
    e->h.data_offset = 0;
    bytes_read_.fetch_add(h.data_bytes, std::memory_order_relaxed);
    o->map.reset();
    cache_->put(key, e);
    o->entry = e;
    o->view = {e->data.data(), e->h};
    o->memory = true;
    return Status();
  }
  o->view = {data, h};
  return Status();
}

Status VolumeMaker::make(std::uint32_t rec, std::uint64_t draw, std::uint64_t seed, std::uint64_t epoch,
                         const SampleSpec& spec, std::uint8_t* batch, std::size_t pos, VolumeScratch* s,
                         StageCounters* counters) const {
  const std::int64_t t0 = counters ? now_ns() : 0;
  const std::size_t nf = fields_.size();
  if (s->read.size() < nf) s->read.resize(nf);
  std::vector<Opened> open(nf);
  Shape3 shape{0, 0, 0};
  for (std::size_t i = 0; i < nf; ++i) {
    const FieldSpec& f = fields_[i];
    if (f.field.kind != FieldKind::kVolume && f.field.kind != FieldKind::kLabelVolume) continue;
    auto tag = [&](const Status& st) { return Status(st.code(), "field '" + f.field.name + "': " + st.message()); };
    Status st = open_field(f, static_cast<int>(i), rec, s, &open[i]);
    if (!st.ok()) return tag(st);
    const VolumeHeader& h = open[i].view.h;
    if (h.channels != channels_[i]) {
      return tag(Status::Corrupt(std::to_string(h.channels) + " channels, record 0's has " +
                                         std::to_string(channels_[i])));
    }
    if (f.field.kind == FieldKind::kVolume) shape = h.shape;
    if (f.field.kind == FieldKind::kLabelVolume && h.scaled) {
      return tag(Status::Unsupported("a label volume with NIfTI scaling (scl_slope " + std::to_string(h.slope) +
                                     ", scl_inter " + std::to_string(h.inter) + "): labels are never scaled"));
    }
  }
  for (std::size_t i = 0; i < nf; ++i) {
    if (fields_[i].field.kind == FieldKind::kLabelVolume && open[i].view.h.shape != shape) {
      return Status::Corrupt("field '" + fields_[i].field.name + "': label volume of spatial shape " +
                                     shape_text(open[i].view.h.shape) + ", its volume's is " + shape_text(shape));
    }
  }
  loads_.fetch_add(1, std::memory_order_relaxed);
  // Stage times: opening (and inflating) the volumes is read (decode), the rest transform.
  const std::int64_t t1 = counters ? now_ns() : 0;
  if (counters) {
    std::int64_t infl = 0;
    for (const Opened& o : open) infl += o.inflate_ns;
    infl = std::min(infl, t1 - t0);
    counters->add_read(t1 - t0 - infl, 0);
    counters->add_decode(infl);
  }
  // The label's foreground index: cached, else built for this load.
  const LabelIndex* index = nullptr;
  std::shared_ptr<const LabelIndex> kept;
  if (label_field_ >= 0) {
    const std::uint64_t key = VolumeCache::key(rec, label_field_);
    kept = cache_->index(key);
    if (!kept) {
      auto x = std::make_shared<LabelIndex>();
      x->build(open[static_cast<std::size_t>(label_field_)].view);
      index_builds_.fetch_add(1, std::memory_order_relaxed);
      if (!open[static_cast<std::size_t>(label_field_)].memory) {
        bytes_read_.fetch_add(open[static_cast<std::size_t>(label_field_)].view.h.data_bytes, std::memory_order_relaxed);
      }
      cache_->put(key, std::shared_ptr<const LabelIndex>(x));
      kept = std::move(x);
    }
    index = kept.get();
  }
  // The pre-crop pad's value for intensity volumes: 0 through the pointwise ops after it.
  float pre_pad_value = 0.0f;
  for (int i : prog_.gathered) {
    if (i > prog_.pre_pad && prog_.pre_pad >= 0) pre_pad_value = pointwise_value(prog_.ops[static_cast<std::size_t>(i)], pre_pad_value);
  }
  const int n = prog_.num_samples;
  PatchPlan plan;
  std::uint64_t read = 0;
  for (int p = 0; p < n; ++p) {
    Rng rng(mix_key(seed, epoch, draw, patch_stream(p)));
    Status st = plan_patch(prog_, shape, patch_, index, &rng, &plan);
    if (!st.ok()) return st;
    if (plan.one_class) one_class_.fetch_add(1, std::memory_order_relaxed);
    const std::size_t entry = pos * static_cast<std::size_t>(n) + static_cast<std::size_t>(p);
    for (std::size_t i = 0; i < nf; ++i) {
      const FieldSpec& f = fields_[i];
      if (f.output < 0) continue;
      const OutputSpec& o = spec.outputs[static_cast<std::size_t>(f.output)];
      const std::size_t one = o.bytes / static_cast<std::size_t>(n);
      std::uint8_t* dst = batch + o.offset + entry * one;
      const VolumeView& v = open[i].view;
      switch (f.field.kind) {
        case FieldKind::kVolume: {
          const bool in_place = !prog_.post_pad;  // the patch has its final size from the gather on
          const std::size_t nvox = static_cast<std::size_t>(plan.size[0] * plan.size[1] * plan.size[2] * v.h.channels);
          if (!in_place && s->f_own.size() < nvox) s->f_own.resize(nvox);
          Block<float> b{v.h.channels, plan.size, in_place ? reinterpret_cast<float*>(dst) : s->f_own.data()};
          const std::uint64_t got = gather(v, plan, prog_, prog_.gathered, pre_pad_value, &b);
          if (!open[i].memory) read += got;  // patches cut from memory read no file
          apply_post(prog_, plan, 0.0f, &b, &s->f_own, &s->f_spare);
          if (reinterpret_cast<std::uint8_t*>(b.data) != dst) std::memcpy(dst, b.data, one);
          // _start and _affine: the patch's first voxel, and the affine moved there.
          const OutputSpec& os = spec.outputs[static_cast<std::size_t>(f.output) + 1];
          auto* start = reinterpret_cast<std::int64_t*>(batch + os.offset + entry * 24);
          for (int a = 0; a < 3; ++a) start[a] = plan.out_start[static_cast<std::size_t>(a)];
          const OutputSpec& oa = spec.outputs[static_cast<std::size_t>(f.output) + 2];
          auto* aff = reinterpret_cast<double*>(batch + oa.offset + entry * 128);
          for (int r = 0; r < 4; ++r) {
            for (int c = 0; c < 4; ++c) aff[r * 4 + c] = v.h.affine[static_cast<std::size_t>(r * 4 + c)];
            if (r < 3) {
              for (int a = 0; a < 3; ++a) {
                aff[r * 4 + 3] += v.h.affine[static_cast<std::size_t>(r * 4 + a)] * static_cast<double>(plan.out_start[static_cast<std::size_t>(a)]);
              }
            }
          }
          break;
        }
        case FieldKind::kLabelVolume: {
          auto run = [&](auto zero, auto* own, auto* spare) {
            using T = decltype(zero);
            const std::size_t nvox = static_cast<std::size_t>(plan.size[0] * plan.size[1] * plan.size[2] * v.h.channels);
            if (own->size() < nvox) own->resize(nvox);
            Block<T> b{v.h.channels, plan.size, own->data()};
            const std::uint64_t got = gather_label<T>(v, plan, static_cast<T>(f.field.fill), &b);
            if (!open[i].memory) read += got;
            apply_post_label<T>(prog_, plan, static_cast<T>(f.field.fill), &b, own, spare);
            std::memcpy(dst, b.data, one);
          };
          if (label_u8_[i]) {
            run(std::uint8_t{}, &s->u8_own, &s->u8_spare);
          } else {
            run(std::int32_t{}, &s->i32_own, &s->i32_spare);
          }
          break;
        }
        case FieldKind::kLabel: {
          const std::int64_t label = source_.label(rec);
          std::memcpy(dst, &label, sizeof label);
          break;
        }
        default:
          break;
      }
    }
  }
  bytes_read_.fetch_add(read, std::memory_order_relaxed);
  patches_.fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
  if (counters) {
    counters->bytes.fetch_add(read, std::memory_order_relaxed);
    counters->add_transform(now_ns() - t1);
  }
  return Status();
}

void VolumeMaker::progress(bool kept) const {
  if (kept) kept_.fetch_add(1, std::memory_order_relaxed);
  if (!progress_) return;
  char line[512];
  if (!kept) {
    if (said_full_.exchange(true)) return;
    std::snprintf(line, sizeof(line),
                  "stoker: volume cache full (%.1f of %.1f MB, memory_budget): further volumes are inflated or "
                  "resampled on every load (stats()[\"volume\"])",
                  static_cast<double>(cache_->bytes()) / 1e6, static_cast<double>(cache_->budget()) / 1e6);
  } else {
    const std::int64_t t = now_ns();
    std::int64_t last = printed_ns_.load(std::memory_order_relaxed);
    if (t - last < (tty_ ? 250'000'000 : 2'000'000'000) || !printed_ns_.compare_exchange_strong(last, t)) return;
    std::snprintf(line, sizeof(line),
                  "stoker: volumes: %llu inflated or resampled and kept (%.1f MB; %.1f s inflating, %.1f s resampling) "
                  "for %zu records",
                  static_cast<unsigned long long>(kept_.load(std::memory_order_relaxed)),
                  static_cast<double>(cache_->bytes()) / 1e6,
                  static_cast<double>(inflate_ns_.load(std::memory_order_relaxed)) * 1e-9,
                  static_cast<double>(resample_ns_.load(std::memory_order_relaxed)) * 1e-9, source_.size());
  }
  std::fprintf(stderr, tty_ ? "\r\033[K%s\n" : "%s\n", line);
  std::fflush(stderr);
}

void VolumeMaker::add_stats(Stats* stats) const {
  Stats::Volume& v = stats->volume;
  v.active = true;
  v.patches = patches_.load(std::memory_order_relaxed);
  v.loads = loads_.load(std::memory_order_relaxed);
  v.bytes_read = bytes_read_.load(std::memory_order_relaxed);
  v.bytes_per_patch = v.patches ? static_cast<double>(v.bytes_read) / static_cast<double>(v.patches) : 0.0;
  v.inflate_bytes = inflate_bytes_.load(std::memory_order_relaxed);
  v.inflate_s = static_cast<double>(inflate_ns_.load(std::memory_order_relaxed)) * 1e-9;
  v.cache_hits = hits_.load(std::memory_order_relaxed);
  v.cache_misses = misses_.load(std::memory_order_relaxed);
  v.cache_entries = cache_->entries();
  v.cache_bytes = cache_->bytes();
  v.cache_budget_bytes = cache_->budget();
  v.label_index_builds = index_builds_.load(std::memory_order_relaxed);
  v.posneg_one_class = one_class_.load(std::memory_order_relaxed);
  v.resample_s = static_cast<double>(resample_ns_.load(std::memory_order_relaxed)) * 1e-9;
  v.num_samples = prog_.num_samples;
}

}  // namespace stoker::detail
