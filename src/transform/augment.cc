// The image stage's per-sample draws, following torchvision 0.14's
// transforms.py and autoaugment.py step for step (which values are drawn,
// in which order, and how they become the functional ops' arguments).
#include "transform/augment.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>
#include <utility>

#include "transform/image_ops.h"
#include "util/util.h"

namespace stoker::detail {
namespace {

// Python's round(): half to even.
int py_round(double v) { return static_cast<int>(std::nearbyint(v)); }

// CPython's math.degrees: x * radToDeg, the constant 180 / pi.
double degrees(double rad) {
  constexpr double kRadToDeg = 180.0 / std::numbers::pi;
  return rad * kRadToDeg;
}

ImageOp affine_op(const double matrix[6], Interpolation interpolation, const std::array<int, 3>& fill) {
  ImageOp op;
  op.kind = ImageOp::kAffine;
  std::memcpy(op.matrix, matrix, sizeof(op.matrix));
  op.bilinear = interpolation == Interpolation::kBilinear;
  // F_pil's _parse_fill: int(x) of each value; PIL then clips to 0..255.
  for (int c = 0; c < 3; ++c) op.fill[c] = static_cast<std::uint8_t>(std::clamp(fill[c], 0, 255));
  return op;
}

ImageOp factor_op(ImageOp::Kind kind, double factor) {
  ImageOp op;
  op.kind = kind;
  op.factor = factor;
  return op;
}

// F.solarize(img, threshold) on PIL: pixels i with i >= threshold become
// 255 - i; for an integer i that is i >= ceil(threshold).
ImageOp solarize_op(double threshold) {
  return factor_op(ImageOp::kSolarize, std::clamp(std::ceil(threshold), 0.0, 256.0));
}

// F.affine on a PIL image: torchvision's inverse matrix, then PIL's warp.
void add_affine(PlanState* s, const double* center, double angle, double tx, double ty, double scale, double shear_x,
                double shear_y, Interpolation interpolation, const std::array<int, 3>& fill) {
  double m[6];
  torchvision_affine_matrix(s->width, s->height, center, angle, tx, ty, scale, shear_x, shear_y, m);
  s->plan->image_ops.push_back(affine_op(m, interpolation, fill));
}

// F.rotate(img, angle, interpolation, expand=False, center, fill) on PIL.
void add_rotate(PlanState* s, double angle, const double* center, Interpolation interpolation,
                const std::array<int, 3>& fill) {
  double m[6];
  pil_rotate_matrix(s->width, s->height, angle, center, m);
  s->plan->image_ops.push_back(affine_op(m, interpolation, fill));
}

// One entry of a policy's augmentation space.
struct SpaceOp {
  const char* name;
  enum Table { kNone, kLinspace, kPosterize } table;
  double start, end;  // kLinspace; end < 0: -end * the image width (TranslateX) or height (TranslateY) * 150/331
  bool is_signed;
  double posterize_span;  // kPosterize: 8 - round(i / ((bins - 1) / span))
};

constexpr double kByWidth = -1.0, kByHeight = -2.0;

// TrivialAugmentWide._augmentation_space.
constexpr SpaceOp kWideSpace[] = {
    {"Identity", SpaceOp::kNone, 0, 0, false, 0},         {"ShearX", SpaceOp::kLinspace, 0, 0.99, true, 0},
    {"ShearY", SpaceOp::kLinspace, 0, 0.99, true, 0},     {"TranslateX", SpaceOp::kLinspace, 0, 32.0, true, 0},
    {"TranslateY", SpaceOp::kLinspace, 0, 32.0, true, 0}, {"Rotate", SpaceOp::kLinspace, 0, 135.0, true, 0},
    {"Brightness", SpaceOp::kLinspace, 0, 0.99, true, 0}, {"Color", SpaceOp::kLinspace, 0, 0.99, true, 0},
    {"Contrast", SpaceOp::kLinspace, 0, 0.99, true, 0},   {"Sharpness", SpaceOp::kLinspace, 0, 0.99, true, 0},
    {"Posterize", SpaceOp::kPosterize, 0, 0, false, 6},   {"Solarize", SpaceOp::kLinspace, 255.0, 0.0, false, 0},
    {"AutoContrast", SpaceOp::kNone, 0, 0, false, 0},     {"Equalize", SpaceOp::kNone, 0, 0, false, 0},
};

// RandAugment._augmentation_space (AutoAugment's is the same without
// Identity, plus Invert).
constexpr SpaceOp kRandSpace[] = {
    {"Identity", SpaceOp::kNone, 0, 0, false, 0},          {"ShearX", SpaceOp::kLinspace, 0, 0.3, true, 0},
    {"ShearY", SpaceOp::kLinspace, 0, 0.3, true, 0},       {"TranslateX", SpaceOp::kLinspace, 0, kByWidth, true, 0},
    {"TranslateY", SpaceOp::kLinspace, 0, kByHeight, true, 0}, {"Rotate", SpaceOp::kLinspace, 0, 30.0, true, 0},
    {"Brightness", SpaceOp::kLinspace, 0, 0.9, true, 0},   {"Color", SpaceOp::kLinspace, 0, 0.9, true, 0},
    {"Contrast", SpaceOp::kLinspace, 0, 0.9, true, 0},     {"Sharpness", SpaceOp::kLinspace, 0, 0.9, true, 0},
    {"Posterize", SpaceOp::kPosterize, 0, 0, false, 4},    {"Solarize", SpaceOp::kLinspace, 255.0, 0.0, false, 0},
    {"AutoContrast", SpaceOp::kNone, 0, 0, false, 0},      {"Equalize", SpaceOp::kNone, 0, 0, false, 0},
    {"Invert", SpaceOp::kNone, 0, 0, false, 0},  // AutoAugment only
};
constexpr int kRandAugmentOps = 14;  // RandAugment's space: kRandSpace without Invert

const SpaceOp* find_op(const SpaceOp* space, int n, const std::string& name) {
  for (int i = 0; i < n; ++i) {
    if (name == space[i].name) return &space[i];
  }
  return nullptr;
}

// magnitudes[bin] of the op's table as a Python float (float32 -> double).
double magnitude_of(const SpaceOp& op, int num_bins, int bin, int width, int height) {
  switch (op.table) {
    case SpaceOp::kNone:
      return 0.0;
    case SpaceOp::kLinspace: {
      double end = op.end;
      // torchvision: 150.0 / 331.0 * image_size[1] (width) or [0] (height), a
      // Python float torch.linspace takes as float32.
      if (end == kByWidth) end = 150.0 / 331.0 * width;
      if (end == kByHeight) end = 150.0 / 331.0 * height;
      return torch_linspace(static_cast<float>(op.start), static_cast<float>(end), num_bins, bin);
    }
    case SpaceOp::kPosterize: {
      // 8 - (torch.arange(num_bins) / ((num_bins - 1) / span)).round().int(): float32 division, half to even.
      const auto divisor = static_cast<float>((num_bins - 1) / op.posterize_span);
      const float q = static_cast<float>(bin) / divisor;
      return 8 - static_cast<int>(std::nearbyint(q));
    }
  }
  return 0.0;
}

}  // namespace

float torch_linspace(float start, float end, int steps, int i) {
  // torch 1.13's linspace_kernel (aten/src/ATen/native/cpu/RangeFactoriesKernel.cpp)
  // as its AVX2 build runs it (CPU capability AVX2, the Debian build on this
  // machine class): step in float; blocks of 16 (two 8-lane vectors) take a
  // base per vector, start + step * idx (or end - step * (steps - idx - 1)
  // past halfway), compiled as one fused multiply-add, and the lanes
  // base + j * step unfused (Vectorized<float>::arange); the rest one by one
  // with the fused form. Matched against torch.linspace in test_augment.py.
  // NOTE: torch's AVX-512 build (16 lanes) can differ in the last bit.
  if (steps == 1) return start;
  const float step = (end - start) / static_cast<float>(steps - 1);
  const int halfway = steps / 2;
  auto fused = [&](int idx) {
    return idx < halfway ? std::fma(step, static_cast<float>(idx), start)
                         : std::fma(-step, static_cast<float>(steps - idx - 1), end);
  };
  const int vectorised = steps / 16 * 16;
  if (i >= vectorised) return fused(i);
  const int base_idx = i / 8 * 8;
  const float base = fused(base_idx);
  if (i == base_idx) return base;
  const float lane = static_cast<float>(i - base_idx) * step;
  return base + lane;
}

double policy_magnitude(const char* space, const std::string& name, int num_bins, int bin, int width, int height,
                        bool* is_signed) {
  const bool wide = std::strcmp(space, "wide") == 0;
  const SpaceOp* op = wide ? find_op(kWideSpace, std::size(kWideSpace), name)
                           : find_op(kRandSpace, std::size(kRandSpace), name);
  if (!op) invalid(std::string("policy: unknown op '") + name + "'");
  if (is_signed) *is_signed = op->is_signed;
  return magnitude_of(*op, num_bins, bin, width, height);
}

void add_policy_op(const std::string& name, double magnitude, Interpolation interpolation,
                   const std::array<int, 3>& fill, PlanState* s) {
  auto& ops = s->plan->image_ops;
  static constexpr double kOrigin[2] = {0.0, 0.0};
  if (name == "Identity") return;
  if (name == "ShearX") {
    add_affine(s, kOrigin, 0.0, 0, 0, 1.0, degrees(std::atan(magnitude)), 0.0, interpolation, fill);
  } else if (name == "ShearY") {
    add_affine(s, kOrigin, 0.0, 0, 0, 1.0, 0.0, degrees(std::atan(magnitude)), interpolation, fill);
  } else if (name == "TranslateX") {
    add_affine(s, nullptr, 0.0, static_cast<int>(magnitude), 0, 1.0, 0.0, 0.0, interpolation, fill);
  } else if (name == "TranslateY") {
    add_affine(s, nullptr, 0.0, 0, static_cast<int>(magnitude), 1.0, 0.0, 0.0, interpolation, fill);
  } else if (name == "Rotate") {
    add_rotate(s, magnitude, nullptr, interpolation, fill);
  } else if (name == "Brightness") {
    ops.push_back(factor_op(ImageOp::kBrightness, 1.0 + magnitude));
  } else if (name == "Color") {
    ops.push_back(factor_op(ImageOp::kSaturation, 1.0 + magnitude));
  } else if (name == "Contrast") {
    ops.push_back(factor_op(ImageOp::kContrast, 1.0 + magnitude));
  } else if (name == "Sharpness") {
    ops.push_back(factor_op(ImageOp::kSharpness, 1.0 + magnitude));
  } else if (name == "Posterize") {
    ops.push_back(factor_op(ImageOp::kPosterize, static_cast<int>(magnitude)));
  } else if (name == "Solarize") {
    ops.push_back(solarize_op(magnitude));
  } else if (name == "AutoContrast") {
    ops.push_back(factor_op(ImageOp::kAutocontrast, 0));
  } else if (name == "Equalize") {
    ops.push_back(factor_op(ImageOp::kEqualize, 0));
  } else if (name == "Invert") {
    ops.push_back(factor_op(ImageOp::kInvert, 0));
  } else {
    invalid("The provided operator " + name + " is not recognized.");
  }
}

void plan_color_jitter(const ColorJitter& t, PlanState* s) {
  // get_params: fn_idx = torch.randperm(4), then each enabled factor.
  int order[4] = {0, 1, 2, 3};
  for (int i = 3; i > 0; --i) std::swap(order[i], order[s->rng->below(static_cast<std::uint64_t>(i) + 1)]);
  auto draw = [&](const std::array<double, 2>& r, double identity, bool* on) {
    *on = !(r[0] == identity && r[1] == identity);
    return *on ? s->rng->uniform(r[0], r[1]) : identity;
  };
  bool on[4];
  const double factor[4] = {draw(t.brightness, 1.0, &on[0]), draw(t.contrast, 1.0, &on[1]),
                            draw(t.saturation, 1.0, &on[2]), draw(t.hue, 0.0, &on[3])};
  constexpr ImageOp::Kind kKinds[4] = {ImageOp::kBrightness, ImageOp::kContrast, ImageOp::kSaturation, ImageOp::kHue};
  for (int fn : order) {
    if (on[fn]) s->plan->image_ops.push_back(factor_op(kKinds[fn], factor[fn]));
  }
}

void plan_gaussian_blur(const GaussianBlur& t, PlanState* s) {
  const double sigma = s->rng->uniform(t.sigma[0], t.sigma[1]);
  ImageOp op;
  op.kind = ImageOp::kGaussianBlur;
  op.kernel_w = t.kernel_w;
  op.kernel_h = t.kernel_h;
  op.sigma_x = op.sigma_y = sigma;
  s->plan->image_ops.push_back(op);
}

void plan_rotation(const RandomRotation& t, PlanState* s) {
  const double angle = s->rng->uniform(t.degrees[0], t.degrees[1]);
  add_rotate(s, angle, t.has_center ? t.center.data() : nullptr, t.interpolation, t.fill);
}

void plan_affine(const RandomAffine& t, PlanState* s) {
  // RandomAffine.get_params with img_size = [width, height].
  const double angle = s->rng->uniform(t.degrees[0], t.degrees[1]);
  int tx = 0, ty = 0;
  if (t.translate[0] > 0 || t.translate[1] > 0) {
    const double max_dx = t.translate[0] * s->width, max_dy = t.translate[1] * s->height;
    tx = py_round(s->rng->uniform(-max_dx, max_dx));
    ty = py_round(s->rng->uniform(-max_dy, max_dy));
  }
  const double scale = t.scale[0] == t.scale[1] ? t.scale[0] : s->rng->uniform(t.scale[0], t.scale[1]);
  double shear_x = 0.0, shear_y = 0.0;
  if (t.shear[0] != 0 || t.shear[1] != 0) shear_x = s->rng->uniform(t.shear[0], t.shear[1]);
  if (t.shear[2] != 0 || t.shear[3] != 0) shear_y = s->rng->uniform(t.shear[2], t.shear[3]);
  add_affine(s, t.has_center ? t.center.data() : nullptr, angle, tx, ty, scale, shear_x, shear_y, t.interpolation,
             t.fill);
}

void plan_trivial_augment(const TrivialAugmentWide& t, PlanState* s) {
  const SpaceOp& op = kWideSpace[s->rng->below(std::size(kWideSpace))];
  double magnitude = 0.0;
  if (op.table != SpaceOp::kNone) {
    const int bin = static_cast<int>(s->rng->below(static_cast<std::uint64_t>(t.num_magnitude_bins)));
    magnitude = magnitude_of(op, t.num_magnitude_bins, bin, s->width, s->height);
  }
  if (op.is_signed && s->rng->below(2)) magnitude *= -1.0;
  add_policy_op(op.name, magnitude, t.interpolation, t.fill, s);
}

void plan_rand_augment(const RandAugment& t, PlanState* s) {
  for (int i = 0; i < t.num_ops; ++i) {
    const SpaceOp& op = kRandSpace[s->rng->below(kRandAugmentOps)];
    double magnitude = magnitude_of(op, t.num_magnitude_bins, t.magnitude, s->width, s->height);
    if (op.is_signed && s->rng->below(2)) magnitude *= -1.0;
    add_policy_op(op.name, magnitude, t.interpolation, t.fill, s);
  }
}

namespace {
struct SubOp {
  const char* name;
  double p;
  int magnitude_id;  // -1: None
};
using SubPolicy = std::pair<SubOp, SubOp>;

// AutoAugment._get_policies, as listed there.
constexpr SubPolicy kImageNetPolicy[] = {
    {{"Posterize", 0.4, 8}, {"Rotate", 0.6, 9}},       {{"Solarize", 0.6, 5}, {"AutoContrast", 0.6, -1}},
    {{"Equalize", 0.8, -1}, {"Equalize", 0.6, -1}},    {{"Posterize", 0.6, 7}, {"Posterize", 0.6, 6}},
    {{"Equalize", 0.4, -1}, {"Solarize", 0.2, 4}},     {{"Equalize", 0.4, -1}, {"Rotate", 0.8, 8}},
    {{"Solarize", 0.6, 3}, {"Equalize", 0.6, -1}},     {{"Posterize", 0.8, 5}, {"Equalize", 1.0, -1}},
    {{"Rotate", 0.2, 3}, {"Solarize", 0.6, 8}},        {{"Equalize", 0.6, -1}, {"Posterize", 0.4, 6}},
    {{"Rotate", 0.8, 8}, {"Color", 0.4, 0}},           {{"Rotate", 0.4, 9}, {"Equalize", 0.6, -1}},
    {{"Equalize", 0.0, -1}, {"Equalize", 0.8, -1}},    {{"Invert", 0.6, -1}, {"Equalize", 1.0, -1}},
    {{"Color", 0.6, 4}, {"Contrast", 1.0, 8}},         {{"Rotate", 0.8, 8}, {"Color", 1.0, 2}},
    {{"Color", 0.8, 8}, {"Solarize", 0.8, 7}},         {{"Sharpness", 0.4, 7}, {"Invert", 0.6, -1}},
    {{"ShearX", 0.6, 5}, {"Equalize", 1.0, -1}},       {{"Color", 0.4, 0}, {"Equalize", 0.6, -1}},
    {{"Equalize", 0.4, -1}, {"Solarize", 0.2, 4}},     {{"Solarize", 0.6, 5}, {"AutoContrast", 0.6, -1}},
    {{"Invert", 0.6, -1}, {"Equalize", 1.0, -1}},      {{"Color", 0.6, 4}, {"Contrast", 1.0, 8}},
    {{"Equalize", 0.8, -1}, {"Equalize", 0.6, -1}},
};
constexpr SubPolicy kCifar10Policy[] = {
    {{"Invert", 0.1, -1}, {"Contrast", 0.2, 6}},       {{"Rotate", 0.7, 2}, {"TranslateX", 0.3, 9}},
    {{"Sharpness", 0.8, 1}, {"Sharpness", 0.9, 3}},    {{"ShearY", 0.5, 8}, {"TranslateY", 0.7, 9}},
    {{"AutoContrast", 0.5, -1}, {"Equalize", 0.9, -1}}, {{"ShearY", 0.2, 7}, {"Posterize", 0.3, 7}},
    {{"Color", 0.4, 3}, {"Brightness", 0.6, 7}},       {{"Sharpness", 0.3, 9}, {"Brightness", 0.7, 9}},
    {{"Equalize", 0.6, -1}, {"Equalize", 0.5, -1}},    {{"Contrast", 0.6, 7}, {"Sharpness", 0.6, 5}},
    {{"Color", 0.7, 7}, {"TranslateX", 0.5, 8}},       {{"Equalize", 0.3, -1}, {"AutoContrast", 0.4, -1}},
    {{"TranslateY", 0.4, 3}, {"Sharpness", 0.2, 6}},   {{"Brightness", 0.9, 6}, {"Color", 0.2, 8}},
    {{"Solarize", 0.5, 2}, {"Invert", 0.0, -1}},       {{"Equalize", 0.2, -1}, {"AutoContrast", 0.6, -1}},
    {{"Equalize", 0.2, -1}, {"Equalize", 0.6, -1}},    {{"Color", 0.9, 9}, {"Equalize", 0.6, -1}},
    {{"AutoContrast", 0.8, -1}, {"Solarize", 0.2, 8}}, {{"Brightness", 0.1, 3}, {"Color", 0.7, 0}},
    {{"Solarize", 0.4, 5}, {"AutoContrast", 0.9, -1}}, {{"TranslateY", 0.9, 9}, {"TranslateY", 0.7, 9}},
    {{"AutoContrast", 0.9, -1}, {"Solarize", 0.8, 3}}, {{"Equalize", 0.8, -1}, {"Invert", 0.1, -1}},
    {{"TranslateY", 0.7, 9}, {"AutoContrast", 0.9, -1}},
};
constexpr SubPolicy kSvhnPolicy[] = {
    {{"ShearX", 0.9, 4}, {"Invert", 0.2, -1}},         {{"ShearY", 0.9, 8}, {"Invert", 0.7, -1}},
    {{"Equalize", 0.6, -1}, {"Solarize", 0.6, 6}},     {{"Invert", 0.9, -1}, {"Equalize", 0.6, -1}},
    {{"Equalize", 0.6, -1}, {"Rotate", 0.9, 3}},       {{"ShearX", 0.9, 4}, {"AutoContrast", 0.8, -1}},
    {{"ShearY", 0.9, 8}, {"Invert", 0.4, -1}},         {{"ShearY", 0.9, 5}, {"Solarize", 0.2, 6}},
    {{"Invert", 0.9, -1}, {"AutoContrast", 0.8, -1}},  {{"Equalize", 0.6, -1}, {"Rotate", 0.9, 3}},
    {{"ShearX", 0.9, 4}, {"Solarize", 0.3, 3}},        {{"ShearY", 0.8, 8}, {"Invert", 0.7, -1}},
    {{"Equalize", 0.9, -1}, {"TranslateY", 0.6, 6}},   {{"Invert", 0.9, -1}, {"Equalize", 0.6, -1}},
    {{"Contrast", 0.3, 3}, {"Rotate", 0.8, 4}},        {{"Invert", 0.8, -1}, {"TranslateY", 0.0, 2}},
    {{"ShearY", 0.7, 6}, {"Solarize", 0.4, 8}},        {{"Invert", 0.6, -1}, {"Rotate", 0.8, 4}},
    {{"ShearY", 0.3, 7}, {"TranslateX", 0.9, 3}},      {{"ShearX", 0.1, 6}, {"Invert", 0.6, -1}},
    {{"Solarize", 0.7, 2}, {"TranslateY", 0.6, 7}},    {{"ShearY", 0.8, 4}, {"Invert", 0.8, -1}},
    {{"ShearX", 0.7, 9}, {"TranslateY", 0.8, 3}},      {{"ShearY", 0.8, 5}, {"AutoContrast", 0.7, -1}},
    {{"ShearX", 0.7, 2}, {"Invert", 0.1, -1}},
};
}  // namespace

void plan_auto_augment(const AutoAugment& t, PlanState* s) {
  const SubPolicy* policies = kImageNetPolicy;
  std::size_t n = std::size(kImageNetPolicy);
  if (t.policy == AutoAugmentPolicy::kCifar10) {
    policies = kCifar10Policy;
    n = std::size(kCifar10Policy);
  } else if (t.policy == AutoAugmentPolicy::kSvhn) {
    policies = kSvhnPolicy;
    n = std::size(kSvhnPolicy);
  }
  // get_params: policy_id, probs = torch.rand(2), signs = torch.randint(2, (2,)).
  const SubPolicy& sub = policies[s->rng->below(n)];
  const double probs[2] = {s->rng->uniform01(), s->rng->uniform01()};
  const bool negative[2] = {s->rng->below(2) == 0, s->rng->below(2) == 0};
  const SubOp ops[2] = {sub.first, sub.second};
  for (int i = 0; i < 2; ++i) {
    if (!(probs[i] <= ops[i].p)) continue;
    const SpaceOp* op = find_op(kRandSpace, std::size(kRandSpace), ops[i].name);
    double magnitude = ops[i].magnitude_id >= 0 ? magnitude_of(*op, 10, ops[i].magnitude_id, s->width, s->height) : 0.0;
    if (op->is_signed && negative[i]) magnitude *= -1.0;
    add_policy_op(ops[i].name, magnitude, t.interpolation, t.fill, s);
  }
}

void plan_erasing(const RandomErasing& t, PlanState* s) {
  if (!(s->rng->uniform01() < t.p)) return;
  // RandomErasing.get_params on the [3, H, W] tensor: h from area * ratio.
  const int img_h = s->height, img_w = s->width;
  const double area = static_cast<double>(img_h) * img_w;
  const double log_r0 = std::log(t.ratio[0]), log_r1 = std::log(t.ratio[1]);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double erase_area = area * s->rng->uniform(t.scale[0], t.scale[1]);
    const double aspect = std::exp(s->rng->uniform(log_r0, log_r1));
    const int h = py_round(std::sqrt(erase_area * aspect));
    const int w = py_round(std::sqrt(erase_area / aspect));
    if (!(h < img_h && w < img_w)) continue;
    SamplePlan::Erase e;
    e.seed = t.random_values ? s->rng->next_u64() : 0;
    const int i = static_cast<int>(s->rng->below(static_cast<std::uint64_t>(img_h - h + 1)));
    const int j = static_cast<int>(s->rng->below(static_cast<std::uint64_t>(img_w - w + 1)));
    e.box = {j, i, w, h};
    e.transform = s->index;
    s->plan->erase.push_back(e);
    return;
  }
  // No box fits in 10 tries: the image is returned unchanged, as torchvision does.
}

