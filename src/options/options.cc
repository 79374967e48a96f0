// LoaderOptions: their validation, and JSON both ways (every option, under
// the names the Python API uses). The doctor's channel carries the JSON, so
// its probes rebuild the loader the user ran; there is no other
// serialisation of the options.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "stoker/options.h"
#include "stoker/names.h"
#include "sample/fields/field_def.h"
#include "stoker/status.h"
#include "transform/transform_defs.h"
#include "transform/volume/defs.h"
#include "util/util.h"

namespace stoker {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& name, const std::string& want, const json& got) {
  detail::invalid(name + " must be " + want + ", got " + got.dump());
}

// An enum option's value from JSON: a string, one of the names (stoker/names.h).
template <typename E>
E enum_value(const json& v, const std::string& what) {
  if (!v.is_string()) detail::invalid(what + " must be one of " + allowed_names<E>() + ", got " + v.dump());
  return parse<E>(v.get<std::string>(), what);
}
// A value of a list known at run time (the field kinds), as enum_value.
template <typename List>
auto value_of(const List& names, const json& v, const std::string& what) {
  std::string valid;
  for (const auto& [e, s] : names) {
    if (v.is_string() && v.get<std::string>() == s) return e;
    valid += (valid.empty() ? "'" : ", '") + std::string(s) + "'";
  }
  detail::invalid(what + " must be one of " + valid + ", got " + (v.is_string() ? "'" + v.get<std::string>() + "'" : v.dump()));
}

// The field kinds' names: their definitions' (sample/fields/).
const char* kind_name(FieldKind k) { return detail::field_def(k).name; }
const std::vector<std::pair<FieldKind, const char*>>& field_kinds() {
  static const auto kinds = [] {
    std::vector<std::pair<FieldKind, const char*>> v;
    for (const detail::FieldDef* d : detail::field_defs()) v.emplace_back(d->kind, d->name);
    return v;
  }();
  return kinds;
}

// A field parameter a kind may take (FieldDef::params names it): its JSON
// key, and how it goes to and from JSON (types checked here, ranges by the
// kind's check).
struct FieldParam {
  const char* key;
  json (*get)(const Field&);
  void (*set)(Field&, const json&, const std::string& what);
};
template <int Field::*M, std::int64_t Max>
FieldParam int_param(const char* key) {
  return {key, [](const Field& f) -> json { return f.*M; },
          [](Field& f, const json& v, const std::string& what) {
            if (!v.is_number_integer()) bad(what, "an integer", v);
            f.*M = static_cast<int>(std::clamp<std::int64_t>(v.get<std::int64_t>(), -1, Max));
          }};
}
const FieldParam kFieldParams[] = {
    int_param<&Field::fill, 1 << 20>("fill"),
    int_param<&Field::max_boxes, 1 << 24>("max_boxes"),
    int_param<&Field::max_bytes, 1 << 24>("max_bytes"),
    {"format", [](const Field& f) -> json { return name_of(f.format); },
     [](Field& f, const json& v, const std::string& what) { f.format = enum_value<BoxFormat>(v, what); }},
    {"channels", [](const Field& f) -> json { return name_of(f.channels); },
     [](Field& f, const json& v, const std::string& what) { f.channels = enum_value<ImageChannels>(v, what); }},
    {"dtype", [](const Field& f) -> json { return name_of(f.dtype); },
     [](Field& f, const json& v, const std::string& what) { f.dtype = enum_value<ImageDType>(v, what); }},
};

