// MONAI Spacing's output grid and its trilinear / nearest resampling with
// padding_mode="border" (see resample.h for the rules and where they come from).
#include "transform/volume/resample.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "stoker/status.h"

namespace stoker::detail {
namespace {

constexpr double kAffineTol = 1e-3;  // monai/data/utils.py AFFINE_TOL
constexpr double kSnap = 1e-9;       // to_input noise set to 0

using Mat4 = std::array<std::array<double, 4>, 4>;
using Mat3 = std::array<std::array<double, 3>, 3>;

[[noreturn]] void invalid(const std::string& what) { throw Error(Code::kInvalidArgument, "Spacing: " + what); }

Mat4 identity4() {
  Mat4 m{};
  for (int i = 0; i < 4; ++i) m[i][i] = 1.0;
  return m;
}

// X = A^-1 B by Gaussian elimination with partial pivoting (LAPACK gesv's method).
// Returns false when A is singular.
bool solve4(Mat4 a, Mat4 b, Mat4* x) {
  for (int k = 0; k < 4; ++k) {
    int p = k;
    for (int i = k + 1; i < 4; ++i)
      if (std::fabs(a[i][k]) > std::fabs(a[p][k])) p = i;
    if (a[p][k] == 0.0 || !std::isfinite(a[p][k])) return false;
    std::swap(a[p], a[k]);
    std::swap(b[p], b[k]);
    for (int i = k + 1; i < 4; ++i) {
      const double f = a[i][k] / a[k][k];
      if (f == 0.0) continue;
      for (int j = k; j < 4; ++j) a[i][j] -= f * a[k][j];
      for (int j = 0; j < 4; ++j) b[i][j] -= f * b[k][j];
    }
  }
  for (int j = 0; j < 4; ++j) {
    for (int i = 3; i >= 0; --i) {
      double s = b[i][j];
      for (int m = i + 1; m < 4; ++m) s -= a[i][m] * (*x)[m][j];
      (*x)[i][j] = s / a[i][i];
    }
  }
  return true;
}

// |a - b| <= atol + rtol * |b| everywhere (torch.allclose(a, b, rtol=1e-5, atol=AFFINE_TOL)).
bool allclose4(const Mat4& a, const Mat4& b) {
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j)
      if (!(std::fabs(a[i][j] - b[i][j]) <= kAffineTol + 1e-5 * std::fabs(b[i][j]))) return false;
  return true;
}

// Whether the plan's 3x3 part is diagonal (each output axis reads one input axis).
bool separable(const SpacingPlan& p) {
  const auto& t = p.to_input;
  return t[1] == 0.0 && t[2] == 0.0 && t[4] == 0.0 && t[6] == 0.0 && t[8] == 0.0 && t[9] == 0.0;
}

bool is_identity(const SpacingPlan& p, const Shape3& in_shape) {
  static constexpr std::array<double, 12> kId{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0};
  return p.to_input == kId && p.out_shape == in_shape;
}

bool usable(int channels, const Shape3& in_shape, const Shape3& out_shape) {
  if (channels <= 0) return false;
  for (int a = 0; a < 3; ++a)
    if (in_shape[a] <= 0 || out_shape[a] <= 0) return false;
  return true;
}

// grid_sample's padding_mode="border": clip_coordinates(x, n) = min(n - 1, max(x, 0)).
inline double clip(double x, std::int64_t n) { return std::min(static_cast<double>(n - 1), std::max(x, 0.0)); }

// The two neighbours of a clipped coordinate and their weights; at the last voxel
// the second neighbour has weight 0 (grid_sample skips it as out of bounds).
struct Tap {
  std::int64_t i0 = 0, i1 = 0;
  double w0 = 1.0, w1 = 0.0;
};
inline Tap linear_tap(double x, std::int64_t n) {
  x = clip(x, n);
  Tap t;
  t.i0 = static_cast<std::int64_t>(std::floor(x));
  if (t.i0 >= n - 1) {
    t.i0 = t.i1 = n - 1;
    return t;
  }
  t.i1 = t.i0 + 1;
  t.w1 = x - static_cast<double>(t.i0);
  t.w0 = 1.0 - t.w1;
  return t;
}

// std::nearbyint: ties to even in the default rounding mode, as ATen's GridSampler.
inline std::int64_t nearest_index(double x, std::int64_t n) {
  return std::clamp(static_cast<std::int64_t>(std::nearbyint(clip(x, n))), std::int64_t{0}, n - 1);
}

// Input coordinate along axis a of output voxel (o0, o1, o2).
inline double coord(const std::array<double, 12>& m, int a, double o0, double o1, double o2) {
  return m[a * 4 + 0] * o0 + m[a * 4 + 1] * o1 + m[a * 4 + 2] * o2 + m[a * 4 + 3];
}

std::vector<Tap> axis_taps(const SpacingPlan& p, int a, std::int64_t n_in) {
  std::vector<Tap> taps(static_cast<std::size_t>(p.out_shape[a]));
  for (std::int64_t o = 0; o < p.out_shape[a]; ++o) {
    const double od = static_cast<double>(o);
    const double x = coord(p.to_input, a, a == 0 ? od : 0.0, a == 1 ? od : 0.0, a == 2 ? od : 0.0);
    taps[static_cast<std::size_t>(o)] = linear_tap(x, n_in);
  }
  return taps;
}

std::vector<std::int64_t> axis_nearest(const SpacingPlan& p, int a, std::int64_t n_in) {
  std::vector<std::int64_t> idx(static_cast<std::size_t>(p.out_shape[a]));
  for (std::int64_t o = 0; o < p.out_shape[a]; ++o) {
    const double od = static_cast<double>(o);
    const double x = coord(p.to_input, a, a == 0 ? od : 0.0, a == 1 ? od : 0.0, a == 2 ? od : 0.0);
    idx[static_cast<std::size_t>(o)] = nearest_index(x, n_in);
  }
  return idx;
}

// Trilinear as three 1D passes per output plane: the plane of axis 0 (in double),
// then each row of axis 1, then the gather along axis 2.
void linear_separable(const float* in, int channels, const Shape3& is, const SpacingPlan& p, float* out) {
  const std::vector<Tap> t0 = axis_taps(p, 0, is[0]), t1 = axis_taps(p, 1, is[1]), t2 = axis_taps(p, 2, is[2]);
  const Shape3& os = p.out_shape;
  const std::int64_t in_plane = is[1] * is[2], in_vol = is[0] * in_plane;
  const std::int64_t out_vol = os[0] * os[1] * os[2];
  std::vector<double> plane(static_cast<std::size_t>(in_plane));
  std::vector<double> row(static_cast<std::size_t>(is[2]));
  for (int c = 0; c < channels; ++c) {
    const float* src = in + c * in_vol;
    float* dst = out + c * out_vol;
    for (std::int64_t o0 = 0; o0 < os[0]; ++o0) {
      const Tap& a = t0[static_cast<std::size_t>(o0)];
      const float* pa = src + a.i0 * in_plane;
      const float* pb = src + a.i1 * in_plane;
      if (a.w1 == 0.0) {
        for (std::int64_t k = 0; k < in_plane; ++k) plane[static_cast<std::size_t>(k)] = pa[k];
      } else {
        for (std::int64_t k = 0; k < in_plane; ++k)
          plane[static_cast<std::size_t>(k)] = a.w0 * static_cast<double>(pa[k]) + a.w1 * static_cast<double>(pb[k]);
      }
      for (std::int64_t o1 = 0; o1 < os[1]; ++o1) {
        const Tap& b = t1[static_cast<std::size_t>(o1)];
        const double* ra = plane.data() + b.i0 * is[2];
        const double* rb = plane.data() + b.i1 * is[2];
        const double* r = ra;
        if (b.w1 != 0.0) {
          for (std::int64_t k = 0; k < is[2]; ++k) row[static_cast<std::size_t>(k)] = b.w0 * ra[k] + b.w1 * rb[k];
          r = row.data();
        }
        float* d = dst + (o0 * os[1] + o1) * os[2];
        for (std::int64_t o2 = 0; o2 < os[2]; ++o2) {
          const Tap& e = t2[static_cast<std::size_t>(o2)];
          d[o2] = static_cast<float>(e.w1 == 0.0 ? r[e.i0] : e.w0 * r[e.i0] + e.w1 * r[e.i1]);
        }
      }
    }
  }
}

// Any 3x4 map: the 8 neighbours of each output voxel's clipped input coordinate.
void linear_general(const float* in, int channels, const Shape3& is, const SpacingPlan& p, float* out) {
  const Shape3& os = p.out_shape;
  const std::int64_t in_vol = is[0] * is[1] * is[2], out_vol = os[0] * os[1] * os[2];
  std::int64_t v = 0;
  for (std::int64_t o0 = 0; o0 < os[0]; ++o0) {
    for (std::int64_t o1 = 0; o1 < os[1]; ++o1) {
      for (std::int64_t o2 = 0; o2 < os[2]; ++o2, ++v) {
        const double d0 = static_cast<double>(o0), d1 = static_cast<double>(o1), d2 = static_cast<double>(o2);
        const Tap a = linear_tap(coord(p.to_input, 0, d0, d1, d2), is[0]);
        const Tap b = linear_tap(coord(p.to_input, 1, d0, d1, d2), is[1]);
        const Tap e = linear_tap(coord(p.to_input, 2, d0, d1, d2), is[2]);
        const std::int64_t r00 = (a.i0 * is[1] + b.i0) * is[2], r01 = (a.i0 * is[1] + b.i1) * is[2];
        const std::int64_t r10 = (a.i1 * is[1] + b.i0) * is[2], r11 = (a.i1 * is[1] + b.i1) * is[2];
        const double w00 = a.w0 * b.w0, w01 = a.w0 * b.w1, w10 = a.w1 * b.w0, w11 = a.w1 * b.w1;
        for (int c = 0; c < channels; ++c) {
          const float* s = in + c * in_vol;
          const double x00 = e.w0 * static_cast<double>(s[r00 + e.i0]) + e.w1 * static_cast<double>(s[r00 + e.i1]);
          const double x01 = e.w0 * static_cast<double>(s[r01 + e.i0]) + e.w1 * static_cast<double>(s[r01 + e.i1]);
          const double x10 = e.w0 * static_cast<double>(s[r10 + e.i0]) + e.w1 * static_cast<double>(s[r10 + e.i1]);
          const double x11 = e.w0 * static_cast<double>(s[r11 + e.i0]) + e.w1 * static_cast<double>(s[r11 + e.i1]);
          out[c * out_vol + v] = static_cast<float>(w00 * x00 + w01 * x01 + w10 * x10 + w11 * x11);
        }
      }
    }
  }
}

}  // namespace

