// The image stage's transforms and RandomErasing/RandomApply, with
// torchvision 0.14's constructor signatures and argument errors.
#include <pybind11/stl.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "bindings.h"
#include "stoker/names.h"
#include "stoker/transforms.h"
#include "transform/transform_defs.h"

namespace py = pybind11;

namespace stoker::python {
namespace {

bool is_number(const py::handle& v) {
  return (py::isinstance<py::int_>(v) || py::isinstance<py::float_>(v)) && !py::isinstance<py::bool_>(v);
}

std::vector<double> numbers(const char* who, const char* name, const py::handle& v) {
  std::vector<double> out;
  if (py::isinstance<py::str>(v) || !py::isinstance<py::sequence>(v)) {
    throw py::type_error(std::string(who) + ": " + name + " should be a number or a sequence of numbers");
  }
  for (const py::handle& e : v.cast<py::sequence>()) {
    if (!is_number(e)) throw py::type_error(std::string(who) + ": " + name + " should be a sequence of numbers");
    out.push_back(e.cast<double>());
  }
  return out;
}

// ColorJitter._check_input: a number v gives [center - v, center + v]
// (clipped at 0 for the factors), a pair is kept as given.
std::array<double, 2> jitter_range(const py::object& v, const char* name, double center, bool clip) {
  if (is_number(v)) {
    const double x = v.cast<double>();
    if (x < 0) throw py::value_error(std::string("If ") + name + " is a single number, it must be non negative.");
    return {clip ? std::max(center - x, 0.0) : center - x, center + x};
  }
  if ((py::isinstance<py::tuple>(v) || py::isinstance<py::list>(v)) && py::len(v) == 2) {
    const auto r = numbers("ColorJitter", name, v);
    return {r[0], r[1]};
  }
  throw py::type_error(std::string(name) + " should be a single number or a list/tuple with length 2.");
}

// torchvision's _setup_angle: a number d gives (-d, d), d >= 0; else a
// sequence of the allowed lengths.
std::vector<double> angle_range(const py::object& v, const char* name, std::initializer_list<std::size_t> sizes) {
  if (is_number(v)) {
    const double d = v.cast<double>();
    if (d < 0) throw py::value_error(std::string("If ") + name + " is a single number, it must be positive.");
    return {-d, d};
  }
  auto r = numbers(name, name, v);
  for (std::size_t n : sizes) {
    if (r.size() == n) return r;
  }
  std::string msg;
  for (std::size_t n : sizes) msg += (msg.empty() ? "" : " or ") + std::to_string(n);
  throw py::value_error(std::string(name) + " should be a sequence of length " + msg + ".");
}

// An enum argument: stoker's or torchvision's enum (by its value) or the
// value's string, one of the names stoker/names.h gives E; else `bad`.
template <typename E>
std::optional<E> enum_arg(const py::object& v) {
  if (py::isinstance<py::str>(v)) return find_name<E>(v.cast<std::string>());
  if (py::hasattr(v, "value") && py::isinstance<py::str>(v.attr("value"))) {
    return find_name<E>(v.attr("value").cast<std::string>());
  }
  return std::nullopt;
}

// InterpolationMode.NEAREST / BILINEAR.
Interpolation interpolation_arg(const char* who, const py::object& v) {
  if (const auto i = enum_arg<Interpolation>(v)) return *i;
  throw py::value_error(std::string(who) + ": interpolation must be InterpolationMode.NEAREST or BILINEAR, got " +
                        py::repr(v).cast<std::string>());
}

}  // namespace

// fill: None (0), a number or a sequence of 1 or 3; F_pil's _parse_fill
// makes them ints.
std::array<int, 3> fill_arg(const char* who, const py::object& v) {
  if (v.is_none()) return {0, 0, 0};
  if (is_number(v)) {
    const int f = static_cast<int>(v.cast<double>());
    return {f, f, f};
  }
  if (py::isinstance<py::str>(v) || !py::isinstance<py::sequence>(v)) {
    throw py::type_error("Fill should be either a sequence or a number.");
  }
  const auto r = numbers(who, "fill", v);
  if (r.size() == 1) return {static_cast<int>(r[0]), static_cast<int>(r[0]), static_cast<int>(r[0])};
  if (r.size() == 3) return {static_cast<int>(r[0]), static_cast<int>(r[1]), static_cast<int>(r[2])};
  throw py::value_error(std::string(who) + ": The number of elements in 'fill' does not match the number of channels "
                        "of the image (" + std::to_string(r.size()) + " != 3)");
}

namespace {

std::array<double, 2> center_arg(const py::object& v, bool* has) {
  *has = !v.is_none();
  if (!*has) return {0, 0};
  const auto r = numbers("center", "center", v);
  if (r.size() != 2) throw py::value_error("center should be a sequence of length 2.");
  return {r[0], r[1]};
}

std::array<double, 2> pair_arg(const char* who, const char* name, const py::object& v) {
  const auto r = numbers(who, name, v);
  if (r.size() != 2) throw py::value_error(std::string(name) + " should be a sequence of length 2.");
  return {r[0], r[1]};
}

AutoAugmentPolicy policy_arg(const py::object& v) {
  if (const auto p = enum_arg<AutoAugmentPolicy>(v)) return *p;
  throw py::value_error("The provided policy " + py::repr(v).cast<std::string>() + " is not recognized.");
}

}  // namespace

void bind_augment(py::module_& m) {
  transform_class<ColorJitter>(m)
      .def(py::init([](const py::object& brightness, const py::object& contrast, const py::object& saturation,
                       const py::object& hue) {
             ColorJitter x;
             x.brightness = jitter_range(brightness, "brightness", 1.0, true);
             x.contrast = jitter_range(contrast, "contrast", 1.0, true);
             x.saturation = jitter_range(saturation, "saturation", 1.0, true);
             x.hue = jitter_range(hue, "hue", 0.0, false);
             return checked(x);
           }),
           py::arg("brightness") = 0, py::arg("contrast") = 0, py::arg("saturation") = 0, py::arg("hue") = 0)
      .def("__repr__", repr<ColorJitter>);

  transform_class<Grayscale>(m)
      .def(py::init([](int n) { return checked(Grayscale{n}); }), py::arg("num_output_channels") = Grayscale{}.num_output_channels)
      .def("__repr__", repr<Grayscale>);

  transform_class<GaussianBlur>(m)
      .def(py::init([](const py::object& kernel_size, const py::object& sigma) {
             GaussianBlur x;
             if (is_number(kernel_size)) {
               x.kernel_w = x.kernel_h = kernel_size.cast<int>();
             } else {
               const auto k = numbers("GaussianBlur", "kernel_size", kernel_size);
               if (k.size() != 2 && k.size() != 1) throw py::value_error("Kernel size should be a tuple/list of two integers");
               x.kernel_w = static_cast<int>(k[0]);
               x.kernel_h = static_cast<int>(k[k.size() - 1]);
             }
             if (x.kernel_w <= 0 || x.kernel_w % 2 == 0 || x.kernel_h <= 0 || x.kernel_h % 2 == 0) {
               throw py::value_error("Kernel size value should be an odd and positive number.");
             }
             if (is_number(sigma)) {
               const double s = sigma.cast<double>();
               if (s <= 0) throw py::value_error("If sigma is a single number, it must be positive.");
               x.sigma = {s, s};
             } else if (py::isinstance<py::sequence>(sigma) && !py::isinstance<py::str>(sigma) && py::len(sigma) == 2) {
               x.sigma = pair_arg("GaussianBlur", "sigma", sigma);
               if (!(0 < x.sigma[0] && x.sigma[0] <= x.sigma[1])) {
                 throw py::value_error("sigma values should be positive and of the form (min, max).");
               }
             } else {
               throw py::value_error("sigma should be a single number or a list/tuple with length 2.");
             }
             return checked(x);
           }),
           py::arg("kernel_size"), py::arg("sigma") = py::make_tuple(0.1, 2.0))
      .def("__repr__", repr<GaussianBlur>);

  transform_class<RandomSolarize>(m)
      .def(py::init([](double threshold, double p) { return checked(RandomSolarize{threshold, p}); }),
           py::arg("threshold"), py::arg("p") = RandomSolarize{}.p)
      .def("__repr__", repr<RandomSolarize>);
  transform_class<RandomPosterize>(m)
      .def(py::init([](int bits, double p) { return checked(RandomPosterize{bits, p}); }), py::arg("bits"),
           py::arg("p") = RandomPosterize{}.p)
      .def("__repr__", repr<RandomPosterize>);
  transform_class<RandomAdjustSharpness>(m)
      .def(py::init([](double f, double p) { return checked(RandomAdjustSharpness{f, p}); }),
           py::arg("sharpness_factor"), py::arg("p") = RandomAdjustSharpness{}.p)
      .def("__repr__", repr<RandomAdjustSharpness>);
  transform_class<RandomAutocontrast>(m)
      .def(py::init([](double p) { return checked(RandomAutocontrast{p}); }), py::arg("p") = RandomAutocontrast{}.p)
      .def("__repr__", repr<RandomAutocontrast>);
  transform_class<RandomEqualize>(m)
      .def(py::init([](double p) { return checked(RandomEqualize{p}); }), py::arg("p") = RandomEqualize{}.p)
      .def("__repr__", repr<RandomEqualize>);
  transform_class<RandomInvert>(m)
      .def(py::init([](double p) { return checked(RandomInvert{p}); }), py::arg("p") = RandomInvert{}.p)
      .def("__repr__", repr<RandomInvert>);

  transform_class<RandomRotation>(m)
      .def(py::init([](const py::object& degrees, const py::object& interpolation, bool expand,
                       const py::object& center, const py::object& fill) {
             if (expand) {
               throw py::value_error("RandomRotation: expand=True gives every sample its own size; batches need one");
             }
             RandomRotation x;
             const auto d = angle_range(degrees, "degrees", {2});
             x.degrees = {d[0], d[1]};
             x.interpolation = interpolation_arg("RandomRotation", interpolation);
             x.center = center_arg(center, &x.has_center);
             x.fill = fill_arg("RandomRotation", fill);
             return checked(x);
           }),
           py::arg("degrees"), py::arg("interpolation") = name_of(RandomRotation{}.interpolation), py::arg("expand") = false,
           py::arg("center") = py::none(), py::arg("fill") = 0)
      .def("__repr__", repr<RandomRotation>);

  transform_class<RandomAffine>(m)
      .def(py::init([](const py::object& degrees, const py::object& translate, const py::object& scale,
                       const py::object& shear, const py::object& interpolation, const py::object& fill,
                       const py::object& center) {
             RandomAffine x;
             const auto d = angle_range(degrees, "degrees", {2});
             x.degrees = {d[0], d[1]};
             if (!translate.is_none()) {
               x.translate = pair_arg("RandomAffine", "translate", translate);
               for (double t : x.translate) {
                 if (!(0.0 <= t && t <= 1.0)) throw py::value_error("translation values should be between 0 and 1");
               }
             }
             if (!scale.is_none()) {
               x.scale = pair_arg("RandomAffine", "scale", scale);
               for (double s : x.scale) {
                 if (s <= 0) throw py::value_error("scale values should be positive");
               }
             }
             if (!shear.is_none()) {
               const auto s = angle_range(shear, "shear", {2, 4});
               x.shear = {s[0], s[1], s.size() == 4 ? s[2] : 0.0, s.size() == 4 ? s[3] : 0.0};
             }
             x.interpolation = interpolation_arg("RandomAffine", interpolation);
             x.fill = fill_arg("RandomAffine", fill);
             x.center = center_arg(center, &x.has_center);
             return checked(x);
           }),
           py::arg("degrees"), py::arg("translate") = py::none(), py::arg("scale") = py::none(),
           py::arg("shear") = py::none(), py::arg("interpolation") = name_of(RandomAffine{}.interpolation), py::arg("fill") = 0,
           py::arg("center") = py::none())
      .def("__repr__", repr<RandomAffine>);

  transform_class<TrivialAugmentWide>(m)
      .def(py::init([](int bins, const py::object& interpolation, const py::object& fill) {
             return checked(TrivialAugmentWide{bins, interpolation_arg("TrivialAugmentWide", interpolation),
                                               fill_arg("TrivialAugmentWide", fill)});
           }),
           py::arg("num_magnitude_bins") = TrivialAugmentWide{}.num_magnitude_bins, py::arg("interpolation") = name_of(TrivialAugmentWide{}.interpolation),
           py::arg("fill") = py::none())
      .def("__repr__", repr<TrivialAugmentWide>);

  transform_class<RandAugment>(m)
      .def(py::init([](int num_ops, int magnitude, int bins, const py::object& interpolation, const py::object& fill) {
             return checked(RandAugment{num_ops, magnitude, bins, interpolation_arg("RandAugment", interpolation),
                                        fill_arg("RandAugment", fill)});
           }),
           py::arg("num_ops") = RandAugment{}.num_ops, py::arg("magnitude") = RandAugment{}.magnitude, py::arg("num_magnitude_bins") = RandAugment{}.num_magnitude_bins,
           py::arg("interpolation") = name_of(RandAugment{}.interpolation), py::arg("fill") = py::none())
      .def("__repr__", repr<RandAugment>);

  transform_class<AutoAugment>(m)
      .def(py::init([](const py::object& policy, const py::object& interpolation, const py::object& fill) {
             return checked(AutoAugment{policy_arg(policy), interpolation_arg("AutoAugment", interpolation),
                                        fill_arg("AutoAugment", fill)});
           }),
           py::arg("policy") = name_of(AutoAugment{}.policy), py::arg("interpolation") = name_of(AutoAugment{}.interpolation),
           py::arg("fill") = py::none())
      .def("__repr__", repr<AutoAugment>);

  transform_class<RandomErasing>(m)
      .def(py::init([](double p, const py::object& scale, const py::object& ratio, const py::object& value, bool) {
             RandomErasing x;
             x.p = p;
             if (py::isinstance<py::str>(scale) || !py::isinstance<py::sequence>(scale)) {
               throw py::type_error("Scale should be a sequence");
             }
             if (py::isinstance<py::str>(ratio) || !py::isinstance<py::sequence>(ratio)) {
               throw py::type_error("Ratio should be a sequence");
             }
             x.scale = pair_arg("RandomErasing", "scale", scale);
             x.ratio = pair_arg("RandomErasing", "ratio", ratio);
             if (py::isinstance<py::str>(value)) {
               if (value.cast<std::string>() != "random") throw py::value_error("If value is str, it should be 'random'");
               x.random_values = true;
               x.value.clear();
             } else if (is_number(value)) {
               x.value = {value.cast<float>()};
             } else if (py::isinstance<py::sequence>(value)) {
               x.value.clear();
               for (double v : numbers("RandomErasing", "value", value)) x.value.push_back(static_cast<float>(v));
             } else {
               throw py::type_error("Argument value should be either a number or str or a sequence");
             }
             if (!(x.scale[0] >= 0 && x.scale[1] <= 1)) throw py::value_error("Scale should be between 0 and 1");
             if (!(x.p >= 0 && x.p <= 1)) throw py::value_error("Random erasing probability should be between 0 and 1");
             return checked(x);
           }),
           py::arg("p") = RandomErasing{}.p, py::arg("scale") = py::make_tuple(0.02, 0.33), py::arg("ratio") = py::make_tuple(0.3, 3.3),
           py::arg("value") = 0, py::arg("inplace") = false)
      .def("__repr__", repr<RandomErasing>);

  transform_class<AugMix>(m)
      .def(py::init([](int severity, int mixture_width, int chain_depth, double alpha, bool all_ops,
                       const py::object& interpolation, const py::object& fill) {
             AugMix x;
             x.severity = severity;
             x.mixture_width = mixture_width;
             x.chain_depth = chain_depth;
             x.alpha = alpha;
             x.all_ops = all_ops;
             x.interpolation = interpolation_arg("AugMix", interpolation);
             if (!fill.is_none()) {
               x.has_fill = true;
               const auto f = fill_arg("AugMix", fill);
               for (int c = 0; c < 3; ++c) x.fill[static_cast<std::size_t>(c)] = static_cast<float>(f[static_cast<std::size_t>(c)]);
             }
             return checked(x);
           }),
           py::arg("severity") = AugMix{}.severity, py::arg("mixture_width") = AugMix{}.mixture_width, py::arg("chain_depth") = AugMix{}.chain_depth, py::arg("alpha") = AugMix{}.alpha,
           py::arg("all_ops") = AugMix{}.all_ops, py::arg("interpolation") = name_of(AugMix{}.interpolation), py::arg("fill") = py::none())
      .def("__repr__", repr<AugMix>);

  transform_class<RandomApply>(m)
      .def(py::init([](std::vector<Transform> transforms, double p) {
             return checked(RandomApply{std::move(transforms), p});
           }),
           py::arg("transforms"), py::arg("p") = RandomApply{}.p)
      .def("__repr__", repr<RandomApply>);
}

}  // namespace stoker::python
