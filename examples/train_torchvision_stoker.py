#!/usr/bin/env python3
"""A typical torchvision training script, in the manner of torchvision's
references/classification/train.py: ImageFolder datasets with the train and
eval presets (RandomResizedCrop, flip, the AutoAugment family, RandomErasing),
MixUp/CutMix in the DataLoader's collate_fn, a DistributedSampler under
torchrun, an evaluate() that reads data_loader.dataset, and a metric logger
that prints the time each step waited for data.

    python3 examples/train_torchvision.py --data-path data/sample --epochs 1 --max-steps 20 --workers 4 \\
        --auto-augment ta_wide --random-erase 0.1 --mixup-alpha 0.2 --cutmix-alpha 1.0
    # the input pipeline alone (bench/drop_in_bench.py): no model, no evaluation, one custom Python transform
    python3 examples/train_torchvision.py --data-path data/sample --model none --skip-eval --batch-size 64 \\
        --workers 2 --warmup-steps 3 --extra-transform python
    # per rank, with torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT):
    RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 python3 examples/train_torchvision.py ...

--data-path holds train/ and val/ ImageFolders, or is itself one (data/sample):
then the model is evaluated on the training folder unless --val-path says
otherwise. examples/train_torchvision_stoker.py is this script ported to
stoker: its two import lines of ImageFolder and DataLoader differ, nothing
else (diff the two files; it needs stoker importable: installed, or
PYTHONPATH=python from the repository).

Its last line is machine-readable: `RESULT {"images_per_s": ..., "images": ...,
"seconds": ..., "data_wait_share": ..., "epochs_images_per_s": [...]}`, the
training epochs' throughput, the share of their time spent waiting for a batch
and each epoch's throughput, each epoch's first --warmup-steps steps left out.
"""
import argparse
import datetime
import json
import math
import os
import time
from collections import defaultdict, deque

import torch
import torch.distributed as dist
import torch.utils.data
import torchvision
from torch import nn
from stoker import DataLoader
from torch.utils.data.dataloader import default_collate
from stoker.datasets import ImageFolder
from torchvision.transforms import autoaugment, transforms
from torchvision.transforms import functional as F
from torchvision.transforms.functional import InterpolationMode


# ---------------------------------------------------------------- presets (references/classification/presets.py)

class ClassificationPresetTrain:
    def __init__(self, *, crop_size, mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225),
                 interpolation=InterpolationMode.BILINEAR, hflip_prob=0.5, auto_augment_policy=None, ra_magnitude=9,
                 augmix_severity=3, random_erase_prob=0.0, extra_transforms=()):
        trans = [transforms.RandomResizedCrop(crop_size, interpolation=interpolation)]
        if hflip_prob > 0:
            trans.append(transforms.RandomHorizontalFlip(hflip_prob))
        if auto_augment_policy == "ra":
            trans.append(autoaugment.RandAugment(interpolation=interpolation, magnitude=ra_magnitude))
        elif auto_augment_policy == "ta_wide":
            trans.append(autoaugment.TrivialAugmentWide(interpolation=interpolation))
        elif auto_augment_policy == "augmix":
            trans.append(autoaugment.AugMix(interpolation=interpolation, severity=augmix_severity))
        elif auto_augment_policy is not None:
            policy = autoaugment.AutoAugmentPolicy(auto_augment_policy)
            trans.append(autoaugment.AutoAugment(policy=policy, interpolation=interpolation))
        trans += [transforms.PILToTensor(), transforms.ConvertImageDtype(torch.float),
                  transforms.Normalize(mean=mean, std=std)]
        if random_erase_prob > 0:
            trans.append(transforms.RandomErasing(p=random_erase_prob))
        trans += list(extra_transforms)
        self.transforms = transforms.Compose(trans)

    def __call__(self, img):
        return self.transforms(img)


