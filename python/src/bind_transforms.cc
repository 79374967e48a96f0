// Transforms with torchvision's constructor signatures.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstring>
#include <initializer_list>
#include <string>
#include <utility>
#include <variant>

#include "bindings.h"
#include "order/rng.h"
#include "stoker/transforms.h"
#include "transform/pipeline.h"
#include "transform/transform_defs.h"
#include "transform/batch_mix.h"
#include "transform/volume/defs.h"
#include "transform/resize.h"

namespace py = pybind11;

namespace stoker::python {
namespace {

// torchvision accepts an int or a sequence of one or two ints: (h, w); any
// other type is a TypeError, as there.
std::pair<int, int> size_arg(const char* who, const py::object& size) {
  auto type_error = [&] {
    return py::type_error(std::string(who) + ": size must be an int or a sequence of 1 or 2 ints, got " +
                          py::repr(size).cast<std::string>());
  };
  if (py::isinstance<py::bool_>(size)) throw type_error();
  if (py::isinstance<py::int_>(size)) {
    int s = size.cast<int>();
    return {s, s};
  }
  if (py::isinstance<py::str>(size) || !py::isinstance<py::sequence>(size)) throw type_error();
  std::vector<int> v;
  for (const py::handle& e : size.cast<py::sequence>()) {
    if (!py::isinstance<py::int_>(e) || py::isinstance<py::bool_>(e)) throw type_error();
    v.push_back(e.cast<int>());
  }
  if (v.size() == 1) return {v[0], v[0]};
  if (v.size() == 2) return {v[0], v[1]};
  throw py::value_error(std::string(who) + ": size must be an int or a sequence of 1 or 2 ints, got " +
                        std::to_string(v.size()) + " values");
}

// The name of each alternative of the variant V, by `name_of` on a default-made one.
template <typename V, std::size_t... I, typename F>
py::list alternative_names(std::index_sequence<I...>, F name_of) {
  py::list out;
  (out.append(name_of(V{std::in_place_index<I>})), ...);
  return out;
}

template <typename... T>
py::tuple transform_types(std::variant<T...>*) {
  return py::make_tuple(py::type::of<T>()...);
}

// Docstrings, in torchvision's style. Parameter ranges are checked where the
// transform is used (stoker.Loader: detail::check_transform), not here.
constexpr const char* kSizeArg = R"doc(size (int or sequence): the output size: an int for (size, size), or a
        sequence (h,) or (h, w).)doc";

constexpr const char* kRandomResizedCropDoc = R"doc(Crop a random part of the image and resize it to ``size``.

As ``torchvision.transforms.RandomResizedCrop(size, scale, ratio)`` on a PIL
image (bilinear, PIL's antialiased filter; bit-exact with the loader's
default decode_scale="exact"): the box's area, as a fraction of the image's,
is drawn uniformly from ``scale`` and its aspect ratio (width / height)
log-uniformly from ``ratio``; after 10 tries that do not fit, torchvision's
central crop. The box is then resized to (height, width). The draw depends
only on (seed, epoch, record), not on the thread count.

Args:
    {size}
    scale (sequence of 2 floats): (min, max) of the crop's area as a fraction
        of the image's; 0 < min <= max <= 1. Default (0.08, 1.0).
    ratio (sequence of 2 floats): (min, max) of the crop's aspect ratio
        (width / height); 0 < min <= max. Default (3/4, 4/3).

Attributes:
    height, width (int): the output size.
    scale, ratio (list of 2 floats): as given.

Raises:
    ValueError: ``size`` is a sequence of other than 1 or 2 values or a
        size <= 0, or ``scale`` or ``ratio`` is out of range.
    TypeError: ``size`` is neither an int nor a sequence of ints, or
        ``scale`` or ``ratio`` is not a sequence of 2 numbers.

Example:
    >>> t = stoker.RandomResizedCrop(224)
    >>> t
    RandomResizedCrop(size=(224, 224), scale=(0.08, 1), ratio=(0.75, 1.33333))
    >>> t.height, t.width
    (224, 224))doc";

constexpr const char* kResizeDoc = R"doc(Resize the image to ``size``.

