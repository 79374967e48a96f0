#include "decode/jpeg_transcode.h"
#include "pack/jpeg_encode.h"

#include <gtest/gtest.h>

#include <tuple>

#include "decode/decode.h"
#include "decode/jpeg_restart.h"
#include "test_util.h"

namespace stoker::detail {
namespace {

using stoker::testing::encode_jpeg;
using stoker::testing::test_pixels;

std::vector<std::uint8_t> decode_all(const std::vector<std::uint8_t>& bytes) {
  ImageDecoder dec;
  EXPECT_TRUE(dec.open(bytes.data(), bytes.size(), 1u << 30).ok());
  ImageBuffer buf;
  ImageView v;
  EXPECT_TRUE(dec.decode({0, 0, dec.width(), dec.height()}, &buf, &v).ok());
  std::vector<std::uint8_t> rgb;
  for (int y = 0; y < v.height; ++y) rgb.insert(rgb.end(), v.row(y), v.row(y) + v.width * 3);
  return rgb;
}

// pack --lossless: the rewritten JPEG has restart markers on the loader's
// grid and decodes to exactly the original's pixels, whatever the original
// was (subsampling, progressive, gray), in whole and region by region.
class LosslessTest : public ::testing::TestWithParam<std::tuple<int, int, bool>> {};

TEST_P(LosslessTest, SamePixelsWithRestartMarkers) {
  auto [subsampling, channels, progressive] = GetParam();
  const int w = 141, h = 99;
  auto original = encode_jpeg(test_pixels(w, h, 4), w, h, 92, subsampling, channels, progressive);
  std::vector<std::uint8_t> rewritten;
  JpegTranscoder transcoder;
  ASSERT_TRUE(transcoder.to_restart_grid(original.data(), original.size(), &rewritten).ok());
  RestartLayout layout;
  ASSERT_TRUE(parse_restart_layout(rewritten.data(), rewritten.size(), &layout));
  const auto want = decode_all(original);
  ASSERT_EQ(decode_all(rewritten), want);
  ImageDecoder dec;
  ImageBuffer buf;
  for (const Box r : {Box{1, 1, 1, 1}, Box{70, 40, 50, 30}, Box{w - 3, h - 5, 3, 5}, Box{0, 50, 17, 49}}) {
    ASSERT_TRUE(dec.open(rewritten.data(), rewritten.size(), 1u << 30).ok());
    ImageView v;
    ASSERT_TRUE(dec.decode(r, &buf, &v).ok());
    for (int y = 0; y < r.height; ++y) {
      for (int x = 0; x < r.width * 3; ++x) {
        ASSERT_EQ(v.row(y)[x], want[(static_cast<std::size_t>(r.y + y) * w + static_cast<std::size_t>(r.x)) * 3 +
                                    static_cast<std::size_t>(x)]);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Inputs, LosslessTest,
                         ::testing::Values(std::make_tuple(444, 3, false), std::make_tuple(420, 3, false),
                                           std::make_tuple(422, 3, false), std::make_tuple(420, 3, true),
                                           std::make_tuple(444, 1, false)));

TEST(LosslessTest, CorruptInputIsAnError) {
  auto original = encode_jpeg(test_pixels(64, 64, 1), 64, 64);
  original.resize(100);
  std::vector<std::uint8_t> out;
  JpegTranscoder transcoder;
  EXPECT_FALSE(transcoder.to_restart_grid(original.data(), original.size(), &out).ok());
  const std::uint8_t text[] = "not a jpeg at all";
  EXPECT_FALSE(transcoder.to_restart_grid(text, sizeof(text), &out).ok());
  // The encoder is usable again after an error.
  auto good = encode_jpeg(test_pixels(32, 32, 2), 32, 32);
  EXPECT_TRUE(transcoder.to_restart_grid(good.data(), good.size(), &out).ok());
}

}  // namespace
}  // namespace stoker::detail
