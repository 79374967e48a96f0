"""The image stage (ColorJitter, GaussianBlur, the Random* colour ops, the
warps, the policies), RandomErasing and the MixUp/CutMix batch transforms,
end to end through a Loader, against torchvision 0.14 on PIL images with the
parameters stoker drew (read through the plan hook, as the crop tests do).

Exact (uint8 output compared with torch.equal) for every op but
GaussianBlur, whose float convolution is compared within 1 (of 255); the
kernels' own grids are in test_color_ops.py, test_affine_ops.py and
test_blur_op.py.
"""
import numpy as np
import pytest
import torch
import torchvision
import torchvision.transforms as T
import torchvision.transforms.functional as F
from PIL import Image
from torchvision.transforms import autoaugment as tv_autoaugment

import stoker
from stoker import _stoker

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
H, W = 60, 80


def apply_op(img, op):
    """One image-stage op of a plan, by torchvision/PIL."""
    k = op["kind"]
    if k == "grayscale":
        return F.rgb_to_grayscale(img, num_output_channels=3)
    if k == "brightness":
        return F.adjust_brightness(img, op["factor"])
    if k == "contrast":
        return F.adjust_contrast(img, op["factor"])
    if k == "saturation":
        return F.adjust_saturation(img, op["factor"])
    if k == "sharpness":
        return F.adjust_sharpness(img, op["factor"])
    if k == "hue":
        return F.adjust_hue(img, op["factor"])
    if k == "solarize":
        return F.solarize(img, op["factor"])
    if k == "posterize":
        return F.posterize(img, int(op["factor"]))
    if k == "invert":
        return F.invert(img)
    if k == "autocontrast":
        return F.autocontrast(img)
    if k == "equalize":
        return F.equalize(img)
    if k == "gaussian_blur":
        return F.gaussian_blur(img, list(op["kernel_size"]), list(op["sigma"]))
    if k == "augmix":
        return augmix_reference(img, op)
    if k == "affine":
        resample = Image.BILINEAR if op["bilinear"] else Image.NEAREST
        return img.transform(img.size, Image.AFFINE, op["matrix"], resample, fillcolor=tuple(op["fill"]))
    raise AssertionError(k)


def augmix_reference(pil_img, op):
    """torchvision's AugMix.forward on a PIL image with the drawn weights and chains given (its code, the draws
    replaced): the ops on the uint8 tensor, the float32 mix, the truncation."""
    img = F.pil_to_tensor(pil_img)
    batch = img.view(1, *img.shape)
    mix = torch.tensor([op["w0"]], dtype=torch.float32).view(1, 1, 1, 1) * batch
    interpolation = T.InterpolationMode.BILINEAR if op["bilinear"] else T.InterpolationMode.NEAREST
    fill = None if op["fill"] is None else [float(f) for f in op["fill"]]
    for weight, ops in op["chains"]:
        aug = batch
        for name, magnitude in ops:
            aug = tv_autoaugment._apply_op(aug, name, magnitude, interpolation=interpolation, fill=fill)
        mix.add_(torch.tensor([weight], dtype=torch.float32).view(1, 1, 1, 1) * aug)
    return F.to_pil_image(mix.view(img.shape).to(dtype=img.dtype))


def reference(img, plan, size):
    """The sample's crop, resize and flips by torchvision, then its image-stage ops."""
    rx, ry, rw, rh = plan["decode_region"]
    ref = F.resized_crop(img, ry, rx, rh, rw, list(size), T.InterpolationMode.BILINEAR)
    if plan["mirror"]:
        ref = F.hflip(ref)
    for _ in plan["photometric"]:
        ref = F.rgb_to_grayscale(ref, num_output_channels=3)
    for op in plan["image_ops"]:
        ref = apply_op(ref, op)
    return ref


