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
  static constexpr const char* kDoc = R"doc(Crop a random part of the image and resize it to ``size``.

As ``torchvision.transforms.RandomResizedCrop(size, scale, ratio)`` on a PIL
image (bilinear, PIL's antialiased filter; bit-exact with the loader's
default decode_scale="exact"): the box's area, as a fraction of the image's,
is drawn uniformly from ``scale`` and its aspect ratio (width / height)
log-uniformly from ``ratio``; after 10 tries that do not fit, torchvision's
central crop. The box is then resized to (height, width). The draw depends
only on (seed, epoch, record), not on the thread count.

Args:
    size (int or sequence): the output size: an int for (size, size), or a
        sequence (h,) or (h, w).
    scale (sequence of 2 floats): (min, max) of the crop's area as a fraction
        of the image's; 0 < min <= max <= 1. Default (0.08, 1.0).
    ratio (sequence of 2 floats): (min, max) of the crop's aspect ratio
        (width / height); 0 < min <= max. Default (3/4, 4/3).

Attributes:
    height, width (int): the output size.
    scale, ratio (list of 2 floats): as given.

Raises:
    ValueError: ``size`` is a sequence of other than 1 or 2 values or a
        size <= 0, or ``scale`` or ``ratio`` is out of range.
    TypeError: ``size`` is neither an int nor a sequence of ints, or
        ``scale`` or ``ratio`` is not a sequence of 2 numbers.

Example:
    >>> t = stoker.RandomResizedCrop(224)
    >>> t
    RandomResizedCrop(size=(224, 224), scale=(0.08, 1), ratio=(0.75, 1.33333))
    >>> t.height, t.width
    (224, 224))doc";
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
  static constexpr const char* kDoc = R"doc(Resize the image to ``size``.

As ``torchvision.transforms.Resize(size, max_size=max_size)`` on a PIL image
(bilinear, PIL's antialiased filter).

Args:
    size (int or sequence): an int (or a sequence of one int): the shorter
        side becomes ``size`` and the aspect ratio is kept (the longer side
        is ``int(size * longer / shorter)``); a sequence (h, w): exactly that
        size. An int gives images of different sizes: stoker.Loader needs a
        RandomResizedCrop, CenterCrop or Resize((h, w)) after it.
        None (torchvision.transforms.v2's rule, with ``max_size``): the
        longer side becomes ``max_size`` and the shorter
        ``int(max_size * shorter / longer)`` (the fixed-size detection
        path: ``Resize(None, max_size=512)`` then ``CenterCrop(512)`` pads
        every image to 512 x 512).
    max_size (int, optional): with an int size only: the most the longer side
        may be; an image whose longer side would exceed it is resized so that
        its longer side is ``max_size`` (its shorter side is then below
        ``size``). Must be greater than ``size``. With size None: the longer
        side's size (required). None (the default) or 0: no limit.

Attributes:
    height (int): for an int size, the shorter side's size; 0 for None;
        else the height.
    width (int): 0 for an int size or None; else the width.

Raises:
    ValueError: ``size`` is a sequence of other than 1 or 2 values or a
        size <= 0, a ``max_size`` <= ``size``, a ``max_size`` with a
        (h, w) size, or size None without ``max_size``.
    TypeError: ``size`` is neither an int nor a sequence of ints, or
        ``max_size`` is not an int.

Example:
    >>> stoker.Resize(256)
    Resize(size=256)
    >>> stoker.Resize(None, max_size=512)
    Resize(size=None, max_size=512)
    >>> t = stoker.Resize((256, 320))
    >>> t.height, t.width
    (256, 320))doc";
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
  static constexpr const char* kDoc = R"doc(Crop the center of the image to ``size``.

As ``torchvision.transforms.CenterCrop(size)``: an image smaller than the
crop is first padded with zeros (black), as torchvision pads it (a Mask
field is padded with its ``fill``).

Args:
    size (int or sequence): the output size: an int for (size, size), or a
        sequence (h,) or (h, w).

Attributes:
    height, width (int): the output size.

Raises:
    ValueError: ``size`` is a sequence of other than 1 or 2 values or a
        size <= 0.
    TypeError: ``size`` is neither an int nor a sequence of ints.

Example:
    >>> stoker.CenterCrop(224)
    CenterCrop(size=(224, 224))
    >>> stoker.CenterCrop((224, 160)).width
    160)doc";
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
  static constexpr const char* kDoc = R"doc(Crop the image at a random place to ``size``.

