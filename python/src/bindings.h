// Shared declarations of the pybind11 binding files.
#pragma once

#include <pybind11/pybind11.h>

namespace stoker::python {
void bind_transforms(pybind11::module_& m);
// Called by bind_transforms before it lists the transform types.
void bind_augment(pybind11::module_& m);
void bind_loader(pybind11::module_& m);
void bind_testing(pybind11::module_& m);
void bind_masks(pybind11::module_& m);
}  // namespace stoker::python
