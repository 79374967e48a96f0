#!/usr/bin/env python3
"""What offline preparation buys: pack throughput, then loader images/s from
(a) the original image folder, (b) shards holding the original bytes
(--keep), (b') the same pixels rewritten with restart markers (--lossless),
(c) shards packed at --max-side 256 (re-encoded with restart
markers, so crops decode only the segments covering them), (c') the same
without restart markers, (d) shards packed --raw at
max side 256 (decoded pixels as .npy), and the DataLoader + torchvision + PIL
baseline on the folder. All loaders run RandomResizedCrop(224) + flip +
Normalize, float32 NCHW, batch 64, threads = workers = cores, in one run as
children of this process (bench/loader_bench.py's harness: warm-up epoch,
then --epochs timed epochs, best of --rounds).

    python3 bench/pack_bench.py [DATA] [--out build/pack-bench] [--epochs 2] [--rounds 2]
"""
import argparse
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import loader_bench  # noqa: E402

ROOT = loader_bench.ROOT


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", nargs="?", default=os.path.join(ROOT, "data", "sample"))
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "pack-bench"))
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--batch-size", type=int, default=64)
    args = ap.parse_args()
    cli = os.path.join(args.build, "tools", "stoker")
    shutil.rmtree(args.out, ignore_errors=True)
    variants = [("(b) shards, original bytes", "keep", ["--keep"]),
                ("(b') shards, --lossless", "lossless", ["--lossless"]),
                ("(c) shards, --max-side 256", "s256", ["--max-side", "256"]),
                ("(c') (c) --no-restart-markers", "s256nr", ["--max-side", "256", "--no-restart-markers"]),
                ("(d) shards, --raw --max-side 256", "raw256", ["--raw", "--max-side", "256"])]
    n = sum(1 for _, _, fs in os.walk(args.data) for f in fs if f.lower().endswith((".jpg", ".jpeg", ".png")))
    print(f"pack_bench: {args.data}: {n} images; {args.workers} threads", flush=True)
    pack_rows, sources = [], [("(a) image folder", args.data)]
    for name, tag, flags in variants:
        pattern = os.path.join(args.out, tag, f"{tag}-%04d.tar")
        t0 = time.perf_counter()
        subprocess.run([cli, "pack", args.data, pattern, "--shard-count", "8", "--threads", str(args.workers)]
                       + flags, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        secs = time.perf_counter() - t0
        size = sum(os.path.getsize(os.path.join(args.out, tag, f)) for f in os.listdir(os.path.join(args.out, tag))
                   if f.endswith(".tar"))
        pack_rows.append((f"stoker pack {' '.join(flags)}", n / secs, size / 1e6))
        sources.append((name, os.path.join(args.out, tag, f"{tag}-{{0000..0007}}.tar")))
        print(f"  packed {tag}: {n / secs:.0f} records/s, {size / 1e6:.0f} MB", flush=True)

    ns = argparse.Namespace(batch_size=args.batch_size, epochs=args.epochs)
    best = {}
    for r in range(args.rounds):
        runs = [("DataLoader", "dataloader", args.data)] + [(name, "stoker", src) for name, src in sources]
        for name, kind, src in runs:
            res = loader_bench.measure(kind, src, args.workers, "mmap", ns)
            print(f"  round {r + 1}: {name:34s} {res['images_per_s']:8.1f} images/s", flush=True)
            if name not in best or res["images_per_s"] > best[name]["images_per_s"]:
                best[name] = res
    dl, folder = best["DataLoader"]["images_per_s"], best["(a) image folder"]["images_per_s"]
    print()
    print("| pack | records/s | output MB |")
    print("|---|---:|---:|")
    for name, rate, mb in pack_rows:
        print(f"| {name} | {rate:.0f} | {mb:.0f} |")
    print()
    print("| loader source | images/s | × (a) folder | × DataLoader | peak PSS (MiB) |")
    print("|---|---:|---:|---:|---:|")
    print(f"| torch DataLoader + torchvision + PIL on (a) | {dl:.0f} | {dl / folder:.2f} | 1.00 | "
          f"{best['DataLoader']['peak_pss_mib']:.0f} |")
    for name, _ in sources:
        v = best[name]["images_per_s"]
        print(f"| stoker, {name} | {v:.0f} | {v / folder:.2f} | {v / dl:.2f} | {best[name]['peak_pss_mib']:.0f} |")


if __name__ == "__main__":
    main()
