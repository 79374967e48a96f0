#include "transform/boxes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "test_util.h"

namespace stoker::detail {
namespace {

// ---- fixtures ----

using stoker::testing::npy_bytes;

template <typename T>
std::vector<std::uint8_t> npy_of(const std::string& descr, const std::string& shape, const std::vector<T>& v,
                                 bool fortran = false) {
  return npy_bytes(descr, shape, v.data(), v.size() * sizeof(T), fortran);
}

Status parse(const std::vector<std::uint8_t>& bytes, std::vector<BoxRow>* out, BoxFormat format = BoxFormat::kXYXY,
             const std::string& key = "") {
  return parse_boxes(bytes.data(), bytes.size(), format, key, out);
}

Status parse(const std::string& text, std::vector<BoxRow>* out, BoxFormat format = BoxFormat::kXYXY,
             const std::string& key = "") {
  return parse_boxes(reinterpret_cast<const std::uint8_t*>(text.data()), text.size(), format, key, out);
}

void expect_row(const BoxRow& r, double x0, double y0, double x1, double y1, std::int64_t label) {
  EXPECT_DOUBLE_EQ(r.x0, x0);
  EXPECT_DOUBLE_EQ(r.y0, y0);
  EXPECT_DOUBLE_EQ(r.x1, x1);
  EXPECT_DOUBLE_EQ(r.y1, y1);
  EXPECT_EQ(r.label, label);
}

void expect_corrupt(const Status& s, const std::string& part) {
  EXPECT_EQ(s.code(), Code::kCorrupt) << s.to_string();
  EXPECT_NE(s.message().find(part), std::string::npos) << "message: " << s.message() << "\nwant: " << part;
}

// ---- .npy ----

template <typename T>
struct Dtype;
template <>
struct Dtype<float> {
  static constexpr const char* descr = "<f4";
};
template <>
struct Dtype<double> {
  static constexpr const char* descr = "<f8";
};
template <>
struct Dtype<std::int8_t> {
  static constexpr const char* descr = "|i1";
};
template <>
struct Dtype<std::int16_t> {
  static constexpr const char* descr = "<i2";
};
template <>
struct Dtype<std::int32_t> {
  static constexpr const char* descr = "<i4";
};
template <>
struct Dtype<std::int64_t> {
  static constexpr const char* descr = "<i8";
};
template <>
struct Dtype<std::uint8_t> {
  static constexpr const char* descr = "|u1";
};
template <>
struct Dtype<std::uint16_t> {
  static constexpr const char* descr = "<u2";
};
template <>
struct Dtype<std::uint32_t> {
  static constexpr const char* descr = "<u4";
};
template <>
struct Dtype<std::uint64_t> {
  static constexpr const char* descr = "<u8";
};

template <typename T>
class NpyBoxesTest : public ::testing::Test {};
using NpyTypes = ::testing::Types<float, double, std::int8_t, std::int16_t, std::int32_t, std::int64_t, std::uint8_t,
                                  std::uint16_t, std::uint32_t, std::uint64_t>;
TYPED_TEST_SUITE(NpyBoxesTest, NpyTypes);

TYPED_TEST(NpyBoxesTest, FourColumns) {
  using T = TypeParam;
  const std::vector<T> v = {1, 2, 11, 22, 0, 0, 5, 7, 100, 50, 120, 127};
  std::vector<BoxRow> rows;
  ASSERT_TRUE(parse(npy_of(Dtype<T>::descr, "(3, 4)", v), &rows).ok());
  ASSERT_EQ(rows.size(), 3u);
  expect_row(rows[0], 1, 2, 11, 22, -1);
  expect_row(rows[1], 0, 0, 5, 7, -1);
  expect_row(rows[2], 100, 50, 120, 127, -1);
}

TYPED_TEST(NpyBoxesTest, FiveColumnsCarryTheLabel) {
  using T = TypeParam;
  const std::vector<T> v = {1, 2, 11, 22, 3, 0, 0, 5, 7, 0, 10, 10, 20, 20, 127};
  std::vector<BoxRow> rows;
  ASSERT_TRUE(parse(npy_of(Dtype<T>::descr, "(3, 5)", v), &rows).ok());
  ASSERT_EQ(rows.size(), 3u);
  expect_row(rows[0], 1, 2, 11, 22, 3);
  expect_row(rows[1], 0, 0, 5, 7, 0);
  expect_row(rows[2], 10, 10, 20, 20, 127);
}

TYPED_TEST(NpyBoxesTest, EmptyShapes) {
  using T = TypeParam;
  for (const char* shape : {"(0,)", "(0, 4)", "(0, 5)"}) {
    std::vector<BoxRow> rows = {{1, 2, 3, 4, 5}};  // replaced, not appended to
    EXPECT_TRUE(parse(npy_of(Dtype<T>::descr, shape, std::vector<T>{}), &rows).ok()) << shape;
    EXPECT_TRUE(rows.empty()) << shape;
  }
}

TEST(NpyBoxesTest, LittleEndianMarkOnOneByteTypesAndUnalignedData) {
  std::vector<BoxRow> rows;
  ASSERT_TRUE(parse(npy_of("<u1", "(1, 4)", std::vector<std::uint8_t>{1, 2, 3, 4}), &rows).ok());
  expect_row(rows[0], 1, 2, 3, 4, -1);
  // f8 data at an address that is not 8-aligned: the member sits anywhere in a shard.
  std::vector<std::uint8_t> v1 = npy_of("<f8", "(1, 4)", std::vector<double>{0.5, 1.5, 2.5, 3.5});
  std::vector<std::uint8_t> shifted(v1.size() + 1);
  std::memcpy(shifted.data() + 1, v1.data(), v1.size());
  ASSERT_TRUE(parse_boxes(shifted.data() + 1, v1.size(), BoxFormat::kXYXY, "", &rows).ok());
  expect_row(rows[0], 0.5, 1.5, 2.5, 3.5, -1);
}

TEST(NpyBoxesTest, LargeIntegerLabelsAreExact) {
  const std::int64_t big = (std::int64_t{1} << 53) + 1;  // not a double
  std::vector<BoxRow> rows;
  ASSERT_TRUE(parse(npy_of("<i8", "(1, 5)", std::vector<std::int64_t>{0, 0, 1, 1, big}), &rows).ok());
  EXPECT_EQ(rows[0].label, big);
}

TEST(NpyBoxesErrorTest, ValuesNameTheBox) {
  std::vector<BoxRow> rows;
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  expect_corrupt(parse(npy_of("<f8", "(2, 4)", std::vector<double>{0, 0, 1, 1, 0, nan, 1, 1}), &rows),
                 "box 1: non-finite value nan in column 1");
  expect_corrupt(parse(npy_of("<f4", "(1, 4)", std::vector<float>{0, 0, static_cast<float>(inf), 1}), &rows),
                 "box 0: non-finite value inf in column 2");
  expect_corrupt(
      parse(npy_of("<f8", "(4, 4)", std::vector<double>{0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 40, 0, 12.5, 1}), &rows),
      "box 3: x1 < x0 (12.5 < 40)");
  expect_corrupt(parse(npy_of("<i4", "(2, 4)", std::vector<std::int32_t>{0, 0, 1, 1, 0, 9, 1, 8}), &rows),
                 "box 1: y1 < y0 (8 < 9)");
  expect_corrupt(parse(npy_of("<f4", "(1, 5)", std::vector<float>{0, 0, 1, 1, 2.5f}), &rows),
                 "box 0: label 2.5 is not an integer");
  expect_corrupt(
      parse(npy_of("<u8", "(2, 5)", std::vector<std::uint64_t>{0, 0, 1, 1, 1, 0, 0, 1, 1, ~std::uint64_t{0}}), &rows),
      "box 1: label 18446744073709551615 does not fit int64");
  expect_corrupt(parse(npy_of("<f8", "(1, 4)", std::vector<double>{0, 0, -2, 1}), &rows, BoxFormat::kXYWH),
                 "box 0: negative width (-2)");
  expect_corrupt(parse(npy_of("<f8", "(1, 4)", std::vector<double>{0, 0, 2, -1}), &rows, BoxFormat::kCXCYWH),
                 "box 0: negative height (-1)");
  EXPECT_TRUE(rows.empty());  // nothing half-parsed
}

TEST(NpyBoxesErrorTest, ShapeDtypeAndLayout) {
  std::vector<BoxRow> rows;
  const std::vector<float> f12(12, 1.0f);
  expect_corrupt(parse(npy_of("<f4", "(4,)", std::vector<float>(4, 1.0f)), &rows), "shape (4,)");
  expect_corrupt(parse(npy_of("<f4", "(4, 3)", f12), &rows), "shape (4, 3)");
  expect_corrupt(parse(npy_of("<f4", "(3, 4, 1)", f12), &rows), "shape (3, 4, 1)");
  expect_corrupt(parse(npy_of("<f4", "()", std::vector<float>{1}), &rows), "shape ()");
  expect_corrupt(parse(npy_of(">f4", "(3, 4)", f12), &rows), "dtype '>f4'");
  expect_corrupt(parse(npy_of("<c8", "(3, 2)", f12), &rows), "dtype '<c8'");
  expect_corrupt(parse(npy_of("|b1", "(1, 4)", std::vector<std::uint8_t>{1, 1, 1, 1}), &rows), "dtype '|b1'");
  expect_corrupt(parse(npy_of("<f2", "(1, 4)", std::vector<std::uint16_t>{1, 1, 1, 1}), &rows), "dtype '<f2'");
  expect_corrupt(parse(npy_of("<f4", "(3, 4)", f12, /*fortran=*/true), &rows), "Fortran order");
  std::vector<std::uint8_t> truncated = npy_of("<f4", "(3, 4)", f12);
  truncated.resize(truncated.size() - 1);
  expect_corrupt(parse(truncated, &rows), "truncated");
  expect_corrupt(parse(npy_of("<f4", "(3, 4)", f12), &rows, BoxFormat::kXYXY, "boxes"), "key 'boxes' of a .npy");
}

// ---- JSON ----

TEST(JsonBoxesTest, ListOfRows) {
  std::vector<BoxRow> rows;
  ASSERT_TRUE(parse("[[1, 2, 3, 4], [5.5, 6, 7.25, 8, 9]]", &rows).ok());
  ASSERT_EQ(rows.size(), 2u);
  expect_row(rows[0], 1, 2, 3, 4, -1);
  expect_row(rows[1], 5.5, 6, 7.25, 8, 9);
  ASSERT_TRUE(parse(" [ ] ", &rows).ok());
  EXPECT_TRUE(rows.empty());
}

TEST(JsonBoxesTest, ObjectWithAndWithoutLabels) {
  std::vector<BoxRow> rows;
  ASSERT_TRUE(parse(R"({"boxes": [[1, 2, 3, 4], [5, 6, 7, 8]], "labels": [3, 4.0]})", &rows).ok());
  ASSERT_EQ(rows.size(), 2u);
  expect_row(rows[0], 1, 2, 3, 4, 3);
  expect_row(rows[1], 5, 6, 7, 8, 4);
  ASSERT_TRUE(parse(R"({"boxes": [[1, 2, 3, 4]]})", &rows).ok());
  ASSERT_EQ(rows.size(), 1u);
  expect_row(rows[0], 1, 2, 3, 4, -1);
  ASSERT_TRUE(parse(R"({"boxes": [], "labels": []})", &rows).ok());
  EXPECT_TRUE(rows.empty());
}

TEST(JsonBoxesTest, JsonKeySelectsEitherForm) {
  std::vector<BoxRow> rows;
  ASSERT_TRUE(parse(R"({"label": 7, "boxes": [[0, 0, 10, 10, 2]]})", &rows, BoxFormat::kXYXY, "boxes").ok());
  ASSERT_EQ(rows.size(), 1u);
  expect_row(rows[0], 0, 0, 10, 10, 2);
  ASSERT_TRUE(
      parse(R"({"ann": {"boxes": [[1, 1, 2, 2], [3, 3, 4, 4]], "labels": [5, 6]}})", &rows, BoxFormat::kXYXY, "ann")
          .ok());
  ASSERT_EQ(rows.size(), 2u);
  expect_row(rows[1], 3, 3, 4, 4, 6);
}

TEST(JsonBoxesErrorTest, EachNamesTheBoxOrTheStructure) {
  std::vector<BoxRow> rows;
  expect_corrupt(parse("[[1, 2, 3, 4]", &rows), "boxes json: ");
  expect_corrupt(parse("", &rows), "boxes json: ");
  expect_corrupt(parse("[[1, 2, 3, 4], [1, 2, 3]]", &rows), "box 1: a list of 3, not [a, b, c, d]");
  expect_corrupt(parse("[[1, 2, 3, 4], 7]", &rows), "box 1: a number, not [a, b, c, d]");
  expect_corrupt(parse(R"([[1, 2, "3", 4]])", &rows), "box 0: column 2 is a string");
  expect_corrupt(parse("[[1, 2, true, 4]]", &rows), "box 0: column 2 is a boolean");
  expect_corrupt(parse("[[0, 0, 1, 1], [0, 0, 1, 1], [0, 0, 1, 1], [40, 0, 12.5, 1]]", &rows),
                 "box 3: x1 < x0 (12.5 < 40)");
  EXPECT_TRUE(parse("[[0, 0, 1, 1], [10, 20, 30, 40]]", &rows, BoxFormat::kXYWH).ok());
  expect_corrupt(parse("[[0, 0, 1, 1], [10, 20, -3, 40]]", &rows, BoxFormat::kXYWH), "box 1: negative width (-3)");
  expect_corrupt(parse("[[0, 0, 1, 1, 1.5]]", &rows), "box 0: label 1.5 is not an integer");
  expect_corrupt(parse(R"([[0, 0, 1, 1, "cat"]])", &rows), "box 0: label is a string, not an integer");
  expect_corrupt(parse("[[0, 0, 1, 1, 9223372036854775808]]", &rows), "box 0: label 9223372036854775808 does not fit");
  EXPECT_TRUE(parse("[[0, 0, 1e308, 1]]", &rows, BoxFormat::kXYWH).ok());  // large but finite
  expect_corrupt(parse("[[1e308, 0, 1e308, 1]]", &rows, BoxFormat::kXYWH), "box 0: coordinates overflow");
  expect_corrupt(parse(R"({"boxes": [[0, 0, 1, 1]], "labels": [1, 2]})", &rows), "\"labels\" is not a list of 1");
  expect_corrupt(parse(R"({"boxes": [[0, 0, 1, 1]], "labels": 1})", &rows), "\"labels\" is not a list of 1");
  expect_corrupt(parse(R"({"boxes": [[0, 0, 1, 1, 3]], "labels": [1]})", &rows),
                 "box 0: a label in the row and in \"labels\"");
  expect_corrupt(parse(R"({"boxes": [[0, 0, 1, 1]], "labels": [null]})", &rows), "box 0: label is a null");
  expect_corrupt(parse(R"({"bbox": [[0, 0, 1, 1]]})", &rows), "an object without \"boxes\"");
  expect_corrupt(parse(R"({"boxes": 3})", &rows), "boxes json: a number, not a list of boxes");
  expect_corrupt(parse("3", &rows), "boxes json: a number, not a list of boxes");
  expect_corrupt(parse(R"({"label": 3})", &rows, BoxFormat::kXYXY, "boxes"), "boxes json: no key 'boxes'");
  expect_corrupt(parse("[[0, 0, 1, 1]]", &rows, BoxFormat::kXYXY, "boxes"), "not an object with key 'boxes'");
  EXPECT_TRUE(rows.empty());
}

// Truncations and byte flips of valid members: a Status, never an exception.
TEST(JsonBoxesErrorTest, NeverThrows) {
  const std::vector<std::string> docs = {
      R"({"boxes": [[1, 2, 3, 4], [5, 6, 7, 8]], "labels": [3, 4]})",
      R"({"ann": {"boxes": [[1, 1, 2, 2, 7]]}, "x": [1, {"y": null}]})",
      "[[0.5, 1e3, 2e3, 1.5e3, 18446744073709551615]]",
  };
  std::mt19937 rng(7);
  for (const std::string& doc : docs) {
    for (std::size_t len = 0; len <= doc.size(); ++len) {
      std::vector<BoxRow> rows;
      const std::string cut = doc.substr(0, len);
      EXPECT_NO_THROW((void)parse(cut, &rows)) << cut;
      EXPECT_NO_THROW((void)parse(cut, &rows, BoxFormat::kCXCYWH, "ann")) << cut;
    }
    for (int trial = 0; trial < 300; ++trial) {
      std::string s = doc;
      s[rng() % s.size()] = "[]{}\",:0-e.9an \x01\xff"[rng() % 18];
      std::vector<BoxRow> rows;
      EXPECT_NO_THROW((void)parse(s, &rows, BoxFormat::kXYWH, trial % 2 ? "ann" : "")) << s;
    }
  }
}

// ---- formats ----

TEST(BoxFormatTest, ParsedToXyxy) {
  std::vector<BoxRow> rows;
  ASSERT_TRUE(parse("[[10, 20, 30, 40]]", &rows, BoxFormat::kXYWH).ok());
  expect_row(rows[0], 10, 20, 40, 60, -1);
  ASSERT_TRUE(parse("[[50, 60, 20, 10, 1]]", &rows, BoxFormat::kCXCYWH).ok());
  expect_row(rows[0], 40, 55, 60, 65, 1);
  ASSERT_TRUE(parse(npy_of("<f4", "(1, 4)", std::vector<float>{50, 60, 21, 11}), &rows, BoxFormat::kCXCYWH).ok());
  expect_row(rows[0], 39.5, 54.5, 60.5, 65.5, -1);
}

TEST(BoxFormatTest, RoundTripThroughWriteBoxes) {
  for (BoxFormat f : {BoxFormat::kXYXY, BoxFormat::kXYWH, BoxFormat::kCXCYWH}) {
    std::vector<BoxRow> rows;
    // Exact in float32 and in every conversion; the third row is a valid xyxy box too.
    const std::string doc = "[[10.5, 20.25, 30, 40.75, 3], [0, 0, 0, 0, 0], [640, 480, 641.5, 482, 12]]";
    ASSERT_TRUE(parse(doc, &rows, f).ok());
    std::array<float, 12> xy;
    std::array<std::int64_t, 3> labels;
    std::int64_t count = 0;
    EXPECT_EQ(write_boxes(rows, f, 3, xy.data(), labels.data(), &count), 0u);
    EXPECT_EQ(count, 3);
    const std::vector<std::array<float, 5>> want = {
        {10.5f, 20.25f, 30, 40.75f, 3}, {0, 0, 0, 0, 0}, {640, 480, 641.5f, 482, 12}};
    for (std::size_t i = 0; i < 3; ++i) {
      for (std::size_t j = 0; j < 4; ++j) EXPECT_EQ(xy[4 * i + j], want[i][j]) << "format " << static_cast<int>(f);
      EXPECT_EQ(labels[i], static_cast<std::int64_t>(want[i][4]));
    }
  }
}

TEST(BoxFormatTest, WriteConvertsFromXyxy) {
  const std::vector<BoxRow> rows = {{10, 20, 40, 60, 5}};
  std::array<float, 4> xy;
  std::array<std::int64_t, 1> labels;
  std::int64_t count = 0;
  (void)write_boxes(rows, BoxFormat::kXYWH, 1, xy.data(), labels.data(), &count);
  EXPECT_EQ(xy, (std::array<float, 4>{10, 20, 30, 40}));
  (void)write_boxes(rows, BoxFormat::kCXCYWH, 1, xy.data(), labels.data(), &count);
  EXPECT_EQ(xy, (std::array<float, 4>{25, 40, 30, 40}));
  EXPECT_EQ(labels[0], 5);
}

TEST(WriteBoxesTest, PadsAndTruncates) {
  std::vector<BoxRow> rows;
  for (int i = 0; i < 5; ++i) rows.push_back({1.0 * i, 0, 1.0 * i + 1, 1, 10 + i});
  std::vector<float> xy(4 * 3, 7.0f);
  std::vector<std::int64_t> labels(3, 99);
  std::int64_t count = -5;
  EXPECT_EQ(write_boxes(rows, BoxFormat::kXYXY, 3, xy.data(), labels.data(), &count), 2u);
  EXPECT_EQ(count, 3);
  EXPECT_EQ(labels, (std::vector<std::int64_t>{10, 11, 12}));
  EXPECT_EQ(xy, (std::vector<float>{0, 0, 1, 1, 1, 0, 2, 1, 2, 0, 3, 1}));
  // Fewer than max_boxes: the rest zero, labels -1 (the slot held another sample's before).
  rows.resize(2);
  xy.assign(4 * 4, 7.0f);
  labels.assign(4, 99);
  EXPECT_EQ(write_boxes(rows, BoxFormat::kXYXY, 4, xy.data(), labels.data(), &count), 0u);
  EXPECT_EQ(count, 2);
  EXPECT_EQ(labels, (std::vector<std::int64_t>{10, 11, -1, -1}));
  EXPECT_EQ(xy, (std::vector<float>{0, 0, 1, 1, 1, 0, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0}));
  rows.clear();
  EXPECT_EQ(write_boxes(rows, BoxFormat::kCXCYWH, 4, xy.data(), labels.data(), &count), 0u);
  EXPECT_EQ(count, 0);
  EXPECT_EQ(labels, (std::vector<std::int64_t>(4, -1)));
  EXPECT_EQ(xy, (std::vector<float>(16, 0.0f)));
}

// ---- canvas ----

TEST(CanvasTest, WithinOnePixelIsClamped) {
  std::vector<BoxRow> rows = {{-0.5, -1, 100.8, 51, 1}, {10, 10, 20, 20, 2}};
  ASSERT_TRUE(check_boxes_on_canvas(100, 50, &rows).ok());
  expect_row(rows[0], 0, 0, 100, 50, 1);
  expect_row(rows[1], 10, 10, 20, 20, 2);
}

TEST(CanvasTest, FartherNamesTheBoxAndTheCanvas) {
  std::vector<BoxRow> rows = {{0, 0, 10, 10, 1}, {-1.5, 0, 10, 10, 2}};
  expect_corrupt(check_boxes_on_canvas(100, 50, &rows), "box 1: xyxy (-1.5, 0, 10, 10) lies outside its 100x50 image");
  rows = {{0, 0, 10, 10, 1}, {0, 0, 10, 10, 1}, {90, 40, 101.5, 50, 2}};
  expect_corrupt(check_boxes_on_canvas(100, 50, &rows), "box 2: xyxy (90, 40, 101.5, 50) lies outside its 100x50");
  rows = {{0, 0, 10, 51.25, 1}};
  expect_corrupt(check_boxes_on_canvas(100, 50, &rows), "box 0:");
}

// ---- geometry ----

Step crop(int x, int y, int w, int h) { return Step{Step::kCrop, Box{x, y, w, h}, 0, 0}; }
Step resize(int w, int h) { return Step{Step::kResize, Box{}, w, h}; }
Step resize_from(int w, int h, double x0, double y0, double x1, double y1) {
  Step s{Step::kResize, Box{}, w, h, true};
  s.src_box[0] = x0, s.src_box[1] = y0, s.src_box[2] = x1, s.src_box[3] = y1;
  return s;
}
SamplePlan plan_of(std::vector<Step> steps, bool mirror = false, bool vflip = false) {
  SamplePlan p;
  p.steps = std::move(steps);
  p.mirror = mirror;
  p.vflip = vflip;
  return p;
}

// RandomResizedCrop: crop (20, 30) 100x60 of a 200x100 image, then resize to
// 50x120 (x by 0.5, y by 2). torchvision: crop = subtract the offset, clamp to
// 100x60; resize = scale.
TEST(TransformBoxesTest, CropThenResize) {
  std::vector<BoxRow> b = {
      {30, 40, 90, 70, 1},    // inside: (10, 10, 70, 40) -> (5, 20, 35, 80)
      {0, 0, 50, 50, 2},      // over the top left: (-20, -20, 30, 20) -> (0, 0, 30, 20) -> (0, 0, 15, 40)
      {110, 80, 150, 95, 3},  // over the bottom right: (90, 50, 130, 65) -> (90, 50, 100, 60) -> (45, 100, 50, 120)
  };
  int w = 0, h = 0;
  EXPECT_EQ(transform_boxes(plan_of({crop(20, 30, 100, 60), resize(50, 120)}), 200, 100, &b, &w, &h), 0u);
  EXPECT_EQ(w, 50);
  EXPECT_EQ(h, 120);
  ASSERT_EQ(b.size(), 3u);
  expect_row(b[0], 5, 20, 35, 80, 1);
  expect_row(b[1], 0, 0, 15, 40, 2);
  expect_row(b[2], 45, 100, 50, 120, 3);
}

// CenterCrop(60x50) of a 40x30 image: torchvision pads, the crop's top left is
// (int(round((40 - 60) / 2)), int(round((30 - 50) / 2))) = (-10, -10): boxes move by +10.
TEST(TransformBoxesTest, CropPastTheImageIsPadding) {
  std::vector<BoxRow> b = {{0, 0, 40, 30, 0}, {5, 5, 15, 25, 1}};
  int w = 0, h = 0;
  EXPECT_EQ(transform_boxes(plan_of({crop(-10, -10, 60, 50)}), 40, 30, &b, &w, &h), 0u);
  EXPECT_EQ(w, 60);
  EXPECT_EQ(h, 50);
  expect_row(b[0], 10, 10, 50, 40, 0);
  expect_row(b[1], 15, 15, 25, 35, 1);
}

// A resize reading the fractional region (10.5, 20)-(60.5, 60) of a 100x80
// canvas into 25x20: x -> (x - 10.5) / 2, y -> (y - 20) / 2, clamped.
TEST(TransformBoxesTest, ResizeWithSourceBox) {
  std::vector<BoxRow> b = {
      {20.5, 30, 40.5, 50, 0},  // (5, 5, 15, 15)
      {0, 0, 12.5, 100, 1},     // (-5.25, -10, 1, 40) -> (0, 0, 1, 20): exactly 1 wide, kept
      {70, 0, 90, 80, 2},       // (29.75, ..) -> x clamped to (25, 25): dropped
      {0, 0, 12, 100, 3},       // x1 (12 - 10.5) / 2 = 0.75 < 1: dropped
  };
  int w = 0, h = 0;
  EXPECT_EQ(transform_boxes(plan_of({resize_from(25, 20, 10.5, 20, 60.5, 60)}), 100, 80, &b, &w, &h), 2u);
  EXPECT_EQ(w, 25);
  EXPECT_EQ(h, 20);
  ASSERT_EQ(b.size(), 2u);
  expect_row(b[0], 5, 5, 15, 15, 0);
  expect_row(b[1], 0, 0, 1, 20, 1);
}

TEST(TransformBoxesTest, HorizontalAndVerticalFlip) {
  const std::vector<BoxRow> in = {{10, 5, 30, 20, 4}};
  std::vector<BoxRow> b = in;
  transform_boxes(plan_of({}, /*mirror=*/true), 100, 50, &b);
  expect_row(b[0], 70, 5, 90, 20, 4);  // x -> 100 - x
  b = in;
  transform_boxes(plan_of({}, false, /*vflip=*/true), 100, 50, &b);
  expect_row(b[0], 10, 30, 30, 45, 4);  // y -> 50 - y
  b = in;
  transform_boxes(plan_of({}, true, true), 100, 50, &b);
  expect_row(b[0], 70, 30, 90, 45, 4);
  // The flip uses the final canvas: after resize to 200x100 (x2), x -> 200 - x.
  b = in;
  int w = 0, h = 0;
  transform_boxes(plan_of({resize(200, 100)}, true), 100, 50, &b, &w, &h);
  EXPECT_EQ(w, 200);
  expect_row(b[0], 140, 10, 180, 40, 4);
}

TEST(TransformBoxesTest, BoxesCroppedAwayAreDroppedAndCounted) {
  std::vector<BoxRow> b = {
      {0, 0, 10, 10, 0},        // above and left of the crop: (0, 0, 0, 0) after the clamp
      {50, 50, 60, 60, 1},      // inside
      {89.5, 50, 95, 60, 2},    // 0.5 px inside the right edge: (89.5, 90) clamped, narrower than 1
      {100, 0, 120, 10, 3},     // right of the crop entirely
      {60, 39.2, 70, 40.8, 4},  // 0.8 px high after the crop: dropped; keeps order of the others
      {20, 40, 89, 41, 5},      // 1 px high exactly: kept
  };
  EXPECT_EQ(transform_boxes(plan_of({crop(20, 40, 70, 50)}), 120, 100, &b), 4u);
  ASSERT_EQ(b.size(), 2u);
  expect_row(b[0], 30, 10, 40, 20, 1);
  expect_row(b[1], 0, 0, 69, 1, 5);
  b = {{0, 0, 10, 10, 0}};
  EXPECT_EQ(transform_boxes(plan_of({crop(50, 50, 10, 10), resize(224, 224)}), 100, 100, &b), 1u);
  EXPECT_TRUE(b.empty());
}

TEST(TransformBoxesTest, NoStepsKeepsTheCanvas) {
  std::vector<BoxRow> b = {{1, 2, 3, 4, 0}, {1, 2, 1.5, 4, 1}};
  int w = 0, h = 0;
  EXPECT_EQ(transform_boxes(plan_of({}), 64, 48, &b, &w, &h), 1u);
  EXPECT_EQ(w, 64);
  EXPECT_EQ(h, 48);
  expect_row(b[0], 1, 2, 3, 4, 0);
}

TEST(ScaleBoxesTest, ScalesEachAxis) {
  std::vector<BoxRow> b = {{10, 10, 50, 40, 3}};
  scale_boxes(200, 100, 100, 200, &b);
  expect_row(b[0], 5, 20, 25, 80, 3);
}

// torchvision.transforms.v2's functionals on an [n, 4] xyxy tensor, written
// one operation at a time as they are: crop_bounding_boxes (subtract
// (left, top), clamp_bounding_boxes to the crop), resize_bounding_boxes
// (multiply by new/old per axis, clamp), horizontal_flip_bounding_boxes
// (x -> W - x, columns swapped), vertical_flip_bounding_boxes, and
// SanitizeBoundingBoxes(min_size=1) (keep ws >= 1 & hs >= 1). A resize from
// a fractional source region is a crop at a fractional offset, then a resize
// from its size.
struct TvBoxes {
  std::vector<std::array<double, 4>> xyxy;
  std::vector<std::int64_t> labels;
  double canvas_w, canvas_h;

