"""Mask resize against PIL: Image.resize(size, NEAREST, box) on "L", "P" and
"I;16" images, compared exactly (masks hold class indices: a value that is
not copied from the source is a wrong label, not a rounding difference)."""
import numpy as np
import pytest
from PIL import Image

from stoker._stoker._testing import resize_nearest as _resize_nearest

# Per-axis (source, output) lengths: up and down, odd and near-1 factors,
# exact multiples, 1-pixel sides, and the same length.
AXIS_PAIRS = [(1, 1), (1, 7), (7, 1), (2, 7), (7, 2), (3, 7), (7, 3), (5, 3), (10, 4), (4, 12), (13, 13),
              (299, 300), (300, 299), (300, 1), (1, 300), (37, 300), (300, 37), (255, 256), (101, 99)]


def size_pairs(seed, n):
    """Fixed pairs crossed with themselves (a sample), then random pairs up to 300."""
    rng = np.random.default_rng(seed)
    pairs = [(AXIS_PAIRS[i], AXIS_PAIRS[j]) for i, j in rng.integers(0, len(AXIS_PAIRS), size=(n, 2))]
    for _ in range(n):
        w, h, ow, oh = (int(v) for v in rng.integers(1, 301, size=4))
        pairs.append(((w, ow), (h, oh)))
    return pairs


def as_pil(arr, mode):
    h, w = arr.shape
    if mode == "I;16":
        return Image.frombytes("I;16", (w, h), arr.astype("<u2").tobytes())
    img = Image.frombytes(mode, (w, h), arr.tobytes())
    if mode == "P":
        img.putpalette(np.random.default_rng(0).integers(0, 256, 768, dtype=np.uint8).tobytes())
    return img


def random_mask(rng, w, h, mode):
    if mode == "I;16":
        return rng.integers(0, 65536, size=(h, w), dtype=np.uint16)
    return rng.integers(0, 256, size=(h, w), dtype=np.uint8)


def pil_resize(arr, mode, size, box=None):
    img = as_pil(arr, mode)
    out = img.resize(size, Image.NEAREST, box=box)
    assert out.mode == mode
    res = np.array(out)  # "P": the indices, never the palette's colours
    return res.astype(arr.dtype)


def random_box(rng, w, h):
    """A fractional box inside the image; sometimes an edge on the border or a zero-width side."""
    box = []
    for size in (w, h):
        a, b = np.sort(rng.uniform(0, size, 2))
        kind = rng.integers(0, 6)
        if kind == 0:
            a = 0.0
        elif kind == 1:
            b = float(size)
        elif kind == 2:
            b = a
        box.append((float(a), float(b)))
    return (box[0][0], box[1][0], box[0][1], box[1][1])