namespace {

// A Gamma(alpha, 1) draw (Marsaglia and Tsang; alpha < 1 boosted by U^(1/alpha)).
double gamma_draw(double alpha, Rng* rng) {
  if (alpha < 1.0) {
    const double u = 1.0 - rng->uniform01();  // (0, 1]
    return gamma_draw(alpha + 1.0, rng) * std::pow(u, 1.0 / alpha);
  }
  const double d = alpha - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  for (int tries = 0; tries < 1000; ++tries) {
    double x, v;
    do {
      x = rng->normal();
      v = 1.0 + c * x;
    } while (v <= 0.0);
    v = v * v * v;
    const double u = 1.0 - rng->uniform01();
    if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
  }
  return alpha;  // unreachable in practice (acceptance is above 95% per try)
}

// Dirichlet(alpha, ..., alpha) of n weights, as float32 (torch's dtype here).
void dirichlet(double alpha, int n, Rng* rng, float* out) {
  double g[16], sum = 0;
  for (int i = 0; i < n; ++i) sum += g[i] = gamma_draw(alpha, rng);
  for (int i = 0; i < n; ++i) out[i] = static_cast<float>(g[i] / sum);
}

// AugMix._augmentation_space, in its order (the last four only with all_ops).
constexpr PolicyOp kAugMixOps[] = {PolicyOp::kShearX,     PolicyOp::kShearY,       PolicyOp::kTranslateX,
                                   PolicyOp::kTranslateY, PolicyOp::kRotate,       PolicyOp::kPosterize,
                                   PolicyOp::kSolarize,   PolicyOp::kAutoContrast, PolicyOp::kEqualize,
                                   PolicyOp::kBrightness, PolicyOp::kColor,        PolicyOp::kContrast,
                                   PolicyOp::kSharpness};
constexpr int kAugMixBins = 10;  // AugMix._PARAMETER_MAX

}  // namespace