  void clamp() {
    for (auto& b : xyxy) {
      b[0] = std::min(std::max(b[0], 0.0), canvas_w);
      b[2] = std::min(std::max(b[2], 0.0), canvas_w);
      b[1] = std::min(std::max(b[1], 0.0), canvas_h);
      b[3] = std::min(std::max(b[3], 0.0), canvas_h);
    }
  }
  void crop(double top, double left, double height, double width) {
    for (auto& b : xyxy) b = {b[0] - left, b[1] - top, b[2] - left, b[3] - top};
    canvas_w = width;
    canvas_h = height;
    clamp();
  }
  void resize(double new_h, double new_w) {
    const double rw = new_w / canvas_w, rh = new_h / canvas_h;
    for (auto& b : xyxy) b = {b[0] * rw, b[1] * rh, b[2] * rw, b[3] * rh};
    canvas_w = new_w;
    canvas_h = new_h;
    clamp();
  }
  void hflip() {
    for (auto& b : xyxy) b = {canvas_w - b[2], b[1], canvas_w - b[0], b[3]};
  }
  void vflip() {
    for (auto& b : xyxy) b = {b[0], canvas_h - b[3], b[2], canvas_h - b[1]};
  }
  std::size_t sanitize() {
    std::vector<std::array<double, 4>> kept;
    std::vector<std::int64_t> kept_labels;
    for (std::size_t i = 0; i < xyxy.size(); ++i) {
      const auto& b = xyxy[i];
      if (b[2] - b[0] >= 1 && b[3] - b[1] >= 1) {
        kept.push_back(b);
        kept_labels.push_back(labels[i]);
      }
    }
    const std::size_t dropped = xyxy.size() - kept.size();
    xyxy = std::move(kept);
    labels = std::move(kept_labels);
    return dropped;
  }
};

// Random plans (crops inside, across and past the image, resizes with and
// without a source region, flips): every kept box lies on the final canvas
// and is at least 1x1, the count adds up, the order is kept, and the boxes
// are torchvision's.
TEST(TransformBoxesTest, RandomPlansKeepBoxesOnTheCanvas) {
  std::mt19937 rng(20240607);
  auto uniform = [&rng](double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng); };
  auto integer = [&rng](int a, int b) { return std::uniform_int_distribution<int>(a, b)(rng); };
  std::size_t total_dropped = 0, total_kept = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    const int W = integer(1, 400), H = integer(1, 400);
    std::vector<BoxRow> boxes;
    const int n = integer(0, 12);
    for (int i = 0; i < n; ++i) {
      const double x0 = uniform(0, W), y0 = uniform(0, H);
      // Half of them small, so that crops and downscales drop some.
      const double scale = i % 2 ? 4 : std::max(W, H);
      boxes.push_back(
          {x0, y0, std::min<double>(W, x0 + uniform(0, scale)), std::min<double>(H, y0 + uniform(0, scale)), i});
    }
    TvBoxes tv{{}, {}, static_cast<double>(W), static_cast<double>(H)};
    for (const BoxRow& b : boxes) {
      tv.xyxy.push_back({b.x0, b.y0, b.x1, b.y1});
      tv.labels.push_back(b.label);
    }
    SamplePlan plan;
    int cw = W, ch = H;
    const int steps = integer(0, 3);
    for (int s = 0; s < steps; ++s) {
      if (integer(0, 1) == 0) {
        const int w = integer(1, cw + cw / 2), h = integer(1, ch + ch / 2);
        const int x = integer(-cw / 2, cw - 1), y = integer(-ch / 2, ch - 1);
        plan.steps.push_back(crop(x, y, w, h));
        tv.crop(y, x, h, w);
        cw = w, ch = h;
      } else {
        const int w = integer(2, 300), h = integer(2, 300);
        if (integer(0, 1) == 0) {
          plan.steps.push_back(resize(w, h));
          tv.resize(h, w);
        } else {
          double x0 = uniform(0, cw), x1 = uniform(0, cw), y0 = uniform(0, ch), y1 = uniform(0, ch);
          if (x0 > x1) std::swap(x0, x1);
          if (y0 > y1) std::swap(y0, y1);
          if (x1 - x0 < 0.25 || y1 - y0 < 0.25) x0 = 0, x1 = cw, y0 = 0, y1 = ch;
          plan.steps.push_back(resize_from(w, h, x0, y0, x1, y1));
          tv.crop(y0, x0, y1 - y0, x1 - x0);
          tv.resize(h, w);
        }
        cw = w, ch = h;
      }
    }
    plan.mirror = integer(0, 1) == 1;
    plan.vflip = integer(0, 1) == 1;
    if (plan.mirror) tv.hflip();
    if (plan.vflip) tv.vflip();
    const std::size_t tv_dropped = tv.sanitize();

