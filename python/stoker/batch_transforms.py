"""Batch transforms: MixUp and CutMix as torchvision.transforms.v2 defines them,
applied to each batch a Loader hands out (``batch_transforms=``).

    loader = stoker.Loader("data/train", batch_size=64, transforms=[...],
                           batch_transforms=[stoker.RandomChoice([stoker.MixUp(alpha=0.2, num_classes=1000),
                                                                  stoker.CutMix(alpha=1.0, num_classes=1000)])])
    for images, labels in loader:   # labels: float32 [64, 1000]

Semantics (torchvision 0.16+ v2; Debian's torchvision 0.14 has no v2): the
batch is paired with itself rolled by one along the batch dimension; MixUp
blends images and one-hot labels as ``x.roll(1, 0) * (1 - lam) + x * lam``
with ``lam ~ Beta(alpha, alpha)``, in float32, operation for operation as v2;
CutMix pastes the rolled batch's box (centre uniform over the image, side
``sqrt(1 - lam)`` of the image's, clipped) and mixes the labels by the
clipped box's area. The draws (which transform, lam, the box) come from
numpy's generator seeded by (seed, epoch, batch index), not from torch's, so
a resumed run draws what the uninterrupted one drew.
"""
import numbers
from typing import List, Optional, Sequence

import numpy as np

from stoker import _stoker

_STREAM = 0x6D6978  # "mix": the batch transforms' own stream


class MixUp:
    """torchvision.transforms.v2.MixUp(alpha=1.0, num_classes): blend each sample with the previous one.

    For a Loader's ``batch_transforms``; images x.roll(1, 0) * (1 - lam) + x * lam
    and the one-hot labels likewise, in float32 as v2 computes them.

    Args:
        alpha (float): the Beta(alpha, alpha) parameter of the mixing weight. Default 1.0.
        num_classes (int): the labels' classes (labels become float32 [B, num_classes]).

    Raises:
        ValueError: alpha not positive, num_classes not a positive int; when
            applied, a label outside [0, num_classes).

    Example:
        >>> stoker.MixUp(alpha=0.2, num_classes=1000)
        MixUp(alpha=0.2, num_classes=1000)
    """

    def __init__(self, *, alpha: float = 1.0, num_classes: int) -> None:
        _check(self, alpha, num_classes)

    def __repr__(self) -> str:
        return f"MixUp(alpha={self.alpha}, num_classes={self.num_classes})"

    def _params(self, rng, height, width):
        return {"lam": float(rng.beta(self.alpha, self.alpha))}

    def _apply(self, images, labels, params, xp):
        lam = params["lam"]
        # v2's x.roll(1, 0).mul_(1 - lam).add_(x.mul(lam)), fused in one pass in place (C++).
        _stoker._mixup(xp.array(images), lam)
        return images, _mix_labels(labels, self.num_classes, lam, xp)


class CutMix:
    """torchvision.transforms.v2.CutMix(alpha=1.0, num_classes): paste a box of the previous sample.

    For a Loader's ``batch_transforms``; the labels mixed by the box's
    clipped area, as v2.

    Args:
        alpha (float): the Beta(alpha, alpha) parameter of lam (the box's side is sqrt(1 - lam)). Default 1.0.
        num_classes (int): the labels' classes (labels become float32 [B, num_classes]).

    Raises:
        ValueError: alpha not positive, num_classes not a positive int; when
            applied, a label outside [0, num_classes).

    Example:
        >>> stoker.CutMix(num_classes=10)
        CutMix(alpha=1.0, num_classes=10)
    """

    def __init__(self, *, alpha: float = 1.0, num_classes: int) -> None:
        _check(self, alpha, num_classes)

    def __repr__(self) -> str:
        return f"CutMix(alpha={self.alpha}, num_classes={self.num_classes})"

    def _params(self, rng, height, width):
        lam = float(rng.beta(self.alpha, self.alpha))
        r_x = int(rng.integers(width))
        r_y = int(rng.integers(height))
        r = 0.5 * np.sqrt(1.0 - lam)
        r_w_half = int(r * width)
        r_h_half = int(r * height)
        x1 = max(r_x - r_w_half, 0)
        y1 = max(r_y - r_h_half, 0)
        x2 = min(r_x + r_w_half, width)
        y2 = min(r_y + r_h_half, height)
        lam_adjusted = float(1.0 - (x2 - x1) * (y2 - y1) / (width * height))
        return {"box": (x1, y1, x2, y2), "lam_adjusted": lam_adjusted}

    def _apply(self, images, labels, params, xp):
        x1, y1, x2, y2 = params["box"]
        _stoker._cutmix(xp.array(images), x1, y1, x2, y2)  # rolled[..., y1:y2, x1:x2] pasted, in place (C++)
        return images, _mix_labels(labels, self.num_classes, params["lam_adjusted"], xp)


