#!/usr/bin/env python3
"""Makes the 3D benchmark set: synthetic CT-like phantoms with organ labels, as .npy and as .nii.gz.

The generator, per volume i (its own numpy Generator, seeded with (seed, i), so a volume does not depend on
--volumes), in a cube of S = --size voxels a side, coordinates in fractions of S from the centre
(axis 0 = x left-right, 1 = y front-back, 2 = z foot-head, the slice axis):

  air          -1000 HU everywhere
  body         ellipsoid, semi-axes (0.42, 0.36, 0.46) x S, each scaled by U(0.9, 1.1): 40 HU
  lungs        two ellipsoids in the upper body (x = +-0.17, z = +0.2; semi-axes 0.12 x 0.16 x 0.19): -850 HU
  organs       liver (label 1, 60 HU), two kidneys (label 2, 30 HU), spleen (label 3, 45 HU): ellipsoids in the
               lower body, each semi-axis scaled by U(0.9, 1.1) and each centre moved by U(-0.02, 0.02) x S per
               axis; painted in that order (a later organ wins where two overlap); the labels are these organs
               clipped to the body, uint8 0-3 (foreground ~ 5-8% of the voxels)
  bone         +700 HU: the spine, a cylinder along z behind the organs (radius 0.035 x S), and 9 pairs of ribs,
               arcs of an elliptic ring just inside the body's surface (the back and the sides, not the front),
               each 0.02 x S thick in z; painted last (bone over organs, labels unchanged)
  noise        white Gaussian noise smoothed with scipy.ndimage.gaussian_filter(sigma=1 voxel), then scaled so
               its standard deviation is 20 HU (correlated noise of sigma 20 HU, as CT noise is); added
               everywhere (air included)
  finally      rounded, clipped to [-1024, 3071], int16

Written under OUT:

  npy/vol-XXX_image.npy, npy/vol-XXX_label.npy     np.save: int16 / uint8, shape (S, S, S), C order
  nii/vol-XXX_image.nii.gz, nii/vol-XXX_label.nii.gz
                                                   nibabel Nifti1Image of the same (S, S, S) arrays (so
                                                   np.asanyarray(nib.load(p).dataobj) equals the .npy), affine
                                                   diag(0.8, 0.8, 1.5, 1) (spacing in mm), sform and qform code 1;
                                                   img.to_bytes() gzipped at level 6 (gzip.GzipFile, mtime 0: nibabel
                                                   itself would write level 1, its Opener.default_compresslevel)
  npy.csv, nii.csv                                 `image,label` header, one row a volume, paths relative to OUT
  .volumes-complete                                the parameters of the finished run (json): a later run with
                                                   the same ones does nothing

Deterministic: the same --volumes, --size and --seed give identical files.

    python3 bench/volume_data.py OUT [--volumes 24] [--size 256] [--seed 0]

As a module: volume_data.generate(out, volumes=24, size=256, seed=0) -> a dict of paths, sizes and the description.
"""
import argparse
import gzip
import json
import os
import sys
import time

import numpy as np

VERSION = 1  # of the generator: a change of its output changes it, so old sets are remade
MARKER = ".volumes-complete"
SPACING = (0.8, 0.8, 1.5)
AIR, BODY, LUNG, BONE = -1000, 40, -850, 700
ORGANS = (  # name, label, HU, centre (fractions of S from the middle), semi-axes (fractions of S)
    ("liver", 1, 60, [(-0.12, -0.01, -0.10)], (0.25, 0.19, 0.24)),
    ("kidney", 2, 30, [(-0.15, 0.15, -0.22), (0.15, 0.15, -0.22)], (0.07, 0.08, 0.13)),
    ("spleen", 3, 45, [(0.20, 0.05, -0.06)], (0.11, 0.10, 0.16)),
)
BODY_AXES = (0.42, 0.36, 0.46)
LUNGS = [(-0.17, 0.0, 0.20), (0.17, 0.0, 0.20)], (0.12, 0.16, 0.19)
NOISE_SIGMA_HU, NOISE_SMOOTH = 20.0, 1.0
HU_RANGE = (-1024, 3071)
GZIP_LEVEL = 6

