#include "transform/image_ops.h"

// The policies' ops as torchvision 0.14's autoaugment._apply_op runs them on a uint8 image tensor [1, 3, H, W]
// (what AugMix does to a PIL image after pil_to_tensor), with torch 1.13 on CPU (AVX2 kernels):
//   ShearX/Y, TranslateX/Y: F.affine -> F_t.affine;  Rotate: F.rotate -> F_t.rotate
//   (_gen_affine_grid, then _apply_grid_transform: grid_sample, the fill mask, round, uint8)
//   Brightness, Color, Contrast, Sharpness: F_t.adjust_* (_blend in float32, clamp, truncation to uint8)
//   Posterize, Solarize, Invert, AutoContrast, Equalize: F_t's uint8 and float32 versions.
//
// Floating point follows torch's kernels operation by operation, each rounded to float32 as torch stores it. Where
// torch's AVX2 code fuses a multiply and an add (GCC contracts its Vectorized<float> arithmetic into FMAs), std::fma
// does the same; every other product is rounded before it is added. Checked against torch on this build: the affine
// grid (no FMA: the bmm's naive and BLAS paths both sum x*a + y*b + c in order, products rounded) and grid_sample's
// vectorised kernel (FMA in the unnormalisation and in the bilinear sum) bit for bit.
//
// This file must be compiled without implicit contraction (a*b + c into one FMA) wherever FMA is available: clang
// honours FP_CONTRACT; GCC contracts across statements even in ISO mode, so it gets fp-contract=off.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numbers>
#include <utility>
#include <vector>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "transform/aten_sum.h"