    int ow = 0, oh = 0;
    const std::size_t dropped = transform_boxes(plan, W, H, &boxes, &ow, &oh);
    ASSERT_EQ(ow, cw) << "trial " << trial;
    ASSERT_EQ(oh, ch) << "trial " << trial;
    ASSERT_EQ(dropped + boxes.size(), static_cast<std::size_t>(n)) << "trial " << trial;
    for (std::size_t i = 0; i < boxes.size(); ++i) {
      const BoxRow& b = boxes[i];
      ASSERT_GE(b.x0, 0) << "trial " << trial;
      ASSERT_GE(b.y0, 0) << "trial " << trial;
      ASSERT_LE(b.x1, ow) << "trial " << trial;
      ASSERT_LE(b.y1, oh) << "trial " << trial;
      ASSERT_GE(b.x1 - b.x0, 1) << "trial " << trial;
      ASSERT_GE(b.y1 - b.y0, 1) << "trial " << trial;
      if (i > 0) {
        ASSERT_GT(b.label, boxes[i - 1].label) << "trial " << trial;
      }
    }
    ASSERT_EQ(dropped, tv_dropped) << "trial " << trial;
    for (std::size_t i = 0; i < boxes.size(); ++i) {
      ASSERT_EQ(boxes[i].label, tv.labels[i]) << "trial " << trial;
      const double got[4] = {boxes[i].x0, boxes[i].y0, boxes[i].x1, boxes[i].y1};
      for (int j = 0; j < 4; ++j) ASSERT_NEAR(got[j], tv.xyxy[i][static_cast<std::size_t>(j)], 1e-9) << trial;
    }
    total_dropped += dropped;
    total_kept += boxes.size();
  }
  // The plans exercised both outcomes.
  EXPECT_GT(total_dropped, 1000u);
  EXPECT_GT(total_kept, 1000u);
}

}  // namespace
}  // namespace stoker::detail