As ``torchvision.transforms.RandomCrop(size, padding, pad_if_needed, fill,
padding_mode)`` on a PIL image: the image is padded by ``padding`` first,
then (with ``pad_if_needed``) a side shorter than the crop is padded on both
ends by the difference, then a crop of ``size`` is taken at an offset drawn
uniformly from (seed, epoch, record). Mask and Boxes fields follow: a Mask
is padded with its own ``fill``, boxes are shifted and clipped. A sample
whose padded image is smaller than the crop is a sample error (reason
invalid_argument), counted and handled under ``on_corrupt``.

Args:
    size (int or sequence): the output size: an int for (size, size), or a
        sequence (h,) or (h, w).
    padding (int or sequence, optional): pixels added on each side: an int
        for all four, (left/right, top/bottom) or (left, top, right,
        bottom). Default None: none.
    pad_if_needed (bool): pad a side shorter than the crop (see above).
        Default False.
    fill (int or sequence): the image's padding colour: an int for all
        channels or 3 ints. Default 0.
    padding_mode (str): only "constant" (torchvision's default) is
        supported.

Attributes:
    height, width (int): the output size.
    padding (tuple): (left, top, right, bottom).
    pad_if_needed (bool), fill (tuple): as given.

Raises:
    ValueError: a size <= 0, a padding of other than 1, 2 or 4 values or a
        negative one, a fill outside [0, 255], or a padding_mode other than
        "constant".
    TypeError: ``size`` or ``padding`` of another type.

Example:
    >>> stoker.RandomCrop(32, padding=4)
    RandomCrop(size=(32, 32), padding=(4, 4, 4, 4))
    >>> stoker.RandomCrop((480, 640), pad_if_needed=True, fill=(124, 116, 104)).fill
    (124, 116, 104))doc";
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
  static constexpr const char* kDoc = R"doc(Resize the shorter side to a random one of ``min_size``.

As ``torchvision.transforms.v2.RandomShortestSize(min_size, max_size)``
(torchvision's detection recipes): ``m`` is drawn uniformly from
``min_size``, both sides are scaled by
``r = min(m / shorter, max_size / longer)`` (without ``max_size``,
``m / shorter``) and truncated, bilinear as Resize. Samples get different
sizes: a crop to a fixed size must follow (for example RandomCrop with
``pad_if_needed``).

Args:
    min_size (int or sequence of int): the shorter side's candidate sizes.
    max_size (int, optional): the most the longer side may be. Default None.

Attributes:
    min_size (list of int), max_size (int): as given (max_size 0 for None).

Raises:
    ValueError: an empty ``min_size`` or a size <= 0.
    TypeError: ``min_size`` neither an int nor a sequence of ints.

Example:
    >>> stoker.RandomShortestSize([480, 512, 544], max_size=800)
    RandomShortestSize(min_size=[480, 512, 544], max_size=800))doc";
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
  static constexpr const char* kDoc = R"doc(Flip the image left-right with probability ``p``.

As ``torchvision.transforms.RandomHorizontalFlip(p)``. Mask and Boxes fields of a
``fields=`` schema are flipped with the image. The draw depends only on
(seed, epoch, record), not on the thread count.

Args:
    p (float): the probability of the flip, in [0, 1]. Default 0.5.

Attributes:
    p (float): as given.

Raises:
    ValueError: ``p`` is outside [0, 1].
    TypeError: ``p`` is not a number.

Example:
    >>> stoker.RandomHorizontalFlip(p=0.25)
    RandomHorizontalFlip(p=0.25))doc";
};

template <>
struct Def<RandomVerticalFlip> : FlipDef<Def<RandomVerticalFlip>, RandomVerticalFlip, &SamplePlan::vflip> {
  static constexpr const char* kName = "RandomVerticalFlip";
  static constexpr const char* kDoc = R"doc(Flip the image upside down with probability ``p``.

As ``torchvision.transforms.RandomVerticalFlip(p)``. Mask and Boxes fields of a
``fields=`` schema are flipped with the image. The draw depends only on
(seed, epoch, record), not on the thread count.

Args:
    p (float): the probability of the flip, in [0, 1]. Default 0.5.

Attributes:
    p (float): as given.

Raises:
    ValueError: ``p`` is outside [0, 1].
    TypeError: ``p`` is not a number.

Example:
    >>> stoker.RandomVerticalFlip(p=0.25)
    RandomVerticalFlip(p=0.25))doc";
};