class RandomChoice:
    """torchvision.transforms.v2.RandomChoice(transforms, p=None): one of the batch transforms per batch.

    Args:
        transforms (sequence): MixUp and/or CutMix.
        p (sequence of float, optional): their weights (normalised); None: equal.

    Raises:
        TypeError: a transform that is not MixUp or CutMix.
        ValueError: p of another length, negative weights, or transforms that
            disagree on num_classes.

    Example:
        >>> stoker.RandomChoice([stoker.MixUp(alpha=0.2, num_classes=10), stoker.CutMix(num_classes=10)])
        RandomChoice(transforms=[MixUp(alpha=0.2, num_classes=10), CutMix(alpha=1.0, num_classes=10)], p=[0.5, 0.5])
    """

    def __init__(self, transforms: Sequence, p: Optional[Sequence[float]] = None) -> None:
        transforms = list(transforms)
        if not transforms or not all(isinstance(t, (MixUp, CutMix)) for t in transforms):
            raise TypeError("RandomChoice: transforms must be a non-empty sequence of stoker.MixUp / stoker.CutMix")
        if p is None:
            p = [1.0] * len(transforms)
        elif len(p) != len(transforms):
            raise ValueError(f"Length of p doesn't match the number of transforms: {len(p)} != {len(transforms)}")
        total = float(sum(p))
        if total <= 0 or any(w < 0 for w in p):
            raise ValueError(f"RandomChoice: p must be non-negative with a positive sum, got {list(p)}")
        self.transforms = transforms
        self.p = [w / total for w in p]
        classes = {t.num_classes for t in transforms}
        if len(classes) != 1:
            raise ValueError(f"RandomChoice: the transforms disagree on num_classes: {sorted(classes)}")
        self.num_classes = classes.pop()

    def __repr__(self) -> str:
        return f"RandomChoice(transforms={self.transforms!r}, p={self.p})"


def _check(t, alpha, num_classes):
    if not isinstance(alpha, numbers.Real) or not alpha > 0:
        raise ValueError(f"{type(t).__name__}: alpha must be a positive number, got {alpha!r}")
    if not isinstance(num_classes, int) or isinstance(num_classes, bool) or num_classes < 1:
        raise ValueError(f"{type(t).__name__}: num_classes must be a positive int, got {num_classes!r}")
    t.alpha = float(alpha)
    t.num_classes = num_classes


def _mix_labels(labels, num_classes, lam, xp):
    # v2's _mixup_label: one_hot(label).float(); label.roll(1, 0).mul_(1 - lam).add_(label.mul(lam)).
    one_hot = xp.one_hot(labels, num_classes)
    rolled = xp.roll(one_hot)
    xp.mul_(rolled, 1.0 - lam)
    xp.mul_(one_hot, lam)
    xp.add_(one_hot, rolled)
    return one_hot


class _Torch:
    def __init__(self, torch):
        self.torch = torch

    def roll(self, x):
        return x.roll(1, 0)

    def mul_(self, x, s):
        x.mul_(s)

    def add_(self, x, y):
        x.add_(y)

    def array(self, x):
        return x.numpy()  # the CPU tensor's memory (batches are staged to a device after this)

    def one_hot(self, labels, n):
        if labels.min() < 0 or labels.max() >= n:
            raise ValueError(f"MixUp/CutMix: a label is outside [0, num_classes={n}): "
                             f"{int(labels.min())}..{int(labels.max())}")
        return self.torch.nn.functional.one_hot(labels, num_classes=n).float()


class _Numpy:
    def roll(self, x):
        return np.roll(x, 1, axis=0)

    def mul_(self, x, s):
        x *= np.float32(s)

    def add_(self, x, y):
        x += y

    def array(self, x):
        return x

    def one_hot(self, labels, n):
        if labels.min() < 0 or labels.max() >= n:
            raise ValueError(f"MixUp/CutMix: a label is outside [0, num_classes={n}): "
                             f"{int(labels.min())}..{int(labels.max())}")
        out = np.zeros((labels.shape[0], n), dtype=np.float32)
        out[np.arange(labels.shape[0]), labels] = 1.0
        return out


class BatchTransforms:
    """A Loader's batch_transforms, applied in order to each batch (images NCHW float32, labels int64)."""

    def __init__(self, transforms: List, layout: str, dtype: str) -> None:
        self.transforms = []
        for t in transforms:
            if not isinstance(t, (MixUp, CutMix, RandomChoice)):
                raise TypeError(f"batch_transforms: expected stoker.MixUp, CutMix or RandomChoice, got {t!r}")
            self.transforms.append(t)
        if len(self.transforms) > 1:
            raise ValueError("batch_transforms: one MixUp, CutMix or RandomChoice (labels become one-hot once)")
        if self.transforms and (layout != "NCHW" or dtype != "float32"):
            raise ValueError(f"batch_transforms: MixUp/CutMix need layout='NCHW' and dtype='float32' "
                             f"(as torchvision's v2 on float tensors), got {layout!r}, {dtype!r}")

    def __bool__(self):
        return bool(self.transforms)

    def draws(self, seed, epoch, batch_index, height, width):
        """Each transform this batch runs with its parameters, [(transform, params)]: drawn from numpy's
        generator seeded by (seed, epoch, batch index), so a batch's draws need no batch before it."""
        rng = np.random.default_rng([_STREAM, seed, epoch, batch_index])
        out = []
        for t in self.transforms:
            if isinstance(t, RandomChoice):
                t = t.transforms[int(rng.choice(len(t.transforms), p=t.p))]
            out.append((t, t._params(rng, height, width)))
        return out

    def apply(self, images, labels, seed, epoch, batch_index, xp):
        if images.ndim != 4:
            raise ValueError(f"MixUp/CutMix: the batch should be 4D [B, C, H, W], got {images.ndim}D")
        if labels.ndim != 1 or labels.shape[0] != images.shape[0]:
            raise ValueError(f"MixUp/CutMix: labels must be [B] with B = {images.shape[0]}, got {tuple(labels.shape)}")
        for t, params in self.draws(seed, epoch, batch_index, images.shape[-2], images.shape[-1]):
            images, labels = t._apply(images, labels, params, xp)
        return images, labels
