// Volume: a 3D scan cut into patches by LoaderOptions::volume_transforms;
// the owner of the 3D geometry. Each sample opens every volume field of the
// record (sample/volume_store.h: a mapping, so a patch reads only its bytes,
// or the volume cache), builds or finds the label's foreground index, draws
// one plan per patch from (seed, epoch, record, patch), and writes its
// patches straight into the batch buffer as n consecutive entries
// (OutputSpec::per_record), with each patch's first voxel (<name>_start) and
// affine (<name>_affine). Label volumes cut the same patches (label_volume.cc).
#include "sample/fields/volume.h"

#include <cstring>
#include <variant>

#include "order/rng.h"
#include "transform/plan_json.h"
#include "transform/volume/defs.h"

namespace stoker::detail {
namespace {

// Records read at construction to learn channels and dtypes.
constexpr std::size_t kProbeRecords = 8;

struct VolumeScratch : FieldScratch {
  explicit VolumeScratch(std::size_t fields) : read(fields) { patches.open = std::vector<VolumeStore::Opened>(fields); }
  std::vector<std::vector<std::uint8_t>> read;  // per field: bytes read whole (sources without extents)
  std::vector<float> own, spare;
  VolumePatches patches;
  std::shared_ptr<const LabelIndex> index;  // the label's foreground index, held while sampling
  // NOTE: not the voxels the patches read (mapped files, or entries of the
  // volume cache, which charges them to its own account).
  std::uint64_t bytes() const override {
    std::uint64_t n = capacity_bytes(read) + capacity_bytes(own) + capacity_bytes(spare) +
                      capacity_bytes(patches.plans) + capacity_bytes(patches.open);
    for (const auto& r : read) n += capacity_bytes(r);
    return n;
  }
};

bool is_volume_field(const FieldSpec& f) { return field_def(f.field.kind).reads_itself; }

class VolumeFieldOp final : public VolumeOwner {
 public:
  explicit VolumeFieldOp(FieldSetup& setup) : VolumeOwner(setup) {
    const std::vector<FieldSpec>& fields = spec_.fields;
    std::vector<std::string> labels;
    for (const FieldSpec& f : fields) {
      if (f.field.kind == FieldKind::kLabelVolume) labels.push_back(f.field.name);
    }
    prog_ = compile_volume_program(opt_.volume_transforms, labels);
    for (std::size_t i = 0; i < fields.size(); ++i) {
      if (fields[i].field.kind == FieldKind::kLabelVolume && fields[i].field.name == prog_.label_key) {
        label_field_ = static_cast<int>(i);
      }
    }
    store_ = std::make_unique<VolumeStore>(source_, opt_, prog_);
    probe();
    for (const VolumeTransform& t : prog_.ops) {
      const auto* ni = std::get_if<NormalizeIntensity>(&t);
      const int c = channels_[static_cast<std::size_t>(index_)];
      for (const auto* v : {ni ? &ni->subtrahend : nullptr, ni ? &ni->divisor : nullptr}) {
        if (v && v->size() > 1 && static_cast<int>(v->size()) != c) {
          invalid("NormalizeIntensity: " + std::to_string(v->size()) + " values per channel, the volumes have " +
                  std::to_string(c) + " channels");
        }
      }
    }
    // The pre-crop pad's value for intensity volumes: 0 through the pointwise ops after it.
    for (int i : prog_.gathered) {
      if (i > prog_.pre_pad && prog_.pre_pad >= 0) {
        pre_pad_value_ = pointwise_value(prog_.ops[static_cast<std::size_t>(i)], pre_pad_value_);
      }
    }
  }

  void declare(FieldSetup& setup) override {
    const int n = prog_.num_samples;
    std::vector<std::int64_t> dims = spatial_dims();
    dims.insert(dims.begin(), channels_[static_cast<std::size_t>(index_)]);
    setup.add_output(f_.field.name, "<f4", dims, 4, n);
    setup.add_output(f_.field.name + "_start", "<i8", {3}, 8, n, /*own=*/false);
    setup.add_output(f_.field.name + "_affine", "<f8", {4, 4}, 8, n, /*own=*/false);
  }
  std::vector<std::int64_t> spatial_dims() const override { return {patch_[0], patch_[1], patch_[2]}; }
  int entries() const override { return prog_.num_samples; }
  std::unique_ptr<FieldScratch> scratch() const override {
    return std::make_unique<VolumeScratch>(spec_.fields.size());
  }