// A schema field as JSON: {"name", "kind", "member", and the parameters its
// kind takes}; missing keys keep Field's defaults.
json field_to_json(const Field& f) {
  const detail::FieldDef& def = detail::field_def(f.kind);
  json j = {{"name", f.name}, {"kind", def.name}, {"member", f.member}};
  if (!f.folder.empty()) j["folder"] = f.folder;
  for (const char* name : def.params) {
    for (const FieldParam& p : kFieldParams) {
      if (name && std::string_view(name) == p.key) j[p.key] = p.get(f);
    }
  }
  return j;
}
Field field_from_json(const json& j) {
  if (!j.is_object()) bad("fields", "a list of objects with a name and a kind", j);
  Field f;
  const std::string what = "field '" + j.value("name", std::string("?")) + "'";
  for (const auto& [key, v] : j.items()) {
    if (key == "name") {
      if (!v.is_string()) bad(what + ": name", "a string", v);
      f.name = v.get<std::string>();
    } else if (key == "kind") {
      f.kind = value_of(field_kinds(), v, what + ": kind");
    } else if (key == "member") {
      if (!v.is_string()) bad(what + ": member", "a string", v);
      f.member = v.get<std::string>();
    } else if (key == "folder") {
      if (!v.is_null() && !v.is_string()) bad(what + ": folder", "a string", v);
      f.folder = v.is_null() ? "" : v.get<std::string>();
    } else {
      const std::string& name = key;  // NOTE: clang before 16 cannot capture a structured binding
      const auto p = std::find_if(std::begin(kFieldParams), std::end(kFieldParams),
                                  [&](const FieldParam& x) { return name == x.key; });
      if (p == std::end(kFieldParams)) detail::invalid(what + ": unknown parameter '" + key + "'");
      p->set(f, v, what + ": " + key);
    }
  }
  if (!j.contains("kind")) detail::invalid(what + ": no kind (one of " + detail::field_kind_names() + ")");
  return f;
}

// The member an option is: o.*M, or o.*S.*M for a member of one of the
// nested structs (o.remote.cache_dir), whose JSON name stays flat.
template <auto... M, typename O>
decltype(auto) member(O& o) {
  return (o .* ... .* M);
}

// One option: its name, and how it goes to and from JSON. Types are checked
// here (with the option's name in the message); ranges by validate_options().
struct Option {
  const char* name;
  json (*get)(const LoaderOptions&);
  void (*set)(LoaderOptions&, const json&, const char* name);
};

template <auto... M>
Option integer(const char* name) {
  return {name, [](const LoaderOptions& o) -> json { return member<M...>(o); },
          [](LoaderOptions& o, const json& v, const char* n) {
            using T = std::remove_reference_t<decltype(member<M...>(o))>;
            if (!v.is_number_integer()) bad(n, "an integer", v);
            if constexpr (std::is_unsigned_v<T>) {
              if (v.is_number_unsigned()) {
                member<M...>(o) = v.get<T>();
                return;
              }
              if (v.get<std::int64_t>() < 0) bad(n, "a non-negative integer", v);
              member<M...>(o) = static_cast<T>(v.get<std::int64_t>());
            } else {
              const std::int64_t x = v.is_number_unsigned() && v.get<std::uint64_t>() > INT64_MAX
                                         ? INT64_MAX : v.get<std::int64_t>();
              if (x < std::numeric_limits<T>::min() || x > std::numeric_limits<T>::max()) bad(n, "a smaller integer", v);
              member<M...>(o) = static_cast<T>(x);
            }
          }};
}
template <auto... M>
Option boolean(const char* name) {
  return {name, [](const LoaderOptions& o) -> json { return member<M...>(o); },
          [](LoaderOptions& o, const json& v, const char* n) {
            if (!v.is_boolean()) bad(n, "true or false", v);
            member<M...>(o) = v.get<bool>();
          }};
}
template <auto... M>
Option text(const char* name) {
  return {name, [](const LoaderOptions& o) -> json { return member<M...>(o); },
          [](LoaderOptions& o, const json& v, const char* n) {
            if (!v.is_string()) bad(n, "a string", v);
            member<M...>(o) = v.get<std::string>();
          }};
}
// An enum option, named as its EnumNames (stoker/names.h) names it.
template <auto... M>
Option choice(const char* name) {
  return {name, [](const LoaderOptions& o) -> json { return name_of(member<M...>(o)); },
          [](LoaderOptions& o, const json& v, const char* n) {
            member<M...>(o) = enum_value<std::remove_reference_t<decltype(member<M...>(o))>>(v, n);
          }};
}

