"""Transforms of 3D volumes (stoker.Volume, stoker.LabelVolume), with MONAI's names, parameters and semantics.

They go in ``stoker.Loader(transforms=[...])`` with a volume schema and apply
in order to every volume field, one draw per patch shared by all of them (as
a MONAI dict transform over ``keys=[image, label]``); intensity transforms
touch only Volume fields. The list holds one sampling crop
(RandSpatialCrop, RandSpatialCropSamples, RandCropByPosNegLabel or
CenterSpatialCrop); before it only SpatialPad and per-voxel intensity
transforms may come, so that a patch is read without its volume.

Each class carries its parameters to the one definition in C++
(include/stoker/volume.h, src/transform/volume/defs.cc), which checks them
and says which is wrong, and takes its docstring from there.
"""
from typing import Any, Dict, Optional, Sequence, Tuple, Type, Union

from stoker import _stoker

_Size = Union[int, Sequence[int]]


def _size3(name: str, key: str, v: Any) -> Tuple[int, int, int]:
    if isinstance(v, int) and not isinstance(v, bool):
        return (v, v, v)
    try:
        t = tuple(v)
    except TypeError:
        t = ()
    if len(t) != 3 or not all(isinstance(x, int) and not isinstance(x, bool) for x in t):
        raise ValueError(f"{name}: {key} must be an int or 3 ints, got {v!r}")
    return t  # type: ignore[return-value]


class VolumeTransform:
    """A volume transform: its MONAI name and parameters (the classes below)."""
    _params: Dict[str, Any]

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        # NOTE: each class's docstring is its C++ definition's (VDef<T>::kDoc), not a copy kept here.
        docs = _stoker._transform_docs()["volume"]
        if cls.__name__ not in docs:
            raise TypeError(f"stoker.volume.{cls.__name__}: no volume transform of that name in C++ "
                            f"(src/transform/volume/defs.cc defines {', '.join(docs)})")
        cls.__doc__ = docs[cls.__name__]

    def _json(self) -> Dict[str, Any]:
        return {"name": type(self).__name__, **self._params}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self._params.items())})"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self._params == other._params  # type: ignore[attr-defined]

    @property
    def num_samples(self) -> int:
        """Patches per volume load this transform draws (1 but for the sampling crops that take num_samples)."""
        return int(self._params.get("num_samples", 1))


class Spacing(VolumeTransform):
    def __init__(self, pixdim: Union[float, Sequence[float]]) -> None:
        if isinstance(pixdim, (int, float)) and not isinstance(pixdim, bool):
            pixdim = (float(pixdim),) * 3
        self._params = dict(pixdim=[float(x) for x in pixdim])


class RandSpatialCrop(VolumeTransform):
    def __init__(self, roi_size: _Size, random_center: bool = True, random_size: bool = False) -> None:
        self._params = dict(roi_size=_size3("RandSpatialCrop", "roi_size", roi_size), random_center=random_center,
                            random_size=random_size)


class RandSpatialCropSamples(VolumeTransform):
    def __init__(self, roi_size: _Size, num_samples: int, random_center: bool = True,
                 random_size: bool = False) -> None:
        self._params = dict(roi_size=_size3("RandSpatialCropSamples", "roi_size", roi_size), num_samples=num_samples,
                            random_center=random_center, random_size=random_size)


class RandCropByPosNegLabel(VolumeTransform):
    def __init__(self, spatial_size: _Size, label_key: str, pos: float = 1.0, neg: float = 1.0,
                 num_samples: int = 1) -> None:
        self._params = dict(spatial_size=_size3("RandCropByPosNegLabel", "spatial_size", spatial_size),
                            label_key=label_key, pos=pos, neg=neg, num_samples=num_samples)


class CenterSpatialCrop(VolumeTransform):
    def __init__(self, roi_size: _Size) -> None:
        self._params = dict(roi_size=_size3("CenterSpatialCrop", "roi_size", roi_size))


class SpatialPad(VolumeTransform):
    def __init__(self, spatial_size: _Size, method: str = "symmetric") -> None:
        self._params = dict(spatial_size=_size3("SpatialPad", "spatial_size", spatial_size), method=method)


class RandFlip(VolumeTransform):
    def __init__(self, prob: float = 0.1, spatial_axis: Optional[Union[int, Sequence[int]]] = None) -> None:
        axis = spatial_axis if spatial_axis is None or isinstance(spatial_axis, int) else list(spatial_axis)
        self._params = dict(prob=prob, spatial_axis=axis)


class RandRotate90(VolumeTransform):
    def __init__(self, prob: float = 0.1, max_k: int = 3, spatial_axes: Tuple[int, int] = (0, 1)) -> None:
        self._params = dict(prob=prob, max_k=max_k, spatial_axes=list(spatial_axes))


class ScaleIntensityRange(VolumeTransform):
    def __init__(self, a_min: float, a_max: float, b_min: Optional[float] = None, b_max: Optional[float] = None,
                 clip: bool = False) -> None:
        self._params = dict(a_min=a_min, a_max=a_max, b_min=b_min, b_max=b_max, clip=clip)


class NormalizeIntensity(VolumeTransform):
    def __init__(self, subtrahend: Optional[Union[float, Sequence[float]]] = None,
                 divisor: Optional[Union[float, Sequence[float]]] = None, nonzero: bool = False,
                 channel_wise: bool = False) -> None:
        self._params = dict(subtrahend=subtrahend, divisor=divisor, nonzero=nonzero, channel_wise=channel_wise)


def _registered() -> Tuple[Type[VolumeTransform], ...]:
    """The classes above in the C++ registry's order (stoker::VolumeTransform's alternatives); a transform C++
    defines without a class here fails the import (one without a definition fails at its class statement)."""
    by_name = {cls.__name__: cls for cls in VolumeTransform.__subclasses__()}
    names = _stoker._transform_names()["volume"]
    missing = [n for n in names if n not in by_name]
    if missing:
        raise ImportError(f"stoker.volume: no Python class for {', '.join(missing)}, defined in C++ "
                          "(src/transform/volume/defs.cc)")
    return tuple(by_name[n] for n in names)


VOLUME_TRANSFORM_TYPES = _registered()
