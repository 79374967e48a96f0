"""torchvision transforms mapped onto stoker's kernels: exactly, or not at all.

``split(transforms)`` reads a ``transforms.Compose`` (or a list) object by
object, from its attributes, and returns the longest prefix stoker runs in C++
(``Split.native``, with the output ``dtype`` it ends at) and the rest, from the
first transform stoker cannot run exactly, as the original objects to run in
Python on what torchvision would hand them at that point (``Split.tail``,
``Split.tail_input``), with the reason for each (``Split.reasons``).

A transform maps only when stoker's kernel gives torchvision 0.14's output for
those parameters on a PIL RGB image, given the same draws: its exact class
(``type(t) is T.X``, so a subclass that may override ``forward`` or
``get_params`` stays Python), every attribute checked. GaussianBlur and AugMix
are within 1/255 of torchvision (float sums in another order), not exact, so
they map only with ``allow_within_one=True``.

The stages follow torchvision's types: the PIL stage (stoker's geometric,
photometric and image-stage transforms; PIL semantics), then ``ToTensor``
(float32) or ``PILToTensor`` (uint8, optionally ``ConvertImageDtype(float32)``
after it), then only Normalize and RandomErasing on the tensor. Orders stoker's
Pipeline refuses end the prefix where the refused transform stands
(``stoker._stoker._pipeline_error``).
"""
from __future__ import annotations

import dataclasses
import functools
import numbers
import types
from typing import Any, Callable, List, Optional, Tuple

from stoker import _stoker

__all__ = ["Split", "split", "describe"]


@dataclasses.dataclass
class Split:
    """What ``split`` made of a pipeline.

    Attributes:
        native: stoker transform objects: the prefix stoker runs in C++.
        dtype: "float32" when the prefix includes ToTensor (or PILToTensor and
            ConvertImageDtype(torch.float32)), "uint8" when it ends at
            PILToTensor, None when it ends on the PIL image.
        tail: the original objects from the first transform stoker does not
            run, to the end: run in Python as torchvision runs them.
        tail_input: "pil" (the tail gets the PIL RGB image torchvision would
            have there) or "tensor" (a CHW tensor of ``dtype``).
        reasons: (transform, reason) for each object of the tail, the first
            being why the prefix ends there.
    """
    native: List[Any]
    dtype: Optional[str]
    tail: List[Any]
    tail_input: str
    reasons: List[Tuple[str, str]]


class _NoMap(Exception):
    """The transform does not map; args[0] is the reason."""


# The stage of the sample at a point of a torchvision pipeline.
_PIL, _UINT8, _FLOAT = "pil", "uint8", "float32"


def _tv():
    import torchvision.transforms as T
    return T


def _v2():
    return getattr(_tv(), "v2", None)


def _stoker_types():
    return tuple(_stoker._transform_types)


def _is_stoker(t) -> bool:
    return type(t) in _stoker_types()


# --- describe -------------------------------------------------------------

def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, (list, tuple)):
        inner = ", ".join(_fmt(x) for x in v)
        return f"({inner})" if isinstance(v, tuple) else f"[{inner}]"
    value = getattr(v, "value", None)  # the enums: InterpolationMode.BICUBIC -> bicubic
    if isinstance(value, str) and type(v).__module__.startswith(("torchvision", "stoker")):
        return value
    return repr(v)


def _callable_name(fn) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    return name if name else type(fn).__name__


