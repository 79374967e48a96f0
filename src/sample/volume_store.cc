#include "sample/volume_store.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <utility>

#include "decode/volume_format.h"
#include "transform/volume/resample.h"
#include "util/util.h"

namespace stoker::detail {

VolumeStore::VolumeStore(const Source& source, const LoaderOptions& opt, const VolumeProgram& prog)
    : source_(source), opt_(opt), prog_(prog) {
  tty_ = ::isatty(2) != 0;
  progress_ = opt.cache.progress == Progress::kOn || (opt.cache.progress == Progress::kAuto && tty_);
  // NOTE: record 0's probe may keep entries here, under a budget of the
  // store's own (a maker without a loader keeps it); set_cache() moves them
  // to the loader's budget.
  cache_ = std::make_unique<VolumeCache>(MemoryBudget::for_option(opt.memory_budget));
}

void VolumeStore::set_cache(std::shared_ptr<MemoryBudget> budget, bool all) {
  if (cache_->memory() != budget.get()) cache_->rebind(budget);
  cache_volumes_ = true;
  cache_all_ = all;
  // The set's voxels, estimated from record 0's: more than the budget, and
  // only what is worth keeping is kept.
  tight_ = static_cast<double>(record0_bytes_) * static_cast<double>(source_.size()) > static_cast<double>(budget->limit());
  // Label indexes (1/8 + 1/128 byte per voxel) are small and cost a whole label to rebuild: room is kept for them.
  if (record0_index_bytes_ > 0) cache_->set_reserve(static_cast<std::uint64_t>(record0_index_bytes_ * 1.25) * source_.size());
}

const LabelIndex* VolumeStore::index(std::uint32_t rec, int fi, const Opened& label,
                                     std::shared_ptr<const LabelIndex>* hold) const {
  const std::uint64_t key = VolumeCache::key(rec, fi);
  *hold = cache_->index(key);
  if (!*hold) {
    auto x = std::make_shared<const LabelIndex>(label_index(label.view));
    index_builds_.fetch_add(1, std::memory_order_relaxed);
    if (!label.memory) bytes_read_.fetch_add(label.view.h.data_bytes, std::memory_order_relaxed);
    cache_->put(key, x);
    *hold = std::move(x);
  }
  return hold->get();
}

Status VolumeStore::hit(std::shared_ptr<const VolumeEntry> e, Opened* o) const {
  hits_.fetch_add(1, std::memory_order_relaxed);
  o->view = {e->data.data(), e->h};
  o->entry = std::move(e);
  o->memory = true;
  return Status();
}

Status VolumeStore::open(const FieldSpec& f, int fi, std::uint32_t rec, std::vector<std::uint8_t>* buf, Opened* o) const {
  if (prog_.spacing < 0) return open_raw(f, fi, rec, buf, o, false);
  const std::uint64_t key = VolumeCache::key(rec, fi);
  if (auto e = cache_->volume(key)) return hit(std::move(e), o);
  Opened raw;
  Status st = open_raw(f, fi, rec, buf, &raw, true);
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

Status VolumeStore::open_raw(const FieldSpec& f, int fi, std::uint32_t rec, std::vector<std::uint8_t>* buf, Opened* o,
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
    Status st = read_field(source_, f, rec, buf);
    if (!st.ok()) return st;
    bytes_read_.fetch_add(buf->size(), std::memory_order_relaxed);
    data = buf->data();
    size = buf->size();
    o->memory = true;
  }
  auto named = [&](const Status& st) {
    return st.ok() || o->where.empty() || f.primary ? st : Status(st.code(), o->where + ": " + st.message());
  };
  if (is_gzip(data, size)) {
    if (cache_volumes_) misses_.fetch_add(1, std::memory_order_relaxed);
    auto e = std::make_shared<VolumeEntry>();
    const std::int64_t t0 = now_ns();
    Status st = inflate_gzip_volume(data, size, opt_.max_volume_voxels, &e->h, &e->data);
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

void VolumeStore::progress(bool kept) const {
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

void VolumeStore::add_stats(Stats* stats, int num_samples) const {
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
  v.num_samples = num_samples;
}

}  // namespace stoker::detail
