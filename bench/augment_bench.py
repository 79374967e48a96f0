#!/usr/bin/env python3
"""Augmentation-recipe benchmark: stoker against torch.utils.data.DataLoader + torchvision + PIL.

Two training recipes' input pipelines, the same on both sides, batch size 64,
shuffle, --workers threads (stoker) = workers (DataLoader), on one ImageFolder:

  imagenet  torchvision's reference classification recipe:
            RandomResizedCrop(176) + RandomHorizontalFlip + TrivialAugmentWide(BILINEAR)
            + PILToTensor/ConvertImageDtype(float) + Normalize + RandomErasing(0.1),
            then per batch MixUp(alpha=0.2) or CutMix(alpha=1.0) with equal odds
            (num_classes=1000; labels become float32 [B, 1000]).
            DataLoader: torchvision 0.14 has no v2 MixUp/CutMix, so the
            collate_fn does them (default_collate, then v2's rules), in the
            workers, as users of 0.14 do. stoker: batch_transforms=
            [RandomChoice([MixUp, CutMix])] (applied as batches are handed out).
  simclr    SimCLR-style view: RandomResizedCrop(224) + RandomHorizontalFlip
            + RandomApply([ColorJitter(0.4, 0.4, 0.4, 0.1)], p=0.8)
            + RandomGrayscale(0.2) + GaussianBlur(23, sigma=(0.1, 2.0))
            (SimCLR's kernel: 10% of the side) + ToTensor + Normalize.

As bench/loader_bench.py: each (pipeline, side) runs in a child process of
this one, alternating (every other round in reverse order), a warm-up epoch and
then --epochs timed epochs, --rounds times; the table shows the best round of
each side and their ratio (and the median of the same-round ratios); stoker
runs twice, with the default cache="mmap" (bit-exact) and with
cache="decoded" (decoded images kept in RAM, those over cache_max_side=448
stored resized: not bit-exact for them). Every
batch is consumed the same way on both sides: iterate, and sum the images and
the labels into a Python float (so the data is materialised).

--limit N runs only N images an epoch (rounded down to whole batches): the
DataLoader over a Subset of the first N images (shuffled), stoker over its
whole shuffled epoch but left after N images (so it may have prepared a few
batches more than it hands out; they are not counted).

    python3 bench/augment_bench.py [DATA...] [--epochs 1] [--rounds 2] [--limit N] [--json out.json]
    python3 bench/augment_bench.py --quick        # smoke run: --limit 256, 1 round
"""
import argparse
import json
import math
import os
import platform
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
NUM_CLASSES = 1000
PIPELINES = ("imagenet", "simclr")
PIPELINE_NAMES = {
    "imagenet": "ImageNet recipe (RRC 176, flip, TrivialAugmentWide, RandomErasing 0.1, MixUp/CutMix)",
    "simclr": "SimCLR view (RRC 224, flip, ColorJitter p=0.8, RandomGrayscale 0.2, GaussianBlur 23)",
}
SIDE_NAMES = {"dataloader": "DataLoader + torchvision + PIL", "stoker": "stoker", "stoker-decoded": "stoker cache=\"decoded\""}


# ------------------------------------------------ DataLoader's MixUp / CutMix
class MixUpCutMixCollate:
    """default_collate, then torchvision.transforms.v2's RandomChoice([MixUp(alpha=0.2), CutMix(alpha=1.0)])
    (v2 0.16+ rules; torchvision 0.14 has none): the batch paired with itself rolled by one along the batch
    dimension, lam ~ Beta(alpha, alpha); CutMix's box has its centre uniform over the image and side
    sqrt(1 - lam) of the image's, clipped, and lam adjusted by the clipped box's area; labels one-hot float."""

    def __init__(self, num_classes, mixup_alpha=0.2, cutmix_alpha=1.0):
        self.num_classes = num_classes
        self.mixup_alpha = mixup_alpha
        self.cutmix_alpha = cutmix_alpha

    def _mix_labels(self, labels, lam):
        import torch
        label = torch.nn.functional.one_hot(labels, num_classes=self.num_classes).float()
        return label.roll(1, 0).mul_(1.0 - lam).add_(label.mul(lam))

    def __call__(self, batch):
        import torch
        from torch.utils.data import default_collate
        images, labels = default_collate(batch)
        if int(torch.randint(2, ())) == 0:  # RandomChoice, p = [0.5, 0.5]
            a = self.mixup_alpha
            lam = float(torch.distributions.Beta(torch.tensor([a]), torch.tensor([a])).sample(()))
            images = images.roll(1, 0).mul_(1.0 - lam).add_(images.mul(lam))
            return images, self._mix_labels(labels, lam)
        a = self.cutmix_alpha
        H, W = images.shape[-2:]
        lam = float(torch.distributions.Beta(torch.tensor([a]), torch.tensor([a])).sample(()))
        r_x = int(torch.randint(W, size=(1,)))
        r_y = int(torch.randint(H, size=(1,)))
        r = 0.5 * math.sqrt(1.0 - lam)
        r_w_half = int(r * W)
        r_h_half = int(r * H)
        x1, y1 = max(r_x - r_w_half, 0), max(r_y - r_h_half, 0)
        x2, y2 = min(r_x + r_w_half, W), min(r_y + r_h_half, H)
        lam_adjusted = float(1.0 - (x2 - x1) * (y2 - y1) / (W * H))
        output = images.clone()
        rolled = images.roll(1, 0)
        output[..., y1:y2, x1:x2] = rolled[..., y1:y2, x1:x2]
        return output, self._mix_labels(labels, lam_adjusted)


