#include "decode/decode.h"

#include <gtest/gtest.h>

#include <cstring>
#include <tuple>

#include "test_util.h"

namespace stoker::detail {
namespace {

using stoker::testing::encode_jpeg;
using stoker::testing::test_pixels;

struct Decoded {
  std::vector<std::uint8_t> rgb;
  int width = 0, height = 0;
};

// The whole image, decoded at eighths/8.
Decoded decode_full(const std::vector<std::uint8_t>& bytes, int eighths = 8) {
  ImageDecoder dec;
  EXPECT_TRUE(dec.open(bytes.data(), bytes.size(), 1u << 30).ok());
  ImageBuffer buf;
  ImageView v;
  Status s = dec.decode({0, 0, (dec.width() * eighths + 7) / 8, (dec.height() * eighths + 7) / 8}, &buf, &v, eighths);
  EXPECT_TRUE(s.ok()) << s.to_string();
  Decoded d{{}, v.width, v.height};
  for (int y = 0; y < v.height; ++y) d.rgb.insert(d.rgb.end(), v.row(y), v.row(y) + v.width * 3);
  return d;
}

TEST(DecodeTest, SniffsByMagicBytes) {
  auto jpeg = encode_jpeg(test_pixels(8, 8, 1), 8, 8);
  EXPECT_EQ(sniff_format(jpeg.data(), jpeg.size()), Format::kJpeg);
  const std::uint8_t png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n', 0};
  EXPECT_EQ(sniff_format(png, sizeof(png)), Format::kPng);
  const std::uint8_t text[] = "hello";
  EXPECT_EQ(sniff_format(text, 5), Format::kUnknown);
}

TEST(DecodeTest, FullDecodeIsCloseToTheSource) {
  const int w = 97, h = 61;
  auto px = test_pixels(w, h, 3);
  auto d = decode_full(encode_jpeg(px, w, h, /*quality=*/98, /*subsampling=*/444));
  ASSERT_EQ(d.width, w);
  ASSERT_EQ(d.height, h);
  double err = 0;
  for (std::size_t i = 0; i < px.size(); ++i) err += std::abs(int(px[i]) - int(d.rgb[i]));
  EXPECT_LT(err / static_cast<double>(px.size()), 6.0);
}

TEST(DecodeTest, GrayscaleBecomesRgb) {
  const int w = 20, h = 10;
  std::vector<std::uint8_t> gray(w * h);
  for (int i = 0; i < w * h; ++i) gray[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(i);
  auto d = decode_full(encode_jpeg(gray, w, h, 95, 444, /*channels=*/1));
  for (int i = 0; i < w * h; ++i) {
    ASSERT_EQ(d.rgb[3 * static_cast<std::size_t>(i)], d.rgb[3 * static_cast<std::size_t>(i) + 1]);
    ASSERT_EQ(d.rgb[3 * static_cast<std::size_t>(i)], d.rgb[3 * static_cast<std::size_t>(i) + 2]);
  }
}

// Region decoding (skip rows, crop columns, stop early) must give exactly the
// pixels of a full decode, for every subsampling and for progressive files.
// With DCT scaling (M/8), the region is in scaled coordinates and must equal
// the same region of the whole image decoded at that scale.
class RegionTest : public ::testing::TestWithParam<std::tuple<int, bool, int>> {};

TEST_P(RegionTest, RegionEqualsCropOfFullDecode) {
  auto [subsampling, progressive, eighths] = GetParam();
  const int W = (203 * 8 + eighths - 1) / eighths, H = (157 * 8 + eighths - 1) / eighths;
  auto bytes = encode_jpeg(test_pixels(W, H, 9), W, H, 90, subsampling, 3, progressive);
  Decoded full = decode_full(bytes, eighths);
  const int w = full.width, h = full.height;
  ASSERT_EQ(w, (W * eighths + 7) / 8);
  ImageDecoder dec;
  ImageBuffer buf;
  for (Box r : {Box{0, 0, w, h}, Box{17, 33, 100, 50}, Box{0, 80, w, h - 80}, Box{150, 0, w - 150, 20}, Box{1, 1, 1, 1},
                Box{64, 64, 32, 32}, Box{w - 1, h - 1, 1, 1}, Box{w - 9, 0, 9, h}}) {
    ASSERT_TRUE(dec.open(bytes.data(), bytes.size(), 1u << 30).ok());
    ImageView v;
    Status s = dec.decode(r, &buf, &v, eighths);
    ASSERT_TRUE(s.ok()) << s.to_string();
    ASSERT_EQ(v.width, r.width);
    ASSERT_EQ(v.height, r.height);
    for (int y = 0; y < r.height; ++y) {
      for (int x = 0; x < r.width * 3; ++x) {
        std::size_t fi = (static_cast<std::size_t>(r.y + y) * w + static_cast<std::size_t>(r.x)) * 3 + static_cast<std::size_t>(x);
        ASSERT_EQ(v.row(y)[x], full.rgb[fi]) << "region " << r.x << "," << r.y << " " << r.width << "x" << r.height
                                             << " at " << x / 3 << "," << y;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Subsampling, RegionTest,
                         ::testing::Combine(::testing::Values(444, 422, 420), ::testing::Bool(),
                                            ::testing::Values(8, 4, 2, 1, 3, 6, 7)));

// Chroma upsampling reads one neighbouring chroma sample on each side, and
// libjpeg-turbo treats the edge of a column crop as the image's edge: every
// left and right edge of a region, at every offset within and across iMCU
// columns, must still give the full decode's pixels.
TEST(DecodeTest, RegionColumnsAtEveryOffsetEqualFullDecode) {
  const int W = 77, H = 35;
  for (int subsampling : {420, 422, 444}) {
    auto bytes = encode_jpeg(test_pixels(W, H, 5), W, H, 85, subsampling);
    for (int eighths : {8, 4}) {
      Decoded full = decode_full(bytes, eighths);
      const int w = full.width;
      ImageDecoder dec;
      ImageBuffer buf;
      for (int x0 = 0; x0 < w; ++x0) {
        for (int x1 : {x0 + 1, x0 + 2, x0 + 3, x0 + 17, w}) {
          if (x1 > w) continue;
          const Box r{x0, 3, x1 - x0, 9};
          ASSERT_TRUE(dec.open(bytes.data(), bytes.size(), 1u << 30).ok());
          ImageView v;
          ASSERT_TRUE(dec.decode(r, &buf, &v, eighths).ok());
          for (int y = 0; y < r.height; ++y) {
            const std::size_t at = (static_cast<std::size_t>(r.y + y) * static_cast<std::size_t>(w) + static_cast<std::size_t>(x0)) * 3;
            ASSERT_EQ(std::memcmp(v.row(y), &full.rgb[at], static_cast<std::size_t>(r.width) * 3), 0)
                << subsampling << " at " << eighths << "/8: columns " << x0 << ".." << x1 << ", row " << y;
          }
        }
      }
    }
  }
}

TEST(DecodeTest, CorruptInputsAreNamedByReason) {
  auto good = encode_jpeg(test_pixels(64, 48, 2), 64, 48);
  ImageDecoder dec;
  ImageBuffer buf;
  ImageView v;

  Status s = dec.open(good.data(), 0, 1u << 30);
  EXPECT_EQ(s.code(), Code::kCorrupt);
  EXPECT_NE(s.message().find("empty file"), std::string::npos);

  const std::string text = "just some text\n";
  s = dec.open(reinterpret_cast<const std::uint8_t*>(text.data()), text.size(), 1u << 30);
  EXPECT_EQ(s.code(), Code::kUnsupported);
  EXPECT_NE(s.message().find("not a JPEG, PNG or .npy"), std::string::npos);

  for (std::size_t cut : {good.size() / 2, good.size() - 2, std::size_t{4}, std::size_t{200}}) {
    s = dec.open(good.data(), cut, 1u << 30);
    if (s.ok()) s = dec.decode({0, 0, dec.width(), dec.height()}, &buf, &v);
    EXPECT_EQ(s.code(), Code::kCorrupt) << "cut at " << cut;
  }

  s = dec.open(good.data(), good.size(), /*max_pixels=*/64 * 48 - 1);
  EXPECT_EQ(s.code(), Code::kResourceExhausted);
  EXPECT_NE(s.message().find("64x48"), std::string::npos);

  // Flipped bytes in the entropy-coded data: decodes or fails, never crashes.
  auto flipped = good;
  for (std::size_t i = good.size() / 2; i < good.size() / 2 + 40; ++i) flipped[i] ^= 0x5a;
  s = dec.open(flipped.data(), flipped.size(), 1u << 30);
  if (s.ok()) (void)dec.decode({0, 0, dec.width(), dec.height()}, &buf, &v);

  // The decoder is reusable after errors.
  ASSERT_TRUE(dec.open(good.data(), good.size(), 1u << 30).ok());
  EXPECT_TRUE(dec.decode({0, 0, 64, 48}, &buf, &v).ok());
}

}  // namespace
}  // namespace stoker::detail