class ClassificationPresetEval:
    def __init__(self, *, crop_size, resize_size=256, mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225),
                 interpolation=InterpolationMode.BILINEAR):
        self.transforms = transforms.Compose([
            transforms.Resize(resize_size, interpolation=interpolation),
            transforms.CenterCrop(crop_size),
            transforms.PILToTensor(),
            transforms.ConvertImageDtype(torch.float),
            transforms.Normalize(mean=mean, std=std),
        ])

    def __call__(self, img):
        return self.transforms(img)


class AddGaussianNoise:
    """A custom per-sample transform, as users write them: Gaussian noise of standard deviation `std` added to
    the image tensor (std=0.0 leaves the values as they are, and still does the work)."""

    def __init__(self, std=0.0):
        self.std = std

    def __call__(self, tensor):
        return tensor + self.std * torch.randn_like(tensor)

    def __repr__(self):
        return f"{type(self).__name__}(std={self.std})"


# ------------------------------------------------- batch transforms (references/classification/transforms.py)

class RandomMixup(torch.nn.Module):
    """MixUp on a batch: with probability p, blend it with itself rolled by one, lambda ~ Beta(alpha, alpha);
    targets become one-hot and are blended likewise."""

    def __init__(self, num_classes, p=0.5, alpha=1.0, inplace=False):
        super().__init__()
        if num_classes < 1 or alpha <= 0:
            raise ValueError(f"RandomMixup: num_classes must be positive and alpha > 0, got {num_classes}, {alpha}")
        self.num_classes, self.p, self.alpha, self.inplace = num_classes, p, alpha, inplace

    def forward(self, batch, target):
        if not self.inplace:
            batch, target = batch.clone(), target.clone()
        target = nn.functional.one_hot(target, num_classes=self.num_classes).to(dtype=batch.dtype)
        if torch.rand(1).item() >= self.p:
            return batch, target
        batch_rolled, target_rolled = batch.roll(1, 0), target.roll(1, 0)
        lam = float(torch._sample_dirichlet(torch.tensor([self.alpha, self.alpha]))[0])
        batch.mul_(lam).add_(batch_rolled.mul_(1.0 - lam))
        target.mul_(lam).add_(target_rolled.mul_(1.0 - lam))
        return batch, target

    def __repr__(self):
        return f"{type(self).__name__}(num_classes={self.num_classes}, p={self.p}, alpha={self.alpha})"


class RandomCutmix(torch.nn.Module):
    """CutMix on a batch: with probability p, paste a box of the batch rolled by one (side sqrt(1 - lambda) of
    the image's, centre uniform, clipped); one-hot targets mixed by the clipped box's area."""

    def __init__(self, num_classes, p=0.5, alpha=1.0, inplace=False):
        super().__init__()
        if num_classes < 1 or alpha <= 0:
            raise ValueError(f"RandomCutmix: num_classes must be positive and alpha > 0, got {num_classes}, {alpha}")
        self.num_classes, self.p, self.alpha, self.inplace = num_classes, p, alpha, inplace

    def forward(self, batch, target):
        if not self.inplace:
            batch, target = batch.clone(), target.clone()
        target = nn.functional.one_hot(target, num_classes=self.num_classes).to(dtype=batch.dtype)
        if torch.rand(1).item() >= self.p:
            return batch, target
        batch_rolled, target_rolled = batch.roll(1, 0), target.roll(1, 0)
        lam = float(torch._sample_dirichlet(torch.tensor([self.alpha, self.alpha]))[0])
        _, H, W = F.get_dimensions(batch)
        r_x, r_y = int(torch.randint(W, (1,))), int(torch.randint(H, (1,)))
        r = 0.5 * math.sqrt(1.0 - lam)
        r_w_half, r_h_half = int(r * W), int(r * H)
        x1, y1 = max(r_x - r_w_half, 0), max(r_y - r_h_half, 0)
        x2, y2 = min(r_x + r_w_half, W), min(r_y + r_h_half, H)
        batch[:, :, y1:y2, x1:x2] = batch_rolled[:, :, y1:y2, x1:x2]
        lam = 1.0 - (x2 - x1) * (y2 - y1) / (W * H)
        target.mul_(lam).add_(target_rolled.mul_(1.0 - lam))
        return batch, target

    def __repr__(self):
        return f"{type(self).__name__}(num_classes={self.num_classes}, p={self.p}, alpha={self.alpha})"


