#!/usr/bin/env python3
"""3D volume benchmark (issue 16, docs/volumes-design.md section 8): stoker against a torch DataLoader over numpy
and nibabel, patches of CT-like volumes, .npy and .nii.gz.

Data: bench/volume_data.py's phantoms (made in DATA first when missing; its description is printed): --volumes
int16 CT volumes of --size^3 with uint8 organ labels 0-3, as .npy (DATA/npy.csv) and as .nii.gz at gzip level 6
(DATA/nii.csv).

Work, the same on both sides (MONAI's semantics; MONAI itself is not installed here): per volume load 4 patches of
96^3 drawn by RandCropByPosNegLabel(spatial_size=(96, 96, 96), label_key="label", pos=1, neg=1, num_samples=4)
on the label, then per patch ScaleIntensityRange(a_min=-1000, a_max=1000, b_min=0, b_max=1, clip=True) on the
image and RandFlip(prob=0.5, spatial_axis=0), (..., 1), (..., 2) on image and label together; batches of 2
volumes = 8 patches: image float32 [8, 1, 96, 96, 96], label uint8 [8, 1, 96, 96, 96]; shuffle, seed 0.

  DataLoader  torch.utils.data.DataLoader(batch_size=2, num_workers=2, persistent_workers=True, shuffle=True,
              collate_fn=the per-volume lists of 4 patch dicts flattened, then default_collate, as MONAI's
              list_data_collate). __getitem__: image and label by np.load(p, mmap_mode="r") (.npy) or
              np.asanyarray(nib.load(p).dataobj) (.nii.gz: the whole file inflated at every access, nibabel's
              default path); foreground / background indices by np.flatnonzero(label > 0) / (label == 0) (what
              MONAI's map_binary_to_indices does per call without precomputed indices); per patch: foreground with
              probability pos / (pos + neg), a uniform index of that class, np.unravel_index, MONAI's
              correct_crop_centers (valid start size // 2, valid end int(shape + 1 - size / 2), +1 when equal,
              centre clamped to [start, end - 1]), crop start max(c - size // 2, 0); the crops sliced, the image
              scaled and clipped in float32, np.flip per drawn axis, np.ascontiguousarray, torch.from_numpy.
              Worker RNG: numpy default_rng(the worker's torch seed), the shuffle's generator seeded 0.
  stoker      stoker.Loader(DATA/<fmt>.csv, batch_size=2, shuffle=True, seed=0, threads=2, cache="auto",
              fields=[Volume("image"), LabelVolume("label")], transforms=[RandCropByPosNegLabel(...),
              ScaleIntensityRange(...), RandFlip(...) x 3]) with the parameters above.

Each (format, side) runs in a fresh child process (imports, caches and workers new; the OS page cache is not
dropped unless --drop-page-cache: the files were just written or read, so epoch 1 is a fresh process on a warm
page cache), --rounds rounds, the order alternating every round. A run is --epochs epochs (default 4): epoch 1
is timed from before the loader is made (the DataLoader's workers start, stoker's caches fill), epochs 2 to
--epochs each from the start of its iteration to its last batch: the steady state, its rate = their patches / their
seconds (each epoch's rate is in the round lines and the json). With 24 volumes stoker's steady epoch lasts
~0.3-0.9 s on 2 cores, so one epoch alone is a noisy measurement; 3 steady epochs cost ~70 s more on the
DataLoader's .nii.gz side over 3 rounds. Both sides consume a batch the same trivial way (one value of each tensor
read) and check its shapes and dtypes. Before any timed run a check child per
(format, side) takes 2 batches and checks shapes, dtypes, the image range [0, 1], label values 0-3, and prints
the share of patches holding foreground (both sides should be alike: pos = neg = 1).

Reported per format, same run: patches/s of epoch 1 and of the steady epochs (median of the rounds, and each
round), stoker / DataLoader per round and the median of those same-round ratios; bytes read per patch (stoker:
stats()["volume"] counters, per epoch, and its process's /proc/self/io rchar; DataLoader: the workers'
/proc/<pid>/io rchar deltas per epoch / patches, and for .npy, where rchar sees only the headers (the voxels come
through mmap page faults), also the bytes of the 4 KiB pages its crops and label scans touch, computed from its crop
boxes); bytes inflated per patch (.nii.gz);
peak PSS of the child's process tree (bench/loader_bench.py's sampler, every 0.25 s; the highest of the rounds);
CPU seconds of the child tree per patch; each run's wall time; the CPU that other processes used during each run
(a WARNING when >= 0.15 cores: another job on the machine). Targets (steady epochs, median of same-round ratios):
stoker >= 3x the DataLoader's patches/s on .npy, >= 5x on .nii.gz, and stoker's peak PSS <= the DataLoader's.

    python3 bench/volume_bench.py [DATA] [--volumes 24] [--size 256] [--rounds 3] [--epochs 4]
                                  [--only stoker|baseline] [--formats npy,nii] [--json OUT] [--drop-page-cache]
"""
import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)
import volume_data  # noqa: E402
from augment_bench import cpu_model, median  # noqa: E402
from loader_bench import run_sampling_pss  # noqa: E402
from remote_bench import machine_cpu, module_info  # noqa: E402

