"""share_cache: ranks on one node (spawned processes, RANK/WORLD_SIZE/LOCAL_WORLD_SIZE) share one cache="ram" or
"decoded" in shared memory: every rank's batches equal those of per-process caches over two shuffled epochs, no
record is stored twice (the ranks' fills add up to the node's entries), and nothing of ours is left in the
directory afterwards. In one process: share_cache="on", the fallback and the error for a directory that cannot
hold it, and loaders with other cache options kept apart."""
import gc
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile

import numpy as np
import pytest

import stoker

SCRIPT = r"""
import json, os, sys, time
import multiprocessing as mp

def worker(rank, world, pkg, source, cache, share, shm, out, barrier):
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
    sys.path.insert(0, pkg)
    import numpy as np
    import stoker
    loader = stoker.Loader(source, batch_size=3, shuffle=True, seed=5, threads=2, output="numpy", cache=cache,
                           share_cache=share, share_cache_dir=shm, memory_budget=64 << 20, progress=False,
                           cache_max_side=4096,
                           transforms=[stoker.RandomResizedCrop(32), stoker.RandomHorizontalFlip()])
    batches, samples, held = {}, [0, 0], {}
    for e in (0, 1):
        loader.set_epoch(e)
        for k, (x, y) in enumerate(loader):
            batches[f"{e}_{k}_x"], batches[f"{e}_{k}_y"] = np.array(x), np.array(y)
            samples[e] += len(y)
        barrier.wait()  # every rank's epoch stored before any rank reads the next
        if e == 0:  # what the node's cache held before the second epoch (it only grows)
            s = loader.stats()
            held = {"entries": s["shared_cache_entries"], "hits": s["cache_hits"]}
        barrier.wait()
    deadline = time.monotonic() + 120  # a hang guard, not a time bound
    while loader.stats()["cache_preload"] == "loading" and time.monotonic() < deadline:
        time.sleep(0.01)
    barrier.wait()  # every preload ended: the fill counts are final
    # cache="ram": each rank rewrites the entries it stored (their walk ends once the preloads have).
    while cache == "ram" and loader.stats()["cache_rewrite"] == "rewriting" and time.monotonic() < deadline:
        time.sleep(0.01)
    s = loader.stats()
    np.savez(os.path.join(out, f"{share}_{rank}.npz"), **batches)
    keep = ("shared_cache", "shared_cache_entries", "shared_cache_filled", "shared_cache_hits", "cache_records",
            "cache_hits", "cache_mode", "cache_rewrite", "cache_bytes", "shared_cache_bytes", "cache_rewritten")
    with open(os.path.join(out, f"{share}_{rank}.json"), "w") as f:
        json.dump(dict({k: s[k] for k in keep}, samples=samples, held=held), f)
    barrier.wait()  # nobody detaches before every rank read the node's counts

if __name__ == "__main__":
    world, pkg, source, cache, share, shm, out = int(sys.argv[1]), *sys.argv[2:]
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(world)
    procs = [ctx.Process(target=worker, args=(r, world, pkg, source, cache, share, shm, out, barrier))
             for r in range(world)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    sys.exit(max(abs(p.exitcode) for p in procs))
"""

PKG = os.path.join(os.path.dirname(__file__), "..", "..", "python")


def ours(d):
    return [n for n in os.listdir(d) if n.startswith("stoker-")]


