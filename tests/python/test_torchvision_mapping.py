"""torchvision transforms mapped onto stoker's (stoker._torchvision.split): exact or not made.

1. Each mappable class, with several parameter sets, becomes the stoker transform with the same parameters
   (compared by repr, which prints every parameter); each parameter set stoker does not reproduce stays Python
   with its reason.
2. Deterministic pipelines (and the image-stage ops with p=1 or one-point ranges, so without draws) through
   stoker.Loader equal torchvision on the real photos: uint8 exactly, float32 to 1e-6.
3. torchvision's ImageNet presets (references/classification/presets.py) map to the list a stoker user would
   write by hand; with the same draws (the plan hook), RRC + flip and the TrivialAugmentWide + RandomErasing
   train preset equal torchvision.
4. The cut: a Lambda (or anything stoker does not run) ends the native prefix; the tail run in Python on stoker's
   output equals torchvision's whole pipeline.
"""
import warnings

import pytest
import torch
import torchvision
import torchvision.transforms as T
import torchvision.transforms.functional as F
from PIL import Image, ImageOps

import stoker
from stoker import _stoker
from stoker import _torchvision as tvmap
from stoker._torchvision import describe, split

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
I = T.InterpolationMode


def reprs(ts):
    return [repr(t) for t in ts]


# --- 1. the mapping table -------------------------------------------------------------------------------------

# (torchvision object, the stoker transform a user would write for it): before ToTensor.
PIL_STAGE = [
    (T.Resize(256), stoker.Resize(256)),
    (T.Resize([256]), stoker.Resize(256)),
    (T.Resize((160, 200)), stoker.Resize((160, 200))),
    (T.Resize(256, max_size=300), stoker.Resize(256, max_size=300)),
    (T.Resize(256, antialias=False), stoker.Resize(256)),  # PIL always antialiases: 0.14 ignores it there
    (T.Resize(64, interpolation=I.BILINEAR, antialias=True), stoker.Resize(64)),
    (T.RandomResizedCrop(224), stoker.RandomResizedCrop(224)),
    (T.RandomResizedCrop((96, 128), scale=(0.25, 0.9), ratio=(0.5, 2.0)),
     stoker.RandomResizedCrop((96, 128), scale=(0.25, 0.9), ratio=(0.5, 2.0))),
    (T.RandomResizedCrop([64]), stoker.RandomResizedCrop(64)),
    (T.CenterCrop(224), stoker.CenterCrop(224)),
    (T.CenterCrop((100, 80)), stoker.CenterCrop((100, 80))),
    (T.CenterCrop([50]), stoker.CenterCrop(50)),
    (T.RandomCrop(32), stoker.RandomCrop(32)),
    (T.RandomCrop(32, padding=4), stoker.RandomCrop(32, padding=4)),
    (T.RandomCrop((30, 40), padding=(1, 2), fill=(124, 116, 104)),
     stoker.RandomCrop((30, 40), padding=(1, 2), fill=(124, 116, 104))),
    (T.RandomCrop(48, padding=[1, 2, 3, 4], pad_if_needed=True, fill=7.9),
     stoker.RandomCrop(48, padding=(1, 2, 3, 4), pad_if_needed=True, fill=7)),
    (T.RandomCrop(48, padding_mode="reflect"), stoker.RandomCrop(48)),  # never pads: the mode is unused
    (T.RandomHorizontalFlip(), stoker.RandomHorizontalFlip()),
    (T.RandomHorizontalFlip(0.25), stoker.RandomHorizontalFlip(0.25)),
    (T.RandomVerticalFlip(1.0), stoker.RandomVerticalFlip(1.0)),
    (T.RandomGrayscale(), stoker.RandomGrayscale()),
    (T.RandomGrayscale(0.6), stoker.RandomGrayscale(0.6)),
    (T.Grayscale(3), stoker.Grayscale(3)),
    (T.ColorJitter(0.4, 0.4, 0.4, 0.1), stoker.ColorJitter(0.4, 0.4, 0.4, 0.1)),
    (T.ColorJitter(brightness=1.5), stoker.ColorJitter(brightness=1.5)),  # (0, 2.5): clipped at 0 as torchvision
    (T.ColorJitter(contrast=(0.2, 0.2), hue=(-0.3, 0.1)), stoker.ColorJitter(contrast=(0.2, 0.2), hue=(-0.3, 0.1))),
    (T.ColorJitter(saturation=(1, 1)), stoker.ColorJitter()),  # an identity range is off in both
    (T.RandomSolarize(192), stoker.RandomSolarize(192)),
    (T.RandomSolarize(127.5, p=0.2), stoker.RandomSolarize(127.5, p=0.2)),
    (T.RandomPosterize(4), stoker.RandomPosterize(4)),
    (T.RandomPosterize(2, p=1.0), stoker.RandomPosterize(2, p=1.0)),
    (T.RandomAdjustSharpness(2), stoker.RandomAdjustSharpness(2)),
    (T.RandomAdjustSharpness(0.5, p=0.3), stoker.RandomAdjustSharpness(0.5, p=0.3)),
    (T.RandomAutocontrast(), stoker.RandomAutocontrast()),
    (T.RandomEqualize(0.7), stoker.RandomEqualize(0.7)),
    (T.RandomInvert(0.1), stoker.RandomInvert(0.1)),
    (T.RandomRotation(30), stoker.RandomRotation(30)),
    (T.RandomRotation((-10, 45), interpolation=I.BILINEAR, center=(10, 20), fill=(10, 200, 30)),
     stoker.RandomRotation((-10, 45), interpolation="bilinear", center=(10, 20), fill=(10, 200, 30))),
    (T.RandomRotation(5, fill=None), stoker.RandomRotation(5)),
    (T.RandomAffine(15), stoker.RandomAffine(15)),
    (T.RandomAffine(30, translate=(0.2, 0.1), scale=(0.7, 1.3), shear=(-10, 10, -5, 5), fill=128),
     stoker.RandomAffine(30, translate=(0.2, 0.1), scale=(0.7, 1.3), shear=(-10, 10, -5, 5), fill=128)),
    (T.RandomAffine(0, shear=20, interpolation=I.BILINEAR, center=(3, 4), fill=[1, 2, 3]),
     stoker.RandomAffine((0, 0), shear=20, interpolation="bilinear", center=(3, 4), fill=[1, 2, 3])),
    (T.TrivialAugmentWide(), stoker.TrivialAugmentWide()),
    (T.TrivialAugmentWide(num_magnitude_bins=10, interpolation=I.BILINEAR, fill=[1, 2, 3]),
     stoker.TrivialAugmentWide(num_magnitude_bins=10, interpolation="bilinear", fill=[1, 2, 3])),
    (T.RandAugment(), stoker.RandAugment()),
    (T.RandAugment(num_ops=3, magnitude=12, num_magnitude_bins=20, interpolation=I.BILINEAR, fill=9),
     stoker.RandAugment(num_ops=3, magnitude=12, num_magnitude_bins=20, interpolation="bilinear", fill=9)),
    (T.AutoAugment(), stoker.AutoAugment()),
    (T.AutoAugment(T.AutoAugmentPolicy.CIFAR10, fill=[5, 6, 7]), stoker.AutoAugment("cifar10", fill=[5, 6, 7])),
    (T.AutoAugment(T.AutoAugmentPolicy.SVHN, interpolation=I.BILINEAR),
     stoker.AutoAugment("svhn", interpolation="bilinear")),
    (T.RandomApply([T.ColorJitter(0.4, 0.4, 0.4, 0.1)], p=0.8),
     stoker.RandomApply([stoker.ColorJitter(0.4, 0.4, 0.4, 0.1)], p=0.8)),
    (T.RandomApply(torch.nn.ModuleList([T.RandomGrayscale(1.0), T.RandomSolarize(100)])),
     stoker.RandomApply([stoker.RandomGrayscale(1.0), stoker.RandomSolarize(100)])),
    (T.RandomApply([T.Compose([T.RandomInvert(1.0), T.RandomRotation(10)])], p=0.3),
     stoker.RandomApply([stoker.RandomInvert(1.0), stoker.RandomRotation(10)], p=0.3)),
]