DESCRIPTION = (
    "bench/volume_data.py v{version}: {volumes} synthetic CT phantoms {size}^3 int16 (seed {seed}): air -1000 HU, "
    "body ellipsoid 40 HU (semi-axes 0.42/0.36/0.46 x size, +-10% per volume), two lungs -850 HU, spine and 9 rib "
    "pairs +700 HU, liver 60 / kidneys 30 / spleen 45 HU (labels 1/2/3, uint8), correlated noise (white noise "
    "smoothed with a sigma-1-voxel Gaussian, scaled to sigma 20 HU), clipped to [-1024, 3071]; .npy and .nii.gz "
    "(nibabel Nifti1, spacing 0.8 x 0.8 x 1.5 mm, gzip level 6)")


def _axis(size):
    """Voxel centres along an axis, in fractions of the size from the middle."""
    return (np.arange(size, dtype=np.float32) + 0.5) / size - 0.5


def _box(centre, axes, size):
    """The index ranges (slices) of the voxels an ellipsoid may touch, and their coordinates."""
    sl, coords = [], []
    x = _axis(size)
    for c, a in zip(centre, axes):
        lo = max(int(np.floor((c - a + 0.5) * size)) - 1, 0)
        hi = min(int(np.ceil((c + a + 0.5) * size)) + 1, size)
        sl.append(slice(lo, max(lo, hi)))
        coords.append(x[lo:max(lo, hi)])
    return tuple(sl), coords


def ellipsoid(centre, axes, size):
    """(slices, bool mask within them) of the voxels whose centres are inside the ellipsoid."""
    sl, (x, y, z) = _box(centre, axes, size)
    d = (((x - centre[0]) / axes[0]) ** 2)[:, None, None] + (((y - centre[1]) / axes[1]) ** 2)[None, :, None] \
        + (((z - centre[2]) / axes[2]) ** 2)[None, None, :]
    return sl, d <= 1.0


def phantom(i, size, seed):
    """(image int16 [S, S, S], label uint8 [S, S, S], facts) of volume i."""
    from scipy.ndimage import gaussian_filter
    rng = np.random.default_rng([seed, i])
    s = size
    img = np.full((s, s, s), AIR, dtype=np.float32)
    label = np.zeros((s, s, s), dtype=np.uint8)

    body_axes = tuple(a * rng.uniform(0.9, 1.1) for a in BODY_AXES)
    sl, body = ellipsoid((0.0, 0.0, 0.0), body_axes, s)
    img[sl][body] = BODY
    body_full = np.zeros((s, s, s), dtype=bool)
    body_full[sl] = body

    centres, axes = LUNGS
    for c in centres:
        sl, m = ellipsoid(c, axes, s)
        img[sl][m] = LUNG

    for _, lab, hu, centres, axes in ORGANS:
        ax = tuple(a * rng.uniform(0.9, 1.1) for a in axes)
        for c in centres:
            c = tuple(v + rng.uniform(-0.02, 0.02) for v in c)
            sl, m = ellipsoid(c, ax, s)
            m &= body_full[sl]
            img[sl][m] = hu
            label[sl][m] = lab

    # Bone: the spine (a cylinder along z behind the organs) and rib pairs (arcs of a ring inside the body's
    # surface, at the back and the sides), painted over the rest.
    x, y, z = _axis(s), _axis(s), _axis(s)
    r = 0.035
    spine_y = 0.78 * body_axes[1]
    cyl = ((x[:, None] / r) ** 2 + ((y[None, :] - spine_y) / r) ** 2) <= 1.0
    zin = np.abs(z) <= 0.92 * body_axes[2]
    img[cyl[:, :, None] & zin[None, None, :]] = BONE
    ring = np.sqrt((x[:, None] / (0.9 * body_axes[0])) ** 2 + (y[None, :] / (0.9 * body_axes[1])) ** 2)
    arc = (ring >= 0.9) & (ring <= 0.97) & (y[None, :] >= -0.35 * body_axes[1])
    for zr in np.linspace(-0.05, 0.38, 9):
        k = np.abs(z - zr) <= 0.01
        img[:, :, k] = np.where(arc[:, :, None], BONE, img[:, :, k])

    noise = rng.standard_normal((s, s, s), dtype=np.float32)
    noise = gaussian_filter(noise, NOISE_SMOOTH)
    noise *= NOISE_SIGMA_HU / float(noise.std(dtype=np.float64))
    img += noise
    del noise
    np.rint(img, out=img)
    np.clip(img, *HU_RANGE, out=img)
    image = img.astype(np.int16)
    facts = {"foreground": float(np.count_nonzero(label)) / label.size,
             "body": float(body_full.sum()) / label.size}
    return image, label, facts


