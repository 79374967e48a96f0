#include "transform/image_ops.h"

// Colour and per-value kernels: torchvision 0.14's functional_pil ops on an RGB image, reproducing Pillow 9.4's C
// code (Blend.c, Convert.c, Filter.c, Point.c) and the Python that drives it (ImageEnhance.py, ImageOps.py) byte for
// byte. Pillow runs its 8-bit RGB images as RGBX; only the three colour bytes matter here.
//
// Floating point: every expression below keeps Pillow's types (float where the C code has float, double where it
// mixes in a double literal) and its evaluation order. Debian builds Pillow for baseline x86-64, which has no FMA, so
// each product there is rounded before it is added. This file is built the same way (no -march), where compilers
// cannot contract either; should it be built for an FMA target, the pragmas below keep products and sums apart
// (clang honours FP_CONTRACT; GCC contracts across statements, so it needs fp-contract=off for the whole file).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__) && defined(__FMA__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace stoker::detail {
namespace {

using Lut = std::uint8_t[256];

// Maps every colour byte through one table (Image.point with the same 256 entries for each band).
void apply_lut(ImageBuffer* img, const Lut lut) {
  const std::size_t n = static_cast<std::size_t>(img->width) * 3;
  for (int y = 0; y < img->height; ++y) {
    std::uint8_t* p = img->row(y);
    for (std::size_t i = 0; i < n; ++i) p[i] = lut[p[i]];
  }
}

// Maps each band through its own table (Image.point with 768 entries).
void apply_luts(ImageBuffer* img, const Lut r, const Lut g, const Lut b) {
  for (int y = 0; y < img->height; ++y) {
    std::uint8_t* p = img->row(y);
    for (int x = 0; x < img->width; ++x, p += 3) {
      p[0] = r[p[0]];
      p[1] = g[p[1]];
      p[2] = b[p[2]];
    }
  }
}

// Image.histogram() of an RGB image: 256 counts per band.
void histogram(const ImageBuffer& img, std::int64_t hist[3][256]) {
  std::memset(hist, 0, sizeof(std::int64_t) * 3 * 256);
  const ImageView v = img.view();
  for (int y = 0; y < v.height; ++y) {
    const std::uint8_t* p = v.row(y);
    for (int x = 0; x < v.width; ++x, p += 3) {
      ++hist[0][p[0]];
      ++hist[1][p[1]];
      ++hist[2][p[2]];
    }
  }
}

// Convert.c rgb2l: ITU-R 601-2 luma in 16-bit fixed point, L24(rgb) >> 16.
inline int luma(const std::uint8_t* p) { return (p[0] * 19595 + p[1] * 38470 + p[2] * 7471 + 0x8000) >> 16; }

// min(max(t, 0), 255) with NaN going to 0, in a form compilers vectorize (maxps/minps).
inline float clamp_0_255(float t) {
  t = t > 0.0f ? t : 0.0f;
  return t < 255.0f ? t : 255.0f;
}

// Blend.c ImagingBlend(degenerate, image, alpha), one byte: (float)d + alpha * (float)(v - d), truncated to UINT8.
// Pillow clips only when alpha is outside [0, 1]; inside, the sum lies between d and v, where clipping is a no-op, so
// one clipped form serves every alpha (NaN, which Pillow's cast would also turn into 0, gives 0).
inline std::uint8_t blend_byte(int d, int v, float alpha) {
  const float product = alpha * static_cast<float>(v - d);
  const float temp = static_cast<float>(d) + product;
  return static_cast<std::uint8_t>(static_cast<int>(clamp_0_255(temp)));
}

// The table v -> blend_byte(d, v, alpha): Image.blend with a constant degenerate image.
void blend_lut(int d, float alpha, Lut lut) {
  for (int v = 0; v < 256; ++v) lut[v] = blend_byte(d, v, alpha);
}

// Convert.c rgb2hsv_row (following colorsys.py) for a pixel that is not grey, float/double exactly as there; returns
// the H and S bytes. Of Pillow's rc, gc, bc, the one of the smallest channel is cr / cr = 1.0f exactly, so one
// division gives h: with q that of the middle channel, r max: h = bc - gc = (b min ? 1 - q : q - 1); g max:
// h = 2.0 + rc - bc = (b min ? 1.0 + q : 3.0 - q); b max: h = 4.0 + gc - rc = (r min ? 3.0 + q : 5.0 - q), each
// exact in double before h is rounded to float, as there. fmod(h / 6.0 + 1.0, 1.0) is a subtraction of 1.0 for the
// values in [5/6, 2) that occur (exact by Sterbenz).
inline void rgb_to_hsv(int r, int g, int b, int maxc, int minc, int* uh, int* us) {
  const float cr = static_cast<float>(maxc - minc);
  const float s = cr / static_cast<float>(maxc);
  const int mid = r + g + b - maxc - minc;
  const float q = static_cast<float>(maxc - mid) / cr;
  const auto dq = static_cast<double>(q);
  float h;
  if (r == maxc) {
    h = b == minc ? 1.0f - q : q - 1.0f;
  } else if (g == maxc) {
    h = static_cast<float>(b == minc ? 1.0 + dq : 3.0 - dq);
  } else {
    h = static_cast<float>(r == minc ? 3.0 + dq : 5.0 - dq);
  }
  const double x = static_cast<double>(h) / 6.0 + 1.0;
  h = static_cast<float>(x >= 1.0 ? x - 1.0 : x);
  // h in [0, 1) and s in (0, 1]: CLIP8 is a no-op.
  *uh = static_cast<int>(static_cast<double>(h) * 255.0);
  *us = static_cast<int>(static_cast<double>(s) * 255.0);
}

// C's round() for 0 <= x < 2^31: half away from zero (x - trunc(x) is exact).
inline int round_nonnegative(double x) {
  const int n = static_cast<int>(x);
  return n + (x - static_cast<double>(n) >= 0.5 ? 1 : 0);
}

// hsv2rgb's terms that depend on h or s alone, computed as there: i = floor(h * 6.0 / 255.0) (the sector, i % 6) and
// f = h * 6.0 / 255.0 - i for each h, fs = s / 255.0 for each s.
struct HsvTerms {
  std::uint8_t sector[256];
  float f[256];
  double one_minus_f[256];  // 1.0 - f
  float fs[256];
  double one_minus_fs[256];  // 1.0 - fs
};

const HsvTerms& hsv_terms() {
  static const HsvTerms terms = [] {
    HsvTerms t{};
    for (int v = 0; v < 256; ++v) {
      const double h6 = static_cast<double>(static_cast<float>(v)) * 6.0 / 255.0;  // in [0, 6]: floor is truncation
      const int i = static_cast<int>(h6);
      t.sector[v] = static_cast<std::uint8_t>(i % 6);
      t.f[v] = static_cast<float>(h6 - static_cast<double>(static_cast<float>(i)));
      t.one_minus_f[v] = 1.0 - static_cast<double>(t.f[v]);
      t.fs[v] = static_cast<float>(static_cast<double>(static_cast<float>(v)) / 255.0);
      t.one_minus_fs[v] = 1.0 - static_cast<double>(t.fs[v]);
    }
    return t;
  }();
  return terms;
}

// Convert.c hsv2rgb (following colorsys.py) for s > 0, float/double exactly as there; writes p[0..2]. Each
// multiplier lies in [0, 1], so p, q, t lie in [0, v] and CLIP8 is a no-op.
inline void hsv_to_rgb(const HsvTerms& t, int h, int s, int v, std::uint8_t* p) {
  const double dv = static_cast<double>(v);
  const float fs_f = t.fs[s] * t.f[h];  // a float product in Pillow (both operands float)
  const double fs_1f = static_cast<double>(t.fs[s]) * t.one_minus_f[h];
  const auto up = static_cast<std::uint8_t>(round_nonnegative(dv * t.one_minus_fs[s]));
  const auto uq = static_cast<std::uint8_t>(round_nonnegative(dv * (1.0 - static_cast<double>(fs_f))));
  const auto ut = static_cast<std::uint8_t>(round_nonnegative(dv * (1.0 - fs_1f)));
  // Pillow's switch (i % 6) as a table: which of (v, p, q, t) goes to R, G and B in each sector.
  static constexpr std::uint8_t kOrder[6][3] = {{0, 3, 1}, {2, 0, 1}, {1, 0, 3}, {1, 2, 0}, {3, 1, 0}, {0, 1, 2}};
  const std::uint8_t vpqt[4] = {static_cast<std::uint8_t>(v), up, uq, ut};
  const std::uint8_t* order = kOrder[t.sector[h]];
  p[0] = vpqt[order[0]];
  p[1] = vpqt[order[1]];
  p[2] = vpqt[order[2]];
}

}  // namespace

