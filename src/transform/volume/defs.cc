// The volume transforms' definitions: one VDef<T> per transform (its name,
// docstring, parameter checks, JSON both ways, traits, and its effect on the
// shape), found through one table. Adding one: its struct in
// stoker/volume.h, its VDef<T> here (kDoc: Python's __doc__), its step in
// transform/volume/ops.cc, its Python class in python/stoker/volume.py (its
// signature; the docstring comes from here), its tests.
#include "transform/volume/defs.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "stoker/names.h"
#include "stoker/status.h"
#include "transform/volume/ops.h"
#include "util/util.h"

namespace stoker::detail {
namespace {

using nlohmann::json;
using Shape = std::array<std::int64_t, 3>;

// JSON readers: each names the transform and the parameter in its message.
struct Reader {
  const char* name;
  const json& j;
  std::vector<std::string> seen;

  const json* get(const char* key) {
    seen.push_back(key);
    auto it = j.find(key);
    return it == j.end() || it->is_null() ? nullptr : &*it;
  }
  [[noreturn]] void bad(const char* key, const std::string& want, const json& got) const {
    invalid(std::string(name) + ": " + key + " must be " + want + ", got " + got.dump());
  }
  void size3(const char* key, std::array<int, 3>* out) {
    const json* v = get(key);
    if (!v) return;
    if (v->is_number_integer()) {
      out->fill(static_cast<int>(std::clamp<std::int64_t>(v->get<std::int64_t>(), -1, 1 << 20)));
      return;
    }
    if (!v->is_array() || v->size() != 3) bad(key, "an int or 3 ints", *v);
    for (std::size_t i = 0; i < 3; ++i) {
      if (!(*v)[i].is_number_integer()) bad(key, "an int or 3 ints", *v);
      (*out)[i] = static_cast<int>(std::clamp<std::int64_t>((*v)[i].get<std::int64_t>(), -1, 1 << 20));
    }
  }
  void integer(const char* key, int* out) {
    if (const json* v = get(key)) {
      if (!v->is_number_integer()) bad(key, "an integer", *v);
      *out = static_cast<int>(std::clamp<std::int64_t>(v->get<std::int64_t>(), -(1 << 30), 1 << 30));
    }
  }
  void number(const char* key, double* out) {
    if (const json* v = get(key)) {
      if (!v->is_number()) bad(key, "a number", *v);
      *out = v->get<double>();
    }
  }
  void optional_number(const char* key, std::optional<double>* out) {
    if (const json* v = get(key)) {
      if (!v->is_number()) bad(key, "a number or None", *v);
      *out = v->get<double>();
    }
  }
  // None, a number or a list of numbers.
  void numbers(const char* key, std::vector<double>* out) {
    const json* v = get(key);
    out->clear();
    if (!v) return;
    if (v->is_number()) {
      out->push_back(v->get<double>());
      return;
    }
    if (!v->is_array() || v->empty()) bad(key, "None, a number or a list of numbers", *v);
    for (const auto& x : *v) {
      if (!x.is_number()) bad(key, "None, a number or a list of numbers", *v);
      out->push_back(x.get<double>());
    }
  }
  void boolean(const char* key, bool* out) {
    if (const json* v = get(key)) {
      if (!v->is_boolean()) bad(key, "True or False", *v);
      *out = v->get<bool>();
    }
  }
  void text(const char* key, std::string* out) {
    if (const json* v = get(key)) {
      if (!v->is_string()) bad(key, "a str", *v);
      *out = v->get<std::string>();
    }
  }
  void axes(const char* key, std::vector<int>* out) {
    const json* v = get(key);
    if (!v) return;
    out->clear();
    if (v->is_number_integer()) {
      out->push_back(static_cast<int>(std::clamp<std::int64_t>(v->get<std::int64_t>(), -100, 100)));
      return;
    }
    if (!v->is_array()) bad(key, "None, an int or a list of ints", *v);
    for (const auto& x : *v) {
      if (!x.is_number_integer()) bad(key, "None, an int or a list of ints", *v);
      out->push_back(static_cast<int>(std::clamp<std::int64_t>(x.get<std::int64_t>(), -100, 100)));
    }
  }
  // Refuses parameters no reader asked for.
  void done() const {
    for (const auto& [key, v] : j.items()) {
      if (key == "name") continue;
      if (std::find(seen.begin(), seen.end(), key) == seen.end()) {
        invalid(std::string(name) + ": unknown parameter '" + key + "'");
      }
    }
  }
};

json opt(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

void check_size(const char* name, const char* key, const std::array<int, 3>& s, bool allow_whole) {
  for (int v : s) {
    if (v == 0 || (v < 0 && !allow_whole) || v > (1 << 16)) {
      invalid(std::string(name) + ": " + key + " entries must be in [1, 65536]" +
              (allow_whole ? " (or -1: the whole axis)" : "") + ", got (" + std::to_string(s[0]) + ", " +
              std::to_string(s[1]) + ", " + std::to_string(s[2]) + ")");
    }
  }
}
void check_prob(const char* name, double p) {
  if (!(p >= 0.0 && p <= 1.0)) invalid(std::string(name) + ": prob must be in [0, 1], got " + std::to_string(p));
}
void check_samples(const char* name, int n) {
  if (n < 1 || n > 256) invalid(std::string(name) + ": num_samples must be in [1, 256], got " + std::to_string(n));
}
// MONAI's fall_back_tuple: a non-positive entry is the volume's extent.
Shape roi_of(const std::array<int, 3>& roi, const Shape& shape) {
  Shape r;
  for (int a = 0; a < 3; ++a) r[a] = roi[a] > 0 ? roi[a] : shape[a];
  return r;
}
// RandSpatialCrop / CenterSpatialCrop: min(roi, shape) per axis (MONAI's
// get_valid_patch_size; the centred slice is clipped the same way).
bool crop_shape(const std::array<int, 3>& roi, Shape* s, std::string*) {
  const Shape r = roi_of(roi, *s);
  for (int a = 0; a < 3; ++a) (*s)[a] = std::min((*s)[a], r[a]);
  return true;
}

template <typename T>
struct VDef;

template <>
struct VDef<Spacing> {
  static constexpr const char* kName = "Spacing";
  static constexpr const char* kDoc = R"doc(monai.transforms.Spacing: each volume resampled to voxels of ``pixdim`` mm along its own axes.

Trilinear for Volume fields, nearest for LabelVolume fields, on MONAI's
output grid; the affine (``<name>_affine``) follows. Done once per
volume when first loaded and kept in the loader's volume cache (under
memory_budget). Must be the first transform.

Args:
    pixdim (float or 3 floats): the voxel size; entries <= 0 keep that
        axis's spacing.

<raises>
Example:
    >>> stoker.Spacing((1.5, 1.5, 2.0))
    Spacing(pixdim=[1.5, 1.5, 2.0]))doc";
  static void check(const Spacing& x) {
    for (double v : x.pixdim) {
      if (!std::isfinite(v) || v > 1e6) invalid("Spacing: pixdim entries must be finite (<= 0: keep the axis), got " + json(x.pixdim).dump());
    }
  }
  static VolumeTraits traits(const Spacing&) { return {false, true, false, false, 1}; }
  // The resampled shape depends on the volume's affine: the sample path gives it.
  static bool shape(const Spacing&, Shape*, std::string*) { return true; }
  static json to_json(const Spacing& x) { return {{"pixdim", x.pixdim}}; }
  static Spacing from_json(Reader& r) {
    Spacing x;
    if (const json* v = r.get("pixdim")) {
      if (v->is_number()) {
        x.pixdim.fill(v->get<double>());
      } else if (v->is_array() && v->size() == 3 && std::all_of(v->begin(), v->end(), [](const json& e) { return e.is_number(); })) {
        for (std::size_t i = 0; i < 3; ++i) x.pixdim[i] = (*v)[i].get<double>();
      } else {
        r.bad("pixdim", "a number or 3 numbers", *v);
      }
    }
    return x;
  }
};

// RandSpatialCrop and RandSpatialCropSamples: the same crop, drawn once or
// num_samples times (both structs have roi_size, random_center, random_size).
template <typename T>
struct RandomCropDef {
  static void check_crop(const char* name, const T& x) {
    check_size(name, "roi_size", x.roi_size, true);
    if (x.random_size) {
      invalid(std::string(name) + ": random_size=True gives patches of varying size, which cannot be batched: pass "
              "random_size=False (MONAI's default is True)");
    }
  }
  static bool shape(const T& x, Shape* s, std::string* why) { return crop_shape(x.roi_size, s, why); }
  static json crop_json(const T& x) {
    return {{"roi_size", x.roi_size}, {"random_center", x.random_center}, {"random_size", x.random_size}};
  }
  static T read_crop(Reader& r) {
    T x;
    r.size3("roi_size", &x.roi_size);
    r.boolean("random_center", &x.random_center);
    r.boolean("random_size", &x.random_size);
    return x;
  }
};

template <>
struct VDef<RandSpatialCrop> : RandomCropDef<RandSpatialCrop> {
  static constexpr const char* kName = "RandSpatialCrop";
  static constexpr const char* kDoc = R"doc(monai.transforms.RandSpatialCrop: a ``roi_size`` patch at a uniformly drawn corner.

Args:
    roi_size (int or 3 ints): the patch; -1 entries: the whole axis.
    random_center (bool): False: the centred patch. Default True.
    random_size (bool): must be False (MONAI's default True gives patches
        of varying size, which cannot be batched). Default False.

<raises>
Example:
    >>> stoker.RandSpatialCrop(96)
    RandSpatialCrop(roi_size=(96, 96, 96), random_center=True, random_size=False))doc";
  static void check(const RandSpatialCrop& x) { check_crop(kName, x); }
  static VolumeTraits traits(const RandSpatialCrop&) { return {true, true, false, false, 1}; }
  static json to_json(const RandSpatialCrop& x) { return crop_json(x); }
  static RandSpatialCrop from_json(Reader& r) { return read_crop(r); }
};

