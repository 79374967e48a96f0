"""Detection and segmentation sources and transforms against independent references.

- COCO instances JSON: the records, boxes, labels, crowd and empty handling
  against the file parsed here with the json module (torchvision's
  CocoDetection order: images by increasing id); boxes through the geometry
  against test_fields' numpy implementation of torchvision.transforms.v2's rules.
- RandomCrop (padding, pad_if_needed, fill), RandomShortestSize and
  Resize(None, max_size): the drawn parameters (from _testing.plan) replayed
  through torchvision 0.14's own code (RandomCrop.forward's padding rules,
  F.pad, F.crop, F.resize on PIL; masks NEAREST with the mask's fill).
- Paired folders: masks found by relative path equal the same masks listed
  in a CSV column.
- detection_targets: views of the batch, per sample.
- Resume and 2-rank sharding with a COCO schema: exact.
Tolerances as test_fields: uint8 images and masks exact, boxes 1e-4 px.
"""
import json
import os

import numpy as np
import pytest
import torch
import torchvision.transforms.functional as F
from PIL import Image as PILImage
from torchvision.transforms import InterpolationMode

import stoker
from stoker._stoker import _testing
from test_fields import (L_CLASSES, apply_plan, class_regions, mask_pil, ref_boxes, smooth_image, write_csv,
                         loader_samples, assert_sample_equal)

SEED = 5


# ---------------------------------------------------------------- a small COCO set

@pytest.fixture(scope="module")
def coco(tmp_path_factory):
    """8 images (ids not in file order, non-contiguous), images/ under a root apart
    from the JSON, boxes with COCO's float xywh, category ids 1..90 style, two crowd
    annotations, one image without annotations, one image only crowd."""
    d = tmp_path_factory.mktemp("coco")
    (d / "images" / "sub").mkdir(parents=True)
    (d / "annotations").mkdir()
    rng = np.random.default_rng(77)
    ids = [42, 7, 1000, 3, 18, 99, 5, 64]
    images, anns, sizes = [], [], {}
    ann_id = 1
    for k, image_id in enumerate(ids):
        w, h = int(rng.integers(48, 97)), int(rng.integers(40, 81))
        name = f"sub/im{k}.jpg" if k % 3 == 0 else f"im{k}.jpg"
        smooth_image(rng, w, h).save(d / "images" / name, quality=92)
        images.append({"id": image_id, "file_name": name, "width": w, "height": h, "license": 1})
        sizes[image_id] = (w, h)
        n = 0 if k == 2 else int(rng.integers(1, 6))
        for j in range(n):
            x, y = rng.uniform(0, w - 6), rng.uniform(0, h - 6)
            bw, bh = rng.uniform(2, w - x), rng.uniform(2, h - y)
            crowd = int((k == 4 and j == 0) or k == 6)
            anns.append({"id": ann_id, "image_id": image_id, "category_id": int(rng.choice([1, 3, 17, 90])),
                         "bbox": [round(x, 2), round(y, 2), round(bw, 2), round(bh, 2)], "area": bw * bh,
                         "iscrowd": crowd, "segmentation": [[x, y, x + bw, y, x + bw, y + bh]]})
            ann_id += 1
    doc = {"info": {}, "images": images, "annotations": anns,
           "categories": [{"id": c, "name": f"c{c}"} for c in (1, 3, 17, 90)]}
    path = d / "annotations" / "instances.json"
    path.write_text(json.dumps(doc))
    return dict(json=str(path), root=str(d / "images"), doc=doc, sizes=sizes)


def coco_reference(doc, keep_crowd=False, skip_empty=False):
    """(image id, file_name, xyxy boxes, labels) per record, parsed here."""
    by_image = {}
    for a in doc["annotations"]:
        if a["iscrowd"] and not keep_crowd:
            continue
        by_image.setdefault(a["image_id"], []).append(a)
    out = []
    for im in sorted(doc["images"], key=lambda i: i["id"]):
        got = by_image.get(im["id"], [])
        if skip_empty and not got:
            continue
        xyxy = np.array([[x, y, x + w, y + h] for x, y, w, h in (a["bbox"] for a in got)], np.float64).reshape(-1, 4)
        out.append((im["id"], im["file_name"], xyxy, np.array([a["category_id"] for a in got], np.int64)))
    return out