def write_nii(path, arr, level=GZIP_LEVEL):
    """A Nifti1Image of arr (affine diag(SPACING, 1)), gzipped at `level` (mtime 0: the same bytes every run)."""
    import nibabel as nib
    affine = np.diag([*SPACING, 1.0])
    img = nib.Nifti1Image(arr, affine)
    img.set_sform(affine, code=1)
    img.set_qform(affine, code=1)
    data = img.to_bytes()
    tmp = path + ".tmp"
    with open(tmp, "wb") as f, gzip.GzipFile(filename="", mode="wb", compresslevel=level, fileobj=f, mtime=0) as g:
        g.write(data)
    os.replace(tmp, path)


def _names(i):
    return f"vol-{i:03d}_image", f"vol-{i:03d}_label"


def _paths(out, volumes):
    rows = {"npy": [], "nii": []}
    for i in range(volumes):
        im, lb = _names(i)
        rows["npy"].append((f"npy/{im}.npy", f"npy/{lb}.npy"))
        rows["nii"].append((f"nii/{im}.nii.gz", f"nii/{lb}.nii.gz"))
    return rows


def _sizes(out, rows):
    sizes = {}
    for fmt, pairs in rows.items():
        im = sum(os.path.getsize(os.path.join(out, a)) for a, _ in pairs)
        lb = sum(os.path.getsize(os.path.join(out, b)) for _, b in pairs)
        sizes[fmt] = {"image_bytes": im, "label_bytes": lb}
    return sizes


