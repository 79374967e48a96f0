// Antialiased bilinear resize, bit-exact with Pillow's Image.resize(BILINEAR)
// (the resampling torchvision applies to PIL images): a triangle filter
// stretched by the scale when shrinking, 22-bit fixed-point weights,
// horizontal pass first over the rows the vertical pass needs, uint8 between
// the passes. Pure compute: no threads, no state beyond the scratch.
#pragma once

#include <cstdint>
#include <vector>

#include "decode/image.h"

namespace stoker::detail {

// Per-axis fixed-point weights: output i reads `count[i]` inputs from
// `first[i]` with weights `weights[i * ksize ...]`.
struct ResampleAxis {
  int ksize = 0;
  std::vector<int> first;
  std::vector<int> count;
  std::vector<std::int32_t> weights;
};

// Pillow's precompute_coeffs + normalize_coeffs_8bpc, for the input range
// [in0, in1) (Pillow's `box`; the whole input when in1 < 0).
void compute_axis(int in_size, int out_size, ResampleAxis* axis, double in0 = 0, double in1 = -1);

struct ResizeScratch {
  ResampleAxis horizontal;
  ResampleAxis vertical;
  ImageBuffer temp;                 // result of the horizontal pass
  std::vector<std::int32_t> accum;         // one output row of the vertical pass
  std::vector<std::int32_t> pair_weights;  // AVX2 horizontal pass: weights as int16 pairs, two pixels at a time
};

// Resizes `src` (RGB8) to out_w x out_h into *dst. REQUIRES: out_w, out_h > 0.
// `simd` = false forces the portable kernels (tests compare the two).
// `box` (x0, y0, x1, y1), when given, is the source region to resample, in
// fractional pixels, as Pillow's Image.resize(size, box=...).
void resize_bilinear(const ImageView& src, int out_w, int out_h, ResizeScratch* scratch, ImageBuffer* dst,
                     bool simd = true, const double* box = nullptr);

}  // namespace stoker::detail
