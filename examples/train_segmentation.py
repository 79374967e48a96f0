#!/usr/bin/env python3
"""Trains a tiny UNet on the masks of a segmentation list file with a stoker
loader (or, for comparison, torch's DataLoader + torchvision on PIL): images
and their masks get the same RandomResizedCrop and flip (masks with
nearest-neighbour resampling, 255 = ignore, also where a crop pads). Prints
the loss every --log-every steps, then images/s and the share of the time
the training loop waited for data.

    python3 bench/seg_det_data.py         # makes data/segdet/seg.csv from data/sample (once)
    python3 examples/train_segmentation.py data/segdet/seg.csv --steps 50
    python3 examples/train_segmentation.py data/segdet/seg.csv --loader torch     # the DataLoader baseline

The list file is a CSV with an `image,mask` header, paths relative to it;
masks are 8-bit PNGs of class ids (0 .. --classes - 1) and 255 for "ignore".
"""
import argparse
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
import stoker  # noqa: E402

# The DataLoader side (--loader torch) is the benchmark's, so the two cannot drift apart.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))
from seg_det_bench import SegDataset, normalized, read_seg_rows, rrc_flip  # noqa: E402

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
IGNORE = 255


def conv_bn(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
                         nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class TinyUNet(nn.Module):
    """A stride-2 stem, two downsamplings and two upsamplings with skip connections, a 1x1 head, the logits
    upsampled (bilinear) to the input's size: [B, classes, H, W]."""

    def __init__(self, classes, width=16):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 2, 1, bias=False), nn.BatchNorm2d(width),
                                  nn.ReLU(inplace=True))
        self.enc1, self.enc2 = conv_bn(width, width), conv_bn(width, 2 * width)
        self.mid = conv_bn(2 * width, 4 * width)
        self.up2 = nn.ConvTranspose2d(4 * width, 2 * width, 2, 2)
        self.dec2 = conv_bn(4 * width, 2 * width)
        self.up1 = nn.ConvTranspose2d(2 * width, width, 2, 2)
        self.dec1 = conv_bn(2 * width, width)
        self.head = nn.Conv2d(width, classes, 1)

    def forward(self, x):
        e1 = self.enc1(self.stem(x))
        e2 = self.enc2(F.max_pool2d(e1, 2))
        m = self.mid(F.max_pool2d(e2, 2))
        d2 = self.dec2(torch.cat([self.up2(m), e2], 1))
        d1 = self.dec1(torch.cat([self.up1(d2), e1], 1))
        return F.interpolate(self.head(d1), size=x.shape[-2:], mode="bilinear", align_corners=False)


def make_loader(args):
    """Batches {"image": float32 [B, 3, S, S], "mask": uint8 [B, S, S]}, and the set_epoch to call per epoch."""
    if args.loader == "stoker":
        loader = stoker.Loader(args.data, batch_size=args.batch_size, shuffle=True, seed=args.seed, drop_last=True,
                               threads=args.workers,
                               fields=[stoker.Image("image"), stoker.Mask("mask", fill=IGNORE)],
                               transforms=[stoker.RandomResizedCrop(args.size, scale=(0.25, 1.0)),
                                           stoker.RandomHorizontalFlip(), stoker.Normalize(MEAN, STD)])
        return loader, loader.set_epoch
    g = torch.Generator()
    g.manual_seed(args.seed)
    dataset = SegDataset(read_seg_rows(args.data), rrc_flip(args.size, scale=(0.25, 1.0)), normalized)
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, shuffle=True,
                                         num_workers=args.workers or os.cpu_count(), drop_last=True, generator=g,
                                         persistent_workers=True)
    return loader, lambda epoch: None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", nargs="?", default="data/segdet/seg.csv", help="an image,mask list file")
    ap.add_argument("--loader", choices=["stoker", "torch"], default="stoker")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--size", type=int, default=128, help="the crops' side")
    ap.add_argument("--classes", type=int, default=8, help="mask class ids 0 .. classes - 1 (and 255: ignore)")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--workers", type=int, default=0, help="loader threads / DataLoader workers (0 = cores)")
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if not os.path.exists(args.data):
        sys.exit(f"train_segmentation: {args.data} is missing: make it with python3 bench/seg_det_data.py")

    torch.manual_seed(args.seed)
    loader, set_epoch = make_loader(args)
    model = TinyUNet(args.classes)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    print(f"train_segmentation: {args.loader} loader, {args.data}, {args.size}x{args.size} crops, batch "
          f"{args.batch_size}, {args.classes} classes, {args.steps} steps", flush=True)
    profiled = stoker.profile(loader, name=f"{args.loader} segmentation loader")
    model.train()
    wait = 0.0
    seen = steps = epoch = 0
    losses = []
    t0 = time.perf_counter()
    while steps < args.steps:
        set_epoch(epoch)
        t_wait = time.perf_counter()
        for batch in profiled:  # stoker.profile: wait and step times for `stoker doctor`
            wait += time.perf_counter() - t_wait
            x, y = batch["image"], batch["mask"].long()
            loss = F.cross_entropy(model(x), y, ignore_index=IGNORE)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(loss.item())
            seen += x.shape[0]
            steps += 1
            if steps % args.log_every == 0 or steps == args.steps:
                recent = losses[-args.log_every:]
                print(f"step {steps}: loss {sum(recent) / len(recent):.3f} (mean of the last {len(recent)})",
                      flush=True)
            if steps >= args.steps:
                break
            t_wait = time.perf_counter()
        epoch += 1
    elapsed = time.perf_counter() - t0
    k = min(args.log_every, len(losses))
    print(f"{args.loader}: {seen / elapsed:.1f} images/s, waited for data {100 * wait / elapsed:.0f}% of "
          f"{elapsed:.1f}s; loss {sum(losses[:k]) / k:.3f} over the first {k} steps -> "
          f"{sum(losses[-k:]) / k:.3f} over the last {k}", flush=True)


if __name__ == "__main__":
    main()
