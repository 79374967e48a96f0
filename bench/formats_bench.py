#!/usr/bin/env python3
"""Formats benchmark (issue 40): stoker against torch.utils.data.DataLoader + torchvision's ImageFolder + PIL on
the sample set's WebP and 16-bit tiled TIFF versions (scripts/make_sample_dataset.py --format webp / tiff16).

Both sides run the same pipeline on the same folder: RandomResizedCrop(224) + RandomHorizontalFlip + ToTensor +
Normalize (stoker: RandomResizedCrop(224), RandomHorizontalFlip(), Normalize(mean, std); float32 NCHW), batch
--batch-size, shuffle, --workers DataLoader worker processes (persistent_workers=True) = stoker threads.
stoker runs with cache="mmap" (each epoch decodes every image again, as the DataLoader does; the TIFF's region
reads touch only the tiles each crop covers). Each (data set, side) runs in a child process of this one, a
warm-up epoch then --epochs timed epochs; every round runs each configuration once, every other round in reverse
order. The table gives the median images/s over rounds, each round's rates, and the median of the same-round
ratios stoker / DataLoader (what cancels a shared machine's drift) against the issue's target (>= 4x for each).

Before the rounds, the first --check files of each set are decoded by stoker and by PIL's
Image.open(path).convert("RGB"), and must be equal (else the benchmark stops). After the rounds, one more stoker
run per set (not timed in the table) reports where its threads' time went (stats(): read, decode, transforms per
image). Other processes' CPU during the rounds is reported: the runs compete with it.

    python3 bench/formats_bench.py data/sample-webp data/sample-tiff16 --rounds 3     # make bench-formats
    python3 bench/formats_bench.py DATA --quick                                         # 1 round, 1 epoch
"""
import argparse
import json
import os
import platform
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from augment_bench import cpu_model  # noqa: E402
from drop_in_bench import IMG_EXTENSIONS, cpu_busy_s  # noqa: E402
from loader_bench import MEAN, STD, median, run_sampling_pss  # noqa: E402

TARGET = 4.0


# ---------------------------------------------------------------- child side
def child(args):
    import torch
    if args.child == "stoker":
        sys.path.insert(0, os.path.join(ROOT, "python"))
        import stoker
        loader = stoker.Loader(args.data[0], batch_size=args.batch_size, shuffle=True, seed=0, threads=args.workers,
                               cache="mmap", progress=False,
                               transforms=[stoker.RandomResizedCrop(224), stoker.RandomHorizontalFlip(),
                                           stoker.Normalize(MEAN, STD)])
    else:
        import torchvision
        import torchvision.transforms as T
        ds = torchvision.datasets.ImageFolder(args.data[0], transform=T.Compose([
            T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(MEAN, STD)]))
        loader = torch.utils.data.DataLoader(ds, batch_size=args.batch_size, shuffle=True, num_workers=args.workers,
                                             persistent_workers=True)
    timed = 0
    t_start = None
    for epoch in range(1 + args.epochs):  # epoch 0: the warm-up (workers start, files into the page cache)
        if hasattr(loader, "set_epoch"):
            loader.set_epoch(epoch)
        if epoch == 1:
            t_start = time.perf_counter()
        for x, y in loader:
            assert x.shape[1:] == (3, 224, 224) and x.dtype == torch.float32
            if epoch >= 1:
                timed += int(y.shape[0])
    seconds = time.perf_counter() - t_start
    stats = loader.stats() if args.child == "stoker" else {}
    keys = ("read_s", "decode_s", "transform_s", "wall_s", "consumer_wait_s", "corrupt", "samples")
    print(json.dumps({"images": timed, "seconds": seconds, "images_per_s": timed / seconds,
                      "stats": {k: stats.get(k) for k in keys}}), flush=True)


# --------------------------------------------------------------- parent side
def count_images(data):
    return sum(1 for _, _, files in os.walk(data, followlinks=True) for f in files if f.lower().endswith(IMG_EXTENSIONS))


def check_equal(data, n):
    """stoker's decode of the first n files equals PIL's convert("RGB") (the DataLoader's loader)."""
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import numpy as np
    import stoker
    from PIL import Image
    files = sorted(os.path.join(r, f) for r, _, fs in os.walk(data) for f in fs if f.lower().endswith(IMG_EXTENSIONS))
    for path in files[:n]:
        ours = stoker.decode_image(path)
        with Image.open(path) as im:
            ref = np.asarray(im.convert("RGB"))
        if ours.shape != ref.shape or not np.array_equal(ours, ref):
            sys.exit(f"formats_bench: {path}: stoker's pixels differ from PIL's")
    return files[0] if files else None


def describe(path):
    from PIL import Image
    with Image.open(path) as im:
        comp = im.info.get("compression", "")
        tiled = "tiled " if getattr(im, "tile", None) and len(im.tile) and im.format == "TIFF" and \
            im.tag_v2.get(322) else ""
        bits = im.tag_v2.get(258) if im.format == "TIFF" else None
        depth = f"{bits[0]}-bit " if bits else ""
        return f"{im.format} {depth}{tiled}{im.mode} {im.width}x{im.height}{f' ({comp})' if comp else ''}"


