// Mask kernels exposed for stoker's own tests (tests/python/test_masks.py
// compares them with Pillow); not for training code.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <optional>

#include "bindings.h"
#include "transform/nearest.h"

namespace py = pybind11;

namespace stoker::python {
namespace {

template <typename T>
py::array resize_nearest_as(const py::array& array, int width, int height, const double* box) {
  auto img = py::array_t<T, py::array::c_style | py::array::forcecast>::ensure(array);
  constexpr int kBytes = sizeof(T);
  detail::MaskView src{reinterpret_cast<const std::uint8_t*>(img.data()), static_cast<int>(img.shape(1)),
                       static_cast<int>(img.shape(0)), static_cast<std::ptrdiff_t>(img.shape(1) * kBytes), kBytes};
  detail::MaskBuffer out;
  {
    py::gil_scoped_release release;
    detail::resize_nearest(src, width, height, &out, box);
  }
  py::array_t<T> result({height, width});
  for (int y = 0; y < height; ++y) {
    std::memcpy(result.mutable_data(y), out.row(y), static_cast<std::size_t>(width) * sizeof(T));
  }
  return result;
}

}  // namespace

// In _stoker._testing (hooks for stoker's own tests): resize_nearest.
void bind_masks(py::module_& m) {
  py::module_ hooks = m.def_submodule("_testing");
  // Test hook: stoker's nearest resize of a 2-D uint8 ("L", "P") or uint16
  // ("I;16") array, as PIL's Image.resize((width, height), NEAREST, box).
  hooks.def(
      "resize_nearest",
      [](const py::array& array, int width, int height, std::optional<std::array<double, 4>> box) {
        const bool u8 = py::isinstance<py::array_t<std::uint8_t>>(array);
        if (!u8 && !py::isinstance<py::array_t<std::uint16_t>>(array)) {
          throw py::type_error("resize_nearest: expects a uint8 or uint16 array");
        }
        if (array.ndim() != 2 || array.shape(0) == 0 || array.shape(1) == 0) {
          throw py::value_error("resize_nearest: expects a non-empty 2-D (H, W) array");
        }
        if (width < 1 || height < 1) throw py::value_error("height and width must be > 0");
        if (box) {
          // Pillow's checks, on the box as it parses it (float32).
          std::array<float, 4> f;
          for (std::size_t i = 0; i < 4; ++i) f[i] = static_cast<float>((*box)[i]);
          if (f[0] < 0 || f[1] < 0) throw py::value_error("box offset can't be negative");
          if (f[2] > static_cast<float>(array.shape(1)) || f[3] > static_cast<float>(array.shape(0))) {
            throw py::value_error("box can't exceed original image size");
          }
          if (f[2] - f[0] < 0 || f[3] - f[1] < 0) throw py::value_error("box can't be empty");
        }
        const double* b = box ? box->data() : nullptr;
        return u8 ? resize_nearest_as<std::uint8_t>(array, width, height, b)
                  : resize_nearest_as<std::uint16_t>(array, width, height, b);
      },
      py::arg("array"), py::arg("width"), py::arg("height"), py::arg("box") = py::none());
}

}  // namespace stoker::python