SpacingPlan spacing_plan(const Shape3& shape, const std::array<double, 16>& affine,
                         const std::array<double, 3>& pixdim) {
  for (int a = 0; a < 3; ++a)
    if (shape[a] < 1) invalid("spatial shape entries must be >= 1");
  for (double v : affine)
    if (!std::isfinite(v)) invalid("the affine has a non-finite entry");
  for (double v : pixdim)
    if (std::isinf(v)) invalid("pixdim has an infinite entry");  // NaN: kept spacing, as MONAI's fall_back_tuple

  // to_affine_nd(3, affine): the 3x3 part and the translation, bottom row 0 0 0 1.
  Mat4 src = identity4();
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) src[i][j] = affine[i * 4 + j];

  // Spacing.__call__: orig = affine_to_spacing (column norms, 0 -> 1); the target
  // keeps orig where |orig - pixdim| <= AFFINE_TOL; zoom_affine's fall_back_tuple
  // keeps orig where pixdim <= 0.
  std::array<double, 3> out_d{};
  for (int j = 0; j < 3; ++j) {
    double n2 = 0.0;
    for (int i = 0; i < 3; ++i) n2 += src[i][j] * src[i][j];
    double orig = std::sqrt(n2);
    if (orig == 0.0) orig = 1.0;
    const double t = pixdim[static_cast<std::size_t>(j)];
    const bool keep = ((t - kAffineTol) <= orig && orig <= (t + kAffineTol)) || !(t > 0.0);
    out_d[static_cast<std::size_t>(j)] = keep ? orig : t;
  }

  // zoom_affine(diagonal=False): zs = cholesky(R^T R)^T, rotation = R zs^-1,
  // new = rotation diag(|out_d|) (cholesky's diagonal is positive).
  Mat3 g{};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 3; ++k) g[i][j] += src[k][i] * src[k][j];
  Mat3 l{};  // g = l l^T
  for (int j = 0; j < 3; ++j) {
    double d = g[j][j];
    for (int k = 0; k < j; ++k) d -= l[j][k] * l[j][k];
    if (!(d > 0.0)) invalid("the affine is singular");
    l[j][j] = std::sqrt(d);
    for (int i = j + 1; i < 3; ++i) {
      double s = g[i][j];
      for (int k = 0; k < j; ++k) s -= l[i][k] * l[j][k];
      l[i][j] = s / l[j][j];
    }
  }
  // zinv = (l^T)^-1, upper triangular: l^T zinv = I by back substitution.
  Mat3 zinv{};
  for (int c = 0; c < 3; ++c) {
    for (int i = 2; i >= 0; --i) {
      double s = (i == c) ? 1.0 : 0.0;
      for (int k = i + 1; k < 3; ++k) s -= l[k][i] * zinv[k][c];
      zinv[i][c] = s / l[i][i];
    }
  }
  Mat4 dst = identity4();
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) {
      double r = 0.0;
      for (int k = 0; k < 3; ++k) r += src[i][k] * zinv[k][j];
      dst[i][j] = r * std::fabs(out_d[static_cast<std::size_t>(j)]);
    }
  }

  // compute_shape_offset(shape, src, dst) with dst's translation still 0.
  Mat4 inv_dst{};
  if (!solve4(dst, identity4(), &inv_dst)) invalid("the output affine is singular");
  std::array<std::array<double, 3>, 8> world{}, outc{};
  for (int k = 0; k < 8; ++k) {
    const std::array<double, 3> c{(k & 4) ? static_cast<double>(shape[0] - 1) : 0.0,
                                  (k & 2) ? static_cast<double>(shape[1] - 1) : 0.0,
                                  (k & 1) ? static_cast<double>(shape[2] - 1) : 0.0};
    for (int i = 0; i < 3; ++i) world[k][i] = src[i][0] * c[0] + src[i][1] * c[1] + src[i][2] * c[2] + src[i][3];
  }
  for (int k = 0; k < 8; ++k) {
    for (int i = 0; i < 3; ++i) {
      const double x = inv_dst[i][0] * world[k][0] + inv_dst[i][1] * world[k][1] + inv_dst[i][2] * world[k][2] +
                       inv_dst[i][3];
      const double h = inv_dst[3][0] * world[k][0] + inv_dst[3][1] * world[k][1] + inv_dst[3][2] * world[k][2] +
                       inv_dst[3][3];
      outc[k][i] = x / h;
    }
  }
  SpacingPlan plan;
  for (int i = 0; i < 3; ++i) {
    double lo = outc[0][i], hi = outc[0][i];
    for (int k = 1; k < 8; ++k) {
      lo = std::min(lo, outc[k][i]);
      hi = std::max(hi, outc[k][i]);
    }
    plan.out_shape[i] = static_cast<std::int64_t>(std::nearbyint(hi - lo + 1.0));  // np.round: half to even
  }
  // The first corner that is the smallest along every output axis (np.allclose(min, 0): |min| <= 1e-8).
  int corner = 0;
  for (int i = 0; i < 8; ++i) {
    bool smallest = true;
    for (int ax = 0; ax < 3 && smallest; ++ax) {
      const double ref = inv_dst[ax][0] * world[i][0] + inv_dst[ax][1] * world[i][1] + inv_dst[ax][2] * world[i][2];
      double mn = 0.0;
      for (int m = 0; m < 8; ++m)
        mn = std::min(mn, inv_dst[ax][0] * world[m][0] + inv_dst[ax][1] * world[m][1] +
                              inv_dst[ax][2] * world[m][2] - ref);
      smallest = std::fabs(mn) <= 1e-8;
    }
    if (smallest) {
      corner = i;
      break;
    }
  }
  for (int i = 0; i < 3; ++i) dst[i][3] = world[corner][i];

  // SpatialResample: xform = solve(src, dst); unchanged when dst ~ src or xform ~ I
  // with the same shape.
  Mat4 xform{};
  if (!solve4(src, dst, &xform)) invalid("the affine is singular");
  if (plan.out_shape == shape && (allclose4(src, dst) || allclose4(xform, identity4()))) {
    plan.out_shape = shape;
    plan.out_affine = affine;
    plan.to_input = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0};
    return plan;
  }
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) plan.out_affine[static_cast<std::size_t>(i * 4 + j)] = dst[i][j];
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 4; ++j) {
      double v = xform[i][j];
      if (i != j && std::fabs(v) < kSnap) v = 0.0;
      plan.to_input[static_cast<std::size_t>(i * 4 + j)] = v;
    }
  }
  return plan;
}