// to_grayscale(img, 3): convert("L") (Convert.c rgb2l) copied to the three channels.
void pil_grayscale(ImageBuffer* img) {
  for (int y = 0; y < img->height; ++y) {
    std::uint8_t* p = img->row(y);
    for (int x = 0; x < img->width; ++x, p += 3) p[0] = p[1] = p[2] = static_cast<std::uint8_t>(luma(p));
  }
}

// ImageEnhance.Brightness: Image.blend(black image, img, factor), alpha cast to float by _imaging.c's _blend.
void pil_brightness(ImageBuffer* img, double factor) {
  Lut lut;
  blend_lut(0, static_cast<float>(factor), lut);
  apply_lut(img, lut);
}

// ImageEnhance.Contrast: the degenerate image is grey at int(mean + 0.5), the mean of the "L" histogram as
// ImageStat computes it (a float sum, exact below 2^53, divided by the count), then Image.blend.
void pil_contrast(ImageBuffer* img, double factor) {
  if (img->width <= 0 || img->height <= 0) return;
  std::int64_t sum = 0;
  for (int y = 0; y < img->height; ++y) {
    const std::uint8_t* p = img->row(y);
    std::int64_t row_sum = 0;
    for (int x = 0; x < img->width; ++x, p += 3) row_sum += luma(p);
    sum += row_sum;
  }
  const double count = static_cast<double>(img->width) * static_cast<double>(img->height);
  const double mean = static_cast<double>(sum) / count;
  Lut lut;
  blend_lut(static_cast<int>(mean + 0.5), static_cast<float>(factor), lut);
  apply_lut(img, lut);
}