DET_TF = [stoker.Resize(None, max_size=64), stoker.CenterCrop(64), stoker.RandomHorizontalFlip()]
DET_FIELDS = [stoker.Image("image"), stoker.Boxes("boxes", max_boxes=6), stoker.Label("image_id", member="image_id")]


@pytest.mark.parametrize("keep_crowd,skip_empty", [(False, False), (True, False), (False, True)])
def test_coco_records_boxes_and_labels_match_the_parsed_json(coco, keep_crowd, skip_empty):
    loader = stoker.Loader(coco["json"], image_root=coco["root"], batch_size=3, seed=SEED, threads=2,
                           transforms=DET_TF, fields=DET_FIELDS, dtype="uint8", keep_crowd=keep_crowd,
                           skip_empty=skip_empty)
    ref = coco_reference(coco["doc"], keep_crowd, skip_empty)
    samples = loader_samples(loader)
    assert len(samples) == len(ref) == loader.num_samples
    assert loader.stats()["corrupt"] == 0
    for index, (s, (image_id, name, xyxy, labels)) in enumerate(zip(samples, ref)):
        assert int(s["image_id"]) == image_id, "records in increasing image id order"
        w, h = coco["sizes"][image_id]
        plan = _testing.plan(DET_TF, SEED, 0, index, w, h, geometric=True)
        pil = PILImage.open(os.path.join(coco["root"], name)).convert("RGB")
        want = np.array(apply_plan(pil, plan, InterpolationMode.BILINEAR)).transpose(2, 0, 1)
        np.testing.assert_array_equal(s["image"], want, err_msg=name)
        boxes, box_labels, count = ref_boxes(xyxy, labels, plan, (w, h), 6)[:3]
        np.testing.assert_allclose(s["boxes"], boxes, rtol=0, atol=1e-4, err_msg=name)
        np.testing.assert_array_equal(s["boxes_labels"], box_labels, err_msg=name)
        assert int(s["boxes_count"]) == count


def test_coco_fixed_size_path_resizes_the_longer_side_and_pads(coco):
    """Resize(None, max_size=S): v2's int(S * short / long) with the longer side S; CenterCrop(S) pads."""
    for image_id, (w, h) in coco["sizes"].items():
        plan = _testing.plan([stoker.Resize(None, max_size=64), stoker.CenterCrop(64)], 0, 0, 0, w, h, geometric=True)
        short, long_ = min(w, h), max(w, h)
        new = (64, int(64 * short / long_)) if w >= h else (int(64 * short / long_), 64)
        resize = [step for step in plan["steps"] if step[0] == "resize"]
        assert resize == ([("resize",) + new] if new != (w, h) else []), (w, h)
        tv = F.center_crop(F.resize(PILImage.new("RGB", (w, h), (200, 10, 10)), [new[1], new[0]]), [64, 64])
        got = apply_plan(PILImage.new("RGB", (w, h), (200, 10, 10)), plan, InterpolationMode.BILINEAR)
        np.testing.assert_array_equal(np.array(got), np.array(tv))


def test_coco_image_root_defaults_to_the_json_folder_and_missing_files_are_counted(coco, tmp_path):
    doc = json.loads(json.dumps(coco["doc"]))
    for im in doc["images"]:
        im["file_name"] = os.path.join(coco["root"], im["file_name"]) if im["id"] != 99 else "gone.jpg"
    path = tmp_path / "x.json"
    path.write_text(json.dumps(doc))
    loader = stoker.Loader(str(path), batch_size=8, threads=1, transforms=DET_TF, fields=DET_FIELDS)
    ids = [int(v) for b in loader for v in b["image_id"]]
    s = loader.stats()
    assert s["corrupt_by_reason"] == {"not_found": 1}
    assert any(str(tmp_path / "gone.jpg") in e for e in s["corrupt_examples"]), s["corrupt_examples"]
    assert 99 not in ids and len(ids) == 8  # the skipped sample's place is filled


