#!/usr/bin/env python3
"""A plain PyTorch training script, as a user writes it: torchvision
ImageFolder + DataLoader (2 worker processes, persistent) + a small CNN
trained on the CPU. Nothing from stoker: test_doctor_autoprofile.py runs it
under `stoker doctor`, which must time its loop with no change to it.

    plain_dataloader_train.py DATA [--seconds S] [--width W] [--wrap]

--width sets the CNN's channels: a wide model makes the loop compute-bound
(over small JPEGs), a narrow one over large JPEGs input-bound. --wrap is the
same loop with the DataLoader wrapped in stoker.profile (the only line that
imports stoker), to compare with the automatic timing.
Prints one JSON line at the end: epochs, batches, samples, seconds.
"""
import argparse
import json
import time

import torch
import torch.nn as nn
import torchvision
import torchvision.transforms as T


def make_model(width, classes):
    return nn.Sequential(
        nn.Conv2d(3, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
        nn.Conv2d(width, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
        nn.MaxPool2d(2),
        nn.Conv2d(width, 2 * width, 3, padding=1), nn.BatchNorm2d(2 * width), nn.ReLU(inplace=True),
        nn.Conv2d(2 * width, 2 * width, 3, padding=1), nn.BatchNorm2d(2 * width), nn.ReLU(inplace=True),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(2 * width, classes),
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", help="an ImageFolder directory (one subdirectory per class)")
    ap.add_argument("--seconds", type=float, default=5.0, help="stop training after this long")
    ap.add_argument("--width", type=int, default=8, help="channels of the first conv layers (model size)")
    ap.add_argument("--image-size", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--wrap", action="store_true", help="wrap the DataLoader in stoker.profile")
    args = ap.parse_args()

    torch.manual_seed(0)
    train_set = torchvision.datasets.ImageFolder(args.data, transform=T.Compose([
        T.RandomResizedCrop(args.image_size, scale=(0.5, 1.0)),
        T.RandomHorizontalFlip(),
        T.ToTensor(),
        T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
    ]))
    train_loader = torch.utils.data.DataLoader(train_set, batch_size=args.batch_size, shuffle=True,
                                               num_workers=args.workers, persistent_workers=args.workers > 0)
    batches = train_loader
    if args.wrap:
        import stoker
        batches = stoker.profile(train_loader)

    model = make_model(args.width, len(train_set.classes))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    criterion = nn.CrossEntropyLoss()

    model.train()
    start = time.monotonic()
    epochs = steps = samples = 0
    done = False
    while not done:
        for images, labels in batches:
            optimizer.zero_grad()
            loss = criterion(model(images), labels)
            loss.backward()
            optimizer.step()
            steps += 1
            samples += labels.shape[0]
            if time.monotonic() - start >= args.seconds:
                done = True
                break
        else:
            epochs += 1
    print(json.dumps({"epochs": epochs, "batches": steps, "samples": samples, "loss": float(loss),
                      "seconds": time.monotonic() - start}), flush=True)


if __name__ == "__main__":
    main()