def generate(out, volumes=24, size=256, seed=0, quiet=False):
    """Makes the set under `out` unless it is there with these parameters.
    -> {"out", "npy_csv", "nii_csv", "params", "sizes", "facts", "description", "seconds"}"""
    out = os.path.abspath(out)
    params = {"version": VERSION, "volumes": volumes, "size": size, "seed": seed, "gzip_level": GZIP_LEVEL}
    rows = _paths(out, volumes)
    marker = os.path.join(out, MARKER)
    log = (lambda *a, **k: None) if quiet else (lambda *a, **k: print(*a, **k, flush=True))
    t0 = time.perf_counter()
    have = None
    if os.path.exists(marker):
        with open(marker) as f:
            have = json.load(f)
    complete = have is not None and have.get("params") == params and all(
        os.path.exists(os.path.join(out, p)) for pairs in rows.values() for pair in pairs for p in pair) and all(
        os.path.exists(os.path.join(out, f"{fmt}.csv")) for fmt in rows)
    if complete:
        facts = have["facts"]
        log(f"volume_data: {out} is there with these parameters ({volumes} volumes, {size}^3, seed {seed}); "
            f"not remade")
    else:
        if os.path.exists(marker):
            os.remove(marker)
        os.makedirs(os.path.join(out, "npy"), exist_ok=True)
        os.makedirs(os.path.join(out, "nii"), exist_ok=True)
        facts = []
        # volume i depends on (seed, i), not on the count: those of a finished run with other counts are kept
        same = have is not None and {k: v for k, v in have.get("params", {}).items() if k != "volumes"} == \
            {k: v for k, v in params.items() if k != "volumes"}
        keep = min(have["params"]["volumes"], volumes) if same else 0
        log(f"volume_data: making {volumes} volumes of {size}^3 under {out} (seed {seed})"
            + (f"; the first {keep} are there from a run with {have['params']['volumes']}" if keep else ""))
        for i in range(volumes):
            if i < keep and all(os.path.exists(os.path.join(out, p)) for p in rows["npy"][i] + rows["nii"][i]):
                facts.append(have["facts"][i])
                continue
            t = time.perf_counter()
            image, label, f = phantom(i, size, seed)
            (ni, nl), (gi, gl) = rows["npy"][i], rows["nii"][i]
            np.save(os.path.join(out, ni), image)
            np.save(os.path.join(out, nl), label)
            write_nii(os.path.join(out, gi), image)
            write_nii(os.path.join(out, gl), label)
            if i == 0:  # what the benchmark's DataLoader side reads equals the .npy
                import nibabel as nib
                for arr, p in ((image, gi), (label, gl)):
                    back = np.asanyarray(nib.load(os.path.join(out, p)).dataobj)
                    assert back.dtype == arr.dtype and back.shape == arr.shape and np.array_equal(back, arr), p
            facts.append(f)
            log(f"  volume {i + 1}/{volumes}: foreground {100 * f['foreground']:.2f}% of the voxels, body "
                f"{100 * f['body']:.1f}% ({time.perf_counter() - t:.1f} s)")
        for fmt, pairs in rows.items():
            with open(os.path.join(out, f"{fmt}.csv"), "w") as f:
                f.write("image,label\n")
                for a, b in pairs:
                    f.write(f"{a},{b}\n")
        with open(marker + ".tmp", "w") as f:
            json.dump({"params": params, "facts": facts}, f)
        os.replace(marker + ".tmp", marker)
    sizes = _sizes(out, rows)
    fg = [f["foreground"] for f in facts]
    res = {"out": out, "npy_csv": os.path.join(out, "npy.csv"), "nii_csv": os.path.join(out, "nii.csv"),
           "params": params, "sizes": sizes, "foreground": {"min": min(fg), "max": max(fg), "mean": sum(fg) / len(fg)},
           "description": DESCRIPTION.format(version=VERSION, volumes=volumes, size=size, seed=seed),
           "seconds": time.perf_counter() - t0, "made": not complete}
    log(describe(res))
    return res


def describe(res):
    """Lines: the generator and the sizes, raw and compressed."""
    s, p = res["sizes"], res["params"]
    raw_image, raw_label = p["volumes"] * p["size"] ** 3 * 2, p["volumes"] * p["size"] ** 3
    mib = 1 << 20
    fg = res["foreground"]
    return (f"data: {res['description']}\n"
            f"data: foreground (labels 1-3) {100 * fg['min']:.2f}-{100 * fg['max']:.2f}% of the voxels "
            f"(mean {100 * fg['mean']:.2f}%)\n"
            f"data: raw voxels {raw_image / mib:.0f} MiB images + {raw_label / mib:.0f} MiB labels; "
            f".npy files {s['npy']['image_bytes'] / mib:.0f} + {s['npy']['label_bytes'] / mib:.0f} MiB; "
            f".nii.gz files {s['nii']['image_bytes'] / mib:.1f} + {s['nii']['label_bytes'] / mib:.1f} MiB "
            f"(images {raw_image / s['nii']['image_bytes']:.2f}x, labels {raw_label / s['nii']['label_bytes']:.1f}x "
            f"smaller than raw)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", help="the folder to write (made when missing)")
    ap.add_argument("--volumes", type=int, default=24)
    ap.add_argument("--size", type=int, default=256, help="voxels a side")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.volumes < 1 or args.size < 16:
        sys.exit("volume_data: --volumes must be >= 1 and --size >= 16")
    res = generate(args.out, args.volumes, args.size, args.seed)
    print(f"volume_data: {'made' if res['made'] else 'checked'} in {res['seconds']:.1f} s")


if __name__ == "__main__":
    main()
