"""Loader.batch(epoch, index) and Loader.batch_provenance(epoch, index), and
`stoker replay`: any batch made again bit for bit without running the epoch up
to it, and which records and draws made it. The reference is always an
uninterrupted epoch of another loader (other thread counts); records are
identified by their labels (label = record index, as the numbered fixture's),
crop boxes by torchvision's functional crop of the source image."""
import json
import os
import subprocess

import numpy as np
import pytest
import torch
import torchvision.transforms.functional as TF
from PIL import Image as PILImage

import stoker
import volume_fixtures as V

CLI = os.path.join(os.environ.get("STOKER_BUILD", "build"), "tools", "stoker")


def as_numpy(batch):
    """A batch (tuple or dict of tensors/arrays) as a list of (name, numpy copy)."""
    items = batch.items() if isinstance(batch, dict) else enumerate(batch)
    return [(k, (v.numpy() if isinstance(v, torch.Tensor) else np.asarray(v)).copy()) for k, v in items]


def epoch_batches(loader, epoch):
    loader.set_epoch(epoch)
    return [as_numpy(b) for b in loader]


def assert_same(got, want, what):
    assert [k for k, _ in got] == [k for k, _ in want], what
    for (k, a), (_, b) in zip(got, want):
        assert a.dtype == b.dtype and a.shape == b.shape, (what, k)
        np.testing.assert_array_equal(a, b, err_msg=f"{what}: {k}")


def labels_of(batch):
    d = dict(batch)
    return [int(v) for v in (d["label"] if "label" in d else d[1])]


def check_replay(make, epoch=1, world=2, threads=(1, 3)):
    """For each rank and each thread count of the uninterrupted run: every batch of `epoch` rebuilt by another
    loader (2 threads) equals the run's, and its provenance names the records the run used."""
    for rank in range(world):
        replayer = make(rank=rank, world_size=world, threads=2)
        for t in threads:
            want = epoch_batches(make(rank=rank, world_size=world, threads=t), epoch)
            assert len(want) >= 2
            for index in reversed(range(len(want))):  # no batch before it is made first
                got = as_numpy(replayer.batch(epoch, index))
                assert_same(got, want[index], f"rank {rank}, threads {t}, batch {index}")
                p = replayer.batch_provenance(epoch, index)
                assert (p["epoch"], p["batch"], p["rank"], p["world_size"]) == (epoch, index, rank, world)
                assert [s["record"] for s in p["samples"]] == labels_of(want[index])
                assert [s["label"] for s in p["samples"]] == labels_of(want[index])
                assert all("plan" in s for s in p["samples"])


# ---------------------------------------------------------------- images

@pytest.mark.parametrize("colour", [
    [stoker.ColorJitter(0.4, 0.4, 0.4, 0.1)],
    [stoker.TrivialAugmentWide()],
])
def test_images_rebuilt_bit_for_bit_on_every_rank_and_thread_count(numbered, colour):
    tf = [stoker.RandomResizedCrop(24), stoker.RandomHorizontalFlip(), stoker.RandomVerticalFlip()] + colour + \
        [stoker.Normalize([0.5, 0.4, 0.3], [0.2, 0.3, 0.25])]

    def make(**kw):
        return stoker.Loader(numbered, batch_size=5, shuffle=True, seed=11, transforms=tf, **kw)

    check_replay(make)
    p = make(rank=0, world_size=1).batch_provenance(2, 3)
    ops = [op["op"] for s in p["samples"] for op in s["plan"]["plan"]["image_ops"]]
    if isinstance(colour[0], stoker.ColorJitter):
        assert {"brightness", "contrast", "saturation", "hue"} <= set(ops)
        factors = [op["factor"] for s in p["samples"] for op in s["plan"]["plan"]["image_ops"]
                   if op["op"] == "brightness"]
        assert all(0.6 <= f <= 1.4 for f in factors) and len(set(factors)) > 1