# Per class: the attributes shown, with the defaults left out of the text.
_MISSING = object()
_SHOWN = {
    "Resize": [("size", _MISSING), ("interpolation", "bilinear"), ("max_size", None), ("antialias", None)],
    "RandomResizedCrop": [("size", _MISSING), ("scale", (0.08, 1.0)), ("ratio", (3 / 4, 4 / 3)),
                          ("interpolation", "bilinear"), ("antialias", None)],
    "CenterCrop": [("size", _MISSING)],
    "RandomCrop": [("size", _MISSING), ("padding", None), ("pad_if_needed", False), ("fill", 0),
                   ("padding_mode", "constant")],
    "RandomRotation": [("degrees", _MISSING), ("interpolation", "nearest"), ("expand", False), ("center", None),
                       ("fill", 0)],
    "RandomAffine": [("degrees", _MISSING), ("translate", None), ("scale", None), ("shear", None),
                     ("interpolation", "nearest"), ("fill", 0), ("center", None)],
    "TrivialAugmentWide": [("num_magnitude_bins", 31), ("interpolation", "nearest"), ("fill", None)],
    "RandAugment": [("num_ops", 2), ("magnitude", 9), ("num_magnitude_bins", 31), ("interpolation", "nearest"),
                    ("fill", None)],
    "AutoAugment": [("policy", _MISSING), ("interpolation", "nearest"), ("fill", None)],
    "AugMix": [("severity", 3), ("mixture_width", 3), ("chain_depth", -1), ("alpha", 1.0), ("all_ops", True),
               ("interpolation", "bilinear"), ("fill", None)],
    "ConvertImageDtype": [("dtype", _MISSING)],
    "Grayscale": [("num_output_channels", _MISSING)],
    "GaussianBlur": [("kernel_size", _MISSING), ("sigma", _MISSING)],
}


def describe(t) -> str:
    """A short one-line description of a transform, for messages.

    Example:
        >>> describe(T.Resize(256, interpolation=T.InterpolationMode.BICUBIC))
        'Resize(size=256, interpolation=bicubic)'
    """
    name = type(t).__name__
    try:
        T = _tv()
    except ImportError:  # pragma: no cover - torchvision absent: only stoker objects and callables
        T = None
    if _is_stoker(t):
        return f"stoker.{repr(t)}"
    if T is not None:
        if isinstance(t, T.Lambda):
            return f"{name}({_callable_name(t.lambd)})"
        if isinstance(t, (T.Compose, T.RandomApply, T.RandomChoice, T.RandomOrder)):
            inner = ", ".join(describe(x) for x in getattr(t, "transforms", []) or [])
            p = getattr(t, "p", None)
            return f"{name}([{inner}]" + (f", p={_fmt(p)})" if p is not None else ")")
    shown = _SHOWN.get(name)
    if shown is not None and _torchvision_class(t) is not None:
        parts = []
        for attr, default in shown:
            v = getattr(t, attr, None)
            text = _fmt(v)
            if default is not _MISSING and (text == (default if isinstance(default, str) else _fmt(default))
                                            or v == default):
                continue
            parts.append(f"{attr}={text}")
        return f"{name}({', '.join(parts)})"
    if type(t).__module__.startswith("torchvision"):
        return " ".join(repr(t).split())
    if isinstance(t, (types.FunctionType, types.BuiltinFunctionType, types.MethodType, functools.partial)):
        return _callable_name(t.func if isinstance(t, functools.partial) else t)
    text = " ".join(repr(t).split())
    if text.startswith("<") or len(text) > 80:
        return name
    return text


# --- value checks ------------------------------------------------------------

def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _size2(size, what="size") -> Tuple[int, int]:
    """An (h, w) size of ints: an int, or a sequence of 1 or 2 ints."""
    if _is_int(size):
        return size, size
    if isinstance(size, (list, tuple)) and len(size) in (1, 2) and all(_is_int(s) for s in size):
        return (size[0], size[0]) if len(size) == 1 else (size[0], size[1])
    raise _NoMap(f"{what}={size!r}: stoker takes an int or a sequence of 1 or 2 ints")


def _pair(v, what) -> Tuple[float, float]:
    if isinstance(v, (list, tuple)) and len(v) == 2 and all(_is_number(x) for x in v):
        return float(v[0]), float(v[1])
    raise _NoMap(f"{what}={v!r}: not a pair of numbers")


def _probability(t) -> float:
    p = t.p
    if not _is_number(p):
        raise _NoMap(f"p={p!r}: not a number")
    return float(p)


def _interpolation(t, allowed: Tuple[str, ...]) -> str:
    T = _tv()
    mode = t.interpolation
    if not isinstance(mode, T.InterpolationMode):
        raise _NoMap(f"interpolation {mode!r}: not an InterpolationMode")
    if mode.value not in allowed:
        only = " and ".join(a.upper() for a in allowed)
        raise _NoMap(f"interpolation {mode.name}: stoker reproduces {only} only")
    return mode.value


