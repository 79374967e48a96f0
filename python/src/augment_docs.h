// Generated docstrings of the image-stage transforms (python/src/bind_augment.cc).
#pragma once

namespace stoker::python::docs {

constexpr const char* kColorJitter = R"doc(Randomly change the brightness, contrast, saturation and hue.

As ``torchvision.transforms.ColorJitter``: each factor drawn uniformly from
its range, the four applied in a random order (a permutation drawn per
sample, as torch.randperm(4)); a range at its identity is off.

Given the same drawn values, the output equals torchvision 0.14's on the
PIL image byte for byte (hue through PIL's HSV round trip too); the draws come from (seed, epoch, record), not from
torch's generator, whatever the thread count. An image-stage transform:
it acts on the final image, so no crop, resize or flip may follow it.

Args:
    brightness (float or (min, max)): a number v for [1 - v, 1 + v] (clipped at 0), or (min, max). Default 0 (off).
    contrast (float or (min, max)): as brightness; the blend with the image's mean grey. Default 0.
    saturation (float or (min, max)): as brightness; the blend with the grey image. Default 0.
    hue (float or (min, max)): a number v for [-v, v], or (min, max) within [-0.5, 0.5]. Default 0.

Raises:
    ValueError: a negative number, or a range out of its bounds (torchvision's
        text).
    TypeError: an argument that is not a number or a pair.

Example:
    >>> stoker.ColorJitter(brightness=0.4, contrast=0.4, saturation=0.4, hue=0.1)
    ColorJitter(brightness=(0.6, 1.4), contrast=(0.6, 1.4), saturation=(0.6, 1.4), hue=(-0.1, 0.1)))doc";

constexpr const char* kGrayscale = R"doc(Convert every image to grayscale, kept as 3 channels.

As ``torchvision.transforms.Grayscale(num_output_channels=3)``: PIL's
convert("L") copied to the three channels. Batches keep 3 channels, so
num_output_channels must be 3.

Given the same drawn values, the output equals torchvision 0.14's on the
PIL image byte for byte; the draws come from (seed, epoch, record), not from
torch's generator, whatever the thread count. An image-stage transform:
it acts on the final image, so no crop, resize or flip may follow it.

Args:
    num_output_channels (int): must be 3. Default 3.

Raises:
    ValueError: num_output_channels is not 3.

Example:
    >>> stoker.Grayscale()
    Grayscale(num_output_channels=3))doc";

constexpr const char* kGaussianBlur = R"doc(Blur with a Gaussian kernel whose sigma is drawn per sample.

As ``torchvision.transforms.GaussianBlur``: sigma uniform in [min, max], the
same for x and y; torchvision's float32 kernel, reflect padding. The kernel
half-size must be below the image's side (a sample error otherwise).

Given the same drawn values, the output equals torchvision 0.14's on the
PIL image within 1 of 255 (a float convolution summed in another order; about 1 value in 100,000 differs); the draws come from (seed, epoch, record), not from
torch's generator, whatever the thread count. An image-stage transform:
it acts on the final image, so no crop, resize or flip may follow it.

Args:
    kernel_size (int or (kx, ky)): odd and positive sizes (x first, as torchvision).
    sigma (float or (min, max)): sigma, or its range. Default (0.1, 2.0).

Raises:
    ValueError: an even or non-positive kernel size, or a non-positive sigma
        (torchvision's text).

Example:
    >>> stoker.GaussianBlur(23, sigma=(0.1, 2.0))
    GaussianBlur(kernel_size=(23, 23), sigma=(0.1, 2)))doc";

constexpr const char* kRandomSolarize = R"doc(Invert the pixels at or above a threshold, with probability p.

As ``torchvision.transforms.RandomSolarize`` (PIL's ImageOps.solarize).

Given the same drawn values, the output equals torchvision 0.14's on the
PIL image byte for byte; the draws come from (seed, epoch, record), not from
torch's generator, whatever the thread count. An image-stage transform:
it acts on the final image, so no crop, resize or flip may follow it.

Args:
    threshold (float): pixels >= threshold are inverted.
    p (float): the probability. Default 0.5.

Raises:
    ValueError: p outside [0, 1].

Example:
    >>> stoker.RandomSolarize(192, p=0.2)
    RandomSolarize(threshold=192, p=0.2))doc";

constexpr const char* kRandomPosterize = R"doc(Keep the top bits of each channel, with probability p.

