// COCO instances JSON as a Source, and paired folders: records, members and
// the errors that name the file.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "source/paired_folder.h"
#include "stoker/source.h"
#include "test_util.h"
#include "transform/boxes.h"

namespace stoker {
namespace {

using testing::TempDir;
using testing::write_file;

std::string text(const std::vector<std::uint8_t>& b) { return std::string(b.begin(), b.end()); }

std::string open_error(const std::string& path, const CocoOptions& o = {}) {
  try {
    open_coco(path, o);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

constexpr const char* kCoco = R"({
  "images": [{"id": 9, "file_name": "b.jpg"}, {"id": 2, "file_name": "sub/a.jpg"}, {"id": 5, "file_name": "c.jpg"}],
  "annotations": [
    {"id": 1, "image_id": 2, "category_id": 18, "bbox": [10.5, 20, 30, 40.25], "iscrowd": 0,
     "segmentation": [[1, 2, 3, 4, 5, 6]]},
    {"id": 2, "image_id": 2, "category_id": 1, "bbox": [0, 0, 5, 5], "iscrowd": 1, "segmentation": {"counts": "x"}},
    {"id": 3, "image_id": 9, "category_id": 3, "bbox": [1, 1, 2, 2]}
  ],
  "categories": [{"id": 1, "name": "person"}]
})";

TEST(CocoSourceTest, RecordsInIdOrderWithBoxesAndIds) {
  TempDir d;
  write_file(d.file("ann/instances.json"), std::string(kCoco));
  write_file(d.file("img/sub/a.jpg"), std::string("A"));
  auto s = open_source(d.file("ann/instances.json"), "cls", "", CocoOptions{d.file("img"), false, false});
  ASSERT_EQ(s->size(), 3u);
  EXPECT_EQ(s->key(0), d.file("img/sub/a.jpg"));  // id 2
  EXPECT_EQ(s->relative_key(0), "sub/a.jpg");
  EXPECT_EQ(s->key(2), d.file("img/b.jpg"));  // id 9
  EXPECT_EQ(s->label(0), -1);
  std::vector<std::uint8_t> b;
  ASSERT_TRUE(s->read(0, &b).ok());
  EXPECT_EQ(text(b), "A");
  EXPECT_EQ(s->read(1, &b).code(), Code::kNotFound);  // c.jpg is not there: a counted sample error
  ASSERT_TRUE(s->read_member(0, "image_id", &b).ok());
  EXPECT_EQ(text(b), "2");
  ASSERT_TRUE(s->read_member(0, "boxes", &b).ok());
  std::vector<detail::BoxRow> rows;
  // The member says xywh: parsed as such whatever the field's format.
  ASSERT_TRUE(detail::parse_boxes(b.data(), b.size(), BoxFormat::kXYXY, "", &rows).ok()) << text(b);
  ASSERT_EQ(rows.size(), 1u);  // the crowd annotation dropped
  EXPECT_DOUBLE_EQ(rows[0].x0, 10.5);
  EXPECT_DOUBLE_EQ(rows[0].y1, 60.25);
  EXPECT_EQ(rows[0].label, 18);
  ASSERT_TRUE(s->read_member(1, "boxes", &b).ok());  // no annotations: zero boxes
  ASSERT_TRUE(detail::parse_boxes(b.data(), b.size(), BoxFormat::kXYXY, "", &rows).ok());
  EXPECT_TRUE(rows.empty());
  EXPECT_EQ(s->read_member(0, "mask", &b).code(), Code::kNotFound);
  EXPECT_NE(s->describe().find("3 images, 2 boxes, 1 crowd annotations dropped"), std::string::npos) << s->describe();
}

TEST(CocoSourceTest, CrowdKeptEmptySkippedAndRootDefaultsToTheJsonFolder) {
  TempDir d;
  write_file(d.file("instances.json"), std::string(kCoco));
  auto kept = open_coco(d.file("instances.json"), {"", false, true});
  std::vector<std::uint8_t> b;
  std::vector<detail::BoxRow> rows;
  ASSERT_TRUE(kept->read_member(0, "boxes", &b).ok());
  ASSERT_TRUE(detail::parse_boxes(b.data(), b.size(), BoxFormat::kXYXY, "", &rows).ok());
  EXPECT_EQ(rows.size(), 2u);
  EXPECT_EQ(kept->key(0), d.file("sub/a.jpg"));
  auto skipped = open_coco(d.file("instances.json"), {"", true, false});
  ASSERT_EQ(skipped->size(), 2u);  // id 5 has no annotation
  ASSERT_TRUE(skipped->read_member(1, "image_id", &b).ok());
  EXPECT_EQ(text(b), "9");
}

TEST(CocoSourceTest, BadFilesNameTheFileAndBadAnnotationsTheirImage) {
  TempDir d;
  write_file(d.file("trunc.json"), std::string(kCoco).substr(0, 100));
  EXPECT_NE(open_error(d.file("trunc.json")).find("malformed JSON at byte"), std::string::npos);
  write_file(d.file("noimages.json"), std::string(R"({"annotations": []})"));
  EXPECT_NE(open_error(d.file("noimages.json")).find("no \"images\" list"), std::string::npos);
  write_file(d.file("dup.json"), std::string(R"({"images": [{"id": 1, "file_name": "a"}, {"id": 1, "file_name": "b"}]})"));
  EXPECT_NE(open_error(d.file("dup.json")).find("image id 1 appears twice"), std::string::npos);
  write_file(d.file("orphan.json"),
             std::string(R"({"images": [{"id": 1, "file_name": "a"}], "annotations": [{"image_id": 4, "bbox": [0, 0, 1, 1]}]})"));
  EXPECT_NE(open_error(d.file("orphan.json")).find("annotations[0] refers to image id 4"), std::string::npos);
  write_file(d.file("types.json"), std::string(R"({"images": [{"id": "x", "file_name": "a"}]})"));
  EXPECT_NE(open_error(d.file("types.json")).find("images[0].id must be an integer"), std::string::npos);
  write_file(d.file("crowdtype.json"),
             std::string(R"({"images": [{"id": 1, "file_name": "a"}], "annotations": [{"image_id": 1, "iscrowd": "no"}]})"));
  EXPECT_NE(open_error(d.file("crowdtype.json")).find("crowdtype.json"), std::string::npos);
  EXPECT_NE(open_error(d.file("missing.json")).find("missing.json"), std::string::npos);
  write_file(d.file("badbox.json"),
             std::string(R"({"images": [{"id": 1, "file_name": "a"}, {"id": 2, "file_name": "b"}],
                "annotations": [{"id": 7, "image_id": 1, "category_id": 1, "bbox": [0, 0, 1]},
                                {"id": 8, "image_id": 2, "category_id": 2.5, "bbox": [0, 0, 1, 1]}]})"));
  auto s = open_coco(d.file("badbox.json"));
  std::vector<std::uint8_t> b;
  Status st = s->read_member(0, "boxes", &b);
  EXPECT_EQ(st.code(), Code::kCorrupt);
  EXPECT_NE(st.message().find("image id 1: annotation (id 7): bbox must be [x, y, width, height]"), std::string::npos)
      << st.message();
  st = s->read_member(1, "boxes", &b);
  EXPECT_NE(st.message().find("category_id must be an integer, got 2.5"), std::string::npos) << st.message();
  ASSERT_TRUE(s->read_member(0, "image_id", &b).ok());  // the rest of the record is fine
}

TEST(PairedFolderTest, MatchesByRelativePathWithoutExtension) {
  TempDir d;
  write_file(d.file("masks/a/x.png"), std::string("MX"));
  write_file(d.file("masks/a/y.png"), std::string("Y1"));
  write_file(d.file("masks/a/y.npy"), std::string("Y2"));
  write_file(d.file("masks/z.v1.png"), std::string("Z"));
  detail::PairedFolder f(d.file("masks"));
  std::vector<std::uint8_t> b;
  ASSERT_TRUE(f.read("a/x.jpg", &b).ok());
  EXPECT_EQ(text(b), "MX");
  ASSERT_TRUE(f.read("z.v1.jpeg", &b).ok());  // only the last extension is the record's
  EXPECT_EQ(text(b), "Z");
  Status st = f.read("a/y.jpg", &b);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("several files 'a/y.*'"), std::string::npos);
  st = f.read("b/x.jpg", &b);
  EXPECT_EQ(st.code(), Code::kNotFound);
  EXPECT_NE(st.message().find("no file 'b/x.*' in the paired folder"), std::string::npos);
  EXPECT_THROW(detail::PairedFolder(d.file("nope")), Error);
}

}  // namespace
}  // namespace stoker
