#!/usr/bin/env python3
"""Start-up costs by cache mode, each run in a fresh process (as a training job
starts): time to first batch (stats(): loader created -> first batch in hand)
and the first epoch's rate (start-up included), for cache="mmap", "ram" with
and without its JPEG rewrite, and "decoded". Configurations alternate within
each round (and reverse order every other round); the ratios to mmap are
same-round, so the machine's drift between rounds cancels.

    python3 bench/first_epoch.py [DATA] [--rounds 6] [--batch-size 64] [--threads 2]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = [("mmap", True), ("ram", False), ("ram", True), ("decoded", True)]


def child(data, cache, rewrite, batch_size, threads):
    import time
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import stoker
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    t = time.perf_counter()
    loader = stoker.Loader(data, batch_size=batch_size, shuffle=True, seed=0, threads=threads, cache=cache,
                           cache_rewrite=rewrite, output="numpy",
                           transforms=[stoker.RandomResizedCrop(224), stoker.RandomHorizontalFlip(),
                                       stoker.Normalize(mean, std)])
    n = 0
    for _, y in loader:
        n += len(y)
    seconds = time.perf_counter() - t
    st = loader.stats()
    print(json.dumps({"rate": n / seconds, "ttfb_s": st["time_to_first_batch_s"],
                      "rewritten": st["cache_rewritten"]}))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", nargs="?", default=os.path.join(ROOT, "data", "sample"))
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.data, args.child[0], args.child[1] == "1", args.batch_size, args.threads)
    res = {c: [] for c in CONFIGS}
    for r in range(args.rounds):
        for c in (CONFIGS if r % 2 == 0 else CONFIGS[::-1]):
            out = subprocess.run([sys.executable, os.path.abspath(__file__), args.data, "--child", c[0],
                                  "1" if c[1] else "0", "--batch-size", str(args.batch_size), "--threads",
                                  str(args.threads)], check=True, capture_output=True, text=True).stdout
            res[c].append(json.loads(out.strip().splitlines()[-1]))
    mmap = [x["rate"] for x in res[("mmap", True)]]
    print(f"{args.data}: {args.rounds} rounds, batch {args.batch_size}, {args.threads} threads, fresh process per run")
    print("| cache | time to first batch (median, s) | first epoch images/s (median) | × mmap's first epoch "
          "(median of same-round ratios) |")
    print("|---|---:|---:|---:|")
    for c, v in res.items():
        rates = [x["rate"] for x in v]
        ratios = [a / b for a, b in zip(rates, mmap)]
        name = c[0] + ("" if c[0] != "ram" else " (rewrite on)" if c[1] else " (rewrite off)")
        print(f"| {name} | {statistics.median(x['ttfb_s'] for x in v):.3f} | {statistics.median(rates):.0f} | "
              f"{statistics.median(ratios):.2f} ({', '.join(f'{x:.2f}' for x in ratios)}) |")


if __name__ == "__main__":
    main()
