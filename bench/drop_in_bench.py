#!/usr/bin/env python3
"""Drop-in benchmark (issue 33): the torchvision training script, unmodified and ported to stoker by its two
import lines, against stoker's own Loader on the same pipeline.

Every configuration runs examples/train_torchvision.py (or its port,
examples/train_torchvision_stoker.py) as a user would, in a fresh process, with
`--model none --skip-eval --epochs 4 --batch-size 64 --workers 2
--train-crop-size 224 --warmup-steps 3` (the input pipeline alone, over the
whole set unless --max-steps bounds it), and reads its RESULT line: images/s
of the training epochs, each without its first 3 steps, and of each epoch (a
training run is many epochs: the table gives the whole run's rate, the first
epoch's, which reads the set once on either side, the second, where stoker's
RAM cache finishes its rewrite, and the later ones).

  A  unmodified script: torch DataLoader (2 worker processes, persistent), torchvision's ImageFolder,
     the standard train preset (RandomResizedCrop(224) + flip + PILToTensor + ConvertImageDtype + Normalize)
  B  the port (stoker.DataLoader, stoker.datasets.ImageFolder), same preset
  C  native stoker.Loader, the same pipeline in stoker's API (RandomResizedCrop(224), RandomHorizontalFlip(),
     Normalize(mean, std)), threads=2, batch 64, shuffle, cache="ram" without preload (the port's default), the
     same number of images, timed the same way
  D  A with --extra-transform python (a custom AddGaussianNoise(std=0.0) after Normalize: stoker cannot map it,
     so on B's side it runs as Python on stoker's threads)
  E  B with --extra-transform python
  F  A with --auto-augment ta_wide --random-erase 0.1 (the reference's usual recipe)
  G  B with --auto-augment ta_wide --random-erase 0.1
and, when built (make build), the plain libjpeg-turbo decode of every file on 2
threads (bench/decode_ceiling), as bench/loader_bench.py reports it.

Each round runs every configuration once, every other round in reverse order;
the table gives the median images/s over rounds and the same-round ratios
against the issue's targets (B/A >= 4, B/C >= 0.9, E/D >= 2; G/F reported).
Each run's image count is checked against what was asked. After the rounds,
one more run each of B and E (not timed in the table) reports the stoker
loader's stats(): where its time went.

    python3 bench/drop_in_bench.py data/sample --rounds 3      # make bench-drop-in
    python3 bench/drop_in_bench.py data/sample --quick         # smoke run: 1 round, 12 steps, no F/G
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from augment_bench import cpu_model, median  # noqa: E402
from loader_bench import MEAN, STD, decode_ceiling  # noqa: E402

ORIGINAL = os.path.join(ROOT, "examples", "train_torchvision.py")
PORT = os.path.join(ROOT, "examples", "train_torchvision_stoker.py")
IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")  # torchvision's
RECIPE = ["--auto-augment", "ta_wide", "--random-erase", "0.1"]
CONFIGS = {  # name -> (script or "native", extra arguments, description)
    "A": (ORIGINAL, [], "unmodified script (torch DataLoader, 2 workers), standard train preset"),
    "B": (PORT, [], "ported script (stoker.DataLoader), standard train preset"),
    "C": ("native", [], "native stoker.Loader, the same pipeline in stoker's API"),
    "D": (ORIGINAL, ["--extra-transform", "python"], "unmodified script + one custom Python transform"),
    "E": (PORT, ["--extra-transform", "python"], "ported script + one custom Python transform"),
    "F": (ORIGINAL, RECIPE, "unmodified script, TrivialAugmentWide + RandomErasing(0.1)"),
    "G": (PORT, RECIPE, "ported script, TrivialAugmentWide + RandomErasing(0.1)"),
}
RATIOS = [  # (numerator, denominator, target or None, what it says)
    ("B", "A", 4.0, "port / unmodified, standard preset"),
    ("B", "C", 0.9, "port / native stoker.Loader (within 10%)"),
    ("E", "D", 2.0, "port / unmodified, one Python transform at the end"),
    ("G", "F", None, "port / unmodified, TrivialAugmentWide + RandomErasing"),
]


# ---------------------------------------------------------------- children
def child_native(args):
    """C: stoker.Loader over the folder, iterated and timed as the script's RESULT is (each step's start is
    when it began waiting for its batch; the first --warmup-steps steps left out); prints a RESULT line."""
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import stoker
    # NOTE: the cache the port uses by default (stoker.DataLoader: cache="ram", no preload), so B/C is the
    # drop-in's own cost.
    loader = stoker.Loader(args.data, batch_size=args.batch_size, shuffle=True, seed=0, threads=args.workers,
                           cache="ram", preload=False,
                           transforms=[stoker.RandomResizedCrop(args.crop), stoker.RandomHorizontalFlip(),
                                       stoker.Normalize(MEAN, STD)], progress=False)
    images = seconds = waited = 0
    per_epoch, epoch_images = [], []
    w = args.warmup_steps
    for _ in range(args.epochs):
        sizes, starts, waits = [], [], []
        end = time.time()
        for i, (image, target) in enumerate(loader):
            starts.append(end)
            waits.append(time.time() - end)
            sizes.append(int(image.shape[0]))
            assert image.shape[1:] == (3, args.crop, args.crop), image.shape
            if args.max_steps and i + 1 >= args.max_steps:
                end = time.time()
                break
            end = time.time()
        s = end - starts[w]
        images, seconds, waited = images + sum(sizes[w:]), seconds + s, waited + sum(waits[w:])
        per_epoch.append(sum(sizes[w:]) / s)
        epoch_images.append(sum(sizes))
        print(f"native: {sum(sizes)} images", flush=True)
    print("RESULT " + json.dumps({"images_per_s": images / seconds, "images": images, "seconds": seconds,
                                  "data_wait_share": waited / seconds, "epochs_images_per_s": per_epoch,
                                  "epoch_images": epoch_images}), flush=True)


def child_stats(args, script_args):
    """Diagnostics: runs the ported script in this process and prints the stoker loaders' stats() after it."""
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import runpy
    import stoker.dataloader
    made = []
    init = stoker.dataloader.DataLoader.__init__

    def keep(self, *a, **k):
        init(self, *a, **k)
        made.append(self)
    stoker.dataloader.DataLoader.__init__ = keep
    sys.argv = [PORT] + script_args
    runpy.run_path(PORT, run_name="__main__")
    stats = made[0].stats()  # the training loader (made first)
    print("STATS " + json.dumps(stats, default=str), flush=True)


