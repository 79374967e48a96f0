"""The Loader's behaviour: order, sharding, determinism, corruption, lifetime."""
import time
import gc
import os
import subprocess
import sys
import threading

import numpy as np
import pytest
import torch
from PIL import Image

import stoker

SMALL = [stoker.Resize((16, 16))]


def ids(loader):
    """Sample ids of one epoch (the numbered fixture's labels are record indices)."""
    return [int(v) for _, y in loader for v in y]


def batches(loader):
    return [(x.clone(), y.clone()) for x, y in loader]


def test_len_and_shapes(numbered):
    loader = stoker.Loader(numbered, batch_size=8, transforms=SMALL)
    assert len(loader) == 5 and loader.num_samples == 37 and loader.dataset_size == 37
    got = batches(loader)
    assert [len(y) for _, y in got] == [8, 8, 8, 8, 5]
    assert got[0][0].shape == (8, 3, 16, 16) and got[0][0].dtype == torch.float32
    assert ids(loader) == list(range(37))


@pytest.mark.parametrize("drop_last", [False, True])
def test_epochs_are_permutations_and_differ(numbered, drop_last):
    loader = stoker.Loader(numbered, batch_size=5, shuffle=True, seed=1, transforms=SMALL, drop_last=drop_last)
    epochs = []
    for e in range(3):
        loader.set_epoch(e)
        got = ids(loader)
        if drop_last:
            assert len(got) == 35 and len(set(got)) == 35
        else:
            assert sorted(got) == list(range(37))
        epochs.append(got)
    assert epochs[0] != epochs[1] != epochs[2]
    loader.set_epoch(1)
    assert ids(loader) == epochs[1]  # an epoch is a function of (seed, epoch)


def test_epoch_advances_without_set_epoch(numbered):
    loader = stoker.Loader(numbered, batch_size=10, shuffle=True, transforms=SMALL)
    a, b = ids(loader), ids(loader)
    assert a != b and sorted(a) == sorted(b)
    assert loader.epoch == 2


@pytest.mark.parametrize("world", [1, 2, 3])
@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("batch_size", [1, 4, 64])
def test_ranks_cover_epoch_once(numbered, world, drop_last, batch_size):
    per_rank = []
    for r in range(world):
        loader = stoker.Loader(numbered, batch_size=batch_size, shuffle=True, seed=3, drop_last=drop_last,
                               rank=r, world_size=world, transforms=SMALL)
        loader.set_epoch(2)
        per_rank.append((len(loader), ids(loader)))
    lens = {n for n, _ in per_rank}
    assert len(lens) == 1, "every rank yields the same number of batches"
    assert len({len(i) for _, i in per_rank}) == 1, "and the same number of samples"
    all_ids = [i for _, got in per_rank for i in got]
    if drop_last:
        assert len(all_ids) == len(set(all_ids)), "no sample twice"
        assert len(all_ids) >= 37 - world * batch_size
    else:
        assert set(all_ids) == set(range(37)), "every sample delivered"
        padding = len(all_ids) - 37
        assert 0 <= padding < world, "only DistributedSampler's padding repeats samples"


