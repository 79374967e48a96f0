#!/usr/bin/env python3
"""Are the doctor's predictions right? Runs `stoker doctor` on training loops
with a known bottleneck (tests/python/doctor_scenarios.py), applies each
suggestion it predicts a rate for, runs the changed loop (three times: the
median is the measured rate), and compares it with the predicted range. N runs per scenario; prints every
prediction beside its measurement and the hit rate.

    python3 bench/doctor_bench.py [--runs 5] [--data DIR] [--build build]

Scenarios:
  decode   stoker loader over 640x480 q95 JPEGs, a 1 ms step per batch of 16: input-bound
           on decode. Suggestions applied: cache="decoded", pack --max-side 256, pack --lossless.
  compute  stoker loader, a 40 ms step per batch of 16: compute-bound. The doctor states the
           most any input-side change can gain (all of the wait); applying cache="decoded"
           checks that ceiling.
The target (issue: the doctor must be right without help): each applied
suggestion measured inside its predicted range in at least 4 of 5 runs, with
ranges no wider than +-25%.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCENARIOS = os.path.join(ROOT, "tests", "python", "doctor_scenarios.py")
PY = sys.executable


def env():
    return dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))


def scenario(mode, data, seconds, repeat=3):
    """The loop's rate after its first epoch: the median of `repeat` runs (the machine's noise)."""
    rates = []
    for _ in range(repeat):
        out = subprocess.run([PY, SCENARIOS, mode, data, "--seconds", str(seconds)], env=env(), check=True,
                             capture_output=True, text=True, timeout=600).stdout
        rates.append(json.loads(out.strip().splitlines()[-1])["rate_after_first_epoch"])
    return sorted(rates)[len(rates) // 2]


def doctor(cli, mode, data, seconds, tmp):
    js = os.path.join(tmp, f"{mode}.json")
    p = subprocess.run([cli, "doctor", "-q", "--report", "", "--json", js, "--", PY, SCENARIOS, mode, data,
                        "--seconds", str(seconds)], env=env(), capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        sys.exit(f"doctor failed: {p.stdout}\n{p.stderr}")
    with open(js) as f:
        return json.load(f)


def pack(cli, src, out, *flags):
    if not os.path.exists(out + "-0000.tar"):
        subprocess.run([cli, "pack", src, out + "-%04d.tar", "--shard-count", "2", *flags], check=True,
                       capture_output=True)
    return out + "-{0000..0001}.tar"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--data", help="scenario data (made here when missing)")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--seconds", type=float, default=8.0, help="length of each training run")
    args = ap.parse_args()
    cli = os.path.join(args.build, "tools", "stoker")
    tmp = tempfile.mkdtemp(prefix="stoker-doctor-bench-")
    data = args.data or os.path.join(tmp, "data")
    if not os.path.isdir(os.path.join(data, "large")):
        subprocess.run([PY, SCENARIOS, "make-data", data], env=env(), check=True)
    large, small = os.path.join(data, "large"), os.path.join(data, "small")
    applied = {  # suggestion text -> how to run the loop with it applied
        'cache="decoded"': lambda: scenario("decoded", large, args.seconds),
        "--max-side 256": lambda: scenario("packed", pack(cli, large, os.path.join(tmp, "p256"), "--max-side", "256"),
                                           args.seconds),
        "--lossless": lambda: scenario("packed", pack(cli, large, os.path.join(tmp, "ll"), "--lossless"),
                                       args.seconds),
    }
    rows, hits, total, widths = [], {}, {}, []
    for run in range(args.runs):
        r = doctor(cli, "decode", large, args.seconds, tmp)
        for s in r.get("suggestions", []):
            if s["predicted_rate"] <= 0:
                continue
            key = next((k for k in applied if k in s["action"]), None)
            if key is None:
                continue
            measured = applied[key]()
            lo, hi, mid = s["predicted_lo"], s["predicted_hi"], s["predicted_rate"]
            hit = lo <= measured <= hi
            width = (hi - lo) / 2 / mid
            widths.append(width)
            hits[key] = hits.get(key, 0) + hit
            total[key] = total.get(key, 0) + 1
            m = re.search(r"round by round \(quartiles [0-9.]+-[0-9.]+x\), ([0-9]+) samples/s", s["basis"])
            print(f"decode run {run}: {key}: predicted {lo:.0f}-{hi:.0f}, measured {measured:.0f}; the probe's own "
                  f"rate {m.group(1) if m else '?'}", flush=True)
            rows.append(("decode", run, r["verdict"], f"{r['rate']:.0f}", key, f"{mid:.0f}", f"{lo:.0f}-{hi:.0f}",
                         f"±{100 * width:.0f}%", f"{measured:.0f}", f"{100 * (measured / mid - 1):+.0f}%",
                         "yes" if hit else "NO", f"{r.get('probe_s', 0):.1f}"))
        # Compute-bound: the doctor's ceiling for any input-side change.
        c = doctor(cli, "compute", small, args.seconds, tmp)
        ceiling = next((float(m.group(1)) for s in c.get("suggestions", [])
                        for m in [re.search(r"can gain more than ([0-9.]+)x", s["basis"])] if m), None)
        measured = scenario("decoded-compute", small, args.seconds)
        key = "compute: ceiling"
        ok = ceiling is not None and c["verdict"].startswith("compute-bound") and measured <= c["rate"] * ceiling * 1.10
        hits[key] = hits.get(key, 0) + ok
        total[key] = total.get(key, 0) + 1
        rows.append(("compute", run, c["verdict"], f"{c['rate']:.0f}", 'cache="decoded" (ceiling)',
                     "-", f"<= {c['rate'] * (ceiling or 0):.0f}", "-", f"{measured:.0f}", "-", "yes" if ok else "NO", "-"))
    print("| scenario | run | verdict | run rate | applied | predicted | range | width | measured | vs predicted "
          "| inside | probes s |")
    print("|---|---:|---|---:|---|---:|---:|---:|---:|---:|---|---:|")
    for row in rows:
        print("| " + " | ".join(str(x) for x in row) + " |")
    print()
    for k in total:
        print(f"{k}: inside the predicted range in {hits[k]} of {total[k]} runs")
    if widths:
        print(f"range half-width: median ±{100 * sorted(widths)[len(widths) // 2]:.0f}%, widest ±{100 * max(widths):.0f}%")
    print("(the compute ceiling counts as inside when the changed loop ran at most 10% above it: the runs' own noise)")


if __name__ == "__main__":
    main()