// ImageEnhance.Color: Image.blend(img.convert("L").convert("RGB"), img, factor), per pixel. The grey bytes go to
// a small buffer first so that the blend runs over plain byte arrays (which compilers vectorize).
void pil_saturation(ImageBuffer* img, double factor) {
  constexpr int kChunk = 128;  // pixels
  const auto alpha = static_cast<float>(factor);
  std::uint8_t grey[kChunk * 3];
  for (int y = 0; y < img->height; ++y) {
    std::uint8_t* row = img->row(y);
    for (int x0 = 0; x0 < img->width; x0 += kChunk) {
      const int n = std::min(kChunk, img->width - x0);
      std::uint8_t* p = row + static_cast<std::ptrdiff_t>(x0) * 3;
      for (int i = 0; i < n; ++i) {
        const auto l = static_cast<std::uint8_t>(luma(p + 3 * i));
        grey[3 * i] = grey[3 * i + 1] = grey[3 * i + 2] = l;
      }
      for (int i = 0; i < 3 * n; ++i) p[i] = blend_byte(grey[i], p[i], alpha);
    }
  }
}

// ImageEnhance.Sharpness: Image.blend(img.filter(ImageFilter.SMOOTH), img, factor). SMOOTH is Filter.c's
// ImagingFilter3x3 with kernel (1 1 1 / 1 5 1 / 1 1 1) / 13 (each weight divided in float), offset 0.5 for rounding,
// rows summed y+1, y, y-1, each row left to right; the one-pixel border keeps the source pixels, and images under
// 3x3 are copied, so there the blend gives back the image. Done in place with the two source rows the filter still
// needs (y-1 and y) kept in scratch->tmp.
void pil_sharpness(ImageBuffer* img, double factor, ImageOpScratch* scratch) {
  const int w = img->width, h = img->height;
  if (w < 3 || h < 3) return;
  const auto alpha = static_cast<float>(factor);
  const float k1 = 1.0f / 13.0f, k5 = 5.0f / 13.0f;
  const std::size_t row_bytes = static_cast<std::size_t>(w) * 3;
  scratch->tmp.reset(w, 2);
  std::uint8_t* saved[2] = {scratch->tmp.row(0), scratch->tmp.row(1)};
  std::memcpy(saved[0], img->row(0), row_bytes);
  for (int y = 1; y < h - 1; ++y) {
    std::uint8_t* cur = img->row(y);
    const std::uint8_t* prev = saved[(y - 1) & 1];  // source row y-1 (row y-1 itself is already blended)
    std::uint8_t* src = saved[y & 1];
    std::memcpy(src, cur, row_bytes);
    const std::uint8_t* next = img->row(y + 1);
    for (std::size_t i = 3, end = row_bytes - 3; i < end; ++i) {
      float ss = 0.5f;
      const float a0 = static_cast<float>(next[i - 3]) * k1, a1 = static_cast<float>(next[i]) * k1,
                  a2 = static_cast<float>(next[i + 3]) * k1;
      ss += a0 + a1 + a2;
      const float b0 = static_cast<float>(src[i - 3]) * k1, b1 = static_cast<float>(src[i]) * k5,
                  b2 = static_cast<float>(src[i + 3]) * k1;
      ss += b0 + b1 + b2;
      const float c0 = static_cast<float>(prev[i - 3]) * k1, c1 = static_cast<float>(prev[i]) * k1,
                  c2 = static_cast<float>(prev[i + 3]) * k1;
      ss += c0 + c1 + c2;
      // Filter.c's clip8(ss) is a plain truncation here: the weights sum to 1 (within float rounding), so
      // ss lies in [0.5, 255.6). (Writing the clip out also stops GCC from vectorizing this loop.)
      cur[i] = blend_byte(static_cast<int>(ss), src[i], alpha);
    }
  }
}

