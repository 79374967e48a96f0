#!/usr/bin/env python3
"""Segmentation, detection and multi-crop benchmark: stoker against torch.utils.data.DataLoader + torchvision + PIL.

Three input pipelines, the same on both sides, shuffle, --workers threads
(stoker) = workers (DataLoader), on the sets of bench/seg_det_data.py (made
first when missing) and the ImageFolder they come from:

  seg        image + mask (seg.csv), batch 64: RandomResizedCrop(512) +
             RandomHorizontalFlip + ToTensor + Normalize; the mask follows
             with nearest-neighbour resampling, uint8 [B, 512, 512].
  det        image + boxes (COCO instances.json, iscrowd dropped, category_id
             as labels), batch 16: the longer side resized to 512 (aspect
             kept: v2's Resize(None, max_size=512)), CenterCrop(512) (zero
             padding) + RandomHorizontalFlip + ToTensor + Normalize; boxes
             scaled, shifted, flipped, clipped, those under 1 px dropped,
             padded to 100: float32 [B, 100, 4] xyxy, labels int64 [B, 100]
             (-1 padding), counts int64 [B].
  multicrop  DINO-style views of each ImageFolder image, batch 64: 2 global
             (RandomResizedCrop(224, scale=(0.4, 1)) + flip + Normalize) and 6
             local (RandomResizedCrop(96, scale=(0.05, 0.4)) + flip +
             Normalize): [B, 2, 3, 224, 224] and [B, 6, 3, 96, 96].

The DataLoader side is torchvision 0.14's functional ops on PIL images (masks
with InterpolationMode.NEAREST), batched as dicts with stoker's keys.

Before a pipeline is timed, a child process checks that both sides give the
same batches for the first records in order (shuffle=False), with
deterministic transforms in place of the random ones: Resize + CenterCrop
(padding included) + RandomHorizontalFlip(p=1); images as uint8 (exact),
masks exact, boxes within 1e-4, labels and counts exact, and for seg the
normalised float32 images within 1e-6; for multicrop also that the timed
loader's views of a sample all differ. A mismatch stops the run. A pipeline
whose stoker loader cannot be made (TypeError or ValueError: an API stoker
does not have yet) is skipped with a line saying so.

As bench/augment_bench.py: each (pipeline, side) runs in a child process of
this one, alternating (every other round in reverse order), a warm-up epoch
and then --epochs timed epochs, --rounds times; the table shows the best
round of each side, their ratio and the median of the same-round ratios. Peak
memory is PSS summed over the child and its descendants (DataLoader workers
included), sampled every 0.25 s (bench/loader_bench.py's), the highest of the
rounds. Every batch is consumed the same way on both sides: iterate, and sum
every tensor of the batch into a Python float (with numpy: torch 1.13's uint8
sum alone would cap both sides near 190 masks/s).

--limit N runs only N images an epoch (rounded down to whole batches): the
DataLoader over a Subset of the first N records (shuffled), stoker over its
whole shuffled epoch but left after N images.

    python3 bench/seg_det_bench.py [--pipelines seg,det,multicrop] [--epochs 1] [--rounds 2] [--limit N]
                                   [--json out.json]
    python3 bench/seg_det_bench.py --quick        # smoke run: --limit 128, 1 round
"""
import argparse
import json
import os
import platform
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import seg_det_data  # noqa: E402
from augment_bench import add_run_args, cpu_model, median, print_child_result, timed_epochs  # noqa: E402
from loader_bench import run_sampling_pss  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
PIPELINES = ("seg", "det", "multicrop")
BATCH = {"seg": 64, "det": 16, "multicrop": 64}
TARGETS = {"seg": 4.0, "det": 4.0, "multicrop": 5.0}
SEG_SIZE, DET_SIZE, MAX_BOXES = 512, 512, 100
GLOBAL_VIEWS, LOCAL_VIEWS = 2, 6
PIPELINE_NAMES = {
    "seg": "seg: image + mask, RRC 512, flip",
    "det": "det: image + boxes (COCO), longer side 512, pad 512, flip",
    "multicrop": "multicrop: 2 x RRC 224 + 6 x RRC 96, flip",
}
SIDE_NAMES = {"dataloader": "DataLoader + torchvision + PIL", "stoker": "stoker"}
CHECK_RECORDS = {"seg": 4, "det": 8, "multicrop": 4}  # det: record 5 has no annotations


