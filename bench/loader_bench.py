#!/usr/bin/env python3
"""Loader benchmark: stoker against torch.utils.data.DataLoader + torchvision + PIL.

Both run the same transforms (RandomResizedCrop(224) + RandomHorizontalFlip +
Normalize, float32 NCHW), batch size, and threads = workers = cores, on the same
folder. They run alternately, each in a child process of this one (so one
process tree), for a warm-up epoch and then --epochs timed epochs, --rounds
times; the table shows the best round of each. The plain libjpeg-turbo decode
of every file (bench/decode_ceiling) runs in the same run as the ceiling, on
the same threads. Peak memory is PSS summed over the child and its descendants
(DataLoader workers included), sampled every 0.25 s; minor page faults are per
image over the whole child run (startup and warm-up included: `import torch`
alone is ~50,000), and over the timed epochs only (steady state; the
DataLoader's reaped workers included). Time to first batch is stoker's own
stats() figure (loader created -> first batch in hand).

--full adds, per data set: stoker on 1 thread (parallel efficiency = N-thread
rate / (N x 1-thread rate)), cache="ram" and cache="decoded" (the warm-up
epoch fills the cache; timed epochs are the second and later), cache="ram"
after its JPEG rewrite has finished (warm-up epochs until stats() says
"done", at most 200; timed epochs after), the first epoch of cache="ram"
against cache="mmap"'s (start-up included), and the ceiling on 1 thread. Several data sets may be given (make bench-speed: the
q96 4:4:4 sample set and its q90 4:2:0 variant).

--baseline DIR adds the same stoker runs from another built checkout (e.g. a
`git worktree` of main) alternating with this one's, and prints this / that
per round: a change measured against its baseline in one run.

    python3 bench/loader_bench.py [DATA...] [--full] [--epochs 2] [--rounds 2] [--json out.json] [--baseline DIR]
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
def run_child(kind, data, batch_size, workers, epochs, cache, tree=ROOT):
    import torch
    if kind == "stoker":
        sys.path.insert(0, os.path.join(tree, "python"))
        import stoker
        loader = stoker.Loader(data, batch_size=batch_size, shuffle=True, seed=0, threads=workers,
                               cache="ram" if cache == "ram-rewritten" else cache,
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
    # Warm-up: epoch 0 (its rate is the first epoch's, start-up included);
    # for "ram-rewritten", then epochs until the cache's rewrite is done
    # (bounded), so the timed epochs are those after it.
    warm, first_epoch_s, images_first = 1, None, 0
    t0 = time.perf_counter()
    epoch = 0
    while True:
        if hasattr(loader, "set_epoch"):
            loader.set_epoch(epoch)
        if epoch == warm:
            t_start = time.perf_counter()
            faults_start = faults()
        for x, y in loader:
            n = int(y.shape[0])
            images += n
            if epoch >= warm:
                timed += n
        assert x.shape[1:] == (3, 224, 224) and x.dtype == torch.float32
        if epoch == 0:
            first_epoch_s, images_first = time.perf_counter() - t0, images
        if cache == "ram-rewritten" and epoch == warm - 1 and warm < 200 and \
                loader.stats()["cache_rewrite"] != "done":
            warm += 1
        epoch += 1
        if epoch >= warm + epochs:
            break
    seconds = time.perf_counter() - t_start
    stats = loader.stats() if kind == "stoker" else {}
    del loader  # DataLoader workers are reaped, so their faults count
    import gc
    gc.collect()
    steady = (faults() - faults_start) / timed
    print(json.dumps({"kind": kind, "images": images, "timed_images": timed, "seconds": seconds,
                      "images_per_s": timed / seconds, "steady_faults_per_image": steady,
                      "ttfb_s": stats.get("time_to_first_batch_s"), "cache_hits": stats.get("cache_hits"),
                      "cache_bytes": stats.get("cache_bytes"), "first_epoch_images_per_s": images_first / first_epoch_s,
                      "warm_epochs": warm, "cache_rewrite": stats.get("cache_rewrite"),
                      "cache_rewritten": stats.get("cache_rewritten"),
                      "cache_rewrite_cpu_s": stats.get("cache_rewrite_cpu_s")}), flush=True)


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


def run_sampling_pss(cmd):
    """Runs cmd, its stdout captured, sampling the PSS of its process tree (workers included) every 0.25 s.
    -> (exit code, stdout, peak PSS in MiB)"""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    peak = [0]
    done = threading.Event()

    # NOTE: reading smaps_rollup walks the child's page tables: ~8 ms of CPU
    # for a process with torch loaded. Every 20 ms that took a third of a
    # core from the measured run (and the 2-thread runs have no spare core);
    # every 0.25 s it is ~3% of one core, and memory here changes slowly.
    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], sum(pss_kib(p) for p in tree_pids(proc.pid)))
            done.wait(0.25)

    sampler = threading.Thread(target=sample)
    sampler.start()
    out, _ = proc.communicate()
    done.set()
    sampler.join()
    return proc.returncode, out, peak[0] / 1024


def measure(kind, data, workers, cache, args):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    # "baseline": stoker as built in another checkout (--baseline), the same child otherwise.
    tree = ["--tree", args.baseline] if kind == "baseline" else []
    code, out, peak = run_sampling_pss([sys.executable, os.path.abspath(__file__), data, "--child",
                                        "stoker" if kind == "baseline" else kind,
                                        "--batch-size", str(args.batch_size), "--workers", str(workers),
                                        "--epochs", str(args.epochs), "--cache", cache] + tree)
    if code != 0:
        sys.exit(f"loader_bench: the {kind} run failed (exit {code})")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = json.loads(out.strip().splitlines()[-1])
    r["peak_pss_mib"] = peak
    r["minor_faults_per_image"] = (after.ru_minflt - before.ru_minflt) / r["images"]
    return r


def decode_ceiling(data, workers, args):
    exe = os.path.join(args.build, "bench", "decode_ceiling")
    if not os.path.exists(exe):
        sys.exit(f"loader_bench: {exe} is missing; build first (make build)")
    out = subprocess.run([exe, data, "--threads", str(workers)], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out)


def bench_one(data, args):
    """All configurations on one data set; returns the table rows and a summary."""
    n = args.workers
    configs = [("dataloader", n, "mmap"), ("stoker", n, "mmap")]
    if args.full:
        configs += [("stoker", 1, "mmap"), ("stoker", n, "ram"), ("stoker", n, "ram-rewritten"), ("stoker", n, "decoded")]
    if args.baseline:  # the same runs of another build, alternating with these
        configs += [("baseline", n, "mmap")] + ([("baseline", n, c) for c in ("ram", "ram-rewritten", "decoded")]
                                                if args.full else [])
    ceiling_threads = [n, 1] if args.full and n != 1 else [n]
    runs = {c: [] for c in configs}
    ceilings = {t: [] for t in ceiling_threads}
    for r in range(args.rounds):
        # NOTE: every other round runs the configurations in reverse order, so
        # what a run inherits from the one before it (page cache, frequency,
        # memory freed late) does not favour one configuration every round.
        for c in (configs if r % 2 == 0 else configs[::-1]):
            res = measure(c[0], data, c[1], c[2], args)
            runs[c].append(res)
            print(f"  round {r + 1}: {name_of(c):38s} {res['images_per_s']:8.1f} images/s  "
                  f"peak PSS {res['peak_pss_mib']:7.1f} MiB", flush=True)
        for t in ceiling_threads:
            ceilings[t].append(decode_ceiling(data, t, args)["images_per_s"])
            print(f"  round {r + 1}: {f'ceiling ({t} threads)':38s} {ceilings[t][-1]:8.1f} images/s", flush=True)
    best = {c: max(v, key=lambda x: x["images_per_s"]) for c, v in runs.items()}
    ceil = {t: max(v) for t, v in ceilings.items()}
    # Same-round ratios: each pair ran within seconds of each other, so drift
    # of a shared machine between rounds cancels; their median beside best/best.
    rate = {c: [x["images_per_s"] for x in v] for c, v in runs.items()}
    paired = {"x_ceiling": [a / b for a, b in zip(rate[("stoker", n, "mmap")], ceilings[n])]}
    if ("stoker", n, "ram") in runs:  # the first epoch: the cache filling and the rewrite starting, against mmap's
        first = {c: [x["first_epoch_images_per_s"] for x in v] for c, v in runs.items() if c[0] == "stoker"}
        paired["first_epoch_ram_vs_mmap"] = [a / b for a, b in zip(first[("stoker", n, "ram")], first[("stoker", n, "mmap")])]
        paired["x_ceiling_ram_rewritten"] = [a / b for a, b in zip(rate[("stoker", n, "ram-rewritten")], ceilings[n])]
        paired["x_dataloader_ram_rewritten"] = [a / b for a, b in zip(rate[("stoker", n, "ram-rewritten")],
                                                                      rate[("dataloader", n, "mmap")])]
    for cache in ("mmap", "ram", "ram-rewritten", "decoded"):
        if ("baseline", n, cache) in runs:
            paired[f"x_baseline_{cache}"] = [a / b for a, b in zip(rate[("stoker", n, cache)], rate[("baseline", n, cache)])]
    if ("baseline", n, "ram") in runs:  # the baseline's first epoch of cache="ram" against its own mmap's
        first = {c: [x["first_epoch_images_per_s"] for x in v] for c, v in runs.items() if c[0] == "baseline"}
        paired["first_epoch_ram_vs_mmap_baseline"] = [a / b for a, b in zip(first[("baseline", n, "ram")],
                                                                            first[("baseline", n, "mmap")])]
    if ("stoker", 1, "mmap") in runs and n > 1:
        paired["parallel_efficiency"] = [a / (n * b) for a, b in zip(rate[("stoker", n, "mmap")], rate[("stoker", 1, "mmap")])]
        paired["x_ceiling_1"] = [a / b for a, b in zip(rate[("stoker", 1, "mmap")], ceilings[1])]
        paired["ceiling_efficiency"] = [a / (n * b) for a, b in zip(ceilings[n], ceilings[1])]
    return configs, best, ceil, paired


def name_of(c):
    kind, threads, cache = c
    if kind == "dataloader":
        return f"DataLoader + torchvision + PIL ({threads} workers)"
    if kind == "baseline":
        return f"baseline stoker cache={cache} ({threads} thread{'s' if threads > 1 else ''})"
    if cache == "ram-rewritten":
        return f"stoker cache=ram, after its rewrite ({threads} thread{'s' if threads > 1 else ''})"
    return f"stoker cache={cache} ({threads} thread{'s' if threads > 1 else ''})"


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2


def print_table(data, configs, best, ceil, paired, args):
    n = args.workers
    dl = best[("dataloader", n, "mmap")]["images_per_s"]
    print(f"\n{data}:")
    print("| pipeline | images/s | × DataLoader | × decode ceiling | peak PSS (MiB) | minor faults / image (whole run) "
          "| minor faults / image (timed epochs) | first batch (s) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for c in configs:
        r = best[c]
        ips = r["images_per_s"]
        ttfb = "" if r.get("ttfb_s") is None else f"{r['ttfb_s']:.3f}"
        print(f"| {name_of(c)} | {ips:.0f} | {ips / dl:.2f} | {ips / ceil[c[1]] if c[1] in ceil else ips / ceil[n]:.2f} | "
              f"{r['peak_pss_mib']:.0f} | {r['minor_faults_per_image']:.1f} | {r['steady_faults_per_image']:.1f} | "
              f"{ttfb} |")
    for t in sorted(ceil, reverse=True):
        print(f"| libjpeg-turbo full decode only ({t} thread{'s' if t > 1 else ''}): the ceiling | {ceil[t]:.0f} | "
              f"{ceil[t] / dl:.2f} | 1.00 | | | | |")
    st = best[("stoker", n, "mmap")]
    summary = {"data": data, "stoker_per_s": st["images_per_s"], "dataloader_per_s": dl,
               "x_dataloader": st["images_per_s"] / dl, "x_ceiling": st["images_per_s"] / ceil[n],
               "pss_ratio": st["peak_pss_mib"] / best[("dataloader", n, "mmap")]["peak_pss_mib"]}
    summary["paired_median"] = {k: median(v) for k, v in paired.items()}
    pm = summary["paired_median"]
    print(f"\nstoker / DataLoader: {summary['x_dataloader']:.2f}× images/s, {summary['pss_ratio']:.2f}× peak memory; "
          f"stoker / decode ceiling: {summary['x_ceiling']:.2f}× (best/best), {pm['x_ceiling']:.2f}× (median of "
          f"same-round ratios: {', '.join(f'{x:.2f}' for x in paired['x_ceiling'])})")
    if ("stoker", 1, "mmap") in best and n > 1:
        one = best[("stoker", 1, "mmap")]["images_per_s"]
        summary["parallel_efficiency"] = st["images_per_s"] / (n * one)
        summary["x_dataloader_decoded"] = best[("stoker", n, "decoded")]["images_per_s"] / dl
        print(f"1 thread: stoker / decode ceiling {one / ceil[1]:.2f}× (best/best), {pm['x_ceiling_1']:.2f}× (median "
              f"same-round)")
        print(f"parallel efficiency 1 -> {n} threads: {100 * summary['parallel_efficiency']:.0f}% (best/best), "
              f"{100 * pm['parallel_efficiency']:.0f}% (median same-round: "
              f"{', '.join(f'{100 * x:.0f}%' for x in paired['parallel_efficiency'])}); the plain decoder's own: "
              f"{100 * ceil[n] / (n * ceil[1]):.0f}% (best/best), {100 * pm['ceiling_efficiency']:.0f}% (median)")
        print(f"cache=decoded (second epoch on) / DataLoader: {summary['x_dataloader_decoded']:.1f}×")
        rw = best[("stoker", n, "ram-rewritten")]
        print(f"cache=ram after its rewrite (epochs {rw['warm_epochs'] + 1}+; {rw['cache_rewritten']} records rewritten "
              f"in {rw['cache_rewrite_cpu_s']:.1f} s of CPU, state {rw['cache_rewrite']}): "
              f"{pm['x_ceiling_ram_rewritten']:.2f}× the decode ceiling, {pm['x_dataloader_ram_rewritten']:.2f}× the "
              f"DataLoader (medians of same-round ratios: "
              f"{', '.join(f'{x:.2f}' for x in paired['x_ceiling_ram_rewritten'])} / "
              f"{', '.join(f'{x:.2f}' for x in paired['x_dataloader_ram_rewritten'])})")
        print(f"first epoch (start-up included), cache=ram rewriting / cache=mmap: {pm['first_epoch_ram_vs_mmap']:.2f}× "
              f"(same-round: {', '.join(f'{x:.2f}' for x in paired['first_epoch_ram_vs_mmap'])})")
        summary["x_ceiling_ram_rewritten"] = pm["x_ceiling_ram_rewritten"]
        summary["first_epoch_ram_vs_mmap"] = pm["first_epoch_ram_vs_mmap"]
    for cache in ("mmap", "ram", "ram-rewritten", "decoded"):
        key = f"x_baseline_{cache}"
        if key in paired:
            print(f"stoker / baseline ({args.baseline}), cache={cache}: {pm[key]:.3f}× (median of same-round ratios: "
                  f"{', '.join(f'{x:.3f}' for x in paired[key])})")
    if "first_epoch_ram_vs_mmap_baseline" in paired:
        print(f"baseline's first epoch, cache=ram / cache=mmap: {pm['first_epoch_ram_vs_mmap_baseline']:.2f}× "
              f"(same-round: {', '.join(f'{x:.2f}' for x in paired['first_epoch_ram_vs_mmap_baseline'])})")
    return summary


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", nargs="*", default=[os.path.join(ROOT, "data", "sample")])
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)),
                    help="DataLoader workers = stoker threads = decode threads (default: cores)")
    ap.add_argument("--epochs", type=int, default=2, help="timed epochs per run, after one warm-up epoch")
    ap.add_argument("--rounds", type=int, default=2, help="alternating rounds of every configuration")
    ap.add_argument("--full", action="store_true", help="also 1 thread, cache='ram', cache='decoded', 1-thread ceiling")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--baseline", help="another stoker checkout, built (its python/stoker/_stoker*.so): its "
                                       "loader runs alternately with this one, same rounds, and the same-round "
                                       "ratios are printed (what a change costs or gains)")
    ap.add_argument("--tree", default=ROOT, help=argparse.SUPPRESS)
    ap.add_argument("--child", choices=["stoker", "dataloader"], help=argparse.SUPPRESS)
    ap.add_argument("--cache", default="mmap", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return run_child(args.child, args.data[0], args.batch_size, args.workers, args.epochs, args.cache, args.tree)

    results = []
    for data in args.data:
        n_files = sum(len(f) for _, _, f in os.walk(data))
        print(f"loader_bench: {data}: {n_files} files; batch {args.batch_size}; {args.workers} threads/workers; "
              f"{args.rounds} rounds of warm-up + {args.epochs} epochs each", flush=True)
        results.append((data,) + bench_one(data, args))
    summaries = [print_table(d, c, b, ce, p, args) for d, c, b, ce, p in results]
    if args.json:
        with open(args.json, "w") as f:
            json.dump([{"data": d, "best": {name_of(k): v for k, v in b.items()}, "ceiling": ce, "paired": p,
                        "summary": s} for (d, _, b, ce, p), s in zip(results, summaries)], f, indent=1)


if __name__ == "__main__":
    main()