# After ToTensor (float32).
TENSOR_STAGE = [
    (T.Normalize(MEAN, STD), stoker.Normalize(MEAN, STD)),
    (T.Normalize(MEAN, STD, inplace=True), stoker.Normalize(MEAN, STD)),
    (T.Normalize(0.5, 0.25), stoker.Normalize([0.5], [0.25])),
    (T.Normalize(torch.tensor(MEAN), (0.5, 0.5, 0.5)), stoker.Normalize(MEAN, [0.5, 0.5, 0.5])),
    (T.RandomErasing(), stoker.RandomErasing()),
    (T.RandomErasing(p=0.25, scale=(0.1, 0.5), ratio=(0.5, 2.0), value=(0.5, -1.0, 2.0), inplace=True),
     stoker.RandomErasing(p=0.25, scale=(0.1, 0.5), ratio=(0.5, 2.0), value=[0.5, -1.0, 2.0])),
    (T.RandomErasing(value="random"), stoker.RandomErasing(value="random")),
    (T.RandomErasing(value=[0.25]), stoker.RandomErasing(value=0.25)),
]


@pytest.mark.parametrize("tv,st", PIL_STAGE, ids=[describe(t) for t, _ in PIL_STAGE])
def test_pil_stage_transform_maps_to_stoker_with_equal_parameters(tv, st):
    s = split([tv, T.ToTensor()])
    assert reprs(s.native) == [repr(st)], s.reasons
    assert s.dtype == "float32" and s.tail == [] and s.reasons == [] and s.tail_input == "tensor"
    s = split(T.Compose([tv, T.PILToTensor()]))
    assert reprs(s.native) == [repr(st)] and s.dtype == "uint8"
    s = split([tv])  # the prefix may end on the PIL image
    assert reprs(s.native) == [repr(st)] and s.dtype is None and s.tail_input == "pil"


@pytest.mark.parametrize("tv,st", TENSOR_STAGE, ids=[describe(t) for t, _ in TENSOR_STAGE])
def test_tensor_stage_transform_maps_after_to_tensor(tv, st):
    s = split([T.CenterCrop(32), T.ToTensor(), tv])
    assert reprs(s.native) == [repr(stoker.CenterCrop(32)), repr(st)], s.reasons
    assert s.dtype == "float32" and s.tail == []
    s = split([T.CenterCrop(32), T.PILToTensor(), T.ConvertImageDtype(torch.float32), tv])
    assert reprs(s.native) == [repr(stoker.CenterCrop(32)), repr(st)] and s.dtype == "float32"


