// Each transform's one definition (Def<T>), and torchvision 0.14's parameter
// rules, reproduced.
#include "transform/transform_defs.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <type_traits>

#include "stoker/names.h"
#include "transform/augment.h"
#include "transform/resize.h"
#include "util/util.h"

namespace stoker::detail {
namespace {
// Python's round(): half to even (the default rounding mode).
inline int py_round(double v) { return static_cast<int>(std::nearbyint(v)); }
}  // namespace

Box random_resized_crop_box(int width, int height, const std::array<double, 2>& scale,
                            const std::array<double, 2>& ratio, Rng* rng) {
  const double area = static_cast<double>(height) * width;
  const double log_r0 = std::log(ratio[0]), log_r1 = std::log(ratio[1]);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * rng->uniform(scale[0], scale[1]);
    const double aspect = std::exp(rng->uniform(log_r0, log_r1));
    const int w = py_round(std::sqrt(target_area * aspect));
    const int h = py_round(std::sqrt(target_area / aspect));
    if (0 < w && w <= width && 0 < h && h <= height) {
      const int i = static_cast<int>(rng->below(static_cast<std::uint64_t>(height - h + 1)));
      const int j = static_cast<int>(rng->below(static_cast<std::uint64_t>(width - w + 1)));
      return {j, i, w, h};
    }
  }
  // Fallback to central crop.
  const double in_ratio = static_cast<double>(width) / height;
  const double rmin = std::min(ratio[0], ratio[1]), rmax = std::max(ratio[0], ratio[1]);
  int w, h;
  if (in_ratio < rmin) {
    w = width;
    h = py_round(w / rmin);
  } else if (in_ratio > rmax) {
    h = height;
    w = py_round(h * rmax);
  } else {
    w = width;
    h = height;
  }
  return {(width - w) / 2, (height - h) / 2, w, h};
}

void resize_output_size(const Resize& r, int width, int height, int* out_w, int* out_h) {
  if (r.width > 0) {
    *out_w = r.width;
    *out_h = r.height;
    return;
  }
  const bool w_short = width <= height;
  const long long shorter = w_short ? width : height, longer = w_short ? height : width;
  if (r.height <= 0) {  // v2's size=None: the longer side becomes max_size
    const auto new_short = static_cast<long long>(static_cast<double>(r.max_size) * static_cast<double>(shorter) /
                                                  static_cast<double>(longer));
    *out_w = static_cast<int>(w_short ? new_short : r.max_size);
    *out_h = static_cast<int>(w_short ? r.max_size : new_short);
    return;
  }
  long long new_short = r.height;
  long long new_long = static_cast<long long>(static_cast<double>(new_short * longer) / static_cast<double>(shorter));
  if (r.max_size > 0 && new_long > r.max_size) {
    new_short = static_cast<long long>(static_cast<double>(r.max_size * new_short) / static_cast<double>(new_long));
    new_long = r.max_size;
  }
  *out_w = static_cast<int>(w_short ? new_short : new_long);
  *out_h = static_cast<int>(w_short ? new_long : new_short);
}

Box center_crop_box(int width, int height, int crop_w, int crop_h) {
  int pad_left = 0, pad_top = 0, pw = width, ph = height;
  if (crop_w > width || crop_h > height) {
    pad_left = crop_w > width ? (crop_w - width) / 2 : 0;
    pad_top = crop_h > height ? (crop_h - height) / 2 : 0;
    const int pad_right = crop_w > width ? (crop_w - width + 1) / 2 : 0;
    const int pad_bottom = crop_h > height ? (crop_h - height + 1) / 2 : 0;
    pw = width + pad_left + pad_right;
    ph = height + pad_top + pad_bottom;
  }
  const int top = py_round((ph - crop_h) / 2.0);
  const int left = py_round((pw - crop_w) / 2.0);
  return {left - pad_left, top - pad_top, crop_w, crop_h};
}