void resample_linear(const float* in, int channels, const Shape3& in_shape, const SpacingPlan& plan, float* out) {
  if (!usable(channels, in_shape, plan.out_shape)) return;
  if (is_identity(plan, in_shape)) {
    std::memcpy(out, in, sizeof(float) * static_cast<std::size_t>(channels) *
                             static_cast<std::size_t>(in_shape[0] * in_shape[1] * in_shape[2]));
    return;
  }
  if (separable(plan)) {
    linear_separable(in, channels, in_shape, plan, out);
  } else {
    linear_general(in, channels, in_shape, plan, out);
  }
}

template <typename T>
void resample_nearest(const T* in, int channels, const Shape3& in_shape, const SpacingPlan& plan, T* out) {
  if (!usable(channels, in_shape, plan.out_shape)) return;
  const Shape3& is = in_shape;
  const Shape3& os = plan.out_shape;
  const std::int64_t in_vol = is[0] * is[1] * is[2], out_vol = os[0] * os[1] * os[2];
  if (is_identity(plan, in_shape)) {
    std::memcpy(out, in, sizeof(T) * static_cast<std::size_t>(channels) * static_cast<std::size_t>(in_vol));
    return;
  }
  if (separable(plan)) {
    const std::vector<std::int64_t> k0 = axis_nearest(plan, 0, is[0]), k1 = axis_nearest(plan, 1, is[1]),
                                    k2 = axis_nearest(plan, 2, is[2]);
    for (int c = 0; c < channels; ++c) {
      const T* src = in + c * in_vol;
      T* dst = out + c * out_vol;
      for (std::int64_t o0 = 0; o0 < os[0]; ++o0) {
        for (std::int64_t o1 = 0; o1 < os[1]; ++o1) {
          const T* r = src + (k0[static_cast<std::size_t>(o0)] * is[1] + k1[static_cast<std::size_t>(o1)]) * is[2];
          T* d = dst + (o0 * os[1] + o1) * os[2];
          for (std::int64_t o2 = 0; o2 < os[2]; ++o2) d[o2] = r[k2[static_cast<std::size_t>(o2)]];
        }
      }
    }
    return;
  }
  std::int64_t v = 0;
  for (std::int64_t o0 = 0; o0 < os[0]; ++o0) {
    for (std::int64_t o1 = 0; o1 < os[1]; ++o1) {
      for (std::int64_t o2 = 0; o2 < os[2]; ++o2, ++v) {
        const double d0 = static_cast<double>(o0), d1 = static_cast<double>(o1), d2 = static_cast<double>(o2);
        const std::int64_t i0 = nearest_index(coord(plan.to_input, 0, d0, d1, d2), is[0]);
        const std::int64_t i1 = nearest_index(coord(plan.to_input, 1, d0, d1, d2), is[1]);
        const std::int64_t i2 = nearest_index(coord(plan.to_input, 2, d0, d1, d2), is[2]);
        const std::int64_t at = (i0 * is[1] + i1) * is[2] + i2;
        for (int c = 0; c < channels; ++c) out[c * out_vol + v] = in[c * in_vol + at];
      }
    }
  }
}

template void resample_nearest<std::uint8_t>(const std::uint8_t*, int, const Shape3&, const SpacingPlan&,
                                             std::uint8_t*);
template void resample_nearest<std::int32_t>(const std::int32_t*, int, const Shape3&, const SpacingPlan&,
                                             std::int32_t*);

}  // namespace stoker::detail