As ``torchvision.transforms.Resize(size, max_size=max_size)`` on a PIL image
(bilinear, PIL's antialiased filter).

Args:
    size (int or sequence): an int (or a sequence of one int): the shorter
        side becomes ``size`` and the aspect ratio is kept (the longer side
        is ``int(size * longer / shorter)``); a sequence (h, w): exactly that
        size. An int gives images of different sizes: stoker.Loader needs a
        RandomResizedCrop, CenterCrop or Resize((h, w)) after it.
        None (torchvision.transforms.v2's rule, with ``max_size``): the
        longer side becomes ``max_size`` and the shorter
        ``int(max_size * shorter / longer)`` (the fixed-size detection
        path: ``Resize(None, max_size=512)`` then ``CenterCrop(512)`` pads
        every image to 512 x 512).
    max_size (int, optional): with an int size only: the most the longer side
        may be; an image whose longer side would exceed it is resized so that
        its longer side is ``max_size`` (its shorter side is then below
        ``size``). Must be greater than ``size``. With size None: the longer
        side's size (required). None (the default) or 0: no limit.

Attributes:
    height (int): for an int size, the shorter side's size; 0 for None;
        else the height.
    width (int): 0 for an int size or None; else the width.

Raises:
    ValueError: ``size`` is a sequence of other than 1 or 2 values or a
        size <= 0, a ``max_size`` <= ``size``, a ``max_size`` with a
        (h, w) size, or size None without ``max_size``.
    TypeError: ``size`` is neither an int nor a sequence of ints, or
        ``max_size`` is not an int.

Example:
    >>> stoker.Resize(256)
    Resize(size=256)
    >>> stoker.Resize(None, max_size=512)
    Resize(size=None, max_size=512)
    >>> t = stoker.Resize((256, 320))
    >>> t.height, t.width
    (256, 320))doc";

constexpr const char* kCenterCropDoc = R"doc(Crop the center of the image to ``size``.

As ``torchvision.transforms.CenterCrop(size)``: an image smaller than the
crop is first padded with zeros (black), as torchvision pads it (a Mask
field is padded with its ``fill``).

Args:
    {size}

Attributes:
    height, width (int): the output size.

Raises:
    ValueError: ``size`` is a sequence of other than 1 or 2 values or a
        size <= 0.
    TypeError: ``size`` is neither an int nor a sequence of ints.

Example:
    >>> stoker.CenterCrop(224)
    CenterCrop(size=(224, 224))
    >>> stoker.CenterCrop((224, 160)).width
    160)doc";

constexpr const char* kRandomCropDoc = R"doc(Crop the image at a random place to ``size``.

As ``torchvision.transforms.RandomCrop(size, padding, pad_if_needed, fill,
padding_mode)`` on a PIL image: the image is padded by ``padding`` first,
then (with ``pad_if_needed``) a side shorter than the crop is padded on both
ends by the difference, then a crop of ``size`` is taken at an offset drawn
uniformly from (seed, epoch, record). Mask and Boxes fields follow: a Mask
is padded with its own ``fill``, boxes are shifted and clipped. A sample
whose padded image is smaller than the crop is a sample error (reason
invalid_argument), counted and handled under ``on_corrupt``.

Args:
    {size}
    padding (int or sequence, optional): pixels added on each side: an int
        for all four, (left/right, top/bottom) or (left, top, right,
        bottom). Default None: none.
    pad_if_needed (bool): pad a side shorter than the crop (see above).
        Default False.
    fill (int or sequence): the image's padding colour: an int for all
        channels or 3 ints. Default 0.
    padding_mode (str): only "constant" (torchvision's default) is
        supported.

Attributes:
    height, width (int): the output size.
    padding (tuple): (left, top, right, bottom).
    pad_if_needed (bool), fill (tuple): as given.

Raises:
    ValueError: a size <= 0, a padding of other than 1, 2 or 4 values or a
        negative one, a fill outside [0, 255], or a padding_mode other than
        "constant".
    TypeError: ``size`` or ``padding`` of another type.

Example:
    >>> stoker.RandomCrop(32, padding=4)
    RandomCrop(size=(32, 32), padding=(4, 4, 4, 4))
    >>> stoker.RandomCrop((480, 640), pad_if_needed=True, fill=(124, 116, 104)).fill
    (124, 116, 104))doc";

