"""cache="ram" keeps JPEGs in the random-access form: the lossless rewrite
(the same coefficients, restart markers on the loader's grid) never changes a
batch, counts a corrupt JPEG as before and never keeps it, holds the budget
with the rewritten sizes, and leaves other formats as they are. The
reference is the same loader with cache="mmap" (every epoch decodes the
original file)."""
import os
import shutil
import time

import numpy as np
import pytest
from PIL import Image

import stoker
from memory_checks import scratch_reserved


def run_until_rewritten(loader, max_epochs=1000, max_s=120):
    """Epochs until every cached record is settled (bounded in count and time).

    NOTE: the second epoch rewrites every record it reads before decoding
    it, so two epochs that read every record finish it whatever the load;
    the rest (records a rank does not read) go by the preload threads
    (SCHED_IDLE: no CPU on a busy machine) and the workers' 9% share."""
    start = time.monotonic()
    for e in range(max_epochs):
        loader.set_epoch(100 + e)
        for _ in loader:
            pass
        if loader.stats()["cache_rewrite"] == "done" or time.monotonic() - start > max_s:
            break
        time.sleep(0.05)  # idle CPU: where the preload threads rewrite (the workers only within their 9%)
    return loader.stats()


def epoch(loader, e):
    loader.set_epoch(e)
    return [(x.copy(), y.copy()) for x, y in loader]


def assert_same(a, b):
    assert len(a) == len(b)
    for (xa, ya), (xb, yb) in zip(a, b):
        np.testing.assert_array_equal(ya, yb)
        np.testing.assert_array_equal(xa, xb)


MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
PIPELINES = {
    "rrc-flip-normalize": [stoker.RandomResizedCrop(48), stoker.RandomHorizontalFlip(), stoker.Normalize(MEAN, STD)],
    "resize-centercrop": [stoker.Resize(40), stoker.CenterCrop(32)],
    "vflip-gray-rrc": [stoker.RandomResizedCrop((24, 40), scale=(0.05, 0.5)), stoker.RandomVerticalFlip(),
                       stoker.RandomGrayscale(0.5)],
}


@pytest.mark.parametrize("kind", ["folder", "shards"])
@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_rewritten_cache_gives_the_batches_of_the_original_files(request, kind, name):
    source = request.getfixturevalue("photos" if kind == "folder" else "numbered_shards")
    for seed, scale in ((0, "exact"), (7, "auto")):
        kw = dict(batch_size=5, shuffle=True, seed=seed, transforms=PIPELINES[name], output="numpy",
                  decode_scale=scale, threads=2)
        ram = stoker.Loader(source, cache="ram", **kw)
        before = epoch(ram, 3)
        st = run_until_rewritten(ram)
        assert st["cache_rewrite"] == "done", st
        assert st["cache_rewritten"] == ram.dataset_size, "every record is a JPEG without restart markers"
        assert 0 < st["cache_rewrite_bytes_after"] and st["cache_rewrite_cpu_s"] > 0
        ref = stoker.Loader(source, cache="mmap", **kw)
        for e in (3, 4):
            assert_same(epoch(ram, e), epoch(ref, e))
        assert_same(before, epoch(ref, 3))
        assert ram.stats()["cache_hits"] > 0
        off = stoker.Loader(source, cache="ram", cache_rewrite=False, **kw)
        st = run_until_rewritten(off, max_epochs=1)
        assert st["cache_rewrite"] == "off" and st["cache_rewritten"] == 0


def test_the_rewrite_reports_every_jpegs_bytes_before_and_after(photos, photo_files):
    """Bytes before are the files' sizes; after, a few percent more (the
    restart markers, and where one is replaced, the standard DC table)."""
    ram = stoker.Loader(photos, cache="ram", batch_size=8, transforms=[stoker.CenterCrop(16)], output="numpy")
    st = run_until_rewritten(ram)
    assert st["cache_rewrite"] == "done"
    total = sum(os.path.getsize(f) for f in photo_files)
    assert st["cache_rewrite_bytes_before"] == total
    assert total < st["cache_rewrite_bytes_after"] < total * 1.10