def test_provenance_crop_boxes_are_torchvisions_crop_of_the_source(numbered):
    """uint8, no colour op: each sample equals F.resized_crop(source, the provenance's box) (then flipped)."""
    loader = stoker.Loader(numbered, batch_size=8, shuffle=True, seed=5, dtype="uint8", threads=2,
                           transforms=[stoker.RandomResizedCrop(20, scale=(0.2, 1.0)), stoker.RandomHorizontalFlip()])
    mirrored = 0
    for index in range(len(loader)):
        images, labels = as_numpy(loader.batch(3, index))
        images, labels = images[1], labels[1]
        p = loader.batch_provenance(3, index)
        for j, s in enumerate(p["samples"]):
            img = PILImage.open(s["key"]).convert("RGB")
            plan = s["plan"]
            assert (plan["width"], plan["height"]) == img.size
            crop, resize = plan["plan"]["steps"]
            x, y, w, h = crop["crop"]
            assert 0 <= x and x + w <= img.width and 0 <= y and y + h <= img.height
            assert resize["resize"] == [20, 20]
            ref = TF.resized_crop(img, y, x, h, w, [20, 20], interpolation=TF.InterpolationMode.BILINEAR)
            if plan["plan"]["mirror"]:
                ref = TF.hflip(ref)
                mirrored += 1
            np.testing.assert_array_equal(images[j].transpose(1, 2, 0), np.asarray(ref), err_msg=s["key"])
            assert labels[j] == s["record"]
    assert 0 < mirrored < 37


def test_a_bad_sample_is_replaced_or_raised_as_in_the_epoch(make_numbered, numbered):
    files = [line.rsplit(",", 1)[0] for line in open(numbered).read().splitlines()[1:]]
    bad = os.path.join(os.path.dirname(make_numbered([files[0]])), "bad.jpg")
    with open(files[7], "rb") as f:
        open(bad, "wb").write(f.read()[:200])  # truncated: its header reads, its pixels do not
    listed = make_numbered(files[:7] + [bad] + files[8:])
    kw = dict(batch_size=4, shuffle=True, seed=2, transforms=[stoker.RandomResizedCrop(16)])
    want = epoch_batches(stoker.Loader(listed, threads=3, **kw), 0)
    skipping = stoker.Loader(listed, threads=1, **kw)
    for index, batch in enumerate(want):
        assert_same(as_numpy(skipping.batch(0, index)), batch, f"batch {index}")
    assert skipping.stats()["corrupt"] == 0  # the epoch counted it when it ran
    index = next(i for i in range(len(want)) if 7 in
                 [s["record"] for s in skipping.batch_provenance(0, i)["samples"]])
    raising = stoker.Loader(listed, threads=1, on_corrupt="raise", **kw)
    with pytest.raises(stoker.SampleError, match="bad.jpg"):
        raising.batch(0, index)


def test_bad_indices_and_python_stages_are_refused(numbered):
    loader = stoker.Loader(numbered, batch_size=8, transforms=[stoker.CenterCrop(8)])
    assert len(loader) == 5
    with pytest.raises(ValueError, match="rank 0 has 5 batches in that epoch"):
        loader.batch(0, 5)
    with pytest.raises(ValueError, match="rank 0 has 5 batches"):
        loader.batch_provenance(4, 9)
    with pytest.raises(ValueError, match="index"):
        loader.batch(0, -1)
    staged = stoker.Loader(numbered, batch_size=8, transforms=[stoker.CenterCrop(8)], collate_fn=lambda b: b)
    with pytest.raises(ValueError, match="Python stage"):
        staged.batch(0, 0)


