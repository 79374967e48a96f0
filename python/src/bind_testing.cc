// _stoker._testing: hooks for stoker's own tests, never for training code.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>

#include "bindings.h"
#include "decode/decode.h"
#include "order/rng.h"
#include "sample/sample_maker.h"
#include "stoker/loader.h"
#include "transform/pipeline.h"
#include "transform/resize.h"

namespace py = pybind11;

namespace stoker::python {

void bind_testing(py::module_& m) {
  py::module_ hooks = m.def_submodule("_testing", "hooks for stoker's own tests; not for training code");
  hooks.def("throw_in_sample", &detail::testing::throw_in_sample, py::arg("record"), py::arg("bad_alloc") = false,
        "Makes every loader throw a C++ exception (std::runtime_error, or std::bad_alloc) while making record "
        "`record`, until called with -1: tests that the exception becomes a counted sample error.");

  // Test hook: draws `n` boxes from a seeded stream (for distribution checks).
  hooks.def(
      "random_resized_crop_boxes",
      [](const RandomResizedCrop& t, int width, int height, std::uint64_t seed, int n) {
        detail::Rng rng(seed);
        py::list out;
        for (int i = 0; i < n; ++i) {
          detail::Box b = detail::random_resized_crop_box(width, height, t.scale, t.ratio, &rng);
          out.append(py::make_tuple(b.y, b.x, b.height, b.width));
        }
        return out;
      },
      py::arg("transform"), py::arg("width"), py::arg("height"), py::arg("seed"), py::arg("n"));

  // Benchmark hook (bench/resize_compare.py): stoker's resize of an RGB8
  // array, `repeat` times with one scratch (as a worker does), the result of
  // the last. The GIL is released while it runs.
  hooks.def(
      "resize",
      [](py::array_t<std::uint8_t, py::array::c_style | py::array::forcecast> img, int width, int height, int repeat) {
        if (img.ndim() != 3 || img.shape(2) != 3) throw py::value_error("_resize: expects an HxWx3 uint8 array");
        if (width <= 0 || height <= 0 || repeat <= 0) throw py::value_error("_resize: sizes and repeat must be > 0");
        detail::ImageView src{img.data(), static_cast<int>(img.shape(1)), static_cast<int>(img.shape(0)),
                              static_cast<std::ptrdiff_t>(img.shape(1) * 3)};
        detail::ResizeScratch scratch;
        detail::ImageBuffer out;
        {
          py::gil_scoped_release release;
          for (int i = 0; i < repeat; ++i) detail::resize_bilinear(src, width, height, &scratch, &out);
        }
        py::array_t<std::uint8_t> result({height, width, 3});
        for (int y = 0; y < height; ++y) {
          std::memcpy(result.mutable_data(y), out.pixels.data() + y * out.stride, static_cast<std::size_t>(width) * 3);
        }
        return result;
      },
      py::arg("image"), py::arg("width"), py::arg("height"), py::arg("repeat") = 1);

  // Test hook: a mask decoded as stored (PNG gray/palette/16-bit, .npy
  // uint8/uint16): an HxW uint8 or uint16 array.
  hooks.def(
      "decode_mask",
      [](const py::bytes& src, std::uint64_t max_image_pixels) {
        const std::string s = src;
        detail::ImageDecoder dec;
        detail::MaskBuffer buf;
        {
          py::gil_scoped_release release;
          Status st = dec.open_mask(reinterpret_cast<const std::uint8_t*>(s.data()), s.size(), max_image_pixels);
          if (st.ok()) st = dec.decode_mask(&buf);
          if (!st.ok()) throw Error(st);
        }
        py::array out = buf.bytes_per_pixel == 2 ? py::array(py::dtype::of<std::uint16_t>(), {buf.height, buf.width})
                                                 : py::array(py::dtype::of<std::uint8_t>(), {buf.height, buf.width});
        std::memcpy(out.mutable_data(), buf.pixels.data(), static_cast<std::size_t>(buf.stride) * buf.height);
        return out;
      },
      py::arg("data"), py::arg("max_image_pixels") = LoaderOptions{}.max_image_pixels);

  // Test hook: the sample maker alone, on this thread (no loader, no
  // workers): record `record`'s sample of `epoch` under these options, as a
  // dict of arrays named as the batch's tensors (one sample each). A bad
  // sample raises stoker.SampleError with the maker's message.
  hooks.def(
      "make_sample",
      [](const std::vector<std::string>& sources, const std::string& options_json, std::vector<Transform> transforms,
         std::uint32_t record, std::uint64_t epoch) {
        LoaderOptions o = options_from_json(options_json);
        o.transforms = std::move(transforms);
        validate_options(o);
        std::unique_ptr<Source> src = open_sources(sources, o.labels);
        o.batch_size = 1;
        std::unique_ptr<detail::SampleCache> cache;  // as the loader has one (cache="ram", "decoded")
        if (o.cache != Cache::kMmap) cache = std::make_unique<detail::SampleCache>(src->size(), std::uint64_t{1} << 30);
        detail::SampleMaker maker(*src, o, cache.get());
        detail::Scratch scratch;
        std::vector<std::uint8_t> buf(maker.spec().batch_bytes);
        Status st;
        {
          py::gil_scoped_release release;
          st = maker.make(record, o.seed, epoch, {buf.data(), 0}, &scratch);
        }
        if (!st.ok()) throw Error(st.code(), "record " + std::to_string(record) + ": " + st.message());
        py::dict d;
        for (const auto& out : maker.spec().outputs) {
          py::array a(py::dtype(out.descr), std::vector<py::ssize_t>(out.dims.begin(), out.dims.end()));
          std::memcpy(a.mutable_data(), buf.data() + out.offset, out.bytes);
          d[py::str(out.name)] = a;
        }
        return d;
      },
      py::arg("sources"), py::arg("options"), py::arg("transforms"), py::arg("record"), py::arg("epoch") = 0);

  // Test hook: what a Loader with these transforms and seed does to record
  // `index` in `epoch` on a width x height image: the image's read plan, or
  // with geometric=True the geometric plan every spatial field applies (in
  // the full-resolution frame: decode_region is the whole image).
  hooks.def(
      "plan",
      [](std::vector<Transform> transforms, std::uint64_t seed, std::uint64_t epoch, std::uint64_t index, int width,
         int height, bool geometric) {
        detail::Pipeline pipeline(transforms, DType::kFloat32, Layout::kNCHW);
        detail::Rng rng(detail::mix_key(seed, epoch, index, detail::kStreamTransform));
        detail::SamplePlan plan;
        if (geometric) {
          pipeline.plan_geometry(width, height, &rng, &plan);
        } else {
          pipeline.plan(width, height, &rng, &plan);
        }
        py::list steps;
        for (const auto& s : plan.steps) {
          if (s.kind == detail::Step::kCrop) {
            steps.append(py::make_tuple("crop", s.box.x, s.box.y, s.box.width, s.box.height));
          } else {
            steps.append(py::make_tuple("resize", s.width, s.height));
          }
        }
        py::dict d;
        const auto& r = plan.decode_region;
        d["decode_region"] = py::make_tuple(r.x, r.y, r.width, r.height);
        d["steps"] = steps;
        d["mirror"] = plan.mirror;
        d["vflip"] = plan.vflip;
        py::list photometric;
        for (const auto& op : plan.photometric) {
          if (op.kind == detail::SamplePlan::Photometric::kGrayscale) photometric.append("grayscale");
        }
        d["photometric"] = photometric;
        return d;
      },
      py::arg("transforms"), py::arg("seed"), py::arg("epoch"), py::arg("index"), py::arg("width"), py::arg("height"),
      py::arg("geometric") = false);
}

}  // namespace stoker::python
