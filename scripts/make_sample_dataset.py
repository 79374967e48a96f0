#!/usr/bin/env python3
"""Makes stoker's sample dataset: an ImageNet-like ImageFolder tree of JPEGs.

The crops come from real photographs shipped in Debian packages
(lomiri-wallpapers, mate-backgrounds, plasma-workspace-wallpapers). Each class
draws its crops from its own photographs, so the classes are learnable. Each
image is a random crop (aspect 3:4 to 4:3) rescaled so its shorter side is
300-500 px, saved as JPEG quality 96 without chroma subsampling (4:4:4), the
dominant ImageNet encoding: about 100 KB and 0.19 megapixels per image.

Deterministic: the same --seed gives byte-identical files.

The same crops in the other formats stoker reads (bench/formats_bench.py):
  --format webp      lossy WebP at --quality (make bench-formats: 90)
  --format tiff16    16-bit RGB TIFF, tiled (--tile, default 256), Deflate with
                     the horizontal predictor: each crop square, resized to
                     --size x --size in float (the 8-bit photo times 257, then
                     a little sensor-like noise in the low bits), as
                     microscopy, pathology and remote-sensing tiles come.

    python3 scripts/make_sample_dataset.py --out data/sample [--per-class 170]
    python3 scripts/make_sample_dataset.py --out data/sample-webp --format webp --quality 90
    python3 scripts/make_sample_dataset.py --out data/sample-tiff16 --format tiff16 --size 2048 --per-class 16
"""
import argparse
import multiprocessing
import os
import random
import struct
import sys
import zlib

import numpy as np
from PIL import Image

BG = "/usr/share/backgrounds"
WP = "/usr/share/wallpapers"

# Photographs only (the packages also hold artwork, left out). Class -> files.
CLASSES = {
    "architecture": [f"{BG}/Bridge_by_Sander_Klootwijk.jpg", f"{WP}/Grey/contents/images/2560x1440.jpg",
                     f"{BG}/friends_by_Aitzol_Berasategi.jpg", f"{BG}/greentock_by_Peter_Nerlich.jpg"],
    "birds": [f"{BG}/Kleiber_by_Lukas_Baubkus.jpg", f"{BG}/free_by_Peter_Nerlich.jpg"],
    "flowers": [f"{BG}/mate/nature/FreshFlower.jpg", f"{BG}/mate/nature/Garden.jpg",
                f"{BG}/mate/nature/YellowFlower.jpg"],
    "forest": [f"{BG}/life_by_Aitzol_Berasategi.jpg", f"{WP}/Path/contents/images/2560x1440.jpg",
               f"{WP}/OneStandsOut/contents/images/2560x1440.jpg"],
    "grass": [f"{BG}/mate/nature/Blinds.jpg", f"{BG}/mate/nature/GreenMeadow.jpg",
              f"{BG}/mate/nature/RainDrops.jpg"],
    "insects": [f"{BG}/Dragonfly_by_Bolly.jpg", f"{BG}/mate/nature/LadyBird.jpg",
                f"{BG}/mate/nature/TwoWings.jpg"],
    "lake": [f"{WP}/BytheWater/contents/images/2560x1440.jpg", f"{WP}/ColdRipple/contents/images/2560x1440.jpg",
             f"{WP}/DarkestHour/contents/images/2560x1440.jpg"],
    "mountains": [f"{BG}/aitzgorri_by_Aitzol_Berasategi.jpg", f"{BG}/picosdeeuropa_by_Aitzol_Berasategi.jpg",
                  f"{BG}/sunset_by_Aitzol_Berasategi.jpg"],
    "objects": [f"{BG}/Picture_0B_by_freespace.jpg", f"{BG}/Picture_1A_by_freespace.jpg",
                f"{BG}/Wine_by_Jakkub_Mede.jpg", f"{WP}/ColorfulCups/contents/images/2560x1600.jpg"],
    "sky": [f"{WP}/Kite/contents/images/2560x1440.jpg", f"{WP}/summer_1am/contents/images/2560x1440.jpg",
            f"{BG}/mate/nature/Storm.jpg"],
    "textures": [f"{BG}/mate/nature/Wood.jpg", f"{BG}/mate/nature/Dune.jpg",
                 f"{WP}/FallenLeaf/contents/images/2560x1440.jpg"],
    "water": [f"{BG}/seeding_by_Clements_Engelhardt.jpg", f"{BG}/mate/nature/Aqua.jpg",
              f"{WP}/EveningGlow/contents/images/2560x1440.jpg", f"{WP}/Volna/contents/images/5120x2880.jpg"],
}
PACKAGES = "lomiri-wallpapers-16.04 lomiri-wallpapers-20.04 mate-backgrounds plasma-workspace-wallpapers"


