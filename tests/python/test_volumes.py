"""3D volumes (stoker.Volume / stoker.LabelVolume) with MONAI-named transforms, against independent
references: nibabel's reading of the same files (np.asanyarray(img.dataobj), get_fdata, img.affine), np.load,
and the numpy re-implementations of MONAI's semantics in monai_ref.py (checked in test_monai_ref.py).

Fixtures are written by volume_fixtures.py (np.save, nibabel). Intensity volumes are "coord volumes" whose
voxel value is file_offset + C-order index, so each batch entry tells which file and which voxels it holds;
labels are uint8 (coord % 251, or phantoms). Each patch is compared with numpy slicing of the volume at the
batch's `image_start` (then np.flip / np.rot90 / np.pad as the drawn transform says): exact, for the image and
its label jointly. Statistical checks use fixed seeds and state their bound (4.5 sigma binomial intervals:
a false failure has probability < 1e-5 per check; chi-square p > 1e-4).

Batch layout (B volumes per batch, n patches per volume, P the patch size): image float32 [B*n, C, *P],
label [B*n, 1, *P] (uint8 when record 0's label is uint8, else int32), image_start int64 [B*n, 3],
image_affine float64 [B*n, 4, 4]; the patches of one volume are consecutive entries.
"""
import gzip
import json
import os
import re
import resource
import struct

import nibabel as nib
import numpy as np
import pytest
import torch
from scipy import stats as sps

import monai_ref as M
import stoker
import volume_fixtures as V
from memory_checks import memory_within

SEED = 13


# ---------------------------------------------------------------- helpers

def make(csv, transforms, fields=None, **kw):
    kw.setdefault("batch_size", 4)
    kw.setdefault("seed", SEED)
    kw.setdefault("threads", 2)
    kw.setdefault("shuffle", False)
    if fields is None:
        fields = [stoker.Volume("image"), stoker.LabelVolume("label")]
    return stoker.Loader(csv, fields=fields, transforms=transforms, **kw)


def as_numpy(batch):
    return {k: (v.numpy() if isinstance(v, torch.Tensor) else np.asarray(v)).copy() for k, v in batch.items()}


def epoch_batches(loader, epoch=None):
    """The batches of one epoch as dicts of numpy copies (the loader's buffers are reused)."""
    if epoch is not None:
        loader.set_epoch(epoch)
    return [as_numpy(b) for b in loader]


def concat(batches):
    return {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}


def run(loader, epochs=(0,)):
    """Every entry of the given epochs, concatenated."""
    out = []
    for e in epochs:
        out += epoch_batches(loader, e)
    return concat(out)


def check_layout(got, count, channels, patch, label_dtype=np.uint8):
    assert got["image"].dtype == np.float32 and got["image"].shape == (count, channels) + tuple(patch)
    if "label" in got:
        assert got["label"].dtype == label_dtype and got["label"].shape == (count, 1) + tuple(patch)
    assert got["image_start"].dtype == np.int64 and got["image_start"].shape == (count, 3)
    assert got["image_affine"].dtype == np.float64 and got["image_affine"].shape == (count, 4, 4)


def file_of(patch, n):
    """Which coord volume (file_offset = k * n) a patch comes from: its largest value // n (padding is 0)."""
    return int(np.asarray(patch).max()) // n


def binomial_ok(count, trials, p, sigmas=4.5):
    sd = np.sqrt(trials * p * (1 - p))
    return abs(count - trials * p) <= sigmas * sd


def stats_volume(loader):
    s = loader.stats()
    assert "volume" in s, sorted(s)
    return s["volume"]


class VolumeFile:
    """A fixture volume: its path, its array in stoker's layout (C, S0, S1, S2), its affine."""

    def __init__(self, path, arr, affine):
        self.path, self.arr, self.affine = os.fspath(path), arr, np.asarray(affine, np.float64)


def save_pair(d, name, img, lab, fmt="npy", affine=None):
    """An image (S0, S1, S2) and a label of the same shape as .npy or NIfTI-1 (.nii) files."""
    affine = np.eye(4) if affine is None else affine
    if fmt == "npy":
        pi = V.write_npy(d / f"{name}_img.npy", img)
        pl = V.write_npy(d / f"{name}_lab.npy", lab)
        aff = np.eye(4)
    else:
        pi = V.write_nifti(d / f"{name}_img.nii", img, affine)
        pl = V.write_nifti(d / f"{name}_lab.nii", lab, affine)
        aff = nib.load(pi).affine
    return VolumeFile(pi, V.channel_first(img, nifti=fmt != "npy"), aff), \
        VolumeFile(pl, V.channel_first(lab, nifti=fmt != "npy"), aff)


def check_window_patches(got, images, labels, patch, img_fill=0, lab_fill=0, check_affine=True):
    """Entry j of the batch holds images[j] / labels[j] (VolumeFile) sliced at image_start[j] (fill outside)."""
    for j, (vi, vl) in enumerate(zip(images, labels)):
        s = got["image_start"][j]
        want = V.window(vi.arr, s, patch, img_fill).astype(np.float32)
        np.testing.assert_array_equal(got["image"][j], want, err_msg=f"entry {j} start {s} {vi.path}")
        if vl is not None:
            wl = V.window(vl.arr, s, patch, lab_fill).astype(got["label"].dtype)
            np.testing.assert_array_equal(got["label"][j], wl, err_msg=f"label of entry {j} start {s}")
        if check_affine:
            np.testing.assert_allclose(got["image_affine"][j], vi.affine @ V.translation(s), rtol=0, atol=1e-6,
                                       err_msg=f"affine of entry {j}")


# ---------------------------------------------------------------- 1. reading

READ_SHAPE = (10, 12, 14)
FORMATS = ("npy", "nii1", "nii2", "nii1_big_endian", "nii1_qform", "nii_gz")


@pytest.fixture(scope="module")
def read_set(tmp_path_factory):
    """Every dtype in every format: 8 x 6 volumes of READ_SHAPE, values over the dtype's range."""
    d = tmp_path_factory.mktemp("vol_read")
    rng = np.random.default_rng(11)
    aff = V.example_affine()
    recs = []
    for dt in V.DTYPES:
        arr = V.random_values(rng, READ_SHAPE, dt)
        for fmt in FORMATS:
            if fmt == "npy":
                p = V.write_npy(d / f"{dt}.npy", arr)
                want, affine = np.load(p)[None], np.eye(4)
            else:
                p = V.write_nifti(d / (f"{dt}_{fmt}.nii" + (".gz" if fmt == "nii_gz" else "")), arr, aff,
                                  version=2 if fmt == "nii2" else 1, big_endian=fmt.endswith("big_endian"),
                                  qform_only=fmt.endswith("qform"), gz=fmt == "nii_gz")
                want, affine = V.nifti_raw(p), nib.load(p).affine
            np.testing.assert_array_equal(want[0], arr)
            recs.append(dict(path=p, want=want.astype(np.float32), affine=np.asarray(affine), what=f"{dt} {fmt}"))
    # Two columns: image and an integer (the list's label column); no label volumes here.
    csv = V.write_list(d / "read.csv", [(r["path"], i) for i, r in enumerate(recs)], header=("image", "idx"))
    return recs, csv


def test_full_size_center_crop_reads_every_dtype_and_format_exactly(read_set):
    recs, csv = read_set
    loader = make(csv, [stoker.CenterSpatialCrop(READ_SHAPE)], fields=[stoker.Volume("image")], batch_size=8)
    got = run(loader)
    check_layout(got, len(recs), 1, READ_SHAPE)
    for i, r in enumerate(recs):
        np.testing.assert_array_equal(got["image"][i], r["want"], err_msg=r["what"])
        np.testing.assert_array_equal(got["image_start"][i], [0, 0, 0], err_msg=r["what"])
        np.testing.assert_allclose(got["image_affine"][i], r["affine"], rtol=0, atol=1e-6, err_msg=r["what"])
    assert stats_volume(loader)["patches"] == len(recs)


def _regzip(path, cuts=(), pad=0):
    """Rewrites a .nii.gz as gzip members cut at `cuts` (offsets into the uncompressed file), then `pad` zero
    bytes: what pigz, `cat a.gz b.gz` and padding tools write."""
    raw = gzip.decompress(open(path, "rb").read())
    bounds = [0, *cuts, len(raw)]
    data = b"".join(gzip.compress(raw[a:b], compresslevel=6) for a, b in zip(bounds, bounds[1:])) + b"\0" * pad
    with open(path, "wb") as f:
        f.write(data)
    return path