# ---------------------------------------------------------------- child side
def make_dataloader(pipeline, data, batch_size, workers, limit):
    import torch
    import torchvision
    import torchvision.transforms as T
    if pipeline == "imagenet":
        tf = T.Compose([T.RandomResizedCrop(176), T.RandomHorizontalFlip(),
                        T.TrivialAugmentWide(interpolation=T.InterpolationMode.BILINEAR),
                        T.PILToTensor(), T.ConvertImageDtype(torch.float), T.Normalize(MEAN, STD),
                        T.RandomErasing(0.1)])
        collate = MixUpCutMixCollate(NUM_CLASSES, mixup_alpha=0.2, cutmix_alpha=1.0)
    else:
        tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(),
                        T.RandomApply([T.ColorJitter(0.4, 0.4, 0.4, 0.1)], p=0.8), T.RandomGrayscale(0.2),
                        T.GaussianBlur(kernel_size=23, sigma=(0.1, 2.0)), T.ToTensor(), T.Normalize(MEAN, STD)])
        collate = None
    ds = torchvision.datasets.ImageFolder(data, transform=tf)
    size = len(ds)
    if limit and limit < size:
        ds = torch.utils.data.Subset(ds, range(limit))
    loader = torch.utils.data.DataLoader(ds, batch_size=batch_size, shuffle=True, num_workers=workers,
                                         collate_fn=collate)
    return loader, size


def make_stoker(pipeline, data, batch_size, workers, cache="mmap"):
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import stoker
    if pipeline == "imagenet":
        transforms = [stoker.RandomResizedCrop(176), stoker.RandomHorizontalFlip(),
                      stoker.TrivialAugmentWide(interpolation=stoker.InterpolationMode.BILINEAR),
                      stoker.Normalize(MEAN, STD), stoker.RandomErasing(0.1)]
        batch_transforms = [stoker.RandomChoice([stoker.MixUp(alpha=0.2, num_classes=NUM_CLASSES),
                                                 stoker.CutMix(alpha=1.0, num_classes=NUM_CLASSES)])]
    else:
        transforms = [stoker.RandomResizedCrop(224), stoker.RandomHorizontalFlip(),
                      stoker.RandomApply([stoker.ColorJitter(0.4, 0.4, 0.4, 0.1)], p=0.8),
                      stoker.RandomGrayscale(0.2), stoker.GaussianBlur(23, sigma=(0.1, 2.0)),
                      stoker.Normalize(MEAN, STD)]
        batch_transforms = []
    loader = stoker.Loader(data, batch_size=batch_size, shuffle=True, seed=0, threads=workers,
                           transforms=transforms, batch_transforms=batch_transforms, progress=False, cache=cache)
    return loader, loader.dataset_size


def timed_epochs(loader, epochs, stop, consume, check):
    """A warm-up epoch then `epochs` timed ones. consume(batch) -> (checksum, images) touches each batch the
    same way on both sides; check(batch) looks at an epoch's last batch; `stop`: leave an epoch after this
    many images (None: the whole epoch). -> the child's measurements (without kind, pipeline, versions)."""
    checksum, timed = 0.0, 0
    t_start = first_epoch_s = None
    t0 = time.perf_counter()
    for epoch in range(1 + epochs):  # epoch 0: warm-up
        if hasattr(loader, "set_epoch"):
            loader.set_epoch(epoch)
        if epoch == 1:
            t_start = time.perf_counter()
        n_epoch = 0
        for batch in loader:
            c, n = consume(batch)
            checksum += c
            n_epoch += n
            if stop is not None and n_epoch >= stop:
                break
        check(batch)
        if epoch == 0:
            first_epoch_s = time.perf_counter() - t0
            first_images = n_epoch
        else:
            timed += n_epoch
    seconds = time.perf_counter() - t_start
    return {"timed_images": timed, "images_per_epoch": first_images, "seconds": seconds,
            "images_per_s": timed / seconds, "first_epoch_images_per_s": first_images / first_epoch_s,
            "checksum": checksum}


