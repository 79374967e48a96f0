"""The policies' ops on a uint8 image tensor (tensor_ops.cc) against
torchvision 0.14's autoaugment._apply_op(img, name, magnitude, interpolation,
fill) with img = the RGB array as a [1, 3, H, W] tensor (what AugMix does to a
PIL image after pil_to_tensor): every op, the magnitudes of AugMix's tables
(all 10 bins, both signs) and beyond, NEAREST and BILINEAR, fill None and
colours, on real photographs, noise and synthetic images. Compared exactly.

Measured (Debian 12, torch 1.13 with its AVX2 kernels, torchvision 0.14.1):
equal byte for byte for every op, on this grid and on thousands of random
(op, magnitude, size, interpolation, fill) draws. The float32 arithmetic
follows torch's: the affine grid sums x*a + y*b + c with rounded products (no
FMA); grid_sample's AVX2 kernel fuses its unnormalisation and its bilinear sum
(FMA); _blend, rgb_to_grayscale and autocontrast round every product and sum;
adjust_contrast's mean is torch's float32 sum (its cascade over 8 lanes) on
one thread. On several threads torch splits a sum of 32768 values or more
between them, which can change the mean's last bit once the sum passes 2^24
(a large bright image; seen with 2 threads), and with it a pixel by 1 (not
seen): the references run on one thread, test_contrast_threads compares both.
"""
import contextlib

import numpy as np
import pytest
import torch
from conftest import photo_arrays
from torchvision.transforms import InterpolationMode
from torchvision.transforms.autoaugment import AugMix, _apply_op

from stoker._stoker import _testing

WARPS = ["ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate"]
COLOURS = ["Brightness", "Color", "Contrast", "Sharpness"]
OTHERS = ["Posterize", "Solarize", "AutoContrast", "Equalize", "Invert", "Identity"]
FILLS = [None, [0.0, 0.0, 0.0], [128.0, 64.0, 255.0]]
# Past AugMix's tables: other shears, angles and factors, translations beyond the image, thresholds whose float32
# rounding matters (127.99999999 is 128.0f), and posterize's fractional bits (int() truncates).
EXTRA = {"ShearX": [1.0, -2.5], "ShearY": [1.0, -2.5], "Rotate": [90.0, 180.0, -45.0, 359.0, 12.345],
         "Brightness": [-0.99, 1.0, 3.0], "Color": [-1.0, 2.0], "Contrast": [-1.0, 1.5], "Sharpness": [-1.0, 2.0],
         "Posterize": [0.0, 1.0, 3.7, 8.0], "Solarize": [255.0, 127.99999999, 128.5, 254.9, -3.0]}


def ours(name, magnitude, bilinear, fill, arr):
    out = _testing.tensor_op(name, magnitude, bilinear, fill, arr)
    assert out.shape == arr.shape and out.dtype == np.uint8
    return out


def reference(name, magnitude, bilinear, fill, arr):
    img = torch.from_numpy(np.array(arr)).permute(2, 0, 1)[None].contiguous()
    mode = InterpolationMode.BILINEAR if bilinear else InterpolationMode.NEAREST
    return _apply_op(img, name, magnitude, interpolation=mode, fill=fill)[0].permute(1, 2, 0).numpy()


def magnitudes(name, h, w):
    """AugMix's table for the op on an h x w image (as AugMix draws them: float(tensor.item()), negated when
    signed), with EXTRA; a single 0.0 for the ops without one."""
    out = set(EXTRA.get(name, []))
    space = AugMix()._augmentation_space(10, (h, w))
    if name in space and space[name][0].ndim > 0:
        values, signed = space[name]
        for v in values.tolist():
            out.add(float(v))
            if signed:
                out.add(-float(v))
    if name == "TranslateX":
        out.update([float(w), -w - 0.5, 0.7])
    if name == "TranslateY":
        out.update([float(h), -h - 0.5, -0.9])
    return sorted(out) or [0.0]


def noise(w, h, seed=0):
    return np.random.default_rng(seed + 1000 * w + h).integers(0, 256, size=(h, w, 3), dtype=np.uint8)


