#include "decode/jpeg_restart_insert.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <tuple>
#include <vector>

// clang-format off
#include <jpeglib.h>
#include <jerror.h>
// clang-format on

#include "decode/jpeg_restart.h"
#include "test_util.h"

namespace stoker::detail {
namespace {

using stoker::testing::test_pixels;

using Bytes = std::vector<std::uint8_t>;

// Test JPEGs: sampling 0 is gray (the first channel of `rgb`); 444, 422,
// 420 and 440 are Y's sampling factors (Cb and Cr 1x1).
// Here 4:2:0 unless a test says otherwise.
struct EncodeOptions : stoker::testing::JpegEncodeOptions {
  EncodeOptions() { sampling = 420; }
};

Bytes encode(const Bytes& rgb, int w, int h, const EncodeOptions& o) {
  if (o.sampling != 0) return stoker::testing::encode_jpeg(rgb, w, h, 3, o);
  Bytes gray(static_cast<std::size_t>(w) * static_cast<std::size_t>(h));
  for (std::size_t i = 0; i < gray.size(); ++i) gray[i] = rgb[i * 3];
  return stoker::testing::encode_jpeg(gray, w, h, 1, o);
}

struct Decoded {
  bool ok = false;
  int warnings = 0;       // libjpeg's warnings
  int data_warnings = 0;  // of which about the entropy-coded data (filled in, passed over)
  int width = 0, height = 0, channels = 0;
  Bytes pixels;
};

struct CountingError {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
  int warnings, data_warnings;
};

// Only trivially destructible locals: libjpeg errors longjmp out.
bool read_pixels(jpeg_decompress_struct* c, CountingError* err, const std::uint8_t* data, std::size_t size,
                 Decoded* d) {
  if (setjmp(err->jump)) return false;
  jpeg_mem_src(c, data, static_cast<unsigned long>(size));
  jpeg_read_header(c, TRUE);
  c->out_color_space = c->num_components == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_start_decompress(c);
  d->width = static_cast<int>(c->output_width);
  d->height = static_cast<int>(c->output_height);
  d->channels = c->output_components;
  const std::size_t stride = static_cast<std::size_t>(d->width) * static_cast<std::size_t>(d->channels);
  d->pixels.resize(stride * static_cast<std::size_t>(d->height));
  while (c->output_scanline < c->output_height) {
    JSAMPROW r = d->pixels.data() + stride * c->output_scanline;
    jpeg_read_scanlines(c, &r, 1);
  }
  jpeg_finish_decompress(c);
  return true;
}

// A full decode with libjpeg-turbo's defaults (RGB, or gray for 1 component).
Decoded decode(const std::uint8_t* data, std::size_t size) {
  Decoded d;
  jpeg_decompress_struct c;
  CountingError err;
  c.err = jpeg_std_error(&err.pub);
  err.warnings = err.data_warnings = 0;
  err.pub.error_exit = [](j_common_ptr ci) { std::longjmp(reinterpret_cast<CountingError*>(ci->err)->jump, 1); };
  err.pub.emit_message = [](j_common_ptr ci, int level) {
    if (level != -1) return;
    auto* e = reinterpret_cast<CountingError*>(ci->err);
    const int code = e->pub.msg_code;
    ++e->warnings;
    // Others (an unknown JFIF version, ...) come from headers the output keeps.
    if (code == JWRN_HIT_MARKER || code == JWRN_JPEG_EOF || code == JWRN_MUST_RESYNC || code == JWRN_HUFF_BAD_CODE ||
        code == JWRN_EXTRANEOUS_DATA || code == JWRN_NOT_SEQUENTIAL) {
      ++e->data_warnings;
    }
  };
  jpeg_create_decompress(&c);
  d.ok = read_pixels(&c, &err, data, size, &d);
  d.warnings = err.warnings;
  d.data_warnings = err.data_warnings;
  jpeg_destroy_decompress(&c);
  return d;
}
Decoded decode(const Bytes& b) { return decode(b.data(), b.size()); }

int count_markers(const Bytes& jpeg, int marker) {
  RestartLayout layout;
  const std::size_t end = parse_restart_layout(jpeg.data(), jpeg.size(), &layout) ? layout.sos : jpeg.size();
  int n = 0;
  for (std::size_t i = 2; i + 4 <= end; i += 2 + static_cast<std::size_t>(jpeg[i + 2] << 8 | jpeg[i + 3])) {
    if (jpeg[i + 1] == marker) ++n;
    if (jpeg[i + 1] == 0xDA) break;
  }
  return n;
}

// The output against the input: the same pixels from a full decode, a
// restart grid parse_restart_layout accepts, and rectangles cut out by
// cut_restart_segments that decode to the same pixels (with one pixel of
// margin where chroma is subsampled, as the decoder cuts them).
void expect_same_image(const Bytes& in, const Bytes& out, const std::string& what, bool cuts = true) {
  const Decoded a = decode(in), b = decode(out);
  ASSERT_TRUE(a.ok && b.ok) << what;
  ASSERT_EQ(a.data_warnings, 0) << what;
  ASSERT_EQ(b.warnings, a.warnings) << what;
  ASSERT_EQ(a.width, b.width) << what;
  ASSERT_EQ(a.height, b.height) << what;
  ASSERT_TRUE(a.pixels == b.pixels) << what << ": pixels differ";

  RestartLayout layout;
  ASSERT_TRUE(parse_restart_layout(out.data(), out.size(), &layout)) << what;
  ASSERT_EQ(layout.interval, restart_interval_for(layout.width, layout.mcu_w)) << what;
  if (!cuts) return;
  const int w = a.width, h = a.height;
  const bool subsampled = layout.mcu_w > 8 || layout.mcu_h > 8;
  const int m = subsampled ? 1 : 0;
  const int rects[][4] = {{0, 0, w, h},
                          {0, 0, 1, 1},
                          {w / 3, h / 3, w / 3 + w / 4 + 1, h / 3 + h / 4 + 1},
                          {w - 1, h - 1, w, h},
                          {w / 2, 0, w / 2 + 1, h},
                          {0, h / 2, w, h / 2 + 1}};
  for (const auto& r : rects) {
    Bytes cut;
    int ox = 0, oy = 0;
    ASSERT_TRUE(
        cut_restart_segments(out.data(), out.size(), layout, r[0] - m, r[1] - m, r[2] + m, r[3] + m, &cut, &ox, &oy))
        << what;
    const Decoded c = decode(cut);
    ASSERT_TRUE(c.ok) << what;
    ASSERT_EQ(c.data_warnings, 0) << what;
    for (int y = r[1]; y < r[3]; ++y) {
      const std::size_t n = static_cast<std::size_t>(r[2] - r[0]) * static_cast<std::size_t>(a.channels);
      const std::uint8_t* want =
          &a.pixels[(static_cast<std::size_t>(y) * static_cast<std::size_t>(w) + static_cast<std::size_t>(r[0])) *
                    static_cast<std::size_t>(a.channels)];
      const std::uint8_t* got = &c.pixels[(static_cast<std::size_t>(y - oy) * static_cast<std::size_t>(c.width) +
                                           static_cast<std::size_t>(r[0] - ox)) *
                                          static_cast<std::size_t>(c.channels)];
      ASSERT_EQ(std::memcmp(want, got, n), 0)
          << what << ": rectangle " << r[0] << "," << r[1] << " to " << r[2] << "," << r[3] << ", row " << y;
    }
  }
}

// (sampling, optimized tables, the input's restart interval in MCUs)
class InsertTest : public ::testing::TestWithParam<std::tuple<int, bool, int>> {};

TEST_P(InsertTest, SamePixelsOnTheRestartGrid) {
  const auto [sampling, optimize, restart] = GetParam();
  JpegRestartInserter inserter;  // one for every image: tables are kept between them
  Bytes out;
  const int sizes[][2] = {{1, 1}, {7, 5}, {17, 9}, {64, 48}, {97, 61}, {255, 129}, {33, 200}, {4000, 17}};
  for (const auto& s : sizes) {
    for (int quality : {50, 75, 90, 100}) {
      const Bytes px = test_pixels(s[0], s[1], static_cast<std::uint32_t>(s[0] * 31 + quality));
      EncodeOptions o;
      o.quality = quality;
      o.sampling = sampling;
      o.optimize = optimize;
      o.restart_mcus = restart;
      const Bytes in = encode(px, s[0], s[1], o);
      const std::string what = std::to_string(s[0]) + "x" + std::to_string(s[1]) + " q" + std::to_string(quality);
      const Status st = inserter.insert(in.data(), in.size(), &out);
      ASSERT_TRUE(st.ok()) << what << ": " << st.to_string();
      expect_same_image(in, out, what);
      ASSERT_EQ(count_markers(out, 0xDD), 1) << what;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Grid, InsertTest,
                         ::testing::Combine(::testing::Values(0, 444, 422, 420, 440), ::testing::Bool(),
                                            ::testing::Values(0, 1, 3, 7)));

// An image that is gray 255 on its left half and 160 on its right half: at
// quality 100 (every quantizer 1) luma DC values 1016 (category 10) and 256
// (category 9), chroma 0. In scan order the luma differences are 0 and +-760
// (category 10): an optimized table codes categories 0 and 10 only, and the
// restart intervals that start on the right half need category 9.
Bytes two_level_image(int w, int h) {
  Bytes px(static_cast<std::size_t>(w) * static_cast<std::size_t>(h) * 3);
  for (std::size_t i = 0; i < px.size(); ++i) {
    px[i] = static_cast<std::uint8_t>(static_cast<int>(i / 3 % static_cast<std::size_t>(w)) < w / 2 ? 255 : 160);
  }
  return px;
}

TEST(RestartInsertTest, ReplacesAnOptimizedDcTableThatCannotCodeAnIntervalsFirstDc) {
  JpegRestartInserter inserter;
  Bytes out;
  for (int sampling : {0, 444, 420}) {
    for (bool shared : {false, true}) {
      if (sampling == 0 && shared) continue;
      EncodeOptions o;
      o.quality = 100;
      o.sampling = sampling;
      o.optimize = true;
      o.shared_tables = shared;
      const Bytes in = encode(two_level_image(256, 32), 256, 32, o);
      const std::string what = "sampling " + std::to_string(sampling) + (shared ? " shared tables" : "");
      const Status st = inserter.insert(in.data(), in.size(), &out);
      ASSERT_TRUE(st.ok()) << what << ": " << st.to_string();
      EXPECT_EQ(count_markers(out, 0xC4), count_markers(in, 0xC4) + 1) << what << ": a DHT for the new table";
      expect_same_image(in, out, what);
    }
  }
  // With the standard tables nothing is replaced.
  EncodeOptions o;
  o.quality = 100;
  const Bytes in = encode(two_level_image(256, 32), 256, 32, o);
  ASSERT_TRUE(inserter.insert(in.data(), in.size(), &out).ok());
  EXPECT_EQ(count_markers(out, 0xC4), count_markers(in, 0xC4));
  expect_same_image(in, out, "standard tables");
}

TEST(RestartInsertTest, ProgressiveAndArithmeticAreLeftToTheTranscoder) {
  const Bytes px = test_pixels(64, 48, 5);
  Bytes out;
  for (bool progressive : {false, true}) {
    for (bool arithmetic : {false, true}) {
      if (!progressive && !arithmetic) continue;
      EncodeOptions o;
      o.progressive = progressive;
      o.arithmetic = arithmetic;
      const Bytes in = encode(px, 64, 48, o);
      const Status st = insert_restart_markers(in.data(), in.size(), &out);
      EXPECT_EQ(st.code(), Code::kUnsupported) << progressive << arithmetic << ": " << st.to_string();
    }
  }
  // Separate scans per component (baseline, non-interleaved).
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* mem = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &mem, &size);
  c.image_width = 64;
  c.image_height = 48;
  c.input_components = 3;
  c.in_color_space = JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_scan_info scans[3];
  for (int i = 0; i < 3; ++i) scans[i] = {1, {i, 0, 0, 0}, 0, 63, 0, 0};
  c.scan_info = scans;
  c.num_scans = 3;
  jpeg_start_compress(&c, TRUE);
  Bytes row(64 * 3);
  while (c.next_scanline < c.image_height) {
    std::copy(&px[c.next_scanline * 64 * 3], &px[c.next_scanline * 64 * 3] + 64 * 3, row.begin());
    JSAMPROW r = row.data();
    jpeg_write_scanlines(&c, &r, 1);
  }
  jpeg_finish_compress(&c);
  const Bytes multi(mem, mem + size);
  std::free(mem);
  jpeg_destroy_compress(&c);
  ASSERT_TRUE(decode(multi).ok);
  const Status st = insert_restart_markers(multi.data(), multi.size(), &out);
  EXPECT_EQ(st.code(), Code::kUnsupported) << st.to_string();
  EXPECT_NE(st.message().find("several scans"), std::string::npos) << st.message();
}

// Restart markers libjpeg ignores after the last MCU (some encoders write
// one), before the end-of-image marker.
TEST(RestartInsertTest, TrailingRestartMarkerIsPassedOver) {
  EncodeOptions o;
  o.sampling = 0;
  o.restart_mcus = 1;
  Bytes in = encode(test_pixels(16, 8, 1), 16, 8, o);  // 2 MCUs: RST0 between them
  in.insert(in.end() - 2, {0xFF, 0xD1});
  const Decoded d = decode(in);
  ASSERT_TRUE(d.ok);
  ASSERT_EQ(d.warnings, 0);
  Bytes out;
  const Status st = insert_restart_markers(in.data(), in.size(), &out);
  ASSERT_TRUE(st.ok()) << st.to_string();
  expect_same_image(in, out, "trailing RST1");
}

std::size_t nth_restart_marker(const Bytes& b, int n) {
  int seen = 0;
  for (std::size_t i = 0; i + 1 < b.size(); ++i) {
    if (b[i] == 0xFF && b[i + 1] >= 0xD0 && b[i + 1] <= 0xD7 && ++seen == n) return i;
  }
  return 0;
}

// A hand-made 8x8 gray JPEG: DC table {0: "0"}, AC table {EOB: "0", 0xF1
// (15 zeros then a coefficient of size 1): "10"}, one block of `entropy`.
Bytes handmade_gray(const Bytes& entropy) {
  Bytes j = {0xFF, 0xD8, 0xFF, 0xDB, 0, 67, 0};
  j.insert(j.end(), 64, 1);
  const Bytes sof = {0xFF, 0xC0, 0, 11, 8, 0, 8, 0, 8, 1, 1, 0x11, 0};
  j.insert(j.end(), sof.begin(), sof.end());
  Bytes dht = {0xFF, 0xC4, 0, 20, 0x00, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  j.insert(j.end(), dht.begin(), dht.end());
  dht = {0xFF, 0xC4, 0, 21, 0x10, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x00, 0xF1};
  j.insert(j.end(), dht.begin(), dht.end());
  const Bytes sos = {0xFF, 0xDA, 0, 8, 1, 1, 0x00, 0, 63, 0};
  j.insert(j.end(), sos.begin(), sos.end());
  j.insert(j.end(), entropy.begin(), entropy.end());
  j.insert(j.end(), {0xFF, 0xD9});
  return j;
}

TEST(RestartInsertTest, DamageIsRefusedWithItsReason) {
  Bytes out;
  // DC "0", then 0xF1 0xF1 0xF1 (to position 48) and an EOB: a good block.
  const Bytes good = handmade_gray({0x49, 0x1F});
  ASSERT_TRUE(decode(good).ok);
  Status st = insert_restart_markers(good.data(), good.size(), &out);
  ASSERT_TRUE(st.ok()) << st.to_string();
  expect_same_image(good, out, "hand-made");
  // A fourth 0xF1 runs to position 64: libjpeg clamps it without a word.
  const Bytes overflow = handmade_gray({0x49, 0x27});
  ASSERT_TRUE(decode(overflow).ok);
  st = insert_restart_markers(overflow.data(), overflow.size(), &out);
  EXPECT_EQ(st.code(), Code::kCorrupt);
  EXPECT_NE(st.message().find("more than 64 coefficients"), std::string::npos) << st.message();

  EncodeOptions o;
  o.restart_mcus = 2;
  const Bytes in = encode(test_pixels(64, 64, 3), 64, 64, o);
  Bytes b = in;  // RST2 renumbered RST6
  b[nth_restart_marker(b, 3) + 1] = 0xD6;
  st = insert_restart_markers(b.data(), b.size(), &out);
  EXPECT_EQ(st.code(), Code::kCorrupt);
  EXPECT_NE(st.message().find("where RST2 belongs"), std::string::npos) << st.message();
  b = in;  // a byte before a restart marker
  b.insert(b.begin() + static_cast<std::ptrdiff_t>(nth_restart_marker(b, 2)), 0x5A);
  st = insert_restart_markers(b.data(), b.size(), &out);
  EXPECT_EQ(st.code(), Code::kCorrupt);
  EXPECT_NE(st.message().find("before a restart marker"), std::string::npos) << st.message();
  b = in;  // a restart marker dropped: the next segment's data read as this one's
  b.erase(b.begin() + static_cast<std::ptrdiff_t>(nth_restart_marker(b, 2)),
          b.begin() + static_cast<std::ptrdiff_t>(nth_restart_marker(b, 2)) + 2);
  EXPECT_EQ(insert_restart_markers(b.data(), b.size(), &out).code(), Code::kCorrupt);
  for (std::size_t cut : {in.size() - 2, in.size() - 1, in.size() - 40, in.size() / 2}) {
    st = insert_restart_markers(in.data(), cut, &out);
    EXPECT_EQ(st.code(), Code::kCorrupt) << "cut at " << cut;
    EXPECT_NE(st.message().find("truncated"), std::string::npos) << st.message();
  }
  b = in;  // garbage between the last MCU and EOI
  b.insert(b.end() - 2, {0x12, 0x34});
  EXPECT_EQ(insert_restart_markers(b.data(), b.size(), &out).code(), Code::kCorrupt);
}

// JPEG damage as scripts/make_corruption_corpus.py makes it (truncation after
// each header segment and inside the scan, SOF size and type, a DQT id,
// flipped entropy-coded bytes), plus truncations and single flipped bits
// all through the file (at least every 97th and about every 24th byte).
// Each result is refused, or decodes to the pixels libjpeg gives the input
// without a warning about its data.
std::vector<std::pair<std::string, Bytes>> damaged(const Bytes& data, std::uint32_t seed) {
  std::vector<std::pair<std::string, Bytes>> out;
  std::vector<std::pair<int, std::size_t>> segs;  // marker, end
  std::size_t scan = 0;
  for (std::size_t pos = 2; pos + 4 <= data.size() && data[pos] == 0xFF;) {
    const std::size_t end = pos + 2 + static_cast<std::size_t>(data[pos + 2] << 8 | data[pos + 3]);
    segs.emplace_back(data[pos + 1], end);
    if (data[pos + 1] == 0xDA) {
      scan = end;
      break;
    }
    pos = end;
  }
  for (const auto& [marker, end] : segs) {
    out.emplace_back("cut after FF" + std::to_string(marker),
                     Bytes(data.begin(), data.begin() + static_cast<std::ptrdiff_t>(std::min(end, data.size()))));
  }
  for (int pct : {10, 50, 90}) {
    const std::size_t at = scan + (data.size() - scan) * static_cast<std::size_t>(pct) / 100;
    out.emplace_back("cut in scan " + std::to_string(pct),
                     Bytes(data.begin(), data.begin() + static_cast<std::ptrdiff_t>(at)));
  }
  out.emplace_back("cut EOI", Bytes(data.begin(), data.end() - 2));
  const std::size_t stride = std::max<std::size_t>(97, data.size() / 300);
  for (std::size_t at = 1; at < data.size(); at += stride) {
    out.emplace_back("cut at " + std::to_string(at),
                     Bytes(data.begin(), data.begin() + static_cast<std::ptrdiff_t>(at)));
  }
  std::size_t sof = 0, dqt = 0;
  for (std::size_t pos = 2; pos + 4 <= data.size() && pos < scan;) {
    if (data[pos + 1] == 0xC0 || data[pos + 1] == 0xC1) sof = pos;
    if (data[pos + 1] == 0xDB && dqt == 0) dqt = pos;
    pos += 2 + static_cast<std::size_t>(data[pos + 2] << 8 | data[pos + 3]);
  }
  Bytes b = data;
  std::fill(b.begin() + static_cast<std::ptrdiff_t>(sof) + 5, b.begin() + static_cast<std::ptrdiff_t>(sof) + 9, 0);
  out.emplace_back("sof zero", b);
  b = data;
  b[sof + 5] = b[sof + 7] = static_cast<std::uint8_t>(65000 >> 8);
  b[sof + 6] = b[sof + 8] = static_cast<std::uint8_t>(65000 & 0xFF);
  out.emplace_back("sof huge", b);
  b = data;
  b[sof + 1] = 0xCF;
  out.emplace_back("sof type", b);
  b = data;
  b[dqt + 4] = 0x07;
  out.emplace_back("dqt id", b);
  std::mt19937 rng(seed);
  for (int j = 0; j < 6; ++j) {
    b = data;
    for (int k = 0; k < 8; ++k) {
      b[scan + rng() % (data.size() - 2 - scan)] ^= static_cast<std::uint8_t>(1 + rng() % 255);
    }
    out.emplace_back("entropy flip " + std::to_string(j), b);
  }
  for (std::size_t at = 0; at < data.size(); at += stride / 4 + rng() % 61) {
    b = data;
    b[at] ^= static_cast<std::uint8_t>(1u << (rng() % 8));
    out.emplace_back("bit flip at " + std::to_string(at), b);
  }
  return out;
}

void check_damaged(const Bytes& good, std::uint32_t seed, int* refused, int* rewritten) {
  JpegRestartInserter inserter;
  Bytes out;
  for (const auto& [name, bytes] : damaged(good, seed)) {
    const Status st = inserter.insert(bytes.data(), bytes.size(), &out);
    if (!st.ok()) {
      ASSERT_TRUE(st.code() == Code::kCorrupt || st.code() == Code::kUnsupported) << name << ": " << st.to_string();
      ASSERT_FALSE(st.message().empty()) << name;
      ++*refused;
      continue;
    }
    ++*rewritten;
    const Decoded in = decode(bytes);
    ASSERT_TRUE(in.ok) << name << ": rewritten, but libjpeg cannot read the input";
    ASSERT_EQ(in.data_warnings, 0) << name << ": rewritten, but libjpeg warns on the input's data";
    expect_same_image(bytes, out, name);
  }
}

TEST(RestartInsertTest, DamagedInputsAreRefusedOrExact) {
  int refused = 0, rewritten = 0;
  int seed = 0;
  for (int sampling : {0, 444, 420}) {
    for (int restart : {0, 3}) {
      EncodeOptions o;
      o.sampling = sampling;
      o.restart_mcus = restart;
      o.optimize = restart == 3;
      check_damaged(encode(test_pixels(61, 45, static_cast<std::uint32_t>(sampling)), 61, 45, o),
                    static_cast<std::uint32_t>(++seed), &refused, &rewritten);
    }
  }
  EXPECT_GT(refused, 100);
  EXPECT_GT(rewritten, 10) << "flipped bits in APPn/COM bytes and some in the data still make a good JPEG";
}

// data/sample (`make data`), when it is there: every photo rewritten and
// decoded (one in 10 also cut into rectangles); a few put through the
// damage.
std::string sample_dir() {
  if (const char* env = std::getenv("STOKER_SAMPLE_DIR")) return env;
  return (std::filesystem::path(__FILE__).parent_path() / ".." / ".." / "data" / "sample").string();
}

TEST(RestartInsertTest, SampleSetRewritesExactly) {
  const std::string dir = sample_dir();
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) GTEST_SKIP() << "no sample set at " << dir << " (make data)";
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    const std::string ext = e.path().extension().string();
    if (e.is_regular_file() && (ext == ".jpg" || ext == ".jpeg" || ext == ".JPG")) files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  ASSERT_FALSE(files.empty());
  JpegRestartInserter inserter;
  Bytes out;
  int refused = 0, damaged_refused = 0, damaged_rewritten = 0;
  // NOTE: sanitizer builds (Debug, 5-20x slower; nothing here runs on two
  // threads) check every 4th photo, within ctest's timeout on a loaded
  // machine; the release suite checks all of them.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
  constexpr std::size_t kStride = 4;
#else
  constexpr std::size_t kStride = 1;
#endif
  for (std::size_t i = 0; i < files.size(); i += kStride) {
    std::ifstream f(files[i], std::ios::binary);
    const Bytes in{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
    const Status st = inserter.insert(in.data(), in.size(), &out);
    if (!st.ok()) {
      ASSERT_EQ(st.code(), Code::kUnsupported) << files[i] << ": " << st.to_string();
      ++refused;
      continue;
    }
    expect_same_image(in, out, files[i], /*cuts=*/i % 10 == 0);
    if (i % 500 == 0) check_damaged(in, static_cast<std::uint32_t>(i), &damaged_refused, &damaged_rewritten);
  }
  EXPECT_EQ(refused, 0) << "of " << files.size() << " baseline photos";
}

}  // namespace
}  // namespace stoker::detail
