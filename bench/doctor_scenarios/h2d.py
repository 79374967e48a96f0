#!/usr/bin/env python3
"""Host-to-device copy: a stoker.Loader (2 threads, pin_memory=True) over 96x96 JPEGs cropped to 224x224
float32 (RandomResizedCrop(224) + Normalize), batches of 32, a light model step.
This machine has no GPU. What stands for the copy: stoker's own staging runs as it would (each batch copied
into a staging buffer on the loop's thread, timed as the host-to-device cost), in pageable memory where CUDA
would pin it, and each staging is followed, on the same thread and inside the same timing, by a sleep of
bytes / 1 GB/s standing for a synchronous copy over a slow link. Truth: input-bound on the host-to-device copy.
Fix "uint8": dtype="uint8" without Normalize (the doctor's suggestion: a quarter of the bytes to copy, Normalize
on the device after it, where it costs microseconds: left out here).

    h2d.py DATA [--seconds S] [--fix uint8]
"""
import os
import time

import stoker
import stoker._staging as staging

from common import Clock, MEAN, STD, Step, parse_args, train

LINK_BYTES_PER_S = 1e9


class _PageableTorch:
    """torch, with pin_memory=True allocations in pageable memory (pinning needs CUDA)."""

    def __init__(self, torch):
        self._torch = torch

    def __getattr__(self, name):
        return getattr(self._torch, name)

    def empty(self, *args, pin_memory=False, **kwargs):
        return self._torch.empty(*args, **kwargs)


def emulate_link():
    init, pinned = staging.Stager.__init__, staging.Stager.pinned

    def __init__(self, torch, device, loader):
        init(self, _PageableTorch(torch), device, loader)

    def pinned_then_link(self, batch):
        out = pinned(self, batch)
        t0 = time.monotonic_ns()
        nbytes = sum(x.numel() * x.element_size() for x in staging.leaves(batch))
        time.sleep(nbytes / LINK_BYTES_PER_S)  # the copy over the link
        self._loader._h2d_ns += time.monotonic_ns() - t0
        return out

    staging.Stager.__init__, staging.Stager.pinned = __init__, pinned_then_link


def main():
    args = parse_args()
    emulate_link()
    crop = stoker.RandomResizedCrop(224, scale=(0.25, 1.0))
    kw = dict(batch_size=32, threads=2, transforms=[crop, stoker.Normalize(MEAN, STD)])
    if args.fix == "uint8":
        kw.update(dtype="uint8", transforms=[crop])
    elif args.fix:
        raise SystemExit(f"unknown fix {args.fix!r}")
    clock = Clock(args.seconds)
    loader = stoker.Loader(os.path.join(args.data, "small"), shuffle=True, device="cpu", pin_memory=True, **kw)
    train(loader, Step(width=16), clock)
    clock.report("h2d", args.fix)


if __name__ == "__main__":
    main()