# ------------------------------------------ the DataLoader side (torchvision 0.14 on PIL)
def open_rgb(path):
    from PIL import Image
    with open(path, "rb") as f:
        return Image.open(f).convert("RGB")


def read_seg_rows(csv_path):
    """seg.csv -> [(image path, mask path)], in row order."""
    import csv
    base = os.path.dirname(os.path.abspath(csv_path))
    with open(csv_path, newline="") as f:
        return [(os.path.join(base, r["image"]), os.path.join(base, r["mask"])) for r in csv.DictReader(f)]


def read_coco(json_path, image_root):
    """instances.json -> [(image path, boxes float32 [n, 4] xyxy, labels int64 [n])], in image id order, iscrowd
    annotations dropped (torchvision's CocoDetection order and its detection references' rule)."""
    import torch
    with open(json_path) as f:
        coco = json.load(f)
    per_image = {img["id"]: [] for img in coco["images"]}
    for a in coco["annotations"]:
        if not a.get("iscrowd", 0):
            per_image[a["image_id"]].append(a)
    records = []
    for img in sorted(coco["images"], key=lambda i: i["id"]):
        anns = per_image[img["id"]]
        boxes = torch.tensor([[x, y, x + w, y + h] for x, y, w, h in (a["bbox"] for a in anns)],
                             dtype=torch.float32).reshape(-1, 4)
        labels = torch.tensor([a["category_id"] for a in anns], dtype=torch.int64)
        records.append((os.path.join(image_root, img["file_name"]), boxes, labels))
    return records


def center_crop_shift(size, crop):
    """Where torchvision's center_crop puts pixel 0 of a side of `size` in its `crop` output: it pads
    (crop - size) // 2 first when the crop is larger, then crops at int(round((padded - crop) / 2.0))."""
    pad = (crop - size) // 2 if crop > size else 0
    padded = crop if crop > size else size
    return pad - int(round((padded - crop) / 2.0))