// Photometric: drawn per sample into the plan's photometric stage, applied
// to each output row before the write (output_rows.h apply_photometric).
template <>
struct Def<RandomGrayscale> : ProbabilityDef<Def<RandomGrayscale>, RandomGrayscale> {
  static constexpr const char* kName = "RandomGrayscale";
  static constexpr const char* kDoc = R"doc(Convert the image to grayscale with probability ``p``.

As ``torchvision.transforms.RandomGrayscale(p)``: the image keeps 3 channels,
each PIL's ``convert("L")``: L = (19595 R + 38470 G + 7471 B + 2**15) >> 16.
It is applied to the output pixels, so it must come after every resize
(RandomResizedCrop, Resize); crops and flips may follow it. Mask and Boxes
fields are not affected. The draw depends only on (seed, epoch, record).

Args:
    p (float): the probability of the conversion, in [0, 1]. Default 0.1.

Attributes:
    p (float): as given.

Raises:
    ValueError: ``p`` is outside [0, 1]; stoker.Loader raises it for a
        RandomResizedCrop or Resize after this transform.
    TypeError: ``p`` is not a number.

Example:
    >>> stoker.RandomGrayscale()
    RandomGrayscale(p=0.1))doc";
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
  static constexpr const char* kDoc = R"doc(Normalize the image: ``(x - mean) / std`` per channel.

As ``torchvision.transforms.Normalize(mean, std)`` on the output of ToTensor
(values in [0, 1]). It must be the last transform, and needs
dtype="float32".

On a raster kept as stored (``stoker.Image(channels="stored",
dtype="stored")``) it takes one value per stored channel (13 for a 13-band
tile); ToTensor's scale is 1/255 for uint8 samples and 1 for uint16 and
float32 ones.

Args:
    mean (sequence of floats): the channels' means: 3 values (R, G, B), or
        1 for all channels; a stored raster's: 1 or one per channel.
    std (sequence of floats): the channels' standard deviations, as
        ``mean``; none may be 0.

Attributes:
    mean, std (list of float): as given, rounded to float32.

Raises:
    ValueError: ``mean`` or ``std`` is empty, they differ in length (one
        of them 1 aside), or a ``std`` is 0; stoker.Loader raises it when
        the count is not 1 or the image's channels (3 for RGB), when
        Normalize is not the last transform, or dtype is "uint8" for RGB.
    TypeError: ``mean`` or ``std`` is not a sequence of numbers.

Example:
    >>> stoker.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
    Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]))doc";
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
  static constexpr const char* kDoc = R"doc(Randomly change the brightness, contrast, saturation and hue.

As ``torchvision.transforms.ColorJitter``: each factor drawn uniformly from
its range, the four applied in a random order (a permutation drawn per
sample, as torch.randperm(4)); a range at its identity is off.

Given the same drawn values, the output equals torchvision 0.14's on the
PIL image byte for byte (hue through PIL's HSV round trip too); the draws come from (seed, epoch, record), not from
torch's generator, whatever the thread count. An image-stage transform:
it acts on the final image, so no crop, resize or flip may follow it.

Args:
    brightness (float or (min, max)): a number v for [1 - v, 1 + v] (clipped at 0), or (min, max). Default 0 (off).
    contrast (float or (min, max)): as brightness; the blend with the image's mean grey. Default 0.
    saturation (float or (min, max)): as brightness; the blend with the grey image. Default 0.
    hue (float or (min, max)): a number v for [-v, v], or (min, max) within [-0.5, 0.5]. Default 0.

Raises:
    ValueError: a negative number, or a range out of its bounds (torchvision's
        text).
    TypeError: an argument that is not a number or a pair.

Example:
    >>> stoker.ColorJitter(brightness=0.4, contrast=0.4, saturation=0.4, hue=0.1)
    ColorJitter(brightness=(0.6, 1.4), contrast=(0.6, 1.4), saturation=(0.6, 1.4), hue=(-0.1, 0.1)))doc";
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
  static constexpr const char* kDoc = R"doc(Convert every image to grayscale, kept as 3 channels.