template <>
struct VDef<RandSpatialCropSamples> : RandomCropDef<RandSpatialCropSamples> {
  static constexpr const char* kName = "RandSpatialCropSamples";
  static constexpr const char* kDoc = R"doc(monai.transforms.RandSpatialCropSamples: ``num_samples`` RandSpatialCrop patches per volume load.

Args:
    roi_size (int or 3 ints): the patch; -1 entries: the whole axis.
    num_samples (int): patches per volume, 1..256: consecutive batch entries.
    random_center (bool): Default True.
    random_size (bool): must be False. Default False.

<raises>
Example:
    >>> stoker.RandSpatialCropSamples((64, 64, 32), num_samples=4).num_samples
    4)doc";
  static void check(const RandSpatialCropSamples& x) {
    check_crop(kName, x);
    check_samples(kName, x.num_samples);
  }
  static VolumeTraits traits(const RandSpatialCropSamples& x) { return {true, true, false, false, x.num_samples}; }
  static json to_json(const RandSpatialCropSamples& x) {
    json j = crop_json(x);
    j["num_samples"] = x.num_samples;
    return j;
  }
  static RandSpatialCropSamples from_json(Reader& r) {
    RandSpatialCropSamples x = read_crop(r);
    r.integer("num_samples", &x.num_samples);
    return x;
  }
};