As ``torchvision.transforms.RandomPosterize`` (PIL's ImageOps.posterize).

Given the same drawn values, the output equals torchvision 0.14's on the
PIL image byte for byte; the draws come from (seed, epoch, record), not from
torch's generator, whatever the thread count. An image-stage transform:
it acts on the final image, so no crop, resize or flip may follow it.

Args:
    bits (int): bits kept, 0..8.
    p (float): the probability. Default 0.5.

Raises:
    ValueError: bits outside 0..8, or p outside [0, 1].

Example:
    >>> stoker.RandomPosterize(4)
    RandomPosterize(bits=4, p=0.5))doc";

constexpr const char* kRandomAdjustSharpness = R"doc(Sharpen (factor > 1) or soften (< 1), with probability p.

As ``torchvision.transforms.RandomAdjustSharpness`` (PIL's
ImageEnhance.Sharpness: a blend with the SMOOTH-filtered image).

Given the same drawn values, the output equals torchvision 0.14's on the
PIL image byte for byte; the draws come from (seed, epoch, record), not from
torch's generator, whatever the thread count. An image-stage transform:
it acts on the final image, so no crop, resize or flip may follow it.

Args:
    sharpness_factor (float): 0 blurs, 1 keeps, 2 sharpens twice.
    p (float): the probability. Default 0.5.

Raises:
    ValueError: a negative factor, or p outside [0, 1].

Example:
    >>> stoker.RandomAdjustSharpness(2.0)
    RandomAdjustSharpness(sharpness_factor=2, p=0.5))doc";

constexpr const char* kRandomAutocontrast = R"doc(Stretch each channel to the full range, with probability p.

As ``torchvision.transforms.RandomAutocontrast`` (PIL's ImageOps.autocontrast).

Given the same drawn values, the output equals torchvision 0.14's on the
PIL image byte for byte; the draws come from (seed, epoch, record), not from
torch's generator, whatever the thread count. An image-stage transform:
it acts on the final image, so no crop, resize or flip may follow it.

Args:
    p (float): the probability. Default 0.5.

Raises:
    ValueError: p outside [0, 1].

Example:
    >>> stoker.RandomAutocontrast()
    RandomAutocontrast(p=0.5))doc";

constexpr const char* kRandomEqualize = R"doc(Equalize each channel's histogram, with probability p.

As ``torchvision.transforms.RandomEqualize`` (PIL's ImageOps.equalize).

Given the same drawn values, the output equals torchvision 0.14's on the
PIL image byte for byte; the draws come from (seed, epoch, record), not from
torch's generator, whatever the thread count. An image-stage transform:
it acts on the final image, so no crop, resize or flip may follow it.

Args:
    p (float): the probability. Default 0.5.

Raises:
    ValueError: p outside [0, 1].

Example:
    >>> stoker.RandomEqualize(p=0.3)
    RandomEqualize(p=0.3))doc";

constexpr const char* kRandomInvert = R"doc(Invert the colours, with probability p.

As ``torchvision.transforms.RandomInvert``.

Given the same drawn values, the output equals torchvision 0.14's on the
PIL image byte for byte; the draws come from (seed, epoch, record), not from
torch's generator, whatever the thread count. An image-stage transform:
it acts on the final image, so no crop, resize or flip may follow it.

Args:
    p (float): the probability. Default 0.5.

Raises:
    ValueError: p outside [0, 1].

Example:
    >>> stoker.RandomInvert()
    RandomInvert(p=0.5))doc";

constexpr const char* kRandomRotation = R"doc(Rotate by a random angle.

As ``torchvision.transforms.RandomRotation``: the angle uniform in the range,
PIL's Image.rotate about the centre (or ``center``), ``fill`` outside. Not
with mask or boxes fields (refused, as torchvision v2's policies refuse
them), and expand=True is refused (batches need one size).

Given the same drawn values, the output equals torchvision 0.14's on the
PIL image byte for byte, NEAREST and BILINEAR; the draws come from (seed, epoch, record), not from
torch's generator, whatever the thread count. An image-stage transform:
it acts on the final image, so no crop, resize or flip may follow it.

Args:
    degrees (float or (min, max)): a number d for (-d, d), or the range.
    interpolation (InterpolationMode or str): NEAREST or BILINEAR (stoker's or
        torchvision's enum, or "nearest"/"bilinear"). Default NEAREST.
    expand (bool): must be False. Default False.
    center ((x, y), optional): the centre of rotation in pixels. Default: the image's.
    fill (number or sequence): the colour outside the image (1 or 3 values). Default 0.

Raises:
    ValueError: a negative number of degrees, expand=True, a fill of other than
        1 or 3 values.
    TypeError: a fill that is not a number or a sequence.

Example:
    >>> stoker.RandomRotation(30, fill=(124, 116, 104))
    RandomRotation(degrees=(-30, 30), interpolation=nearest, fill=[124, 116, 104]))doc";

