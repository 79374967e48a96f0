// The decoders of WebP, TIFF, BMP and GIF (and PNG's palette conversions),
// through ImageDecoder: files written by the formats' own libraries (libtiff,
// libwebp, giflib, libpng) or by hand (BMP), decoded to the pixels written;
// regions equal the whole decode's crop; bad files refused with the reason.
// Pixel parity with PIL on PIL-written files: tests/python/test_formats.py.
#include <gif_lib.h>
#include <gtest/gtest.h>
#include <png.h>
#include <tiffio.h>
#include <webp/encode.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "decode/decode.h"
#include "test_util.h"

namespace stoker::detail {
namespace {

using Bytes = std::vector<std::uint8_t>;
using stoker::testing::test_pixels;

struct Rgb {
  int width = 0, height = 0;
  Bytes rgb;
  const std::uint8_t* at(int x, int y) const { return rgb.data() + (static_cast<std::size_t>(y) * width + x) * 3; }
};

Status decode(const Bytes& bytes, const Box* region, Rgb* out, std::uint64_t max_pixels = 1u << 30) {
  ImageDecoder dec;
  Status st = dec.open(bytes.data(), bytes.size(), max_pixels);
  if (!st.ok()) return st;
  const Box r = region ? *region : Box{0, 0, dec.width(), dec.height()};
  ImageBuffer buf;
  ImageView v;
  st = dec.decode(r, &buf, &v);
  if (!st.ok()) return st;
  out->width = v.width, out->height = v.height;
  out->rgb.clear();
  for (int y = 0; y < v.height; ++y) out->rgb.insert(out->rgb.end(), v.row(y), v.row(y) + v.width * 3);
  return Status::Ok();
}

Rgb decode_ok(const Bytes& bytes) {
  Rgb img;
  const Status st = decode(bytes, nullptr, &img);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return img;
}

// Regions on a grid, edges and 1x1 ones included, each equal to the whole
// decode's crop.
void expect_regions_match(const Bytes& bytes, const Rgb& whole, const std::string& what) {
  const int w = whole.width, h = whole.height;
  std::vector<Box> boxes = {{0, 0, 1, 1}, {w - 1, h - 1, 1, 1}, {0, 0, w, h}, {w / 2, 0, w - w / 2, 1}};
  for (int x = 0; x < w; x += std::max(1, w / 5)) {
    for (int y = 0; y < h; y += std::max(1, h / 4)) {
      boxes.push_back({x, y, std::min(w - x, 1 + (x * 7 + y) % 23), std::min(h - y, 1 + (y * 5 + x) % 19)});
    }
  }
  for (const Box& r : boxes) {
    Rgb part;
    const Status st = decode(bytes, &r, &part);
    ASSERT_TRUE(st.ok()) << what << ": " << st.to_string();
    ASSERT_EQ(part.width, r.width);
    ASSERT_EQ(part.height, r.height);
    for (int y = 0; y < r.height; ++y) {
      ASSERT_EQ(std::memcmp(part.at(0, y), whole.at(r.x, r.y + y), static_cast<std::size_t>(r.width) * 3), 0)
          << what << ": region " << r.x << "," << r.y << " " << r.width << "x" << r.height << " row " << y;
    }
  }
}

Bytes slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), {});
}

// --- TIFF --------------------------------------------------------------------------------------------------

struct TiffLayout {
  bool tiled;
  int compression;  // COMPRESSION_*
  bool planar;
};

// RGB8 pixels written by libtiff in `layout` (JPEG: YCbCr 2x2, written as RGB
// by libjpeg inside libtiff).
Bytes write_tiff(const Bytes& rgb, int w, int h, const TiffLayout& layout, const std::string& path) {
  TIFF* t = TIFFOpen(path.c_str(), "w");
  EXPECT_NE(t, nullptr);
  TIFFSetField(t, TIFFTAG_IMAGEWIDTH, w);
  TIFFSetField(t, TIFFTAG_IMAGELENGTH, h);
  TIFFSetField(t, TIFFTAG_BITSPERSAMPLE, 8);
  TIFFSetField(t, TIFFTAG_SAMPLESPERPIXEL, 3);
  TIFFSetField(t, TIFFTAG_COMPRESSION, layout.compression);
  TIFFSetField(t, TIFFTAG_PLANARCONFIG, layout.planar ? PLANARCONFIG_SEPARATE : PLANARCONFIG_CONTIG);
  const bool jpeg = layout.compression == COMPRESSION_JPEG;
  TIFFSetField(t, TIFFTAG_PHOTOMETRIC, jpeg ? PHOTOMETRIC_YCBCR : PHOTOMETRIC_RGB);
  if (jpeg) {
    TIFFSetField(t, TIFFTAG_YCBCRSUBSAMPLING, 2, 2);
    TIFFSetField(t, TIFFTAG_JPEGQUALITY, 90);
    TIFFSetField(t, TIFFTAG_JPEGCOLORMODE, JPEGCOLORMODE_RGB);
  }
  if (layout.compression == COMPRESSION_LZW || layout.compression == COMPRESSION_ADOBE_DEFLATE) {
    TIFFSetField(t, TIFFTAG_PREDICTOR, PREDICTOR_HORIZONTAL);
  }
  const int planes = layout.planar ? 3 : 1, spp = layout.planar ? 1 : 3;
  if (layout.tiled) {
    const int tw = 16, th = 32;
    TIFFSetField(t, TIFFTAG_TILEWIDTH, tw);
    TIFFSetField(t, TIFFTAG_TILELENGTH, th);
    Bytes tile(static_cast<std::size_t>(tw) * th * spp);
    for (int p = 0; p < planes; ++p) {
      for (int y = 0; y < h; y += th) {
        for (int x = 0; x < w; x += tw) {
          std::fill(tile.begin(), tile.end(), 0);
          for (int ty = 0; ty < th && y + ty < h; ++ty) {
            for (int tx = 0; tx < tw && x + tx < w; ++tx) {
              for (int s = 0; s < spp; ++s) {
                tile[(static_cast<std::size_t>(ty) * tw + tx) * spp + s] =
                    rgb[(static_cast<std::size_t>(y + ty) * w + x + tx) * 3 + (layout.planar ? p : s)];
              }
            }
          }
          TIFFWriteTile(t, tile.data(), x, y, 0, static_cast<std::uint16_t>(p));
        }
      }
    }
  } else {
    TIFFSetField(t, TIFFTAG_ROWSPERSTRIP, 16);
    Bytes row(static_cast<std::size_t>(w) * spp);
    for (int p = 0; p < planes; ++p) {
      for (int y = 0; y < h; ++y) {
        for (int x = 0; x < w; ++x) {
          for (int s = 0; s < spp; ++s) {
            row[static_cast<std::size_t>(x) * spp + s] =
                rgb[(static_cast<std::size_t>(y) * w + x) * 3 + (layout.planar ? p : s)];
          }
        }
        TIFFWriteScanline(t, row.data(), static_cast<std::uint32_t>(y), static_cast<std::uint16_t>(p));
      }
    }
  }
  TIFFClose(t);
  return slurp(path);
}