# ---------------------------------------------------------------- parent side
def cpu_busy_s():
    """(CPU seconds the whole machine was busy since boot, CPU seconds of this process's reaped children)."""
    import resource
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    busy = sum(fields[:8]) - fields[3] - fields[4]  # all but idle and iowait (guest time is inside user)
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return busy / os.sysconf("SC_CLK_TCK"), ru.ru_utime + ru.ru_stime


def script_args(args, extra):
    a = ["--data-path", args.data, "--model", "none", "--skip-eval", "--epochs", str(args.epochs), "--batch-size",
         str(args.batch_size), "--workers", str(args.workers), "--train-crop-size", str(args.crop),
         "--warmup-steps", str(args.warmup_steps), "--print-freq", "1000"]
    if args.max_steps:
        a += ["--max-steps", str(args.max_steps)]
    return a + extra


def expected_sizes(args):
    """The batch sizes an epoch over the folder gives (drop_last off), --max-steps applied."""
    n = sum(1 for _, _, files in os.walk(args.data, followlinks=True) for f in files
            if f.lower().endswith(IMG_EXTENSIONS))
    sizes = [args.batch_size] * (n // args.batch_size) + ([n % args.batch_size] if n % args.batch_size else [])
    return sizes[:args.max_steps] if args.max_steps else sizes


def env():
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join([os.path.join(ROOT, "python")] + ([e["PYTHONPATH"]] if e.get("PYTHONPATH")
                                                                          else []))
    return e


def run(name, args):
    script, extra, _ = CONFIGS[name]
    if script == "native":
        cmd = [sys.executable, os.path.abspath(__file__), args.data, "--child", "native", "--batch-size",
               str(args.batch_size), "--workers", str(args.workers), "--crop", str(args.crop), "--warmup-steps",
               str(args.warmup_steps), "--max-steps", str(args.max_steps), "--epochs", str(args.epochs)]
    else:
        cmd = [sys.executable, script] + script_args(args, extra)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env())
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-4000:])
        sys.exit(f"drop_in_bench: configuration {name} failed (exit {proc.returncode}): {' '.join(cmd)}")
    lines = proc.stdout.strip().splitlines()
    if not lines or not lines[-1].startswith("RESULT "):
        sys.exit(f"drop_in_bench: configuration {name} printed no RESULT line: {' '.join(cmd)}\n"
                 + "\n".join(lines[-5:]))
    res = json.loads(lines[-1][len("RESULT "):])
    # Correctness, not timing: the run read the images it was asked to.
    sizes = expected_sizes(args)
    want = sum(sizes[args.warmup_steps:]) * args.epochs
    if res["images"] != want:
        sys.exit(f"drop_in_bench: configuration {name} timed {res['images']} images, expected {want}")
    epochs = res.get("epoch_images")
    if epochs is None:  # the script's "train: N images in" lines, one per epoch
        epochs = [int(line.split(" train: ", 1)[1].split()[0]) for line in lines
                  if " train: " in line and " images in " in line]
    if epochs != [sum(sizes)] * args.epochs:
        sys.exit(f"drop_in_bench: configuration {name} read {epochs} images in its epochs, expected "
                 f"{[sum(sizes)] * args.epochs}")
    if len(res.get("epochs_images_per_s", [])) != args.epochs:
        sys.exit(f"drop_in_bench: configuration {name} gave no images/s for each of its {args.epochs} epochs")
    res["stderr"] = [x for x in proc.stderr.splitlines() if x.startswith("stoker:")]
    return res


