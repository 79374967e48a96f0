#!/usr/bin/env python3
"""Scale benchmark (issue 39, make bench-scale): what one rank pays for a data set of 10^6..10^9 records.

Data sets: synthetic manifests (docs/manifest.md) of N records over S shards, (N, S) in
(10^6, 10^3), (10^7, 10^4), (10^8, 10^5), (10^9, 10^5); each shard a symlink (with its .idx sidecar's) to one
of a few real shards of N/S records (a 4-byte .npy and a .cls each), so the disk holds a few shards whatever N.
Each data set's manifest is written through stoker's one format definition (stoker._stoker._write_manifest_rows).

Ranks: for world sizes 1, 8 and 1000, a fresh process is rank 0 of that world (every rank computes its order
from (seed, epoch, world) alone, so rank 0 stands for any): Loader(pattern, batch_size=64, threads=2,
shuffle=True, seed=0, shuffle_window=W, rank=0, world_size=world, output="numpy"); measured: construction time,
time from construction's end to the first batch, RSS after the import (the baseline), after construction and
after the first batch (per-rank RSS = after the first batch - baseline), remote shards' bytes held in memory then
(stats()["remote"]["resident_bytes"]: a window of shards and the fetch-ahead, the shards' size times the window,
shown apart from the growth), and with --remote the requests nginx logged before the first batch.

Local shards open through the manifest beside the pattern; --no-manifest-up-to N also runs the data sets of at
most N records without it (every .idx read at construction: today's cost, for contrast). With --remote the same
folders are served by nginx on 127.0.0.1 (tests/python/remote_servers.py) and read as http:// URLs.

Printed: one row per (N, S, world, W, mode) and the growth from the smallest N to the largest per (world, W,
mode). Nothing is asserted: the issue's targets (RSS growth 10^6 -> 10^9 under 64 MiB per rank, first batch
under 1 s at 10^9 on 2 cores, requests before the first batch <= 1 + the first batches' shards) are printed
beside the numbers.

    python3 bench/scale_bench.py [--records 1e6,1e7,1e8,1e9] [--worlds 1,8,1000] [--windows 4,0]
                                 [--no-manifest-up-to 1e6] [--remote] [--work DIR] [--json OUT]
"""
import argparse
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = os.path.join(ROOT, "python")
sys.path.insert(0, PYTHON)
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
SHARDS_FOR = {10**6: 10**3, 10**7: 10**4, 10**8: 10**5, 10**9: 10**5}
REAL = 4  # real shards per records-per-shard
TARGET_RSS_MIB, TARGET_FIRST_S = 64, 1.0


def write_real_shard(path, per, seed):
    with tarfile.open(path + ".tmp", "w") as t:
        for k in range(per):
            import numpy as np
            buf = io.BytesIO()
            np.save(buf, np.array([k & 255, (k >> 8) & 255, seed, 7], dtype=np.uint8))
            for name, data in ((f"k{k:07d}.npy", buf.getvalue()), (f"k{k:07d}.cls", str(k % 10).encode())):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
    os.replace(path + ".tmp", path)


def make_dataset(work, n, shards):
    """work/n<N>/s-<s>.tar -> ../real-<per>-<s % REAL>.tar (and .idx); work/n<N>/data.manifest."""
    import stoker
    from stoker import _stoker
    per = n // shards
    reals = []
    for r in range(REAL):
        path = os.path.join(work, f"real-{per}-{r}.tar")
        if not os.path.exists(path + ".idx"):
            write_real_shard(path, per, r)
        reals.append(path)
    stoker.write_manifest(os.path.join(work, f"real-{per}-*.tar"), out=os.path.join(work, f"real-{per}.manifest"))
    folder = os.path.join(work, f"n{n}")
    width = len(str(shards - 1))
    names = [f"s-{s:0{width}d}.tar" for s in range(shards)]
    if not os.path.exists(os.path.join(folder, "data.manifest")):
        os.makedirs(folder, exist_ok=True)
        for s, name in enumerate(names):
            target = os.path.join("..", os.path.basename(reals[s % REAL]))
            for suffix in ("", ".idx"):
                link = os.path.join(folder, name + suffix)
                if not os.path.lexists(link):
                    os.symlink(target + suffix, link)
        sizes = [os.path.getsize(r) for r in reals]
        _stoker._write_manifest_rows(os.path.join(folder, "data.manifest"), names, [per] * shards,
                                     [sizes[s % REAL] for s in range(shards)])
    return folder, f"s-{{{'0' * width}..{shards - 1:0{width}d}}}.tar"


CHILD = r"""
import json, os, sys, time
def rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
sys.path.insert(0, PYTHON)
import stoker
base = rss_mib()
t0 = time.perf_counter()
loader = stoker.Loader(SPEC, batch_size=64, threads=2, shuffle=True, seed=0, shuffle_window=WINDOW, rank=0,
                       world_size=WORLD, output="numpy", progress=False)
t1 = time.perf_counter()
built = rss_mib()
print("constructed", flush=True)
sys.stdin.readline()  # the parent reads the server's log here
t2 = time.perf_counter()
batch = next(iter(loader))
t3 = time.perf_counter()
print(json.dumps({"construct_s": t1 - t0, "first_batch_s": t3 - t2, "rss_base_mib": base,
                  "rss_built_mib": built - base, "rss_first_mib": rss_mib() - base, "batches": len(loader),
                  "shard_file_opens": loader.stats()["shard_file_opens"],
                  "shards_mib": (loader.stats()["remote"] or {}).get("resident_bytes", 0) / 2**20}), flush=True)
"""


