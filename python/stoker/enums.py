"""The enums of torchvision's transform arguments, by value: stoker's transforms
accept these, torchvision's own (same values) or the value strings."""
import enum


class InterpolationMode(enum.Enum):
    """Resampling of the warps (RandomRotation, RandomAffine, the policies), as torchvision's.

    Raises:
        ValueError: an unknown value (Enum lookup).

    Example:
        >>> stoker.InterpolationMode("bilinear")
        <InterpolationMode.BILINEAR: 'bilinear'>
    """
    NEAREST = "nearest"
    BILINEAR = "bilinear"


class AutoAugmentPolicy(enum.Enum):
    """AutoAugment's learned policies, as torchvision's.

    Raises:
        ValueError: an unknown value (Enum lookup).

    Example:
        >>> stoker.AutoAugmentPolicy.SVHN.value
        'svhn'
    """
    IMAGENET = "imagenet"
    CIFAR10 = "cifar10"
    SVHN = "svhn"
