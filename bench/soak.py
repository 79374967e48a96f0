#!/usr/bin/env python3
"""Soak test: many epochs per source kind, a consumer that keeps some batches
for a while. After every epoch it samples RSS, open file descriptors,
threads and the loader's batch-buffer counts, and checks what is bounded
rather than flat:

  - batch buffers <= ring_depth_max + H, where H is the most batches this
    consumer can hold at once (kept batches + the loop's current batch + the
    one being handed out); the loader's own held peak <= H;
  - RSS <= base + buffers x buffer bytes + slack, where base is RSS less the
    buffers after the first epoch: memory beyond the batch pool does not grow
    (checked at every epoch, and over the second half of the run alone);
  - file descriptors and threads constant after the first epoch.

It prints each run's table and the epoch at which each figure last grew;
exits 1 if a check fails.

    python3 bench/soak.py [DATA] [--epochs-shards 120] [--epochs-folder 30]
"""
import argparse
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
import stoker  # noqa: E402

KEEP_EVERY, KEEP_MAX = 10, 4  # the consumer keeps every 10th batch, at most 4 at once
HELD_BOUND = KEEP_MAX + 2     # + the loop's current batch (alive during next()) + the one handed out
HUGE = 2 << 20                # batch buffers of 2 MiB or more are 2 MiB-aligned (transparent huge pages)


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


def last_growth(values, tol=0.0):
    """The epoch at which a figure last rose above its running maximum (by more than tol), or 0."""
    best, at = values[0], 0
    for e, v in enumerate(values):
        if v > best + tol:
            best, at = v, e
    return at


def soak(name, source, transforms, dtype, epochs, slack_mib):
    loader = stoker.Loader(source, batch_size=64, shuffle=True, transforms=transforms, dtype=dtype)
    rows, kept = [], []
    for epoch in range(epochs):
        loader.set_epoch(epoch)
        for i, (x, y) in enumerate(loader):
            if i % KEEP_EVERY == 0:
                kept.append(x)  # a consumer holding some batches for a while
            if len(kept) > KEEP_MAX:
                kept.pop(0)
        s = loader.stats()
        rows.append(dict(epoch=epoch, rss=rss_mib(), fds=fds(), threads=threads(), buffers=s["batch_buffers"],
                         held_peak=s["batch_buffers_held_peak"], ring_max=s["ring_depth_max"],
                         buffer_bytes=s["batch_buffer_bytes"] // max(1, s["batch_buffers"])))
    del kept
    del loader
    bb = rows[-1]["buffer_bytes"]
    per_buffer_mib = (-(-bb // HUGE) * HUGE if bb >= HUGE else bb) / 2**20
    for r in rows:
        r["rss_less_buffers"] = r["rss"] - r["buffers"] * per_buffer_mib
    ring_max = rows[-1]["ring_max"]
    bound = ring_max + HELD_BOUND
    base = rows[1]["rss_less_buffers"] if len(rows) > 1 else rows[0]["rss_less_buffers"]
    half = rows[len(rows) // 2:]
    print(f"soak: {name}: {epochs} epochs; buffer {per_buffer_mib:.1f} MiB; bound {ring_max} (ring_depth_max) "
          f"+ {HELD_BOUND} (held: {KEEP_MAX} kept + current + handed out) = {bound} buffers")
    print("| epoch | RSS MiB | RSS less buffers MiB | fds | threads | batch buffers | held peak |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        e = r["epoch"]
        if e < 3 or e % 10 == 9 or e == epochs - 1:
            print(f"| {e} | {r['rss']:.1f} | {r['rss_less_buffers']:.1f} | {r['fds']} | {r['threads']} | "
                  f"{r['buffers']} | {r['held_peak']} |")
    grew = {k: last_growth([r[k] for r in rows], tol) for k, tol in
            (("rss", 1.0), ("rss_less_buffers", 1.0), ("fds", 0), ("threads", 0), ("buffers", 0))}
    print("last grew at epoch: " + ", ".join(f"{k} {v}" for k, v in grew.items()))
    failures = []
    for r in rows:
        if r["buffers"] > bound:
            failures.append(f"epoch {r['epoch']}: {r['buffers']} batch buffers > bound {bound}")
        if r["held_peak"] > HELD_BOUND:
            failures.append(f"epoch {r['epoch']}: held peak {r['held_peak']} > {HELD_BOUND}")
        if r["epoch"] >= 1:
            if r["rss_less_buffers"] > base + slack_mib:
                failures.append(f"epoch {r['epoch']}: RSS {r['rss']:.1f} MiB > {base:.1f} + {r['buffers']} x "
                                f"{per_buffer_mib:.1f} + {slack_mib} MiB slack")
            if r["fds"] != rows[1]["fds"] or r["threads"] != rows[1]["threads"]:
                failures.append(f"epoch {r['epoch']}: fds {r['fds']} threads {r['threads']} (epoch 1: "
                                f"{rows[1]['fds']}, {rows[1]['threads']})")
    second = [r["rss_less_buffers"] for r in half]
    if max(second) - second[0] > slack_mib:
        failures.append(f"RSS less buffers grew {max(second) - second[0]:.1f} MiB over the second half of the run")
    for f in failures[:10]:
        print(f"soak: FAILED {f}")
    if not failures:
        print(f"soak: within bounds: buffers {rows[-1]['buffers']} <= {bound}, RSS less buffers "
              f"{base:.1f} -> {rows[-1]['rss_less_buffers']:.1f} MiB (slack {slack_mib}), fds {rows[1]['fds']}, "
              f"threads {rows[1]['threads']}")
    return not failures


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", nargs="?", default=os.path.join(ROOT, "data", "sample"))
    ap.add_argument("--epochs-shards", type=int, default=120, help="epochs of the cheap configuration (uint8 shards)")
    ap.add_argument("--epochs-folder", type=int, default=30, help="epochs of the folder configuration (float32)")
    ap.add_argument("--rss-slack-mib", type=float, default=16.0)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="stoker-soak-")
    subprocess.run([os.path.join(args.build, "tools", "stoker"), "pack", args.data, os.path.join(tmp, "s-%02d.tar"),
                    "--shard-count", "4", "--max-side", "256"], check=True, capture_output=True)
    ok = soak("shards --max-side 256, val transforms, uint8", os.path.join(tmp, "s-{00..03}.tar"),
              [stoker.Resize(146), stoker.CenterCrop(128)], "uint8", args.epochs_shards, args.rss_slack_mib)
    ok &= soak("folder, train transforms, float32", args.data,
               [stoker.RandomResizedCrop(224), stoker.RandomHorizontalFlip(), stoker.Normalize([0.5] * 3, [0.25] * 3)],
               "float32", args.epochs_folder, args.rss_slack_mib)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
