// LoaderOptions: their validation, and JSON both ways (every option, under
// the names the Python API uses). The doctor's channel carries the JSON, so
// its probes rebuild the loader the user ran; there is no other
// serialisation of the options.
#include <nlohmann/json.hpp>

#include <string>
#include <utility>

#include "stoker/options.h"
#include "stoker/status.h"
#include "util/util.h"

namespace stoker {
namespace {

using nlohmann::json;

template <typename E>
using Names = std::initializer_list<std::pair<E, const char*>>;

const Names<Cache> kCache = {{Cache::kMmap, "mmap"}, {Cache::kRam, "ram"}, {Cache::kDecoded, "decoded"}};
const Names<DType> kDType = {{DType::kFloat32, "float32"}, {DType::kUInt8, "uint8"}};
const Names<Layout> kLayout = {{Layout::kNCHW, "NCHW"}, {Layout::kNHWC, "NHWC"}};
const Names<SampleKind> kKind = {{SampleKind::kAuto, "auto"}, {SampleKind::kImage, "image"}, {SampleKind::kArray, "array"}};
const Names<DecodeScale> kScale = {{DecodeScale::kExact, "exact"}, {DecodeScale::kAuto, "auto"}};
const Names<OnCorrupt> kCorrupt = {{OnCorrupt::kSkip, "skip"}, {OnCorrupt::kRaise, "raise"}};
const Names<Progress> kProgress = {{Progress::kAuto, "auto"}, {Progress::kOn, "on"}, {Progress::kOff, "off"}};

template <typename E>
std::string name_of(E e, Names<E> names) {
  for (const auto& [v, n] : names) {
    if (v == e) return n;
  }
  return "?";
}
template <typename E>
E value_of(const json& j, const char* key, E fallback, Names<E> names) {
  if (!j.contains(key)) return fallback;
  const std::string s = j[key].get<std::string>();
  for (const auto& [v, n] : names) {
    if (s == n) return v;
  }
  throw Error(Code::kInvalidArgument, std::string("options JSON: unknown ") + key + " '" + s + "'");
}

json transform_to_json(const Transform& t) {
  return std::visit(
      [](const auto& x) -> json {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, RandomResizedCrop>) {
          return {{"name", "RandomResizedCrop"}, {"size", {x.height, x.width}}, {"scale", x.scale}, {"ratio", x.ratio}};
        } else if constexpr (std::is_same_v<T, Resize>) {
          return {{"name", "Resize"}, {"size", {x.height, x.width}}, {"max_size", x.max_size}};
        } else if constexpr (std::is_same_v<T, CenterCrop>) {
          return {{"name", "CenterCrop"}, {"size", {x.height, x.width}}};
        } else if constexpr (std::is_same_v<T, RandomHorizontalFlip>) {
          return {{"name", "RandomHorizontalFlip"}, {"p", x.p}};
        } else {
          return {{"name", "Normalize"}, {"mean", x.mean}, {"std", x.std}};
        }
      },
      t);
}

Transform transform_from_json(const json& t) {
  const std::string name = t.value("name", "");
  if (name == "RandomResizedCrop") {
    RandomResizedCrop r;
    r.height = t.at("size").at(0);
    r.width = t.at("size").at(1);
    r.scale = t.at("scale").get<std::array<double, 2>>();
    r.ratio = t.at("ratio").get<std::array<double, 2>>();
    return r;
  }
  if (name == "Resize") return Resize{t.at("size").at(0), t.at("size").at(1), t.value("max_size", 0)};
  if (name == "CenterCrop") return CenterCrop{t.at("size").at(0), t.at("size").at(1)};
  if (name == "RandomHorizontalFlip") return RandomHorizontalFlip{t.value("p", 0.5)};
  if (name == "Normalize") return Normalize{t.at("mean").get<std::vector<float>>(), t.at("std").get<std::vector<float>>()};
  throw Error(Code::kInvalidArgument, "options JSON: unknown transform '" + name + "'");
}

}  // namespace