@pytest.mark.parametrize("preload", [False, True])
def test_the_rewrite_is_done_when_the_second_epoch_ends(photos, preload):
    """The first epoch rewrites what its allowance lets it; the second rewrites every record it reads before
    decoding it. Batches are the uncached loader's throughout."""
    kw = dict(batch_size=5, shuffle=True, seed=3, transforms=PIPELINES["rrc-flip-normalize"], output="numpy",
              threads=2)
    ram = stoker.Loader(photos, cache="ram", preload=preload, **kw)
    ref = stoker.Loader(photos, cache="mmap", **kw)
    for e in (0, 1):
        assert_same(epoch(ram, e), epoch(ref, e))
    st = ram.stats()
    # NOTE: with a preload, a record a preload thread (at SCHED_IDLE, maybe far behind on a busy machine) has
    # claimed is rewritten and stored by the second epoch's worker that reads it too, whoever stores it first:
    # nothing is left to wait for when the second epoch ends.
    assert st["cache_rewrite_settled"] == st["cache_rewritten"] == st["cache_records"] == ram.dataset_size, st
    assert 0 < st["cache_rewrite_on_read"] <= st["cache_rewritten"]
    assert st["cache_rewrite"] == "done"
    assert_same(epoch(ram, 2), epoch(ref, 2))


