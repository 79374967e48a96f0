// List files whose header row names columns (image,mask,label), and the
// legacy `path,label` formats beside them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "source/list_file.h"
#include "stoker/source.h"
#include "test_util.h"

namespace stoker {
namespace {

using testing::TempDir;
using testing::write_file;

std::string text(const std::vector<std::uint8_t>& b) { return std::string(b.begin(), b.end()); }

std::string open_error(const std::string& list) {
  try {
    open_source(list);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ListColumnsTest, ImageMaskLabel) {
  TempDir d;
  write_file(d.file("imgs/a.jpg"), std::string("A"));
  write_file(d.file("masks/a.png"), std::string("MA"));
  write_file(d.file("abs/b.jpg"), std::string("B"));
  write_file(d.file("abs/b.png"), std::string("MB"));
  write_file(d.file("list.csv"), "# segmentation\nimage,mask,label\r\nimgs/a.jpg,masks/a.png,3\r\n\n" +
                                     d.file("abs/b.jpg") + " , " + d.file("abs/b.png") + " , 0\n");
  auto s = open_source(d.file("list.csv"));
  ASSERT_EQ(s->size(), 2u);
  EXPECT_EQ(s->key(0), d.file("imgs/a.jpg"));
  EXPECT_EQ(s->key(1), d.file("abs/b.jpg"));
  EXPECT_EQ(s->label(0), 3);
  EXPECT_EQ(s->label(1), 0);
  EXPECT_EQ(s->members(0), std::vector<std::string>{"mask"});
  std::vector<std::uint8_t> b;
  ASSERT_TRUE(s->read(0, &b).ok());
  EXPECT_EQ(text(b), "A");
  ASSERT_TRUE(s->read_member(0, "mask", &b).ok());
  EXPECT_EQ(text(b), "MA");
  ASSERT_TRUE(s->read_member(1, "mask", &b).ok());
  EXPECT_EQ(text(b), "MB");
  ASSERT_TRUE(s->read_member(1, "image", &b).ok());  // the primary column is the record's file
  EXPECT_EQ(text(b), "B");
  ASSERT_TRUE(s->read_member(0, "label", &b).ok());
  EXPECT_EQ(text(b), "3");
  EXPECT_EQ(s->describe(), "list file '" + d.file("list.csv") + "' (2 records; columns image, mask, label)");
}

TEST(ListColumnsTest, PrimaryIsImageElsePathElseFirst) {
  TempDir d;
  write_file(d.file("a.csv"), std::string("depth,seg,image\nd.npy,s.png,i.jpg\n"));
  auto a = open_source(d.file("a.csv"));
  EXPECT_EQ(a->key(0), d.file("i.jpg"));
  EXPECT_EQ(a->label(0), -1);  // no label column
  EXPECT_EQ(a->members(0), (std::vector<std::string>{"depth", "seg"}));
  write_file(d.file("b.csv"), std::string("label,seg,path\n1,s.png,p.jpg\n"));
  auto b = open_source(d.file("b.csv"));
  EXPECT_EQ(b->key(0), d.file("p.jpg"));
  EXPECT_EQ(b->label(0), 1);
  EXPECT_EQ(b->members(0), std::vector<std::string>{"seg"});
  write_file(d.file("c.csv"), std::string("rgb,depth,seg\nr.jpg,d.npy,s.png\n"));
  auto c = open_source(d.file("c.csv"));
  EXPECT_EQ(c->key(0), d.file("r.jpg"));
  EXPECT_EQ(c->members(0), (std::vector<std::string>{"depth", "seg"}));
}

TEST(ListColumnsTest, TwoNamedFileColumns) {
  TempDir d;
  write_file(d.file("m.png"), std::string("M"));
  write_file(d.file("list.csv"), std::string("image,mask\ni.jpg,m.png\n"));
  auto s = open_source(d.file("list.csv"));
  EXPECT_EQ(s->key(0), d.file("i.jpg"));
  EXPECT_EQ(s->label(0), -1);
  EXPECT_EQ(s->members(0), std::vector<std::string>{"mask"});
  std::vector<std::uint8_t> b;
  ASSERT_TRUE(s->read_member(0, "mask", &b).ok());
  EXPECT_EQ(text(b), "M");
}

TEST(ListColumnsTest, QuotedPathsWithCommasAndQuotes) {
  TempDir d;
  write_file(d.file("a,b.jpg"), std::string("AB"));
  write_file(d.file("m \"1\".png"), std::string("M1"));
  write_file(d.file("list.csv"), std::string("image,mask,label\n \"a,b.jpg\" ,\"m \"\"1\"\".png\",2\n"));
  auto s = open_source(d.file("list.csv"));
  ASSERT_EQ(s->size(), 1u);
  EXPECT_EQ(s->key(0), d.file("a,b.jpg"));
  EXPECT_EQ(s->label(0), 2);
  std::vector<std::uint8_t> b;
  ASSERT_TRUE(s->read(0, &b).ok());
  EXPECT_EQ(text(b), "AB");
  ASSERT_TRUE(s->read_member(0, "mask", &b).ok());
  EXPECT_EQ(text(b), "M1");
  write_file(d.file("bad.csv"), std::string("image,mask,label\n\"a.jpg,m.png,2\n"));
  EXPECT_NE(open_error(d.file("bad.csv")).find("bad.csv:2: unterminated quote"), std::string::npos)
      << open_error(d.file("bad.csv"));
}

TEST(ListColumnsTest, ValueColumnsReadAsText) {
  TempDir d;
  write_file(d.file("list.csv"),
             std::string("image,class_id,mask,label\na.jpg,7,m.png,1\nb.jpg,,n.png,0\nc.jpg,-12,,1\n"));
  auto s = open_source(d.file("list.csv"));
  ASSERT_EQ(s->size(), 3u);
  EXPECT_EQ(s->members(0), (std::vector<std::string>{"class_id", "mask"}));
  std::vector<std::uint8_t> b;
  ASSERT_TRUE(s->read_member(0, "class_id", &b).ok());
  EXPECT_EQ(b, (std::vector<std::uint8_t>{'7'}));
  ASSERT_TRUE(s->read_member(2, "class_id", &b).ok());
  EXPECT_EQ(text(b), "-12");
  // Empty cells: NotFound naming the column.
  Status st = s->read_member(1, "class_id", &b);
  EXPECT_EQ(st.code(), Code::kNotFound);
  EXPECT_NE(st.message().find("no value in column 'class_id'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("b.jpg"), std::string::npos) << st.message();
  st = s->read_member(2, "mask", &b);
  EXPECT_EQ(st.code(), Code::kNotFound);
  EXPECT_NE(st.message().find("column 'mask'"), std::string::npos) << st.message();
  // A file column whose file is missing: read_file's NotFound naming the resolved path.
  st = s->read_member(0, "mask", &b);
  EXPECT_EQ(st.code(), Code::kNotFound);
  EXPECT_NE(st.message().find(d.file("m.png")), std::string::npos) << st.message();
}

TEST(ListColumnsTest, UnknownMemberListsColumns) {
  TempDir d;
  write_file(d.file("list.csv"), std::string("image,mask,label\na.jpg,a.png,1\n"));
  auto s = open_source(d.file("list.csv"));
  std::vector<std::uint8_t> b;
  Status st = s->read_member(0, "seg", &b);
  EXPECT_EQ(st.code(), Code::kNotFound);
  EXPECT_EQ(st.message(), "no column 'seg' (columns: image, mask, label)");
  EXPECT_EQ(s->read_member(0, "mask.png", &b).code(), Code::kNotFound);  // exact names only
}

TEST(ListColumnsTest, BadRowsNameFileAndLine) {
  TempDir d;
  write_file(d.file("count.csv"), std::string("image,mask,label\na.jpg,a.png,1\n# c\nb.jpg,1\n"));
  std::string e = open_error(d.file("count.csv"));
  EXPECT_NE(e.find("count.csv:4:"), std::string::npos) << e;
  EXPECT_NE(e.find("expected 3 cells"), std::string::npos) << e;
  EXPECT_NE(e.find("found 2"), std::string::npos) << e;
  write_file(d.file("label.csv"), std::string("image,mask,label\na.jpg,a.png,x\n"));
  e = open_error(d.file("label.csv"));
  EXPECT_NE(e.find("label.csv:2: label must be a non-negative integer"), std::string::npos) << e;
  write_file(d.file("neg.csv"), std::string("image,mask,label\na.jpg,a.png,-1\n"));
  EXPECT_NE(open_error(d.file("neg.csv")).find("neg.csv:2:"), std::string::npos);
  write_file(d.file("empty.csv"), std::string("image,mask,label\n,a.png,1\n"));
  EXPECT_NE(open_error(d.file("empty.csv")).find("empty.csv:2: empty 'image' cell"), std::string::npos);
  write_file(d.file("dup.csv"), std::string("# x\nimage,mask,mask\na,b,c\n"));
  EXPECT_NE(open_error(d.file("dup.csv")).find("dup.csv:2: header names column 'mask' twice"), std::string::npos);
  write_file(d.file("noname.csv"), std::string("image,,label\na,b,1\n"));
  EXPECT_NE(open_error(d.file("noname.csv")).find("noname.csv:1: header column 2 has no name"), std::string::npos);
  write_file(d.file("header_only.csv"), std::string("image,mask,label\n"));
  EXPECT_NE(open_error(d.file("header_only.csv")).find("lists no records"), std::string::npos);
}

TEST(ListColumnsTest, LegacyWithoutHeader) {
  TempDir d;
  write_file(d.file("list.txt"), std::string("a.jpg,1\r\n/abs/b.jpg , 2\nx,y.jpg,3\nm.jpg,n.png,0\n"));
  auto s = open_source(d.file("list.txt"));
  ASSERT_EQ(s->size(), 4u);
  EXPECT_EQ(s->key(0), d.file("a.jpg"));
  EXPECT_EQ(s->key(1), "/abs/b.jpg");
  EXPECT_EQ(s->key(2), d.file("x,y.jpg"));  // the label is the last comma field
  EXPECT_EQ(s->key(3), d.file("m.jpg,n.png"));
  EXPECT_EQ(s->label(0), 1);
  EXPECT_EQ(s->label(3), 0);
  EXPECT_TRUE(s->members(0).empty());
  std::vector<std::uint8_t> b;
  EXPECT_EQ(s->read_member(0, "mask", &b).code(), Code::kNotFound);
  EXPECT_EQ(s->describe(), "list file '" + d.file("list.txt") + "' (4 records)");
}

TEST(ListColumnsTest, LegacyTwoColumnHeader) {
  TempDir d;
  // Any header of two columns whose second holds integers: the second is the label.
  write_file(d.file("a.csv"), std::string("filename,class\nx,y.jpg,3\nz.jpg,0\n"));
  auto a = open_source(d.file("a.csv"));
  ASSERT_EQ(a->size(), 2u);
  EXPECT_EQ(a->key(0), d.file("x,y.jpg"));
  EXPECT_EQ(a->label(0), 3);
  EXPECT_EQ(a->label(1), 0);
  EXPECT_TRUE(a->members(0).empty());
  EXPECT_EQ(a->describe(), "list file '" + d.file("a.csv") + "' (2 records)");
  write_file(d.file("b.csv"), std::string("path,label\n\"q,r.jpg\",4\nx,y.jpg,5\n"));
  auto b = open_source(d.file("b.csv"));
  ASSERT_EQ(b->size(), 2u);
  EXPECT_EQ(b->key(0), d.file("q,r.jpg"));
  EXPECT_EQ(b->label(0), 4);
  EXPECT_EQ(b->key(1), d.file("x,y.jpg"));
  // A bad label after a `path,label` header still names the line.
  write_file(d.file("c.csv"), std::string("path,label\na.jpg,x\n"));
  EXPECT_NE(open_error(d.file("c.csv")).find("c.csv:2: label must be a non-negative integer"), std::string::npos);
  write_file(d.file("d.csv"), std::string("path,label\na.jpg,1\nb.jpg,x\n"));
  EXPECT_NE(open_error(d.file("d.csv")).find("d.csv:3:"), std::string::npos);
}

// A header of `image` (or `path`) alone: images without labels (-1), one
// cell per row (quoted cells may hold commas); a row of two cells is an error
// naming the line; any other lone word is neither a header nor a path.
TEST(ListColumnsTest, ImageColumnAloneIsAnUnlabelledSet) {
  TempDir d;
  write_file(d.file("ssl.csv"),
             std::string("# unlabelled\nimage\r\na.webp\n\n\"b,c.tif\"\n") + d.file("abs/d.png") + "\n");
  auto s = open_source(d.file("ssl.csv"));
  ASSERT_EQ(s->size(), 3u);
  EXPECT_EQ(s->key(0), d.file("a.webp"));
  EXPECT_EQ(s->key(1), d.file("b,c.tif"));
  EXPECT_EQ(s->key(2), d.file("abs/d.png"));
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(s->label(i), -1);
  EXPECT_TRUE(s->members(0).empty());
  EXPECT_EQ(s->describe(), "list file '" + d.file("ssl.csv") + "' (3 records; columns image)");
  write_file(d.file("path.csv"), std::string("path\nx.jpg\n"));
  auto p = open_source(d.file("path.csv"));
  ASSERT_EQ(p->size(), 1u);
  EXPECT_EQ(p->label(0), -1);
  write_file(d.file("two.csv"), std::string("image\na.jpg\nb.jpg,3\n"));
  EXPECT_NE(open_error(d.file("two.csv")).find("two.csv:3: expected 1 cells (image), found 2"), std::string::npos)
      << open_error(d.file("two.csv"));
  write_file(d.file("word.csv"), std::string("filename\na.jpg\n"));
  EXPECT_NE(open_error(d.file("word.csv")).find("word.csv:1: expected 'path,label' or a header row ('image' alone"),
            std::string::npos)
      << open_error(d.file("word.csv"));
  write_file(d.file("empty.csv"), std::string("image\n# nothing\n"));
  EXPECT_NE(open_error(d.file("empty.csv")).find("lists no records"), std::string::npos);
}

TEST(ListColumnsTest, ParserWithoutColumnsOutput) {
  std::vector<std::string> paths;
  std::vector<std::int64_t> labels;
  ASSERT_TRUE(detail::parse_list("image,mask,label\na.jpg,b.png,1\n", "x.csv", "base", &paths, &labels).ok());
  EXPECT_EQ(paths, std::vector<std::string>{"base/a.jpg"});
  EXPECT_EQ(labels, std::vector<std::int64_t>{1});
}

}  // namespace
}  // namespace stoker