PolicyOp augmix_op(bool all_ops, int index, int bin, int width, int height, double* magnitude, bool* is_signed) {
  (void)all_ops;
  const PolicyOp op = kAugMixOps[index];
  bool sign = true;
  double m = 0.0;
  switch (op) {
    case PolicyOp::kShearX:
    case PolicyOp::kShearY:
      m = torch_linspace(0.0f, 0.3f, kAugMixBins, bin);
      break;
    case PolicyOp::kTranslateX:  // image_size[1] / 3.0 (the width), a float32 end
      m = torch_linspace(0.0f, static_cast<float>(width / 3.0), kAugMixBins, bin);
      break;
    case PolicyOp::kTranslateY:
      m = torch_linspace(0.0f, static_cast<float>(height / 3.0), kAugMixBins, bin);
      break;
    case PolicyOp::kRotate:
      m = torch_linspace(0.0f, 30.0f, kAugMixBins, bin);
      break;
    case PolicyOp::kPosterize: {  // 4 - (arange(10) / ((10 - 1) / 4)).round().int()
      const auto divisor = static_cast<float>((kAugMixBins - 1) / 4.0);
      m = 4 - static_cast<int>(std::nearbyint(static_cast<float>(bin) / divisor));
      sign = false;
      break;
    }
    case PolicyOp::kSolarize:
      m = torch_linspace(255.0f, 0.0f, kAugMixBins, bin);
      sign = false;
      break;
    case PolicyOp::kAutoContrast:
    case PolicyOp::kEqualize:
      sign = false;
      break;
    default:  // Brightness, Color, Contrast, Sharpness
      m = torch_linspace(0.0f, 0.9f, kAugMixBins, bin);
      break;
  }
  *magnitude = m;
  if (is_signed) *is_signed = sign;
  return op;
}