@pytest.mark.parametrize("cache", ["ram", "decoded"])
def test_ranks_share_one_cache_with_the_same_batches(photos, tmp_path, cache):
    world = 3
    script = tmp_path / "ranks.py"
    script.write_text(SCRIPT)
    shm = tempfile.mkdtemp(prefix="stoker-test-", dir="/dev/shm")
    try:
        for share in ("off", "on"):
            subprocess.run([sys.executable, str(script), str(world), PKG, photos, cache, share, shm, str(tmp_path)],
                           check=True, timeout=600)
            assert ours(shm) == [], "a shared cache file was left behind"
    finally:
        shutil.rmtree(shm, ignore_errors=True)
    records = 24
    got = {share: [json.load(open(tmp_path / f"{share}_{r}.json")) for r in range(world)] for share in ("off", "on")}
    for r in range(world):
        off, on = np.load(tmp_path / f"off_{r}.npz"), np.load(tmp_path / f"on_{r}.npz")
        assert sorted(off.files) == sorted(on.files) and off.files
        for k in off.files:
            assert np.array_equal(off[k], on[k]), (r, k)
        assert got["off"][r]["shared_cache"].startswith("off: share_cache=")
        assert got["on"][r]["shared_cache"].startswith("shared: " + shm + "/stoker-")
        assert got["on"][r]["cache_mode"] == cache
        assert got["on"][r]["cache_rewrite"] == ("done" if cache == "ram" else "off")
    on = got["on"]
    # Every record in the node's cache once: the ranks' fills add up to it.
    assert [s["shared_cache_entries"] for s in on] == [records] * world
    assert sum(s["shared_cache_filled"] for s in on) == records
    if cache == "ram":  # per-process caches: each preload stored every record in its own
        assert [s["cache_records"] for s in got["off"]] == [records] * world
        # The node's segment holds the set once, rewritten (each record rewritten before it was stored, never
        # replaced: no original left as a hole): within 1.1x of a per-process cache's entries after its rewrite.
        own = got["off"][0]
        assert own["cache_rewrite"] == "done" and own["cache_rewritten"] > 0
        assert sum(s["cache_rewritten"] for s in on) == own["cache_rewritten"]
        assert 0.9 * own["cache_bytes"] <= on[0]["shared_cache_bytes"] <= 1.1 * own["cache_bytes"]
    # The second epoch found in the node's cache every record held when it began, whoever stored it (each
    # record is read once an epoch by one rank). NOTE: not every record: cache="ram" stores a record of local
    # files only in its final form (the first epoch those it rewrites, the preload at idle priority and the
    # second epoch the rest), and cache="decoded" a rank's first batch later in its first epoch
    # (sample_maker.cc, fill_deferred).
    held = min(s["held"]["entries"] for s in on)
    assert held > 0 and sum(s["cache_hits"] - s["held"]["hits"] for s in on) >= held
    assert all(s["shared_cache_hits"] == s["cache_hits"] for s in on)


def same(a, b):
    return len(a) == len(b) and all(np.array_equal(x, z) and np.array_equal(y, w) for (x, y), (z, w) in zip(a, b))


def epoch_of(loader, e):
    loader.set_epoch(e)
    return [(np.array(x), np.array(y)) for x, y in loader]


TF = [stoker.RandomResizedCrop(32)]


def test_one_process_shares_on_request_and_removes_the_file(photos):
    shm = tempfile.mkdtemp(prefix="stoker-test-", dir="/dev/shm")
    try:
        plain = stoker.Loader(photos, batch_size=5, shuffle=True, transforms=TF, output="numpy")
        # NOTE: without the rewrite, which b would do on its hits (its replacements then charged to b).
        a = stoker.Loader(photos, batch_size=5, shuffle=True, transforms=TF, output="numpy", cache="ram",
                          preload=False, cache_rewrite=False, share_cache="on", share_cache_dir=shm, progress=False)
        b = stoker.Loader(photos, batch_size=5, shuffle=True, transforms=TF, output="numpy", cache="ram",
                          preload=False, cache_rewrite=False, share_cache="on", share_cache_dir=shm, progress=False)
        assert a.stats()["shared_cache"].startswith("shared: ") and "(created" in a.stats()["shared_cache"]
        assert "(attached" in b.stats()["shared_cache"]
        assert same(epoch_of(plain, 0), epoch_of(a, 0))
        assert same(epoch_of(plain, 1), epoch_of(b, 1))  # b reads what a stored
        sa, sb = a.stats(), b.stats()
        assert sa["shared_cache_filled"] == 24 and sb["shared_cache_filled"] == 0
        assert sb["shared_cache_hits"] == 24 and sb["shared_cache_entries"] == 24
        # Charged once: to the loader that stored the entries.
        assert sb["memory"]["accounts"]["sample_cache"] == 0
        assert sa["memory"]["accounts"]["sample_cache"] >= sa["shared_cache_bytes"] > 0
        assert len(ours(shm)) == 1
        del a, b
        assert ours(shm) == []
    finally:
        shutil.rmtree(shm, ignore_errors=True)


