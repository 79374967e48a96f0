#!/usr/bin/env python3
"""Remote shards benchmark: the same tar shards over loopback HTTP (20 ms added per request) against local disk.

The issue's target, measured by this one command (make bench-remote):
  shards over loopback HTTP with 20 ms added per request, 2 threads: >= 0.9x the images/s of the same shards on
  local disk; bytes fetched per epoch <= 1.02x the shards' size; second epoch with cache_dir fetches nothing.

Set-up: DATA (an ImageFolder, `make data`) is packed with `stoker pack --keep --shard-count N --shuffle 0`
into a temporary folder (N shards with .idx sidecars; --shuffle 0 so the classes are mixed over the shards,
as packed training sets are). nginx (tests/python/remote_servers.py) serves that folder behind
tests/fixtures/fault_proxy.py with {"delay_ms": D} (D ms before every request is forwarded); the loader reads
PROXY/s-{0..N-1}.tar. Both servers are started here, from the main thread.

Pipeline, the same on both sides (bench/loader_bench.py's headline): RandomResizedCrop(224) +
RandomHorizontalFlip + Normalize, float32 NCHW, batch 64, --threads 2, shuffle=True, seed 0, and
shuffle_window=W (default 4 shards) on both, so the epochs' orders are identical (the order is a function of
seed, epoch, shard_starts and W only). output="numpy": no torch import in the children. Before anything is
timed a child checks that the first batch of the local and of the remote loader are equal (np.array_equal on
images and labels); every timed run also hashes its labels per epoch and the parent checks that the local and
remote runs saw the same order, epoch by epoch.

Rounds: --rounds (3) rounds of [local, remote], the order alternating every round. Each run is a fresh process
(as a training job starts) with a fresh Loader: epoch 0 is the cold epoch (timed from before the Loader is
made: for remote it includes the HEAD per shard and the .idx fetches, which a training run pays once), then
--epochs (3) steady epochs of the same Loader, timed from the start of their iteration to their last batch.
The headline rate is the steady epochs' (what a training run sees for all but its first epoch: without
cache_dir every remote epoch fetches every shard again, so the steady epochs are full remote epochs, start of
epoch included); the cold epoch's rate and ratio are printed beside it. The verdict is the median of the
same-round ratios (remote / local, steady epochs): the two runs of a round are seconds apart, so the drift of
a shared machine between rounds cancels. Another job on the machine does not cancel within a round on 2 cores:
each run measures the CPU that processes other than its own, the proxy's and nginx's used (/proc/stat), a
WARNING names the rounds where that was >= 0.15 cores, and a second comparison uses only the steady epochs
during which it was below that (median local vs median remote).

Bytes: stats()["remote"]["bytes_fetched"] counts response bodies (the .idx sidecars and stray reads included;
HEAD responses have no body, so HEADs count 0 bytes but are in `requests`); per epoch it is the delta over the
epoch, divided by the sum of the .tar sizes (the sidecars are not in the denominator). The cold epoch's
ratio includes the sidecars. nginx's access log (body bytes sent) is summed per run as a cross-check.

cache_dir: a fresh process with cache_dir=<tmp> runs the cold epoch + --epochs epochs: the cold epoch fills
the cache, every later epoch must fetch 0 bytes. A second fresh process on the same cache_dir (another run of
the training job) reports its bytes fetched and requests (its HEADs, nothing else expected).

Also printed: the loader process's CPU seconds per epoch and the proxy's and nginx's (from /proc), the CPU the
rest of the machine used during each run (all busy CPU in /proc/stat minus ours: another job on the machine
shows here), fetch_wait_s, consumer_wait_s, time to the first batch of each steady epoch, p50/p99 latency
(time to first byte), prefetch depth and its log, requests per epoch, and once (not in the verdict) the pair
with shuffle_window=0 (a shuffle across all shards: remote works when the set fits the memory budget).

    python3 bench/remote_bench.py [DATA] [--rounds 3] [--epochs 3] [--shards 16] [--window 4] [--delay-ms 20]
                                  [--threads 2] [--batch-size 64] [--connections 8] [--json OUT] [--strict]
"""
import argparse
import hashlib
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from augment_bench import cpu_model, median  # noqa: E402  (one definition for the benches)
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
TARGET_RATE, TARGET_BYTES = 0.9, 1.02
QUIET = 0.15  # cores of other processes below which an epoch counts as quiet
SUM_KEYS = ("bytes_fetched", "fetched_ahead_bytes", "requests", "fetch_wait_s", "stray_reads", "index_scanned_bytes",
            "cache_dir_hits", "cache_dir_misses", "cache_dir_bytes_written", "cache_dir_evictions", "cache_dir_bypass")