# ------------------------------------------------------------------- metric logging (references' utils.py)

class SmoothedValue:
    """A series of values: the median and mean of the last `window_size`, the mean of all."""

    def __init__(self, window_size=20, fmt="{median:.4f} ({global_avg:.4f})"):
        self.deque, self.total, self.count, self.fmt = deque(maxlen=window_size), 0.0, 0, fmt

    def update(self, value, n=1):
        self.deque.append(value)
        self.count += n
        self.total += value * n

    @property
    def median(self):
        return sorted(self.deque)[len(self.deque) // 2] if self.deque else 0.0

    @property
    def avg(self):
        return sum(self.deque) / max(len(self.deque), 1)

    @property
    def global_avg(self):
        return self.total / max(self.count, 1)

    def __str__(self):
        return self.fmt.format(median=self.median, avg=self.avg, global_avg=self.global_avg,
                               value=self.deque[-1] if self.deque else 0.0)


class MetricLogger:
    def __init__(self, delimiter="  "):
        self.meters, self.delimiter = defaultdict(SmoothedValue), delimiter

    def update(self, n=1, **kwargs):
        for k, v in kwargs.items():
            self.meters[k].update(v.item() if isinstance(v, torch.Tensor) else v, n)

    def __str__(self):
        return self.delimiter.join(f"{name}: {meter}" for name, meter in self.meters.items())

    def log_every(self, iterable, print_freq, header, max_steps=0, log=print):
        """Yields the items of `iterable` (at most max_steps of them when set), printing every print_freq steps
        the meters, the step time and the time the step waited for its batch (data)."""
        total = len(iterable) if not max_steps else min(len(iterable), max_steps)
        iter_time, data_time = SmoothedValue(fmt="{avg:.4f}s"), SmoothedValue(fmt="{avg:.4f}s")
        self.data_total = 0.0
        self.step_starts, self.data_waits = [], []  # per step: when it began waiting for its batch, how long
        width = len(str(total))
        start = end = time.time()
        for i, obj in enumerate(iterable):
            data_time.update(time.time() - end)
            self.data_total += time.time() - end
            self.step_starts.append(end)
            self.data_waits.append(time.time() - end)
            yield obj
            iter_time.update(time.time() - end)
            if i % print_freq == 0 or i == total - 1:
                eta = datetime.timedelta(seconds=int(iter_time.global_avg * (total - i - 1)))
                log(self.delimiter.join([f"{header} [{i:{width}d}/{total}]", f"eta: {eta}", str(self),
                                         f"time: {iter_time}", f"data: {data_time}"]), flush=True)
            end = time.time()
            if i + 1 >= total:
                break
        self.end_time = time.time()
        self.elapsed = self.end_time - start
        log(f"{header} Total time: {datetime.timedelta(seconds=int(self.elapsed))} "
            f"({self.elapsed / max(total, 1):.4f} s / it)", flush=True)


# --------------------------------------------------------------------------------------------- the model

class TinyNet(nn.Module):
    """Three strided conv blocks and a linear head: small enough that the CPU keeps up with the data."""

    def __init__(self, num_classes, width=32):
        super().__init__()
        layers, cin = [], 3
        for cout, stride in ((width, 4), (2 * width, 2), (4 * width, 2)):
            layers += [nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True)]
            cin = cout
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(cin, num_classes)

    def forward(self, x):
        return self.classifier(torch.flatten(nn.functional.adaptive_avg_pool2d(self.features(x), 1), 1))


# ------------------------------------------------------------------------------------------ train, evaluate

