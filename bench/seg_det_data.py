#!/usr/bin/env python3
"""Makes a segmentation set and a COCO-format detection set from the photos of an ImageFolder.

The generator, per photo (the first --count of the folder, taken round-robin
over its classes in ImageFolder order, so every class is in):

  1. k-means of its colours (K = 6, 7 or 8 clusters, k-means++ seeding, 10
     iterations) on a copy whose longer side is 96 px;
  2. every pixel of the full-size photo, blurred (Gaussian, radius 2), goes to
     its nearest cluster, and each cluster takes the class of the nearest of 8
     reference colours (PALETTE: dark, grey, light, red, yellow, green, blue,
     brown), so a class means the same colour family in every photo;
  3. two passes of a 9x9 majority filter (ties keep a pixel's class) make the
     regions blobby while their edges stay on the photo's;
  4. a 1 px "ignore" border (255) where a pixel's right or lower neighbour is
     of another class.

Written under --out (default data/segdet):

  masks/<class>/<name>.png   8-bit PNG (mode "L", class ids 0..7 and 255), the
                             photo's size, mirroring the ImageFolder tree
  seg.csv                    `image,mask` rows, paths relative to the CSV
  instances.json             COCO instances: an image per photo (file_name
                             "<class>/<name>.jpg", relative to the ImageFolder,
                             the image_root), an annotation per connected
                             region of a class (4-connectivity, on the masks
                             before the ignore border) whose box is at least
                             16 px wide and high: bbox [x, y, w, h] floats,
                             area = the region's pixels, iscrowd 1 for ~3% of
                             them, segmentation []; category id of class k:
                             1 + 2k (non-contiguous, like COCO's). Images 5
                             and count // 2 have no annotations.
  .segdet-complete           the parameters of the finished run: a later run
                             with the same ones does nothing

Deterministic: the same photos, --count and --seed give identical files.

    python3 bench/seg_det_data.py [--src data/sample] [--out data/segdet] [--count 512] [--seed 0]

As a module: seg_det_data.generate(src, out, count=512, seed=0) -> the paths.
"""
import argparse
import json
import os
import sys

import numpy as np
from PIL import Image, ImageFilter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VERSION = 1  # of the generator: a change of its output changes it, so old sets are remade
EXTS = (".jpg", ".jpeg", ".png")
PALETTE = np.array([(25, 25, 25), (120, 120, 120), (220, 220, 215), (170, 60, 50), (200, 170, 80),
                    (70, 120, 50), (70, 110, 170), (110, 80, 55)], dtype=np.float32)
CLASS_NAMES = ("dark", "grey", "light", "red", "yellow", "green", "blue", "brown")
IGNORE = 255
MIN_BOX_SIDE = 16
CROWD_SHARE = 0.03
MARKER = ".segdet-complete"


def category_id(k):
    return 1 + 2 * k


def list_photos(src, count):
    """The first `count` photos of an ImageFolder, round-robin over its classes: [(class, path)]."""
    classes = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
    per_class = []
    for c in classes:
        files = []
        for r, _, fs in sorted(os.walk(os.path.join(src, c))):
            files += [os.path.join(r, f) for f in sorted(fs) if f.lower().endswith(EXTS)]
        per_class.append(files)
    photos = []
    for i in range(max((len(f) for f in per_class), default=0)):
        photos += [(c, files[i]) for c, files in zip(classes, per_class) if i < len(files)]
    return photos[:count]


def kmeans(x, k, rng, iters=10):
    """Centroids [k, 3] of the rows of x (k-means++ seeding, then Lloyd's iterations)."""
    centres = [x[rng.integers(len(x))]]
    for _ in range(1, k):
        d = np.min(((x[:, None, :] - np.array(centres)[None]) ** 2).sum(-1), axis=1)
        centres.append(x[rng.choice(len(x), p=d / d.sum())] if d.sum() > 0 else x[rng.integers(len(x))])
    c = np.array(centres, dtype=np.float32)
    for _ in range(iters):
        assign = ((x[:, None, :] - c[None]) ** 2).sum(-1).argmin(1)
        for j in range(k):
            members = x[assign == j]
            if len(members):
                c[j] = members.mean(0)
    return c


