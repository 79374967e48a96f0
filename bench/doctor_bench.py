#!/usr/bin/env python3
"""Is the doctor right? Runs `stoker doctor` on each known-truth scenario of bench/doctor_scenarios/ (training
scripts with one known bottleneck), prints its verdict against the truth, then applies every suggestion it
predicts a rate for and runs the changed script, in rounds with the script as it is (--repeat rounds: medians),
and prints the rate the script's own clock measured against the predicted range, and its gain over the
script as it is in the same rounds against the predicted gain (the prediction over the doctor's rate): the
machine's load drifts between minutes, which the gain cancels.

    python3 bench/doctor_bench.py [--build build] [--data DIR] [--only a,b] [--seconds 10] [--repeat 3]

How a suggestion is applied: the port to stoker's DataLoader by applying the doctor's own diff (its two import
lines) to a copy of the script; the others through the script's --fix (cache="decoded", cache="ram",
threads=N, dtype="uint8", the training set packed with `stoker pack` and loaded from its shards).
The machine's load is measured around every run: the cores other processes used (all busy cores, from
/proc/stat, less the run's own CPU).
The target (issue 35): every verdict right, and the measured rate inside the predicted range in at least 80%
of the suggestions.
"""
import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = os.path.join(ROOT, "bench", "doctor_scenarios")
PY = sys.executable

# name: (script, the truth: the verdict the doctor must give)
SCENARIOS = {
    "storage": ("storage.py", "input-bound on storage"),
    "decode": ("decode.py", "input-bound on decode"),
    "transforms": ("transforms.py", "input-bound on transforms"),
    "collate": ("collate.py", "input-bound on collate"),
    "h2d": ("h2d.py", "input-bound on host-to-device copy"),
    "step": ("step.py", "compute-bound (the model step)"),
    "between_epochs": ("between_epochs.py", "input-bound on decode"),
}


def env():
    return dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))


def busy_ticks():
    """All cores' busy and total jiffies, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return sum(v[:8]) - idle, sum(v[:8])


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


class Load:
    """The cores other processes used while something ran: busy cores from /proc/stat less our children's CPU."""
    samples = []

    def __enter__(self):
        self.b0, self.t0 = busy_ticks()
        self.c0 = children_cpu()
        self.w0 = time.monotonic()
        return self

    def __exit__(self, *exc):
        b1, t1 = busy_ticks()
        wall = time.monotonic() - self.w0
        cores = os.cpu_count() or 1
        busy = cores * (b1 - self.b0) / max(1, t1 - self.t0)
        ours = (children_cpu() - self.c0) / max(wall, 1e-6)
        self.others = max(0.0, busy - ours)
        Load.samples.append(self.others)


def script_json(text):
    for line in reversed(text.splitlines()):
        if line.startswith('{"scenario"'):
            return json.loads(line)
    return None


def run_script(path, data, seconds, fix=""):
    cmd = [PY, path, data, "--seconds", str(seconds)] + (["--fix", fix] if fix else [])
    with Load() as load:
        p = subprocess.run(cmd, env=env(), capture_output=True, text=True, timeout=600)
    out = script_json(p.stdout)
    if p.returncode != 0 or out is None:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    out["others"] = load.others
    return out