def load(path, max_side=2560):
    im = Image.open(path)
    im.draft("RGB", (max_side, max_side))  # DCT-scaled decode of the huge ones
    im = im.convert("RGB")
    if max(im.size) > max_side:
        s = max_side / max(im.size)
        im = im.resize((round(im.width * s), round(im.height * s)), Image.LANCZOS)
    return im


def tiled_tiff16(rgb16, tile):
    """A one-page little-endian TIFF of rgb16 (H x W x 3 uint16): tiles of tile x tile (padded past the image),
    Deflate, horizontal differencing predictor (Predictor 2)."""
    h, w, _ = rgb16.shape
    tiles = []
    for ty in range(0, h, tile):
        for tx in range(0, w, tile):
            block = np.zeros((tile, tile, 3), np.uint16)
            part = rgb16[ty:ty + tile, tx:tx + tile]
            block[:part.shape[0], :part.shape[1]] = part
            diff = block.copy()
            diff[:, 1:] -= block[:, :-1]  # uint16 arithmetic wraps, as the predictor's does
            tiles.append(zlib.compress(diff.astype("<u2").tobytes(), 6))
    data = bytearray(b"II*\0\0\0\0\0")
    offsets = []
    for t in tiles:
        offsets.append(len(data))
        data += t + (b"\0" if len(t) % 2 else b"")
    entries = [(256, 4, [w]), (257, 4, [h]), (258, 3, [16, 16, 16]), (259, 3, [8]), (262, 3, [2]), (277, 3, [3]),
               (284, 3, [1]), (317, 3, [2]), (322, 4, [tile]), (323, 4, [tile]), (324, 4, offsets),
               (325, 4, [len(t) for t in tiles])]
    ifd_at = len(data)
    tail_at = ifd_at + 2 + 12 * len(entries) + 4
    ifd, tail = bytearray(struct.pack("<H", len(entries))), bytearray()
    for tag, typ, values in entries:
        payload = struct.pack("<" + {3: "H", 4: "I"}[typ] * len(values), *values)
        if len(payload) <= 4:
            ifd += struct.pack("<HHI", tag, typ, len(values)) + payload.ljust(4, b"\0")
        else:
            ifd += struct.pack("<HHII", tag, typ, len(values), tail_at + len(tail))
            tail += payload
    data[4:8] = struct.pack("<I", ifd_at)
    return bytes(data + ifd + b"\0\0\0\0" + tail)


def to16(crop, size, seed):
    """The crop resized to size x size in float (Pillow's BICUBIC on each channel of the 8-bit values times 257),
    with Gaussian noise of 24 (of 65535) added: 16-bit data whose low bits are not all zero."""
    noise = np.random.default_rng(seed)
    chans = []
    for c in crop.split():
        f = Image.fromarray(np.asarray(c, np.float32) * 257.0, "F").resize((size, size), Image.BICUBIC)
        chans.append(np.asarray(f) + noise.normal(0, 24, (size, size)))
    return np.clip(np.rint(np.stack(chans, -1)), 0, 65535).astype(np.uint16)