class TiffLayoutTest : public ::testing::TestWithParam<std::tuple<bool, int, bool>> {};

TEST_P(TiffLayoutTest, DecodesThePixelsWrittenAndRegionsEqualCrops) {
  const auto [tiled, compression, planar] = GetParam();
  const int w = 75, h = 53;
  const Bytes px = test_pixels(w, h, 5);
  stoker::testing::TempDir d;
  const Bytes file = write_tiff(px, w, h, {tiled, compression, planar}, d.file("a.tif"));
  const Rgb whole = decode_ok(file);
  ASSERT_EQ(whole.width, w);
  ASSERT_EQ(whole.height, h);
  if (compression == COMPRESSION_JPEG) {
    double err = 0;
    for (std::size_t i = 0; i < px.size(); ++i) err += std::abs(int(px[i]) - int(whole.rgb[i]));
    EXPECT_LT(err / static_cast<double>(px.size()), 8.0);
  } else {
    EXPECT_EQ(whole.rgb, px);
  }
  expect_regions_match(file, whole, "tiled=" + std::to_string(tiled) + " compression=" + std::to_string(compression));
}

INSTANTIATE_TEST_SUITE_P(Layouts, TiffLayoutTest,
                         ::testing::Combine(/*tiled=*/::testing::Bool(),
                                            ::testing::Values(COMPRESSION_NONE, COMPRESSION_LZW,
                                                              COMPRESSION_ADOBE_DEFLATE, COMPRESSION_PACKBITS),
                                            /*planar=*/::testing::Bool()));
// JPEG-compressed YCbCr is contiguous only.
INSTANTIATE_TEST_SUITE_P(Jpeg, TiffLayoutTest,
                         ::testing::Combine(/*tiled=*/::testing::Bool(), ::testing::Values(COMPRESSION_JPEG),
                                            /*planar=*/::testing::Values(false)));

// --- TIFF kept as stored (ImageDecoder::open_raster / decode_raster) --------------------------------------------