void validate_options(const LoaderOptions& o) {
  if (o.batch_size == 0) detail::invalid("batch_size must be > 0, got 0");
  if (o.threads < 0) detail::invalid("threads must be >= 0 (0 = autotuned), got " + std::to_string(o.threads));
  if (o.max_threads < 0) detail::invalid("max_threads must be >= 0 (0 = the available cores), got " + std::to_string(o.max_threads));
  if (o.prefetch < 0) detail::invalid("prefetch must be >= 0 (0 = auto), got " + std::to_string(o.prefetch));
  if (o.world_size < 1) detail::invalid("world_size must be >= 1, got " + std::to_string(o.world_size));
  if (o.rank < 0 || o.rank >= o.world_size) {
    detail::invalid("rank must be in [0, world_size=" + std::to_string(o.world_size) + "), got " + std::to_string(o.rank));
  }
  if (o.max_consecutive_corrupt < 1) {
    detail::invalid("max_consecutive_corrupt must be >= 1, got " + std::to_string(o.max_consecutive_corrupt));
  }
  if (o.max_image_pixels == 0) detail::invalid("max_image_pixels must be > 0");
  if (o.cache_max_side < 1) detail::invalid("cache_max_side must be >= 1, got " + std::to_string(o.cache_max_side));
}

std::string options_to_json(const LoaderOptions& o) {
  json t = json::array();
  for (const Transform& x : o.transforms) t.push_back(transform_to_json(x));
  const json j = {{"batch_size", o.batch_size},
                  {"shuffle", o.shuffle},
                  {"seed", o.seed},
                  {"drop_last", o.drop_last},
                  {"threads", o.threads},
                  {"max_threads", o.max_threads},
                  {"prefetch", o.prefetch},
                  {"rank", o.rank},
                  {"world_size", o.world_size},
                  {"on_corrupt", name_of(o.on_corrupt, kCorrupt)},
                  {"max_consecutive_corrupt", o.max_consecutive_corrupt},
                  {"dtype", name_of(o.dtype, kDType)},
                  {"layout", name_of(o.layout, kLayout)},
                  {"kind", name_of(o.kind, kKind)},
                  {"decode_scale", name_of(o.decode_scale, kScale)},
                  {"cache", name_of(o.cache, kCache)},
                  {"memory_budget", o.memory_budget},
                  {"preload", o.preload},
                  {"progress", name_of(o.progress, kProgress)},
                  {"cache_max_side", o.cache_max_side},
                  {"transforms", t},
                  {"max_image_pixels", o.max_image_pixels},
                  {"labels", o.labels},
                  {"stage_timing", o.stage_timing},
                  {"trace", o.trace}};
  return j.dump();
}

LoaderOptions options_from_json(const std::string& text) {
  LoaderOptions o;
  try {
    const json j = json::parse(text);
    o.batch_size = j.value("batch_size", o.batch_size);
    o.shuffle = j.value("shuffle", o.shuffle);
    o.seed = j.value("seed", o.seed);
    o.drop_last = j.value("drop_last", o.drop_last);
    o.threads = j.value("threads", o.threads);
    o.max_threads = j.value("max_threads", o.max_threads);
    o.prefetch = j.value("prefetch", o.prefetch);
    o.rank = j.value("rank", o.rank);
    o.world_size = j.value("world_size", o.world_size);
    o.on_corrupt = value_of(j, "on_corrupt", o.on_corrupt, kCorrupt);
    o.max_consecutive_corrupt = j.value("max_consecutive_corrupt", o.max_consecutive_corrupt);
    o.dtype = value_of(j, "dtype", o.dtype, kDType);
    o.layout = value_of(j, "layout", o.layout, kLayout);
    o.kind = value_of(j, "kind", o.kind, kKind);
    o.decode_scale = value_of(j, "decode_scale", o.decode_scale, kScale);
    o.cache = value_of(j, "cache", o.cache, kCache);
    o.memory_budget = j.value("memory_budget", o.memory_budget);
    o.preload = j.value("preload", o.preload);
    o.progress = value_of(j, "progress", o.progress, kProgress);
    o.cache_max_side = j.value("cache_max_side", o.cache_max_side);
    for (const auto& t : j.value("transforms", json::array())) o.transforms.push_back(transform_from_json(t));
    o.max_image_pixels = j.value("max_image_pixels", o.max_image_pixels);
    o.labels = j.value("labels", o.labels);
    o.stage_timing = j.value("stage_timing", o.stage_timing);
    o.trace = j.value("trace", o.trace);
  } catch (const json::exception& e) {
    throw Error(Code::kInvalidArgument, std::string("options JSON: ") + e.what());
  }
  return o;
}

}  // namespace stoker