def run_child(spec, world, window, web=None):
    code = (CHILD.replace("PYTHON", repr(PYTHON)).replace("SPEC", repr(spec)).replace("WINDOW", str(window))
            .replace("WORLD", str(world)))
    env = dict(os.environ, OMP_NUM_THREADS="1")
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    line = p.stdout.readline()
    if line.strip() != "constructed":
        out, err = p.communicate(timeout=600)
        raise RuntimeError(f"{spec} world {world}: {line}{out}{err[-3000:]}")
    at_built = len(web.requests()) if web else 0
    p.stdin.write("\n")
    p.stdin.flush()
    out, err = p.communicate(timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"{spec} world {world}: {err[-3000:]}")
    row = json.loads(out.strip().splitlines()[-1])
    if web:
        log = web.requests()
        row["requests_construct"] = at_built
        row["requests_first"] = len(log)  # NOTE: the ring reads a few batches ahead: they are in here too
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", default="1e6,1e7,1e8,1e9")
    ap.add_argument("--worlds", default="1,8,1000")
    ap.add_argument("--windows", default="4,0", help="shuffle_window values (0: a shuffle over the rank's share)")
    ap.add_argument("--no-manifest-up-to", type=float, default=1e6)
    ap.add_argument("--remote", action="store_true", help="also read the shards from nginx on 127.0.0.1")
    ap.add_argument("--work", default=None, help="where the shards go (default: a temporary folder, removed)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--build", default=None, help="(make passes it; the extension is found under python/)")
    a = ap.parse_args()
    records = [int(float(x)) for x in a.records.split(",")]
    worlds = [int(x) for x in a.worlds.split(",")]
    windows = [int(x) for x in a.windows.split(",")]
    tmp = None
    if a.work is None:
        tmp = tempfile.TemporaryDirectory(prefix="stoker-scale-")
        a.work = tmp.name
    os.makedirs(a.work, exist_ok=True)
    rows = []
    datasets = []
    for n in records:
        t = time.perf_counter()
        folder, pattern = make_dataset(a.work, n, SHARDS_FOR[n])
        datasets.append((n, SHARDS_FOR[n], folder, pattern))
        print(f"# data set of {n:.0e} records over {SHARDS_FOR[n]} shards ready ({time.perf_counter() - t:.1f} s)",
              flush=True)
    modes = [("manifest", lambda folder, pattern: os.path.join(folder, "data.manifest"))]
    modes.append(("no manifest", lambda folder, pattern: os.path.join(folder, pattern)))
    web = None
    if a.remote:
        from remote_servers import nginx
        web_ctx = nginx(a.work, os.path.join(a.work, ".nginx"))
        web = web_ctx.__enter__()
        modes.append(("remote manifest", lambda folder, pattern: f"{web.url}/{os.path.basename(folder)}/data.manifest"))
    print(f"{'records':>8} {'shards':>7} {'world':>5} {'window':>6} {'mode':<16} {'construct s':>11} "
          f"{'1st batch s':>11} {'RSS built MiB':>13} {'RSS 1st MiB':>11} {'shards MiB':>10} {'opens':>6} {'requests':>8}",
          flush=True)
    try:
        for n, shards, folder, pattern in datasets:
            for world in worlds:
                for window in windows:
                    for mode, spec_of in modes:
                        if mode == "no manifest" and n > a.no_manifest_up_to:
                            continue
                        if web:
                            open(web.access_log, "w").close()
                        row = run_child(spec_of(folder, pattern), world, window, web if mode.startswith("remote") else None)
                        row.update(records=n, shards=shards, world=world, window=window, mode=mode)
                        rows.append(row)
                        req = row.get("requests_first", "")
                        print(f"{n:>8.0e} {shards:>7} {world:>5} {window:>6} {mode:<16} {row['construct_s']:>11.3f} "
                              f"{row['first_batch_s']:>11.3f} {row['rss_built_mib']:>13.1f} {row['rss_first_mib']:>11.1f} "
                              f"{row['shards_mib']:>10.1f} {row['shard_file_opens']:>6} {req:>8}", flush=True)
    finally:
        if web:
            web_ctx.__exit__(None, None, None)
    print(f"\nGrowth from {records[0]:.0e} to {records[-1]:.0e} records (target: RSS growth < {TARGET_RSS_MIB} MiB "
          f"per rank; first batch < {TARGET_FIRST_S} s at the largest):")
    for world in worlds:
        for window in windows:
            for mode, _ in modes:
                sel = [r for r in rows if r["world"] == world and r["window"] == window and r["mode"] == mode]
                if len(sel) < 2:
                    continue
                lo, hi = sel[0], sel[-1]
                # NOTE: remote shards' bytes in memory (a window of shards and the fetch-ahead) are the shards'
                # size times the window, not a cost of the data set's size: shown apart.
                less = (hi['rss_first_mib'] - hi['shards_mib']) - (lo['rss_first_mib'] - lo['shards_mib'])
                print(f"  world {world:>4} window {window} {mode:<16}: RSS {lo['rss_first_mib']:.1f} -> "
                      f"{hi['rss_first_mib']:.1f} MiB (+{hi['rss_first_mib'] - lo['rss_first_mib']:.1f}; "
                      f"+{less:.1f} less the shard bytes held), "
                      f"construction {lo['construct_s']:.3f} -> {hi['construct_s']:.3f} s, first batch "
                      f"{lo['first_batch_s']:.3f} -> {hi['first_batch_s']:.3f} s")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    if tmp:
        tmp.cleanup()


if __name__ == "__main__":
    main()
