"""cache="ram" and cache="decoded": same results as the uncached path, budget held."""
import os
import time

import pytest
import torch

import stoker
from memory_checks import memory_within, reserved_before_the_caches, scratch_reserved

TF = [stoker.RandomResizedCrop(48), stoker.RandomHorizontalFlip()]


def epoch_of(loader, e):
    loader.set_epoch(e)
    return [(x.clone(), y.clone()) for x, y in loader]


def same(a, b):
    return len(a) == len(b) and all(torch.equal(x, z) and torch.equal(y, w) for (x, y), (z, w) in zip(a, b))


def test_ram_cache_gives_the_same_batches_and_hits(photos):
    plain = stoker.Loader(photos, batch_size=5, shuffle=True, transforms=TF)
    ram = stoker.Loader(photos, batch_size=5, shuffle=True, transforms=TF, cache="ram", preload=False)
    st = []
    for e in range(3):
        assert same(epoch_of(plain, e), epoch_of(ram, e))
        st.append(ram.stats())
    # Local files are read again cheaply, so the cache stores records only in their final form: the first
    # epoch only those it rewrites on the read path (the rest read from the files, as cache="mmap" does),
    # the second every one it reads, the third reads them all from RAM.
    assert st[0]["cache_misses"] == 24 and st[0]["cache_records"] == st[0]["cache_rewrite_settled"]
    assert st[1]["cache_records"] == 24 and st[1]["cache_hits"] == st[0]["cache_records"]
    assert st[1]["cache_rewrite"] == "done"
    s = st[2]
    assert s["cache_hits"] - st[1]["cache_hits"] == 24 and s["cache_misses"] == st[1]["cache_misses"]
    assert s["cache_bytes"] >= sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(photos) for f in fs
                                   if f.endswith(".jpg"))


def jpeg_bytes(folder):
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(folder) for f in fs if f.endswith(".jpg"))


def preload_ended(loader, limit_s=120):
    """Polls stats() until the preload is no longer "loading" (a hang guard, not a time bound)."""
    deadline = time.monotonic() + limit_s
    while loader.stats()["cache_preload"] == "loading":
        assert time.monotonic() < deadline, "the preload never ended"
        time.sleep(0.01)
    return loader.stats()


def test_ram_preload_loads_every_record_in_the_background(photos):
    plain = stoker.Loader(photos, batch_size=5, shuffle=True, transforms=TF)
    ram = stoker.Loader(photos, batch_size=5, shuffle=True, transforms=TF, cache="ram")
    assert same(epoch_of(plain, 0), epoch_of(ram, 0))
    s = preload_ended(ram)
    assert s["cache_preload"] == "done"
    assert s["cache_records"] == 24 and s["cache_bytes"] >= jpeg_bytes(photos)
    # The workers may have stored some (or all) first: the preload counts only its own.
    assert s["cache_preload_records"] <= 24 and s["cache_preload_bytes"] <= jpeg_bytes(photos)
    misses, hits = s["cache_misses"], s["cache_hits"]
    assert misses + hits == 24
    for e in (1, 2):
        assert same(epoch_of(plain, e), epoch_of(ram, e))
    s = ram.stats()
    assert s["cache_misses"] == misses and s["cache_hits"] == hits + 48, "later epochs find every record in RAM"


def test_ram_preload_starts_without_iterating_and_stops_at_the_budget(photos):
    kw = dict(batch_size=5, shuffle=True, transforms=TF)
    budget = jpeg_bytes(photos) // 3  # for the cache, beside the batch buffers (memory_budget holds both)
    plain = stoker.Loader(photos, **kw)
    ram = stoker.Loader(photos, cache="ram", memory_budget=budget + reserved_before_the_caches(photos, cache="ram", **kw),
                        **kw)
    s = preload_ended(ram)  # no batch asked for: it starts after a hold-back of a second
    assert s["cache_preload"] == "budget full"
    assert 0 < s["cache_records"] < 24 and s["cache_bytes"] <= budget
    assert s["cache_records"] == s["cache_preload_records"] and s["cache_preload_s"] > 0
    for e in range(2):
        assert same(epoch_of(plain, e), epoch_of(ram, e)), "the part not cached is read as usual"


def test_ram_preload_leaves_unreadable_records_to_the_workers(photo_files, make_numbered, tmp_path):
    listed = make_numbered([photo_files[0], str(tmp_path / "gone.jpg"), photo_files[1]])
    ram = stoker.Loader(listed, batch_size=3, transforms=TF, cache="ram")
    s = preload_ended(ram)
    assert s["cache_preload"] == "done" and s["cache_records"] == 2
    for e in range(2):
        epoch_of(ram, e)
    assert ram.stats()["corrupt_by_reason"] == {"not_found": 2}, "counted once per epoch, by the workers"


def test_loader_destroyed_while_preloading_or_holding_back(photos):
    for _ in range(3):
        ram = stoker.Loader(photos, batch_size=5, transforms=TF, cache="ram")
        del ram  # its preload threads are still held back
        ram = stoker.Loader(photos, batch_size=5, transforms=TF, cache="ram")
        next(iter(ram))
        del ram  # mid-preload, or just after it