def train_one_epoch(model, criterion, optimizer, data_loader, device, epoch, args, log):
    """One epoch over data_loader (model None: the data alone). -> (images, seconds, seconds waiting for data)
    of its steps after the first args.warmup_steps."""
    if model is not None:
        model.train()
    metric_logger = MetricLogger()
    images = 0
    batch_sizes = []
    header = f"Epoch: [{epoch}]"
    for image, target in metric_logger.log_every(data_loader, args.print_freq, header, args.max_steps, log):
        start_time = time.time()
        image, target = image.to(device, non_blocking=True), target.to(device, non_blocking=True)
        batch_sizes.append(image.shape[0])
        if model is None:  # --model none: the input pipeline alone
            images += image.shape[0]
            metric_logger.update(**{"img/s": image.shape[0] / max(time.time() - metric_logger.step_starts[-1], 1e-9)})
            continue
        output = model(image)
        loss = criterion(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        labels = target.argmax(1) if target.ndim == 2 else target  # one-hot after MixUp/CutMix
        batch_size = image.shape[0]
        images += batch_size
        metric_logger.update(loss=loss.item(), lr=optimizer.param_groups[0]["lr"])
        metric_logger.update(acc1=(output.argmax(1) == labels).float().mean().item() * 100, n=batch_size)
        metric_logger.update(**{"img/s": batch_size / (time.time() - start_time)})
    world = dist.get_world_size() if dist.is_initialized() else 1
    elapsed = metric_logger.elapsed
    log(f"{header} train: {images * world} images in {elapsed:.2f}s: {images * world / elapsed:.1f} images/s, "
        f"waited for data {100 * metric_logger.data_total / elapsed:.0f}% of the time", flush=True)
    warm = min(args.warmup_steps, len(batch_sizes))
    if warm == len(batch_sizes):
        return 0, 0.0, 0.0
    return (sum(batch_sizes[warm:]) * world, metric_logger.end_time - metric_logger.step_starts[warm],
            sum(metric_logger.data_waits[warm:]))


def evaluate(model, criterion, data_loader, device, args, log):
    """Top-1 accuracy over data_loader (its first max_steps batches when set); reads data_loader.dataset for
    its size and class names."""
    dataset = data_loader.dataset
    metric_logger = MetricLogger()
    classes = len(dataset.classes)
    if model is None:  # --model none: the evaluation's input pipeline alone
        seen = 0
        for image, target in metric_logger.log_every(data_loader, args.print_freq, "Test:", args.max_steps, log):
            seen += image.to(device, non_blocking=True).shape[0]
        log(f"Test: {seen} images of {len(dataset)} ({classes} classes) read in {metric_logger.elapsed:.2f}s: "
            f"{seen / max(metric_logger.elapsed, 1e-9):.1f} images/s (no model)", flush=True)
        return None
    model.eval()
    correct, seen = torch.zeros(classes, dtype=torch.int64), torch.zeros(classes, dtype=torch.int64)
    with torch.inference_mode():
        for image, target in metric_logger.log_every(data_loader, args.print_freq, "Test:", args.max_steps, log):
            image, target = image.to(device, non_blocking=True), target.to(device, non_blocking=True)
            output = model(image)
            metric_logger.update(loss=criterion(output, target).item(), n=image.shape[0])
            hit = (output.argmax(1) == target).cpu()
            correct += torch.bincount(target.cpu()[hit], minlength=classes)
            seen += torch.bincount(target.cpu(), minlength=classes)
    if dist.is_initialized():
        dist.all_reduce(correct)
        dist.all_reduce(seen)
    total = int(seen.sum())
    acc1 = 100.0 * int(correct.sum()) / max(total, 1)
    if total != len(dataset):
        log(f"Test: evaluated {total} of the {len(dataset)} images of {dataset.root}", flush=True)
    per_class = correct.double() / seen.clamp(min=1)
    worst = int(per_class.masked_fill(seen == 0, float("inf")).argmin())
    log(f"Test: Acc@1 {acc1:.3f} over {total} images, {classes} classes; "
        f"worst class {dataset.classes[worst]!r} ({100 * float(per_class[worst]):.1f}%)", flush=True)
    return acc1


def load_data(train_dir, val_dir, args):
    interpolation = InterpolationMode(args.interpolation)
    extra = [AddGaussianNoise(std=0.0)] if args.extra_transform == "python" else []
    dataset = ImageFolder(
        train_dir,
        ClassificationPresetTrain(crop_size=args.train_crop_size, interpolation=interpolation,
                                  auto_augment_policy=args.auto_augment, random_erase_prob=args.random_erase,
                                  extra_transforms=extra))
    dataset_test = ImageFolder(
        val_dir,
        ClassificationPresetEval(crop_size=args.val_crop_size, resize_size=args.val_resize_size,
                                 interpolation=interpolation))
    if dist.is_available() and dist.is_initialized():
        train_sampler = torch.utils.data.distributed.DistributedSampler(dataset, seed=args.seed)
        test_sampler = torch.utils.data.distributed.DistributedSampler(dataset_test, shuffle=False)
    else:
        train_sampler = torch.utils.data.RandomSampler(dataset)
        test_sampler = torch.utils.data.SequentialSampler(dataset_test)
    return dataset, dataset_test, train_sampler, test_sampler


def init_distributed_mode(args):
    """Joins the process group when launched by torchrun (or with its environment: RANK, WORLD_SIZE, ...)."""
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        dist.init_process_group(backend=args.dist_backend, init_method="env://")
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def main(args):
    rank, world_size = init_distributed_mode(args)
    log = print if rank == 0 else (lambda *a, **k: None)
    log(args)
    torch.manual_seed(args.seed + rank)
    device = torch.device(args.device)

    if os.path.isdir(os.path.join(args.data_path, "train")):
        train_dir, val_dir = os.path.join(args.data_path, "train"), os.path.join(args.data_path, "val")
    else:
        train_dir = val_dir = args.data_path
    val_dir = args.val_path or val_dir
    dataset, dataset_test, train_sampler, test_sampler = load_data(train_dir, val_dir, args)
    num_classes = len(dataset.classes)
    log(f"train: {len(dataset)} images of {num_classes} classes in {train_dir}; val: {len(dataset_test)} in "
        f"{val_dir}; {world_size} rank(s)", flush=True)

    collate_fn = None
    mixup_transforms = []
    if args.mixup_alpha > 0.0:
        mixup_transforms.append(RandomMixup(num_classes, p=1.0, alpha=args.mixup_alpha))
    if args.cutmix_alpha > 0.0:
        mixup_transforms.append(RandomCutmix(num_classes, p=1.0, alpha=args.cutmix_alpha))
    if mixup_transforms:
        mixupcutmix = torchvision.transforms.RandomChoice(mixup_transforms)

        def collate_fn(batch):
            return mixupcutmix(*default_collate(batch))

    data_loader = DataLoader(
        dataset,
        batch_size=args.batch_size,
        sampler=train_sampler,
        num_workers=args.workers,
        pin_memory=device.type == "cuda",
        collate_fn=collate_fn,
        persistent_workers=args.workers > 0,
    )
    data_loader_test = DataLoader(
        dataset_test,
        batch_size=args.batch_size,
        sampler=test_sampler,
        num_workers=args.workers,
        pin_memory=device.type == "cuda",
        persistent_workers=args.workers > 0,
    )

    criterion = nn.CrossEntropyLoss(label_smoothing=args.label_smoothing)
    model = optimizer = lr_scheduler = None
    if args.model != "none":  # none: no model, no optimizer; the loops only iterate the DataLoaders
        if args.model == "tiny":
            model = TinyNet(num_classes)
        else:
            model = torchvision.models.__dict__[args.model](num_classes=num_classes)
        model.to(device)
        if dist.is_initialized():
            model = nn.parallel.DistributedDataParallel(
                model, device_ids=[device.index] if device.type == "cuda" else None)
        optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum,
                                    weight_decay=args.weight_decay)
        lr_scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)

    log("Start training", flush=True)
    start_time = time.time()
    images = seconds = waited = 0
    per_epoch = []  # each training epoch's images/s (as RESULT's)
    for epoch in range(args.epochs):
        if dist.is_initialized():
            train_sampler.set_epoch(epoch)
        n, s, w = train_one_epoch(model, criterion, optimizer, data_loader, device, epoch, args, log)
        images, seconds, waited = images + n, seconds + s, waited + w
        per_epoch.append(n / s if s else 0.0)
        if lr_scheduler is not None:
            lr_scheduler.step()
        if not args.skip_eval:
            evaluate(model, criterion, data_loader_test, device, args, log)
    log(f"Training time {datetime.timedelta(seconds=int(time.time() - start_time))}", flush=True)
    if dist.is_initialized():
        dist.destroy_process_group()
    # the training epochs, each without its first --warmup-steps steps
    log("RESULT " + json.dumps({"images_per_s": images / seconds if seconds else 0.0, "images": images,
                                "seconds": seconds, "data_wait_share": waited / seconds if seconds else 0.0,
                                "epochs_images_per_s": per_epoch}),
        flush=True)