def test_mixup_cutmix_draws_are_in_the_provenance_and_the_batch(numbered):
    def make(**kw):
        return stoker.Loader(numbered, batch_size=6, shuffle=True, seed=4, transforms=[stoker.RandomResizedCrop(16)],
                             batch_transforms=[stoker.RandomChoice([stoker.MixUp(alpha=0.5, num_classes=40),
                                                                    stoker.CutMix(num_classes=40)])], **kw)
    want = epoch_batches(make(threads=3), 1)
    replayer = make(threads=1)
    kinds = set()
    for index, batch in enumerate(want):
        assert_same(as_numpy(replayer.batch(1, index)), batch, f"batch {index}")
        (mix,) = replayer.batch_provenance(1, index)["batch_transforms"]
        kinds.add(mix["transform"])
        if mix["transform"] == "MixUp":
            lam = mix["lam"]
        else:
            x1, y1, x2, y2 = mix["box"]
            assert 0 <= x1 <= x2 <= 16 and 0 <= y1 <= y2 <= 16
            lam = mix["lam_adjusted"]
        labels = dict(batch)[1]
        if len(labels) > 1:  # a batch of one is mixed with itself
            assert np.isclose(labels.max(axis=1), max(lam, 1 - lam), atol=1e-6).all()
    assert kinds == {"MixUp", "CutMix"}


# ---------------------------------------------------------------- masks and boxes

@pytest.fixture(scope="module")
def segdet(tmp_path_factory):
    """17 PNG images with a mask and xyxy boxes each, label = record index."""
    d = tmp_path_factory.mktemp("replay_segdet")
    rng = np.random.default_rng(9)
    with open(d / "all.csv", "w") as f:
        f.write("image,seg,boxes,label\n")
        for i in range(17):
            w, h = int(rng.integers(30, 60)), int(rng.integers(30, 60))
            PILImage.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(d / f"i{i}.png")
            PILImage.fromarray(rng.integers(0, 5, (h, w), dtype=np.uint8), "L").save(d / f"m{i}.png")
            x0, y0 = rng.uniform(0, w / 2, 3), rng.uniform(0, h / 2, 3)
            boxes = np.stack([x0, y0, x0 + rng.uniform(3, w / 2, 3), y0 + rng.uniform(3, h / 2, 3)], 1)
            np.save(d / f"b{i}.npy", boxes.astype(np.float32))
            f.write(f"i{i}.png,m{i}.png,b{i}.npy,{i}\n")
    return str(d / "all.csv")


def test_masks_and_boxes_rebuilt_bit_for_bit(segdet):
    fields = [stoker.Image("image"), stoker.Mask("seg"), stoker.Boxes("boxes", max_boxes=4), stoker.Label("label")]

    def make(**kw):
        return stoker.Loader(segdet, batch_size=3, shuffle=True, seed=8, fields=fields, dtype="uint8",
                             transforms=[stoker.RandomResizedCrop(20), stoker.RandomHorizontalFlip()], **kw)

    check_replay(make)


# ---------------------------------------------------------------- a mixture

def test_mixture_rebuilt_and_its_sources_named(numbered, tmp_path):
    small = tmp_path / "small.csv"
    rows = open(numbered).read().splitlines()[1:12]
    small.write_text("path,label\n" + "".join(f"{r.rsplit(',', 1)[0]},{i}\n" for i, r in enumerate(rows)))
    mix = stoker.Mix({"big": numbered, "small": str(small)}, weights={"big": 0.4, "small": 0.6},
                     samples_per_epoch=60, label_offset={"small": 1000})

    def make(**kw):
        return stoker.Loader(mix, batch_size=7, shuffle=True, seed=3, transforms=[stoker.RandomResizedCrop(12)], **kw)

    for rank in range(2):
        want = epoch_batches(make(rank=rank, world_size=2, threads=3), 2)
        replayer = make(rank=rank, world_size=2, threads=1)
        for index, batch in enumerate(want):
            assert_same(as_numpy(replayer.batch(2, index)), batch, f"rank {rank} batch {index}")
            p = replayer.batch_provenance(2, index)
            for s, label in zip(p["samples"], labels_of(batch)):
                assert s["source"] == ("small" if label >= 1000 else "big")
                assert s["source_record"] == label % 1000
                assert s["label"] == label


# ---------------------------------------------------------------- volumes

