"""Multi-crop views (Loader(views={name: (count, [transforms])})) against references.

Every copy of every view equals torchvision 0.14's functional ops on the PIL
image with that copy's draws (from _testing.plan(view=, copy=)): exact in
uint8. The first view's first copy equals a Loader with those transforms
(float32, exact). One read and one decode per sample: the views are cut from
the decode of the union of their regions, so none of this may differ from
decoding the whole image for each copy. Resume, thread counts and the caches
give the same batches.
"""
import json

import numpy as np
import pytest
import torch
import torchvision.transforms.functional as F
from PIL import Image as PILImage
from torchvision.transforms import InterpolationMode

import stoker
from stoker._stoker import _testing
from test_fields import apply_plan

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
SEED = 13


def dino_views(normalize=True):
    tail = [stoker.Normalize(MEAN, STD)] if normalize else []
    return {
        "global": (2, [stoker.RandomResizedCrop(64, scale=(0.4, 1.0)), stoker.RandomHorizontalFlip()] + tail),
        "local": (3, [stoker.RandomResizedCrop(24, scale=(0.05, 0.4)), stoker.RandomHorizontalFlip()] + tail),
        # a resize first (reads the whole image) and a padded centre crop
        "whole": (1, [stoker.Resize(30), stoker.CenterCrop((40, 36)), stoker.RandomVerticalFlip()] + tail),
    }


def test_views_batch_layout_and_first_copy_equals_a_plain_loader(photos):
    views = dino_views()
    loader = stoker.Loader(photos, batch_size=6, seed=SEED, threads=2, views=views)
    batch = next(iter(loader))
    assert list(batch) == ["global", "local", "whole", "label"]
    assert tuple(batch["global"].shape) == (6, 2, 3, 64, 64) and batch["global"].dtype == torch.float32
    assert tuple(batch["local"].shape) == (6, 3, 3, 24, 24)
    assert tuple(batch["whole"].shape) == (6, 1, 3, 40, 36)
    plain = stoker.Loader(photos, batch_size=6, seed=SEED, threads=2, transforms=views["global"][1])
    images, labels = next(iter(plain))
    assert torch.equal(batch["global"][:, 0], images) and torch.equal(batch["label"], labels)
    assert not torch.equal(batch["global"][:, 1], images), "the second copy draws its own crop"
    nhwc = next(iter(stoker.Loader(photos, batch_size=6, seed=SEED, threads=2, views=views, layout="NHWC")))
    assert torch.equal(nhwc["local"], batch["local"].permute(0, 1, 3, 4, 2))


def test_every_copy_of_every_view_equals_torchvision_with_its_draws(photos, photo_files):
    views = dino_views(normalize=False)
    loader = stoker.Loader(photos, batch_size=8, seed=SEED, threads=2, views=views, dtype="uint8")
    loader.set_epoch(3)
    index = 0
    for batch in loader:
        for i in range(len(batch["label"])):
            pil = PILImage.open(photo_files[index]).convert("RGB")
            for v, (name, (count, tf)) in enumerate(views.items()):
                for c in range(count):
                    plan = _testing.plan(tf, SEED, 3, index, *pil.size, geometric=True, view=v, copy=c)
                    want = np.array(apply_plan(pil, plan, InterpolationMode.BILINEAR)).transpose(2, 0, 1)
                    np.testing.assert_array_equal(batch[name][i, c].numpy(), want,
                                                  err_msg=f"record {index} view {name} copy {c}")
            index += 1
    assert index == len(photo_files)


def test_views_do_not_depend_on_threads_and_resume_exactly(photos):
    def make(**kw):
        return stoker.Loader(photos, batch_size=4, shuffle=True, seed=SEED, views=dino_views(), **kw)

    def epoch(loader):
        loader.set_epoch(1)
        return [{k: v.clone() for k, v in b.items()} for b in loader]

    one, two = epoch(make(threads=1)), epoch(make(threads=2))
    assert len(one) == 6
    for a, b in zip(one, two):
        assert all(torch.equal(a[k], b[k]) for k in a)
    a = make(threads=2)
    a.set_epoch(1)
    it = iter(a)
    next(it), next(it)
    state = json.loads(json.dumps(a.state_dict()))
    b = make(threads=2, prefetch=3)
    b.load_state_dict(state)
    rest = [{k: v.clone() for k, v in x.items()} for x in b]
    assert len(rest) == 4
    for x, y in zip(rest, one[2:]):
        assert all(torch.equal(x[k], y[k]) for k in y)