def run(side, data, args):
    code, out, peak = run_sampling_pss([sys.executable, os.path.abspath(__file__), data, "--child", side,
                                        "--batch-size", str(args.batch_size), "--workers", str(args.workers),
                                        "--epochs", str(args.epochs)])
    if code != 0:
        sys.exit(f"formats_bench: the {side} run on {data} failed (exit {code})")
    r = json.loads(out.strip().splitlines()[-1])
    want = count_images(data) * args.epochs
    if r["images"] != want:
        sys.exit(f"formats_bench: the {side} run on {data} timed {r['images']} images, expected {want}")
    r["peak_pss_mib"] = peak
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", nargs="*", default=[os.path.join(ROOT, "data", "sample-webp"),
                                                os.path.join(ROOT, "data", "sample-tiff16")])
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)),
                    help="DataLoader workers = stoker threads (default: cores)")
    ap.add_argument("--epochs", type=int, default=2, help="timed epochs per run, after one warm-up epoch")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds of every configuration")
    ap.add_argument("--check", type=int, default=8, help="files per set whose decode is compared with PIL's first")
    ap.add_argument("--quick", action="store_true", help="smoke run: 1 round, 1 timed epoch")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--child", choices=["stoker", "dataloader"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args)
    if args.quick:
        args.rounds, args.epochs = 1, 1
    sets = [os.path.abspath(d) for d in args.data]
    for d in sets:
        if not os.path.isdir(d) or count_images(d) == 0:
            sys.exit(f"formats_bench: {d} has no images (make them: make bench-formats, or "
                     f"scripts/make_sample_dataset.py --format ...)")
    command = " ".join([os.path.basename(sys.executable), os.path.relpath(os.path.abspath(__file__))] + sys.argv[1:])
    about = {}
    for d in sets:
        first = check_equal(d, args.check)
        about[d] = f"{count_images(d)} files, e.g. {describe(first)}"
        print(f"formats_bench: {d}: {about[d]}; stoker's decode of the first {args.check} equals PIL's", flush=True)
    configs = [(d, side) for d in sets for side in ("dataloader", "stoker")]
    runs = {c: [] for c in configs}
    busy0, ours0, t0 = *cpu_busy_s(), time.time()
    for r in range(args.rounds):
        for c in (configs if r % 2 == 0 else configs[::-1]):
            res = run(c[1], c[0], args)
            runs[c].append(res)
            print(f"  round {r + 1}: {os.path.basename(c[0]):16s} {c[1]:10s} {res['images_per_s']:8.1f} images/s "
                  f"({res['images']} images in {res['seconds']:.2f} s, peak PSS {res['peak_pss_mib']:.0f} MiB)",
                  flush=True)
    busy1, ours1 = cpu_busy_s()
    others = max(0.0, (busy1 - busy0) - (ours1 - ours0)) / (time.time() - t0)
    diag = {d: run("stoker", d, args)["stats"] for d in sets}

    import torch
    import torchvision
    from PIL import __version__ as pil_version
    print(f"\ncommand: {command}")
    print(f"machine: {cpu_model()}, {len(os.sched_getaffinity(0))} cores available ({os.cpu_count()} online); "
          f"Python {platform.python_version()}, torch {torch.__version__}, torchvision {torchvision.__version__}, "
          f"Pillow {pil_version}, Linux {platform.release()}; other processes used {others:.2f} cores on average "
          f"during the rounds")
    print(f"each run: a fresh process; RandomResizedCrop(224) + RandomHorizontalFlip + Normalize, float32 NCHW, batch "
          f"{args.batch_size}, shuffle, {args.workers} DataLoader workers (persistent) / stoker threads "
          f"(cache=\"mmap\"); a warm-up epoch, then {args.epochs} timed epoch(s); {args.rounds} round(s), alternating "
          f"order\n")
    print("| data set | DataLoader + PIL images/s (median) | stoker images/s (median) | stoker / DataLoader, same-round "
          "(median) | per round | target |")
    print("|---|---:|---:|---:|---|---:|")
    results = []
    for d in sets:
        a = [x["images_per_s"] for x in runs[(d, "dataloader")]]
        b = [x["images_per_s"] for x in runs[(d, "stoker")]]
        ratios = [y / x for x, y in zip(a, b)]
        print(f"| {os.path.basename(d)}: {about[d]} | {median(a):.1f} | {median(b):.1f} | {median(ratios):.2f}x | "
              f"{', '.join(f'{x:.2f}' for x in ratios)} | >= {TARGET:.0f}x |")
        results.append({"data": d, "about": about[d], "dataloader": a, "stoker": b, "ratios": ratios,
                        "median_ratio": median(ratios), "stoker_stats": diag[d]})
    print()
    for d in sets:
        s = diag[d]
        n = count_images(d) * (1 + args.epochs)

        def ms(k):
            v = s.get(k)
            return f"{1000 * v / n:.2f}" if isinstance(v, (int, float)) else "?"
        print(f"stoker on {os.path.basename(d)} (one more run, not in the table; per image, thread-seconds over "
              f"{args.workers} threads, warm-up included): read {ms('read_s')} ms, decode {ms('decode_s')} ms, "
              f"transforms {ms('transform_s')} ms; corrupt {s.get('corrupt')}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": command, "others_cores": others, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
