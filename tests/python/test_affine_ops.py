"""Affine warps (pil_affine.cc) against torchvision 0.14 on PIL images
(Pillow 9.4), compared exactly:

- the matrices: _testing.affine_matrix against the 6 numbers F.affine hands to
  Image.transform, _testing.rotate_matrix against those Image.rotate hands to
  it (expand=False);
- the warp: _testing.image_op({"kind": "affine", ...}) against F.affine and
  F.rotate with NEAREST and BILINEAR and a fill colour, on noise of odd sizes
  and on real photographs; Image.rotate's shortcuts (0 and 180 degrees, 90 and
  270 on a square image: copy or transpose, no warp) included;
- masks: _testing.mask_affine against F.affine / F.rotate NEAREST on "L" and
  "I;16" images with a fill value;
- Pillow's three NEAREST engines (scale only, 16.16 fixed point, float for
  corners past 32768) and the bilinear one, through Image.transform itself.
"""
import itertools

import numpy as np
import pytest
from conftest import photo_arrays
import torchvision.transforms.functional as F
from PIL import Image
from torchvision.transforms import InterpolationMode

from stoker._stoker import _testing

NEAREST, BILINEAR = InterpolationMode.NEAREST, InterpolationMode.BILINEAR
ANGLES = [0, 90, -90, 180, 30, -17.3, 359]
TRANSLATES = [(0, 0), (3, -3), (-3, 3), (40, -40), (-40, 0), (500, 300), (2.5, -1.25)]
SCALES = [0.5, 1.0, 1.3]
SHEARS = [(0, 0), (30, 0), (0, -30), (-30, 30), (12.5, -7)]
GRID = list(itertools.product(ANGLES, TRANSLATES, SCALES, SHEARS))
FILLS = [(0, 0, 0), (128, 64, 255)]
ROTATIONS = [0, 90, -90, 180, 270, 30, -17.3, 359, 720, -0.5, 450]
SIZES = [(1, 1), (2, 3), (37, 23), (176, 176), (224, 160)]


def centers(w, h):
    """F.affine's center: None (the image centre), or pixels given as they are."""
    return [None, (0, 0), (w / 3, h - 1), (-4.5, 3.25)]


def sample(seed, n):
    rng = np.random.default_rng(seed)
    return [GRID[i] for i in rng.choice(len(GRID), size=min(n, len(GRID)), replace=False)]


class TransformSpy:
    """Records the data each Image.transform call receives (None: no call)."""

    def __init__(self, monkeypatch):
        self.data = None
        original = Image.Image.transform

        def spy(img, size, method, data=None, *args, **kwargs):
            self.data = list(data)
            return original(img, size, method, data, *args, **kwargs)

        monkeypatch.setattr(Image.Image, "transform", spy)

    def take(self):
        data, self.data = self.data, None
        return data


def noise(w, h, seed=0):
    return np.random.default_rng(seed + 1000 * w + h).integers(0, 256, size=(h, w, 3), dtype=np.uint8)


@pytest.fixture(scope="module")
def images(photo_files):
    """Noise of odd sizes and real photographs (whole, and resized to small odd sizes)."""
    out = {f"noise{w}x{h}": noise(w, h) for w, h in SIZES}
    out.update(photo_arrays(photo_files, 7, [None, (45, 33), (101, 77), (176, 176)]))
    return out


IMAGE_NAMES = [f"noise{w}x{h}" for w, h in SIZES] + [f"photo{i}" for i in range(4)]


def warp(arr, matrix, interpolation, fill):
    op = {"kind": "affine", "matrix": matrix, "bilinear": interpolation == BILINEAR, "fill": list(fill)}
    return _testing.image_op(op, arr)


def assert_same(got, want, what):
    assert got.shape == want.shape and got.dtype == want.dtype, what
    if not np.array_equal(got, want):
        diff = np.abs(got.astype(np.int64) - want.astype(np.int64))
        raise AssertionError(f"{what}: {np.count_nonzero(diff)} values differ, max {diff.max()}")


@pytest.mark.parametrize("size", SIZES + [(5, 5), (33, 64)])
def test_affine_matrix_is_what_torchvision_gives_pil(size, monkeypatch):
    w, h = size
    spy = TransformSpy(monkeypatch)
    img = Image.fromarray(noise(w, h))
    for i, (angle, translate, scale, shear) in enumerate(sample(w * h, 120)):
        center = centers(w, h)[i % 4]
        F.affine(img, angle, list(translate), scale, list(shear), NEAREST, None, list(center) if center else None)
        want = spy.take()
        got = _testing.affine_matrix(w, h, angle, list(translate), scale, list(shear), center=center)
        assert list(got) == want, (angle, translate, scale, shear, center)