template <>
struct VDef<RandCropByPosNegLabel> {
  static constexpr const char* kName = "RandCropByPosNegLabel";
  static constexpr const char* kDoc = R"doc(monai.transforms.RandCropByPosNegLabel: patches centred on foreground with probability pos / (pos + neg).

A centre is a uniformly drawn voxel of its class (foreground: non-zero in
any channel of the label volume ``label_key``, channel 0 of a
multi-channel (one-hot) label left out, as MONAI's
map_binary_to_indices), moved inside the volume as MONAI's
``correct_crop_centers`` does. The label's foreground index is built once
per volume and kept (stats()["volume"]["label_index_builds"]). When one
class is empty every patch comes from the other (``posneg_one_class``
counts them).

Args:
    spatial_size (int or 3 ints): the patch; -1 entries: the whole axis.
    label_key (str): the LabelVolume field.
    pos (float): the foreground's weight, >= 0. Default 1.
    neg (float): the background's weight, >= 0 (not both 0). Default 1.
    num_samples (int): patches per volume load, 1..256. Default 1.

<raises>
Example:
    >>> stoker.RandCropByPosNegLabel((96, 96, 96), label_key="label", pos=2, neg=1, num_samples=4).num_samples
    4)doc";
  static void check(const RandCropByPosNegLabel& x) {
    check_size(kName, "spatial_size", x.spatial_size, true);
    check_samples(kName, x.num_samples);
    if (!(x.pos >= 0 && x.neg >= 0 && x.pos + x.neg > 0) || !std::isfinite(x.pos + x.neg)) {
      invalid("RandCropByPosNegLabel: pos and neg must be non-negative and not both 0, got pos=" +
              std::to_string(x.pos) + ", neg=" + std::to_string(x.neg));
    }
    if (x.label_key.empty()) invalid("RandCropByPosNegLabel: label_key must name a LabelVolume field");
  }
  static VolumeTraits traits(const RandCropByPosNegLabel& x) { return {true, true, false, false, x.num_samples}; }
  // MONAI (allow_smaller=False) raises when the patch is larger than the label.
  static bool shape(const RandCropByPosNegLabel& x, Shape* s, std::string* why) {
    const Shape r = roi_of(x.spatial_size, *s);
    for (int a = 0; a < 3; ++a) {
      if (r[a] > (*s)[a]) {
        *why = "RandCropByPosNegLabel: spatial_size " + shape_text(r) + " is larger than the volume " + shape_text(*s) +
               " (pad it first with SpatialPad)";
        return false;
      }
    }
    *s = r;
    return true;
  }
  static json to_json(const RandCropByPosNegLabel& x) {
    return {{"spatial_size", x.spatial_size}, {"label_key", x.label_key}, {"pos", x.pos}, {"neg", x.neg},
            {"num_samples", x.num_samples}};
  }
  static RandCropByPosNegLabel from_json(Reader& r) {
    RandCropByPosNegLabel x;
    r.size3("spatial_size", &x.spatial_size);
    r.text("label_key", &x.label_key);
    r.number("pos", &x.pos);
    r.number("neg", &x.neg);
    r.integer("num_samples", &x.num_samples);
    return x;
  }
};