constexpr const char* kRandomShortestSizeDoc = R"doc(Resize the shorter side to a random one of ``min_size``.

As ``torchvision.transforms.v2.RandomShortestSize(min_size, max_size)``
(torchvision's detection recipes): ``m`` is drawn uniformly from
``min_size``, both sides are scaled by
``r = min(m / shorter, max_size / longer)`` (without ``max_size``,
``m / shorter``) and truncated, bilinear as Resize. Samples get different
sizes: a crop to a fixed size must follow (for example RandomCrop with
``pad_if_needed``).

Args:
    min_size (int or sequence of int): the shorter side's candidate sizes.
    max_size (int, optional): the most the longer side may be. Default None.

Attributes:
    min_size (list of int), max_size (int): as given (max_size 0 for None).

Raises:
    ValueError: an empty ``min_size`` or a size <= 0.
    TypeError: ``min_size`` neither an int nor a sequence of ints.

Example:
    >>> stoker.RandomShortestSize([480, 512, 544], max_size=800)
    RandomShortestSize(min_size=[480, 512, 544], max_size=800))doc";

constexpr const char* kFlipDoc = R"doc(Flip the image {how} with probability ``p``.

As ``torchvision.transforms.{name}(p)``. Mask and Boxes fields of a
``fields=`` schema are flipped with the image. The draw depends only on
(seed, epoch, record), not on the thread count.

Args:
    p (float): the probability of the flip, in [0, 1]. Default 0.5.

Attributes:
    p (float): as given.

Raises:
    ValueError: ``p`` is outside [0, 1].
    TypeError: ``p`` is not a number.

Example:
    >>> stoker.{name}(p=0.25)
    {name}(p=0.25))doc";

constexpr const char* kRandomGrayscaleDoc = R"doc(Convert the image to grayscale with probability ``p``.

As ``torchvision.transforms.RandomGrayscale(p)``: the image keeps 3 channels,
each PIL's ``convert("L")``: L = (19595 R + 38470 G + 7471 B + 2**15) >> 16.
It is applied to the output pixels, so it must come after every resize
(RandomResizedCrop, Resize); crops and flips may follow it. Mask and Boxes
fields are not affected. The draw depends only on (seed, epoch, record).

Args:
    p (float): the probability of the conversion, in [0, 1]. Default 0.1.

Attributes:
    p (float): as given.

Raises:
    ValueError: ``p`` is outside [0, 1]; stoker.Loader raises it for a
        RandomResizedCrop or Resize after this transform.
    TypeError: ``p`` is not a number.

Example:
    >>> stoker.RandomGrayscale()
    RandomGrayscale(p=0.1))doc";

constexpr const char* kNormalizeDoc = R"doc(Normalize the image: ``(x - mean) / std`` per channel.

As ``torchvision.transforms.Normalize(mean, std)`` on the output of ToTensor
(values in [0, 1]). It must be the last transform, and needs
dtype="float32".

On a raster kept as stored (``stoker.Image(channels="stored",
dtype="stored")``) it takes one value per stored channel (13 for a 13-band
tile); ToTensor's scale is 1/255 for uint8 samples and 1 for uint16 and
float32 ones.

Args:
    mean (sequence of floats): the channels' means: 3 values (R, G, B), or
        1 for all channels; a stored raster's: 1 or one per channel.
    std (sequence of floats): the channels' standard deviations, as
        ``mean``; none may be 0.

Attributes:
    mean, std (list of float): as given, rounded to float32.

Raises:
    ValueError: ``mean`` or ``std`` is empty, they differ in length (one
        of them 1 aside), or a ``std`` is 0; stoker.Loader raises it when
        the count is not 1 or the image's channels (3 for RGB), when
        Normalize is not the last transform, or dtype is "uint8" for RGB.
    TypeError: ``mean`` or ``std`` is not a sequence of numbers.

Example:
    >>> stoker.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
    Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]))doc";

// `text` with each {key} replaced by its value: the docstrings' shared parts.
std::string fill(std::string text, std::initializer_list<std::pair<const char*, std::string>> values) {
  for (const auto& [key, value] : values) {
    const std::string k = std::string("{") + key + "}";
    for (std::size_t at; (at = text.find(k)) != std::string::npos;) text.replace(at, k.size(), value);
  }
  return text;
}

