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