template <>
struct VDef<CenterSpatialCrop> {
  static constexpr const char* kName = "CenterSpatialCrop";
  static constexpr const char* kDoc = R"doc(monai.transforms.CenterSpatialCrop: the centred ``roi_size`` box.

Args:
    roi_size (int or 3 ints): the box (start max(shape // 2 - roi // 2,
        0)); -1 entries: the whole axis.

<raises>
Example:
    >>> stoker.CenterSpatialCrop((-1, -1, 64))
    CenterSpatialCrop(roi_size=(-1, -1, 64)))doc";
  static void check(const CenterSpatialCrop& x) { check_size(kName, "roi_size", x.roi_size, true); }
  static VolumeTraits traits(const CenterSpatialCrop&) { return {true, true, false, false, 1}; }
  static bool shape(const CenterSpatialCrop& x, Shape* s, std::string* why) { return crop_shape(x.roi_size, s, why); }
  static json to_json(const CenterSpatialCrop& x) { return {{"roi_size", x.roi_size}}; }
  static CenterSpatialCrop from_json(Reader& r) {
    CenterSpatialCrop x;
    r.size3("roi_size", &x.roi_size);
    return x;
  }
};

template <>
struct VDef<SpatialPad> {
  static constexpr const char* kName = "SpatialPad";
  static constexpr const char* kDoc = R"doc(monai.transforms.SpatialPad: each axis padded to at least ``spatial_size`` (zeros; labels their fill).

Args:
    spatial_size (int or 3 ints): -1 entries: the axis as it is.
    method (str): "symmetric" (the default) or "end".

<raises>
Example:
    >>> stoker.SpatialPad(96, method="end")
    SpatialPad(spatial_size=(96, 96, 96), method='end'))doc";
  static void check(const SpatialPad& x) { check_size(kName, "spatial_size", x.spatial_size, true); }
  static VolumeTraits traits(const SpatialPad&) { return {false, true, false, false, 1}; }
  static bool shape(const SpatialPad& x, Shape* s, std::string*) {
    const Shape r = roi_of(x.spatial_size, *s);
    for (int a = 0; a < 3; ++a) (*s)[a] = std::max((*s)[a], r[a]);
    return true;
  }
  static json to_json(const SpatialPad& x) {
    return {{"spatial_size", x.spatial_size}, {"method", name_of(x.method)}};
  }
  static SpatialPad from_json(Reader& r) {
    SpatialPad x;
    r.size3("spatial_size", &x.spatial_size);
    std::string m = name_of(x.method);
    r.text("method", &m);
    x.method = parse<PadMethod>(m, "SpatialPad: method");
    return x;
  }
};

