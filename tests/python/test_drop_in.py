"""The drop-in (issue 33): torchvision's datasets and transforms, torch's DataLoader API, Python where stoker
has no kernel. References: torch's DataLoader over torchvision's ImageFolder, run in the same test."""
import difflib
import gc
import os
import subprocess
import sys
import threading
import weakref

import numpy as np
import pytest
import torch
import torchvision.transforms as T
from torch.utils.data import DataLoader as TorchDataLoader
from torch.utils.data import DistributedSampler
from torchvision.datasets import ImageFolder as TVImageFolder

import stoker
from stoker.datasets import ImageFolder

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def eval_preset(size=64):
    return T.Compose([T.Resize(size + 8), T.CenterCrop(size), T.PILToTensor(), T.ConvertImageDtype(torch.float),
                      T.Normalize(MEAN, STD)])


def assert_batches_equal(ours, theirs):
    ours, theirs = list(ours), list(theirs)
    assert len(ours) == len(theirs)
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert type(a) is type(b), i
        if isinstance(a, torch.Tensor):
            assert a.dtype == b.dtype and a.shape == b.shape, (i, a.dtype, b.dtype, a.shape, b.shape)
            if a.dtype.is_floating_point:
                assert torch.allclose(a, b, rtol=0, atol=1e-6), (i, (a - b).abs().max())
            else:
                assert torch.equal(a, b), i
        elif isinstance(a, (list, tuple)):
            assert_batches_equal(a, b)
        elif isinstance(a, dict):
            assert a.keys() == b.keys()
            assert_batches_equal(list(a.values()), list(b.values()))
        else:
            assert a == b, i


def test_eval_pipeline_batches_equal_torch_dataloader_over_torchvision(photos):
    ours = stoker.DataLoader(ImageFolder(photos, eval_preset()), batch_size=5, num_workers=2)
    theirs = TorchDataLoader(TVImageFolder(photos, eval_preset()), batch_size=5, num_workers=2)
    assert len(ours) == len(theirs) == 5
    assert ours.loader._stage is None  # every transform mapped: stoker's zero-copy batches
    assert_batches_equal(list(ours), list(theirs))
    assert_batches_equal(list(ours), list(theirs))  # a second epoch (same order without shuffle)
    # The set is kept in RAM (cache="ram", the default), every JPEG rewritten by the end of the second epoch
    # (on read: the second epoch already decoded from the rewritten bytes); a third epoch, the same batches.
    s = ours.stats()
    assert s["cache_mode"] == "ram" and s["cache_preload"] == "off" and s["cache_records"] == len(ours.dataset)
    assert s["cache_rewrite"] == "done" and s["cache_rewritten"] == s["cache_rewrite_settled"] == len(ours.dataset)
    assert_batches_equal(list(ours), list(theirs))
    plain = stoker.DataLoader(ImageFolder(photos, eval_preset()), batch_size=5, num_workers=2, cache="mmap")
    assert_batches_equal(list(plain), list(theirs))
    assert plain.stats()["cache_mode"] == "mmap"
    with pytest.raises(ValueError, match="cache='decoded'"):
        stoker.DataLoader(ImageFolder(photos, eval_preset()), batch_size=5, cache="decoded")


def test_a_lambda_in_the_middle_equals_torchvision(photos):
    tf = T.Compose([T.Resize(72), T.Lambda(lambda im: im.rotate(11)), T.CenterCrop(64), T.ToTensor(),
                    T.Normalize(MEAN, STD)])
    ours = stoker.DataLoader(ImageFolder(photos, tf), batch_size=4, num_workers=2)
    theirs = TorchDataLoader(TVImageFolder(photos, tf), batch_size=4)
    assert_batches_equal(list(ours), list(theirs))
    s = ours.stats()
    assert s["python_s"] > 0
    assert s["python_transforms"][0]["transform"].startswith("Lambda")
    assert len(s["python_transforms"]) == 4  # the Lambda and the three after it


