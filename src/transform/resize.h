// Antialiased bilinear resize, bit-exact with Pillow's Image.resize(BILINEAR)
// (the resampling torchvision applies to PIL images): a triangle filter
// stretched by the scale when shrinking, 22-bit fixed-point weights,
// horizontal pass first over the rows the vertical pass needs, uint8 between
// the passes. Pure compute: no threads, no state beyond the scratch.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "image/pixels.h"
#include "util/util.h"

namespace stoker::detail {

// Per-axis fixed-point weights: output i reads `count[i]` inputs from
// `first[i]` with weights `weights[i * ksize ...]`.
struct ResampleAxis {
  int ksize = 0;
  std::vector<int> first;
  std::vector<int> count;
  std::vector<std::int32_t> weights;
  std::uint64_t bytes() const { return capacity_bytes(first) + capacity_bytes(count) + capacity_bytes(weights); }
};

// Output xx's window in Pillow's precompute_coeffs: its centre in input
// coordinates and its taps [xmin, xmin + n). One definition for the scalar
// loop below and compute_axis' vector one.
struct BilinearWindow {
  double center;
  int xmin, n;
};
inline BilinearWindow bilinear_window(int in_size, double in0, double scale, double support, int xx) {
  BilinearWindow w;
  w.center = in0 + (xx + 0.5) * scale;
  w.xmin = static_cast<int>(w.center - support + 0.5);
  if (w.xmin < 0) w.xmin = 0;
  int xmax = static_cast<int>(w.center + support + 0.5);
  if (xmax > in_size) xmax = in_size;
  w.n = xmax - w.xmin;
  return w;
}

// Pillow's precompute_coeffs for the bilinear (triangle) filter, for the
// input range [in0, in1) (Pillow's `box`; the whole input when in1 < 0):
// for each output xx, emit(xx, xmin, n, k) with k its n weights from input
// xmin, normalised to sum 1 (in double, as Pillow keeps them for its 32-bit
// modes "I" and "F"). Returns the kernel size (most weights of an output).
template <typename Emit>
int bilinear_coeffs(int in_size, int out_size, double in0, double in1, Emit&& emit) {
  if (in1 < 0) in1 = in_size;
  const double scale = (in1 - in0) / out_size;
  const double filterscale = scale > 1.0 ? scale : 1.0;
  const double support = 1.0 * filterscale;  // bilinear support is 1
  const int ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  std::vector<double> k(static_cast<std::size_t>(ksize));
  const double ss = 1.0 / filterscale;
  for (int xx = 0; xx < out_size; ++xx) {
    const BilinearWindow win = bilinear_window(in_size, in0, scale, support, xx);
    const double center = win.center;
    const int xmin = win.xmin, xmax = win.n;
    double ww = 0.0;
    for (int x = 0; x < xmax; ++x) {
      const double t = std::fabs((x + xmin - center + 0.5) * ss);
      const double w = t < 1.0 ? 1.0 - t : 0.0;
      k[static_cast<std::size_t>(x)] = w;
      ww += w;
    }
    for (int x = 0; x < xmax; ++x) {
      if (ww != 0.0) k[static_cast<std::size_t>(x)] /= ww;
    }
    emit(xx, xmin, xmax, k.data());
  }
  return ksize;
}


struct ResizeScratch {
  ResampleAxis horizontal;
  ResampleAxis vertical;
  ImageBuffer temp;                 // result of the horizontal pass
  std::vector<std::int32_t> accum;         // one output row of the vertical pass
  std::vector<std::int32_t> pair_weights;  // SIMD horizontal passes: weights as int16 pairs (and AVX-512's indices)
  std::uint64_t bytes() const {
    return horizontal.bytes() + vertical.bytes() + temp.bytes() + capacity_bytes(accum) + capacity_bytes(pair_weights);
  }
};

// Instruction sets the kernels may use, in order; each level also uses those
// below it where it has no kernel of its own.
enum class Simd { kNone, kSse41, kAvx2, kAvx512 };
// Whether this CPU runs `level`'s kernels (kNone: always).
bool simd_supported(Simd level);

// Pillow's precompute_coeffs + normalize_coeffs_8bpc, for the input range
// [in0, in1) (Pillow's `box`; the whole input when in1 < 0). With AVX-512,
// eight outputs at a time, one per double lane, the same operations in the
// same order per lane (so the same weights: tested against kNone).
void compute_axis(int in_size, int out_size, ResampleAxis* axis, double in0 = 0, double in1 = -1,
                  Simd simd = Simd::kAvx512);

// Where a resize's output rows go. row(y) gives the memory for output row y
// (width x 3 bytes); done(y) is called once it is complete, rows in order.
// The pipeline's sink converts each row into the batch slot while it is
// still in L1, instead of a second pass over a whole uint8 image.
class RowSink {
 public:
  virtual std::uint8_t* row(int y) = 0;
  virtual void done(int /*y*/) {}

 protected:
  ~RowSink() = default;
};

// Resizes `src` (RGB8) to out_w x out_h into *dst. REQUIRES: out_w, out_h > 0.
// `simd` caps the instruction set (tests compare every level with kNone);
// the best the CPU has below the cap runs.
// `box` (x0, y0, x1, y1), when given, is the source region to resample, in
// fractional pixels, as Pillow's Image.resize(size, box=...).
void resize_bilinear(const ImageView& src, int out_w, int out_h, ResizeScratch* scratch, ImageBuffer* dst,
                     Simd simd = Simd::kAvx512, const double* box = nullptr);
// The same, handing the rows to `sink` (the horizontal-only and same-size
// cases copy each row into it).
void resize_bilinear(const ImageView& src, int out_w, int out_h, ResizeScratch* scratch, RowSink* sink,
                     Simd simd = Simd::kAvx512, const double* box = nullptr);

}  // namespace stoker::detail
