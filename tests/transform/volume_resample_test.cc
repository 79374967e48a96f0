// MONAI Spacing's grid and resampling (src/transform/volume/resample.h) against
// tests/python/spacing_ref.py. The expected plans were printed by
//   /usr/bin/python3 tests/python/spacing_ref.py --cases
// and the expected voxel values by spacing_ref.spacing_ref(...) on the volumes
// named in each test (the snippet is in the test's comment).
#include "transform/volume/resample.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "stoker/status.h"

namespace stoker::detail {
namespace {

using Aff = std::array<double, 16>;
using Map = std::array<double, 12>;

Aff diag_affine(double a, double b, double c) { return {a, 0, 0, 0, 0, b, 0, 0, 0, 0, c, 0, 0, 0, 0, 1}; }

std::int64_t voxels(const Shape3& s) { return s[0] * s[1] * s[2]; }

void expect_near_all(const Aff& got, const Aff& want, double tol) {
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "entry " << i;
}
void expect_near_all(const Map& got, const Map& want, double tol) {
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "entry " << i;
}

// f(s) = s0^2 + 2 s1 + 0.5 s2^3 on a C-order grid (exact in float for small shapes).
std::vector<float> cubic_volume(const Shape3& s) {
  std::vector<float> v(static_cast<std::size_t>(voxels(s)));
  std::size_t k = 0;
  for (std::int64_t i = 0; i < s[0]; ++i)
    for (std::int64_t j = 0; j < s[1]; ++j)
      for (std::int64_t l = 0; l < s[2]; ++l)
        v[k++] = static_cast<float>(i * i + 2 * j) + 0.5f * static_cast<float>(l * l * l);
  return v;
}
// (3 s0 + 5 s1 + s2) % 7 as labels.
std::vector<std::int32_t> label_volume(const Shape3& s) {
  std::vector<std::int32_t> v(static_cast<std::size_t>(voxels(s)));
  std::size_t k = 0;
  for (std::int64_t i = 0; i < s[0]; ++i)
    for (std::int64_t j = 0; j < s[1]; ++j)
      for (std::int64_t l = 0; l < s[2]; ++l) v[k++] = static_cast<std::int32_t>((3 * i + 5 * j + l) % 7);
  return v;
}

// ---------------------------------------------------------------- plans (spacing_ref.py --cases)

TEST(SpacingPlan, IdentityPixdimIsUnchanged) {
  // identity: shape (10, 11, 12) pixdim (1.0, 1.0, 1.0) -> out_shape (10, 11, 12) unchanged True
  Aff a = diag_affine(1, 1, 1);
  a[3] = 3.0;
  a[7] = -4.0;
  const SpacingPlan p = spacing_plan({10, 11, 12}, a, {1.0, 1.0, 1.0});
  EXPECT_EQ(p.out_shape, (Shape3{10, 11, 12}));
  EXPECT_EQ(p.out_affine, a);
  EXPECT_EQ(p.to_input, (Map{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0}));
}

TEST(SpacingPlan, Downsample2OddAndEvenLengths) {
  // down2_odd: shape (9, 9, 9) pixdim (2.0, 2.0, 2.0) -> out_shape (5, 5, 5)
  SpacingPlan p = spacing_plan({9, 9, 9}, diag_affine(1, 1, 1), {2.0, 2.0, 2.0});
  EXPECT_EQ(p.out_shape, (Shape3{5, 5, 5}));
  EXPECT_EQ(p.out_affine, diag_affine(2, 2, 2));
  EXPECT_EQ(p.to_input, (Map{2, 0, 0, 0, 0, 2, 0, 0, 0, 0, 2, 0}));
  // down2_even_tie: shape (8, 6, 4) -> out_shape (4, 4, 2): 7/2 + 1 = 4.5 -> 4, 5/2 + 1 = 3.5 -> 4,
  // 3/2 + 1 = 2.5 -> 2 (np.round, half to even)
  p = spacing_plan({8, 6, 4}, diag_affine(1, 1, 1), {2.0, 2.0, 2.0});
  EXPECT_EQ(p.out_shape, (Shape3{4, 4, 2}));
  EXPECT_EQ(p.to_input, (Map{2, 0, 0, 0, 0, 2, 0, 0, 0, 0, 2, 0}));
}

TEST(SpacingPlan, Upsample2) {
  // up2: shape (4, 5, 6) pixdim (0.5, 0.5, 0.5) -> out_shape (7, 9, 11)
  const SpacingPlan p = spacing_plan({4, 5, 6}, diag_affine(1, 1, 1), {0.5, 0.5, 0.5});
  EXPECT_EQ(p.out_shape, (Shape3{7, 9, 11}));
  EXPECT_EQ(p.out_affine, diag_affine(0.5, 0.5, 0.5));
  EXPECT_EQ(p.to_input, (Map{0.5, 0, 0, 0, 0, 0.5, 0, 0, 0, 0, 0.5, 0}));
}

TEST(SpacingPlan, AnisotropicAndKeptAxes) {
  // anisotropic: shape (64, 64, 20) affine diag(0.8, 0.8, 2.5) pixdim 1 -> out_shape (51, 51, 48)
  //   to_input 1.25, 0, 0, 0, 0, 1.25, 0, 0, 0, 0, 0.4, 0
  SpacingPlan p = spacing_plan({64, 64, 20}, diag_affine(0.8, 0.8, 2.5), {1.0, 1.0, 1.0});
  EXPECT_EQ(p.out_shape, (Shape3{51, 51, 48}));
  expect_near_all(p.out_affine, diag_affine(1, 1, 1), 1e-15);
  expect_near_all(p.to_input, Map{1.25, 0, 0, 0, 0, 1.25, 0, 0, 0, 0, 0.4, 0}, 1e-15);
  // keep_axis: shape (30, 30, 30) affine diag(0.8, 0.9, 1.5) pixdim (1.2, -1.0, 0.0) -> out_shape (20, 30, 30)
  //   out_affine diag(1.2, 0.9, 1.5); to_input 1.4999999999999998, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0
  p = spacing_plan({30, 30, 30}, diag_affine(0.8, 0.9, 1.5), {1.2, -1.0, 0.0});
  EXPECT_EQ(p.out_shape, (Shape3{20, 30, 30}));
  expect_near_all(p.out_affine, diag_affine(1.2, 0.9, 1.5), 1e-15);
  expect_near_all(p.to_input, Map{1.5, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0}, 1e-14);
}

TEST(SpacingPlan, WithinToleranceKeepsTheInput) {
  // within_tol: affine diag(1.0005, 1, 1) pixdim 1 -> |1.0005 - 1| <= AFFINE_TOL keeps 1.0005: unchanged
  const Aff a = diag_affine(1.0005, 1, 1);
  SpacingPlan p = spacing_plan({20, 20, 20}, a, {1.0, 1.0, 1.0});
  EXPECT_EQ(p.out_shape, (Shape3{20, 20, 20}));
  EXPECT_EQ(p.out_affine, a);
  EXPECT_EQ(p.to_input, (Map{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0}));
  // 1.002 is beyond the tolerance: resampled (same shape, 19 * 1.002 + 1 = 20.038 -> 20)
  p = spacing_plan({20, 20, 20}, diag_affine(1, 1, 1), {1.002, 1.0, 1.0});
  EXPECT_EQ(p.out_shape, (Shape3{20, 20, 20}));
  EXPECT_DOUBLE_EQ(p.to_input[0], 1.002);
}

TEST(SpacingPlan, NegativeDirectionsKeepSignAndOrigin) {
  // lps_negative: shape (50, 40, 30) affine diag(-0.7, -0.7, 2.5) + (100, 120, -50), pixdim 1
  //   -> out_shape (35, 28, 74) (34.3 + 1, 27.3 + 1, 72.5 + 1 half to even)
  //   out_affine -1, 0, 0, 100, 0, -1, 0, 120, 0, 0, 1, -50, 0, 0, 0, 1
  //   to_input 1.4285714285714286, 0, 0, 0, 0, 1.4285714285714286, 0, 0, 0, 0, 0.4, 0
  Aff a = diag_affine(-0.7, -0.7, 2.5);
  a[3] = 100.0;
  a[7] = 120.0;
  a[11] = -50.0;
  const SpacingPlan p = spacing_plan({50, 40, 30}, a, {1.0, 1.0, 1.0});
  EXPECT_EQ(p.out_shape, (Shape3{35, 28, 74}));
  expect_near_all(p.out_affine, Aff{-1, 0, 0, 100, 0, -1, 0, 120, 0, 0, 1, -50, 0, 0, 0, 1}, 1e-13);
  expect_near_all(p.to_input, Map{1.4285714285714286, 0, 0, 0, 0, 1.4285714285714286, 0, 0, 0, 0, 0.4, 0}, 1e-13);
}

TEST(SpacingPlan, ObliqueKeepsDirectionsAndIsSeparable) {
  // oblique: rot_z(30 deg) @ diag(0.8, 0.8, 1.5), translation (10, -20, 30), shape (40, 30, 20), pixdim 1
  //   -> out_shape (32, 24, 30)
  //   out_affine 0.8660254037844386, -0.4999999999999999, 0, 10, 0.4999999999999999, 0.8660254037844386, 0, -20,
  //              0, 0, 1, 30, 0, 0, 0, 1
  //   to_input 1.25, 1.6e-16, 0, 0, 6.0e-17, 1.2500000000000002, 0, 0, 0, 0, 0.6666666666666666, 0
  const Aff a{0.6928203230275509, -0.3999999999999999, 0, 10, 0.3999999999999999, 0.6928203230275509, 0, -20,
              0, 0, 1.5, 30, 0, 0, 0, 1};
  const SpacingPlan p = spacing_plan({40, 30, 20}, a, {1.0, 1.0, 1.0});
  EXPECT_EQ(p.out_shape, (Shape3{32, 24, 30}));
  expect_near_all(p.out_affine,
                  Aff{0.8660254037844386, -0.4999999999999999, 0, 10, 0.4999999999999999, 0.8660254037844386, 0, -20,
                      0, 0, 1, 30, 0, 0, 0, 1},
                  1e-13);
  expect_near_all(p.to_input, Map{1.25, 0, 0, 0, 0, 1.25, 0, 0, 0, 0, 2.0 / 3.0, 0}, 1e-13);
  // the rounding noise off the diagonal is set to exactly 0: the separable path
  for (int i : {1, 2, 3, 4, 6, 7, 8, 9, 11}) EXPECT_EQ(p.to_input[static_cast<std::size_t>(i)], 0.0) << i;
}

TEST(SpacingPlan, ShearIsRemovedAndMapIsGeneral) {
  // shear: affine [[1, .3, 0, 5], [0, 1, .2, 6], [0, 0, 2, 7]], shape (10, 12, 8), pixdim 1
  //   -> out_shape (13, 13, 15), out_affine identity + (5, 6, 7)
  //   to_input 1, -0.3, 0.03, 0, 0, 1, -0.1, 0, 0, 0, 0.5, 0
  const Aff a{1, 0.3, 0, 5, 0, 1, 0.2, 6, 0, 0, 2, 7, 0, 0, 0, 1};
  SpacingPlan p = spacing_plan({10, 12, 8}, a, {1.0, 1.0, 1.0});
  EXPECT_EQ(p.out_shape, (Shape3{13, 13, 15}));
  expect_near_all(p.out_affine, Aff{1, 0, 0, 5, 0, 1, 0, 6, 0, 0, 1, 7, 0, 0, 0, 1}, 1e-14);
  expect_near_all(p.to_input, Map{1, -0.3, 0.03, 0, 0, 1, -0.1, 0, 0, 0, 0.5, 0}, 1e-14);
  // shear_negative: [[1, -.3, 0], [0, 1, 0], [0, 0, 1]], shape (10, 12, 8): no corner is the smallest along
  // both output axes 0 and 1, so the offset falls back to corner 0 -> out_shape (13, 12, 8), translation 0
  //   to_input 1, 0.3, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0
  p = spacing_plan({10, 12, 8}, Aff{1, -0.3, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1}, {1.0, 1.0, 1.0});
  EXPECT_EQ(p.out_shape, (Shape3{13, 12, 8}));
  expect_near_all(p.out_affine, diag_affine(1, 1, 1), 1e-14);
  expect_near_all(p.to_input, Map{1, 0.3, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0}, 1e-14);
}

TEST(SpacingPlan, RefusesBadInput) {
  EXPECT_THROW(spacing_plan({0, 4, 4}, diag_affine(1, 1, 1), {1, 1, 1}), Error);
  EXPECT_THROW(spacing_plan({4, 4, 4}, diag_affine(1, 0, 1), {1, 1, 1}), Error);
  Aff nan_affine = diag_affine(1, 1, 1);
  nan_affine[3] = std::nan("");
  EXPECT_THROW(spacing_plan({4, 4, 4}, nan_affine, {1, 1, 1}), Error);
  // NaN pixdim keeps the spacing, as MONAI's fall_back_tuple does
  EXPECT_EQ(spacing_plan({4, 4, 4}, diag_affine(1, 1, 1), {std::nan(""), 1, 1}).out_shape, (Shape3{4, 4, 4}));
}

// ---------------------------------------------------------------- resampling

TEST(ResampleLinear, RampIsExactInsideAndClampedOutside) {
  // f = 3 s0 - 2 s1 + 0.5 s2 + 7: trilinear reproduces it at every clipped coordinate.
  const Shape3 is{9, 8, 10};
  std::vector<float> in(static_cast<std::size_t>(2 * voxels(is)));
  for (std::int64_t i = 0, k = 0; i < is[0]; ++i)
    for (std::int64_t j = 0; j < is[1]; ++j)
      for (std::int64_t l = 0; l < is[2]; ++l, ++k) {
        in[static_cast<std::size_t>(k)] = static_cast<float>(3 * i - 2 * j) + 0.5f * static_cast<float>(l) + 7.0f;
        in[static_cast<std::size_t>(k + voxels(is))] = -in[static_cast<std::size_t>(k)];  // channel 1
      }
  std::vector<SpacingPlan> plans{
      spacing_plan(is, diag_affine(1, 1, 1), {2.0, 2.0, 2.0}),      // dyadic: exact in float
      spacing_plan(is, diag_affine(1, 1, 1), {0.5, 0.25, 0.5}),     // dyadic: exact in float
      spacing_plan(is, diag_affine(1, 1, 1), {1.5, 0.7, 1.3}),      // general ratios
      spacing_plan(is, diag_affine(0.8, 0.9, 2.5), {1.0, 1.0, 1.0})};
  SpacingPlan shifted = plans[2];  // a map reaching past both ends: border padding
  shifted.to_input = {1.1, 0, 0, -2.5, 0, 0.9, 0, 1.5, 0, 0, 1.2, -1.0};
  SpacingPlan general = plans[2];  // a rotation-like map (general path)
  general.to_input = {0.8, 0.3, 0, 0.5, -0.3, 0.8, 0, 2.0, 0.1, 0, 0.9, 0.25};
  plans.push_back(shifted);
  plans.push_back(general);
  for (std::size_t n = 0; n < plans.size(); ++n) {
    const SpacingPlan& p = plans[n];
    const std::int64_t ov = voxels(p.out_shape);
    std::vector<float> out(static_cast<std::size_t>(2 * ov));
    resample_linear(in.data(), 2, is, p, out.data());
    const bool dyadic = n < 2;
    for (std::int64_t o0 = 0, k = 0; o0 < p.out_shape[0]; ++o0)
      for (std::int64_t o1 = 0; o1 < p.out_shape[1]; ++o1)
        for (std::int64_t o2 = 0; o2 < p.out_shape[2]; ++o2, ++k) {
          double c[3];
          for (int a = 0; a < 3; ++a) {
            const double* m = &p.to_input[static_cast<std::size_t>(4 * a)];
            c[a] = std::clamp(m[0] * static_cast<double>(o0) + m[1] * static_cast<double>(o1) +
                                  m[2] * static_cast<double>(o2) + m[3],
                              0.0, static_cast<double>(is[a] - 1));
          }
          const double want = 3 * c[0] - 2 * c[1] + 0.5 * c[2] + 7;
          const float got = out[static_cast<std::size_t>(k)];
          if (dyadic) {
            ASSERT_EQ(got, static_cast<float>(want)) << "plan " << n << " voxel " << k;
          } else {
            ASSERT_NEAR(got, want, 1e-5 * std::max(1.0, std::fabs(want))) << "plan " << n << " voxel " << k;
          }
          ASSERT_EQ(out[static_cast<std::size_t>(k + ov)], -got) << "channel 1, plan " << n;
        }
  }
}

TEST(ResampleLinear, MatchesSpacingRef) {
  // spacing_ref(f[None], np.eye(4), (0.7, 1.3, 2.0), "bilinear") with f = s0^2 + 2 s1 + 0.5 s2^3 on (4, 3, 5)
  const Shape3 is{4, 3, 5};
  const std::vector<float> in = cubic_volume(is);
  const SpacingPlan p = spacing_plan(is, diag_affine(1, 1, 1), {0.7, 1.3, 2.0});
  ASSERT_EQ(p.out_shape, (Shape3{5, 3, 3}));
  const std::vector<float> want{
      0.0f,  4.0f,  32.0f, 2.6f,  6.6f,  34.6f, 4.0f,  8.0f,  36.0f, 0.7f,  4.7f,  32.7f, 3.3f,  7.3f,  35.3f,
      4.7f,  8.7f,  36.7f, 2.2f,  6.2f,  34.2f, 4.8f,  8.8f,  36.8f, 6.2f,  10.2f, 38.2f, 4.5f,  8.5f,  36.5f,
      7.1f,  11.1f, 39.1f, 8.5f,  12.5f, 40.5f, 8.0f,  12.0f, 40.0f, 10.6f, 14.6f, 42.6f, 12.0f, 16.0f, 44.0f};
  std::vector<float> out(want.size());
  resample_linear(in.data(), 1, is, p, out.data());
  for (std::size_t k = 0; k < want.size(); ++k) EXPECT_NEAR(out[k], want[k], 2e-5) << k;

  // the sheared case through the general path: spacing_ref(g[None], shear, (1, 1, 1)) on (3, 4, 3)
  const Shape3 js{3, 4, 3};
  const std::vector<float> g = cubic_volume(js);
  const SpacingPlan q = spacing_plan(js, Aff{1, 0.3, 0, 5, 0, 1, 0.2, 6, 0, 0, 2, 7, 0, 0, 0, 1}, {1, 1, 1});
  ASSERT_EQ(q.out_shape, (Shape3{4, 4, 5}));
  const std::vector<float> want_shear{
      0.0f,  0.28f, 0.56f, 2.34f, 4.12f, 2.0f,  2.05f, 2.1f,  3.65f, 5.2f,  4.0f,  4.05f, 4.1f,  5.65f,
      7.2f,  6.0f,  6.05f, 6.1f,  7.65f, 9.2f,  1.0f,  1.34f, 1.68f, 3.52f, 5.36f, 2.7f,  2.78f, 2.86f,
      4.44f, 6.02f, 4.4f,  4.48f, 4.56f, 6.14f, 7.72f, 6.1f,  6.18f, 6.26f, 7.84f, 9.42f, 4.0f,  4.25f,
      4.5f,  6.25f, 8.0f,  5.1f,  5.24f, 5.38f, 7.02f, 8.66f, 6.2f,  6.34f, 6.48f, 8.12f, 9.76f, 7.3f,
      7.44f, 7.58f, 9.22f, 10.86f, 4.0f, 4.25f, 4.5f,  6.25f, 8.0f,  6.0f,  6.05f, 6.1f,  7.65f, 9.2f,
      8.0f,  8.05f, 8.1f,  9.65f, 11.2f, 10.0f, 10.05f, 10.1f, 11.65f, 13.2f};
  std::vector<float> out2(want_shear.size());
  resample_linear(g.data(), 1, js, q, out2.data());
  for (std::size_t k = 0; k < want_shear.size(); ++k) EXPECT_NEAR(out2[k], want_shear[k], 2e-5) << k;
}

TEST(ResampleLinear, SeparableEqualsGeneralPath) {
  const Shape3 is{13, 11, 17};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-100.0f, 100.0f);
  std::vector<float> in(static_cast<std::size_t>(voxels(is)));
  for (float& v : in) v = u(rng);
  const SpacingPlan sep = spacing_plan(is, diag_affine(0.8, 1.1, 2.0), {1.0, 0.6, 1.3});
  SpacingPlan gen = sep;
  gen.to_input[1] = 1e-300;  // not diagonal: the general path, the same coordinates
  std::vector<float> a(static_cast<std::size_t>(voxels(sep.out_shape))), b(a.size());
  resample_linear(in.data(), 1, is, sep, a.data());
  resample_linear(in.data(), 1, is, gen, b.data());
  for (std::size_t k = 0; k < a.size(); ++k) ASSERT_NEAR(a[k], b[k], 1e-4) << k;
}

TEST(ResampleNearest, KeepsLabelValuesAndMatchesSpacingRef) {
  // spacing_ref(lab[None], np.eye(4), (0.7, 1.3, 2.0), "nearest"), lab = (3 s0 + 5 s1 + s2) % 7 on (4, 3, 5)
  const Shape3 is{4, 3, 5};
  const std::vector<std::int32_t> lab = label_volume(is);
  const SpacingPlan p = spacing_plan(is, diag_affine(1, 1, 1), {0.7, 1.3, 2.0});
  const std::vector<std::int32_t> want{0, 2, 4, 5, 0, 2, 3, 5, 0, 3, 5, 0, 1, 3, 5, 6, 1, 3, 3, 5, 0, 1, 3,
                                       5, 6, 1, 3, 6, 1, 3, 4, 6, 1, 2, 4, 6, 2, 4, 6, 0, 2, 4, 5, 0, 2};
  std::vector<std::int32_t> out(want.size());
  resample_nearest(lab.data(), 1, is, p, out.data());
  EXPECT_EQ(out, want);
  // sheared (general path): spacing_ref(lab2[None], shear, (1, 1, 1), "nearest") on (3, 4, 3)
  const Shape3 js{3, 4, 3};
  const std::vector<std::int32_t> lab2 = label_volume(js);
  const SpacingPlan q = spacing_plan(js, Aff{1, 0.3, 0, 5, 0, 1, 0.2, 6, 0, 0, 2, 7, 0, 0, 0, 1}, {1, 1, 1});
  const std::vector<std::int32_t> want2{0, 0, 1, 2, 2, 5, 5, 6, 0, 0, 3, 3, 4, 5, 5, 1, 1, 2, 3, 3,
                                        3, 3, 4, 5, 5, 1, 1, 2, 3, 3, 3, 3, 4, 5, 1, 1, 1, 2, 3, 3,
                                        6, 6, 0, 1, 1, 4, 4, 5, 6, 6, 6, 6, 0, 1, 4, 4, 4, 5, 6, 6,
                                        6, 6, 0, 1, 1, 4, 4, 5, 6, 6, 2, 2, 3, 4, 4, 0, 0, 1, 2, 2};
  std::vector<std::int32_t> out2(want2.size());
  resample_nearest(lab2.data(), 1, js, q, out2.data());
  EXPECT_EQ(out2, want2);

  // uint8 labels on an oblique volume, 2 channels: no value that is not in the input
  const Shape3 ks{20, 18, 9};
  std::mt19937 rng(3);
  const std::uint8_t values[4] = {0, 3, 7, 200};
  std::vector<std::uint8_t> in(static_cast<std::size_t>(2 * voxels(ks)));
  for (auto& v : in) v = values[rng() % 4];
  const Aff oblique{0.6928203230275509, -0.3999999999999999, 0, 10, 0.3999999999999999, 0.6928203230275509, 0, -20,
                    0, 0, 1.5, 30, 0, 0, 0, 1};
  for (const SpacingPlan& r : {spacing_plan(ks, oblique, {0.55, 1.3, 0.9}),
                               spacing_plan(ks, Aff{1, 0.3, 0, 5, 0, 1, 0.2, 6, 0, 0, 2, 7, 0, 0, 0, 1}, {0.7, 1, 1})}) {
    std::vector<std::uint8_t> o(static_cast<std::size_t>(2 * voxels(r.out_shape)));
    resample_nearest(in.data(), 2, ks, r, o.data());
    const std::set<std::uint8_t> seen(o.begin(), o.end());
    for (std::uint8_t v : seen) EXPECT_TRUE(v == 0 || v == 3 || v == 7 || v == 200) << int(v);
    EXPECT_EQ(seen.size(), 4u);
  }
}

TEST(ResampleNearest, TiesRoundHalfToEven) {
  // pixdim 0.5 on 4 voxels: input coordinates 0, .5, 1, 1.5, 2, 2.5, 3 -> voxels 0 0 1 2 2 2 3
  // (ATen's grid_sample uses std::nearbyint; spacing_ref's self-check asserts the same)
  const Shape3 is{4, 1, 1};
  const std::vector<std::uint8_t> in{10, 11, 12, 13};
  const SpacingPlan p = spacing_plan(is, diag_affine(1, 1, 1), {0.5, 1.0, 1.0});
  ASSERT_EQ(p.out_shape, (Shape3{7, 1, 1}));
  std::vector<std::uint8_t> out(7);
  resample_nearest(in.data(), 1, is, p, out.data());
  EXPECT_EQ(out, (std::vector<std::uint8_t>{10, 10, 11, 12, 12, 12, 13}));
}

TEST(Resample, IdentityPlanReturnsInputExactly) {
  const Shape3 is{7, 8, 9};
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1000.0f);
  std::vector<float> in(static_cast<std::size_t>(3 * voxels(is)));
  for (float& v : in) v = nd(rng);
  const SpacingPlan p = spacing_plan(is, diag_affine(1, 1, 1), {1.0, 1.0, 1.0});
  std::vector<float> out(in.size());
  resample_linear(in.data(), 3, is, p, out.data());
  EXPECT_EQ(out, in);
  std::vector<std::int32_t> lab(in.size()), lab_out(in.size());
  for (std::size_t k = 0; k < in.size(); ++k) lab[k] = static_cast<std::int32_t>(in[k]);
  resample_nearest(lab.data(), 3, is, p, lab_out.data());
  EXPECT_EQ(lab_out, lab);
  // an explicit identity map that did not come from the unchanged rule (non-unit spacing kept by pixdim 0)
  const SpacingPlan q = spacing_plan(is, diag_affine(0.8, 1.7, 3.0), {0.0, -1.0, 0.0});
  EXPECT_EQ(q.to_input, (Map{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0}));
  resample_linear(in.data(), 3, is, q, out.data());
  EXPECT_EQ(out, in);
}

}  // namespace
}  // namespace stoker::detail
