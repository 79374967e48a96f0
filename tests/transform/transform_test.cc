#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "order/rng.h"
#include "stoker/status.h"
#include "transform/output_rows.h"
#include "transform/pipeline.h"
#include "transform/resize.h"

namespace stoker::detail {
namespace {

TEST(ResizeTest, WeightsAreNormalisedFixedPoint) {
  for (auto [in, out] : {std::pair{500, 224}, {224, 500}, {3, 1}, {1, 7}, {1000, 10}}) {
    ResampleAxis ax;
    compute_axis(in, out, &ax);
    ASSERT_EQ(ax.first.size(), static_cast<std::size_t>(out));
    for (int i = 0; i < out; ++i) {
      const std::int32_t* k = &ax.weights[static_cast<std::size_t>(i * ax.ksize)];
      long sum = std::accumulate(k, k + ax.count[static_cast<std::size_t>(i)], 0L);
      EXPECT_NEAR(sum, 1L << 22, 4) << in << "->" << out << " output " << i;
      EXPECT_GE(ax.first[static_cast<std::size_t>(i)], 0);
      EXPECT_LE(ax.first[static_cast<std::size_t>(i)] + ax.count[static_cast<std::size_t>(i)], in);
    }
  }
}

// compute_axis' vector path against the scalar loop, weight for weight:
// upscales, downscales up to its widest kernel and past it (the scalar
// fallback), output counts that leave a partial group of lanes, and
// fractional boxes (DCT-scaled crops, Resize's box).
TEST(ResizeTest, VectorWeightsEqualScalarWeights) {
  if (!simd_supported(Simd::kAvx512)) GTEST_SKIP() << "no AVX-512 on this CPU";
  struct Case {
    int in, out;
    double in0, in1;
  };
  std::vector<Case> cases;
  for (int in : {1, 2, 3, 7, 100, 223, 224, 225, 331, 448, 597, 1000, 4000}) {
    for (int out : {1, 2, 5, 9, 17, 112, 224, 225, 300}) cases.push_back({in, out, 0, -1});
  }
  Rng rng(38);
  for (int i = 0; i < 500; ++i) {  // RandomResizedCrop-like boxes with fractional ends
    const int in = 50 + static_cast<int>(rng.uniform01() * 600);
    const double a = rng.uniform01() * in * 0.9, b = a + 1 + rng.uniform01() * (in - a - 1);
    cases.push_back({in, 1 + static_cast<int>(rng.uniform01() * 400), a, b});
  }
  for (const Case& c : cases) {
    ResampleAxis want, got;
    compute_axis(c.in, c.out, &want, c.in0, c.in1, Simd::kNone);
    compute_axis(c.in, c.out, &got, c.in0, c.in1, Simd::kAvx512);
    const std::string what = std::to_string(c.in) + "->" + std::to_string(c.out) + " box " + std::to_string(c.in0) +
                             "," + std::to_string(c.in1);
    ASSERT_EQ(got.ksize, want.ksize) << what;
    ASSERT_EQ(got.first, want.first) << what;
    ASSERT_EQ(got.count, want.count) << what;
    ASSERT_EQ(got.weights, want.weights) << what;
  }
}

TEST(ResizeTest, ConstantImageStaysConstant) {
  ImageBuffer src;
  src.reset(317, 211);
  for (std::size_t i = 0; i < src.pixels.size(); ++i) src.pixels[i] = static_cast<std::uint8_t>(i % 3 == 0 ? 200 : 17);
  ResizeScratch scratch;
  ImageBuffer dst;
  for (auto [w, h] : {std::pair{224, 224}, {640, 100}, {1, 1}, {317, 50}}) {
    resize_bilinear(src.view(), w, h, &scratch, &dst);
    ASSERT_EQ(dst.width, w);
    ASSERT_EQ(dst.height, h);
    for (int y = 0; y < h; ++y) {
      for (int x = 0; x < w; ++x) {
        ASSERT_EQ(dst.row(y)[3 * x], 200);
        ASSERT_EQ(dst.row(y)[3 * x + 1], 17);
      }
    }
  }
}

// Noise pixels (a linear congruential generator): every byte value, no smooth areas.
ImageBuffer noise_image(int w, int h, std::uint32_t seed) {
  ImageBuffer img;
  img.reset(w, h);
  for (auto& b : img.pixels) {
    seed = seed * 1664525u + 1013904223u;
    b = static_cast<std::uint8_t>(seed >> 24);
  }
  return img;
}

void expect_simd_equals_portable(const ImageBuffer& src, int w, int h, const double* box = nullptr) {
  ResizeScratch s0;
  ImageBuffer want;
  resize_bilinear(src.view(), w, h, &s0, &want, Simd::kNone, box);
  for (Simd level : {Simd::kSse41, Simd::kAvx2, Simd::kAvx512}) {
    if (!simd_supported(level)) continue;
    ResizeScratch s1;
    ImageBuffer got;
    resize_bilinear(src.view(), w, h, &s1, &got, level, box);
    for (int y = 0; y < h; ++y) {
      ASSERT_EQ(std::memcmp(got.row(y), want.row(y), static_cast<std::size_t>(w) * 3), 0)
          << "level " << static_cast<int>(level) << " " << w << "x" << h
          << (box ? " box " + std::to_string(box[0]) + "," + std::to_string(box[1]) : "") << " row " << y;
    }
  }
}

TEST(ResizeTest, SimdKernelsEqualPortableKernels) {
  const ImageBuffer src = noise_image(331, 257, 1);
  for (auto [w, h] : {std::pair{224, 224}, {17, 300}, {700, 90}, {1, 1}, {331, 100}, {100, 257}, {330, 256},
                      {225, 113}, {3, 257}, {2, 2}, {165, 40}, {662, 514}, {111, 111}, {50, 3}}) {
    expect_simd_equals_portable(src, w, h);
  }
}

TEST(ResizeTest, SimdKernelsEqualPortableKernelsOnFractionalBoxes) {
  const ImageBuffer src = noise_image(97, 83, 7);
  const double boxes[][4] = {{0, 0, 97, 83}, {0.5, 1.25, 96.5, 82.75}, {90.3, 0, 97, 83}, {0, 70.1, 11.7, 83},
                             {40.2, 30.9, 41.1, 31.3}};
  for (const auto& box : boxes) {
    for (auto [w, h] : {std::pair{64, 64}, {13, 7}, {200, 150}, {1, 3}}) expect_simd_equals_portable(src, w, h, box);
  }
}

// cache="decoded"'s path: RandomResizedCrop boxes on a stored image, each
// resized from a view into the image (its stride, not the crop's width),
// odd and even row counts, every level against the portable kernels.
TEST(ResizeTest, SimdKernelsEqualPortableKernelsOnCropViews) {
  const ImageBuffer src = noise_image(597, 448, 11);
  Rng rng(38);
  for (int i = 0; i < 60; ++i) {
    const Box b = random_resized_crop_box(src.width, src.height, {0.08, 1.0}, {3.0 / 4, 4.0 / 3}, &rng);
    const ImageView whole = src.view();
    const ImageView view{whole.row(b.y) + 3 * b.x, b.width, b.height, whole.stride};
    ResizeScratch s0;
    ImageBuffer want;
    resize_bilinear(view, 224, 224, &s0, &want, Simd::kNone);
    for (Simd level : {Simd::kAvx2, Simd::kAvx512}) {
      if (!simd_supported(level)) continue;
      ResizeScratch s1;
      ImageBuffer got;
      resize_bilinear(view, 224, 224, &s1, &got, level);
      for (int y = 0; y < 224; ++y) {
        ASSERT_EQ(std::memcmp(got.row(y), want.row(y), 224 * 3), 0)
            << "level " << static_cast<int>(level) << " crop " << b.x << "," << b.y << " " << b.width << "x" << b.height
            << " row " << y;
      }
    }
  }
}

TEST(ResizeTest, SameSizeIsACopy) {
  ImageBuffer src;
  src.reset(5, 4);
  std::iota(src.pixels.begin(), src.pixels.end(), 0);
  ResizeScratch scratch;
  ImageBuffer dst;
  resize_bilinear(src.view(), 5, 4, &scratch, &dst);
  EXPECT_TRUE(std::equal(src.pixels.begin(), src.pixels.begin() + 60, dst.pixels.begin()));
}

TEST(TransformParamsTest, RandomResizedCropBoxesFollowTheRules) {
  Rng rng(7);
  const int W = 500, H = 375;
  double mean_frac = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    Box b = random_resized_crop_box(W, H, {0.08, 1.0}, {3.0 / 4, 4.0 / 3}, &rng);
    ASSERT_GT(b.width, 0);
    ASSERT_GT(b.height, 0);
    ASSERT_GE(b.x, 0);
    ASSERT_GE(b.y, 0);
    ASSERT_LE(b.x + b.width, W);
    ASSERT_LE(b.y + b.height, H);
    mean_frac += static_cast<double>(b.width) * b.height / (W * H);
  }
  // torchvision's get_params gives a mean area fraction of 0.434 on a 500x375
  // image (measured over 40,000 draws): 0.54 before boxes that do not fit
  // are redrawn.
  EXPECT_NEAR(mean_frac / n, 0.434, 0.01);
}

TEST(TransformParamsTest, RandomResizedCropFallsBackToTheCentre) {
  Rng rng(1);
  // Too wide for any box of aspect <= 4/3 and area >= 0.99: torchvision's fallback.
  Box b = random_resized_crop_box(1000, 10, {0.99, 1.0}, {3.0 / 4, 4.0 / 3}, &rng);
  EXPECT_EQ(b.height, 10);
  EXPECT_EQ(b.width, 13);  // round(10 * 4/3)
  EXPECT_EQ(b.x, (1000 - 13) / 2);
  EXPECT_EQ(b.y, 0);
  b = random_resized_crop_box(10, 1000, {0.99, 1.0}, {3.0 / 4, 4.0 / 3}, &rng);
  EXPECT_EQ(b.width, 10);
  EXPECT_EQ(b.height, 13);  // round(10 / (3/4))
}

TEST(TransformParamsTest, ResizeOutputSizeAsTorchvision) {
  int w, h;
  resize_output_size(Resize{256, 0, 0}, 500, 375, &w, &h);
  EXPECT_EQ(w, 341);  // int(256 * 500 / 375)
  EXPECT_EQ(h, 256);
  resize_output_size(Resize{256, 0, 0}, 375, 500, &w, &h);
  EXPECT_EQ(w, 256);
  EXPECT_EQ(h, 341);
  resize_output_size(Resize{256, 0, 300}, 1000, 100, &w, &h);
  EXPECT_EQ(w, 300);
  EXPECT_EQ(h, 30);  // int(300 * 256 / 2560)
  resize_output_size(Resize{10, 20, 0}, 1000, 100, &w, &h);
  EXPECT_EQ(w, 20);
  EXPECT_EQ(h, 10);
}

TEST(TransformParamsTest, CenterCropBoxAsTorchvision) {
  Box b = center_crop_box(256, 341, 224, 224);
  EXPECT_EQ(b.x, 16);
  EXPECT_EQ(b.y, 58);  // round(117 / 2) = 58 (half to even)
  b = center_crop_box(100, 50, 117, 150);  // padded: left 8, top 50
  EXPECT_EQ(b.x, -8);
  EXPECT_EQ(b.y, -50);
}

TEST(PipelineTest, RejectsVariableOutputSizeAndBadParameters) {
  EXPECT_THROW(Pipeline({Resize{256, 0, 0}}, DType::kFloat32, Layout::kNCHW), Error);
  EXPECT_THROW(Pipeline({}, DType::kFloat32, Layout::kNCHW), Error);
  EXPECT_THROW(Pipeline({CenterCrop{0, 5}}, DType::kFloat32, Layout::kNCHW), Error);
  EXPECT_THROW(Pipeline({CenterCrop{8, 8}, Normalize{{0.5f}, {0.5f}}}, DType::kUInt8, Layout::kNCHW), Error);
  try {
    Pipeline({RandomResizedCrop{224, 224, {0.5, 0.1}, {0.75, 1.33}}}, DType::kFloat32, Layout::kNCHW);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("scale"), std::string::npos);
  }
}

