// Nearest-neighbour resize of single-channel masks, bit-exact with Pillow's
// Image.resize(size, NEAREST, box) on modes "L" and "P" (8-bit) and "I;16"
// (16-bit): every output pixel is a copy of one source pixel, never a blend,
// so class indices and palette indices stay what they were.
//
// Pillow's rule (_imaging.c `_resize`, then libImaging/Geometry.c): the box
// is parsed as float32 and the step is `(double)(x1 - x0) / out` (a float32
// difference widened to double); output pixel i samples the source at
// x0 + step * (i + 0.5), truncated toward zero (COORD), and a position
// outside the source gives 0. The two pixel sizes take different paths that
// round that position differently:
// - 8-bit (ImagingScaleAffine): x0 + step * 0.5, then `+= step` per output
//   pixel, a running double sum;
// - 16-bit (ImagingGenericTransform, affine_transform): step * (i + 0.5) + x0
//   for each output pixel on its own.
// They pick different source pixels whenever the exact position is an integer
// the running sum misses (2 -> 7 pixels: output 3 reads input 0 at 8 bits, 1
// at 16 bits), so both are reproduced, each where Pillow uses it.
#pragma once

#include <vector>

#include "image/pixels.h"

namespace stoker::detail {

// Pillow's source index for each of `out_size` outputs along one axis, for the
// source range [in0, in1) of an axis `in_size` pixels long, with the rule of
// `bytes_per_pixel` (1 or 2); -1 where the position falls outside the source
// (Pillow writes 0 there). Positions never decrease, so -1s are a suffix.
// REQUIRES: out_size > 0, 0 <= in0 <= in1 <= in_size.
void nearest_axis(int in_size, int out_size, double in0, double in1, int bytes_per_pixel, std::vector<int>* index);

// Resizes `src` (1 or 2 bytes per pixel) to out_w x out_h into *out, same
// pixel size. `src_box` (x0, y0, x1, y1), when given, is the source region in
// fractional pixels, as Pillow's Image.resize(size, box=...).
// REQUIRES: out_w, out_h > 0; the box as Pillow accepts it (after rounding to
// float32): 0 <= x0 <= x1 <= src.width, 0 <= y0 <= y1 <= src.height.
void resize_nearest(const MaskView& src, int out_w, int out_h, MaskBuffer* out, const double* src_box = nullptr);

}  // namespace stoker::detail
