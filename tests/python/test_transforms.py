"""Transforms against torchvision 0.14 on PIL images (the DataLoader baseline).

Tolerance: stoker reproduces PIL's fixed-point bilinear resampling and the
float32 ToTensor/Normalize arithmetic, so outputs are expected to be equal;
the assertions allow 1e-6 (float32) or 0 (uint8).
"""
import math

import numpy as np
import pytest
import torch
import torchvision
import torchvision.transforms as T
import torchvision.transforms.functional as F
from PIL import Image

import stoker

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def torchvision_batch(folder, tv_transform, n):
    ds = torchvision.datasets.ImageFolder(folder, transform=tv_transform)
    xs, ys = zip(*[ds[i] for i in range(n)])
    return torch.stack(xs), torch.tensor(ys)


def first_batch(loader):
    return next(iter(loader))


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_resize_centercrop_normalize_equal_torchvision(photos, layout):
    n = 24
    loader = stoker.Loader(photos, batch_size=n, transforms=[stoker.Resize(256), stoker.CenterCrop(224),
                                                             stoker.Normalize(MEAN, STD)], layout=layout)
    x, y = first_batch(loader)
    ref_x, ref_y = torchvision_batch(photos, T.Compose([T.Resize(256), T.CenterCrop(224), T.ToTensor(),
                                                        T.Normalize(MEAN, STD)]), n)
    if layout == "NHWC":
        ref_x = ref_x.permute(0, 2, 3, 1)
    assert x.shape == ref_x.shape and x.dtype == torch.float32
    assert torch.equal(y, ref_y) and y.dtype == torch.int64
    assert (x - ref_x).abs().max().item() <= 1e-6


@pytest.mark.parametrize("size", [(160, 200), (37, 300), 64])
def test_resize_uint8_equal_pil(photos, size):
    tv = T.Compose([T.Resize(size if isinstance(size, tuple) else size), T.CenterCrop(64), T.PILToTensor()])
    st = [stoker.Resize(size), stoker.CenterCrop(64)]
    loader = stoker.Loader(photos, batch_size=8, transforms=st, dtype="uint8")
    x, _ = first_batch(loader)
    ref, _ = torchvision_batch(photos, tv, 8)
    assert x.dtype == torch.uint8
    assert torch.equal(x, ref)


def test_centercrop_larger_than_image_pads_like_torchvision(photos):
    tv = T.Compose([T.Resize(100), T.CenterCrop((150, 117)), T.PILToTensor()])
    loader = stoker.Loader(photos, batch_size=6, transforms=[stoker.Resize(100), stoker.CenterCrop((150, 117))],
                           dtype="uint8")
    x, _ = first_batch(loader)
    ref, _ = torchvision_batch(photos, tv, 6)
    assert torch.equal(x, ref)


def test_random_resized_crop_flip_equal_torchvision_with_same_params(photos):
    """Each sample's crop box and flip, as stoker drew them, applied by torchvision."""
    transforms = [stoker.RandomResizedCrop(224), stoker.RandomHorizontalFlip(), stoker.Normalize(MEAN, STD)]
    seed, n = 5, 24
    loader = stoker.Loader(photos, batch_size=n, seed=seed, transforms=transforms)
    loader.set_epoch(3)
    x, y = first_batch(loader)
    ds = torchvision.datasets.ImageFolder(photos)
    flips = 0
    for i in range(n):
        img, label = ds[i]
        plan = stoker._stoker._testing.plan(transforms, seed, 3, i, img.width, img.height)
        rx, ry, rw, rh = plan["decode_region"]
        ref = F.resized_crop(img, ry, rx, rh, rw, [224, 224], T.InterpolationMode.BILINEAR)
        if plan["mirror"]:
            ref = F.hflip(ref)
            flips += 1
        ref = F.normalize(F.to_tensor(ref), MEAN, STD)
        assert y[i].item() == label
        assert (x[i] - ref).abs().max().item() <= 1e-6, i
    assert 0 < flips < n


