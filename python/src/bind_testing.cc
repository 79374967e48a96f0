// _stoker._testing: hooks for stoker's own tests, never for training code.
#include <pybind11/pybind11.h>

#include "bindings.h"
#include "sample/sample_maker.h"

namespace py = pybind11;

namespace stoker::python {

void bind_testing(py::module_& m) {
  py::module_ t = m.def_submodule("_testing", "hooks for stoker's own tests; not for training code");
  t.def("throw_in_sample", &detail::testing::throw_in_sample, py::arg("record"), py::arg("bad_alloc") = false,
        "Makes every loader throw a C++ exception (std::runtime_error, or std::bad_alloc) while making record "
        "`record`, until called with -1: tests that the exception becomes a counted sample error.");
}

}  // namespace stoker::python
