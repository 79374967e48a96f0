#!/usr/bin/env python3
"""Trains a small ResNet-style CNN on an ImageFolder with a stoker loader (or,
for comparison, torch's DataLoader + torchvision), holding out every 10th image
for validation. Prints per epoch: training loss, held-out accuracy, images/s,
and the share of the time the training loop waited for data.

    python3 examples/train_classifier.py data/sample --epochs 5
    python3 examples/train_classifier.py data/sample --loader torch        # the DataLoader baseline
    python3 -m torch.distributed.run --nproc_per_node=2 examples/train_classifier.py data/sample
    # or, where torchrun is broken (Debian's torch 1.13 on Python 3.11), per rank:
    RANK=0 LOCAL_RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 python3 examples/train_classifier.py ...

Under torchrun (WORLD_SIZE set) it joins a gloo process group (nccl with
--device cuda), wraps the model in DistributedDataParallel, and each rank reads
its own share of every epoch: stoker takes rank and world size from the
process group by itself.
"""
import argparse
import os
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
import stoker  # noqa: E402

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
EXTS = (".jpg", ".jpeg", ".png")


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.skip = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                     if stride != 1 or cin != cout else nn.Identity())

    def forward(self, x):
        return F.relu(self.b2(self.c2(F.relu(self.b1(self.c1(x))))) + self.skip(x))


class SmallResNet(nn.Module):
    def __init__(self, classes, width=24):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 2, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        self.layers = nn.Sequential(Block(width, width, 1), Block(width, 2 * width, 2), Block(2 * width, 4 * width, 2))
        self.head = nn.Linear(4 * width, classes)

    def forward(self, x):
        x = self.layers(self.stem(x))
        return self.head(F.adaptive_avg_pool2d(x, 1).flatten(1))


def split_lists(root, out_dir, every=10):
    """ImageFolder -> train.csv / val.csv (every 10th image of each class held out)."""
    classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
    rows = {"train": [], "val": []}
    for c, name in enumerate(classes):
        files = []
        for r, _, fs in sorted(os.walk(os.path.join(root, name))):
            files += [os.path.join(r, f) for f in sorted(fs) if f.lower().endswith(EXTS)]
        for i, f in enumerate(files):
            rows["val" if i % every == every - 1 else "train"].append((os.path.abspath(f), c))
    paths = {}
    for k, v in rows.items():
        paths[k] = os.path.join(out_dir, f"{k}.csv")
        with open(paths[k], "w") as fh:
            fh.write("path,label\n")
            fh.writelines(f"{p},{c}\n" for p, c in v)
    return paths, classes, rows


class ListDataset(torch.utils.data.Dataset):
    """The same split for torch's DataLoader baseline (PIL + torchvision)."""

    def __init__(self, rows, transform):
        self.rows, self.transform = rows, transform
        self.samples = [(path, label) for path, label in rows]  # as ImageFolder: stoker.profile reports the files

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        from PIL import Image
        path, label = self.rows[i]
        with open(path, "rb") as f:
            img = Image.open(f).convert("RGB")
        return self.transform(img), label


