#include "transform/image_ops.h"
#include "transform/raster.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

// NOTE: every expression below reproduces Pillow's C or CPython's float
// arithmetic operation by operation, each product and sum rounded to double on
// its own. They must not be contracted into fused multiply-adds (Pillow is
// built for the x86-64 baseline, which has none): products are kept in named
// variables where the C code has them inside one expression, and both
// compilers are told not to contract (GCC otherwise fuses across statements
// when the target has FMA, e.g. -march=native).
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace stoker::detail {
namespace {

__extension__ typedef unsigned __int128 U128;

// CPython's math.radians(): x * (pi / 180.0), the constant folded in double.
constexpr double kDegToRad = 3.14159265358979323846 / 180.0;

// Geometry.c's COORD(): -1 for a negative position, else truncation. Where
// Pillow's (int) overflows (x86: INT_MIN, so "out of range") or sees NaN
// (the same), this also answers out of range.
inline int coord(double v) {
  if (v < 0.0) return -1;
  return v < 2147483648.0 ? static_cast<int>(v) : -1;
}

// Geometry.c's FLOOR(); only used on positions known to be in int range.
inline int floor_int(double v) { return v < 0.0 ? static_cast<int>(std::floor(v)) : static_cast<int>(v); }

template <int N>
inline void put_pixel(std::uint8_t* out, const std::uint8_t* in) {
  std::memcpy(out, in, N);
}

template <int N>
inline void put_fill(std::uint8_t* out, const std::uint8_t* fill) {
  std::memcpy(out, fill, N);
}

template <int N>
void fill_row(std::uint8_t* out, int width, const std::uint8_t* fill) {
  if constexpr (N == 1) {
    std::memset(out, fill[0], static_cast<std::size_t>(width));
    return;
  }
  for (int x = 0; x < width; ++x) put_fill<N>(out + static_cast<std::ptrdiff_t>(x) * N, fill);
}

// A source of N-byte pixels (RGB8: 3, L: 1, I;16: 2) and its output rows.
struct Plane {
  const std::uint8_t* data;
  std::ptrdiff_t stride;
  int width, height;
  const std::uint8_t* row(int y) const { return data + y * stride; }
};

struct OutPlane {
  std::uint8_t* data;
  std::ptrdiff_t stride;
  int width, height;
  std::uint8_t* row(int y) const { return data + y * stride; }
};

// ImagingScaleAffine (a[1] == a[3] == 0, NEAREST, 8-bit storage): running
// sums of a[0] across a row and a[4] down the rows. Pillow tabulates the
// columns once; here the running sum is redone per row (the same additions,
// so the same positions) to need no table. Columns in [xmin, xmax) whose
// position is out of range read column 0, as Pillow's calloc'd table does.
template <int N>
void scale_affine(const Plane& in, const OutPlane& out, const double a[6], const std::uint8_t* fill) {
  const double half0 = a[0] * 0.5;
  const double xo0 = a[2] + half0;
  int xmin = out.width, xmax = 0;
  {
    double xo = xo0;
    for (int x = 0; x < out.width; ++x) {
      const int xin = coord(xo);
      if (xin >= 0 && xin < in.width) {
        xmax = x + 1;
        if (x < xmin) xmin = x;
      }
      xo += a[0];
    }
  }
  const double half4 = a[4] * 0.5;
  double yo = a[5] + half4;
  for (int y = 0; y < out.height; ++y) {
    std::uint8_t* o = out.row(y);
    const int yi = coord(yo);
    yo += a[4];
    if (yi < 0 || yi >= in.height || xmin >= xmax) {
      fill_row<N>(o, out.width, fill);
      continue;
    }
    const std::uint8_t* src = in.row(yi);
    double xo = xo0;
    for (int x = 0; x < out.width; ++x, o += N) {
      const int xin = coord(xo);
      xo += a[0];
      if (x < xmin || x >= xmax) {
        put_fill<N>(o, fill);
      } else {
        const int col = xin >= 0 && xin < in.width ? xin : 0;
        put_pixel<N>(o, src + static_cast<std::ptrdiff_t>(col) * N);
      }
    }
  }
}

// check_fixed(): |x a0 + y a1 + a2| and |x a3 + y a4 + a5| below 32768.
bool check_fixed(const double a[6], int x, int y) {
  const double xd = x, yd = y;
  const double p0 = xd * a[0], p1 = yd * a[1];
  double u = p0 + p1;
  u = u + a[2];
  const double p3 = xd * a[3], p4 = yd * a[4];
  double v = p3 + p4;
  v = v + a[5];
  return std::fabs(u) < 32768.0 && std::fabs(v) < 32768.0;
}

// FIX(v): FLOOR(v * 65536.0 + 0.5).
inline std::int32_t fix16(double v) {
  double s = v * 65536.0;
  s = s + 0.5;
  return floor_int(s);
}

inline std::int32_t wrap_add(std::int32_t a, std::int32_t b) {
  // Pillow adds ints; wrap as x86 does instead of overflowing.
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(a) + static_cast<std::uint32_t>(b));
}

// affine_fixed(): 16.16 fixed point, positions (xx >> 16, yy >> 16).
template <int N>
void affine_fixed(const Plane& in, const OutPlane& out, const double a[6], const std::uint8_t* fill) {
  const std::int32_t a0 = fix16(a[0]), a1 = fix16(a[1]), a3 = fix16(a[3]), a4 = fix16(a[4]);
  const double h0 = a[0] * 0.5, h1 = a[1] * 0.5, h3 = a[3] * 0.5, h4 = a[4] * 0.5;
  double c2 = a[2] + h0;
  c2 = c2 + h1;
  double c5 = a[5] + h3;
  c5 = c5 + h4;
  std::int32_t a2 = fix16(c2), a5 = fix16(c5);
  for (int y = 0; y < out.height; ++y) {
    std::uint8_t* o = out.row(y);
    std::int32_t xx = a2, yy = a5;
    for (int x = 0; x < out.width; ++x, o += N) {
      const std::int32_t xin = xx >> 16;  // arithmetic shift (C++20), as gcc does for Pillow
      const std::int32_t yin = yy >> 16;
      if (xin >= 0 && xin < in.width && yin >= 0 && yin < in.height) {
        put_pixel<N>(o, in.row(yin) + static_cast<std::ptrdiff_t>(xin) * N);
      } else {
        put_fill<N>(o, fill);
      }
      xx = wrap_add(xx, a0);
      yy = wrap_add(yy, a3);
    }
    a2 = wrap_add(a2, a1);
    a5 = wrap_add(a5, a4);
  }
}

// ImagingTransformAffine's floating point loop (corners beyond the fixed
// point range): running sums of a[0], a[3] across, a[1], a[4] down.
template <int N>
void affine_float(const Plane& in, const OutPlane& out, const double a[6], const std::uint8_t* fill) {
  const double h0 = a[0] * 0.5, h1 = a[1] * 0.5, h3 = a[3] * 0.5, h4 = a[4] * 0.5;
  double xo = a[2] + h1;
  xo = xo + h0;
  double yo = a[5] + h4;
  yo = yo + h3;
  for (int y = 0; y < out.height; ++y) {
    std::uint8_t* o = out.row(y);
    double xx = xo, yy = yo;
    for (int x = 0; x < out.width; ++x, o += N) {
      const int xin = coord(xx);
      const int yin = coord(yy);
      if (xin >= 0 && xin < in.width && yin >= 0 && yin < in.height) {
        put_pixel<N>(o, in.row(yin) + static_cast<std::ptrdiff_t>(xin) * N);
      } else {
        put_fill<N>(o, fill);
      }
      xx += a[0];
      yy += a[3];
    }
    xo += a[1];
    yo += a[4];
  }
}

// ImagingTransformAffine with NEAREST on 8-bit storage (RGB: its image32 of
// 4-byte pixels, L/P: image8): the scale, fixed point or float loop.
template <int N>
void nearest_affine(const Plane& in, const OutPlane& out, const double a[6], const std::uint8_t* fill) {
  if (a[1] == 0 && a[3] == 0) {
    scale_affine<N>(in, out, a, fill);
  } else if (check_fixed(a, 0, 0) && check_fixed(a, out.width, out.height) && check_fixed(a, 0, out.height) &&
             check_fixed(a, out.width, 0)) {
    affine_fixed<N>(in, out, a, fill);
  } else {
    affine_float<N>(in, out, a, fill);
  }
}

// ImagingGenericTransform + affine_transform(): the position of output pixel
// (x, y) is a0 (x + 0.5) + a1 (y + 0.5) + a2, a3 (x + 0.5) + a4 (y + 0.5) + a5.
// Calls visit(out_pixel, x_in, y_in) for each pixel.
template <int N, typename Visit>
void generic_affine(const OutPlane& out, const double a[6], Visit visit) {
  for (int y = 0; y < out.height; ++y) {
    std::uint8_t* o = out.row(y);
    const double yin = y + 0.5;
    const double by = a[1] * yin;
    const double ey = a[4] * yin;
    for (int x = 0; x < out.width; ++x, o += N) {
      const double xin = x + 0.5;
      const double ax = a[0] * xin;
      const double dx = a[3] * xin;
      double xs = ax + by;
      xs = xs + a[2];
      double ys = dx + ey;
      ys = ys + a[5];
      visit(o, xs, ys);
    }
  }
}

// bilinear_filter32RGB: out of range when xin < 0 || xin >= xsize (and for
// y); then a 2x2 blend around (xin - 0.5, yin - 0.5) with clamped columns,
// the top row clamped and the lower one replaced by the upper past the edge,
// truncated to UINT8. (NaN positions, where Pillow's FLOOR is undefined,
// keep the fill here.)
inline void bilinear_rgb(std::uint8_t* out, const Plane& in, double xin, double yin, const std::uint8_t* fill) {
  if (!(xin >= 0.0 && xin < in.width && yin >= 0.0 && yin < in.height)) {
    put_fill<3>(out, fill);
    return;
  }
  xin -= 0.5;
  yin -= 0.5;
  // Both are >= -0.5 now: FLOOR() is -1 below zero, truncation otherwise.
  const int x = xin < 0.0 ? -1 : static_cast<int>(xin);
  const int y = yin < 0.0 ? -1 : static_cast<int>(yin);
  const double dx = xin - x;
  const double dy = yin - y;
  // XCLIP(x), XCLIP(x + 1), YCLIP(y) with -1 <= x <= xsize - 1 (the same for y).
  const std::ptrdiff_t i0 = static_cast<std::ptrdiff_t>(x < 0 ? 0 : x) * 3;
  const std::ptrdiff_t i1 = static_cast<std::ptrdiff_t>(x + 1 < in.width ? x + 1 : in.width - 1) * 3;
  const std::uint8_t* r0 = in.row(y < 0 ? 0 : y);
  const bool has_r1 = y + 1 < in.height;
  const std::uint8_t* r1 = has_r1 ? in.row(y + 1) : r0;
  for (int b = 0; b < 3; ++b) {
    // BILINEAR(v, a, b, d): v = a + (b - a) * d, (b - a) in int; the lower
    // row's v2 is v1 past the bottom edge.
    const int p0 = r0[i0 + b], q0 = r0[i1 + b];
    const double t0 = (q0 - p0) * dx;
    double v1 = p0 + t0;
    const int p1 = r1[i0 + b], q1 = r1[i1 + b];
    const double t1 = (q1 - p1) * dx;
    const double v2 = has_r1 ? p1 + t1 : v1;
    const double t = (v2 - v1) * dy;
    v1 = v1 + t;
    out[b] = static_cast<std::uint8_t>(static_cast<int>(v1));
  }
}

// bilinear_filter8 ("L"), bilinear_filter32I ("I") and bilinear_filter32F
// ("F"): the same 2x2 blend as bilinear_rgb on one sample of type T; (b - a)
// in T's arithmetic (int, or float for "F"), the rest in double; the result
// converted to T as C converts (truncation for the integers).
template <typename T>
inline void bilinear_one(std::uint8_t* out, const Plane& in, double xin, double yin, const std::uint8_t* fill) {
  if (!(xin >= 0.0 && xin < in.width && yin >= 0.0 && yin < in.height)) {
    put_fill<sizeof(T)>(out, fill);
    return;
  }
  xin -= 0.5;
  yin -= 0.5;
  const int x = xin < 0.0 ? -1 : static_cast<int>(xin);
  const int y = yin < 0.0 ? -1 : static_cast<int>(yin);
  const double dx = xin - x;
  const double dy = yin - y;
  const int i0 = x < 0 ? 0 : x, i1 = x + 1 < in.width ? x + 1 : in.width - 1;
  auto at = [&](const std::uint8_t* row, int i) {
    T v;
    std::memcpy(&v, row + static_cast<std::ptrdiff_t>(i) * static_cast<std::ptrdiff_t>(sizeof(T)), sizeof(T));
    return v;
  };
  using Diff = std::conditional_t<std::is_same_v<T, float>, float, int>;
  const std::uint8_t* r0 = in.row(y < 0 ? 0 : y);
  const bool has_r1 = y + 1 < in.height;
  const std::uint8_t* r1 = has_r1 ? in.row(y + 1) : r0;
  const T p0 = at(r0, i0), q0 = at(r0, i1);
  const double t0 = static_cast<Diff>(static_cast<Diff>(q0) - static_cast<Diff>(p0)) * dx;
  double v1 = static_cast<double>(p0) + t0;
  const T p1 = at(r1, i0), q1 = at(r1, i1);
  const double t1 = static_cast<Diff>(static_cast<Diff>(q1) - static_cast<Diff>(p1)) * dx;
  const double v2 = has_r1 ? static_cast<double>(p1) + t1 : v1;
  const double t = (v2 - v1) * dy;
  v1 = v1 + t;
  T k;
  if constexpr (std::is_same_v<T, float>) {
    k = static_cast<float>(v1);
  } else {
    k = static_cast<T>(static_cast<int>(v1));
  }
  std::memcpy(out, &k, sizeof(T));
}

template <typename T>
void affine_plane(const Plane& in, const OutPlane& out, const double a[6], bool bilinear, const std::uint8_t* fill) {
  if (!bilinear) {
    nearest_affine<sizeof(T)>(in, out, a, fill);
    return;
  }
  generic_affine<sizeof(T)>(out, a, [&](std::uint8_t* o, double xs, double ys) { bilinear_one<T>(o, in, xs, ys, fill); });
}

}  // namespace