def test_the_python_tail_gets_what_torchvision_would_hand_it(photos):
    from PIL import Image
    seen = []

    def check(kind):
        def f(x):
            seen.append((kind, type(x).__name__, x.dtype if isinstance(x, torch.Tensor) else None,
                         x.mode if isinstance(x, Image.Image) else None))
            return x
        return f

    tf = [T.Resize(40), T.CenterCrop(32), T.Lambda(check("pil")), T.PILToTensor(), T.Lambda(check("uint8")),
          T.ConvertImageDtype(torch.float), T.Lambda(check("float"))]
    loader = stoker.Loader(photos, batch_size=8, transforms=tf, threads=2)
    images, labels = next(iter(loader))
    assert images.dtype == torch.float32 and images.shape == (8, 3, 32, 32) and labels.dtype == torch.int64
    kinds = {k: (n, d, m) for k, n, d, m in seen}
    assert kinds["pil"] == (Image.Image.__name__, None, "RGB")
    assert kinds["uint8"] == ("Tensor", torch.uint8, None)
    assert kinds["float"] == ("Tensor", torch.float32, None)
    ref = TorchDataLoader(TVImageFolder(photos, T.Compose(tf)), batch_size=8)
    assert_batches_equal([images, labels], next(iter(ref)))


def test_a_py_transform_after_stokers_own_gets_their_tensor(photos):
    loader = stoker.Loader(photos, batch_size=6, threads=2,
                           transforms=[stoker.Resize((32, 32)), stoker.Normalize(MEAN, STD),
                                       stoker.PyTransform(lambda t: t * 2, name="double")])
    plain = stoker.Loader(photos, batch_size=6, threads=2,
                          transforms=[stoker.Resize((32, 32)), stoker.Normalize(MEAN, STD)])
    for (a, y), (b, z) in zip(loader, plain):
        assert torch.equal(a, b * 2) and torch.equal(y, z)
    with pytest.raises(ValueError, match="stoker's own transforms run before any Python one"):
        stoker.Loader(photos, transforms=[stoker.PyTransform(lambda t: t), stoker.Resize((32, 32))])


def test_target_transform_and_a_custom_collate_run_as_torch_runs_them(photos):
    def collate(items):
        return {"x": torch.stack([x for x, _ in items]), "names": [t for _, t in items]}

    tt = lambda t: f"class-{t}"  # noqa: E731
    ours = stoker.DataLoader(ImageFolder(photos, eval_preset(), target_transform=tt), batch_size=7,
                             num_workers=2, collate_fn=collate)
    theirs = TorchDataLoader(TVImageFolder(photos, eval_preset(), target_transform=tt), batch_size=7,
                             collate_fn=collate)
    a, b = list(ours), list(theirs)
    assert [x["names"] for x in a] == [x["names"] for x in b]
    assert_batches_equal([x["x"] for x in a], [x["x"] for x in b])


def test_batch_transform_runs_on_a_loader_thread(photos):
    threads = set()

    def bt(batch):
        threads.add(threading.current_thread().name)
        images, labels = batch
        return images.flip(0), labels.flip(0)

    loader = stoker.Loader(photos, batch_size=6, threads=2, transforms=eval_preset(), batch_transform=bt)
    plain = stoker.Loader(photos, batch_size=6, threads=2, transforms=eval_preset())
    for (a, y), (b, z) in zip(loader, plain):
        assert torch.equal(a, b.flip(0)) and torch.equal(y, z.flip(0))
    assert threads and threading.current_thread().name not in threads


def test_dataset_and_loader_attributes_are_torchs(photos):
    ds = ImageFolder(photos, eval_preset())
    ours = stoker.DataLoader(ds, batch_size=5, shuffle=True, drop_last=True, num_workers=2, prefetch_factor=3,
                             persistent_workers=True)
    theirs = TorchDataLoader(TVImageFolder(photos, eval_preset()), batch_size=5, shuffle=True, drop_last=True,
                             num_workers=2, prefetch_factor=3, persistent_workers=True)
    assert ours.dataset is ds
    for name in ("batch_size", "drop_last", "num_workers", "prefetch_factor", "persistent_workers", "timeout",
                 "pin_memory", "collate_fn", "worker_init_fn", "generator"):
        assert getattr(ours, name) == getattr(theirs, name), name
    assert type(ours.sampler) is type(theirs.sampler)
    assert type(ours.batch_sampler) is type(theirs.batch_sampler)
    assert len(ours) == len(theirs) == 4
    assert [len(y) for _, y in ours] == [5] * 4
    # evaluate()-style code reads the dataset through the loader
    assert ours.dataset.classes == TVImageFolder(photos).classes and len(ours.dataset) == 24


