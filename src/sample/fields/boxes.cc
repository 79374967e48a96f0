// Boxes: float32 [n, 4] in the image's pixels, carried through its
// geometric plan (transform/boxes.h), clipped, those under 1 px dropped and
// counted; padded to max_boxes with a count. Three batch tensors: <name>,
// <name>_labels, <name>_count.
#include <atomic>
#include <cstdio>
#include <cstring>

#include "sample/fields/field.h"
#include "transform/boxes.h"

namespace stoker::detail {
namespace {

struct BoxesScratch : FieldScratch {
  std::vector<BoxRow> boxes;
  std::uint64_t bytes() const override { return capacity_bytes(boxes); }
};

class BoxesFieldOp final : public FieldOp {
 public:
  explicit BoxesFieldOp(FieldSetup& setup) : FieldOp(setup) {}
  void declare(FieldSetup& setup) override {
    const int m = f_.field.max_boxes;
    setup.add_output(f_.field.name, "<f4", {m, 4}, 4);
    setup.add_output(f_.field.name + "_labels", "<i8", {m}, 8, 1, /*own=*/false);
    setup.add_output(f_.field.name + "_count", "<i8", {}, 8, 1, /*own=*/false);
  }
  std::unique_ptr<FieldScratch> scratch() const override { return std::make_unique<BoxesScratch>(); }

  Status apply(const Sample& x, FieldScratch* fs) const override {
    std::vector<BoxRow>& boxes = static_cast<BoxesScratch*>(fs)->boxes;
    const auto [bytes, n] = x.bytes(f_);
    const int width = x.geo.width, height = x.geo.height;
    if (x.stored) {
      boxes.resize(n / sizeof(BoxRow));
      if (n) std::memcpy(boxes.data(), bytes, n);
    } else {
      Status st = parse_boxes(bytes, n, f_.field.format, f_.json_key, &boxes);
      if (st.ok()) st = check_boxes_on_canvas(width, height, &boxes);
      if (!st.ok()) return st;
    }
    const std::size_t dropped = transform_boxes(*x.geo.plan, width, height, &boxes);
    const std::size_t truncated =
        write_boxes(boxes, f_.field.format, f_.field.max_boxes, reinterpret_cast<float*>(dest(x.out, 0)),
                    reinterpret_cast<std::int64_t*>(dest(x.out, 1)), reinterpret_cast<std::int64_t*>(dest(x.out, 2)));
    if (x.s->counters) x.s->counters->add_boxes(dropped, truncated);
    if (truncated && !warned_truncated_.exchange(true, std::memory_order_relaxed)) {
      std::fprintf(stderr,
                   "stoker: field '%s': record '%s' has %zu boxes after the transforms, more than max_boxes=%d; "
                   "boxes past max_boxes are dropped and counted (stats()[\"boxes_truncated\"]; said once)\n",
                   f_.field.name.c_str(), source_.key(x.rec).c_str(), boxes.size(), f_.field.max_boxes);
    }
    return Status::Ok();
  }

  // Stored as BoxRows rescaled to the stored image.
  Status store(const Sample& x, FieldScratch* fs, std::vector<std::uint8_t>* out) const override {
    std::vector<BoxRow>& boxes = static_cast<BoxesScratch*>(fs)->boxes;
    const auto [bytes, n] = x.bytes(f_);
    Status st = parse_boxes(bytes, n, f_.field.format, f_.json_key, &boxes);
    if (st.ok()) st = check_boxes_on_canvas(x.full_width, x.full_height, &boxes);
    if (!st.ok()) return st;
    scale_boxes(x.full_width, x.full_height, x.stored_width, x.stored_height, &boxes);
    const auto* b = reinterpret_cast<const std::uint8_t*>(boxes.data());
    out->insert(out->end(), b, b + boxes.size() * sizeof(BoxRow));
    return Status::Ok();
  }

 private:
  mutable std::atomic<bool> warned_truncated_{false};  // boxes past max_boxes: said once per loader
};

void check_boxes(const Field& f, const std::string& what) {
  if (f.max_boxes < 1) invalid(what + ": max_boxes must be >= 1, got " + std::to_string(f.max_boxes));
}

}  // namespace

extern const FieldDef kBoxesDef;
const FieldDef kBoxesDef{
    .kind = FieldKind::kBoxes,
    .name = "boxes",
    .doc = R"doc(Bounding boxes in the image's pixels, carried through its geometry.

Read from a .npy of [n, 4] (or [n, 5], the 5th column a class id) or JSON
(a list of rows, or {"boxes": [...], "labels": [...]}), in ``format``.
They follow the image's crops, resizes and flips (as
torchvision.transforms.v2 does), are clipped to it, and those left under
1 px wide or high are dropped (stats()["boxes_dropped"]); boxes past
``max_boxes`` are dropped too (stats()["boxes_truncated"]). Batched as
three tensors: ``<name>`` float32 [B, max_boxes, 4] (zero padded),
``<name>_labels`` int64 [B, max_boxes] (the class ids; -1 for padding
and boxes without one) and ``<name>_count`` int64 [B].

Args:
    name (str): its key in the batch (with ``<name>_labels`` and
        ``<name>_count``).
    max_boxes (int): rows of the padded tensor, >= 1. Default 100.
    format (str): "xyxy", "xywh" or "cxcywh", of the stored boxes and of
        the batch's; a JSON member's own ``"format"`` key says the
        stored one instead (a COCO source's "boxes" member is
        ``{"format": "xywh", ...}``). Default "xyxy".
    member (str, optional): the list file column or shard member suffix
        it is read from, or "json:<key>", a key of the record's .json
        member. Default None: the one named ``name`` (for a COCO
        source, name the field "boxes" or pass member="boxes").
    folder (str or os.PathLike, optional): a paired folder of .npy or
        .json box files, matched as Mask's ``folder``. Default None.

<common sections>

Example:
    >>> loader = stoker.Loader("data/det-{000000..000007}.tar", batch_size=8,
    ...                        transforms=[stoker.Resize((512, 512))],
    ...                        fields=[stoker.Image(), stoker.Boxes("boxes", max_boxes=50)])
    >>> batch = next(iter(loader))
    >>> batch["boxes"].shape, batch["boxes_labels"].shape, batch["boxes_count"].shape
    (torch.Size([8, 50, 4]), torch.Size([8, 50]), torch.Size([8])))doc",
    .role = Role::kFollower,
    .follows = FieldKind::kImage,
    .without_owner = "follows an image's geometry, but the schema has no image field",
    .member = DefaultMember::kOwnName,
    .json_member = true,
    .folder = true,
    .in_volumes = false,
    .reads_itself = false,
    .params = {"max_boxes", "format"},
    .suffixes = {"_labels", "_count"},
    .check = check_boxes,
    .make = [](FieldSetup& s) -> std::unique_ptr<FieldOp> { return std::make_unique<BoxesFieldOp>(s); },
};

}  // namespace stoker::detail
