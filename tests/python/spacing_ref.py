"""MONAI's Spacing(pixdim, mode="bilinear" | "nearest") re-implemented in numpy, the reference for
stoker's src/transform/volume/resample.cc (MONAI cannot be installed here).

Read from Project-MONAI/MONAI in the code index:
  - monai/transforms/spatial/array.py @00620d93 (MONAI 1.2-era): Spacing.__init__ defaults
    (diagonal=False, padding_mode="border", align_corners=False, dtype=float64, scale_extent=False,
    recompute_affine=False, min_pixdim=max_pixdim=None) and Spacing.__call__ (the pixdim rule below,
    zoom_affine, compute_shape_offset, new_affine[:3, 3] = offset, then SpatialResample);
  - monai/transforms/spatial/functional.py @00620d93 spatial_resample: xform = solve(src, dst); the
    "unchanged" early return; a string mode goes to AffineTransform(normalized=False,
    align_corners, reverse_indexing=True);
  - monai/data/utils.py @56e17f05 (the newest stored copy of that file): AFFINE_TOL = 1e-3,
    affine_to_spacing, zoom_affine, compute_shape_offset (with scale_extent=False, the default, the
    1.x function computes the same thing), to_affine_nd;
  - monai/networks/layers/spatial_transforms.py AffineTransform.forward and monai/networks/utils.py
    normalize_transform / to_norm_affine (zero_centered=False): with align_corners=False the
    normalisation n = (2x + 1)/size - 1 is undone exactly by grid_sample's unnormalisation, so
    output voxel o samples input voxel coordinate xform[:3, :3] @ o + xform[:3, 3];
  - PyTorch aten/src/ATen/native/GridSampler.{h,cpp}: padding "border" clips the coordinate to
    [0, size - 1] before interpolating; bilinear (trilinear in 3D) weights the 8 neighbours, a
    neighbour past the end has weight 0; nearest takes std::nearbyint (ties to even) of the clipped
    coordinate. MONAI computes in float64 and returns float32.

The sampling here is exact numpy (not scipy.ndimage, whose order=0 rounds ties up); the linear path
is cross-checked against scipy.ndimage.affine_transform(order=1, mode="nearest"), which extends the
volume by its edge voxels, the same as clipping the coordinate.

Run `python3 tests/python/spacing_ref.py` for the self-check, `--cases` to print the hand cases
pasted into tests/transform/volume_resample_test.cc.
"""
import sys

import numpy as np

AFFINE_TOL = 1e-3


def to_affine_nd(affine):
    """monai/data/utils.py to_affine_nd(3, affine): the top-left 3x3 and the translation, bottom row 0 0 0 1."""
    a = np.asarray(affine, dtype=np.float64)
    out = np.eye(4)
    out[:3, :3] = a[:3, :3]
    out[:3, 3] = a[:3, 3]
    return out


def affine_to_spacing(affine):
    """monai/data/utils.py affine_to_spacing(affine, r=3): column norms, zeros suppressed to 1."""
    a = np.asarray(affine, dtype=np.float64)[:3, :3]
    sp = np.sqrt(np.sum(a * a, axis=0))
    sp[sp == 0] = 1.0
    return sp


def out_pixdim(affine, pixdim):
    """Spacing.__call__ (min_pixdim = max_pixdim = None) then zoom_affine's fall_back_tuple: the original
    spacing is kept where |orig - target| <= AFFINE_TOL, or where the target is not > 0."""
    orig = affine_to_spacing(affine)
    out = np.array(pixdim, dtype=np.float64).copy()
    for i, (d, t) in enumerate(zip(orig, out)):
        if (t - AFFINE_TOL) <= d <= (t + AFFINE_TOL):
            out[i] = d
        elif not (t and t > 0):  # fall_back_tuple(scale, norm): non-positive (or NaN) -> original
            out[i] = d
    out[out == 0] = 1.0
    return out


def zoom_affine(affine, scale, diagonal=False):
    """monai/data/utils.py zoom_affine: keeps the directions (shear removed), columns scaled to `scale`;
    zero translation."""
    affine = np.array(affine, dtype=float, copy=True)
    scale = np.array(scale, dtype=float, copy=True)
    if diagonal:
        return np.diag(np.append(scale, [1.0]))
    rzs = affine[:-1, :-1]
    zs = np.linalg.cholesky(rzs.T @ rzs).T
    rotation = rzs @ np.linalg.inv(zs)
    s = np.sign(np.diag(zs)) * np.abs(scale)
    new_affine = np.eye(len(affine))
    new_affine[:-1, :-1] = rotation @ np.diag(s)
    return new_affine