def _fill3(fill, what="fill") -> Tuple[int, int, int]:
    """F_pil._parse_fill on an RGB image: None -> 0, a number or 3 numbers, int() of each. Values outside
    0..255 (PIL clips them, stoker may not) and other lengths (torchvision raises) stay Python."""
    if fill is None:
        vals = [0, 0, 0]
    elif _is_number(fill):
        vals = [fill] * 3
    elif isinstance(fill, (list, tuple)) and len(fill) == 3 and all(_is_number(f) for f in fill):
        vals = list(fill)
    else:
        raise _NoMap(f"{what}={fill!r}: stoker takes None, a number or 3 numbers for an RGB image")
    out = tuple(int(v) for v in vals)
    if not all(0 <= v <= 255 for v in out):
        raise _NoMap(f"{what}={fill!r}: outside 0..255")
    return out  # type: ignore[return-value]


def _is_gray(fill3) -> bool:
    return fill3[0] == fill3[1] == fill3[2]


def _center(center):
    if center is None:
        return None
    return _pair(center, "center")


def _number_list(v, what) -> List[float]:
    """Normalize's mean/std: a number, or a sequence (list, tuple, 0/1-d tensor or array) of 1 or 3 numbers."""
    if _is_number(v):
        return [float(v)]
    if hasattr(v, "ndim") and hasattr(v, "tolist"):  # a tensor or an array
        if v.ndim > 1:
            raise _NoMap(f"{what}: a {v.ndim}-d tensor")
        v = v.tolist()
        if _is_number(v):
            return [float(v)]
    if isinstance(v, (list, tuple)) and len(v) in (1, 3) and all(_is_number(x) for x in v):
        return [float(x) for x in v]
    raise _NoMap(f"{what}={v!r}: stoker takes 1 or 3 numbers")


# --- the mappings, one per torchvision class -----------------------------------
# Each takes (t, ctx) and returns a stoker transform, or raises _NoMap.

@dataclasses.dataclass
class _Ctx:
    stage: str
    native: List[Any]
    allow_within_one: bool


def _construct(cls, *args, **kwargs):
    """stoker's constructor; its ValueError/TypeError (torchvision would raise there too, or stoker refuses
    the value) make the transform Python."""
    try:
        return cls(*args, **kwargs)
    except (ValueError, TypeError) as e:
        raise _NoMap(f"stoker refuses it: {e}") from None


def _map_resize(t, ctx):
    _interpolation(t, ("bilinear",))  # antialias: PIL always antialiases (torchvision 0.14 ignores it on PIL)
    size, max_size = t.size, t.max_size
    if max_size is not None and not _is_int(max_size):
        raise _NoMap(f"max_size={max_size!r}: not an int")
    if _is_int(size) or (isinstance(size, (list, tuple)) and len(size) == 1 and _is_int(size[0])):
        s = size if _is_int(size) else size[0]
        return _construct(_stoker.Resize, s, max_size=max_size)
    if max_size is not None:
        raise _NoMap("max_size with an (h, w) size: torchvision raises")
    return _construct(_stoker.Resize, _size2(size))


def _map_random_resized_crop(t, ctx):
    _interpolation(t, ("bilinear",))
    return _construct(_stoker.RandomResizedCrop, _size2(t.size), scale=_pair(t.scale, "scale"),
                      ratio=_pair(t.ratio, "ratio"))


def _map_center_crop(t, ctx):
    return _construct(_stoker.CenterCrop, _size2(t.size))