void pil_affine_plane(PlaneType t, const std::uint8_t* src, int w, int h, std::uint8_t* dst, const double matrix[6],
                      bool bilinear, int fill) {
  if (w <= 0 || h <= 0) return;
  const std::ptrdiff_t stride = static_cast<std::ptrdiff_t>(w) * plane_bytes(t);
  const Plane in{src, stride, w, h};
  const OutPlane out{dst, stride, w, h};
  // NOTE: "I" and "F" are not IMAGING_TYPE_SPECIAL: NEAREST takes the scale,
  // fixed point or float loop on their 4-byte pixels, as on RGB's.
  std::uint8_t f[4];
  switch (t) {
    case PlaneType::kUint8:
      f[0] = static_cast<std::uint8_t>(fill < 0 ? 0 : (fill > 255 ? 255 : fill));
      return affine_plane<std::uint8_t>(in, out, matrix, bilinear, f);
    case PlaneType::kInt32: {
      const std::int32_t v = fill;
      std::memcpy(f, &v, 4);
      return affine_plane<std::int32_t>(in, out, matrix, bilinear, f);
    }
    case PlaneType::kFloat32: {
      const auto v = static_cast<float>(fill);
      std::memcpy(f, &v, 4);
      return affine_plane<float>(in, out, matrix, bilinear, f);
    }
  }
}

