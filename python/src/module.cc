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
  sample_error.attr("__doc__") = R"doc(A sample could not be made from its bytes.

A subclass of OSError (its errno and filename are None). The message names
the file (or the record and its key) and the reason: corrupt or truncated
bytes, a format or variant stoker cannot decode, an image over
max_image_pixels; in a Loader also a missing or unreadable file or member, a
mask whose size differs from its image's, or an unexpected error while making
the sample.

Raised by:
    stoker.decode_image, for such bytes.
    Iterating a stoker.Loader with on_corrupt="raise", when the batch holding
        a bad sample is due (the batches before it are handed out first, and
        iteration may go on after it); with on_corrupt="skip", when
        max_consecutive_corrupt samples in a row at one place of the epoch
        are bad.

Example:
    >>> try:
    ...     stoker.decode_image(b"not an image")
    ... except stoker.SampleError as e:
    ...     print(e)
    <bytes>: not a JPEG, PNG, .npy, WebP, TIFF, BMP or GIF image (first bytes: 6e 6f 74 20))doc";
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const stoker::Error& e) {
      switch (e.code()) {
        case stoker::Code::kInvalidArgument: PyErr_SetString(PyExc_ValueError, e.what()); return;
        case stoker::Code::kNotFound: PyErr_SetString(PyExc_FileNotFoundError, e.what()); return;
        case stoker::Code::kIOError: PyErr_SetString(PyExc_OSError, e.what()); return;
        case stoker::Code::kUnavailable: PyErr_SetString(PyExc_ConnectionError, e.what()); return;
        case stoker::Code::kCorrupt:
        case stoker::Code::kUnsupported:
        case stoker::Code::kResourceExhausted:
        case stoker::Code::kInternal:
        case stoker::Code::kPython: sample_error(e.what()); return;
        default: PyErr_SetString(PyExc_RuntimeError, e.what()); return;
      }
    }
  });
  stoker::python::bind_transforms(m);
  stoker::python::bind_loader(m);
  stoker::python::bind_testing(m);
  stoker::python::bind_masks(m);
}
