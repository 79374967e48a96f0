"""Decoded pixels against PIL (both use libjpeg-turbo; PNG is lossless)."""
import io

import numpy as np
import pytest
from PIL import Image

import stoker


def pil_rgb(data):
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


def encode(img, fmt, **kw):
    buf = io.BytesIO()
    img.save(buf, fmt, **kw)
    return buf.getvalue()


def test_sample_photos_equal_pil(photo_files):
    for f in photo_files[:12]:
        ours = stoker.decode_image(f)
        ref = np.asarray(Image.open(f).convert("RGB"))
        assert ours.shape == ref.shape
        assert np.array_equal(ours, ref), f


@pytest.fixture(scope="module")
def photo(photo_files):
    return Image.open(photo_files[0]).convert("RGB")


@pytest.mark.parametrize("variant", ["444", "420", "422", "progressive", "gray", "cmyk", "q50"])
def test_jpeg_variants_equal_pil(photo, variant):
    if variant == "444":
        data = encode(photo, "JPEG", quality=96, subsampling=0)
    elif variant == "420":
        data = encode(photo, "JPEG", quality=90, subsampling=2)
    elif variant == "422":
        data = encode(photo, "JPEG", quality=90, subsampling=1)
    elif variant == "progressive":
        data = encode(photo, "JPEG", quality=90, progressive=True)
    elif variant == "gray":
        data = encode(photo.convert("L"), "JPEG", quality=90)
    elif variant == "cmyk":
        data = encode(photo.convert("CMYK"), "JPEG", quality=95)
    else:
        data = encode(photo, "JPEG", quality=50)
    ours = stoker.decode_image(data)
    ref = pil_rgb(data)
    assert ours.shape == ref.shape
    # Same libjpeg-turbo underneath: exact.
    assert np.abs(ours.astype(int) - ref).max() == 0


@pytest.mark.parametrize("mode", ["RGB", "RGBA", "L", "LA", "P", "1", "I;16"])
def test_png_modes_equal_pil(photo, mode):
    small = photo.resize((97, 61))
    if mode == "P":
        img = small.convert("P", palette=Image.ADAPTIVE, colors=50)
    elif mode == "RGBA":
        img = small.convert("RGBA")
        img.putalpha(Image.linear_gradient("L").resize(small.size))
    elif mode == "I;16":
        arr = (np.asarray(small.convert("L")).astype(np.uint16) * 257)
        img = Image.fromarray(arr, mode="I;16")
    else:
        img = small.convert(mode)
    data = encode(img, "PNG")
    ours = stoker.decode_image(data)
    # I;16 included: PIL opens 16-bit gray as "I" and clips it at 255 (not the high byte), and so does stoker,
    # as torchvision's loader sees it (tests/python/test_formats.py has more).
    assert np.array_equal(ours, pil_rgb(data))


def test_one_pixel_images():
    for fmt in ("JPEG", "PNG"):
        data = encode(Image.new("RGB", (1, 1), (200, 100, 50)), fmt)
        assert np.array_equal(stoker.decode_image(data), pil_rgb(data))


def test_rejects_bad_bytes(photo):
    good = encode(photo, "JPEG", quality=90)
    with pytest.raises(stoker.SampleError, match="empty file"):
        stoker.decode_image(b"")
    with pytest.raises(stoker.SampleError, match="not a JPEG, PNG, .npy, WebP, TIFF, BMP or GIF image"):
        stoker.decode_image(b"hello, I am a text file named .jpg\n")
    with pytest.raises(stoker.SampleError, match="truncated"):
        stoker.decode_image(good[: len(good) // 2])
    with pytest.raises(stoker.SampleError, match="max_image_pixels"):
        stoker.decode_image(good, max_image_pixels=1000)
    assert issubclass(stoker.SampleError, OSError)