def compute_shape_offset(spatial_shape, in_affine, out_affine):
    """monai/data/utils.py compute_shape_offset (scale_extent=False): the input's corner voxel centres
    (0 and n - 1 per axis) in output voxel coordinates; shape = round(extent + 1) (np.round: half to
    even); offset = the world position of the first corner that is the smallest along every output
    axis (corner 0 when none is)."""
    shape = np.array(spatial_shape, dtype=float)
    in_affine = to_affine_nd(in_affine)
    out_affine = to_affine_nd(out_affine)
    in_coords = [(0.0, dim - 1.0) for dim in shape]
    corners = np.asarray(np.meshgrid(*in_coords, indexing="ij")).reshape((len(shape), -1))
    corners = np.concatenate((corners, np.ones_like(corners[:1])))
    corners = in_affine @ corners
    inv_mat = np.linalg.inv(out_affine)
    corners_out = inv_mat @ corners
    corners_out = corners_out[:-1] / corners_out[-1]
    out_shape = np.round(np.ptp(corners_out, axis=1) + 1.0)
    mat = inv_mat[:-1, :-1]
    k = 0
    for i in range(corners.shape[1]):
        min_corner = np.min(mat @ corners[:-1, :] - mat @ corners[:-1, i:i + 1], 1)
        if np.allclose(min_corner, 0.0, rtol=AFFINE_TOL):
            k = i
            break
    offset = corners[:-1, k]
    return out_shape.astype(int), offset


def _allclose(a, b):
    # MONAI's allclose(a, b, atol=AFFINE_TOL) -> torch.allclose: |a - b| <= atol + 1e-5 * |b|
    return bool(np.all(np.abs(np.asarray(a, float) - np.asarray(b, float)) <= AFFINE_TOL + 1e-5 * np.abs(b)))


def spacing_plan(shape, affine, pixdim):
    """(out_shape, out_affine, xform, unchanged): xform maps output voxel coordinates to input voxel
    coordinates (4x4); unchanged = SpatialResample returns the input as it is (affine kept)."""
    shape = tuple(int(s) for s in shape)
    src = to_affine_nd(affine)
    out_d = out_pixdim(src, pixdim)
    new_affine = zoom_affine(src, out_d, diagonal=False)
    out_shape, offset = compute_shape_offset(shape, src, new_affine)
    new_affine[:3, 3] = offset[:3]
    xform = np.linalg.solve(src, new_affine)
    same_size = tuple(out_shape) == shape
    unchanged = same_size and (_allclose(src, new_affine) or _allclose(xform, np.eye(4)))
    if unchanged:
        return shape, np.asarray(affine, dtype=np.float64), np.eye(4), True
    return tuple(int(s) for s in out_shape), new_affine, xform, False


def _coords(xform, out_shape, in_shape):
    grid = np.indices(out_shape, dtype=np.float64).reshape(3, -1)
    c = xform[:3, :3] @ grid + xform[:3, 3:4]
    for a in range(3):  # padding_mode="border": clip_coordinates
        c[a] = np.clip(c[a], 0.0, in_shape[a] - 1.0)
    return c


def sample_linear(arr, xform, out_shape):
    """grid_sample(mode="bilinear", padding_mode="border", align_corners=False) on (C, S0, S1, S2), in
    float64, returned as float32."""
    arr = np.asarray(arr, dtype=np.float64)
    in_shape = arr.shape[1:]
    c = _coords(xform, out_shape, in_shape)
    i0 = np.floor(c).astype(np.int64)
    w1 = c - i0
    w0 = 1.0 - w1
    i1 = np.minimum(i0 + 1, np.array(in_shape)[:, None] - 1)  # past the end: weight 0 anyway
    out = np.zeros((arr.shape[0], c.shape[1]))
    for b0 in (0, 1):
        for b1 in (0, 1):
            for b2 in (0, 1):
                idx = tuple((i1 if b else i0)[a] for a, b in enumerate((b0, b1, b2)))
                w = (w1 if b0 else w0)[0] * (w1 if b1 else w0)[1] * (w1 if b2 else w0)[2]
                out += arr[(slice(None),) + idx] * w
    return out.reshape((arr.shape[0],) + tuple(out_shape)).astype(np.float32)