def test_multi_member_and_zero_padded_nii_gz_read_as_nibabel(tmp_path):
    """F2 (fuzz/nii_gz_fuzz): the gzip trailer's ISIZE is not the file's size when the file has several members
    or zero padding; stoker reads the header through the stream, as gzip -d and nibabel do. Each file equals
    nibabel's np.asanyarray(img.dataobj), and the same volume as an uncompressed .nii through stoker."""
    shape = (20, 24, 28)  # 53,760 bytes of float32: cuts inside the header, the 4 KiB prefix and the voxels
    arr = V.random_values(np.random.default_rng(21), shape, "float32")
    aff = V.example_affine()
    plain = V.write_nifti(tmp_path / "plain.nii", arr, aff)
    cases = {"one_member": dict(), "padded": dict(pad=1000), "two_members": dict(cuts=(30000,)),
             "three_members": dict(cuts=(100, 5000)), "members_padded": dict(cuts=(348, 352, 4096), pad=3),
             "empty_member_last": dict(cuts=(53760 + 352,), pad=1)}
    paths = [plain]
    for name, kw in cases.items():
        p = V.write_nifti(tmp_path / f"{name}.nii.gz", arr, aff, gz=True)
        paths.append(_regzip(p, **kw))
        n = len(gzip.open(p).read())
        assert n == 352 + arr.nbytes, (name, n)
        if kw:  # the trailer's ISIZE no longer says the file's size
            assert struct.unpack("<I", open(p, "rb").read()[-4:])[0] != n, name
    csv = V.write_list(tmp_path / "m.csv", [(p, i) for i, p in enumerate(paths)], header=("image", "idx"))
    loader = make(csv, [stoker.CenterSpatialCrop(shape)], fields=[stoker.Volume("image")], batch_size=len(paths),
                  on_corrupt="raise")
    got = run(loader)
    check_layout(got, len(paths), 1, shape)
    for i, p in enumerate(paths):
        want = V.nifti_raw(p)
        assert want.shape == (1,) + shape
        np.testing.assert_array_equal(want[0], arr, err_msg=p)  # nibabel reads every variant
        np.testing.assert_array_equal(got["image"][i], want.astype(np.float32), err_msg=p)
        np.testing.assert_array_equal(got["image"][i], got["image"][0], err_msg=p)  # = the .nii through stoker
        np.testing.assert_allclose(got["image_affine"][i], nib.load(p).affine, rtol=0, atol=1e-6)


def test_nifti_scaling_is_applied_as_get_fdata(tmp_path):
    """scl_slope/scl_inter: nibabel's get_fdata (raw * slope + inter), to float32 rounding."""
    rng = np.random.default_rng(12)
    aff = V.example_affine()
    cases = [("int16", dict(version=1, slope=0.5, inter=-100.0)),
             ("uint16", dict(version=2, slope=0.25, inter=3.5, big_endian=True)),
             ("uint8", dict(version=1, slope=2.5, inter=1.25, gz=True)),
             ("float32", dict(version=1, slope=3.0, inter=0.0)),
             ("int32", dict(version=2, slope=1e-3, inter=-7.0))]
    paths = []
    for i, (dt, kw) in enumerate(cases):
        name = f"s{i}.nii" + (".gz" if kw.get("gz") else "")
        paths.append(V.write_nifti(tmp_path / name, V.random_values(rng, READ_SHAPE, dt), aff, **kw))
    csv = V.write_list(tmp_path / "s.csv", [(p, i) for i, p in enumerate(paths)], header=("image", "idx"))
    got = run(make(csv, [stoker.CenterSpatialCrop(READ_SHAPE)], fields=[stoker.Volume("image")], batch_size=5))
    check_layout(got, len(paths), 1, READ_SHAPE)
    for i, p in enumerate(paths):
        img = nib.load(p)
        ref64 = img.get_fdata(dtype=np.float64)[None]
        ref32 = img.get_fdata(dtype=np.float32)[None]
        tol = 4 * np.finfo(np.float32).eps * max(np.abs(ref64).max(), 1.0)
        assert np.abs(got["image"][i] - ref64).max() <= tol, (p, cases[i])
        assert np.abs(got["image"][i] - ref32).max() <= 2 * tol, (p, cases[i])
        np.testing.assert_allclose(got["image_affine"][i], img.affine, rtol=0, atol=1e-6)


def test_four_dimensional_volumes_are_channels(tmp_path):
    """NIfTI (i, j, k, t): t moved first (C = dim[4]); .npy (C, S0, S1, S2) as stored."""
    rng = np.random.default_rng(13)
    nii = V.random_values(rng, READ_SHAPE + (2,), "float32")
    npy = V.random_values(rng, (2,) + READ_SHAPE, "int16")
    p0 = V.write_nifti(tmp_path / "c2.nii", nii, V.example_affine())
    p1 = V.write_npy(tmp_path / "c2.npy", npy)
    p2 = V.write_nifti(tmp_path / "c2b.nii.gz", nii[..., ::-1].copy(), V.example_affine(), version=2, gz=True)
    csv = V.write_list(tmp_path / "c.csv", [(p0, 0), (p1, 1), (p2, 2)], header=("image", "idx"))
    got = run(make(csv, [stoker.CenterSpatialCrop(READ_SHAPE)], fields=[stoker.Volume("image")], batch_size=3))
    check_layout(got, 3, 2, READ_SHAPE)
    np.testing.assert_array_equal(got["image"][0], np.moveaxis(nii, -1, 0))
    np.testing.assert_array_equal(got["image"][0], V.nifti_raw(p0).astype(np.float32))
    np.testing.assert_array_equal(got["image"][1], npy.astype(np.float32))
    np.testing.assert_array_equal(got["image"][2], np.moveaxis(nii[..., ::-1], -1, 0))
    np.testing.assert_allclose(got["image_affine"][0], nib.load(p0).affine, rtol=0, atol=1e-6)


def test_nii_gz_is_inflated_once_then_served_from_the_volume_cache(tmp_path):
    """.nii.gz volumes are decompressed on first use and kept (within memory_budget): epoch 2 inflates nothing
    and gives the same batches."""
    rng = np.random.default_rng(14)
    shape = (24, 24, 24)
    rows = []
    for i in range(6):
        pi = V.write_nifti(tmp_path / f"g{i}.nii.gz", V.coord_volume(shape, "int16", offset=i * 1000), np.eye(4),
                           gz=True)
        pl = V.write_nifti(tmp_path / f"g{i}_lab.nii.gz",
                           rng.integers(0, 3, size=shape).astype(np.uint8), np.eye(4), gz=True)
        rows.append((pi, pl))
    csv = V.write_list(tmp_path / "g.csv", rows)
    loader = make(csv, [stoker.CenterSpatialCrop((16, 16, 16))], batch_size=3, memory_budget=256 << 20)
    e0 = run(loader, (0,))
    s0 = dict(stats_volume(loader))
    raw_bytes = 6 * (24 ** 3) * (2 + 1)
    assert s0["inflate_bytes"] >= raw_bytes, s0
    e1 = run(loader, (1,))
    s1 = stats_volume(loader)
    for k in e0:
        np.testing.assert_array_equal(e0[k], e1[k], err_msg=k)
    assert s1["inflate_bytes"] == s0["inflate_bytes"], "epoch 2 is served from the volume cache"
    assert s1["cache_hits"] - s0["cache_hits"] >= 6, (s0, s1)
    assert s0["cache_misses"] >= 6
    for i, (pi, pl) in enumerate(rows):
        np.testing.assert_array_equal(e0["image"][i], M.center_spatial_crop(V.nifti_raw(pi), 16).astype(np.float32))
        np.testing.assert_array_equal(e0["label"][i], M.center_spatial_crop(V.nifti_raw(pl), 16))


def test_the_volume_cache_is_an_account_of_the_memory_budget(tmp_path):
    """Inflated volumes and label indexes are charged to stats()["memory"]'s volume_cache account, within
    memory_budget; a budget too small for them keeps fewer, and the batches do not change."""
    rows = []
    for i in range(4):
        pi = V.write_nifti(tmp_path / f"m{i}.nii.gz", V.coord_volume((20, 20, 20), "int16", offset=i * 1000),
                           np.eye(4), gz=True)
        pl = V.write_nifti(tmp_path / f"m{i}_lab.nii.gz", np.full((20, 20, 20), i % 3, np.uint8), np.eye(4), gz=True)
        rows.append((pi, pl))
    csv = V.write_list(tmp_path / "m.csv", rows)
    big, small = 64 << 20, 20 ** 3 * 3
    a = make(csv, [stoker.CenterSpatialCrop((8, 8, 8))], batch_size=2, memory_budget=big, cache="ram")
    b = make(csv, [stoker.CenterSpatialCrop((8, 8, 8))], batch_size=2, memory_budget=small, cache="ram")
    ea, eb = run(a, (0, 1)), run(b, (0, 1))
    for k in ea:
        np.testing.assert_array_equal(ea[k], eb[k], err_msg=k)
    sa, sb = a.stats(), b.stats()
    ma = memory_within(sa, big)
    assert ma["accounts"]["volume_cache"] == sa["volume"]["cache_bytes"] >= 4 * 20 ** 3 * 3, ma
    assert ma["accounts"]["sample_cache"] == 0 and ma["accounts"]["remote_shards"] == 0
    mb = sb["memory"]
    assert mb["accounts"]["volume_cache"] == sb["volume"]["cache_bytes"] < ma["accounts"]["volume_cache"], mb