namespace stoker::detail {
namespace {

// --- helpers ---

// torch.round on float32 (half to even; the default rounding mode): |v| < 2^23 rounds by adding and removing 2^23,
// larger values are integers already.
inline float round_even(float v) {
  constexpr float kTwo23 = 8388608.0f;
  if (!(std::fabs(v) < kTwo23)) return v;
  const float m = v < 0 ? -kTwo23 : kTwo23;
  const float t = v + m;
  return t - m;
}

// floor on float32 (what _mm256_floor_ps gives), from round_even.
inline float floor_f(float v) {
  const float r = round_even(v);
  return r > v ? r - 1.0f : r;
}

// float32 -> uint8 as torch's .to(torch.uint8) converts (C's truncation toward zero; values past int32 become x86's
// "integer indefinite" 0x80000000, whose low byte is 0; in between, the low byte).
inline std::uint8_t to_u8(float v) {
  if (!(v > -2147483648.0f && v < 2147483648.0f)) return 0;
  return static_cast<std::uint8_t>(static_cast<std::uint32_t>(static_cast<std::int32_t>(v)));
}

// _blend's end: .clamp(0, 255).to(torch.uint8) (truncation).
inline std::uint8_t clamp_u8(float v) {
#if defined(__SSE2__)
  // NOTE: maxss / minss: GCC compiles std::max / std::min here into branches, slow on noisy images.
  const __m128 c = _mm_min_ss(_mm_max_ss(_mm_set_ss(v), _mm_setzero_ps()), _mm_set_ss(255.0f));
  return static_cast<std::uint8_t>(_mm_cvttss_si32(c));
#else
  return static_cast<std::uint8_t>(static_cast<int>(std::min(std::max(v, 0.0f), 255.0f)));
#endif
}

// Maps every colour byte through its channel's table.
void apply_luts(ImageBuffer* img, const std::uint8_t (*lut)[256]) {
  for (int y = 0; y < img->height; ++y) {
    std::uint8_t* p = img->row(y);
    for (int x = 0; x < img->width; ++x, p += 3) {
      p[0] = lut[0][p[0]];
      p[1] = lut[1][p[1]];
      p[2] = lut[2][p[2]];
    }
  }
}

// --- colour ops ---

// rgb_to_grayscale: (0.2989 * r + 0.587 * g + 0.114 * b).to(uint8), each product and sum in float32, truncated.
void grayscale(const ImageBuffer& img, std::uint8_t* gray) {
  float wr[256], wg[256], wb[256];
  for (int v = 0; v < 256; ++v) {
    const auto f = static_cast<float>(v);
    wr[v] = 0.2989f * f;
    wg[v] = 0.587f * f;
    wb[v] = 0.114f * f;
  }
  std::size_t i = 0;
  for (int y = 0; y < img.height; ++y) {
    const std::uint8_t* p = img.pixels.data() + y * img.stride;
    for (int x = 0; x < img.width; ++x, p += 3) {
      const float rg = wr[p[0]] + wg[p[1]];
      const float l = rg + wb[p[2]];
      gray[i++] = static_cast<std::uint8_t>(static_cast<int>(l));
    }
  }
}

// _blend(img1, img2, ratio) = (ratio * img1 + (1.0 - ratio) * img2).clamp(0, 255).to(uint8): ratio and 1.0 - ratio
// (a double) become float32 scalars; each product rounds to float32, then the sum.
struct Blend {
  float a[256];  // ratio * v
  float r, s;    // ratio, 1.0 - ratio
  explicit Blend(double ratio) : r(static_cast<float>(ratio)), s(static_cast<float>(1.0 - ratio)) {
    for (int v = 0; v < 256; ++v) a[v] = r * static_cast<float>(v);
  }
  std::uint8_t operator()(std::uint8_t v, float other) const {
    const float b = s * other;
    return clamp_u8(a[v] + b);
  }
};

// adjust_brightness: _blend(img, zeros_like(img), factor).
void brightness(ImageBuffer* img, double factor) {
  const Blend blend(factor);
  std::uint8_t lut[3][256];
  for (int v = 0; v < 256; ++v) lut[0][v] = lut[1][v] = lut[2][v] = blend(static_cast<std::uint8_t>(v), 0.0f);
  apply_luts(img, lut);
}

// adjust_saturation: _blend(img, rgb_to_grayscale(img), factor), the gray image uint8.
void saturation(ImageBuffer* img, double factor, ImageOpScratch* scratch) {
  scratch->tmp.reset(img->width, img->height, 1);
  std::uint8_t* gray = scratch->tmp.pixels.data();
  grayscale(*img, gray);
  const Blend blend(factor);
  float other[256];
  for (int v = 0; v < 256; ++v) other[v] = blend.s * static_cast<float>(v);
  std::size_t i = 0;
  for (int y = 0; y < img->height; ++y) {
    std::uint8_t* p = img->row(y);
    for (int x = 0; x < img->width; ++x, p += 3, ++i) {
      const float b = other[gray[i]];
      for (int c = 0; c < 3; ++c) p[c] = clamp_u8(blend.a[p[c]] + b);
    }
  }
}

// adjust_contrast: mean = torch.mean(rgb_to_grayscale(img).to(float32)) (a float32 sum, then / numel), then
// _blend(img, mean, factor). The sum is torch's on one thread: on several, torch splits sums of 32768 values or more
// between them, which can change the mean's last bit once the sum passes 2^24 (below, every partial sum is exact).
void contrast(ImageBuffer* img, double factor, ImageOpScratch* scratch) {
  const int n = img->width * img->height;
  scratch->tmp.reset(img->width, img->height, 1);
  std::uint8_t* gray = scratch->tmp.pixels.data();
  grayscale(*img, gray);
  std::vector<float>& f = scratch->f0;
  if (f.size() < static_cast<std::size_t>(n)) f.resize(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) f[static_cast<std::size_t>(i)] = static_cast<float>(gray[i]);
  const float mean = aten_sum(f.data(), n) / static_cast<float>(n);
  const Blend blend(factor);
  std::uint8_t lut[3][256];
  for (int v = 0; v < 256; ++v) lut[0][v] = lut[1][v] = lut[2][v] = blend(static_cast<std::uint8_t>(v), mean);
  apply_luts(img, lut);
}

// adjust_sharpness: _blend(img, _blurred_degenerate_image(img), factor); the blurred image is conv2d with
// [[1, 1, 1], [1, 5, 1], [1, 1, 1]] / 13 in float32, rounded to uint8, on the interior (the border kept). The
// exact result is S / 13 for an integer S, never within float32 error of a .5, so round(S / 13) in integers is
// what torch gets whatever its summation order.
void sharpness(ImageBuffer* img, double factor, ImageOpScratch* scratch) {
  const int w = img->width, h = img->height;
  if (w <= 2 || h <= 2) return;  // torchvision returns the image unchanged
  const Blend blend(factor);
  float other[256];
  for (int v = 0; v < 256; ++v) other[v] = blend.s * static_cast<float>(v);
  // Rows y - 1 and y of the source, kept while row y is overwritten.
  const std::size_t row = static_cast<std::size_t>(w) * 3;
  scratch->tmp.reset(w, 2);
  std::uint8_t* saved[2] = {scratch->tmp.row(0), scratch->tmp.row(1)};
  std::copy_n(img->row(0), row, saved[0]);
  const auto blend_row = [&](int y) {  // the first and last rows blend with themselves
    std::uint8_t* p = img->row(y);
    for (std::size_t i = 0; i < row; ++i) p[i] = blend(p[i], static_cast<float>(p[i]));
  };
  blend_row(0);
  for (int y = 1; y < h - 1; ++y) {
    const std::uint8_t* up = saved[(y - 1) & 1];
    std::uint8_t* cur = saved[y & 1];
    std::uint8_t* p = img->row(y);
    std::copy_n(p, row, cur);
    const std::uint8_t* down = img->row(y + 1);
    for (int c = 0; c < 3; ++c) {  // the first and last columns
      p[c] = blend(cur[c], static_cast<float>(cur[c]));
      const std::size_t e = row - 3 + static_cast<std::size_t>(c);
      p[e] = blend(cur[e], static_cast<float>(cur[e]));
    }
    for (std::size_t i = 3; i + 3 < row; ++i) {
      const int s =
          up[i - 3] + up[i] + up[i + 3] + cur[i - 3] + 5 * cur[i] + cur[i + 3] + down[i - 3] + down[i] + down[i + 3];
      const int blurred = (2 * s + 13) / 26;  // round(s / 13): never a tie
      p[i] = clamp_u8(blend.a[cur[i]] + other[blurred]);
    }
  }
  blend_row(h - 1);
}

// --- per-value ops ---

// posterize: img & -int(2 ** (8 - bits)) (the mask as uint8; 2 ** negative truncates to 0).
void posterize(ImageBuffer* img, double magnitude) {
  const double bits = std::isnan(magnitude) ? 0.0 : std::trunc(std::clamp(magnitude, -64.0, 64.0));  // int()
  const int e = 8 - static_cast<int>(bits);
  const std::uint8_t mask = (e < 0 || e >= 8) ? 0 : static_cast<std::uint8_t>(0xFF << e);
  std::uint8_t lut[3][256];
  for (int v = 0; v < 256; ++v) lut[0][v] = lut[1][v] = lut[2][v] = static_cast<std::uint8_t>(v & mask);
  apply_luts(img, lut);
}

// solarize: torch.where(img >= threshold, 255 - img, img), compared in float32.
void solarize(ImageBuffer* img, double magnitude) {
  const auto threshold = static_cast<float>(magnitude);
  std::uint8_t lut[3][256];
  for (int v = 0; v < 256; ++v) {
    lut[0][v] = lut[1][v] = lut[2][v] =
        static_cast<float>(v) >= threshold ? static_cast<std::uint8_t>(255 - v) : static_cast<std::uint8_t>(v);
  }
  apply_luts(img, lut);
}

// invert: 255 - img.
void invert(ImageBuffer* img) {
  std::uint8_t lut[3][256];
  for (int v = 0; v < 256; ++v) lut[0][v] = lut[1][v] = lut[2][v] = static_cast<std::uint8_t>(255 - v);
  apply_luts(img, lut);
}

// autocontrast, per channel in float32: scale = 255.0 / (max - min) (a scalar over a tensor: reciprocal, then the
// product); where not finite, min = 0 and scale = 1; ((img - min) * scale).clamp(0, 255).to(uint8).
void autocontrast(ImageBuffer* img) {
  int lo[3] = {255, 255, 255}, hi[3] = {0, 0, 0};
  for (int y = 0; y < img->height; ++y) {
    const std::uint8_t* p = img->row(y);
    for (int x = 0; x < img->width; ++x, p += 3) {
      for (int c = 0; c < 3; ++c) {
        lo[c] = std::min(lo[c], static_cast<int>(p[c]));
        hi[c] = std::max(hi[c], static_cast<int>(p[c]));
      }
    }
  }
  std::uint8_t lut[3][256];
  for (int c = 0; c < 3; ++c) {
    float minimum = static_cast<float>(lo[c]);
    const float range = static_cast<float>(hi[c]) - minimum;
    const float reciprocal = 1.0f / range;
    float scale = reciprocal * 255.0f;
    if (!std::isfinite(scale)) {
      minimum = 0.0f;
      scale = 1.0f;
    }
    for (int v = 0; v < 256; ++v) {
      const float d = static_cast<float>(v) - minimum;
      lut[c][v] = clamp_u8(d * scale);
    }
  }
  apply_luts(img, lut);
}

// equalize, per channel (_scale_channel, integer math): hist = bincount; step = sum(nonzero hist without its last)
// // 255; step 0: unchanged; lut = (cumsum(hist) + step // 2) // step, shifted right by one, clamped to 255.
void equalize(ImageBuffer* img) {
  std::int64_t hist[3][256] = {};
  for (int y = 0; y < img->height; ++y) {
    const std::uint8_t* p = img->row(y);
    for (int x = 0; x < img->width; ++x, p += 3) {
      ++hist[0][p[0]];
      ++hist[1][p[1]];
      ++hist[2][p[2]];
    }
  }
  std::uint8_t lut[3][256];
  for (int c = 0; c < 3; ++c) {
    std::int64_t total = 0;
    int last = -1;
    for (int v = 0; v < 256; ++v) {
      total += hist[c][v];
      if (hist[c][v] != 0) last = v;
    }
    const std::int64_t step = last < 0 ? 0 : (total - hist[c][last]) / 255;
    if (step == 0) {
      for (int v = 0; v < 256; ++v) lut[c][v] = static_cast<std::uint8_t>(v);
      continue;
    }
    std::int64_t cum = 0;
    lut[c][0] = 0;
    for (int v = 1; v < 256; ++v) {
      cum += hist[c][v - 1];
      lut[c][v] = static_cast<std::uint8_t>(std::min<std::int64_t>(255, (cum + step / 2) / step));
    }
  }
  apply_luts(img, lut);
}

// --- warps ---

// functional._get_inverse_affine_matrix(center, angle, translate, scale=1.0, shear) in double, as Python computes
// it (math.radians: x * (pi / 180)).
void inverse_affine_matrix(double cx, double cy, double angle, double tx, double ty, double shear_x, double shear_y,
                           double m[6]) {
  constexpr double kDegToRad = std::numbers::pi / 180.0;
  const double rot = angle * kDegToRad;
  const double sx = shear_x * kDegToRad;
  const double sy = shear_y * kDegToRad;
  const double a = std::cos(rot - sy) / std::cos(sy);
  const double b = -std::cos(rot - sy) * std::tan(sx) / std::cos(sy) - std::sin(rot);
  const double c = std::sin(rot - sy) / std::cos(sy);
  const double d = -std::sin(rot - sy) * std::tan(sx) / std::cos(sy) + std::cos(rot);
  m[0] = d;  // [d, -b, 0, -c, a, 0] / scale (1.0: exact)
  m[1] = -b;
  m[2] = 0.0;
  m[3] = -c;
  m[4] = a;
  m[5] = 0.0;
  const double ux = -cx - tx, uy = -cy - ty;
  const double m2x = m[0] * ux, m2y = m[1] * uy;
  m[2] += m2x + m2y;
  const double m5x = m[3] * ux, m5y = m[4] * uy;
  m[5] += m5x + m5y;
  m[2] += cx;
  m[5] += cy;
}

// F_t.affine / F_t.rotate (expand=False) on the uint8 image, output the same size:
//   theta = tensor(matrix, float32); _gen_affine_grid: base (x, y, 1) with x = linspace(-w/2 + 0.5, w/2 - 0.5, w)
//     (exact half-integers), rescaled_theta = theta^T / [w/2, h/2], grid = base.bmm(rescaled_theta):
//     gx = (x * a + y * b) + c, products rounded;
//   grid_sample(align_corners=False, zeros) with GridSamplerKernel.cpp's AVX2 kernel: ix = fma(gx + 1, w/2, -0.5);
//     nearest: round half to even, zero outside; bilinear: w = ix - floor(ix), e = 1 - w (and n, s for y),
//     weights nw = s * e, ne = s * w, sw = n * e, se = n * w, value
//     fma(v_se, se, fma(v_sw, sw, fma(v_ne, ne, v_nw * nw))), corners outside the image 0;
//   with a fill: a channel of ones sampled alike (the mask); nearest: fill where the mask is 0; bilinear:
//     img * mask + (1 - mask) * fill in float32;
//   torch.round, then uint8.
template <bool kBilinear, bool kFill>
inline void warp_impl(const ImageBuffer& src, ImageBuffer* dst, const double matrix[6], const float* fill,
                      float* colx) {
  const int w = src.width, h = src.height;
  float theta[6];
  for (int i = 0; i < 6; ++i) theta[i] = static_cast<float>(matrix[i]);
  const auto half_w = static_cast<float>(0.5 * w), half_h = static_cast<float>(0.5 * h);
  const float ax = theta[0] / half_w, bx = theta[1] / half_w, cx = theta[2] / half_w;
  const float ay = theta[3] / half_h, by = theta[4] / half_h, cy = theta[5] / half_h;
  const auto x0 = static_cast<float>(-w * 0.5 + 0.5), y0 = static_cast<float>(-h * 0.5 + 0.5);
  // x * a per column, for both grid coordinates.
  for (int j = 0; j < w; ++j) {
    const float x = x0 + static_cast<float>(j);
    colx[2 * j] = x * ax;
    colx[2 * j + 1] = x * ay;
  }
  const float scale_x = static_cast<float>(w) / 2, scale_y = static_cast<float>(h) / 2;
  const auto fw = static_cast<float>(w), fh = static_cast<float>(h);
  float fill_round[3] = {0, 0, 0};
  if (kFill) {
    for (int c = 0; c < 3; ++c) fill_round[c] = round_even(fill[c]);
  }
  for (int i = 0; i < h; ++i) {
    const float y = y0 + static_cast<float>(i);
    const float ybx = y * bx, yby = y * by;
    std::uint8_t* out = dst->row(i);
    for (int j = 0; j < w; ++j, out += 3) {
      const float gx = (colx[2 * j] + ybx) + cx;
      const float gy = (colx[2 * j + 1] + yby) + cy;
      const float ix = std::fma(gx + 1.0f, scale_x, -0.5f);
      const float iy = std::fma(gy + 1.0f, scale_y, -0.5f);
      if (!kBilinear) {
        const float xn = round_even(ix), yn = round_even(iy);
        if (xn > -1.0f && xn < fw && yn > -1.0f && yn < fh) {
          const std::uint8_t* p = src.pixels.data() + static_cast<int>(yn) * src.stride + 3 * static_cast<int>(xn);
          out[0] = p[0];
          out[1] = p[1];
          out[2] = p[2];
        } else {
          for (int c = 0; c < 3; ++c) out[c] = kFill ? to_u8(fill_round[c]) : 0;
        }
        continue;
      }
      const float xw = floor_f(ix), yn = floor_f(iy);
      const float we = ix - xw, ee = 1.0f - we;  // distances to the west and east neighbours' columns
      const float nn = iy - yn, ss = 1.0f - nn;
      const float nw = ss * ee, ne = ss * we, sw = nn * ee, se = nn * we;
      const bool in_w = xw > -1.0f && xw < fw;
      const bool in_e = xw + 1.0f > -1.0f && xw + 1.0f < fw;
      const bool in_n = yn > -1.0f && yn < fh;
      const bool in_s = yn + 1.0f > -1.0f && yn + 1.0f < fh;
      const bool k_nw = in_n && in_w, k_ne = in_n && in_e, k_sw = in_s && in_w, k_se = in_s && in_e;
      // The corners' values, 0 outside the image (mask_gather's zeros).
      const std::uint8_t* data = src.pixels.data();
      float v[4][3] = {};
      if (k_nw || k_ne || k_sw || k_se) {
        const std::ptrdiff_t on = static_cast<std::ptrdiff_t>(yn) * src.stride + 3 * static_cast<int>(xw);
        const std::ptrdiff_t corner[4] = {on, on + 3, on + src.stride, on + src.stride + 3};
        const bool inside[4] = {k_nw, k_ne, k_sw, k_se};
        for (int k = 0; k < 4; ++k) {
          if (!inside[k]) continue;
          for (int c = 0; c < 3; ++c) v[k][c] = static_cast<float>(data[corner[k] + c]);
        }
      }
      float mask = 1.0f, keep = 0.0f;
      if (kFill) {
        const float m0 = k_nw ? nw : 0.0f;
        const float m1 = std::fma(k_ne ? 1.0f : 0.0f, ne, m0);
        const float m2 = std::fma(k_sw ? 1.0f : 0.0f, sw, m1);
        mask = std::fma(k_se ? 1.0f : 0.0f, se, m2);
        keep = 1.0f - mask;
      }
      for (int c = 0; c < 3; ++c) {
        const float t0 = v[0][c] * nw;
        const float t1 = std::fma(v[1][c], ne, t0);
        const float t2 = std::fma(v[2][c], sw, t1);
        float value = std::fma(v[3][c], se, t2);
        if (kFill) {
          const float a = value * mask;
          const float b = keep * fill[c];
          value = a + b;
        }
        out[c] = to_u8(round_even(value));
      }
    }
  }
}

using WarpFn = void (*)(const ImageBuffer&, ImageBuffer*, const double*, const float*, float*);

template <bool kBilinear, bool kFill>
void warp_baseline(const ImageBuffer& src, ImageBuffer* dst, const double matrix[6], const float* fill, float* colx) {
  warp_impl<kBilinear, kFill>(src, dst, matrix, fill, colx);
}

// NOTE: the same code for CPUs with FMA, where std::fma is one instruction instead of a call to fmaf (the results
// are identical: every product and sum rounds as in the baseline, the pragmas above forbidding contraction).
template <bool kBilinear, bool kFill>
__attribute__((target("avx2,fma"), flatten)) void warp_fma(const ImageBuffer& src, ImageBuffer* dst,
                                                           const double matrix[6], const float* fill, float* colx) {
  warp_impl<kBilinear, kFill>(src, dst, matrix, fill, colx);
}

void warp(ImageBuffer* img, const double matrix[6], bool bilinear, const float* fill, ImageOpScratch* scratch) {
  const int w = img->width, h = img->height;
  if (w <= 0 || h <= 0) return;
  static const bool has_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  static constexpr WarpFn kBaseline[2][2] = {{warp_baseline<false, false>, warp_baseline<false, true>},
                                             {warp_baseline<true, false>, warp_baseline<true, true>}};
  static constexpr WarpFn kFma[2][2] = {{warp_fma<false, false>, warp_fma<false, true>},
                                        {warp_fma<true, false>, warp_fma<true, true>}};
  const WarpFn fn = (has_fma ? kFma : kBaseline)[bilinear ? 1 : 0][fill != nullptr ? 1 : 0];
  std::vector<float>& colx = scratch->f0;
  if (colx.size() < 2 * static_cast<std::size_t>(w)) colx.resize(2 * static_cast<std::size_t>(w));
  scratch->tmp.reset(w, h);
  fn(*img, &scratch->tmp, matrix, fill, colx.data());
  std::swap(*img, scratch->tmp);
}

}  // namespace

void tensor_apply_op(ImageBuffer* img, PolicyOp op, double magnitude, bool bilinear, const float* fill,
                     ImageOpScratch* scratch) {
  if (img->width <= 0 || img->height <= 0) return;
  constexpr double kRadToDeg = 180.0 / std::numbers::pi;  // math.degrees
  const double w = img->width, h = img->height;
  double m[6];
  switch (op) {
    case PolicyOp::kIdentity:
      return;
    case PolicyOp::kShearX:  // F.affine(shear=[degrees(atan(magnitude)), 0], center=[0, 0]): center_f = -size / 2
      inverse_affine_matrix(0 - w * 0.5, 0 - h * 0.5, 0.0, 0.0, 0.0, std::atan(magnitude) * kRadToDeg, 0.0, m);
      warp(img, m, bilinear, fill, scratch);
      return;
    case PolicyOp::kShearY:
      inverse_affine_matrix(0 - w * 0.5, 0 - h * 0.5, 0.0, 0.0, 0.0, 0.0, std::atan(magnitude) * kRadToDeg, m);
      warp(img, m, bilinear, fill, scratch);
      return;
    case PolicyOp::kTranslateX:  // F.affine(translate=[int(magnitude), 0]), center None: center_f = [0, 0]
      inverse_affine_matrix(0.0, 0.0, 0.0, std::trunc(magnitude), 0.0, 0.0, 0.0, m);
      warp(img, m, bilinear, fill, scratch);
      return;
    case PolicyOp::kTranslateY:
      inverse_affine_matrix(0.0, 0.0, 0.0, 0.0, std::trunc(magnitude), 0.0, 0.0, m);
      warp(img, m, bilinear, fill, scratch);
      return;
    case PolicyOp::kRotate:  // F.rotate(magnitude): the matrix for -angle about the centre
      inverse_affine_matrix(0.0, 0.0, -magnitude, 0.0, 0.0, 0.0, 0.0, m);
      warp(img, m, bilinear, fill, scratch);
      return;
    case PolicyOp::kBrightness:
      brightness(img, 1.0 + magnitude);
      return;
    case PolicyOp::kColor:
      saturation(img, 1.0 + magnitude, scratch);
      return;
    case PolicyOp::kContrast:
      contrast(img, 1.0 + magnitude, scratch);
      return;
    case PolicyOp::kSharpness:
      sharpness(img, 1.0 + magnitude, scratch);
      return;
    case PolicyOp::kPosterize:
      posterize(img, magnitude);
      return;
    case PolicyOp::kSolarize:
      solarize(img, magnitude);
      return;
    case PolicyOp::kAutoContrast:
      autocontrast(img);
      return;
    case PolicyOp::kEqualize:
      equalize(img);
      return;
    case PolicyOp::kInvert:
      invert(img);
      return;
  }
}

}  // namespace stoker::detail