def sample_nearest(arr, xform, out_shape):
    """grid_sample(mode="nearest", padding_mode="border"): nearbyint (ties to even) of the clipped
    coordinate. Keeps arr's dtype (MONAI returns float32 of the same values)."""
    arr = np.asarray(arr)
    c = _coords(xform, out_shape, arr.shape[1:])
    idx = tuple(np.rint(c[a]).astype(np.int64) for a in range(3))
    return arr[(slice(None),) + idx].reshape((arr.shape[0],) + tuple(out_shape))


def spacing_ref(arr_cfirst, affine, pixdim, mode="bilinear"):
    """MONAI Spacing(pixdim, mode=mode)(MetaTensor(arr_cfirst, affine=affine)) -> (array, affine)."""
    arr = np.asarray(arr_cfirst)
    out_shape, out_affine, xform, unchanged = spacing_plan(arr.shape[1:], affine, pixdim)
    if unchanged:
        return (arr.astype(np.float32) if mode == "bilinear" else arr.copy()), out_affine
    if mode == "bilinear":
        return sample_linear(arr, xform, out_shape), out_affine
    if mode == "nearest":
        return sample_nearest(arr, xform, out_shape), out_affine
    raise ValueError(mode)


def sample_linear_scipy(arr, xform, out_shape):
    """The same sampling by scipy.ndimage.affine_transform(order=1, mode="nearest") (cross-check)."""
    from scipy import ndimage
    arr = np.asarray(arr, dtype=np.float64)
    return np.stack([ndimage.affine_transform(ch, xform[:3, :3], offset=xform[:3, 3], output_shape=tuple(out_shape),
                                              order=1, mode="nearest") for ch in arr]).astype(np.float32)


def rot_z(deg):
    t = np.deg2rad(deg)
    r = np.eye(4)
    r[:2, :2] = [[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]]
    return r