As ``torchvision.transforms.Grayscale(num_output_channels=3)``: PIL's
convert("L") copied to the three channels. Batches keep 3 channels, so
num_output_channels must be 3.

Given the same drawn values, the output equals torchvision 0.14's on the
PIL image byte for byte; the draws come from (seed, epoch, record), not from
torch's generator, whatever the thread count. An image-stage transform:
it acts on the final image, so no crop, resize or flip may follow it.

Args:
    num_output_channels (int): must be 3. Default 3.

Raises:
    ValueError: num_output_channels is not 3.

Example:
    >>> stoker.Grayscale()
    Grayscale(num_output_channels=3))doc";
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
  static constexpr const char* kDoc = R"doc(Blur with a Gaussian kernel whose sigma is drawn per sample.

As ``torchvision.transforms.GaussianBlur``: sigma uniform in [min, max], the
same for x and y; torchvision's float32 kernel, reflect padding. The kernel
half-size must be below the image's side (a sample error otherwise).

Given the same drawn values, the output equals torchvision 0.14's on the
PIL image within 1 of 255 (a float convolution summed in another order; about 1 value in 100,000 differs); the draws come from (seed, epoch, record), not from
torch's generator, whatever the thread count. An image-stage transform:
it acts on the final image, so no crop, resize or flip may follow it.

Args:
    kernel_size (int or (kx, ky)): odd and positive sizes (x first, as torchvision).
    sigma (float or (min, max)): sigma, or its range. Default (0.1, 2.0).

Raises:
    ValueError: an even or non-positive kernel size, or a non-positive sigma
        (torchvision's text).

Example:
    >>> stoker.GaussianBlur(23, sigma=(0.1, 2.0))
    GaussianBlur(kernel_size=(23, 23), sigma=(0.1, 2)))doc";
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
  static constexpr const char* kDoc = R"doc(Invert the pixels at or above a threshold, with probability p.

As ``torchvision.transforms.RandomSolarize`` (PIL's ImageOps.solarize).

Given the same drawn values, the output equals torchvision 0.14's on the
PIL image byte for byte; the draws come from (seed, epoch, record), not from
torch's generator, whatever the thread count. An image-stage transform:
it acts on the final image, so no crop, resize or flip may follow it.

Args:
    threshold (float): pixels >= threshold are inverted.
    p (float): the probability. Default 0.5.

Raises:
    ValueError: p outside [0, 1].

Example:
    >>> stoker.RandomSolarize(192, p=0.2)
    RandomSolarize(threshold=192, p=0.2))doc";
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
  static constexpr const char* kDoc = R"doc(Keep the top bits of each channel, with probability p.

As ``torchvision.transforms.RandomPosterize`` (PIL's ImageOps.posterize).

Given the same drawn values, the output equals torchvision 0.14's on the
PIL image byte for byte; the draws come from (seed, epoch, record), not from
torch's generator, whatever the thread count. An image-stage transform:
it acts on the final image, so no crop, resize or flip may follow it.

Args:
    bits (int): bits kept, 0..8.
    p (float): the probability. Default 0.5.

Raises:
    ValueError: bits outside 0..8, or p outside [0, 1].

Example:
    >>> stoker.RandomPosterize(4)
    RandomPosterize(bits=4, p=0.5))doc";
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
  static constexpr const char* kDoc = R"doc(Sharpen (factor > 1) or soften (< 1), with probability p.

As ``torchvision.transforms.RandomAdjustSharpness`` (PIL's
ImageEnhance.Sharpness: a blend with the SMOOTH-filtered image).

Given the same drawn values, the output equals torchvision 0.14's on the
PIL image byte for byte; the draws come from (seed, epoch, record), not from
torch's generator, whatever the thread count. An image-stage transform:
it acts on the final image, so no crop, resize or flip may follow it.

Args:
    sharpness_factor (float): 0 blurs, 1 keeps, 2 sharpens twice.
    p (float): the probability. Default 0.5.

Raises:
    ValueError: a negative factor, or p outside [0, 1].