def test_other_cache_options_keep_apart_said_once(photos, capfd):
    shm = tempfile.mkdtemp(prefix="stoker-test-", dir="/dev/shm")
    try:
        a = stoker.Loader(photos, batch_size=5, transforms=TF, output="numpy", cache="decoded", cache_max_side=64,
                          share_cache="on", share_cache_dir=shm, progress=False)
        capfd.readouterr()
        b = stoker.Loader(photos, batch_size=5, transforms=TF, output="numpy", cache="decoded", cache_max_side=96,
                          share_cache="on", share_cache_dir=shm, progress=False)
        err = capfd.readouterr().err
        assert err.count("with other cache options") == 1, err
        assert "(created" in b.stats()["shared_cache"]
        assert len(ours(shm)) == 2
        del a, b
        assert ours(shm) == []
    finally:
        shutil.rmtree(shm, ignore_errors=True)


def test_a_directory_that_cannot_hold_it_is_named(photos, tmp_path, monkeypatch, capfd):
    missing = str(tmp_path / "no-such-dir")
    with pytest.raises(OSError, match="no-such-dir.*share_cache=\"off\""):
        stoker.Loader(photos, batch_size=5, transforms=TF, cache="ram", share_cache="on", share_cache_dir=missing)
    # share_cache="auto" with several ranks on the node: one line, and a cache of its own.
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    loader = stoker.Loader(photos, batch_size=5, transforms=TF, output="numpy", cache="ram", preload=False,
                           share_cache_dir=missing, progress=False, memory_budget=64 << 20)
    err = capfd.readouterr().err
    assert err.count("keeps a cache of its own") == 1 and missing in err
    assert loader.stats()["shared_cache"].startswith("off: shared cache: cannot create " + missing)
    plain = stoker.Loader(photos, batch_size=5, transforms=TF, output="numpy")
    assert same(epoch_of(plain, 0), epoch_of(loader, 0))
    assert same(epoch_of(plain, 1), epoch_of(loader, 1))  # the second epoch stores what the first did not rewrite
    assert loader.stats()["cache_records"] == 24
    with pytest.raises(ValueError, match="share_cache must be one of"):
        stoker.Loader(photos, batch_size=5, transforms=TF, cache="ram", share_cache="yes")


@pytest.mark.parametrize("cache", ["ram", "decoded"])
def test_resume_and_elastic_resume_with_a_shared_cache(photos, cache):
    """A job stops mid-epoch and resumes, on as many ranks and on more, while the shared cache lives on: the
    batches are the uninterrupted run's (the cache never changes what a rank yields)."""
    shm = tempfile.mkdtemp(prefix="stoker-test-", dir="/dev/shm")
    kw = dict(batch_size=3, shuffle=True, seed=2, transforms=TF, output="numpy", cache=cache, cache_max_side=4096,
              progress=False)
    try:
        full = epoch_of(stoker.Loader(photos, share_cache="off", **kw), 1)
        a = stoker.Loader(photos, share_cache="on", share_cache_dir=shm, **kw)
        a.set_epoch(1)
        it = iter(a)
        head = [tuple(np.array(t) for t in next(it)) for _ in range(3)]
        state = a.state_dict()
        b = stoker.Loader(photos, share_cache="on", share_cache_dir=shm, seed=9, **{k: v for k, v in kw.items()
                                                                                      if k != "seed"})
        b.load_state_dict(state)
        assert "(attached" in b.stats()["shared_cache"]
        rest = [(np.array(x), np.array(y)) for x, y in b]
        assert same(head + rest, full)
        # Elastic: the rest of the epoch over 2 ranks, each a loader on the same shared cache; together they hand
        # out exactly the records the stopped job had not.
        ranks = [stoker.Loader(photos, share_cache="on", share_cache_dir=shm, rank=r, world_size=2, **kw)
                 for r in range(2)]
        for r in ranks:
            r.load_state_dict(state)
        seen = sorted(int(v) for r in ranks for _, y in r for v in y)
        want = sorted(int(v) for _, y in full[3:] for v in y)
        assert set(seen) == set(want) and len(seen) >= len(want)
        ref = [stoker.Loader(photos, share_cache="off", rank=r, world_size=2, **kw) for r in range(2)]
        for r, q in zip(ranks, ref):
            q.load_state_dict(state)
            r.load_state_dict(state)
            assert same(epoch_of_rest(r), epoch_of_rest(q))
        del a, b, ranks, it, r, q
        gc.collect()
        assert ours(shm) == []
    finally:
        shutil.rmtree(shm, ignore_errors=True)