@pytest.fixture(scope="module")
def volumes(tmp_path_factory):
    """7 coordinate volumes of 12^3 (the record index in every voxel's offset) and labels with a cube each."""
    d = tmp_path_factory.mktemp("replay_vol")
    rows = []
    for i in range(7):
        img = V.write_npy(d / f"v{i}.npy", V.coord_volume((12, 12, 12), offset=2000 * i))
        lab = V.write_npy(d / f"l{i}.npy", V.phantom_label((12, 12, 12), [((i % 5, 2, 3), (i % 5 + 4, 8, 7))]))
        rows.append((img, lab))
    return V.write_list(d / "vol.csv", rows)


def test_volume_patches_rebuilt_and_their_plans_match_the_batch(volumes):
    tf = [stoker.RandCropByPosNegLabel((6, 6, 6), label_key="label", pos=1, neg=1, num_samples=2),
          stoker.RandFlip(prob=0.5, spatial_axis=[0]), stoker.RandRotate90(prob=0.5, max_k=3, spatial_axes=(1, 2))]

    def make(**kw):
        return stoker.Loader(volumes, batch_size=2, shuffle=True, seed=6, transforms=tf,
                             fields=[stoker.Volume("image"), stoker.LabelVolume("label")], **kw)

    for rank in range(2):
        want = epoch_batches(make(rank=rank, world_size=2, threads=3), 1)
        replayer = make(rank=rank, world_size=2, threads=1)
        turned = 0
        for index, batch in enumerate(want):
            assert_same(as_numpy(replayer.batch(1, index)), batch, f"rank {rank} batch {index}")
            p = replayer.batch_provenance(1, index)
            starts = dict(batch)["image_start"]
            patches = [q for s in p["samples"] for q in s["plan"]["patches"]]
            assert [s["plan"]["shape"] for s in p["samples"]] == [[12, 12, 12]] * len(p["samples"])
            assert len(patches) == len(starts)
            for q, start in zip(patches, starts):
                assert q["out_start"] == start.tolist() and q["size"] == [6, 6, 6]
                turned += sum(step["k"] for step in q["steps"])
            # The record: coord_volume's offset, 2000 per record, in the first voxel of the window's volume.
            records = [s["record"] for s in p["samples"] for _ in range(2)]
            firsts = dict(batch)["image"].reshape(len(starts), -1).min(axis=1)
            assert [int(v) // 2000 for v in firsts] == records
        assert turned > 0


# ---------------------------------------------------------------- resumed epochs and the CLI

def test_a_state_resumed_on_another_topology_replays_its_resumed_epoch(numbered):
    kw = dict(batch_size=4, shuffle=True, seed=12, transforms=[stoker.RandomResizedCrop(12)])
    first = stoker.Loader(numbered, rank=0, world_size=2, **kw)
    it = iter(first)
    next(it), next(it)
    state = first.state_dict()
    resumed = stoker.Loader(numbered, rank=0, world_size=3, threads=2, **kw)
    resumed.load_state_dict(state)
    replayer = stoker.Loader(numbered, rank=0, world_size=3, threads=1, **kw)
    replayer.load_state_dict(state)
    want = epoch_batches(resumed, state["epoch"])
    for index, batch in enumerate(want):
        assert_same(as_numpy(replayer.batch(state["epoch"], index)), batch, f"batch {index}")


@pytest.mark.skipif(not os.path.exists(CLI), reason="CLI not built")
def test_cli_replays_a_saved_state_and_saves_the_batch(numbered_shards, tmp_path):
    kw = dict(batch_size=5, shuffle=True, seed=21, rank=1, world_size=2, dtype="uint8",
              transforms=[stoker.RandomResizedCrop(16), stoker.RandomHorizontalFlip(), stoker.ColorJitter(0.3, 0.3)])
    loader = stoker.Loader(numbered_shards, **kw)
    loader.set_epoch(4)
    it = iter(loader)
    next(it), next(it)
    loader.save_replay(tmp_path / "replay.json")
    want = as_numpy(next(it))  # batch 2: the one a resumed run hands out next
    out = subprocess.run([CLI, "replay", str(tmp_path / "replay.json"), "--out", str(tmp_path / "b.npz"), "--json"],
                         check=True, capture_output=True, text=True).stdout
    p = json.loads(out)
    assert (p["epoch"], p["batch"], p["rank"]) == (4, 2, 1)
    assert [s["label"] for s in p["samples"]] == labels_of(want)  # .cls: the record's index in the list packed
    assert all(s["key"].startswith("n-") and ".tar:" in s["key"] and 0 <= s["shard"] < 4 for s in p["samples"])
    assert p["samples"] == loader.batch_provenance(4, 2)["samples"]
    saved = np.load(tmp_path / "b.npz")
    assert sorted(saved.files) == ["image", "label"]
    np.testing.assert_array_equal(saved["image"], dict(want)[0])
    np.testing.assert_array_equal(saved["label"], dict(want)[1])
    # A bare state with --options, another batch by --epoch/--batch, the human-readable form.
    (tmp_path / "state.json").write_text(json.dumps(loader.state_dict()))
    text = subprocess.run([CLI, "replay", str(tmp_path / "state.json"), "--options", str(tmp_path / "replay.json"),
                           "--epoch", "4", "--batch", "0"], check=True, capture_output=True, text=True).stdout
    first = loader.batch_provenance(4, 0)["samples"][0]
    assert "epoch 4, batch 0 of rank 1 of 2" in text and f"'{first['key']}' label {first['label']}" in text
    bad = subprocess.run([CLI, "replay", str(tmp_path / "state.json")], capture_output=True, text=True)
    assert bad.returncode != 0 and "--options" in bad.stderr


def test_a_replay_mid_epoch_moves_neither_the_iteration_nor_its_stats(numbered):
    kw = dict(batch_size=4, shuffle=True, seed=30, transforms=[stoker.RandomResizedCrop(12)], threads=2)
    want = epoch_batches(stoker.Loader(numbered, **kw), 0)
    loader = stoker.Loader(numbered, **kw)
    loader.set_epoch(0)
    got = []
    for index, batch in enumerate(loader):
        got.append(as_numpy(batch))
        if index == 3:
            assert_same(as_numpy(loader.batch(0, 7)), want[7], "batch 7, made while the epoch runs")
            assert loader.state_dict()["batches_done"] == 4
    for index, (a, b) in enumerate(zip(got, want)):
        assert_same(a, b, f"batch {index}")
    assert len(got) == len(want) and loader.stats()["batches"] == len(want)


@pytest.mark.parametrize("cache", ["ram", "decoded"])
def test_cached_epochs_replay_and_decoded_plans_name_the_stored_frame(numbered, cache):
    """cache="decoded" keeps images with the shorter side at most cache_max_side: plans are drawn on that frame."""
    kw = dict(batch_size=6, shuffle=True, seed=13, cache=cache, cache_max_side=24, dtype="uint8",
              transforms=[stoker.RandomResizedCrop(16), stoker.RandomHorizontalFlip()])
    cached = stoker.Loader(numbered, threads=3, **kw)
    epoch_batches(cached, 0)  # fills the cache
    want = epoch_batches(cached, 1)
    replayer = stoker.Loader(numbered, threads=1, **kw)  # an empty cache
    stored = 0
    for index, batch in enumerate(want):
        assert_same(as_numpy(replayer.batch(1, index)), batch, f"{cache}: batch {index}")
        assert_same(as_numpy(cached.batch(1, index)), batch, f"{cache}: batch {index} from the filled cache")
        for s in replayer.batch_provenance(1, index)["samples"]:
            plan = s["plan"]
            w, h = plan.get("stored", [plan["width"], plan["height"]])
            if "stored" in plan:
                stored += 1
                assert cache == "decoded" and min(w, h) == 24 and min(plan["width"], plan["height"]) > 24
            x, y, cw, ch = plan["plan"]["steps"][0]["crop"]
            assert 0 <= x and x + cw <= w and 0 <= y and y + ch <= h
    assert (stored > 0) == (cache == "decoded")
