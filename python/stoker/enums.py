"""The enums of torchvision's transform arguments, by value: stoker's transforms
accept these, torchvision's own (same values) or the value strings.

Their values are C++'s names (include/stoker/names.h, read through
stoker._stoker._enum_names()), so they are spelled once."""
import enum

from stoker import _stoker

_NAMES = _stoker._enum_names()


def _enum(name: str, key: str, doc: str) -> type:
    """An Enum whose members are C++'s names of `key`, upper-cased: NEAREST = "nearest"."""
    made = enum.Enum(name, [(value.upper(), value) for value in _NAMES[key]], module=__name__)  # type: ignore[misc]
    made.__doc__ = doc
    return made


InterpolationMode = _enum("InterpolationMode", "interpolation", """Resampling of the warps (RandomRotation, RandomAffine, the policies), as torchvision's.

    Raises:
        ValueError: an unknown value (Enum lookup).

    Example:
        >>> stoker.InterpolationMode("bilinear")
        <InterpolationMode.BILINEAR: 'bilinear'>
    """)

AutoAugmentPolicy = _enum("AutoAugmentPolicy", "autoaugment_policy", """AutoAugment's learned policies, as torchvision's.

    Raises:
        ValueError: an unknown value (Enum lookup).

    Example:
        >>> stoker.AutoAugmentPolicy.SVHN.value
        'svhn'
    """)
