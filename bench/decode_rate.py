"""stoker.decode_image rate, one thread, on the first N JPEGs of a folder: for
comparing builds of the same code (e.g. the wheel's static libjpeg-turbo with
the source build's system one). Run it under each, alternating:
    venv/bin/python bench/decode_rate.py data/sample
    PYTHONPATH=python /usr/bin/python3 bench/decode_rate.py data/sample
"""
import argparse
import glob
import os
import time

import stoker

ap = argparse.ArgumentParser()
ap.add_argument("folder")
ap.add_argument("-n", type=int, default=300)
args = ap.parse_args()
files = sorted(glob.glob(os.path.join(args.folder, "*", "*.jpg")))[:args.n]
data = [open(f, "rb").read() for f in files]
for b in data[:20]:  # warm-up
    stoker.decode_image(b)
t = time.perf_counter()
for b in data:
    stoker.decode_image(b)
print(f"{stoker.__file__}: {len(data) / (time.perf_counter() - t):.1f} images/s ({len(data)} JPEGs)")