class MyCrop(T.RandomResizedCrop):
    def forward(self, img):
        return super().forward(img)


def my_function(img):
    return img


class Callable:
    def __call__(self, img):
        return img


with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # torchvision warns "Scale and ratio should be of kind (min, max)"
    REVERSED_SCALE = T.RandomResizedCrop(224, scale=(0.5, 0.1))

# (torchvision object, the reason's text): each stays Python, first of the tail.
UNMAPPED = [
    (T.Resize(256, interpolation=I.BICUBIC), "interpolation BICUBIC: stoker reproduces BILINEAR only"),
    (T.Resize(256, interpolation=I.NEAREST), "interpolation NEAREST: stoker reproduces BILINEAR only"),
    (T.Resize(256, max_size=200), "stoker refuses it: Resize: max_size = 200 must be strictly greater"),
    (T.RandomResizedCrop(224, interpolation=I.BICUBIC), "interpolation BICUBIC"),
    (T.RandomResizedCrop(224, interpolation=I.NEAREST), "interpolation NEAREST"),
    (T.RandomResizedCrop(224, scale=(0.0, 1.0)), "stoker refuses it: RandomResizedCrop: scale must be"),
    (REVERSED_SCALE, "stoker refuses it"),
    (T.RandomCrop(32, padding=4, padding_mode="reflect"), "padding_mode='reflect': stoker pads with a constant"),
    (T.RandomCrop(32, pad_if_needed=True, padding_mode="edge"), "padding_mode='edge'"),
    (T.RandomCrop(32, padding=4, fill=(1, 2)), "fill=(1, 2): stoker takes None, a number or 3 numbers"),
    (T.RandomCrop(32, padding=4, fill=300), "fill=300: outside 0..255"),
    (T.RandomCrop(32, padding=-2), "negative padding"),
    (T.RandomHorizontalFlip(p=1.5), "stoker refuses it: RandomHorizontalFlip: p must be in [0, 1]"),
    (T.Grayscale(), "num_output_channels=1: stoker's batches keep 3 channels"),
    (T.RandomRotation(30, expand=True), "expand=True"),
    (T.RandomRotation(30, interpolation=I.BICUBIC), "interpolation BICUBIC: stoker reproduces NEAREST and BILINEAR"),
    (T.RandomRotation(30, fill=[1]), "fill=[1]: stoker takes None, a number or 3 numbers"),
    (T.RandomAffine(10, fill=-1), "outside 0..255"),
    (T.RandomAffine(10, interpolation=I.BICUBIC), "interpolation BICUBIC"),
    (T.TrivialAugmentWide(interpolation=I.BICUBIC), "interpolation BICUBIC"),
    (T.RandAugment(magnitude=-1), "stoker refuses it"),
    (T.GaussianBlur(5), "GaussianBlur: stoker's kernel is within 1/255 of torchvision's, not exact"),
    (T.AugMix(), "AugMix: stoker's kernel is within 1/255 of torchvision's, not exact"),
    (T.RandomChoice([T.RandomHorizontalFlip(), T.RandomVerticalFlip()]), "no per-sample RandomChoice"),
    (T.RandomOrder([T.RandomHorizontalFlip(), T.RandomVerticalFlip()]), "stoker has no RandomOrder"),
    (T.RandomApply([T.RandomResizedCrop(32)]), "RandomApply: RandomResizedCrop is not an image-stage"),
    (T.RandomApply([T.ColorJitter(0.4), T.Lambda(my_function)]), "Lambda(my_function) inside: Lambda: Python code"),
    (T.RandomApply([T.Resize(32, interpolation=I.BICUBIC)]), "inside: interpolation BICUBIC"),
    (T.Pad(4), "stoker has no kernel for torchvision.transforms.Pad"),
    (T.RandomPerspective(), "stoker has no kernel for torchvision.transforms.RandomPerspective"),
    (T.Normalize(MEAN, STD), "needs a float tensor (torchvision raises on a PIL image)"),
    (T.RandomErasing(), "needs a tensor (torchvision raises on a PIL image)"),
    (T.ConvertImageDtype(torch.float32), "ConvertImageDtype on a PIL image: torchvision raises"),
    (MyCrop(224), "a subclass of torchvision.transforms.RandomResizedCrop (it may override forward or get_params)"),
    (T.Lambda(my_function), "Lambda: Python code"),
    (T.Lambda(lambda img: img), "Lambda: Python code"),
    (my_function, "not a torchvision transform stoker knows"),
    (Callable(), "not a torchvision transform stoker knows"),
    (T.Compose([T.Lambda(my_function)]), "Lambda: Python code"),  # nested Compose, flattened
]


@pytest.mark.parametrize("tv,reason", UNMAPPED, ids=[describe(t) for t, _ in UNMAPPED])
def test_unmapped_transform_runs_as_python_with_its_reason(tv, reason):
    s = split([T.CenterCrop(64), tv, T.ToTensor()])
    assert reprs(s.native) == [repr(stoker.CenterCrop(64))]
    first = s.tail[0]
    assert first is tv or first is getattr(tv, "transforms", [None])[0]
    assert s.tail[-1].__class__ is T.ToTensor and s.dtype is None and s.tail_input == "pil"
    assert s.reasons[0] == (describe(first), s.reasons[0][1]) and reason in s.reasons[0][1], s.reasons
    assert len(s.reasons) == len(s.tail)
    assert s.reasons[1][1] == f"after {describe(first)}, which runs in Python"