def _map_random_crop(t, ctx):
    size = _size2(t.size)
    padding = t.padding
    pads = padding is not None or bool(t.pad_if_needed)
    if padding is not None:
        if _is_int(padding):
            padding = (padding,)
        if not (isinstance(padding, (list, tuple)) and len(padding) in (1, 2, 4) and all(_is_int(p) for p in padding)):
            raise _NoMap(f"padding={t.padding!r}: stoker takes an int or 1, 2 or 4 ints")
        if any(p < 0 for p in padding):
            raise _NoMap(f"padding={t.padding!r}: negative padding crops (stoker pads only)")
        padding = tuple(padding)
    if not isinstance(t.pad_if_needed, bool):
        raise _NoMap(f"pad_if_needed={t.pad_if_needed!r}: not a bool")
    fill = (0, 0, 0)
    if pads:
        if t.padding_mode != "constant":
            raise _NoMap(f"padding_mode={t.padding_mode!r}: stoker pads with a constant fill only")
        fill = _fill3(t.fill)
        # stoker applies RandomGrayscale to the output rows, so a colour padding after it would turn grey.
        if not _is_gray(fill) and any(type(n) is _stoker.RandomGrayscale for n in ctx.native):
            raise _NoMap("a coloured fill after RandomGrayscale: stoker would grey the padding")
    return _construct(_stoker.RandomCrop, size, padding=padding, pad_if_needed=t.pad_if_needed, fill=fill)


def _map_p(t, ctx):
    """The transforms whose one parameter is p, each onto stoker's class of the same name."""
    return _construct(getattr(_stoker, type(t).__name__), _probability(t))


def _map_grayscale(t, ctx):
    if t.num_output_channels != 3:
        raise _NoMap(f"num_output_channels={t.num_output_channels!r}: stoker's batches keep 3 channels")
    return _construct(_stoker.Grayscale, 3)


def _map_color_jitter(t, ctx):
    def arg(v, what, identity):
        return identity if v is None else _pair(v, what)
    return _construct(_stoker.ColorJitter, brightness=arg(t.brightness, "brightness", 0),
                      contrast=arg(t.contrast, "contrast", 0), saturation=arg(t.saturation, "saturation", 0),
                      hue=arg(t.hue, "hue", 0))


def _within_one(name, ctx):
    if not ctx.allow_within_one:
        raise _NoMap(f"{name}: stoker's kernel is within 1/255 of torchvision's, not exact")


def _map_gaussian_blur(t, ctx):
    _within_one("GaussianBlur", ctx)
    k = t.kernel_size
    if not (isinstance(k, (list, tuple)) and len(k) == 2 and all(_is_int(x) for x in k)):
        raise _NoMap(f"kernel_size={k!r}: not 2 ints")
    return _construct(_stoker.GaussianBlur, (k[0], k[1]), sigma=_pair(t.sigma, "sigma"))


def _map_solarize(t, ctx):
    if not _is_number(t.threshold):
        raise _NoMap(f"threshold={t.threshold!r}: not a number")
    return _construct(_stoker.RandomSolarize, float(t.threshold), p=_probability(t))


def _map_posterize(t, ctx):
    if not _is_int(t.bits):
        raise _NoMap(f"bits={t.bits!r}: not an int")
    return _construct(_stoker.RandomPosterize, t.bits, p=_probability(t))


def _map_sharpness(t, ctx):
    if not _is_number(t.sharpness_factor):
        raise _NoMap(f"sharpness_factor={t.sharpness_factor!r}: not a number")
    return _construct(_stoker.RandomAdjustSharpness, float(t.sharpness_factor), p=_probability(t))


def _map_rotation(t, ctx):
    interpolation = _interpolation(t, ("nearest", "bilinear"))
    if t.expand:
        raise _NoMap("expand=True: stoker keeps the image size")
    return _construct(_stoker.RandomRotation, _pair(t.degrees, "degrees"), interpolation=interpolation,
                      center=_center(t.center), fill=_fill3(t.fill))


def _map_affine(t, ctx):
    interpolation = _interpolation(t, ("nearest", "bilinear"))
    shear = t.shear
    if shear is not None:
        if not (isinstance(shear, (list, tuple)) and len(shear) in (2, 4) and all(_is_number(s) for s in shear)):
            raise _NoMap(f"shear={shear!r}: not 2 or 4 numbers")
        shear = tuple(float(s) for s in shear)
    return _construct(_stoker.RandomAffine, _pair(t.degrees, "degrees"),
                      translate=None if t.translate is None else _pair(t.translate, "translate"),
                      scale=None if t.scale is None else _pair(t.scale, "scale"), shear=shear,
                      interpolation=interpolation, fill=_fill3(t.fill), center=_center(t.center))


