"""The numpy references of MONAI's semantics (monai_ref.py) on hand-checked cases: the values in MONAI's
own docstrings and tests (tests/test_center_spatial_crop.py, test_normalize_intensity.py,
test_scale_intensity_range.py, test_rotate90.py, test_correct_crop_centers.py,
test_generate_pos_neg_label_crop_centers.py), worked by hand here, plus torch's own ops where MONAI calls
them (torch.rot90, torch.flip), so the volume tests can trust them."""
import numpy as np
import pytest
import torch

import monai_ref as M


# ---------------------------------------------------------------- fall_back_tuple

def test_fall_back_tuple_replaces_non_positive_entries():
    assert M.fall_back_tuple((32, 64, -1), (40, 40, 40)) == (32, 64, 40)
    assert M.fall_back_tuple((0, None, 5), (7, 8, 9)) == (7, 8, 5)
    assert M.fall_back_tuple(16, (40, 30, 20)) == (16, 16, 16)
    with pytest.raises(ValueError):
        M.fall_back_tuple((1, 2), (3, 3, 3))


# ---------------------------------------------------------------- crops and pads

def test_center_spatial_crop_monai_test_values():
    # tests/test_center_spatial_crop.py TEST_VALUES
    img = np.array([[[0, 0, 0, 0, 0], [0, 1, 2, 1, 0], [0, 2, 3, 2, 0], [0, 1, 2, 1, 0], [0, 0, 0, 0, 0]]])
    np.testing.assert_array_equal(M.center_spatial_crop(img, [2, 2]), [[[1, 2], [2, 3]]])
    # TEST_SHAPES
    x = np.random.default_rng(0).integers(0, 2, size=(3, 3, 3, 3))
    assert M.center_spatial_crop(x, [2, 2, -1]).shape == (3, 2, 2, 3)
    assert M.center_spatial_crop(x, [2, 2, 2]).shape == (3, 2, 2, 2)


def test_center_crop_start_docstring_and_hand_cases():
    # CenterSpatialCrop docstring: [40, 40, 40] with roi_size=[32, 64, -1] -> [32, 40, 40]
    assert M.center_crop_start((40, 40, 40), (32, 64, -1)) == ((4, 0, 0), (32, 40, 40))
    # centre = shape // 2, start = centre - roi // 2: 7 with roi 4 -> [1, 5); 8 with roi 3 -> [3, 6); 9 with 9 -> 0
    assert M.center_crop_start((7, 8, 9), (4, 3, 9)) == ((1, 3, 0), (4, 3, 9))
    # a roi larger than the axis: start max(., 0) = 0, the whole axis
    assert M.center_crop_start((10, 11, 5), (14, 12, 6)) == ((0, 0, 0), (10, 11, 5))
    x = np.arange(2 * 7 * 8 * 9).reshape(2, 7, 8, 9)
    np.testing.assert_array_equal(M.center_spatial_crop(x, (4, 3, 9)), x[:, 1:5, 3:6, :])


def test_pad_width_and_spatial_pad():
    # SpatialPad docstring: [30, 30, 30] with spatial_size=[32, 25, -1] -> [32, 30, 30]
    assert M.pad_width((30, 30, 30), (32, 25, -1)) == [(1, 1), (0, 0), (0, 0)]
    assert M.spatial_pad(np.zeros((1, 30, 30, 30)), (32, 25, -1)).shape == (1, 32, 30, 30)
    # width 7 -> (3, 4) symmetric, (0, 7) at the end; width 4 -> (2, 2)
    assert M.pad_width((8, 8, 4), (15, 8, 8), "symmetric") == [(3, 4), (0, 0), (2, 2)]
    assert M.pad_width((8, 8, 4), (15, 8, 8), "end") == [(0, 7), (0, 0), (0, 4)]
    x = np.arange(3 * 8 * 8 * 4).reshape(3, 8, 8, 4) + 1
    y = M.spatial_pad(x, (15, 8, 8), "symmetric", value=-5)
    assert y.shape == (3, 15, 8, 8)
    np.testing.assert_array_equal(y[:, 3:11, :, 2:6], x)
    assert (y[:, :3] == -5).all() and (y[:, 11:] == -5).all() and (y[..., :2] == -5).all()
    z = M.spatial_pad(x, (15, 8, 8), "end")
    np.testing.assert_array_equal(z[:, :8, :, :4], x)
    assert (z[:, 8:] == 0).all() and (z[..., 4:] == 0).all()
    with pytest.raises(ValueError):
        M.pad_width((3, 3, 3), (4, 4, 4), "middle")


