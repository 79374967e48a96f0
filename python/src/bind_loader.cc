// The Loader, its batches as zero-copy numpy arrays, stats, and decode_image.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include "batch/resume.h"
#include "bindings.h"
#include "decode/decode.h"
#include "memory/memory_budget.h"
#include "order/rng.h"
#include "source/file_list_source.h"
#include "source/file_reader.h"
#include "source/manifest.h"
#include "util/thread.h"
#include "util/util.h"
#include "sample/fields/field_def.h"
#include "stats/stats_table.h"
#include "stoker/loader.h"
#include "stoker/names.h"
#include "transform/pipeline.h"

namespace py = pybind11;

namespace stoker::python {
namespace {

// A numpy array viewing the batch's buffer; the array's base owns a copy of
// the Batch, so the buffer returns to the ring only when the array (and any
// tensor made from it) is gone.
py::array view_of(const Batch& batch, py::dtype dtype, std::vector<py::ssize_t> shape, void* data) {
  auto* keep = new Batch(batch);
  py::capsule base(keep, [](void* p) { delete static_cast<Batch*>(p); });
  return py::array(dtype, std::move(shape), {}, data, base);
}

// NOTE: the destructor joins the workers, which may be blocked in a read
// that a Python thread will satisfy (a pipe, a FUSE file): join without the GIL.
struct ReleaseGilDelete {
  void operator()(Loader* l) const {
    py::gil_scoped_release release;
    delete l;
  }
};

// The dict is Stats::to_json() parsed: the stats table's codec (stats/stats_table.h).
py::dict stats_dict(const Stats& s) {
  return py::module_::import("json").attr("loads")(s.to_json());
}

// The stats table as dicts: name, kind, unit, doc, from, and a group's fields.
py::list stats_table_list(const std::vector<detail::StatInfo>& table) {
  py::list out;
  for (const detail::StatInfo& s : table) {
    py::dict d;
    d["name"] = s.name;
    d["kind"] = detail::stat_kind_name(s.kind);
    d["unit"] = s.unit;
    d["doc"] = s.doc;
    d["from"] = s.from;
    d["fields"] = stats_table_list(s.fields);
    out.append(std::move(d));
  }
  return out;
}

// Runs `make` (a batch's making) without the GIL. NOTE: a bad sample under
// on_corrupt="raise" is a stoker.SampleError (an OSError) whatever its
// reason, a missing file or member included, as documented; elsewhere
// kNotFound is FileNotFoundError.
template <typename Make>
void making_batch(Make&& make) {
  try {
    py::gil_scoped_release release;
    make();
  } catch (const Error& e) {
    if (e.code() != Code::kNotFound && e.code() != Code::kIOError) throw;
    PyErr_SetString(py::module_::import("stoker._stoker").attr("SampleError").ptr(), e.what());
    throw py::error_already_set();
  }
}

py::object batch_object(const Loader& l, const Batch& b);

// The next batch as a Python object (None at the end of the epoch) and its
// index within the epoch (-1 at the end).
std::pair<py::object, std::int64_t> next_batch(Loader& l) {
  std::optional<Batch> b;
  // NOTE: wait in slices so that Ctrl-C (KeyboardInterrupt) and other
  // signals are handled while a slow batch is being made.
  for (;;) {
    bool timed_out = false;
    making_batch([&] { b = l.next_for(std::chrono::milliseconds(50), &timed_out); });
    if (!timed_out) break;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  }
  if (!b) return {py::none(), -1};
  // NOTE: with a Python stage the batch is the stage's (stoker._pystage), by its index.
  if (l.options().hook) return {py::none(), static_cast<std::int64_t>(b->index())};
  return {batch_object(l, *b), static_cast<std::int64_t>(b->index())};
}

// A batch as the iteration yields it: (images, labels) for the default
// schema, else a dict of its tensors in schema order; numpy arrays viewing
// the batch's buffer.
py::object batch_object(const Loader& l, const Batch& batch) {
  const Batch* b = &batch;
  auto view = [&](const TensorView& t) {
    return view_of(*b, py::dtype(t.descr), {t.dims.begin(), t.dims.end()}, t.data);
  };
  // The default schema: (images, labels), its two tensors; a schema of named
  // fields: a dict of its tensors, in schema order.
  if (l.options().fields.empty() && l.options().views.empty()) {
    return py::make_tuple(view(b->tensors().at(0)), view(b->tensors().at(1)));
  }
  py::dict out;
  for (const TensorView& t : b->tensors()) out[py::str(t.name)] = view(t);
  return out;
}

// The options every constructor takes: JSON (the transforms and views in
// it, as every other option), and the Python stage.
LoaderOptions loader_options(const std::string& options, const py::object& stage) {
  LoaderOptions o = options_from_json(options);
  o.hook = make_hook(stage);
  return o;  // NOTE: validated once, by the Loader
}

using LoaderPtr = std::unique_ptr<Loader, ReleaseGilDelete>;

}  // namespace

void bind_loader(py::module_& m) {
  py::class_<Loader, std::unique_ptr<Loader, ReleaseGilDelete>>(m, "_Loader")
      // Options come as JSON (python/stoker: every keyword of stoker.Loader,
      // its transforms and views included), decoded and validated by the one
      // codec in C++ (src/options/options.cc): the doctor's snapshot uses the same.
      .def(py::init([](const std::vector<std::string>& sources, const std::string& options, const py::object& stage) {
             LoaderOptions o = loader_options(options, stage);
             py::gil_scoped_release release;  // scanning a folder or indexing shards takes a while
             return LoaderPtr(new Loader(sources, std::move(o)));
           }),
           py::arg("sources"), py::arg("options"), py::arg("stage") = py::none())
      // A mixture (stoker.Mix), as the JSON of its one codec (src/source/mixture_source.cc).
      .def_static(
          "_mixture",
          [](const std::string& mixture, const std::string& options, const py::object& stage) {
            Mixture mix = mixture_from_json(mixture);
            LoaderOptions o = loader_options(options, stage);
            py::gil_scoped_release release;
            return LoaderPtr(new Loader(mix, std::move(o)));
          },
          py::arg("mixture"), py::arg("options"), py::arg("stage") = py::none())
      // An explicit list of files (stoker.datasets' samples): record i is paths[i] with labels[i].
      .def_static(
          "_files",
          [](std::vector<std::string> paths, std::vector<std::int64_t> labels, std::vector<std::string> classes,
             const std::string& what, const std::string& root, const std::string& options,
             const py::object& stage) {
            if (paths.size() != labels.size()) throw Error(Code::kInvalidArgument, "_files: paths and labels differ in length");
            LoaderOptions o = loader_options(options, stage);
            std::shared_ptr<const Source> source =
                detail::make_file_list_source(std::move(paths), std::move(labels), std::move(classes), what, root);
            py::gil_scoped_release release;
            return LoaderPtr(new Loader(std::move(source), std::move(o)));
          },
          py::arg("paths"), py::arg("labels"), py::arg("classes"), py::arg("what"), py::arg("root"),
          py::arg("options"), py::arg("stage") = py::none())
      // stoker.Records: record i is read(i)'s bytes or path.
      .def_static(
          "_records",
          [](std::size_t size, py::object read, const std::string& what, const std::string& options,
             const py::object& stage) {
            LoaderOptions o = loader_options(options, stage);
            std::shared_ptr<const Source> source = make_records(size, std::move(read), what);
            py::gil_scoped_release release;
            return LoaderPtr(new Loader(std::move(source), std::move(o)));
          },
          py::arg("size"), py::arg("read"), py::arg("what"), py::arg("options"), py::arg("stage") = py::none())
      .def("close", &Loader::close, py::call_guard<py::gil_scoped_release>())
      .def("__len__", &Loader::num_batches)
      .def_property_readonly("num_samples", &Loader::num_samples)
      // The records of an epoch before sharding: a mixture's draws per epoch.
      .def_property_readonly("dataset_size", [](const Loader& l) { return l.state_dict().dataset_size; })
      .def_property_readonly("classes", [](const Loader& l) { return l.source().classes(); })
      .def_property_readonly("sample_tensors",
                             [](const Loader& l) {
                               py::list out;
                               for (const TensorView& t : l.sample_tensors()) {
                                 out.append(py::make_tuple(t.name, py::dtype(t.descr), t.dims));
                               }
                               return out;
                             })
      .def_property_readonly("threads", [](const Loader& l) { return l.stats().threads; })
      .def("key", [](const Loader& l, std::size_t i) { return l.source().key(i); })
      .def("label", [](const Loader& l, std::size_t i) { return l.source().label(i); })
      .def("set_epoch", &Loader::set_epoch)
      .def("trace_events", &Loader::trace_events)
      .def("write_trace", &Loader::write_trace, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("epoch", &Loader::epoch)
      .def("start_epoch", &Loader::start_epoch, py::call_guard<py::gil_scoped_release>())
      .def("next", [](Loader& l) { return next_batch(l).first; })
      .def("next_indexed", &next_batch)
      // Loader::batch: batch `index` of `epoch` made again, as the iteration yields it.
      .def(
          "batch",
          [](Loader& l, std::uint64_t epoch, std::size_t index) {
            std::optional<Batch> b;
            making_batch([&] { b = l.batch(epoch, index); });
            return batch_object(l, *b);
          },
          py::arg("epoch"), py::arg("index"))
      // Loader::batch_provenance, its JSON parsed.
      .def(
          "batch_provenance",
          [](const Loader& l, std::uint64_t epoch, std::size_t index) {
            std::string j;
            {
              py::gil_scoped_release release;
              j = l.batch_provenance(epoch, index);
            }
            return py::module_::import("json").attr("loads")(j);
          },
          py::arg("epoch"), py::arg("index"))
      // The keys are those of the C++ codec (src/batch/resume.cc).
      .def("state_dict",
           [](const Loader& l) {
             return py::module_::import("json").attr("loads")(detail::state_to_json(l.state_dict()));
           })
      .def(
          "load_state_dict",
          [](Loader& l, const py::object& d) {
            // default=int: numpy integers (a state kept in numpy) are integers.
            const auto text = py::module_::import("json").attr("dumps")(d, py::arg("default") = py::module_::import("builtins").attr("int")).cast<std::string>();
            Loader::State st = detail::state_from_json(text);
            py::gil_scoped_release release;
            l.load_state_dict(st);
          },
          py::arg("state"))
      .def("stats", [](const Loader& l) { return stats_dict(l.stats()); })
      .def("stats_json", [](const Loader& l) { return l.stats().to_json(); });

  // "" when stoker's Pipeline takes the list (fixed_size false: samples may
  // differ in size, as with a Python stage after it), else its message.
  m.def(
      "_pipeline_error",
      [](std::vector<Transform> transforms, const std::string& dtype, bool fixed_size) -> std::string {
        try {
          detail::Pipeline p(transforms, find_name<DType>(dtype).value_or(DType::kFloat32), Layout::kNCHW, fixed_size);
        } catch (const Error& e) {
          return e.what();
        }
        return "";
      },
      py::arg("transforms"), py::arg("dtype") = name_of(LoaderOptions{}.dtype), py::arg("fixed_size") = false);

  // Waits for the loaders freed on stoker's threads (by the garbage collector, run by a Python transform on a
  // worker) to be closed on threads of their own (util/thread.h defer_to_thread): stoker._pystage, at exit.
  m.def("_join_closing", [] { detail::join_deferred(); }, py::call_guard<py::gil_scoped_release>());

  // The ranks on this node as torch.distributed counts them (python/stoker: _note_local_ranks), for every loader
  // of the process made after it: memory/memory_budget.h local_ranks().
  m.def(
      "_set_local_ranks", [](int ranks, const std::string& source) { detail::set_local_ranks(ranks, source); },
      py::arg("ranks"), py::arg("source"));

  // Every stat of stats(), as the one stats table declares it (docs/stats.md is checked against it).
  m.def("_stats_table", [] { return stats_table_list(detail::stats_table()); });

  // LoaderOptions{} through the one options codec: stoker.Loader's defaults are read from it.
  m.def("_default_options", [] { return options_to_json(LoaderOptions{}); });
  // Every enum's names (stoker/names.h), by the enum's key ("cache": ["mmap", ...]), and the field kinds'
  // ("field_kind", from their definitions): python/stoker's enums and allowed values read them here.
  m.def("_enum_names", [] {
    py::dict out;
    for_each_enum([&](auto names) {
      py::list values;
      for (const auto& [value, name] : decltype(names)::kNames) values.append(name);
      out[decltype(names)::kKey] = values;
    });
    py::list kinds;
    for (const detail::FieldDef* d : detail::field_defs()) kinds.append(d->name);
    out["field_kind"] = kinds;
    return out;
  });
  // Every field kind's docstring, by its name, from its definition (FieldDef::doc): the stoker.fields classes'
  // __doc__.
  m.def("_field_docs", [] {
    py::dict out;
    for (const detail::FieldDef* d : detail::field_defs()) out[d->name] = detail::field_doc(*d);
    return out;
  });

  // Each transform as the options codec writes it (the doctor's probe reads a script's pipeline so).
  m.def(
      "_transforms_json",
      [](const std::vector<Transform>& transforms) {
        std::vector<std::string> out;
        for (const Transform& t : transforms) out.push_back(detail::transform_to_json(t));
        return out;
      },
      py::arg("transforms"));

  m.def(
      "write_manifest",
      [](const std::string& pattern, const std::string& out, const std::string& labels) {
        py::gil_scoped_release release;
        return write_manifest(pattern, out, labels);
      },
      py::arg("pattern"), py::arg("out") = "", py::arg("labels") = "cls",
      "Writes the manifest of local tar shards; stoker.write_manifest (python/stoker/__init__.py) documents it.");

  // A manifest of the given rows, through the one format definition (source/manifest.h): bench/scale_bench.py
  // writes the manifests of synthetic data sets of 10^5 shards (symlinks to a few real ones) with it.
  m.def(
      "_write_manifest_rows",
      [](const std::string& path, const std::vector<std::string>& names, const std::vector<std::uint64_t>& records,
         const std::vector<std::uint64_t>& bytes, const std::string& labels) {
        if (names.size() != records.size() || names.size() != bytes.size()) {
          throw Error(Code::kInvalidArgument, "_write_manifest_rows: names, records and bytes differ in length");
        }
        detail::Manifest manifest;
        manifest.labels = labels;
        for (std::size_t s = 0; s < names.size(); ++s) manifest.shards.push_back({names[s], records[s], bytes[s]});
        Status st = detail::write_file_atomically(path, detail::serialize_manifest(manifest));
        if (!st.ok()) throw Error(st);
      },
      py::arg("path"), py::arg("names"), py::arg("records"), py::arg("bytes"), py::arg("labels") = "cls");

  m.def(
      "decode_image",
      [](const py::object& src, std::uint64_t max_image_pixels) {
        std::vector<std::uint8_t> bytes;
        std::string name = "<bytes>";
        if (py::isinstance<py::bytes>(src)) {
          std::string s = src.cast<std::string>();
          bytes.assign(s.begin(), s.end());
        } else {
          name = py::str(src).cast<std::string>();
          Status st = detail::read_file(name, &bytes);
          if (!st.ok()) throw Error(st);
        }
        detail::ImageDecoder dec;
        detail::ImageBuffer buf;
        detail::ImageView view;
        {
          py::gil_scoped_release release;
          Status st = dec.open(bytes.data(), bytes.size(), max_image_pixels);
          if (st.ok()) st = dec.decode({0, 0, dec.width(), dec.height()}, &buf, &view);
          if (!st.ok()) throw Error(st.code(), name + ": " + st.message());
        }
        py::array_t<std::uint8_t> out({view.height, view.width, 3});
        for (int y = 0; y < view.height; ++y) {
          std::memcpy(out.mutable_data(y), view.row(y), static_cast<std::size_t>(view.width) * 3);
        }
        return out;
      },
      py::arg("source"), py::arg("max_image_pixels") = LoaderOptions{}.max_image_pixels,
      R"doc(Decode an image to RGB pixels, as PIL's ``Image.open(source).convert("RGB")``.

JPEG, PNG, WebP, TIFF, BMP, GIF and uint8 .npy images, told apart by their
first bytes (not by the file name), decoded as stoker.Loader decodes them and
as torchvision's default loader does: grayscale replicated to 3 channels,
palettes applied, alpha and transparency dropped (not composited), CMYK and
YCCK converted with PIL's formula, 16-bit colour reduced to the high byte of
each value and 16-bit gray clipped at 255 (as PIL converts each), the first
frame of an animated GIF or WebP and the first page of a TIFF; EXIF
orientation not applied (torchvision's loader does not call exif_transpose),
a TIFF's Orientation tag applied (PIL's TIFF plugin applies it on load). The
GIL is released while decoding.

Args:
    source (str, os.PathLike or bytes): the encoded image: bytes, or a path
        to a file (any object but bytes is taken as a path, by its str()).
    max_image_pixels (int): images with more pixels are refused before any
        pixel memory is allocated. Default 178956970, Pillow's
        decompression-bomb limit (2 x 89,478,485), as stoker.Loader's.

Returns:
    numpy.ndarray: uint8, shape [H, W, 3].

Raises:
    FileNotFoundError: the path does not exist.
    OSError: the path cannot be read (a directory, no permission).
    stoker.SampleError: the bytes are not an image of those formats, are
        corrupt or truncated, are a variant stoker cannot decode, or have
        more than ``max_image_pixels`` pixels. The message starts with the
        path (or "<bytes>") and gives the reason.

Example:
    >>> img = stoker.decode_image("data/train/cat/0001.jpg")
    >>> img.shape, img.dtype
    ((375, 500, 3), dtype('uint8'))
    >>> img = stoker.decode_image(open("photo.png", "rb").read()))doc");


}

}  // namespace stoker::python