def _ints(t, *names):
    for n in names:
        if not _is_int(getattr(t, n)):
            raise _NoMap(f"{n}={getattr(t, n)!r}: not an int")


def _map_trivial_augment(t, ctx):
    _ints(t, "num_magnitude_bins")
    return _construct(_stoker.TrivialAugmentWide, t.num_magnitude_bins,
                      interpolation=_interpolation(t, ("nearest", "bilinear")), fill=_fill3(t.fill))


def _map_rand_augment(t, ctx):
    _ints(t, "num_ops", "magnitude", "num_magnitude_bins")
    return _construct(_stoker.RandAugment, t.num_ops, t.magnitude, t.num_magnitude_bins,
                      interpolation=_interpolation(t, ("nearest", "bilinear")), fill=_fill3(t.fill))


def _map_auto_augment(t, ctx):
    T = _tv()
    if not isinstance(t.policy, T.AutoAugmentPolicy):
        raise _NoMap(f"policy={t.policy!r}: not an AutoAugmentPolicy")
    if t.policies != t._get_policies(t.policy):
        raise _NoMap("its policies differ from torchvision's table for that policy")
    return _construct(_stoker.AutoAugment, t.policy.value, interpolation=_interpolation(t, ("nearest", "bilinear")),
                      fill=_fill3(t.fill))


def _map_augmix(t, ctx):
    _within_one("AugMix", ctx)
    _ints(t, "severity", "mixture_width", "chain_depth")
    if not isinstance(t.all_ops, bool) or not _is_number(t.alpha):
        raise _NoMap("all_ops or alpha of another type")
    fill = None if t.fill is None else list(_fill3(t.fill))
    return _construct(_stoker.AugMix, t.severity, t.mixture_width, t.chain_depth, float(t.alpha), t.all_ops,
                      interpolation=_interpolation(t, ("nearest", "bilinear")), fill=fill)


def _map_random_apply(t, ctx):
    inner = t.transforms
    try:
        items = _flatten(list(inner))
    except TypeError:
        raise _NoMap("its transforms are not a list") from None
    if not items:
        raise _NoMap("no transforms")
    mapped = []
    for x in items:
        if _is_stoker(x):
            mapped.append(x)
            continue
        fn = _mapper(x)
        if fn is None or fn in _TENSOR_MAPPERS:
            raise _NoMap(f"{describe(x)} inside: {_unmapped_reason(x, _PIL)}")
        try:
            mapped.append(fn(x, _Ctx(_PIL, ctx.native + mapped, ctx.allow_within_one)))
        except _NoMap as e:
            raise _NoMap(f"{describe(x)} inside: {e.args[0]}") from None
    return _construct(_stoker.RandomApply, mapped, p=_probability(t))


# The tensor-stage transforms (dtype changes are handled in split()).
def _map_normalize(t, ctx):
    if ctx.stage != _FLOAT:
        raise _NoMap("needs a float tensor" + (" (torchvision raises on a PIL image)" if ctx.stage == _PIL
                                               else " (torchvision raises on uint8)"))
    return _construct(_stoker.Normalize, _number_list(t.mean, "mean"), _number_list(t.std, "std"))


def _map_random_erasing(t, ctx):
    if ctx.stage == _PIL:
        raise _NoMap("needs a tensor (torchvision raises on a PIL image)")
    value = t.value
    if isinstance(value, str):
        if value != "random":
            raise _NoMap(f"value={value!r}")
        if ctx.stage == _UINT8:
            raise _NoMap("value='random' on a uint8 tensor")
    else:
        vals = [value] if _is_number(value) else value
        if not (isinstance(vals, (list, tuple)) and len(vals) in (1, 3) and all(_is_number(v) for v in vals)):
            raise _NoMap(f"value={value!r}: stoker takes a number, 1 or 3 numbers, or 'random'")
        if ctx.stage == _UINT8 and not all(float(v).is_integer() and 0 <= v <= 255 for v in vals):
            raise _NoMap(f"value={value!r} on a uint8 tensor: only integers in 0..255 are exact")
        value = list(vals) if len(vals) == 3 else vals[0]
    return _construct(_stoker.RandomErasing, _probability(t), scale=_pair(t.scale, "scale"),
                      ratio=_pair(t.ratio, "ratio"), value=value)


