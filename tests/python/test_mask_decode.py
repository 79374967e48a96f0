"""Masks decode as stored, as PIL's Image.open() keeps them: palette indices
(never their colours), 8-bit gray, 16-bit gray; .npy uint8/uint16."""
import io

import numpy as np
import pytest
from PIL import Image

import stoker
from stoker._stoker._testing import decode_mask as _decode_mask


def png_bytes(img, **kw):
    b = io.BytesIO()
    img.save(b, format="PNG", **kw)
    return b.getvalue()


def npy_bytes(a):
    b = io.BytesIO()
    np.save(b, a)
    return b.getvalue()


@pytest.mark.parametrize("size", [(1, 1), (17, 5), (64, 48), (301, 7)])
def test_palette_png_keeps_its_indices(size):
    rng = np.random.default_rng(size[0] * 1000 + size[1])
    idx = rng.integers(0, 21, size=(size[1], size[0]), dtype=np.uint8)
    idx[0, 0] = 255  # VOC's "void"
    img = Image.fromarray(idx, mode="P")
    img.putpalette(list(rng.integers(0, 256, size=768, dtype=np.uint8)))  # colours that differ from the indices
    got = _decode_mask(png_bytes(img))
    ref = np.array(Image.open(io.BytesIO(png_bytes(img))))
    assert got.dtype == np.uint8 and np.array_equal(got, ref) and np.array_equal(got, idx)


def test_palette_png_of_fewer_bits_unpacks_indices():
    rng = np.random.default_rng(1)
    idx = rng.integers(0, 16, size=(9, 13), dtype=np.uint8)
    img = Image.fromarray(idx, mode="P")
    img.putpalette([v for i in range(16) for v in (i * 16, 255 - i * 16, i)])
    data = png_bytes(img, bits=4)
    assert Image.open(io.BytesIO(data)).mode == "P"
    assert np.array_equal(_decode_mask(data), np.array(Image.open(io.BytesIO(data))))


def test_gray_png_8_and_16_bit():
    rng = np.random.default_rng(2)
    g8 = rng.integers(0, 256, size=(23, 31), dtype=np.uint8)
    assert np.array_equal(_decode_mask(png_bytes(Image.fromarray(g8, mode="L"))), g8)
    g16 = rng.integers(0, 65536, size=(23, 31), dtype=np.uint16)
    data = png_bytes(Image.fromarray(g16, mode="I;16"))
    got = _decode_mask(data)
    assert got.dtype == np.uint16
    assert np.array_equal(got, np.array(Image.open(io.BytesIO(data)))) and np.array_equal(got, g16)


@pytest.mark.parametrize("dtype, shape", [(np.uint8, (12, 9)), (np.uint16, (12, 9)), (np.uint8, (12, 9, 1)),
                                          (np.uint16, (1, 12, 9))])
def test_npy_masks_as_stored(dtype, shape):
    a = np.random.default_rng(3).integers(0, np.iinfo(dtype).max, size=shape, dtype=dtype)
    got = _decode_mask(npy_bytes(a))
    assert got.dtype == dtype and np.array_equal(got, a.reshape(12, 9))


def test_what_is_not_a_mask_is_unsupported_with_the_reason():
    rgb = png_bytes(Image.new("RGB", (4, 4), (1, 2, 3)))
    with pytest.raises(stoker.SampleError, match="RGB PNG; a mask is single-channel"):
        _decode_mask(rgb)
    jpg = io.BytesIO()
    Image.new("L", (8, 8), 3).save(jpg, format="JPEG")
    with pytest.raises(stoker.SampleError, match="masks must be stored losslessly"):
        _decode_mask(jpg.getvalue())
    with pytest.raises(stoker.SampleError, match="uint8 or little-endian uint16"):
        _decode_mask(npy_bytes(np.zeros((3, 3), np.float32)))
    with pytest.raises(stoker.SampleError, match="not a PNG or .npy"):
        _decode_mask(b"BM6\0\0\0\0\0")
    with pytest.raises(stoker.SampleError, match="exceeds max_image_pixels"):
        _decode_mask(png_bytes(Image.new("L", (10, 10))), max_image_pixels=99)


@pytest.mark.parametrize("kind", ["L", "P", "I;16", "L-interlaced", "npy"])
def test_a_crop_decodes_only_the_rows_down_to_its_bottom(kind):
    """decode_mask(rows=k): the first k rows as the full decode's (the loader asks for the
    rows down to the first crop's bottom); an interlaced PNG is decoded whole."""
    rng = np.random.default_rng(4)
    if kind == "I;16":
        arr = rng.integers(0, 65536, (37, 23)).astype(np.uint16)
        data = png_bytes(Image.fromarray(arr))  # mode "I;16"
    elif kind == "npy":
        arr = rng.integers(0, 256, (37, 23)).astype(np.uint8)
        data = npy_bytes(arr)
    else:
        arr = rng.integers(0, 8, (37, 23)).astype(np.uint8)
        img = Image.fromarray(arr)
        if kind == "P":
            img = img.convert("P")
        data = png_bytes(img, interlace=1) if kind == "L-interlaced" else png_bytes(img)
    full = _decode_mask(data)
    if kind != "P":  # (a palette's indices are not the gray values converted)
        np.testing.assert_array_equal(full, arr)
    for rows in (0, 1, 20, 36, 37, 100):
        part = _decode_mask(data, rows=rows)
        k = min(rows, 37)
        np.testing.assert_array_equal(part[:k], full[:k], err_msg=f"{kind} rows={rows}")
        if kind != "L-interlaced":
            assert not part[k:].any(), "rows past the crop are not decoded"
