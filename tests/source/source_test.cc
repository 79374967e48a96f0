#include <gtest/gtest.h>

#include "stoker/source.h"
#include "test_util.h"

namespace stoker {
namespace {

using testing::TempDir;
using testing::write_file;

TEST(ImageFolderTest, ClassesSortedAndFilesInTorchvisionOrder) {
  TempDir d;
  for (const char* f : {"b/z.jpg", "b/a.PNG", "a/sub/x.jpeg", "a/y.jpg", "a/notes.txt", "a/sub2/w.JPG", "c/q.webp"}) {
    write_file(d.file(f), std::string("x"));
  }
  auto s = open_source(d.path());
  ASSERT_EQ(s->classes(), (std::vector<std::string>{"a", "b", "c"}));
  // sorted(os.walk(a)): "a" first (y.jpg), then "a/sub", then "a/sub2"; then b; then c.
  std::vector<std::string> keys;
  std::vector<std::int64_t> labels;
  for (std::size_t i = 0; i < s->size(); ++i) {
    keys.push_back(s->key(i).substr(d.path().size() + 1));
    labels.push_back(s->label(i));
  }
  EXPECT_EQ(keys, (std::vector<std::string>{"a/y.jpg", "a/sub/x.jpeg", "a/sub2/w.JPG", "b/a.PNG", "b/z.jpg",
                                            "c/q.webp"}));
  EXPECT_EQ(labels, (std::vector<std::int64_t>{0, 0, 0, 1, 1, 2}));
  std::vector<std::uint8_t> bytes;
  ASSERT_TRUE(s->read(0, &bytes).ok());
  EXPECT_EQ(bytes, std::vector<std::uint8_t>{'x'});
}

TEST(ImageFolderTest, EmptyOrMissingFoldersThrow) {
  TempDir d;
  EXPECT_THROW(open_source(d.file("missing")), Error);
  EXPECT_THROW(open_source(d.path()), Error);  // no class directories
  write_file(d.file("a/readme.txt"), std::string("x"));
  try {
    open_source(d.path());
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::kNotFound);
    EXPECT_NE(std::string(e.what()).find("no image files"), std::string::npos);
  }
}

TEST(ListFileTest, ParsesPathsLabelsHeaderAndComments) {
  TempDir d;
  write_file(d.file("list.csv"), std::string("path,label\n# comment\nimgs/a.jpg,3\n  /abs/b.png , 0 \n\n"));
  auto s = open_source(d.file("list.csv"));
  ASSERT_EQ(s->size(), 2u);
  EXPECT_EQ(s->key(0), d.file("imgs/a.jpg"));
  EXPECT_EQ(s->label(0), 3);
  EXPECT_EQ(s->key(1), "/abs/b.png");
  std::vector<std::uint8_t> bytes;
  Status st = s->read(0, &bytes);
  EXPECT_EQ(st.code(), Code::kNotFound);
  EXPECT_NE(st.message().find("imgs/a.jpg"), std::string::npos);
}

TEST(ListFileTest, BadLinesNameFileAndLine) {
  TempDir d;
  write_file(d.file("bad.csv"), std::string("a.jpg,1\nb.jpg,x\n"));
  try {
    open_source(d.file("bad.csv"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.csv:2"), std::string::npos) << e.what();
  }
  write_file(d.file("nocomma.csv"), std::string("a.jpg\n"));
  EXPECT_THROW(open_source(d.file("nocomma.csv")), Error);
}

}  // namespace
}  // namespace stoker
