"""Colour and per-value image ops (src/transform/pil_color.cc) against torchvision 0.14 on PIL images.

Each op reproduces Pillow 9.4's C code (ImageEnhance blends, the HSV round trip, the SMOOTH filter, the point
tables ImageOps builds), so the outputs are compared exactly: uint8 equality, no tolerance. Images: real
photographs, seeded noise of awkward sizes (1x1, 1xN, Nx1, 2x2, 37x23: the SMOOTH border and the under-3x3 copy),
and synthetic cases for the edges of each op (grey pixels for hue, a flat channel for autocontrast, few values for
equalize).
"""
import zlib

import numpy as np
import pytest
import torchvision.transforms.functional as F
from PIL import Image

from stoker import _stoker

FACTORS = [0.0, 0.5, 1.0, 1.7, 2.5]
# (kind, parameter) pairs; the parameter is the hook's "factor" (hue factor, solarize threshold, posterize bits).
CASES = ([("grayscale", None), ("invert", None), ("autocontrast", None), ("equalize", None)] +
         [(kind, f) for kind in ("brightness", "contrast", "saturation", "sharpness") for f in FACTORS] +
         [("hue", f) for f in (-0.5, -0.25, -0.01, 0.0, 0.01, 0.3, 0.5)] +
         [("solarize", t) for t in (0, 1, 128, 255, 256)] +
         [("posterize", b) for b in range(1, 9)])

PHOTOS = ["photo0", "photo1", "photo2"]
SYNTHETIC = ["noise37x23", "noise1x1", "noise1x17", "noise17x1", "noise2x2", "noise3x3", "colours", "flat",
             "grey_gradient", "one_flat_channel", "few_values", "narrow_range"]


def torchvision_op(kind, p, img):
    """torchvision.transforms.functional on the PIL image, as an HxWx3 uint8 array."""
    im = Image.fromarray(img)
    ops = {
        "grayscale": lambda: F.rgb_to_grayscale(im, num_output_channels=3),
        "brightness": lambda: F.adjust_brightness(im, p),
        "contrast": lambda: F.adjust_contrast(im, p),
        "saturation": lambda: F.adjust_saturation(im, p),
        "sharpness": lambda: F.adjust_sharpness(im, p),
        "hue": lambda: F.adjust_hue(im, p),
        "solarize": lambda: F.solarize(im, p),
        "posterize": lambda: F.posterize(im, p),
        "invert": lambda: F.invert(im),
        "autocontrast": lambda: F.autocontrast(im),
        "equalize": lambda: F.equalize(im),
    }
    out = ops[kind]()
    assert out.mode == "RGB"
    return np.asarray(out)


def synthetic(name):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    if name.startswith("noise"):
        h, w = (int(v) for v in name[5:].split("x"))
        return rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
    if name == "colours":  # every 17th level of R, G and B: all hue sectors, grey and saturated pixels
        levels = np.arange(0, 256, 17, dtype=np.uint8)
        r, g, b = np.meshgrid(levels, levels, levels, indexing="ij")
        return np.stack([r, g, b], -1).reshape(64, 64, 3)
    if name == "flat":
        return np.full((20, 30, 3), (200, 40, 90), np.uint8)
    if name == "grey_gradient":  # r = g = b: saturation 0 in HSV
        g = np.tile(np.arange(256, dtype=np.uint8), (6, 1))
        return np.repeat(g[..., None], 3, axis=-1)
    if name == "one_flat_channel":
        img = rng.integers(0, 256, size=(31, 29, 3), dtype=np.uint8)
        img[..., 1] = 13
        return img
    if name == "few_values":  # red: 3 values, blue: 3 (two adjacent), most pixels black
        img = rng.integers(0, 256, size=(40, 50, 3), dtype=np.uint8)
        img[..., 0] = np.where(img[..., 0] > 128, 250, 3)
        img[..., 2] = np.where(img[..., 2] > 20, 255, 254)
        img[:30] = 0
        return img
    if name == "narrow_range":
        return rng.integers(100, 104, size=(40, 40, 3), dtype=np.uint8)
    raise KeyError(name)


@pytest.fixture(scope="module")
def images(photo_files):
    """Name -> HxWx3 uint8 image: three photographs from different classes, then the synthetic cases."""
    out = {}
    per_class = len(photo_files) // 4
    for i, name in enumerate(PHOTOS):  # class i, its i-th photograph
        with Image.open(photo_files[i * per_class + i]) as im:
            out[name] = np.array(im.convert("RGB"))
    for name in SYNTHETIC:
        out[name] = synthetic(name)
    return out


def case_id(case):
    kind, p = case
    return kind if p is None else f"{kind}-{p}"


@pytest.mark.parametrize("name", PHOTOS + SYNTHETIC)
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_image_op_equals_torchvision(images, case, name):
    kind, p = case
    img = images[name]
    before = img.copy()
    op = {"kind": kind} if p is None else {"kind": kind, "factor": p}
    out = _stoker._testing.image_op(op, img)
    np.testing.assert_array_equal(img, before, err_msg="the input was modified")
    assert out.shape == img.shape and out.dtype == np.uint8
    np.testing.assert_array_equal(out, torchvision_op(kind, p, img), err_msg=f"{kind}({p}) on {name}")
