// stoker/names.h: every enum's names round-trip, and an unknown name is
// refused listing the allowed ones; the options codec and the transforms'
// JSON print the same names.
#include "stoker/names.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "stoker/options.h"
#include "transform/transform_defs.h"

namespace stoker {
namespace {

TEST(NamesTest, EveryEnumRoundTripsAndIsUnique) {
  int enums = 0;
  for_each_enum([&](auto names) {
    using N = decltype(names);
    ++enums;
    std::set<std::string> seen;
    for (const auto& [value, name] : N::kNames) {
      EXPECT_TRUE(seen.insert(name).second) << N::kKey << ": " << name << " twice";
      EXPECT_STREQ(name_of(value), name);
      ASSERT_TRUE(find_name<std::decay_t<decltype(value)>>(name).has_value()) << name;
      EXPECT_EQ(*find_name<std::decay_t<decltype(value)>>(name), value);
    }
  });
  EXPECT_EQ(enums, 14);  // as NamedEnums lists them
}

TEST(NamesTest, UnknownNameListsTheAllowed) {
  EXPECT_FALSE(find_name<Cache>("disk").has_value());
  try {
    (void)parse<Cache>("disk", "cache");
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::kInvalidArgument);
    EXPECT_STREQ(e.what(), "cache must be one of 'mmap', 'ram', 'decoded', 'auto', got 'disk'");
  }
  EXPECT_EQ(allowed_names<Interpolation>(), "'nearest', 'bilinear'");
}

TEST(NamesTest, CodecAndTransformsPrintTheTablesNames) {
  LoaderOptions o;
  o.cache.mode = Cache::kDecoded;
  o.layout = Layout::kNHWC;
  o.transforms = {AutoAugment{AutoAugmentPolicy::kSvhn, Interpolation::kBilinear, {0, 0, 0}}};
  const std::string json = options_to_json(o);
  EXPECT_NE(json.find(std::string("\"cache\":\"") + name_of(Cache::kDecoded) + "\""), std::string::npos) << json;
  EXPECT_NE(json.find(std::string("\"layout\":\"") + name_of(Layout::kNHWC) + "\""), std::string::npos) << json;
  const LoaderOptions back = options_from_json(json);
  EXPECT_EQ(back.cache.mode, Cache::kDecoded);
  EXPECT_EQ(back.layout, Layout::kNHWC);
  const auto& aa = std::get<AutoAugment>(back.transforms.at(0));
  EXPECT_EQ(aa.policy, AutoAugmentPolicy::kSvhn);
  EXPECT_EQ(aa.interpolation, Interpolation::kBilinear);
  EXPECT_EQ(detail::transform_repr(back.transforms[0]),
            "AutoAugment(policy=svhn, interpolation=bilinear, fill=[0, 0, 0])");
  EXPECT_STREQ(cache_name(Cache::kRam), "ram");
  try {
    (void)detail::transform_from_json(R"({"name": "RandAugment", "interpolation": "bicubic"})");
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "transforms: interpolation must be one of 'nearest', 'bilinear', got 'bicubic'");
  }
}

}  // namespace
}  // namespace stoker