def make_loaders(args, paths, rows, rank, world):
    if args.loader == "stoker":
        train = stoker.Loader(paths["train"], batch_size=args.batch_size, shuffle=True, seed=args.seed,
                              drop_last=True, threads=args.workers,
                              transforms=[stoker.RandomResizedCrop(args.size, scale=(0.25, 1.0)),
                                          stoker.RandomHorizontalFlip(), stoker.Normalize(MEAN, STD)])
        val = stoker.Loader(paths["val"], batch_size=args.batch_size, threads=args.workers, rank=0, world_size=1,
                            transforms=[stoker.Resize(int(args.size * 8 / 7)), stoker.CenterCrop(args.size),
                                        stoker.Normalize(MEAN, STD)])
        return train, val, train.set_epoch
    import torchvision.transforms as T
    tr = T.Compose([T.RandomResizedCrop(args.size, scale=(0.25, 1.0)), T.RandomHorizontalFlip(), T.ToTensor(),
                    T.Normalize(MEAN, STD)])
    te = T.Compose([T.Resize(int(args.size * 8 / 7)), T.CenterCrop(args.size), T.ToTensor(), T.Normalize(MEAN, STD)])
    train_ds, val_ds = ListDataset(rows["train"], tr), ListDataset(rows["val"], te)
    sampler = torch.utils.data.DistributedSampler(train_ds, world, rank, shuffle=True, seed=args.seed,
                                                  drop_last=True) if world > 1 else None
    g = torch.Generator()
    g.manual_seed(args.seed)
    train = torch.utils.data.DataLoader(train_ds, batch_size=args.batch_size, shuffle=sampler is None,
                                        sampler=sampler, num_workers=args.workers or os.cpu_count(), drop_last=True,
                                        generator=g, persistent_workers=True)
    val = torch.utils.data.DataLoader(val_ds, batch_size=args.batch_size, num_workers=args.workers or os.cpu_count())
    return train, val, (sampler.set_epoch if sampler else (lambda e: None))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", nargs="?", default="data/sample")
    ap.add_argument("--loader", choices=["stoker", "torch"], default="stoker")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--workers", type=int, default=0, help="loader threads / DataLoader workers (0 = cores)")
    ap.add_argument("--max-steps", type=int, default=0, help="stop each epoch after this many steps (0 = all)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--holdout", type=int, default=10, help="hold out every Nth image of each class")
    args = ap.parse_args()

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = 0
    if world > 1:
        dist.init_process_group("nccl" if args.device.startswith("cuda") else "gloo")
        rank = dist.get_rank()
    torch.manual_seed(args.seed)
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))
    device = torch.device(args.device)
    tmp = tempfile.mkdtemp(prefix="train_classifier-")
    paths, classes, rows = split_lists(args.data, tmp, every=args.holdout)
    train, val, set_epoch = make_loaders(args, paths, rows, rank, world)
    model = SmallResNet(len(classes)).to(device)
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model)
    steps_per_epoch = len(train) if not args.max_steps else min(len(train), args.max_steps)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4, nesterov=True)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=args.epochs * steps_per_epoch)
    if rank == 0:
        print(f"train_classifier: {args.loader} loader, {len(rows['train'])} train / {len(rows['val'])} held-out "
              f"images, {len(classes)} classes, {world} rank(s), {args.size}x{args.size}, batch {args.batch_size}",
              flush=True)
    profiled_train = stoker.profile(train, name=f"{args.loader} train loader")
    for epoch in range(args.epochs):
        set_epoch(epoch)
        model.train()
        t0 = time.perf_counter()
        wait = loss_sum = 0.0
        seen = steps = 0
        t_wait = time.perf_counter()
        for x, y in profiled_train:  # stoker.profile: wait and step times for `stoker doctor`
            wait += time.perf_counter() - t_wait
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            loss_sum += loss.item()
            seen += y.shape[0]
            steps += 1
            if steps >= steps_per_epoch:
                break
            t_wait = time.perf_counter()
        elapsed = time.perf_counter() - t0
        model.eval()
        correct = total = 0
        with torch.no_grad():
            for x, y in val:
                pred = model(x.to(device)).argmax(1).cpu()
                correct += int((pred == y).sum())
                total += y.shape[0]
        if rank == 0:
            print(f"epoch {epoch}: loss {loss_sum / max(steps, 1):.3f}  held-out accuracy {correct / total:.3f}  "
                  f"{seen * world / elapsed:.0f} images/s  waited for data {100 * wait / elapsed:.0f}% of "
                  f"{elapsed:.1f}s", flush=True)
    if rank == 0 and args.loader == "stoker":
        s = train.stats()
        print(f"loader threads: {s['threads']} of {s['threads_max']} ({s['autotune']})", flush=True)
        for line in s["autotune_log"]:
            print(f"  autotune {line}", flush=True)
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