def test_tensor_stage_rules():
    # PIL-stage transforms on the tensor are torchvision's tensor kernels: Python.
    s = split([T.ToTensor(), T.Resize(32)])
    assert s.native == [] and s.dtype == "float32" and s.tail_input == "tensor"
    assert "Resize on a tensor: stoker's kernels follow torchvision on PIL images only" in s.reasons[0][1]
    # Normalize on uint8 raises in torchvision; ConvertImageDtype to float64 or to uint8 from float: Python.
    s = split([T.CenterCrop(8), T.PILToTensor(), T.Normalize(MEAN, STD)])
    assert s.dtype == "uint8" and "torchvision raises on uint8" in s.reasons[0][1]
    s = split([T.CenterCrop(8), T.PILToTensor(), T.ConvertImageDtype(torch.float64)])
    assert s.dtype == "uint8" and "ConvertImageDtype(torch.float64) on a uint8 tensor" in s.reasons[0][1]
    s = split([T.CenterCrop(8), T.ToTensor(), T.ConvertImageDtype(torch.uint8)])
    assert s.dtype == "float32" and len(s.tail) == 1
    # No-ops: float32 on float32, uint8 on uint8.
    s = split([T.CenterCrop(8), T.ToTensor(), T.ConvertImageDtype(torch.float)])
    assert reprs(s.native) == [repr(stoker.CenterCrop(8))] and s.dtype == "float32" and s.tail == []
    s = split([T.CenterCrop(8), T.PILToTensor(), T.ConvertImageDtype(torch.uint8)])
    assert s.dtype == "uint8" and s.tail == []
    # ToTensor and PILToTensor on a tensor raise in torchvision.
    assert "PILToTensor on a tensor" in split([T.ToTensor(), T.PILToTensor()]).reasons[0][1]
    # RandomErasing on uint8: integers in 0..255 only; then nothing but RandomErasing (stoker erases the output).
    s = split([T.CenterCrop(8), T.PILToTensor(), T.RandomErasing(value=(1, 2, 255)), T.RandomErasing(value=0)])
    assert s.dtype == "uint8" and len(s.native) == 3 and s.tail == []
    for bad in (0.5, -1, "random"):
        s = split([T.CenterCrop(8), T.PILToTensor(), T.RandomErasing(value=bad)])
        assert len(s.native) == 1 and "uint8 tensor" in s.reasons[0][1], bad
    s = split([T.CenterCrop(8), T.ToTensor(), T.RandomErasing(), T.Normalize(MEAN, STD)])
    assert len(s.native) == 2 and "after RandomErasing" in s.reasons[0][1]
    s = split([T.CenterCrop(8), T.PILToTensor(), T.RandomErasing(), T.ConvertImageDtype(torch.float)])
    assert s.dtype == "uint8" and "after RandomErasing" in s.reasons[0][1]
    # Normalize twice: stoker's Pipeline refuses anything but RandomErasing after Normalize.
    s = split([T.CenterCrop(8), T.ToTensor(), T.Normalize(MEAN, STD), T.Normalize(0.5, 0.5)])
    assert len(s.native) == 2 and "stoker's order rules" in s.reasons[0][1]
    # std 0: torchvision raises; stoker refuses it at construction.
    s = split([T.ToTensor(), T.Normalize(MEAN, [1, 0, 1])])
    assert s.native == [] and "std evaluated to zero" in s.reasons[0][1]


def test_to_tensor_follows_torch_default_dtype():
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        s = split([T.CenterCrop(8), T.ToTensor()])
    finally:
        torch.set_default_dtype(old)
    assert s.dtype is None and s.tail_input == "pil" and "default dtype" in s.reasons[0][1]


def test_order_rules_cut_where_stokers_pipeline_refuses():
    # A flip after an image-stage transform, a resize after a photometric one.
    s = split([T.RandomResizedCrop(64), T.ColorJitter(0.4), T.RandomHorizontalFlip(), T.ToTensor()])
    assert reprs(s.native) == reprs([stoker.RandomResizedCrop(64), stoker.ColorJitter(0.4)])
    assert s.tail_input == "pil" and s.dtype is None
    assert "RandomHorizontalFlip after ColorJitter" in s.reasons[0][1]
    s = split([T.RandomGrayscale(), T.Resize(32), T.CenterCrop(32), T.ToTensor()])
    assert reprs(s.native) == [repr(stoker.RandomGrayscale())]
    assert "Resize after RandomGrayscale" in s.reasons[0][1]
    # stoker applies RandomGrayscale to the output rows: a coloured padding after it stays Python; a grey one maps.
    s = split([T.RandomGrayscale(), T.RandomCrop(32, padding=4, fill=(124, 116, 104)), T.ToTensor()])
    assert len(s.native) == 1 and "coloured fill after RandomGrayscale" in s.reasons[0][1]
    s = split([T.RandomGrayscale(), T.RandomCrop(32, padding=4, fill=9), T.ToTensor()])
    assert len(s.native) == 2 and s.tail == []