TEST(PipelineTest, PlanDecodesOnlyTheFirstCrop) {
  Pipeline p({RandomResizedCrop{224, 224}, RandomHorizontalFlip{1.0}}, DType::kFloat32, Layout::kNCHW);
  Rng rng(3);
  SamplePlan plan;
  p.plan(500, 375, &rng, &plan);
  EXPECT_TRUE(plan.mirror);
  ASSERT_EQ(plan.steps.size(), 1u);  // the crop became the decode region
  EXPECT_EQ(plan.steps[0].kind, Step::kResize);
  EXPECT_LE(plan.decode_region.x + plan.decode_region.width, 500);
  EXPECT_LE(plan.decode_region.y + plan.decode_region.height, 375);
}

TEST(PipelineTest, NormalizeLutMatchesTorchArithmetic) {
  Pipeline p({CenterCrop{1, 1}, Normalize{{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}}}, DType::kFloat32,
             Layout::kNCHW);
  ImageBuffer img;
  img.reset(1, 1);
  img.pixels = {0, 128, 255};
  SamplePlan plan;
  Rng rng(0);
  p.plan(1, 1, &rng, &plan);
  Workspace ws;
  float out[3];
  p.run(plan, img.view(), &ws, out);
  EXPECT_EQ(out[0], (0.0f / 255.0f - 0.485f) / 0.229f);
  EXPECT_EQ(out[1], (128.0f / 255.0f - 0.456f) / 0.224f);
  EXPECT_EQ(out[2], (255.0f / 255.0f - 0.406f) / 0.225f);
}