// Every option of LoaderOptions, once: options_to_json, options_from_json
// (and through them the Python Loader and the doctor's snapshot) read this.
const std::vector<Option>& options() {
  static const std::vector<Option> f = {
      integer<&LoaderOptions::batch_size>("batch_size"),
      boolean<&LoaderOptions::shuffle>("shuffle"),
      integer<&LoaderOptions::seed>("seed"),
      integer<&LoaderOptions::shuffle_window>("shuffle_window"),
      boolean<&LoaderOptions::drop_last>("drop_last"),
      integer<&LoaderOptions::threads>("threads"),
      integer<&LoaderOptions::max_threads>("max_threads"),
      integer<&LoaderOptions::prefetch>("prefetch"),
      integer<&LoaderOptions::rank>("rank"),
      integer<&LoaderOptions::world_size>("world_size"),
      choice<&LoaderOptions::on_corrupt>("on_corrupt"),
      integer<&LoaderOptions::max_consecutive_corrupt>("max_consecutive_corrupt"),
      choice<&LoaderOptions::dtype>("dtype"),
      choice<&LoaderOptions::layout>("layout"),
      choice<&LoaderOptions::kind>("kind"),
      choice<&LoaderOptions::decode_scale>("decode_scale"),
      choice<&LoaderOptions::cache, &CacheOptions::mode>("cache"),
      integer<&LoaderOptions::memory_budget>("memory_budget"),
      boolean<&LoaderOptions::cache, &CacheOptions::preload>("preload"),
      boolean<&LoaderOptions::cache, &CacheOptions::rewrite>("cache_rewrite"),
      choice<&LoaderOptions::cache, &CacheOptions::progress>("progress"),
      integer<&LoaderOptions::cache, &CacheOptions::max_side>("cache_max_side"),
      choice<&LoaderOptions::cache, &CacheOptions::share>("share_cache"),
      text<&LoaderOptions::cache, &CacheOptions::share_dir>("share_cache_dir"),
      text<&LoaderOptions::remote, &RemoteOptions::cache_dir>("cache_dir"),
      integer<&LoaderOptions::remote, &RemoteOptions::cache_limit>("cache_limit"),
      integer<&LoaderOptions::remote, &RemoteOptions::connections>("remote_connections"),
      integer<&LoaderOptions::remote, &RemoteOptions::retries>("remote_retries"),
      {"transforms",
       [](const LoaderOptions& o) -> json {
         json t = json::array();
         for (const Transform& x : o.transforms) t.push_back(json::parse(detail::transform_to_json(x)));
         return t;
       },
       [](LoaderOptions& o, const json& v, const char* n) {
         if (!v.is_array()) bad(n, "a list", v);
         o.transforms.clear();
         for (const auto& t : v) o.transforms.push_back(detail::transform_from_json(t.dump()));
       }},
      {"fields",
       [](const LoaderOptions& o) -> json {
         json t = json::array();
         for (const Field& x : o.fields) t.push_back(field_to_json(x));
         return t;
       },
       [](LoaderOptions& o, const json& v, const char* n) {
         if (!v.is_array()) bad(n, "a list", v);
         o.fields.clear();
         for (const auto& x : v) o.fields.push_back(field_from_json(x));
       }},
      {"views",
       [](const LoaderOptions& o) -> json {
         json t = json::array();
         for (const View& v : o.views) {
           json tf = json::array();
           for (const Transform& x : v.transforms) tf.push_back(json::parse(detail::transform_to_json(x)));
           t.push_back({{"name", v.name}, {"count", v.count}, {"transforms", tf}});
         }
         return t;
       },
       [](LoaderOptions& o, const json& v, const char* n) {
         if (!v.is_array()) bad(n, "a list", v);
         o.views.clear();
         for (const auto& x : v) {
           if (!x.is_object() || !x.contains("name") || !x["name"].is_string() || !x.contains("transforms") ||
               !x["transforms"].is_array()) {
             bad(n, "a list of {name, count, transforms}", x);
           }
           View view{x["name"].get<std::string>(), x.value("count", 1), {}};
           for (const auto& t : x["transforms"]) view.transforms.push_back(detail::transform_from_json(t.dump()));
           o.views.push_back(std::move(view));
         }
       }},
      {"volume_transforms",
       [](const LoaderOptions& o) -> json {
         json t = json::array();
         for (const VolumeTransform& x : o.volume_transforms) t.push_back(json::parse(detail::volume_transform_to_json(x)));
         return t;
       },
       [](LoaderOptions& o, const json& v, const char* n) {
         if (!v.is_array()) bad(n, "a list", v);
         o.volume_transforms.clear();
         for (const auto& t : v) o.volume_transforms.push_back(detail::volume_transform_from_json(t.dump()));
       }},
      integer<&LoaderOptions::max_volume_voxels>("max_volume_voxels"),
      integer<&LoaderOptions::max_image_pixels>("max_image_pixels"),
      text<&LoaderOptions::labels>("labels"),
      text<&LoaderOptions::coco, &CocoOptions::image_root>("image_root"),
      boolean<&LoaderOptions::coco, &CocoOptions::skip_empty>("skip_empty"),
      boolean<&LoaderOptions::coco, &CocoOptions::keep_crowd>("keep_crowd"),
      boolean<&LoaderOptions::stage_timing>("stage_timing"),
      boolean<&LoaderOptions::trace>("trace"),
  };
  return f;
}

