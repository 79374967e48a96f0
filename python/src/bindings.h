// Shared declarations of the pybind11 binding files.
#pragma once

#include <pybind11/pybind11.h>

#include <array>
#include <memory>
#include <string>

#include "stoker/hook.h"
#include "stoker/source.h"
#include "stoker/transforms.h"
#include "transform/transform_defs.h"

namespace stoker::python {
void bind_transforms(pybind11::module_& m);
// Called by bind_transforms before it lists the transform types.
void bind_augment(pybind11::module_& m);
void bind_loader(pybind11::module_& m);
void bind_testing(pybind11::module_& m);
void bind_masks(pybind11::module_& m);

// bind_python_stage.cc: the hook around a stoker._pystage.Stage (null for
// None), and stoker.Records' source: record i is read(i)'s bytes or path.
std::shared_ptr<SampleHook> make_hook(const pybind11::object& stage);
std::shared_ptr<const Source> make_records(std::size_t size, pybind11::object read, std::string what);

// A fill argument as torchvision's F_pil._parse_fill takes it: None (0), a
// number or a sequence of 1 or 3 numbers, made ints (bind_augment.cc).
std::array<int, 3> fill_arg(const char* who, const pybind11::object& v);

// A transform as constructed, checked by its one definition
// (src/transform/transforms.cc): a bad parameter is a ValueError at
// construction, as in torchvision, not only when a Loader is made.
template <typename T>
T checked(T x) {
  detail::check_transform(Transform{x});
  return x;
}

// A transform's Python class, named and documented by its one definition
// (its Def<T>'s kName and kDoc: Python's __doc__ is C++'s text).
template <typename T>
pybind11::class_<T> transform_class(pybind11::module_& m) {
  const Transform t{T{}};
  return pybind11::class_<T>(m, detail::transform_name(t), detail::transform_doc(t));
}

// The repr from the transform's one definition.
template <typename T>
std::string repr(const T& t) {
  return detail::transform_repr(Transform{t});
}
}  // namespace stoker::python
