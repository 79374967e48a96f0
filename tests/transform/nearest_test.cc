#include "transform/nearest.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

namespace stoker::detail {
namespace {

// A width x height mask of `bpp`-byte pixels; pixel (x, y) = value(x, y).
template <typename F>
MaskBuffer make_mask(int width, int height, int bpp, F value) {
  MaskBuffer m;
  m.reset(width, height, bpp);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      const auto v = static_cast<std::uint32_t>(value(x, y));
      if (bpp == 1) {
        m.row(y)[x] = static_cast<std::uint8_t>(v);
      } else {
        const auto v16 = static_cast<std::uint16_t>(v);
        std::memcpy(m.row(y) + 2 * x, &v16, 2);
      }
    }
  }
  return m;
}

std::uint32_t pixel(const MaskView& m, int x, int y) {
  if (m.bytes_per_pixel == 1) return m.row(y)[x];
  std::uint16_t v;
  std::memcpy(&v, m.row(y) + 2 * x, 2);
  return v;
}

// Pixel x of a one-row mask 0, 1, 2, ... resized to out_w: the source column each output reads.
std::vector<int> columns_read(int in_w, int out_w, int bpp, const double* box = nullptr) {
  MaskBuffer src = make_mask(in_w, 1, bpp, [](int x, int) { return x; });
  MaskBuffer out;
  resize_nearest(src.view(), out_w, 1, &out, box);
  std::vector<int> cols;
  for (int x = 0; x < out_w; ++x) cols.push_back(static_cast<int>(pixel(out.view(), x, 0)));
  return cols;
}

class NearestTest : public ::testing::TestWithParam<int> {};  // bytes per pixel