# ---------------------------------------------------------------- 2. crops and pads

CROP_SHAPE = (40, 36, 32)
CROP_N = int(np.prod(CROP_SHAPE))


@pytest.fixture(scope="module")
def crop_set(tmp_path_factory):
    """4 coord volumes (float32, file k holds k * CROP_N + index) with uint8 labels (value % 251): three .npy,
    one NIfTI-1 with a rotated, flipped affine. Lists: `rows(n)` cycles through the 4 files n times."""
    d = tmp_path_factory.mktemp("vol_crop")
    files = []
    for k in range(4):
        img = V.coord_volume(CROP_SHAPE, "float32", offset=k * CROP_N)
        lab = (img.astype(np.int64) % 251).astype(np.uint8)
        files.append(save_pair(d, f"c{k}", img, lab, fmt="nii" if k == 3 else "npy", affine=V.example_affine()))

    def rows(n, name):
        return V.write_list(d / f"{name}.csv", [(files[i % 4][0].path, files[i % 4][1].path) for i in range(n)])

    return dict(dir=d, files=files, rows=rows)


def entry_files(crop_set, count, n):
    """With shuffle=False: entry j is record j // n, which lists file (j // n) % 4."""
    files = crop_set["files"]
    return [files[(j // n) % 4][0] for j in range(count)], [files[(j // n) % 4][1] for j in range(count)]


def test_rand_spatial_crop_patches_are_slices_at_uniform_starts(crop_set):
    P = (16, 20, 12)
    csv = crop_set["rows"](300, "r300")
    loader = make(csv, [stoker.RandSpatialCrop(P)], batch_size=6)
    got = run(loader, (0, 1))
    count = 600
    check_layout(got, count, 1, P)
    imgs, labs = entry_files(crop_set, 300, 1)
    check_window_patches(got, imgs + imgs, labs + labs, P)
    for j in range(count):
        assert file_of(got["image"][j], CROP_N) == (j % 300) % 4
    starts = got["image_start"]
    for ax, (lo, hi) in enumerate(M.random_patch_start_range(CROP_SHAPE, P)):
        assert starts[:, ax].min() == lo and starts[:, ax].max() == hi, f"axis {ax}: every start in [0, {hi}]"
    # Uniform corner on axis 0 (get_random_patch: randint(0, 40 - 16 + 1)): 25 values, 600 draws.
    counts = np.bincount(starts[:, 0], minlength=25)
    p = sps.chisquare(counts).pvalue
    assert p > 1e-4, (p, counts)
    # The two epochs draw differently.
    assert (starts[:300] != starts[300:]).any(axis=1).mean() > 0.9
    assert stats_volume(loader)["patches"] == count


def test_rand_spatial_crop_samples_are_consecutive_and_independent(crop_set):
    P = (16, 20, 12)
    n = 4
    csv = crop_set["rows"](12, "r12")
    got = run(make(csv, [stoker.RandSpatialCropSamples(P, num_samples=n)], batch_size=3))
    check_layout(got, 12 * n, 1, P)
    imgs, labs = entry_files(crop_set, 12 * n, n)
    check_window_patches(got, imgs, labs, P)
    for r in range(12):
        assert {file_of(got["image"][r * n + p], CROP_N) for p in range(n)} == {r % 4}, f"record {r}"
    distinct = {tuple(s) for s in got["image_start"]}
    assert len(distinct) >= 40, "each patch draws its own start"


@pytest.mark.parametrize("which", ["CenterSpatialCrop", "RandSpatialCrop(random_center=False)"])
def test_center_spatial_crop_start_is_monai_s(crop_set, which):
    roi = (15, 20, 11)
    tf = stoker.CenterSpatialCrop(roi) if which == "CenterSpatialCrop" else \
        stoker.RandSpatialCrop(roi, random_center=False)
    csv = crop_set["rows"](4, "r4")
    got = run(make(csv, [tf], batch_size=2))
    check_layout(got, 4, 1, roi)
    start, size = M.center_crop_start(CROP_SHAPE, roi)
    assert start == (13, 8, 11) and size == roi  # (40 // 2 - 7, 36 // 2 - 10, 32 // 2 - 5)
    imgs, labs = entry_files(crop_set, 4, 1)
    check_window_patches(got, imgs, labs, roi)
    for j in range(4):
        np.testing.assert_array_equal(got["image_start"][j], start)
        np.testing.assert_array_equal(got["image"][j], M.center_spatial_crop(imgs[j].arr, roi))


@pytest.fixture(scope="module")
def small_set(tmp_path_factory):
    """Volumes smaller than the 24^3 patch on some axes: (20, 30, 17) coord float32 + uint8 labels."""
    d = tmp_path_factory.mktemp("vol_small")
    shape = (20, 30, 17)
    n = int(np.prod(shape))
    files = []
    for k in range(2):
        img = V.coord_volume(shape, "float32", offset=k * n)
        lab = (img.astype(np.int64) % 251).astype(np.uint8)
        files.append(save_pair(d, f"s{k}", img, lab))
    csv = V.write_list(d / "s.csv", [(fi.path, fl.path) for fi, fl in files] * 4)
    return dict(files=files, csv=csv, shape=shape, n=n)


@pytest.mark.parametrize("method", ["symmetric", "end"])
def test_center_crop_then_spatial_pad_to_a_fixed_size(small_set, method):
    """CenterSpatialCrop(24) keeps the axes smaller than 24, SpatialPad(24) pads them: images with 0, labels with
    their fill; image_start is negative where the pad goes before the volume."""
    size = (24, 24, 24)
    fields = [stoker.Volume("image"), stoker.LabelVolume("label", fill=255)]
    got = run(make(small_set["csv"], [stoker.CenterSpatialCrop(size), stoker.SpatialPad(size, method=method)],
                   fields=fields, batch_size=4))
    check_layout(got, 8, 1, size)
    # axis 0: 20 -> pad 4; axis 1: 30 -> crop from 15 - 12 = 3; axis 2: 17 -> pad 7
    want_start = (-2, 3, -3) if method == "symmetric" else (0, 3, 0)
    for j in range(8):
        fi, fl = small_set["files"][j % 2]
        np.testing.assert_array_equal(got["image_start"][j], want_start)
        ref_img = M.spatial_pad(M.center_spatial_crop(fi.arr, size), size, method, value=0)
        ref_lab = M.spatial_pad(M.center_spatial_crop(fl.arr, size), size, method, value=255)
        np.testing.assert_array_equal(got["image"][j], ref_img.astype(np.float32), err_msg=f"entry {j}")
        np.testing.assert_array_equal(got["label"][j], ref_lab, err_msg=f"label {j}")
        np.testing.assert_allclose(got["image_affine"][j], V.translation(want_start), atol=1e-9)
    check_window_patches(got, [small_set["files"][j % 2][0] for j in range(8)],
                         [small_set["files"][j % 2][1] for j in range(8)], size, 0, 255)


def test_rand_crop_of_a_smaller_volume_then_pad_at_the_end(small_set):
    """RandSpatialCrop(24): an axis not larger than 24 is taken whole (start 0, get_valid_patch_size), the
    others at a random start; SpatialPad(method="end") fills the rest after the volume."""
    size = (24, 24, 24)
    fields = [stoker.Volume("image"), stoker.LabelVolume("label", fill=255)]
    loader = make(small_set["csv"], [stoker.RandSpatialCrop(size), stoker.SpatialPad(size, method="end")],
                  fields=fields, batch_size=4)
    got = run(loader, (0, 1, 2))
    check_layout(got, 24, 1, size)
    starts = got["image_start"]
    assert (starts[:, 0] == 0).all() and (starts[:, 2] == 0).all()
    assert starts[:, 1].min() >= 0 and starts[:, 1].max() <= 6 and len(set(starts[:, 1])) > 2
    check_window_patches(got, [small_set["files"][j % 2][0] for j in range(24)],
                         [small_set["files"][j % 2][1] for j in range(24)], size, 0, 255)
    assert (got["image"][:, :, 20:] == 0).all() and (got["label"][:, :, :, :, 17:] == 255).all()


def test_int16_label_volumes_batch_as_int32(tmp_path):
    shape = (20, 20, 20)
    img = V.coord_volume(shape, "float32")
    lab = V.coord_volume(shape, "int16", offset=-4000)
    fi, fl = save_pair(tmp_path, "i16", img, lab)
    csv = V.write_list(tmp_path / "l.csv", [(fi.path, fl.path)] * 2)
    got = run(make(csv, [stoker.RandSpatialCrop((8, 8, 8))], batch_size=2))
    check_layout(got, 2, 1, (8, 8, 8), label_dtype=np.int32)
    check_window_patches(got, [fi, fi], [fl, fl], (8, 8, 8))


# ---------------------------------------------------------------- 3. flips and rot90

FLIP_SHAPE = (24, 28, 20)
FLIP_N = int(np.prod(FLIP_SHAPE))


@pytest.fixture(scope="module")
def flip_set(tmp_path_factory):
    """4 coord volumes of FLIP_SHAPE (+ uint8 labels), listed 100 times in turn (400 patches with n=4)."""
    d = tmp_path_factory.mktemp("vol_flip")
    files = []
    for k in range(4):
        img = V.coord_volume(FLIP_SHAPE, "float32", offset=k * FLIP_N)
        lab = (img.astype(np.int64) % 251).astype(np.uint8)
        files.append(save_pair(d, f"f{k}", img, lab))
    csv = V.write_list(d / "f.csv", [(files[i % 4][0].path, files[i % 4][1].path) for i in range(100)])
    return dict(files=files, csv=csv)


def match_candidates(got, flip_set, patch, candidates, n=4):
    """For each entry: the names of the candidate ops (name -> fn(channel-first array)) that turn the slice at
    image_start into the patch; exactly one must, and the label must be the same op of its slice."""
    chosen = []
    for j in range(len(got["image"])):
        fi, fl = flip_set["files"][(j // n) % 4]
        assert file_of(got["image"][j], FLIP_N) == (j // n) % 4
        s = got["image_start"][j]
        base = V.window(fi.arr, s, patch)
        hits = [name for name, fn in candidates.items() if np.array_equal(got["image"][j], fn(base))]
        assert len(hits) == 1, f"entry {j} start {s}: matches {hits}"
        lab = candidates[hits[0]](V.window(fl.arr, s, patch))
        np.testing.assert_array_equal(got["label"][j], lab, err_msg=f"label of entry {j} ({hits[0]})")
        chosen.append(hits[0])
    return chosen


def flip_subsets(axes):
    out = {}
    for mask in range(1 << len(axes)):
        sub = tuple(a for i, a in enumerate(axes) if mask >> i & 1)
        out[sub] = (lambda x, sub=sub: M.rand_flip(x, sub) if sub else x.copy())
    return out


def test_rand_flip_per_axis_draws_are_exact_and_fair(flip_set):
    P = (12, 14, 10)
    tf = [stoker.RandSpatialCropSamples(P, num_samples=4)] + \
        [stoker.RandFlip(prob=0.5, spatial_axis=a) for a in (0, 1, 2)]
    got = run(make(flip_set["csv"], tf, batch_size=5))
    check_layout(got, 400, 1, P)
    chosen = match_candidates(got, flip_set, P, flip_subsets((0, 1, 2)))
    for a in (0, 1, 2):
        k = sum(a in c for c in chosen)
        assert binomial_ok(k, 400, 0.5), f"axis {a} flipped {k} / 400 times"
    assert len(set(chosen)) == 8, "every combination of the three independent flips occurs"


@pytest.mark.parametrize("spatial_axis", [None, (0, 2), 1])
def test_rand_flip_one_draw_flips_every_listed_axis(flip_set, spatial_axis):
    P = (12, 14, 10)
    tf = [stoker.RandSpatialCropSamples(P, num_samples=4), stoker.RandFlip(prob=0.5, spatial_axis=spatial_axis)]
    got = run(make(flip_set["csv"], tf, batch_size=5))
    cand = {"none": lambda x: x.copy(), "flip": lambda x: M.rand_flip(x, spatial_axis)}
    chosen = match_candidates(got, flip_set, P, cand)
    k = chosen.count("flip")
    assert binomial_ok(k, 400, 0.5), f"flipped {k} / 400"


ROT_PATCH = {(0, 1): (12, 12, 8), (1, 2): (8, 12, 12), (0, 2): (12, 8, 12)}


@pytest.mark.parametrize("axes,max_k", [((0, 1), 3), ((1, 2), 3), ((0, 2), 3), ((0, 1), 1)])
def test_rand_rotate90_is_torch_rot90_on_the_spatial_axes(flip_set, axes, max_k):
    P = ROT_PATCH[axes]
    tf = [stoker.RandSpatialCropSamples(P, num_samples=4), stoker.RandRotate90(prob=0.5, max_k=max_k,
                                                                                spatial_axes=axes)]
    got = run(make(flip_set["csv"], tf, batch_size=5))
    check_layout(got, 400, 1, P)
    cand = {k: (lambda x, k=k: M.rand_rotate90(x, k, axes)) for k in range(4)}
    chosen = match_candidates(got, flip_set, P, cand)
    counts = np.bincount(chosen, minlength=4)
    assert binomial_ok(counts[0], 400, 0.5), counts
    for k in (1, 2, 3):  # k = randint(max_k) + 1
        if k <= max_k:
            assert binomial_ok(counts[k], 400, 0.5 / max_k), counts
        else:
            assert counts[k] == 0, counts


def test_flip_then_rot90_applies_the_same_draws_to_image_and_label(flip_set):
    """In list order (flip, then rot90): each patch is rot90(flip(slice)), label the same one."""
    P = (12, 12, 8)
    tf = [stoker.RandSpatialCropSamples(P, num_samples=4), stoker.RandFlip(prob=0.5, spatial_axis=0),
          stoker.RandRotate90(prob=0.5, max_k=3, spatial_axes=(0, 1))]
    got = run(make(flip_set["csv"], tf, batch_size=5))
    cand = {(f, k): (lambda x, f=f, k=k: M.rand_rotate90(M.rand_flip(x, 0) if f else x, k, (0, 1)))
            for f in (0, 1) for k in range(4)}
    # The 8 candidates are distinct maps, but rot90(k) then flip equals flip then rot90(4 - k), so membership
    # alone cannot tell the order: what this checks is that both draws are applied, jointly to the label.
    chosen = []
    for j in range(400):
        fi, fl = flip_set["files"][(j // 4) % 4]
        s = got["image_start"][j]
        base, lbase = V.window(fi.arr, s, P), V.window(fl.arr, s, P)
        hits = [c for c, fn in cand.items() if np.array_equal(got["image"][j], fn(base))]
        assert len(hits) == 1, (j, hits)
        np.testing.assert_array_equal(got["label"][j], cand[hits[0]](lbase))
        chosen.append(hits[0])
    assert binomial_ok(sum(f for f, _ in chosen), 400, 0.5)


# ---------------------------------------------------------------- 4. intensity

INT_SHAPE = (24, 24, 24)


@pytest.fixture(scope="module")
def int_set(tmp_path_factory):
    """int16 CT-like volumes: a random one over [-1500, 2500], one half zeros, one constant (5); uint8 labels.
    And 2-channel float32 .npy volumes (channel scales differ), and a 20^3 volume for pad/order checks."""
    d = tmp_path_factory.mktemp("vol_int")
    rng = np.random.default_rng(21)
    vols = [rng.integers(-1500, 2500, size=INT_SHAPE).astype(np.int16)]
    half = rng.integers(-1500, 2500, size=INT_SHAPE).astype(np.int16)
    half[rng.random(INT_SHAPE) < 0.5] = 0
    vols.append(half)
    vols.append(np.full(INT_SHAPE, 5, np.int16))
    files = [save_pair(d, f"i{k}", v, rng.integers(0, 4, size=INT_SHAPE).astype(np.uint8))
             for k, v in enumerate(vols)]
    csv = V.write_list(d / "i.csv", [(fi.path, fl.path) for fi, fl in files] * 4)
    two = []
    for k in range(2):
        arr = np.stack([rng.normal(100, 20, INT_SHAPE), rng.normal(-3, 0.5, INT_SHAPE)]).astype(np.float32)
        arr[:, :, :4] = 0  # zeros for nonzero=True
        lab = rng.integers(0, 2, size=INT_SHAPE).astype(np.uint8)
        pi, pl = V.write_npy(d / f"two{k}.npy", arr), V.write_npy(d / f"two{k}_lab.npy", lab)
        two.append((VolumeFile(pi, arr, np.eye(4)), VolumeFile(pl, lab[None], np.eye(4))))
    csv2 = V.write_list(d / "two.csv", [(fi.path, fl.path) for fi, fl in two] * 4)
    small = rng.integers(-1500, 2500, size=(20, 20, 20)).astype(np.int16)
    sfile = save_pair(d, "small", small, np.ones((20, 20, 20), np.uint8))
    csv3 = V.write_list(d / "small.csv", [(sfile[0].path, sfile[1].path)] * 2)
    return dict(files=files, csv=csv, two=two, csv2=csv2, small=sfile, csv3=csv3)


def assert_close_to_range(got, ref, what):
    ref = np.asarray(ref, np.float64)
    scale = max(float(np.ptp(ref)), float(np.abs(ref).max()), 1.0) if np.ptp(ref) == 0 else float(np.ptp(ref))
    err = np.abs(got.astype(np.float64) - ref).max()
    assert err <= 1e-5 * scale, f"{what}: max abs error {err} > 1e-5 x {scale}"


SCALE_CASES = [
    dict(a_min=-1000.0, a_max=1000.0, b_min=0.0, b_max=1.0, clip=True),
    dict(a_min=-1000.0, a_max=1000.0, b_min=0.0, b_max=1.0),
    dict(a_min=-1000.0, a_max=1000.0),
    dict(a_min=-1000.0, a_max=1000.0, b_min=-0.1, clip=True),  # only b_min: no rescale, clip below at -0.1
    dict(a_min=100.0, a_max=100.0, b_min=2.0, b_max=5.0),  # a_min == a_max: x - a_min + b_min
]


@pytest.mark.parametrize("params", SCALE_CASES, ids=[str(i) for i in range(len(SCALE_CASES))])
def test_scale_intensity_range_matches_monai(int_set, params):
    P = (16, 16, 16)
    loader = make(int_set["csv"], [stoker.RandSpatialCrop(P), stoker.ScaleIntensityRange(**params)], batch_size=3)
    got = run(loader)
    check_layout(got, 12, 1, P)
    for j in range(12):
        fi, fl = int_set["files"][j % 3]
        s = got["image_start"][j]
        ref = M.scale_intensity_range(V.window(fi.arr, s, P), **params)
        assert_close_to_range(got["image"][j], ref, f"entry {j} {params}")
        np.testing.assert_array_equal(got["label"][j], V.window(fl.arr, s, P), err_msg="labels are not scaled")


@pytest.mark.parametrize("scale_first", [False, True])
def test_intensity_and_pad_apply_in_list_order(int_set, scale_first):
    """Pad then scale: the padding (0) is scaled too (0.5 here); scale then pad: the padding stays 0."""
    size = (24, 24, 24)
    scale = dict(a_min=-1000.0, a_max=1000.0, b_min=0.0, b_max=1.0)
    geo = [stoker.CenterSpatialCrop(size), stoker.SpatialPad(size)]
    tf = [stoker.ScaleIntensityRange(**scale)] + geo if scale_first else geo + [stoker.ScaleIntensityRange(**scale)]
    got = run(make(int_set["csv3"], tf, batch_size=2))
    arr = int_set["small"][0].arr
    if scale_first:
        ref = M.spatial_pad(M.center_spatial_crop(M.scale_intensity_range(arr, **scale), size), size)
    else:
        ref = M.scale_intensity_range(M.spatial_pad(M.center_spatial_crop(arr, size), size), **scale)
    for j in range(2):
        assert_close_to_range(got["image"][j], ref, f"scale_first={scale_first}")
        np.testing.assert_array_equal(got["image_start"][j], (-2, -2, -2))
    assert got["image"][0][0, 0, 0, 0] == (0.0 if scale_first else 0.5)


NORM_CASES = [
    dict(),
    dict(nonzero=True),
    dict(subtrahend=100.0, divisor=50.0),
    dict(subtrahend=100.0, divisor=50.0, nonzero=True),
    dict(subtrahend=-3.0, divisor=0.0),  # a divisor of 0 becomes 1 (MONAI)
]


@pytest.mark.parametrize("params", NORM_CASES, ids=[str(i) for i in range(len(NORM_CASES))])
def test_normalize_intensity_on_each_patch_matches_monai(int_set, params):
    """Statistics of the patch (after the crop): population std, std 0 -> 1 (the constant volume), nonzero
    keeps zeros."""
    P = (16, 16, 16)
    got = run(make(int_set["csv"], [stoker.RandSpatialCrop(P), stoker.NormalizeIntensity(**params)], batch_size=3))
    check_layout(got, 12, 1, P)
    for j in range(12):
        fi, fl = int_set["files"][j % 3]
        s = got["image_start"][j]
        base = V.window(fi.arr, s, P)
        ref = M.normalize_intensity(base, **params)
        assert_close_to_range(got["image"][j], ref, f"entry {j} {params}")
        if params.get("nonzero"):
            assert (got["image"][j][base == 0] == 0).all()
        np.testing.assert_array_equal(got["label"][j], V.window(fl.arr, s, P))
    if not params:
        assert (got["image"][2::3] == 0).all(), "a constant patch: (x - mean) / 1 = 0"


TWO_CASES = [
    dict(channel_wise=True),
    dict(channel_wise=True, nonzero=True),
    dict(channel_wise=True, subtrahend=[1.0, -2.0], divisor=[2.0, 4.0]),
    dict(),
]


@pytest.mark.parametrize("params", TWO_CASES, ids=[str(i) for i in range(len(TWO_CASES))])
def test_normalize_intensity_channel_wise(int_set, params):
    P = (16, 16, 16)
    got = run(make(int_set["csv2"], [stoker.RandSpatialCrop(P), stoker.NormalizeIntensity(**params)], batch_size=2))
    check_layout(got, 8, 2, P)
    for j in range(8):
        fi, _ = int_set["two"][j % 2]
        s = got["image_start"][j]
        ref = M.normalize_intensity(V.window(fi.arr, s, P), **params)
        assert_close_to_range(got["image"][j], ref, f"entry {j} {params}")


# ---------------------------------------------------------------- 5. RandCropByPosNegLabel

PN_SHAPE = (64, 64, 64)


@pytest.fixture(scope="module")
def posneg_set(tmp_path_factory):
    """A 64^3 label with a 10^3 foreground cube [27, 37)^3, its coord image, listed 500 times."""
    d = tmp_path_factory.mktemp("vol_posneg")
    img = V.coord_volume(PN_SHAPE, "float32")
    lab = V.phantom_label(PN_SHAPE, [((27, 27, 27), (37, 37, 37))])
    fi, fl = save_pair(d, "pn", img, lab)
    csv = V.write_list(d / "pn.csv", [(fi.path, fl.path)] * 500)
    return dict(img=fi, lab=fl, csv=csv, dir=d)


def test_pos_neg_crop_ratio_centres_and_border_correction(posneg_set):
    P = (8, 8, 8)
    n = 4
    tf = [stoker.RandCropByPosNegLabel(P, label_key="label", pos=1.0, neg=3.0, num_samples=n)]
    loader = make(posneg_set["csv"], tf, batch_size=25)
    got = run(loader)
    count = 500 * n
    check_layout(got, count, 1, P)
    fi, fl = posneg_set["img"], posneg_set["lab"]
    check_window_patches(got, [fi] * count, [fl] * count, P)
    starts = got["image_start"]
    centres = starts + np.array(P) // 2
    # correct_crop_centers for 8 in 64: valid centres [4, uint16(65 - 4) - 1] = [4, 60] -> starts [0, 56]
    assert centres.min() >= 4 and centres.max() <= 60
    lab = fl.arr[0]
    is_fg = lab[tuple(centres.T)] != 0
    np.testing.assert_array_equal(is_fg, got["label"][:, 0, 4, 4, 4] != 0)
    # The cube is far from the borders: a foreground centre is never moved, so fg patches ~ Binomial(2000, 1/4).
    n_fg = int(is_fg.sum())
    assert binomial_ok(n_fg, count, M.pos_ratio(1, 3)), n_fg
    # Foreground centres uniform over the cube: mean 31.5 per axis (sd of one draw 2.87).
    fgc = centres[is_fg]
    assert (np.abs(fgc.mean(0) - 31.5) <= 4.5 * 2.872 / np.sqrt(n_fg)).all(), fgc.mean(0)
    # Background centres uniform over the background, then corrected: the mass of axis-0 coordinates 0..4 lands
    # on 4 and of 60..63 on 60 (monai_ref.correct_crop_centers on each background row).
    bg_rows = (lab == 0).sum(axis=(1, 2)).astype(np.float64)
    corrected = np.array([M.correct_crop_centers([i, 32, 32], P, PN_SHAPE)[0] for i in range(64)])
    n_bg = count - n_fg
    for v in (4, 60):
        p = bg_rows[corrected == v].sum() / bg_rows.sum()
        k = int((centres[~is_fg, 0] == v).sum())
        assert binomial_ok(k, n_bg, p), (v, k, n_bg * p)
    vs = stats_volume(loader)
    assert vs["patches"] == count
    assert 1 <= vs["label_index_builds"] <= 500
    assert vs["posneg_one_class"] == 0


def test_pos_neg_crop_at_a_corner_voxel_is_corrected_as_monai(tmp_path):
    """One foreground voxel, pos=1, neg=0: every centre is that voxel moved by correct_crop_centers; the window
    starts where monai_ref says. The label index is built once per volume (cached over epochs)."""
    shape = (24, 24, 24)
    P = (7, 8, 6)
    img = V.coord_volume(shape, "float32")
    spots = [(0, 0, 0), (23, 23, 23), (0, 23, 11), (3, 20, 2), (12, 12, 12), (20, 4, 21)]
    files = []
    for k, spot in enumerate(spots):
        lab = np.zeros(shape, np.uint8)
        lab[spot] = 1
        files.append(save_pair(tmp_path, f"corner{k}", img, lab))
    csv = V.write_list(tmp_path / "c.csv", [(fi.path, fl.path) for fi, fl in files])
    tf = [stoker.RandCropByPosNegLabel(P, label_key="label", pos=1.0, neg=0.0, num_samples=2)]
    loader = make(csv, tf, batch_size=3)
    got = run(loader, (0, 1))
    check_layout(got, 2 * len(spots) * 2, 1, P)
    for j in range(len(got["image"])):
        k = (j // 2) % len(spots)
        centre = M.correct_crop_centers(list(spots[k]), P, shape)
        want = M.posneg_starts([centre], P, shape)[0]
        np.testing.assert_array_equal(got["image_start"][j], want, err_msg=f"spot {spots[k]}")
        check_window_patches({key: v[j:j + 1] for key, v in got.items()}, [files[k][0]], [files[k][1]], P)
    assert stats_volume(loader)["label_index_builds"] == len(spots), "one index per volume, kept over epochs"


def test_pos_neg_crop_with_one_class_missing(tmp_path):
    """No foreground: every centre from the background (and the reverse), counted as posneg_one_class."""
    shape = (24, 24, 24)
    P = (8, 8, 8)
    img = V.coord_volume(shape, "float32")
    empty = save_pair(tmp_path, "empty", img, np.zeros(shape, np.uint8))
    full = save_pair(tmp_path, "full", img, np.full(shape, 2, np.uint8))
    csv = V.write_list(tmp_path / "e.csv", [(empty[0].path, empty[1].path), (full[0].path, full[1].path),
                                            (empty[0].path, empty[1].path)])
    tf = [stoker.RandCropByPosNegLabel(P, label_key="label", pos=1.0, neg=1.0, num_samples=4)]
    loader = make(csv, tf, batch_size=3)
    got = run(loader)
    check_layout(got, 12, 1, P)
    pairs = [empty, full, empty]
    check_window_patches(got, [pairs[j // 4][0] for j in range(12)], [pairs[j // 4][1] for j in range(12)], P)
    assert (got["label"][:4] == 0).all() and (got["label"][4:8] == 2).all() and (got["label"][8:] == 0).all()
    starts = got["image_start"]
    assert starts.min() >= 0 and starts.max() <= 16
    assert len({tuple(s) for s in starts}) > 6, "centres drawn over the whole volume"
    assert stats_volume(loader)["posneg_one_class"] >= 3


# ---------------------------------------------------------------- 6. bytes read

@pytest.mark.parametrize("fmt", ["npy", "nii"])
def test_patch_reads_about_its_own_bytes(tmp_path, fmt):
    """A 32^3 patch of a 128^3 int16 volume (4 MiB) and its uint8 label: the voxels read for it are at least the
    patch's and at most twice (runs along the fastest axis, merged only across small gaps)."""
    shape = (128, 128, 128)
    img = V.coord_volume(shape, "int16")
    lab = (np.arange(128, dtype=np.uint8)[:, None, None] + np.zeros(shape, np.uint8))
    fi, fl = save_pair(tmp_path, "big", img, lab, fmt=fmt)
    csv = V.write_list(tmp_path / "b.csv", [(fi.path, fl.path)] * 8)
    P = (32, 32, 32)
    loader = make(csv, [stoker.RandSpatialCrop(P)], batch_size=4)
    got = run(loader)
    check_window_patches(got, [fi] * 8, [fl] * 8, P)
    vs = stats_volume(loader)
    patch_bytes = 32 ** 3 * (2 + 1)
    assert vs["patches"] == 8
    assert 8 * patch_bytes <= vs["bytes_read"] <= 2 * 8 * patch_bytes, vs
    assert vs["bytes_per_patch"] <= 2 * patch_bytes, vs
    assert vs["inflate_bytes"] == 0


# ---------------------------------------------------------------- 7. bad input

BAD_SHAPE = (24, 24, 24)
BAD_N = int(np.prod(BAD_SHAPE))


def _patch_bytes(path, offset, fmt, value):
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(struct.pack(fmt, value))


def _bad_dims_exceed_file(d):
    p = V.write_nifti(d / "short.nii", V.coord_volume(BAD_SHAPE, "float32", offset=1 * BAD_N), np.eye(4))
    size = os.path.getsize(p)
    os.truncate(p, 352 + (size - 352) // 2)
    return p, None


def _bad_vox_offset(d):
    p = V.write_nifti(d / "offset.nii", V.coord_volume(BAD_SHAPE, "float32", offset=1 * BAD_N), np.eye(4))
    _patch_bytes(p, 108, "<f", float(os.path.getsize(p) + 4096))
    assert nib.Nifti1Header.from_fileobj(open(p, "rb"))["vox_offset"] > os.path.getsize(p)
    return p, None


def _bad_rgb24(d):
    # A uint8 file with 3 bytes per voxel of data, relabelled datatype 128 (RGB24), bitpix 24.
    p = V.write_nifti(d / "rgb.nii", np.zeros((24, 24, 72), np.uint8), np.eye(4))
    _patch_bytes(p, 46, "<h", 24)   # dim[3]
    _patch_bytes(p, 70, "<h", 128)  # datatype
    _patch_bytes(p, 72, "<h", 24)   # bitpix
    h = nib.Nifti1Header.from_fileobj(open(p, "rb"))
    assert int(h["datatype"]) == 128 and tuple(h["dim"][1:4]) == (24, 24, 24)
    return p, None


def _bad_label_shape(d):
    p = V.write_nifti(d / "mismatch_img.nii", V.coord_volume(BAD_SHAPE, "float32", offset=1 * BAD_N), np.eye(4))
    q = V.write_nifti(d / "mismatch_lab.nii", np.zeros((24, 24, 20), np.uint8), np.eye(4))
    return p, q


def _bad_small(d):
    p = V.write_nifti(d / "small_img.nii", V.coord_volume((12, 12, 12), "float32", offset=1 * BAD_N), np.eye(4))
    q = V.write_nifti(d / "small_lab.nii", np.zeros((12, 12, 12), np.uint8), np.eye(4))
    return p, q


def _bad_gz_truncated(d):
    p = V.write_nifti(d / "cut.nii.gz", V.coord_volume(BAD_SHAPE, "float32", offset=1 * BAD_N), np.eye(4), gz=True)
    data = open(p, "rb").read()
    open(p, "wb").write(data[: len(data) // 2])
    return p, None


def _bad_gz_crc(d):
    p = V.write_nifti(d / "crc.nii.gz", V.coord_volume(BAD_SHAPE, "float32", offset=1 * BAD_N), np.eye(4), gz=True)
    data = bytearray(open(p, "rb").read())
    data[-8] ^= 0xFF  # the gzip trailer: CRC32 (4 bytes) then ISIZE
    open(p, "wb").write(bytes(data))
    return p, None


def _bad_gz_trailing_garbage(d):
    p = V.write_nifti(d / "tail.nii.gz", V.coord_volume(BAD_SHAPE, "float32", offset=1 * BAD_N), np.eye(4), gz=True)
    with open(p, "ab") as f:
        f.write(b"\0\0\0not gzip")
    return p, None


def _bad_gz_forged_size(d):
    """F3: a tiny .nii.gz (the header and 8 KiB of zeros) whose header says 1024^3 float64 (8 GiB) and whose
    trailer's ISIZE agrees (mod 2^32): refused before anything of that size is allocated."""
    p = V.write_nifti(d / "forged.nii", np.zeros((4, 4, 4), np.float64), np.eye(4))
    for i in (1, 2, 3):
        _patch_bytes(p, 40 + 2 * i, "<h", 1024)
    raw = open(p, "rb").read()[:352] + bytes(8192)
    data = bytearray(gzip.compress(raw, compresslevel=9))
    data[-4:] = struct.pack("<I", (352 + 8 * 1024 ** 3) & 0xFFFFFFFF)
    assert len(data) < 128, len(data)
    q = d / "forged.nii.gz"
    q.write_bytes(bytes(data))
    return os.fspath(q), None


def _bad_huge_dims(d):
    p = V.write_nifti(d / "huge.nii", np.zeros((4, 4, 4), np.uint8), np.eye(4))
    for i in (1, 2, 3):
        _patch_bytes(p, 40 + 2 * i, "<h", 32767)
    assert tuple(nib.Nifti1Header.from_fileobj(open(p, "rb"))["dim"][1:4]) == (32767, 32767, 32767)
    return p, None


# name: (builder, allowed reasons, what the message says (regex, case-insensitive))
BAD_CASES = {
    "dims_exceed_file": (_bad_dims_exceed_file, {"corrupt"}, r"truncat|short|exceed|beyond|past|file size|bytes"),
    "vox_offset_past_end": (_bad_vox_offset, {"corrupt"}, r"vox_offset|offset|past|beyond|exceed|file size"),
    "datatype_rgb24": (_bad_rgb24, {"unsupported"}, r"datatype|dtype|128|rgb"),
    "label_shape": (_bad_label_shape, {"corrupt"}, r"shape|24x24x20|\(24, 24, 20\)"),
    "patch_larger_than_volume": (_bad_small, {"corrupt", "invalid_argument", "unsupported"},
                                 r"larger|exceed|smaller|SpatialPad|patch"),
    "gz_truncated": (_bad_gz_truncated, {"corrupt"}, r"truncat|gzip|inflate|unexpected end"),
    "gz_crc": (_bad_gz_crc, {"corrupt"}, r"crc|checksum|gzip|corrupt"),
    "gz_trailing_garbage": (_bad_gz_trailing_garbage, {"corrupt"}, r"trailing data"),
    "gz_forged_size": (_bad_gz_forged_size, {"corrupt"}, r"header says 8589934944 bytes uncompressed; \d+ bytes of gzip"
                                                         r" inflate to at most \d+"),
    "huge_dims": (_bad_huge_dims, {"corrupt", "resource_exhausted"},
                  r"voxels|max_volume_voxels|too large|exceed|size|truncat|32767"),
}


def bad_list(d, name):
    """Three records: good volume 0, the bad case, good volume 2 (float32 coord volumes, file k at k * BAD_N)."""
    builder = BAD_CASES[name][0]
    good = [save_pair(d, f"good{k}", V.coord_volume(BAD_SHAPE, "float32", offset=k * BAD_N),
                      np.ones(BAD_SHAPE, np.uint8), fmt="nii") for k in (0, 2)]
    bad_img, bad_lab = builder(d)
    if bad_lab is None:
        bad_lab = V.write_nifti(d / "bad_lab.nii", np.ones(BAD_SHAPE, np.uint8), np.eye(4))
    rows = [(good[0][0].path, good[0][1].path), (bad_img, bad_lab), (good[1][0].path, good[1][1].path)]
    return V.write_list(d / "bad.csv", rows), good, os.path.basename(bad_img), os.path.basename(bad_lab)


@pytest.mark.parametrize("name", sorted(BAD_CASES))
def test_bad_volume_is_a_counted_sample_error_under_skip(tmp_path, name):
    csv, good, _, _ = bad_list(tmp_path, name)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    loader = make(csv, [stoker.CenterSpatialCrop((16, 16, 16))], batch_size=3, on_corrupt="skip", threads=1)
    got = run(loader)
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    s = loader.stats()
    assert s["corrupt"] == 1, s["corrupt_by_reason"]
    assert sum(s["corrupt_by_reason"].values()) == 1
    (reason,) = s["corrupt_by_reason"]
    assert reason in BAD_CASES[name][1], s["corrupt_by_reason"]
    check_layout(got, 3, 1, (16, 16, 16))
    seen = [file_of(x, BAD_N) for x in got["image"]]
    assert set(seen) == {0, 2}, f"the batch holds the good volumes only, got {seen}"
    for j, k in enumerate(seen):
        fi = good[0 if k == 0 else 1][0]
        np.testing.assert_array_equal(got["image"][j], M.center_spatial_crop(fi.arr, 16).astype(np.float32))
    assert grown_kib < (1 << 20), f"{grown_kib} KiB more peak memory: no allocation from the header's sizes"


@pytest.mark.parametrize("name", sorted(BAD_CASES))
def test_bad_volume_raises_at_its_batch_naming_file_and_reason(tmp_path, name):
    csv, _, bad_img, bad_lab = bad_list(tmp_path, name)
    loader = make(csv, [stoker.CenterSpatialCrop((16, 16, 16))], batch_size=1, on_corrupt="raise", threads=1)
    it = iter(loader)
    assert file_of(as_numpy(next(it))["image"], BAD_N) == 0
    with pytest.raises(stoker.SampleError) as e:
        next(it)
    msg = str(e.value)
    assert bad_img in msg or bad_lab in msg, msg
    assert re.search(BAD_CASES[name][2], msg, re.IGNORECASE), msg
    assert file_of(as_numpy(next(it))["image"], BAD_N) == 2, "iteration goes on after it"
    with pytest.raises(StopIteration):
        next(it)


# ---------------------------------------------------------------- 8. determinism, resume, ranks

PIPELINES = {
    "crops": lambda: [stoker.RandSpatialCropSamples((12, 12, 8), num_samples=2),
                      stoker.RandFlip(prob=0.5, spatial_axis=0),
                      stoker.RandRotate90(prob=0.5, max_k=3, spatial_axes=(0, 1)),
                      stoker.ScaleIntensityRange(0.0, float(4 * CROP_N), 0.0, 1.0)],
    "posneg": lambda: [stoker.RandCropByPosNegLabel((12, 12, 8), label_key="label", pos=1.0, neg=1.0,
                                                    num_samples=2),
                       stoker.RandFlip(prob=0.5, spatial_axis=(1, 2))],
}


def same_batches(a, b):
    assert len(a) == len(b)
    for i, (x, y) in enumerate(zip(a, b)):
        assert list(x) == list(y), i
        for k in x:
            assert x[k].dtype == y[k].dtype and np.array_equal(x[k], y[k]), f"batch {i} key {k}"


@pytest.mark.parametrize("pipeline", sorted(PIPELINES))
def test_batches_do_not_depend_on_threads(crop_set, pipeline):
    csv = crop_set["rows"](16, "d16")
    runs = {}
    for threads in (1, 2):
        loader = make(csv, PIPELINES[pipeline](), threads=threads, shuffle=True, batch_size=3)
        runs[threads] = epoch_batches(loader, 0) + epoch_batches(loader, 1)
    same_batches(runs[1], runs[2])
    e0, e1 = concat(runs[1][:6]), concat(runs[1][6:])
    assert not np.array_equal(e0["image_start"], e1["image_start"]), "another epoch, other draws"


@pytest.mark.parametrize("pipeline", sorted(PIPELINES))
def test_resume_mid_epoch_equals_the_uninterrupted_run(crop_set, pipeline):
    csv = crop_set["rows"](16, "d16")
    full = epoch_batches(make(csv, PIPELINES[pipeline](), shuffle=True, batch_size=3), 1)
    a = make(csv, PIPELINES[pipeline](), shuffle=True, batch_size=3)
    a.set_epoch(1)
    it = iter(a)
    next(it), next(it)
    state = json.loads(json.dumps(a.state_dict()))
    b = make(csv, PIPELINES[pipeline](), shuffle=True, batch_size=3, threads=1)
    b.load_state_dict(state)
    same_batches([as_numpy(x) for x in b], full[2:])


def test_two_ranks_cover_every_volume_once(crop_set):
    """rank 0 and 1 of 2: disjoint volumes, together all of them, each volume's patches as one process makes them."""
    csv = crop_set["rows"](4, "r4")
    kw = dict(shuffle=True, batch_size=1)

    def per_file(got, n):
        out = {}
        for r in range(len(got["image"]) // n):
            k = file_of(got["image"][r * n], CROP_N)
            assert k not in out, f"volume {k} twice"
            out[k] = {key: v[r * n:(r + 1) * n] for key, v in got.items()}
        return out

    # No intensity transform: the values still tell the volume.
    tf = lambda: [stoker.RandSpatialCropSamples((12, 12, 8), num_samples=2), stoker.RandFlip(prob=0.5, spatial_axis=0),
                  stoker.RandRotate90(prob=0.5, max_k=3, spatial_axes=(0, 1))]
    single = per_file(run(make(csv, tf(), **kw)), 2)
    assert sorted(single) == [0, 1, 2, 3]
    seen = []
    for rank in (0, 1):
        mine = per_file(run(make(csv, tf(), rank=rank, world_size=2, **kw)), 2)
        assert len(mine) == 2
        for k, v in mine.items():
            for key in v:
                np.testing.assert_array_equal(v[key], single[k][key], err_msg=f"rank {rank} volume {k} {key}")
        seen += list(mine)
    assert sorted(seen) == [0, 1, 2, 3], "disjoint, and together the whole epoch"


# ---------------------------------------------------------------- 9. construction errors

def test_transform_lists_that_cannot_make_fixed_batches_are_refused(crop_set):
    csv = crop_set["rows"](4, "r4")
    P = (16, 16, 16)
    cases = {
        "random_size": lambda: [stoker.RandSpatialCrop(P, random_size=True)],
        "random_size samples": lambda: [stoker.RandSpatialCropSamples(P, num_samples=2, random_size=True)],
        "rot90 on unequal axes": lambda: [stoker.RandSpatialCrop((16, 12, 12)),
                                          stoker.RandRotate90(prob=0.5, spatial_axes=(0, 1))],
        "two sampling crops": lambda: [stoker.RandSpatialCropSamples(P, num_samples=2),
                                       stoker.RandCropByPosNegLabel(P, label_key="label", num_samples=2)],
        "no crop": lambda: [stoker.RandFlip(prob=0.5)],
        "no transforms": lambda: [],
        "label_key of no LabelVolume": lambda: [stoker.RandCropByPosNegLabel(P, label_key="seg")],
    }
    for what, tf in cases.items():
        with pytest.raises(ValueError):
            make(csv, tf())
            pytest.fail(f"{what}: accepted")
    # RandCropByPosNegLabel's label_key must name a LabelVolume, not the Volume
    with pytest.raises(ValueError):
        make(csv, [stoker.RandCropByPosNegLabel(P, label_key="image")])
    # MONAI's own checks: pos and neg >= 0, not both 0; num_samples >= 1
    for bad in (dict(pos=-1.0), dict(pos=0.0, neg=0.0), dict(num_samples=0)):
        with pytest.raises(ValueError):
            make(csv, [stoker.RandCropByPosNegLabel(P, label_key="label", **bad)])
    # and the same lists with the fixes are accepted
    make(csv, [stoker.RandSpatialCrop(P)])
    make(csv, [stoker.RandSpatialCrop((16, 12, 12)), stoker.RandRotate90(prob=0.5, spatial_axes=(1, 2))])
    make(csv, [stoker.RandCropByPosNegLabel(P, label_key="label", num_samples=2), stoker.RandFlip(prob=0.5)])


# ---- Spacing: resampled once per volume, as MONAI's Spacing (tests/python/spacing_ref.py) ----

@pytest.mark.parametrize("fmt", ["nii", "nii.gz"])
def test_spacing_matches_the_monai_reference_and_is_done_once(tmp_path, fmt):
    """Spacing(pixdim) then the whole volume (CenterSpatialCrop(-1)): the image equals MONAI's trilinear grid
    (spacing_ref, float32 rounding), the label its nearest grid away from half-way ties, the affine the new one;
    epoch 2 resamples nothing (the resampled volumes are kept)."""
    import spacing_ref as SR
    rng = np.random.default_rng(21)
    shape = (20, 18, 15)
    affine = np.array([[0.8, 0, 0, -10.0], [0, 0.9, 0, 4.0], [0, 0, 1.7, 2.5], [0, 0, 0, 1]])
    rows, refs = [], []
    for i in range(3):
        img = rng.normal(0, 100, size=shape).astype(np.float32)
        lab = (rng.random(shape) < 0.3).astype(np.uint8) * (i + 1)
        pi = V.write_nifti(tmp_path / f"s{i}.{fmt}", img, affine, gz=fmt.endswith("gz"))
        pl = V.write_nifti(tmp_path / f"s{i}_lab.{fmt}", lab, affine, gz=fmt.endswith("gz"))
        rows.append((pi, pl))
        refs.append((img, lab))
    csv = V.write_list(tmp_path / "s.csv", rows)
    pixdim = (1.07, 1.31, 1.13)  # no output voxel samples an exact half-way point (where nearest ties)
    loader = make(csv, [stoker.Spacing(pixdim), stoker.CenterSpatialCrop(-1)], batch_size=3)
    e0 = run(loader, (0,))
    assert stats_volume(loader)["resample_s"] > 0
    for i, (img, lab) in enumerate(refs):
        want, want_affine = SR.spacing_ref(img[None].astype(np.float64), affine, pixdim, mode="bilinear")
        want_lab, _ = SR.spacing_ref(lab[None].astype(np.float64), affine, pixdim, mode="nearest")
        got = e0["image"][i]
        assert got.shape == want.shape, (got.shape, want.shape)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * float(np.ptp(img)))
        np.testing.assert_allclose(e0["image_affine"][i], want_affine, atol=1e-6)
        np.testing.assert_array_equal(e0["label"][i], want_lab.astype(np.uint8))
        assert set(np.unique(e0["label"][i])) <= {0, i + 1}, "nearest makes no new label values"
    s0 = dict(stats_volume(loader))
    e1 = run(loader, (1,))
    for k in e0:
        np.testing.assert_array_equal(e0[k], e1[k], err_msg=k)
    assert stats_volume(loader)["resample_s"] == s0["resample_s"], "epoch 2 resamples nothing"


def test_spacing_must_come_first(crop_set):
    csv = crop_set["rows"](4, "spacing_first")
    with pytest.raises(ValueError, match="Spacing must be the first"):
        make(csv, [stoker.RandSpatialCrop(8), stoker.Spacing(1.0)])


# ---- Tar shards: members read in place (only a patch's bytes), batches as from the files ----

def test_shard_members_give_the_list_file_batches_and_read_only_the_patch(tmp_path):
    """The same volumes as .npy and .nii.gz members of a tar shard (WebDataset keys: vol000.image.npy,
    vol000.label.nii.gz) and as files of a list: equal batches over 2 epochs; an uncompressed member's patch
    reads its own bytes only (the member's extent in the shard, mapped), a gzipped one is inflated once."""
    import io
    import tarfile
    rng = np.random.default_rng(33)
    shape = (20, 24, 28)
    rows = []
    with tarfile.open(tmp_path / "vol-000000.tar", "w") as tf:
        for i in range(5):
            img = V.coord_volume(shape, "int16", offset=i * 500)
            lab = (rng.random(shape) < 0.2).astype(np.uint8)
            pi = V.write_npy(tmp_path / f"v{i}.npy", img)
            pl = V.write_nifti(tmp_path / f"v{i}_lab.nii.gz", lab, np.eye(4), gz=True)
            rows.append((pi, pl))
            for name, path in (("image.npy", pi), ("label.nii.gz", pl)):
                data = open(path, "rb").read()
                info = tarfile.TarInfo(f"vol{i:03d}.{name}")
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
    csv = V.write_list(tmp_path / "v.csv", rows)
    transforms = [stoker.RandCropByPosNegLabel((8, 8, 8), label_key="label", num_samples=3),
                  stoker.RandFlip(0.5), stoker.ScaleIntensityRange(0, 5000, 0.0, 1.0)]
    fields = [stoker.Volume("image", member="image"), stoker.LabelVolume("label")]
    shard = make(str(tmp_path / "vol-000000.tar"), transforms, fields=fields, batch_size=2, shuffle=True)
    files = make(csv, transforms, batch_size=2, shuffle=True)
    a, b = run(shard, (0, 1)), run(files, (0, 1))
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    s = stats_volume(shard)
    # Per load: the label volume is inflated (once, then kept); the image patch reads 3 x 8^3 int16 voxels.
    # (the voxels, and with libdeflate the header bytes inflated with them)
    assert 5 * int(np.prod(shape)) <= s["inflate_bytes"] <= 5 * (int(np.prod(shape)) + 4096), s
    patch_bytes = 8 ** 3 * 2
    assert s["bytes_read"] == s["patches"] * patch_bytes, s
