"""Writers of 3D volume fixtures (np.save and nibabel) and the numpy helpers the volume tests share.

Every NIfTI file is written by nibabel and read back by nibabel before it is used (write_nifti checks
it), so a test's reference is always nibabel's reading of the very bytes stoker reads.
"""
import gzip
import io
import os

import nibabel as nib
import numpy as np

DTYPES = ("uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "float64")


def write_npy(path, arr):
    """np.save of `arr` as it is (C order, native little-endian): (S0, S1, S2) or (C, S0, S1, S2)."""
    path = os.fspath(path)
    np.save(path, np.ascontiguousarray(arr), allow_pickle=False)
    assert path.endswith(".npy")
    return path


def _nifti_bytes(arr, affine, version, qform_only):
    klass = nib.Nifti1Image if version == 1 else nib.Nifti2Image
    img = klass(np.asarray(arr), np.asarray(affine, np.float64))
    img.header.set_data_dtype(np.asarray(arr).dtype)
    if qform_only:
        img.set_qform(np.asarray(affine, np.float64), code=1)
        img.set_sform(None, code=0)
    else:
        img.set_sform(np.asarray(affine, np.float64), code=2)
        img.set_qform(None, code=0)
    return img.to_bytes(), img.header_class


def write_nifti(path, arr, affine=None, version=1, big_endian=False, slope=None, inter=None, qform_only=False,
                gz=False):
    """A single-file NIfTI (.nii; gzip of it when `gz`) holding `arr` in nibabel's array order (i, j, k[, t]),
    on-disk dtype = arr.dtype. `slope`/`inter`: the header's scl_slope/scl_inter (the raw voxels stay `arr`;
    nibabel's get_fdata then gives arr * slope + inter). `qform_only`: sform_code 0, qform_code 1 (the
    affine is then nibabel's quaternion reading of `affine`); else sform_code 2, qform_code 0.
    `big_endian`: header and voxels in '>' order. The file is read back by nibabel and checked."""
    path = os.fspath(path)
    assert path.endswith(".nii.gz" if gz else ".nii"), "nibabel reads the file back by its suffix"
    arr = np.asarray(arr)
    affine = np.eye(4) if affine is None else np.asarray(affine, np.float64)
    data, header_class = _nifti_bytes(arr, affine, version, qform_only)
    hdr = header_class.from_fileobj(io.BytesIO(data))
    nhdr = len(hdr.binaryblock)
    vox_offset = int(hdr["vox_offset"])
    if slope is not None or inter is not None:
        hdr["scl_slope"] = 1.0 if slope is None else slope
        hdr["scl_inter"] = 0.0 if inter is None else inter
    voxels = data[vox_offset:]
    if big_endian:
        hdr = hdr.as_byteswapped(">")
        le = arr.dtype.newbyteorder("<")
        voxels = np.frombuffer(voxels, dtype=le).astype(le.newbyteorder(">")).tobytes()
    data = hdr.binaryblock + data[nhdr:vox_offset] + voxels
    if gz:
        data = gzip.compress(data, compresslevel=6)
    with open(path, "wb") as f:
        f.write(data)
    # Read back: nibabel sees what was meant.
    img = nib.load(path)
    assert isinstance(img, nib.Nifti1Image if version == 1 else nib.Nifti2Image), type(img)
    assert img.header.endianness == (">" if big_endian else "<")
    raw = np.asanyarray(img.dataobj) if slope is None and inter is None else img.dataobj.get_unscaled()
    assert raw.shape == arr.shape and np.array_equal(raw, arr), path
    assert img.get_data_dtype().newbyteorder("=") == arr.dtype.newbyteorder("=")
    if qform_only:
        assert int(img.header["sform_code"]) == 0 and int(img.header["qform_code"]) == 1
        np.testing.assert_allclose(img.affine, affine, atol=2e-3)  # quaternion b, c, d are float32
    else:
        assert int(img.header["sform_code"]) == 2
        np.testing.assert_allclose(img.affine, affine, atol=1e-6)
    if slope is not None or inter is not None:
        s, i = img.dataobj.slope, img.dataobj.inter
        np.testing.assert_allclose([s, i], [1.0 if slope is None else slope, 0.0 if inter is None else inter],
                                   rtol=1e-6)
    return path


def nifti_reference(path):
    """nibabel's reading of a NIfTI volume in stoker's layout: (C, S0, S1, S2) float64 (C = dim[4], moved first;
    scaling applied as get_fdata does), and img.affine."""
    img = nib.load(os.fspath(path))
    data = np.asarray(img.get_fdata(dtype=np.float64))
    return channel_first(data, nifti=True), np.asarray(img.affine, np.float64)


def nifti_raw(path):
    """np.asanyarray(img.dataobj) (the stored values, no scaling when the header has none) in stoker's layout."""
    img = nib.load(os.fspath(path))
    return channel_first(np.asanyarray(img.dataobj), nifti=True)


def channel_first(arr, nifti):
    """(S0, S1, S2) -> (1, S0, S1, S2); a NIfTI (S0, S1, S2, C) -> (C, S0, S1, S2); a .npy (C, S0, S1, S2) as is."""
    arr = np.asarray(arr)
    if arr.ndim == 3:
        return arr[None]
    assert arr.ndim == 4, arr.shape
    return np.moveaxis(arr, -1, 0) if nifti else arr


def write_list(path, rows, header=("image", "label")):
    """A CSV list: the header, then one row per record; path cells relative to the CSV's folder (absolute paths
    under it are made relative), other cells as str()."""
    path = os.fspath(path)
    base = os.path.dirname(os.path.abspath(path))

    def cell(v):
        if isinstance(v, (str, os.PathLike)):
            v = os.fspath(v)
            if os.path.isabs(v) and os.path.commonpath([base, v]) == base:
                v = os.path.relpath(v, base)
        return str(v)

    with open(path, "w") as f:
        f.write(",".join(header) + "\n")
        for r in rows:
            r = (r,) if isinstance(r, (str, os.PathLike)) else tuple(r)
            assert len(r) == len(header), (r, header)
            f.write(",".join(cell(v) for v in r) + "\n")
    return path


def coord_volume(shape, dtype="float32", offset=0):
    """A volume whose voxel value is offset + its C-order linear index (np.arange(prod).reshape(shape)), wrapped
    into an integer dtype's range (so unique only while prod fits it); exact in float32 up to 2**24."""
    n = int(np.prod(shape))
    v = np.arange(offset, offset + n, dtype=np.int64)
    dt = np.dtype(dtype)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        span = int(info.max) - int(info.min) + 1
        v = (v - int(info.min)) % span + int(info.min)
    elif dt == np.float32:
        assert offset + n <= 2 ** 24, "float32 holds integers exactly up to 2**24"
    return v.astype(dt).reshape(shape)


def phantom_label(shape, boxes, dtype="uint8"):
    """A label volume of `shape` (spatial), 0 outside the boxes; each box ((a0, a1, a2), (b0, b1, b2)[, value])
    fills [a, b) with value (default 1), later boxes over earlier ones."""
    lab = np.zeros(shape, dtype)
    for box in boxes:
        a, b = box[0], box[1]
        value = box[2] if len(box) > 2 else 1
        lab[tuple(slice(int(x), int(y)) for x, y in zip(a, b))] = value
    return lab


def window(vol, start, size, fill=0):
    """vol[:, start:start+size] per spatial axis of a channel-first (C, S0, S1, S2) array, `fill` where the window
    leaves the volume (negative starts, ends past it): what a crop then a pad with that value gives."""
    vol = np.asarray(vol)
    out = np.full((vol.shape[0],) + tuple(int(s) for s in size), fill, dtype=vol.dtype)
    src, dst = [slice(None)], [slice(None)]
    for a, n, s in zip(start, size, vol.shape[1:]):
        a, n = int(a), int(n)
        lo, hi = max(a, 0), min(a + n, s)
        if hi <= lo:
            return out
        src.append(slice(lo, hi))
        dst.append(slice(lo - a, hi - a))
    out[tuple(dst)] = vol[tuple(src)]
    return out


def translation(start):
    """The 4x4 voxel translation by `start` (a patch's voxel-to-volume-voxel map)."""
    t = np.eye(4)
    t[:3, 3] = np.asarray(start, np.float64)
    return t


def example_affine(spacing=(0.8, 0.9, 1.5), angle_deg=30.0, origin=(-40.0, 12.5, 7.0), flip_x=True):
    """A realistic voxel-to-world affine: spacing, a rotation about k, the x axis flipped (LPS-like), an origin.
    A rotation + reflection + zoom: representable as a qform (qfac = -1)."""
    a = np.deg2rad(angle_deg)
    rot = np.array([[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1]])
    if flip_x:
        rot = np.diag([-1.0, 1, 1]) @ rot
    aff = np.eye(4)
    aff[:3, :3] = rot @ np.diag(spacing)
    aff[:3, 3] = origin
    return aff


def random_values(rng, shape, dtype):
    """Values spread over the dtype's range (its min and max included), exactly representable in float32
    only where float32 can (the rounding is what the comparison checks)."""
    dt = np.dtype(dtype)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        v = rng.integers(int(info.min), int(info.max), size=shape, endpoint=True, dtype=np.int64).astype(dt)
        flat = v.reshape(-1)
        flat[0], flat[-1] = info.min, info.max
        return v
    v = (rng.standard_normal(shape) * 1000.0).astype(dt)
    v.reshape(-1)[0] = -3.25e5
    return v