template <>
struct VDef<RandFlip> {
  static constexpr const char* kName = "RandFlip";
  static constexpr const char* kDoc = R"doc(monai.transforms.RandFlip: with probability ``prob``, the listed spatial axes flipped.

Args:
    prob (float): Default 0.1.
    spatial_axis (int, list of int or None): None (the default): all three.

<raises>
Example:
    >>> stoker.RandFlip(prob=0.5, spatial_axis=0)
    RandFlip(prob=0.5, spatial_axis=0))doc";
  static void check(const RandFlip& x) {
    check_prob(kName, x.prob);
    for (int a : x.spatial_axis) {
      if (a < -3 || a > 2) invalid("RandFlip: spatial_axis entries must be 0, 1 or 2 (or -3..-1), got " + std::to_string(a));
    }
  }
  static VolumeTraits traits(const RandFlip&) { return {false, true, false, false, 1}; }
  static bool shape(const RandFlip&, Shape*, std::string*) { return true; }
  static json to_json(const RandFlip& x) {
    return {{"prob", x.prob}, {"spatial_axis", x.spatial_axis.empty() ? json(nullptr) : json(x.spatial_axis)}};
  }
  static RandFlip from_json(Reader& r) {
    RandFlip x;
    r.number("prob", &x.prob);
    r.axes("spatial_axis", &x.spatial_axis);
    return x;
  }
};