_TENSOR_MAPPERS = (_map_normalize, _map_random_erasing)

# torchvision.transforms (v1) class name -> its mapping.
_V1 = {
    "Resize": _map_resize,
    "RandomResizedCrop": _map_random_resized_crop,
    "CenterCrop": _map_center_crop,
    "RandomCrop": _map_random_crop,
    "RandomHorizontalFlip": _map_p,
    "RandomVerticalFlip": _map_p,
    "RandomGrayscale": _map_p,
    "Grayscale": _map_grayscale,
    "ColorJitter": _map_color_jitter,
    "GaussianBlur": _map_gaussian_blur,
    "RandomSolarize": _map_solarize,
    "RandomPosterize": _map_posterize,
    "RandomAdjustSharpness": _map_sharpness,
    "RandomAutocontrast": _map_p,
    "RandomEqualize": _map_p,
    "RandomInvert": _map_p,
    "RandomRotation": _map_rotation,
    "RandomAffine": _map_affine,
    "TrivialAugmentWide": _map_trivial_augment,
    "RandAugment": _map_rand_augment,
    "AutoAugment": _map_auto_augment,
    "AugMix": _map_augmix,
    "RandomApply": _map_random_apply,
    "Normalize": _map_normalize,
    "RandomErasing": _map_random_erasing,
}

# Why the rest are Python.
_V1_PYTHON = {
    "RandomChoice": "stoker has no per-sample RandomChoice (stoker.RandomChoice picks batch transforms)",
    "RandomOrder": "stoker has no RandomOrder",
    "Lambda": "Lambda: Python code",
}


# torchvision.transforms.v2: only what stoker documents as v2's semantics.
def _map_v2_random_shortest_size(t, ctx):
    _interpolation(t, ("bilinear",))
    min_size, max_size = t.min_size, t.max_size
    if not (isinstance(min_size, (list, tuple)) and min_size and all(_is_int(m) for m in min_size)):
        raise _NoMap(f"min_size={min_size!r}: not a list of ints")
    if max_size is not None and not _is_int(max_size):
        raise _NoMap(f"max_size={max_size!r}: not an int")
    return _construct(_stoker.RandomShortestSize, list(min_size), max_size=max_size)


def _map_v2_resize(t, ctx):
    if t.size is not None:
        raise _NoMap("v2.Resize with a size: only Resize(size=None, max_size) is confirmed for v2")
    _interpolation(t, ("bilinear",))
    if not _is_int(t.max_size):
        raise _NoMap(f"max_size={t.max_size!r}: not an int")
    return _construct(_stoker.Resize, None, max_size=t.max_size)


_V2 = {"RandomShortestSize": _map_v2_random_shortest_size, "Resize": _map_v2_resize}


def _torchvision_class(t) -> Optional[str]:
    """The v1 class name when type(t) is exactly torchvision.transforms.<name>, "v2.<name>" for v2."""
    T = _tv()
    name = type(t).__name__
    if getattr(T, name, None) is type(t):
        return name
    v2 = _v2()
    if v2 is not None and getattr(v2, name, None) is type(t):
        return "v2." + name
    return None


def _mapper(t) -> Optional[Callable]:
    cls = _torchvision_class(t)
    if cls is None:
        return None
    if cls.startswith("v2."):
        return _V2.get(cls[3:])
    return _V1.get(cls)


def _torchvision_base(t) -> Optional[str]:
    """The torchvision class a subclass derives from (its nearest one), else None."""
    T = _tv()
    for base in type(t).__mro__[1:]:
        if base.__module__.startswith("torchvision.transforms") and getattr(T, base.__name__, None) is base:
            return base.__name__
    return None