PATCH, NUM_SAMPLES, POS, NEG = 96, 4, 1, 1
A_MIN, A_MAX, B_MIN, B_MAX = -1000.0, 1000.0, 0.0, 1.0
FLIP_PROB = 0.5
BATCH, WORKERS, SEED = 2, 2, 0
FORMATS = ("npy", "nii")
FORMAT_NAMES = {"npy": ".npy", "nii": ".nii.gz"}
SIDES = ("baseline", "stoker")
MEMORY_BUDGET_MIB = 0  # --memory-budget: stoker's memory_budget (MiB; 0 = its default)
SIDE_NAMES = {"baseline": "DataLoader (numpy/nibabel)", "stoker": "stoker"}
TARGETS = {"npy": 3.0, "nii": 5.0}
QUIET = 0.15  # cores of other processes at or above which a run is flagged
PAGE = 4096
MIB = float(1 << 20)


# ------------------------------------------------------------------ the DataLoader side (MONAI's semantics in numpy)
def read_rows(csv_path):
    """A list file's (image, label) paths, absolute, in row order."""
    import csv
    base = os.path.dirname(os.path.abspath(csv_path))
    with open(csv_path, newline="") as f:
        return [(os.path.join(base, r["image"]), os.path.join(base, r["label"])) for r in csv.DictReader(f)]


def correct_crop_centers(centre, size, shape):
    """MONAI's correct_crop_centers (monai/transforms/utils.py), allow_smaller=False: the centre moved so that the
    patch lies inside the volume."""
    out = []
    for c, s, n in zip(centre, size, shape):
        if n < s:
            raise ValueError(f"patch {s} larger than the volume's {n} (allow_smaller=False)")
        start = s // 2
        end = int(n + 1 - s / 2)  # np.subtract(shape + 1, size / 2).astype(np.uint16)
        if start == end:
            end += 1
        out.append(int(min(max(int(c), start), end - 1)))
    return out