// The AVX-512 row writer (in-register table lookups, gathered channels)
// writes the same bits as the table loop, for every width around its
// 64-value chunks, both mirror states and rows that are not the first.
TEST(OutputRowTest, SimdWriterEqualsPortableWriter) {
  FloatTable table;
  const float mean[3] = {0.485f, 0.456f, 0.406f}, stdev[3] = {0.229f, 0.224f, 0.225f};
  table.build(mean, stdev);
  for (int width : {1, 2, 15, 16, 17, 31, 63, 64, 65, 100, 127, 128, 129, 224, 255, 300}) {
    for (bool mirror : {false, true}) {
      const int height = 3;
      std::vector<std::uint8_t> row(kRowPad + 3 * static_cast<std::size_t>(width) + kRowPad);
      std::uint32_t seed = static_cast<std::uint32_t>(width * 2 + mirror);
      for (auto& b : row) {
        seed = seed * 1664525u + 1013904223u;
        b = static_cast<std::uint8_t>(seed >> 24);
      }
      const std::size_t n = 3 * static_cast<std::size_t>(width) * height;
      std::vector<float> want(n, -7.0f), got(n, -7.0f);
      for (int y = 0; y < height; ++y) {
        const std::uint8_t* r = row.data() + kRowPad;
        write_output_row(r, width, height, y, mirror, DType::kFloat32, Layout::kNCHW, table, want.data(), Simd::kNone);
        write_output_row(r, width, height, y, mirror, DType::kFloat32, Layout::kNCHW, table, got.data());
      }
      ASSERT_EQ(std::memcmp(want.data(), got.data(), n * sizeof(float)), 0) << "width " << width << " mirror " << mirror;
      // Every value came from the table: nothing left unwritten, nothing out of place.
      for (int x = 0; x < width; ++x) {
        const std::uint8_t* p = row.data() + kRowPad + 3 * static_cast<std::size_t>(mirror ? width - 1 - x : x);
        for (int c = 0; c < 3; ++c) {
          ASSERT_EQ(want[static_cast<std::size_t>(c * width * height + x)], table.value[c][p[c]]) << width << " " << x;
        }
      }
    }
  }
}

}  // namespace
}  // namespace stoker::detail