@pytest.mark.parametrize("dtype", ["uint8", "float32"])
def test_random_grayscale_equals_torchvision_with_same_draws(photos, dtype):
    """The photometric stage: RandomGrayscale after the crop and flip, as PIL's convert("L") to 3 channels."""
    transforms = [stoker.RandomResizedCrop((60, 80)), stoker.RandomHorizontalFlip(), stoker.RandomGrayscale(p=0.5),
                  stoker.CenterCrop((50, 70))]
    if dtype == "float32":
        transforms.append(stoker.Normalize(MEAN, STD))
    seed, n = 11, 16
    loader = stoker.Loader(photos, batch_size=n, seed=seed, transforms=transforms, dtype=dtype)
    x, _ = first_batch(loader)
    ds = torchvision.datasets.ImageFolder(photos)
    grays = 0
    for i in range(n):
        img, _ = ds[i]
        plan = stoker._stoker._testing.plan(transforms, seed, 0, i, img.width, img.height)
        rx, ry, rw, rh = plan["decode_region"]
        ref = F.resized_crop(img, ry, rx, rh, rw, [60, 80], T.InterpolationMode.BILINEAR)
        if plan["mirror"]:
            ref = F.hflip(ref)
        if plan["photometric"] == ["grayscale"]:
            ref = F.rgb_to_grayscale(ref, num_output_channels=3)
            grays += 1
        ref = F.center_crop(ref, [50, 70])
        if dtype == "uint8":
            assert torch.equal(x[i], F.pil_to_tensor(ref)), i
        else:
            assert (x[i] - F.normalize(F.to_tensor(ref), MEAN, STD)).abs().max().item() <= 1e-6, i
    assert 0 < grays < n


def test_resize_after_a_photometric_transform_is_refused(photos):
    with pytest.raises(ValueError, match="Resize after RandomGrayscale: photometric transforms apply to the output"):
        stoker.Loader(photos, transforms=[stoker.RandomGrayscale(), stoker.Resize((32, 32))])
    assert repr(stoker.RandomGrayscale()) == "RandomGrayscale(p=0.1)"


def test_flip_before_crop_is_respected(photos):
    """RandomHorizontalFlip(p=1) before a crop: crop coordinates are in the flipped image."""
    st = [stoker.RandomHorizontalFlip(p=1.0), stoker.Resize((90, 120)), stoker.CenterCrop((50, 70))]
    tv = T.Compose([T.RandomHorizontalFlip(p=1.0), T.Resize((90, 120)), T.CenterCrop((50, 70)), T.PILToTensor()])
    x, _ = first_batch(stoker.Loader(photos, batch_size=5, transforms=st, dtype="uint8"))
    ref, _ = torchvision_batch(photos, tv, 5)
    assert torch.equal(x, ref)


def expected_rrc_fallback(width, height, ratio=(3 / 4, 4 / 3)):
    in_ratio = width / height
    if in_ratio < min(ratio):
        w, h = width, int(round(width / min(ratio)))
    elif in_ratio > max(ratio):
        h, w = height, int(round(height * max(ratio)))
    else:
        w, h = width, height
    return (height - h) // 2, (width - w) // 2, h, w


@pytest.mark.parametrize("width,height", [(500, 375), (300, 500), (64, 64)])
def test_random_resized_crop_boxes_follow_torchvision_rules(width, height):
    t = stoker.RandomResizedCrop(224)
    boxes = stoker._stoker._testing.random_resized_crop_boxes(t, width, height, 1, 20000)
    area = width * height
    fracs = [h * w / area for _, _, h, w in boxes]
    for top, left, h, w in boxes:
        assert 0 < w <= width and 0 < h <= height
        assert 0 <= top <= height - h and 0 <= left <= width - w
        if (top, left, h, w) == expected_rrc_fallback(width, height):
            continue
        # Rounded from a box with area in scale and aspect in ratio.
        assert (math.sqrt(0.08 * area) - 1.5) ** 2 <= w * h <= area
        assert 3 / 4 * 0.9 <= w / h <= 4 / 3 * 1.1 or min(w, h) < 20
    # Compare the area distribution with torchvision's own get_params.
    torch.manual_seed(0)
    img = Image.new("RGB", (width, height))
    ref = [T.RandomResizedCrop.get_params(img, (0.08, 1.0), (3 / 4, 4 / 3)) for _ in range(20000)]
    ref_fracs = [h * w / area for _, _, h, w in ref]
    assert abs(np.mean(fracs) - np.mean(ref_fracs)) < 0.02
    assert abs(np.median(fracs) - np.median(ref_fracs)) < 0.03


@pytest.mark.parametrize("width,height", [(1000, 10), (10, 1000), (40, 30)])
def test_random_resized_crop_fallback(width, height):
    t = stoker.RandomResizedCrop(224, scale=(0.99, 1.0), ratio=(3 / 4, 4 / 3))
    boxes = stoker._stoker._testing.random_resized_crop_boxes(t, width, height, 3, 200)
    if width / height > 4 / 3 or width / height < 3 / 4:
        # No box of that aspect fits: every draw falls back to torchvision's central crop.
        assert all(b == expected_rrc_fallback(width, height) for b in boxes)
    else:
        assert all(b[2] * b[3] >= 0.9 * width * height for b in boxes)