def _unmapped_reason(t, stage) -> str:
    """Why t (no mapper, or a tensor transform at the PIL stage) is Python."""
    T = _tv()
    cls = _torchvision_class(t)
    if cls is not None:
        if cls in _V1_PYTHON:
            return _V1_PYTHON[cls]
        if cls.startswith("v2."):
            return f"torchvision.transforms.{cls}: not mapped (stoker confirms v2's RandomShortestSize and " \
                   "Resize(None, max_size) only)"
        if cls == "ToTensor" and stage == _PIL:
            return "torch's default dtype is not float32: ToTensor would give another"
        if cls in ("ToTensor", "PILToTensor"):
            return f"{cls} on a tensor: torchvision raises"
        if cls == "ConvertImageDtype":
            if stage == _PIL:
                return "ConvertImageDtype on a PIL image: torchvision raises"
            return f"ConvertImageDtype({t.dtype}) on a {stage} tensor: stoker outputs float32 or uint8"
        if cls in _V1 and stage != _PIL and _V1[cls] not in _TENSOR_MAPPERS:
            return f"{cls} on a tensor: stoker's kernels follow torchvision on PIL images only"
        return f"stoker has no kernel for torchvision.transforms.{cls}"
    base = _torchvision_base(t)
    if base is not None:
        return f"a subclass of torchvision.transforms.{base} (it may override forward or get_params)"
    if isinstance(t, T.Lambda):
        return "Lambda: Python code"
    return "not a torchvision transform stoker knows"


def _flatten(items) -> List[Any]:
    """Nested Compose (v1's and v2's) and nn.Sequential of the exact classes, flattened: each applies its
    transforms in order, as the list does."""
    T = _tv()
    v2 = _v2()
    composes = (T.Compose,) + ((v2.Compose,) if v2 is not None and hasattr(v2, "Compose") else ())
    import torch
    out: List[Any] = []
    for t in items:
        if type(t) in composes:
            out.extend(_flatten(list(t.transforms)))
        elif type(t) is torch.nn.Sequential:
            out.extend(_flatten(list(t)))
        else:
            out.append(t)
    return out


def _pipeline_error(transforms: List[Any], dtype: Optional[str]) -> str:
    """"" when stoker's Pipeline accepts the list (samples may differ in size), else its message."""
    dt = dtype or _FLOAT
    fn = getattr(_stoker, "_pipeline_error", None)
    if fn is not None:
        return fn(list(transforms), dt, False)
    return _pipeline_error_fallback(transforms, dt)


def _pipeline_error_fallback(transforms: List[Any], dtype: str) -> str:
    """Without _stoker._pipeline_error: build the Pipeline through the plan hook (its checks run in its
    constructor, the fixed-size one last) and add the dtype checks it makes with float32."""
    if dtype == _UINT8:
        for t in transforms:
            if type(t) is _stoker.Normalize:
                return "Normalize requires dtype float32 (got uint8)"
            if type(t) is _stoker.RandomErasing and "value=random" in repr(t):
                return "RandomErasing: value='random' requires dtype float32 (normal values do not fit uint8)"
    try:
        _stoker._testing.plan(list(transforms), 0, 0, 0, 4096, 4096)
    except ValueError as e:
        if "must give every sample the same size" in str(e):
            return ""
        return str(e)
    return ""


def _stage_after(t, stage) -> Optional[str]:
    """The stage after a dtype step (ToTensor, PILToTensor, ConvertImageDtype) that stoker folds into its output,
    or None when t is not one it can take at this stage."""
    import torch
    cls = _torchvision_class(t)
    if cls == "ToTensor" and stage == _PIL:
        # ToTensor converts to torch's default dtype.
        return _FLOAT if torch.get_default_dtype() == torch.float32 else None
    if cls == "PILToTensor" and stage == _PIL:
        return _UINT8
    if cls == "ConvertImageDtype" and stage in (_UINT8, _FLOAT):
        if t.dtype is torch.float32:
            return _FLOAT
        if t.dtype is torch.uint8 and stage == _UINT8:
            return _UINT8
    return None