def test_corrupt_jpeg_is_counted_as_without_the_cache_and_never_kept(photo_files, make_numbered, tmp_path):
    files = list(photo_files[:10])
    bad = tmp_path / "bad.jpg"
    data = open(files[3], "rb").read()
    bad.write_bytes(data[: len(data) // 3])  # truncated: libjpeg cannot decode or rewrite it
    files[3] = str(bad)
    lst = make_numbered(files)
    kw = dict(batch_size=4, shuffle=True, seed=1, transforms=[stoker.CenterCrop(16)], output="numpy",
              on_corrupt="skip")
    ram = stoker.Loader(lst, cache="ram", **kw)
    st = run_until_rewritten(ram)
    assert st["cache_rewrite"] == "done" and st["cache_rewritten"] == 9
    assert st["cache_records"] == 9, "the corrupt record is not kept"
    ref = stoker.Loader(lst, cache="mmap", **kw)
    e_ram, e_ref = epoch(ram, 2), epoch(ref, 2)
    assert_same(e_ram, e_ref)
    # One count per use of the corrupt record, as without the cache.
    corrupt_before = ram.stats()["corrupt"]
    epoch(ram, 5)
    ref_before = ref.stats()["corrupt"]
    epoch(ref, 5)
    assert ram.stats()["corrupt"] - corrupt_before == ref.stats()["corrupt"] - ref_before == 1
    assert ram.stats()["cache_records"] == 9


def test_budget_holds_with_the_rewritten_sizes(photos, photo_files):
    total = sum(os.path.getsize(f) for f in photo_files)
    budget = total // 2
    kw = dict(cache="ram", batch_size=4, transforms=[stoker.CenterCrop(16)], output="numpy")
    # Beside the workers' decode scratch, reserved before the cache fills.
    ram = stoker.Loader(photos, memory_budget=budget + scratch_reserved(photos, **kw), **kw)
    for e in range(6):
        epoch(ram, e)
        st = ram.stats()
        assert st["cache_bytes"] + st["cache_holes_bytes"] <= budget, st
    st = run_until_rewritten(ram)
    assert st["cache_rewrite"] == "done" and 0 < st["cache_records"] < ram.dataset_size
    assert st["cache_bytes"] + st["cache_holes_bytes"] <= budget


def test_png_and_marked_jpegs_are_kept_as_they_are(photo_files, make_numbered, tmp_path):
    files = []
    for i, f in enumerate(photo_files[:6]):
        if i % 2:
            p = tmp_path / f"{i}.png"
            Image.open(f).save(p)
            files.append(str(p))
        else:
            files.append(f)
    lst = make_numbered(files)
    ram = stoker.Loader(lst, cache="ram", batch_size=3, transforms=[stoker.CenterCrop(16)], output="numpy")
    st = run_until_rewritten(ram)
    assert st["cache_rewrite"] == "done" and st["cache_rewritten"] == 3, "only the JPEGs"
    # Shards packed --lossless already have the grid: nothing to rewrite.
    cli = os.path.join(os.environ.get("STOKER_BUILD", "build"), "tools", "stoker")
    if not os.path.exists(cli):
        pytest.skip("CLI not built")
    import subprocess
    out = tmp_path / "lossless"
    out.mkdir()
    subprocess.run([cli, "pack", make_numbered(photo_files[:6]), str(out / "l-%d.tar"), "--lossless"], check=True,
                   capture_output=True)
    packed = stoker.Loader(str(out / "l-0.tar"), cache="ram", batch_size=3, transforms=[stoker.CenterCrop(16)],
                           output="numpy")
    st = run_until_rewritten(packed)
    assert st["cache_rewrite"] == "done" and st["cache_rewritten"] == 0 and st["cache_records"] == 6


def test_auto_picks_each_mode_from_the_sets_size_and_the_budget(photos, photo_files, capfd):
    """Three constructed situations on the same 24 photos: a budget the
    decoded set fits, one only the encoded set fits, one nothing fits. The
    estimates come from a sampled header pass; the budgets sit far from the
    boundaries (x4 / x0.25) so sampling error cannot flip them."""
    encoded = sum(os.path.getsize(f) for f in photo_files)
    short = max(min(Image.open(f).size) for f in photo_files)
    assert 200 < short, "with cache_max_side 200 (below) the images are downscaled"
    kw = dict(batch_size=4, transforms=[stoker.RandomResizedCrop(224)], output="numpy")
    decoded = stoker.Loader(photos, cache="auto", memory_budget=1 << 34, **kw)
    assert decoded.stats()["cache_mode"] == "decoded"
    assert decoded.stats()["cache_auto"].startswith('"decoded": the decoded set fits')
    assert ("so it is exact" if short <= 448 else "downscaled to cache_max_side 448") in decoded.stats()["cache_auto"]
    assert 'stoker: cache="auto" chose "decoded"' in capfd.readouterr().err
    ram = stoker.Loader(photos, cache="auto", memory_budget=encoded * 4, **kw)
    st = ram.stats()
    assert st["cache_mode"] == "ram" and "the decoded set does not fit" in st["cache_auto"]
    capfd.readouterr()
    mmap = stoker.Loader(photos, cache="auto", memory_budget=encoded // 4, progress=False, **kw)
    st = mmap.stats()
    assert st["cache_mode"] == "mmap" and st["cache_auto"].startswith('"mmap": not even the encoded set fits')
    assert "chose" not in capfd.readouterr().err, "progress=False: no line"
    # Quality: with cache_max_side 200 the images would be downscaled; a 224
    # output is more than half of it, so "ram" though the decoded set fits;
    # a 64 output is at most half, so "decoded".
    small = dict(kw, cache_max_side=200, memory_budget=1 << 34)
    big = stoker.Loader(photos, cache="auto", **small)
    assert big.stats()["cache_mode"] == "ram" and "(quality)" in big.stats()["cache_auto"]
    low = stoker.Loader(photos, cache="auto", **dict(small, transforms=[stoker.RandomResizedCrop(64)]))
    assert low.stats()["cache_mode"] == "decoded" and "downscaled to cache_max_side 200" in low.stats()["cache_auto"]
    # Whatever it picks, batches are those of the mode picked.
    ref = stoker.Loader(photos, cache="ram", memory_budget=encoded * 4, **kw)
    assert_same(epoch(ram, 0), epoch(ref, 0))
    assert_same(epoch(decoded, 1), epoch(stoker.Loader(photos, cache="decoded", **kw), 1))