template <>
struct VDef<RandRotate90> {
  static constexpr const char* kName = "RandRotate90";
  static constexpr const char* kDoc = R"doc(monai.transforms.RandRotate90: with probability ``prob``, k in 1..max_k quarter turns (np.rot90 over spatial_axes).

The two axes must have the same patch size.

Args:
    prob (float): Default 0.1.
    max_k (int): Default 3.
    spatial_axes (2 ints): Default (0, 1).

<raises>
Example:
    >>> stoker.RandRotate90(prob=0.5, spatial_axes=(1, 2))
    RandRotate90(prob=0.5, max_k=3, spatial_axes=[1, 2]))doc";
  static void check(const RandRotate90& x) {
    check_prob(kName, x.prob);
    if (x.max_k < 1) invalid("RandRotate90: max_k must be >= 1, got " + std::to_string(x.max_k));
    const int a = (x.spatial_axes[0] + 3) % 3, b = (x.spatial_axes[1] + 3) % 3;
    if (x.spatial_axes[0] < -3 || x.spatial_axes[0] > 2 || x.spatial_axes[1] < -3 || x.spatial_axes[1] > 2 || a == b) {
      invalid("RandRotate90: spatial_axes must be two different axes of 0, 1, 2, got (" +
              std::to_string(x.spatial_axes[0]) + ", " + std::to_string(x.spatial_axes[1]) + ")");
    }
  }
  static VolumeTraits traits(const RandRotate90&) { return {false, true, false, false, 1}; }
  static bool shape(const RandRotate90& x, Shape* s, std::string* why) {
    const int a = (x.spatial_axes[0] + 3) % 3, b = (x.spatial_axes[1] + 3) % 3;
    if ((*s)[a] != (*s)[b]) {
      *why = "RandRotate90: spatial_axes (" + std::to_string(a) + ", " + std::to_string(b) +
             ") have different sizes in the patch " + shape_text(*s) + ", so rotated patches would not stack";
      return false;
    }
    return true;
  }
  static json to_json(const RandRotate90& x) {
    return {{"prob", x.prob}, {"max_k", x.max_k}, {"spatial_axes", x.spatial_axes}};
  }
  static RandRotate90 from_json(Reader& r) {
    RandRotate90 x;
    r.number("prob", &x.prob);
    r.integer("max_k", &x.max_k);
    std::vector<int> axes;
    r.axes("spatial_axes", &axes);
    if (!axes.empty()) {
      if (axes.size() != 2) invalid("RandRotate90: spatial_axes must be two axes, got " + std::to_string(axes.size()));
      x.spatial_axes = {axes[0], axes[1]};
    }
    return x;
  }
};

template <>
struct VDef<ScaleIntensityRange> {
  static constexpr const char* kName = "ScaleIntensityRange";
  static constexpr const char* kDoc = R"doc(monai.transforms.ScaleIntensityRange: [a_min, a_max] mapped to [b_min, b_max], optionally clipped.

Args:
    a_min (float): the input value mapped to b_min (or 0).
    a_max (float): the input value mapped to b_max (or 1).
    b_min (float or None): the output's low end; None (with b_max):
        [0, 1], no second scaling.
    b_max (float or None): the output's high end.
    clip (bool): clip to [b_min, b_max] (the bounds given). Default False.

<raises>
Example:
    >>> stoker.ScaleIntensityRange(-1000, 1000, 0.0, 1.0, clip=True)
    ScaleIntensityRange(a_min=-1000, a_max=1000, b_min=0.0, b_max=1.0, clip=True))doc";
  static void check(const ScaleIntensityRange& x) {
    if (!std::isfinite(x.a_min) || !std::isfinite(x.a_max)) invalid("ScaleIntensityRange: a_min and a_max must be finite");
    if (!x.b_min && !x.b_max && x.clip) invalid("ScaleIntensityRange: clip needs b_min or b_max");
  }
  static VolumeTraits traits(const ScaleIntensityRange&) { return {false, false, true, true, 1}; }
  static bool shape(const ScaleIntensityRange&, Shape*, std::string*) { return true; }
  static json to_json(const ScaleIntensityRange& x) {
    return {{"a_min", x.a_min}, {"a_max", x.a_max}, {"b_min", opt(x.b_min)}, {"b_max", opt(x.b_max)}, {"clip", x.clip}};
  }
  static ScaleIntensityRange from_json(Reader& r) {
    ScaleIntensityRange x;
    if (!r.j.contains("a_min") || !r.j.contains("a_max")) invalid("ScaleIntensityRange: a_min and a_max are required");
    r.number("a_min", &x.a_min);
    r.number("a_max", &x.a_max);
    r.optional_number("b_min", &x.b_min);
    r.optional_number("b_max", &x.b_max);
    r.boolean("clip", &x.clip);
    return x;
  }
};