@pytest.mark.parametrize("size", SIZES + [(5, 5), (33, 64)])
def test_rotate_matrix_is_what_image_rotate_gives_transform(size, monkeypatch):
    w, h = size
    spy = TransformSpy(monkeypatch)
    img = Image.fromarray(noise(w, h))
    for angle in ROTATIONS + [1e-13, -1e-14, 359.9999999999]:
        for center in [None, (0, 0), (w / 2, h / 2), (3, 1.5)]:
            F.rotate(img, angle, NEAREST, False, list(center) if center else None, None)
            want = spy.take()
            got = _testing.rotate_matrix(w, h, angle, center=center)
            if want is None:
                # Image.rotate's copy / transpose shortcut: no matrix to compare
                # (the pixels are, in test_rotate_matches_torchvision).
                assert center is None and angle % 90 == 0, angle
                continue
            assert list(got) == want, (angle, center)


def test_matrices_for_random_parameters(monkeypatch):
    """Random angles, shears, scales and centres (RandomAffine's kind of draws):
    every last bit of the matrices, against _get_inverse_affine_matrix with
    the centre F.affine uses for PIL (checked above) and against Image.rotate."""
    rng = np.random.default_rng(3)
    for _ in range(3000):
        w, h = (int(v) for v in rng.integers(1, 400, size=2))
        angle, scale = float(rng.uniform(-180, 180)), float(rng.uniform(0.3, 2.0))
        translate = [float(v) for v in rng.uniform(-0.3, 0.3, size=2) * (w, h)]
        shear = [float(v) for v in rng.uniform(-45, 45, size=2) * (rng.random(2) < 0.7)]
        center = None if rng.random() < 0.5 else [float(v) for v in rng.uniform(-10, 400, size=2)]
        want = F._get_inverse_affine_matrix(center or [w * 0.5, h * 0.5], angle, translate, scale, shear)
        got = _testing.affine_matrix(w, h, angle, translate, scale, shear, center=center)
        assert list(got) == want, (w, h, angle, translate, scale, shear, center)
    spy = TransformSpy(monkeypatch)
    for _ in range(1000):
        w, h = (int(v) for v in rng.integers(1, 9, size=2))
        angle = float(rng.uniform(-400, 400))
        center = None if rng.random() < 0.5 else [float(v) for v in rng.uniform(-3, 12, size=2)]
        Image.new("L", (w, h)).rotate(angle, Image.NEAREST, False, center, fillcolor=0)
        want = spy.take()
        assert list(_testing.rotate_matrix(w, h, angle, center=center)) == want, (w, h, angle, center)


@pytest.mark.parametrize("interpolation", [NEAREST, BILINEAR], ids=["nearest", "bilinear"])
@pytest.mark.parametrize("name", IMAGE_NAMES)
def test_affine_matches_torchvision(images, name, interpolation):
    arr = images[name]
    h, w = arr.shape[:2]
    pil = Image.fromarray(arr)
    for i, (angle, translate, scale, shear) in enumerate(sample(w + 7 * h, 120)):
        center = centers(w, h)[i % 4]
        fill = FILLS[i % 2]
        want = np.asarray(F.affine(pil, angle, list(translate), scale, list(shear), interpolation, list(fill),
                                   list(center) if center else None))
        matrix = _testing.affine_matrix(w, h, angle, list(translate), scale, list(shear), center=center)
        assert_same(warp(arr, matrix, interpolation, fill), want, (name, angle, translate, scale, shear, center))


@pytest.mark.parametrize("interpolation", [NEAREST, BILINEAR], ids=["nearest", "bilinear"])
@pytest.mark.parametrize("name", ["noise1x1", "noise2x3", "noise37x23", "noise176x176", "photo1", "photo3"])
def test_rotate_matches_torchvision(images, name, interpolation):
    arr = images[name]
    h, w = arr.shape[:2]
    pil = Image.fromarray(arr)
    for angle in ROTATIONS:
        for j, center in enumerate([None, (0, 0), (w / 2, h / 2), (3, 1)]):
            fill = FILLS[j % 2]
            want = np.asarray(F.rotate(pil, angle, interpolation, False, list(center) if center else None, list(fill)))
            matrix = _testing.rotate_matrix(w, h, angle, center=center)
            assert_same(warp(arr, matrix, interpolation, fill), want, (name, angle, center))