Example:
    >>> stoker.RandomAdjustSharpness(2.0)
    RandomAdjustSharpness(sharpness_factor=2, p=0.5))doc";
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
  static constexpr const char* kDoc = R"doc(Stretch each channel to the full range, with probability p.

As ``torchvision.transforms.RandomAutocontrast`` (PIL's ImageOps.autocontrast).

Given the same drawn values, the output equals torchvision 0.14's on the
PIL image byte for byte; the draws come from (seed, epoch, record), not from
torch's generator, whatever the thread count. An image-stage transform:
it acts on the final image, so no crop, resize or flip may follow it.

Args:
    p (float): the probability. Default 0.5.

Raises:
    ValueError: p outside [0, 1].

Example:
    >>> stoker.RandomAutocontrast()
    RandomAutocontrast(p=0.5))doc";
  static constexpr bool kColour = true;
};
template <>
struct Def<RandomEqualize> : PlainOpDef<Def<RandomEqualize>, RandomEqualize, ImageOp::kEqualize> {
  static constexpr const char* kName = "RandomEqualize";
  static constexpr const char* kDoc = R"doc(Equalize each channel's histogram, with probability p.

As ``torchvision.transforms.RandomEqualize`` (PIL's ImageOps.equalize).

Given the same drawn values, the output equals torchvision 0.14's on the
PIL image byte for byte; the draws come from (seed, epoch, record), not from
torch's generator, whatever the thread count. An image-stage transform:
it acts on the final image, so no crop, resize or flip may follow it.

Args:
    p (float): the probability. Default 0.5.

Raises:
    ValueError: p outside [0, 1].

Example:
    >>> stoker.RandomEqualize(p=0.3)
    RandomEqualize(p=0.3))doc";
  static constexpr bool kColour = true;
};
template <>
struct Def<RandomInvert> : PlainOpDef<Def<RandomInvert>, RandomInvert, ImageOp::kInvert> {
  static constexpr const char* kName = "RandomInvert";
  static constexpr const char* kDoc = R"doc(Invert the colours, with probability p.

As ``torchvision.transforms.RandomInvert``.

Given the same drawn values, the output equals torchvision 0.14's on the
PIL image byte for byte; the draws come from (seed, epoch, record), not from
torch's generator, whatever the thread count. An image-stage transform:
it acts on the final image, so no crop, resize or flip may follow it.

Args:
    p (float): the probability. Default 0.5.

Raises:
    ValueError: p outside [0, 1].

Example:
    >>> stoker.RandomInvert()
    RandomInvert(p=0.5))doc";
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
  static constexpr const char* kDoc = R"doc(Rotate by a random angle.

As ``torchvision.transforms.RandomRotation``: the angle uniform in the range,
PIL's Image.rotate about the centre (or ``center``), ``fill`` outside. Not
with mask or boxes fields (refused, as torchvision v2's policies refuse
them), and expand=True is refused (batches need one size).

Given the same drawn values, the output equals torchvision 0.14's on the
PIL image byte for byte, NEAREST and BILINEAR; the draws come from (seed, epoch, record), not from
torch's generator, whatever the thread count. An image-stage transform:
it acts on the final image, so no crop, resize or flip may follow it.

Args:
    degrees (float or (min, max)): a number d for (-d, d), or the range.
    interpolation (InterpolationMode or str): NEAREST or BILINEAR (stoker's or
        torchvision's enum, or "nearest"/"bilinear"). Default NEAREST.
    expand (bool): must be False. Default False.
    center ((x, y), optional): the centre of rotation in pixels. Default: the image's.
    fill (number or sequence): the colour outside the image (1 or 3 values). Default 0.

Raises:
    ValueError: a negative number of degrees, expand=True, a fill of other than
        1 or 3 values.
    TypeError: a fill that is not a number or a sequence.

Example:
    >>> stoker.RandomRotation(30, fill=(124, 116, 104))
    RandomRotation(degrees=(-30, 30), interpolation=nearest, fill=[124, 116, 104]))doc";
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
  static constexpr const char* kDoc = R"doc(Rotate, translate, scale and shear by random amounts.

As ``torchvision.transforms.RandomAffine``: parameters drawn as its
get_params draws them, torchvision's inverse matrix, PIL's warp. Not with
mask or boxes fields.

