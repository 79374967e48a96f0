// Mask: a segmentation mask decoded as stored (8-bit gray or palette
// indices, or 16-bit), never converted to RGB; it follows the image's
// geometric plan with nearest resampling (transform/mask_plan.h) and its own
// fill. Batched [N, H, W] uint8 (8-bit) or int32 (16-bit, as record 0's).
#include <algorithm>

#include "decode/decode.h"
#include "sample/fields/field.h"
#include "transform/mask_plan.h"
#include "transform/nearest.h"

namespace stoker::detail {
namespace {

// Records read at construction to learn the pixel size.
constexpr std::size_t kProbeRecords = 16;

std::string size_text(int w, int h) { return std::to_string(w) + "x" + std::to_string(h); }

struct MaskScratch : FieldScratch {
  ImageDecoder decoder;
  MaskBuffer mask, stored;
  MaskWorkspace ws;
  std::uint64_t bytes() const override { return decoder.bytes() + mask.bytes() + stored.bytes() + ws.bytes(); }
};

class MaskFieldOp final : public FieldOp {
 public:
  explicit MaskFieldOp(FieldSetup& setup) : FieldOp(setup) {
    probe_first(kProbeRecords, "pixel size", [&](const std::vector<std::uint8_t>& bytes) {
      ImageDecoder dec;
      MaskBuffer mask;
      Status st = dec.open_mask(bytes.data(), bytes.size(), opt_.max_image_pixels);
      if (st.ok()) st = dec.decode_mask(&mask);
      if (st.ok()) bytes_ = mask.bytes_per_pixel;
      return st;
    });
    if (bytes_ == 1 && f_.field.fill > 255) {
      invalid(field_name(f_) + " (mask): fill=" + std::to_string(f_.field.fill) +
              " does not fit its 8-bit masks (0..255, as record 0's)");
    }
  }
  void declare(FieldSetup& setup) override {
    setup.add_output(f_.field.name, bytes_ == 1 ? "|u1" : "<i4", setup.owner->spatial_dims(), bytes_ == 1 ? 1 : 4);
  }
  std::unique_ptr<FieldScratch> scratch() const override { return std::make_unique<MaskScratch>(); }
  // The mask decoded whole, the decoder's stored rows, the workspace's two
  // (crops, resizes), the stored form; its output twice (a resize up).
  std::uint64_t scratch_estimate(const std::uint8_t* bytes, std::size_t n) const override {
    ImageDecoder decoder;
    if (!bytes || !decoder.open_mask(bytes, n, opt_.max_image_pixels).ok()) return FieldOp::scratch_estimate(bytes, n);
    const auto px = static_cast<std::uint64_t>(decoder.width()) * static_cast<std::uint64_t>(decoder.height()) *
                    static_cast<std::uint64_t>(bytes_);
    return 5 * px + 2 * output().bytes;
  }

  Status apply(const Sample& x, FieldScratch* fs) const override {
    auto& s = *static_cast<MaskScratch*>(fs);
    const auto [bytes, n] = x.bytes(f_);
    const int width = x.geo.width, height = x.geo.height;
    MaskView mv;
    if (x.stored) {
      mv = {bytes, width, height, static_cast<std::ptrdiff_t>(width) * bytes_, bytes_};
    } else {
      // Only the rows down to the first crop's bottom are read by the plan.
      int rows = height;
      const SamplePlan& geo = *x.geo.plan;
      if (!geo.steps.empty() && geo.steps[0].kind == Step::kCrop) {
        const Box& b = geo.steps[0].box;
        rows = std::clamp(b.y + b.height, 0, height);
      }
      Status st = decode(bytes, n, width, height, &s, rows);
      if (!st.ok()) return st;
      mv = s.mask.view();
    }
    run_mask_plan(*x.geo.plan, mv, f_.field.fill, &s.ws, dest(x.out), bytes_ == 1 ? 1 : 4);
    return Status::Ok();
  }