# ---------------------------------------------------------------- helpers
def clk_seconds(pids):
    """User + system CPU seconds of these processes (threads included), from /proc."""
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
            fields = stat[stat.rindex(")") + 2:].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            pass
    return total


def thread_cpu():
    """This process's CPU seconds by thread kind (from the names stoker gives its threads)."""
    out = {"workers": 0.0, "fetchers": 0.0, "rest": 0.0}
    hz = os.sysconf("SC_CLK_TCK")
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        kind = "workers" if name.startswith("stoker-w") else "fetchers" if name == "stoker-fetch" else "rest"
        out[kind] += (int(fields[11]) + int(fields[12])) / hz
    return out


def with_children(pid):
    """pid and its direct children (nginx: master + worker)."""
    pids = [pid]
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                pids += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return pids


def machine_cpu():
    """The whole machine's CPU seconds (all cores, /proc/stat): processes (user + nice + system), interrupts
    (irq + softirq: loopback TCP is processed there, not always charged to a process) and steal (the
    hypervisor ran something else on our virtual cores)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    hz = os.sysconf("SC_CLK_TCK")
    return {"procs": (v[0] + v[1] + v[2]) / hz, "irq": (v[5] + v[6]) / hz, "steal": v[7] / hz}


def cpu_delta(a, b):
    return {k: b[k] - a[k] for k in a}


def module_info():
    """Which build ran: the extension module's modification time, and the checkout's commit (+ dirty)."""
    import glob
    so = sorted(glob.glob(os.path.join(ROOT, "python", "stoker", "_stoker*.so")))
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(os.path.getmtime(so[0]))) if so else "missing"
    try:
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        head, dirty = "?", ""
    name = os.path.relpath(so[0], ROOT) if so else "_stoker*.so"
    return f"{name} built {when}; checkout {head}{' + local changes' if dirty else ''}"


def make_loader(spec, args, window, cache_dir=None):
    import stoker
    kw = {}
    if spec.startswith("http"):
        kw = {"remote_connections": args.connections}
        if cache_dir:
            kw["cache_dir"] = cache_dir
    return stoker.Loader(spec, batch_size=args.batch_size, shuffle=True, seed=0, threads=args.threads,
                         shuffle_window=window, output="numpy",
                         transforms=[stoker.RandomResizedCrop(224), stoker.RandomHorizontalFlip(),
                                     stoker.Normalize(MEAN, STD)], **kw)


# ---------------------------------------------------------------- child side
def child_check(args):
    """The first batch of the local and of the remote loader: equal images and labels."""
    import numpy as np
    local = make_loader(args.local_spec, args, args.window)
    remote = make_loader(args.remote_spec, args, args.window)
    xl, yl = next(iter(local))
    xr, yr = next(iter(remote))
    out = {"shape": list(xl.shape), "dtype": str(xl.dtype), "images_equal": bool(np.array_equal(xl, xr)),
           "labels_equal": bool(np.array_equal(yl, yr)), "labels": [int(v) for v in yl[:8]]}
    del local, remote
    print(json.dumps(out), flush=True)


def child_run(args):
    """Cold epoch (Loader made inside the timing) + args.epochs steady epochs; one JSON line."""
    import numpy as np
    watch = {k: int(v) for k, v in (w.split(":") for w in args.watch)}

    def ext_cpu():
        return {k: clk_seconds(with_children(p)) for k, p in watch.items()}

    def usage():
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime, r.ru_stime, r.ru_minflt

    t0 = time.perf_counter()
    cpu0, ext0, ru0, m0, th0 = time.process_time(), ext_cpu(), usage(), machine_cpu(), thread_cpu()
    loader = make_loader(args.spec, args, args.window, args.cache_dir)
    construct_s = time.perf_counter() - t0
    epochs = []
    prev_wait = 0.0
    for e in range(1 + args.epochs):
        loader.set_epoch(e)
        if e > 0:
            cpu0, ext0, ru0, m0, th0 = time.process_time(), ext_cpu(), usage(), machine_cpu(), thread_cpu()
            t0 = time.perf_counter()
        n, first, h = 0, None, hashlib.sha1()
        for x, y in loader:
            if first is None:
                first = time.perf_counter() - t0
            n += int(y.shape[0])
            h.update(np.ascontiguousarray(y).tobytes())
        seconds = time.perf_counter() - t0
        cpu, ext = time.process_time() - cpu0, {k: v - ext0[k] for k, v in ext_cpu().items()}
        ru = [b - a for a, b in zip(ru0, usage())]
        m = cpu_delta(m0, machine_cpu())
        th = cpu_delta(th0, thread_cpu())  # threads that ended in between (none here) are missing
        assert x.shape[1:] == (3, 224, 224) and x.dtype == np.float32
        st = loader.stats()
        epochs.append({"epoch": e, "images": n, "seconds": seconds, "images_per_s": n / seconds,
                       "first_batch_s": first, "labels_sha1": h.hexdigest(), "cpu_s": cpu, "ext_cpu_s": ext,
                       "user_s": ru[0], "sys_s": ru[1], "minor_faults": ru[2], "machine": m, "threads": th,
                       # processes other than this one, the proxy and nginx, in cores (another job here)
                       "other_cores": max(0.0, m["procs"] - cpu - sum(ext.values())) / seconds,
                       "consumer_wait_s": st["consumer_wait_s"] - prev_wait, "remote": st["remote"]})
        prev_wait = st["consumer_wait_s"]
    st = loader.stats()
    print(json.dumps({"construct_s": construct_s, "ttfb_s": st["time_to_first_batch_s"], "epochs": epochs}),
          flush=True)


# --------------------------------------------------------------- parent side
def run_child(argv, what):
    proc = subprocess.run([sys.executable, os.path.abspath(__file__)] + argv, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        sys.exit(f"remote_bench: the {what} child failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def child_args(args, mode, spec=None, window=None, cache_dir=None, watch=()):
    a = ["--child", mode, "--threads", str(args.threads), "--batch-size", str(args.batch_size),
         "--connections", str(args.connections), "--epochs", str(args.epochs),
         "--window", str(args.window if window is None else window)]
    if spec:
        a += ["--spec", spec]
    if cache_dir:
        a += ["--cache-dir", cache_dir]
    for w in watch:
        a += ["--watch", w]
    return a


def remote_deltas(epochs):
    """Per epoch: the remote counters' deltas (the snapshots are cumulative over the Loader's life)."""
    prev = {k: 0 for k in SUM_KEYS}
    prev_retries = 0
    for ep in epochs:
        r = ep["remote"]
        if r is None:
            ep["delta"] = None
            continue
        d = {k: r[k] - prev[k] for k in SUM_KEYS}
        retries = sum(r["retries"].values())
        d["retries"] = retries - prev_retries
        prev, prev_retries = {k: r[k] for k in SUM_KEYS}, retries
        ep["delta"] = d


class Servers:
    def __init__(self, web, proxy):
        self.web, self.proxy = web, proxy

    def watch(self):
        return [f"proxy:{self.proxy.proc.pid}", f"nginx:{self.web.proc.pid}"]

    def cpu(self):
        return clk_seconds([self.proxy.proc.pid] + with_children(self.web.proc.pid))

    def access_log_entries(self):
        with open(self.web.access_log) as f:
            return sum(1 for _ in f)

    def access_log_since(self, n):
        """Entries after the first n (nginx logs after answering: give it a moment)."""
        time.sleep(0.05)
        return self.web.requests()[n:]


def measured_run(servers, args, spec, window=None, cache_dir=None, what="run"):
    n_log = servers.access_log_entries()
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    srv0 = servers.cpu()
    m0 = machine_cpu()
    t0 = time.perf_counter()
    res = run_child(child_args(args, "run", spec, window, cache_dir, servers.watch()), what)
    wall = time.perf_counter() - t0
    m = cpu_delta(m0, machine_cpu())
    srv = servers.cpu() - srv0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    child_cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    remote_deltas(res["epochs"])
    log = servers.access_log_since(n_log)
    res["nginx_requests"] = len(log)
    res["nginx_body_bytes"] = sum(x["bytes"] for x in log)
    res["nginx_by_method"] = {}
    for x in log:
        res["nginx_by_method"][x["method"]] = res["nginx_by_method"].get(x["method"], 0) + 1
    res["wall_s"] = wall
    res["machine_cpu_s"] = m
    res["child_cpu_s"] = child_cpu  # the whole child process: interpreter start-up and imports included
    res["servers_cpu_s"] = srv
    # Processes other than ours (another job on the machine): all processes' CPU - the child's - the servers'.
    res["other_cpu_s"] = max(0.0, m["procs"] - child_cpu - srv)
    res["other_cores"] = res["other_cpu_s"] / wall
    res["irq_cores"] = m["irq"] / wall
    res["steal_cores"] = m["steal"] / wall
    steady = res["epochs"][1:]
    res["steady_images"] = sum(ep["images"] for ep in steady)
    res["steady_seconds"] = sum(ep["seconds"] for ep in steady)
    res["steady_per_s"] = res["steady_images"] / res["steady_seconds"]
    res["cold_per_s"] = res["epochs"][0]["images_per_s"]
    return res


def pack(data, workdir, args):
    exe = os.path.join(args.build, "tools", "stoker")
    if not os.path.exists(exe):
        sys.exit(f"remote_bench: {exe} is missing; build first (make build)")
    shards = os.path.join(workdir, "shards")
    os.makedirs(shards)
    subprocess.run([exe, "pack", data, os.path.join(shards, "s-%d.tar"), "--keep", "--shard-count",
                    str(args.shards), "--shuffle", "0"], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    tars = sorted((f for f in os.listdir(shards) if f.endswith(".tar")), key=lambda f: int(f[2:-4]))
    sizes = [os.path.getsize(os.path.join(shards, f)) for f in tars]
    idx = sum(os.path.getsize(os.path.join(shards, f + ".idx")) for f in tars if
              os.path.exists(os.path.join(shards, f + ".idx")))
    return shards, len(tars), sizes, idx


def fmt_list(xs, f="{:.2f}"):
    return ", ".join(f.format(x) for x in xs)


def per_epoch(run, key, f=lambda ep, k: ep[k]):
    return [f(ep, key) for ep in run["epochs"][1:]]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", nargs="?", default=os.path.join(ROOT, "data", "sample"))
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds of [local, remote]")
    ap.add_argument("--epochs", type=int, default=3, help="steady epochs per run, after the cold one")
    ap.add_argument("--shards", type=int, default=16)
    ap.add_argument("--window", type=int, default=4, help="shuffle_window, both sides")
    ap.add_argument("--delay-ms", type=int, default=20, help="added by the proxy before every request")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--connections", type=int, default=8, help="remote_connections")
    ap.add_argument("--no-full-shuffle", action="store_true", help="skip the shuffle_window=0 pair")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--workdir", default=None, help="where the temporary folder goes (default: $TMPDIR)")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    ap.add_argument("--child", choices=["check", "run"], help=argparse.SUPPRESS)
    ap.add_argument("--spec", help=argparse.SUPPRESS)
    ap.add_argument("--local-spec", help=argparse.SUPPRESS)
    ap.add_argument("--remote-spec", help=argparse.SUPPRESS)
    ap.add_argument("--cache-dir", help=argparse.SUPPRESS)
    ap.add_argument("--watch", action="append", default=[], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        sys.path.insert(0, os.path.join(ROOT, "python"))
        return child_check(args) if args.child == "check" else child_run(args)

    from remote_servers import FixtureUnavailable, fault_proxy, nginx
    command = " ".join([os.path.basename(sys.executable), os.path.relpath(os.path.abspath(__file__))] + sys.argv[1:])
    load_before = os.getloadavg()
    if not os.path.isdir(args.data):
        sys.exit(f"remote_bench: {args.data} is not a folder (make data)")
    workdir = tempfile.mkdtemp(prefix="remote_bench-", dir=args.workdir)
    try:
        shards, n_shards, sizes, idx_bytes = pack(args.data, workdir, args)
        tar_bytes = sum(sizes)
        local_spec = os.path.join(shards, f"s-{{0..{n_shards - 1}}}.tar")
        print(f"remote_bench: {args.data} packed (stoker pack --keep --shard-count {args.shards} --shuffle 0): "
              f"{n_shards} shards, {tar_bytes / 1e6:.1f} MB of .tar ({min(sizes) / 1e6:.2f}-{max(sizes) / 1e6:.2f} MB "
              f"each) + {idx_bytes / 1e3:.0f} kB of .idx sidecars", flush=True)
        print(f"remote_bench: batch {args.batch_size}, {args.threads} threads, shuffle_window={args.window}, "
              f"remote_connections={args.connections}, proxy delay {args.delay_ms} ms per request; "
              f"{args.rounds} rounds of [local, remote] (alternating), each run a fresh process: cold epoch + "
              f"{args.epochs} steady epochs; load average before: {fmt_list(load_before)}", flush=True)
        with nginx(shards, os.path.join(workdir, "nginx")) as web, \
                fault_proxy(web.port, {"delay_ms": args.delay_ms}, os.path.join(workdir, "proxy", "proxy.log")) as px:
            servers = Servers(web, px)
            remote_spec = px.url + f"/s-{{0..{n_shards - 1}}}.tar"
            check = run_child(child_args(args, "check") + ["--local-spec", local_spec, "--remote-spec", remote_spec],
                              "first-batch check")
            print(f"remote_bench: first batch local vs remote: images {check['shape']} {check['dtype']} "
                  f"{'equal' if check['images_equal'] else 'DIFFER'}, labels "
                  f"{'equal' if check['labels_equal'] else 'DIFFER'} ({check['labels']}...)", flush=True)
            if not (check["images_equal"] and check["labels_equal"]):
                sys.exit("remote_bench: local and remote first batches differ; the comparison would not be of the "
                         "same work")
            rounds = []
            for r in range(args.rounds):
                order = ["local", "remote"] if r % 2 == 0 else ["remote", "local"]
                res = {}
                for kind in order:
                    res[kind] = measured_run(servers, args, local_spec if kind == "local" else remote_spec,
                                             what=f"{kind} run")
                    x = res[kind]
                    print(f"  round {r + 1}: {kind:6s} steady {x['steady_per_s']:7.1f} images/s "
                          f"(epochs {fmt_list(per_epoch(x, 'images_per_s'), '{:.0f}')}), cold epoch "
                          f"{x['cold_per_s']:7.1f} images/s; other processes {x['other_cores']:.2f} cores, irq+softirq "
                          f"{x['irq_cores']:.2f}, steal {x['steal_cores']:.2f}",
                          flush=True)
                res["order"] = order
                rounds.append(res)
            # order check: every run saw the same label sequence per epoch
            def order_of(run):
                return [ep["labels_sha1"] for ep in run["epochs"]]
            orders_equal = all(order_of(rd[k]) == order_of(rounds[0]["local"])
                               for rd in rounds for k in ("local", "remote"))
            full = None
            if not args.no_full_shuffle:
                full = {k: measured_run(servers, args, s, window=0, what=f"{k} shuffle_window=0 run")
                        for k, s in (("local", local_spec), ("remote", remote_spec))}
                print(f"  shuffle_window=0: local {full['local']['steady_per_s']:.1f}, remote "
                      f"{full['remote']['steady_per_s']:.1f} images/s", flush=True)
            cache_dir = os.path.join(workdir, "cache")
            cache1 = measured_run(servers, args, remote_spec, cache_dir=cache_dir, what="cache_dir run 1")
            cache2 = measured_run(servers, args, remote_spec, cache_dir=cache_dir, what="cache_dir run 2")
            print(f"  cache_dir: run 1 steady {cache1['steady_per_s']:.1f} images/s, run 2 "
                  f"{cache2['steady_per_s']:.1f} images/s", flush=True)
            proxy_cpu_total = px.cpu_seconds()
        load_after = os.getloadavg()
    except FixtureUnavailable as e:
        sys.exit(f"remote_bench: {e}")
    else:
        report(args, command, n_shards, sizes, tar_bytes, idx_bytes, check, rounds, orders_equal, full, cache1,
               cache2, proxy_cpu_total, load_before, load_after)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def report(args, command, n_shards, sizes, tar_bytes, idx_bytes, check, rounds, orders_equal, full, cache1, cache2,
           proxy_cpu_total, load_before, load_after):
    n = len(rounds)
    loc = [rd["local"] for rd in rounds]
    rem = [rd["remote"] for rd in rounds]
    ratios = [b["steady_per_s"] / a["steady_per_s"] for a, b in zip(loc, rem)]
    cold_ratios = [b["cold_per_s"] / a["cold_per_s"] for a, b in zip(loc, rem)]
    images = loc[0]["epochs"][0]["images"]

    print(f"\ncommand: {command}")
    print(f"machine: {len(os.sched_getaffinity(0))} cores available, {cpu_model()}; Python "
          f"{platform.python_version()}, Linux {platform.release()}; load average before "
          f"{fmt_list(load_before)}, after {fmt_list(load_after)}")
    print(f"stoker: {module_info()}")
    print(f"data: {args.data}: {images} images an epoch in {n_shards} shards, {tar_bytes / 1e6:.1f} MB of .tar "
          f"({min(sizes) / 1e6:.2f}-{max(sizes) / 1e6:.2f} MB), {idx_bytes / 1e3:.0f} kB .idx; batch "
          f"{args.batch_size}, {args.threads} threads, shuffle_window={args.window}; RandomResizedCrop(224) + "
          f"RandomHorizontalFlip + Normalize, float32 NCHW; loopback HTTP: nginx behind fault_proxy.py, "
          f"{args.delay_ms} ms added per request; first batch equal: "
          f"{check['images_equal'] and check['labels_equal']}; "
          f"same label order every epoch, every run: {orders_equal}")

    print("\n| round | order | local images/s (steady) | remote images/s (steady) | remote / local | "
          "local cold epoch | remote cold epoch | cold remote / local | "
          "other processes' load (cores, local / remote) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for i, (a, b) in enumerate(zip(loc, rem)):
        print(f"| {i + 1} | {' then '.join(rounds[i]['order'])} | {a['steady_per_s']:.0f} | {b['steady_per_s']:.0f} | "
              f"{ratios[i]:.3f} | {a['cold_per_s']:.0f} | {b['cold_per_s']:.0f} | {cold_ratios[i]:.3f} | "
              f"{a['other_cores']:.2f} / {b['other_cores']:.2f} |")
    print(f"| median | | {median([x['steady_per_s'] for x in loc]):.0f} | "
          f"{median([x['steady_per_s'] for x in rem]):.0f} | "
          f"**{median(ratios):.3f}** | {median([x['cold_per_s'] for x in loc]):.0f} | "
          f"{median([x['cold_per_s'] for x in rem]):.0f} | {median(cold_ratios):.3f} | |")

    # Where the time goes, per steady epoch (medians over the rounds' epochs).
    def med_ep(runs, f):
        return median([f(ep) for x in runs for ep in x["epochs"][1:]])

    def ext(ep, k):
        return ep["ext_cpu_s"].get(k, 0.0)

    print("\n| per steady epoch (median) | local | remote |")
    print("|---|---:|---:|")
    rows = [
        ("seconds", lambda ep: ep["seconds"], "{:.3f}"),
        ("first batch of the epoch (s)", lambda ep: ep["first_batch_s"], "{:.3f}"),
        ("consumer_wait_s (the loop waited for a batch)", lambda ep: ep["consumer_wait_s"], "{:.3f}"),
        ("loader process CPU s (workers + fetcher + loop)", lambda ep: ep["cpu_s"], "{:.2f}"),
        ("  of which system (kernel) s", lambda ep: ep["sys_s"], "{:.2f}"),
        ("  of which worker threads (stoker-w*) s", lambda ep: ep["threads"]["workers"], "{:.2f}"),
        ("  of which fetcher threads (stoker-fetch) s", lambda ep: ep["threads"]["fetchers"], "{:.2f}"),
        ("  of which the rest (Python loop, ...) s", lambda ep: ep["threads"]["rest"], "{:.2f}"),
        ("  minor page faults / image", lambda ep: ep["minor_faults"] / ep["images"], "{:.1f}"),
        ("proxy CPU s", lambda ep: ext(ep, "proxy"), "{:.2f}"),
        ("nginx CPU s", lambda ep: ext(ep, "nginx"), "{:.2f}"),
        ("CPU ms per image, loader + proxy + nginx",
         lambda ep: 1000 * (ep["cpu_s"] + ext(ep, "proxy") + ext(ep, "nginx")) / ep["images"], "{:.3f}"),
        ("machine irq + softirq (cores)", lambda ep: ep["machine"]["irq"] / ep["seconds"], "{:.2f}"),
        ("machine steal (cores)", lambda ep: ep["machine"]["steal"] / ep["seconds"], "{:.2f}"),
        ("other processes (cores: another job on the machine)", lambda ep: ep["other_cores"], "{:.2f}"),
    ]
    for name, f, fm in rows:
        print(f"| {name} | {fm.format(med_ep(loc, f))} | {fm.format(med_ep(rem, f))} |")
    for name, k, fm in (("fetch_wait_s (workers waited for bytes)", "fetch_wait_s", "{:.3f}"),
                        ("requests", "requests", "{:.0f}"), ("retries", "retries", "{:.0f}"),
                        ("stray reads", "stray_reads", "{:.0f}"),
                        ("bytes fetched / .tar bytes", "bytes_fetched", None)):
        v = med_ep(rem, lambda ep: ep["delta"][k])
        print(f"| {name} | | {v / tar_bytes:.4f}× |" if fm is None else f"| {name} | | {fm.format(v)} |")

    print("\n| remote run | cold epoch: bytes / .tar bytes (incl. .idx) | requests (cold, steady each) | "
          "steady bytes / .tar bytes (each) | nginx body bytes / stoker bytes | latency p50 / p99 (ms) | "
          "prefetch depth (end) | shard fetch / consume s (end) | proxy CPU s (run) | time to first batch (s) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    bytes_ratios = []
    for i, x in enumerate(rem):
        e = x["epochs"]
        # An epoch's bytes: those fetched during it, less what it fetched ahead for the next epoch, plus
        # what the previous one fetched ahead for it (stats()["remote"]["fetched_ahead_bytes"]).
        own = [ep["delta"]["bytes_fetched"] - ep["delta"].get("fetched_ahead_bytes", 0)
               + (e[k - 1]["delta"].get("fetched_ahead_bytes", 0) if k else 0) for k, ep in enumerate(e)]
        cold = own[0] / tar_bytes
        steady = [b / tar_bytes for b in own[1:]]
        bytes_ratios += [cold] + steady
        total = sum(ep["delta"]["bytes_fetched"] for ep in e)
        last = e[-1]["remote"]
        print(f"| round {i + 1} | {cold:.4f}× | {e[0]['delta']['requests']}, "
              f"{'/'.join(str(ep['delta']['requests']) for ep in e[1:])} | {fmt_list(steady, '{:.4f}')} | "
              f"{x['nginx_body_bytes'] / total:.4f} | {last['latency_p50_ms']:.1f} / {last['latency_p99_ms']:.1f} | "
              f"{last['prefetch_depth']} | {last.get('shard_fetch_s', float('nan')):.3f} / "
              f"{last.get('shard_consume_s', float('nan')):.3f} | {sum(ext(ep, 'proxy') for ep in e):.2f} | "
              f"{x['ttfb_s']:.3f} |")
    print("\n| remote run | steady epochs: images/s | fetch_wait_s | first batch (s) | other processes (cores) |")
    print("|---|---:|---:|---:|---:|")
    for i, x in enumerate(rem):
        e = x["epochs"][1:]
        print(f"| round {i + 1} | {fmt_list([ep['images_per_s'] for ep in e], '{:.0f}')} | "
              f"{fmt_list([ep['delta']['fetch_wait_s'] for ep in e], '{:.3f}')} | "
              f"{fmt_list([ep['first_batch_s'] for ep in e], '{:.3f}')} | "
              f"{fmt_list([ep['other_cores'] for ep in e], '{:.2f}')} |")
    # Epochs during which nothing else ran (other processes < QUIET cores): a second look on a shared machine.
    quiet = {k: [ep["images_per_s"] for x in runs for ep in x["epochs"][1:] if ep["other_cores"] < QUIET]
             for k, runs in (("local", loc), ("remote", rem))}
    if quiet["local"] and quiet["remote"]:
        print(f"\nquiet steady epochs only (other processes < {QUIET} cores): local {len(quiet['local'])} epochs, "
              f"median {median(quiet['local']):.0f} images/s; remote {len(quiet['remote'])} epochs, median "
              f"{median(quiet['remote']):.0f} images/s; ratio of medians "
              f"{median(quiet['remote']) / median(quiet['local']):.3f}×")
    else:
        print(f"\nquiet steady epochs only (other processes < {QUIET} cores): local {len(quiet['local'])}, remote "
              f"{len(quiet['remote'])}: not enough for a ratio")
    print(f"\nprefetch log of the last remote run: {rem[-1]['epochs'][-1]['remote']['prefetch_log'][:6]}"
          f"{' ...' if len(rem[-1]['epochs'][-1]['remote']['prefetch_log']) > 6 else ''}")

    if full:
        a, b = full["local"], full["remote"]
        print(f"\nshuffle_window=0 (whole-epoch shuffle across all {n_shards} shards; remote holds the set in memory), "
              f"one pair, not in the verdict: local {a['steady_per_s']:.0f}, remote {b['steady_per_s']:.0f} images/s "
              f"steady ({b['steady_per_s'] / a['steady_per_s']:.3f}×); cold {a['cold_per_s']:.0f} / "
              f"{b['cold_per_s']:.0f}; remote bytes per steady epoch "
              f"{fmt_list([ep['delta']['bytes_fetched'] / tar_bytes for ep in b['epochs'][1:]], '{:.4f}')}× .tar; "
              f"fetch_wait_s per steady epoch "
              f"{fmt_list([ep['delta']['fetch_wait_s'] for ep in b['epochs'][1:]], '{:.3f}')}")

    print("\n| cache_dir run | epoch | images/s | bytes fetched | requests | cache_dir hits / misses | bytes written | "
          "other processes (cores) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, x in (("1 (empty cache)", cache1), ("2 (fresh process, same cache_dir)", cache2)):
        for ep in x["epochs"]:
            d = ep["delta"]
            print(f"| {name} | {ep['epoch']}{' (cold)' if ep['epoch'] == 0 else ''} | {ep['images_per_s']:.0f} | "
                  f"{d['bytes_fetched']} | {d['requests']} | {d['cache_dir_hits']} / {d['cache_dir_misses']} | "
                  f"{d['cache_dir_bytes_written']} | {ep['other_cores']:.2f} |")
    cache_later = [ep["delta"]["bytes_fetched"] for ep in cache1["epochs"][1:]]
    cache2_bytes = sum(ep["delta"]["bytes_fetched"] for ep in cache2["epochs"])
    print(f"cache_dir run 2's requests by method (nginx log): {cache2['nginx_by_method']}; steady images/s, "
          f"cache_dir run 1 / run 2 / median local: {cache1['steady_per_s']:.0f} / {cache2['steady_per_s']:.0f} / "
          f"{median([x['steady_per_s'] for x in loc]):.0f}")
    print(f"proxy CPU over the whole bench: {proxy_cpu_total:.2f} s")

    verdicts = [
        (median(ratios) >= TARGET_RATE,
         f"remote / local images/s (steady epochs, median of {n} same-round ratios: {fmt_list(ratios, '{:.3f}')}) "
         f"= {median(ratios):.3f}× (target ≥ {TARGET_RATE}×)"),
        (max(bytes_ratios) <= TARGET_BYTES,
         f"bytes fetched per epoch / .tar bytes: max {max(bytes_ratios):.4f}× over every remote epoch (the cold "
         f"epochs' include the .idx sidecars; shards fetched ahead count for the epoch they were fetched for; "
         f"target ≤ {TARGET_BYTES}×)"),
        (all(b == 0 for b in cache_later),
         f"cache_dir: epochs after the first fetched {cache_later} bytes (target 0)"),
        (orders_equal and check["images_equal"] and check["labels_equal"],
         "local and remote: first batch equal, label order equal every epoch of every run"),
    ]
    busy = [i + 1 for i, rd in enumerate(rounds)
            if max(rd["local"]["other_cores"], rd["remote"]["other_cores"]) >= QUIET]
    print()
    for ok, line in verdicts:
        print(f"{'PASS' if ok else 'FAIL'}: {line}")
    if busy:
        print(f"WARNING: other processes used >= {QUIET} cores during round(s) {', '.join(map(str, busy))} (another "
              f"job on this {len(os.sched_getaffinity(0))}-core machine): those rounds' images/s compare "
              f"different machines, so the images/s verdict is not a clean measurement; rerun when the machine "
              f"is idle")
    print(f"info: cache_dir second run (fresh process): {cache2_bytes} bytes fetched, "
          f"{sum(ep['delta']['requests'] for ep in cache2['epochs'])} requests")

    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": command, "stoker": module_info(), "settings": vars(args),
                       "shards": {"count": n_shards, "sizes": sizes, "tar_bytes": tar_bytes, "idx_bytes": idx_bytes},
                       "check": check, "orders_equal": orders_equal,
                       "rounds": rounds, "ratios": ratios, "cold_ratios": cold_ratios, "full_shuffle": full,
                       "cache_dir": [cache1, cache2], "proxy_cpu_s": proxy_cpu_total,
                       "load_before": load_before, "load_after": load_after,
                       "verdicts": [{"pass": ok, "what": line} for ok, line in verdicts],
                       "busy_rounds": busy}, f, indent=1)
    if args.strict and not all(ok for ok, _ in verdicts):
        sys.exit(1)


if __name__ == "__main__":
    main()