def diagnostics(args, extra):
    """One run of the port (not in the table) with the stoker loader's stats() printed after it."""
    cmd = [sys.executable, os.path.abspath(__file__), args.data, "--child", "stats", "--"] + script_args(args, extra)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env())
    if proc.returncode != 0:
        return None, proc.stderr[-2000:]
    lines = proc.stdout.strip().splitlines()
    stats = next(json.loads(x[len("STATS "):]) for x in lines if x.startswith("STATS "))
    result = next(json.loads(x[len("RESULT "):]) for x in lines if x.startswith("RESULT "))
    return stats, result


def describe_stats(stats, result, images, workers):
    """One paragraph: where the loader's threads spent their time, per image."""
    def ms(key):
        v = stats.get(key)
        return f"{1000 * v / images:.2f}" if isinstance(v, (int, float)) else "?"
    wall = stats.get("wall_s") or 0.0
    py = stats.get("python_s") or 0.0
    busy = sum(stats.get(k) or 0.0 for k in ("read_s", "decode_s", "transform_s")) + py
    parts = [f"per image (thread-seconds summed over {workers} threads): read {ms('read_s')} ms, decode "
             f"{ms('decode_s')} ms, C++ transforms {ms('transform_s')} ms, Python {ms('python_s')} ms"]
    if busy:
        parts.append(f"Python's share of the threads' busy time {100 * py / busy:.0f}%")
    if wall:
        parts.append(f"threads busy {100 * busy / (workers * wall):.0f}% of {workers} x {wall:.2f} s wall")
        parts.append(f"consumer waited {100 * (stats.get('consumer_wait_s') or 0.0) / wall:.0f}% of the loader's "
                     f"wall")
    parts.append(f"script's RESULT {result['images_per_s']:.0f} images/s, data wait "
                 f"{100 * result['data_wait_share']:.0f}%")
    py_t = stats.get("python_transforms") or []
    if py_t:
        parts.append("in Python: " + "; ".join(f"{t.get('transform')} ({t.get('reason')})" if isinstance(t, dict)
                                              else str(t) for t in py_t))
    return "; ".join(parts)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", nargs="?", default=os.path.join(ROOT, "data", "sample"))
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds of every configuration")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--workers", type=int, default=2, help="DataLoader worker processes = stoker threads")
    ap.add_argument("--crop", type=int, default=224, help="--train-crop-size")
    ap.add_argument("--warmup-steps", type=int, default=3, help="steps left out of the timing at the start")
    ap.add_argument("--max-steps", type=int, default=0, help="steps per epoch (0: the whole set)")
    ap.add_argument("--epochs", type=int, default=4, help="epochs per run (each run a fresh process)")
    ap.add_argument("--configs", default="ABCDEFG", help="which configurations (default ABCDEFG)")
    ap.add_argument("--no-diagnostics", action="store_true", help="skip the stats() runs after the rounds")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="where bench/decode_ceiling is built")
    ap.add_argument("--quick", action="store_true", help="smoke run: 1 round, 12 steps, configurations A-E")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--child", choices=["native", "stats"], help=argparse.SUPPRESS)
    args, rest = ap.parse_known_args()
    if rest and args.child != "stats":
        ap.error(f"unrecognized arguments: {' '.join(rest)}")
    args.data = os.path.abspath(args.data)
    if args.child == "native":
        return child_native(args)
    if args.child == "stats":
        return child_stats(args, [x for x in rest if x != "--"])
    if args.quick:
        args.rounds, args.max_steps, args.epochs = 1, args.max_steps or 12, 1
        args.configs = "".join(c for c in args.configs if c in "ABCDE")
    configs = [c for c in CONFIGS if c in args.configs.upper()]
    sizes = expected_sizes(args)
    if len(sizes) <= args.warmup_steps:
        sys.exit(f"drop_in_bench: {len(sizes)} steps, not more than --warmup-steps {args.warmup_steps}")

    command = " ".join([os.path.basename(sys.executable), os.path.relpath(os.path.abspath(__file__))] + sys.argv[1:])
    ceiling_exe = os.path.join(args.build, "bench", "decode_ceiling")
    have_ceiling = os.path.exists(ceiling_exe)
    print(f"drop_in_bench: {args.data}: {sum(sizes)} images an epoch in {len(sizes)} steps of {args.batch_size} "
          f"({sum(sizes[args.warmup_steps:])} timed, after {args.warmup_steps} warm-up steps); {args.workers} "
          f"workers/threads; {args.rounds} round(s) of {', '.join(configs)}"
          f"{'' if have_ceiling else f'; no decode ceiling ({ceiling_exe} not built)'}", flush=True)
    runs = {c: [] for c in configs}
    ceilings = []
    busy0, ours0, t0 = *cpu_busy_s(), time.time()
    for r in range(args.rounds):
        for c in (configs if r % 2 == 0 else configs[::-1]):
            res = run(c, args)
            runs[c].append(res)
            print(f"  round {r + 1}: {c} {res['images_per_s']:8.1f} images/s ({res['images']} images in "
                  f"{res['seconds']:.2f} s, waited for data {100 * res['data_wait_share']:.0f}%)", flush=True)
        if have_ceiling:
            ceilings.append(decode_ceiling(args.data, args.workers, args)["images_per_s"])
            print(f"  round {r + 1}: decode ceiling ({args.workers} threads) {ceilings[-1]:8.1f} images/s", flush=True)

    busy1, ours1 = cpu_busy_s()
    # What else ran on the machine meanwhile (other processes' CPU, in cores): the runs compete with it.
    others = max(0.0, (busy1 - busy0) - (ours1 - ours0)) / (time.time() - t0)
    notes = sorted({line for c in configs for res in runs[c] for line in res["stderr"]})
    diag = {}
    if not args.no_diagnostics:
        for c in ("B", "E", "G"):
            if c in configs:
                stats, result = diagnostics(args, CONFIGS[c][1])
                diag[c] = (stats, result)

    # ------------------------------------------------------------ the report
    import torch
    import torchvision
    rate = {c: [x["images_per_s"] for x in runs[c]] for c in configs}
    # Each epoch's rate per round: epoch 1 reads the set once on either side (stoker's RAM cache fills and rewrites
    # what pays for itself), epoch 2 finishes the rewrite, later epochs run on the rewritten bytes.
    per = {c: [[x["epochs_images_per_s"][k] for x in runs[c]] for k in range(args.epochs)] for c in configs}
    print(f"\ncommand: {command}")
    print(f"machine: {cpu_model()}, {len(os.sched_getaffinity(0))} cores available ({os.cpu_count()} online); "
          f"Python {platform.python_version()}, torch {torch.__version__}, torchvision {torchvision.__version__}, "
          f"Linux {platform.release()}; other processes used {others:.2f} cores on average during the rounds")
    print(f"each run: a fresh process; --model none --skip-eval --epochs {args.epochs} -b {args.batch_size} --workers "
          f"{args.workers} --train-crop-size {args.crop} --warmup-steps {args.warmup_steps}"
          f"{f' --max-steps {args.max_steps}' if args.max_steps else ''}: {sum(sizes[args.warmup_steps:])} images "
          f"timed of {sum(sizes)} per epoch; {args.rounds} round(s), alternating order\n")
    epoch_head = "".join(f" epoch {k + 1} |" for k in range(args.epochs)) if args.epochs > 1 else ""
    epoch_rule = "---:|" * (args.epochs if args.epochs > 1 else 0)
    print(f"| | configuration | images/s, all {args.epochs} epoch(s) (median) | per round |{epoch_head} "
          f"data wait (median) | × decode ceiling |")
    print("|---|---|---:|---|" + epoch_rule + "---:|---:|")
    ceil = median(ceilings) if ceilings else None
    for c in configs:
        wait = median([x["data_wait_share"] for x in runs[c]])
        xc = f"{median([a / b for a, b in zip(rate[c], ceilings)]):.2f}" if ceilings else ""
        cols = "".join(f" {median(per[c][k]):.1f} |" for k in range(args.epochs)) if args.epochs > 1 else ""
        print(f"| {c} | {CONFIGS[c][2]} | {median(rate[c]):.1f} | {', '.join(f'{x:.1f}' for x in rate[c])} |"
              f"{cols} {100 * wait:.0f}% | {xc} |")
    if ceilings:
        print(f"| | libjpeg-turbo full decode only ({args.workers} threads): the ceiling | {ceil:.1f} | "
              f"{', '.join(f'{x:.1f}' for x in ceilings)} |" + " |" * (args.epochs if args.epochs > 1 else 0)
              + " | 1.00 |")
    print(f"\n| ratio | what | same-round values, all epochs | median, all epochs |{epoch_head} target | |")
    print("|---|---|---|---:|" + epoch_rule + "---:|---|")
    verdicts = {}
    for num, den, target, what in RATIOS:
        if num not in configs or den not in configs:
            continue
        paired = [a / b for a, b in zip(rate[num], rate[den])]
        m = median(paired)
        by_epoch = [median([a / b for a, b in zip(per[num][k], per[den][k])]) for k in range(args.epochs)]
        verdict = "" if target is None else ("PASS" if m >= target else "FAIL")
        verdicts[f"{num}/{den}"] = {"paired": paired, "median": m, "by_epoch": by_epoch, "target": target,
                                    "verdict": verdict}
        cols = "".join(f" {x:.2f}× |" for x in by_epoch) if args.epochs > 1 else ""
        print(f"| {num}/{den} | {what} | {', '.join(f'{x:.2f}' for x in paired)} | {m:.2f}× |{cols} "
              f"{'' if target is None else f'≥ {target:g}×'} | {verdict} |")
    if notes:
        print("\nstoker said (stderr of the runs):")
        for line in notes:
            print(f"  {line}")
    if diag:
        print("\nstoker's stats() (one more run each of the port, not in the table):")
        for c, (stats, result) in diag.items():
            if stats is None:
                print(f"  {c}: the diagnostics run failed: {result}")
            else:
                print(f"  {c}: {describe_stats(stats, result, sum(sizes), args.workers)}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": command, "cpu_model": cpu_model(), "cores": len(os.sched_getaffinity(0)),
                       "runs": {c: [{k: v for k, v in x.items() if k != "stderr"} for x in runs[c]] for c in configs},
                       "ceilings": ceilings, "ratios": verdicts,
                       "stats": {c: s for c, (s, _) in diag.items()}}, f, indent=1, default=str)


if __name__ == "__main__":
    main()
