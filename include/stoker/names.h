// The names of every enum stoker parses or prints, each spelled once here:
// as the options JSON, the transforms' JSON and reprs, stats(), the doctor
// and Python (stoker._stoker._enum_names(), stoker.InterpolationMode, ...)
// spell them. Field kinds are named by their definitions
// (src/sample/fields/), one file per kind.
//
//   name_of(Cache::kRam)                    -> "ram"
//   parse<Cache>("disk", "cache")           -> throws Error(kInvalidArgument):
//       "cache must be one of 'mmap', 'ram', 'decoded', 'auto', got 'disk'"
//   find_name<BoxFormat>("xywh")            -> BoxFormat::kXYWH (nullopt if unknown)
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "stoker/fields.h"
#include "stoker/options.h"
#include "stoker/status.h"
#include "stoker/transforms.h"
#include "stoker/volume.h"

namespace stoker {

// An enum's names: kKey, the name the enum goes by (an option's name where it
// is one), and {value, "name"} for each value, in the enum's order.
template <typename E>
struct EnumNames;

template <>
struct EnumNames<OnCorrupt> {
  static constexpr const char* kKey = "on_corrupt";
  static constexpr std::pair<OnCorrupt, const char*> kNames[] = {{OnCorrupt::kSkip, "skip"},
                                                                 {OnCorrupt::kRaise, "raise"}};
};
template <>
struct EnumNames<DType> {
  static constexpr const char* kKey = "dtype";
  static constexpr std::pair<DType, const char*> kNames[] = {{DType::kFloat32, "float32"}, {DType::kUInt8, "uint8"}};
};
template <>
struct EnumNames<SampleKind> {
  static constexpr const char* kKey = "kind";
  static constexpr std::pair<SampleKind, const char*> kNames[] = {
      {SampleKind::kAuto, "auto"}, {SampleKind::kImage, "image"}, {SampleKind::kArray, "array"}};
};
template <>
struct EnumNames<Layout> {
  static constexpr const char* kKey = "layout";
  static constexpr std::pair<Layout, const char*> kNames[] = {{Layout::kNCHW, "NCHW"}, {Layout::kNHWC, "NHWC"}};
};
template <>
struct EnumNames<DecodeScale> {
  static constexpr const char* kKey = "decode_scale";
  static constexpr std::pair<DecodeScale, const char*> kNames[] = {{DecodeScale::kExact, "exact"},
                                                                   {DecodeScale::kAuto, "auto"}};
};
template <>
struct EnumNames<Progress> {
  static constexpr const char* kKey = "progress";
  static constexpr std::pair<Progress, const char*> kNames[] = {
      {Progress::kAuto, "auto"}, {Progress::kOn, "on"}, {Progress::kOff, "off"}};
};
template <>
struct EnumNames<Cache> {
  static constexpr const char* kKey = "cache";
  static constexpr std::pair<Cache, const char*> kNames[] = {
      {Cache::kMmap, "mmap"}, {Cache::kRam, "ram"}, {Cache::kDecoded, "decoded"}, {Cache::kAuto, "auto"}};
};
template <>
struct EnumNames<ImageChannels> {
  static constexpr const char* kKey = "image_channels";
  static constexpr std::pair<ImageChannels, const char*> kNames[] = {{ImageChannels::kRgb, "rgb"},
                                                                     {ImageChannels::kStored, "stored"}};
};
template <>
struct EnumNames<ImageDType> {
  static constexpr const char* kKey = "image_dtype";
  static constexpr std::pair<ImageDType, const char*> kNames[] = {{ImageDType::kUint8, "uint8"},
                                                                  {ImageDType::kStored, "stored"}};
};
template <>
struct EnumNames<BoxFormat> {
  static constexpr const char* kKey = "box_format";
  static constexpr std::pair<BoxFormat, const char*> kNames[] = {
      {BoxFormat::kXYXY, "xyxy"}, {BoxFormat::kXYWH, "xywh"}, {BoxFormat::kCXCYWH, "cxcywh"}};
};
template <>
struct EnumNames<Interpolation> {
  static constexpr const char* kKey = "interpolation";
  static constexpr std::pair<Interpolation, const char*> kNames[] = {{Interpolation::kNearest, "nearest"},
                                                                     {Interpolation::kBilinear, "bilinear"}};
};
template <>
struct EnumNames<AutoAugmentPolicy> {
  static constexpr const char* kKey = "autoaugment_policy";
  static constexpr std::pair<AutoAugmentPolicy, const char*> kNames[] = {{AutoAugmentPolicy::kImageNet, "imagenet"},
                                                                         {AutoAugmentPolicy::kCifar10, "cifar10"},
                                                                         {AutoAugmentPolicy::kSvhn, "svhn"}};
};
template <>
struct EnumNames<ShareCache> {
  static constexpr const char* kKey = "share_cache";
  static constexpr std::pair<ShareCache, const char*> kNames[] = {
      {ShareCache::kAuto, "auto"}, {ShareCache::kOn, "on"}, {ShareCache::kOff, "off"}};
};
template <>
struct EnumNames<PadMethod> {
  static constexpr const char* kKey = "pad_method";
  static constexpr std::pair<PadMethod, const char*> kNames[] = {{PadMethod::kSymmetric, "symmetric"},
                                                                 {PadMethod::kEnd, "end"}};
};

// Every enum with names, for what lists them all (the bindings' _enum_names()).
template <typename... E>
struct EnumList {};
using NamedEnums = EnumList<OnCorrupt, DType, SampleKind, Layout, DecodeScale, Progress, Cache, BoxFormat, ImageChannels, ImageDType,
                            Interpolation, AutoAugmentPolicy, PadMethod, ShareCache>;
// Calls f(EnumNames<E>{}) for each enum of NamedEnums.
template <typename F>
void for_each_enum(F&& f) {
  [&]<typename... E>(EnumList<E...>) { (f(EnumNames<E>{}), ...); }(NamedEnums{});
}

// The name of e; "?" for a value the table lacks (a cast out of range).
template <typename E>
constexpr const char* name_of(E e) {
  for (const auto& [v, n] : EnumNames<E>::kNames) {
    if (v == e) return n;
  }
  return "?";
}

// The value named `text`, or nullopt.
template <typename E>
constexpr std::optional<E> find_name(std::string_view text) {
  for (const auto& [v, n] : EnumNames<E>::kNames) {
    if (text == n) return v;
  }
  return std::nullopt;
}

// "'mmap', 'ram', 'decoded', 'auto'": the allowed names, for messages.
template <typename E>
std::string allowed_names() {
  std::string out;
  for (const auto& [v, n] : EnumNames<E>::kNames) out += (out.empty() ? "'" : ", '") + std::string(n) + "'";
  return out;
}

// The value named `text`; else throws Error(kInvalidArgument):
// "<what> must be one of 'a', 'b', got '<text>'".
template <typename E>
E parse(std::string_view text, const std::string& what) {
  if (const std::optional<E> v = find_name<E>(text)) return *v;
  throw Error(Code::kInvalidArgument,
              what + " must be one of " + allowed_names<E>() + ", got '" + std::string(text) + "'");
}

}  // namespace stoker