def print_child_result(kind, pipeline, size, measured, stoker_module=None):
    """The child's one JSON line: what it measured, with the versions of what ran (stoker's when given)."""
    import torch
    versions = {"torch": torch.__version__}
    if stoker_module is not None:
        versions["stoker"] = stoker_module.__version__
    else:
        import PIL
        import torchvision
        versions.update(torchvision=torchvision.__version__, PIL=PIL.__version__)
    print(json.dumps({"kind": kind, "pipeline": pipeline, "dataset_size": size, **measured, "versions": versions}),
          flush=True)


def run_child(kind, pipeline, data, batch_size, workers, epochs, limit):
    import torch
    if kind == "stoker":
        loader, size = make_stoker(pipeline, data, batch_size, workers)
    elif kind == "stoker-decoded":
        loader, size = make_stoker(pipeline, data, batch_size, workers, cache="decoded")
    else:
        loader, size = make_dataloader(pipeline, data, batch_size, workers, limit)
    # stoker: leave the epoch after this many images (the DataLoader runs over a Subset of them)
    stop = limit if limit and limit < size and kind.startswith("stoker") else None
    side = 176 if pipeline == "imagenet" else 224

    def consume(batch):  # the same on both sides: touch every image and label
        x, y = batch
        return float(x.sum()) + float(y.sum()), int(x.shape[0])

    def check(batch):
        x, y = batch
        assert x.shape[1:] == (3, side, side) and x.dtype == torch.float32, (x.shape, x.dtype)
        if pipeline == "imagenet":
            assert y.shape[1:] == (NUM_CLASSES,) and y.dtype == torch.float32, (y.shape, y.dtype)
        else:
            assert y.dim() == 1 and y.dtype == torch.int64, (y.shape, y.dtype)

    measured = timed_epochs(loader, epochs, stop, consume, check)
    stoker_module = None
    if kind.startswith("stoker"):
        import stoker as stoker_module
    print_child_result(kind, pipeline, size, measured, stoker_module)