def test_bad_transform_arguments_raise_value_error(photos):
    # A transform's own parameters are checked when it is constructed, as torchvision does.
    with pytest.raises(ValueError, match="scale"):
        stoker.RandomResizedCrop(224, scale=(0.9, 0.1))
    with pytest.raises(ValueError, match="p must be in"):
        stoker.RandomHorizontalFlip(2.0)
    with pytest.raises(ValueError, match="p must be in"):
        stoker.RandomGrayscale(-0.1)
    with pytest.raises(ValueError, match="std evaluated to zero"):
        stoker.Normalize(MEAN, [1, 0, 1])
    with pytest.raises(ValueError, match="size must be positive"):
        stoker.CenterCrop(0)
    with pytest.raises(ValueError, match="max_size = -3 must be strictly greater than the requested size 10"):
        stoker.Resize(10, max_size=-3)
    with pytest.raises(ValueError, match="max_size is only allowed when size is a single int"):
        stoker.Resize((10, 12), max_size=20)
    for bad in ("ab", 2.5, True, [1, 2.0], None):
        with pytest.raises(TypeError, match="size must be an int or a sequence of 1 or 2 ints"):
            stoker.CenterCrop(bad)
    with pytest.raises(ValueError, match="got 3 values"):
        stoker.Resize([1, 2, 3])
    # What depends on the whole pipeline is checked by the Loader.
    with pytest.raises(ValueError, match="same size"):
        stoker.Loader(photos, transforms=[stoker.Resize(256)])
    with pytest.raises(ValueError, match="last"):
        stoker.Loader(photos, transforms=[stoker.Normalize(MEAN, STD), stoker.CenterCrop(8)])
    with pytest.raises(ValueError, match="float32"):
        stoker.Loader(photos, transforms=[stoker.CenterCrop(8), stoker.Normalize(MEAN, STD)], dtype="uint8")


@pytest.mark.parametrize("pipeline", ["train", "val"])
def test_decode_scale_auto_is_close_to_exact(photos, pipeline):
    """DCT-scaled decoding: same crops, pixels within a stated tolerance of the
    exact (torchvision-equal) output: mean |diff| <= 2/255 and 99th percentile
    <= 12/255 in uint8, on real photos (many crops shrink 2x or more)."""
    if pipeline == "train":
        tf = [stoker.RandomResizedCrop(64), stoker.RandomHorizontalFlip()]
    else:
        tf = [stoker.Resize(100), stoker.CenterCrop(96)]
    exact = stoker.Loader(photos, batch_size=24, seed=3, transforms=tf, dtype="uint8")
    auto = stoker.Loader(photos, batch_size=24, seed=3, transforms=tf, dtype="uint8", decode_scale="auto")
    (a, ya), (b, yb) = next(iter(exact)), next(iter(auto))
    assert torch.equal(ya, yb)
    diff = (a.float() - b.float()).abs()
    assert diff.mean() <= 2.0
    assert diff.flatten().kthvalue(int(0.99 * diff.numel())).values <= 12
    assert diff.max() > 0, "the scaled path was taken"


def test_reprs_and_the_accepted_types_come_from_each_transforms_definition():
    assert repr(stoker.RandomResizedCrop(224)) == "RandomResizedCrop(size=(224, 224), scale=(0.08, 1), ratio=(0.75, 1.33333))"
    assert repr(stoker.Resize(256)) == "Resize(size=256)"
    assert repr(stoker.Resize(256, max_size=300)) == "Resize(size=256, max_size=300)"
    assert repr(stoker.Resize((32, 48))) == "Resize(size=(32, 48))"
    assert repr(stoker.CenterCrop(224)) == "CenterCrop(size=(224, 224))"
    assert repr(stoker.RandomHorizontalFlip()) == "RandomHorizontalFlip(p=0.5)"
    assert repr(stoker.Normalize([0.5], [0.25])) == "Normalize(mean=[0.5], std=[0.25])"
    assert repr(stoker.RandomVerticalFlip(0.25)) == "RandomVerticalFlip(p=0.25)"
    assert repr(stoker.RandomGrayscale(0.2)) == "RandomGrayscale(p=0.2)"
    assert set(stoker._stoker._transform_types) == {
        stoker.RandomResizedCrop, stoker.Resize, stoker.CenterCrop, stoker.RandomHorizontalFlip,
        stoker.RandomVerticalFlip, stoker.RandomGrayscale, stoker.Normalize, stoker.ColorJitter, stoker.Grayscale,
        stoker.GaussianBlur, stoker.RandomSolarize, stoker.RandomPosterize, stoker.RandomAutocontrast,
        stoker.RandomEqualize, stoker.RandomAdjustSharpness, stoker.RandomInvert, stoker.RandomRotation,
        stoker.RandomAffine, stoker.TrivialAugmentWide, stoker.RandAugment, stoker.AutoAugment, stoker.RandomErasing,
        stoker.RandomApply, stoker.AugMix, stoker.RandomCrop, stoker.RandomShortestSize}
    assert repr(stoker.Resize(None, max_size=512)) == "Resize(size=None, max_size=512)"
    assert repr(stoker.RandomCrop(32, padding=(1, 2), pad_if_needed=True, fill=5)) == (
        "RandomCrop(size=(32, 32), padding=(1, 2, 1, 2), pad_if_needed=True, fill=(5, 5, 5))")
    assert repr(stoker.RandomSolarize(100.5, p=0.25)) == "RandomSolarize(threshold=100.5, p=0.25)"
    assert repr(stoker.RandomAdjustSharpness(2)) == "RandomAdjustSharpness(sharpness_factor=2, p=0.5)"
    with pytest.raises(ValueError, match="is not a stoker transform .*RandomResizedCrop"):
        stoker.Loader("/nonexistent", transforms=["crop"])