  const VolumeProgram& program() const override { return prog_; }
  const VolumeStore& volume_store() const override { return *store_; }
  int channels(int i) const override { return channels_[static_cast<std::size_t>(i)]; }
  bool labels_u8(int i) const override { return u8_[static_cast<std::size_t>(i)]; }

  Status plan(Sample* x, FieldScratch* fs) const override {
    auto& s = *static_cast<VolumeScratch*>(fs);
    const std::vector<FieldSpec>& fields = spec_.fields;
    std::vector<VolumeStore::Opened>& open = s.patches.open;
    Shape3 shape{0, 0, 0};
    std::int64_t inflate_ns = 0;
    for (std::size_t i = 0; i < fields.size(); ++i) {
      const FieldSpec& f = fields[i];
      if (!is_volume_field(f)) continue;
      auto tag = [&](const Status& st) { return Status(st.code(), "field '" + f.field.name + "': " + st.message()); };
      open[i].reset();
      Status st = store_->open(f, static_cast<int>(i), x->rec, &s.read[i], &open[i]);
      if (!st.ok()) return tag(st);
      const VolumeHeader& h = open[i].view.h;
      if (h.channels != channels_[i]) {
        return tag(Status::Corrupt(std::to_string(h.channels) + " channels, record 0's has " + std::to_string(channels_[i])));
      }
      if (f.field.kind == FieldKind::kVolume) shape = h.shape;
      if (f.field.kind == FieldKind::kLabelVolume && h.scaled) {
        return tag(Status::Unsupported("a label volume with NIfTI scaling (scl_slope " + std::to_string(h.slope) +
                                       ", scl_inter " + std::to_string(h.inter) + "): labels are never scaled"));
      }
      inflate_ns += open[i].inflate_ns;
    }
    for (std::size_t i = 0; i < fields.size(); ++i) {
      if (fields[i].field.kind == FieldKind::kLabelVolume && open[i].view.h.shape != shape) {
        return Status::Corrupt("field '" + fields[i].field.name + "': label volume of spatial shape " +
                               shape_text(open[i].view.h.shape) + ", its volume's is " + shape_text(shape));
      }
    }
    store_->count_load();
    // Stage times: opening (and inflating) the volumes is read (decode), the rest transform.
    x->timer->read_and_decode(inflate_ns);
    const LabelIndex* index =
        label_field_ >= 0 ? store_->index(x->rec, label_field_, open[static_cast<std::size_t>(label_field_)], &s.index)
                          : nullptr;
    const int n = prog_.num_samples;
    s.patches.plans.resize(static_cast<std::size_t>(n));
    for (int p = 0; p < n; ++p) {
      PatchPlan& plan = s.patches.plans[static_cast<std::size_t>(p)];
      Rng rng(mix_key(x->seed, x->epoch, x->draw, patch_stream(p)));
      Status st = plan_patch(prog_, shape, patch_, index, &rng, &plan);
      if (!st.ok()) return st;
      if (plan.one_class) store_->count_one_class();
    }
    x->geo.volume = &s.patches;
    return Status::Ok();
  }
  // The patches' plans as plan() draws them (the volumes opened, no voxel
  // copied), with the volume's spatial shape.
  Status describe(Sample* x, FieldScratch* fs, std::string* json) const override {
    Status st = plan(x, fs);
    if (!st.ok()) return st;
    const auto& s = *static_cast<VolumeScratch*>(fs);
    const Shape3& shape = s.patches.open[static_cast<std::size_t>(index_)].view.h.shape;
    *json = "{\"shape\":[" + std::to_string(shape[0]) + "," + std::to_string(shape[1]) + "," + std::to_string(shape[2]) +
            "],\"patches\":[";
    for (std::size_t p = 0; p < s.patches.plans.size(); ++p) {
      if (p) *json += ',';
      *json += patch_plan_to_json(s.patches.plans[p]);
    }
    *json += "]}";
    return Status::Ok();
  }
  void finish(FieldScratch* fs) const override {
    auto& s = *static_cast<VolumeScratch*>(fs);
    for (VolumeStore::Opened& o : s.patches.open) o.reset();
    s.index.reset();
  }