def test_shuffle_follows_torch_manual_seed(photos):
    def labels(seed):
        torch.manual_seed(seed)
        dl = stoker.DataLoader(ImageFolder(photos, eval_preset(32)), batch_size=24, shuffle=True)
        return [y.tolist() for _, y in dl]

    assert labels(1) == labels(1)
    assert labels(1) != labels(2)


def records_of(photo_files, **kwargs):
    """stoker.Records whose target is the record index: samples identify themselves."""
    return stoker.Records(lambda i: (photo_files[i], i), size=len(photo_files), name="photos", **kwargs)


def test_distributed_sampler_on_two_ranks_gives_disjoint_equal_shares_and_follows_set_epoch(photo_files):
    tf = eval_preset(32)

    def epoch(rank, e):
        recs = records_of(photo_files, transform=tf)
        sampler = DistributedSampler(recs, num_replicas=2, rank=rank, shuffle=True, seed=5)
        dl = stoker.DataLoader(recs, batch_size=4, sampler=sampler)
        sampler.set_epoch(e)
        return [int(t) for _, ts in dl for t in ts]

    for e in (0, 1):
        r0, r1 = epoch(0, e), epoch(1, e)
        assert len(r0) == len(r1) == 12
        assert not set(r0) & set(r1) and set(r0) | set(r1) == set(range(24))
    assert epoch(0, 0) == epoch(0, 0)
    assert epoch(0, 0) != epoch(0, 1)


def test_records_of_bytes_paths_and_no_target_equal_the_folder(photo_files, photos):
    tf = [stoker.Resize((40, 40)), stoker.Normalize(MEAN, STD)]
    data = [open(p, "rb").read() for p in photo_files]
    by_bytes = stoker.Loader(stoker.Records([(b, f"t{i}") for i, b in enumerate(data)]), batch_size=24,
                             transforms=tf)
    by_path = stoker.Loader(stoker.Records(lambda i: photo_files[i], size=24), batch_size=24, transforms=tf)
    ref = stoker.Loader(photos, batch_size=24, transforms=tf)  # the folder: the same files in the same order
    images, names = next(iter(by_bytes))
    assert names == tuple(f"t{i}" for i in range(24))  # as torch's default_collate leaves strings
    (ref_images, _), = list(ref)
    assert torch.equal(images, ref_images)
    only_images = next(iter(by_path))
    assert isinstance(only_images, torch.Tensor) and torch.equal(only_images, ref_images)


def test_a_python_exception_is_counted_under_skip_and_reraised_under_raise(photo_files):
    def bad_target(t):
        if t == 13:  # in the second batch of 8
            raise KeyError(f"no class for {t}")
        return t

    loader = stoker.Loader(records_of(photo_files), batch_size=8, transforms=eval_preset(32),
                           target_transform=bad_target, on_corrupt="skip")
    seen = [int(t) for _, ts in loader for t in ts]
    assert 13 not in seen and len(seen) == 24  # the next sample took its place
    s = loader.stats()
    assert s["corrupt"] == 1 and s["corrupt_by_reason"] == {"python": 1}
    assert "photos[13]" in s["corrupt_examples"][0] and "KeyError" in s["corrupt_examples"][0]

    loader = stoker.Loader(records_of(photo_files), batch_size=8, transforms=eval_preset(32),
                           target_transform=bad_target, on_corrupt="raise")
    it = iter(loader)
    next(it)
    with pytest.raises(KeyError, match="no class for 13") as info:
        next(it)
    assert any("bad_target" in str(f.name) for f in info.traceback)  # the user's frame is in the traceback
    assert "photos[13]" in "".join(getattr(info.value, "__notes__", []))


def test_what_cannot_be_honoured_is_named(photos, capfd):
    ds = ImageFolder(photos, eval_preset(32))

    class MySampler(torch.utils.data.Sampler):
        def __iter__(self):
            return iter(range(24))

        def __len__(self):
            return 24

    with pytest.raises(ValueError, match="MySampler"):
        stoker.DataLoader(ds, sampler=MySampler(ds))

    class Plain(torch.utils.data.Dataset):
        def __getitem__(self, i):
            return i

        def __len__(self):
            return 3

    with pytest.raises(TypeError, match="stoker.Records"):
        stoker.DataLoader(Plain())
    with pytest.raises(ValueError, match="timeout"):
        stoker.DataLoader(ds, timeout=5)
    stoker.DataLoader(ds, worker_init_fn=lambda w: None)
    assert "worker_init_fn" in capfd.readouterr().err


