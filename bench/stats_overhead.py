#!/usr/bin/env python3
"""What stoker's in-process stats cost: loader throughput with per-stage timing
on (the default), off (stage_timing=False: counts only), and with trace spans
recorded (trace=True), in alternating rounds in one process on the same data
and settings (RandomResizedCrop(224) + flip + Normalize, float32, batch 64,
threads = cores). Each round: one warm-up epoch, then --epochs timed epochs per
setting; the table shows the median over rounds and the ratio to timing off.

    python3 bench/stats_overhead.py [DATA] [--rounds 5] [--epochs 1]
"""
import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
import stoker  # noqa: E402

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def rate(data, epochs, **kw):
    loader = stoker.Loader(data, batch_size=64, shuffle=True, seed=0,
                           transforms=[stoker.RandomResizedCrop(224), stoker.RandomHorizontalFlip(),
                                       stoker.Normalize(MEAN, STD)], **kw)
    for _ in loader:  # warm-up
        pass
    n = 0
    t = time.perf_counter()
    for _ in range(epochs):
        for x, y in loader:
            n += int(y.shape[0])
    return n / (time.perf_counter() - t)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", nargs="?", default=os.path.join(ROOT, "data", "sample"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--epochs", type=int, default=1)
    args = ap.parse_args()
    settings = {"stage timing off (stage_timing=False)": dict(stage_timing=False),
                "stage timing on (default)": dict(),
                "stage timing + trace spans (trace=True)": dict(trace=True)}
    rates = {k: [] for k in settings}
    for r in range(args.rounds):
        for name, kw in settings.items():
            rates[name].append(rate(args.data, args.epochs, **kw))
        print(f"  round {r + 1}: " + ", ".join(f"{v[-1]:.0f}" for v in rates.values()), flush=True)
    base = statistics.median(rates["stage timing off (stage_timing=False)"])
    print("\n| stats collection | images/s (median of rounds) | × timing off |")
    print("|---|---:|---:|")
    for name, v in rates.items():
        m = statistics.median(v)
        print(f"| {name} | {m:.0f} | {m / base:.3f} |")
    # Per-round ratios (same round, adjacent runs) are less exposed to drift.
    paired = [on / off for on, off in zip(rates["stage timing on (default)"],
                                          rates["stage timing off (stage_timing=False)"])]
    print(f"\nstage timing on / off, median of per-round ratios: {statistics.median(paired):.3f} "
          f"(overhead {100 * (1 - statistics.median(paired)):+.1f}%)")


if __name__ == "__main__":
    main()
