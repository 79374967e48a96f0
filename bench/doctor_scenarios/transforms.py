#!/usr/bin/env python3
"""Transforms: a stoker.Loader (2 threads) over 96x96 JPEGs upscaled to 448x448 and normalised to float32
(RandomResizedCrop(448, scale=(1, 1)) + Normalize), a light model step. Truth: input-bound on transforms.
Fixes: "uint8" (dtype="uint8" without Normalize: the doctor's suggestion moves Normalize to the device after
the copy; this CPU-only machine has none, so the fixed form leaves it out, as a GPU would do it in
microseconds), "decoded" (cache="decoded"), "threads=N".

    transforms.py DATA [--seconds S] [--fix uint8|decoded|threads=N]
"""
import os

import stoker

from common import Clock, MEAN, STD, Step, parse_args, train


def main():
    args = parse_args()
    crop = stoker.RandomResizedCrop(448, scale=(1.0, 1.0))
    kw = dict(batch_size=16, threads=2, transforms=[crop, stoker.Normalize(MEAN, STD)])
    if args.fix == "uint8":
        kw.update(dtype="uint8", transforms=[crop])
    elif args.fix == "decoded":
        kw["cache"] = "decoded"
    elif args.fix.startswith("threads="):
        kw["threads"] = int(args.fix.split("=")[1])
    elif args.fix:
        raise SystemExit(f"unknown fix {args.fix!r}")
    clock = Clock(args.seconds)
    loader = stoker.Loader(os.path.join(args.data, "small"), shuffle=True, **kw)
    train(loader, Step(width=16), clock)
    clock.report("transforms", args.fix)


if __name__ == "__main__":
    main()