@pytest.mark.parametrize("pipeline", [
    # a crop after the flip: its box is in the flipped image (and padded asymmetrically)
    lambda V, H, R, C: [V(p=1.0), R((90, 120)), C((95, 70))],
    # both flips, a random crop and a resize after them
    lambda V, H, R, C: [V(p=1.0), H(p=1.0), R((64, 48))],
    lambda V, H, R, C: [V(p=0.0), R((40, 40))],
])
def test_vertical_flip_equals_torchvision(photos, pipeline):
    st = pipeline(stoker.RandomVerticalFlip, stoker.RandomHorizontalFlip, stoker.Resize, stoker.CenterCrop)
    tv = T.Compose(pipeline(T.RandomVerticalFlip, T.RandomHorizontalFlip, T.Resize, T.CenterCrop) + [T.PILToTensor()])
    for dtype in ("uint8", "float32"):
        x, _ = first_batch(stoker.Loader(photos, batch_size=5, transforms=st, dtype=dtype))
        ref, _ = torchvision_batch(photos, tv, 5)
        if dtype == "float32":
            ref = ref.float() / 255
            assert (x - ref).abs().max().item() <= 1e-6
        else:
            assert torch.equal(x, ref)


def test_random_vertical_flip_with_random_crops_equals_torchvision_with_same_params(photos):
    """p=0.5 before RandomResizedCrop: each sample's draw, applied by torchvision."""
    transforms = [stoker.RandomVerticalFlip(), stoker.RandomResizedCrop(64)]
    seed, n = 11, 24
    x, _ = first_batch(stoker.Loader(photos, batch_size=n, seed=seed, transforms=transforms, dtype="uint8"))
    ds = torchvision.datasets.ImageFolder(photos)
    flips = 0
    for i in range(n):
        img, _ = ds[i]
        plan = stoker._stoker._testing.plan(transforms, seed, 0, i, img.width, img.height)
        rx, ry, rw, rh = plan["decode_region"]  # in the unflipped image
        ref = F.resized_crop(img, ry, rx, rh, rw, [64, 64], T.InterpolationMode.BILINEAR)
        if plan["vflip"]:
            ref = F.vflip(ref)
            flips += 1
        assert torch.equal(x[i], F.pil_to_tensor(ref)), i
    assert 0 < flips < n


def test_orders_stoker_cannot_reproduce_are_refused(photos):
    # A coloured padding after RandomGrayscale would be greyed with the output rows; torchvision keeps it.
    with pytest.raises(ValueError, match="coloured fill after RandomGrayscale"):
        stoker.Loader(photos, transforms=[stoker.RandomGrayscale(0.5), stoker.RandomCrop(600, pad_if_needed=True,
                                                                                       fill=(200, 10, 10))])
    stoker.Loader(photos, transforms=[stoker.RandomGrayscale(0.5), stoker.RandomCrop(600, pad_if_needed=True,
                                                                                   fill=7)])  # grey: exact
    # Normalize after RandomErasing would leave the erased value unnormalised.
    with pytest.raises(ValueError, match="Normalize after RandomErasing"):
        stoker.Loader(photos, transforms=[stoker.CenterCrop(32), stoker.RandomErasing(),
                                          stoker.Normalize([0.5] * 3, [0.2] * 3)])
