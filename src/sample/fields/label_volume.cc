// LabelVolume: a label volume paired with the Volume: the same spatial
// shape (the Volume checks it), integer values never scaled, the Volume's
// patches cut with nearest semantics and padded with `fill`; uint8 when
// record 0's is, else int32.
#include <cstring>

#include "sample/fields/volume.h"

namespace stoker::detail {
namespace {

struct LabelVolumeScratch : FieldScratch {
  std::vector<std::uint8_t> u8_own, u8_spare;
  std::vector<std::int32_t> i32_own, i32_spare;
  std::uint64_t bytes() const override {
    return capacity_bytes(u8_own) + capacity_bytes(u8_spare) + capacity_bytes(i32_own) + capacity_bytes(i32_spare);
  }
};

class LabelVolumeFieldOp final : public FieldOp {
 public:
  explicit LabelVolumeFieldOp(FieldSetup& setup)
      : FieldOp(setup), owner_(*static_cast<const VolumeOwner*>(setup.owner)), u8_(owner_.labels_u8(index_)) {
    if (u8_ && f_.field.fill > 255) {
      invalid("field '" + f_.field.name + "' (label_volume): fill=" + std::to_string(f_.field.fill) +
              " does not fit its uint8 labels (as record 0's)");
    }
  }
  void declare(FieldSetup& setup) override {
    std::vector<std::int64_t> dims = owner_.spatial_dims();
    dims.insert(dims.begin(), owner_.channels(index_));
    setup.add_output(f_.field.name, u8_ ? "|u1" : "<i4", dims, u8_ ? 1 : 4, owner_.entries());
  }
  std::unique_ptr<FieldScratch> scratch() const override { return std::make_unique<LabelVolumeScratch>(); }

  Status apply(const Sample& x, FieldScratch* fs) const override {
    auto& s = *static_cast<LabelVolumeScratch*>(fs);
    const std::uint64_t read = u8_ ? cut(x, std::uint8_t{}, &s.u8_own, &s.u8_spare)
                                   : cut(x, std::int32_t{}, &s.i32_own, &s.i32_spare);
    owner_.volume_store().count_read(read);
    if (x.s->counters) x.s->counters->bytes.fetch_add(read, std::memory_order_relaxed);
    return Status::Ok();
  }

 private:
  // Every patch of the sample into the batch; the bytes read from a file.
  template <typename T>
  std::uint64_t cut(const Sample& x, T, std::vector<T>* own, std::vector<T>* spare) const {
    const VolumeStore::Opened& opened = x.geo.volume->open[static_cast<std::size_t>(index_)];
    const VolumeView& v = opened.view;
    const VolumeProgram& prog = owner_.program();
    const int n = owner_.entries();
    const std::size_t one = output().bytes / static_cast<std::size_t>(n);
    const T fill = static_cast<T>(f_.field.fill);
    std::uint64_t read = 0;
    for (int p = 0; p < n; ++p) {
      const PatchPlan& plan = x.geo.volume->plans[static_cast<std::size_t>(p)];
      const std::size_t nvox = static_cast<std::size_t>(plan.size[0] * plan.size[1] * plan.size[2] * v.h.channels);
      if (own->size() < nvox) own->resize(nvox);
      Block<T> b{v.h.channels, plan.size, own->data()};
      const std::uint64_t got = gather_label<T>(v, plan, fill, &b);
      if (!opened.memory) read += got;
      apply_post_label<T>(prog, plan, fill, &b, own, spare);
      std::memcpy(dest(x.out) + static_cast<std::size_t>(p) * one, b.data, one);
    }
    return read;
  }

  const VolumeOwner& owner_;
  const bool u8_;  // uint8 labels (record 0's), else int32
};

void check_label_volume(const Field& f, const std::string& what) {
  if (f.fill < 0 || f.fill > 65535) invalid(what + ": fill must be in [0, 65535], got " + std::to_string(f.fill));
}

}  // namespace

extern const FieldDef kLabelVolumeDef;
const FieldDef kLabelVolumeDef{
    .kind = FieldKind::kLabelVolume,
    .name = "label_volume",
    .doc = R"doc(A label volume paired with the Volume: [B*n, C, P0, P1, P2] uint8 (int32 unless record 0's is uint8).

Same spatial shape as its volume (else a sample error), integer values
never scaled, every crop, pad, flip and rotation of the volume applied
with nearest-neighbour semantics, ``fill`` where SpatialPad pads.
RandCropByPosNegLabel's ``label_key`` names one.

Args:
    name (str): its key in the batch. Default "label".
    member (str, optional): the list file column or shard member suffix
        it is read from. Default None: the one named ``name`` (a list
        file's ``label`` column of paths).
    folder (str or os.PathLike, optional): a paired folder (the Medical
        Segmentation Decathlon's ``imagesTr``/``labelsTr``).
    fill (int): padded voxels' value, in [0, 65535]. Default 0.

<common sections>

Example:
    >>> loader = stoker.Loader("data/volumes/nii.csv", batch_size=2,
    ...     fields=[stoker.Volume("image"), stoker.LabelVolume("label", fill=0)],
    ...     transforms=[stoker.RandSpatialCrop(64), stoker.SpatialPad(64)])
    >>> next(iter(loader))["label"].dtype
    torch.uint8)doc",
    .role = Role::kFollower,
    .follows = FieldKind::kVolume,
    .without_owner = "is paired with a Volume field, and the schema has none",
    .member = DefaultMember::kOwnName,
    .json_member = false,
    .folder = true,
    .in_volumes = true,
    .reads_itself = true,
    .params = {"fill"},
    .suffixes = {},
    .check = check_label_volume,
    .make = [](FieldSetup& s) -> std::unique_ptr<FieldOp> { return std::make_unique<LabelVolumeFieldOp>(s); },
};

}  // namespace stoker::detail
