#!/usr/bin/env python3
"""Makes stoker's sample dataset: an ImageNet-like ImageFolder tree of JPEGs.

The crops come from real photographs shipped in Debian packages
(lomiri-wallpapers, mate-backgrounds, plasma-workspace-wallpapers). Each class
draws its crops from its own photographs, so the classes are learnable. Each
image is a random crop (aspect 3:4 to 4:3) rescaled so its shorter side is
300-500 px, saved as JPEG quality 96 without chroma subsampling (4:4:4), the
dominant ImageNet encoding: about 100 KB and 0.19 megapixels per image.

Deterministic: the same --seed gives byte-identical files.

    python3 scripts/make_sample_dataset.py --out data/sample [--per-class 170]
"""
import argparse
import multiprocessing
import os
import random
import sys

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


def make_class(job):
    out, index, name, files, per_class, seed, quality, subsampling = job
    rng = random.Random(f"{seed}/{name}")
    photos = [load(f) for f in files]
    d = os.path.join(out, f"{index:02d}_{name}")
    os.makedirs(d, exist_ok=True)
    for i in range(per_class):
        im = photos[rng.randrange(len(photos))]
        W, H = im.size
        aspect = rng.uniform(3 / 4, 4 / 3)          # width / height
        area = rng.uniform(0.04, 0.5) * W * H
        w = min(W, round((area * aspect) ** 0.5))
        h = min(H, round(w / aspect))
        x, y = rng.randint(0, W - w), rng.randint(0, H - h)
        crop = im.crop((x, y, x + w, y + h))
        short = rng.randint(300, 500)
        s = short / min(w, h)
        crop = crop.resize((max(1, round(w * s)), max(1, round(h * s))), Image.BICUBIC)
        tmp = os.path.join(d, f".{name}_{i:05d}.jpg.tmp")
        crop.save(tmp, "JPEG", quality=quality, subsampling=subsampling)
        os.replace(tmp, os.path.join(d, f"{name}_{i:05d}.jpg"))
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
    args = ap.parse_args()
    missing = [f for fs in CLASSES.values() for f in fs if not os.path.exists(f)]
    if missing:
        sys.exit(f"make_sample_dataset: missing {missing[0]} (and {len(missing) - 1} more); "
                 f"install: apt-get install {PACKAGES}  (or run scripts/install-deps.sh)")
    names = sorted(CLASSES)[: args.classes]
    sub = {"444": 0, "422": 1, "420": 2}[args.subsampling]
    jobs = [(args.out, k, n, CLASSES[n], args.per_class, args.seed, args.quality, sub) for k, n in enumerate(names)]
    with multiprocessing.Pool(min(args.jobs, len(jobs))) as pool:
        for n in pool.imap_unordered(make_class, jobs):
            print(f"make_sample_dataset: {n} done", flush=True)
    with open(os.path.join(args.out, ".stoker-sample-complete"), "w") as f:  # make's "already there" marker
        f.write(f"seed={args.seed} per_class={args.per_class} classes={len(names)} quality={args.quality} "
                f"subsampling={args.subsampling}\n")
    print(f"make_sample_dataset: {len(names) * args.per_class} images in {len(names)} classes under {args.out}")


if __name__ == "__main__":
    main()