def test_allow_within_one_maps_gaussian_blur_and_augmix():
    s = split([T.GaussianBlur((5, 3), sigma=(0.5, 1.5)), T.AugMix(severity=4, all_ops=False, fill=[1, 2, 3])],
              allow_within_one=True)
    assert reprs(s.native) == reprs([stoker.GaussianBlur((5, 3), sigma=(0.5, 1.5)),
                                     stoker.AugMix(severity=4, all_ops=False, fill=[1, 2, 3])])
    s = split([T.GaussianBlur(23)], allow_within_one=True)
    assert reprs(s.native) == [repr(stoker.GaussianBlur(23))]


def test_auto_augment_with_edited_policies_is_python():
    t = T.AutoAugment()
    t.policies = t.policies[:3]
    assert "policies differ" in split([t]).reasons[0][1]


def test_stoker_objects_pass_through():
    s = split([T.RandomResizedCrop(64), stoker.ColorJitter(0.4), T.ToTensor(), stoker.Normalize(MEAN, STD)])
    assert reprs(s.native) == reprs([stoker.RandomResizedCrop(64), stoker.ColorJitter(0.4),
                                     stoker.Normalize(MEAN, STD)])
    assert s.dtype == "float32" and s.tail == []
    # stoker's Normalize on the image includes ToTensor, as in stoker's own lists.
    s = split([stoker.CenterCrop(8), stoker.Normalize(MEAN, STD), T.RandomErasing()])
    assert len(s.native) == 3 and s.dtype == "float32"
    # A list of stoker's objects alone is stoker's API: returned as it is.
    only = [stoker.Resize(256), stoker.CenterCrop(224)]
    s = split(only)
    assert s.native == only and s.tail == [] and s.dtype is None
    # A stoker object has no Python implementation: where stoker cannot run it is an error.
    with pytest.raises(ValueError, match="stoker.CenterCrop after Lambda"):
        split([T.Lambda(my_function), stoker.CenterCrop(8)])
    with pytest.raises(ValueError, match="stoker.ColorJitter after ToTensor"):
        split([T.CenterCrop(8), T.ToTensor(), stoker.ColorJitter(0.4)])
    with pytest.raises(ValueError, match="RandomHorizontalFlip after ColorJitter"):
        split([T.ColorJitter(0.4), stoker.RandomHorizontalFlip()])


def test_inputs_none_tuple_nested_compose_and_sequential():
    s = split(None)
    assert s.native == [] and s.tail == [] and s.dtype is None
    inner = T.Compose([T.Resize(32), T.CenterCrop(32)])
    s = split((inner, torch.nn.Sequential(T.RandomHorizontalFlip()), T.ToTensor()))
    assert reprs(s.native) == reprs([stoker.Resize(32), stoker.CenterCrop(32), stoker.RandomHorizontalFlip()])
    # a Compose subclass may override __call__: Python, whole
    class MyCompose(T.Compose):
        pass
    s = split(MyCompose([T.Resize(32)]))
    assert s.native == [] and "a subclass of torchvision.transforms.Compose" in s.reasons[0][1]


def test_v2_classes_are_looked_up_by_exact_class(monkeypatch):
    """torchvision 0.14 has no transforms.v2: a stand-in module checks the lookup (v2's RandomShortestSize and
    Resize(None, max_size) map, as stoker documents them; any other v2 class is Python)."""
    import types
    v2 = types.ModuleType("torchvision.transforms.v2")

    class RandomShortestSize:
        def __init__(self, min_size, max_size=None, interpolation=I.BILINEAR, antialias=True):
            self.min_size = [min_size] if isinstance(min_size, int) else list(min_size)
            self.max_size, self.interpolation, self.antialias = max_size, interpolation, antialias

    class Resize:
        def __init__(self, size, interpolation=I.BILINEAR, max_size=None, antialias=True):
            self.size = [size] if isinstance(size, int) else size
            self.interpolation, self.max_size, self.antialias = interpolation, max_size, antialias

    class Compose:
        def __init__(self, transforms):
            self.transforms = transforms

    class RandomResizedCrop:
        pass

    for cls in (RandomShortestSize, Resize, Compose, RandomResizedCrop):
        cls.__module__ = v2.__name__
        setattr(v2, cls.__name__, cls)
    monkeypatch.setattr(T, "v2", v2, raising=False)
    s = split(v2.Compose([v2.RandomShortestSize([480, 512], max_size=800), T.RandomCrop(480, pad_if_needed=True),
                          v2.Resize(None, max_size=512), T.CenterCrop(512), T.PILToTensor()]))
    assert reprs(s.native) == reprs([stoker.RandomShortestSize([480, 512], max_size=800),
                                     stoker.RandomCrop(480, pad_if_needed=True), stoker.Resize(None, max_size=512),
                                     stoker.CenterCrop(512)])
    assert s.dtype == "uint8" and s.tail == []
    s = split([v2.Resize(256), T.ToTensor()])
    assert s.native == [] and "only Resize(size=None, max_size) is confirmed" in s.reasons[0][1]
    s = split([v2.RandomShortestSize(480, interpolation=I.BICUBIC)])
    assert "BICUBIC" in s.reasons[0][1]
    s = split([v2.RandomResizedCrop()])
    assert "torchvision.transforms.v2.RandomResizedCrop: not mapped" in s.reasons[0][1]