def center_crop(img, size, fill=0):
    """torchvision 0.14's F.center_crop, with a fill value for the padding (its own pads with 0)."""
    import torchvision.transforms.functional as F
    w, h = img.size
    if size > w or size > h:
        pad_w, pad_h = max(size - w, 0), max(size - h, 0)
        img = F.pad(img, [pad_w // 2, pad_h // 2, (pad_w + 1) // 2, (pad_h + 1) // 2], fill=fill)
    return F.center_crop(img, [size, size])


def max_size_hw(h, w, max_size):
    """torchvision v2's Resize(None, max_size): the longer side becomes max_size, aspect kept."""
    short, long = (w, h) if w <= h else (h, w)
    new_short = int(max_size * short / long)
    return (max_size, new_short) if w <= h else (new_short, max_size)


def mask_tensor(mask):
    import numpy as np
    import torch
    return torch.from_numpy(np.array(mask, dtype=np.uint8))


def normalized(img):
    import torchvision.transforms.functional as F
    return F.normalize(F.to_tensor(img), MEAN, STD)


def rrc_flip(size, scale=(0.08, 1.0)):
    """RandomResizedCrop(size, scale) + RandomHorizontalFlip on an image and its masks (nearest)."""
    import torch
    import torchvision.transforms as T
    import torchvision.transforms.functional as F
    nearest, bilinear = T.InterpolationMode.NEAREST, T.InterpolationMode.BILINEAR

    def geometry(img, *masks):
        top, left, h, w = T.RandomResizedCrop.get_params(img, scale=list(scale), ratio=[3.0 / 4.0, 4.0 / 3.0])
        img = F.resized_crop(img, top, left, h, w, [size, size], bilinear)
        masks = [F.resized_crop(m, top, left, h, w, [size, size], nearest) for m in masks]
        if torch.rand(1) < 0.5:
            img, masks = F.hflip(img), [F.hflip(m) for m in masks]
        return (img, *masks)
    return geometry


def resize_crop_flip(resize, crop, fill=255):
    """The checks' deterministic geometry: Resize(resize) + CenterCrop(crop) + RandomHorizontalFlip(p=1);
    masks padded with `fill`."""
    import torchvision.transforms as T
    import torchvision.transforms.functional as F

    def geometry(img, *masks):
        img = F.hflip(center_crop(F.resize(img, resize), crop))
        masks = [F.hflip(center_crop(F.resize(m, resize, T.InterpolationMode.NEAREST), crop, fill)) for m in masks]
        return (img, *masks)
    return geometry


class SegDataset:
    """seg.csv rows -> {"image", "mask"}: `geometry` on both, then `finish` on the image."""

    def __init__(self, rows, geometry, finish):
        self.rows, self.geometry, self.finish = rows, geometry, finish

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        from PIL import Image
        image_path, mask_path = self.rows[i]
        with Image.open(mask_path) as m:
            m.load()
            img, mask = self.geometry(open_rgb(image_path), m)
        return {"image": self.finish(img), "mask": mask_tensor(mask)}


def det_geometry(img, boxes, labels, size, flip):
    """The longer side resized to `size` (bilinear), CenterCrop(size) with zero padding, a horizontal flip when
    `flip`; boxes scaled (v2's float32 ratios), shifted, flipped and clipped with the pixels, those under 1 px
    wide or high dropped. -> (img, boxes, labels)"""
    import torch
    import torchvision.transforms.functional as F
    w, h = img.size
    new_h, new_w = max_size_hw(h, w, size)
    if (new_h, new_w) != (h, w):
        img = F.resize(img, [new_h, new_w])
        boxes = boxes.mul(torch.tensor([new_w / w, new_h / h, new_w / w, new_h / h]))
    img = F.center_crop(img, [size, size])
    dx, dy = center_crop_shift(new_w, size), center_crop_shift(new_h, size)
    boxes = boxes + torch.tensor([dx, dy, dx, dy], dtype=torch.float32)
    if flip:
        img = F.hflip(img)
        boxes = torch.stack([size - boxes[:, 2], boxes[:, 1], size - boxes[:, 0], boxes[:, 3]], dim=1)
    boxes = boxes.clamp(0, size)
    keep = (boxes[:, 2] - boxes[:, 0] >= 1) & (boxes[:, 3] - boxes[:, 1] >= 1)
    return img, boxes[keep], labels[keep]


class DetDataset:
    """COCO records -> (image, boxes, labels) through det_geometry, flipped with probability `flip_p`."""

    def __init__(self, records, size, flip_p, finish):
        self.records, self.size, self.flip_p, self.finish = records, size, flip_p, finish

    def __len__(self):
        return len(self.records)

    def __getitem__(self, i):
        import torch
        path, boxes, labels = self.records[i]
        flip = bool(torch.rand(1) < self.flip_p)
        img, boxes, labels = det_geometry(open_rgb(path), boxes, labels, self.size, flip)
        return self.finish(img), boxes, labels


def det_collate(batch, max_boxes=MAX_BOXES):
    """Images stacked; boxes and labels padded to max_boxes (zeros, -1) with their counts, as stoker.Boxes."""
    import torch
    n = len(batch)
    boxes = torch.zeros(n, max_boxes, 4)
    labels = torch.full((n, max_boxes), -1, dtype=torch.int64)
    count = torch.zeros(n, dtype=torch.int64)
    for i, (_, b, l) in enumerate(batch):
        k = min(len(b), max_boxes)
        boxes[i, :k], labels[i, :k], count[i] = b[:k], l[:k], k
    return {"image": torch.stack([x for x, _, _ in batch]), "boxes": boxes, "boxes_labels": labels,
            "boxes_count": count}


class MultiCrop:
    """An ImageFolder transform: {"global": [2, 3, 224, 224], "local": [6, 3, 96, 96]} of one PIL image."""

    def __init__(self, global_tf, local_tf):
        self.global_tf, self.local_tf = global_tf, local_tf

    def __call__(self, img):
        import torch
        return {"global": torch.stack([self.global_tf(img) for _ in range(GLOBAL_VIEWS)]),
                "local": torch.stack([self.local_tf(img) for _ in range(LOCAL_VIEWS)])}


class ViewsFolder:
    """An ImageFolder whose samples are {"global", "local", "label"}."""

    def __init__(self, root, multicrop):
        import torchvision
        self.folder = torchvision.datasets.ImageFolder(root, transform=multicrop)

    def __len__(self):
        return len(self.folder)

    def __getitem__(self, i):
        views, label = self.folder[i]
        return {**views, "label": label}


def view_tf(geometry, finish):
    return lambda img: finish(geometry(img)[0])


def torch_dataset(pipeline, paths, check=False):
    """The DataLoader side's Dataset (and collate_fn): the timed transforms, or with `check` the checks'
    deterministic ones and uint8 images."""
    import torchvision.transforms.functional as F
    finish = F.pil_to_tensor if check else normalized
    if pipeline == "seg":
        geometry = resize_crop_flip(300, 320) if check else rrc_flip(SEG_SIZE)
        return SegDataset(read_seg_rows(paths["seg_csv"]), geometry, finish), None
    if pipeline == "det":
        records = read_coco(paths["coco_json"], paths["image_root"])
        return DetDataset(records, DET_SIZE, 1.0 if check else 0.5, finish), det_collate
    if check:
        g, l = resize_crop_flip(256, 224), resize_crop_flip(110, 96)
    else:
        g, l = rrc_flip(224, scale=(0.4, 1.0)), rrc_flip(96, scale=(0.05, 0.4))
    return ViewsFolder(paths["image_root"], MultiCrop(view_tf(g, finish), view_tf(l, finish))), None


# ----------------------------------------------------------------------- the stoker side
def import_stoker():
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import stoker
    return stoker


def stoker_loader(pipeline, paths, batch_size, threads, check=False, normalize=True):
    """The stoker side's Loader: the timed transforms, or with `check` the checks' deterministic ones
    (shuffle=False; uint8 unless `normalize`)."""
    stoker = import_stoker()
    flip = stoker.RandomHorizontalFlip(1.0) if check else stoker.RandomHorizontalFlip()
    norm = [stoker.Normalize(MEAN, STD)] if normalize else []
    common = dict(batch_size=batch_size, shuffle=not check, seed=0, threads=threads, progress=False,
                  dtype="float32" if normalize else "uint8")
    if pipeline == "seg":
        geometry = [stoker.Resize(300), stoker.CenterCrop(320)] if check else [stoker.RandomResizedCrop(SEG_SIZE)]
        return stoker.Loader(paths["seg_csv"], fields=[stoker.Image("image"), stoker.Mask("mask", fill=255)],
                             transforms=geometry + [flip] + norm, **common)
    if pipeline == "det":
        return stoker.Loader(paths["coco_json"], image_root=paths["image_root"],
                             fields=[stoker.Image("image"), stoker.Boxes("boxes", max_boxes=MAX_BOXES)],
                             transforms=[stoker.Resize(None, max_size=DET_SIZE), stoker.CenterCrop(DET_SIZE),
                                         flip] + norm, **common)
    if check:
        g = [stoker.Resize(256), stoker.CenterCrop(224), flip]
        l = [stoker.Resize(110), stoker.CenterCrop(96), flip]
    else:
        g = [stoker.RandomResizedCrop(224, scale=(0.4, 1.0)), flip]
        l = [stoker.RandomResizedCrop(96, scale=(0.05, 0.4)), flip]
    return stoker.Loader(paths["image_root"], views={"global": (GLOBAL_VIEWS, g + norm),
                                                     "local": (LOCAL_VIEWS, l + norm)}, **common)


# ------------------------------------------------------------------------------ checks
def first_records(loader, n):
    """The first n records of a loader's (unshuffled) epoch, as one dict of tensors."""
    import torch
    parts = []
    got = 0
    for batch in loader:
        parts.append(batch)
        got += len(next(iter(batch.values())))
        if got >= n:
            break
    return {k: torch.cat([p[k] for p in parts])[:n] for k in parts[0]}


def torch_records(pipeline, paths, n):
    """The first n records (fewer in a smaller set) of the DataLoader side, batched."""
    from torch.utils.data import default_collate
    ds, collate = torch_dataset(pipeline, paths, check=True)
    return (collate or default_collate)([ds[i] for i in range(min(n, len(ds)))])


def assert_equal(pipeline, key, a, b, tol=0.0):
    """a (stoker) against b (torchvision), per record: dtype, shape and values (|diff| <= tol). -> max |diff|"""
    assert a.dtype == b.dtype and a.shape == b.shape, \
        f"{pipeline} check: {key}: stoker gives {a.dtype} {tuple(a.shape)}, torchvision {b.dtype} {tuple(b.shape)}"
    diff = (a.double() - b.double()).abs()
    for i in range(len(a)):
        worst = float(diff[i].max()) if diff[i].numel() else 0.0
        assert worst <= tol, f"{pipeline} check: {key} of record {i} differs by up to {worst} (tolerance {tol})"
    return float(diff.max()) if diff.numel() else 0.0


def check_views_differ(loader):
    """The timed multicrop loader's first batch: every sample's views are drawn apart (no two alike)."""
    batch = next(iter(loader))
    for key in ("global", "local"):
        views = batch[key].flatten(2)
        for i in range(views.shape[1]):
            for j in range(i):
                same = (views[:, i] == views[:, j]).all(1)
                assert not same.any(), f"multicrop check: {key} views {j} and {i} of a sample are identical"
    return len(batch["label"])


def check(pipeline, paths, threads, timed_loader):
    """Both sides on the first records with deterministic transforms; -> a line saying what agreed."""
    theirs = torch_records(pipeline, paths, CHECK_RECORDS[pipeline])
    n = len(next(iter(theirs.values())))
    ours = first_records(stoker_loader(pipeline, paths, 4, threads, check=True, normalize=False), n)
    for key in theirs:
        tol = 1e-4 if key == "boxes" else 0.0
        if key == "boxes":  # padding rows are zeros on both sides
            assert_equal(pipeline, "boxes_count", ours["boxes_count"], theirs["boxes_count"])
        assert_equal(pipeline, key, ours[key], theirs[key], tol)
    if pipeline == "seg":
        return check_seg_float(paths, threads, n)
    if pipeline == "det":
        boxes = int(theirs["boxes_count"].sum())
        empty = int((theirs["boxes_count"] == 0).sum())
        return (f"det: first {n} records (COCO id order), Resize(None, max_size={DET_SIZE}) + CenterCrop({DET_SIZE}) "
                f"+ flip(p=1), uint8: images equal, {boxes} boxes within 1e-4, labels and counts equal "
                f"({empty} image(s) without boxes)")
    return (f"multicrop: first {n} records (ImageFolder order), global Resize(256) + CenterCrop(224) + flip(p=1) "
            f"x{GLOBAL_VIEWS}, local Resize(110) + CenterCrop(96) + flip(p=1) x{LOCAL_VIEWS}, uint8: every view and "
            f"the labels equal; the timed loader's views all differ in its first {check_views_differ(timed_loader)} "
            f"samples")


def check_seg_float(paths, threads, n):
    """seg's check again with Normalize: float32 images within 1e-6."""
    import torch
    ours = first_records(stoker_loader("seg", paths, 4, threads, check=True), n)
    ds = SegDataset(read_seg_rows(paths["seg_csv"])[:n], resize_crop_flip(300, 320), normalized)
    theirs = torch.stack([ds[i]["image"] for i in range(n)])
    worst = assert_equal("seg", "normalised image", ours["image"], theirs, 1e-6)
    return (f"seg: first {n} rows, Resize(300) + CenterCrop(320) + flip(p=1): uint8 images equal, masks equal "
            f"(fill 255 padding included); with Normalize float32 images within {worst:.1e}")


# ------------------------------------------------------------------------ timed children
def make_dataloader(pipeline, paths, workers, limit):
    import torch
    ds, collate = torch_dataset(pipeline, paths)
    size = len(ds)
    if limit and limit < size:
        ds = torch.utils.data.Subset(ds, range(limit))
    loader = torch.utils.data.DataLoader(ds, batch_size=BATCH[pipeline], shuffle=True, num_workers=workers,
                                         collate_fn=collate)
    return loader, size


def check_shapes(pipeline, batch):
    import torch
    want = {"seg": {"image": ((3, SEG_SIZE, SEG_SIZE), torch.float32), "mask": ((SEG_SIZE, SEG_SIZE), torch.uint8)},
            "det": {"image": ((3, DET_SIZE, DET_SIZE), torch.float32), "boxes": ((MAX_BOXES, 4), torch.float32),
                    "boxes_labels": ((MAX_BOXES,), torch.int64), "boxes_count": ((), torch.int64)},
            "multicrop": {"global": ((GLOBAL_VIEWS, 3, 224, 224), torch.float32),
                          "local": ((LOCAL_VIEWS, 3, 96, 96), torch.float32), "label": ((), torch.int64)}}[pipeline]
    got = {k: (tuple(v.shape[1:]), v.dtype) for k, v in batch.items()}
    assert got == want, (pipeline, got, want)


def run_child(kind, pipeline, paths, workers, epochs, limit):
    if kind == "stoker":
        loader = stoker_loader(pipeline, paths, BATCH[pipeline], workers)
        size = loader.dataset_size
    else:
        loader, size = make_dataloader(pipeline, paths, workers, limit)
    # stoker: leave the epoch after this many images (the DataLoader runs over a Subset of them)
    stop = limit if limit and limit < size and kind == "stoker" else None

    def consume(batch):
        # The same consumption on both sides: touch every tensor of the batch. NOTE: numpy's sum, not
        # torch's: Debian's torch 1.13 sums a uint8 [64, 512, 512] mask in ~330 ms (numpy: ~6 ms), which
        # would make the consumer, not the loader, the measured bottleneck.
        return sum(float(t.numpy().sum()) for t in batch.values()), len(next(iter(batch.values())))

    measured = timed_epochs(loader, epochs, stop, consume, lambda batch: check_shapes(pipeline, batch))
    print_child_result(kind, pipeline, size, measured, import_stoker() if kind == "stoker" else None)


def run_check_child(pipeline, paths, workers):
    """One JSON line: {"skip": why} when stoker cannot make the loader, else {"checked": what agreed}."""
    try:
        timed_loader = stoker_loader(pipeline, paths, BATCH[pipeline], workers)
    except (TypeError, ValueError) as e:
        print(json.dumps({"skip": f"{type(e).__name__}: {e}"}), flush=True)
        return
    print(json.dumps({"checked": check(pipeline, paths, workers, timed_loader)}), flush=True)


# --------------------------------------------------------------------------- parent side
def child_cmd(args, child, pipeline, limit=0):
    return [sys.executable, os.path.abspath(__file__), "--src", args.src, "--out", args.out, "--child", child,
            "--pipeline", pipeline, "--workers", str(args.workers), "--epochs", str(args.epochs),
            "--limit", str(limit)]


def run_check(pipeline, args):
    proc = subprocess.run(child_cmd(args, "check", pipeline), stdout=subprocess.PIPE,
                          text=True)
    if proc.returncode != 0:
        sys.exit(f"seg_det_bench: the {pipeline} check failed (exit {proc.returncode}): stoker and torchvision "
                 f"disagree or a side broke; see above")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure(kind, pipeline, args):
    limit = args.limit and max(BATCH[pipeline], args.limit // BATCH[pipeline] * BATCH[pipeline])
    code, out, peak = run_sampling_pss(child_cmd(args, kind, pipeline, limit))
    if code != 0:
        sys.exit(f"seg_det_bench: the {kind} run of the {pipeline} pipeline failed (exit {code})")
    r = json.loads(out.strip().splitlines()[-1])
    r["peak_pss_mib"] = peak
    return r


def bench(pipelines, args):
    configs = [(p, k) for p in pipelines for k in ("dataloader", "stoker")]
    runs = {c: [] for c in configs}
    for r in range(args.rounds):
        for c in (configs if r % 2 == 0 else configs[::-1]):
            res = measure(c[1], c[0], args)
            runs[c].append(res)
            print(f"  round {r + 1}: {c[0]:9s} {SIDE_NAMES[c[1]]:30s} {res['images_per_s']:8.1f} images/s "
                  f"({res['timed_images']} images in {res['seconds']:.1f} s; warm-up epoch "
                  f"{res['first_epoch_images_per_s']:.1f} images/s)  peak PSS {res['peak_pss_mib']:7.1f} MiB",
                  flush=True)
    rows = []
    for p in pipelines:
        dl = [x["images_per_s"] for x in runs[(p, "dataloader")]]
        st = [x["images_per_s"] for x in runs[(p, "stoker")]]
        paired = [a / b for a, b in zip(st, dl)]
        rows.append({"pipeline": p, "dataloader_per_s": max(dl), "stoker_per_s": max(st),
                     "x_dataloader": max(st) / max(dl), "paired": paired, "paired_median": median(paired),
                     "target": TARGETS[p],
                     "peak_pss_mib": {k: max(x["peak_pss_mib"] for x in runs[(p, k)]) for k in SIDE_NAMES},
                     "images_per_epoch": {k: runs[(p, k)][0]["images_per_epoch"] for k in SIDE_NAMES},
                     "rounds": {k: runs[(p, k)] for k in SIDE_NAMES}})
    return rows


def print_table(rows, skipped):
    print("\n| pipeline | DataLoader img/s | stoker img/s | × DataLoader (same-round median) | peak PSS DataLoader "
          "| peak PSS stoker | target |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        pss = row["peak_pss_mib"]
        print(f"| {PIPELINE_NAMES[row['pipeline']]} | {row['dataloader_per_s']:.1f} | {row['stoker_per_s']:.1f} | "
              f"{row['x_dataloader']:.2f}× ({row['paired_median']:.2f}×) | {pss['dataloader']:.0f} MiB | "
              f"{pss['stoker']:.0f} MiB | ≥ {row['target']:g}× |")
    for p, why in skipped.items():
        print(f"| {PIPELINE_NAMES[p]} | skipped | skipped | stoker: {why} | | | ≥ {TARGETS[p]:g}× |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", default=os.path.join(ROOT, "data", "sample"), help="the ImageFolder of photos")
    ap.add_argument("--out", default=os.path.join(ROOT, "data", "segdet"),
                    help="bench/seg_det_data.py's folder (made when missing)")
    add_run_args(ap, PIPELINES, quick_limit=128)
    ap.add_argument("--child", choices=["stoker", "dataloader", "check"], help=argparse.SUPPRESS)
    ap.add_argument("--pipeline", choices=PIPELINES, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        paths = seg_det_data.generate(args.src, args.out, quiet=True)
        if args.child == "check":
            return run_check_child(args.pipeline, paths, args.workers)
        return run_child(args.child, args.pipeline, paths, args.workers, args.epochs, args.limit)
    if args.quick:
        args.limit, args.rounds = args.limit or 128, 1
    pipelines = [p for p in args.pipelines.split(",") if p]
    for p in pipelines:
        if p not in PIPELINES:
            sys.exit(f"seg_det_bench: unknown pipeline {p!r} (choose from {', '.join(PIPELINES)})")
    paths = seg_det_data.generate(args.src, args.out)

    command = " ".join([os.path.basename(sys.executable)] + [os.path.relpath(os.path.abspath(__file__))]
                       + sys.argv[1:])
    machine = {"cores": len(os.sched_getaffinity(0)), "cpu_count": os.cpu_count(), "cpu_model": cpu_model(),
               "python": platform.python_version(), "kernel": platform.release()}
    print(f"seg_det_bench: {paths['seg_csv']}, {paths['coco_json']} (image_root {paths['image_root']}); "
          f"{args.workers} threads/workers; {args.rounds} rounds of warm-up + {args.epochs} epoch(s) each"
          f"{f'; {args.limit} images an epoch' if args.limit else ''}", flush=True)
    skipped, checked, timed = {}, {}, []
    for p in pipelines:
        res = run_check(p, args)
        if "skip" in res:
            skipped[p] = res["skip"]
            print(f"seg_det_bench: {p} skipped: stoker cannot make its loader yet ({res['skip']})", flush=True)
        else:
            checked[p] = res["checked"]
            print(f"seg_det_bench: checked {res['checked']}", flush=True)
            timed.append(p)
    rows = bench(timed, args) if timed else []

    versions = {}
    for row in rows:
        for runs in row["rounds"].values():
            versions.update(runs[0]["versions"])
    print(f"\ncommand: {command}")
    print(f"machine: {machine['cores']} cores available ({machine['cpu_count']} online), {machine['cpu_model']}; "
          f"Python {machine['python']}, Linux {machine['kernel']}; "
          + ", ".join(f"{k} {v}" for k, v in sorted(versions.items())))
    print(f"batch {', '.join(f'{p} {BATCH[p]}' for p in pipelines)}; shuffle; {args.workers} stoker threads / "
          f"{args.workers} DataLoader workers; best of {args.rounds} round(s), each a warm-up epoch then "
          f"{args.epochs} timed epoch(s); peak PSS: child + workers, highest of the rounds")
    for row in rows:
        per_epoch = row["images_per_epoch"]
        print(f"{row['pipeline']}: {per_epoch['dataloader']} images an epoch on the DataLoader side, "
              f"{per_epoch['stoker']} on stoker's; same-round ratios {', '.join(f'{x:.2f}' for x in row['paired'])}")
    print_table(rows, skipped)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": command, "machine": machine, "versions": versions,
                       "settings": {"workers": args.workers, "epochs": args.epochs, "rounds": args.rounds,
                                    "limit": args.limit, "batch_size": {p: BATCH[p] for p in pipelines}},
                       "checked": checked, "skipped": skipped, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