void plan_augmix(const AugMix& t, PlanState* s) {
  // AugMix.forward: m = Dirichlet([a, a]); the chains' weights Dirichlet([a] * width) * m[1] (float32); per
  // chain a depth, then per op its index, a bin below severity and a sign.
  SamplePlan::AugMixDraw d;
  float m[2];
  dirichlet(t.alpha, 2, s->rng, m);
  float w[16];
  dirichlet(t.alpha, t.mixture_width, s->rng, w);
  d.w0 = m[0];
  d.bilinear = t.interpolation == Interpolation::kBilinear;
  d.has_fill = t.has_fill;
  for (int c = 0; c < 3; ++c) d.fill[c] = t.fill[c];
  const int n_ops = t.all_ops ? 13 : 9;
  for (int i = 0; i < t.mixture_width; ++i) {
    SamplePlan::AugMixDraw::Chain chain;
    chain.weight = w[i] * m[1];
    const int depth = t.chain_depth > 0 ? t.chain_depth : 1 + static_cast<int>(s->rng->below(3));
    for (int k = 0; k < depth; ++k) {
      const int index = static_cast<int>(s->rng->below(static_cast<std::uint64_t>(n_ops)));
      const int bin = static_cast<int>(s->rng->below(static_cast<std::uint64_t>(t.severity)));
      double magnitude = 0.0;
      bool is_signed = false;
      const PolicyOp op = augmix_op(t.all_ops, index, bin, s->width, s->height, &magnitude, &is_signed);
      if (is_signed && s->rng->below(2)) magnitude *= -1.0;
      chain.ops.emplace_back(op, magnitude);
    }
    d.chains.push_back(std::move(chain));
  }
  ImageOp op;
  op.kind = ImageOp::kAugMix;
  op.factor = static_cast<double>(s->plan->augmix.size());
  s->plan->augmix.push_back(std::move(d));
  s->plan->image_ops.push_back(op);
}