namespace {

using nlohmann::json;

// Numbers as a repr shows them: ostream's default (0.08, 1, 0.75, 1.33333).
std::string pair(const std::array<double, 2>& p) {
  std::ostringstream o;
  o << '(' << p[0] << ", " << p[1] << ')';
  return o.str();
}
std::string size2(int h, int w) {
  std::ostringstream o;
  o << '(' << h << ", " << w << ')';
  return o.str();
}
// "[0.485, 0.456, 0.406]"
std::string list(const std::vector<float>& v) {
  std::ostringstream o;
  o << '[';
  for (std::size_t i = 0; i < v.size(); ++i) o << (i ? ", " : "") << v[i];
  o << ']';
  return o.str();
}

void check_size(const char* name, int h, int w) {
  if (h <= 0 || w <= 0) {
    invalid(std::string(name) + ": size must be positive, got " + std::to_string(h) + "x" + std::to_string(w));
  }
}

// A crop in the current image's coordinates; under a pending mirror its box
// is flipped (same pixels, unflipped coordinates: the flip waits for the
// output write).
void add_crop(PlanState* s, Box box, const std::array<int, 3>& fill = {0, 0, 0}) {
  if (s->plan->mirror) box.x = s->width - box.x - box.width;
  if (s->plan->vflip) box.y = s->height - box.y - box.height;
  Step step{Step::kCrop, box, 0, 0};
  for (int c = 0; c < 3; ++c) step.fill[c] = static_cast<std::uint8_t>(fill[static_cast<std::size_t>(c)]);
  s->plan->steps.push_back(step);
  s->width = box.width;
  s->height = box.height;
}

template <typename T>
struct Def;

template <>
struct Def<RandomResizedCrop> {
  static constexpr const char* kName = "RandomResizedCrop";
  static constexpr bool kResamples = true;
  static constexpr bool kGeometric = true;
  static void check(const RandomResizedCrop& x) {
    check_size(kName, x.height, x.width);
    if (!(x.scale[0] > 0 && x.scale[0] <= x.scale[1] && x.scale[1] <= 1.0)) {
      invalid("RandomResizedCrop: scale must be (min, max) with 0 < min <= max <= 1, got " + pair(x.scale));
    }
    if (!(x.ratio[0] > 0 && x.ratio[0] <= x.ratio[1])) {
      invalid("RandomResizedCrop: ratio must be (min, max) with 0 < min <= max, got " + pair(x.ratio));
    }
  }
  static OutputSize size(const RandomResizedCrop& x, OutputSize) { return {true, x.height, x.width}; }
  static void plan(const RandomResizedCrop& x, PlanState* s) {
    add_crop(s, random_resized_crop_box(s->width, s->height, x.scale, x.ratio, s->rng));
    s->plan->steps.push_back({Step::kResize, {}, x.width, x.height});
    s->width = x.width;
    s->height = x.height;
  }
  static json to_json(const RandomResizedCrop& x) {
    return {{"size", {x.height, x.width}}, {"scale", x.scale}, {"ratio", x.ratio}};
  }
  static RandomResizedCrop from_json(const json& j) {
    return {j.at("size").at(0), j.at("size").at(1), j.at("scale").get<std::array<double, 2>>(),
            j.at("ratio").get<std::array<double, 2>>()};
  }
  static std::string repr(const RandomResizedCrop& x) {
    std::ostringstream o;
    o << "RandomResizedCrop(size=" << size2(x.height, x.width) << ", scale=" << pair(x.scale)
      << ", ratio=" << pair(x.ratio) << ')';
    return o.str();
  }
};

template <>
struct Def<Resize> {
  static constexpr const char* kName = "Resize";
  static constexpr bool kResamples = true;
  static constexpr bool kGeometric = true;
  static void check(const Resize& x) {
    if (x.max_size < 0) invalid("Resize: max_size must be positive (or none), got " + std::to_string(x.max_size));
    if (x.width > 0) {
      check_size(kName, x.height, x.width);
      if (x.max_size > 0) invalid("Resize: max_size is only allowed when size is a single int");
    } else if (x.height == 0) {  // size=None
      if (x.max_size <= 0) invalid("Resize: size=None requires max_size, the longer side's size");
    } else {
      if (x.height <= 0) invalid("Resize: size must be positive, got " + std::to_string(x.height));
      if (x.max_size > 0 && x.max_size <= x.height) {
        invalid("Resize: max_size = " + std::to_string(x.max_size) +
                " must be strictly greater than the requested size " + std::to_string(x.height));
      }
    }
  }
  static OutputSize size(const Resize& x, OutputSize) {
    return x.width > 0 ? OutputSize{true, x.height, x.width} : OutputSize{};
  }
  static void plan(const Resize& x, PlanState* s) {
    int nw, nh;
    resize_output_size(x, s->width, s->height, &nw, &nh);
    // NOTE: resize commutes with the horizontal flip exactly (the weights are
    // mirror-symmetric), so the flip can wait for the output write.
    if (nw != s->width || nh != s->height) s->plan->steps.push_back({Step::kResize, {}, nw, nh});
    s->width = nw;
    s->height = nh;
  }
  static json to_json(const Resize& x) { return {{"size", {x.height, x.width}}, {"max_size", x.max_size}}; }
  static Resize from_json(const json& j) { return {j.at("size").at(0), j.at("size").at(1), j.value("max_size", 0)}; }
  static std::string repr(const Resize& x) {
    std::ostringstream o;
    o << "Resize(size=" << (x.width > 0 ? size2(x.height, x.width) : x.height > 0 ? std::to_string(x.height) : "None");
    if (x.max_size > 0) o << ", max_size=" << x.max_size;
    o << ')';
    return o.str();
  }
};

template <>
struct Def<CenterCrop> {
  static constexpr const char* kName = "CenterCrop";
  static constexpr bool kGeometric = true;
  static void check(const CenterCrop& x) { check_size(kName, x.height, x.width); }
  static OutputSize size(const CenterCrop& x, OutputSize) { return {true, x.height, x.width}; }
  static void plan(const CenterCrop& x, PlanState* s) {
    add_crop(s, center_crop_box(s->width, s->height, x.width, x.height));
  }
  static json to_json(const CenterCrop& x) { return {{"size", {x.height, x.width}}}; }
  static CenterCrop from_json(const json& j) { return {j.at("size").at(0), j.at("size").at(1)}; }
  static std::string repr(const CenterCrop& x) {
    std::ostringstream o;
    o << "CenterCrop(size=" << size2(x.height, x.width) << ')';
    return o.str();
  }
};

template <>
struct Def<RandomCrop> {
  static constexpr const char* kName = "RandomCrop";
  static constexpr bool kGeometric = true;
  static void check(const RandomCrop& x) {
    check_size(kName, x.height, x.width);
    for (int p : x.padding) {
      if (p < 0) invalid("RandomCrop: padding must be non-negative, got " + std::to_string(p));
    }
    for (int f : x.fill) {
      if (f < 0 || f > 255) invalid("RandomCrop: fill must be in [0, 255], got " + std::to_string(f));
    }
  }
  static OutputSize size(const RandomCrop& x, OutputSize) { return {true, x.height, x.width}; }
  static void plan(const RandomCrop& x, PlanState* s) {
    // torchvision: F.pad(padding), then pad_if_needed pads both sides of a
    // short dimension by the difference, then get_params' offsets.
    int left = x.padding[0], top = x.padding[1];
    int w = s->width + x.padding[0] + x.padding[2], h = s->height + x.padding[1] + x.padding[3];
    if (x.pad_if_needed && w < x.width) {
      left += x.width - w;
      w += 2 * (x.width - w);
    }
    if (x.pad_if_needed && h < x.height) {
      top += x.height - h;
      h += 2 * (x.height - h);
    }
    if (h < x.height || w < x.width) {
      s->plan->error = "RandomCrop: required crop size " + size2(x.height, x.width) +
                       " is larger than the (padded) image size " + size2(h, w);
      return;
    }
    const int i = static_cast<int>(s->rng->below(static_cast<std::uint64_t>(h - x.height + 1)));
    const int j = static_cast<int>(s->rng->below(static_cast<std::uint64_t>(w - x.width + 1)));
    add_crop(s, {j - left, i - top, x.width, x.height}, x.fill);
  }
  static json to_json(const RandomCrop& x) {
    return {{"size", {x.height, x.width}}, {"padding", x.padding}, {"pad_if_needed", x.pad_if_needed}, {"fill", x.fill}};
  }
  static RandomCrop from_json(const json& j) {
    return {j.at("size").at(0), j.at("size").at(1), j.value("padding", std::array<int, 4>{0, 0, 0, 0}),
            j.value("pad_if_needed", false), j.value("fill", std::array<int, 3>{0, 0, 0})};
  }
  static std::string repr(const RandomCrop& x) {
    std::ostringstream o;
    o << "RandomCrop(size=" << size2(x.height, x.width);
    if (x.padding != std::array<int, 4>{0, 0, 0, 0}) {
      o << ", padding=(" << x.padding[0] << ", " << x.padding[1] << ", " << x.padding[2] << ", " << x.padding[3] << ')';
    }
    if (x.pad_if_needed) o << ", pad_if_needed=True";
    if (x.fill != std::array<int, 3>{0, 0, 0}) o << ", fill=(" << x.fill[0] << ", " << x.fill[1] << ", " << x.fill[2] << ')';
    o << ')';
    return o.str();
  }
};

template <>
struct Def<RandomShortestSize> {
  static constexpr const char* kName = "RandomShortestSize";
  static constexpr bool kResamples = true;
  static constexpr bool kGeometric = true;
  static void check(const RandomShortestSize& x) {
    if (x.min_size.empty()) invalid("RandomShortestSize: min_size must be an int or a non-empty sequence of ints");
    for (int m : x.min_size) {
      if (m <= 0) invalid("RandomShortestSize: min_size must be positive, got " + std::to_string(m));
    }
    if (x.max_size < 0) invalid("RandomShortestSize: max_size must be positive (or None), got " + std::to_string(x.max_size));
  }
  static OutputSize size(const RandomShortestSize&, OutputSize) { return {}; }
  static void plan(const RandomShortestSize& x, PlanState* s) {
    // v2's _get_params: min_size[randint(len)], r = min_size / shorter,
    // capped by max_size / longer; int(w * r), int(h * r).
    const int m = x.min_size[s->rng->below(x.min_size.size())];
    double r = static_cast<double>(m) / std::min(s->width, s->height);
    if (x.max_size > 0) r = std::min(r, static_cast<double>(x.max_size) / std::max(s->width, s->height));
    const int nw = static_cast<int>(s->width * r), nh = static_cast<int>(s->height * r);
    if (nw != s->width || nh != s->height) s->plan->steps.push_back({Step::kResize, {}, nw, nh});
    s->width = nw;
    s->height = nh;
  }
  static json to_json(const RandomShortestSize& x) { return {{"min_size", x.min_size}, {"max_size", x.max_size}}; }
  static RandomShortestSize from_json(const json& j) {
    return {j.at("min_size").get<std::vector<int>>(), j.value("max_size", 0)};
  }
  static std::string repr(const RandomShortestSize& x) {
    std::ostringstream o;
    o << "RandomShortestSize(min_size=[";
    for (std::size_t i = 0; i < x.min_size.size(); ++i) o << (i ? ", " : "") << x.min_size[i];
    o << "], max_size=";
    if (x.max_size > 0) o << x.max_size; else o << "None";
    o << ')';
    return o.str();
  }
};

// A transform whose one parameter is a probability p.
template <typename D, typename T>
struct ProbabilityDef {
  static void check(const T& x) {
    if (!(x.p >= 0.0 && x.p <= 1.0)) invalid(std::string(D::kName) + ": p must be in [0, 1], got " + std::to_string(x.p));
  }
  static OutputSize size(const T&, OutputSize before) { return before; }
  static json to_json(const T& x) { return {{"p", x.p}}; }
  static T from_json(const json& j) { return {j.value("p", T{}.p)}; }
  static std::string repr(const T& x) {
    std::ostringstream o;
    o << D::kName << "(p=" << x.p << ')';
    return o.str();
  }
};

// The flips: a flag of the plan toggled with probability p, applied by the
// output write. NOTE: deferred, because resampling commutes with a flip
// exactly (the weights are mirror-symmetric), and later crops take their box
// in unflipped coordinates (add_crop).
template <typename D, typename T, bool SamplePlan::*Flag>
struct FlipDef : ProbabilityDef<D, T> {
  static constexpr bool kGeometric = true;
  static void plan(const T& x, PlanState* s) {
    if (s->rng->uniform01() < x.p) s->plan->*Flag = !(s->plan->*Flag);
  }
};

template <>
struct Def<RandomHorizontalFlip> : FlipDef<Def<RandomHorizontalFlip>, RandomHorizontalFlip, &SamplePlan::mirror> {
  static constexpr const char* kName = "RandomHorizontalFlip";
};

template <>
struct Def<RandomVerticalFlip> : FlipDef<Def<RandomVerticalFlip>, RandomVerticalFlip, &SamplePlan::vflip> {
  static constexpr const char* kName = "RandomVerticalFlip";
};

// Photometric: drawn per sample into the plan's photometric stage, applied
// to each output row before the write (output_rows.h apply_photometric).
template <>
struct Def<RandomGrayscale> : ProbabilityDef<Def<RandomGrayscale>, RandomGrayscale> {
  static constexpr const char* kName = "RandomGrayscale";
  static constexpr bool kColour = true;
  static constexpr bool kPhotometric = true;
  static void plan(const RandomGrayscale& x, PlanState* s) {
    // Into the image stage; Pipeline::plan_geometry moves a stage of
    // grayscale alone to the output rows.
    if (s->rng->uniform01() < x.p) s->plan->image_ops.push_back({ImageOp::kGrayscale});
  }
};

template <>
struct Def<Normalize> {
  static constexpr const char* kName = "Normalize";
  static void check(const Normalize& x) {
    // NOTE: one value, or one per channel: 3 for an RGB image (Pipeline checks), the field's count for a
    // stored-channel raster (its field checks).
    if (x.mean.empty() || x.std.empty() || (x.mean.size() != x.std.size() && x.mean.size() != 1 && x.std.size() != 1)) {
      invalid("Normalize: mean and std need 1 value or one per channel, got " + std::to_string(x.mean.size()) +
              " and " + std::to_string(x.std.size()));
    }
    for (float v : x.std) {
      if (v == 0.0f) invalid("Normalize: std evaluated to zero, leading to division by zero");
    }
  }
  static OutputSize size(const Normalize&, OutputSize before) { return before; }
  static void plan(const Normalize&, PlanState*) {}  // applied by the output write (its table)
  static json to_json(const Normalize& x) { return {{"mean", x.mean}, {"std", x.std}}; }
  static Normalize from_json(const json& j) {
    return {j.at("mean").get<std::vector<float>>(), j.at("std").get<std::vector<float>>()};
  }
  static std::string repr(const Normalize& x) {
    std::ostringstream o;
    o << "Normalize(mean=" << list(x.mean) << ", std=" << list(x.std) << ')';
    return o.str();
  }
};

// --- The image stage (augment.cc draws, image_ops.h applies).

// An enum parameter from JSON, named as stoker/names.h names it; `fallback` when absent.
template <typename E>
E enum_from(const json& j, const char* key, E fallback) {
  if (!j.contains(key)) return fallback;
  return parse<E>(j.at(key).get<std::string>(), std::string("transforms: ") + key);
}
Interpolation interpolation_from(const json& j, Interpolation fallback = Interpolation::kNearest) {
  return enum_from(j, "interpolation", fallback);
}
std::string fill3(const std::array<int, 3>& f) {
  std::ostringstream o;
  o << '[' << f[0] << ", " << f[1] << ", " << f[2] << ']';
  return o.str();
}
void check_probability(const char* name, double p) {
  if (!(p >= 0.0 && p <= 1.0)) invalid(std::string(name) + ": p must be in [0, 1], got " + std::to_string(p));
}
// torchvision's _setup_angle range, as (min, max).
void check_angle_range(const char* name, const char* what, const std::array<double, 2>& r) {
  if (!(r[0] <= r[1])) {
    invalid(std::string(name) + ": " + what + " must be (min, max) with min <= max, got " + pair(r));
  }
}
// The base of every image-stage Def.
struct ImageStageDef {
  static constexpr bool kImageStage = true;
  static OutputSize size(const auto&, OutputSize before) { return before; }
};

template <>
struct Def<ColorJitter> : ImageStageDef {
  static constexpr const char* kName = "ColorJitter";
  static constexpr bool kColour = true;
  static void check(const ColorJitter& x) {
    auto range = [](const char* name, const std::array<double, 2>& r, double lo, double hi, const char* bound) {
      if (!(lo <= r[0] && r[0] <= r[1] && r[1] <= hi)) {
        invalid(std::string("ColorJitter: ") + name + " values should be between " + bound + ", got " + pair(r));
      }
    };
    const double inf = std::numeric_limits<double>::infinity();
    range("brightness", x.brightness, 0, inf, "(0, inf)");
    range("contrast", x.contrast, 0, inf, "(0, inf)");
    range("saturation", x.saturation, 0, inf, "(0, inf)");
    range("hue", x.hue, -0.5, 0.5, "(-0.5, 0.5)");
  }
  static void plan(const ColorJitter& x, PlanState* s) { plan_color_jitter(x, s); }
  static json to_json(const ColorJitter& x) {
    return {{"brightness", x.brightness}, {"contrast", x.contrast}, {"saturation", x.saturation}, {"hue", x.hue}};
  }
  static ColorJitter from_json(const json& j) {
    ColorJitter x;
    x.brightness = j.value("brightness", x.brightness);
    x.contrast = j.value("contrast", x.contrast);
    x.saturation = j.value("saturation", x.saturation);
    x.hue = j.value("hue", x.hue);
    return x;
  }
  static std::string repr(const ColorJitter& x) {
    std::ostringstream o;
    o << "ColorJitter(brightness=" << pair(x.brightness) << ", contrast=" << pair(x.contrast)
      << ", saturation=" << pair(x.saturation) << ", hue=" << pair(x.hue) << ')';
    return o.str();
  }
};

template <>
struct Def<Grayscale> : ImageStageDef {
  static constexpr const char* kName = "Grayscale";
  static constexpr bool kColour = true;
  static void check(const Grayscale& x) {
    if (x.num_output_channels != 3) {
      invalid("Grayscale: num_output_channels must be 3 (batches keep 3 channels), got " +
              std::to_string(x.num_output_channels));
    }
  }
  static void plan(const Grayscale&, PlanState* s) { s->plan->image_ops.push_back({ImageOp::kGrayscale}); }
  static json to_json(const Grayscale& x) { return {{"num_output_channels", x.num_output_channels}}; }
  static Grayscale from_json(const json& j) { return {j.value("num_output_channels", 3)}; }
  static std::string repr(const Grayscale& x) {
    return "Grayscale(num_output_channels=" + std::to_string(x.num_output_channels) + ")";
  }
};

template <>
struct Def<GaussianBlur> : ImageStageDef {
  static constexpr const char* kName = "GaussianBlur";
  static void check(const GaussianBlur& x) {
    for (int k : {x.kernel_w, x.kernel_h}) {
      if (k <= 0 || k % 2 == 0) invalid("GaussianBlur: Kernel size value should be an odd and positive number.");
    }
    if (!(0 < x.sigma[0] && x.sigma[0] <= x.sigma[1])) {
      invalid("GaussianBlur: sigma values should be positive and of the form (min, max).");
    }
  }
  static void plan(const GaussianBlur& x, PlanState* s) {
    // NOTE: torch's reflect padding needs padding < the image side.
    if (x.kernel_w / 2 >= s->width || x.kernel_h / 2 >= s->height) {
      invalid("GaussianBlur: kernel_size " + size2(x.kernel_w, x.kernel_h) + " is too large for a " +
              std::to_string(s->width) + "x" + std::to_string(s->height) +
              " image (reflect padding needs kernel_size // 2 < the side)");
    }
    plan_gaussian_blur(x, s);
  }
  static json to_json(const GaussianBlur& x) { return {{"kernel_size", {x.kernel_w, x.kernel_h}}, {"sigma", x.sigma}}; }
  static GaussianBlur from_json(const json& j) {
    return {j.at("kernel_size").at(0), j.at("kernel_size").at(1), j.value("sigma", GaussianBlur{}.sigma)};
  }
  static std::string repr(const GaussianBlur& x) {
    return "GaussianBlur(kernel_size=" + size2(x.kernel_w, x.kernel_h) + ", sigma=" + pair(x.sigma) + ")";
  }
};

// An image-stage op applied with probability p.
template <typename D, typename T>
struct RandomOpDef : ImageStageDef {
  static void plan(const T& x, PlanState* s) {
    if (s->rng->uniform01() < x.p) s->plan->image_ops.push_back(D::op(x));
  }
};

// An image-stage op with one parameter (D::kParam, the member Param) and p.
template <typename D, typename T, typename V, V T::*Param>
struct ParamOpDef : RandomOpDef<D, T> {
  static json to_json(const T& x) { return {{D::kParam, x.*Param}, {"p", x.p}}; }
  static T from_json(const json& j) {
    T x;
    x.*Param = j.at(D::kParam).template get<V>();
    x.p = j.value("p", 0.5);
    return x;
  }
  static std::string repr(const T& x) {
    std::ostringstream o;
    o << D::kName << '(' << D::kParam << '=' << x.*Param << ", p=" << x.p << ')';
    return o.str();
  }
};

template <>
struct Def<RandomSolarize>
    : ParamOpDef<Def<RandomSolarize>, RandomSolarize, double, &RandomSolarize::threshold> {
  static constexpr const char* kParam = "threshold";
  static constexpr const char* kName = "RandomSolarize";
  static constexpr bool kColour = true;
  static void check(const RandomSolarize& x) { check_probability(kName, x.p); }
  static ImageOp op(const RandomSolarize& x) {
    ImageOp o{ImageOp::kSolarize};
    o.factor = std::clamp(std::ceil(x.threshold), 0.0, 256.0);  // pixels i >= threshold, i an integer
    return o;
  }
};

template <>
struct Def<RandomPosterize> : ParamOpDef<Def<RandomPosterize>, RandomPosterize, int, &RandomPosterize::bits> {
  static constexpr const char* kParam = "bits";
  static constexpr const char* kName = "RandomPosterize";
  static constexpr bool kColour = true;
  static void check(const RandomPosterize& x) {
    check_probability(kName, x.p);
    if (x.bits < 0 || x.bits > 8) {
      invalid("RandomPosterize: The number if bits should be between 0 and 8. Got " + std::to_string(x.bits));
    }
  }
  static ImageOp op(const RandomPosterize& x) {
    ImageOp o{ImageOp::kPosterize};
    o.factor = x.bits;
    return o;
  }
};

template <>
struct Def<RandomAdjustSharpness>
    : ParamOpDef<Def<RandomAdjustSharpness>, RandomAdjustSharpness, double, &RandomAdjustSharpness::sharpness_factor> {
  static constexpr const char* kParam = "sharpness_factor";
  static constexpr const char* kName = "RandomAdjustSharpness";
  static void check(const RandomAdjustSharpness& x) {
    check_probability(kName, x.p);
    if (!(x.sharpness_factor >= 0)) {
      std::ostringstream o;
      o << "RandomAdjustSharpness: sharpness_factor (" << x.sharpness_factor << ") is not non-negative.";
      invalid(o.str());
    }
  }
  static ImageOp op(const RandomAdjustSharpness& x) {
    ImageOp o{ImageOp::kSharpness};
    o.factor = x.sharpness_factor;
    return o;
  }
};

// The image-stage ops whose one parameter is p.
template <typename D, typename T, ImageOp::Kind K>
struct PlainOpDef : RandomOpDef<D, T> {
  static void check(const T& x) { check_probability(D::kName, x.p); }
  static ImageOp op(const T&) { return {K}; }
  static json to_json(const T& x) { return {{"p", x.p}}; }
  static T from_json(const json& j) { return {j.value("p", 0.5)}; }
  static std::string repr(const T& x) {
    std::ostringstream o;
    o << D::kName << "(p=" << x.p << ')';
    return o.str();
  }
};

template <>
struct Def<RandomAutocontrast> : PlainOpDef<Def<RandomAutocontrast>, RandomAutocontrast, ImageOp::kAutocontrast> {
  static constexpr const char* kName = "RandomAutocontrast";
  static constexpr bool kColour = true;
};
template <>
struct Def<RandomEqualize> : PlainOpDef<Def<RandomEqualize>, RandomEqualize, ImageOp::kEqualize> {
  static constexpr const char* kName = "RandomEqualize";
  static constexpr bool kColour = true;
};
template <>
struct Def<RandomInvert> : PlainOpDef<Def<RandomInvert>, RandomInvert, ImageOp::kInvert> {
  static constexpr const char* kName = "RandomInvert";
  static constexpr bool kColour = true;
};

// JSON of the warps' shared parameters.
json warp_json(Interpolation i, const std::array<int, 3>& fill) {
  return {{"interpolation", name_of(i)}, {"fill", fill}};
}
std::array<int, 3> fill_from(const json& j) { return j.value("fill", std::array<int, 3>{0, 0, 0}); }
// RandomRotation's and RandomAffine's shared parameters.
template <typename T>
void warp_from(const json& j, T* x) {
  x->degrees = j.at("degrees").get<std::array<double, 2>>();
  x->interpolation = interpolation_from(j);
  x->fill = fill_from(j);
  if (j.contains("center")) {
    x->has_center = true;
    x->center = j.at("center").get<std::array<double, 2>>();
  }
}

template <>
struct Def<RandomRotation> : ImageStageDef {
  static constexpr const char* kName = "RandomRotation";
  static void check(const RandomRotation& x) { check_angle_range(kName, "degrees", x.degrees); }
  static void plan(const RandomRotation& x, PlanState* s) { plan_rotation(x, s); }
  static json to_json(const RandomRotation& x) {
    json j = warp_json(x.interpolation, x.fill);
    j["degrees"] = x.degrees;
    if (x.has_center) j["center"] = x.center;
    return j;
  }
  static RandomRotation from_json(const json& j) {
    RandomRotation x;
    warp_from(j, &x);
    return x;
  }
  static std::string repr(const RandomRotation& x) {
    std::ostringstream o;
    o << "RandomRotation(degrees=" << pair(x.degrees) << ", interpolation=" << name_of(x.interpolation);
    if (x.has_center) o << ", center=" << pair(x.center);
    o << ", fill=" << fill3(x.fill) << ')';
    return o.str();
  }
};

template <>
struct Def<RandomAffine> : ImageStageDef {
  static constexpr const char* kName = "RandomAffine";
  static void check(const RandomAffine& x) {
    check_angle_range(kName, "degrees", x.degrees);
    for (double t : x.translate) {
      if (!(0.0 <= t && t <= 1.0)) invalid("RandomAffine: translation values should be between 0 and 1");
    }
    for (double v : x.scale) {
      if (!(v > 0)) invalid("RandomAffine: scale values should be positive");
    }
    if (!(x.scale[0] <= x.scale[1])) invalid("RandomAffine: scale must be (min, max) with min <= max");
    check_angle_range(kName, "shear", {x.shear[0], x.shear[1]});
    check_angle_range(kName, "shear", {x.shear[2], x.shear[3]});
  }
  static void plan(const RandomAffine& x, PlanState* s) { plan_affine(x, s); }
  static json to_json(const RandomAffine& x) {
    json j = warp_json(x.interpolation, x.fill);
    j["degrees"] = x.degrees;
    j["translate"] = x.translate;
    j["scale"] = x.scale;
    j["shear"] = x.shear;
    if (x.has_center) j["center"] = x.center;
    return j;
  }
  static RandomAffine from_json(const json& j) {
    RandomAffine x;
    warp_from(j, &x);
    x.translate = j.value("translate", x.translate);
    x.scale = j.value("scale", x.scale);
    x.shear = j.value("shear", x.shear);
    return x;
  }
  static std::string repr(const RandomAffine& x) {
    std::ostringstream o;
    o << "RandomAffine(degrees=" << pair(x.degrees) << ", translate=" << pair(x.translate)
      << ", scale=" << pair(x.scale) << ", shear=(" << x.shear[0] << ", " << x.shear[1] << ", " << x.shear[2] << ", "
      << x.shear[3] << "), interpolation=" << name_of(x.interpolation);
    if (x.has_center) o << ", center=" << pair(x.center);
    o << ", fill=" << fill3(x.fill) << ')';
    return o.str();
  }
};

void check_bins(const char* name, int bins) {
  if (bins < 2) invalid(std::string(name) + ": num_magnitude_bins must be at least 2, got " + std::to_string(bins));
}

template <>
struct Def<TrivialAugmentWide> : ImageStageDef {
  static constexpr const char* kName = "TrivialAugmentWide";
  static constexpr bool kColour = true;
  static constexpr bool kImageOnly = true;
  static void check(const TrivialAugmentWide& x) { check_bins(kName, x.num_magnitude_bins); }
  static void plan(const TrivialAugmentWide& x, PlanState* s) { plan_trivial_augment(x, s); }
  static json to_json(const TrivialAugmentWide& x) {
    json j = warp_json(x.interpolation, x.fill);
    j["num_magnitude_bins"] = x.num_magnitude_bins;
    return j;
  }
  static TrivialAugmentWide from_json(const json& j) {
    return {j.value("num_magnitude_bins", 31), interpolation_from(j), fill_from(j)};
  }
  static std::string repr(const TrivialAugmentWide& x) {
    std::ostringstream o;
    o << "TrivialAugmentWide(num_magnitude_bins=" << x.num_magnitude_bins
      << ", interpolation=" << name_of(x.interpolation) << ", fill=" << fill3(x.fill) << ')';
    return o.str();
  }
};

template <>
struct Def<RandAugment> : ImageStageDef {
  static constexpr const char* kName = "RandAugment";
  static constexpr bool kColour = true;
  static constexpr bool kImageOnly = true;
  static void check(const RandAugment& x) {
    check_bins(kName, x.num_magnitude_bins);
    if (x.num_ops < 0) invalid("RandAugment: num_ops must be >= 0, got " + std::to_string(x.num_ops));
    if (x.magnitude < 0 || x.magnitude >= x.num_magnitude_bins) {
      invalid("RandAugment: magnitude must be in [0, num_magnitude_bins), got " + std::to_string(x.magnitude));
    }
  }
  static void plan(const RandAugment& x, PlanState* s) { plan_rand_augment(x, s); }
  static json to_json(const RandAugment& x) {
    json j = warp_json(x.interpolation, x.fill);
    j["num_ops"] = x.num_ops;
    j["magnitude"] = x.magnitude;
    j["num_magnitude_bins"] = x.num_magnitude_bins;
    return j;
  }
  static RandAugment from_json(const json& j) {
    return {j.value("num_ops", 2), j.value("magnitude", 9), j.value("num_magnitude_bins", 31), interpolation_from(j),
            fill_from(j)};
  }
  static std::string repr(const RandAugment& x) {
    std::ostringstream o;
    o << "RandAugment(num_ops=" << x.num_ops << ", magnitude=" << x.magnitude
      << ", num_magnitude_bins=" << x.num_magnitude_bins << ", interpolation=" << name_of(x.interpolation)
      << ", fill=" << fill3(x.fill) << ')';
    return o.str();
  }
};

template <>
struct Def<AutoAugment> : ImageStageDef {
  static constexpr const char* kName = "AutoAugment";
  static constexpr bool kColour = true;
  static constexpr bool kImageOnly = true;
  static void check(const AutoAugment&) {}
  static void plan(const AutoAugment& x, PlanState* s) { plan_auto_augment(x, s); }
  static json to_json(const AutoAugment& x) {
    json j = warp_json(x.interpolation, x.fill);
    j["policy"] = name_of(x.policy);
    return j;
  }
  static AutoAugment from_json(const json& j) {
    AutoAugment x;
    x.policy = enum_from(j, "policy", x.policy);
    x.interpolation = interpolation_from(j);
    x.fill = fill_from(j);
    return x;
  }
  static std::string repr(const AutoAugment& x) {
    std::ostringstream o;
    o << "AutoAugment(policy=" << name_of(x.policy) << ", interpolation=" << name_of(x.interpolation)
      << ", fill=" << fill3(x.fill) << ')';
    return o.str();
  }
};

template <>
struct Def<AugMix> : ImageStageDef {
  static constexpr const char* kName = "AugMix";
  static constexpr bool kColour = true;
  static constexpr bool kImageOnly = true;
  static void check(const AugMix& x) {
    if (x.severity < 1 || x.severity > 10) {
      invalid("AugMix: The severity must be between [1, 10]. Got " + std::to_string(x.severity) + " instead.");
    }
    if (x.mixture_width < 1 || x.mixture_width > 16) {
      invalid("AugMix: mixture_width must be in [1, 16], got " + std::to_string(x.mixture_width));
    }
    if (!(x.alpha > 0)) invalid("AugMix: alpha must be positive (a Dirichlet concentration)");
  }
  static void plan(const AugMix& x, PlanState* s) { plan_augmix(x, s); }
  static json to_json(const AugMix& x) {
    json j = {{"severity", x.severity},       {"mixture_width", x.mixture_width},
              {"chain_depth", x.chain_depth}, {"alpha", x.alpha},
              {"all_ops", x.all_ops},         {"interpolation", name_of(x.interpolation)}};
    if (x.has_fill) j["fill"] = x.fill;
    return j;
  }
  static AugMix from_json(const json& j) {
    AugMix x;
    x.severity = j.value("severity", x.severity);
    x.mixture_width = j.value("mixture_width", x.mixture_width);
    x.chain_depth = j.value("chain_depth", x.chain_depth);
    x.alpha = j.value("alpha", x.alpha);
    x.all_ops = j.value("all_ops", x.all_ops);
    x.interpolation = interpolation_from(j, x.interpolation);
    if (j.contains("fill")) {
      x.has_fill = true;
      x.fill = j.at("fill").get<std::array<float, 3>>();
    }
    return x;
  }
  static std::string repr(const AugMix& x) {
    std::ostringstream o;
    o << "AugMix(severity=" << x.severity << ", mixture_width=" << x.mixture_width << ", chain_depth=" << x.chain_depth
      << ", alpha=" << x.alpha << ", all_ops=" << (x.all_ops ? "True" : "False")
      << ", interpolation=" << name_of(x.interpolation) << ", fill=";
    if (x.has_fill) {
      o << '[' << x.fill[0] << ", " << x.fill[1] << ", " << x.fill[2] << ']';
    } else {
      o << "None";
    }
    o << ')';
    return o.str();
  }
};

template <>
struct Def<RandomErasing> {
  static constexpr const char* kName = "RandomErasing";
  static constexpr bool kOnTensor = true;
  static void check(const RandomErasing& x) {
    if (!(x.scale[0] >= 0 && x.scale[1] <= 1)) invalid("RandomErasing: Scale should be between 0 and 1");
    if (!(x.p >= 0 && x.p <= 1)) invalid("RandomErasing: Random erasing probability should be between 0 and 1");
    if (!(x.scale[0] <= x.scale[1] && x.ratio[0] <= x.ratio[1])) {
      invalid("RandomErasing: Scale and ratio should be of kind (min, max)");
    }
    if (!(x.ratio[0] > 0)) invalid("RandomErasing: ratio values should be positive");
    if (!x.random_values && x.value.size() != 1 && x.value.size() != 3) {
      invalid("RandomErasing: If value is a sequence, it should have either a single value or 3, got " +
              std::to_string(x.value.size()));
    }
  }
  static OutputSize size(const RandomErasing&, OutputSize before) { return before; }
  static void plan(const RandomErasing& x, PlanState* s) { plan_erasing(x, s); }
  static json to_json(const RandomErasing& x) {
    json j = {{"p", x.p}, {"scale", x.scale}, {"ratio", x.ratio}};
    if (x.random_values) {
      j["value"] = "random";
    } else {
      j["value"] = x.value;
    }
    return j;
  }
  static RandomErasing from_json(const json& j) {
    RandomErasing x;
    x.p = j.value("p", x.p);
    x.scale = j.value("scale", x.scale);
    x.ratio = j.value("ratio", x.ratio);
    if (j.contains("value") && j.at("value").is_string()) {
      if (j.at("value").get<std::string>() != "random") invalid("RandomErasing: If value is str, it should be 'random'");
      x.random_values = true;
      x.value.clear();
    } else {
      x.value = j.value("value", x.value);
    }
    return x;
  }
  static std::string repr(const RandomErasing& x) {
    std::ostringstream o;
    o << "RandomErasing(p=" << x.p << ", scale=" << pair(x.scale) << ", ratio=" << pair(x.ratio)
      << ", value=" << (x.random_values ? std::string("random") : list(x.value)) << ')';
    return o.str();
  }
};

template <typename F>
decltype(auto) with_def(const Transform& t, F&& f);
template <std::size_t I = 0>
Transform from_named(const std::string& name, const json& j);

template <>
struct Def<RandomApply> : ImageStageDef {
  static constexpr const char* kName = "RandomApply";
  static void check(const RandomApply& x) {
    check_probability(kName, x.p);
    for (const Transform& t : x.transforms) {
      check_transform(t);
      const TransformTraits traits = transform_traits(t);
      if (!traits.image_stage && !traits.photometric) {
        invalid(std::string("RandomApply: ") + transform_name(t) +
                " is not an image-stage transform (ColorJitter, GaussianBlur, Grayscale, RandomSolarize, ...)");
      }
    }
  }
  // Image-only when one of its transforms is.
  static TransformTraits traits(const RandomApply& x) {
    TransformTraits r;
    r.image_stage = true;
    for (const Transform& t : x.transforms) {
      r.image_only = r.image_only || transform_traits(t).image_only;
      r.colour = r.colour || transform_traits(t).colour;
    }
    return r;
  }
  static void plan(const RandomApply& x, PlanState* s) {
    if (!(s->rng->uniform01() < x.p)) return;
    for (const Transform& t : x.transforms) plan_transform(t, s);
  }
  static json to_json(const RandomApply& x) {
    json list = json::array();
    for (const Transform& t : x.transforms) list.push_back(json::parse(transform_to_json(t)));
    return {{"transforms", list}, {"p", x.p}};
  }
  static RandomApply from_json(const json& j) {
    RandomApply x;
    for (const json& t : j.at("transforms")) x.transforms.push_back(from_named(t.value("name", ""), t));
    x.p = j.value("p", 0.5);
    return x;
  }
  static std::string repr(const RandomApply& x) {
    std::string r = "RandomApply(transforms=[";
    for (std::size_t i = 0; i < x.transforms.size(); ++i) r += (i ? ", " : "") + transform_repr(x.transforms[i]);
    std::ostringstream o;
    o << "], p=" << x.p << ')';
    return r + o.str();
  }
};

template <typename F>
decltype(auto) with_def(const Transform& t, F&& f) {
  return std::visit([&](const auto& x) -> decltype(auto) { return f(x, Def<std::decay_t<decltype(x)>>{}); }, t);
}

// Every alternative by name, for from_json: from the variant itself, so a
// transform added to it is found here without another list.
template <std::size_t I>
Transform from_named(const std::string& name, const json& j) {
  if constexpr (I < std::variant_size_v<Transform>) {
    using T = std::variant_alternative_t<I, Transform>;
    if (name == Def<T>::kName) return Def<T>::from_json(j);
    return from_named<I + 1>(name, j);
  } else {
    invalid("transforms: unknown transform '" + name + "'");
  }
}

}  // namespace

