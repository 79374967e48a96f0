// Transforms with torchvision's constructor signatures.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstring>

#include "bindings.h"
#include "order/rng.h"
#include "stoker/transforms.h"
#include "transform/pipeline.h"
#include "transform/resize.h"

namespace py = pybind11;

namespace stoker::python {
namespace {

// torchvision accepts an int or a sequence of one or two ints: (h, w).
std::pair<int, int> size_arg(const char* who, const py::object& size) {
  if (py::isinstance<py::int_>(size)) {
    int s = size.cast<int>();
    return {s, s};
  }
  auto v = size.cast<std::vector<int>>();
  if (v.size() == 1) return {v[0], v[0]};
  if (v.size() == 2) return {v[0], v[1]};
  throw py::value_error(std::string(who) + ": size must be an int or a sequence of 1 or 2 ints, got " +
                        std::to_string(v.size()) + " values");
}

// The repr from the transform's one definition (src/transform/transforms.cc).
template <typename T>
std::string repr(const T& t) {
  return detail::transform_repr(Transform{t});
}

template <typename... T>
py::tuple transform_types(std::variant<T...>*) {
  return py::make_tuple(py::type::of<T>()...);
}

}  // namespace

void bind_transforms(py::module_& m) {
  py::class_<RandomResizedCrop>(m, "RandomResizedCrop")
      .def(py::init([](const py::object& size, std::array<double, 2> scale, std::array<double, 2> ratio) {
             auto [h, w] = size_arg("RandomResizedCrop", size);
             return RandomResizedCrop{h, w, scale, ratio};
           }),
           py::arg("size"), py::arg("scale") = std::array<double, 2>{0.08, 1.0},
           py::arg("ratio") = std::array<double, 2>{3.0 / 4.0, 4.0 / 3.0})
      .def_readonly("height", &RandomResizedCrop::height)
      .def_readonly("width", &RandomResizedCrop::width)
      .def_readonly("scale", &RandomResizedCrop::scale)
      .def_readonly("ratio", &RandomResizedCrop::ratio)
      .def("__repr__", repr<RandomResizedCrop>);

  py::class_<Resize>(m, "Resize")
      .def(py::init([](const py::object& size, std::optional<int> max_size) {
             if (py::isinstance<py::int_>(size) || py::len(size) == 1) {
               auto [s, unused] = size_arg("Resize", size);
               (void)unused;
               return Resize{s, 0, max_size.value_or(0)};
             }
             auto [h, w] = size_arg("Resize", size);
             return Resize{h, w, max_size.value_or(0)};
           }),
           py::arg("size"), py::arg("max_size") = py::none())
      .def_readonly("height", &Resize::height)
      .def_readonly("width", &Resize::width)
      .def("__repr__", repr<Resize>);

  py::class_<CenterCrop>(m, "CenterCrop")
      .def(py::init([](const py::object& size) {
             auto [h, w] = size_arg("CenterCrop", size);
             return CenterCrop{h, w};
           }),
           py::arg("size"))
      .def_readonly("height", &CenterCrop::height)
      .def_readonly("width", &CenterCrop::width)
      .def("__repr__", repr<CenterCrop>);

  py::class_<RandomHorizontalFlip>(m, "RandomHorizontalFlip")
      .def(py::init([](double p) { return RandomHorizontalFlip{p}; }), py::arg("p") = 0.5)
      .def_readonly("p", &RandomHorizontalFlip::p)
      .def("__repr__", repr<RandomHorizontalFlip>);

  py::class_<RandomVerticalFlip>(m, "RandomVerticalFlip")
      .def(py::init([](double p) { return RandomVerticalFlip{p}; }), py::arg("p") = 0.5)
      .def_readonly("p", &RandomVerticalFlip::p)
      .def("__repr__", repr<RandomVerticalFlip>);
  py::class_<RandomGrayscale>(m, "RandomGrayscale")
      .def(py::init([](double p) { return RandomGrayscale{p}; }), py::arg("p") = 0.1)
      .def_readonly("p", &RandomGrayscale::p)
      .def("__repr__", repr<RandomGrayscale>);

  py::class_<Normalize>(m, "Normalize")
      .def(py::init([](std::vector<float> mean, std::vector<float> std) { return Normalize{mean, std}; }),
           py::arg("mean"), py::arg("std"))
      .def_readonly("mean", &Normalize::mean)
      .def_readonly("std", &Normalize::std)
      .def("__repr__", repr<Normalize>);

  // Every transform class, in the variant's order (from the variant itself):
  // what stoker.Loader accepts in transforms=.
  m.attr("_transform_types") = transform_types(static_cast<Transform*>(nullptr));


}

}  // namespace stoker::python