def synthetic(w, h):
    yy, xx = np.mgrid[:h, :w]
    return {"flat": np.full((h, w, 3), 137, np.uint8),
            "gradient": np.stack([xx * 4, yy * 5, (xx + yy) * 2], axis=-1).astype(np.uint8),
            # one channel constant, one of two values, one of three: autocontrast's and equalize's degenerate cases
            "levels": np.stack([np.full_like(xx, 7), yy % 2 + 100, (xx % 3) * 90], axis=-1).astype(np.uint8)}


@contextlib.contextmanager
def torch_threads(n):
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """torch's float32 sums (adjust_contrast's mean) as stoker computes them."""
    with torch_threads(1):
        yield


@pytest.fixture(scope="module")
def images(photo_files):
    out = {f"noise{w}x{h}": noise(w, h) for w, h in [(1, 1), (2, 3), (3, 3), (9, 1), (37, 23)]}
    out.update({f"{k}64x48": v for k, v in synthetic(64, 48).items()})
    out.update(photo_arrays(photo_files, 5, [None, (37, 23), (64, 48), (176, 176), (224, 160)]))
    return out


def check(images, names, interpolations, fills):
    for name in names:
        for key, arr in images.items():
            h, w = arr.shape[:2]
            for magnitude in magnitudes(name, h, w):
                for bilinear in interpolations:
                    for fill in fills:
                        got = ours(name, magnitude, bilinear, fill, arr)
                        want = reference(name, magnitude, bilinear, fill, arr)
                        if not np.array_equal(got, want):
                            d = np.abs(got.astype(np.int16) - want.astype(np.int16))
                            pytest.fail(f"{name} {magnitude} bilinear={bilinear} fill={fill} on {key}: "
                                        f"{np.count_nonzero(d)} values differ, by up to {d.max()}")


@pytest.mark.parametrize("name", WARPS)
def test_warps_equal_torchvision(images, name):
    check(images, [name], [False, True], FILLS)


@pytest.mark.parametrize("name", COLOURS)
def test_colour_ops_equal_torchvision(images, name):
    check(images, [name], [False], [None])


def test_other_ops_equal_torchvision(images):
    check(images, OTHERS, [False], [None])


def test_input_untouched(images):
    arr = images["noise37x23"]
    before = arr.copy()
    for name in WARPS + COLOURS + OTHERS:
        ours(name, 0.5, True, [1.0, 2.0, 3.0], arr)
    assert np.array_equal(arr, before)


def test_fill_rounding_and_range():
    """Fill values are rounded half to even, then cast as torch casts (300 -> 44, -5 -> 251)."""
    arr = noise(37, 23, seed=3)
    for fill in ([127.5, 0.5, 254.5], [1.5, 2.5, 255.4], [300.0, -5.0, 1000.0]):
        for name, magnitude in [("Rotate", 30.0), ("ShearX", -0.3), ("TranslateY", 10.0)]:
            for bilinear in (False, True):
                assert np.array_equal(ours(name, magnitude, bilinear, fill, arr),
                                      reference(name, magnitude, bilinear, fill, arr)), (fill, name, bilinear)


def test_contrast_threads():
    """A large bright image, whose grayscale sum passes 2^24 (float32 sums round): equal to torch on one thread;
    on more, within 1 (torch's split sum can move the mean by its last bit)."""
    rng = np.random.default_rng(5)
    for w, h, lo in [(640, 480, 230), (500, 375, 250), (257, 255, 250)]:
        arr = rng.integers(lo, 256, size=(h, w, 3), dtype=np.uint8)
        for magnitude in (-0.9, -0.3, 0.5, 0.9):
            got = ours("Contrast", magnitude, False, None, arr)
            with torch_threads(1):
                assert np.array_equal(got, reference("Contrast", magnitude, False, None, arr)), (w, h, magnitude)
            with torch_threads(4):
                want = reference("Contrast", magnitude, False, None, arr)
            assert np.abs(got.astype(np.int16) - want.astype(np.int16)).max() <= 1