void pil_affine(const ImageView& src, ImageBuffer* dst, const double matrix[6], bool bilinear,
                const std::uint8_t fill[3]) {
  // Image.transform(img.size, AFFINE, matrix, resample, fillcolor=fill):
  // the output starts as Image.new("RGB", size, fill) and Pillow's fill flag
  // is 0 (fillcolor given), so pixels mapped outside the source keep `fill`.
  dst->reset(src.width, src.height);
  if (src.width <= 0 || src.height <= 0) return;
  const Plane in{src.data, src.stride, src.width, src.height};
  const OutPlane out{dst->pixels.data(), dst->stride, dst->width, dst->height};
  if (!bilinear) {
    nearest_affine<3>(in, out, matrix, fill);
    return;
  }
  generic_affine<3>(out, matrix, [&](std::uint8_t* o, double xs, double ys) { bilinear_rgb(o, in, xs, ys, fill); });
}

void pil_affine_mask(const MaskView& src, MaskBuffer* dst, const double matrix[6], int fill) {
  const int bpp = src.bytes_per_pixel == 2 ? 2 : 1;
  dst->reset(src.width, src.height, bpp);
  if (src.width <= 0 || src.height <= 0) return;
  const Plane in{src.data, src.stride, src.width, src.height};
  const OutPlane out{dst->pixels.data(), dst->stride, dst->width, dst->height};
  if (bpp == 1) {
    // "L"/"P": getink() clips the fill to 0..255; then as for RGB's NEAREST.
    const std::uint8_t f[1] = {static_cast<std::uint8_t>(fill < 0 ? 0 : (fill > 255 ? 255 : fill))};
    nearest_affine<1>(in, out, matrix, f);
    return;
  }
  // "I;16" is IMAGING_TYPE_SPECIAL: ImagingTransformAffine hands it to the
  // generic engine (double positions, COORD) with nearest_filter16; getink()
  // keeps the fill's low 16 bits.
  std::uint8_t f[2];
  const auto f16 = static_cast<std::uint16_t>(static_cast<unsigned>(fill) & 0xFFFFu);
  std::memcpy(f, &f16, 2);
  generic_affine<2>(out, matrix, [&](std::uint8_t* o, double xs, double ys) {
    const int x = coord(xs);
    const int y = coord(ys);
    if (x < 0 || x >= in.width || y < 0 || y >= in.height) {
      put_fill<2>(o, f);
    } else {
      put_pixel<2>(o, in.row(y) + static_cast<std::ptrdiff_t>(x) * 2);
    }
  });
}