// The schema's rules: unique names (and the batch keys a kind adds), at
// most one geometry owner of a kind, followers only beside their owner,
// parameters in range (each kind's check), what a volume schema holds.
void validate_fields(const LoaderOptions& o) {
  if (o.fields.empty()) return;
  if (o.kind != SampleKind::kAuto) {
    detail::invalid(std::string("kind='") + name_of(o.kind) +
                    "' describes the default schema; with fields, each field names its kind");
  }
  std::vector<std::string> keys;
  std::vector<int> count(detail::field_defs().size());  // fields per kind
  auto add_key = [&](const std::string& field, const std::string& key) {
    if (std::find(keys.begin(), keys.end(), key) != keys.end()) {
      detail::invalid("field '" + field + "': the name '" + key + "' is used twice in the batch");
    }
    keys.push_back(key);
  };
  auto how_many = [&](FieldKind k) { return count[static_cast<std::size_t>(k)]; };
  for (const Field& f : o.fields) {
    if (f.name.empty()) detail::invalid("fields: a field has an empty name");
    add_key(f.name, f.name);
    const detail::FieldDef& def = detail::field_def(f.kind);
    const std::string what = "field '" + f.name + "' (" + def.name + ")";
    if (++count[static_cast<std::size_t>(f.kind)] > 1 && def.role == detail::Role::kOwner) {
      detail::invalid(what + ": a schema has at most one " + def.name + " field");
    }
    if (def.check) def.check(f, what);
    for (const char* suffix : def.suffixes) {
      if (suffix) add_key(f.name, f.name + suffix);
    }
    if (!f.folder.empty()) {
      if (!def.folder) {
        detail::invalid(what + ": folder= pairs a mask, boxes or tensor with the record; an " + def.name +
                        " comes from the record itself");
      }
      if (!f.member.empty()) detail::invalid(what + ": give member= or folder=, not both");
    }
  }
  for (const Field& f : o.fields) {
    const detail::FieldDef& def = detail::field_def(f.kind);
    if (def.role == detail::Role::kFollower && how_many(def.follows) == 0) {
      detail::invalid("field '" + f.name + "' (" + def.name + ") " + def.without_owner);
    }
  }
  if (how_many(FieldKind::kVolume) > 0) {
    std::vector<std::string> labels;
    for (const Field& f : o.fields) {
      if (!detail::field_def(f.kind).in_volumes) {
        std::string kinds;
        for (const detail::FieldDef* d : detail::field_defs()) {
          if (d->in_volumes) kinds += (kinds.empty() ? "" : ", ") + std::string(d->name);
        }
        detail::invalid("field '" + f.name + "' (" + kind_name(f.kind) + "): a volume schema holds " + kinds +
                        " fields only");
      }
      if (f.kind == FieldKind::kLabel && !f.member.empty()) {
        detail::invalid("field '" + f.name + "' (label): with volumes, a Label is the source's label (no member=)");
      }
      if (f.kind == FieldKind::kLabelVolume) labels.push_back(f.name);
    }
    if (!o.transforms.empty()) {
      detail::invalid("transforms: a volume schema takes MONAI-named volume transforms (RandSpatialCrop, "
                      "RandCropByPosNegLabel, ...), not image transforms");
    }
    if (!o.views.empty()) detail::invalid("views: multi-crop views are for images, not volumes");
    detail::check_volume_transforms(o.volume_transforms, labels);
    return;
  }
  if (!o.volume_transforms.empty()) {
    detail::invalid("volume transforms (" + std::string(detail::volume_transform_name(o.volume_transforms[0])) +
                    ", ...) apply to a Volume field, and the schema has none");
  }
  if (how_many(FieldKind::kImage) == 0 && !o.transforms.empty()) {
    detail::invalid("transforms apply to an image field, and the schema has none: pass transforms=[]");
  }
  // NOTE: the policies (TrivialAugmentWide, RandAugment, AutoAugment) act on
  // the image alone; as torchvision v2's, they refuse masks and boxes rather
  // than misalign them. RandomRotation and RandomAffine move every field.
  for (const Field& f : o.fields) {
    const detail::FieldDef& def = detail::field_def(f.kind);
    if (def.role != detail::Role::kFollower || def.follows != FieldKind::kImage) continue;
    for (const Transform& t : o.transforms) {
      if (detail::transform_traits(t).image_only) {
        detail::invalid(std::string(detail::transform_name(t)) + " applies to the image alone, and field '" + f.name +
                        "' (" + kind_name(f.kind) + ") would no longer match it: use RandomRotation or "
                        "RandomAffine (they move masks and boxes too), or a schema without them");
      }
    }
  }
}

