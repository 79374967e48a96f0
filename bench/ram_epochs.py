#!/usr/bin/env python3
"""cache="ram" epoch by epoch, against cache="mmap" and, with --baseline, against
another built checkout: each run a fresh process that times every epoch
(RandomResizedCrop(224) + flip + Normalize, float32 NCHW), configurations
alternating within each round and reversed every other round, so the
machine's drift between rounds cancels in the same-round ratios printed per
epoch. What it shows: the first epoch (the cache filling, the rewrite
starting), the epoch that finishes the rewrite (stats()["cache_rewrite"]
after each epoch), and the epochs after it, where loader_bench.py's
"after its rewrite" row may time different epochs for two builds.

    python3 bench/ram_epochs.py DATA [--epochs 6] [--rounds 3] [--baseline DIR] [--threads 2]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def child(tree, data, cache, epochs, threads):
    sys.path.insert(0, os.path.join(tree, "python"))
    import stoker
    loader = stoker.Loader(data, batch_size=64, shuffle=True, seed=0, threads=threads, cache=cache, output="numpy",
                           transforms=[stoker.RandomResizedCrop(224), stoker.RandomHorizontalFlip(),
                                       stoker.Normalize(MEAN, STD)])
    rates, states = [], []
    for e in range(epochs):
        loader.set_epoch(e)
        t0, n = time.perf_counter(), 0
        for _, y in loader:
            n += len(y)
        rates.append(n / (time.perf_counter() - t0))
        states.append(loader.stats().get("cache_rewrite"))
    print(json.dumps({"rates": rates, "states": states}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data")
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--baseline", help="another checkout, built (its python/stoker/_stoker*.so)")
    ap.add_argument("--child", nargs=2, metavar=("TREE", "CACHE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.child[0], args.data, args.child[1], args.epochs, args.threads)
    trees = {"this": ROOT}
    if args.baseline:
        trees["baseline"] = os.path.abspath(args.baseline)
    configs = [(t, c) for c in ("mmap", "ram") for t in trees]
    res = {c: [] for c in configs}
    for r in range(args.rounds):
        for c in (configs if r % 2 == 0 else configs[::-1]):
            out = subprocess.run([sys.executable, os.path.abspath(__file__), args.data, "--epochs", str(args.epochs),
                                  "--threads", str(args.threads), "--child", trees[c[0]], c[1]],
                                 capture_output=True, text=True)
            if out.returncode:
                sys.exit(f"ram_epochs: the {c[0]} {c[1]} run failed:\n{out.stderr}")
            d = json.loads(out.stdout.strip().splitlines()[-1])
            res[c].append(d["rates"])
            print(f"round {r + 1}: {c[0]:8s} {c[1]:4s} images/s by epoch: " +
                  " ".join(f"{x:6.0f}" for x in d["rates"]) + "   cache_rewrite: " + ",".join(str(s) for s in d["states"]),
                  flush=True)

    def ratio(a, b, e):  # median of same-round ratios at epoch e
        return statistics.median(x[e] / y[e] for x, y in zip(res[a], res[b]))
    print("\nmedians of same-round ratios, by epoch:")
    head = "| epoch | this: ram / mmap |" + (" baseline: ram / mmap | ram: this / baseline | mmap: this / baseline |"
                                             if args.baseline else "")
    print(head)
    print("|" + "|".join(["---:"] * (head.count("|") - 1)) + "|")
    for e in range(args.epochs):
        row = f"| {e + 1} | {ratio(('this', 'ram'), ('this', 'mmap'), e):.3f} |"
        if args.baseline:
            row += (f" {ratio(('baseline', 'ram'), ('baseline', 'mmap'), e):.3f} |"
                    f" {ratio(('this', 'ram'), ('baseline', 'ram'), e):.3f} |"
                    f" {ratio(('this', 'mmap'), ('baseline', 'mmap'), e):.3f} |")
        print(row)


if __name__ == "__main__":
    main()