void torchvision_affine_matrix(int width, int height, const double* center, double angle, double tx, double ty,
                               double scale, double shear_x, double shear_y, double out[6]) {
  // F.affine on a PIL image: center = [width * 0.5, height * 0.5] unless given.
  const double cx = center ? center[0] : width * 0.5;
  const double cy = center ? center[1] : height * 0.5;
  // _get_inverse_affine_matrix(center, angle, translate, scale, shear), inverted=True.
  const double rot = angle * kDegToRad;
  const double sx = shear_x * kDegToRad;
  const double sy = shear_y * kDegToRad;
  const double cos_rs = std::cos(rot - sy);
  const double sin_rs = std::sin(rot - sy);
  const double cos_sy = std::cos(sy);
  const double tan_sx = std::tan(sx);
  const double sin_r = std::sin(rot);
  const double cos_r = std::cos(rot);
  // a = cos(rot - sy) / cos(sy)
  const double a = cos_rs / cos_sy;
  // b = -cos(rot - sy) * tan(sx) / cos(sy) - sin(rot)
  const double b0 = -cos_rs * tan_sx;
  const double b = b0 / cos_sy - sin_r;
  // c = sin(rot - sy) / cos(sy)
  const double c = sin_rs / cos_sy;
  // d = -sin(rot - sy) * tan(sx) / cos(sy) + cos(rot)
  const double d0 = -sin_rs * tan_sx;
  const double d = d0 / cos_sy + cos_r;
  // matrix = [d, -b, 0.0, -c, a, 0.0]; matrix = [x / scale for x in matrix]
  const double m0 = d / scale, m1 = -b / scale, m3 = -c / scale, m4 = a / scale;
  double m2 = 0.0 / scale, m5 = 0.0 / scale;
  // matrix[2] += matrix[0] * (-cx - tx) + matrix[1] * (-cy - ty), and for [5]
  const double ux = -cx - tx;
  const double uy = -cy - ty;
  const double p0 = m0 * ux, p1 = m1 * uy;
  const double p3 = m3 * ux, p4 = m4 * uy;
  m2 += p0 + p1;
  m5 += p3 + p4;
  m2 += cx;
  m5 += cy;
  out[0] = m0;
  out[1] = m1;
  out[2] = m2;
  out[3] = m3;
  out[4] = m4;
  out[5] = m5;
}

