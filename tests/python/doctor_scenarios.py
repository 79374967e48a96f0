#!/usr/bin/env python3
"""Training loops with a known bottleneck, run under `stoker doctor` by test_doctor.py.

    doctor_scenarios.py MODE DATA [--seconds S]

MODE:
  compute    stoker loader, a step that sleeps 40 ms per batch of 16
  decoded-compute  as compute, with cache="decoded" (an input-side change on a compute-bound loop)
  decode     stoker loader over large JPEGs, a 1 ms step
  transform  stoker loader over small JPEGs upscaled to 448x448 float, a 1 ms step
  storage    stoker loader over named pipes fed 30 ms after each open (slow storage), a 1 ms step
  dataloader torch DataLoader + torchvision ImageFolder over large JPEGs wrapped in stoker.profile, a 1 ms step
  decoded    as decode, with cache="decoded" (applying the doctor's suggestion)
  packed     as decode, over DATA packed at --max-side 256 (DATA is then the shard pattern)
  json-shards  as decode, over tar shards (DATA: the pattern) whose labels are the "y" field of .json members
Prints one JSON line: samples/s of the loop after its first epoch.

    doctor_scenarios.py make-data DIR      # the data sets the scenarios use (seeded)
"""
import argparse
import json
import os
import sys
import threading
import time

import stoker


def _photo(w, h, seed):
    """Photo-like pixels (smooth waves plus grain): JPEG decodes at a realistic cost."""
    import numpy as np
    from PIL import Image
    r = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    img = np.stack([128 + 100 * np.sin(x / (40 + 10 * c) + seed) * np.cos(y / (30 + 7 * c)) for c in range(3)], -1)
    img += r.normal(0, 25, img.shape)
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))


def make_data(d):
    """large/: 256 x 640x480 q95 4:4:4 in 2 classes (decode-heavy); small/: 96 x 96x96 q90."""
    for cls in range(2):
        os.makedirs(os.path.join(d, "large", f"c{cls}"), exist_ok=True)
        os.makedirs(os.path.join(d, "small", f"c{cls}"), exist_ok=True)
        for i in range(128):
            _photo(640, 480, cls * 1000 + i).save(os.path.join(d, "large", f"c{cls}", f"{i}.jpg"), quality=95,
                                                  subsampling=0)
        for i in range(48):
            _photo(96, 96, cls * 1000 + i).save(os.path.join(d, "small", f"c{cls}", f"{i}.jpg"), quality=90)


def feed_pipes(data, delay, stop):
    """Named pipes standing in for slow storage: each open gets its bytes after `delay`."""
    pipes = []
    for root, _, files in os.walk(data):
        for f in files:
            if f.endswith(".pipe"):
                pipes.append(os.path.join(root, f))

    def serve(path):
        with open(path[: -len(".pipe")] + ".bytes", "rb") as f:
            payload = f.read()
        while not stop.is_set():
            fd = os.open(path, os.O_WRONLY)  # blocks until a reader opens it
            time.sleep(delay)
            try:
                os.write(fd, payload)
            except BrokenPipeError:
                pass
            os.close(fd)
            # NOTE: reopening at once would hand the reader, still open, a second writer (and no EOF).
            time.sleep(0.2)

    for p in pipes:
        threading.Thread(target=serve, args=(p,), daemon=True).start()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode")
    ap.add_argument("data")
    ap.add_argument("--seconds", type=float, default=5.0)
    args = ap.parse_args()
    if args.mode == "make-data":
        make_data(args.data)
        return
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    step = 0.001
    it = None
    if args.mode in ("compute", "decoded-compute"):
        loader = stoker.Loader(args.data, batch_size=16, shuffle=True, transforms=[stoker.RandomResizedCrop(64)],
                               cache="decoded" if args.mode == "decoded-compute" else "mmap")
        step = 0.04
    elif args.mode in ("decode", "decoded", "packed"):
        loader = stoker.Loader(args.data, batch_size=16, shuffle=True,
                               cache="decoded" if args.mode == "decoded" else "mmap",
                               transforms=[stoker.RandomResizedCrop(64, scale=(0.5, 1.0)), stoker.RandomHorizontalFlip(),
                                           stoker.Normalize(mean, std)])
    elif args.mode == "mixture":  # data: the folder holding large/ and small/
        mix = stoker.Mix({"large": os.path.join(args.data, "large"), "small": os.path.join(args.data, "small")},
                         weights={"large": 0.5, "small": 0.5}, samples_per_epoch=256)
        loader = stoker.Loader(mix, batch_size=16, shuffle=True,
                               transforms=[stoker.RandomResizedCrop(64, scale=(0.5, 1.0)), stoker.Normalize(mean, std)])
    elif args.mode == "json-shards":
        loader = stoker.Loader(args.data, batch_size=16, shuffle=True, labels="json:y",
                               transforms=[stoker.RandomResizedCrop(64, scale=(0.5, 1.0)), stoker.Normalize(mean, std)])
    elif args.mode == "transform":
        loader = stoker.Loader(args.data, batch_size=16, shuffle=True,
                               transforms=[stoker.RandomResizedCrop(448, scale=(1.0, 1.0)), stoker.Normalize(mean, std)])
    elif args.mode == "storage":
        stop = threading.Event()
        feed_pipes(os.path.dirname(args.data), 0.03, stop)
        loader = stoker.Loader(args.data, batch_size=16, transforms=[stoker.RandomResizedCrop(64)])
    elif args.mode == "dataloader":
        import torch
        import torchvision
        import torchvision.transforms as T
        ds = torchvision.datasets.ImageFolder(args.data, transform=T.Compose([
            T.RandomResizedCrop(64, scale=(0.5, 1.0)), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(mean, std)]))
        loader = torch.utils.data.DataLoader(ds, batch_size=16, shuffle=True, num_workers=2, persistent_workers=True)
        it = stoker.profile(loader)
    else:
        sys.exit(f"unknown mode {args.mode}")
    if it is None:
        it = stoker.profile(loader)
    start = time.monotonic()
    first_epoch_end, samples_after = None, 0
    while time.monotonic() - start < args.seconds:
        for x, y in it:
            if first_epoch_end is not None:
                samples_after += int(y.shape[0])
            t = time.monotonic()
            while time.monotonic() - t < step:  # the "model step" (a busy wait for short steps)
                if step > 0.005:
                    time.sleep(step)
                    break
            if time.monotonic() - start >= args.seconds:
                break
        if first_epoch_end is None:
            first_epoch_end = time.monotonic()
    end = time.monotonic()
    rate = samples_after / (end - first_epoch_end) if first_epoch_end and end > first_epoch_end else 0
    print(json.dumps({"mode": args.mode, "rate_after_first_epoch": rate}), flush=True)


if __name__ == "__main__":
    main()
