#include "transform/image_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "transform/aten_sum.h"

// torchvision 0.14's F.gaussian_blur on an RGB PIL image (functional.py:
// pil_to_tensor, F_t.gaussian_blur, to_pil_image), with torch 1.13 on CPU:
//   kernel1d = _get_gaussian_kernel1d(k, sigma)  (float32: linspace, exp, / sum)
//   kernel2d = ky[:, None] @ kx[None, :]         (outer product, float32)
//   img = pad(img.float(), [kw//2, kw//2, kh//2, kh//2], "reflect")
//   img = conv2d(img, kernel2d, groups=3)        (float32)
//   torch.round(img).to(uint8)                   (half to even)
//
// The 1D kernels are reproduced bit for bit as torch computes them on this
// Debian build with ATen's AVX2 kernels (Sleef's expf, the 8-lane vectorised
// sum; checked against torch for thousands of (size, sigma) pairs). Where torch
// dispatches otherwise (AVX512's 16 lanes; ATEN_CPU_CAPABILITY=default uses
// std::exp) its kernels can differ from these in the last bit. The
// convolution is done separably in float32 (rows, then columns), which differs
// from conv2d's sum of rounded 2D products only in rounding: on uint8 the
// result is within 1 of torchvision's, and equal for all but a tiny share of
// pixels (tests/python/test_blur_op.py).
//
// Precondition (the caller refuses other sizes): kernel_w, kernel_h odd and
// >= 1, kernel_w / 2 < width, kernel_h / 2 < height, sigmas > 0. Otherwise
// torchvision raises (even sizes: ValueError; a padding >= its dimension:
// RuntimeError "Argument #4 [width] / #6 [height]: Padding size should be less
// than the corresponding input dimension" from reflect padding, width checked
// first) and this leaves the image unchanged.