def split(transforms, *, allow_within_one: bool = False) -> Split:
    """The torchvision pipeline `transforms` as stoker's native prefix and a Python tail.

    Args:
        transforms: a ``torchvision.transforms.Compose``, a list or tuple of
            transform objects (torchvision's, stoker's own, any callable;
            nested Compose flattened), or None.
        allow_within_one: also map GaussianBlur and AugMix, whose stoker
            kernels are within 1/255 of torchvision's rather than exact.

    Returns:
        Split: see its attributes.

    Raises:
        ValueError: a stoker transform object where stoker cannot run it (after
            the first Python transform, on a tensor, or in an order stoker's
            Pipeline refuses): it has no Python implementation to fall back on.

    Example:
        >>> s = split(T.Compose([T.Resize(256), T.CenterCrop(224), T.ToTensor(), T.Normalize(MEAN, STD)]))
        >>> s.native, s.dtype, s.tail
        ([Resize(size=256), CenterCrop(size=(224, 224)), Normalize(...)], 'float32', [])
    """
    if transforms is None:
        return Split([], None, [], _PIL, [])
    items = _flatten(list(transforms) if isinstance(transforms, (list, tuple)) else [transforms])
    if all(_is_stoker(t) for t in items):  # stoker's own API: the loader's dtype applies
        return Split(list(items), None, [], _PIL, [])

    native: List[Any] = []
    stage, dtype = _PIL, None
    erased = False  # a RandomErasing is in the prefix: stoker erases the written output, so nothing but
    # another RandomErasing may follow (stoker's Normalize after it would not normalise the erased value)
    cut = len(items)
    reason = ""
    for i, t in enumerate(items):
        if _is_stoker(t):
            stage, dtype = _take_stoker(t, native, stage, dtype, erased)
            erased = erased or type(t) is _stoker.RandomErasing
            native.append(t)
            continue
        after = _stage_after(t, stage)
        if after is not None:
            if erased and after != stage:
                cut, reason = i, "after RandomErasing: stoker erases the final output"
                break
            stage = after
            dtype = _UINT8 if stage == _UINT8 else _FLOAT
            continue
        fn = _mapper(t)
        if fn is None or (stage != _PIL and fn not in _TENSOR_MAPPERS):
            cut, reason = i, _unmapped_reason(t, stage)
            break
        try:
            mapped = fn(t, _Ctx(stage, native, allow_within_one))
        except _NoMap as e:
            cut, reason = i, e.args[0]
            break
        if erased and type(mapped) is not _stoker.RandomErasing:
            cut, reason = i, "after RandomErasing: stoker erases the final output, so only RandomErasing may follow"
            break
        error = _pipeline_error(native + [mapped], dtype)
        if error:
            cut, reason = i, f"stoker's order rules: {error}"
            break
        native.append(mapped)
        erased = erased or type(mapped) is _stoker.RandomErasing

    tail = items[cut:]
    reasons: List[Tuple[str, str]] = []
    if tail:
        reasons.append((describe(tail[0]), reason))
        first = describe(tail[0])
        for t in tail[1:]:
            if _is_stoker(t):
                raise ValueError(f"stoker.{type(t).__name__} after {first}, which runs in Python: stoker's "
                                 "transforms run in C++ before the first Python transform; move it before, or use "
                                 "the torchvision transform")
            reasons.append((describe(t), f"after {first}, which runs in Python"))
    return Split(native, dtype, tail, _PIL if stage == _PIL else "tensor", reasons)


def _take_stoker(t, native, stage, dtype, erased):
    """A stoker transform object in a torchvision list: where it may stand, and the stage after it."""
    name = type(t).__name__
    if erased and type(t) is not _stoker.RandomErasing:
        raise ValueError(f"stoker.{name} after RandomErasing: only RandomErasing may follow it")
    if type(t) is _stoker.Normalize:
        if stage == _UINT8:
            raise ValueError("stoker.Normalize on a uint8 tensor (after PILToTensor): it needs float32")
        stage, dtype = _FLOAT, _FLOAT  # on the PIL stage: stoker's Normalize includes ToTensor
    elif type(t) is _stoker.RandomErasing:
        if stage == _PIL:
            raise ValueError("stoker.RandomErasing before ToTensor/PILToTensor: it acts on the tensor")
    elif stage != _PIL:
        raise ValueError(f"stoker.{name} after ToTensor/PILToTensor: stoker's image transforms act on the image "
                         "before it becomes a tensor")
    error = _pipeline_error(native + [t], dtype)
    if error:
        raise ValueError(f"stoker.{name}: {error}")
    return stage, dtype