def test_describe():
    assert describe(T.Resize(256, interpolation=I.BICUBIC)) == "Resize(size=256, interpolation=bicubic)"
    assert describe(T.Resize(256)) == "Resize(size=256)"
    assert describe(T.RandomResizedCrop(224)) == "RandomResizedCrop(size=(224, 224))"
    assert describe(T.RandomResizedCrop(224, scale=(0.5, 1))) == "RandomResizedCrop(size=(224, 224), scale=(0.5, 1))"
    assert describe(T.Lambda(my_function)) == "Lambda(my_function)"
    assert describe(my_function) == "my_function"
    assert describe(T.RandomApply([T.RandomInvert()], p=0.8)) == "RandomApply([RandomInvert(p=0.5)], p=0.8)"
    assert describe(T.ToTensor()) == "ToTensor()"
    assert describe(stoker.CenterCrop(8)) == "stoker.CenterCrop(size=(8, 8))"
    assert "\n" not in describe(T.Compose([T.ToTensor(), T.ToTensor()]))


def test_pipeline_error_fallback_agrees_with_stoker():
    """split() checks each prefix with stoker._stoker._pipeline_error; without it (an older build), a fallback."""
    cases = [([stoker.CenterCrop(8), stoker.Normalize(MEAN, STD)], "float32", ""),
             ([stoker.Resize(256)], "float32", ""),  # not a fixed size: accepted (a Python stage may follow)
             ([stoker.CenterCrop(8), stoker.Normalize(MEAN, STD)], "uint8", "requires dtype float32"),
             ([stoker.ColorJitter(0.4), stoker.CenterCrop(8)], "float32", "CenterCrop after ColorJitter"),
             ([stoker.RandomGrayscale(), stoker.Resize(8)], "uint8", "Resize after RandomGrayscale"),
             ([stoker.CenterCrop(8), stoker.RandomErasing(value="random")], "uint8", "requires dtype float32"),
             ([stoker.Normalize(MEAN, STD), stoker.RandomInvert()], "float32", "only RandomErasing may follow")]
    for ts, dtype, want in cases:
        fallback = tvmap._pipeline_error_fallback(ts, dtype)
        assert (fallback == "") if not want else (want in fallback), (ts, fallback)
        if hasattr(_stoker, "_pipeline_error"):
            assert (_stoker._pipeline_error(ts, dtype, False) == "") == (fallback == ""), ts


def test_split_without_pipeline_error_uses_the_fallback(monkeypatch):
    monkeypatch.delattr(_stoker, "_pipeline_error", raising=False)
    s = split([T.RandomResizedCrop(64), T.ColorJitter(0.4), T.RandomHorizontalFlip(), T.ToTensor()])
    assert len(s.native) == 2 and "RandomHorizontalFlip after ColorJitter" in s.reasons[0][1]
    s = split(classification_train(64, auto_augment_policy="ta_wide", random_erase_prob=0.5))
    assert len(s.native) == 5 and s.tail == []


# --- 2. deterministic pipelines equal torchvision on real photos -------------------------------------------------

def torchvision_batch(folder, tv_transform, n):
    ds = torchvision.datasets.ImageFolder(folder, transform=tv_transform)
    return torch.stack([ds[i][0] for i in range(n)])


def stoker_batch(folder, s, n, **kw):
    assert s.tail == [], s.reasons
    loader = stoker.Loader(folder, batch_size=n, transforms=s.native, dtype=s.dtype, progress=False, **kw)
    x, _ = next(iter(loader))
    return x


DETERMINISTIC = {
    "eval-to-tensor": [T.Resize(256), T.CenterCrop(224), T.ToTensor(), T.Normalize(MEAN, STD)],
    "eval-preset": [T.Resize(256), T.CenterCrop(224), T.PILToTensor(), T.ConvertImageDtype(torch.float),
                    T.Normalize(MEAN, STD)],
    "pil-to-tensor": [T.Resize((160, 200)), T.CenterCrop(128), T.PILToTensor()],
    "to-tensor": [T.Resize(100, max_size=150), T.CenterCrop((90, 70)), T.ToTensor()],
    "flips-and-padding": [T.RandomVerticalFlip(1.0), T.Resize(80), T.RandomHorizontalFlip(1.0),
                          T.CenterCrop((100, 96)), T.PILToTensor()],
    # RandomCrop to the padded size: no offset to draw; the padding and its colour checked
    "random-crop-padded": [T.Resize((60, 50)), T.RandomCrop((68, 62), padding=(4, 4, 8, 4), fill=(124, 116, 104)),
                           T.PILToTensor()],
    "grey-padding-after-grayscale": [T.Resize((60, 50)), T.RandomGrayscale(1.0),
                                     T.RandomCrop((64, 54), padding=2, fill=9), T.PILToTensor()],
    # the image stage with p=1 or one-point ranges: no draws, so the parameters' transfer is checked end to end
    "colour-p1": [T.Resize(72), T.CenterCrop(64), T.RandomGrayscale(1.0), T.RandomInvert(1.0),
                  T.RandomSolarize(100, p=1.0), T.RandomPosterize(3, p=1.0), T.PILToTensor()],
    "enhance-p1": [T.Resize(72), T.CenterCrop(64), T.RandomAdjustSharpness(3.0, p=1.0), T.RandomAutocontrast(1.0),
                   T.RandomEqualize(1.0), T.ColorJitter(brightness=(1.3, 1.3)), T.ColorJitter(hue=(0.1, 0.1)),
                   T.ColorJitter(saturation=(0.4, 0.4)), T.ToTensor(), T.Normalize(MEAN, STD)],
    "warps-fixed": [T.Resize(72), T.CenterCrop((64, 80)),
                    T.RandomRotation((30, 30), interpolation=I.BILINEAR, center=(10, 20), fill=(10, 200, 30)),
                    T.RandomAffine((-12, -12), scale=(0.8, 0.8), shear=(5, 5, -7, -7), fill=128),
                    T.Grayscale(3), T.RandomApply([T.RandomInvert(1.0)], p=1.0), T.PILToTensor()],
}