// `spp` samples per pixel of `bits` (8, 16: unsigned; 32: float), written by
// libtiff (Deflate with the predictor for integers), contiguous or planar,
// strips or tiles: sample k of pixel (x, y) is value(x, y, k).
double stored_value(int x, int y, int k, int bits) {
  const int v = (x * 37 + y * 101 + k * 997) % (bits == 8 ? 256 : 65536);
  return bits == 32 ? v * 0.25 - 1000.5 : v;
}
Bytes write_stored_tiff(int w, int h, int spp, int bits, bool tiled, bool planar, const std::string& path) {
  TIFF* t = TIFFOpen(path.c_str(), "w");
  EXPECT_NE(t, nullptr);
  TIFFSetField(t, TIFFTAG_IMAGEWIDTH, w);
  TIFFSetField(t, TIFFTAG_IMAGELENGTH, h);
  TIFFSetField(t, TIFFTAG_BITSPERSAMPLE, bits);
  TIFFSetField(t, TIFFTAG_SAMPLESPERPIXEL, spp);
  TIFFSetField(t, TIFFTAG_SAMPLEFORMAT, bits == 32 ? SAMPLEFORMAT_IEEEFP : SAMPLEFORMAT_UINT);
  TIFFSetField(t, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_MINISBLACK);
  TIFFSetField(t, TIFFTAG_PLANARCONFIG, planar ? PLANARCONFIG_SEPARATE : PLANARCONFIG_CONTIG);
  TIFFSetField(t, TIFFTAG_COMPRESSION, COMPRESSION_ADOBE_DEFLATE);
  if (bits != 32) TIFFSetField(t, TIFFTAG_PREDICTOR, PREDICTOR_HORIZONTAL);
  const int bytes = bits / 8, planes = planar ? spp : 1, per = planar ? 1 : spp;
  auto put = [&](std::uint8_t* out, int x, int y, int k) {
    const double v = stored_value(x, y, k, bits);
    if (bits == 8) *out = static_cast<std::uint8_t>(v);
    if (bits == 16) {
      const auto u = static_cast<std::uint16_t>(v);
      std::memcpy(out, &u, 2);
    }
    if (bits == 32) {
      const auto f = static_cast<float>(v);
      std::memcpy(out, &f, 4);
    }
  };
  const int uw = tiled ? 16 : w, uh = tiled ? 16 : 1;
  if (tiled) {
    TIFFSetField(t, TIFFTAG_TILEWIDTH, uw);
    TIFFSetField(t, TIFFTAG_TILELENGTH, uh);
  } else {
    TIFFSetField(t, TIFFTAG_ROWSPERSTRIP, 7);
  }
  Bytes unit(static_cast<std::size_t>(uw) * uh * per * bytes);
  for (int p = 0; p < planes; ++p) {
    for (int y = 0; y < h; y += uh) {
      for (int x = 0; x < w; x += uw) {
        std::fill(unit.begin(), unit.end(), 0);
        for (int ty = 0; ty < uh && y + ty < h; ++ty) {
          for (int tx = 0; tx < uw && x + tx < w; ++tx) {
            for (int k = 0; k < per; ++k) {
              put(unit.data() + ((static_cast<std::size_t>(ty) * uw + tx) * per + k) * bytes, x + tx, y + ty,
                  planar ? p : k);
            }
          }
        }
        if (tiled) {
          TIFFWriteTile(t, unit.data(), static_cast<std::uint32_t>(x), static_cast<std::uint32_t>(y), 0,
                        static_cast<std::uint16_t>(p));
        } else {
          TIFFWriteScanline(t, unit.data(), static_cast<std::uint32_t>(y), static_cast<std::uint16_t>(p));
        }
      }
    }
  }
  TIFFClose(t);
  return slurp(path);
}

double raster_at(const RasterBuffer& r, int k, int x, int y) {
  const std::uint8_t* p = r.plane(k) + (static_cast<std::size_t>(y) * r.width + x) * sample_bytes(r.type);
  if (r.type == SampleType::kUint8) return *p;
  if (r.type == SampleType::kUint16) {
    std::uint16_t u;
    std::memcpy(&u, p, 2);
    return u;
  }
  float f;
  std::memcpy(&f, p, 4);
  return f;
}

class StoredTiffTest : public ::testing::TestWithParam<std::tuple<int, bool, bool>> {};

TEST_P(StoredTiffTest, SamplesAsWrittenAndRegionsReadAsStored) {
  const auto [bits, tiled, planar] = GetParam();
  const int w = 45, h = 37, spp = 13;
  stoker::testing::TempDir d;
  const Bytes file = write_stored_tiff(w, h, spp, bits, tiled, planar, d.file("s.tif"));
  ImageDecoder dec;
  ASSERT_TRUE(dec.open_raster(file.data(), file.size(), 1u << 30).ok());
  ASSERT_EQ(dec.width(), w);
  ASSERT_EQ(dec.height(), h);
  ASSERT_EQ(dec.channels(), spp);
  EXPECT_EQ(dec.sample_type(), bits == 8 ? SampleType::kUint8 : bits == 16 ? SampleType::kUint16 : SampleType::kFloat32);
  for (const Box& r : {Box{0, 0, w, h}, Box{17, 5, 20, 30}, Box{44, 36, 1, 1}, Box{3, 16, 13, 1}}) {
    RasterBuffer buf;
    ASSERT_TRUE(dec.decode_raster(r, &buf).ok());
    ASSERT_EQ(buf.width, r.width);
    ASSERT_EQ(buf.height, r.height);
    for (int k = 0; k < spp; ++k) {
      for (int y = 0; y < r.height; ++y) {
        for (int x = 0; x < r.width; ++x) {
          ASSERT_EQ(raster_at(buf, k, x, y), stored_value(r.x + x, r.y + y, k, bits)) << k << " " << x << "," << y;
        }
      }
    }
  }
  // The same file through the RGB decoder: 13 gray samples are not a colour image.
  EXPECT_EQ(dec.open(file.data(), file.size(), 1u << 30).code(), Code::kUnsupported);
}

INSTANTIATE_TEST_SUITE_P(Layouts, StoredTiffTest,
                         ::testing::Combine(/*bits=*/::testing::Values(8, 16, 32), /*tiled=*/::testing::Bool(),
                                            /*planar=*/::testing::Bool()));

// A minimal little-endian TIFF: one strip (or tile) of `strip` bytes, the
// given tags (type LONG, one value each).
Bytes tiff_by_hand(const std::vector<std::pair<int, std::uint32_t>>& tags, const Bytes& strip, bool tiled = false) {
  Bytes out = {'I', 'I', 42, 0, 0, 0, 0, 0};
  const std::uint32_t strip_at = 8;
  out.insert(out.end(), strip.begin(), strip.end());
  if (out.size() % 2) out.push_back(0);
  auto put16 = [&](std::uint32_t v) { out.push_back(v & 255), out.push_back((v >> 8) & 255); };
  auto put32 = [&](std::uint32_t v) { put16(v & 0xFFFF), put16(v >> 16); };
  const std::uint32_t ifd = static_cast<std::uint32_t>(out.size());
  std::memcpy(out.data() + 4, &ifd, 4);
  std::vector<std::pair<int, std::uint32_t>> all = tags;
  all.push_back({tiled ? 324 : 273, strip_at});
  all.push_back({tiled ? 325 : 279, static_cast<std::uint32_t>(strip.size())});
  std::sort(all.begin(), all.end());
  put16(static_cast<std::uint32_t>(all.size()));
  for (const auto& [tag, value] : all) {
    put16(static_cast<std::uint32_t>(tag));
    put16(4);  // LONG
    put32(1);
    put32(value);
  }
  put32(0);
  return out;
}

