#include "decode/decode.h"
#include "decode/jpeg_restart.h"

#include <gtest/gtest.h>

#include <algorithm>
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

// JPEGs with restart markers on a grid (as `stoker pack` writes them): a
// region is decoded from a JPEG of just the restart segments that cover it,
// and must still give exactly the pixels of a full decode, at every edge.
TEST(DecodeTest, RegionsOfRestartMarkedJpegsEqualFullDecode) {
  struct Case {
    int w, h, subsampling, channels, interval;
  };
  for (const Case c : {Case{203, 157, 444, 3, 0}, Case{203, 157, 420, 3, 0}, Case{203, 157, 422, 3, 0},
                       Case{77, 35, 420, 3, 1}, Case{77, 35, 444, 3, 2}, Case{96, 64, 420, 3, 0},
                       Case{131, 93, 444, 1, 0}}) {
    const int mcu_w = c.channels == 1 || c.subsampling == 444 ? 8 : 16;
    const int interval = c.interval ? c.interval : restart_interval_for(c.w, mcu_w);
    auto bytes = encode_jpeg(test_pixels(c.w, c.h, 11), c.w, c.h, 85, c.subsampling, c.channels, false, interval);
    RestartLayout layout;
    ASSERT_TRUE(parse_restart_layout(bytes.data(), bytes.size(), &layout)) << c.w << "x" << c.h << " " << c.subsampling;
    ASSERT_EQ(layout.interval, interval);
    Decoded full = decode_full(bytes);
    ImageDecoder dec;
    ImageBuffer buf;
    std::vector<Box> boxes = {{1, 1, 1, 1}, {c.w - 1, c.h - 1, 1, 1}, {0, 0, 1, c.h}, {c.w - 1, 0, 1, c.h},
                              {0, c.h - 1, c.w, 1}, {c.w / 3, c.h / 3, c.w / 3, c.h / 3}, {0, 17, c.w, 9}};
    for (int x = 0; x < c.w; x += 5) {
      for (int y = 0; y < c.h; y += 7) boxes.push_back({x, y, std::min(c.w - x, 1 + (x * 7 + y) % 40), std::min(c.h - y, 1 + (y * 3 + x) % 30)});
    }
    for (const Box& r : boxes) {
      ASSERT_TRUE(dec.open(bytes.data(), bytes.size(), 1u << 30).ok());
      ImageView v;
      Status st = dec.decode(r, &buf, &v);
      ASSERT_TRUE(st.ok()) << st.to_string();
      for (int y = 0; y < r.height; ++y) {
        const std::size_t at = (static_cast<std::size_t>(r.y + y) * static_cast<std::size_t>(c.w) + static_cast<std::size_t>(r.x)) * 3;
        ASSERT_EQ(std::memcmp(v.row(y), &full.rgb[at], static_cast<std::size_t>(r.width) * 3), 0)
            << c.w << "x" << c.h << " " << c.subsampling << "/" << c.channels << " interval " << interval << ": region "
            << r.x << "," << r.y << " " << r.width << "x" << r.height << ", row " << y;
      }
    }
  }
}

// A restart marker out of sequence: the cut is refused and the original is
// decoded, where libjpeg reports the lost sync: corrupt, named as such.
TEST(DecodeTest, MisnumberedRestartMarkerIsCorrupt) {
  auto bytes = encode_jpeg(test_pixels(64, 64, 3), 64, 64, 90, 444, 3, false, 2);
  int seen = 0;
  for (std::size_t i = 0; i + 1 < bytes.size(); ++i) {
    if (bytes[i] == 0xFF && bytes[i + 1] >= 0xD0 && bytes[i + 1] <= 0xD7 && ++seen == 3) {
      bytes[i + 1] = 0xD6;  // RST2 -> RST6
      break;
    }
  }
  ASSERT_EQ(seen, 3);
  ImageDecoder dec;
  ImageBuffer buf;
  ImageView v;
  ASSERT_TRUE(dec.open(bytes.data(), bytes.size(), 1u << 30).ok());
  Status st = dec.decode({40, 40, 10, 10}, &buf, &v);
  EXPECT_EQ(st.code(), Code::kCorrupt) << st.to_string();
  EXPECT_NE(st.message().find("JPEG data"), std::string::npos) << st.message();
}