Given the same drawn values, the output equals torchvision 0.14's on the
PIL image byte for byte, NEAREST and BILINEAR; the draws come from (seed, epoch, record), not from
torch's generator, whatever the thread count. An image-stage transform:
it acts on the final image, so no crop, resize or flip may follow it.

Args:
    degrees (float or (min, max)): a number d for (-d, d), or the range; 0 for none.
    translate ((a, b), optional): maximum shifts as fractions of the width and height.
    scale ((min, max), optional): the scale's range.
    shear (float or sequence, optional): d for an x shear in (-d, d); (min, max) for x;
        (xmin, xmax, ymin, ymax) for both.
    interpolation (InterpolationMode or str): NEAREST or BILINEAR. Default NEAREST.
    fill (number or sequence): the colour outside the image. Default 0.
    center ((x, y), optional): the centre in pixels. Default: the image's.

Raises:
    ValueError: translate outside [0, 1], a non-positive scale, a negative
        number of degrees (torchvision's text).

Example:
    >>> stoker.RandomAffine(degrees=15, translate=(0.1, 0.1), scale=(0.9, 1.1))
    RandomAffine(degrees=(-15, 15), translate=(0.1, 0.1), scale=(0.9, 1.1), shear=(0, 0, 0, 0), interpolation=nearest, fill=[0, 0, 0]))doc";
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
  static constexpr const char* kDoc = R"doc(One augmentation of TrivialAugment Wide's table at a random magnitude.

As ``torchvision.transforms.TrivialAugmentWide``: its 14 ops (Identity,
ShearX/Y, TranslateX/Y, Rotate, Brightness, Color, Contrast, Sharpness,
Posterize, Solarize, AutoContrast, Equalize) with torchvision's magnitude
tables (torch.linspace in float32 reproduced) and signs. Not with mask or
boxes fields.

Given the same drawn values, the output equals torchvision 0.14's on the
PIL image byte for byte; the draws come from (seed, epoch, record), not from
torch's generator, whatever the thread count. An image-stage transform:
it acts on the final image, so no crop, resize or flip may follow it.

Args:
    num_magnitude_bins (int): magnitude bins (>= 2). Default 31.
    interpolation (InterpolationMode or str): for the geometric ops. Default NEAREST.
    fill (number or sequence, optional): colour outside the image. Default None (0).

Raises:
    ValueError: fewer than 2 bins.

Example:
    >>> stoker.TrivialAugmentWide()
    TrivialAugmentWide(num_magnitude_bins=31, interpolation=nearest, fill=[0, 0, 0]))doc";
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
  static constexpr const char* kDoc = R"doc(num_ops random augmentations at one magnitude.

As ``torchvision.transforms.RandAugment``: ops drawn from its 14-op table.
Not with mask or boxes fields.

Given the same drawn values, the output equals torchvision 0.14's on the
PIL image byte for byte; the draws come from (seed, epoch, record), not from
torch's generator, whatever the thread count. An image-stage transform:
it acts on the final image, so no crop, resize or flip may follow it.

Args:
    num_ops (int): ops per image. Default 2.
    magnitude (int): the magnitude bin. Default 9.
    num_magnitude_bins (int): magnitude bins. Default 31.
    interpolation (InterpolationMode or str): for the geometric ops. Default NEAREST.
    fill (number or sequence, optional): colour outside the image. Default None (0).

Raises:
    ValueError: magnitude outside [0, num_magnitude_bins), or num_ops < 0.

Example:
    >>> stoker.RandAugment(num_ops=2, magnitude=9)
    RandAugment(num_ops=2, magnitude=9, num_magnitude_bins=31, interpolation=nearest, fill=[0, 0, 0]))doc";
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
  static constexpr const char* kDoc = R"doc(A random sub-policy of AutoAugment's learned policies.

As ``torchvision.transforms.AutoAugment``: the IMAGENET, CIFAR10 or SVHN
sub-policies, each op with its probability and magnitude bin. Not with
mask or boxes fields.

Given the same drawn values, the output equals torchvision 0.14's on the
PIL image byte for byte; the draws come from (seed, epoch, record), not from
torch's generator, whatever the thread count. An image-stage transform:
it acts on the final image, so no crop, resize or flip may follow it.