def test_coco_bad_files_raise_naming_the_file_and_bad_annotations_fail_their_sample(coco, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"images": [{"id": 1, "file_name": "a.jpg"}], "annotations": [')
    with pytest.raises(ValueError, match=r"bad\.json.*malformed JSON at byte"):
        stoker.Loader(str(bad), fields=DET_FIELDS, transforms=DET_TF)
    doc = json.loads(json.dumps(coco["doc"]))
    doc["annotations"].append({"id": 999, "image_id": 12345, "category_id": 1, "bbox": [0, 0, 1, 1], "iscrowd": 0})
    orphan = tmp_path / "orphan.json"
    orphan.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=r"orphan\.json.*image id 12345"):
        stoker.Loader(str(orphan), image_root=coco["root"], fields=DET_FIELDS, transforms=DET_TF)
    (tmp_path / "none.json").write_text('{"annotations": []}')
    with pytest.raises(ValueError, match=r"no \"images\" list"):
        stoker.Loader(str(tmp_path / "none.json"), fields=DET_FIELDS, transforms=DET_TF)
    doc = json.loads(json.dumps(coco["doc"]))
    target = next(a for a in doc["annotations"] if a["image_id"] == 7 and not a["iscrowd"])
    target["bbox"] = [1, 2, 3]
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(doc))
    loader = stoker.Loader(str(broken), image_root=coco["root"], batch_size=8, threads=1, transforms=DET_TF,
                           fields=DET_FIELDS)
    ids = [int(v) for b in loader for v in b["image_id"]]
    s = loader.stats()
    assert 7 not in ids and s["corrupt_by_reason"] == {"corrupt": 1}
    msg = s["corrupt_examples"][0]
    assert "broken.json" in msg and "image id 7" in msg and "bbox" in msg and "field 'boxes'" in msg, msg
    with pytest.raises(stoker.SampleError, match="image id 7"):
        list(stoker.Loader(str(broken), image_root=coco["root"], batch_size=8, threads=1, transforms=DET_TF,
                           fields=DET_FIELDS, on_corrupt="raise"))


def test_detection_targets_are_per_sample_views_of_the_batch(coco):
    loader = stoker.Loader(coco["json"], image_root=coco["root"], batch_size=4, seed=SEED, threads=2,
                           transforms=DET_TF, fields=DET_FIELDS)
    batch = next(iter(loader))
    targets = stoker.detection_targets(batch)
    assert len(targets) == 4
    for i, t in enumerate(targets):
        n = int(batch["boxes_count"][i])
        assert sorted(t) == ["boxes", "labels"]
        assert t["boxes"].shape == (n, 4) and t["boxes"].dtype == torch.float32
        assert t["labels"].shape == (n,) and t["labels"].dtype == torch.int64
        assert torch.equal(t["boxes"], batch["boxes"][i, :n]) and torch.equal(t["labels"], batch["boxes_labels"][i, :n])
        if n:  # a view: the batch's own memory
            assert t["boxes"].data_ptr() == batch["boxes"][i].data_ptr()
    with pytest.raises(KeyError, match="'det'"):
        stoker.detection_targets(batch, "det")


def test_resume_and_two_ranks_with_a_coco_schema_are_exact(coco):
    kw = dict(image_root=coco["root"], batch_size=2, shuffle=True, seed=SEED, threads=2, fields=DET_FIELDS,
              transforms=DET_TF)
    ref = stoker.Loader(coco["json"], **kw)
    ref.set_epoch(1)
    full = loader_samples(ref)
    a = stoker.Loader(coco["json"], **kw)
    a.set_epoch(1)
    it = iter(a)
    next(it), next(it)
    state = json.loads(json.dumps(a.state_dict()))
    b = stoker.Loader(coco["json"], prefetch=3, **kw)
    b.load_state_dict(state)
    rest = loader_samples(b)
    assert len(rest) == len(full) - 4
    for x, y in zip(rest, full[4:]):
        assert_sample_equal(x, y, "resumed")
    single = {int(s["image_id"]): s for s in loader_samples(stoker.Loader(coco["json"], **kw))}
    seen = []
    for rank in (0, 1):
        for s in loader_samples(stoker.Loader(coco["json"], rank=rank, world_size=2, **kw)):
            assert_sample_equal(s, single[int(s["image_id"])], f"rank {rank}")
            seen.append(int(s["image_id"]))
    assert sorted(seen) == sorted(single)


# ---------------------------------------------------------------- RandomCrop, RandomShortestSize