def masks(arr, bits):
    """A mask of class values from an image: 8-bit multiples of 16, or 16-bit values above 255."""
    if bits == 8:
        return (arr[..., 0] // 16 * 16).astype(np.uint8)
    return arr[..., 0].astype(np.uint16) * 257 + arr[..., 1]


@pytest.mark.parametrize("bits", [8, 16])
@pytest.mark.parametrize("name", ["noise2x3", "noise37x23", "noise224x160", "photo0", "photo2"])
def test_mask_affine_matches_torchvision(images, name, bits):
    mask = masks(images[name], bits)
    h, w = mask.shape
    pil = Image.fromarray(mask)
    assert pil.mode == ("L" if bits == 8 else "I;16")
    for i, (angle, translate, scale, shear) in enumerate(sample(3 * w + h, 80)):
        center = centers(w, h)[i % 4]
        fill = 255 if bits == 8 else [255, 65535, 40000][i % 3]
        want = np.asarray(F.affine(pil, angle, list(translate), scale, list(shear), NEAREST, fill,
                                   list(center) if center else None))
        matrix = _testing.affine_matrix(w, h, angle, list(translate), scale, list(shear), center=center)
        assert_same(_testing.mask_affine(mask, matrix, fill), want, (name, angle, translate, scale, shear, center))
    for angle in ROTATIONS:
        want = np.asarray(F.rotate(pil, angle, NEAREST, False, None, 255))
        assert_same(_testing.mask_affine(mask, _testing.rotate_matrix(w, h, angle), 255), want, (name, angle))


# Matrices for each of Pillow's engines: NEAREST with a[1] == a[3] == 0 runs
# ImagingScaleAffine (running sums), with every corner inside +-32768
# affine_fixed (16.16), else the float loop; BILINEAR (and "I;16" NEAREST)
# the generic per-pixel engine.
# The last matrix of each engine tells its exact arithmetic apart from a near
# one: the scale engine's running sum of a[0] (columns 9 and 29 land on 7 and
# 20, where x a[0] + offset gives 6 and 21); the order of the half-pixel
# terms, a[2] + a[0] / 2 + a[1] / 2 before FIX() in the fixed engine (column
# 16 at row 0, not 15), a[2] + a[1] / 2 + a[0] / 2 in the float one (8, not 7).
ENGINE_MATRICES = {
    "scale": [[1.0, 0.0, 0.0, 0.0, 1.0, 0.0], [-1.0, 0.0, 37.0, 0.0, 1.0, 0.5], [0.37, 0.0, -3.2, 0.0, 1.9, 4.1],
              [0.0, 0.0, 5.5, 0.0, -0.7, 30.0], [1 / 3, 0.0, 0.1, 0.0, 2.0, -7.25],
              [0.7, 0.0, 0.35, 0.0, 1.0, 0.0]],
    "fixed": [[0.9, 0.3, 0.2, -0.2, 1.1, 0.3], [0.0, -1.0, 23.0, 1.0, 0.0, 0.0], [1.3, -0.45, 10.0, 0.2, 0.8, -6.0],
              [0.5, 0.5, 32767.0 - 40.0, -0.5, 0.5, 12.0],
              [0.75, -0.2745993857607667, 15.76229206348585, 0.0, 1.0, 0.0]],
    "float": [[300.0, 0.5, -3090.0, 0.2, 300.0, -2310.0], [-700.0, 1.5, 7000.0, 0.3, 700.0, -3500.0],
              [1.0, 0.1, 32768.5 - 20.0, 0.0, 1.0, 0.0],
              [1000.0, 0.44308006468156513, -492.2215400323408, 0.0, 1.0, 0.0]],
}


@pytest.mark.parametrize("engine", sorted(ENGINE_MATRICES))
def test_pillow_engines(engine):
    arr = noise(37, 23, seed=5)
    for matrix in ENGINE_MATRICES[engine]:
        for interpolation, fill in [(NEAREST, (0, 0, 0)), (NEAREST, (9, 8, 7)), (BILINEAR, (128, 64, 255))]:
            resample = Image.BILINEAR if interpolation == BILINEAR else Image.NEAREST
            want = np.asarray(Image.fromarray(arr).transform((37, 23), Image.AFFINE, matrix, resample, fillcolor=fill))
            assert_same(warp(arr, matrix, interpolation, fill), want, (engine, matrix, interpolation))
        for bits in (8, 16):
            mask = masks(arr, bits)
            for fill in (255, 300, 7):  # "L" clips 300 to 255
                want = np.asarray(Image.fromarray(mask).transform((37, 23), Image.AFFINE, matrix, Image.NEAREST,
                                                                  fillcolor=fill))
                assert_same(_testing.mask_affine(mask, matrix, fill), want, (engine, matrix, bits, fill))
