// The per-channel geometry of rasters kept as stored (transform/raster.h):
// the uint8 rule is the RGB path's, channel by channel (resize_bilinear is
// bit-exact with Pillow, tests/python/test_transforms.py); crops pad with
// zeros; flips, layouts and Normalize as documented. The 16-bit and float
// rules are compared with Pillow in tests/python/test_rasters.py; uint8
// warps are the RGB and mask warps per channel.
#include "transform/raster.h"

#include "transform/image_ops.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <tuple>
#include <vector>

namespace stoker::detail {
namespace {

std::vector<std::uint8_t> random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::vector<std::uint8_t> v(n);
  for (auto& b : v) b = static_cast<std::uint8_t>(g() & 0xFF);
  return v;
}

class Uint8RuleTest : public ::testing::TestWithParam<std::tuple<int, int, bool>> {};

TEST_P(Uint8RuleTest, EachChannelIsTheRgbPathsChannel) {
  const auto [out_w, out_h, boxed] = GetParam();
  const int w = 53, h = 41;
  const std::vector<std::uint8_t> rgb = random_bytes(static_cast<std::size_t>(w) * h * 3, 5);
  const double box[4] = {3.25, 2.5, 47.0, 38.75};
  ResizeScratch rs;
  ImageBuffer want;
  resize_bilinear(ImageView{rgb.data(), w, h, w * 3}, out_w, out_h, &rs, &want, Simd::kNone, boxed ? box : nullptr);
  RasterWorkspace ws;
  for (int c = 0; c < 3; ++c) {
    std::vector<std::uint8_t> plane(static_cast<std::size_t>(w) * h), got;
    for (std::size_t i = 0; i < plane.size(); ++i) plane[i] = rgb[i * 3 + static_cast<std::size_t>(c)];
    resize_plane(PlaneType::kUint8, plane.data(), w, h, out_w, out_h, boxed ? box : nullptr, &ws, &got);
    ASSERT_EQ(got.size(), static_cast<std::size_t>(out_w) * out_h);
    for (int y = 0; y < out_h; ++y) {
      for (int x = 0; x < out_w; ++x) {
        ASSERT_EQ(got[static_cast<std::size_t>(y) * out_w + x], want.row(y)[3 * x + c]) << c << " " << x << "," << y;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, Uint8RuleTest,
                         ::testing::Combine(::testing::Values(1, 17, 53, 120), ::testing::Values(1, 13, 41, 90),
                                            ::testing::Bool()));

class WarpRuleTest : public ::testing::TestWithParam<std::tuple<double, bool>> {};

// uint8 planes warp as the RGB image's channels (bilinear and nearest) and as
// an 8-bit mask (nearest), which tests/python/test_affine_ops.py compares
// with Pillow byte for byte.
TEST_P(WarpRuleTest, Uint8PlanesWarpAsTheRgbChannelsAndTheMasks) {
  const auto [angle, bilinear] = GetParam();
  const int w = 37, h = 29;
  const std::vector<std::uint8_t> rgb = random_bytes(static_cast<std::size_t>(w) * h * 3, 11);
  double m[6];
  pil_rotate_matrix(w, h, angle, nullptr, m);
  const std::uint8_t fill[3] = {7, 7, 7};
  ImageBuffer want;
  pil_affine(ImageView{rgb.data(), w, h, w * 3}, &want, m, bilinear, fill);
  for (int c = 0; c < 3; ++c) {
    std::vector<std::uint8_t> plane(static_cast<std::size_t>(w) * h), got(plane.size());
    for (std::size_t i = 0; i < plane.size(); ++i) plane[i] = rgb[i * 3 + static_cast<std::size_t>(c)];
    pil_affine_plane(PlaneType::kUint8, plane.data(), w, h, got.data(), m, bilinear, 7);
    MaskBuffer mask;
    if (!bilinear) pil_affine_mask(MaskView{plane.data(), w, h, w, 1}, &mask, m, 7);
    for (int y = 0; y < h; ++y) {
      for (int x = 0; x < w; ++x) {
        ASSERT_EQ(got[static_cast<std::size_t>(y) * w + x], want.row(y)[3 * x + c]) << c << " " << x << "," << y;
        if (!bilinear) {
          ASSERT_EQ(got[static_cast<std::size_t>(y) * w + x], mask.row(y)[x]);
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Angles, WarpRuleTest,
                         ::testing::Combine(::testing::Values(0.0, 17.5, 90.0, -133.0), ::testing::Bool()));

TEST(RasterRuleTest, ConstantPlanesStayConstantInEveryType) {
  RasterWorkspace ws;
  std::vector<std::int32_t> ints(30 * 20, 54321);
  std::vector<float> floats(30 * 20, -3.5f);
  std::vector<std::uint8_t> got;
  for (auto [ow, oh] : {std::pair{7, 5}, std::pair{61, 43}, std::pair{30, 9}}) {
    resize_plane(PlaneType::kInt32, reinterpret_cast<const std::uint8_t*>(ints.data()), 30, 20, ow, oh, nullptr, &ws, &got);
    for (std::size_t i = 0; i < got.size() / 4; ++i) ASSERT_EQ(reinterpret_cast<const std::int32_t*>(got.data())[i], 54321);
    resize_plane(PlaneType::kFloat32, reinterpret_cast<const std::uint8_t*>(floats.data()), 30, 20, ow, oh, nullptr, &ws,
                 &got);
    for (std::size_t i = 0; i < got.size() / 4; ++i) ASSERT_FLOAT_EQ(reinterpret_cast<const float*>(got.data())[i], -3.5f);
  }
}

TEST(RasterRuleTest, Int32RoundsHalfAwayFromZeroAsPillowsModeI) {
  // 2 -> 1 pixel: weights 0.5 and 0.5, so (1 + 2) / 2 = 1.5 rounds to 2, and (3 + 4) / 2 = 3.5 to 4.
  RasterWorkspace ws;
  std::vector<std::int32_t> in = {1, 2, 3, 4};
  std::vector<std::uint8_t> got;
  resize_plane(PlaneType::kInt32, reinterpret_cast<const std::uint8_t*>(in.data()), 2, 2, 1, 2, nullptr, &ws, &got);
  const auto* g = reinterpret_cast<const std::int32_t*>(got.data());
  EXPECT_EQ(g[0], 2);
  EXPECT_EQ(g[1], 4);
}

TEST(RasterPlanTest, CropsPadWithZerosFlipsAndLayoutsAsPlanned) {
  const int c = 3, w = 4, h = 3;
  std::vector<float> src(static_cast<std::size_t>(c) * w * h);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i + 1);
  SamplePlan plan;
  Step crop{};
  crop.kind = Step::kCrop;
  crop.box = {-1, 1, 3, 3};  // one column left of the image, one row below it
  plan.steps.push_back(crop);
  plan.mirror = true;
  plan.vflip = true;
  RasterWorkspace ws;
  auto at = [&](int k, int x, int y) -> float {  // the plan's value at output (x, y) of channel k
    const int sx = -1 + (3 - 1 - x), sy = 1 + (3 - 1 - y);
    if (sx < 0 || sx >= w || sy < 0 || sy >= h) return 0.0f;
    return src[(static_cast<std::size_t>(k) * h + sy) * w + sx];
  };
  for (bool nhwc : {false, true}) {
    RasterWrite write;
    write.nhwc = nhwc;
    std::vector<float> out(static_cast<std::size_t>(c) * 9, -1.0f);
    run_raster_plan(plan, PlaneType::kFloat32, reinterpret_cast<const std::uint8_t*>(src.data()), c, w, h, write, &ws,
                    out.data());
    for (int k = 0; k < c; ++k) {
      for (int y = 0; y < 3; ++y) {
        for (int x = 0; x < 3; ++x) {
          const std::size_t i = nhwc ? (static_cast<std::size_t>(y) * 3 + x) * c + k : (static_cast<std::size_t>(k) * 3 + y) * 3 + x;
          ASSERT_EQ(out[i], at(k, x, y)) << nhwc << " " << k << " " << x << "," << y;
        }
      }
    }
  }
}

TEST(RasterPlanTest, NormalizeUsesEachChannelsMeanAndStdAfterToTensor) {
  const int c = 13, w = 2, h = 1;
  std::vector<std::uint8_t> src(static_cast<std::size_t>(c) * w * h);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::uint8_t>(i * 19);
  RasterWrite write;
  write.to_float = true;
  write.div255 = true;
  for (int k = 0; k < c; ++k) {
    write.mean.push_back(0.1f * static_cast<float>(k));
    write.std.push_back(0.5f + 0.25f * static_cast<float>(k));
  }
  RasterWorkspace ws;
  std::vector<float> out(src.size());
  run_raster_plan(SamplePlan{}, PlaneType::kUint8, src.data(), c, w, h, write, &ws, out.data());
  for (std::size_t i = 0; i < out.size(); ++i) {
    const std::size_t k = i / 2;
    const float want = (static_cast<float>(src[i]) / 255.0f - write.mean[k]) / write.std[k];
    ASSERT_EQ(out[i], want) << i;
  }
}

}  // namespace
}  // namespace stoker::detail
