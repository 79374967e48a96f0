"""Rasters kept as stored: stoker.Image(channels="stored", dtype="stored") (issue 40, item 3).

1. Decoding: 16-bit gray, 13-band uint16 (contiguous and planar, strips and tiles) and float32 TIFFs, 16-bit
   gray and RGB PNGs, an RGBA PNG, a gray JPEG: every sample as stored (numpy's array of the written samples, or
   PIL's own image for the JPEG).
2. Geometry per channel against Pillow applied to each channel as an image of the matching mode ("L" for
   uint8, "I" for uint16, "F" for float32), through torchvision's functional API on those images: Resize +
   CenterCrop, RandomResizedCrop + flips with stoker's draws; and against an independent numpy formulation of
   Pillow's bilinear filter (triangle weights normalised, summed in float64, float32 between the passes).
3. Normalize with one mean per channel (13), float32 as torch computes it; NCHW and NHWC.
4. Refusals: a file of another channel count or sample type (corrupt, counted, raised with the file and reason),
   colour transforms, a Normalize of the wrong length, channels without dtype, unsupported sample formats.
5. cache="decoded" keeps the raster whole: its batches equal the uncached loader's.
"""
import io
import tarfile

import numpy as np
import pytest
import torch
import torchvision.transforms as T
import torchvision.transforms.functional as F
from PIL import Image

import stoker
from stoker import _stoker
from test_formats import png_bytes, tiff_bytes

TESTING = _stoker._testing
H, W = 37, 45
RNG = np.random.default_rng(40)


