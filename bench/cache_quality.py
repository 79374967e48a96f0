#!/usr/bin/env python3
"""What cache="decoded" costs in output quality, per cache_max_side: the same
epoch (same seed: the same crops and flips, drawn in the stored image's
coordinates) from the decoded cache and from the original files
(cache="mmap", bit-exact with torchvision), RandomResizedCrop(224) + flip,
uint8. Reports PSNR and mean/p99 absolute difference over all output pixels,
bytes cached per image, and the second epoch's images/s.

    python3 bench/cache_quality.py [DATA] [--sides 224,256,320,384,448,512]
"""
import argparse
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
import stoker  # noqa: E402


def epoch(loader):
    return np.concatenate([x for x, _ in loader])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", nargs="?", default=os.path.join(ROOT, "data", "sample"))
    ap.add_argument("--sides", default="224,256,288,320,384,448,512")
    ap.add_argument("--size", type=int, default=224)
    args = ap.parse_args()
    tf = [stoker.RandomResizedCrop(args.size), stoker.RandomHorizontalFlip()]
    kw = dict(batch_size=64, shuffle=True, seed=3, dtype="uint8", layout="NHWC", output="numpy", transforms=tf)
    ref = epoch(stoker.Loader(args.data, **kw)).astype(np.int16)
    print(f"| cache_max_side | PSNR (dB) | mean abs diff | p99 abs diff | MB cached per 1000 images | "
          f"2nd epoch images/s |")
    print("|---:|---:|---:|---:|---:|---:|")
    for side in [int(s) for s in args.sides.split(",")]:
        loader = stoker.Loader(args.data, cache="decoded", cache_max_side=side, **kw)
        out = epoch(loader).astype(np.int16)  # first epoch: decode and store; the same crops as ref
        t = time.perf_counter()
        n = sum(int(y.shape[0]) for _, y in loader)
        rate = n / (time.perf_counter() - t)
        d = np.abs(out - ref)
        mse = float(np.mean(d.astype(np.float64) ** 2))
        psnr = 10 * np.log10(255 ** 2 / mse) if mse > 0 else float("inf")
        s = loader.stats()
        print(f"| {side} | {psnr:.1f} | {d.mean():.2f} | {np.percentile(d, 99):.0f} | "
              f"{s['cache_bytes'] / max(1, s['cache_records']) * 1000 / 1e6:.0f} | {rate:.0f} |", flush=True)


if __name__ == "__main__":
    main()