def majority(labels, size=9):
    """Each pixel takes the class most frequent in the size x size window around it (ties: its own)."""
    r = size // 2
    h, w = labels.shape
    best = np.zeros(labels.shape, np.int32)
    out = labels.copy()
    padded = np.zeros((h + 2 * r + 1, w + 2 * r + 1), np.int32)
    for c in np.unique(labels):
        padded[r + 1:r + 1 + h, r + 1:r + 1 + w] = labels == c
        s = padded.cumsum(0).cumsum(1)  # window sums from the integral image
        count = 2 * (s[size:, size:] - s[:-size, size:] - s[size:, :-size] + s[:-size, :-size]) + (labels == c)
        better = count > best
        best[better] = count[better]
        out[better] = c
    return out


def class_map(img, rng):
    """uint8 [H, W] class ids (0..7) of an RGB photo, blobby regions along its edges."""
    small = img.copy()
    small.thumbnail((96, 96), Image.BOX)
    centres = kmeans(np.asarray(small, dtype=np.float32).reshape(-1, 3), int(rng.integers(6, 9)), rng)
    cluster_class = ((centres[:, None, :] - PALETTE[None]) ** 2).sum(-1).argmin(1).astype(np.uint8)
    full = np.asarray(img.filter(ImageFilter.GaussianBlur(2)), dtype=np.float32).reshape(-1, 3)
    d = (centres ** 2).sum(1)[None] - 2 * full @ centres.T  # |x - c|^2 less |x|^2, the same for every c
    labels = cluster_class[d.argmin(1)].reshape(img.height, img.width)
    for _ in range(2):
        labels = majority(labels)
    return labels


def with_ignore_border(labels):
    """The class map with 255 where a pixel's right or lower neighbour is of another class."""
    out = labels.copy()
    edge = np.zeros(labels.shape, dtype=bool)
    edge[:, :-1] |= labels[:, :-1] != labels[:, 1:]
    edge[:-1, :] |= labels[:-1, :] != labels[1:, :]
    out[edge] = IGNORE
    return out


def regions(labels):
    """Connected regions (4-connectivity) of each class: [(class, x0, y0, x1, y1, pixels)], x1/y1 exclusive.

    Runs of equal class per row, merged with the overlapping runs of the row above (union-find)."""
    runs = []  # (y, x0, x1, class)
    row_start = []
    for y, row in enumerate(labels):
        cut = np.flatnonzero(row[1:] != row[:-1]) + 1
        starts = np.concatenate(([0], cut))
        ends = np.concatenate((cut, [len(row)]))
        row_start.append(len(runs))
        runs += [(y, int(s), int(e), int(row[s])) for s, e in zip(starts, ends)]
    row_start.append(len(runs))
    parent = list(range(len(runs)))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for y in range(1, len(labels)):
        a, a_end = row_start[y - 1], row_start[y]
        b, b_end = row_start[y], row_start[y + 1]
        while a < a_end and b < b_end:
            _, sa, ea, ca = runs[a]
            _, sb, eb, cb = runs[b]
            if ca == cb and sa < eb and sb < ea:
                ra, rb = find(a), find(b)
                if ra != rb:
                    parent[max(ra, rb)] = min(ra, rb)
            if ea <= eb:
                a += 1
            else:
                b += 1
    found = {}
    for i, (y, s, e, c) in enumerate(runs):
        r = find(i)
        if r in found:
            _, x0, y0, x1, y1, n = found[r]
            found[r] = (c, min(x0, s), min(y0, y), max(x1, e), max(y1, y + 1), n + e - s)
        else:
            found[r] = (c, s, y, e, y + 1, e - s)
    return [found[r] for r in sorted(found)]


