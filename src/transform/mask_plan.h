// A sample's geometric plan applied to a mask: the same crops, resizes and
// flips as its image, with nearest-neighbour resampling (transform/nearest.h)
// and the mask's own fill value where a crop extends past the mask.
#pragma once

#include <cstdint>

#include "image/pixels.h"
#include "transform/plan.h"

namespace stoker::detail {

struct MaskWorkspace {
  MaskBuffer a, b;
  std::uint64_t bytes() const { return a.bytes() + b.bytes(); }
};

// Runs `geo` (a geometric plan, in the full-resolution frame of `src`) on
// `src` and writes the result, out_h x out_w, into `out`: uint8 pixels for
// an 8-bit mask (out_bytes_per_pixel 1) or int32 for an 8- or 16-bit mask
// (out_bytes_per_pixel 4), rows flipped as the plan says.
// NOTE: flips are applied at the end, after every resize, as the image's
// are; a nearest resize is not mirror-symmetric at exact half-pixel ties, so
// a flip listed before a resize can move a mask's edge by a pixel relative
// to torchvision's order (the usual recipes flip last).
void run_mask_plan(const SamplePlan& geo, const MaskView& src, int fill, MaskWorkspace* ws, void* out,
                   int out_bytes_per_pixel);

}  // namespace stoker::detail