const char* transform_name(const Transform& t) {
  return with_def(t, [](const auto&, auto def) { return decltype(def)::kName; });
}
void check_transform(const Transform& t) {
  with_def(t, [](const auto& x, auto def) { decltype(def)::check(x); });
}
OutputSize output_size(const Transform& t, OutputSize before) {
  return with_def(t, [&](const auto& x, auto def) { return decltype(def)::size(x, before); });
}
void plan_transform(const Transform& t, PlanState* s) {
  with_def(t, [&](const auto& x, auto def) { decltype(def)::plan(x, s); });
}

TransformTraits transform_traits(const Transform& t) {
  return with_def(t, [](const auto& x, auto def) {
    using D = decltype(def);
    if constexpr (requires { D::traits(x); }) return D::traits(x);
    TransformTraits r;
    if constexpr (requires { D::kPhotometric; }) r.photometric = D::kPhotometric;
    if constexpr (requires { D::kResamples; }) r.resamples = D::kResamples;
    if constexpr (requires { D::kGeometric; }) r.geometric = D::kGeometric;
    if constexpr (requires { D::kImageStage; }) r.image_stage = D::kImageStage;
    if constexpr (requires { D::kOnTensor; }) r.on_tensor = D::kOnTensor;
    if constexpr (requires { D::kImageOnly; }) r.image_only = D::kImageOnly;
    if constexpr (requires { D::kColour; }) r.colour = D::kColour;
    return r;
  });
}
std::string transform_repr(const Transform& t) {
  return with_def(t, [](const auto& x, auto def) { return decltype(def)::repr(x); });
}
std::string transform_to_json(const Transform& t) {
  return with_def(t, [](const auto& x, auto def) {
    json j = decltype(def)::to_json(x);
    j["name"] = decltype(def)::kName;
    return j.dump();
  });
}
Transform transform_from_json(const std::string& text) {
  try {
    const json j = json::parse(text);
    return from_named(j.value("name", ""), j);
  } catch (const json::exception& e) {
    invalid(std::string("transforms: ") + e.what());
  }
}

}  // namespace stoker::detail