  Status apply(const Sample& x, FieldScratch* fs) const override {
    auto& s = *static_cast<VolumeScratch*>(fs);
    const VolumeStore::Opened& opened = x.geo.volume->open[static_cast<std::size_t>(index_)];
    const VolumeView& v = opened.view;
    const int n = prog_.num_samples;
    const std::size_t one = output().bytes / static_cast<std::size_t>(n);
    const bool in_place = !prog_.post_pad;  // the patch has its final size from the gather on
    std::uint64_t read = 0;
    for (int p = 0; p < n; ++p) {
      const PatchPlan& plan = x.geo.volume->plans[static_cast<std::size_t>(p)];
      std::uint8_t* dst = dest(x.out) + static_cast<std::size_t>(p) * one;
      const std::size_t nvox = static_cast<std::size_t>(plan.size[0] * plan.size[1] * plan.size[2] * v.h.channels);
      if (!in_place && s.own.size() < nvox) s.own.resize(nvox);
      Block<float> b{v.h.channels, plan.size, in_place ? reinterpret_cast<float*>(dst) : s.own.data()};
      const std::uint64_t got = gather(v, plan, prog_, prog_.gathered, pre_pad_value_, &b);
      if (!opened.memory) read += got;  // patches cut from memory read no file
      apply_post(prog_, plan, 0.0f, &b, &s.own, &s.spare);
      if (reinterpret_cast<std::uint8_t*>(b.data) != dst) std::memcpy(dst, b.data, one);
      // _start and _affine: the patch's first voxel, and the affine moved there.
      auto* start = reinterpret_cast<std::int64_t*>(dest(x.out, 1)) + 3 * p;
      for (int a = 0; a < 3; ++a) start[a] = plan.out_start[static_cast<std::size_t>(a)];
      auto* aff = reinterpret_cast<double*>(dest(x.out, 2)) + 16 * p;
      for (int r = 0; r < 4; ++r) {
        for (int c = 0; c < 4; ++c) aff[r * 4 + c] = v.h.affine[static_cast<std::size_t>(r * 4 + c)];
        if (r < 3) {
          for (int a = 0; a < 3; ++a) {
            aff[r * 4 + 3] += v.h.affine[static_cast<std::size_t>(r * 4 + a)] *
                              static_cast<double>(plan.out_start[static_cast<std::size_t>(a)]);
          }
        }
      }
    }
    store_->count_patches(n, read);
    if (x.s->counters) x.s->counters->bytes.fetch_add(read, std::memory_order_relaxed);
    return Status::Ok();
  }

  // NOTE: volumes keep their own cache: inflated .nii.gz volumes and label
  // indexes in every mode (no page cache holds inflated bytes), every
  // volume under cache="ram"/"decoded".
  bool keeps_own_cache() const override { return true; }
  void set_own_cache(const std::shared_ptr<MemoryBudget>& budget, bool all) override { store_->set_cache(budget, all); }
  void add_stats(Stats* stats) const override { store_->add_stats(stats, prog_.num_samples); }

