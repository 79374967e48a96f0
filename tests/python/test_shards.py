"""Tar shards: stoker pack round trips, tars from GNU tar and Python's tarfile,
index sidecars, interrupted packs, and every bad-input case."""
import hashlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time

import numpy as np
import pytest
import torch
from PIL import Image

import stoker

BUILD = os.environ.get("STOKER_BUILD", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
CLI = os.path.join(BUILD, "tools", "stoker")
pytestmark = pytest.mark.skipif(not os.path.exists(CLI), reason="the stoker CLI is not built")

SMALL = [stoker.Resize((24, 24))]


def run_cli(*args, check=True):
    out = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=600)
    if check:
        assert out.returncode == 0, out.stderr + out.stdout
    return out


def folder_files(root):
    files = []
    for cls in sorted(os.listdir(root)):
        d = os.path.join(root, cls)
        if os.path.isdir(d):
            files += [(os.path.join(d, f), cls) for f in sorted(os.listdir(d)) if f.endswith(".jpg")]
    return files


def samples_of(loader):
    """The multiset of (image digest, label) a loader yields in one epoch."""
    out = []
    for x, y in loader:
        for i in range(len(y)):
            out.append((hashlib.sha1(x[i].numpy().tobytes()).hexdigest(), int(y[i])))
    return sorted(out)


def members(tar_path):
    with tarfile.open(tar_path) as t:
        return {m.name: t.extractfile(m).read() for m in t.getmembers() if m.isfile()}


@pytest.fixture(scope="module")
def packed(photos, tmp_path_factory):
    out = tmp_path_factory.mktemp("packed")
    run_cli("pack", photos, out / "keep-%03d.tar", "--keep", "--shard-count", "3")
    return out


def test_pack_keep_round_trip_exact_bytes(photos, packed):
    shards = sorted(str(p) for p in packed.glob("keep-*.tar"))
    assert len(shards) == 3
    classes = sorted(d for d in os.listdir(photos) if os.path.isdir(os.path.join(photos, d)))
    seen = {}
    for s in shards:
        m = members(s)  # readable by Python's tarfile
        keys = {n.split(".")[0] for n in m}
        for k in keys:
            meta = json.loads(m[k + ".json"])
            assert m[k + ".jpg"] == open(meta["path"], "rb").read(), "--keep copies the original bytes"
            assert int(m[k + ".cls"]) == classes.index(os.path.basename(os.path.dirname(meta["path"])))
            seen[meta["path"]] = int(m[k + ".cls"])
        assert os.path.exists(s + ".idx")
        # GNU tar reads it too.
        assert subprocess.run(["tar", "tf", s], capture_output=True).returncode == 0
    assert len(seen) == len(folder_files(photos))
    a = samples_of(stoker.Loader(photos, batch_size=7, transforms=SMALL, dtype="uint8"))
    b = samples_of(stoker.Loader(shards, batch_size=7, transforms=SMALL, dtype="uint8"))
    assert a == b


def test_brace_and_glob_specs(packed):
    n = len(stoker.Loader(str(packed / "keep-{000..002}.tar"), batch_size=1, transforms=SMALL))
    assert n == len(stoker.Loader(str(packed / "keep-*.tar"), batch_size=1, transforms=SMALL))
    assert n == 24


def test_pack_max_side_resizes_like_torchvision(photos, tmp_path):
    run_cli("pack", photos, tmp_path / "raw-%03d.tar", "--max-side", "256", "--raw", "--shard-size", "2000000")
    shards = sorted(str(p) for p in tmp_path.glob("raw-*.tar"))
    assert len(shards) > 1, "--shard-size splits"
    # The raw pixels are Resize(256) of the original, as torchvision would make them.
    packed = stoker.Loader(str(tmp_path / "raw-*.tar"), batch_size=24, dtype="uint8", transforms=[stoker.CenterCrop(200)])
    direct = stoker.Loader(photos, batch_size=24, dtype="uint8", transforms=[stoker.Resize(256), stoker.CenterCrop(200)])
    assert samples_of(packed) == samples_of(direct)
    m = members(shards[0])
    arr = np.load(io.BytesIO(next(v for k, v in m.items() if k.endswith(".npy"))))
    assert arr.dtype == np.uint8 and arr.ndim == 3 and arr.shape[2] == 3 and min(arr.shape[:2]) == 256