@pytest.mark.parametrize("name", sorted(DETERMINISTIC))
def test_deterministic_pipeline_equals_torchvision(photos, name):
    pipeline = DETERMINISTIC[name]
    s = split(T.Compose(pipeline))
    assert s.tail == [], s.reasons
    n = 8
    x = stoker_batch(photos, s, n)
    ref = torchvision_batch(photos, T.Compose(pipeline), n)
    assert x.shape == ref.shape and x.dtype == ref.dtype
    if x.dtype == torch.uint8:
        assert torch.equal(x, ref)
    else:
        assert (x - ref).abs().max().item() <= 1e-6


# --- 3. presets and replay ---------------------------------------------------------------------------------------

def classification_train(crop_size, interpolation=I.BILINEAR, hflip_prob=0.5, auto_augment_policy=None,
                         ra_magnitude=9, augmix_severity=3, random_erase_prob=0.0):
    """torchvision references/classification/presets.py, ClassificationPresetTrain (the 0.14 release)."""
    trans = [T.RandomResizedCrop(crop_size, interpolation=interpolation)]
    if hflip_prob > 0:
        trans.append(T.RandomHorizontalFlip(hflip_prob))
    if auto_augment_policy is not None:
        if auto_augment_policy == "ra":
            trans.append(T.RandAugment(interpolation=interpolation, magnitude=ra_magnitude))
        elif auto_augment_policy == "ta_wide":
            trans.append(T.TrivialAugmentWide(interpolation=interpolation))
        elif auto_augment_policy == "augmix":
            trans.append(T.AugMix(interpolation=interpolation, severity=augmix_severity))
        else:
            trans.append(T.AutoAugment(policy=T.AutoAugmentPolicy(auto_augment_policy), interpolation=interpolation))
    trans.extend([T.PILToTensor(), T.ConvertImageDtype(torch.float), T.Normalize(mean=MEAN, std=STD)])
    if random_erase_prob > 0:
        trans.append(T.RandomErasing(p=random_erase_prob))
    return T.Compose(trans)


def classification_eval(crop_size, resize_size=256, interpolation=I.BILINEAR):
    """ClassificationPresetEval."""
    return T.Compose([T.Resize(resize_size, interpolation=interpolation), T.CenterCrop(crop_size), T.PILToTensor(),
                      T.ConvertImageDtype(torch.float), T.Normalize(mean=MEAN, std=STD)])


POLICIES = {
    None: [],
    "ta_wide": [stoker.TrivialAugmentWide(interpolation="bilinear")],
    "ra": [stoker.RandAugment(interpolation="bilinear", magnitude=9)],
    "imagenet": [stoker.AutoAugment("imagenet", interpolation="bilinear")],
    "cifar10": [stoker.AutoAugment("cifar10", interpolation="bilinear")],
}


@pytest.mark.parametrize("policy", [None, "ta_wide", "ra", "imagenet", "cifar10"])
@pytest.mark.parametrize("erase", [0.0, 0.25])
def test_train_preset_maps_to_the_hand_written_stoker_list(policy, erase):
    s = split(classification_train(176, auto_augment_policy=policy, random_erase_prob=erase))
    want = [stoker.RandomResizedCrop(176), stoker.RandomHorizontalFlip(0.5)] + POLICIES[policy] + [
        stoker.Normalize(MEAN, STD)] + ([stoker.RandomErasing(p=erase)] if erase else [])
    assert reprs(s.native) == reprs(want), s.reasons
    assert s.dtype == "float32" and s.tail == [] and s.reasons == []


def test_train_preset_with_augmix_or_bicubic():
    # AugMix is within 1/255 in stoker: Python from it on, unless allowed.
    preset = classification_train(176, auto_augment_policy="augmix", random_erase_prob=0.1)
    s = split(preset)
    assert reprs(s.native) == reprs([stoker.RandomResizedCrop(176), stoker.RandomHorizontalFlip()])
    assert s.tail == preset.transforms[2:] and s.tail_input == "pil" and s.dtype is None
    s = split(preset, allow_within_one=True)
    assert reprs(s.native) == reprs([stoker.RandomResizedCrop(176), stoker.RandomHorizontalFlip(),
                                     stoker.AugMix(severity=3, interpolation="bilinear"), stoker.Normalize(MEAN, STD),
                                     stoker.RandomErasing(p=0.1)])
    # --interpolation bicubic: every resize is Python
    s = split(classification_train(176, interpolation=I.BICUBIC))
    assert s.native == [] and "BICUBIC" in s.reasons[0][1]
    s = split(classification_eval(224))
    assert reprs(s.native) == reprs([stoker.Resize(256), stoker.CenterCrop(224), stoker.Normalize(MEAN, STD)])
    assert s.dtype == "float32"


