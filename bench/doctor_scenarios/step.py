#!/usr/bin/env python3
"""The model step: a torchvision training script (ImageFolder over 320x240 q95 JPEGs, RandomResizedCrop(64) +
flip + ToTensor + Normalize, a DataLoader with 2 worker processes) whose model step takes more CPU per batch
than the workers need to make one. Truth: compute-bound (the model step); the workers still take CPU from it.
The doctor's suggestions: speed up the step (not predicted) and the port to stoker's DataLoader (less CPU for
the input, more for the step: predicted with the step replayed beside stoker's threads).
Fix: the port (the doctor's two-line diff, applied by bench/doctor_bench.py).

    step.py DATA [--seconds S]
"""
import os

import torchvision.transforms as T
from torch.utils.data import DataLoader
from torchvision.datasets import ImageFolder

from common import Clock, MEAN, STD, Step, parse_args, train


def main():
    args = parse_args()
    clock = Clock(args.seconds)
    ds = ImageFolder(os.path.join(args.data, "medium"), transform=T.Compose([
        T.RandomResizedCrop(64, scale=(0.5, 1.0)), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(MEAN, STD)]))
    loader = DataLoader(ds, batch_size=16, shuffle=True, num_workers=2, persistent_workers=True)
    train(loader, Step(width=1000), clock)
    clock.report("step", args.fix)


if __name__ == "__main__":
    main()
