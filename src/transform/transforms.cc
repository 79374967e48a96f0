// torchvision 0.14's parameter rules, reproduced.
#include <algorithm>
#include <cmath>

#include "transform/pipeline.h"

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

}  // namespace stoker::detail
