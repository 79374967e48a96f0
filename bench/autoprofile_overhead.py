#!/usr/bin/env python3
"""What stoker doctor's zero-code DataLoader timing costs per batch: one
torch DataLoader over a trivial in-memory dataset (num_workers=0, so the
batch itself costs as little as a DataLoader batch can) iterated, in
alternating rounds in one process, with torch's own iterator, with the
doctor's hook (python/stoker/_profiling.py's patch_dataloader, loaded by
path as the doctor's sitecustomize loads it, publishing into a temporary
STOKER_DOCTOR directory every 0.25 s as under the doctor), and wrapped in
stoker.profile (the same recorder; the hook stands aside). The hook is
switched on and off by swapping the three patched methods of
_BaseDataLoaderIter between rounds; each round runs the three in a rotated
order, one epoch each. Time is the loop thread's CPU time (time.thread_time:
on a shared machine, wall time also counts the time other processes held the
core). Prints the median over rounds of the time per batch and the median of
the per-round differences to plain torch (the cost per batch).

    python3 bench/autoprofile_overhead.py [--rounds 31] [--batches 3000] [--batch-size 1]
"""
import argparse
import importlib.util
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=31)
    ap.add_argument("--batches", type=int, default=3000, help="batches per setting per round (one epoch)")
    ap.add_argument("--batch-size", type=int, default=1)
    ap.add_argument("-v", "--verbose", action="store_true", help="print every round")
    args = ap.parse_args()

    channel = tempfile.mkdtemp(prefix="autoprofile-bench-")
    os.environ["STOKER_DOCTOR"] = channel  # the recorder publishes, as under the doctor
    import torch
    import torch.utils.data.dataloader as dl

    base = dl._BaseDataLoaderIter
    names = ("__init__", "_reset", "__next__")
    plain = {n: base.__dict__[n] for n in names}
    spec = importlib.util.spec_from_file_location("_stoker_autoprofile",
                                                  os.path.join(ROOT, "python", "stoker", "_profiling.py"))
    prof = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = prof
    spec.loader.exec_module(prof)
    prof.patch_dataloader(dl)
    hooked = {n: base.__dict__[n] for n in names}

    n = args.batches * args.batch_size
    ds = torch.utils.data.TensorDataset(torch.arange(n, dtype=torch.float32).reshape(n, 1),
                                        torch.zeros(n, dtype=torch.int64))
    loader = torch.utils.data.DataLoader(ds, batch_size=args.batch_size, num_workers=0)

    def per_batch(methods, wrap):
        for k, v in methods.items():
            setattr(base, k, v)
        it = prof.profile(loader) if wrap else loader
        batches = 0
        t = time.thread_time()
        for x, y in it:
            batches += 1
        return (time.thread_time() - t) / batches

    settings = {"torch DataLoader": (plain, False), "with the doctor's hook": (hooked, False),
                "in stoker.profile": (plain, True)}
    per_batch(plain, False)  # warm-up
    per_batch(hooked, False)
    times = {k: [] for k in settings}
    order = list(settings)
    for r in range(args.rounds):
        for name in order[r % 3:] + order[:r % 3]:
            times[name].append(per_batch(*settings[name]))
        if args.verbose:
            print(f"  round {r + 1}: " + ", ".join(f"{name} {1e6 * v[-1]:.2f} us" for name, v in times.items()),
                  flush=True)
    for k, v in plain.items():
        setattr(base, k, v)

    published = [f for f in os.listdir(channel) if f.endswith(".json")]
    print(f"\nDataLoader over {n} in-memory samples, batch_size={args.batch_size}, num_workers=0; "
          f"{args.batches} batches per setting, {args.rounds} alternating rounds; torch {torch.__version__}, "
          f"{len(published)} snapshots published to {channel}")
    print("| iteration | us of CPU per batch (median) | batches/s | cost per batch over plain (median of rounds) |")
    print("|---|---:|---:|---:|")
    base_t = times["torch DataLoader"]
    base_m = statistics.median(base_t)
    for name, v in times.items():
        m = statistics.median(v)
        extra = statistics.median(a - b for a, b in zip(v, base_t))
        print(f"| {name} | {1e6 * m:.2f} | {1 / m:,.0f} | {1e6 * extra:+.2f} us ({100 * extra / base_m:+.1f}%) |")
    for f in published:
        os.remove(os.path.join(channel, f))
    os.rmdir(channel)


if __name__ == "__main__":
    main()