def test_pack_reencode_and_shuffle(photos, tmp_path):
    out = run_cli("pack", photos, tmp_path / "q-%02d.tar", "--max-side", "128", "--quality", "80",
                  "--subsampling", "420", "--shuffle", "3", "--threads", "2").stdout
    assert "24 records in, 24 written, 0 skipped" in out
    m = members(str(tmp_path / "q-00.tar"))
    labels = [int(m[k]) for k in sorted(m) if k.endswith(".cls")]
    assert labels != sorted(labels), "shuffled across the shard"
    img = Image.open(io.BytesIO(m["000000000.jpg"]))
    assert min(img.size) == 128


def test_pack_lossless_keeps_pixels_and_adds_restart_markers(photos, tmp_path):
    """--lossless rewrites each JPEG with the same coefficients plus restart markers:
    the loader gives exactly the folder's batches, and crops decode only what they cover."""
    out = run_cli("pack", photos, tmp_path / "ll-%02d.tar", "--lossless", "--shard-count", "2").stdout
    assert "24 records in, 24 written, 0 skipped" in out
    m = members(str(tmp_path / "ll-00.tar"))
    for k in (k for k in m if k.endswith(".jpg")):
        meta = json.loads(m[k.replace(".jpg", ".json")])
        original = open(meta["path"], "rb").read()
        assert m[k] != original and b"\xff\xdd" in m[k], "rewritten, with a DRI marker"
        a = np.asarray(Image.open(io.BytesIO(m[k])).convert("RGB"))
        b = np.asarray(Image.open(io.BytesIO(original)).convert("RGB"))
        assert np.array_equal(a, b), "the same pixels (PIL's decode)"
    shards = str(tmp_path / "ll-{00..01}.tar")
    tf = [stoker.RandomResizedCrop(64), stoker.RandomHorizontalFlip()]
    folder = stoker.Loader(photos, batch_size=6, transforms=tf, dtype="uint8", seed=2)
    packed = stoker.Loader(shards, batch_size=6, transforms=tf, dtype="uint8", seed=2)
    for e in range(2):
        folder.set_epoch(e)
        packed.set_epoch(e)
        for (x, y), (z, w) in zip(folder, packed):
            assert torch.equal(x, z) and torch.equal(y, w)
    for flags in (["--keep"], ["--raw"]):
        bad = run_cli("pack", photos, tmp_path / "bad-%d.tar", "--lossless", *flags, check=False)
        assert bad.returncode != 0 and "exclude each other" in bad.stdout + bad.stderr


@pytest.mark.parametrize("subsampling", ["444", "420"])
def test_restart_markers_change_bytes_not_batches(photos, tmp_path, subsampling):
    """pack's restart markers (random access for crops) cost a few bytes and change
    no pixel: the same shards without them give the same batches, crop for crop."""
    for tag, flags in (("rst", []), ("plain", ["--no-restart-markers"])):
        run_cli("pack", photos, tmp_path / f"{tag}-%02d.tar", "--max-side", "160", "--subsampling", subsampling,
                "--shard-count", "2", *flags)
    rst, plain = (str(tmp_path / f"{tag}-{{00..01}}.tar") for tag in ("rst", "plain"))
    jpg = next(v for k, v in sorted(members(str(tmp_path / "rst-00.tar")).items()) if k.endswith(".jpg"))
    assert b"\xff\xdd" in jpg, "a DRI marker"
    sizes = [sum(os.path.getsize(tmp_path / f"{tag}-{i:02d}.tar") for i in range(2)) for tag in ("rst", "plain")]
    assert sizes[0] > sizes[1]
    tf = [stoker.RandomResizedCrop(64), stoker.RandomHorizontalFlip()]
    a = stoker.Loader(rst, batch_size=8, shuffle=True, seed=5, transforms=tf, dtype="uint8")
    b = stoker.Loader(plain, batch_size=8, shuffle=True, seed=5, transforms=tf, dtype="uint8")
    for e in range(2):
        a.set_epoch(e)
        b.set_epoch(e)
        for (x, y), (z, w) in zip(a, b):
            assert torch.equal(x, z) and torch.equal(y, w)


