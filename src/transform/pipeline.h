// A compiled transform list: validated once, then planned per sample (random
// parameters drawn from the sample's own key) and run into a batch slot.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "image/pixels.h"
#include "order/rng.h"
#include "stoker/options.h"
#include "stoker/transforms.h"
#include "transform/image_ops.h"
#include "transform/output_rows.h"
#include "transform/plan.h"
#include "transform/transform_defs.h"
#include "transform/resize.h"

namespace stoker::detail {

struct Workspace {
  ImageBuffer a, b, pad;
  ImageBuffer stage;   // the image stage's image
  ImageOpScratch ops;  // the image stage's kernels' memory
  ResizeScratch resize;
  std::vector<std::uint8_t> row;  // one output row, between the last resize and the output write
  // What its buffers hold (their capacity).
  std::uint64_t bytes() const {
    return a.bytes() + b.bytes() + pad.bytes() + stage.bytes() + ops.bytes() + resize.bytes() + capacity_bytes(row);
  }
};

// Rewrites a geometric plan into the image field's read plan: decode only
// the region the first crop reads (its box then relative to it), and with
// allow_scale, a first crop+resize (or resize) that shrinks 2x or more as a
// DCT-scaled decode of the region (see DecodeScale::kAuto). Other fields
// keep the geometric plan.
void plan_image_read(int width, int height, SamplePlan* plan, bool allow_scale);

class Pipeline {
 public:
  // Throws stoker::Error(kInvalidArgument) naming the transform and value.
  // fixed_size false: samples may differ in size (LoaderOptions::hook);
  // out_height()/out_width() are then 0 unless the list fixes the size.
  // channels: the image's (3); a stored-channel raster's field plans with a
  // Pipeline of its count and runs the plan itself (transform/raster.h).
  Pipeline(const std::vector<Transform>& transforms, DType dtype, Layout layout, bool fixed_size = true,
           int channels = 3);

  int out_height() const { return out_h_; }
  int out_width() const { return out_w_; }
  std::size_t sample_bytes() const;

  // Draws the sample's random parameters (from `rng`) for a width x height source.
  // With allow_scale, a first crop+resize (or resize) that shrinks 2x or more
  // is planned as a DCT-scaled decode of the region (see DecodeScale::kAuto).
  // plan_geometry() then plan_image_read().
  void plan(int width, int height, Rng* rng, SamplePlan* plan, bool allow_scale = false) const;
  // The sample's geometric plan in the full-resolution frame of its
  // width x height image (decode_region: all of it): what every spatial
  // field (image, mask, boxes) applies with its own kernel.
  void plan_geometry(int width, int height, Rng* rng, SamplePlan* plan) const;
  // The size run() gives a sample of `plan` from a `decoded` region of
  // width x height: the last step's, else the region's.
  static void sample_size(const SamplePlan& plan, int width, int height, int* out_width, int* out_height);
  // Bytes of one sample of width x height in the output dtype.
  std::size_t sample_bytes(int width, int height) const;
  // Runs the plan's steps on `decoded` (the decode_region's pixels) and writes
  // one sample into `out` (sample_bytes() bytes) in the output dtype/layout.
  void run(const SamplePlan& plan, const ImageView& decoded, Workspace* ws, void* out) const;

 private:
  class OutputWriter;
  // RandomErasing's boxes on the written sample.
  void erase(const SamplePlan& plan, void* out, int width, int height) const;
  std::vector<Transform> transforms_;
  bool has_image_stage_ = false;
  DType dtype_;
  Layout layout_;
  int out_h_ = 0, out_w_ = 0;
  FloatTable table_;  // uint8 -> float32: ToTensor, then Normalize if given
};

}  // namespace stoker::detail