def _smooth(shape, hi, dtype):
    """Smooth random samples (a blurred field plus noise) in [0, hi]: every pixel differs, edges matter."""
    base = RNG.random((shape[0] // 6 + 2, shape[1] // 6 + 2) + shape[2:])
    up = np.kron(base, np.ones((6, 6) + (1,) * (len(shape) - 2)))[:shape[0], :shape[1]]
    v = (up * 0.8 + RNG.random(shape) * 0.2) * hi
    return v.astype(dtype)


def _png16(arr):
    """A 16-bit PNG (gray or RGB) of `arr` (H x W or H x W x 3 uint16)."""
    color = 0 if arr.ndim == 2 else 2
    rows = [r.astype(">u2").tobytes() for r in arr]
    return png_bytes(arr.shape[1], arr.shape[0], 16, color, rows)


def _fixtures():
    """name -> (the file's bytes, its samples as stored: C x H x W)."""
    gray16 = _smooth((H, W), 65535, np.uint16)
    bands = _smooth((H, W, 13), 60000, np.uint16)
    flt = (_smooth((H, W, 3), 1, np.float32) * 2000 - 700).astype(np.float32)
    flt1 = _smooth((H, W), 1, np.float32)
    rgb16 = _smooth((H, W, 3), 65535, np.uint16)
    rgba = _smooth((H, W, 4), 255, np.uint8)
    gray8 = _smooth((H, W), 255, np.uint8)
    jpeg = io.BytesIO()
    Image.fromarray(gray8, "L").save(jpeg, "JPEG", quality=90)
    jpeg = jpeg.getvalue()
    rgba_png = io.BytesIO()
    Image.fromarray(rgba, "RGBA").save(rgba_png, "PNG")
    chw = lambda a: a[None] if a.ndim == 2 else np.moveaxis(a, 2, 0)
    return {
        "gray16.tif": (tiff_bytes(gray16, 1), chw(gray16)),
        "bands13_contig.tif": (tiff_bytes(bands, 1, rows_per_strip=5, compression=8), chw(bands)),
        "bands13_planar.tif": (tiff_bytes(bands, 1, rows_per_strip=7, planar=True), chw(bands)),
        "bands13_tiled.tif": (tiff_bytes(bands, 1, tile=(16, 16), planar=True, compression=8), chw(bands)),
        "float3.tif": (tiff_bytes(flt, 1, sample_format=3, rows_per_strip=4), chw(flt)),
        "float1.tif": (tiff_bytes(flt1, 1, sample_format=3, tile=(32, 16)), chw(flt1)),
        "gray16.png": (_png16(gray16), chw(gray16)),
        "rgb16.png": (_png16(rgb16), chw(rgb16)),
        "rgba.png": (rgba_png.getvalue(), chw(rgba)),
        "gray.jpg": (jpeg, chw(np.asarray(Image.open(io.BytesIO(jpeg))))),
    }


FIXTURES = _fixtures()


def _mode(dtype):
    return {np.dtype(np.uint8): "L", np.dtype(np.uint16): "I", np.dtype(np.float32): "F"}[np.dtype(dtype)]


def _planes(stored):
    """Each channel as a PIL image of its mode (uint16 as "I": int32)."""
    mode = _mode(stored.dtype)
    return [Image.fromarray(p.astype(np.int32) if mode == "I" else p, mode) for p in stored]


def _expected_dtype(stored):
    return {np.dtype(np.uint8): torch.uint8, np.dtype(np.uint16): torch.int32,
            np.dtype(np.float32): torch.float32}[stored.dtype]


def _loader(tmp_path, names, transforms, **kw):
    lst = tmp_path / "rasters.csv"
    for n in names:
        (tmp_path / n).write_bytes(FIXTURES[n][0])
    lst.write_text("path,label\n" + "".join(f"{tmp_path / n},{i}\n" for i, n in enumerate(names)))
    kw.setdefault("on_corrupt", "raise")
    return stoker.Loader(str(lst), batch_size=len(names), transforms=transforms,
                         fields=[stoker.Image("image", channels="stored", dtype="stored"), stoker.Label("label")], **kw)


def _batch(loader):
    b = next(iter(loader))
    return b["image"], b["label"]


# --- 1. decoding --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_samples_are_kept_as_stored(tmp_path, name):
    data, stored = FIXTURES[name]
    x, _ = _batch(_loader(tmp_path, [name], [stoker.CenterCrop((H, W))]))
    assert x.dtype == _expected_dtype(stored)
    assert tuple(x.shape) == (1,) + stored.shape
    np.testing.assert_array_equal(x[0].numpy(), stored.astype(x.numpy().dtype))


@pytest.mark.parametrize("transparency", [None, 3])
def test_palette_png_is_its_colours_rgba_with_transparency(tmp_path, transparency):
    im = Image.fromarray(_smooth((H, W, 3), 255, np.uint8), "RGB").quantize(60)
    b = io.BytesIO()
    im.save(b, "PNG", **({} if transparency is None else {"transparency": transparency}))
    pil = Image.open(io.BytesIO(b.getvalue())).convert("RGB" if transparency is None else "RGBA")
    ref = np.moveaxis(np.asarray(pil), 2, 0)
    (tmp_path / "p.png").write_bytes(b.getvalue())
    (tmp_path / "l.csv").write_text(f"path,label\n{tmp_path / 'p.png'},0\n")
    loader = stoker.Loader(str(tmp_path / "l.csv"), batch_size=1, transforms=[stoker.CenterCrop((H, W))],
                           fields=[stoker.Image("image", channels="stored", dtype="stored")], on_corrupt="raise")
    np.testing.assert_array_equal(next(iter(loader))["image"][0].numpy(), ref)


def test_tiff_regions_read_only_what_the_crop_needs_and_equal_the_whole(tmp_path):
    """CenterCrop decodes the crop's region (tiles/strips): equal to the stored samples' crop."""
    top, left = int(round((H - 9) / 2.0)), int(round((W - 11) / 2.0))
    for n in ["bands13_contig.tif", "bands13_planar.tif", "bands13_tiled.tif", "float1.tif", "rgb16.png"]:
        x, _ = _batch(_loader(tmp_path, [n], [stoker.CenterCrop((9, 11))]))
        stored = FIXTURES[n][1]
        np.testing.assert_array_equal(x[0].numpy(), stored[:, top:top + 9, left:left + 11].astype(x.numpy().dtype), n)


@pytest.mark.parametrize("orientation", [2, 3, 5, 6, 8])
def test_tiff_orientation_is_applied_per_channel_as_pil_applies_it(tmp_path, orientation):
    """The reference: each band written as a one-sample TIFF with the same tag, opened and loaded by PIL (which
    turns it when it loads; NOTE: np.asarray of an unloaded image takes the size from before the turn)."""
    bands = FIXTURES["bands13_planar.tif"][1][:5]
    hwc = np.moveaxis(bands, 0, 2)
    (tmp_path / "o.tif").write_bytes(tiff_bytes(hwc, 1, rows_per_strip=6, planar=True, tags=[(274, 3, [orientation])]))
    def pil(b):
        im = Image.open(io.BytesIO(tiff_bytes(b, 1, tags=[(274, 3, [orientation])])))
        im.load()
        return np.asarray(im)

    ref = np.stack([pil(b) for b in bands])
    h, w = ref.shape[1:]
    (tmp_path / "l.csv").write_text(f"path,label\n{tmp_path / 'o.tif'},0\n")
    for box in [(h, w), (7, 9)]:  # whole, and a region (the stored box of a crop)
        loader = stoker.Loader(str(tmp_path / "l.csv"), batch_size=1, transforms=[stoker.CenterCrop(box)],
                               fields=[stoker.Image("image", channels="stored", dtype="stored")], on_corrupt="raise")
        x = next(iter(loader))["image"][0].numpy()
        top, left = int(round((h - box[0]) / 2.0)), int(round((w - box[1]) / 2.0))
        np.testing.assert_array_equal(x, ref[:, top:top + box[0], left:left + box[1]].astype(np.int32))


# --- 2. geometry per channel ----------------------------------------------------------------------------------------

def _reference(stored, fn):
    """fn applied by torchvision to each channel's PIL image, stacked C x h x w in the stored mode's numpy type."""
    out = [np.asarray(fn(p)) for p in _planes(stored)]
    return np.stack(out)


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_resize_center_crop_equals_pillow_per_channel(tmp_path, name):
    stored = FIXTURES[name][1]
    x, _ = _batch(_loader(tmp_path, [name], [stoker.Resize(20), stoker.CenterCrop((16, 18))]))
    ref = _reference(stored, lambda p: F.center_crop(F.resize(p, 20), [16, 18]))
    assert x.shape[1:] == ref.shape
    np.testing.assert_array_equal(x[0].numpy(), ref.astype(x.numpy().dtype))


@pytest.mark.parametrize("epoch", [0, 3])
def test_random_resized_crop_and_flips_equal_pillow_with_the_same_draws(tmp_path, epoch):
    """One loader per file (each its own channels and type), four records of it: four draws per epoch."""
    transforms = [stoker.RandomResizedCrop((15, 21), scale=(0.2, 1.0)), stoker.RandomHorizontalFlip(),
                  stoker.RandomVerticalFlip()]
    flips = 0
    for i, n in [(i, n) for n in sorted(FIXTURES) for i in range(4)]:
        if i == 0:
            loader = _loader(tmp_path, [n] * 4, transforms, seed=11)
            loader.set_epoch(epoch)
            x, _ = _batch(loader)
        stored = FIXTURES[n][1]
        plan = TESTING.plan(transforms, 11, epoch, i, W, H)
        rx, ry, rw, rh = plan["decode_region"]

        def fn(p):
            r = F.resized_crop(p, ry, rx, rh, rw, [15, 21], T.InterpolationMode.BILINEAR)
            r = F.hflip(r) if plan["mirror"] else r
            return F.vflip(r) if plan["vflip"] else r

        flips += plan["mirror"] + plan["vflip"]
        np.testing.assert_array_equal(x[i].numpy(), _reference(stored, fn).astype(x.numpy().dtype), n)
    assert flips > 0, "the draws flipped nothing: the flips went untested"


@pytest.mark.parametrize("interp", ["nearest", "bilinear"])
@pytest.mark.parametrize("name", ["gray16.tif", "bands13_planar.tif", "float3.tif", "rgba.png", "gray.jpg"])
def test_rotation_and_affine_per_channel_equal_pillow(tmp_path, name, interp):
    """The warps after the flips, as Pillow's transform(AFFINE) runs them on "L", "I" and "F" images."""
    stored = FIXTURES[name][1]
    mode = T.InterpolationMode.NEAREST if interp == "nearest" else T.InterpolationMode.BILINEAR
    tf = [stoker.Resize((30, 34)), stoker.RandomHorizontalFlip(1.0),
          stoker.RandomRotation((30, 30), interpolation=interp, fill=7),
          stoker.RandomAffine((12, 12), scale=(1.1, 1.1), shear=(4, 4, -3, -3), interpolation=interp, fill=7)]
    x, _ = _batch(_loader(tmp_path, [name], tf))

    def fn(p):
        r = F.hflip(F.resize(p, [30, 34]))
        r = F.rotate(r, 30.0, mode, fill=7)
        return F.affine(r, angle=12.0, translate=[0, 0], scale=1.1, shear=[4.0, -3.0], interpolation=mode, fill=7)

    ref = _reference(stored, fn)
    assert (ref == 7).any(), "no fill: the warp moved nothing out of the image"
    np.testing.assert_array_equal(x[0].numpy(), ref.astype(x.numpy().dtype))


@pytest.mark.parametrize("name, layout", [("bands13_planar.tif", "NCHW"), ("float3.tif", "NHWC"), ("gray.jpg", "NCHW")])
def test_random_erasing_on_the_written_sample_as_f_erase(tmp_path, name, layout):
    stored = FIXTURES[name][1]
    tf = [stoker.Resize((20, 22)), stoker.RandomErasing(p=1.0, value=[5.0])]
    x, _ = _batch(_loader(tmp_path, [name], tf, layout=layout, seed=4))
    plan = TESTING.plan(tf, 4, 0, 0, W, H)
    assert len(plan["erase"]) == 1
    ref = torch.from_numpy(_reference(stored, lambda p: F.resize(p, [20, 22])).astype(x.numpy().dtype))
    ref = F.erase(ref, *plan["erase"][0], torch.tensor(5, dtype=ref.dtype))
    got = x[0].permute(2, 0, 1) if layout == "NHWC" else x[0]
    assert torch.equal(got, ref)


def test_random_erasing_values_it_cannot_write_are_refused(tmp_path):
    with pytest.raises(ValueError, match=r"RandomErasing: value='random' needs float32 output.*uint16.*after Normalize"):
        _loader(tmp_path, ["gray16.tif"], [stoker.Resize((8, 8)), stoker.RandomErasing(value="random")])
    with pytest.raises(ValueError, match="RandomErasing: value has 3 values; field 'image' keeps stored channels "
                                         r"\(13\): give 1 or 13"):
        _loader(tmp_path, ["bands13_planar.tif"], [stoker.Resize((8, 8)), stoker.RandomErasing(value=[1, 2, 3])])
    x, _ = _batch(_loader(tmp_path, ["gray16.tif"], [stoker.Resize((8, 8)), stoker.Normalize([0.0], [1.0]),
                                                     stoker.RandomErasing(p=1.0, value="random")]))
    assert x.dtype == torch.float32


def test_warps_with_a_fill_per_channel_are_refused(tmp_path):
    with pytest.raises(ValueError, match="transform RandomRotation: not available on a raster kept as stored"):
        _loader(tmp_path, ["bands13_planar.tif"], [stoker.Resize((8, 8)), stoker.RandomRotation(10, fill=(1, 2, 3))])


def test_a_mask_follows_a_stored_rasters_geometry(tmp_path):
    """A 13-band tile with its segmentation mask: the mask gets the raster's crop and flips, with nearest."""
    seg = RNG.integers(0, 5, (H, W)).astype(np.uint8)
    (tmp_path / "t.tif").write_bytes(FIXTURES["bands13_tiled.tif"][0])
    Image.fromarray(seg, "L").save(tmp_path / "m.png")
    (tmp_path / "s.csv").write_text("image,seg,label\n" + "t.tif,m.png,0\n" * 3)
    tf = [stoker.RandomResizedCrop(12), stoker.RandomHorizontalFlip()]
    loader = stoker.Loader(str(tmp_path / "s.csv"), batch_size=3, transforms=tf, seed=3, on_corrupt="raise",
                           fields=[stoker.Image("image", channels="stored", dtype="stored"), stoker.Mask("seg")])
    b = next(iter(loader))
    stored = FIXTURES["bands13_tiled.tif"][1]
    for i in range(3):
        plan = TESTING.plan(tf, 3, 0, i, W, H)
        rx, ry, rw, rh = plan["decode_region"]
        flip = (lambda p: F.hflip(p)) if plan["mirror"] else (lambda p: p)
        m = flip(F.resized_crop(Image.fromarray(seg, "L"), ry, rx, rh, rw, [12, 12], T.InterpolationMode.NEAREST))
        np.testing.assert_array_equal(b["seg"][i].numpy(), np.asarray(m))
        ref = _reference(stored, lambda p: flip(F.resized_crop(p, ry, rx, rh, rw, [12, 12])))
        np.testing.assert_array_equal(b["image"][i].numpy(), ref)


def _np_axis_weights(n_in, n_out):
    """Pillow's bilinear filter from its definition: a triangle of support max(scale, 1), centred on each output
    pixel's centre, normalised to sum 1 (float64)."""
    scale = n_in / n_out
    support = max(scale, 1.0)
    m = np.zeros((n_out, n_in))
    for i in range(n_out):
        centre = (i + 0.5) * scale
        lo, hi = max(int(centre - support + 0.5), 0), min(int(centre + support + 0.5), n_in)
        xs = np.arange(lo, hi)
        w = np.clip(1 - np.abs((xs - centre + 0.5) / support), 0, None)
        m[i, lo:hi] = w / w.sum()
    return m


def test_float32_resize_equals_numpy_formulation_of_the_filter(tmp_path):
    """float32: horizontal pass summed in float64, stored float32, then the vertical pass (Pillow's "F")."""
    stored = FIXTURES["float3.tif"][1]
    x, _ = _batch(_loader(tmp_path, ["float3.tif"], [stoker.Resize((14, 17))]))
    mh, mv = _np_axis_weights(W, 17), _np_axis_weights(H, 14)
    ref = np.stack([(mv @ (p.astype(np.float64) @ mh.T).astype(np.float32).astype(np.float64)).astype(np.float32)
                    for p in stored])
    np.testing.assert_allclose(x[0].numpy(), ref, rtol=0, atol=np.abs(ref).max() * 1e-6)


def test_uint16_resize_equals_numpy_formulation_rounded_half_up(tmp_path):
    """uint16 as Pillow's "I": float64 sums rounded half away from zero after each pass."""
    stored = FIXTURES["gray16.tif"][1]
    x, _ = _batch(_loader(tmp_path, ["gray16.tif"], [stoker.Resize((11, 30))]))
    mh, mv = _np_axis_weights(W, 30), _np_axis_weights(H, 11)
    h = np.floor(stored[0].astype(np.float64) @ mh.T + 0.5)
    ref = np.floor(mv @ h + 0.5)
    # The sums' order differs from Pillow's by an ulp: a value on a .5 boundary may round the other way.
    assert np.abs(x[0, 0].numpy() - ref).max() <= 1
    assert np.mean(x[0, 0].numpy() == ref) > 0.99


# --- 3. Normalize and layout ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["bands13_planar.tif", "gray.jpg", "float3.tif"])
def test_normalize_per_channel_as_torch(tmp_path, name):
    stored = FIXTURES[name][1]
    c = stored.shape[0]
    mean = [float(v) for v in RNG.uniform(0, 0.5, c)]
    std = [float(v) for v in RNG.uniform(0.5, 2, c)]
    if stored.dtype != np.uint8:
        mean, std = [m * 1000 for m in mean], [s * 1000 for s in std]
    x, _ = _batch(_loader(tmp_path, [name], [stoker.Resize((12, 12)), stoker.Normalize(mean, std)]))
    geo = torch.from_numpy(_reference(stored, lambda p: F.resize(p, [12, 12])).astype(np.float32))
    if stored.dtype == np.uint8:
        geo = geo / 255  # ToTensor
    ref = F.normalize(geo, mean, std)
    assert x.dtype == torch.float32
    assert (x[0] - ref).abs().max().item() <= 1e-6 * max(1.0, ref.abs().max().item())


def test_nhwc_layout_is_the_nchw_batch_transposed(tmp_path):
    names = ["bands13_contig.tif", "bands13_planar.tif"]
    tf = [stoker.RandomResizedCrop(10), stoker.RandomHorizontalFlip()]
    a, _ = _batch(_loader(tmp_path, names, tf, seed=2))
    b, _ = _batch(_loader(tmp_path, names, tf, seed=2, layout="NHWC"))
    assert tuple(b.shape) == (2, 10, 10, 13)
    assert torch.equal(a.permute(0, 2, 3, 1), b)


# --- 4. refusals ----------------------------------------------------------------------------------------------------

def test_a_file_of_another_channel_count_is_a_counted_corrupt_sample(tmp_path):
    names = ["bands13_planar.tif", "float3.tif", "bands13_contig.tif", "rgba.png", "bands13_tiled.tif", "gray16.tif",
             "bands13_planar.tif"]
    loader = _loader(tmp_path, names, [stoker.Resize((8, 8))], on_corrupt="skip")
    # (under "skip", a skipped sample's place is filled with the next one of the epoch)
    assert {int(v) for b in loader for v in b["label"]} == {0, 2, 4, 6}
    s = loader.stats()
    assert s["corrupt"] == 3
    text = "\n".join(s["corrupt_examples"])
    assert "rgba.png" in text and "has 4 channels, the field declares 13" in text, text
    assert "gray16.tif" in text and "has 1 channels, the field declares 13" in text, text
    loader = _loader(tmp_path, ["bands13_planar.tif", "float3.tif"], [stoker.Resize((8, 8))], threads=1)
    with pytest.raises(stoker.SampleError, match="float3.tif.*has 3 channels, the field declares 13"):
        next(iter(loader))


def test_a_file_of_another_sample_type_is_a_corrupt_sample(tmp_path):
    loader = _loader(tmp_path, ["gray16.tif", "float1.tif"], [stoker.Resize((8, 8))], on_corrupt="skip")
    assert {int(v) for b in loader for v in b["label"]} == {0}
    assert loader.stats()["corrupt"] == 1
    text = "\n".join(loader.stats()["corrupt_examples"])
    assert "float1.tif" in text and "has float32 samples, the field declares uint16" in text, text


@pytest.mark.parametrize("transform, name", [
    (stoker.ColorJitter(brightness=0.5), "ColorJitter"), (stoker.Grayscale(), "Grayscale"),
    (stoker.RandomGrayscale(), "RandomGrayscale"), (stoker.RandomSolarize(100), "RandomSolarize"),
    (stoker.TrivialAugmentWide(), "TrivialAugmentWide"), (stoker.AugMix(), "AugMix"),
    (stoker.RandomApply([stoker.RandomInvert()]), "RandomApply"),
])
def test_colour_transforms_are_refused_naming_field_and_transform(tmp_path, transform, name):
    with pytest.raises(ValueError, match=f"transform {name}: needs an RGB image; field 'image' keeps stored "
                                         r"channels \(13\)"):
        _loader(tmp_path, ["bands13_planar.tif"], [stoker.Resize((8, 8)), transform])


def test_geometry_it_does_not_run_is_refused_not_ignored(tmp_path):
    for t in [stoker.GaussianBlur(3), stoker.RandomAdjustSharpness(2), stoker.RandomCrop(8, padding=2, fill=7)]:
        with pytest.raises(ValueError, match="not available on a raster kept as stored"):
            _loader(tmp_path, ["bands13_planar.tif"], [stoker.Resize((16, 16)), t])


def test_normalize_of_another_length_is_refused_with_both_counts(tmp_path):
    with pytest.raises(ValueError, match=r"transform Normalize: mean has 3 values and std 3; field 'image' keeps "
                                         r"stored channels \(13\): give 1 or 13"):
        _loader(tmp_path, ["bands13_planar.tif"], [stoker.Resize((8, 8)), stoker.Normalize([0.5] * 3, [0.2] * 3)])
    with pytest.raises(ValueError, match="1 or 3 values for an RGB image, got 13"):
        stoker.Loader(str(tmp_path / "rasters.csv"), batch_size=1,
                      transforms=[stoker.Resize((8, 8)), stoker.Normalize([0.5] * 13, [0.2] * 13)])


def test_channels_and_dtype_go_together(tmp_path):
    (tmp_path / "a.tif").write_bytes(FIXTURES["gray16.tif"][0])
    (tmp_path / "l.csv").write_text(f"path,label\n{tmp_path / 'a.tif'},0\n")
    with pytest.raises(ValueError, match='channels="stored" and dtype="stored" go together'):
        stoker.Loader(str(tmp_path / "l.csv"), batch_size=1, transforms=[stoker.Resize((8, 8))],
                      fields=[stoker.Image("image", channels="stored")])
    with pytest.raises(ValueError, match="must be one of 'rgb', 'stored'"):
        stoker.Loader(str(tmp_path / "l.csv"), batch_size=1, transforms=[stoker.Resize((8, 8))],
                      fields=[stoker.Image("image", channels="bgr", dtype="stored")])
    assert repr(stoker.Image("x", channels="stored", dtype="stored")) == "Image('x', channels='stored', dtype='stored')"
    assert repr(stoker.Image()) == "Image('image')"


def test_max_image_pixels_caps_stored_rasters_from_the_header(tmp_path):
    names = ["bands13_tiled.tif", "bands13_planar.tif"]
    loader = _loader(tmp_path, names, [stoker.Resize((8, 8))], max_image_pixels=H * W)
    assert _batch(loader)[0].shape == (2, 13, 8, 8)
    with pytest.raises(ValueError, match=f"exceeds max_image_pixels={H * W - 1}"):  # no record is readable
        _loader(tmp_path, names, [stoker.Resize((8, 8))], max_image_pixels=H * W - 1)


def test_unsupported_sample_formats_are_refused_with_the_reason(tmp_path):
    signed = tiff_bytes(_smooth((H, W, 2), 3000, np.uint16), 1, sample_format=2)
    (tmp_path / "a.tif").write_bytes(FIXTURES["gray16.tif"][0])
    (tmp_path / "b.tif").write_bytes(signed)
    (tmp_path / "l.csv").write_text(f"path,label\n{tmp_path / 'a.tif'},0\n{tmp_path / 'b.tif'},1\n")
    loader = stoker.Loader(str(tmp_path / "l.csv"), batch_size=2, transforms=[stoker.Resize((8, 8))],
                           fields=[stoker.Image("image", channels="stored", dtype="stored"), stoker.Label("label")],
                           on_corrupt="skip")
    assert {int(v) for b in loader for v in b["label"]} == {0}
    assert loader.stats()["corrupt_by_reason"] == {"unsupported": 1}
    text = "\n".join(loader.stats()["corrupt_examples"])
    assert "b.tif" in text and "sample format 2 cannot be kept as stored" in text, text


# --- 5. caches ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("cache", ["decoded", "ram", "auto"])
def test_caches_give_the_uncached_batches(tmp_path, cache):
    names = ["bands13_planar.tif", "bands13_contig.tif", "bands13_tiled.tif"]
    tf = [stoker.RandomResizedCrop(12), stoker.RandomHorizontalFlip(), stoker.Normalize([100.0] * 13, [50.0] * 13)]
    plain = _loader(tmp_path, names, tf, seed=5)
    cached = _loader(tmp_path, names, tf, seed=5, cache=cache)
    for epoch in range(3):
        plain.set_epoch(epoch)
        cached.set_epoch(epoch)
        assert torch.equal(_batch(plain)[0], _batch(cached)[0]), epoch
    if cache == "auto":  # never downscaled, so "decoded" is exact and chosen when it fits
        assert cached.stats()["cache_mode"] == "decoded", cached.stats()["cache_auto"]


# --- 6. other sources and options -----------------------------------------------------------------------------------

def test_shard_members_give_the_list_files_batch(tmp_path):
    names = ["bands13_planar.tif", "bands13_contig.tif", "bands13_tiled.tif"]
    shard = tmp_path / "s-0.tar"
    with tarfile.open(shard, "w") as t:
        for k, n in enumerate(names):
            for member, payload in ((f"{k:04d}.tif", FIXTURES[n][0]), (f"{k:04d}.cls", str(k).encode())):
                info = tarfile.TarInfo(member)
                info.size = len(payload)
                t.addfile(info, io.BytesIO(payload))
    tf = [stoker.RandomResizedCrop(12), stoker.RandomVerticalFlip()]
    from_list, _ = _batch(_loader(tmp_path, names, tf, seed=9))
    loader = stoker.Loader(str(shard), batch_size=3, transforms=tf, seed=9, on_corrupt="raise",
                           fields=[stoker.Image("image", channels="stored", dtype="stored"), stoker.Label("label")])
    b = next(iter(loader))
    assert [int(v) for v in b["label"]] == [0, 1, 2]
    assert torch.equal(b["image"], from_list)


def test_views_are_refused(tmp_path):
    with pytest.raises(ValueError, match=r"views \(multi-crop\) need an RGB image"):
        _loader(tmp_path, ["gray16.tif"], [], views={"a": (2, [stoker.RandomResizedCrop(8)])})
