// The table of field kinds (src/sample/fields/): one definition per kind,
// found by kind and by name, and what the options codec and the schema
// checks read from it.
#include "sample/fields/field_def.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "stoker/options.h"

namespace stoker {
namespace {

using detail::field_def;
using detail::field_defs;
using detail::FieldDef;
using detail::Role;

// Each entry sits at its kind's position and is found by its name.
TEST(FieldsTest, FoundByKindAndByName) {
  std::set<std::string> names;
  for (std::size_t i = 0; i < field_defs().size(); ++i) {
    const FieldDef& d = *field_defs()[i];
    EXPECT_EQ(static_cast<std::size_t>(d.kind), i) << d.name;
    EXPECT_EQ(&field_def(d.kind), &d);
    EXPECT_EQ(field_def(std::string(d.name)), &d);
    EXPECT_TRUE(names.insert(d.name).second) << "two kinds named " << d.name;
    EXPECT_NE(d.make, nullptr) << d.name;
  }
  EXPECT_EQ(field_def(std::string("pixels")), nullptr);
}

// A follower names an owner kind and says why it cannot stand alone.
TEST(FieldsTest, FollowersFollowAnOwner) {
  for (const FieldDef* d : field_defs()) {
    if (d->role != Role::kFollower) {
      EXPECT_EQ(d->follows, d->kind) << d->name;
      continue;
    }
    EXPECT_EQ(field_def(d->follows).role, Role::kOwner) << d->name;
    EXPECT_NE(d->without_owner, nullptr) << d->name;
  }
}

// Every kind goes through the options codec with the parameters it takes.
TEST(FieldsTest, EveryKindRoundTripsThroughTheOptionsCodec) {
  for (const FieldDef* d : field_defs()) {
    LoaderOptions o;
    Field f{std::string("f_") + d->name, d->kind, "m"};
    auto takes = [&](const std::string& p) {
      return std::find_if(d->params.begin(), d->params.end(), [&](const char* x) { return x && p == x; }) !=
             d->params.end();
    };
    f.fill = takes("fill") ? 7 : 0;
    f.max_boxes = takes("max_boxes") ? 9 : 100;
    f.format = takes("format") ? BoxFormat::kCXCYWH : BoxFormat::kXYXY;
    f.max_bytes = takes("max_bytes") ? 11 : 256;
    o.fields = {f};
    const LoaderOptions back = options_from_json(options_to_json(o));
    ASSERT_EQ(back.fields.size(), 1u) << d->name;
    EXPECT_EQ(back.fields[0].name, f.name);
    EXPECT_EQ(back.fields[0].kind, d->kind);
    EXPECT_EQ(back.fields[0].member, "m");
    EXPECT_EQ(back.fields[0].fill, f.fill) << d->name;
    EXPECT_EQ(back.fields[0].max_boxes, f.max_boxes) << d->name;
    EXPECT_EQ(back.fields[0].format, f.format) << d->name;
    EXPECT_EQ(back.fields[0].max_bytes, f.max_bytes) << d->name;
  }
}

}  // namespace
}  // namespace stoker
