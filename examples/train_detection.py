#!/usr/bin/env python3
"""Trains torchvision's Faster R-CNN (MobileNetV3-Large 320 FPN, from scratch:
weights=None, weights_backbone=None, so nothing is downloaded) on a COCO
instances file with a stoker loader (or, for comparison, torch's DataLoader +
torchvision on PIL). Each image's longer side is resized to --size (aspect
kept), padded to --size x --size (CenterCrop), flipped at random; its boxes
follow. Images stay float in [0, 1]: the model normalises them itself. Prints
the losses per step, then images/s and the share of the time the training
loop waited for data.

    python3 bench/seg_det_data.py         # makes data/segdet/instances.json from data/sample (once)
    python3 examples/train_detection.py data/segdet/instances.json --image-root data/sample --steps 10
    python3 examples/train_detection.py data/segdet/instances.json --image-root data/sample --loader torch

iscrowd annotations are dropped and category ids are the labels (as
torchvision's detection references do); images without boxes train as
negatives (boxes [0, 4]). On a CPU the box head's matrix products dominate a
step (Debian's torch calls the reference BLAS): --rois, the model's
box_batch_size_per_image, is 32 here (torchvision's default: 512).
"""
import argparse
import json
import os
import sys
import time

import torch
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
import stoker  # noqa: E402

# The DataLoader side (--loader torch) is the benchmark's, so the two cannot drift apart.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))
from seg_det_bench import det_geometry, open_rgb, read_coco  # noqa: E402


def num_classes_of(path):
    """The model's num_classes: the highest category id + 1 (0 is the background)."""
    with open(path) as f:
        return max(c["id"] for c in json.load(f)["categories"]) + 1


class CocoBoxes(torch.utils.data.Dataset):
    """The same samples for torch's DataLoader baseline: PIL + torchvision's functional ops, as
    bench/seg_det_bench.py times them (its det_geometry: the longer side resized, CenterCrop, flip; boxes follow)."""

    def __init__(self, records, size):
        self.records, self.size = records, size

    def __len__(self):
        return len(self.records)

    def __getitem__(self, i):
        import torchvision.transforms.functional as F
        path, boxes, labels = self.records[i]
        img, boxes, labels = det_geometry(open_rgb(path), boxes, labels, self.size, flip=bool(torch.rand(1) < 0.5))
        return F.to_tensor(img), {"boxes": boxes, "labels": labels}


def collate(samples):
    return torch.stack([x for x, _ in samples]), [t for _, t in samples]


def make_loader(args):
    """Batches as stoker gives them (a dict of tensors) or (images [B, 3, S, S], targets), and the set_epoch to
    call per epoch."""
    if args.loader == "stoker":
        loader = stoker.Loader(args.data, image_root=args.image_root, batch_size=args.batch_size, shuffle=True,
                               seed=args.seed, drop_last=True, threads=args.workers,
                               fields=[stoker.Image("image"), stoker.Boxes("boxes", max_boxes=args.max_boxes)],
                               transforms=[stoker.Resize(None, max_size=args.size), stoker.CenterCrop(args.size),
                                           stoker.RandomHorizontalFlip()])
        return loader, loader.set_epoch
    g = torch.Generator()
    g.manual_seed(args.seed)
    dataset = CocoBoxes(read_coco(args.data, args.image_root), args.size)
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, shuffle=True,
                                         num_workers=args.workers or os.cpu_count(), drop_last=True, generator=g,
                                         collate_fn=collate, persistent_workers=True)
    return loader, lambda epoch: None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", nargs="?", default="data/segdet/instances.json", help="a COCO instances JSON")
    ap.add_argument("--image-root", default="data/sample", help="the folder the images' file_name are relative to")
    ap.add_argument("--loader", choices=["stoker", "torch"], default="stoker")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--size", type=int, default=320, help="the padded images' side")
    ap.add_argument("--max-boxes", type=int, default=100, help="boxes kept per image (stoker.Boxes max_boxes)")
    ap.add_argument("--rois", type=int, default=32, help="box head samples per image (box_batch_size_per_image)")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--workers", type=int, default=0, help="loader threads / DataLoader workers (0 = cores)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if not os.path.exists(args.data):
        sys.exit(f"train_detection: {args.data} is missing: make it with python3 bench/seg_det_data.py")

    torch.manual_seed(args.seed)
    loader, set_epoch = make_loader(args)
    num_classes = num_classes_of(args.data)
    model = torchvision.models.detection.fasterrcnn_mobilenet_v3_large_320_fpn(
        weights=None, weights_backbone=None, num_classes=num_classes, box_batch_size_per_image=args.rois)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.SGD(params, lr=args.lr, momentum=0.9, weight_decay=1e-4)
    print(f"train_detection: {args.loader} loader, {args.data} (images under {args.image_root}), {args.size}x"
          f"{args.size}, batch {args.batch_size}, {num_classes} classes (ids), {args.steps} steps", flush=True)
    profiled = stoker.profile(loader, name=f"{args.loader} detection loader")
    model.train()
    wait = 0.0
    seen = steps = epoch = boxes = 0
    t0 = time.perf_counter()
    while steps < args.steps:
        set_epoch(epoch)
        t_wait = time.perf_counter()
        for batch in profiled:  # stoker.profile: wait and step times for `stoker doctor`
            wait += time.perf_counter() - t_wait
            if args.loader == "stoker":
                images, targets = batch["image"], stoker.detection_targets(batch)  # views of the batch
            else:
                images, targets = batch
            losses = model(list(images), targets)
            loss = sum(losses.values())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            seen += len(targets)
            boxes += sum(len(t["boxes"]) for t in targets)
            steps += 1
            print(f"step {steps}: loss {loss.item():.3f} ("
                  + ", ".join(f"{k.removeprefix('loss_')} {v.item():.3f}" for k, v in losses.items())
                  + f"); {sum(len(t['boxes']) == 0 for t in targets)} image(s) without boxes", flush=True)
            if steps >= args.steps:
                break
            t_wait = time.perf_counter()
        epoch += 1
    elapsed = time.perf_counter() - t0
    print(f"{args.loader}: {seen / elapsed:.1f} images/s ({boxes} boxes), waited for data {100 * wait / elapsed:.0f}% "
          f"of {elapsed:.1f}s", flush=True)


if __name__ == "__main__":
    main()