namespace {

// CPython's round(v, 15) for |v| <= 1 (cos and sin; exact while |v| 1e15 < 2^53): the exact binary value
// rounded half-even to 15 decimals (_Py_dg_dtoa mode 3), read back as the
// nearest double (_Py_dg_strtod). v = m 2^(e-53) exactly, so v 10^15 =
// m 5^15 2^(e-38) is rounded in 128-bit integers, and the quotient N / 1e15
// (both exact doubles) is the correctly rounded reading of N e-15.
double round15(double v) {
  if (v == 0.0 || !std::isfinite(v)) return v;
  int e = 0;
  const double fr = std::frexp(std::fabs(v), &e);
  const auto m = static_cast<std::uint64_t>(std::ldexp(fr, 53));
  const int p = e - 53 + 15;
  if (p >= 0) return v;  // no digits past the 15th decimal
  const int s = -p;
  // m 5^15 < 2^88: below half a unit of the last decimal.
  if (s > 100) return std::copysign(0.0, v);
  const U128 prod = static_cast<U128>(m) * 30517578125ull;  // 5^15
  U128 q = prod >> s;
  const U128 r = prod - (q << s);
  const U128 half = static_cast<U128>(1) << (s - 1);
  if (r > half || (r == half && (q & 1) != 0)) ++q;
  const double n = static_cast<double>(static_cast<std::uint64_t>(q)) / 1e15;
  return std::copysign(n, v);
}

// Python's float `%` (float_rem): fmod, moved to the divisor's sign.
double py_mod(double v, double w) {
  double mod = std::fmod(v, w);
  if (mod != 0.0) {
    if ((w < 0) != (mod < 0)) mod += w;
  } else {
    mod = std::copysign(0.0, w);
  }
  return mod;
}

}  // namespace