@pytest.fixture(scope="module")
def seg(tmp_path_factory):
    """6 images of different sizes with gray masks (classes L_CLASSES), as an ImageFolder
    tree with a paired masks tree, and as a CSV listing both."""
    d = tmp_path_factory.mktemp("seg")
    rng = np.random.default_rng(31)
    rows, recs = [], []
    for k in range(6):
        w, h = int(rng.integers(30, 70)), int(rng.integers(26, 60))
        cls = f"c{k % 2}"
        for sub in ("images", "masks"):
            (d / sub / cls).mkdir(parents=True, exist_ok=True)
        smooth_image(rng, w, h).save(d / "images" / cls / f"p{k}.png")
        arr = class_regions(rng, w, h, L_CLASSES, np.uint8)
        mask_pil(arr, "L").save(d / "masks" / cls / f"p{k}.png")
    # Records in ImageFolder order (c0 first), the CSV's rows too.
    for cls, k in (("c0", 0), ("c0", 2), ("c0", 4), ("c1", 1), ("c1", 3), ("c1", 5)):
        recs.append((str(d / "images" / cls / f"p{k}.png"), str(d / "masks" / cls / f"p{k}.png")))
        rows.append([f"images/{cls}/p{k}.png", f"masks/{cls}/p{k}.png"])
    csv = write_csv(d / "seg.csv", ["image", "mask"], rows)
    return dict(dir=d, csv=csv, recs=recs)


def tv_random_crop(img, size, padding, pad_if_needed, fill, i, j):
    """torchvision 0.14's RandomCrop.forward with get_params' (i, j) given."""
    if padding is not None:
        img = F.pad(img, padding, fill, "constant")
    w, h = img.size
    if pad_if_needed and w < size[1]:
        img = F.pad(img, [size[1] - w, 0], fill, "constant")
    if pad_if_needed and h < size[0]:
        img = F.pad(img, [0, size[0] - h], fill, "constant")
    w, h = img.size
    assert 0 <= i <= h - size[0] and 0 <= j <= w - size[1], "offsets in get_params' range"
    return F.crop(img, i, j, size[0], size[1])


def padding_ltrb(padding):
    if padding is None:
        return 0, 0, 0, 0
    if isinstance(padding, int):
        return (padding,) * 4
    return tuple(padding) * 2 if len(padding) == 2 else tuple(padding)


CROPS = [dict(size=(24, 20)), dict(size=32, padding=4, fill=(250, 5, 128)), dict(size=(48, 72), pad_if_needed=True),
         dict(size=(40, 40), padding=(3, 7), pad_if_needed=True, fill=9), dict(size=(28, 30), padding=(1, 2, 5, 0))]


@pytest.mark.parametrize("params", CROPS, ids=[str(i) for i in range(len(CROPS))])
def test_random_crop_equals_torchvision_on_images_masks_and_boxes(seg, params):
    size = params["size"] if isinstance(params["size"], tuple) else (params["size"],) * 2
    t = stoker.RandomCrop(**params)
    tf = [t, stoker.RandomHorizontalFlip()]
    fields = [stoker.Image("image"), stoker.Mask("mask", fill=77), stoker.Boxes("boxes", max_boxes=4)]
    boxes = np.array([[1, 2, 20, 25], [5.5, 0, 29, 18.25]], np.float64)
    d = seg["dir"]
    rows = []
    for k, (image, mask) in enumerate(seg["recs"]):
        np.save(d / f"box{k}.npy", np.concatenate([boxes, [[1], [2]]], 1).astype(np.float32))
        rows.append([image, mask, str(d / f"box{k}.npy")])
    csv = write_csv(d / "crop.csv", ["image", "mask", "boxes"], rows)
    loader = stoker.Loader(csv, batch_size=6, seed=SEED, threads=2, transforms=tf, fields=fields, dtype="uint8",
                           on_corrupt="raise")
    batch = {k: v.numpy() for k, v in next(iter(loader)).items()}
    left, top = padding_ltrb(params.get("padding"))[:2]
    for k, (image, mask) in enumerate(seg["recs"]):
        pil, m = PILImage.open(image).convert("RGB"), PILImage.open(mask)
        w, h = pil.size
        plan = _testing.plan(tf, SEED, 0, k, w, h, geometric=True)
        (kind, x, y, cw, ch), = plan["steps"]
        assert kind == "crop" and (ch, cw) == size
        # The box in the unpadded image's frame back to torchvision's (i, j) on the padded one.
        pl, pt = left, top
        pw, ph = w + sum(padding_ltrb(params.get("padding"))[0::2]), h + sum(padding_ltrb(params.get("padding"))[1::2])
        if params.get("pad_if_needed") and pw < size[1]:
            pl += size[1] - pw
        if params.get("pad_if_needed") and ph < size[0]:
            pt += size[0] - ph
        i, j = y + pt, x + pl
        fill = params.get("fill", 0)
        want = tv_random_crop(pil, size, params.get("padding"), params.get("pad_if_needed", False), fill, i, j)
        want_m = tv_random_crop(m, size, params.get("padding"), params.get("pad_if_needed", False), 77, i, j)
        if plan["mirror"]:
            want, want_m = F.hflip(want), F.hflip(want_m)
        np.testing.assert_array_equal(batch["image"][k], np.array(want).transpose(2, 0, 1), err_msg=f"record {k}")
        np.testing.assert_array_equal(batch["mask"][k], np.array(want_m), err_msg=f"record {k}")
        ref = ref_boxes(boxes, [1, 2], plan, (w, h), 4)
        np.testing.assert_allclose(batch["boxes"][k], ref[0], rtol=0, atol=1e-4)
        assert int(batch["boxes_count"][k]) == ref[2]