def test_unmapped_transforms_say_why_once_on_stderr(photos, capfd):
    tf = T.Compose([T.Resize(40, interpolation=T.InterpolationMode.BICUBIC), T.CenterCrop(32), T.ToTensor()])
    loader = stoker.DataLoader(ImageFolder(photos, tf), batch_size=8)
    err = capfd.readouterr().err
    assert err.count("run as Python") == 1 and "Resize" in err
    assert loader.stats()["python_transforms"][0]["transform"].startswith("Resize")
    theirs = TorchDataLoader(TVImageFolder(photos, tf), batch_size=8)
    assert_batches_equal(list(loader), list(theirs))


def test_the_example_and_its_two_line_port_run(photos, tmp_path):
    original = os.path.join(ROOT, "examples", "train_torchvision.py")
    port = os.path.join(ROOT, "examples", "train_torchvision_stoker.py")
    diff = [d for d in difflib.unified_diff(open(original).read().splitlines(), open(port).read().splitlines(),
                                            lineterm="", n=0)
            if d[:1] in "+-" and not d.startswith(("+++", "---"))]
    assert sorted(diff) == sorted(["-from torch.utils.data import DataLoader", "+from stoker import DataLoader",
                                   "-from torchvision.datasets import ImageFolder",
                                   "+from stoker.datasets import ImageFolder"])
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    args = ["--data-path", photos, "--epochs", "2", "--max-steps", "3", "--workers", "2", "--batch-size", "4",
            "--auto-augment", "ta_wide", "--random-erase", "0.2", "--mixup-alpha", "0.2", "--cutmix-alpha", "1.0",
            "--train-crop-size", "64", "--val-resize-size", "72", "--val-crop-size", "64"]
    for script in (original, port):
        r = subprocess.run([sys.executable, script] + args, env=env, capture_output=True, text=True, timeout=300,
                           cwd=tmp_path)
        assert r.returncode == 0, r.stderr[-3000:]
        assert "Acc@1" in r.stdout


def test_exiting_while_workers_run_python_ends_cleanly(photos, tmp_path):
    # A worker that asks for the GIL once the interpreter finalizes is ended by Python inside C++ (an abort):
    # the loaders with a Python stage are closed at exit, before that.
    script = tmp_path / "exit_mid_epoch.py"
    script.write_text(f"""
import time, stoker, torchvision.transforms as T
def slow(x):
    time.sleep(0.02)
    return x
loader = stoker.Loader({photos!r}, batch_size=4, threads=2,
                       transforms=[T.Resize(40), T.CenterCrop(32), T.ToTensor(), T.Lambda(slow)])
images, labels = next(iter(loader))
print("ok", tuple(images.shape))
""")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    for _ in range(3):
        r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and "ok (4, 3, 32, 32)" in r.stdout, r.stderr[-2000:]


def test_a_loader_the_garbage_collector_frees_on_a_worker_is_closed_on_a_thread_of_its_own(photos, tmp_path):
    # A Python transform on a worker can run the garbage collector, which can free a loader left in a reference
    # cycle there: its own (whose workers were still filling its ring) or another's. Closing it there would make
    # the worker join itself (std::terminate: CI's check-asan died of it in test_unmapped_transforms_...). It is
    # closed on a thread of its own instead, and every one of its threads ends.
    script = tmp_path / "gc_on_worker.py"
    script.write_text(f"""
import gc, os, threading, weakref, stoker, torchvision.transforms as T
from stoker.datasets import ImageFolder

def collect(x):
    gc.collect()
    return x

def names():
    out = []
    for t in os.listdir("/proc/self/task"):
        try:
            out.append(open(f"/proc/self/task/{{t}}/comm").read().strip())
        except OSError:
            pass
    return out

freed_on = []
def note():
    freed_on.append(open(f"/proc/self/task/{{threading.get_native_id()}}/comm").read().strip())

tf = T.Compose([T.CenterCrop(32), T.PILToTensor(), T.Lambda(collect)])
for attempt in range(4):
    ld = stoker.DataLoader(ImageFolder({photos!r}, tf), batch_size=2, num_workers=2)
    ld.cycle = ld  # freed only by the garbage collector
    weakref.finalize(ld, note)
    it = iter(ld)
    next(it)
    del it, ld
    other = stoker.DataLoader(ImageFolder({photos!r}, tf), batch_size=2, num_workers=2)
    n = sum(1 for _ in other)
    assert n == 12, n
    del other
gc.collect()
stoker._stoker._join_closing()
left = [n for n in names() if n.startswith("stoker-")]
print("freed on", sorted(set(freed_on)), "left", left)
assert len(freed_on) == 4 and not left, (freed_on, left)
assert any(n.startswith("stoker-w") for n in freed_on), freed_on
""")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "terminate" not in r.stderr, r.stdout[-1000:] + r.stderr[-3000:]