namespace stoker::detail {
namespace {

// Sleef 3.5's xexpf (the u10 float exp ATen 1.13's AVX2 Vectorized<float>::exp
// calls as Sleef_expf8_u10, with FMA): torch.exp on float32, bit for bit.
float sleef_expf_u10(float d) {
  if (std::isnan(d)) return d;
  if (d < -104.0f) return 0.0f;  // Sleef: the result is masked to 0 below -104
  if (d > 100.0f) return HUGE_VALF;
  const float q = std::nearbyint(d * 1.442695040888963407359924681001892137426645954152985934135449406931f);
  float s = std::fma(q, -0.693145751953125f, d);
  s = std::fma(q, -1.428606765330187045e-06f, s);
  float u = 0.000198527617612853646278381f;
  u = std::fma(u, s, 0.00139304355252534151077271f);
  u = std::fma(u, s, 0.00833336077630519866943359f);
  u = std::fma(u, s, 0.0416664853692054748535156f);
  u = std::fma(u, s, 0.166666671633720397949219f);
  u = std::fma(u, s, 0.5f);
  const float s2 = s * s;
  u = 1.0f + std::fma(s2, u, s);
  // vldexp2_vf_vf_vi2: u * 2^(q >> 1) * 2^(q - (q >> 1)).
  const int e = static_cast<int>(q);
  const int h = e >> 1;
  const std::uint32_t b0 = static_cast<std::uint32_t>(h + 0x7f) << 23;
  const std::uint32_t b1 = static_cast<std::uint32_t>(e - h + 0x7f) << 23;
  float f0, f1;
  std::memcpy(&f0, &b0, sizeof f0);
  std::memcpy(&f1, &b1, sizeof f1);
  u = u * f0;
  return u * f1;
}

// functional_tensor._get_gaussian_kernel1d in float32:
//   x = torch.linspace(-(k - 1) * 0.5, (k - 1) * 0.5, steps=k)  (exact integers: the step is 1)
//   pdf = torch.exp(-0.5 * (x / sigma).pow(2)); kernel1d = pdf / pdf.sum()
// `x / sigma` divides by sigma rounded to float32, pow(2) is x * x.
void gaussian_kernel1d(int ksize, double sigma, float* out) {
  const float sig = static_cast<float>(sigma);
  const int half = ksize / 2;
  for (int i = 0; i < ksize; ++i) {
    const float t = static_cast<float>(i - half) / sig;
    const float t2 = t * t;
    out[i] = sleef_expf_u10(-0.5f * t2);
  }
  const float sum = aten_sum(out, ksize);
  for (int i = 0; i < ksize; ++i) out[i] /= sum;
}

// torch's reflect padding (no edge repeat) for -n < i < 2n - 1.
inline int reflect(int i, int n) { return i < 0 ? -i : (i >= n ? 2 * n - 2 - i : i); }

// dst[i] = sum_j k[j] * row(j)[i] for i < n, summed in order of j (four taps per sweep over the row, which
// rounds the same as one at a time); the inner loops are plain loops the compiler vectorises.
template <class Row>
void weighted_sum(const Row& row, const float* k, int taps, float* dst, int n) {
  {
    const float w = k[0];
    const float* p = row(0);
    for (int i = 0; i < n; ++i) dst[i] = w * p[i];
  }
  int j = 1;
  for (; j + 4 <= taps; j += 4) {
    const float w0 = k[j], w1 = k[j + 1], w2 = k[j + 2], w3 = k[j + 3];
    const float *p0 = row(j), *p1 = row(j + 1), *p2 = row(j + 2), *p3 = row(j + 3);
    for (int i = 0; i < n; ++i) {
      float a = dst[i];
      a += w0 * p0[i];
      a += w1 * p1[i];
      a += w2 * p2[i];
      a += w3 * p3[i];
      dst[i] = a;
    }
  }
  for (; j < taps; ++j) {
    const float w = k[j];
    const float* p = row(j);
    for (int i = 0; i < n; ++i) dst[i] += w * p[i];
  }
}

// torch.round (half to even) then uint8; 1.5 * 2^23 rounds to an integer for 0 <= v < 2^22.
inline std::uint8_t round_u8(float v) {
  constexpr float kMagic = 12582912.0f;
  const float r = (v + kMagic) - kMagic;
  const int q = static_cast<int>(r);
  return static_cast<std::uint8_t>(q < 0 ? 0 : (q > 255 ? 255 : q));
}

// The whole blur, inlined into each instruction-set version below.
inline void blur(ImageBuffer* img, int kernel_w, int kernel_h, double sigma_x, double sigma_y,
                 ImageOpScratch* scratch) {
  const int w = img->width, h = img->height;
  // Outside the precondition torchvision raises; leave the image as it is rather than read out of bounds.
  if (kernel_w < 1 || kernel_h < 1 || kernel_w % 2 == 0 || kernel_h % 2 == 0) return;
  if (kernel_w / 2 >= w || kernel_h / 2 >= h) return;
  if (kernel_w == 1 && kernel_h == 1) return;  // the kernel is [[1.0]]: torch returns the image unchanged
  const int px = kernel_w / 2, py = kernel_h / 2;
  const int n = 3 * w;  // floats per row, channels interleaved
  const int padded = n + 6 * px;

  // f0: the two 1D kernels, the padded source row, the vertical sums of one row; f1: a ring of kernel_h
  // horizontally filtered rows (row r in slot r % kernel_h).
  const std::size_t un = static_cast<std::size_t>(n);
  const std::size_t ky_off = static_cast<std::size_t>(kernel_w);
  const std::size_t row_off = ky_off + static_cast<std::size_t>(kernel_h);
  const std::size_t sum_off = row_off + static_cast<std::size_t>(padded);
  std::vector<float>& f0 = scratch->f0;
  std::vector<float>& f1 = scratch->f1;
  if (f0.size() < sum_off + un) f0.resize(sum_off + un);
  if (f1.size() < static_cast<std::size_t>(kernel_h) * un) f1.resize(static_cast<std::size_t>(kernel_h) * un);
  float* const kx = f0.data();
  float* const ky = f0.data() + ky_off;
  float* const prow = f0.data() + row_off;
  float* const vsum = f0.data() + sum_off;
  gaussian_kernel1d(kernel_w, sigma_x, kx);
  gaussian_kernel1d(kernel_h, sigma_y, ky);

  // Horizontal pass of source row y: reflect-pad it by px pixels, then out[3x + c] = sum_j kx[j] * in[3(x + j) + c].
  const auto filter_row = [&](int y) {
    const std::uint8_t* src = img->row(y);
    for (int i = 0; i < n; ++i) prow[3 * px + i] = static_cast<float>(src[i]);
    for (int x = 1; x <= px; ++x) {
      const int l = reflect(-x, w), r = reflect(w - 1 + x, w);
      for (int c = 0; c < 3; ++c) {
        prow[3 * (px - x) + c] = static_cast<float>(src[3 * l + c]);
        prow[3 * (px + w - 1 + x) + c] = static_cast<float>(src[3 * r + c]);
      }
    }
    float* const out = f1.data() + static_cast<std::size_t>(y % kernel_h) * un;
    weighted_sum([&](int j) { return prow + 3 * j; }, kx, kernel_w, out, n);
  };

  // Vertical pass, in place: output row y sums filtered rows reflect(y - py + j), j < kernel_h, all among the
  // last kernel_h filtered (source rows up to y + py, so source row y is filtered before it is overwritten).
  int next = 0;
  for (int y = 0; y < h; ++y) {
    for (const int last = std::min(h - 1, y + py); next <= last; ++next) filter_row(next);
    const auto row = [&](int j) {
      return f1.data() + static_cast<std::size_t>(reflect(y - py + j, h) % kernel_h) * un;
    };
    weighted_sum(row, ky, kernel_h, vsum, n);
    std::uint8_t* dst = img->row(y);
    for (int i = 0; i < n; ++i) dst[i] = round_u8(vsum[i]);
  }
}

// NOTE: the same code compiled for AVX2 (8 floats a vector instead of SSE2's
// 4; no FMA, so every product and sum rounds as in the baseline build: the
// outputs are identical, tested in augment_test) and for the baseline,
// chosen at run time. flatten inlines blur and its helpers into each.
__attribute__((target("avx2"), flatten)) void blur_avx2(ImageBuffer* img, int kernel_w, int kernel_h, double sigma_x,
                                                        double sigma_y, ImageOpScratch* scratch) {
  blur(img, kernel_w, kernel_h, sigma_x, sigma_y, scratch);
}
__attribute__((flatten)) void blur_baseline(ImageBuffer* img, int kernel_w, int kernel_h, double sigma_x,
                                            double sigma_y, ImageOpScratch* scratch) {
  blur(img, kernel_w, kernel_h, sigma_x, sigma_y, scratch);
}

}  // namespace

void gaussian_blur(ImageBuffer* img, int kernel_w, int kernel_h, double sigma_x, double sigma_y,
                   ImageOpScratch* scratch, bool allow_avx2) {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2 && allow_avx2) {
    blur_avx2(img, kernel_w, kernel_h, sigma_x, sigma_y, scratch);
  } else {
    blur_baseline(img, kernel_w, kernel_h, sigma_x, sigma_y, scratch);
  }
}

}  // namespace stoker::detail