// The batch's images for an in-place kernel: a writeable C-contiguous
// float32 [B, C, H, W] array, never a converted copy.
float* batch_images(const char* who, py::array& x) {
  if (x.ndim() != 4 || !x.dtype().is(py::dtype::of<float>()) || !(x.flags() & py::array::c_style) || !x.writeable()) {
    throw py::value_error(std::string(who) + ": expects a writeable C-contiguous float32 [B, C, H, W] array");
  }
  return static_cast<float*>(x.mutable_data());
}

}  // namespace

void bind_transforms(py::module_& m) {
  py::class_<RandomResizedCrop>(m, "RandomResizedCrop", fill(kRandomResizedCropDoc, {{"size", kSizeArg}}).c_str())
      .def(py::init([](const py::object& size, std::array<double, 2> scale, std::array<double, 2> ratio) {
             auto [h, w] = size_arg("RandomResizedCrop", size);
             return checked(RandomResizedCrop{h, w, scale, ratio});
           }),
           py::arg("size"), py::arg("scale") = std::array<double, 2>{0.08, 1.0},
           py::arg("ratio") = std::array<double, 2>{3.0 / 4.0, 4.0 / 3.0})
      .def_readonly("height", &RandomResizedCrop::height, "The output height.")
      .def_readonly("width", &RandomResizedCrop::width, "The output width.")
      .def_readonly("scale", &RandomResizedCrop::scale, "(min, max) of the crop's area fraction.")
      .def_readonly("ratio", &RandomResizedCrop::ratio, "(min, max) of the crop's aspect ratio (width / height).")
      .def("__repr__", repr<RandomResizedCrop>);

  py::class_<Resize>(m, "Resize", kResizeDoc)
      .def(py::init([](const py::object& size, std::optional<int> max_size) {
             if (size.is_none()) {
               if (!max_size || *max_size <= 0) {
                 throw py::value_error("Resize: size=None requires max_size, the longer side's size (a positive int)");
               }
               return checked(Resize{0, 0, *max_size});
             }
             const bool one = py::isinstance<py::int_>(size) ||
                              (py::isinstance<py::sequence>(size) && !py::isinstance<py::str>(size) && py::len(size) == 1);
             auto [h, w] = size_arg("Resize", size);
             // 0 means "no max_size" in C++: a given one must be positive (torchvision: > the size).
             if (one && max_size && *max_size <= 0) {
               throw py::value_error("Resize: max_size = " + std::to_string(*max_size) +
                                     " must be strictly greater than the requested size " + std::to_string(h));
             }
             return checked(Resize{h, one ? 0 : w, max_size.value_or(0)});
           }),
           py::arg("size"), py::arg("max_size") = py::none())
      .def_readonly("height", &Resize::height, "The shorter side's size (an int size), else the output height.")
      .def_readonly("width", &Resize::width, "0 (an int size: the aspect ratio is kept), else the output width.")
      .def("__repr__", repr<Resize>);

  py::class_<CenterCrop>(m, "CenterCrop", fill(kCenterCropDoc, {{"size", kSizeArg}}).c_str())
      .def(py::init([](const py::object& size) {
             auto [h, w] = size_arg("CenterCrop", size);
             return checked(CenterCrop{h, w});
           }),
           py::arg("size"))
      .def_readonly("height", &CenterCrop::height, "The output height.")
      .def_readonly("width", &CenterCrop::width, "The output width.")
      .def("__repr__", repr<CenterCrop>);

  py::class_<RandomCrop>(m, "RandomCrop", fill(kRandomCropDoc, {{"size", kSizeArg}}).c_str())
      .def(py::init([](const py::object& size, const py::object& padding, bool pad_if_needed, const py::object& fill,
                       const std::string& padding_mode) {
             auto [h, w] = size_arg("RandomCrop", size);
             RandomCrop x{h, w};
             if (!padding.is_none()) {
               std::vector<int> p;
               if (py::isinstance<py::int_>(padding) && !py::isinstance<py::bool_>(padding)) {
                 p = {padding.cast<int>()};
               } else if (py::isinstance<py::sequence>(padding) && !py::isinstance<py::str>(padding)) {
                 for (const py::handle& e : padding.cast<py::sequence>()) {
                   if (!py::isinstance<py::int_>(e) || py::isinstance<py::bool_>(e)) {
                     throw py::type_error("RandomCrop: padding must be an int or a sequence of ints");
                   }
                   p.push_back(e.cast<int>());
                 }
               } else {
                 throw py::type_error("Got inappropriate padding arg");
               }
               if (p.size() == 1) x.padding = {p[0], p[0], p[0], p[0]};
               else if (p.size() == 2) x.padding = {p[0], p[1], p[0], p[1]};
               else if (p.size() == 4) x.padding = {p[0], p[1], p[2], p[3]};
               else {
                 throw py::value_error("Padding must be an int or a 1, 2, or 4 element tuple, not a " +
                                       std::to_string(p.size()) + " element tuple");
               }
             }
             x.pad_if_needed = pad_if_needed;
             x.fill = fill_arg("RandomCrop", fill);
             if (padding_mode != "constant") {
               if (padding_mode == "edge" || padding_mode == "reflect" || padding_mode == "symmetric") {
                 throw py::value_error("RandomCrop: padding_mode='" + padding_mode +
                                       "' is not supported by stoker; only 'constant'");
               }
               throw py::value_error("Padding mode should be either constant, edge, reflect or symmetric");
             }
             return checked(x);
           }),
           py::arg("size"), py::arg("padding") = py::none(), py::arg("pad_if_needed") = RandomCrop{}.pad_if_needed, py::arg("fill") = 0,
           py::arg("padding_mode") = "constant")
      .def_readonly("height", &RandomCrop::height, "The output height.")
      .def_readonly("width", &RandomCrop::width, "The output width.")
      .def_property_readonly("padding", [](const RandomCrop& x) { return py::make_tuple(x.padding[0], x.padding[1], x.padding[2], x.padding[3]); },
                             "(left, top, right, bottom).")
      .def_readonly("pad_if_needed", &RandomCrop::pad_if_needed, "Whether a short side is padded to the crop.")
      .def_property_readonly("fill", [](const RandomCrop& x) { return py::make_tuple(x.fill[0], x.fill[1], x.fill[2]); },
                             "The image's padding colour (r, g, b).")
      .def("__repr__", repr<RandomCrop>);

  py::class_<RandomShortestSize>(m, "RandomShortestSize", kRandomShortestSizeDoc)
      .def(py::init([](const py::object& min_size, std::optional<int> max_size) {
             RandomShortestSize x;
             x.min_size.clear();
             auto type_error = [&] {
               return py::type_error("RandomShortestSize: min_size must be an int or a sequence of ints, got " +
                                     py::repr(min_size).cast<std::string>());
             };
             if (py::isinstance<py::bool_>(min_size)) throw type_error();
             if (py::isinstance<py::int_>(min_size)) {
               x.min_size.push_back(min_size.cast<int>());
             } else if (py::isinstance<py::sequence>(min_size) && !py::isinstance<py::str>(min_size)) {
               for (const py::handle& e : min_size.cast<py::sequence>()) {
                 if (!py::isinstance<py::int_>(e) || py::isinstance<py::bool_>(e)) throw type_error();
                 x.min_size.push_back(e.cast<int>());
               }
             } else {
               throw type_error();
             }
             if (max_size && *max_size <= 0) {
               throw py::value_error("RandomShortestSize: max_size must be positive, got " + std::to_string(*max_size));
             }
             x.max_size = max_size.value_or(0);
             return checked(x);
           }),
           py::arg("min_size"), py::arg("max_size") = py::none())
      .def_readonly("min_size", &RandomShortestSize::min_size, "The shorter side's candidate sizes.")
      .def_readonly("max_size", &RandomShortestSize::max_size, "The longer side's cap (0: none).")
      .def("__repr__", repr<RandomShortestSize>);

  py::class_<RandomHorizontalFlip>(m, "RandomHorizontalFlip",
                                   fill(kFlipDoc, {{"how", "left-right"}, {"name", "RandomHorizontalFlip"}}).c_str())
      .def(py::init([](double p) { return checked(RandomHorizontalFlip{p}); }), py::arg("p") = RandomHorizontalFlip{}.p)
      .def_readonly("p", &RandomHorizontalFlip::p, "The probability of the flip.")
      .def("__repr__", repr<RandomHorizontalFlip>);

  py::class_<RandomVerticalFlip>(m, "RandomVerticalFlip",
                                 fill(kFlipDoc, {{"how", "upside down"}, {"name", "RandomVerticalFlip"}}).c_str())
      .def(py::init([](double p) { return checked(RandomVerticalFlip{p}); }), py::arg("p") = RandomVerticalFlip{}.p)
      .def_readonly("p", &RandomVerticalFlip::p, "The probability of the flip.")
      .def("__repr__", repr<RandomVerticalFlip>);

  py::class_<RandomGrayscale>(m, "RandomGrayscale", kRandomGrayscaleDoc)
      .def(py::init([](double p) { return checked(RandomGrayscale{p}); }), py::arg("p") = RandomGrayscale{}.p)
      .def_readonly("p", &RandomGrayscale::p, "The probability of the conversion.")
      .def("__repr__", repr<RandomGrayscale>);

  py::class_<Normalize>(m, "Normalize", kNormalizeDoc)
      .def(py::init([](std::vector<float> mean, std::vector<float> std) { return checked(Normalize{mean, std}); }),
           py::arg("mean"), py::arg("std"))
      .def_readonly("mean", &Normalize::mean, "The channels' means (1 value, or one per channel).")
      .def_readonly("std", &Normalize::std, "The channels' standard deviations (1 value, or one per channel).")
      .def("__repr__", repr<Normalize>);

  bind_augment(m);

  // The batch transforms' kernels (python/stoker/batch_transforms.py calls
  // them with its draws): in place on a C-contiguous float32 [B, C, H, W]
  // array, the GIL released.
  m.def(
      "_mixup",
      [](py::array x, double lam) {
        float* p = batch_images("_mixup", x);
        std::vector<float> scratch;
        const auto b = static_cast<std::size_t>(x.shape(0));
        const auto n = static_cast<std::size_t>(x.shape(1) * x.shape(2) * x.shape(3));
        py::gil_scoped_release release;
        detail::mixup_inplace(p, b, n, lam, &scratch);
      },
      py::arg("images"), py::arg("lam"), "MixUp in place (stoker.MixUp's kernel; not for direct use).");
  m.def(
      "_cutmix",
      [](py::array x, int x1, int y1, int x2, int y2) {
        float* p = batch_images("_cutmix", x);
        if (x1 < 0 || y1 < 0 || x2 > x.shape(3) || y2 > x.shape(2)) throw py::value_error("_cutmix: box outside the image");
        std::vector<float> scratch;
        const auto b = static_cast<std::size_t>(x.shape(0));
        const int c = static_cast<int>(x.shape(1)), h = static_cast<int>(x.shape(2)), w = static_cast<int>(x.shape(3));
        py::gil_scoped_release release;
        detail::cutmix_inplace(p, b, c, h, w, x1, y1, x2, y2, &scratch);
      },
      py::arg("images"), py::arg("x1"), py::arg("y1"), py::arg("x2"), py::arg("y2"),
      "CutMix in place (stoker.CutMix's kernel; not for direct use).");

  // Every transform class, in the variant's order (from the variant itself):
  // what stoker.Loader accepts in transforms=.
  m.attr("_transform_types") = transform_types(static_cast<Transform*>(nullptr));
  // Every transform's name, from the C++ registries (the Def<T> of each
  // alternative): {"image": [...], "volume": [...]}, in the variants' order.
  // tests/python/test_names.py checks python/stoker's surface against it.
  m.def("_transform_names", [] {
    py::dict out;
    out["image"] = alternative_names<Transform>(std::make_index_sequence<std::variant_size_v<Transform>>{},
                                                [](const Transform& t) { return detail::transform_name(t); });
    out["volume"] = alternative_names<VolumeTransform>(
        std::make_index_sequence<std::variant_size_v<VolumeTransform>>{},
        [](const VolumeTransform& t) { return detail::volume_transform_name(t); });
    return out;
  });


}

}  // namespace stoker::python
