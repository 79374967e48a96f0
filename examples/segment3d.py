#!/usr/bin/env python3
"""Trains a tiny 3D U-Net on CT patches with a stoker loader: per volume 4 patches of 96^3 drawn around
foreground and background voxels of the label (MONAI's RandCropByPosNegLabel), intensities scaled from
[-1000, 1000] HU to [0, 1], random flips on each axis; image and label get the same crop and flips. Prints the
loss every --log-every steps, then the loader's patches/s and the share of the time the loop waited for data.

    python3 bench/volume_data.py data/volumes      # makes data/volumes/npy.csv (once)
    python3 examples/segment3d.py --steps 10

On a CPU the model is the slow part (a step of 8 patches of 96^3 takes ~12 s on 2 cores: 3D convolutions'
backward passes); with a GPU (used when there is one) the loader is what the loop waits for, if anything.
The list file is a CSV with an `image,label` header, paths relative to it: .npy or .nii.gz volumes of the same
shape, labels 0 .. --classes - 1 (0 = background).
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


def block(cin, cout, stride=1):
    return nn.Sequential(nn.Conv3d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm3d(cout), nn.ReLU(inplace=True))


class TinyUNet3d(nn.Module):
    """A stride-2 stem, two levels (a block at half the resolution, a bottleneck at a quarter, a transposed-conv
    upsampling and a block on the skip connection), a 1x1x1 head, the logits upsampled (trilinear) to the input's
    size: [N, 1, D, H, W] -> [N, classes, D, H, W]."""

    def __init__(self, classes, width=8):
        super().__init__()
        self.stem = block(1, width, stride=2)
        self.enc = block(width, width)
        self.mid = block(width, 2 * width)
        self.up = nn.ConvTranspose3d(2 * width, width, 2, stride=2)
        self.dec = block(2 * width, width)
        self.head = nn.Conv3d(width, classes, 1)

    def forward(self, x):
        e = self.enc(self.stem(x))
        m = self.mid(F.max_pool3d(e, 2))
        logits = self.head(self.dec(torch.cat([self.up(m), e], 1)))
        return F.interpolate(logits, size=x.shape[-3:], mode="trilinear", align_corners=False)


def make_loader(args):
    """Batches {"image": float32 [B*4, 1, P, P, P], "label": uint8 [B*4, 1, P, P, P]}, B volumes a batch."""
    p = (args.patch,) * 3
    return stoker.Loader(args.data, batch_size=args.batch_size, shuffle=True, seed=args.seed, threads=args.workers,
                         cache="auto", fields=[stoker.Volume("image"), stoker.LabelVolume("label")],
                         transforms=[stoker.RandCropByPosNegLabel(p, label_key="label", pos=1, neg=1,
                                                                  num_samples=args.samples),
                                     stoker.ScaleIntensityRange(-1000, 1000, 0.0, 1.0, clip=True),
                                     stoker.RandFlip(prob=0.5, spatial_axis=0),
                                     stoker.RandFlip(prob=0.5, spatial_axis=1),
                                     stoker.RandFlip(prob=0.5, spatial_axis=2)])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="data/volumes/npy.csv", help="an image,label list file of volumes")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--batch-size", type=int, default=2, help="volumes a batch (each gives --samples patches)")
    ap.add_argument("--samples", type=int, default=4, help="patches per volume")
    ap.add_argument("--patch", type=int, default=96, help="the patches' side")
    ap.add_argument("--classes", type=int, default=4, help="label values 0 .. classes - 1")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--workers", type=int, default=0, help="loader threads (0 = autotuned)")
    ap.add_argument("--log-every", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if not os.path.exists(args.data):
        sys.exit(f"segment3d: {args.data} is missing: make it first with python3 bench/volume_data.py "
                 f"{os.path.dirname(args.data) or '.'}")

    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    loader = make_loader(args)
    model = TinyUNet3d(args.classes).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    print(f"segment3d: {args.data}, {args.batch_size} volumes x {args.samples} patches of {args.patch}^3 a batch, "
          f"{args.classes} classes, {args.steps} steps on {device}", flush=True)
    model.train()
    wait = 0.0
    seen = steps = epoch = 0
    losses = []
    t0 = time.perf_counter()
    while steps < args.steps:
        loader.set_epoch(epoch)
        t_wait = time.perf_counter()
        for batch in loader:
            wait += time.perf_counter() - t_wait
            x = batch["image"].to(device, non_blocking=True)                  # float32 [N, 1, P, P, P] in [0, 1]
            y = batch["label"].to(device, non_blocking=True).squeeze(1).long()  # int64 [N, P, P, P] class ids
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(loss.item())
            seen += x.shape[0]
            steps += 1
            if steps % args.log_every == 0 or steps == args.steps:
                recent = losses[-args.log_every:]
                print(f"step {steps}: loss {sum(recent) / len(recent):.3f} (mean of the last {len(recent)}); "
                      f"{seen / (time.perf_counter() - t0):.1f} patches/s", flush=True)
            if steps >= args.steps:
                break
            t_wait = time.perf_counter()
        epoch += 1
    elapsed = time.perf_counter() - t0
    vol = loader.stats().get("volume") or {}
    k = min(args.log_every, len(losses))
    print(f"segment3d: {seen / elapsed:.1f} patches/s (the loop: loader + model), waited for data "
          f"{100 * wait / elapsed:.0f}% of {elapsed:.1f}s; the loader made {vol.get('patches', '?')} patches, "
          f"{(vol.get('bytes_per_patch') or 0) / 2**20:.2f} MiB read per patch; loss {sum(losses[:k]) / k:.3f} over "
          f"the first {k} steps -> {sum(losses[-k:]) / k:.3f} over the last {k}", flush=True)


if __name__ == "__main__":
    main()