def test_random_crop_larger_than_the_image_is_a_counted_sample_error(seg):
    sizes = [PILImage.open(image).size for image, _ in seg["recs"]]
    crop = sorted(h for _, h in sizes)[3]  # taller than half the images
    small = sum(h < crop for _, h in sizes)
    assert 0 < small < 6
    loader = stoker.Loader(seg["csv"], batch_size=6, threads=1, transforms=[stoker.RandomCrop((crop, 20))],
                           fields=[stoker.Image("image"), stoker.Mask("mask")])
    n = sum(len(b["image"]) for b in loader)
    s = loader.stats()
    assert n == 6 and s["corrupt_by_reason"] == {"invalid_argument": s["corrupt"]} and s["corrupt"] >= small
    assert all(f"RandomCrop: required crop size ({crop}, 20) is larger than the (padded) image size" in e
               for e in s["corrupt_examples"]), s["corrupt_examples"]


def test_random_crop_and_shortest_size_parameters_are_checked():
    with pytest.raises(ValueError, match="Padding must be an int or a 1, 2, or 4 element tuple, not a 3"):
        stoker.RandomCrop(8, padding=(1, 2, 3))
    with pytest.raises(ValueError, match="only 'constant'"):
        stoker.RandomCrop(8, padding_mode="reflect")
    with pytest.raises(ValueError, match="Padding mode should be either"):
        stoker.RandomCrop(8, padding_mode="wrap")
    with pytest.raises(ValueError, match="fill must be in"):
        stoker.RandomCrop(8, fill=300)
    with pytest.raises(TypeError):
        stoker.RandomShortestSize("480")
    with pytest.raises(ValueError, match="min_size must be positive"):
        stoker.RandomShortestSize([480, 0])
    with pytest.raises(ValueError, match="requires max_size"):
        stoker.Resize(None)
    t = stoker.RandomCrop((3, 4), padding=(1, 2), pad_if_needed=True, fill=(1, 2, 3))
    assert (t.height, t.width, t.padding, t.pad_if_needed, t.fill) == (3, 4, (1, 2, 1, 2), True, (1, 2, 3))
    assert repr(stoker.RandomShortestSize(480)) == "RandomShortestSize(min_size=[480], max_size=None)"