TEST_P(NearestTest, DownscaleByNonIntegerFactors) {
  const int bpp = GetParam();
  // Output i reads floor(step * (i + 0.5)): 5 -> 3 step 5/3 reads 0.83, 2.5, 4.17.
  EXPECT_EQ(columns_read(5, 3, bpp), (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(columns_read(7, 3, bpp), (std::vector<int>{1, 3, 5}));      // 1.17, 3.5, 5.83
  EXPECT_EQ(columns_read(10, 4, bpp), (std::vector<int>{1, 3, 6, 8}));  // 1.25, 3.75, 6.25, 8.75
}

TEST_P(NearestTest, Upscale) {
  const int bpp = GetParam();
  // 3 -> 8, step 0.375: 0.19, 0.56, 0.94, 1.31, 1.69, 2.06, 2.44, 2.81.
  EXPECT_EQ(columns_read(3, 8, bpp), (std::vector<int>{0, 0, 0, 1, 1, 2, 2, 2}));
  // 5 -> 9 (step 5/9), as rows this time.
  MaskBuffer src = make_mask(1, 5, bpp, [](int, int y) { return 100 + y; });
  MaskBuffer out;
  resize_nearest(src.view(), 1, 9, &out);
  std::vector<int> rows;
  for (int y = 0; y < 9; ++y) rows.push_back(static_cast<int>(pixel(out.view(), 0, y)) - 100);
  EXPECT_EQ(rows, (std::vector<int>{0, 0, 1, 1, 2, 3, 3, 4, 4}));
}

TEST_P(NearestTest, OnePixelOutputsReadTheMiddle) {
  const int bpp = GetParam();
  EXPECT_EQ(columns_read(5, 1, bpp), (std::vector<int>{2}));  // 2.5
  EXPECT_EQ(columns_read(4, 1, bpp), (std::vector<int>{2}));  // 2.0 exactly
  EXPECT_EQ(columns_read(1, 1, bpp), (std::vector<int>{0}));
  EXPECT_EQ(columns_read(1, 6, bpp), (std::vector<int>(6, 0)));
}

TEST_P(NearestTest, BoxSelectsAFractionalRegion) {
  const int bpp = GetParam();
  MaskBuffer src = make_mask(6, 4, bpp, [](int x, int y) { return 10 * y + x; });
  // Columns: step 3/2 from 1.5 reads 2.25, 3.75; rows: step 1 from 0.25 reads 0.75, 1.75, 2.75.
  const double box[4] = {1.5, 0.25, 4.5, 3.25};
  MaskBuffer out;
  resize_nearest(src.view(), 2, 3, &out, box);
  ASSERT_EQ(out.width, 2);
  ASSERT_EQ(out.height, 3);
  ASSERT_EQ(out.bytes_per_pixel, bpp);
  const std::array<std::array<std::uint32_t, 2>, 3> want{{{2, 3}, {12, 13}, {22, 23}}};
  for (int y = 0; y < 3; ++y) {
    for (int x = 0; x < 2; ++x) EXPECT_EQ(pixel(out.view(), x, y), want[y][x]) << x << "," << y;
  }
}

TEST_P(NearestTest, BoxIsRoundedToFloat32AsPillowParsesIt) {
  const int bpp = GetParam();
  // 0.99999999 is 1.0 in float32: one output over [1, 3) reads 1 + 2 / 2 = 2.0,
  // where double arithmetic would read 1.999999995 (pixel 1).
  const double box[4] = {0.99999999, 0, 3, 1};
  EXPECT_EQ(columns_read(4, 1, bpp, box), (std::vector<int>{2}));
}

TEST_P(NearestTest, EmptyBoxOnTheEdgeFillsZero) {
  const int bpp = GetParam();
  // Width 0 at x = 4: every position is 4.0, outside the source; Pillow writes 0.
  const double box[4] = {4, 0, 4, 1};
  MaskBuffer src = make_mask(4, 1, bpp, [](int x, int) { return x + 1; });
  MaskBuffer out;
  resize_nearest(src.view(), 2, 1, &out, box);
  EXPECT_EQ(pixel(out.view(), 0, 0), 0u);
  EXPECT_EQ(pixel(out.view(), 1, 0), 0u);
}

TEST_P(NearestTest, SameSizeIsACopy) {
  const int bpp = GetParam();
  MaskBuffer src = make_mask(13, 7, bpp, [](int x, int y) { return 37 * x + 11 * y; });
  MaskBuffer out;
  resize_nearest(src.view(), 13, 7, &out);
  for (int y = 0; y < 7; ++y) {
    for (int x = 0; x < 13; ++x) ASSERT_EQ(pixel(out.view(), x, y), pixel(src.view(), x, y));
  }
}

INSTANTIATE_TEST_SUITE_P(BytesPerPixel, NearestTest, ::testing::Values(1, 2),
                         [](const ::testing::TestParamInfo<int>& p) { return p.param == 1 ? "8bit" : "16bit"; });

// The two Pillow paths round the same exact position differently: 2 -> 7,
// output 3 sits at 3.5 * 2/7 = 1 exactly. The 8-bit path's running sum
// 1/7 + 2/7 + 2/7 + 2/7 is 0.9999999999999999 (input 0); the 16-bit path's
// product 2/7 * 3.5 is 1.0 (input 1).
TEST(NearestRuleTest, EightAndSixteenBitPathsRoundAsPillowDoes) {
  EXPECT_EQ(columns_read(2, 7, 1), (std::vector<int>{0, 0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(columns_read(2, 7, 2), (std::vector<int>{0, 0, 0, 1, 1, 1, 1}));
  std::vector<int> idx;
  nearest_axis(2, 7, 0, 2, 1, &idx);
  EXPECT_EQ(idx[3], 0);
  nearest_axis(2, 7, 0, 2, 2, &idx);
  EXPECT_EQ(idx[3], 1);
}

TEST(NearestRuleTest, SixteenBitValuesAreCopiedWhole) {
  MaskBuffer src = make_mask(3, 2, 2, [](int x, int y) { return 0xFF00 + 0x0101 * (x + 3 * y); });
  MaskBuffer out;
  resize_nearest(src.view(), 6, 4, &out);
  for (int y = 0; y < 4; ++y) {
    for (int x = 0; x < 6; ++x) EXPECT_EQ(pixel(out.view(), x, y), pixel(src.view(), x / 2, y / 2));
  }
}

// Random sizes and boxes: every output pixel is the source pixel at the
// position nearest_axis computed, that position lies in the box's pixels,
// and positions never decrease.
TEST(NearestRuleTest, OutputValuesAreCopiedFromTheComputedPosition) {
  std::uint32_t seed = 12345;
  auto next = [&seed](std::uint32_t n) {
    seed = seed * 1664525u + 1013904223u;
    return (seed >> 8) % n;
  };
  for (int trial = 0; trial < 400; ++trial) {
    const int bpp = 1 + trial % 2;
    const int w = 1 + static_cast<int>(next(40)), h = 1 + static_cast<int>(next(40));
    const int ow = 1 + static_cast<int>(next(90)), oh = 1 + static_cast<int>(next(90));
    MaskBuffer src = make_mask(w, h, bpp, [&](int, int) { return next(bpp == 1 ? 256 : 65536); });
    double box[4] = {0, 0, static_cast<double>(w), static_cast<double>(h)};
    if (trial % 3 != 0) {
      for (int axis = 0; axis < 2; ++axis) {
        const double size = axis == 0 ? w : h;
        double a = size * next(1000) / 1000.0, b = size * next(1000) / 1000.0;
        if (a > b) std::swap(a, b);
        box[axis] = a;
        box[axis + 2] = b;
      }
    }
    MaskBuffer out;
    resize_nearest(src.view(), ow, oh, &out, box);
    std::vector<int> cols, rows;
    nearest_axis(w, ow, box[0], box[2], bpp, &cols);
    nearest_axis(h, oh, box[1], box[3], bpp, &rows);
    for (int axis = 0; axis < 2; ++axis) {
      const std::vector<int>& idx = axis == 0 ? cols : rows;
      for (std::size_t i = 0; i < idx.size(); ++i) {
        ASSERT_GE(idx[i], static_cast<int>(box[axis]) - 1) << trial;  // float32 rounding of the box edge
        ASSERT_LE(idx[i], static_cast<int>(box[axis + 2])) << trial;
        if (i > 0) {
          ASSERT_GE(idx[i], idx[i - 1]) << trial;
        }
      }
    }
    for (int y = 0; y < oh; ++y) {
      for (int x = 0; x < ow; ++x) {
        ASSERT_GE(cols[static_cast<std::size_t>(x)], 0);
        ASSERT_GE(rows[static_cast<std::size_t>(y)], 0);
        ASSERT_EQ(pixel(out.view(), x, y),
                  pixel(src.view(), cols[static_cast<std::size_t>(x)], rows[static_cast<std::size_t>(y)]))
            << "trial " << trial << " at " << x << "," << y;
      }
    }
  }
}

}  // namespace
}  // namespace stoker::detail