def test_get_valid_patch_size():
    assert M.get_valid_patch_size((10, 5, 8), (4, 7, 0)) == (4, 5, 8)
    assert M.get_valid_patch_size((10, 5, 8), 6) == (6, 5, 6)


def test_random_patch_start_draws_only_axes_larger_than_the_patch():
    calls = []

    def rng(low, high):  # returns the largest value, high - 1
        calls.append((low, high))
        return high - 1

    assert M.get_random_patch_start((10, 5, 8), (4, 5, 8), rng) == (6, 0, 0)
    assert calls == [(0, 7)], "randint(0, ms - ps + 1) only where ms > ps"
    rs = np.random.RandomState(3)
    starts = np.array([M.get_random_patch_start((12, 9, 20), (4, 9, 5), rs.randint) for _ in range(3000)])
    assert starts[:, 0].min() == 0 and starts[:, 0].max() == 8 and (starts[:, 1] == 0).all()
    assert starts[:, 2].min() == 0 and starts[:, 2].max() == 15
    assert M.random_patch_start_range((12, 9, 20), (4, 9, 5)) == [(0, 8), (0, 0), (0, 15)]
    # RandSpatialCrop with random_center=False is CenterSpatialCrop
    assert M.rand_spatial_crop_window((12, 9, 20), (4, -1, 5), rs.randint, random_center=False) == \
        ((4, 0, 8), (4, 9, 5))


# ---------------------------------------------------------------- pos/neg

def test_correct_crop_centers_monai_test_inputs_by_hand():
    # tests/test_correct_crop_centers.py (spatial_size, centers, label_spatial_shape):
    # [1, 5, 0] -> (1, 5, 10); valid_start (0, 2, 5); valid_end astype(uint16)(11 - (0.5, 2.5, 5)) = (10, 8, 6)
    assert M.correct_crop_centers([2, 2, 2], [1, 5, 0], [10, 10, 10]) == (2, 2, 5)
    # [4, 4, 4]: valid_start 2, valid_end 9 -> centres in [2, 8]
    assert M.correct_crop_centers([2, 2, 1], [4, 4, 4], [10, 10, 10]) == (2, 2, 2)
    assert all(type(c) is int for c in M.correct_crop_centers([2, 2, 1], [4, 4, 4], [10, 10, 10]))


def test_correct_crop_centers_truncation_keeps_windows_inside():
    # odd size 5 in 10: valid_end = uint16(11 - 2.5) = 8 (not 9): the last centre is 7, window [5, 10)
    assert M.correct_crop_centers([9], [5], [10]) == (7,)
    assert M.crop_start_from_center((7,), (5,)) == (5,)
    # even size 4: valid_end = 9, last centre 8, window [6, 10); first centre 2, window [0, 4)
    assert M.correct_crop_centers([9, 0], [4, 4], [10, 10]) == (8, 2)
    for shape in range(1, 14):
        for size in range(1, shape + 1):
            for c in range(shape):
                (cc,) = M.correct_crop_centers([c], [size], [shape])
                (s,) = M.crop_start_from_center((cc,), (size,))
                assert 0 <= s and s + size <= shape, (shape, size, c, cc)
                if size // 2 <= c and c + size - size // 2 <= shape:
                    assert cc == c, "an already valid centre is not moved"