constexpr const char* kRandomAffine = R"doc(Rotate, translate, scale and shear by random amounts.

As ``torchvision.transforms.RandomAffine``: parameters drawn as its
get_params draws them, torchvision's inverse matrix, PIL's warp. Not with
mask or boxes fields.

Given the same drawn values, the output equals torchvision 0.14's on the
PIL image byte for byte, NEAREST and BILINEAR; the draws come from (seed, epoch, record), not from
torch's generator, whatever the thread count. An image-stage transform:
it acts on the final image, so no crop, resize or flip may follow it.

Args:
    degrees (float or (min, max)): a number d for (-d, d), or the range; 0 for none.
    translate ((a, b), optional): maximum shifts as fractions of the width and height.
    scale ((min, max), optional): the scale's range.
    shear (float or sequence, optional): d for an x shear in (-d, d); (min, max) for x;
        (xmin, xmax, ymin, ymax) for both.
    interpolation (InterpolationMode or str): NEAREST or BILINEAR. Default NEAREST.
    fill (number or sequence): the colour outside the image. Default 0.
    center ((x, y), optional): the centre in pixels. Default: the image's.

Raises:
    ValueError: translate outside [0, 1], a non-positive scale, a negative
        number of degrees (torchvision's text).

Example:
    >>> stoker.RandomAffine(degrees=15, translate=(0.1, 0.1), scale=(0.9, 1.1))
    RandomAffine(degrees=(-15, 15), translate=(0.1, 0.1), scale=(0.9, 1.1), shear=(0, 0, 0, 0), interpolation=nearest, fill=[0, 0, 0]))doc";

constexpr const char* kTrivialAugmentWide = R"doc(One augmentation of TrivialAugment Wide's table at a random magnitude.

As ``torchvision.transforms.TrivialAugmentWide``: its 14 ops (Identity,
ShearX/Y, TranslateX/Y, Rotate, Brightness, Color, Contrast, Sharpness,
Posterize, Solarize, AutoContrast, Equalize) with torchvision's magnitude
tables (torch.linspace in float32 reproduced) and signs. Not with mask or
boxes fields.

Given the same drawn values, the output equals torchvision 0.14's on the
PIL image byte for byte; the draws come from (seed, epoch, record), not from
torch's generator, whatever the thread count. An image-stage transform:
it acts on the final image, so no crop, resize or flip may follow it.

Args:
    num_magnitude_bins (int): magnitude bins (>= 2). Default 31.
    interpolation (InterpolationMode or str): for the geometric ops. Default NEAREST.
    fill (number or sequence, optional): colour outside the image. Default None (0).

Raises:
    ValueError: fewer than 2 bins.

Example:
    >>> stoker.TrivialAugmentWide()
    TrivialAugmentWide(num_magnitude_bins=31, interpolation=nearest, fill=[0, 0, 0]))doc";

constexpr const char* kRandAugment = R"doc(num_ops random augmentations at one magnitude.

As ``torchvision.transforms.RandAugment``: ops drawn from its 14-op table.
Not with mask or boxes fields.

Given the same drawn values, the output equals torchvision 0.14's on the
PIL image byte for byte; the draws come from (seed, epoch, record), not from
torch's generator, whatever the thread count. An image-stage transform:
it acts on the final image, so no crop, resize or flip may follow it.

Args:
    num_ops (int): ops per image. Default 2.
    magnitude (int): the magnitude bin. Default 9.
    num_magnitude_bins (int): magnitude bins. Default 31.
    interpolation (InterpolationMode or str): for the geometric ops. Default NEAREST.
    fill (number or sequence, optional): colour outside the image. Default None (0).

Raises:
    ValueError: magnitude outside [0, num_magnitude_bins), or num_ops < 0.

Example:
    >>> stoker.RandAugment(num_ops=2, magnitude=9)
    RandAugment(num_ops=2, magnitude=9, num_magnitude_bins=31, interpolation=nearest, fill=[0, 0, 0]))doc";

constexpr const char* kAutoAugment = R"doc(A random sub-policy of AutoAugment's learned policies.

As ``torchvision.transforms.AutoAugment``: the IMAGENET, CIFAR10 or SVHN
sub-policies, each op with its probability and magnitude bin. Not with
mask or boxes fields.

