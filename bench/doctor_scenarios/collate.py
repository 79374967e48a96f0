#!/usr/bin/env python3
"""Collate: a torchvision training script over 96x96 JPEGs (ImageFolder, RandomResizedCrop(64) + ToTensor, a
DataLoader with 2 worker processes) whose collate_fn does per-sample work in Python (a per-image statistic in
a Python loop, then torch.stack), a light model step. Truth: input-bound on collate.
Nothing predicted: the doctor names the collate_fn and its share of the workers' CPU; the port would run it as
Python on stoker's threads, which its probe does not time.

    collate.py DATA [--seconds S]
"""
import os

import torch
import torchvision.transforms as T
from torch.utils.data import DataLoader
from torchvision.datasets import ImageFolder

from common import Clock, Step, parse_args, train


def collate(samples):
    """Stacks the batch after a per-image statistic computed pixel by pixel in Python (as hand-written
    preprocessing often is): about a millisecond of CPU per image."""
    images, labels = [], []
    for img, label in samples:
        pixels = [v for channel in img.tolist() for row in channel for v in row]
        mean = sum(pixels) / len(pixels)
        spread = tail = 0.0
        for v in pixels:
            d = (v - mean) * (v - mean)
            spread += d
            tail += d * d
        scale = (1.0 / max(spread / len(pixels), 1e-6) ** 0.5) if tail > 0 else 1.0
        images.append((img - mean) * scale)
        labels.append(label)
    return torch.stack(images), torch.tensor(labels)


def main():
    args = parse_args()
    clock = Clock(args.seconds)
    ds = ImageFolder(os.path.join(args.data, "small"), transform=T.Compose([
        T.RandomResizedCrop(64, scale=(0.5, 1.0)), T.ToTensor()]))
    loader = DataLoader(ds, batch_size=16, shuffle=True, num_workers=2, persistent_workers=True, collate_fn=collate)
    train(loader, Step(width=16), clock)
    clock.report("collate", args.fix)


if __name__ == "__main__":
    main()
