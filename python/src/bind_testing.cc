// _stoker._testing: hooks for stoker's own tests, never for training code.
#include <algorithm>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <optional>

#include "bindings.h"
#include "decode/decode.h"
#include "decode/formats.h"
#include "order/rng.h"
#include "sample/sample_maker.h"
#include "stoker/loader.h"
#include "transform/augment.h"
#include "transform/image_ops.h"
#include "transform/pipeline.h"
#include "transform/resize.h"
#include "util/thread.h"

namespace py = pybind11;

namespace stoker::python {

namespace {

constexpr const char* kOpNames[] = {"grayscale", "brightness",   "contrast", "saturation",    "sharpness",
                                    "hue",       "solarize",     "posterize", "invert",       "autocontrast",
                                    "equalize",  "gaussian_blur", "affine",   "augmix"};
// PolicyOp by autoaugment.py's names, in the enum's order.
constexpr const char* kPolicyOpNames[] = {"Identity",   "ShearX",    "ShearY",    "TranslateX",   "TranslateY",
                                          "Rotate",     "Brightness", "Color",    "Contrast",     "Sharpness",
                                          "Posterize",  "Solarize",   "AutoContrast", "Equalize", "Invert"};

detail::PolicyOp policy_op_named(const std::string& name) {
  for (std::size_t i = 0; i < std::size(kPolicyOpNames); ++i) {
    if (name == kPolicyOpNames[i]) return static_cast<detail::PolicyOp>(i);
  }
  throw py::value_error("unknown policy op '" + name + "'");
}

// An ImageOp as a dict: {"kind": name, and its parameters}.
py::dict image_op_dict(const detail::ImageOp& op, const detail::SamplePlan* plan = nullptr) {
  py::dict d;
  d["kind"] = kOpNames[op.kind];
  switch (op.kind) {
    case detail::ImageOp::kAugMix: {
      const auto& a = plan->augmix[static_cast<std::size_t>(op.factor)];
      d["w0"] = a.w0;
      py::list chains;
      for (const auto& c : a.chains) {
        py::list ops;
        for (const auto& [o, m] : c.ops) ops.append(py::make_tuple(kPolicyOpNames[static_cast<int>(o)], m));
        chains.append(py::make_tuple(c.weight, ops));
      }
      d["chains"] = chains;
      d["bilinear"] = a.bilinear;
      d["fill"] = a.has_fill ? py::object(py::make_tuple(a.fill[0], a.fill[1], a.fill[2])) : py::object(py::none());
      break;
    }
    case detail::ImageOp::kGaussianBlur:
      d["kernel_size"] = py::make_tuple(op.kernel_w, op.kernel_h);
      d["sigma"] = py::make_tuple(op.sigma_x, op.sigma_y);
      break;
    case detail::ImageOp::kAffine:
      d["matrix"] = std::vector<double>(op.matrix, op.matrix + 6);
      d["bilinear"] = op.bilinear;
      d["fill"] = py::make_tuple(op.fill[0], op.fill[1], op.fill[2]);
      break;
    default:
      d["factor"] = op.factor;
  }
  return d;
}

detail::ImageOp image_op_from(const py::dict& d) {
  detail::ImageOp op;
  const std::string kind = d["kind"].cast<std::string>();
  bool found = false;
  for (std::size_t i = 0; i < std::size(kOpNames); ++i) {
    if (kind == kOpNames[i]) {
      op.kind = static_cast<detail::ImageOp::Kind>(i);
      found = true;
    }
  }
  if (!found) throw py::value_error("image_op: unknown kind '" + kind + "'");
  if (d.contains("factor")) op.factor = d["factor"].cast<double>();
  if (d.contains("kernel_size")) {
    auto k = d["kernel_size"].cast<std::vector<int>>();
    op.kernel_w = k.at(0);
    op.kernel_h = k.at(1);
  }
  if (d.contains("sigma")) {
    auto sg = d["sigma"].cast<std::vector<double>>();
    op.sigma_x = sg.at(0);
    op.sigma_y = sg.at(1);
  }
  if (d.contains("matrix")) {
    auto m = d["matrix"].cast<std::vector<double>>();
    if (m.size() != 6) throw py::value_error("image_op: matrix needs 6 values");
    for (int i = 0; i < 6; ++i) op.matrix[i] = m[static_cast<std::size_t>(i)];
  }
  if (d.contains("bilinear")) op.bilinear = d["bilinear"].cast<bool>();
  if (d.contains("fill")) {
    auto f = d["fill"].cast<std::vector<int>>();
    for (int c = 0; c < 3; ++c) op.fill[c] = static_cast<std::uint8_t>(f.at(f.size() == 1 ? 0 : static_cast<std::size_t>(c)));
  }
  return op;
}

// An HxWx3 uint8 array as an RGB8 buffer, `fn(&buffer)` run on it without
// the GIL, the result as a new array: the image-op hooks' common part.
using RgbArray = py::array_t<std::uint8_t, py::array::c_style | py::array::forcecast>;
py::array_t<std::uint8_t> to_array(const detail::ImageBuffer& buf) {
  py::array_t<std::uint8_t> out({buf.height, buf.width, 3});
  for (int y = 0; y < buf.height; ++y) {
    std::memcpy(out.mutable_data(y), buf.pixels.data() + y * buf.stride, static_cast<std::size_t>(buf.width) * 3);
  }
  return out;
}
template <typename F>
py::array_t<std::uint8_t> on_rgb_copy(const char* who, const RgbArray& img, F&& fn) {
  if (img.ndim() != 3 || img.shape(2) != 3) throw py::value_error(std::string(who) + ": expects an HxWx3 uint8 array");
  const int h = static_cast<int>(img.shape(0)), w = static_cast<int>(img.shape(1));
  detail::ImageBuffer buf;
  buf.reset(w, h);
  std::memcpy(buf.pixels.data(), img.data(), static_cast<std::size_t>(w) * h * 3);
  {
    py::gil_scoped_release release;
    fn(&buf);
  }
  return to_array(buf);
}

std::vector<double> matrix6(const double m[6]) { return std::vector<double>(m, m + 6); }

}  // namespace

void bind_testing(py::module_& m) {
  py::module_ hooks = m.def_submodule("_testing", "hooks for stoker's own tests; not for training code");
  hooks.def("throw_in_sample", &detail::testing::throw_in_sample, py::arg("record"), py::arg("bad_alloc") = false,
        "Makes every loader throw a C++ exception (std::runtime_error, or std::bad_alloc) while making record "
        "`record`, until called with -1: tests that the exception becomes a counted sample error.");
  hooks.def(
      "throw_on_thread",
      [](const std::string& site, std::int64_t at, bool bad_alloc) {
        for (int s = 0; s < static_cast<int>(detail::ThreadSite::kCount); ++s) {
          const auto k = static_cast<detail::ThreadSite>(s);
          if (site == detail::thread_site_name(k)) return detail::testing::throw_on_thread(k, at, bad_alloc);
        }
        throw py::value_error("throw_on_thread: no site '" + site +
                              "' (worker, worker_start, rewrite, preload, fetcher, opener, pack)");
      },
      py::arg("site"), py::arg("at"), py::arg("bad_alloc") = false,
      "Makes the stoker thread at `site` throw a C++ exception (std::runtime_error, or std::bad_alloc) at `at`, "
      "every time, until called with at=-1: 'worker' taking batch `at`'s buffer, 'worker_start' worker `at` at its "
      "top, 'rewrite' the cache=\"ram\" rewrite of record `at`, 'preload' a preload thread at record `at`, 'fetcher' "
      "a remote fetch of shard `at`, 'opener' opening remote shard `at`, 'pack' a pack worker at position `at`. "
      "Tests that each kind of thread's exception is counted or raised as documented (src/util/README.md).");

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
        return to_array(out);
      },
      py::arg("image"), py::arg("width"), py::arg("height"), py::arg("repeat") = 1);

  // Test hook: one image-stage op (image_ops.h) on an HxWx3 uint8 array,
  // as the pipeline applies it: {"kind": ..., parameters} (see image_op_dict).
  hooks.def(
      "image_op",
      [](const py::dict& op_dict, const RgbArray& img) {
        const detail::ImageOp op = image_op_from(op_dict);
        detail::ImageOpScratch scratch;
        return on_rgb_copy("image_op", img, [&](detail::ImageBuffer* buf) { detail::apply_image_op(op, buf, &scratch); });
      },
      py::arg("op"), py::arg("image"));
  // Test hook: one op of the policies' tables as torchvision's _apply_op
  // runs it on a uint8 tensor image (what AugMix does): HxWx3 uint8 in, out.
  hooks.def(
      "tensor_op",
      [](const std::string& name, double magnitude, bool bilinear, std::optional<std::array<float, 3>> fill,
         const RgbArray& img) {
        const detail::PolicyOp op = policy_op_named(name);
        detail::ImageOpScratch scratch;
        return on_rgb_copy("tensor_op", img, [&](detail::ImageBuffer* buf) {
          detail::tensor_apply_op(buf, op, magnitude, bilinear, fill ? fill->data() : nullptr, &scratch);
        });
      },
      py::arg("name"), py::arg("magnitude"), py::arg("bilinear"), py::arg("fill"), py::arg("image"));
  // Test hook: AugMix's table entry (op name, magnitude, signed) for op `index`, bin `bin`.
  hooks.def(
      "augmix_op",
      [](bool all_ops, int index, int bin, int width, int height) {
        double magnitude = 0;
        bool is_signed = false;
        const detail::PolicyOp op = detail::augmix_op(all_ops, index, bin, width, height, &magnitude, &is_signed);
        return py::make_tuple(kPolicyOpNames[static_cast<int>(op)], magnitude, is_signed);
      },
      py::arg("all_ops"), py::arg("index"), py::arg("bin"), py::arg("width"), py::arg("height"));
  hooks.def(
      "mask_affine",
      [](py::array mask, std::vector<double> matrix, int fill) {
        if (mask.ndim() != 2 || matrix.size() != 6) throw py::value_error("mask_affine: an HxW mask and 6 values");
        const bool wide = mask.dtype().itemsize() == 2;
        py::array src = py::array::ensure(mask, py::array::c_style);
        const int h = static_cast<int>(src.shape(0)), w = static_cast<int>(src.shape(1));
        detail::MaskView view{static_cast<const std::uint8_t*>(src.data()), w, h,
                              static_cast<std::ptrdiff_t>(w) * (wide ? 2 : 1), wide ? 2 : 1};
        detail::MaskBuffer out;
        detail::pil_affine_mask(view, &out, matrix.data(), fill);
        py::array result = wide ? py::array(py::dtype::of<std::uint16_t>(), {h, w}) : py::array(py::dtype::of<std::uint8_t>(), {h, w});
        std::memcpy(result.mutable_data(), out.pixels.data(), static_cast<std::size_t>(out.stride) * h);
        return result;
      },
      py::arg("mask"), py::arg("matrix"), py::arg("fill"));
  hooks.def(
      "affine_matrix",
      [](int width, int height, double angle, std::array<double, 2> translate, double scale, std::array<double, 2> shear,
         std::optional<std::array<double, 2>> center) {
        double out[6];
        detail::torchvision_affine_matrix(width, height, center ? center->data() : nullptr, angle, translate[0],
                                          translate[1], scale, shear[0], shear[1], out);
        return matrix6(out);
      },
      py::arg("width"), py::arg("height"), py::arg("angle"), py::arg("translate"), py::arg("scale"), py::arg("shear"),
      py::arg("center") = py::none());
  hooks.def(
      "rotate_matrix",
      [](int width, int height, double angle, std::optional<std::array<double, 2>> center) {
        double out[6];
        detail::pil_rotate_matrix(width, height, angle, center ? center->data() : nullptr, out);
        return matrix6(out);
      },
      py::arg("width"), py::arg("height"), py::arg("angle"), py::arg("center") = py::none());
  // Test hook: entry `bin` of a policy's magnitude table ("wide" or "rand"),
  // and whether the op is signed.
  hooks.def(
      "policy_magnitude",
      [](const std::string& space, const std::string& op, int num_bins, int bin, int width, int height) {
        bool is_signed = false;
        const double v = detail::policy_magnitude(space.c_str(), op, num_bins, bin, width, height, &is_signed);
        return py::make_tuple(v, is_signed);
      },
      py::arg("space"), py::arg("op"), py::arg("num_bins"), py::arg("bin"), py::arg("width"), py::arg("height"));
  hooks.def(
      "policy_magnitude_linspace",
      [](float start, float end, int steps, int i) { return static_cast<double>(detail::torch_linspace(start, end, steps, i)); },
      py::arg("start"), py::arg("end"), py::arg("steps"), py::arg("i"));
  // Test hook: the image-stage ops a policy op (torchvision's _apply_op)
  // becomes on a width x height image.
  hooks.def(
      "policy_op",
      [](const std::string& name, double magnitude, bool bilinear, std::array<int, 3> fill, int width, int height) {
        const Interpolation interpolation = bilinear ? Interpolation::kBilinear : Interpolation::kNearest;
        detail::SamplePlan plan;
        detail::Rng rng(0);
        detail::PlanState s{width, height, &plan, &rng, 0};
        detail::add_policy_op(name, magnitude, interpolation, fill, &s);
        py::list ops;
        for (const auto& op : plan.image_ops) ops.append(image_op_dict(op));
        return ops;
      },
      py::arg("name"), py::arg("magnitude"), py::arg("bilinear"), py::arg("fill"), py::arg("width"),
      py::arg("height"));

  // Test hook: each transform through the options' JSON codec (what the
  // doctor's snapshot carries) and back: [(json, repr after the round trip)].
  hooks.def(
      "transforms_json",
      [](const std::vector<Transform>& transforms) {
        py::list out;
        for (const Transform& t : transforms) {
          const std::string j = detail::transform_to_json(t);
          out.append(py::make_tuple(j, detail::transform_repr(detail::transform_from_json(j))));
        }
        return out;
      },
      py::arg("transforms"));
  // Test hook: a mask decoded as stored (PNG gray/palette/16-bit, .npy
  // uint8/uint16): an HxW uint8 or uint16 array; rows >= 0: only the first
  // `rows` rows decoded (a crop's bottom), the rest zeros.
  hooks.def(
      "decode_mask",
      [](const py::bytes& src, std::uint64_t max_image_pixels, int rows) {
        const std::string s = src;
        detail::ImageDecoder dec;
        detail::MaskBuffer buf;
        {
          py::gil_scoped_release release;
          Status st = dec.open_mask(reinterpret_cast<const std::uint8_t*>(s.data()), s.size(), max_image_pixels);
          if (st.ok()) {  // rows past `rows` stay zero
            buf.reset(dec.width(), dec.height(), 2);
            std::fill(buf.pixels.begin(), buf.pixels.end(), 0);
            st = dec.decode_mask(&buf, rows);
          }
          if (!st.ok()) throw Error(st);
        }
        py::array out = buf.bytes_per_pixel == 2 ? py::array(py::dtype::of<std::uint16_t>(), {buf.height, buf.width})
                                                 : py::array(py::dtype::of<std::uint8_t>(), {buf.height, buf.width});
        std::memcpy(out.mutable_data(), buf.pixels.data(), static_cast<std::size_t>(buf.stride) * buf.height);
        return out;
      },
      py::arg("data"), py::arg("max_image_pixels") = LoaderOptions{}.max_image_pixels, py::arg("rows") = -1);

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
        std::unique_ptr<Source> src = open_sources(sources, o.labels, "", o.coco);
        o.batch_size = 1;
        std::unique_ptr<detail::SampleCache> cache;  // as the loader has one (cache="ram", "decoded")
        if (o.cache.mode != Cache::kMmap) cache = std::make_unique<detail::SampleCache>(src->size(), std::uint64_t{1} << 30);
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
  // the full-resolution frame: decode_region is the whole image). view and
  // copy: the draws of that copy of that view (Loader(views=...)).
  hooks.def(
      "plan",
      [](std::vector<Transform> transforms, std::uint64_t seed, std::uint64_t epoch, std::uint64_t index, int width,
         int height, bool geometric, int view, int copy) {
        detail::Pipeline pipeline(transforms, DType::kFloat32, Layout::kNCHW);
        detail::Rng rng(detail::mix_key(seed, epoch, index, detail::view_stream(view, copy)));
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
        py::list ops;
        for (const auto& op : plan.image_ops) ops.append(image_op_dict(op, &plan));
        d["image_ops"] = ops;
        py::list erase;
        for (const auto& e : plan.erase) {
          erase.append(py::make_tuple(e.box.y, e.box.x, e.box.height, e.box.width));  // F.erase's i, j, h, w
        }
        d["erase"] = erase;
        d["error"] = plan.error;
        return d;
      },
      py::arg("transforms"), py::arg("seed"), py::arg("epoch"), py::arg("index"), py::arg("width"), py::arg("height"),
      py::arg("geometric") = false, py::arg("view") = 0, py::arg("copy") = 0);

  // Test hook: the format table (decode/formats.h), one dict per format.
  hooks.def("formats", [] {
    py::list out;
    for (const auto& f : detail::formats()) {
      py::dict d;
      d["name"] = f.name;
      py::list suffixes;
      for (std::string_view sfx : f.suffixes) suffixes.append(std::string(sfx));
      d["suffixes"] = suffixes;
      d["decoded"] = f.decoded;
      d["sample_member"] = f.sample_member;
      d["in_folders"] = f.in_folders;
      d["region"] = f.region;
      out.append(d);
    }
    return out;
  });
  // Test hook: ImageDecoder::open, then decode of region (x, y, w, h), as a
  // worker decodes a crop: HxWx3 uint8 of the region, or SampleError.
  hooks.def(
      "decode_region",
      [](const py::bytes& data, int x, int y, int width, int height, std::uint64_t max_image_pixels) {
        const std::string bytes = data;
        detail::ImageDecoder dec;
        detail::ImageBuffer buf;
        detail::ImageView view;
        {
          py::gil_scoped_release release;
          Status st = dec.open(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size(), max_image_pixels);
          if (st.ok() && (x < 0 || y < 0 || width <= 0 || height <= 0 || x + width > dec.width() ||
                          y + height > dec.height())) {
            st = Status::InvalidArgument("decode_region: the region is not inside the " +
                                         std::to_string(dec.width()) + "x" + std::to_string(dec.height()) + " image");
          }
          if (st.ok()) st = dec.decode({x, y, width, height}, &buf, &view);
          if (!st.ok()) throw Error(st.code(), "<bytes>: " + st.message());
        }
        py::array_t<std::uint8_t> out({view.height, view.width, 3});
        for (int r = 0; r < view.height; ++r) {
          std::memcpy(out.mutable_data(r), view.row(r), static_cast<std::size_t>(view.width) * 3);
        }
        return out;
      },
      py::arg("data"), py::arg("x"), py::arg("y"), py::arg("width"), py::arg("height"),
      py::arg("max_image_pixels") = LoaderOptions{}.max_image_pixels);
}

}  // namespace stoker::python