def test_closing_a_loader_on_its_own_worker_raises_a_clear_error(photos):
    holder = []  # a weak reference: a strong one would make a cycle through C++, which the collector cannot see

    def close_own(x):
        holder[0]().close()
        return x

    loader = stoker.Loader(photos, batch_size=2, threads=2, on_corrupt="raise",
                           transforms=[T.CenterCrop(32), T.PILToTensor(), stoker.PyTransform(close_own)])
    holder.append(weakref.ref(loader._impl))
    with pytest.raises(ValueError, match="own worker threads"):
        next(iter(loader))
    loader._impl.close()  # from the main thread: it stops and joins the workers


def test_a_loader_that_raised_is_freed_when_dropped_without_the_garbage_collector(photos, photo_files, tmp_path,
                                                                                     make_numbered):
    # A raised batch left no reference cycle (the exception's traceback holds the iterator's frame): the loader,
    # with its cache and buffers, goes when the caller drops it, not at the collector's next run.
    def boom(x):
        raise RuntimeError("boom")

    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"\xff\xd8 not a jpeg")
    makes = [lambda: stoker.Loader(photos, batch_size=2, threads=2, on_corrupt="raise",
                                   transforms=[T.CenterCrop(32), T.PILToTensor(), stoker.PyTransform(boom)]),
             lambda: stoker.Loader(make_numbered([str(bad)] + photo_files[:3]), batch_size=2, threads=2,
                                   on_corrupt="raise", transforms=[stoker.CenterCrop(32)])]
    gc.collect()
    gc.disable()
    try:
        for make in makes:
            loader = make()
            ref = weakref.ref(loader)
            with pytest.raises(Exception) as info:
                next(iter(loader))
            assert isinstance(info.value, (RuntimeError, stoker.SampleError)), info.value
            del loader, info
            assert ref() is None, "the loader outlived its last reference"
    finally:
        gc.enable()


def test_random_split_subsets_equal_torchs(photos):
    ds = ImageFolder(photos, eval_preset(32))
    tv = TVImageFolder(photos, eval_preset(32))
    ours = torch.utils.data.random_split(ds, [16, 8], generator=torch.Generator().manual_seed(3))
    theirs = torch.utils.data.random_split(tv, [16, 8], generator=torch.Generator().manual_seed(3))
    for a, b in zip(ours, theirs):
        assert list(a.indices) == list(b.indices)
        assert_batches_equal(list(stoker.DataLoader(a, batch_size=5)), list(TorchDataLoader(b, batch_size=5)))


def test_the_doctors_port_diff_changes_only_the_import_lines(tmp_path):
    from stoker import _profiling
    script = tmp_path / "train.py"
    script.write_text("import torch\n"
                      "from torch.utils.data import DataLoader, DistributedSampler  # data\n"
                      "    from torchvision.datasets import ImageFolder\n"
                      "from torchvision import transforms\n"
                      "loader = DataLoader(ImageFolder('x'))\n")
    diff = _profiling._port_diff(str(script))
    changed = [d for d in diff.splitlines() if d[:1] in "+-" and not d.startswith(("+++", "---"))]
    assert changed == ["-from torch.utils.data import DataLoader, DistributedSampler  # data",
                       "-    from torchvision.datasets import ImageFolder",
                       "+from torch.utils.data import DistributedSampler",
                       "+from stoker import DataLoader",
                       "+    from stoker.datasets import ImageFolder"], diff
    plain = tmp_path / "plain.py"
    plain.write_text("import torch\nx = 1\n")
    assert _profiling._port_diff(str(plain)) == ""