TEST(StoredTiffChecksTest, PixelCapComesBeforeMemoryAndOtherSampleFormatsNameTheReason) {
  stoker::testing::TempDir d;
  const Bytes file = write_stored_tiff(45, 37, 3, 16, false, false, d.file("s.tif"));
  ImageDecoder dec;
  Status st = dec.open_raster(file.data(), file.size(), 45 * 37 - 1);
  EXPECT_EQ(st.code(), Code::kResourceExhausted) << st.message();
  const Bytes signed16 = tiff_by_hand({{256, 4}, {257, 2}, {258, 16}, {262, 1}, {277, 1}, {339, SAMPLEFORMAT_INT}},
                                      Bytes(16, 0));
  st = dec.open_raster(signed16.data(), signed16.size(), 1u << 30);
  EXPECT_EQ(st.code(), Code::kUnsupported);
  EXPECT_NE(st.message().find("sample format 2 cannot be kept as stored"), std::string::npos) << st.message();
}

TEST(TiffTest, SizeIsCappedBeforeAnyPixelMemory) {
  // 65536 x 32768 = 2^31 pixels claimed, one 12-byte strip.
  const Bytes file = tiff_by_hand({{256, 65536}, {257, 32768}, {258, 8}, {262, 2}, {277, 3}, {278, 32768}}, Bytes(12));
  Rgb img;
  const Status st = decode(file, nullptr, &img, /*max_pixels=*/178956970);
  EXPECT_EQ(st.code(), Code::kResourceExhausted) << st.to_string();
  EXPECT_NE(st.message().find("65536x32768"), std::string::npos) << st.message();
  // A 2x2 image in one tile of 60000x60000 (fuzz/tiff_fuzz.cc found it: the tile's buffer was 10 GB).
  const Bytes huge_tile =
      tiff_by_hand({{256, 2}, {257, 2}, {258, 8}, {262, 2}, {277, 3}, {322, 60000}, {323, 60000}}, Bytes(12), true);
  const Status tile = decode(huge_tile, nullptr, &img, /*max_pixels=*/178956970);
  EXPECT_EQ(tile.code(), Code::kResourceExhausted) << tile.to_string();
  EXPECT_NE(tile.message().find("tiles of 60000x60000"), std::string::npos) << tile.message();
}

TEST(TiffTest, UnsupportedVariantsNameTheReason) {
  struct Case {
    std::vector<std::pair<int, std::uint32_t>> tags;
    Code code;
    const char* reason;
  } cases[] = {
      {{{256, 2}, {257, 2}, {258, 8}, {259, 34712}, {262, 2}, {277, 3}}, Code::kUnsupported, "compression 34712"},
      {{{256, 2}, {257, 2}, {258, 64}, {262, 1}, {277, 1}, {339, 3}}, Code::kUnsupported, "sample format 3"},
      {{{256, 2}, {257, 2}, {258, 8}, {262, 8}, {277, 3}}, Code::kUnsupported, "photometric interpretation 8"},
      {{{256, 2}, {257, 2}, {258, 8}, {262, 6}, {277, 3}}, Code::kUnsupported, "YCbCr"},
      {{{256, 2}, {257, 2}, {258, 12}, {262, 2}, {277, 3}}, Code::kUnsupported, "RGB with 3 sample(s) of 12 bits"},
      // 4 bytes of LZW codes for 12 bytes of pixels
      {{{256, 2}, {257, 2}, {258, 8}, {259, 5}, {262, 2}, {277, 3}, {278, 2}}, Code::kCorrupt, "TIFF: "},
  };
  for (const auto& c : cases) {
    ::testing::internal::CaptureStderr();
    Rgb img;
    const Status st = decode(tiff_by_hand(c.tags, Bytes(4)), nullptr, &img);
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(st.code(), c.code) << st.to_string();
    EXPECT_NE(st.message().find(c.reason), std::string::npos) << st.message();
    EXPECT_EQ(err, "") << "libtiff printed: " << err;
  }
}

TEST(TiffTest, CorruptAndTruncatedFilesAreCorruptAndNothingIsPrinted) {
  const int w = 64, h = 48;
  stoker::testing::TempDir d;
  const Bytes good = write_tiff(test_pixels(w, h, 2), w, h, {false, COMPRESSION_LZW, false}, d.file("a.tif"));
  ::testing::internal::CaptureStderr();
  int corrupt = 0;
  for (std::size_t cut : {good.size() / 4, good.size() / 2, good.size() - 10, std::size_t{8}, std::size_t{12}}) {
    Rgb img;
    const Status st = decode(Bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(cut)), nullptr, &img);
    EXPECT_FALSE(st.ok()) << "cut at " << cut;
    corrupt += st.code() == Code::kCorrupt;
    EXPECT_NE(st.message().find("TIFF"), std::string::npos) << st.message();
  }
  Bytes garbled = good;
  for (std::size_t i = 8; i < 100; ++i) garbled[i] = 0xFF;  // the first strip's LZW codes: 511 before the table has it
  Rgb img;
  const Status st = decode(garbled, nullptr, &img);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err, "") << "libtiff printed: " << err;
  EXPECT_EQ(corrupt, 5);
  EXPECT_EQ(st.code(), Code::kCorrupt) << st.to_string();
}