PROGRESS_CHILD = r"""
import sys
sys.path.insert(0, sys.argv[1])
import stoker
loader = stoker.Loader(sys.argv[2], batch_size=5, cache="ram", progress=True,
                       transforms=[stoker.RandomResizedCrop(32)])
for x, y in loader:
    pass
while loader.stats()["cache_preload"] == "loading":
    pass
"""


def test_preload_progress_on_stderr(photos):
    """progress=True writes lines even when stderr is not a terminal; the last says what was loaded."""
    import subprocess
    import sys
    pkg = os.path.join(os.path.dirname(__file__), "..", "..", "python")
    err = subprocess.run([sys.executable, "-c", PROGRESS_CHILD, pkg, photos], capture_output=True, text=True,
                         timeout=300, check=True).stderr
    assert "stoker: loaded into RAM: 24 records" in err.splitlines()[-1]
    with pytest.raises(ValueError, match="progress"):
        stoker.Loader(photos, transforms=TF, cache="ram", progress="yes")


def test_decoded_cache_stores_the_first_batch_in_the_first_epoch(photos):
    """The first batch is made without storing (region decodes, as without the cache); its records are stored
    later in the same epoch (one after each of the epoch's later samples), so the second epoch finds every record.
    A miss is counted once. NOTE: small batches and a fixed ring (prefetch=2) leave at most a few batches made
    before the first is out, so the later samples outnumber the records to store."""
    plain = stoker.Loader(photos, batch_size=2, shuffle=True, transforms=TF)
    dec = stoker.Loader(photos, batch_size=2, shuffle=True, transforms=TF, cache="decoded", cache_max_side=4096,
                        prefetch=2, threads=2)
    assert same(epoch_of(plain, 0), epoch_of(dec, 0))
    s = dec.stats()
    assert s["cache_records"] == 24 and s["cache_misses"] == 24 and s["cache_hits"] == 0
    assert same(epoch_of(plain, 1), epoch_of(dec, 1))
    s = dec.stats()
    assert s["cache_records"] == 24 and s["cache_misses"] == 24 and s["cache_hits"] == 24


def test_decoded_cache_results_do_not_depend_on_hits(photos):
    full = stoker.Loader(photos, batch_size=5, shuffle=True, transforms=TF, cache="decoded", cache_max_side=128)
    none = stoker.Loader(photos, batch_size=5, shuffle=True, transforms=TF, cache="decoded", cache_max_side=128,
                         memory_budget=1)  # nothing fits: every sample decoded again
    for e in range(3):
        assert same(epoch_of(full, e), epoch_of(none, e)), "the cache returns exactly what it stored"
    s, n = full.stats(), none.stats()
    assert s["cache_hits"] == 48 and s["cache_records"] == 24
    assert n["cache_records"] == 0 and n["cache_hits"] == 0
    assert s["bytes_read"] < n["bytes_read"], "cached epochs read nothing from disk"


def test_decoded_cache_stores_the_downscaled_image(photos):
    # Resize((h, w)) of the stored image: compare with Resize(max_side) then Resize((h, w)) uncached.
    a = stoker.Loader(photos, batch_size=24, transforms=[stoker.Resize((40, 40))], dtype="uint8", cache="decoded",
                      cache_max_side=100)
    b = stoker.Loader(photos, batch_size=24, transforms=[stoker.Resize(100), stoker.Resize((40, 40))], dtype="uint8")
    assert same(epoch_of(a, 0), epoch_of(b, 0))
    assert same(epoch_of(a, 1), epoch_of(b, 1))


def test_partial_cache_under_a_small_budget(photos):
    budget = 24 * 128 * 128 * 3 // 3  # about a third of the stored images, beside the batch buffers
    kw = dict(batch_size=6, shuffle=True, transforms=TF)
    loader = stoker.Loader(photos, cache="decoded", cache_max_side=128,
                           memory_budget=budget + reserved_before_the_caches(photos, cache="decoded", cache_max_side=128,
                                                                             **kw), **kw)
    for e in range(3):
        epoch_of(loader, e)
    s = loader.stats()
    assert 0 < s["cache_records"] < 24
    assert s["cache_bytes"] <= budget
    hit_rate = s["cache_hits"] / (s["cache_hits"] + s["cache_misses"])
    assert 0.1 < hit_rate < 0.6


def test_bad_cache_arguments(photos):
    with pytest.raises(ValueError, match="cache"):
        stoker.Loader(photos, transforms=TF, cache="disk")
    with pytest.raises(ValueError, match="cache_max_side"):
        stoker.Loader(photos, transforms=TF, cache="decoded", cache_max_side=0)
    assert stoker.Loader(photos, transforms=TF).stats()["cache_preload"] == "off"
    assert stoker.Loader(photos, transforms=TF, cache="ram", preload=False).stats()["cache_preload"] == "off"