def params_of(src, count, seed):
    return {"version": VERSION, "src": os.path.abspath(src), "count": count, "seed": seed}


def generate(src=os.path.join(ROOT, "data", "sample"), out=os.path.join(ROOT, "data", "segdet"), count=512, seed=0,
             quiet=False):
    """Makes the sets (unless `out` holds a finished run with these parameters); returns their paths:
    {"seg_csv", "coco_json", "image_root", "masks"}."""
    paths = {"seg_csv": os.path.join(out, "seg.csv"), "coco_json": os.path.join(out, "instances.json"),
             "image_root": src, "masks": os.path.join(out, "masks")}
    params = params_of(src, count, seed)
    marker = os.path.join(out, MARKER)
    try:
        with open(marker) as f:
            if json.load(f) == params:
                return paths
    except (OSError, ValueError):
        pass
    photos = list_photos(src, count)
    if not photos:
        raise FileNotFoundError(f"seg_det_data: no photos in the ImageFolder {src}")
    if os.path.exists(marker):
        os.remove(marker)
    empty = {5, len(photos) // 2}
    rng_crowd = np.random.default_rng([seed, 1])
    seg_rows, images, annotations = [], [], []
    for i, (cls, path) in enumerate(photos):
        with Image.open(path) as im:
            img = im.convert("RGB")
        labels = class_map(img, np.random.default_rng([seed, 0, i]))
        rel = os.path.relpath(path, src)
        mask_rel = os.path.join("masks", os.path.splitext(rel)[0] + ".png")
        os.makedirs(os.path.dirname(os.path.join(out, mask_rel)), exist_ok=True)
        Image.fromarray(with_ignore_border(labels), mode="L").save(os.path.join(out, mask_rel))
        seg_rows.append((os.path.relpath(path, out), mask_rel))
        images.append({"id": i + 1, "file_name": rel.replace(os.sep, "/"), "width": img.width, "height": img.height})
        if i in empty:
            continue
        for c, x0, y0, x1, y1, n in regions(labels):
            if x1 - x0 < MIN_BOX_SIDE or y1 - y0 < MIN_BOX_SIDE:
                continue
            annotations.append({"id": len(annotations) + 1, "image_id": i + 1, "category_id": category_id(c),
                                "bbox": [float(x0), float(y0), float(x1 - x0), float(y1 - y0)], "area": float(n),
                                "iscrowd": int(rng_crowd.random() < CROWD_SHARE), "segmentation": []})
        if not quiet and (i + 1) % 64 == 0:
            print(f"seg_det_data: {i + 1}/{len(photos)} photos", file=sys.stderr, flush=True)
    with open(paths["seg_csv"], "w") as f:
        f.write("image,mask\n")
        f.writelines(f"{a},{b}\n" for a, b in seg_rows)
    coco = {"info": {"description": "stoker's seg/det set: regions of colour-clustered photos (bench/seg_det_data.py)"},
            "images": images, "annotations": annotations,
            "categories": [{"id": category_id(k), "name": n} for k, n in enumerate(CLASS_NAMES)]}
    with open(paths["coco_json"], "w") as f:
        json.dump(coco, f)
    with open(marker, "w") as f:
        json.dump(params, f)
    if not quiet:
        crowd = sum(a["iscrowd"] for a in annotations)
        print(f"seg_det_data: {out}: {len(images)} masks, {len(annotations)} boxes ({crowd} iscrowd) "
              f"over {len(images) - len(empty)} images", file=sys.stderr, flush=True)
    return paths


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", default=os.path.join(ROOT, "data", "sample"), help="the ImageFolder of photos")
    ap.add_argument("--out", default=os.path.join(ROOT, "data", "segdet"))
    ap.add_argument("--count", type=int, default=512, help="photos to use (default 512)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    generate(args.src, args.out, args.count, args.seed)


if __name__ == "__main__":
    main()
