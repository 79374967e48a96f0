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
and says which is wrong.
"""
from typing import Any, Dict, Optional, Sequence, Tuple, Union

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


# The Raises section every transform's docstring shares, put in place of its
# "<raises>" line when the class is made.
_RAISES = """    Raises:
        ValueError: a parameter of the wrong type (here), or out of range or
            against the list's rules (one sampling crop; only SpatialPad and
            per-voxel intensity transforms before it; Spacing first), raised
            by stoker.Loader naming the transform and the parameter.
"""


class VolumeTransform:
    """A volume transform: its MONAI name and parameters (the classes below)."""
    _params: Dict[str, Any]

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if cls.__doc__:
            cls.__doc__ = cls.__doc__.replace("    <raises>\n", _RAISES)

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
    """monai.transforms.Spacing: each volume resampled to voxels of ``pixdim`` mm along its own axes.

    Trilinear for Volume fields, nearest for LabelVolume fields, on MONAI's
    output grid; the affine (``<name>_affine``) follows. Done once per
    volume when first loaded and kept in the loader's volume cache (under
    memory_budget). Must be the first transform.

    Args:
        pixdim (float or 3 floats): the voxel size; entries <= 0 keep that
            axis's spacing.

    <raises>
    Example:
        >>> stoker.Spacing((1.5, 1.5, 2.0))
        Spacing(pixdim=[1.5, 1.5, 2.0])
    """

    def __init__(self, pixdim: Union[float, Sequence[float]]) -> None:
        if isinstance(pixdim, (int, float)) and not isinstance(pixdim, bool):
            pixdim = (float(pixdim),) * 3
        self._params = dict(pixdim=[float(x) for x in pixdim])


class RandSpatialCrop(VolumeTransform):
    """monai.transforms.RandSpatialCrop: a ``roi_size`` patch at a uniformly drawn corner.

    Args:
        roi_size (int or 3 ints): the patch; -1 entries: the whole axis.
        random_center (bool): False: the centred patch. Default True.
        random_size (bool): must be False (MONAI's default True gives patches
            of varying size, which cannot be batched). Default False.

    <raises>
    Example:
        >>> stoker.RandSpatialCrop(96)
        RandSpatialCrop(roi_size=(96, 96, 96), random_center=True, random_size=False)
    """

    def __init__(self, roi_size: _Size, random_center: bool = True, random_size: bool = False) -> None:
        self._params = dict(roi_size=_size3("RandSpatialCrop", "roi_size", roi_size), random_center=random_center,
                            random_size=random_size)


class RandSpatialCropSamples(VolumeTransform):
    """monai.transforms.RandSpatialCropSamples: ``num_samples`` RandSpatialCrop patches per volume load.

    Args:
        roi_size (int or 3 ints): the patch; -1 entries: the whole axis.
        num_samples (int): patches per volume, 1..256: consecutive batch entries.
        random_center (bool): Default True.
        random_size (bool): must be False. Default False.

    <raises>
    Example:
        >>> stoker.RandSpatialCropSamples((64, 64, 32), num_samples=4).num_samples
        4
    """

    def __init__(self, roi_size: _Size, num_samples: int, random_center: bool = True,
                 random_size: bool = False) -> None:
        self._params = dict(roi_size=_size3("RandSpatialCropSamples", "roi_size", roi_size), num_samples=num_samples,
                            random_center=random_center, random_size=random_size)


class RandCropByPosNegLabel(VolumeTransform):
    """monai.transforms.RandCropByPosNegLabel: patches centred on foreground with probability pos / (pos + neg).

    A centre is a uniformly drawn voxel of its class (foreground: non-zero in
    any channel of the label volume ``label_key``, channel 0 of a
    multi-channel (one-hot) label left out, as MONAI's
    map_binary_to_indices), moved inside the volume as MONAI's
    ``correct_crop_centers`` does. The label's foreground index is built once
    per volume and kept (stats()["volume"]["label_index_builds"]). When one
    class is empty every patch comes from the other (``posneg_one_class``
    counts them).

    Args:
        spatial_size (int or 3 ints): the patch; -1 entries: the whole axis.
        label_key (str): the LabelVolume field.
        pos (float): the foreground's weight, >= 0. Default 1.
        neg (float): the background's weight, >= 0 (not both 0). Default 1.
        num_samples (int): patches per volume load, 1..256. Default 1.

    <raises>
    Example:
        >>> stoker.RandCropByPosNegLabel((96, 96, 96), label_key="label", pos=2, neg=1, num_samples=4).num_samples
        4
    """

    def __init__(self, spatial_size: _Size, label_key: str, pos: float = 1.0, neg: float = 1.0,
                 num_samples: int = 1) -> None:
        self._params = dict(spatial_size=_size3("RandCropByPosNegLabel", "spatial_size", spatial_size),
                            label_key=label_key, pos=pos, neg=neg, num_samples=num_samples)


class CenterSpatialCrop(VolumeTransform):
    """monai.transforms.CenterSpatialCrop: the centred ``roi_size`` box.

    Args:
        roi_size (int or 3 ints): the box (start max(shape // 2 - roi // 2,
            0)); -1 entries: the whole axis.

    <raises>
    Example:
        >>> stoker.CenterSpatialCrop((-1, -1, 64))
        CenterSpatialCrop(roi_size=(-1, -1, 64))
    """

    def __init__(self, roi_size: _Size) -> None:
        self._params = dict(roi_size=_size3("CenterSpatialCrop", "roi_size", roi_size))


class SpatialPad(VolumeTransform):
    """monai.transforms.SpatialPad: each axis padded to at least ``spatial_size`` (zeros; labels their fill).

    Args:
        spatial_size (int or 3 ints): -1 entries: the axis as it is.
        method (str): "symmetric" (the default) or "end".

    <raises>
    Example:
        >>> stoker.SpatialPad(96, method="end")
        SpatialPad(spatial_size=(96, 96, 96), method='end')
    """

    def __init__(self, spatial_size: _Size, method: str = "symmetric") -> None:
        self._params = dict(spatial_size=_size3("SpatialPad", "spatial_size", spatial_size), method=method)


class RandFlip(VolumeTransform):
    """monai.transforms.RandFlip: with probability ``prob``, the listed spatial axes flipped.

    Args:
        prob (float): Default 0.1.
        spatial_axis (int, list of int or None): None (the default): all three.

    <raises>
    Example:
        >>> stoker.RandFlip(prob=0.5, spatial_axis=0)
        RandFlip(prob=0.5, spatial_axis=0)
    """

    def __init__(self, prob: float = 0.1, spatial_axis: Optional[Union[int, Sequence[int]]] = None) -> None:
        axis = spatial_axis if spatial_axis is None or isinstance(spatial_axis, int) else list(spatial_axis)
        self._params = dict(prob=prob, spatial_axis=axis)


class RandRotate90(VolumeTransform):
    """monai.transforms.RandRotate90: with probability ``prob``, k in 1..max_k quarter turns (np.rot90 over spatial_axes).

    The two axes must have the same patch size.

    Args:
        prob (float): Default 0.1.
        max_k (int): Default 3.
        spatial_axes (2 ints): Default (0, 1).

    <raises>
    Example:
        >>> stoker.RandRotate90(prob=0.5, spatial_axes=(1, 2))
        RandRotate90(prob=0.5, max_k=3, spatial_axes=[1, 2])
    """

    def __init__(self, prob: float = 0.1, max_k: int = 3, spatial_axes: Tuple[int, int] = (0, 1)) -> None:
        self._params = dict(prob=prob, max_k=max_k, spatial_axes=list(spatial_axes))


class ScaleIntensityRange(VolumeTransform):
    """monai.transforms.ScaleIntensityRange: [a_min, a_max] mapped to [b_min, b_max], optionally clipped.

    Args:
        a_min (float): the input value mapped to b_min (or 0).
        a_max (float): the input value mapped to b_max (or 1).
        b_min (float or None): the output's low end; None (with b_max):
            [0, 1], no second scaling.
        b_max (float or None): the output's high end.
        clip (bool): clip to [b_min, b_max] (the bounds given). Default False.

    <raises>
    Example:
        >>> stoker.ScaleIntensityRange(-1000, 1000, 0.0, 1.0, clip=True)
        ScaleIntensityRange(a_min=-1000, a_max=1000, b_min=0.0, b_max=1.0, clip=True)
    """

    def __init__(self, a_min: float, a_max: float, b_min: Optional[float] = None, b_max: Optional[float] = None,
                 clip: bool = False) -> None:
        self._params = dict(a_min=a_min, a_max=a_max, b_min=b_min, b_max=b_max, clip=clip)


class NormalizeIntensity(VolumeTransform):
    """monai.transforms.NormalizeIntensity: (x - mean) / std over the patch.

    Args:
        subtrahend (float, list of floats or None): instead of the patch's
            mean (one value per channel with channel_wise).
        divisor (float, list of floats or None): instead of its population
            std; 0 divides by 1, as MONAI.
        nonzero (bool): statistics and normalisation of non-zero voxels only.
        channel_wise (bool): per channel.

    <raises>
    Example:
        >>> stoker.NormalizeIntensity(nonzero=True, channel_wise=True)
        NormalizeIntensity(subtrahend=None, divisor=None, nonzero=True, channel_wise=True)
    """

    def __init__(self, subtrahend: Optional[Union[float, Sequence[float]]] = None,
                 divisor: Optional[Union[float, Sequence[float]]] = None, nonzero: bool = False,
                 channel_wise: bool = False) -> None:
        self._params = dict(subtrahend=subtrahend, divisor=divisor, nonzero=nonzero, channel_wise=channel_wise)


VOLUME_TRANSFORM_TYPES = (Spacing, RandSpatialCrop, RandSpatialCropSamples, RandCropByPosNegLabel, CenterSpatialCrop,
                          SpatialPad, RandFlip, RandRotate90, ScaleIntensityRange, NormalizeIntensity)