// torchvision F_pil.adjust_hue: convert("HSV") (Convert.c rgb2hsv), H += np.uint8(hue_factor * 255) with uint8
// wrap-around, convert("RGB") (hsv2rgb). numpy 1.24 casts a negative float to uint8 by truncating toward zero to an
// int and keeping the low 8 bits (-63.75 -> -63 -> 193), which the shift below reproduces. The HSV round trip is
// lossy, so even a shift of 0 changes pixels.
void pil_hue(ImageBuffer* img, double hue_factor) {
  const double scaled = hue_factor * 255.0;
  const int whole = (scaled > -2147483648.0 && scaled < 2147483648.0) ? static_cast<int>(scaled) : 0;
  const auto shift = static_cast<unsigned>(whole) & 0xFFu;
  const HsvTerms& terms = hsv_terms();
  for (int y = 0; y < img->height; ++y) {
    std::uint8_t* p = img->row(y);
    for (int x = 0; x < img->width; ++x, p += 3) {
      const int r = p[0], g = p[1], b = p[2];
      const int maxc = std::max(r, std::max(g, b)), minc = std::min(r, std::min(g, b));
      int h = 0, s = 0;
      if (maxc != minc) rgb_to_hsv(r, g, b, maxc, minc, &h, &s);
      if (s == 0) {  // grey, or a saturation that truncated to 0: hsv2rgb gives (v, v, v)
        p[0] = p[1] = p[2] = static_cast<std::uint8_t>(maxc);
        continue;
      }
      hsv_to_rgb(terms, static_cast<int>((static_cast<unsigned>(h) + shift) & 0xFFu), s, maxc, p);
    }
  }
}