Given the same drawn values, the output equals torchvision 0.14's on the
PIL image byte for byte; the draws come from (seed, epoch, record), not from
torch's generator, whatever the thread count. An image-stage transform:
it acts on the final image, so no crop, resize or flip may follow it.

Args:
    policy (AutoAugmentPolicy or str): IMAGENET, CIFAR10 or SVHN (stoker's or
        torchvision's enum, or its value). Default IMAGENET.
    interpolation (InterpolationMode or str): for the geometric ops. Default NEAREST.
    fill (number or sequence, optional): colour outside the image. Default None (0).

Raises:
    ValueError: an unknown policy.

Example:
    >>> stoker.AutoAugment(stoker.AutoAugmentPolicy.CIFAR10)
    AutoAugment(policy=cifar10, interpolation=nearest, fill=[0, 0, 0]))doc";

constexpr const char* kAugMix = R"doc(AugMix: chains of random augmentations blended with the original.

As ``torchvision.transforms.AugMix``: mixture_width chains of chain_depth
(or 1-3, drawn) ops of its table at a severity-bounded magnitude, each
run on the image as a uint8 tensor (torchvision's tensor ops: AugMix turns
a PIL image into a tensor first), mixed with the original by
Dirichlet(alpha) weights in float32 and truncated to uint8. Not with mask
or boxes fields.

Given the same drawn values, the output is within 1 of 255 of
torchvision 0.14's (float ops and the final truncation); the draws come
from (seed, epoch, record), not from torch's generator.

Args:
    severity (int): magnitude bins used, 1..10. Default 3.
    mixture_width (int): chains, 1..16. Default 3.
    chain_depth (int): ops per chain; -1 draws 1 to 3. Default -1.
    alpha (float): the Dirichlet concentration. Default 1.0.
    all_ops (bool): include Brightness, Color, Contrast, Sharpness. Default True.
    interpolation (InterpolationMode or str): for the geometric ops. Default BILINEAR.
    fill (number or sequence, optional): colour outside the image. Default None.

Raises:
    ValueError: severity outside [1, 10] (torchvision's text), mixture_width
        outside [1, 16], alpha not positive.

Example:
    >>> stoker.AugMix(severity=3, mixture_width=3)
    AugMix(severity=3, mixture_width=3, chain_depth=-1, alpha=1, all_ops=True, interpolation=bilinear, fill=None))doc";

constexpr const char* kRandomErasing = R"doc(Erase a random rectangle of the output tensor, with probability p.

As ``torchvision.transforms.RandomErasing`` after Normalize: the box's area
fraction uniform in ``scale`` and its aspect ratio (h / w) log-uniform in
``ratio``, 10 tries, else no change. value='random' fills standard normal
values drawn from stoker's generator (not torch's). Only RandomErasing may
follow Normalize. Given the same box, the output equals torchvision's F.erase
exactly; the box comes from (seed, epoch, record).

Args:
    p (float): the probability. Default 0.5.
    scale ((min, max)): area fraction range. Default (0.02, 0.33).
    ratio ((min, max)): aspect ratio range. Default (0.3, 3.3).
    value (number, sequence or 'random'): the fill (1 or 3 values). Default 0.
    inplace (bool): accepted for torchvision's signature; stoker always writes the batch in
        place. Default False.

Raises:
    ValueError: p or scale outside [0, 1], a value string other than 'random'
        (torchvision's text).
    TypeError: scale or ratio not a sequence, value of another type.

Example:
    >>> stoker.RandomErasing(p=0.25)
    RandomErasing(p=0.25, scale=(0.02, 0.33), ratio=(0.3, 3.3), value=[0]))doc";

constexpr const char* kRandomApply = R"doc(Apply a list of image-stage transforms, all or none, with probability p.

As ``torchvision.transforms.RandomApply`` (SimCLR's colour jitter, for
example); the transforms must be image-stage ones (ColorJitter,
GaussianBlur, Grayscale, RandomGrayscale, RandomSolarize, ...).

Args:
    transforms (list): the transforms.
    p (float): the probability. Default 0.5.

Raises:
    ValueError: a transform that is not an image-stage one, or p outside [0, 1].

Example:
    >>> stoker.RandomApply([stoker.ColorJitter(0.4, 0.4, 0.4, 0.1)], p=0.8)
    RandomApply(transforms=[ColorJitter(brightness=(0.6, 1.4), contrast=(0.6, 1.4), saturation=(0.6, 1.4), hue=(-0.1, 0.1))], p=0.8))doc";

}  // namespace stoker::python::docs