def box_pages(offset, shape, itemsize, start, size):
    """The 4 KiB pages of a C-order array at file byte `offset` that the box [start, start + size) touches."""
    import numpy as np
    i0 = np.arange(start[0], start[0] + size[0], dtype=np.int64)[:, None]
    i1 = np.arange(start[1], start[1] + size[1], dtype=np.int64)[None, :]
    first = offset + ((i0 * shape[1] + i1) * shape[2] + start[2]) * itemsize
    last = first + size[2] * itemsize - 1
    first, last = (first // PAGE).ravel(), (last // PAGE).ravel()
    if size[2] * itemsize <= PAGE:  # a row spans one or two pages
        return np.concatenate([first, last])
    return np.concatenate([np.arange(a, b + 1) for a, b in zip(first, last)])


class VolumePatches:
    """The DataLoader side's Dataset: record i -> a list of NUM_SAMPLES dicts {"image": float32 [1, P, P, P],
    "label": uint8 [1, P, P, P]}. `counters` (a shared multiprocessing Array, or None): [mmap bytes touched,
    bytes inflated, volume loads], added to by every worker."""

    def __init__(self, rows, fmt, counters=None):
        self.rows, self.fmt, self.counters = rows, fmt, counters
        self.rng = None  # set per worker by worker_init

    def __len__(self):
        return len(self.rows)

    def load(self, path):
        import numpy as np
        if self.fmt == "npy":
            return np.load(path, mmap_mode="r")
        import nibabel as nib
        return np.asanyarray(nib.load(path).dataobj)

    def __getitem__(self, i):
        import numpy as np
        import torch
        rng = self.rng if self.rng is not None else np.random.default_rng(SEED)
        image_path, label_path = self.rows[i]
        image, label = self.load(image_path), self.load(label_path)
        assert image.shape == label.shape, (image_path, image.shape, label.shape)
        shape = label.shape
        fg = np.flatnonzero(label > 0)
        bg = np.flatnonzero(label == 0)
        size = (PATCH, PATCH, PATCH)
        pages = []
        out = []
        for _ in range(NUM_SAMPLES):
            # generate_pos_neg_label_crop_centers: a class, then a uniform index of it (one class empty: the other)
            if len(fg) == 0 and len(bg) == 0:
                raise ValueError(f"{label_path}: no foreground and no background")
            use_fg = rng.random() < POS / (POS + NEG)
            indices = fg if (use_fg and len(fg)) or not len(bg) else bg
            idx = indices[rng.integers(len(indices))]
            centre = correct_crop_centers(np.unravel_index(idx, shape), size, shape)
            start = [max(c - s // 2, 0) for c, s in zip(centre, size)]
            sl = tuple(slice(a, a + s) for a, s in zip(start, size))
            x = image[sl].astype(np.float32)  # ScaleIntensityRange in float32
            x -= A_MIN
            x /= A_MAX - A_MIN
            x *= B_MAX - B_MIN
            x += B_MIN
            np.clip(x, B_MIN, B_MAX, out=x)
            y = label[sl]
            for axis in range(3):  # RandFlip(prob=0.5, spatial_axis=axis): one draw each, image and label together
                if rng.random() < FLIP_PROB:
                    x, y = np.flip(x, axis), np.flip(y, axis)
            out.append({"image": torch.from_numpy(np.ascontiguousarray(x)[None]),
                        "label": torch.from_numpy(np.ascontiguousarray(y)[None])})
            if self.counters is not None and self.fmt == "npy":
                pages.append(box_pages(getattr(image, "offset", 0), shape, image.itemsize, start, size))
        if self.counters is not None:
            if self.fmt == "npy":  # the crops' image pages, and every page of the label (scanned whole)
                off = getattr(label, "offset", 0)
                label_pages = (off + label.nbytes - 1) // PAGE - off // PAGE + 1
                touched = (len(np.unique(np.concatenate(pages))) + label_pages) * PAGE
                inflated = 0
            else:
                touched, inflated = 0, image.nbytes + label.nbytes
            with self.counters.get_lock():
                self.counters[0] += touched
                self.counters[1] += inflated
                self.counters[2] += 1
        return out


def list_data_collate(batch):
    """MONAI's list_data_collate: the samples' lists of patches flattened, then default_collate."""
    from torch.utils.data import default_collate
    return default_collate([patch for sample in batch for patch in sample])


def proc_io(pid):
    """/proc/<pid>/io as a dict of ints (rchar, wchar, read_bytes, ...); {} when it cannot be read."""
    try:
        with open(f"/proc/{pid}/io") as f:
            return {k: int(v) for k, v in (line.split(":") for line in f)}
    except (OSError, ValueError):
        return {}


def make_dataloader(csv_path, fmt, counters, start_rchar):
    import numpy as np
    import torch

    def worker_init(worker_id):
        info = torch.utils.data.get_worker_info()
        info.dataset.rng = np.random.default_rng(info.seed)
        start_rchar[worker_id] = proc_io(os.getpid()).get("rchar", 0)

    g = torch.Generator()
    g.manual_seed(SEED)
    ds = VolumePatches(read_rows(csv_path), fmt, counters)
    return torch.utils.data.DataLoader(ds, batch_size=BATCH, num_workers=WORKERS, persistent_workers=True,
                                       shuffle=True, collate_fn=list_data_collate, worker_init_fn=worker_init,
                                       generator=g)


# ------------------------------------------------------------------------------------------------ the stoker side
def import_stoker():
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import stoker
    return stoker


def make_stoker(csv_path):
    stoker = import_stoker()
    missing = [n for n in ("Volume", "LabelVolume", "RandCropByPosNegLabel", "ScaleIntensityRange", "RandFlip")
               if not hasattr(stoker, n)]
    if missing:
        raise RuntimeError(f"this build's stoker (python/stoker) has no {', '.join('stoker.' + n for n in missing)}: "
                           f"the volume feature is not built or not exported yet")
    return stoker.Loader(
        csv_path, batch_size=BATCH, shuffle=True, seed=SEED, threads=WORKERS, cache="auto", progress=False,
        memory_budget=MEMORY_BUDGET_MIB << 20,
        fields=[stoker.Volume("image"), stoker.LabelVolume("label")],
        transforms=[stoker.RandCropByPosNegLabel((PATCH, PATCH, PATCH), label_key="label", pos=POS, neg=NEG,
                                                 num_samples=NUM_SAMPLES),
                    stoker.ScaleIntensityRange(A_MIN, A_MAX, B_MIN, B_MAX, clip=True),
                    stoker.RandFlip(prob=FLIP_PROB, spatial_axis=0), stoker.RandFlip(prob=FLIP_PROB, spatial_axis=1),
                    stoker.RandFlip(prob=FLIP_PROB, spatial_axis=2)])


def volume_stats(loader):
    """stoker's stats()["volume"] (a dict of counters), or None when it has none."""
    s = loader.stats()
    v = s.get("volume") if isinstance(s, dict) else None
    return dict(v) if isinstance(v, dict) else None


# ----------------------------------------------------------------------------------------------------- children
def check_batch(batch, n=BATCH * NUM_SAMPLES):
    """Shapes and dtypes of a batch: raises AssertionError naming what differs."""
    import torch
    assert isinstance(batch, dict) and "image" in batch and "label" in batch, \
        f"a batch should be a dict with 'image' and 'label'; got {type(batch).__name__} " \
        f"{sorted(batch) if isinstance(batch, dict) else ''}"
    want = {"image": ((n, 1, PATCH, PATCH, PATCH), torch.float32), "label": ((n, 1, PATCH, PATCH, PATCH), torch.uint8)}
    got = {k: (tuple(batch[k].shape), batch[k].dtype) for k in want}
    assert got == want, f"batch shapes/dtypes {got}, expected {want}"


def consume(batch):
    """The same on both sides: one value of each tensor read. -> (checksum, patches)"""
    return float(batch["image"][0, 0, 0, 0, 0]) + float(batch["label"][-1, 0, 0, 0, 0]), int(batch["image"].shape[0])


def child_check(side, fmt, csv_path):
    """Two batches: shapes, dtypes, ranges; one JSON line {"ok": ...} or {"error": ...}."""
    import numpy as np
    try:
        if side == "stoker":
            loader = make_stoker(csv_path)
        else:
            import multiprocessing as mp
            loader = make_dataloader(csv_path, fmt, None, mp.Array("q", WORKERS))
        patches = fg = 0
        fg_voxels = 0.0
        lo, hi = float("inf"), float("-inf")
        labels = set()
        for k, batch in enumerate(loader):
            check_batch(batch)
            x, y = batch["image"].numpy(), batch["label"].numpy()
            lo, hi = min(lo, float(x.min())), max(hi, float(x.max()))
            labels |= set(int(v) for v in np.unique(y))
            per = (y.reshape(len(y), -1) > 0).mean(1)
            fg += int((per > 0).sum())
            fg_voxels += float(per.sum())
            patches += len(y)
            if k == 1:
                break
        assert B_MIN <= lo and hi <= B_MAX, f"image values in [{lo}, {hi}], expected within [{B_MIN}, {B_MAX}]"
        assert labels <= {0, 1, 2, 3}, f"label values {sorted(labels)}, expected within 0-3"
        extra = {}
        if side == "stoker":
            v = volume_stats(loader)
            extra["volume_stats_keys"] = sorted(v) if v is not None else None
        print(json.dumps({"ok": True, "patches": patches, "with_foreground": fg,
                          "foreground_voxels": fg_voxels / patches, "image_range": [lo, hi], "labels": sorted(labels),
                          **extra}), flush=True)
    except Exception as e:  # noqa: BLE001 (reported to the parent, which stops with it)
        import traceback
        traceback.print_exc()
        print(json.dumps({"error": f"{type(e).__name__}: {e}"}), flush=True)


def child_run(side, fmt, csv_path, epochs):
    """--epochs epochs; one JSON line of per-epoch measurements."""
    t_imp = time.perf_counter()
    import multiprocessing as mp
    import torch
    versions = {"torch": torch.__version__}
    if side == "stoker":
        stoker = import_stoker()
        versions["stoker"] = getattr(stoker, "__version__", "?")
    else:
        import numpy as np
        versions["numpy"] = np.__version__
        if fmt == "nii":
            import nibabel as nib
            versions["nibabel"] = nib.__version__
    import_s = time.perf_counter() - t_imp

    t0 = time.perf_counter()
    counters = start_rchar = None
    if side == "stoker":
        own_rchar = proc_io(os.getpid()).get("rchar")  # stoker's threads read in this process
        loader = make_stoker(csv_path)
    else:
        counters, start_rchar = mp.Array("d", 3), mp.Array("q", WORKERS)
        loader = make_dataloader(csv_path, fmt, counters, start_rchar)
    construct_s = time.perf_counter() - t0
    out_epochs = []
    checksum = 0.0
    prev_stats = volume_stats(loader) if side == "stoker" else None
    stats_at_start = prev_stats
    prev_counters, prev_rchar = [0.0, 0.0, 0.0], None
    for epoch in range(epochs):
        if epoch > 0:
            t0 = time.perf_counter()
        if side == "stoker":
            loader.set_epoch(epoch)
        it = iter(loader)
        patches = batches = 0
        first_batch_s = None
        for batch in it:
            if first_batch_s is None:
                first_batch_s = time.perf_counter() - t0
                check_batch(batch)
            c, n = consume(batch)
            checksum += c
            patches += n
            batches += 1
        seconds = time.perf_counter() - t0
        check_batch(batch, n=int(batch["image"].shape[0]))
        del batch
        ep = {"epoch": epoch + 1, "patches": patches, "batches": batches, "seconds": seconds,
              "patches_per_s": patches / seconds, "first_batch_s": first_batch_s}
        if side == "stoker":
            st = volume_stats(loader)
            ep["volume_stats"] = st
            r = proc_io(os.getpid()).get("rchar")
            ep["rchar"] = r - own_rchar if r is not None and own_rchar is not None else None
            own_rchar = r
            # counters are cumulative over the loader's life: this epoch's share is the difference
            ep["volume_delta"] = None if st is None else {
                k: v - (prev_stats or {}).get(k, 0) for k, v in st.items()
                if isinstance(v, (int, float)) and not isinstance(v, bool)}
            prev_stats = st
        else:
            # the workers have finished this epoch's work (persistent: they wait for the next epoch's indices)
            pids = [w.pid for w in it._workers]
            rchar = [proc_io(p).get("rchar") for p in pids]
            if prev_rchar is None:
                prev_rchar = list(start_rchar)
            ok = all(r is not None for r in rchar)
            ep["rchar"] = sum(r - p for r, p in zip(rchar, prev_rchar)) if ok else None
            prev_rchar = rchar if ok else prev_rchar
            cur = list(counters)
            ep["mmap_touched_bytes"], ep["inflated_bytes"], ep["loads"] = (c - p for c, p in zip(cur, prev_counters))
            prev_counters = cur
        out_epochs.append(ep)
    res = {"side": side, "format": fmt, "epochs": out_epochs, "import_s": import_s, "construct_s": construct_s,
           "checksum": checksum, "versions": versions, "dataset_size": len(read_rows(csv_path))}
    if side == "stoker":
        res["volume_stats_at_start"] = stats_at_start
        full = loader.stats()
        res["stats"] = {k: full.get(k) for k in ("cache_mode", "cache_bytes", "cache_budget_bytes", "batch_buffers",
                                                 "batch_buffer_bytes", "ring_depth_max", "threads", "corrupt")}
    del loader
    print(json.dumps(res), flush=True)


# --------------------------------------------------------------------------------------------------- parent side
def child_cmd(args, mode, side, fmt):
    return [sys.executable, os.path.abspath(__file__), args.data, "--child", mode, "--side", side, "--format", fmt,
            "--epochs", str(args.epochs), "--timeout", str(args.timeout), "--memory-budget", str(args.memory_budget)]


def drop_page_cache(data):
    """posix_fadvise(DONTNEED) on the set's files (this set's pages only; nothing else on the machine)."""
    for sub in ("npy", "nii"):
        d = os.path.join(data, sub)
        for name in os.listdir(d):
            fd = os.open(os.path.join(d, name), os.O_RDONLY)
            try:
                os.fdatasync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def run_check(args, side, fmt):
    t = time.perf_counter()
    proc = subprocess.run(child_cmd(args, "check", side, fmt), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)
    lines = proc.stdout.strip().splitlines()
    try:
        res = json.loads(lines[-1])
    except (IndexError, ValueError):
        res = {"error": f"the check child exited {proc.returncode} without a result"}
    if proc.returncode != 0 and "error" not in res:
        res = {"error": f"the check child exited {proc.returncode}"}
    res["stderr"] = proc.stderr
    res["seconds"] = time.perf_counter() - t
    return res


def measure(args, side, fmt, what):
    if args.drop_page_cache:
        drop_page_cache(args.data)
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    m0, own0 = machine_cpu(), time.process_time()
    t0 = time.perf_counter()
    code, out, peak = run_sampling_pss(child_cmd(args, "run", side, fmt))
    wall = time.perf_counter() - t0
    m1, own1 = machine_cpu(), time.process_time()
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if code != 0:
        hint = (" stoker's run failed: its traceback (or, after --timeout, faulthandler's thread dump) is above; "
                "the check child had taken 2 batches fine, so the failure is in the timed epochs"
                if side == "stoker" else " see the traceback above")
        sys.exit(f"volume_bench: the {what} run failed (exit {code}).{hint}")
    r = json.loads(out.strip().splitlines()[-1])
    child_cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    r["peak_pss_mib"] = peak
    r["wall_s"] = wall
    r["child_cpu_s"] = child_cpu
    r["other_cores"] = max(0.0, (m1["procs"] - m0["procs"]) - child_cpu - (own1 - own0)) / wall
    return r


def steady(run):
    """Patches/s over the epochs after the first (epochs 2 to --epochs)."""
    eps = run["epochs"][1:]
    return sum(e["patches"] for e in eps) / sum(e["seconds"] for e in eps)


def steady_name(runs):
    """'epoch 2' or 'epochs 2-N': the steady epochs of these runs."""
    n = len(next(iter(runs.values()))[0]["epochs"])
    return "epoch 2" if n == 2 else f"epochs 2-{n}"


def bytes_per_patch(run, epochs):
    """-> {label: value or None} for the given epoch indices."""
    out = {}
    pts = sum(run["epochs"][i]["patches"] for i in epochs)
    if run["side"] == "stoker":
        deltas = [run["epochs"][i].get("volume_delta") for i in epochs]
        for key in ("bytes_read", "bytes_requested", "inflate_bytes", "pages_touched_bytes"):
            vals = [d.get(key) if d else None for d in deltas]
            out[key] = sum(vals) / pts if all(v is not None for v in vals) else None
        # its own per-patch figure (cumulative over the run) as a cross-check
        last = run["epochs"][epochs[-1]].get("volume_stats") or {}
        out["bytes_per_patch (stats)"] = last.get("bytes_per_patch")
        vals = [run["epochs"][i].get("rchar") for i in epochs]
        out["rchar"] = sum(vals) / pts if all(v is not None for v in vals) else None
        return out
    vals = [run["epochs"][i].get("rchar") for i in epochs]
    out["rchar"] = sum(vals) / pts if all(v is not None for v in vals) else None
    out["mmap_touched"] = sum(run["epochs"][i]["mmap_touched_bytes"] for i in epochs) / pts
    out["inflated"] = sum(run["epochs"][i]["inflated_bytes"] for i in epochs) / pts
    return out


def fmt_bytes(v):
    if v is None:
        return "n/a"
    if v >= 0.1 * MIB:
        return f"{v / MIB:.2f} MiB"
    return f"{v / 1024:.1f} KiB"


def fmt_list(xs, f="{:.1f}"):
    return ", ".join(f.format(x) for x in xs)


def report_format(fmt, runs, sides, data_res):
    """Prints one format's table and returns its summary (and verdicts)."""
    csv = data_res[f"{fmt}_csv"]
    n_vol = data_res["params"]["volumes"]
    print(f"\n### {FORMAT_NAMES[fmt]}: {os.path.relpath(csv)} ({n_vol} volumes, {n_vol * NUM_SAMPLES} patches an "
          f"epoch, {n_vol // BATCH} batches of {BATCH * NUM_SAMPLES})\n")
    summ = {"format": fmt, "sides": {}}
    for side in sides:
        rs = runs[(fmt, side)]
        e1 = [r["epochs"][0]["patches_per_s"] for r in rs]
        e2 = [steady(r) for r in rs]
        summ["sides"][side] = {
            "epoch1_per_s": e1, "steady_per_s": e2, "epoch1_median": median(e1), "steady_median": median(e2),
            "peak_pss_mib": [r["peak_pss_mib"] for r in rs], "wall_s": [r["wall_s"] for r in rs],
            "cpu_s_per_patch": [r["child_cpu_s"] / sum(e["patches"] for e in r["epochs"]) for r in rs],
            "other_cores": [r["other_cores"] for r in rs],
            "bytes_epoch1": [bytes_per_patch(r, [0]) for r in rs],
            "bytes_steady": [bytes_per_patch(r, list(range(1, len(r["epochs"])))) for r in rs],
            "first_batch_s": [r["epochs"][0]["first_batch_s"] for r in rs],
            "import_s": [r["import_s"] for r in rs], "construct_s": [r["construct_s"] for r in rs]}
    both = all(s in sides for s in SIDES)
    cols = [SIDE_NAMES[s] for s in sides] + (["stoker / DataLoader"] if both else [])
    print("| | " + " | ".join(cols) + " |")
    print("|---|" + "---:|" * len(cols))

    def row(name, cells, ratio=""):
        print(f"| {name} | " + " | ".join(cells) + (f" | {ratio}" if both else "") + " |")

    ratios = {}
    for key, name in (("epoch1", "patches/s, epoch 1 (fresh process: loader made, workers/caches start)"),
                      ("steady", f"patches/s, {steady_name(runs)} (steady state)")):
        vals = {s: summ["sides"][s][f"{key}_per_s"] for s in sides}
        cells = [f"**{median(vals[s]):.1f}** ({fmt_list(vals[s])})" for s in sides]
        ratio = ""
        if both:
            rr = [a / b for a, b in zip(vals["stoker"], vals["baseline"])]
            ratios[key] = rr
            ratio = f"**{median(rr):.2f}×** (rounds {fmt_list(rr, '{:.2f}')})"
        row(name + "; median (each round)", cells, ratio)
    summ["ratios"] = ratios
    if "baseline" in sides:
        b = summ["sides"]["baseline"]
        cells = []
        for s in sides:
            if s == "baseline":
                e1, es = b["bytes_epoch1"][-1], b["bytes_steady"][-1]
                if fmt == "npy":
                    cells.append(f"rchar {fmt_bytes(e1['rchar'])} / {fmt_bytes(es['rchar'])} (headers: the voxels are "
                                 f"mmap page faults); mmap pages touched {fmt_bytes(e1['mmap_touched'])} / "
                                 f"{fmt_bytes(es['mmap_touched'])}")
                else:
                    cells.append(f"rchar {fmt_bytes(e1['rchar'])} / {fmt_bytes(es['rchar'])}")
            else:
                st = summ["sides"]["stoker"]
                e1, es = st["bytes_epoch1"][-1], st["bytes_steady"][-1]
                cells.append(f"bytes_read {fmt_bytes(e1['bytes_read'])} / {fmt_bytes(es['bytes_read'])}"
                             + (f"; bytes_requested {fmt_bytes(e1['bytes_requested'])} / "
                                f"{fmt_bytes(es['bytes_requested'])}" if e1.get("bytes_requested") is not None else "")
                             + f"; stats bytes_per_patch {fmt_bytes(es['bytes_per_patch (stats)'])} (cumulative); "
                             f"rchar {fmt_bytes(e1['rchar'])} / {fmt_bytes(es['rchar'])}")
        row(f"bytes read per patch, epoch 1 / {steady_name(runs)} (last round)", cells)
    elif "stoker" in sides:
        st = summ["sides"]["stoker"]
        e1, es = st["bytes_epoch1"][-1], st["bytes_steady"][-1]
        row(f"bytes read per patch, epoch 1 / {steady_name(runs)} (last round)",
            [f"bytes_read {fmt_bytes(e1['bytes_read'])} / {fmt_bytes(es['bytes_read'])}; rchar "
             f"{fmt_bytes(e1['rchar'])} / {fmt_bytes(es['rchar'])}"])
    if fmt == "nii":
        cells = []
        for s in sides:
            b1, bs = summ["sides"][s]["bytes_epoch1"][-1], summ["sides"][s]["bytes_steady"][-1]
            k = "inflated" if s == "baseline" else "inflate_bytes"
            cells.append(f"{fmt_bytes(b1[k])} / {fmt_bytes(bs[k])}")
        row(f"bytes inflated per patch, epoch 1 / {steady_name(runs)} (last round)", cells)
    pss = {s: summ["sides"][s]["peak_pss_mib"] for s in sides}
    row("peak PSS of the process tree, max (each round)",
        [f"**{max(pss[s]):.0f} MiB** ({fmt_list(pss[s], '{:.0f}')})" for s in sides],
        f"{max(pss['stoker']) / max(pss['baseline']):.2f}×" if both else "")
    row("CPU s per patch (child tree, whole run: imports and start-up included), each round",
        [fmt_list(summ["sides"][s]["cpu_s_per_patch"], "{:.3f}") for s in sides])
    row("first batch of epoch 1 (s), each round",
        [fmt_list(summ["sides"][s]["first_batch_s"], "{:.2f}") for s in sides])
    row("imports / loader construction (s), each round",
        [fmt_list([f"{a:.1f}/{b:.2f}" for a, b in zip(summ["sides"][s]["import_s"], summ["sides"][s]["construct_s"])],
                  "{}") for s in sides])
    row("run wall time (s), each round", [fmt_list(summ["sides"][s]["wall_s"]) for s in sides])
    row("other processes' CPU during the run (cores), each round",
        [fmt_list(summ["sides"][s]["other_cores"], "{:.2f}") for s in sides])
    if "stoker" in sides:
        last = runs[(fmt, "stoker")][-1]
        vs = last["epochs"][-1].get("volume_stats")
        print(f"\nstoker stats()['volume'] after the last round's final epoch: "
              f"{json.dumps(vs) if vs is not None else 'MISSING (stats() has no volume entry)'}")
        print(f"stoker stats (same run): {json.dumps(last.get('stats'))}")
    verdicts = []
    if both:
        rr = ratios["steady"]
        verdicts.append((median(rr) >= TARGETS[fmt],
                         f"{FORMAT_NAMES[fmt]}: stoker / DataLoader patches/s, {steady_name(runs)}, median of "
                         f"{len(rr)} same-round "
                         f"ratios ({fmt_list(rr, '{:.2f}')}) = {median(rr):.2f}× (target ≥ {TARGETS[fmt]:g}×)"))
        verdicts.append((max(pss["stoker"]) <= max(pss["baseline"]),
                         f"{FORMAT_NAMES[fmt]}: peak PSS, highest of the rounds: stoker {max(pss['stoker']):.0f} MiB, "
                         f"DataLoader {max(pss['baseline']):.0f} MiB (target: stoker ≤ DataLoader)"))
    summ["verdicts"] = [{"pass": ok, "what": w} for ok, w in verdicts]
    return summ, verdicts


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", nargs="?", default=os.path.join(ROOT, "data", "volumes"),
                    help="bench/volume_data.py's folder (made when missing; default data/volumes)")
    ap.add_argument("--volumes", type=int, default=24)
    ap.add_argument("--size", type=int, default=256, help="voxels a side")
    ap.add_argument("--seed", type=int, default=0, help="the data generator's seed")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=4, help="epochs per run (>= 2): epoch 1, then the steady ones")
    ap.add_argument("--only", choices=SIDES, help="run one side (no ratios, no verdicts)")
    ap.add_argument("--formats", default=",".join(FORMATS), help="comma-separated: npy,nii")
    ap.add_argument("--drop-page-cache", action="store_true",
                    help="posix_fadvise(DONTNEED) the set's files before every run (a cold epoch 1 from disk)")
    ap.add_argument("--timeout", type=int, default=300, help="seconds a child may run before it is stopped")
    ap.add_argument("--json", help="also write every number here")
    ap.add_argument("--memory-budget", type=int, default=0,
                    help="stoker's memory_budget in MiB (0: its default, half the available memory): with a budget "
                         "smaller than the inflated set, the rest of the .nii.gz volumes inflate on every load")
    ap.add_argument("--child", choices=["run", "check"], help=argparse.SUPPRESS)
    ap.add_argument("--side", choices=SIDES, help=argparse.SUPPRESS)
    ap.add_argument("--format", choices=FORMATS, help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.data = os.path.abspath(args.data)
    global MEMORY_BUDGET_MIB
    MEMORY_BUDGET_MIB = args.memory_budget

    if args.child:
        import faulthandler
        faulthandler.dump_traceback_later(args.timeout, exit=True)  # a hung loader: its threads' stacks, then exit 1
        csv_path = os.path.join(args.data, f"{args.format}.csv")
        if args.child == "check":
            return child_check(args.side, args.format, csv_path)
        return child_run(args.side, args.format, csv_path, args.epochs)

    formats = [f for f in args.formats.split(",") if f]
    for f in formats:
        if f not in FORMATS:
            sys.exit(f"volume_bench: unknown format {f!r} (choose from {', '.join(FORMATS)})")
    if args.epochs < 2:
        sys.exit("volume_bench: --epochs must be >= 2 (epoch 1 and at least one steady epoch)")
    sides = [args.only] if args.only else list(SIDES)
    t_all = time.perf_counter()
    command = " ".join([os.path.basename(sys.executable), os.path.relpath(os.path.abspath(__file__))] + sys.argv[1:])
    machine = {"cores": len(os.sched_getaffinity(0)), "cpu_count": os.cpu_count(), "cpu_model": cpu_model(),
               "python": platform.python_version(), "kernel": platform.release()}
    print(f"volume_bench: {command}", flush=True)
    print(f"machine: {machine['cores']} cores available ({machine['cpu_count']} online), {machine['cpu_model']}; "
          f"Python {machine['python']}, Linux {machine['kernel']}", flush=True)
    data_res = volume_data.generate(args.data, args.volumes, args.size, args.seed)
    times = {"data_s": data_res["seconds"]}
    print(f"time: data {'made' if data_res['made'] else 'checked'} in {data_res['seconds']:.1f} s", flush=True)
    if "stoker" in sides:
        print(f"stoker: {module_info()}", flush=True)

    # Checks: 2 batches of each (format, side); stoker's failure stops the run here, before anything is timed.
    t = time.perf_counter()
    checks = {}
    for fmt in formats:
        for side in sides:
            res = run_check(args, side, fmt)
            checks[f"{fmt}/{side}"] = {k: v for k, v in res.items() if k != "stderr"}
            if "error" in res:
                sys.stderr.write(res["stderr"][-6000:])
                if side == "stoker":
                    sys.exit(f"volume_bench: stoker cannot run the volume pipeline on {FORMAT_NAMES[fmt]} "
                             f"({os.path.join(args.data, fmt + '.csv')}): {res['error']}\n"
                             f"  build: {module_info()}\n  (its traceback is above; `python3 bench/volume_bench.py "
                             f"{os.path.relpath(args.data)} --only baseline` measures the DataLoader side alone)")
                sys.exit(f"volume_bench: the DataLoader side failed its check on {FORMAT_NAMES[fmt]}: {res['error']}")
            print(f"check {FORMAT_NAMES[fmt]:7s} {SIDE_NAMES[side]:27s}: {res['patches']} patches of 2 batches: shapes "
                  f"and dtypes right, image in [{res['image_range'][0]:.3f}, {res['image_range'][1]:.3f}], labels "
                  f"{res['labels']}; {res['with_foreground']}/{res['patches']} patches hold foreground (mean "
                  f"{100 * res['foreground_voxels']:.1f}% of their voxels)"
                  + (f"; stats()['volume'] keys: {res['volume_stats_keys']}" if side == "stoker" else "")
                  + f" ({res['seconds']:.1f} s)", flush=True)
    times["checks_s"] = time.perf_counter() - t

    configs = [(fmt, side) for fmt in formats for side in sides]
    runs = {c: [] for c in configs}
    t = time.perf_counter()
    for r in range(args.rounds):
        for fmt, side in (configs if r % 2 == 0 else configs[::-1]):
            what = f"{SIDE_NAMES[side]} {FORMAT_NAMES[fmt]} (round {r + 1})"
            res = measure(args, side, fmt, what)
            runs[(fmt, side)].append(res)
            eps = res["epochs"]
            print(f"  round {r + 1}: {FORMAT_NAMES[fmt]:7s} {SIDE_NAMES[side]:27s} epoch 1 "
                  f"{eps[0]['patches_per_s']:6.1f} patches/s ({eps[0]['seconds']:.1f} s), epochs 2+ "
                  f"{steady(res):6.1f} patches/s ({sum(e['seconds'] for e in eps[1:]):.1f} s; each "
                  f"{fmt_list([e['patches_per_s'] for e in eps[1:]], '{:.0f}')}); peak PSS "
                  f"{res['peak_pss_mib']:.0f} MiB; run {res['wall_s']:.1f} s; other processes "
                  f"{res['other_cores']:.2f} cores", flush=True)
    times["rounds_s"] = time.perf_counter() - t

    print(f"\n## volume_bench results\n\ncommand: {command}")
    print(f"machine: {machine['cores']} cores available ({machine['cpu_count']} online), {machine['cpu_model']}")
    print(volume_data.describe(data_res))
    versions = {}
    for rs in runs.values():
        versions.update(rs[0]["versions"])
    print("versions: " + ", ".join(f"{k} {v}" for k, v in sorted(versions.items()))
          + (f"; stoker build: {module_info()}" if "stoker" in sides else ""))
    print(f"work: per volume load {NUM_SAMPLES} patches of {PATCH}^3, RandCropByPosNegLabel(pos={POS}, neg={NEG}), "
          f"ScaleIntensityRange({A_MIN:g}, {A_MAX:g}, {B_MIN:g}, {B_MAX:g}, clip), RandFlip(p={FLIP_PROB}) on each "
          f"axis; batch {BATCH} volumes = {BATCH * NUM_SAMPLES} patches; shuffle, seed {SEED}; {WORKERS} DataLoader "
          f"workers (persistent) / {WORKERS} stoker threads, cache=\"auto\", memory_budget="
          f"{str(args.memory_budget) + ' MiB' if args.memory_budget else 'default'}; {args.rounds} round(s), order "
          f"alternating; "
          f"{args.epochs} epochs per fresh process; page cache "
          f"{'dropped (posix_fadvise DONTNEED) before each run' if args.drop_page_cache else 'warm (not dropped)'}")
    summaries, verdicts = [], []
    for fmt in formats:
        s, v = report_format(fmt, runs, sides, data_res)
        summaries.append(s)
        verdicts += v
    times["total_s"] = time.perf_counter() - t_all
    print(f"\ntime: data {times['data_s']:.1f} s, checks {times['checks_s']:.1f} s, timed rounds "
          f"{times['rounds_s']:.1f} s, total {times['total_s']:.1f} s")
    busy = sorted({(fmt, i + 1) for (fmt, side), rs in runs.items() for i, r in enumerate(rs)
                   if r["other_cores"] >= QUIET})
    print()
    for ok, line in verdicts:
        print(f"{'PASS' if ok else 'FAIL'}: {line}")
    if not verdicts:
        print(f"targets not evaluated: --only {args.only} (they need both sides of the same run)")
    if busy:
        where = ", ".join(f"{FORMAT_NAMES[f]} round {i}" for f, i in busy)
        print(f"WARNING: other processes used >= {QUIET} cores during {where} "
              f"(another job on this {machine['cores']}-core machine): those runs' rates are not clean; rerun when "
              f"the machine is idle")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": command, "machine": machine, "versions": versions,
                       "stoker_build": module_info() if "stoker" in sides else None,
                       "data": {k: v for k, v in data_res.items() if k != "made"},
                       "settings": {"rounds": args.rounds, "epochs": args.epochs, "formats": formats, "sides": sides,
                                    "batch_volumes": BATCH, "num_samples": NUM_SAMPLES, "patch": PATCH,
                                    "workers": WORKERS, "drop_page_cache": args.drop_page_cache},
                       "checks": checks, "times": times,
                       "runs": {f"{fmt}/{side}": rs for (fmt, side), rs in runs.items()},
                       "summaries": summaries, "verdicts": [{"pass": ok, "what": w} for ok, w in verdicts],
                       "busy_runs": busy}, f, indent=1)
        print(f"json: {args.json}")


if __name__ == "__main__":
    main()
