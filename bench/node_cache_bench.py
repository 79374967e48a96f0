#!/usr/bin/env python3
"""One cache per node (issue 36): 4 ranks on this machine (spawned processes, a gloo process group,
LOCAL_WORLD_SIZE=4) read the set with cache="ram" and cache="decoded", each with share_cache="off" (a cache per
rank) and "on" (one per node), and with cache="mmap" (each rank's fixed overhead: no cache). After a first epoch
that fills the caches (and cache="ram"'s preload; a per-rank decoded cache sees only its rank's share of an
epoch, so its warm-up runs epochs until it holds the whole set), two steady epochs are timed; then every rank reads its PSS
(/proc/self/smaps_rollup: shared pages divided among the processes mapping them, so the node's sum counts a shared
segment once). Configurations alternate within each round, the order reversed every other round; ratios are of
the same round. Under load the numbers are noisy: printed, never asserted.

    python3 bench/node_cache_bench.py [DATA] [--ranks 4] [--rounds 1] [--threads 1] [--batch-size 32] [--caches ram]
"""
import argparse
import json
import os
import socket
import statistics
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = [("mmap", "off"), ("ram", "off"), ("ram", "on"), ("decoded", "off"), ("decoded", "on")]


def pss_bytes():
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    return 0


def rank_main(rank, ranks, port, data, cache, share, threads, batch_size, out):
    import time
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(ranks), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(ranks),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import torch.distributed as dist
    import stoker
    dist.init_process_group("gloo", rank=rank, world_size=ranks)
    loader = stoker.Loader(data, batch_size=batch_size, shuffle=True, seed=0, threads=threads, cache=cache,
                           share_cache=share, output="numpy", progress=False,
                           transforms=[stoker.RandomResizedCrop(224), stoker.RandomHorizontalFlip()])
    # Warm-up: epochs until this rank's cache holds the whole set (a per-rank decoded cache sees only the rank's
    # share of each epoch, so it takes several; a node's cache is filled by every rank at once), at most 24.
    total = sum(1 for _, _, names in os.walk(data) for f in names if f.lower().endswith((".jpg", ".jpeg", ".png")))
    warm = 0
    while True:
        loader.set_epoch(warm)
        for _ in loader:
            pass
        warm += 1
        while loader.stats()["cache_preload"] == "loading":
            time.sleep(0.05)
        s = loader.stats()
        full = cache == "mmap" or (s["shared_cache_entries"] if share == "on" else s["cache_records"]) >= total
        if full or warm >= 24:
            break
    dist.barrier()
    n, t = 0, time.perf_counter()
    for epoch in (warm, warm + 1):
        loader.set_epoch(epoch)
        for _, y in loader:
            n += len(y)
    rate = n / (time.perf_counter() - t)
    dist.barrier()
    s = loader.stats()
    mine = {"rate": rate, "warm_epochs": warm, "pss": pss_bytes(), "cache_bytes": s["cache_bytes"], "shared": s["shared_cache"],
            "shared_bytes": s["shared_cache_bytes"],
            "filled": s["shared_cache_filled"], "entries": s["shared_cache_entries"]}
    got = [None] * ranks
    dist.all_gather_object(got, mine)
    if rank == 0:
        with open(out, "w") as f:
            json.dump(got, f)
    dist.barrier()
    dist.destroy_process_group()


def run(args, cache, share):
    import torch.multiprocessing as mp
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "ranks.json")
        mp.spawn(rank_main, args=(args.ranks, port, args.data, cache, share, args.threads, args.batch_size, out),
                 nprocs=args.ranks, join=True)
        with open(out) as f:
            return json.load(f)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("data", nargs="?", default=os.path.join(ROOT, "data", "sample"))
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--threads", type=int, default=1, help="workers per rank")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--caches", default="ram,decoded", help="the caches to compare (mmap always runs: the baseline)")
    args = p.parse_args()
    mib = 1 << 20
    caches = {"mmap", *args.caches.split(",")}
    configs = [c for c in CONFIGS if c[0] in caches]
    results = {c: [] for c in configs}
    for r in range(args.rounds):
        order = configs if r % 2 == 0 else configs[::-1]
        for cache, share in order:
            got = run(args, cache, share)
            results[(cache, share)].append(got)
            print(f"round {r}: cache={cache} share_cache={share}: node PSS {sum(g['pss'] for g in got) / mib:.0f} MiB, "
                  f"images/s per rank {statistics.mean(g['rate'] for g in got):.0f} (after {got[0]['warm_epochs']} "
                  f"warm-up epochs); {got[0]['shared']}",
                  file=sys.stderr)
    base = [sum(g["pss"] for g in got) for got in results[("mmap", "off")]]
    print(f"\n{args.ranks} ranks on one machine, {args.threads} worker(s) each, {args.rounds} round(s), data {args.data}")
    print("| cache | share_cache | node PSS (MiB) | over mmap's (MiB) | one rank's cache (MiB) | over / one cache | "
          "images/s per rank | rate / per-process cache's |")
    print("|---|---|---|---|---|---|---|---|")
    for cache, share in configs:
        rows = results[(cache, share)]
        pss = [sum(g["pss"] for g in got) for got in rows]
        over = [p - b for p, b in zip(pss, base)]
        one = [max(g["cache_bytes"] for g in got) for got in rows]
        rate = [statistics.mean(g["rate"] for g in got) for got in rows]
        if share == "on":
            ref = [statistics.mean(g["rate"] for g in got) for got in results[(cache, "off")]]
            ratio = f"{statistics.median(a / b for a, b in zip(rate, ref)):.2f}"
        else:
            ratio = ""
        per_cache = f"{statistics.median(o / c for o, c in zip(over, one)):.2f}" if cache != "mmap" else ""
        print(f"| {cache} | {share} | {statistics.median(pss) / mib:.0f} | {statistics.median(over) / mib:.0f} | "
              f"{statistics.median(one) / mib:.0f} | {per_cache} | {statistics.median(rate):.0f} | {ratio} |")
    for cache in sorted(caches - {"mmap"}):
        got = results[(cache, "on")][-1]
        print(f"cache={cache}, shared: entries {got[0]['entries']}, {got[0]['shared_bytes'] / mib:.0f} MiB, stored per "
              f"rank {[g['filled'] for g in got]}")


if __name__ == "__main__":
    main()
