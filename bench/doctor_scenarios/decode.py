#!/usr/bin/env python3
"""Decode: a torchvision training script over 640x480 q95 JPEGs (ImageFolder, RandomResizedCrop(64) + flip +
ToTensor + Normalize, a DataLoader with 2 worker processes), a model step of a few ms of CPU per batch of 16.
Truth: input-bound on decode (PIL decodes whole 640x480 images to crop 64 px out of them), and the step runs
slower than it would alone: the workers take the cores from it.
Fix: the port to stoker's DataLoader (the doctor's two-line diff, applied by bench/doctor_bench.py).

    decode.py DATA [--seconds S]
"""
import os

import torchvision.transforms as T
from torch.utils.data import DataLoader
from torchvision.datasets import ImageFolder

from common import Clock, MEAN, STD, Step, parse_args, train


def main():
    args = parse_args()
    clock = Clock(args.seconds)
    ds = ImageFolder(os.path.join(args.data, "large"), transform=T.Compose([
        T.RandomResizedCrop(64, scale=(0.5, 1.0)), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(MEAN, STD)]))
    loader = DataLoader(ds, batch_size=16, shuffle=True, num_workers=2, persistent_workers=True)
    train(loader, Step(width=64), clock)
    clock.report("decode", args.fix)


if __name__ == "__main__":
    main()