@pytest.mark.parametrize("cache", ["ram", "decoded"])
def test_views_with_caches_hit_or_miss_give_the_same_batches(photos, cache):
    kw = dict(batch_size=8, seed=SEED, threads=2, views=dino_views())
    loader = stoker.Loader(photos, cache=cache, preload=False, **kw)

    def epoch0():
        loader.set_epoch(0)
        return [{k: v.clone() for k, v in b.items()} for b in loader]

    first, second = epoch0(), epoch0()  # misses, then hits
    for a, b in zip(first, second):
        assert all(torch.equal(a[k], b[k]) for k in a)
    if cache == "ram":  # the bytes are the file's: the same batches as reading the files
        plain = [{k: v.clone() for k, v in b.items()} for b in stoker.Loader(photos, **kw)]
        for a, b in zip(first, plain):
            assert all(torch.equal(a[k], b[k]) for k in a)
    assert loader.stats()["cache_hits"] > 0


def test_views_with_fields_and_bad_arguments(photos, tmp_path):
    views = dino_views()
    batch = next(iter(stoker.Loader(photos, batch_size=2, views=views,
                                    fields=[stoker.Image(), stoker.Label("target")])))
    assert list(batch) == ["global", "local", "whole", "target"]
    with pytest.raises(ValueError, match="pass transforms=\\[\\]"):
        stoker.Loader(photos, views=views, transforms=[stoker.CenterCrop(8)])
    with pytest.raises(ValueError, match="field 'm' \\(mask\\) follows one geometry"):
        stoker.Loader(photos, views=views, fields=[stoker.Image(), stoker.Mask("m")])
    with pytest.raises(ValueError, match="the name 'label' is used twice"):
        stoker.Loader(photos, views={"label": (1, [stoker.CenterCrop(8)])})
    with pytest.raises(ValueError, match="count must be in \\[1, 64\\], got 0"):
        stoker.Loader(photos, views={"v": (0, [stoker.CenterCrop(8)])})
    with pytest.raises(ValueError, match="view 'v': transforms must give every sample the same size"):
        stoker.Loader(photos, views={"v": (1, [stoker.Resize(8)])})
    with pytest.raises(ValueError, match="batch_transforms"):
        stoker.Loader(photos, views=views, batch_transforms=[stoker.MixUp(num_classes=4)])
    with pytest.raises(ValueError, match="non-empty dict"):
        stoker.Loader(photos, views=[("v", 1, [])])
    with pytest.raises(ValueError, match="not a stoker transform"):
        stoker.Loader(photos, views={"v": (1, ["crop"])})


def test_two_ranks_with_views_cover_the_epoch_of_one_loader(photos):
    kw = dict(batch_size=3, shuffle=True, seed=SEED, threads=2, views=dino_views(),
              fields=[stoker.Image(), stoker.Label("label")])
    # Labels are classes here, not record ids: samples are keyed by their first view's bytes.
    def samples(loader):
        out = []
        for b in loader:
            for i in range(len(b["label"])):
                out.append({k: v[i].clone() for k, v in b.items()})
        return out

    single = samples(stoker.Loader(photos, **kw))
    keyed = {s["global"].numpy().tobytes(): s for s in single}
    assert len(keyed) == len(single) == 24
    seen = 0
    for rank in (0, 1):
        for s in samples(stoker.Loader(photos, rank=rank, world_size=2, **kw)):
            want = keyed[s["global"].numpy().tobytes()]
            assert all(torch.equal(s[k], want[k]) for k in want)
            seen += 1
    assert seen == 24