def test_pack_counts_and_reports_bad_inputs(photos, tmp_path):
    src = tmp_path / "src"
    shutil.copytree(photos, src)
    cls = sorted(d for d in os.listdir(src) if (src / d).is_dir())[0]
    (src / cls / "zzz_empty.jpg").write_bytes(b"")
    (src / cls / "zzz_text.jpg").write_text("not an image")
    good = open(folder_files(photos)[0][0], "rb").read()
    (src / cls / "zzz_trunc.jpg").write_bytes(good[: len(good) // 2])
    out = run_cli("pack", src, tmp_path / "out" / "s-%d.tar").stdout
    assert "27 records in, 24 written, 3 skipped" in out
    assert "(corrupt: 2)" in out and "(unsupported: 1)" in out
    report = open(tmp_path / "out" / "pack-report.tsv").read()
    for name in ("zzz_empty.jpg", "zzz_text.jpg", "zzz_trunc.jpg"):
        assert name in report


def test_pack_rejects_bad_options(photos, tmp_path):
    assert run_cli("pack", photos, tmp_path / "nopattern.tar", check=False).returncode != 0
    out = run_cli("pack", photos, tmp_path / "x-%d.tar", "--raw", "--keep", check=False)
    assert out.returncode != 0 and "exclude" in out.stderr


def test_interrupted_pack_leaves_no_partial_shard_and_rerun_completes(photos, tmp_path):
    out = tmp_path / "int"
    args = [CLI, "pack", photos, str(out / "s-%04d.tar"), "--shard-count", "24", "--threads", "1"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while time.time() < deadline and not list(out.glob("s-*.tar")):
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    for s in out.glob("s-*.tar"):  # whatever exists under a final name is complete
        assert len(members(str(s))) == 3
    subprocess.run(args, check=True, capture_output=True)
    shards = sorted(out.glob("s-*.tar"))
    assert len(shards) == 24
    assert not [p for p in out.iterdir() if ".tmp-" in p.name]
    assert len(samples_of(stoker.Loader([str(s) for s in shards], batch_size=5, transforms=SMALL))) == 24


# ---- tars made by other tools ----

def write_sample_tree(root, files, long_names=False):
    os.makedirs(root, exist_ok=True)
    names = []
    for i, (path, _) in enumerate(files):
        stem = f"s{i:03d}" + ("_" + "x" * 120 if long_names else "")
        shutil.copy(path, os.path.join(root, stem + ".jpg"))
        open(os.path.join(root, stem + ".cls"), "w").write(str(i % 4))
        open(os.path.join(root, stem + ".json"), "w").write(json.dumps({"target": i}))
        names.append(stem)
    return names


def test_gnu_tar_shard_loads(photo_files, tmp_path):
    files = [(p, 0) for p in photo_files[:6]]
    write_sample_tree(tmp_path / "tree" / "sub", files)
    shard = tmp_path / "gnu.tar"
    subprocess.run(["tar", "--sort=name", "-cf", str(shard), "-C", str(tmp_path / "tree"), "."], check=True)
    loader = stoker.Loader(str(shard), batch_size=6, transforms=SMALL)
    _, y = next(iter(loader))
    assert sorted(y.tolist()) == sorted(i % 4 for i in range(6))
    assert loader.stats()["corrupt"] == 0


@pytest.mark.parametrize("fmt", [tarfile.PAX_FORMAT, tarfile.GNU_FORMAT, tarfile.USTAR_FORMAT])
def test_python_tarfile_shard_with_long_names_loads(photo_files, tmp_path, fmt):
    files = [(p, 0) for p in photo_files[:5]]
    long_names = fmt != tarfile.USTAR_FORMAT
    names = write_sample_tree(tmp_path / "t", files, long_names=long_names)
    shard = tmp_path / "py.tar"
    with tarfile.open(shard, "w", format=fmt) as t:
        for n in names:
            for ext in ("jpg", "cls", "json"):
                t.add(tmp_path / "t" / f"{n}.{ext}", arcname=f"deep/dir/{n}.{ext}")
    loader = stoker.Loader(str(shard), batch_size=5, transforms=SMALL, dtype="uint8")
    x, y = next(iter(loader))
    assert y.tolist() == [i % 4 for i in range(5)]
    direct = torch.stack([torch.from_numpy(np.array(Image.open(p).convert("RGB").resize((24, 24), Image.BILINEAR)))
                          for p, _ in files]).permute(0, 3, 1, 2)
    assert torch.equal(x, direct)
    # Labels from a .json field instead of .cls.
    loader = stoker.Loader(str(shard), batch_size=5, transforms=SMALL, labels="json:target")
    assert next(iter(loader))[1].tolist() == [0, 1, 2, 3, 4]


# ---- index sidecars ----

def test_index_built_when_missing_and_rebuilt_when_stale(packed, tmp_path):
    shard = tmp_path / "a.tar"
    shutil.copy(packed / "keep-000.tar", shard)
    idx = tmp_path / "a.tar.idx"
    assert not idx.exists()
    want = samples_of(stoker.Loader(str(shard), batch_size=4, transforms=SMALL))
    assert idx.exists(), "built on first open"
    # An index from another shard: rebuilt.
    shutil.copy(packed / "keep-001.tar.idx", idx)
    assert samples_of(stoker.Loader(str(shard), batch_size=4, transforms=SMALL)) == want
    assert "keep-001" not in idx.read_text()
    # A damaged index (checksum): rebuilt.
    text = idx.read_text()
    idx.write_text(text.replace("\t0\t", "\t1\t", 1) if "\t0\t" in text else text[:-5] + "0000\n")
    assert samples_of(stoker.Loader(str(shard), batch_size=4, transforms=SMALL)) == want
    assert idx.read_text() == text
    # An older version of the shard (mtime changed): rebuilt.
    os.utime(shard, ns=(1, 1))
    assert samples_of(stoker.Loader(str(shard), batch_size=4, transforms=SMALL)) == want
    assert "shard_mtime_ns 1\n" in idx.read_text()


def test_index_kept_in_memory_when_it_cannot_be_written(packed, tmp_path):
    shutil.copy(packed / "keep-000.tar", tmp_path / "a.tar")
    # A directory in the index's place cannot be replaced (works even as root,
    # where a read-only folder would not stop the write).
    (tmp_path / "a.tar.idx").mkdir()
    (tmp_path / "a.tar.idx" / "keep").write_text("x")
    assert len(samples_of(stoker.Loader(str(tmp_path / "a.tar"), batch_size=4, transforms=SMALL))) > 0
    assert (tmp_path / "a.tar.idx").is_dir()
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]


# ---- bad input ----

@pytest.fixture()
def shard_bytes(packed):
    return (packed / "keep-000.tar").read_bytes()


def open_error(path):
    with pytest.raises(stoker.SampleError) as e:
        stoker.Loader(str(path), batch_size=2, transforms=SMALL)
    return str(e.value)


def test_truncated_tar_names_shard_and_offset(shard_bytes, tmp_path):
    p = tmp_path / "trunc.tar"
    p.write_bytes(shard_bytes[: len(shard_bytes) // 2])
    msg = open_error(p)
    assert "trunc.tar" in msg and "offset" in msg and ("runs past the end" in msg or "truncated" in msg)


def test_member_past_eof(shard_bytes, tmp_path):
    p = tmp_path / "past.tar"
    p.write_bytes(shard_bytes[: 512 + 100])  # first header, then 100 of its bytes
    msg = open_error(p)
    assert "past.tar: offset 0" in msg and "runs past the end" in msg


def test_garbage_header(shard_bytes, tmp_path):
    p = tmp_path / "garbage.tar"
    b = bytearray(shard_bytes)
    b[0:100] = os.urandom(100)
    p.write_bytes(bytes(b))
    msg = open_error(p)
    assert "garbage.tar: offset 0" in msg and "garbage tar header" in msg


def test_sample_without_image_and_bad_cls_are_counted(photo_files, tmp_path):
    shard = tmp_path / "mixed.tar"
    with tarfile.open(shard, "w") as t:
        def add(name, data):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
        img = open(photo_files[0], "rb").read()
        add("a.jpg", img), add("a.cls", b"1")
        add("b.txt", b"no image here"), add("b.cls", b"2")
        add("c.jpg", img), add("c.cls", b"seven")
        add("d.jpg", img), add("d.cls", b" 3\n")
    for policy in ("skip", "raise"):
        loader = stoker.Loader(str(shard), batch_size=4, transforms=SMALL, on_corrupt=policy)
        if policy == "skip":
            _, y = next(iter(loader))
            assert y.tolist() == [1, 3, 3, 3]
        else:
            with pytest.raises(stoker.SampleError, match="mixed.tar:b.*no image member"):
                next(iter(loader))
        s = loader.stats()
        # Under skip, c is read twice (as b's replacement, then in its own place): every failed read counts.
        n = 3 if policy == "skip" else 2
        assert s["corrupt"] == n and s["corrupt_by_reason"] == {"corrupt": n}
        text = "\n".join(s["corrupt_examples"])
        assert "mixed.tar:b" in text and "mixed.tar:c" in text and "not an integer" in text


def test_inspect_and_verify(packed, tmp_path):
    out = run_cli("inspect", packed / "keep-{000..002}.tar").stdout
    assert "records: 24" in out and "classes: 4" in out and "members per sample" in out and "3: 24 samples" in out
    assert "members by suffix" in out and ".cls                    24" in out and ".jpg                    24" in out
    assert run_cli("verify", packed / "keep-*.tar").returncode == 0
    bad = tmp_path / "bad.tar"
    with tarfile.open(bad, "w") as t:
        info = tarfile.TarInfo("x.jpg")
        info.size = 10
        t.addfile(info, io.BytesIO(b"\xff\xd8\xff" + b"0" * 7))
    out = run_cli("verify", bad, check=False)
    assert out.returncode == 1 and "BAD record 0 'bad.tar:x'" in out.stdout


# ---- .npy samples that are not images ----

def write_npy_shard(path, arrays, labels):
    with tarfile.open(path, "w") as t:
        for i, (a, y) in enumerate(zip(arrays, labels)):
            b = io.BytesIO()
            np.save(b, a)
            for name, data in ((f"scan{i:04d}.npy", b.getvalue()), (f"scan{i:04d}.cls", str(y).encode())):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))


@pytest.mark.parametrize("dtype", [np.float32, np.int16, np.float64])
def test_numeric_arrays_are_batched_as_they_are(tmp_path, dtype):
    rng = np.random.default_rng(1)
    arrays = [rng.normal(size=(4, 5, 6)).astype(dtype) * 100 for _ in range(10)]
    write_npy_shard(tmp_path / "scans.tar", arrays, range(10))
    loader = stoker.Loader(str(tmp_path / "scans.tar"), batch_size=4)
    got = [(x.clone(), y.clone()) for x, y in loader]
    assert [tuple(x.shape) for x, _ in got] == [(4, 4, 5, 6), (4, 4, 5, 6), (2, 4, 5, 6)]
    assert got[0][0].dtype == torch.from_numpy(arrays[0]).dtype
    assert torch.equal(torch.cat([x for x, _ in got]), torch.from_numpy(np.stack(arrays)))
    assert torch.cat([y for _, y in got]).tolist() == list(range(10))
    with pytest.raises(ValueError, match="transforms"):
        stoker.Loader(str(tmp_path / "scans.tar"), batch_size=4, transforms=[stoker.CenterCrop(2)])


def test_array_of_another_shape_is_counted(tmp_path):
    arrays = [np.zeros((3, 3), np.float32), np.ones((2, 3), np.float32), np.full((3, 3), 2, np.float32)]
    write_npy_shard(tmp_path / "mixed.tar", arrays, [0, 1, 2])
    loader = stoker.Loader(str(tmp_path / "mixed.tar"), batch_size=2)
    x, y = next(iter(loader))
    assert y.tolist() == [0, 2]
    s = loader.stats()
    assert s["corrupt_by_reason"] == {"unsupported": 1} and "differs from the batch" in s["corrupt_examples"][0]


def test_more_shards_than_the_process_may_open_files(tmp_path):
    """300 one-sample shards under RLIMIT_NOFILE 64: the loader keeps a bounded pool of descriptors (a
    quarter of the limit, at least 16) instead of one per shard, and reads every record's bytes."""
    rng = np.random.default_rng(0)
    for s in range(300):
        buf = io.BytesIO()
        np.save(buf, rng.integers(0, 255, size=(4,), dtype=np.uint8) + np.uint8(s % 7))
        with tarfile.open(tmp_path / f"s-{s:03d}.tar", "w") as t:
            for name, data in [(f"k{s:03d}.npy", buf.getvalue()), (f"k{s:03d}.cls", str(s % 5).encode())]:
                info = tarfile.TarInfo(name)
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
    code = f"""
import resource, sys, numpy as np, io, tarfile
sys.path.insert(0, {os.path.join(os.path.dirname(__file__), '..', '..', 'python')!r})
import stoker
resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
loader = stoker.Loader({str(tmp_path / 's-{000..299}.tar')!r}, batch_size=32, threads=2, shuffle=True, seed=1,
                       progress=False)
got = {{}}
for _ in range(2):
    for x, y in loader:
        for a, b in zip(x, y):
            got.setdefault(a.numpy().tobytes(), []).append(int(b))
st = loader.stats()
want = {{}}
for s in range(300):
    with tarfile.open({str(tmp_path)!r} + f"/s-{{s:03d}}.tar") as t:
        a = np.load(io.BytesIO(t.extractfile(f"k{{s:03d}}.npy").read()))
    want.setdefault(a.tobytes(), []).extend([s % 5] * 2)
assert {{k: sorted(v) for k, v in got.items()}} == {{k: sorted(v) for k, v in want.items()}}
print(st["shard_files_open"], st["shard_file_opens"], st["corrupt"])
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    files_open, opens, corrupt = map(int, out.stdout.split())
    assert files_open <= 16 and corrupt == 0, out.stdout
    assert opens >= 300 + 300 - 16, out.stdout  # indexing opens each once; an epoch reopens the closed ones
