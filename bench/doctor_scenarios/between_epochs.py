#!/usr/bin/env python3
"""A between-epochs evaluation: a stoker.Loader (autotuned threads) over 640x480 q95 JPEGs (RandomResizedCrop(64)
+ flip + Normalize), a light model step, and after every epoch an evaluation (a pass over a validation
stoker.Loader with a forward-only step) and a checkpoint (0.3 s). Truth: input-bound on decode, with the time
between epochs reported on its own line (the script's own clock measures it), out of the step.
Fixes: "decoded" (cache="decoded"), "shards=PATTERN" (the training set packed by `stoker pack`, as the doctor
suggests, loaded from its shards).

    between_epochs.py DATA [--seconds S] [--fix decoded|shards=PATTERN]
"""
import os
import time

import stoker

from common import Clock, MEAN, STD, Step, parse_args, train


def main():
    args = parse_args()
    source = os.path.join(args.data, "large")
    kw = dict(batch_size=16, shuffle=True, transforms=[
        stoker.RandomResizedCrop(64, scale=(0.5, 1.0)), stoker.RandomHorizontalFlip(), stoker.Normalize(MEAN, STD)])
    if args.fix == "decoded":
        kw["cache"] = "decoded"
    elif args.fix.startswith("shards="):
        source = args.fix.split("=", 1)[1]
    elif args.fix:
        raise SystemExit(f"unknown fix {args.fix!r}")
    clock = Clock(args.seconds)
    train_loader = stoker.Loader(source, **kw)
    val_loader = stoker.Loader(os.path.join(args.data, "val"), batch_size=32,
                               transforms=[stoker.Resize((64, 64)), stoker.Normalize(MEAN, STD)])
    step, forward = Step(width=32), Step(width=8)

    def evaluate():
        for x, y in val_loader:
            forward()
        time.sleep(0.3)  # the checkpoint

    train(train_loader, step, clock, between=evaluate)
    clock.report("between_epochs", args.fix)


if __name__ == "__main__":
    main()
