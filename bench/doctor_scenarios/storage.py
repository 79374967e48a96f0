#!/usr/bin/env python3
"""Storage: a stoker.Loader (2 threads) over 160 records of 256x256 JPEGs whose every read is throttled: named
pipes that answer 25 ms after each open stand for slow storage (common.feed_pipes). Resize to 64x64 +
Normalize, a model step of ~8 ms of CPU per batch of 16. Truth: input-bound on storage.
Fix "ram": cache="ram", the doctor's suggestion (preload=False: a pipe serves one reader at a time, and the
preload would read ahead in parallel with the workers; on real storage it only shortens the first epoch,
and the rate here is after it).

    storage.py DATA [--seconds S] [--fix ram|threads=N]
"""
import os
import threading

import stoker

from common import Clock, MEAN, STD, Step, feed_pipes, parse_args, train


def main():
    args = parse_args()
    stop = threading.Event()
    folder = os.path.join(args.data, "pipes")
    feed_pipes(folder, 0.025, stop)
    kw = dict(batch_size=16, threads=2, transforms=[stoker.Resize((64, 64)), stoker.Normalize(MEAN, STD)])
    if args.fix == "ram":
        kw.update(cache="ram", preload=False)
    elif args.fix.startswith("threads="):
        kw["threads"] = int(args.fix.split("=")[1])
    elif args.fix:
        raise SystemExit(f"unknown fix {args.fix!r}")
    clock = Clock(args.seconds)
    loader = stoker.Loader(os.path.join(folder, "list.csv"), **kw)
    train(loader, Step(width=128), clock)
    clock.report("storage", args.fix)
    stop.set()
    os._exit(0)  # the pipes' feeders block in open(): no clean shutdown for them


if __name__ == "__main__":
    main()
