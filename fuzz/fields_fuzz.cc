// libFuzzer: the inputs of a schema's non-image fields: a mask's header and
// pixels (PNG gray/palette/16-bit, .npy) through the mask decoder and the
// geometric plan, and a boxes member (.npy or JSON, every box format)
// through parsing, the canvas check, a crop+resize+flip plan and the padded
// write. The first byte picks the box format and JSON key.
#include <cstdint>
#include <string>
#include <vector>

#include "decode/decode.h"
#include "transform/boxes.h"
#include "transform/mask_plan.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace stoker;
  using namespace stoker::detail;
  if (size < 1) return 0;
  const std::uint8_t mode = data[0];
  ++data;
  --size;
  // A plan over a 64x48 canvas: a crop reaching past the image, a resize, both flips.
  SamplePlan plan;
  plan.steps.push_back({Step::kCrop, Box{-3, 5, 50, 40}, 0, 0});
  plan.steps.push_back({Step::kResize, {}, 20, 16});
  plan.mirror = (mode & 1) != 0;
  plan.vflip = (mode & 2) != 0;

  static ImageDecoder dec;
  static MaskBuffer mask;
  static MaskWorkspace ws;
  // NOTE: a small pixel cap keeps each run fast; the cap is what a hostile header must not get past.
  if (dec.open_mask(data, size, /*max_pixels=*/1 << 20).ok() && dec.decode_mask(&mask).ok()) {
    SamplePlan mplan = plan;
    mplan.steps[0].box = Box{-3, 2, mask.width + 4, mask.height};  // past every edge: the fill path
    std::vector<std::int32_t> out(static_cast<std::size_t>(mplan.steps[1].width) * mplan.steps[1].height);
    run_mask_plan(mplan, mask.view(), 255, &ws, out.data(), 4);
  }

  static const BoxFormat kFormats[] = {BoxFormat::kXYXY, BoxFormat::kXYWH, BoxFormat::kCXCYWH};
  std::vector<BoxRow> boxes;
  const std::string key = (mode & 4) ? "boxes" : "";
  if (parse_boxes(data, size, kFormats[(mode >> 3) % 3], key, &boxes).ok() && check_boxes_on_canvas(64, 48, &boxes).ok()) {
    transform_boxes(plan, 64, 48, &boxes);
    float xy[8 * 4];
    std::int64_t labels[8], count;
    write_boxes(boxes, kFormats[(mode >> 5) % 3], 8, xy, labels, &count);
  }
  return 0;
}