def test_rank_defaults_from_environment(numbered, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    loader = stoker.Loader(numbered, batch_size=4, transforms=SMALL)
    assert (loader.rank, loader.world_size) == (1, 2)
    assert ids(loader) == list(range(1, 37, 2)) + [0]


def test_same_seed_same_batches_whatever_the_thread_count(photos):
    tf = [stoker.RandomResizedCrop(64), stoker.RandomHorizontalFlip()]
    runs = []
    for threads in (1, 2, 3):
        loader = stoker.Loader(photos, batch_size=7, shuffle=True, seed=11, transforms=tf, threads=threads)
        loader.set_epoch(4)
        runs.append(batches(loader))
    for other in runs[1:]:
        assert len(other) == len(runs[0])
        for (x0, y0), (x1, y1) in zip(runs[0], other):
            assert torch.equal(x0, x1) and torch.equal(y0, y1)


def test_held_batch_is_never_overwritten(photos):
    loader = stoker.Loader(photos, batch_size=3, shuffle=True, transforms=[stoker.RandomResizedCrop(32)],
                           threads=2, prefetch=2)
    it = iter(loader)
    held_x, held_y = next(it)
    copy_x, copy_y = held_x.clone(), held_y.clone()
    rest = list(it)  # keeps every batch too: the ring must grow, not block or reuse
    assert len(rest) == len(loader) - 1
    assert torch.equal(held_x, copy_x) and torch.equal(held_y, copy_y)
    assert loader.stats()["batch_buffers"] >= len(loader)
    del rest, it
    # Iterating again after dropping the batches reuses buffers.
    before = loader.stats()["batch_buffers"]
    for _ in loader:
        pass
    assert loader.stats()["batch_buffers"] == before
    assert torch.equal(held_x, copy_x)


def test_batch_outlives_loader(photos):
    loader = stoker.Loader(photos, batch_size=4, transforms=[stoker.CenterCrop(32)])
    x, y = next(iter(loader))
    copy = x.clone()
    del loader
    gc.collect()
    assert torch.equal(x, copy)


def test_numpy_output_and_uint8_nhwc(photos):
    loader = stoker.Loader(photos, batch_size=4, transforms=[stoker.CenterCrop(32)], output="numpy",
                           dtype="uint8", layout="NHWC")
    x, y = next(iter(loader))
    assert isinstance(x, np.ndarray) and x.shape == (4, 32, 32, 3) and x.dtype == np.uint8
    assert y.dtype == np.int64


def test_batch_larger_than_dataset(numbered):
    loader = stoker.Loader(numbered, batch_size=100, transforms=SMALL)
    assert len(loader) == 1 and ids(loader) == list(range(37))
    loader = stoker.Loader(numbered, batch_size=100, transforms=SMALL, drop_last=True)
    assert len(loader) == 0 and ids(loader) == []


def test_one_pixel_image(tmp_path, make_numbered):
    p = str(tmp_path / "one.png")
    Image.new("RGB", (1, 1), (255, 0, 0)).save(p)
    loader = stoker.Loader(make_numbered([p]), batch_size=1, transforms=[stoker.RandomResizedCrop(8)])
    x, _ = next(iter(loader))
    assert torch.allclose(x[0, 0], torch.ones(8, 8)) and torch.allclose(x[0, 1], torch.zeros(8, 8))


@pytest.fixture()
def damaged(tmp_path, numbered, make_numbered):
    """A list of 10 good files with three damaged ones at positions 2, 5 and 8."""
    good = [line.split(",")[0] for line in open(numbered).read().splitlines()[1:11]]
    data = open(good[0], "rb").read()
    truncated = tmp_path / "truncated.jpg"
    truncated.write_bytes(data[: len(data) // 2])
    empty = tmp_path / "empty.jpg"
    empty.write_bytes(b"")
    text = tmp_path / "text.jpg"
    text.write_text("this is not an image\n")
    files = good[:2] + [str(truncated)] + good[2:4] + [str(empty)] + good[4:6] + [str(text)] + good[6:]
    return make_numbered(files), {2: "truncated.jpg", 5: "empty.jpg", 8: "text.jpg"}


def test_corrupt_samples_skipped_and_counted(damaged):
    path, bad = damaged
    loader = stoker.Loader(path, batch_size=4, transforms=SMALL, on_corrupt="skip")
    got = batches(loader)
    assert [len(y) for _, y in got] == [4, 4, 4, 1], "batches stay full"
    delivered = [int(v) for _, y in got for v in y]
    assert not set(delivered) & set(bad), "no corrupt sample delivered"
    # The next sample of the epoch takes a corrupt one's place.
    assert delivered == [0, 1, 3, 3, 4, 6, 6, 7, 9, 9, 10, 11, 12]
    s = loader.stats()
    assert s["corrupt"] == 3
    assert s["corrupt_by_reason"] == {"corrupt": 2, "unsupported": 1}
    text = "\n".join(s["corrupt_examples"])
    for name in bad.values():
        assert name in text
    assert "truncated" in text and "empty file" in text and "not a JPEG, PNG, .npy, WebP, TIFF, BMP or GIF" in text


def test_corrupt_samples_raised_in_order(damaged):
    path, bad = damaged
    loader = stoker.Loader(path, batch_size=4, transforms=SMALL, on_corrupt="raise")
    it = iter(loader)
    seen, errors = [], []
    while True:
        try:
            _, y = next(it)
            seen.append([int(v) for v in y])
        except stoker.SampleError as e:
            errors.append(str(e))
            continue
        except StopIteration:
            break
    assert seen == [[12]], "batches 0-2 each hold a corrupt sample"
    assert len(errors) == 3
    assert "truncated.jpg" in errors[0] and "truncated" in errors[0]
    assert "empty.jpg" in errors[1] and "text.jpg" in errors[2]
    assert loader.stats()["corrupt"] == 3


def test_missing_file_is_counted_as_not_found(tmp_path, numbered, make_numbered):
    good = open(numbered).read().splitlines()[1].split(",")[0]
    loader = stoker.Loader(make_numbered([good, str(tmp_path / "gone.jpg")]), batch_size=2, transforms=SMALL)
    assert ids(loader) == [0, 0]
    assert loader.stats()["corrupt_by_reason"] == {"not_found": 1}


def worker_threads():
    """This process's stoker worker threads: {tid: name} (other threads come and go)."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read().strip()
        except FileNotFoundError:  # the thread ended while listed
            continue
        if name.startswith("stoker-w"):
            out[int(tid)] = name
    return out


def test_destroy_mid_epoch_releases_threads(photos):
    # NOTE: by thread id, not by count: threads of earlier tests' loaders may
    # still be leaving /proc/self/task (pthread_join returns once the kernel
    # clears the thread's tid, slightly before that), or be collected meanwhile.
    for _ in range(5):
        before = set(worker_threads())
        loader = stoker.Loader(photos, batch_size=2, shuffle=True, transforms=[stoker.RandomResizedCrop(64)],
                               threads=3)
        it = iter(loader)
        next(it)
        now = worker_threads()
        mine = {t: n for t, n in now.items() if t not in before}
        assert sorted(mine.values()) == ["stoker-w0", "stoker-w1", "stoker-w2"]
        del it, loader
        gc.collect()
        deadline = time.monotonic() + 5  # bounded poll for the kernel to drop the joined threads
        while set(mine) & set(worker_threads()) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not set(mine) & set(worker_threads()), "worker threads still alive after the loader was destroyed"


def test_abandoned_iteration_restarts_cleanly(numbered):
    loader = stoker.Loader(numbered, batch_size=4, transforms=SMALL, threads=2)
    it = iter(loader)
    next(it), next(it)
    loader.set_epoch(0)
    assert ids(loader) == list(range(37))


def test_destroy_mid_epoch_does_not_hang():
    """In a child process, so that a hang fails the test instead of the suite."""
    code = (
        "import stoker, sys\n"
        "l = stoker.Loader(sys.argv[1], batch_size=64, transforms=[stoker.CenterCrop(8)], threads=2)\n"
        "it = iter(l); next(it)\n"
        "del it, l\n"
        "l = stoker.Loader(sys.argv[1], batch_size=1, transforms=[stoker.CenterCrop(8)], threads=2)\n"
        "it = iter(l); next(it)\n"  # exits with a live loader mid-epoch
    )
    root = os.path.join(os.path.dirname(__file__), "..", "..", "python")
    env = dict(os.environ, PYTHONPATH=root)
    subprocess.run([sys.executable, "-c", code, _tiny_folder()], env=env, check=True, timeout=120)


def _tiny_folder():
    import tempfile
    d = tempfile.mkdtemp(prefix="stoker-test-")
    os.makedirs(os.path.join(d, "a"))
    for i in range(200):
        Image.new("RGB", (20, 20), (i, 0, 0)).save(os.path.join(d, "a", f"{i}.png"))
    return d


def test_consumer_on_another_thread(numbered):
    out = []
    loader = stoker.Loader(numbered, batch_size=8, transforms=SMALL)
    t = threading.Thread(target=lambda: out.extend(ids(loader)))
    t.start()
    t.join(120)
    assert out == list(range(37))


def test_bad_arguments_raise_value_error(numbered):
    with pytest.raises(ValueError, match="batch_size"):
        stoker.Loader(numbered, batch_size=0, transforms=SMALL)
    with pytest.raises(ValueError, match="rank"):
        stoker.Loader(numbered, rank=2, world_size=2, transforms=SMALL)
    with pytest.raises(ValueError, match="on_corrupt"):
        stoker.Loader(numbered, on_corrupt="ignore", transforms=SMALL)
    with pytest.raises(ValueError, match="dtype"):
        stoker.Loader(numbered, dtype="float16", transforms=SMALL)
    with pytest.raises(ValueError, match="layout"):
        stoker.Loader(numbered, layout="CHW", transforms=SMALL)
    with pytest.raises(ValueError, match="threads"):
        stoker.Loader(numbered, threads=-1, transforms=SMALL)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        stoker.Loader("/nonexistent/folder", transforms=SMALL)


@pytest.mark.parametrize("kwargs, message", [
    (dict(batch_size=2.5), "batch_size must be an integer, got 2.5"),
    (dict(batch_size="8"), 'batch_size must be an integer, got "8"'),
    (dict(batch_size=True), "batch_size must be an integer, got true"),
    (dict(batch_size=0), "batch_size must be > 0, got 0"),
    (dict(seed=-1), "seed must be a non-negative integer, got -1"),
    (dict(cache="disk"), "cache must be one of 'mmap', 'ram', 'decoded', 'auto', got 'disk'"),
    (dict(max_consecutive_corrupt=0), "max_consecutive_corrupt must be >= 1, got 0"),
    (dict(cache_max_side=None), "cache_max_side must be an integer, got null"),
    (dict(labels=3), "labels must be a string, got 3"),
])
def test_option_errors_name_the_option_before_reading_anything(kwargs, message):
    """Checked once, in C++ (the codec the doctor's snapshot uses too), before the source is opened."""
    with pytest.raises(ValueError) as e:
        stoker.Loader("/nonexistent/folder", transforms=SMALL, **kwargs)
    assert str(e.value) == message


def test_numpy_integers_are_integers(numbered):
    loader = stoker.Loader(numbered, batch_size=np.int64(8), seed=np.uint32(3), transforms=SMALL)
    assert len(loader) == 5


def test_max_consecutive_corrupt_is_settable(make_numbered, numbered, tmp_path):
    """Two corrupt files in a row: the default tolerates them; max_consecutive_corrupt=2 gives up on that place."""
    files = [line.split(",")[0] for line in open(numbered).read().splitlines()[1:9]]
    for i in (2, 3):
        bad = tmp_path / f"bad{i}.jpg"
        bad.write_bytes(b"not a jpeg")
        files[i] = str(bad)
    lst = make_numbered(files)
    assert len(ids(stoker.Loader(lst, batch_size=4, transforms=SMALL))) == 8
    loader = stoker.Loader(lst, batch_size=4, transforms=SMALL, max_consecutive_corrupt=2)
    with pytest.raises(stoker.SampleError, match="gave up after 2 consecutive corrupt samples"):
        ids(loader)


def test_empty_folder_raises(tmp_path):
    (tmp_path / "cls").mkdir()
    with pytest.raises(FileNotFoundError, match="no image files"):
        stoker.Loader(str(tmp_path), transforms=SMALL)


def test_stats_report_stages(photos):
    loader = stoker.Loader(photos, batch_size=8, transforms=[stoker.RandomResizedCrop(32)])
    n = len(ids(loader))
    s = loader.stats()
    assert s["samples"] == n and s["batches"] == len(loader)
    assert s["decode_s"] > 0 and s["transform_s"] > 0 and s["read_s"] > 0
    assert s["bytes_read"] == sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(photos) for f in fs
                                  if f.endswith(".jpg"))
    assert 0 <= s["time_to_first_batch_s"] <= s["wall_s"]


def test_device_options_on_a_cpu_only_machine(numbered):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: covered by the device check")
    with pytest.raises(ValueError, match="needs CUDA"):
        stoker.Loader(numbered, transforms=SMALL, device="cuda")
    with pytest.raises(ValueError, match="needs CUDA"):
        stoker.Loader(numbered, transforms=SMALL, pin_memory=True)
    with pytest.raises(ValueError, match="device must be"):
        stoker.Loader(numbered, transforms=SMALL, device="tpu")
    loader = stoker.Loader(numbered, batch_size=8, transforms=SMALL, device="cpu")
    assert ids(loader) == list(range(37))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_cuda_device_batches_equal_cpu_batches(numbered):
    cpu = batches(stoker.Loader(numbered, batch_size=8, transforms=SMALL))
    gpu = [(x.cpu(), y.cpu()) for x, y in stoker.Loader(numbered, batch_size=8, transforms=SMALL, device="cuda")]
    assert all(torch.equal(a, c) and torch.equal(b, d) for (a, b), (c, d) in zip(cpu, gpu))
    pinned = [(x, y) for x, y in stoker.Loader(numbered, batch_size=8, transforms=SMALL, pin_memory=True)]
    assert all(x.is_pinned() for x, _ in pinned)