def test_random_resized_crop_flip_equal_torchvision_with_the_same_draws(photos):
    """As test_transforms.py's replay: each sample's box and flip, drawn by stoker, applied by torchvision."""
    s = split(T.Compose([T.RandomResizedCrop(96), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(MEAN, STD)]))
    seed, n = 5, 12
    x = stoker_batch(photos, s, n, seed=seed)
    ds = torchvision.datasets.ImageFolder(photos)
    flips = 0
    for i in range(n):
        img, _ = ds[i]
        plan = _stoker._testing.plan(s.native, seed, 0, i, img.width, img.height)
        rx, ry, rw, rh = plan["decode_region"]
        ref = F.resized_crop(img, ry, rx, rh, rw, [96, 96], I.BILINEAR)
        if plan["mirror"]:
            ref = F.hflip(ref)
            flips += 1
        ref = F.normalize(F.to_tensor(ref), MEAN, STD)
        assert (x[i] - ref).abs().max().item() <= 1e-6, i
    assert 0 < flips < n


def test_trivial_augment_train_preset_equals_torchvision_with_the_same_draws(photos):
    """The whole ta_wide + RandomErasing train preset, replayed: crop, flip, the policy's ops, ToTensor via
    PILToTensor + ConvertImageDtype, Normalize and the erased boxes, torchvision's functions on each draw."""
    from test_augment import reference  # the image-stage replay: crop, flip, then each drawn op by torchvision
    preset = classification_train(64, auto_augment_policy="ta_wide", random_erase_prob=0.5)
    s = split(preset)
    assert s.tail == [] and s.dtype == "float32"
    seed, n = 9, 12
    x = stoker_batch(photos, s, n, seed=seed)
    ds = torchvision.datasets.ImageFolder(photos)
    ops = erased = 0
    for i in range(n):
        img, _ = ds[i]
        plan = _stoker._testing.plan(s.native, seed, 0, i, img.width, img.height)
        ops += len(plan["image_ops"])
        ref = F.normalize(F.convert_image_dtype(F.pil_to_tensor(reference(img, plan, (64, 64))), torch.float),
                          MEAN, STD)
        for bi, bj, bh, bw in plan["erase"]:
            ref = F.erase(ref, bi, bj, bh, bw, torch.tensor([0])[:, None, None])
            erased += 1
        assert (x[i] - ref).abs().max().item() <= 1e-6, (i, plan["image_ops"])
    assert ops and erased


# --- 4. the cut ----------------------------------------------------------------------------------------------------

def invert(img):
    return ImageOps.invert(img)


def test_lambda_on_the_pil_image_cuts_there_and_the_tail_completes_it(photos):
    pipeline = T.Compose([T.Resize(80), T.CenterCrop((72, 64)), T.Lambda(invert), T.RandomVerticalFlip(1.0),
                          T.ToTensor(), T.Normalize(MEAN, STD)])
    s = split(pipeline)
    assert reprs(s.native) == reprs([stoker.Resize(80), stoker.CenterCrop((72, 64))])
    assert s.dtype is None and s.tail_input == "pil" and s.tail == pipeline.transforms[2:]
    assert s.reasons[0] == ("Lambda(invert)", "Lambda: Python code")
    n = 6
    x, _ = next(iter(stoker.Loader(photos, batch_size=n, transforms=s.native, dtype="uint8", layout="NHWC",
                                   progress=False)))
    ref = torchvision_batch(photos, pipeline, n)
    for i in range(n):
        out = Image.fromarray(x[i].numpy())  # what torchvision has at the cut: the PIL RGB image
        for t in s.tail:
            out = t(out)
        assert (out - ref[i]).abs().max().item() <= 1e-6, i


def test_lambda_on_the_tensor_cuts_there_and_the_tail_completes_it(photos):
    pipeline = T.Compose([T.Resize(80), T.CenterCrop(64), T.PILToTensor(), T.ConvertImageDtype(torch.float),
                          T.Lambda(lambda t: t.flip(-2) * 0.5), T.Normalize(MEAN, STD)])
    s = split(pipeline)
    assert reprs(s.native) == reprs([stoker.Resize(80), stoker.CenterCrop(64)])
    assert s.dtype == "float32" and s.tail_input == "tensor" and s.tail == pipeline.transforms[4:]
    n = 6
    x, _ = next(iter(stoker.Loader(photos, batch_size=n, transforms=s.native, dtype=s.dtype, progress=False)))
    ref = torchvision_batch(photos, pipeline, n)
    for i in range(n):
        out = x[i]
        for t in s.tail:
            out = t(out)
        assert (out - ref[i]).abs().max().item() <= 1e-6, i


def test_python_transform_after_normalize_keeps_the_whole_native_prefix():
    s = split([T.RandomResizedCrop(64), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(MEAN, STD),
               T.Lambda(my_function)])
    assert reprs(s.native) == reprs([stoker.RandomResizedCrop(64), stoker.RandomHorizontalFlip(),
                                     stoker.Normalize(MEAN, STD)])
    assert s.dtype == "float32" and s.tail_input == "tensor" and len(s.tail) == 1
