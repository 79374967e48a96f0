// The _stoker extension module: one exception translator, then each area.
#include <pybind11/pybind11.h>

#include "bindings.h"
#include "stoker/status.h"
#include "stoker/version.h"

namespace py = pybind11;

PYBIND11_MODULE(_stoker, m) {
  m.doc() = "stoker: a C++ engine that keeps a training job's accelerator fed";
  m.attr("__version__") = STOKER_VERSION;  // CMakeLists.txt's project(VERSION), via stoker/version.h
  static py::exception<stoker::Error> sample_error(m, "SampleError", PyExc_OSError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const stoker::Error& e) {
      switch (e.code()) {
        case stoker::Code::kInvalidArgument: PyErr_SetString(PyExc_ValueError, e.what()); return;
        case stoker::Code::kNotFound: PyErr_SetString(PyExc_FileNotFoundError, e.what()); return;
        case stoker::Code::kIOError: PyErr_SetString(PyExc_OSError, e.what()); return;
        case stoker::Code::kCorrupt:
        case stoker::Code::kUnsupported:
        case stoker::Code::kResourceExhausted:
        case stoker::Code::kInternal: sample_error(e.what()); return;
        default: PyErr_SetString(PyExc_RuntimeError, e.what()); return;
      }
    }
  });
  stoker::python::bind_transforms(m);
  stoker::python::bind_loader(m);
  stoker::python::bind_testing(m);
  stoker::python::bind_masks(m);
}
