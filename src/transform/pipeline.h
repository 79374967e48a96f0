// A compiled transform list: validated once, then planned per sample (random
// parameters drawn from the sample's own key) and run into a batch slot.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "decode/image.h"
#include "order/rng.h"
#include "stoker/options.h"
#include "stoker/transforms.h"
#include "transform/output_rows.h"
#include "transform/resize.h"

namespace stoker::detail {

// torchvision's RandomResizedCrop.get_params on a width x height image.
Box random_resized_crop_box(int width, int height, const std::array<double, 2>& scale,
                            const std::array<double, 2>& ratio, Rng* rng);
// torchvision's Resize output size for a width x height image.
void resize_output_size(const Resize& r, int width, int height, int* out_w, int* out_h);
// torchvision's center_crop box; may extend past the image (zero padding).
Box center_crop_box(int width, int height, int crop_w, int crop_h);

// One concrete geometric step, in the coordinates of the image before it.
struct Step {
  enum Kind { kCrop, kResize } kind;
  Box box;               // kCrop: may extend past the image: zeros there
  int width, height;     // kResize: output size
  bool has_src_box = false;
  double src_box[4] = {0, 0, 0, 0};  // kResize: fractional source region (x0, y0, x1, y1)
};

// Everything one sample's transforms do, decided before decoding.
struct SamplePlan {
  Box decode_region;        // the part of the (scaled) source image the steps read
  int scale_eighths = 8;    // decode at scale_eighths/8 (JPEG DCT scaling)
  std::vector<Step> steps;  // applied to the decoded region
  bool mirror = false;      // horizontal flip, applied while writing the output
};

struct Workspace {
  ImageBuffer a, b, pad;
  ResizeScratch resize;
  std::vector<std::uint8_t> row;  // one output row, between the last resize and the output write
};

class Pipeline {
 public:
  // Throws stoker::Error(kInvalidArgument) naming the transform and value.
  Pipeline(const std::vector<Transform>& transforms, DType dtype, Layout layout);

  int out_height() const { return out_h_; }
  int out_width() const { return out_w_; }
  std::size_t sample_bytes() const;

  // Draws the sample's random parameters (from `rng`) for a width x height source.
  // With allow_scale, a first crop+resize (or resize) that shrinks 2x or more
  // is planned as a DCT-scaled decode of the region (see DecodeScale::kAuto).
  void plan(int width, int height, Rng* rng, SamplePlan* plan, bool allow_scale = false) const;
  // Runs the plan's steps on `decoded` (the decode_region's pixels) and writes
  // one sample into `out` (sample_bytes() bytes) in the output dtype/layout.
  void run(const SamplePlan& plan, const ImageView& decoded, Workspace* ws, void* out) const;

 private:
  class OutputWriter;
  std::vector<Transform> transforms_;
  DType dtype_;
  Layout layout_;
  int out_h_ = 0, out_w_ = 0;
  FloatTable table_;  // uint8 -> float32: ToTensor, then Normalize if given
};

}  // namespace stoker::detail