def epoch_of_rest(loader):
    return [(np.array(x), np.array(y)) for x, y in loader]


KILL_SCRIPT = r"""
import os, signal, sys, time
rank, world, pkg, source, shm, out, mode = int(sys.argv[1]), int(sys.argv[2]), *sys.argv[3:]
os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
sys.path.insert(0, pkg)
import numpy as np
import stoker
loader = stoker.Loader(source, batch_size=3, shuffle=True, seed=5, threads=2, output="numpy", cache="ram",
                       share_cache="on", share_cache_dir=shm, memory_budget=64 << 20, progress=False,
                       cache_max_side=4096, transforms=[stoker.RandomResizedCrop(32), stoker.RandomHorizontalFlip()])
with open(os.path.join(out, f"attached_{rank}_{mode}"), "w") as f:
    f.write(loader.stats()["shared_cache"])
batches = {}
for e in (0, 1):
    loader.set_epoch(e)
    for k, (x, y) in enumerate(loader):
        if mode == "kill" and k == 1:  # mid-epoch, the preload storing (it starts after the first batch)
            os.kill(os.getpid(), signal.SIGKILL)
        batches[f"{e}_{k}_x"], batches[f"{e}_{k}_y"] = np.array(x), np.array(y)
np.savez(os.path.join(out, f"{mode}_{rank}.npz"), **batches)
# Attached until the restarted rank has attached too (a hang guard, not a time bound).
deadline = time.monotonic() + 300
while mode == "normal" and not os.path.exists(os.path.join(out, "attached_2_restart")) and time.monotonic() < deadline:
    time.sleep(0.02)
"""


def test_a_rank_killed_mid_epoch_and_restarted(photos, tmp_path):
    """3 ranks (processes) share cache="ram"; rank 2 is SIGKILLed mid-epoch, while its preload stores: ranks 0 and 1
    finish both epochs with the batches of an uninterrupted per-process run, a restarted rank 2 attaches to the same
    cache and yields its batches too, and nothing is left in the directory once the last process is gone."""
    world = 3
    script = tmp_path / "rank.py"
    script.write_text(KILL_SCRIPT)
    shm = tempfile.mkdtemp(prefix="stoker-test-", dir="/dev/shm")

    def start(rank, mode):
        return subprocess.Popen([sys.executable, str(script), str(rank), str(world), PKG, photos, shm, str(tmp_path),
                                 mode])
    procs = []
    try:
        procs = [start(0, "normal"), start(1, "normal"), start(2, "kill")]
        assert procs[2].wait(timeout=300) == -9
        procs.append(start(2, "restart"))
        assert [p.wait(timeout=300) for p in procs[:2] + procs[3:]] == [0, 0, 0]
        assert ours(shm) == [], "a shared cache file was left behind"
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=60)
        shutil.rmtree(shm, ignore_errors=True)
    attached = {name: (tmp_path / name).read_text() for name in ("attached_0_normal", "attached_2_restart")}
    assert attached["attached_0_normal"].startswith("shared: " + shm + "/stoker-"), attached
    assert "(attached; node-shared: 3 ranks on this node, LOCAL_WORLD_SIZE=3)" in attached["attached_2_restart"], attached
    kw = dict(batch_size=3, shuffle=True, seed=5, threads=2, output="numpy", cache="ram", share_cache="off",
              memory_budget=64 << 20, progress=False, cache_max_side=4096,
              transforms=[stoker.RandomResizedCrop(32), stoker.RandomHorizontalFlip()])
    for rank, mode in ((0, "normal"), (1, "normal"), (2, "restart")):
        ref = stoker.Loader(photos, rank=rank, world_size=world, **kw)
        want = {}
        for e in (0, 1):
            for k, (x, y) in enumerate(epoch_of(ref, e)):
                want[f"{e}_{k}_x"], want[f"{e}_{k}_y"] = x, y
        got = np.load(tmp_path / f"{mode}_{rank}.npz")
        assert sorted(got.files) == sorted(want) and want
        for k in want:
            assert np.array_equal(got[k], want[k]), (rank, k)


