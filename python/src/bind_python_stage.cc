// Python on stoker's workers: the sample hook (LoaderOptions::hook) that runs
// the part of a pipeline stoker has no kernel for, and stoker.Records'
// source, whose records a Python callable returns. Each holds the GIL only
// while its Python runs.
#include <pybind11/numpy.h>

#include <cstring>

#include "bindings.h"
#include "source/file_reader.h"
#include "stoker/hook.h"
#include "stoker/source.h"

namespace py = pybind11;

namespace stoker::python {
namespace {

// The Python exception in flight as a Status; the Python side keeps the
// exception itself (stoker._pystage) to re-raise it with its traceback.
Status python_error(const py::error_already_set& e) { return Status(Code::kPython, e.what()); }

// Drops Python references with the GIL held, whichever thread destroys the owner.
void release(py::object* o) {
  if (!o->ptr()) return;
  py::gil_scoped_acquire gil;
  *o = py::object();
}

// stoker._pystage.Stage: sample(run, epoch, batch, pos, record, label, image)
// and batch(run, epoch, batch, size), each returning None or an error message.
class PyHook final : public SampleHook {
 public:
  explicit PyHook(py::object stage) : sample_(stage.attr("sample")), batch_(stage.attr("batch")) {}
  ~PyHook() override {
    release(&sample_);
    release(&batch_);
  }

  Status sample(std::uint64_t run, std::uint64_t epoch, std::size_t batch, std::size_t pos,
                const HookSample& s) override {
    py::gil_scoped_acquire gil;
    try {
      py::object image = py::none();
      if (s.image) {
        // NOTE: a copy the Python stage owns: the worker reuses its buffer
        // for the next sample, and a transform may return its input.
        py::array a(py::dtype(s.descr), std::vector<py::ssize_t>(s.dims.begin(), s.dims.end()));
        std::memcpy(a.mutable_data(), s.image, static_cast<std::size_t>(a.nbytes()));
        image = std::move(a);
      }
      return result(sample_(run, epoch, batch, pos, s.record, s.label, image));
    } catch (const py::error_already_set& e) {
      return python_error(e);
    }
  }

  Status batch(std::uint64_t run, std::uint64_t epoch, std::size_t batch, std::size_t size) override {
    py::gil_scoped_acquire gil;
    try {
      return result(batch_(run, epoch, batch, size));
    } catch (const py::error_already_set& e) {
      return python_error(e);
    }
  }

 private:
  static Status result(const py::object& r) {
    if (r.is_none()) return Status::Ok();
    return Status(Code::kPython, py::str(r).cast<std::string>());
  }
  py::object sample_, batch_;
};

// stoker.Records: record i is what read(i) returns: bytes-like (the encoded
// image) or a path (str or os.PathLike) read here without the GIL.
class PyRecords final : public Source {
 public:
  PyRecords(std::size_t size, py::object read, std::string what)
      : size_(size), read_(std::move(read)), what_(std::move(what)) {
    keys_.reserve(size);
    for (std::size_t i = 0; i < size; ++i) keys_.push_back(what_ + "[" + std::to_string(i) + "]");
  }
  ~PyRecords() override { release(&read_); }

  std::size_t size() const override { return size_; }
  std::string key(std::size_t i) const override { return keys_[i]; }
  std::int64_t label(std::size_t) const override { return -1; }
  const std::vector<std::string>& classes() const override { return classes_; }
  std::string describe() const override { return what_; }

  Status read(std::size_t i, std::vector<std::uint8_t>* out) const override {
    std::string path;
    {
      py::gil_scoped_acquire gil;
      try {
        py::object r = read_(i);
        if (PyBytes_Check(r.ptr()) || PyByteArray_Check(r.ptr()) || PyMemoryView_Check(r.ptr())) {
          py::buffer_info b = py::buffer(r).request();
          const auto* p = static_cast<const std::uint8_t*>(b.ptr);
          out->assign(p, p + b.size * b.itemsize);
          return Status::Ok();
        }
        path = py::str(py::module_::import("os").attr("fspath")(r)).cast<std::string>();
      } catch (const py::error_already_set& e) {
        return python_error(e);
      }
    }
    return detail::read_file(path, out);
  }

 private:
  std::size_t size_;
  mutable py::object read_;
  std::string what_;
  std::vector<std::string> keys_;
  std::vector<std::string> classes_;
};

}  // namespace

std::shared_ptr<SampleHook> make_hook(const py::object& stage) {
  if (stage.is_none()) return nullptr;
  return std::make_shared<PyHook>(stage);
}

std::shared_ptr<const Source> make_records(std::size_t size, py::object read, std::string what) {
  return std::make_shared<PyRecords>(size, std::move(read), std::move(what));
}

}  // namespace stoker::python