BUDGET_CHILD = r"""
import sys, os
sys.path.insert(0, sys.argv[1])
import stoker

def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024

budget = int(sys.argv[3])
loader = stoker.Loader(sys.argv[2], batch_size=8, shuffle=True, threads=2, cache="decoded", cache_max_side=600,
                       memory_budget=budget, dtype="uint8", transforms=[stoker.RandomResizedCrop(64)])
base = rss()
peak = base
for e in range(3):
    loader.set_epoch(e)
    for x, y in loader:
        peak = max(peak, rss())
s = loader.stats()
print(base, peak, s["cache_bytes"], s["cache_records"], s["batch_buffer_bytes"])
"""


def test_memory_budget_bounds_peak_rss(tmp_path):
    """A set whose decoded size (~75 MB) is far above the cache's budget (16 MB, beside the workers' decode
    scratch, which memory_budget holds too): peak RSS grows by at most the budget plus the stated overhead:
    batch buffers, and per thread the decoded image, its stored copy and resize scratch (4 images of at most
    600x800), plus 16 MB for the allocator."""
    from PIL import Image
    import numpy as np
    rng = np.random.default_rng(0)
    d = tmp_path / "big"
    (d / "c").mkdir(parents=True)
    for i in range(52):
        Image.fromarray(rng.integers(0, 256, (600, 800, 3), dtype=np.uint8)).save(d / "c" / f"{i}.jpg", quality=70)
    budget = 16 << 20
    scratch = scratch_reserved(str(d), batch_size=8, shuffle=True, threads=2, cache="decoded", cache_max_side=600,
                               dtype="uint8", transforms=[stoker.RandomResizedCrop(64)])
    pkg = os.path.join(os.path.dirname(__file__), "..", "..", "python")
    import subprocess, sys
    out = subprocess.run([sys.executable, "-c", BUDGET_CHILD, pkg, str(d), str(budget + scratch)], capture_output=True,
                         text=True, timeout=300, check=True).stdout.split()
    base, peak, cache_bytes, records, ring = map(int, out)
    assert cache_bytes <= budget and 0 < records < 52
    overhead = ring + 2 * 4 * 600 * 800 * 3 + (16 << 20)
    assert peak - base <= budget + scratch + overhead, (peak - base) / 2**20
    print(f"budget test: RSS grew {(peak - base) / 2**20:.1f} MiB; cache {cache_bytes / 2**20:.1f} MiB "
          f"({records} of 52 images); bound {(budget + overhead) / 2**20:.1f} MiB")


BUDGET_OF_CHILD = r"""
import sys
sys.path.insert(0, sys.argv[1])
import stoker
print(stoker.Loader(sys.argv[2], cache="ram", preload=False, transforms=[stoker.RandomResizedCrop(32)]).stats()["cache_budget_bytes"])
"""


def test_default_budget_is_shared_by_the_ranks_of_a_node(photos):
    """torchrun's LOCAL_WORLD_SIZE ranks on a node each default to their share of the memory."""
    import subprocess
    import sys
    pkg = os.path.join(os.path.dirname(__file__), "..", "..", "python")

    def budget(local_world_size):
        env = {k: v for k, v in os.environ.items() if k != "LOCAL_WORLD_SIZE"}
        if local_world_size:
            env["LOCAL_WORLD_SIZE"] = str(local_world_size)
        return int(subprocess.run([sys.executable, "-c", BUDGET_OF_CHILD, pkg, photos], capture_output=True,
                                  text=True, timeout=300, check=True, env=env).stdout)

    alone, shared = budget(None), budget(4)
    assert 0.2 < shared / alone < 0.3, (alone, shared)  # available memory moves a little between the two


def test_memory_accounts_stay_within_a_small_budget_with_a_ram_cache(photos):
    """stats()["memory"]: a RAM cache under a budget of half the set's bytes (beside the workers' decode scratch,
    reserved first) fills what the batch buffers leave (its sample_cache account) and stops there; the accounts
    never sum above memory_budget, checked after every batch; batches are those without the cache."""
    size = sum(os.path.getsize(os.path.join(r, n)) for r, _, names in os.walk(photos) for n in names)
    kw = dict(batch_size=4, shuffle=True, transforms=[stoker.Resize(32), stoker.CenterCrop(32)], dtype="uint8",
              threads=2)
    budget = size // 2 + scratch_reserved(photos, cache="ram", **kw)
    plain = stoker.Loader(photos, **kw)
    ram = stoker.Loader(photos, cache="ram", memory_budget=budget, **kw)
    for e in range(2):
        got = []
        ram.set_epoch(e)
        for x, y in ram:
            got.append((x.clone(), y.clone()))
            memory_within(ram.stats(), budget)
        assert same(got, epoch_of(plain, e))
    s = ram.stats()
    m = memory_within(s, budget)
    a = m["accounts"]
    assert 0 < s["cache_records"] < 24, "half the set's bytes hold some records, not all"
    assert a["sample_cache"] >= s["cache_bytes"] > 0
    assert a["batch_buffers"] >= s["batch_buffer_bytes"] > 0
    assert a["remote_shards"] == 0 and a["volume_cache"] == 0
    assert m["reserved"]["batch_buffers"] > 0
    assert 0 < a["decode_scratch"] <= m["reserved"]["decode_scratch"], "the workers' buffers, within their reservation"
    assert plain.stats()["memory"]["accounts"]["sample_cache"] == 0