def get_args_parser():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-path", default="data/sample", help="train/ and val/ ImageFolders, or one ImageFolder")
    parser.add_argument("--val-path", default=None, help="the validation ImageFolder (default: see --data-path)")
    parser.add_argument("--model", default="tiny",
                        help="tiny (a small CNN), a torchvision.models name, or none (no model: the data alone)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("-b", "--batch-size", default=32, type=int, help="images per batch (per rank)")
    parser.add_argument("--epochs", default=1, type=int)
    parser.add_argument("--max-steps", default=0, type=int, help="stop each epoch and evaluation after N batches")
    parser.add_argument("-j", "--workers", default=4, type=int, help="DataLoader worker processes")
    parser.add_argument("--lr", default=0.1, type=float)
    parser.add_argument("--momentum", default=0.9, type=float)
    parser.add_argument("--wd", "--weight-decay", default=1e-4, type=float, dest="weight_decay")
    parser.add_argument("--label-smoothing", default=0.0, type=float)
    parser.add_argument("--mixup-alpha", default=0.0, type=float, help="MixUp alpha (0: off)")
    parser.add_argument("--cutmix-alpha", default=0.0, type=float, help="CutMix alpha (0: off)")
    parser.add_argument("--auto-augment", default=None, choices=["ta_wide", "ra", "augmix", "imagenet", "cifar10",
                                                                  "svhn"], help="auto augment policy (default: none)")
    parser.add_argument("--random-erase", default=0.0, type=float, help="random erasing probability")
    parser.add_argument("--extra-transform", default="none", choices=["none", "python"],
                        help="python: a custom transform (AddGaussianNoise(std=0.0)) at the end of the train preset")
    parser.add_argument("--interpolation", default="bilinear", help="the presets' interpolation")
    parser.add_argument("--train-crop-size", default=224, type=int)
    parser.add_argument("--val-resize-size", default=256, type=int)
    parser.add_argument("--val-crop-size", default=224, type=int)
    parser.add_argument("--print-freq", default=10, type=int, help="print every N steps")
    parser.add_argument("--skip-eval", action="store_true", help="no evaluation after each epoch")
    parser.add_argument("--warmup-steps", default=0, type=int,
                        help="the RESULT line leaves out each epoch's first N steps")
    parser.add_argument("--dist-backend", default="gloo", help="the process group's backend under torchrun")
    parser.add_argument("--seed", default=0, type=int)
    return parser


if __name__ == "__main__":
    main(get_args_parser().parse_args())
