// Transforms with torchvision's constructor signatures.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstring>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "bindings.h"
#include "order/rng.h"
#include "stoker/transforms.h"
#include "transform/pipeline.h"
#include "transform/transform_defs.h"
#include "transform/batch_mix.h"
#include "transform/volume/defs.h"
#include "transform/resize.h"

namespace py = pybind11;

namespace stoker::python {
namespace {

// torchvision accepts an int or a sequence of one or two ints: (h, w); any
// other type is a TypeError, as there.
std::pair<int, int> size_arg(const char* who, const py::object& size) {
  auto type_error = [&] {
    return py::type_error(std::string(who) + ": size must be an int or a sequence of 1 or 2 ints, got " +
                          py::repr(size).cast<std::string>());
  };
  if (py::isinstance<py::bool_>(size)) throw type_error();
  if (py::isinstance<py::int_>(size)) {
    int s = size.cast<int>();
    return {s, s};
  }
  if (py::isinstance<py::str>(size) || !py::isinstance<py::sequence>(size)) throw type_error();
  std::vector<int> v;
  for (const py::handle& e : size.cast<py::sequence>()) {
    if (!py::isinstance<py::int_>(e) || py::isinstance<py::bool_>(e)) throw type_error();
    v.push_back(e.cast<int>());
  }
  if (v.size() == 1) return {v[0], v[0]};
  if (v.size() == 2) return {v[0], v[1]};
  throw py::value_error(std::string(who) + ": size must be an int or a sequence of 1 or 2 ints, got " +
                        std::to_string(v.size()) + " values");
}

// A default-made value of each alternative of the variant V, in its order.
template <typename V, std::size_t... I>
std::vector<V> default_alternatives(std::index_sequence<I...>) {
  return {V{std::in_place_index<I>}...};
}
template <typename V>
std::vector<V> default_alternatives() {
  return default_alternatives<V>(std::make_index_sequence<std::variant_size_v<V>>{});
}

template <typename... T>
py::tuple transform_types(std::variant<T...>*) {
  return py::make_tuple(py::type::of<T>()...);
}

// The batch's images for an in-place kernel: a writeable C-contiguous
// float32 [B, C, H, W] array, never a converted copy.
float* batch_images(const char* who, py::array& x) {
  if (x.ndim() != 4 || !x.dtype().is(py::dtype::of<float>()) || !(x.flags() & py::array::c_style) || !x.writeable()) {
    throw py::value_error(std::string(who) + ": expects a writeable C-contiguous float32 [B, C, H, W] array");
  }
  return static_cast<float*>(x.mutable_data());
}

}  // namespace

void bind_transforms(py::module_& m) {
  transform_class<RandomResizedCrop>(m)
      .def(py::init([](const py::object& size, std::array<double, 2> scale, std::array<double, 2> ratio) {
             auto [h, w] = size_arg("RandomResizedCrop", size);
             return checked(RandomResizedCrop{h, w, scale, ratio});
           }),
           py::arg("size"), py::arg("scale") = std::array<double, 2>{0.08, 1.0},
           py::arg("ratio") = std::array<double, 2>{3.0 / 4.0, 4.0 / 3.0})
      .def_readonly("height", &RandomResizedCrop::height, "The output height.")
      .def_readonly("width", &RandomResizedCrop::width, "The output width.")
      .def_readonly("scale", &RandomResizedCrop::scale, "(min, max) of the crop's area fraction.")
      .def_readonly("ratio", &RandomResizedCrop::ratio, "(min, max) of the crop's aspect ratio (width / height).")
      .def("__repr__", repr<RandomResizedCrop>);

  transform_class<Resize>(m)
      .def(py::init([](const py::object& size, std::optional<int> max_size) {
             if (size.is_none()) {
               if (!max_size || *max_size <= 0) {
                 throw py::value_error("Resize: size=None requires max_size, the longer side's size (a positive int)");
               }
               return checked(Resize{0, 0, *max_size});
             }
             const bool one = py::isinstance<py::int_>(size) ||
                              (py::isinstance<py::sequence>(size) && !py::isinstance<py::str>(size) && py::len(size) == 1);
             auto [h, w] = size_arg("Resize", size);
             // 0 means "no max_size" in C++: a given one must be positive (torchvision: > the size).
             if (one && max_size && *max_size <= 0) {
               throw py::value_error("Resize: max_size = " + std::to_string(*max_size) +
                                     " must be strictly greater than the requested size " + std::to_string(h));
             }
             return checked(Resize{h, one ? 0 : w, max_size.value_or(0)});
           }),
           py::arg("size"), py::arg("max_size") = py::none())
      .def_readonly("height", &Resize::height, "The shorter side's size (an int size), else the output height.")
      .def_readonly("width", &Resize::width, "0 (an int size: the aspect ratio is kept), else the output width.")
      .def("__repr__", repr<Resize>);

  transform_class<CenterCrop>(m)
      .def(py::init([](const py::object& size) {
             auto [h, w] = size_arg("CenterCrop", size);
             return checked(CenterCrop{h, w});
           }),
           py::arg("size"))
      .def_readonly("height", &CenterCrop::height, "The output height.")
      .def_readonly("width", &CenterCrop::width, "The output width.")
      .def("__repr__", repr<CenterCrop>);

  transform_class<RandomCrop>(m)
      .def(py::init([](const py::object& size, const py::object& padding, bool pad_if_needed, const py::object& fill,
                       const std::string& padding_mode) {
             auto [h, w] = size_arg("RandomCrop", size);
             RandomCrop x{h, w};
             if (!padding.is_none()) {
               std::vector<int> p;
               if (py::isinstance<py::int_>(padding) && !py::isinstance<py::bool_>(padding)) {
                 p = {padding.cast<int>()};
               } else if (py::isinstance<py::sequence>(padding) && !py::isinstance<py::str>(padding)) {
                 for (const py::handle& e : padding.cast<py::sequence>()) {
                   if (!py::isinstance<py::int_>(e) || py::isinstance<py::bool_>(e)) {
                     throw py::type_error("RandomCrop: padding must be an int or a sequence of ints");
                   }
                   p.push_back(e.cast<int>());
                 }
               } else {
                 throw py::type_error("Got inappropriate padding arg");
               }
               if (p.size() == 1) x.padding = {p[0], p[0], p[0], p[0]};
               else if (p.size() == 2) x.padding = {p[0], p[1], p[0], p[1]};
               else if (p.size() == 4) x.padding = {p[0], p[1], p[2], p[3]};
               else {
                 throw py::value_error("Padding must be an int or a 1, 2, or 4 element tuple, not a " +
                                       std::to_string(p.size()) + " element tuple");
               }
             }
             x.pad_if_needed = pad_if_needed;
             x.fill = fill_arg("RandomCrop", fill);
             if (padding_mode != "constant") {
               if (padding_mode == "edge" || padding_mode == "reflect" || padding_mode == "symmetric") {
                 throw py::value_error("RandomCrop: padding_mode='" + padding_mode +
                                       "' is not supported by stoker; only 'constant'");
               }
               throw py::value_error("Padding mode should be either constant, edge, reflect or symmetric");
             }
             return checked(x);
           }),
           py::arg("size"), py::arg("padding") = py::none(), py::arg("pad_if_needed") = RandomCrop{}.pad_if_needed, py::arg("fill") = 0,
           py::arg("padding_mode") = "constant")
      .def_readonly("height", &RandomCrop::height, "The output height.")
      .def_readonly("width", &RandomCrop::width, "The output width.")
      .def_property_readonly("padding", [](const RandomCrop& x) { return py::make_tuple(x.padding[0], x.padding[1], x.padding[2], x.padding[3]); },
                             "(left, top, right, bottom).")
      .def_readonly("pad_if_needed", &RandomCrop::pad_if_needed, "Whether a short side is padded to the crop.")
      .def_property_readonly("fill", [](const RandomCrop& x) { return py::make_tuple(x.fill[0], x.fill[1], x.fill[2]); },
                             "The image's padding colour (r, g, b).")
      .def("__repr__", repr<RandomCrop>);

  transform_class<RandomShortestSize>(m)
      .def(py::init([](const py::object& min_size, std::optional<int> max_size) {
             RandomShortestSize x;
             x.min_size.clear();
             auto type_error = [&] {
               return py::type_error("RandomShortestSize: min_size must be an int or a sequence of ints, got " +
                                     py::repr(min_size).cast<std::string>());
             };
             if (py::isinstance<py::bool_>(min_size)) throw type_error();
             if (py::isinstance<py::int_>(min_size)) {
               x.min_size.push_back(min_size.cast<int>());
             } else if (py::isinstance<py::sequence>(min_size) && !py::isinstance<py::str>(min_size)) {
               for (const py::handle& e : min_size.cast<py::sequence>()) {
                 if (!py::isinstance<py::int_>(e) || py::isinstance<py::bool_>(e)) throw type_error();
                 x.min_size.push_back(e.cast<int>());
               }
             } else {
               throw type_error();
             }
             if (max_size && *max_size <= 0) {
               throw py::value_error("RandomShortestSize: max_size must be positive, got " + std::to_string(*max_size));
             }
             x.max_size = max_size.value_or(0);
             return checked(x);
           }),
           py::arg("min_size"), py::arg("max_size") = py::none())
      .def_readonly("min_size", &RandomShortestSize::min_size, "The shorter side's candidate sizes.")
      .def_readonly("max_size", &RandomShortestSize::max_size, "The longer side's cap (0: none).")
      .def("__repr__", repr<RandomShortestSize>);

  transform_class<RandomHorizontalFlip>(m)
      .def(py::init([](double p) { return checked(RandomHorizontalFlip{p}); }), py::arg("p") = RandomHorizontalFlip{}.p)
      .def_readonly("p", &RandomHorizontalFlip::p, "The probability of the flip.")
      .def("__repr__", repr<RandomHorizontalFlip>);

  transform_class<RandomVerticalFlip>(m)
      .def(py::init([](double p) { return checked(RandomVerticalFlip{p}); }), py::arg("p") = RandomVerticalFlip{}.p)
      .def_readonly("p", &RandomVerticalFlip::p, "The probability of the flip.")
      .def("__repr__", repr<RandomVerticalFlip>);

  transform_class<RandomGrayscale>(m)
      .def(py::init([](double p) { return checked(RandomGrayscale{p}); }), py::arg("p") = RandomGrayscale{}.p)
      .def_readonly("p", &RandomGrayscale::p, "The probability of the conversion.")
      .def("__repr__", repr<RandomGrayscale>);

  transform_class<Normalize>(m)
      .def(py::init([](std::vector<float> mean, std::vector<float> std) { return checked(Normalize{mean, std}); }),
           py::arg("mean"), py::arg("std"))
      .def_readonly("mean", &Normalize::mean, "The channels' means (1 value, or one per channel).")
      .def_readonly("std", &Normalize::std, "The channels' standard deviations (1 value, or one per channel).")
      .def("__repr__", repr<Normalize>);

  bind_augment(m);

  // The batch transforms' kernels (python/stoker/batch_transforms.py calls
  // them with its draws): in place on a C-contiguous float32 [B, C, H, W]
  // array, the GIL released.
  m.def(
      "_mixup",
      [](py::array x, double lam) {
        float* p = batch_images("_mixup", x);
        std::vector<float> scratch;
        const auto b = static_cast<std::size_t>(x.shape(0));
        const auto n = static_cast<std::size_t>(x.shape(1) * x.shape(2) * x.shape(3));
        py::gil_scoped_release release;
        detail::mixup_inplace(p, b, n, lam, &scratch);
      },
      py::arg("images"), py::arg("lam"), "MixUp in place (stoker.MixUp's kernel; not for direct use).");
  m.def(
      "_cutmix",
      [](py::array x, int x1, int y1, int x2, int y2) {
        float* p = batch_images("_cutmix", x);
        if (x1 < 0 || y1 < 0 || x2 > x.shape(3) || y2 > x.shape(2)) throw py::value_error("_cutmix: box outside the image");
        std::vector<float> scratch;
        const auto b = static_cast<std::size_t>(x.shape(0));
        const int c = static_cast<int>(x.shape(1)), h = static_cast<int>(x.shape(2)), w = static_cast<int>(x.shape(3));
        py::gil_scoped_release release;
        detail::cutmix_inplace(p, b, c, h, w, x1, y1, x2, y2, &scratch);
      },
      py::arg("images"), py::arg("x1"), py::arg("y1"), py::arg("x2"), py::arg("y2"),
      "CutMix in place (stoker.CutMix's kernel; not for direct use).");

  // Every transform class, in the variant's order (from the variant itself):
  // what stoker.Loader accepts in transforms=.
  m.attr("_transform_types") = transform_types(static_cast<Transform*>(nullptr));
  // ... and their Union, the annotation of stoker.Loader's transforms (the stub spells it for type checkers;
  // tests/python/test_names.py checks the two agree).
  m.attr("_Transform") = py::module_::import("typing").attr("Union")[m.attr("_transform_types")];
  // Every transform's name, from the C++ registries (the Def<T> of each
  // alternative): {"image": [...], "volume": [...]}, in the variants' order.
  // tests/python/test_names.py checks python/stoker's surface against it.
  m.def("_transform_names", [] {
    py::dict out;
    py::list image, volume;
    for (const Transform& t : default_alternatives<Transform>()) image.append(detail::transform_name(t));
    for (const VolumeTransform& t : default_alternatives<VolumeTransform>()) {
      volume.append(detail::volume_transform_name(t));
    }
    out["image"] = image;
    out["volume"] = volume;
    return out;
  });
  // Every transform's docstring, from its definition (Def<T>::kDoc,
  // VDef<T>::kDoc): {"image": {name: doc}, "volume": {name: doc}}. The image
  // transforms' classes above carry theirs; stoker.volume's classes take
  // their __doc__ from here.
  m.def("_transform_docs", [] {
    py::dict out, image, volume;
    for (const Transform& t : default_alternatives<Transform>()) {
      image[detail::transform_name(t)] = detail::transform_doc(t);
    }
    for (const VolumeTransform& t : default_alternatives<VolumeTransform>()) {
      volume[detail::volume_transform_name(t)] = detail::volume_transform_doc(t);
    }
    out["image"] = image;
    out["volume"] = volume;
    return out;
  });


}

}  // namespace stoker::python