void augmix_apply(const SamplePlan::AugMixDraw& d, ImageBuffer* img, ImageOpScratch* scratch) {
  const int w = img->width, h = img->height;
  const std::size_t row = static_cast<std::size_t>(w) * 3;
  const std::size_t n = row * static_cast<std::size_t>(h);
  scratch->mix.resize(n);
  float* mix = scratch->mix.data();
  // mix = m[0] * batch: a float32 product with the uint8 values.
  for (int y = 0; y < h; ++y) {
    const std::uint8_t* p = img->row(y);
    float* o = mix + static_cast<std::size_t>(y) * row;
    for (std::size_t i = 0; i < row; ++i) o[i] = d.w0 * static_cast<float>(p[i]);
  }
  scratch->orig = *img;
  for (const auto& chain : d.chains) {
    scratch->chain = scratch->orig;
    for (const auto& [op, magnitude] : chain.ops) {
      tensor_apply_op(&scratch->chain, op, magnitude, d.bilinear, d.has_fill ? d.fill : nullptr, scratch);
    }
    // mix.add_(combined_weights[:, i] * aug): the product rounded to float32, then the sum.
    for (int y = 0; y < h; ++y) {
      const std::uint8_t* p = scratch->chain.row(y);
      float* o = mix + static_cast<std::size_t>(y) * row;
      for (std::size_t i = 0; i < row; ++i) {
        const float t = chain.weight * static_cast<float>(p[i]);
        o[i] += t;
      }
    }
  }
  // mix.to(uint8): truncation toward zero (the mix is >= 0).
  for (int y = 0; y < h; ++y) {
    std::uint8_t* p = img->row(y);
    const float* o = mix + static_cast<std::size_t>(y) * row;
    for (std::size_t i = 0; i < row; ++i) p[i] = static_cast<std::uint8_t>(std::min(o[i], 255.0f));
  }
}

}  // namespace stoker::detail