// libtiff's messages go to the handle that caused them: decoders on other
// threads keep theirs apart.
TEST(TiffTest, ThreadsKeepTheirOwnMessages) {
  const Bytes unsupported = tiff_by_hand({{256, 2}, {257, 2}, {258, 8}, {259, 34712}, {262, 2}, {277, 3}}, Bytes(4));
  const Bytes short_strip = tiff_by_hand({{256, 8}, {257, 8}, {258, 8}, {262, 2}, {277, 3}, {278, 8}}, Bytes(6));
  std::vector<std::thread> threads;
  std::vector<int> wrong(8, 0);
  for (int k = 0; k < 8; ++k) {
    threads.emplace_back([&, k] {
      for (int i = 0; i < 200; ++i) {
        Rgb img;
        const Status st = decode(k % 2 ? unsupported : short_strip, nullptr, &img);
        const bool right = k % 2 ? st.message().find("compression 34712") != std::string::npos
                                 : st.code() == Code::kCorrupt && st.message().find("34712") == std::string::npos;
        wrong[static_cast<std::size_t>(k)] += !right;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong, std::vector<int>(8, 0));
}

// --- WebP --------------------------------------------------------------------------------------------------

Bytes webp(const Bytes& rgb, int w, int h, bool lossless) {
  std::uint8_t* out = nullptr;
  const std::size_t n = lossless ? WebPEncodeLosslessRGB(rgb.data(), w, h, w * 3, &out)
                                 : WebPEncodeRGB(rgb.data(), w, h, w * 3, 80, &out);
  Bytes b(out, out + n);
  WebPFree(out);
  return b;
}

TEST(WebpTest, LosslessIsExactAndRegionsEqualCrops) {
  const int w = 77, h = 61;
  const Bytes px = test_pixels(w, h, 3);
  for (bool lossless : {true, false}) {
    const Bytes file = webp(px, w, h, lossless);
    const Rgb whole = decode_ok(file);
    ASSERT_EQ(whole.width, w);
    if (lossless) {
      EXPECT_EQ(whole.rgb, px);
    }
    expect_regions_match(file, whole, lossless ? "lossless" : "lossy");
  }
}

TEST(WebpTest, TruncatedAndOversizedFilesAreRefused) {
  const Bytes file = webp(test_pixels(40, 30, 1), 40, 30, false);
  for (std::size_t cut : {std::size_t{12}, std::size_t{20}, file.size() / 2, file.size() - 1}) {
    Rgb img;
    const Status st = decode(Bytes(file.begin(), file.begin() + static_cast<std::ptrdiff_t>(cut)), nullptr, &img);
    EXPECT_EQ(st.code(), Code::kCorrupt) << "cut at " << cut << ": " << st.to_string();
    EXPECT_NE(st.message().find("WebP"), std::string::npos) << st.message();
  }
  Rgb img;
  EXPECT_EQ(decode(file, nullptr, &img, /*max_pixels=*/40 * 30 - 1).code(), Code::kResourceExhausted);
}

// --- GIF ---------------------------------------------------------------------------------------------------

struct GifFrame {
  int x, y, w, h;
  std::vector<int> indices;
  bool interlaced;
  int transparent;  // -1: none
};

Bytes gif(int sw, int sh, const std::vector<GifColorType>& palette, const std::vector<GifFrame>& frames) {
  Bytes out;
  int error = 0;
  GifFileType* g = EGifOpen(&out, [](GifFileType* f, const GifByteType* data, int n) {
    auto* o = static_cast<Bytes*>(f->UserData);
    o->insert(o->end(), data, data + n);
    return n;
  }, &error);
  ColorMapObject* map = GifMakeMapObject(static_cast<int>(palette.size()), palette.data());
  EGifSetGifVersion(g, true);
  EGifPutScreenDesc(g, sw, sh, 8, 0, map);
  for (const auto& f : frames) {
    if (f.transparent >= 0) {
      const GifByteType gce[4] = {1, 0, 0, static_cast<GifByteType>(f.transparent)};
      EGifPutExtension(g, GRAPHICS_EXT_FUNC_CODE, 4, gce);
    }
    EGifPutImageDesc(g, f.x, f.y, f.w, f.h, f.interlaced, nullptr);
    std::vector<GifPixelType> rows(f.indices.begin(), f.indices.end());
    std::vector<int> order;
    if (f.interlaced) {
      for (auto [start, step] : {std::pair{0, 8}, {4, 8}, {2, 4}, {1, 2}}) {
        for (int y = start; y < f.h; y += step) order.push_back(y);
      }
    } else {
      for (int y = 0; y < f.h; ++y) order.push_back(y);
    }
    for (int y : order) EGifPutLine(g, rows.data() + static_cast<std::size_t>(y) * f.w, f.w);
  }
  EGifCloseFile(g, &error);
  GifFreeMapObject(map);
  return out;
}

TEST(GifTest, FirstFrameOnItsCanvasThroughThePalette) {
  std::vector<GifColorType> pal;
  for (int i = 0; i < 256; ++i) {
    pal.push_back(
        {static_cast<GifByteType>(i * 7), static_cast<GifByteType>(255 - i), static_cast<GifByteType>(i * 3)});
  }
  const int w = 23, h = 19;
  std::vector<int> idx(static_cast<std::size_t>(w) * h);
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int>((i * 37) % 256);
  for (bool interlaced : {false, true}) {
    for (int transparent : {-1, 9}) {
      // The frame at (4, 3) on a 30x25 canvas; a second frame never read.
      const Bytes file =
          gif(30, 25, pal, {{4, 3, w, h, idx, interlaced, transparent}, {0, 0, 2, 2, {1, 2, 3, 4}, false, -1}});
      const Rgb img = decode_ok(file);
      ASSERT_EQ(img.width, 30);
      ASSERT_EQ(img.height, 25);
      for (int y = 0; y < 25; ++y) {
        for (int x = 0; x < 30; ++x) {
          const bool inside = x >= 4 && x < 4 + w && y >= 3 && y < 3 + h;
          const int i = inside ? idx[static_cast<std::size_t>(y - 3) * w + (x - 4)] : std::max(transparent, 0);
          const std::uint8_t want[3] = {pal[i].Red, pal[i].Green, pal[i].Blue};
          ASSERT_EQ(std::memcmp(img.at(x, y), want, 3), 0) << x << "," << y << " interlaced=" << interlaced;
        }
      }
      expect_regions_match(file, img, "gif");
    }
  }
}

TEST(GifTest, TruncatedFilesAreCorrupt) {
  std::vector<GifColorType> pal(4, GifColorType{1, 2, 3});
  std::vector<int> idx(40 * 30);
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int>(i % 4);
  const Bytes file = gif(40, 30, pal, {{0, 0, 40, 30, idx, false, -1}});
  for (std::size_t cut : {std::size_t{6}, std::size_t{13}, std::size_t{30}, file.size() / 2}) {
    Rgb img;
    const Status st = decode(Bytes(file.begin(), file.begin() + static_cast<std::ptrdiff_t>(cut)), nullptr, &img);
    EXPECT_EQ(st.code(), Code::kCorrupt) << "cut at " << cut << ": " << st.to_string();
    EXPECT_NE(st.message().find("GIF"), std::string::npos) << st.message();
  }
  Rgb img;
  EXPECT_EQ(decode(file, nullptr, &img, /*max_pixels=*/40 * 30 - 1).code(), Code::kResourceExhausted);
}

// --- BMP ---------------------------------------------------------------------------------------------------

void le(Bytes* b, std::uint32_t v, int n) {
  for (int i = 0; i < n; ++i) b->push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

// A BMP with a 40-byte (or `header`-byte) info header; `rows` as stored.
Bytes bmp(int w, int h, int bits, const std::vector<Bytes>& rows, std::uint32_t compression = 0,
          const Bytes& palette = {}, std::uint32_t header = 40, const Bytes& masks = {}) {
  Bytes info;
  le(&info, static_cast<std::uint32_t>(w), 4);
  le(&info, static_cast<std::uint32_t>(h), 4);
  le(&info, 1, 2);
  le(&info, static_cast<std::uint32_t>(bits), 2);
  le(&info, compression, 4);
  le(&info, 0, 4), le(&info, 0, 4), le(&info, 0, 4);
  le(&info, static_cast<std::uint32_t>(palette.size() / 4), 4);
  le(&info, 0, 4);
  Bytes after;
  if (header == 40) {
    after = masks;
  } else {
    info.insert(info.end(), masks.begin(), masks.end());
    info.resize(header - 4, 0);
  }
  const std::size_t stride = ((static_cast<std::size_t>(w) * bits + 31) >> 3) & ~std::size_t{3};
  Bytes pixels;
  for (const Bytes& r : rows) {
    Bytes row = r;
    row.resize(stride, 0);
    pixels.insert(pixels.end(), row.begin(), row.end());
  }
  const std::uint32_t start = static_cast<std::uint32_t>(14 + header + after.size() + palette.size());
  Bytes out = {'B', 'M'};
  le(&out, start + static_cast<std::uint32_t>(pixels.size()), 4);
  le(&out, 0, 4);
  le(&out, start, 4);
  le(&out, header, 4);
  for (const Bytes* part : std::initializer_list<const Bytes*>{&info, &after, &palette, &pixels}) {
    out.insert(out.end(), part->begin(), part->end());
  }
  return out;
}

TEST(BmpTest, VariantsDecodeToTheirPixels) {
  // 3x2, bottom-up: the stored first row is the image's last.
  const std::uint8_t want[2][3][3] = {{{255, 0, 0}, {0, 255, 0}, {0, 0, 255}},
                                      {{10, 20, 30}, {40, 50, 60}, {255, 255, 255}}};
  auto expect_pixels = [&](const Bytes& file, const std::string& what) {
    const Rgb img = decode_ok(file);
    ASSERT_EQ(img.width, 3) << what;
    ASSERT_EQ(img.height, 2) << what;
    for (int y = 0; y < 2; ++y) {
      for (int x = 0; x < 3; ++x) {
        EXPECT_EQ(std::memcmp(img.at(x, y), want[y][x], 3), 0) << what << " " << x << "," << y;
      }
    }
    expect_regions_match(file, img, what);
  };
  auto row24 = [&](int y) {
    Bytes r;
    for (int x = 0; x < 3; ++x) r.insert(r.end(), {want[y][x][2], want[y][x][1], want[y][x][0]});
    return r;
  };
  expect_pixels(bmp(3, 2, 24, {row24(1), row24(0)}), "24-bit");
  auto row32 = [&](int y, int r, int g, int b) {
    Bytes out;
    for (int x = 0; x < 3; ++x) {
      std::uint8_t p[4] = {0x77, 0x77, 0x77, 0x77};
      p[r] = want[y][x][0], p[g] = want[y][x][1], p[b] = want[y][x][2];
      out.insert(out.end(), p, p + 4);
    }
    return out;
  };
  expect_pixels(bmp(3, 2, 32, {row32(1, 2, 1, 0), row32(0, 2, 1, 0)}), "32-bit BGRX");
  Bytes rgba_masks;
  for (std::uint32_t m : {0xFFu, 0xFF00u, 0xFF0000u, 0xFF000000u}) le(&rgba_masks, m, 4);
  expect_pixels(bmp(3, 2, 32, {row32(1, 0, 1, 2), row32(0, 0, 1, 2)}, 3, {}, 124, rgba_masks), "32-bit RGBA V5");
  Bytes xbgr_masks;
  for (std::uint32_t m : {0xFF000000u, 0xFF0000u, 0xFF00u}) le(&xbgr_masks, m, 4);
  expect_pixels(bmp(3, 2, 32, {row32(1, 3, 2, 1), row32(0, 3, 2, 1)}, 3, {}, 40, xbgr_masks), "32-bit XBGR");
  // 8-bit palette of the six colours.
  Bytes pal;
  for (int y = 0; y < 2; ++y) {
    for (int x = 0; x < 3; ++x) pal.insert(pal.end(), {want[y][x][2], want[y][x][1], want[y][x][0], 0});
  }
  expect_pixels(bmp(3, 2, 8, {{3, 4, 5}, {0, 1, 2}}, 0, pal), "8-bit palette");
  expect_pixels(bmp(3, 2, 4, {{0x34, 0x50}, {0x01, 0x20}}, 0, pal), "4-bit palette");
}

TEST(BmpTest, SixteenBitFieldsScaleAsPil) {
  // 5-5-5 (BI_RGB) and 5-6-5 (bit fields): v * 255 / max, truncated.
  Bytes masks;
  for (std::uint32_t m : {0xF800u, 0x7E0u, 0x1Fu}) le(&masks, m, 4);
  Bytes r555, r565;
  le(&r555, (31u << 10) | (1u << 5) | 16u, 2);
  le(&r565, (1u << 11) | (63u << 5) | 30u, 2);
  const Rgb a = decode_ok(bmp(1, 1, 16, {r555}));
  const Rgb b = decode_ok(bmp(1, 1, 16, {r565}, 3, {}, 40, masks));
  EXPECT_EQ(a.rgb, (Bytes{255, 255 / 31, 16 * 255 / 31}));
  EXPECT_EQ(b.rgb, (Bytes{255 / 31, 255, 30 * 255 / 31}));
}

// RLE8 and RLE4 expand to the indices they code (bottom-up rows; PIL's
// reading of each code is checked against Pillow in test_formats.py).
TEST(BmpTest, RunLengthEncodedPalettesExpand) {
  Bytes palette;
  for (int i = 0; i < 256; ++i) palette.insert(palette.end(), {static_cast<std::uint8_t>(i), 0, 0, 0});  // B = i
  // bmp() pads each stored row to its stride: the RLE data goes in as rows of exactly that many bytes.
  auto rows_of = [](Bytes data, std::size_t stride) {
    data.resize((data.size() + stride - 1) / stride * stride, 0);
    std::vector<Bytes> rows;
    for (std::size_t i = 0; i < data.size(); i += stride) {
      rows.emplace_back(data.begin() + i, data.begin() + i + stride);
    }
    return rows;
  };
  // 5x2: stored row 0 (the image's bottom): run of 2 of index 9, absolute [4, 5, 6] (padded to a word), end of
  // line; stored row 1: run of 5 of index 200, end of bitmap.
  const Bytes rle8 = {2, 9, 0, 3, 4, 5, 6, 0, 0, 0, 5, 200, 0, 1};
  Rgb img = decode_ok(bmp(5, 2, 8, rows_of(rle8, 8), 1, palette));
  ASSERT_EQ(img.width, 5);
  const int want8[2][5] = {{200, 200, 200, 200, 200}, {9, 9, 4, 5, 6}};
  for (int y = 0; y < 2; ++y) {
    for (int x = 0; x < 5; ++x) {
      EXPECT_EQ(img.rgb[static_cast<std::size_t>((y * 5 + x) * 3 + 2)], want8[y][x]) << x << "," << y;
    }
  }
  // RLE4: a run alternates the byte's two nibbles; absolute [1, 2, 3, 4]; end of line; run of 5 of 0xF0.
  const Bytes rle4 = {5, 0xAB, 0, 0, 0, 4, 0x12, 0x34, 0, 0, 5, 0xF0, 0, 1};
  Bytes pal16(palette.begin(), palette.begin() + 64);
  img = decode_ok(bmp(5, 2, 4, rows_of(rle4, 4), 2, pal16));
  const int want4[2][5] = {{1, 2, 3, 4, 0}, {10, 11, 10, 11, 10}};
  for (int y = 0; y < 2; ++y) {
    for (int x = 0; x < 5; ++x) {
      EXPECT_EQ(img.rgb[static_cast<std::size_t>((y * 5 + x) * 3 + 2)], want4[y][x]) << x << "," << y;
    }
  }
}

TEST(BmpTest, BadHeadersAreRefusedWithTheReason) {
  const std::vector<Bytes> rows(4, Bytes(33, 7));
  Bytes odd_masks;
  for (std::uint32_t m : {0xF00u, 0xF0u, 0xFu}) le(&odd_masks, m, 4);
  Bytes lying_width = bmp(11, 4, 24, rows);
  lying_width[18] = 0xF0, lying_width[19] = 0xFF, lying_width[20] = 0xFF, lying_width[21] = 0x7F;
  Bytes lying_offset = bmp(11, 4, 24, rows);
  lying_offset[10] = 0, lying_offset[11] = 0, lying_offset[12] = 0x10;
  const Bytes short_pixels = bmp(11, 4, 24, rows);
  Bytes top_down_huge = bmp(11, 4, 24, rows);
  top_down_huge[22] = 0, top_down_huge[23] = 0, top_down_huge[24] = 0, top_down_huge[25] = 0xFF;  // -2^24 rows
  struct Case {
    Bytes bytes;
    Code code;
    const char* reason;
  } cases[] = {
      {Bytes{'B', 'M', 1, 2, 3}, Code::kCorrupt, "BMP: truncated header"},
      {bmp(11, 4, 24, rows, 0, {}, 52), Code::kUnsupported, "info header of 52 bytes"},
      // RLE runs of 7 at the row's end are clipped and the column never returns to 0 without an end-of-line code:
      // 11 pixels, then nothing (as PIL: "not enough image data").
      {bmp(11, 4, 8, rows, 1, Bytes(1024)), Code::kCorrupt, "RLE8 data ends after 11 of the image's 44 pixels"},
      {bmp(11, 4, 4, rows, 2, Bytes(64)), Code::kCorrupt, "RLE4 data ends after 11 of the image's 44 pixels"},
      {bmp(11, 4, 24, rows, 1), Code::kUnsupported, "RLE8 compression of 24-bit pixels"},
      {bmp(11, 4, 8, rows, 1, Bytes{0, 0, 0, 0, 255, 255, 255, 0}), Code::kUnsupported, "black-and-white palette"},
      {bmp(11, 4, 24, rows, 4), Code::kUnsupported, "compression 4 (JPEG)"},
      {bmp(11, 4, 2, rows, 0, Bytes(16)), Code::kUnsupported, "2 bits per pixel"},
      {bmp(11, 4, 16, rows, 3, {}, 40, odd_masks), Code::kUnsupported, "bit fields r=0xf00"},
      {bmp(0, 4, 24, rows), Code::kCorrupt, "invalid size 0x4"},
      {lying_width, Code::kResourceExhausted, "max_image_pixels"},
      {top_down_huge, Code::kCorrupt, "BMP: truncated"},
      {lying_offset, Code::kCorrupt, "BMP: truncated"},
      {Bytes(short_pixels.begin(), short_pixels.end() - 40), Code::kCorrupt, "BMP: truncated"},
  };
  for (const auto& c : cases) {
    Rgb img;
    const Status st = decode(c.bytes, nullptr, &img, /*max_pixels=*/1u << 28);
    EXPECT_EQ(st.code(), c.code) << c.reason << ": " << st.to_string();
    EXPECT_NE(st.message().find(c.reason), std::string::npos) << st.message();
  }
}

// --- PNG palettes, as PIL converts them ----------------------------------------------------------------------

Bytes png_palette(const std::vector<png_color>& plte, const Bytes& trns, const Bytes& indices, int w, int h) {
  Bytes out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  png_set_write_fn(png, &out, [](png_structp p, png_bytep data, png_size_t n) {
    auto* o = static_cast<Bytes*>(png_get_io_ptr(p));
    o->insert(o->end(), data, data + n);
  }, nullptr);
  png_set_IHDR(png, info, w, h, 8, PNG_COLOR_TYPE_PALETTE, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  png_set_PLTE(png, info, plte.data(), static_cast<int>(plte.size()));
  if (!trns.empty()) png_set_tRNS(png, info, trns.data(), static_cast<int>(trns.size()), nullptr);
  png_set_check_for_invalid_index(png, 0);
  png_write_info(png, info);
  for (int y = 0; y < h; ++y) png_write_row(png, indices.data() + static_cast<std::size_t>(y) * w);
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

TEST(PngTest, PaletteWithTransparencyGivesItsColoursAndPastThePaletteIsGray) {
  const std::vector<png_color> plte = {{10, 20, 30}, {40, 50, 60}, {70, 80, 90}};
  const Bytes indices = {0, 1, 2, 3, 200, 1};
  for (const Bytes& trns : {Bytes{}, Bytes{0}, Bytes{0, 128, 255}}) {
    const Rgb img = decode_ok(png_palette(plte, trns, indices, 3, 2));
    // Index 3 and 200 lie past the 3-entry PLTE: PIL's default palette there is a gray ramp.
    EXPECT_EQ(img.rgb, (Bytes{10, 20, 30, 40, 50, 60, 70, 80, 90, 3, 3, 3, 200, 200, 200, 40, 50, 60}))
        << "tRNS of " << trns.size();
  }
}

}  // namespace
}  // namespace stoker::detail