# --------------------------------------------------------------- parent side
def measure(kind, pipeline, data, args):
    cmd = [sys.executable, os.path.abspath(__file__), data, "--child", kind, "--pipeline", pipeline,
           "--batch-size", str(args.batch_size), "--workers", str(args.workers), "--epochs", str(args.epochs),
           "--limit", str(args.limit)]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        sys.exit(f"augment_bench: the {kind} run of the {pipeline} pipeline failed (exit {proc.returncode})")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def add_run_args(ap, pipelines, quick_limit):
    """The options every same-run benchmark of stoker against the DataLoader shares."""
    ap.add_argument("--workers", type=int, default=2, help="DataLoader workers = stoker threads (default 2)")
    ap.add_argument("--epochs", type=int, default=1, help="timed epochs per run, after one warm-up epoch")
    ap.add_argument("--rounds", type=int, default=2, help="alternating rounds of every configuration")
    ap.add_argument("--limit", type=int, default=0,
                    help="images per epoch (rounded down to whole batches; 0: the whole set)")
    ap.add_argument("--pipelines", default=",".join(pipelines), help="comma-separated: " + ",".join(pipelines))
    ap.add_argument("--quick", action="store_true", help=f"smoke run: --limit {quick_limit}, 1 round")
    ap.add_argument("--json", help="also write the results here")


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def bench_one(data, args):
    configs = [(p, k) for p in args.pipelines for k in ("dataloader", "stoker", "stoker-decoded")]
    runs = {c: [] for c in configs}
    for r in range(args.rounds):
        for c in (configs if r % 2 == 0 else configs[::-1]):
            res = measure(c[1], c[0], data, args)
            runs[c].append(res)
            print(f"  round {r + 1}: {c[0]:9s} {SIDE_NAMES[c[1]]:32s} {res['images_per_s']:8.1f} images/s "
                  f"({res['timed_images']} images in {res['seconds']:.1f} s; warm-up epoch "
                  f"{res['first_epoch_images_per_s']:.1f} images/s)", flush=True)
    rows = []
    for p in args.pipelines:
        dl = [x["images_per_s"] for x in runs[(p, "dataloader")]]
        st = [x["images_per_s"] for x in runs[(p, "stoker")]]
        sd = [x["images_per_s"] for x in runs[(p, "stoker-decoded")]]
        rows.append({"pipeline": p, "dataloader_per_s": max(dl), "stoker_per_s": max(st),
                     "x_dataloader": max(st) / max(dl), "paired": [a / b for a, b in zip(st, dl)],
                     "paired_median": median([a / b for a, b in zip(st, dl)]),
                     "decoded_per_s": max(sd), "decoded_x_dataloader": max(sd) / max(dl),
                     "decoded_paired_median": median([a / b for a, b in zip(sd, dl)]),
                     "images_per_epoch": {k: runs[(p, k)][0]["images_per_epoch"] for k in ("dataloader", "stoker")},
                     "rounds": {k: runs[(p, k)] for k in ("dataloader", "stoker", "stoker-decoded")}})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", nargs="*", default=[os.path.join(ROOT, "data", "sample")])
    ap.add_argument("--batch-size", type=int, default=64)
    add_run_args(ap, PIPELINES, quick_limit=256)
    ap.add_argument("--child", choices=["stoker", "stoker-decoded", "dataloader"], help=argparse.SUPPRESS)
    ap.add_argument("--pipeline", choices=PIPELINES, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return run_child(args.child, args.pipeline, args.data[0], args.batch_size, args.workers, args.epochs,
                         args.limit)
    if args.quick:
        args.limit, args.rounds = args.limit or 256, 1
    if args.limit:
        args.limit = max(args.batch_size, args.limit // args.batch_size * args.batch_size)
    args.pipelines = [p for p in args.pipelines.split(",") if p]
    for p in args.pipelines:
        if p not in PIPELINES:
            sys.exit(f"augment_bench: unknown pipeline {p!r} (choose from {', '.join(PIPELINES)})")

    command = " ".join([os.path.basename(sys.executable)] + [os.path.relpath(os.path.abspath(__file__))]
                       + sys.argv[1:])
    machine = {"cores": len(os.sched_getaffinity(0)), "cpu_count": os.cpu_count(), "cpu_model": cpu_model(),
               "python": platform.python_version(), "kernel": platform.release()}
    results = []
    for data in args.data:
        n_files = sum(len(f) for _, _, f in os.walk(data))
        print(f"augment_bench: {data}: {n_files} files; batch {args.batch_size}; {args.workers} threads/workers; "
              f"{args.rounds} rounds of warm-up + {args.epochs} epoch(s) each"
              f"{f'; {args.limit} images an epoch' if args.limit else ''}", flush=True)
        results.append((data, bench_one(data, args)))

    versions = {}
    for _, rows in results:
        for row in rows:
            for runs in row["rounds"].values():
                versions.update(runs[0]["versions"])
    print(f"\ncommand: {command}")
    print(f"machine: {machine['cores']} cores available ({machine['cpu_count']} online), {machine['cpu_model']}; "
          f"Python {machine['python']}, Linux {machine['kernel']}; "
          + ", ".join(f"{k} {v}" for k, v in sorted(versions.items())))
    print(f"batch {args.batch_size}, shuffle, {args.workers} stoker threads / {args.workers} DataLoader workers; "
          f"best of {args.rounds} round(s), each a warm-up epoch then {args.epochs} timed epoch(s)")
    for data, rows in results:
        per_epoch = rows[0]["images_per_epoch"]
        print(f"\n{data} ({per_epoch['dataloader']} images an epoch on the DataLoader side, "
              f"{per_epoch['stoker']} on stoker's):\n")
        print("| pipeline | DataLoader img/s | stoker img/s | stoker / DataLoader | same-round ratios (median) "
              "| stoker cache=\"decoded\" img/s | its / DataLoader (same-round median) |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for row in rows:
            print(f"| {PIPELINE_NAMES[row['pipeline']]} | {row['dataloader_per_s']:.1f} | {row['stoker_per_s']:.1f} | "
                  f"{row['x_dataloader']:.2f}× | {', '.join(f'{x:.2f}' for x in row['paired'])} "
                  f"({row['paired_median']:.2f}×) | {row['decoded_per_s']:.1f} | {row['decoded_x_dataloader']:.2f}× "
                  f"({row['decoded_paired_median']:.2f}×) |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": command, "machine": machine, "versions": versions,
                       "settings": {"batch_size": args.batch_size, "workers": args.workers, "epochs": args.epochs,
                                    "rounds": args.rounds, "limit": args.limit},
                       "results": [{"data": d, "rows": rows} for d, rows in results]}, f, indent=1)


if __name__ == "__main__":
    main()