Args:
    policy (AutoAugmentPolicy or str): IMAGENET, CIFAR10 or SVHN (stoker's or
        torchvision's enum, or its value). Default IMAGENET.
    interpolation (InterpolationMode or str): for the geometric ops. Default NEAREST.
    fill (number or sequence, optional): colour outside the image. Default None (0).

Raises:
    ValueError: an unknown policy.

Example:
    >>> stoker.AutoAugment(stoker.AutoAugmentPolicy.CIFAR10)
    AutoAugment(policy=cifar10, interpolation=nearest, fill=[0, 0, 0]))doc";
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
  static constexpr const char* kDoc = R"doc(AugMix: chains of random augmentations blended with the original.

As ``torchvision.transforms.AugMix``: mixture_width chains of chain_depth
(or 1-3, drawn) ops of its table at a severity-bounded magnitude, each
run on the image as a uint8 tensor (torchvision's tensor ops: AugMix turns
a PIL image into a tensor first), mixed with the original by
Dirichlet(alpha) weights in float32 and truncated to uint8. Not with mask
or boxes fields.

Given the same drawn values, the output is within 1 of 255 of
torchvision 0.14's (float ops and the final truncation); the draws come
from (seed, epoch, record), not from torch's generator.

Args:
    severity (int): magnitude bins used, 1..10. Default 3.
    mixture_width (int): chains, 1..16. Default 3.
    chain_depth (int): ops per chain; -1 draws 1 to 3. Default -1.
    alpha (float): the Dirichlet concentration. Default 1.0.
    all_ops (bool): include Brightness, Color, Contrast, Sharpness. Default True.
    interpolation (InterpolationMode or str): for the geometric ops. Default BILINEAR.
    fill (number or sequence, optional): colour outside the image. Default None.

Raises:
    ValueError: severity outside [1, 10] (torchvision's text), mixture_width
        outside [1, 16], alpha not positive.

Example:
    >>> stoker.AugMix(severity=3, mixture_width=3)
    AugMix(severity=3, mixture_width=3, chain_depth=-1, alpha=1, all_ops=True, interpolation=bilinear, fill=None))doc";
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
  static constexpr const char* kDoc = R"doc(Erase a random rectangle of the output tensor, with probability p.

As ``torchvision.transforms.RandomErasing`` after Normalize: the box's area
fraction uniform in ``scale`` and its aspect ratio (h / w) log-uniform in
``ratio``, 10 tries, else no change. value='random' fills standard normal
values drawn from stoker's generator (not torch's). Only RandomErasing may
follow Normalize. Given the same box, the output equals torchvision's F.erase
exactly; the box comes from (seed, epoch, record).

Args:
    p (float): the probability. Default 0.5.
    scale ((min, max)): area fraction range. Default (0.02, 0.33).
    ratio ((min, max)): aspect ratio range. Default (0.3, 3.3).
    value (number, sequence or 'random'): the fill (1 or 3 values). Default 0.
    inplace (bool): accepted for torchvision's signature; stoker always writes the batch in
        place. Default False.

Raises:
    ValueError: p or scale outside [0, 1], a value string other than 'random'
        (torchvision's text).
    TypeError: scale or ratio not a sequence, value of another type.

Example:
    >>> stoker.RandomErasing(p=0.25)
    RandomErasing(p=0.25, scale=(0.02, 0.33), ratio=(0.3, 3.3), value=[0]))doc";
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
  static constexpr const char* kDoc = R"doc(Apply a list of image-stage transforms, all or none, with probability p.

As ``torchvision.transforms.RandomApply`` (SimCLR's colour jitter, for
example); the transforms must be image-stage ones (ColorJitter,
GaussianBlur, Grayscale, RandomGrayscale, RandomSolarize, ...).

Args:
    transforms (list): the transforms.
    p (float): the probability. Default 0.5.

Raises:
    ValueError: a transform that is not an image-stage one, or p outside [0, 1].

Example:
    >>> stoker.RandomApply([stoker.ColorJitter(0.4, 0.4, 0.4, 0.1)], p=0.8)
    RandomApply(transforms=[ColorJitter(brightness=(0.6, 1.4), contrast=(0.6, 1.4), saturation=(0.6, 1.4), hue=(-0.1, 0.1))], p=0.8))doc";
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
const char* transform_doc(const Transform& t) {
  return with_def(t, [](const auto&, auto def) { return decltype(def)::kDoc; });
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
