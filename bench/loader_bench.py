#!/usr/bin/env python3
"""Loader benchmark: stoker against torch.utils.data.DataLoader + torchvision + PIL.

Both run the same transforms (RandomResizedCrop(224) + RandomHorizontalFlip +
Normalize, float32 NCHW), batch size, and threads = workers = cores, on the same
folder. They run alternately, each in a child process of this one (so one
process tree), for a warm-up epoch and then --epochs timed epochs, --rounds
times; the table shows the best round of each. The plain libjpeg-turbo decode
of every file on all cores (bench/decode_ceiling) runs in the same run as the
ceiling. Peak memory is PSS summed over the child and its descendants
(DataLoader workers included), sampled every 20 ms; minor page faults are per
image over the whole child run (startup and warm-up included: `import torch`
alone is ~50,000), and over the timed epochs only (steady state; the
DataLoader's reaped workers included).

    python3 bench/loader_bench.py [DATA] [--epochs 2] [--rounds 2] [--json out.json]
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


# ---------------------------------------------------------------- child side
def run_child(kind, data, batch_size, workers, epochs):
    import torch
    if kind == "stoker":
        sys.path.insert(0, os.path.join(ROOT, "python"))
        import stoker
        loader = stoker.Loader(data, batch_size=batch_size, shuffle=True, seed=0, threads=workers,
                               transforms=[stoker.RandomResizedCrop(224), stoker.RandomHorizontalFlip(),
                                           stoker.Normalize(MEAN, STD)])
    else:
        import torchvision
        import torchvision.transforms as T
        ds = torchvision.datasets.ImageFolder(data, transform=T.Compose([
            T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(MEAN, STD)]))
        loader = torch.utils.data.DataLoader(ds, batch_size=batch_size, shuffle=True, num_workers=workers)
    import resource
    images = 0
    timed = 0
    t_start = None
    faults_start = 0

    def faults():  # this process and its reaped children (DataLoader workers)
        return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt +
                resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt)
    for epoch in range(epochs + 1):  # epoch 0 is the warm-up
        if hasattr(loader, "set_epoch"):
            loader.set_epoch(epoch)
        if epoch == 1:
            t_start = time.perf_counter()
            faults_start = faults()
        for x, y in loader:
            n = int(y.shape[0])
            images += n
            if epoch >= 1:
                timed += n
        assert x.shape[1:] == (3, 224, 224) and x.dtype == torch.float32
    seconds = time.perf_counter() - t_start
    del loader  # DataLoader workers are reaped, so their faults count
    import gc
    gc.collect()
    steady = (faults() - faults_start) / timed
    print(json.dumps({"kind": kind, "images": images, "timed_images": timed, "seconds": seconds,
                      "images_per_s": timed / seconds, "steady_faults_per_image": steady}), flush=True)


# --------------------------------------------------------------- parent side
def tree_pids(pid):
    pids, todo = [], [pid]
    while todo:
        p = todo.pop()
        pids.append(p)
        try:
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return pids


def pss_kib(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def measure(kind, args):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), args.data, "--child", kind,
                             "--batch-size", str(args.batch_size), "--workers", str(args.workers),
                             "--epochs", str(args.epochs)], stdout=subprocess.PIPE, text=True)
    peak = [0]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], sum(pss_kib(p) for p in tree_pids(proc.pid)))
            done.wait(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    out, _ = proc.communicate()
    done.set()
    sampler.join()
    if proc.returncode != 0:
        sys.exit(f"loader_bench: the {kind} run failed (exit {proc.returncode})")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = json.loads(out.strip().splitlines()[-1])
    r["peak_pss_mib"] = peak[0] / 1024
    r["minor_faults_per_image"] = (after.ru_minflt - before.ru_minflt) / r["images"]
    return r


def decode_ceiling(args):
    exe = os.path.join(args.build, "bench", "decode_ceiling")
    if not os.path.exists(exe):
        sys.exit(f"loader_bench: {exe} is missing; build first (make build)")
    out = subprocess.run([exe, args.data, "--threads", str(args.workers)], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", nargs="?", default=os.path.join(ROOT, "data", "sample"))
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)),
                    help="DataLoader workers = stoker threads = decode threads (default: cores)")
    ap.add_argument("--epochs", type=int, default=2, help="timed epochs per run, after one warm-up epoch")
    ap.add_argument("--rounds", type=int, default=2, help="alternating stoker/DataLoader rounds")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--child", choices=["stoker", "dataloader"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return run_child(args.child, args.data, args.batch_size, args.workers, args.epochs)

    n_files = sum(len(f) for _, _, f in os.walk(args.data))
    print(f"loader_bench: {args.data}: {n_files} files; batch {args.batch_size}; {args.workers} threads/workers; "
          f"{args.rounds} rounds of warm-up + {args.epochs} epochs each", flush=True)
    runs = {"stoker": [], "dataloader": []}
    ceilings = []
    for r in range(args.rounds):
        for kind in ("dataloader", "stoker"):
            res = measure(kind, args)
            runs[kind].append(res)
            print(f"  round {r + 1}: {kind:10s} {res['images_per_s']:8.1f} images/s  "
                  f"peak PSS {res['peak_pss_mib']:7.1f} MiB", flush=True)
        ceilings.append(decode_ceiling(args))
        print(f"  round {r + 1}: {'ceiling':10s} {ceilings[-1]['images_per_s']:8.1f} images/s", flush=True)

    best = {k: max(v, key=lambda x: x["images_per_s"]) for k, v in runs.items()}
    ceil = max(c["images_per_s"] for c in ceilings)
    dl, st = best["dataloader"], best["stoker"]
    rows = [
        (f"torch DataLoader + torchvision + PIL ({args.workers} workers)", dl["images_per_s"],
         dl["peak_pss_mib"], dl["minor_faults_per_image"]),
        (f"stoker ({args.workers} threads)", st["images_per_s"], st["peak_pss_mib"], st["minor_faults_per_image"]),
        (f"libjpeg-turbo full decode only ({args.workers} threads): the ceiling", ceil, None, None),
    ]
    print()
    steady = {"dataloader": dl["steady_faults_per_image"], "stoker": st["steady_faults_per_image"]}
    print("| pipeline | images/s | × DataLoader | × decode ceiling | peak PSS (MiB) | minor faults / image (whole run) "
          "| minor faults / image (timed epochs) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for (name, ips, pss, faults), key in zip(rows, ("dataloader", "stoker", None)):
        print(f"| {name} | {ips:.0f} | {ips / dl['images_per_s']:.2f} | {ips / ceil:.2f} | "
              f"{'' if pss is None else f'{pss:.0f}'} | {'' if faults is None else f'{faults:.1f}'} | "
              f"{'' if key is None else f'{steady[key]:.1f}'} |")
    print()
    print(f"stoker / DataLoader: {st['images_per_s'] / dl['images_per_s']:.2f}× images/s, "
          f"{st['peak_pss_mib'] / dl['peak_pss_mib']:.2f}× peak memory; "
          f"stoker / decode ceiling: {st['images_per_s'] / ceil:.2f}×")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"runs": runs, "ceiling": ceilings, "best": best, "ceiling_best": ceil}, f, indent=1)


if __name__ == "__main__":
    main()