CASES = {
    "ColorJitter": [stoker.ColorJitter(0.4, 0.4, 0.4, 0.1)],
    "ColorJitter-hue-only": [stoker.ColorJitter(hue=0.5)],
    "ColorJitter-ranges": [stoker.ColorJitter(brightness=(0.0, 2.5), contrast=(0.0, 3.0), saturation=(0, 2.0))],
    "Grayscale": [stoker.Grayscale()],
    "GaussianBlur": [stoker.GaussianBlur(9, sigma=(0.1, 3.0))],
    "RandomSolarize": [stoker.RandomSolarize(127.5)],
    "RandomPosterize": [stoker.RandomPosterize(3)],
    "RandomAutocontrast": [stoker.RandomAutocontrast()],
    "RandomEqualize": [stoker.RandomEqualize()],
    "RandomAdjustSharpness": [stoker.RandomAdjustSharpness(3.0)],
    "RandomInvert": [stoker.RandomInvert()],
    "RandomRotation": [stoker.RandomRotation(45, fill=(10, 200, 30))],
    "RandomRotation-bilinear": [stoker.RandomRotation((-180, 180), interpolation=T.InterpolationMode.BILINEAR,
                                                      center=(10, 20))],
    "RandomAffine": [stoker.RandomAffine(30, translate=(0.2, 0.1), scale=(0.7, 1.3), shear=(-10, 10, -5, 5),
                                         fill=128)],
    "RandomAffine-bilinear": [stoker.RandomAffine(15, shear=20, interpolation="bilinear")],
    "RandAugment-stoker-enum": [stoker.RandAugment(interpolation=stoker.InterpolationMode.BILINEAR, fill=9)],
    "AutoAugment-stoker-enum": [stoker.AutoAugment(stoker.AutoAugmentPolicy.SVHN)],
    "TrivialAugmentWide": [stoker.TrivialAugmentWide()],
    "RandAugment": [stoker.RandAugment(num_ops=3, magnitude=12)],
    "AutoAugment-imagenet": [stoker.AutoAugment()],
    "AutoAugment-cifar10": [stoker.AutoAugment(T.AutoAugmentPolicy.CIFAR10)],
    "AutoAugment-svhn": [stoker.AutoAugment("svhn", fill=[1, 2, 3])],
    "AugMix": [stoker.AugMix()],
    "AugMix-nearest-fill": [stoker.AugMix(severity=10, mixture_width=2, chain_depth=3, alpha=0.5, all_ops=False,
                                          interpolation="nearest", fill=[10, 20, 30])],
    "RandomApply": [stoker.RandomApply([stoker.ColorJitter(0.4, 0.4, 0.4, 0.1), stoker.RandomGrayscale(1.0)], p=0.6)],
    "SimCLR": [stoker.RandomApply([stoker.ColorJitter(0.4, 0.4, 0.4, 0.1)], p=0.8), stoker.RandomGrayscale(0.2),
               stoker.GaussianBlur(7)],
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_image_stage_equals_torchvision_with_the_same_draws(photos, name):
    stage = CASES[name]
    transforms = [stoker.RandomResizedCrop((H, W)), stoker.RandomHorizontalFlip()] + stage
    seed, n = 3, 24
    loader = stoker.Loader(photos, batch_size=n, seed=seed, transforms=transforms, dtype="uint8", layout="NHWC",
                           progress=False)
    x, _ = next(iter(loader))
    ds = torchvision.datasets.ImageFolder(photos)
    # GaussianBlur: a float convolution; AugMix: torchvision's float tensor ops and the truncated float mix.
    tol = 1 if "Blur" in name or name == "SimCLR" or "AugMix" in name else 0
    kinds = set()
    for i in range(n):
        img, _ = ds[i]
        plan = _stoker._testing.plan(transforms, seed, 0, i, img.width, img.height)
        kinds.update([op["kind"] for op in plan["image_ops"]] + plan["photometric"])
        ref = torch.from_numpy(np.asarray(reference(img, plan, (H, W))).copy())
        diff = (x[i].int() - ref.int()).abs().max().item()
        assert diff <= tol, (i, plan["image_ops"], diff)
    assert kinds, "no sample drew an op: the test would prove nothing"


def test_image_stage_with_normalize_and_nchw_float(photos):
    transforms = [stoker.RandomResizedCrop((H, W)), stoker.RandomHorizontalFlip(), stoker.TrivialAugmentWide(),
                  stoker.Normalize(MEAN, STD)]
    seed, n = 9, 16
    x, _ = next(iter(stoker.Loader(photos, batch_size=n, seed=seed, transforms=transforms, progress=False)))
    ds = torchvision.datasets.ImageFolder(photos)
    for i in range(n):
        img, _ = ds[i]
        plan = _stoker._testing.plan(transforms, seed, 0, i, img.width, img.height)
        ref = F.normalize(F.to_tensor(reference(img, plan, (H, W))), MEAN, STD)
        assert (x[i] - ref).abs().max().item() <= 1e-6, i


@pytest.mark.parametrize("op", ["ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate", "Brightness", "Color",
                                "Contrast", "Sharpness", "Posterize", "Solarize", "AutoContrast", "Equalize",
                                "Invert", "Identity"])
@pytest.mark.parametrize("interpolation", [T.InterpolationMode.NEAREST, T.InterpolationMode.BILINEAR])
def test_policy_ops_equal_torchvision_apply_op(photo_files, op, interpolation):
    """Each op of the policies' tables at several magnitudes: the ops stoker plans equal torchvision's _apply_op."""
    img = Image.open(photo_files[0]).convert("RGB").resize((67, 45))
    magnitudes = {"ShearX": [0.3, -0.99], "ShearY": [0.15, -0.3], "TranslateX": [32.0, -14.5], "TranslateY": [9.7, -32.0],
                  "Rotate": [30.0, -135.0, 90.0], "Brightness": [0.5, -0.99], "Color": [0.9, -0.5],
                  "Contrast": [0.99, -0.7], "Sharpness": [0.9, -0.99], "Posterize": [8.0, 4.0, 2.0],
                  "Solarize": [255.0, 127.5, 0.0], "AutoContrast": [0.0], "Equalize": [0.0], "Invert": [0.0],
                  "Identity": [0.0]}[op]
    fill = [7, 99, 201]
    bilinear = interpolation == T.InterpolationMode.BILINEAR
    for m in magnitudes:
        want = tv_autoaugment._apply_op(img, op, m, interpolation=interpolation, fill=fill)
        got = img
        for o in _stoker._testing.policy_op(op, m, bilinear, fill, img.width, img.height):
            got = apply_op(got, o)
        assert np.array_equal(np.asarray(got), np.asarray(want)), (op, m)
        # and the kernels themselves (not PIL) give the same
        arr = np.asarray(img).copy()
        for o in _stoker._testing.policy_op(op, m, bilinear, fill, img.width, img.height):
            arr = _stoker._testing.image_op(o, arr)
        assert np.array_equal(arr, np.asarray(want)), (op, m)


def test_torch_linspace_reproduced():
    """The policies' magnitudes come from torch.linspace in float32; stoker reproduces torch 1.13's CPU kernel."""
    for n in [2, 3, 5, 10, 11, 16, 17, 31, 32, 33, 47, 64, 100]:
        for start, end in [(0.0, 0.99), (0.0, 32.0), (0.0, 0.3), (255.0, 0.0), (0.0, 135.0), (0.0, 150 / 331 * 176),
                           (0.0, 0.9), (0.0, 30.0), (0.0, 150 / 331 * 37), (-3.5, 7.25)]:
            want = torch.linspace(start, end, n).tolist()
            got = [_stoker._testing.policy_magnitude_linspace(start, end, n, i) for i in range(n)]
            assert got == want, (start, end, n)


@pytest.mark.parametrize("bins", [2, 10, 31, 33])
def test_policy_magnitude_tables_equal_torchvision(bins):
    width, height = 176, 150
    spaces = {"wide": T.TrivialAugmentWide()._augmentation_space(bins),
              "rand": T.RandAugment()._augmentation_space(bins, (height, width))}
    spaces["rand"]["Invert"] = T.AutoAugment()._augmentation_space(bins, (height, width))["Invert"]
    for space, table in spaces.items():
        for name, (mags, signed) in table.items():
            for b in range(bins):
                want = float(mags[b].item()) if mags.ndim > 0 else 0.0
                got, got_signed = _stoker._testing.policy_magnitude(space, name, bins, b, width, height)
                assert (got, got_signed) == (want, signed), (space, name, b)


@pytest.mark.parametrize("all_ops", [True, False])
def test_augmix_table_equals_torchvision(all_ops):
    width, height = 176, 150
    table = T.AugMix(all_ops=all_ops)._augmentation_space(10, (height, width))
    for index, (name, (mags, signed)) in enumerate(table.items()):
        for b in range(10):
            want = float(mags[b].item()) if mags.ndim > 0 else 0.0
            assert _stoker._testing.augmix_op(all_ops, index, b, width, height) == (name, want, signed), (name, b)


def test_random_erasing_boxes_equal_f_erase(photos):
    value = [0.5, -1.0, 2.0]
    transforms = [stoker.RandomResizedCrop((H, W)), stoker.Normalize(MEAN, STD),
                  stoker.RandomErasing(p=0.7, value=value), stoker.RandomErasing(p=0.5, scale=(0.1, 0.5))]
    seed, n = 4, 24
    x, _ = next(iter(stoker.Loader(photos, batch_size=n, seed=seed, transforms=transforms, progress=False)))
    ds = torchvision.datasets.ImageFolder(photos)
    erased = 0
    for i in range(n):
        img, _ = ds[i]
        plan = _stoker._testing.plan(transforms, seed, 0, i, img.width, img.height)
        ref = F.normalize(F.to_tensor(reference(img, plan, (H, W))), MEAN, STD)
        # Each drawn box, with its transform's value, in order.
        boxes = plan["erase"]
        assert len(boxes) <= 2
        erased += len(boxes)
        values = []
        draws = [_stoker._testing.plan(transforms[:3], seed, 0, i, img.width, img.height)["erase"]]
        if draws[0]:
            values.append(torch.tensor(value)[:, None, None])
        if len(boxes) > len(draws[0]):
            values.append(torch.tensor([0.0])[:, None, None])
        for (bi, bj, bh, bw), v in zip(boxes, values):
            assert 0 < bh < H and 0 < bw < W
            ref = F.erase(ref, bi, bj, bh, bw, v)
        assert torch.equal(x[i], ref), i
    assert 0 < erased


def test_random_erasing_random_values_are_normal_and_deterministic(photos):
    transforms = [stoker.CenterCrop(64), stoker.Normalize(MEAN, STD), stoker.RandomErasing(p=1.0, value="random")]
    a, _ = next(iter(stoker.Loader(photos, batch_size=8, seed=1, transforms=transforms, threads=1, progress=False)))
    b, _ = next(iter(stoker.Loader(photos, batch_size=8, seed=1, transforms=transforms, threads=2, progress=False)))
    assert torch.equal(a, b)
    plain, _ = next(iter(stoker.Loader(photos, batch_size=8, seed=1, transforms=transforms[:2], progress=False)))
    vals = a[a != plain]
    # Over 8 boxes of >= 2% of 64x64x3: thousands of N(0, 1) draws; mean and std within 5 sigma / 10%.
    assert vals.numel() > 1000
    assert abs(vals.mean().item()) < 5 / vals.numel() ** 0.5
    assert 0.9 < vals.std().item() < 1.1


def test_policies_are_independent_of_threads_and_resume_exactly(photos):
    transforms = [stoker.RandomResizedCrop(48), stoker.RandomHorizontalFlip(), stoker.RandAugment(),
                  stoker.Normalize(MEAN, STD), stoker.RandomErasing(0.5)]
    mix = [stoker.RandomChoice([stoker.MixUp(alpha=0.2, num_classes=4), stoker.CutMix(alpha=1.0, num_classes=4)])]

    def run(threads, state=None, stop=None):
        loader = stoker.Loader(photos, batch_size=4, shuffle=True, seed=8, threads=threads, transforms=transforms,
                               batch_transforms=mix, progress=False)
        if state is not None:
            loader.load_state_dict(state)
        out = []
        for k, (x, y) in enumerate(loader):
            out.append((x.clone(), y.clone()))
            if stop is not None and k + 1 == stop:
                return out, loader.state_dict()
        return out, None

    full, _ = run(2)
    one, _ = run(1)
    assert len(full) == 6
    for (a, la), (b, lb) in zip(full, one):
        assert torch.equal(a, b) and torch.equal(la, lb)
    head, state = run(2, stop=2)
    tail, _ = run(1, state=state)
    for (a, la), (b, lb) in zip(full, head + tail):
        assert torch.equal(a, b) and torch.equal(la, lb)


def v2_mixup(images, labels, lam, num_classes):
    """torchvision v2's MixUp._transform and _mixup_label (0.16), verbatim in torch ops."""
    out = images.roll(1, 0).mul_(1.0 - lam).add_(images.mul(lam))
    label = torch.nn.functional.one_hot(labels, num_classes=num_classes).float()
    return out, label.roll(1, 0).mul_(1.0 - lam).add_(label.mul(lam))


def v2_cutmix(images, labels, box, lam_adjusted, num_classes):
    x1, y1, x2, y2 = box
    rolled = images.roll(1, 0)
    out = images.clone()
    out[..., y1:y2, x1:x2] = rolled[..., y1:y2, x1:x2]
    label = torch.nn.functional.one_hot(labels, num_classes=num_classes).float()
    return out, label.roll(1, 0).mul_(1.0 - lam_adjusted).add_(label.mul(lam_adjusted))


@pytest.mark.parametrize("output", ["torch", "numpy"])
def test_mixup_cutmix_equal_torchvision_v2_with_the_same_draws(photos, output):
    from stoker import batch_transforms as bt
    transforms = [stoker.RandomResizedCrop(40), stoker.Normalize(MEAN, STD)]
    choice = stoker.RandomChoice([stoker.MixUp(alpha=0.4, num_classes=5), stoker.CutMix(alpha=1.0, num_classes=5)],
                                 p=[0.5, 0.5])
    seed = 12
    plain = [(torch.as_tensor(np.array(x)), torch.as_tensor(np.array(y))) for x, y in
             stoker.Loader(photos, batch_size=6, seed=seed, transforms=transforms, progress=False, output=output)]
    mixed = list(stoker.Loader(photos, batch_size=6, seed=seed, transforms=transforms, batch_transforms=[choice],
                               progress=False, output=output))
    kinds = set()
    for index, ((x, y), (mx, my)) in enumerate(zip(plain, mixed)):
        rng = np.random.default_rng([bt._STREAM, seed, 0, index])  # the documented draws
        t = choice.transforms[int(rng.choice(2, p=choice.p))]
        params = t._params(rng, x.shape[-2], x.shape[-1])
        if isinstance(t, stoker.MixUp):
            want_x, want_y = v2_mixup(x, y, params["lam"], 5)
        else:
            want_x, want_y = v2_cutmix(x, y, params["box"], params["lam_adjusted"], 5)
        kinds.add(type(t).__name__)
        assert torch.equal(torch.as_tensor(np.array(mx)), want_x), index
        assert torch.equal(torch.as_tensor(np.array(my)), want_y), index
        assert np.allclose(np.array(my).sum(1), 1.0, atol=1e-6)
    assert kinds == {"MixUp", "CutMix"}


def test_bad_arguments_raise_torchvision_errors():
    with pytest.raises(ValueError, match="If brightness is a single number, it must be non negative"):
        stoker.ColorJitter(brightness=-1)
    with pytest.raises(ValueError, match="hue values should be between"):
        stoker.ColorJitter(hue=(0.2, 0.7))
    with pytest.raises(ValueError, match="Kernel size value should be an odd and positive number"):
        stoker.GaussianBlur(4)
    with pytest.raises(ValueError, match="If sigma is a single number, it must be positive"):
        stoker.GaussianBlur(3, sigma=0)
    with pytest.raises(ValueError, match="translation values should be between 0 and 1"):
        stoker.RandomAffine(0, translate=(0.5, 1.5))
    with pytest.raises(ValueError, match="scale values should be positive"):
        stoker.RandomAffine(0, scale=(0, 1))
    with pytest.raises(ValueError, match="If degrees is a single number, it must be positive"):
        stoker.RandomRotation(-3)
    with pytest.raises(ValueError, match="Random erasing probability should be between 0 and 1"):
        stoker.RandomErasing(p=2)
    with pytest.raises(ValueError, match="If value is str, it should be 'random'"):
        stoker.RandomErasing(value="noise")
    with pytest.raises(ValueError, match="expand=True"):
        stoker.RandomRotation(10, expand=True)
    with pytest.raises(ValueError, match="not an image-stage transform"):
        stoker.RandomApply([stoker.RandomHorizontalFlip()])
    with pytest.raises(ValueError, match="alpha must be a positive number"):
        stoker.MixUp(alpha=0, num_classes=3)


def test_order_rules_and_schemas_are_checked(photos):
    with pytest.raises(ValueError, match="must come before it"):
        stoker.Loader(photos, transforms=[stoker.CenterCrop(32), stoker.ColorJitter(0.2), stoker.RandomHorizontalFlip()])
    with pytest.raises(ValueError, match="only RandomErasing may follow it"):
        stoker.Loader(photos, transforms=[stoker.CenterCrop(32), stoker.Normalize(MEAN, STD), stoker.RandomInvert()])
    with pytest.raises(stoker.SampleError, match="GaussianBlur: kernel_size"):
        next(iter(stoker.Loader(photos, batch_size=1, transforms=[stoker.CenterCrop(8), stoker.GaussianBlur(17)],
                                on_corrupt="raise", progress=False)))


def test_warps_refuse_masks(tmp_path, photo_files):
    import csv
    mask = tmp_path / "m.png"
    Image.fromarray(np.zeros(Image.open(photo_files[0]).size[::-1], np.uint8)).save(mask)
    with open(tmp_path / "list.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["image", "mask"])
        w.writerow([photo_files[0], str(mask)])
    with pytest.raises(ValueError, match="TrivialAugmentWide applies to the image alone, and field 'mask'"):
        stoker.Loader(str(tmp_path / "list.csv"), fields=[stoker.Image("image"), stoker.Mask("mask")],
                      transforms=[stoker.CenterCrop(16), stoker.TrivialAugmentWide()])
    # colour ops keep masks aligned, so they are allowed
    loader = stoker.Loader(str(tmp_path / "list.csv"), batch_size=1, fields=[stoker.Image("image"), stoker.Mask("mask")],
                           transforms=[stoker.CenterCrop(16), stoker.ColorJitter(0.5, 0.5)], progress=False)
    batch = next(iter(loader))
    assert batch["mask"].shape == (1, 16, 16)


def test_every_transform_survives_the_options_json_codec():
    """The doctor's snapshot and the C++ options carry transforms as JSON: a round trip keeps each one."""
    ts = [t for case in CASES.values() for t in case] + [
        stoker.RandomErasing(0.3, value="random"), stoker.RandomErasing(value=(1, 2, 3)),
        stoker.RandomAffine(0, center=(3, 4)), stoker.RandAugment(fill=[1, 2, 3], interpolation="bilinear")]
    for t, (j, r) in zip(ts, _stoker._testing.transforms_json(ts)):
        assert r == repr(t), j


def test_cache_decoded_and_ram_give_the_same_batches(photos):
    """The image stage runs after the caches: for images within cache_max_side, cache="decoded" (and "ram") batches
    equal the files' (cache="mmap"), every epoch."""
    transforms = [stoker.RandomResizedCrop(56), stoker.RandomHorizontalFlip(), stoker.TrivialAugmentWide(),
                  stoker.RandomApply([stoker.ColorJitter(0.4, 0.4, 0.4, 0.1)], p=0.8), stoker.GaussianBlur(5),
                  stoker.Normalize(MEAN, STD), stoker.RandomErasing(0.5)]

    def epochs(cache):
        loader = stoker.Loader(photos, batch_size=8, shuffle=True, seed=2, transforms=transforms, cache=cache,
                               cache_max_side=4096, progress=False)
        return [[x.clone() for x, _ in loader] for _ in range(2)]

    want = epochs("mmap")
    for cache in ("decoded", "ram"):
        for e, (a, b) in enumerate(zip(want, epochs(cache))):
            assert all(torch.equal(x, y) for x, y in zip(a, b)), (cache, e)

