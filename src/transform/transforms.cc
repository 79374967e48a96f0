// Each transform's one definition (Def<T>), and torchvision 0.14's parameter
// rules, reproduced.
#include "transform/transform_defs.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <type_traits>

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
void add_crop(PlanState* s, Box box) {
  if (s->plan->mirror) box.x = s->width - box.x - box.width;
  if (s->plan->vflip) box.y = s->height - box.y - box.height;
  s->plan->steps.push_back({Step::kCrop, box, 0, 0});
  s->width = box.width;
  s->height = box.height;
}

template <typename T>
struct Def;

template <>
struct Def<RandomResizedCrop> {
  static constexpr const char* kName = "RandomResizedCrop";
  static constexpr bool kResamples = true;
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
  static void check(const Resize& x) {
    if (x.max_size < 0) invalid("Resize: max_size must be positive (or none), got " + std::to_string(x.max_size));
    if (x.width > 0) {
      check_size(kName, x.height, x.width);
      if (x.max_size > 0) invalid("Resize: max_size is only allowed when size is a single int");
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
    o << "Resize(size=" << (x.width > 0 ? size2(x.height, x.width) : std::to_string(x.height));
    if (x.max_size > 0) o << ", max_size=" << x.max_size;
    o << ')';
    return o.str();
  }
};

template <>
struct Def<CenterCrop> {
  static constexpr const char* kName = "CenterCrop";
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
  static constexpr bool kPhotometric = true;
  static void plan(const RandomGrayscale& x, PlanState* s) {
    if (s->rng->uniform01() < x.p) s->plan->photometric.push_back({SamplePlan::Photometric::kGrayscale});
  }
};

template <>
struct Def<Normalize> {
  static constexpr const char* kName = "Normalize";
  static void check(const Normalize& x) {
    auto ok_len = [](std::size_t n) { return n == 1 || n == 3; };
    if (!ok_len(x.mean.size()) || !ok_len(x.std.size())) {
      invalid("Normalize: mean and std need 1 or 3 values, got " + std::to_string(x.mean.size()) + " and " +
              std::to_string(x.std.size()));
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

template <typename F>
decltype(auto) with_def(const Transform& t, F&& f) {
  return std::visit([&](const auto& x) -> decltype(auto) { return f(x, Def<std::decay_t<decltype(x)>>{}); }, t);
}

// Every alternative by name, for from_json: from the variant itself, so a
// transform added to it is found here without another list.
template <std::size_t I = 0>
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
  return with_def(t, [](const auto&, auto def) {
    using D = decltype(def);
    TransformTraits r;
    if constexpr (requires { D::kPhotometric; }) r.photometric = D::kPhotometric;
    if constexpr (requires { D::kResamples; }) r.resamples = D::kResamples;
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