void pil_rotate_matrix(int width, int height, double angle, const double* center, double out[6]) {
  // Image.rotate(angle, resample, expand=False, center, fillcolor):
  angle = py_mod(angle, 360.0);
  if (!center) {
    // Its shortcuts: copy() for 0, transpose(ROTATE_180) for 180, and
    // ROTATE_90/270 for a square image. The exact matrices below give those
    // pixels through the warp (every position is k + 0.5 in range, NEAREST
    // and BILINEAR alike), and are what the general formula yields anyway.
    const double w = width, h = height;
    if (angle == 0) {
      const double m[6] = {1, 0, 0, 0, 1, 0};
      std::memcpy(out, m, sizeof(m));
      return;
    }
    if (angle == 180) {
      const double m[6] = {-1, 0, w, 0, -1, h};
      std::memcpy(out, m, sizeof(m));
      return;
    }
    if (angle == 90 && width == height) {  // output (x, y) reads input (w - 1 - y, x)
      const double m[6] = {0, -1, w, 1, 0, 0};
      std::memcpy(out, m, sizeof(m));
      return;
    }
    if (angle == 270 && width == height) {  // output (x, y) reads input (y, h - 1 - x)
      const double m[6] = {0, 1, 0, -1, 0, h};
      std::memcpy(out, m, sizeof(m));
      return;
    }
  }
  const double cx = center ? center[0] : width / 2.0;
  const double cy = center ? center[1] : height / 2.0;
  const double rad = -(angle * kDegToRad);
  const double cs = std::cos(rad);
  const double sn = std::sin(rad);
  const double m0 = round15(cs), m1 = round15(sn), m3 = round15(-sn), m4 = round15(cs);
  // matrix[2], matrix[5] = transform(-cx - 0, -cy - 0, matrix) with c = f = 0.0
  const double x = -cx - 0.0;
  const double y = -cy - 0.0;
  const double p0 = m0 * x, p1 = m1 * y, p3 = m3 * x, p4 = m4 * y;
  double m2 = p0 + p1;
  m2 = m2 + 0.0;
  double m5 = p3 + p4;
  m5 = m5 + 0.0;
  m2 += cx;
  m5 += cy;
  out[0] = m0;
  out[1] = m1;
  out[2] = m2;
  out[3] = m3;
  out[4] = m4;
  out[5] = m5;
}

}  // namespace stoker::detail