DIST_SCRIPT = r"""
import os, socket, sys
import torch.multiprocessing as mp

def rank_main(rank, world, port, pkg, source, shm, out):
    for k in ("LOCAL_WORLD_SIZE", "LOCAL_RANK", "RANK", "WORLD_SIZE"):
        os.environ.pop(k, None)
    sys.path.insert(0, pkg)
    import torch.distributed as dist
    import stoker
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    loader = stoker.Loader(source, batch_size=4, output="numpy", cache="ram", share_cache_dir=shm, progress=False,
                           memory_budget=64 << 20, transforms=[stoker.RandomResizedCrop(32)])
    with open(os.path.join(out, f"dist_{rank}.txt"), "w") as f:
        f.write(loader.stats()["shared_cache"])
    dist.barrier()  # both attached before either detaches
    del loader
    dist.destroy_process_group()

if __name__ == "__main__":
    world, pkg, source, shm, out = int(sys.argv[1]), *sys.argv[2:]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(rank_main, args=(world, port, pkg, source, shm, out), nprocs=world, join=True)
"""


def test_torch_distributed_ranks_on_this_host_share_without_local_world_size(photos, tmp_path):
    """share_cache="auto" under torch.distributed without LOCAL_WORLD_SIZE (mp.spawn, not torchrun): the ranks count
    the group's ranks on this host and share, saying how they counted."""
    pytest.importorskip("torch.distributed")
    script = tmp_path / "dist.py"
    script.write_text(DIST_SCRIPT)
    shm = tempfile.mkdtemp(prefix="stoker-test-", dir="/dev/shm")
    env = {k: v for k, v in os.environ.items() if k not in ("LOCAL_WORLD_SIZE", "LOCAL_RANK", "RANK", "WORLD_SIZE")}
    try:
        subprocess.run([sys.executable, str(script), "2", PKG, photos, shm, str(tmp_path)], check=True, timeout=600,
                       env=env)
        assert ours(shm) == []
    finally:
        shutil.rmtree(shm, ignore_errors=True)
    said = [(tmp_path / f"dist_{r}.txt").read_text() for r in range(2)]
    for text in said:
        assert text.startswith("shared: " + shm + "/stoker-"), said
        assert "node-shared: 2 ranks on this node, torch.distributed: 2 of 2 ranks on host " + socket.gethostname() in text, said
    assert sum("(created; " in t for t in said) == 1, said


def test_cache_auto_decides_with_the_node_budget_when_shared(photos, monkeypatch):
    """cache="auto" with a cache shared by 4 ranks decides with the node's budget (the segment's size: this rank's
    cache room times 4), so a set whose decoded form fits the node but not one rank's share is cached decoded."""
    import re
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    kw = dict(batch_size=4, cache="auto", progress=False, transforms=TF, output="numpy")
    probe = stoker.Loader(photos, share_cache="off", memory_budget=1 << 30, **kw).stats()["cache_auto"]
    decoded_mb = float(re.search(r"(\d+) MB decoded", probe).group(1))
    budget = int(decoded_mb * 1e6 / 2)  # half the decoded set: one rank's share cannot hold it, four can
    shm = tempfile.mkdtemp(prefix="stoker-test-", dir="/dev/shm")
    try:
        own = stoker.Loader(photos, share_cache="off", memory_budget=budget, **kw).stats()
        node = stoker.Loader(photos, share_cache="on", share_cache_dir=shm, memory_budget=budget, **kw).stats()
        assert own["cache_mode"] != "decoded" and node["cache_mode"] == "decoded", (own["cache_auto"], node["cache_auto"])
        assert node["shared_cache"].startswith("shared: ")
        mb = [float(re.search(r"memory_budget (\d+) MB", s["cache_auto"]).group(1)) for s in (own, node)]
        assert abs(mb[1] - 4 * mb[0]) <= 4, mb
        gc.collect()
        assert ours(shm) == []
    finally:
        shutil.rmtree(shm, ignore_errors=True)