# The hand cases of tests/transform/volume_resample_test.cc: (name, shape, affine, pixdim).
def hand_cases():
    oblique = rot_z(30) @ np.diag([0.8, 0.8, 1.5, 1.0])
    oblique[:3, 3] = [10.0, -20.0, 30.0]
    shear = np.array([[1.0, 0.3, 0.0, 5.0], [0.0, 1.0, 0.2, 6.0], [0.0, 0.0, 2.0, 7.0], [0, 0, 0, 1]])
    shear_neg = np.array([[1.0, -0.3, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [0, 0, 0, 1]])
    lps = np.diag([-0.7, -0.7, 2.5, 1.0])
    lps[:3, 3] = [100.0, 120.0, -50.0]
    return [
        ("identity", (10, 11, 12), np.eye(4), (1.0, 1.0, 1.0)),
        ("down2_odd", (9, 9, 9), np.eye(4), (2.0, 2.0, 2.0)),
        ("down2_even_tie", (8, 6, 4), np.eye(4), (2.0, 2.0, 2.0)),
        ("up2", (4, 5, 6), np.eye(4), (0.5, 0.5, 0.5)),
        ("anisotropic", (64, 64, 20), np.diag([0.8, 0.8, 2.5, 1.0]), (1.0, 1.0, 1.0)),
        ("keep_axis", (30, 30, 30), np.diag([0.8, 0.9, 1.5, 1.0]), (1.2, -1.0, 0.0)),
        ("within_tol", (20, 20, 20), np.diag([1.0005, 1.0, 1.0, 1.0]), (1.0, 1.0, 1.0)),
        ("lps_negative", (50, 40, 30), lps, (1.0, 1.0, 1.0)),
        ("oblique", (40, 30, 20), oblique, (1.0, 1.0, 1.0)),
        ("shear", (10, 12, 8), shear, (1.0, 1.0, 1.0)),
        ("shear_negative", (10, 12, 8), shear_neg, (1.0, 1.0, 1.0)),
    ]


def print_cases():
    np.set_printoptions(precision=17)
    for name, shape, affine, pixdim in hand_cases():
        out_shape, out_affine, xform, unchanged = spacing_plan(shape, affine, pixdim)
        print(f"{name}: shape {shape} pixdim {pixdim} -> out_shape {out_shape} unchanged {unchanged}")
        print("  in_affine  ", ", ".join(repr(float(v)) for v in np.asarray(affine, float).ravel()))
        print("  out_affine ", ", ".join(repr(float(v)) for v in out_affine.ravel()))
        print("  to_input   ", ", ".join(repr(float(v)) for v in xform[:3].ravel()))


def _self_check():
    rng = np.random.default_rng(0)
    # identity pixdim: the input back, exactly, affine kept
    arr = rng.normal(size=(2, 7, 8, 9)).astype(np.float32)
    aff = np.diag([1.0, 1.0, 1.0, 1.0])
    aff[:3, 3] = [3.0, -4.0, 5.0]
    out, out_aff = spacing_ref(arr, aff, (1.0, 1.0, 1.0))
    assert out.shape == arr.shape and np.array_equal(out, arr) and np.array_equal(out_aff, aff)
    lab = rng.integers(0, 4, size=(1, 7, 8, 9)).astype(np.uint8)
    out, _ = spacing_ref(lab, aff, (1.0, 1.0, 1.0), "nearest")
    assert np.array_equal(out, lab)

    # 2x downsampling of a ramp: odd length 9 -> 5 voxels at input 0, 2, 4, 6, 8
    ramp = np.broadcast_to(np.arange(9, dtype=np.float32)[:, None, None] * 3.0 + 1.0, (9, 4, 4))[None]
    out, out_aff = spacing_ref(ramp, np.eye(4), (2.0, 1.0, 1.0))
    assert out.shape == (1, 5, 4, 4), out.shape
    assert np.array_equal(out[0, :, 0, 0], np.array([0, 2, 4, 6, 8], np.float32) * 3 + 1)
    assert np.allclose(out_aff, np.diag([2.0, 1.0, 1.0, 1.0]))
    # even length 8: (8 - 1) / 2 + 1 = 4.5 rounds half to even -> 4 voxels
    out, _ = spacing_ref(ramp[:, :8], np.eye(4), (2.0, 1.0, 1.0))
    assert out.shape == (1, 4, 4, 4), out.shape
    # 1.5x downsampling: input coordinates 0, 1.5, 3, ..., linear in between (exact on a ramp)
    out, _ = spacing_ref(ramp, np.eye(4), (1.5, 1.0, 1.0))
    assert out.shape == (1, 6, 4, 4), out.shape
    assert np.allclose(out[0, :, 1, 2], np.arange(6) * 1.5 * 3 + 1, atol=1e-5)
    # 2x upsampling: 4 -> 7 voxels at 0, 0.5, ..., 3
    out, _ = spacing_ref(ramp[:, :4], np.eye(4), (0.5, 1.0, 1.0))
    assert out.shape == (1, 7, 4, 4) and np.allclose(out[0, :, 0, 0], np.arange(7) * 0.5 * 3 + 1)
    # nearest at ties rounds half to even: input coords 0, .5, 1, 1.5, 2, 2.5, 3 -> 0 0 1 2 2 2 3
    lab = np.arange(4, dtype=np.int32)[None, :, None, None] * np.ones((1, 4, 2, 2), np.int32)
    out, _ = spacing_ref(lab, np.eye(4), (0.5, 1.0, 1.0), "nearest")
    assert list(out[0, :, 0, 0]) == [0, 0, 1, 2, 2, 2, 3], out[0, :, 0, 0]

    # negative directions keep their sign and the first voxel's position
    aff = np.diag([-0.7, -0.7, 2.5, 1.0])
    aff[:3, 3] = [100.0, 120.0, -50.0]
    shape, out_aff, xform, _ = spacing_plan((50, 40, 30), aff, (1.0, 1.0, 1.0))
    assert shape == (35, 28, 74), shape  # 49*.7+1 = 35.3, 39*.7+1 = 28.3, 29*2.5+1 = 73.5 (half to even)
    assert np.allclose(out_aff, [[-1, 0, 0, 100], [0, -1, 0, 120], [0, 0, 1, -50], [0, 0, 0, 1]])
    assert np.allclose(xform[:3, :3], np.diag([1 / 0.7, 1 / 0.7, 0.4])) and np.allclose(xform[:3, 3], 0)

    # an oblique (rotated) affine keeps its directions: xform stays diagonal
    for name, shape, affine, pixdim in hand_cases():
        out_shape, out_aff, xform, _ = spacing_plan(shape, affine, pixdim)
        off = xform[:3, :3] - np.diag(np.diag(xform[:3, :3]))
        if name.startswith("shear"):
            assert np.abs(off).max() > 0.01, name  # shear: a general (upper triangular) map
        else:
            assert np.abs(off).max() < 1e-12, (name, off)
        # linear sampling: exact numpy vs scipy
        arr = rng.normal(size=(1,) + tuple(shape))
        a = sample_linear(arr, xform, out_shape)
        b = sample_linear_scipy(arr, xform, out_shape)
        assert np.allclose(a, b, atol=1e-5), (name, np.abs(a - b).max())
    print("spacing_ref self-check ok")


if __name__ == "__main__":
    if "--cases" in sys.argv:
        print_cases()
    else:
        _self_check()