@pytest.mark.parametrize("mode", ["L", "P", "I;16"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_resize_equals_pil(mode, seed):
    rng = np.random.default_rng(seed * 10 + len(mode))
    for (w, ow), (h, oh) in size_pairs(seed, 60):
        arr = random_mask(rng, w, h, mode)
        got = _resize_nearest(arr, ow, oh)
        assert got.dtype == arr.dtype and got.shape == (oh, ow)
        np.testing.assert_array_equal(got, pil_resize(arr, mode, (ow, oh)), err_msg=f"{mode} {w}x{h} -> {ow}x{oh}")


@pytest.mark.parametrize("mode", ["L", "P", "I;16"])
@pytest.mark.parametrize("seed", [4, 5, 6])
def test_resize_with_box_equals_pil(mode, seed):
    rng = np.random.default_rng(seed * 10 + len(mode))
    for (w, ow), (h, oh) in size_pairs(seed, 60):
        arr = random_mask(rng, w, h, mode)
        box = random_box(rng, w, h)
        got = _resize_nearest(arr, ow, oh, box=box)
        np.testing.assert_array_equal(got, pil_resize(arr, mode, (ow, oh), box),
                                      err_msg=f"{mode} {w}x{h} box {box} -> {ow}x{oh}")


@pytest.mark.parametrize("mode", ["L", "I;16"])
def test_integer_boxes_and_crops_equal_pil(mode):
    """Whole-pixel boxes, including those PIL serves as a plain crop (box size = output size)."""
    rng = np.random.default_rng(7)
    for _ in range(100):
        w, h = (int(v) for v in rng.integers(1, 120, size=2))
        x0, x1 = np.sort(rng.integers(0, w + 1, 2))
        y0, y1 = np.sort(rng.integers(0, h + 1, 2))
        box = (int(x0), int(y0), int(x1), int(y1))
        arr = random_mask(rng, w, h, mode)
        crop_size = (max(1, box[2] - box[0]), max(1, box[3] - box[1]))
        for size in [crop_size, tuple(int(v) for v in rng.integers(1, 200, 2))]:
            np.testing.assert_array_equal(_resize_nearest(arr, *size, box=box), pil_resize(arr, mode, size, box))


def test_boxes_are_rounded_to_float32_as_pil_parses_them():
    # 0.99999999 is 1.0 in float32: PIL's one output over [1, 3) reads pixel 2, double arithmetic pixel 1.
    arr = np.arange(4, dtype=np.uint8)[None, :]
    box = (0.99999999, 0, 3, 1)
    assert pil_resize(arr, "L", (1, 1), box)[0, 0] == 2
    assert _resize_nearest(arr, 1, 1, box=box)[0, 0] == 2
    rng = np.random.default_rng(8)
    for _ in range(200):  # edges a hair off an integer, or off a multiple of the step
        w, h = (int(v) for v in rng.integers(2, 50, size=2))
        ow, oh = (int(v) for v in rng.integers(1, 80, size=2))
        eps = float(rng.choice([1e-9, 1e-8, 3e-8, 1e-7]))
        box = (1 - eps, eps, w - 1 + eps, h - eps)
        for mode in ("L", "I;16"):
            arr = random_mask(rng, w, h, mode)
            np.testing.assert_array_equal(_resize_nearest(arr, ow, oh, box=box), pil_resize(arr, mode, (ow, oh), box))


def test_8_and_16_bit_round_as_pil_does():
    """PIL's 8-bit path sums the step, its 16-bit path multiplies: 2 -> 7, output 3 sits at 1.0 exactly."""
    row = np.arange(2)[None, :]
    assert _resize_nearest(row.astype(np.uint8), 7, 1).tolist() == [[0, 0, 0, 0, 1, 1, 1]]
    assert _resize_nearest(row.astype(np.uint16), 7, 1).tolist() == [[0, 0, 0, 1, 1, 1, 1]]
    assert pil_resize(row.astype(np.uint8), "L", (7, 1)).tolist() == [[0, 0, 0, 0, 1, 1, 1]]
    assert pil_resize(row.astype(np.uint16), "I;16", (7, 1)).tolist() == [[0, 0, 0, 1, 1, 1, 1]]


def test_values_are_copied_not_interpolated():
    """Sparse labels (0, 7, 255 and a 16-bit one): the output holds only values present in the source."""
    rng = np.random.default_rng(9)
    for dtype, labels in ((np.uint8, [0, 7, 255]), (np.uint16, [0, 7, 255, 65535])):
        arr = rng.choice(np.array(labels, dtype=dtype), size=(83, 61))
        for size in [(200, 17), (13, 301), (61, 83), (1, 1)]:
            out = _resize_nearest(arr, *size, box=random_box(rng, 61, 83))
            assert set(np.unique(out).tolist()) <= set(labels)


def test_non_contiguous_input():
    rng = np.random.default_rng(10)
    base = rng.integers(0, 256, size=(90, 120), dtype=np.uint8)
    view = base[5:80:2, 3:110:3]
    np.testing.assert_array_equal(_resize_nearest(view, 50, 41), pil_resize(np.ascontiguousarray(view), "L", (50, 41)))


@pytest.mark.parametrize("box", [(-1, 0, 4, 4), (0, -0.5, 4, 4), (0, 0, 4.5, 4), (0, 0, 4, 5), (3, 0, 2, 4)])
def test_bad_boxes_raise_as_pil(box):
    arr = np.zeros((4, 4), dtype=np.uint8)
    with pytest.raises(ValueError):
        pil_resize(arr, "L", (2, 2), box)
    with pytest.raises(ValueError):
        _resize_nearest(arr, 2, 2, box=box)


def test_bad_arguments():
    with pytest.raises(ValueError):
        _resize_nearest(np.zeros((4, 4), dtype=np.uint8), 0, 2)
    with pytest.raises(ValueError):
        _resize_nearest(np.zeros((4, 4, 3), dtype=np.uint8), 2, 2)
    with pytest.raises(TypeError):
        _resize_nearest(np.zeros((4, 4), dtype=np.float32), 2, 2)