template <>
struct VDef<NormalizeIntensity> {
  static constexpr const char* kName = "NormalizeIntensity";
  static constexpr const char* kDoc = R"doc(monai.transforms.NormalizeIntensity: (x - mean) / std over the patch.

Args:
    subtrahend (float, list of floats or None): instead of the patch's
        mean (one value per channel with channel_wise).
    divisor (float, list of floats or None): instead of its population
        std; 0 divides by 1, as MONAI.
    nonzero (bool): statistics and normalisation of non-zero voxels only.
    channel_wise (bool): per channel.

<raises>
Example:
    >>> stoker.NormalizeIntensity(nonzero=True, channel_wise=True)
    NormalizeIntensity(subtrahend=None, divisor=None, nonzero=True, channel_wise=True))doc";
  static void check(const NormalizeIntensity& x) {
    if ((x.subtrahend.size() > 1 || x.divisor.size() > 1) && !x.channel_wise) {
      invalid("NormalizeIntensity: a subtrahend or divisor per channel needs channel_wise=True");
    }
  }
  // With both statistics given as one value it maps each voxel alone.
  static VolumeTraits traits(const NormalizeIntensity& x) {
    return {false, false, x.subtrahend.size() == 1 && x.divisor.size() == 1 && !x.nonzero, true, 1};
  }
  static bool shape(const NormalizeIntensity&, Shape*, std::string*) { return true; }
  static json to_json(const NormalizeIntensity& x) {
    auto list = [](const std::vector<double>& v) { return v.empty() ? json(nullptr) : v.size() == 1 ? json(v[0]) : json(v); };
    return {{"subtrahend", list(x.subtrahend)}, {"divisor", list(x.divisor)}, {"nonzero", x.nonzero},
            {"channel_wise", x.channel_wise}};
  }
  static NormalizeIntensity from_json(Reader& r) {
    NormalizeIntensity x;
    r.numbers("subtrahend", &x.subtrahend);
    r.numbers("divisor", &x.divisor);
    r.boolean("nonzero", &x.nonzero);
    r.boolean("channel_wise", &x.channel_wise);
    return x;
  }
};

template <typename T>
struct Tag {};

// Calls f(Tag<T>{}) for the alternative named `name`; false when none is.
template <typename F, std::size_t I = 0>
bool by_name(const std::string& name, F&& f) {
  if constexpr (I < std::variant_size_v<VolumeTransform>) {
    using T = std::variant_alternative_t<I, VolumeTransform>;
    if (name == VDef<T>::kName) {
      f(Tag<T>{});
      return true;
    }
    return by_name<F, I + 1>(name, std::forward<F>(f));
  } else {
    return false;
  }
}

template <std::size_t I = 0>
std::string all_names() {
  if constexpr (I < std::variant_size_v<VolumeTransform>) {
    const std::string rest = all_names<I + 1>();
    return std::string(VDef<std::variant_alternative_t<I, VolumeTransform>>::kName) + (rest.empty() ? "" : ", ") + rest;
  } else {
    return "";
  }
}

}  // namespace

const char* volume_transform_name(const VolumeTransform& t) {
  return std::visit([](const auto& x) { return VDef<std::decay_t<decltype(x)>>::kName; }, t);
}

std::string volume_transform_doc(const VolumeTransform& t) {
  // The Raises section every volume transform's docstring shares, in place of its "<raises>" line.
  static constexpr std::string_view kMark = "<raises>\n";
  static constexpr std::string_view kRaises = R"doc(Raises:
    ValueError: a parameter of the wrong type (here), or out of range or
        against the list's rules (one sampling crop; only SpatialPad and
        per-voxel intensity transforms before it; Spacing first), raised
        by stoker.Loader naming the transform and the parameter.

)doc";
  std::string doc = std::visit([](const auto& x) { return VDef<std::decay_t<decltype(x)>>::kDoc; }, t);
  if (const auto at = doc.find(kMark); at != std::string::npos) doc.replace(at, kMark.size(), kRaises);
  return doc;
}