def test_corrected_window_start_is_the_clamped_start():
    """For a roi within the label (allow_smaller=False), correct_crop_centers then SpatialCrop(roi_center) start
    the window at clip(c - size // 2, 0, shape - size): an implementation may clamp the start directly."""
    for shape in range(1, 40):
        for size in range(1, shape + 1):
            for c in range(shape):
                (cc,) = M.correct_crop_centers([c], [size], [shape])
                assert M.crop_start_from_center((cc,), (size,))[0] == min(max(c - size // 2, 0), shape - size)


def test_correct_crop_centers_roi_larger_than_the_label():
    with pytest.raises(ValueError, match="larger than the image size"):
        M.correct_crop_centers([1, 1, 1], [4, 4, 2], [3, 3, 3])
    # allow_smaller: size (3, 3, 2); MONAI's RandCropByPosNegLabel test expects the (3, 3, 2) crop
    c = M.correct_crop_centers([1, 1, 1], [4, 4, 2], [3, 3, 3], allow_smaller=True)
    assert c == (1, 1, 1)
    s = M.crop_start_from_center(c, (4, 4, 2))
    x = np.zeros((3, 3, 3, 3))
    assert x[:, s[0]:s[0] + 4, s[1]:s[1] + 4, s[2]:s[2] + 2].shape == (3, 3, 3, 2)


def test_crop_start_from_center():
    assert M.crop_start_from_center((5, 1, 10), (4, 4, 5)) == (3, 0, 8)


def test_map_binary_to_indices():
    # docstring: label [[[0, 1, 1], [1, 0, 1], [1, 1, 0]]] -> fg [1, 2, 3, 5, 6, 7], bg [0, 4, 8]
    fg, bg = M.map_binary_to_indices(np.array([[[0, 1, 1], [1, 0, 1], [1, 1, 0]]]))
    np.testing.assert_array_equal(fg, [1, 2, 3, 5, 6, 7])
    np.testing.assert_array_equal(bg, [0, 4, 8])
    # one-hot (C > 1): channel 0 (background) is dropped, fg = any other channel non-zero
    lab = np.zeros((3, 2, 2), np.uint8)
    lab[0] = 1
    lab[1, 0, 1] = 1
    lab[2, 1, 1] = 4
    fg, bg = M.map_binary_to_indices(lab)
    np.testing.assert_array_equal(fg, [1, 3])
    np.testing.assert_array_equal(bg, [0, 2])
    # non-zero, not > 0: a negative value is foreground
    fg, bg = M.map_binary_to_indices(np.array([[[-1, 0], [0, 2]]]))
    np.testing.assert_array_equal(fg, [0, 3])


def test_generate_pos_neg_label_crop_centers():
    # tests/test_generate_pos_neg_label_crop_centers.py inputs: 2 centres of 3 coordinates
    rs = np.random.RandomState(0)
    out = M.generate_pos_neg_label_crop_centers([2, 2, 2], 2, 1.0, [3, 3, 3], [1, 9, 18], [3, 12, 21], rs)
    assert isinstance(out, tuple) and len(out) == 2 and all(len(c) == 3 for c in out)
    # fg 1, 9, 18 = (0,0,1), (1,0,0), (2,0,0); size 2 in 3: valid centres [1, 2] -> (1,1,1), (1,1,1), (2,1,1)
    assert set(out) <= {(1, 1, 1), (2, 1, 1)}
    # no foreground: all from the background, whatever the ratio
    rs = np.random.RandomState(0)
    out = M.generate_pos_neg_label_crop_centers([2, 2, 2], 50, 1.0, [3, 3, 3], [], [3, 12, 21], rs)
    # bg 3, 12, 21 = (0,1,0), (1,1,0), (2,1,0) -> (1,1,1), (1,1,1), (2,1,1)
    assert set(out) <= {(1, 1, 1), (2, 1, 1)} and len(out) == 50
    with pytest.raises(ValueError, match="No sampling location"):
        M.generate_pos_neg_label_crop_centers([2, 2, 2], 1, 0.5, [3, 3, 3], [], [], rs)
    # the ratio: pos=1, neg=3 -> 1/4 foreground; 4000 draws, 4.5 sigma (sigma = 27.4)
    assert M.pos_ratio(1, 3) == 0.25
    lab = np.zeros((1, 20, 20, 20), np.uint8)
    lab[0, 8:12, 8:12, 8:12] = 1
    fg, bg = M.map_binary_to_indices(lab)
    rs = np.random.RandomState(1)
    centers = M.generate_pos_neg_label_crop_centers([4, 4, 4], 4000, 0.25, (20, 20, 20), fg, bg, rs)
    n_fg = sum(lab[0][c] for c in centers)
    assert abs(n_fg - 1000) <= 4.5 * np.sqrt(4000 * 0.25 * 0.75)
    with pytest.raises(ValueError):
        M.pos_ratio(0, 0)
    with pytest.raises(ValueError):
        M.pos_ratio(-1, 1)


# ---------------------------------------------------------------- flips and rot90

def test_map_spatial_axes():
    # its docstring: None -> [1, 2, 3]; [0, 1] -> [1, 2]; [0, -1] -> [1, -1]
    assert M.map_spatial_axes(4) == [1, 2, 3]
    assert M.map_spatial_axes(4, [0, 1]) == [1, 2]
    assert M.map_spatial_axes(4, [0, -1]) == [1, -1]
    assert M.map_spatial_axes(4, 2) == [3]


def test_rand_flip_is_torch_flip_of_all_listed_axes():
    x = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5)
    for axes in (None, 0, (1,), (0, 2), (0, 1, 2)):
        dims = M.map_spatial_axes(4, axes)
        want = torch.flip(torch.from_numpy(x), dims).numpy()
        np.testing.assert_array_equal(M.rand_flip(x, axes), want, err_msg=str(axes))
    np.testing.assert_array_equal(M.rand_flip(x, None), x[:, ::-1, ::-1, ::-1])
    np.testing.assert_array_equal(M.rand_flip(x, (0, 2)), x[:, ::-1, :, ::-1])


def test_rand_rotate90_is_torch_rot90_on_the_spatial_axes():
    # hand: np.rot90 / torch.rot90 of [[1, 2], [3, 4]] with k=1 turn axis 0 towards axis 1: [[2, 4], [1, 3]]
    np.testing.assert_array_equal(M.rand_rotate90(np.array([[[1, 2], [3, 4]]]), 1), [[[2, 4], [1, 3]]])
    x = np.arange(2 * 4 * 4 * 3).reshape(2, 4, 4, 3)
    # tests/test_rotate90.py: Rotate90() == stack(np.rot90(channel, 1, (0, 1)))
    np.testing.assert_array_equal(M.rand_rotate90(x, 1), np.stack([np.rot90(c, 1, (0, 1)) for c in x]))
    np.testing.assert_array_equal(M.rand_rotate90(x, 1, (0, -1)), np.stack([np.rot90(c, 1, (0, -1)) for c in x]))
    for axes in ((0, 1), (1, 2), (0, 2), (2, 0), (0, -1)):
        for k in range(-1, 6):
            want = torch.rot90(torch.from_numpy(x), (4 + k % 4) % 4, M.map_spatial_axes(4, axes)).numpy()
            np.testing.assert_array_equal(M.rand_rotate90(x, k, axes), want, err_msg=f"{axes} {k}")
    # k = 4 is the identity, k = 2 is the flip of both axes
    np.testing.assert_array_equal(M.rand_rotate90(x, 4), x)
    np.testing.assert_array_equal(M.rand_rotate90(x, 2, (0, 2)), x[:, ::-1, :, ::-1])
    with pytest.raises(ValueError):
        M.rand_rotate90(x, 1, (0, 1, 2))


# ---------------------------------------------------------------- intensity

def test_scale_intensity_range_monai_tests():
    x = np.random.default_rng(0).uniform(0, 150, size=(1, 8, 9))
    # tests/test_scale_intensity_range.py (before their uint8 cast)
    np.testing.assert_allclose(M.scale_intensity_range(x, 20, 108, 50, 80), ((x - 20) / 88) * 30 + 50)
    np.testing.assert_allclose(M.scale_intensity_range(x, 20, 108, None, 80, clip=True),
                               np.clip((x - 20) / 88, None, 80))


def test_scale_intensity_range_by_hand():
    x = np.array([-2000.0, -1000, 0, 1000, 2000])
    np.testing.assert_allclose(M.scale_intensity_range(x, -1000, 1000, 0, 1, clip=True), [0, 0, 0.5, 1, 1])
    np.testing.assert_allclose(M.scale_intensity_range(x, -1000, 1000, 0, 1), [-0.5, 0, 0.5, 1, 1.5])
    np.testing.assert_allclose(M.scale_intensity_range(x, -1000, 1000), [-0.5, 0, 0.5, 1, 1.5])
    np.testing.assert_allclose(M.scale_intensity_range(x, -1000, 1000, 10, 20), [5, 10, 15, 20, 25])
    # only b_min given: no rescale, clip at b_min only
    np.testing.assert_allclose(M.scale_intensity_range(x, -1000, 1000, 0.25, None, clip=True),
                               [0.25, 0.25, 0.5, 1, 1.5])
    # a_min == a_max: img - a_min (+ b_min), no division, no clip
    np.testing.assert_allclose(M.scale_intensity_range(np.array([5.0, 7]), 3, 3, 1, 2, clip=True), [3, 5])
    np.testing.assert_allclose(M.scale_intensity_range(np.array([5.0, 7]), 3, 3), [2, 4])
    # clip with neither bound: torch.clamp raises
    with pytest.raises(ValueError):
        M.scale_intensity_range(x, -1000, 1000, clip=True)
    # a descending range (a_min > a_max) inverts
    np.testing.assert_allclose(M.scale_intensity_range(np.array([0.0, 10]), 10, 0, 0, 1), [1, 0])


NORMALIZE_CASES = [  # tests/test_normalize_intensity.py TESTS: (params, input, expected)
    ({"nonzero": True}, [0.0, 3.0, 0.0, 4.0], [0.0, -1.0, 0.0, 1.0]),
    ({"subtrahend": np.array([3.5, 3.5, 3.5, 3.5]), "divisor": np.array([0.5, 0.5, 0.5, 0.5]), "nonzero": True},
     [0.0, 3.0, 0.0, 4.0], [0.0, -1.0, 0.0, 1.0]),
    ({"nonzero": True}, [0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]),
    ({"nonzero": False}, [0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]),
    ({"nonzero": False}, [1, 1, 1, 1], [0.0, 0.0, 0.0, 0.0]),
    ({"nonzero": False, "channel_wise": True, "subtrahend": [1, 2, 3]}, np.ones((3, 2, 2)),
     [[[0.0, 0.0], [0.0, 0.0]], [[-1.0, -1.0], [-1.0, -1.0]], [[-2.0, -2.0], [-2.0, -2.0]]]),
    ({"nonzero": True, "channel_wise": True, "subtrahend": [1, 2, 3], "divisor": [0, 0, 2]}, np.ones((3, 2, 2)),
     [[[0.0, 0.0], [0.0, 0.0]], [[-1.0, -1.0], [-1.0, -1.0]], [[-1.0, -1.0], [-1.0, -1.0]]]),
    ({"nonzero": True, "channel_wise": False, "subtrahend": 2, "divisor": 0}, np.ones((3, 2, 2)),
     np.ones((3, 2, 2)) * -1.0),
    ({"nonzero": True, "channel_wise": False, "subtrahend": np.ones((3, 2, 2)) * 0.5, "divisor": 0},
     np.ones((3, 2, 2)), np.ones((3, 2, 2)) * 0.5),
    ({"nonzero": True, "channel_wise": True, "subtrahend": np.ones((3, 2, 2)) * 0.5, "divisor": [0, 1, 0]},
     np.ones((3, 2, 2)), np.ones((3, 2, 2)) * 0.5),
]


@pytest.mark.parametrize("params,x,want", NORMALIZE_CASES)
def test_normalize_intensity_monai_tests(params, x, want):
    np.testing.assert_allclose(M.normalize_intensity(np.asarray(x, np.float64), **params), want, atol=1e-12)


def test_normalize_intensity_default_is_population_std_and_channel_wise():
    x = np.random.default_rng(5).normal(3, 2, size=(2, 5, 6, 7))
    # tests/test_normalize_intensity.py test_default: (x - mean) / np.std(x) (ddof=0)
    np.testing.assert_allclose(M.normalize_intensity(x), (x - x.mean()) / x.std(ddof=0))
    # test_channel_wise: nonzero per channel
    np.testing.assert_allclose(M.normalize_intensity(np.array([[0.0, 3.0, 0.0, 4.0], [0.0, 4.0, 0.0, 5.0]]),
                                                     nonzero=True, channel_wise=True),
                               [[0.0, -1.0, 0.0, 1.0], [0.0, -1.0, 0.0, 1.0]])
    cw = M.normalize_intensity(x, channel_wise=True)
    for c in range(2):
        np.testing.assert_allclose(cw[c], (x[c] - x[c].mean()) / x[c].std())
    # hand: [1, 2, 3, 4] -> mean 2.5, population std sqrt(1.25)
    np.testing.assert_allclose(M.normalize_intensity(np.array([1.0, 2, 3, 4])),
                               (np.array([1.0, 2, 3, 4]) - 2.5) / np.sqrt(1.25))
    # test_value_errors
    with pytest.raises(ValueError):
        M.normalize_intensity(np.zeros((2, 4)), nonzero=True, channel_wise=True, subtrahend=[1])
    with pytest.raises(ValueError):
        M.normalize_intensity(np.zeros((2, 4)), nonzero=True, channel_wise=True, subtrahend=[1, 2], divisor=[1])
    # the input is not modified
    y = x.copy()
    M.normalize_intensity(y, nonzero=True)
    np.testing.assert_array_equal(y, x)