def doctor(cli, path, data, seconds, tmp, name):
    js = os.path.join(tmp, f"{name}.json")
    cmd = [cli, "doctor", "-q", "--report", os.path.join(tmp, f"{name}.html"), "--json", js, "--",
           PY, path, data, "--seconds", str(seconds)]
    with Load() as load:
        p = subprocess.run(cmd, env=env(), capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        sys.exit(f"doctor failed on {name}:\n{p.stdout}\n{p.stderr}")
    with open(js) as f:
        r = json.load(f)
    r["script"] = script_json(p.stdout)
    r["terminal"] = p.stdout
    r["others_run"] = load.others
    return r


def apply_diff(text, diff):
    """The script `text` with a unified diff of zero context lines (the doctor's port_diff) applied."""
    lines = text.splitlines(keepends=True)
    hunks = []
    for h in re.finditer(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@\n((?:[-+].*\n?)*)", diff, re.M):
        start, count = int(h.group(1)), int(h.group(2) or 1)
        body = h.group(3).splitlines(keepends=True)
        old = [x[1:] for x in body if x.startswith("-")]
        new = [x[1:] for x in body if x.startswith("+")]
        hunks.append((start, count, old, new))
    for start, count, old, new in sorted(hunks, reverse=True):
        at = start - 1 if count else start
        if [x.rstrip("\n") for x in lines[at:at + count]] != [x.rstrip("\n") for x in old]:
            raise ValueError(f"the diff does not apply at line {start}")
        lines[at:at + count] = [x if x.endswith("\n") else x + "\n" for x in new]
    return "".join(lines)


def ported(script, diff, tmp):
    """A copy of the scenario (and common.py beside it) with the doctor's port diff applied."""
    d = os.path.join(tmp, "ported")
    os.makedirs(d, exist_ok=True)
    shutil.copy(os.path.join(HERE, "common.py"), d)
    with open(os.path.join(HERE, script)) as f:
        text = apply_diff(f.read(), diff)
    out = os.path.join(d, script)
    with open(out, "w") as f:
        f.write(text)
    return out


def pack(cli, src, out, *flags):
    if not os.path.exists(out + "-0000.tar"):
        subprocess.run([cli, "pack", src, out + "-%04d.tar", "--shard-count", "2", *flags], check=True,
                       capture_output=True)
    return out + "-{0000..0001}.tar"


def fix_for(action):
    """The scenario's --fix that applies a suggestion (its action text), "port" for the port, or None."""
    if action.startswith("stoker.DataLoader and stoker.datasets"):
        return "port"
    if action.startswith('cache="decoded"'):
        return "decoded"
    if action.startswith('cache="ram"'):
        return "ram"
    m = re.match(r"threads=(\d+) \(now", action)
    if m:
        return f"threads={m.group(1)}"
    if action.startswith('dtype="uint8"'):
        return "uint8"
    if "--max-side 256" in action:
        return "pack256"
    if "--lossless" in action:
        return "lossless"
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--data", help="the scenarios' data (made there when missing; default: a folder in /tmp)")
    ap.add_argument("--only", default="", help="comma-separated scenario names")
    ap.add_argument("--seconds", type=float, default=8.0, help="each run's training time")
    ap.add_argument("--repeat", type=int, default=3,
                    help="rounds of the script as it is and each applied change (medians are measured)")
    args = ap.parse_args()
    cli = os.path.join(args.build, "tools", "stoker")
    sys.path.insert(0, HERE)
    from common import make_data
    data = args.data or os.path.join(tempfile.gettempdir(), "stoker-doctor-scenarios")
    t_start = time.monotonic()
    make_data(data)
    tmp = tempfile.mkdtemp(prefix="stoker-doctor-bench-")
    with open("/proc/loadavg") as f:
        load_start = f.read().split()[:3]
    names = [n for n in (args.only.split(",") if args.only else SCENARIOS)]
    verdicts, predictions = [], []
    for name in names:
        script, truth = SCENARIOS[name]
        path = os.path.join(HERE, script)
        t0 = time.monotonic()
        r = doctor(cli, path, data, args.seconds, tmp, name)
        verdict = r["verdict"] or "none"
        own = r["script"] or {}
        between = ""
        if name == "between_epochs":
            between = f"{r['loop']['between_s']:.1f} / {own.get('between_s', 0):.1f}"
        verdicts.append((name, truth, verdict, "yes" if verdict == truth else "NO", f"{r['rate']:.0f}",
                         f"{own.get('rate', 0):.0f}", between, f"{r['cpu']['other_processes']:.2f}",
                         f"{r.get('probe_s', 0):.0f}"))
        print(f"{name}: {verdict} (truth: {truth}); doctor {r['rate']:.0f} samples/s, the script's clock "
              f"{own.get('rate', 0):.0f}; other processes {r['cpu']['other_processes']:.2f} cores", flush=True)
        applied = []  # (suggestion, the script to run, its --fix)
        for s in r.get("suggestions", []):
            if s["predicted_rate"] <= 0:
                continue
            fix = fix_for(s["action"])
            if fix is None or (fix in ("pack256", "lossless") and name != "between_epochs"):
                predictions.append((name, s["action"][:48], f"{s['predicted_rate']:.0f} ({s['predicted_lo']:.0f}-"
                                    f"{s['predicted_hi']:.0f})", "-", "not applied", "-", "-", "-", "-"))
                continue
            if fix == "port":
                applied.append((s, "port (the doctor's diff)", ported(script, r["port_diff"], tmp), ""))
            elif fix in ("pack256", "lossless"):
                flags = ("--max-side", "256") if fix == "pack256" else ("--lossless",)
                shards = pack(cli, os.path.join(data, "large"), os.path.join(tmp, fix), *flags)
                applied.append((s, fix, path, "shards=" + shards))
            else:
                applied.append((s, fix, path, fix))
        # Rounds: the script as it is, then each change, so that each change's gain is taken against the
        # script's own rate in the same minute (the machine's load drifts between minutes).
        base, runs = [], [[] for _ in applied]
        for _ in range(args.repeat if applied else 0):
            base.append(run_script(path, data, args.seconds))
            for k, (_, _, target, fixarg) in enumerate(applied):
                runs[k].append(run_script(target, data, args.seconds, fixarg))
        for (s, label, _, _), rs in zip(applied, runs):
            lo, hi, mid = s["predicted_lo"], s["predicted_hi"], s["predicted_rate"]
            measured = statistics.median(x["rate"] for x in rs)
            gain = statistics.median(x["rate"] / b["rate"] for x, b in zip(rs, base) if b["rate"] > 0)
            glo, ghi = lo / r["rate"], hi / r["rate"]
            others = statistics.mean(x["others"] for x in rs)
            predictions.append((name, label, f"{mid:.0f} ({lo:.0f}-{hi:.0f})", f"{measured:.0f}",
                                "yes" if lo <= measured <= hi else "NO",
                                f"{mid / r['rate']:.2f}x ({glo:.2f}-{ghi:.2f}x)", f"{gain:.2f}x",
                                "yes" if glo <= gain <= ghi else "NO", f"{others:.2f}"))
            print(f"  {label}: predicted {mid:.0f} ({lo:.0f}-{hi:.0f}), {mid / r['rate']:.2f}x "
                  f"({glo:.2f}-{ghi:.2f}x); measured {measured:.0f} "
                  f"({', '.join('%.0f' % x['rate'] for x in rs)}), {gain:.2f}x the script as it is in the same "
                  f"rounds ({', '.join('%.0f' % b['rate'] for b in base)}); other processes {others:.2f} cores",
                  flush=True)
        print(f"  ({time.monotonic() - t0:.0f} s)", flush=True)
    print()
    print("| scenario | truth | verdict | right | doctor's rate | script's clock | between epochs, s (doctor / "
          "script) | other processes, cores | probes, s |")
    print("|---|---|---|---|---:|---:|---:|---:|---:|")
    for row in verdicts:
        print("| " + " | ".join(row) + " |")
    print()
    print("| scenario | applied | predicted, samples/s (range) | measured (script's clock, median) | inside | "
          "predicted gain (range) | measured gain (same rounds) | inside | other processes, cores |")
    print("|---|---|---:|---:|---|---:|---:|---|---:|")
    for row in predictions:
        print("| " + " | ".join(row) + " |")
    print()
    right = sum(v[3] == "yes" for v in verdicts)
    measured = [p for p in predictions if p[4] in ("yes", "NO")]
    inside = sum(p[4] == "yes" for p in measured)
    inside_gain = sum(p[7] == "yes" for p in measured)
    with open("/proc/loadavg") as f:
        load_end = f.read().split()[:3]
    print(f"verdicts right: {right} of {len(verdicts)}")
    if measured:
        print(f"predictions inside their range: the rate {inside} of {len(measured)} "
              f"({100 * inside / len(measured):.0f}%); the gain over the script as it is, measured in the same "
              f"rounds, {inside_gain} of {len(measured)} ({100 * inside_gain / len(measured):.0f}%)")
    if Load.samples:
        print(f"machine: {os.cpu_count()} cores; other processes used {statistics.mean(Load.samples):.2f} cores on "
              f"average over the runs (min {min(Load.samples):.2f}, max {max(Load.samples):.2f}); load average "
              f"{' '.join(load_start)} at the start, {' '.join(load_end)} at the end; "
              f"{(time.monotonic() - t_start) / 60:.1f} min in all")


if __name__ == "__main__":
    main()