// ImageOps.solarize: i < threshold ? i : 255 - i.
void pil_solarize(ImageBuffer* img, int threshold) {
  Lut lut;
  for (int i = 0; i < 256; ++i) lut[i] = static_cast<std::uint8_t>(i < threshold ? i : 255 - i);
  apply_lut(img, lut);
}

// ImageOps.posterize: i & ~(2 ** (8 - bits) - 1) (bits <= 0 gives 0, bits >= 8 the image).
void pil_posterize(ImageBuffer* img, int bits) {
  if (bits >= 8) return;
  const int mask = bits <= 0 ? 0 : ~((1 << (8 - bits)) - 1);
  Lut lut;
  for (int i = 0; i < 256; ++i) lut[i] = static_cast<std::uint8_t>(i & mask);
  apply_lut(img, lut);
}

// ImageOps.invert: 255 - i.
void pil_invert(ImageBuffer* img) {
  Lut lut;
  for (int i = 0; i < 256; ++i) lut[i] = static_cast<std::uint8_t>(255 - i);
  apply_lut(img, lut);
}

// ImageOps.autocontrast (cutoff 0, no ignore): per band, lo/hi the lowest/highest values present; if hi <= lo the
// band is kept, else lut[ix] = int(ix * scale + offset) clipped to 0..255, scale = 255.0 / (hi - lo),
// offset = -lo * scale, in Python doubles.
void pil_autocontrast(ImageBuffer* img) {
  std::int64_t hist[3][256];
  histogram(*img, hist);
  Lut luts[3];
  for (int c = 0; c < 3; ++c) {
    int lo = 0, hi = 255;
    while (lo < 255 && hist[c][lo] == 0) ++lo;
    while (hi > 0 && hist[c][hi] == 0) --hi;
    if (hi <= lo) {
      for (int i = 0; i < 256; ++i) luts[c][i] = static_cast<std::uint8_t>(i);
      continue;
    }
    const double scale = 255.0 / static_cast<double>(hi - lo);
    const double offset = static_cast<double>(-lo) * scale;
    for (int i = 0; i < 256; ++i) {
      const double product = static_cast<double>(i) * scale;
      const double v = product + offset;
      luts[c][i] = static_cast<std::uint8_t>(v <= 0.0 ? 0 : v >= 255.0 ? 255 : static_cast<int>(v));
    }
  }
  apply_luts(img, luts[0], luts[1], luts[2]);
}

// ImageOps.equalize: per band, step = (count - count of the highest value present) // 255; a band with at most one
// value present or step 0 is kept, else lut[i] = n // step with n = step // 2 + the counts below i, clipped to 255 by
// _imaging.c's point (CLIP8).
void pil_equalize(ImageBuffer* img) {
  std::int64_t hist[3][256];
  histogram(*img, hist);
  Lut luts[3];
  for (int c = 0; c < 3; ++c) {
    std::int64_t total = 0, last = 0;
    int present = 0;
    for (int i = 0; i < 256; ++i) {
      if (hist[c][i] == 0) continue;
      total += hist[c][i];
      last = hist[c][i];
      ++present;
    }
    const std::int64_t step = present <= 1 ? 0 : (total - last) / 255;
    if (step == 0) {
      for (int i = 0; i < 256; ++i) luts[c][i] = static_cast<std::uint8_t>(i);
      continue;
    }
    std::int64_t n = step / 2;
    for (int i = 0; i < 256; ++i) {
      luts[c][i] = static_cast<std::uint8_t>(std::min<std::int64_t>(n / step, 255));
      n += hist[c][i];
    }
  }
  apply_luts(img, luts[0], luts[1], luts[2]);
}

}  // namespace stoker::detail