// Multi-crop views: named apart from the schema's other keys, each a
// transform list of its own; the image's geometry is theirs, so no mask or
// boxes may follow it.
void validate_views(const LoaderOptions& o) {
  if (o.views.empty()) return;
  if (!o.transforms.empty()) {
    detail::invalid("views: each view has its own transforms; pass transforms=[] (got " +
                    std::to_string(o.transforms.size()) + " transforms beside the views)");
  }
  if (o.kind == SampleKind::kArray) detail::invalid("views apply to images, not to kind='array'");
  std::vector<std::string> names;
  for (const Field& f : o.fields) {
    if (detail::field_def(f.kind).role == detail::Role::kFollower) {
      detail::invalid("views: field '" + f.name + "' (" + kind_name(f.kind) +
                      ") follows one geometry, and each view draws its own; views take images, labels and tensors");
    }
    if (f.kind != FieldKind::kImage) names.push_back(f.name);
  }
  if (o.fields.empty()) names.push_back("label");
  for (const View& v : o.views) {
    if (v.name.empty()) detail::invalid("views: a view has an empty name");
    if (std::find(names.begin(), names.end(), v.name) != names.end()) {
      detail::invalid("views: the name '" + v.name + "' is used twice in the batch");
    }
    names.push_back(v.name);
    if (v.count < 1 || v.count > 64) {
      detail::invalid("views: view '" + v.name + "': count must be in [1, 64], got " + std::to_string(v.count));
    }
    if (v.transforms.empty()) {
      detail::invalid("views: view '" + v.name + "' has no transforms; it needs at least a crop or resize to a fixed size");
    }
  }
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
  if (o.max_volume_voxels == 0) detail::invalid("max_volume_voxels must be > 0");
  if (o.fields.empty() && !o.volume_transforms.empty()) {
    detail::invalid("volume transforms apply to a Volume field: pass fields=[stoker.Volume(...), ...]");
  }
  if (o.cache.share_dir.empty()) detail::invalid("share_cache_dir must name a directory, got ''");
  if (o.cache.max_side < 1) detail::invalid("cache_max_side must be >= 1, got " + std::to_string(o.cache.max_side));
  if (o.remote.connections < 1 || o.remote.connections > 256) {
    detail::invalid("remote_connections must be in [1, 256], got " + std::to_string(o.remote.connections));
  }
  if (o.remote.retries < 0 || o.remote.retries > 100) {
    detail::invalid("remote_retries must be in [0, 100], got " + std::to_string(o.remote.retries));
  }
  validate_fields(o);
  validate_views(o);
}

const char* cache_name(Cache c) { return name_of(c); }

std::string options_to_json(const LoaderOptions& o) {
  json j = json::object();
  for (const Option& f : options()) j[f.name] = f.get(o);
  return j.dump();
}

LoaderOptions options_from_json(const std::string& text) {
  LoaderOptions o;
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    detail::invalid(std::string("options: not JSON: ") + e.what());
  }
  if (!j.is_object()) detail::invalid("options: expected a JSON object, got " + j.dump());
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();  // NOTE: not a structured binding: clang 14 cannot capture one
    const auto& all = options();
    auto f = std::find_if(all.begin(), all.end(), [&](const Option& x) { return key == x.name; });
    if (f == all.end()) detail::invalid("unknown option '" + key + "'");
    try {
      f->set(o, it.value(), f->name);
    } catch (const json::exception& e) {
      detail::invalid(std::string(f->name) + ": " + e.what());
    }
  }
  return o;
}

}  // namespace stoker
