#!/usr/bin/env python3
"""Soak test: many epochs over the sample set, per source kind; RSS, open file
descriptors and threads are sampled after every epoch and must be flat after
the first (RSS within --rss-slack-mib of its epoch-1 value). Prints the
figures; exits 1 if anything grew.

    python3 bench/soak.py [DATA] [--epochs 20]
"""
import argparse
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
import stoker  # noqa: E402


def rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def fds():
    return len(os.listdir("/proc/self/fd"))


def threads():
    return len(os.listdir("/proc/self/task"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", nargs="?", default=os.path.join(ROOT, "data", "sample"))
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--rss-slack-mib", type=float, default=8.0)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="stoker-soak-")
    subprocess.run([os.path.join(args.build, "tools", "stoker"), "pack", args.data, os.path.join(tmp, "s-%02d.tar"),
                    "--shard-count", "4", "--max-side", "256"], check=True, capture_output=True)
    configs = [
        ("folder, train transforms, keep every 10th batch", args.data,
         [stoker.RandomResizedCrop(224), stoker.RandomHorizontalFlip(), stoker.Normalize([0.5] * 3, [0.25] * 3)]),
        ("shards --max-side 256, val transforms, uint8", os.path.join(tmp, "s-{00..03}.tar"),
         [stoker.Resize(146), stoker.CenterCrop(128)]),
    ]
    failed = False
    for name, source, tf in configs:
        loader = stoker.Loader(source, batch_size=64, shuffle=True, transforms=tf,
                               dtype="uint8" if len(tf) == 2 else "float32")
        rows = []
        kept = []
        for epoch in range(args.epochs):
            loader.set_epoch(epoch)
            for i, (x, y) in enumerate(loader):
                if i % 10 == 0:
                    kept.append(x)  # a consumer holding some batches for a while
                if len(kept) > 4:
                    kept.pop(0)
            rows.append((epoch, rss_mib(), fds(), threads(), loader.stats()["batch_buffers"]))
        print(f"soak: {name}: {args.epochs} epochs of {len(loader)} batches")
        print("| epoch | RSS MiB | fds | threads | batch buffers |")
        print("|---:|---:|---:|---:|---:|")
        for e, r, f, t, b in rows:
            if e < 3 or e % 5 == 4 or e == args.epochs - 1:
                print(f"| {e} | {r:.1f} | {f} | {t} | {b} |")
        base = rows[1]
        grew = [r for r in rows[1:] if r[1] > base[1] + args.rss_slack_mib or r[2] != base[2] or r[3] != base[3]
                or r[4] != base[4]]
        if grew:
            failed = True
            print(f"soak: NOT FLAT after epoch 1: {grew[0]}")
        else:
            print(f"soak: flat after epoch 1 (RSS {base[1]:.1f} -> {rows[-1][1]:.1f} MiB, within "
                  f"{args.rss_slack_mib} MiB; fds {base[2]}; threads {base[3]}; batch buffers {base[4]})")
        del loader, kept
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