  // Stored at the stored image's size (nearest).
  Status store(const Sample& x, FieldScratch* fs, std::vector<std::uint8_t>* out) const override {
    auto& s = *static_cast<MaskScratch*>(fs);
    const auto [bytes, n] = x.bytes(f_);
    Status st = decode(bytes, n, x.full_width, x.full_height, &s);
    if (!st.ok()) return st;
    MaskView mv = s.mask.view();
    if (x.stored_width != x.full_width || x.stored_height != x.full_height) {
      resize_nearest(mv, x.stored_width, x.stored_height, &s.stored);
      mv = s.stored.view();
    }
    for (int y = 0; y < mv.height; ++y) {
      out->insert(out->end(), mv.row(y), mv.row(y) + static_cast<std::size_t>(mv.width) * mv.bytes_per_pixel);
    }
    return Status::Ok();
  }

 private:
  // The mask decoded into s->mask, checked against its image's size and the
  // batch's pixel size (record 0's).
  Status decode(const std::uint8_t* bytes, std::size_t n, int width, int height, MaskScratch* s, int rows = -1) const {
    Status st = s->decoder.open_mask(bytes, n, opt_.max_image_pixels);
    if (st.ok()) st = s->decoder.decode_mask(&s->mask, rows);
    if (!st.ok()) return st;
    if (s->mask.width != width || s->mask.height != height) {
      return Status::Corrupt("the mask is " + size_text(s->mask.width, s->mask.height) + ", its image " +
                             size_text(width, height));
    }
    if (s->mask.bytes_per_pixel != bytes_) {
      return Status::Unsupported("the mask has " + std::to_string(8 * s->mask.bytes_per_pixel) +
                                 "-bit pixels, the batch's " + std::to_string(8 * bytes_) + "-bit ones (as record 0's)");
    }
    return Status::Ok();
  }

  int bytes_ = 1;  // bytes per pixel as stored (1 or 2), as record 0's
};

void check_mask(const Field& f, const std::string& what) {
  if (f.fill < 0 || f.fill > 65535) invalid(what + ": fill must be in [0, 65535], got " + std::to_string(f.fill));
}

}  // namespace

extern const FieldDef kMaskDef;
const FieldDef kMaskDef{
    .kind = FieldKind::kMask,
    .name = "mask",
    .doc = R"doc(A segmentation mask, as stored: uint8 [B, H, W] (int32 for 16-bit masks).

Decoded as stored (8-bit gray or palette indices, or 16-bit; PNG or .npy),
never converted to RGB. Crops, resizes and flips follow the image's with
nearest-neighbour resampling; ``fill`` pads what lies outside the image
(CenterCrop of a smaller image). A mask must have its image's size, and
the pixel size (8 or 16-bit) of record 0's mask; a mask that does not, or
is missing, is a sample error under ``on_corrupt`` (stoker.SampleError
with on_corrupt="raise").

Args:
    name (str): its key in the batch.
    fill (int): the value of padded pixels, in [0, 65535]. Default 0.
    member (str, optional): the list file column or shard member suffix
        it is read from. Default None: the one named ``name``.
    folder (str or os.PathLike, optional): a paired folder instead of a
        member: the file under it whose path relative to it, without
        extension, is the record's path relative to its source's folder
        (image folder root, list file's folder, COCO image_root)
        without extension: images ``data/seg/images/a/b.jpg`` of the
        folder ``data/seg/images`` pair with ``data/seg/masks/a/b.png``
        (VOC, ADE20K, Cityscapes-style trees). A record without its file
        is a sample error (not_found). Default None.

<common sections>

Example:
    >>> loader = stoker.Loader("data/seg.csv", batch_size=8, transforms=[stoker.RandomResizedCrop(256)],
    ...                        fields=[stoker.Image(), stoker.Mask("mask", fill=255)])
    >>> batch = next(iter(loader))
    >>> batch["mask"].shape, batch["mask"].dtype
    (torch.Size([8, 256, 256]), torch.uint8))doc",
    .role = Role::kFollower,
    .follows = FieldKind::kImage,
    .without_owner = "follows an image's geometry, but the schema has no image field",
    .member = DefaultMember::kOwnName,
    .json_member = false,
    .folder = true,
    .in_volumes = false,
    .reads_itself = false,
    .params = {"fill"},
    .suffixes = {},
    .check = check_mask,
    .make = [](FieldSetup& s) -> std::unique_ptr<FieldOp> { return std::make_unique<MaskFieldOp>(s); },
};

}  // namespace stoker::detail
