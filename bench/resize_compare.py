#!/usr/bin/env python3
"""The resize kernel, chosen by measurement: stoker's antialiased bilinear
(Pillow-exact, SSE4.1/AVX2) against Pillow's own and OpenCV's (cv2.resize
INTER_LINEAR, and INTER_AREA, its antialiasing choice for shrinking), one
thread each, on crops cut from the sample set's photos at the sizes a
RandomResizedCrop(224) produces (shrink and enlarge). Reports microseconds per
resize (best of --repeat batches) and the pixel difference from Pillow's result,
which is what torchvision computes on PIL images.

    python3 bench/resize_compare.py [DATA] [--repeat 5]
"""
import argparse
import glob
import os
import sys
import time

import numpy as np
from PIL import Image

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
from stoker import _stoker  # noqa: E402

CASES = [((448, 448), (224, 224), "shrink 2x"), ((320, 300), (224, 224), "shrink 1.4x"),
         ((600, 500), (224, 224), "shrink 2.5x"), ((150, 130), (224, 224), "enlarge 1.6x")]


def best_us(fn, n, repeat):
    best = 1e9
    for _ in range(repeat):
        t = time.perf_counter()
        fn(n)
        best = min(best, (time.perf_counter() - t) / n)
    return best * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", nargs="?", default=os.path.join(ROOT, "data", "sample"))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--n", type=int, default=200, help="resizes per timed batch")
    args = ap.parse_args()
    try:
        import cv2
        cv2.setNumThreads(1)
    except ImportError:
        cv2 = None
        print("resize_compare: OpenCV (python3-opencv) not installed: its columns are left out")
    files = sorted(glob.glob(os.path.join(args.data, "*", "*.jpg")))[:8]
    if not files:
        sys.exit(f"resize_compare: no JPEGs under {args.data} (make data)")
    photos = [np.asarray(Image.open(f).convert("RGB")) for f in files]
    print(f"| case | stoker µs | Pillow µs | OpenCV LINEAR µs | OpenCV AREA µs | stoker vs Pillow max diff | "
          f"OpenCV LINEAR vs Pillow mean diff | OpenCV AREA vs Pillow mean diff |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for (sw, sh), (dw, dh), name in CASES:
        crops = []
        for p in photos:
            h, w = p.shape[:2]
            if h >= sh and w >= sw:
                crops.append(np.ascontiguousarray(p[:sh, :sw]))
            else:
                crops.append(np.asarray(Image.fromarray(p).resize((sw, sh))))
        src = crops[0]
        pil_src = Image.fromarray(src)
        t_st = best_us(lambda n: _stoker._testing.resize(src, dw, dh, n), args.n, args.repeat)
        t_pil = best_us(lambda n: [pil_src.resize((dw, dh), Image.BILINEAR) for _ in range(n)], args.n, args.repeat)
        diffs_st, diffs_lin, diffs_area = [], [], []
        for c in crops:
            ref = np.asarray(Image.fromarray(c).resize((dw, dh), Image.BILINEAR)).astype(int)
            diffs_st.append(np.abs(_stoker._testing.resize(c, dw, dh).astype(int) - ref).max())
            if cv2 is not None:
                diffs_lin.append(np.abs(cv2.resize(c, (dw, dh), interpolation=cv2.INTER_LINEAR).astype(int) - ref).mean())
                diffs_area.append(np.abs(cv2.resize(c, (dw, dh), interpolation=cv2.INTER_AREA).astype(int) - ref).mean())
        if cv2 is not None:
            t_lin = best_us(lambda n: [cv2.resize(src, (dw, dh), interpolation=cv2.INTER_LINEAR) for _ in range(n)],
                            args.n, args.repeat)
            t_area = best_us(lambda n: [cv2.resize(src, (dw, dh), interpolation=cv2.INTER_AREA) for _ in range(n)],
                             args.n, args.repeat)
            cv_cols = f"{t_lin:.0f} | {t_area:.0f} |"
            cv_diff = f"{np.mean(diffs_lin):.2f} | {np.mean(diffs_area):.2f} |"
        else:
            cv_cols, cv_diff = " | |", " | |"
        print(f"| {name} {sw}x{sh} -> {dw}x{dh} | {t_st:.0f} | {t_pil:.0f} | {cv_cols} {max(diffs_st)} | {cv_diff}")


if __name__ == "__main__":
    main()