def test_random_shortest_size_draws_from_min_size_and_resizes_as_torchvision(seg):
    t = stoker.RandomShortestSize([20, 33, 47], max_size=60)
    tf = [t, stoker.CenterCrop(40)]
    loader = stoker.Loader(seg["csv"], batch_size=6, seed=SEED, threads=2, transforms=tf, dtype="uint8",
                           fields=[stoker.Image("image"), stoker.Mask("mask", fill=3)])
    batch = {k: v.numpy() for k, v in next(iter(loader)).items()}
    drawn = set()
    for epoch in range(6):
        for k, (image, _) in enumerate(seg["recs"]):
            w, h = PILImage.open(image).size
            plan = _testing.plan(tf, SEED, epoch, k, w, h, geometric=True)
            sizes = {m: (int(w * min(m / min(w, h), 60 / max(w, h))), int(h * min(m / min(w, h), 60 / max(w, h))))
                     for m in (20, 33, 47)}
            resize = [s for s in plan["steps"] if s[0] == "resize"]
            got = resize[0][1:] if resize else (w, h)
            assert got in sizes.values(), (w, h, got, sizes)
            drawn |= {m for m, v in sizes.items() if v == got}
    assert drawn == {20, 33, 47}, "every min_size drawn over 36 samples (each missed with p < 1e-5)"
    for k, (image, mask) in enumerate(seg["recs"]):
        pil, m = PILImage.open(image).convert("RGB"), PILImage.open(mask)
        plan = _testing.plan(tf, SEED, 0, k, *pil.size, geometric=True)
        np.testing.assert_array_equal(batch["image"][k],
                                      np.array(apply_plan(pil, plan, InterpolationMode.BILINEAR)).transpose(2, 0, 1))
        resized = F.resize(m, [plan["steps"][0][2], plan["steps"][0][1]], InterpolationMode.NEAREST)
        # torchvision's CenterCrop pads with 0; a Mask pads with its fill (3).
        padding = np.array(F.center_crop(PILImage.new("L", resized.size, 1), [40, 40])) == 0
        want = np.where(padding, 3, np.array(F.center_crop(resized, [40, 40])))
        np.testing.assert_array_equal(batch["mask"][k], want, err_msg=f"record {k}")


# ---------------------------------------------------------------- paired folders

def test_paired_folder_masks_equal_the_csv_listed_masks(seg):
    tf = [stoker.RandomResizedCrop(24), stoker.RandomHorizontalFlip()]
    by_folder = stoker.Loader(str(seg["dir"] / "images"), batch_size=6, seed=SEED, threads=2, transforms=tf,
                              fields=[stoker.Image(), stoker.Mask("mask", folder=seg["dir"] / "masks")])
    rows = [[image, mask] for image, mask in seg["recs"]]
    csv = write_csv(seg["dir"] / "paired.csv", ["image", "mask"], rows)
    by_csv = stoker.Loader(csv, batch_size=6, seed=SEED, threads=2, transforms=tf,
                           fields=[stoker.Image(), stoker.Mask("mask")])
    a, b = loader_samples(by_folder), loader_samples(by_csv)
    assert len(a) == 6
    for x, y in zip(a, b):
        assert_sample_equal(x, y, "paired folder vs csv")


def test_paired_folder_missing_and_ambiguous_files_are_counted(seg, tmp_path):
    import shutil
    masks = tmp_path / "masks"
    shutil.copytree(seg["dir"] / "masks", masks)
    os.remove(masks / "c0" / "p2.png")
    np.save(masks / "c1" / "p3.npy", np.zeros((4, 4), np.uint8))  # p3.png and p3.npy: ambiguous
    loader = stoker.Loader(str(seg["dir"] / "images"), batch_size=6, threads=1,
                           transforms=[stoker.Resize((20, 20))],
                           fields=[stoker.Image(), stoker.Mask("mask", folder=masks)])
    assert sum(len(b["image"]) for b in loader) == 6
    s = loader.stats()
    assert s["corrupt_by_reason"].get("not_found", 0) >= 1 and s["corrupt_by_reason"].get("invalid_argument", 0) >= 1
    text = "\n".join(s["corrupt_examples"])
    assert "no file 'c0/p2.*' in the paired folder" in text and "several files 'c1/p3.*'" in text, text
    with pytest.raises(ValueError, match="not both"):
        stoker.Loader(str(seg["dir"] / "images"), fields=[stoker.Image(), stoker.Mask("m", member="x", folder=masks)],
                      transforms=[stoker.Resize((20, 20))])
    with pytest.raises(OSError, match="not a directory"):
        stoker.Loader(str(seg["dir"] / "images"), fields=[stoker.Image(), stoker.Mask("m", folder=tmp_path / "nope")],
                      transforms=[stoker.Resize((20, 20))])


# ---------------------------------------------------------------- pack carries every member

from test_fields import data  # noqa: E402,F401  (the fixture: a CSV of images with masks, boxes, tensors)