def make_class(job):
    out, index, name, files, per_class, seed, quality, subsampling, fmt, size, tile = job
    rng = random.Random(f"{seed}/{name}")
    photos = [load(f) for f in files]
    d = os.path.join(out, f"{index:02d}_{name}")
    os.makedirs(d, exist_ok=True)
    ext = {"jpeg": "jpg", "webp": "webp", "tiff16": "tif"}[fmt]
    for i in range(per_class):
        im = photos[rng.randrange(len(photos))]
        W, H = im.size
        aspect = rng.uniform(3 / 4, 4 / 3)          # width / height
        if size:
            aspect = 1.0  # a square tile
        area = rng.uniform(0.04, 0.5) * W * H
        w = min(W, round((area * aspect) ** 0.5))
        h = min(H, round(w / aspect))
        x, y = rng.randint(0, W - w), rng.randint(0, H - h)
        crop = im.crop((x, y, x + w, y + h))
        short = rng.randint(300, 500)
        tmp = os.path.join(d, f".{name}_{i:05d}.{ext}.tmp")
        if fmt == "tiff16":
            with open(tmp, "wb") as f:
                f.write(tiled_tiff16(to16(crop, size, [seed, index, i]), tile))
        else:
            s = short / min(w, h)
            crop = crop.resize((max(1, round(w * s)), max(1, round(h * s))), Image.BICUBIC)
            if fmt == "webp":
                crop.save(tmp, "WEBP", quality=quality)
            else:
                crop.save(tmp, "JPEG", quality=quality, subsampling=subsampling)
        os.replace(tmp, os.path.join(d, f"{name}_{i:05d}.{ext}"))
    return name


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="data/sample")
    ap.add_argument("--per-class", type=int, default=170, help="images per class (12 classes; default 170 = 2040)")
    ap.add_argument("--classes", type=int, default=len(CLASSES), help="use the first N classes")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=os.cpu_count())
    ap.add_argument("--quality", type=int, default=96, help="JPEG quality (default 96)")
    ap.add_argument("--subsampling", choices=["444", "422", "420"], default="444",
                    help="chroma subsampling (default 444: none); the same crops for any encoding")
    ap.add_argument("--format", choices=["jpeg", "webp", "tiff16"], default="jpeg",
                    help="jpeg (default), webp (lossy, --quality) or tiff16 (16-bit RGB, tiled, Deflate)")
    ap.add_argument("--size", type=int, default=0, help="tiff16: each image square, this many pixels a side")
    ap.add_argument("--tile", type=int, default=256, help="tiff16: tile side (default 256)")
    args = ap.parse_args()
    if args.format == "tiff16" and args.size <= 0:
        ap.error("--format tiff16 needs --size")
    if args.format != "tiff16":
        args.size = 0
    missing = [f for fs in CLASSES.values() for f in fs if not os.path.exists(f)]
    if missing:
        sys.exit(f"make_sample_dataset: missing {missing[0]} (and {len(missing) - 1} more); "
                 f"install: apt-get install {PACKAGES}  (or run scripts/install-deps.sh)")
    names = sorted(CLASSES)[: args.classes]
    sub = {"444": 0, "422": 1, "420": 2}[args.subsampling]
    jobs = [(args.out, k, n, CLASSES[n], args.per_class, args.seed, args.quality, sub, args.format, args.size,
             args.tile) for k, n in enumerate(names)]
    with multiprocessing.Pool(min(args.jobs, len(jobs))) as pool:
        for n in pool.imap_unordered(make_class, jobs):
            print(f"make_sample_dataset: {n} done", flush=True)
    with open(os.path.join(args.out, ".stoker-sample-complete"), "w") as f:  # make's "already there" marker
        f.write(f"seed={args.seed} per_class={args.per_class} classes={len(names)} quality={args.quality} "
                f"subsampling={args.subsampling}"
                + (f" format={args.format} size={args.size} tile={args.tile}" if args.format != "jpeg" else "") + "\n")
    print(f"make_sample_dataset: {len(names) * args.per_class} images in {len(names)} classes under {args.out}")


if __name__ == "__main__":
    main()