TEST(DecodeTest, RestartLayoutOnlyForSingleScanGridFiles) {
  RestartLayout layout;
  auto plain = encode_jpeg(test_pixels(64, 48, 1), 64, 48);
  EXPECT_FALSE(parse_restart_layout(plain.data(), plain.size(), &layout)) << "no restart markers";
  auto progressive = encode_jpeg(test_pixels(64, 48, 1), 64, 48, 90, 444, 3, true, 2);
  EXPECT_FALSE(parse_restart_layout(progressive.data(), progressive.size(), &layout));
  auto off_grid = encode_jpeg(test_pixels(64, 48, 1), 64, 48, 90, 444, 3, false, 3);  // 8 MCUs a row, 3 a segment
  EXPECT_FALSE(parse_restart_layout(off_grid.data(), off_grid.size(), &layout));
  EXPECT_EQ(restart_interval_for(256, 16), 4);  // 16 MCUs: 4 of 16 px
  EXPECT_EQ(restart_interval_for(256, 8), 8);
  EXPECT_EQ(restart_interval_for(17 * 16, 16), 1);  // 17 MCUs: prime
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
  EXPECT_NE(s.message().find("not a JPEG, PNG, .npy, WebP, TIFF, BMP or GIF image"), std::string::npos) << s.message();

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

namespace stoker::detail {
namespace {

// One table of formats: names, suffixes and capabilities come from it.
TEST(FormatTableTest, SuffixesNameFormatsCaseInsensitively) {
  ASSERT_NE(format_of_name("a/b/photo.JPG"), nullptr);
  EXPECT_EQ(format_of_name("photo.JPG")->format, Format::kJpeg);
  EXPECT_EQ(format_of_name("x.jpeg")->format, Format::kJpeg);
  EXPECT_EQ(format_of_name("x.Png")->format, Format::kPng);
  EXPECT_EQ(format_of_name("x.npy")->format, Format::kNpy);
  EXPECT_EQ(format_of_name("x.webp")->format, Format::kWebp);
  EXPECT_EQ(format_of_name("x.TIF")->format, Format::kTiff);
  EXPECT_EQ(format_of_name("x.tiff")->format, Format::kTiff);
  EXPECT_EQ(format_of_name("x.bmp")->format, Format::kBmp);
  EXPECT_EQ(format_of_name("x.gif")->format, Format::kGif);
  EXPECT_EQ(format_of_name("x.ppm")->format, Format::kOther);
  EXPECT_EQ(format_of_name("x.txt"), nullptr);
  EXPECT_EQ(format_of_name("jpg"), nullptr);      // a suffix needs its dot
  EXPECT_EQ(format_of_name("x.ajpg"), nullptr);
  // Folders list torchvision's IMG_EXTENSIONS (decodable or not), not .npy.
  for (const char* f : {"a.jpg", "a.jpeg", "a.png", "a.ppm", "a.bmp", "a.pgm", "a.tif", "a.tiff", "a.webp"}) {
    EXPECT_TRUE(is_folder_image(f)) << f;
  }
  EXPECT_FALSE(is_folder_image("a.npy"));
  // NOTE: torchvision's IMG_EXTENSIONS has no .gif: folders do not list it (record i stays ImageFolder's sample i).
  EXPECT_FALSE(is_folder_image("a.gif"));
  for (const char* s : {"jpg", "jpeg", "png", "npy", "webp", "tif", "tiff", "bmp", "gif"}) {
    EXPECT_TRUE(is_sample_suffix(s)) << s;
  }
  EXPECT_FALSE(is_sample_suffix("cls") || is_sample_suffix("ppm") || is_sample_suffix("TIF"));
  EXPECT_STREQ(sample_suffixes_text(), ".jpg, .jpeg, .png, .npy, .webp, .tif, .tiff, .bmp or .gif");
  EXPECT_STREQ(decoded_formats_text(), "JPEG, PNG, .npy, WebP, TIFF, BMP or GIF");
  EXPECT_TRUE(format_info(Format::kJpeg).region && format_info(Format::kJpeg).dct_scale);
  EXPECT_FALSE(format_info(Format::kPng).dct_scale);
  EXPECT_TRUE(format_info(Format::kTiff).region && format_info(Format::kBmp).region);
  EXPECT_FALSE(format_info(Format::kGif).region || format_info(Format::kGif).in_folders);
  EXPECT_FALSE(format_info(Format::kOther).decoded);
  // Each format once: no suffix names two.
  std::vector<std::string_view> all;
  for (const auto& f : formats()) all.insert(all.end(), f.suffixes.begin(), f.suffixes.end());
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end());
}

TEST(FormatTableTest, SniffsEachFormatByItsMagicBytes) {
  struct Case {
    std::string bytes;
    Format format;
  } cases[] = {
      {std::string("RIFF\x10\0\0\0WEBPVP8L", 16), Format::kWebp}, {std::string("RIFF\x10\0\0\0WAVE", 12), Format::kUnknown},
      {std::string("II*\0", 4), Format::kTiff},  {std::string("MM\0*", 4), Format::kTiff},
      {std::string("II+\0", 4), Format::kTiff},  {std::string("MM\0+", 4), Format::kTiff},
      {std::string("II*", 3), Format::kUnknown}, {"BM", Format::kBmp},
      {"GIF87a", Format::kGif},                  {"GIF89a", Format::kGif},
      {"GIF90a", Format::kUnknown},               {"P6\n1 1\n255\n", Format::kUnknown},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(sniff_format(reinterpret_cast<const std::uint8_t*>(c.bytes.data()), c.bytes.size()), c.format)
        << c.bytes;
  }
}

// Bytes of no known format are `unsupported` at open(), and decode() after a
// failed open never tries another format's decoder.
TEST(FormatTableTest, UnknownBytesAreUnsupportedNeverDecodedAsPng) {
  ImageDecoder d;
  const std::uint8_t ppm[] = {'P', '6', '\n', '1', ' ', '1', 0, 0};
  Status st = d.open(ppm, sizeof(ppm), 1 << 20);
  EXPECT_EQ(st.code(), Code::kUnsupported);
  EXPECT_NE(st.message().find("first bytes: 50 36 0a 31"), std::string::npos) << st.message();
  ImageBuffer buf;
  ImageView view;
  st = d.decode({0, 0, 1, 1}, &buf, &view);
  EXPECT_EQ(st.code(), Code::kUnsupported);
  EXPECT_EQ(st.message().find("PNG"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace stoker::detail