BUILD = os.environ.get("STOKER_BUILD", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
CLI = os.path.join(BUILD, "tools", "stoker")
PACK_FIELDS = [stoker.Image("image"), stoker.Mask("seg"), stoker.Mask("gray", fill=255), stoker.Mask("deep"),
               stoker.Boxes("boxes", max_boxes=6), stoker.Boxes("jb", max_boxes=6, member="ann"),
               stoker.Label("label"), stoker.Label("num", member="num"), stoker.Tensor("feat"), stoker.Tensor("code")]
PACK_TF = [stoker.RandomResizedCrop((20, 24)), stoker.RandomHorizontalFlip()]


def pack(*args):
    import subprocess
    out = subprocess.run([CLI, "pack", *map(str, args)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr + out.stdout
    return out.stdout


def assert_loaders_equal(a, b, boxes_atol=0.0):
    sa, sb = loader_samples(a), loader_samples(b)
    assert len(sa) == len(sb) > 0
    for x, y in zip(sa, sb):
        assert list(x) == list(y)
        for k in y:
            if k in ("boxes", "jb") and boxes_atol:
                np.testing.assert_allclose(x[k], y[k], rtol=0, atol=boxes_atol, err_msg=k)
            else:
                np.testing.assert_array_equal(x[k], y[k], err_msg=k)


@pytest.mark.skipif(not os.path.exists(CLI), reason="the stoker CLI is not built")
def test_pack_keeps_every_member_so_shards_give_the_list_files_batches(data, tmp_path):
    out = pack(data["csv"], tmp_path / "m-%d.tar", "--keep", "--shard-count", "2", "--boxes", "boxes", "ann")
    assert "members carried" in out
    fields = PACK_FIELDS + [stoker.Boxes("bxywh", max_boxes=6, format="xywh")]
    kw = dict(batch_size=3, seed=SEED, threads=2, transforms=PACK_TF, fields=fields, dtype="uint8")
    assert_loaders_equal(stoker.Loader(str(tmp_path / "m-{0..1}.tar"), **kw), stoker.Loader(data["csv"], **kw))


@pytest.mark.skipif(not os.path.exists(CLI), reason="the stoker CLI is not built")
def test_pack_max_side_resizes_masks_and_rescales_boxes_with_the_image(data, tmp_path):
    """--raw --max-side 30: the shards hold Resize(30) of every image (PIL-exact) with its masks resized
    (nearest) and boxes rescaled: the same samples as the list file through Resize(30) first."""
    out = pack(data["csv"], tmp_path / "r-%d.tar", "--raw", "--max-side", "30", "--boxes", "boxes", "ann")
    n = len(data["recs"])
    assert f"members carried ({5 * n} resized with their image)" in out, out  # 3 masks + 2 boxes per record
    kw = dict(batch_size=3, seed=SEED, threads=2, fields=PACK_FIELDS, dtype="uint8")
    packed = stoker.Loader(str(tmp_path / "r-0.tar"), transforms=PACK_TF, **kw)
    direct = stoker.Loader(data["csv"], transforms=[stoker.Resize(30)] + PACK_TF, **kw)
    assert_loaders_equal(packed, direct, boxes_atol=1e-4)


@pytest.mark.skipif(not os.path.exists(CLI), reason="the stoker CLI is not built")
def test_pack_of_a_coco_file_carries_boxes_and_ids(coco, tmp_path):
    pack(coco["json"], tmp_path / "c-%d.tar", "--keep", "--image-root", coco["root"])
    kw = dict(batch_size=4, seed=SEED, threads=2, transforms=DET_TF, fields=DET_FIELDS, dtype="uint8")
    assert_loaders_equal(stoker.Loader(str(tmp_path / "c-0.tar"), **kw),
                         stoker.Loader(coco["json"], image_root=coco["root"], **kw))


def test_boxes_past_max_boxes_are_counted_and_said_once(coco, capfd):
    loader = stoker.Loader(coco["json"], image_root=coco["root"], batch_size=8, threads=2, transforms=DET_TF,
                           fields=[stoker.Image(), stoker.Boxes("boxes", max_boxes=1)])
    counts = [int(c) for b in loader for c in b["boxes_count"]]
    ref = coco_reference(coco["doc"])
    assert max(counts) == 1 and all(c <= min(1, len(r[2])) for c, r in zip(counts, ref))
    truncated = loader.stats()["boxes_truncated"]
    assert truncated > 0
    err = capfd.readouterr().err
    assert err.count("more than max_boxes=1") == 1 and "boxes_truncated" in err, err