void check_volume_transform(const VolumeTransform& t) {
  std::visit([](const auto& x) { VDef<std::decay_t<decltype(x)>>::check(x); }, t);
}

VolumeTraits volume_traits(const VolumeTransform& t) {
  return std::visit([](const auto& x) { return VDef<std::decay_t<decltype(x)>>::traits(x); }, t);
}

std::string volume_transform_to_json(const VolumeTransform& t) {
  return std::visit(
      [](const auto& x) {
        using D = VDef<std::decay_t<decltype(x)>>;
        json j = D::to_json(x);
        j["name"] = D::kName;
        return j.dump();
      },
      t);
}

VolumeTransform volume_transform_from_json(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) {
    invalid("volume transforms: each must be an object with a name, got " + text.substr(0, 80));
  }
  const std::string name = j["name"].get<std::string>();
  VolumeTransform out;
  const bool known = by_name(name, [&]<typename T>(Tag<T>) {
    Reader r{VDef<T>::kName, j, {}};
    T x = VDef<T>::from_json(r);
    r.done();
    VDef<T>::check(x);
    out = std::move(x);
  });
  if (!known) invalid("unknown volume transform '" + name + "' (known: " + all_names() + ")");
  return out;
}

void check_volume_transforms(const std::vector<VolumeTransform>& list, const std::vector<std::string>& label_fields) {
  int sampling = -1;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const VolumeTransform& t = list[i];
    check_volume_transform(t);
    const VolumeTraits tr = volume_traits(t);
    const std::string name = volume_transform_name(t);
    if (tr.sampling) {
      if (sampling >= 0) {
        invalid("volume transforms: " + name + " after " + volume_transform_name(list[static_cast<std::size_t>(sampling)]) +
                ": the list takes one sampling crop (RandSpatialCrop, RandSpatialCropSamples, RandCropByPosNegLabel "
                "or CenterSpatialCrop); crop the patch further with SpatialPad/CenterSpatialCrop after it is not "
                "supported either");
      }
      sampling = static_cast<int>(i);
    } else if (std::holds_alternative<Spacing>(t)) {
      if (i != 0) {
        invalid("volume transforms: Spacing must be the first transform (it resamples the whole volume once, "
                "before anything else)");
      }
    } else if (sampling < 0 && !tr.pointwise && !std::holds_alternative<SpatialPad>(t)) {
      invalid("volume transforms: " + name + " before the sampling crop: only SpatialPad and per-voxel intensity "
              "transforms (ScaleIntensityRange, NormalizeIntensity with subtrahend and divisor) may come before it, so "
              "that a patch is read without reading its whole volume; move it after the crop");
    }
    if (const auto* p = std::get_if<RandCropByPosNegLabel>(&t)) {
      if (std::find(label_fields.begin(), label_fields.end(), p->label_key) == label_fields.end()) {
        std::string known;
        for (const auto& l : label_fields) known += (known.empty() ? "'" : ", '") + l + "'";
        invalid("RandCropByPosNegLabel: label_key '" + p->label_key + "' names no LabelVolume field of the schema" +
                (known.empty() ? std::string(" (it has none)") : " (it has " + known + ")"));
      }
    }
  }
  if (sampling < 0) {
    invalid("volume transforms: a volume schema needs a sampling crop (RandSpatialCrop, RandSpatialCropSamples, "
            "RandCropByPosNegLabel or CenterSpatialCrop) to give its patches a fixed size");
  }
}

bool volume_output_shape(const std::vector<VolumeTransform>& list, const Shape& shape, Shape* out, std::string* why) {
  Shape s = shape;
  for (const VolumeTransform& t : list) {
    const bool ok = std::visit([&](const auto& x) { return VDef<std::decay_t<decltype(x)>>::shape(x, &s, why); }, t);
    if (!ok) return false;
  }
  *out = s;
  return true;
}

}  // namespace stoker::detail