 private:
  // The first readable of the first records decides the patch size, each
  // field's channels and each label's dtype.
  void probe() {
    const std::vector<FieldSpec>& fields = spec_.fields;
    channels_.assign(fields.size(), 1);
    u8_.assign(fields.size(), true);
    std::string first_error;
    VolumeScratch s(fields.size());
    std::uint64_t bytes = 0, index_bytes = 0;
    for (std::size_t r = 0; r < std::min(source_.size(), kProbeRecords); ++r) {
      Status st;
      Shape3 shape{0, 0, 0};
      bytes = 0;
      for (std::size_t i = 0; i < fields.size() && st.ok(); ++i) {
        const FieldSpec& f = fields[i];
        if (!is_volume_field(f)) continue;
        VolumeStore::Opened& o = s.patches.open[i];
        o.reset();
        st = store_->open(f, static_cast<int>(i), static_cast<std::uint32_t>(r), &s.read[i], &o);
        if (!st.ok()) {
          st = Status(st.code(), "field '" + f.field.name + "': " + st.message());
          break;
        }
        channels_[i] = o.view.h.channels;
        bytes += o.view.h.data_bytes;
        if (f.field.kind == FieldKind::kVolume) shape = o.view.h.shape;
        if (static_cast<int>(i) == label_field_) {
          const auto voxels = static_cast<std::uint64_t>(o.view.h.shape[0] * o.view.h.shape[1] * o.view.h.shape[2]);
          index_bytes = voxels / 8 + voxels / 128 + sizeof(LabelIndex) + 64;
        }
        if (f.field.kind == FieldKind::kLabelVolume) u8_[i] = o.view.h.type == VoxelType::kU8;
      }
      if (st.ok()) {
        std::string why;
        if (volume_output_shape(prog_.ops, shape, &patch_, &why)) {
          store_->set_record0(bytes, index_bytes);
          return;
        }
        st = Status::InvalidArgument(why);
      }
      if (first_error.empty()) first_error = "record " + std::to_string(r) + " '" + source_.key(r) + "': " + st.message();
    }
    invalid("volumes: none of the first records could be read to learn the patch size; " + first_error);
  }

  VolumeProgram prog_;
  std::unique_ptr<VolumeStore> store_;  // refers to prog_
  Shape3 patch_{0, 0, 0};
  int label_field_ = -1;           // RandCropByPosNegLabel's label field
  std::vector<int> channels_;      // per field: channels (record 0's)
  std::vector<bool> u8_;           // per label field: uint8 output
  float pre_pad_value_ = 0.0f;
};

}  // namespace

extern const FieldDef kVolumeDef;
const FieldDef kVolumeDef{
    .kind = FieldKind::kVolume,
    .name = "volume",
    .doc = R"doc(A 3D scan, cut into patches: float32 [B*n, C, P0, P1, P2].

Read from .npy ((D, H, W) or channels first (C, D, H, W), C or Fortran
order), NIfTI-1/2 ``.nii`` or gzipped ``.nii.gz`` (nibabel's axis order,
its 4th dim the channels; scl_slope/scl_inter applied), any numeric
dtype, recognised by content. The loader's volume transforms
(stoker.RandCropByPosNegLabel, RandSpatialCrop, ..., MONAI's names) cut
``n`` patches per volume load (the sampling crop's ``num_samples``),
consecutive batch entries; an uncompressed volume's patch reads only the
bytes it covers. Also in the batch: ``<name>_start`` int64 [B*n, 3] (the
patch's first voxel in the volume, before flips) and ``<name>_affine``
float64 [B*n, 4, 4] (voxel to world: the volume's affine, nibabel's
``img.affine``, moved to the patch; identity for .npy). At most one per
schema; a volume schema holds Volume, LabelVolume and Label fields.

Args:
    name (str): its key in the batch. Default "image".
    member (str, optional): the list file column or shard member suffix
        it is read from. Default None: the record itself (a list file's
        path column, e.g. ``image``).
    folder (str or os.PathLike, optional): a paired folder, matched as
        Mask's ``folder`` (``a.nii.gz`` pairs with ``a.nii.gz``).

<common sections>

Example:
    >>> loader = stoker.Loader("data/volumes/npy.csv", batch_size=2,
    ...     fields=[stoker.Volume("image"), stoker.LabelVolume("label")],
    ...     transforms=[stoker.RandCropByPosNegLabel((96, 96, 96), label_key="label", num_samples=4)])
    >>> batch = next(iter(loader))
    >>> batch["image"].shape, batch["label"].shape
    (torch.Size([8, 1, 96, 96, 96]), torch.Size([8, 1, 96, 96, 96])))doc",
    .role = Role::kOwner,
    .follows = FieldKind::kVolume,
    .without_owner = nullptr,
    .member = DefaultMember::kRecord,
    .json_member = false,
    .folder = true,
    .in_volumes = true,
    .reads_itself = true,
    .params = {},
    .suffixes = {"_start", "_affine"},
    .check = nullptr,
    .make = [](FieldSetup& s) -> std::unique_ptr<FieldOp> { return std::make_unique<VolumeFieldOp>(s); },
};

}  // namespace stoker::detail
