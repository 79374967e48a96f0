"""Elastic resume under torch.distributed (gloo): one state for the job, saved
mid-epoch by 2 ranks and resumed on 1 or 3 ranks (and another batch size):
every record of the epoch handed out exactly once across the job (padding
aside), equal batch counts per rank, and the next epoch a fresh run's."""
import collections
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

import stoker

SCRIPT = r"""
import json, os, sys, time
import torch.distributed as dist
import torch.multiprocessing as mp

def worker(rank, world, port, pkg, source, batch, stop, state_in, out):
    sys.path.insert(0, pkg)
    import stoker
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    if source.startswith("{"):  # a mixture: stoker.Mix's arguments as JSON
        source = stoker.Mix(**json.loads(source))
    loader = stoker.Loader(source, batch_size=batch, shuffle=True, seed=1, transforms=[stoker.CenterCrop(8)],
                           threads=1)
    if state_in:
        loader.load_state_dict(json.load(open(state_in)))
    loader.set_epoch(2)  # the usual loop: a restored epoch keeps its position
    ids, batches = [], 0
    for _, y in loader:
        ids += [int(v) for v in y]
        batches += 1
        with open(f"{out}.log{rank}", "a") as log:   # "train" on the batch ...
            log.write(" ".join(str(int(v)) for v in y) + "\n")
        dist.barrier()                               # ... in step, as DDP's all-reduce keeps ranks
        if rank == 0:                                # then rank 0 checkpoints the job's one state
            with open(out + ".state.tmp", "w") as f:
                json.dump(loader.state_dict(), f)
            os.replace(out + ".state.tmp", out + ".state")
        if stop == -2:
            time.sleep(0.05)                         # slow: the test kills the job meanwhile
        if batches == stop:
            break
    states = [None] * world
    dist.all_gather_object(states, loader.state_dict())
    loader.set_epoch(3)
    nxt = [int(v) for _, y in loader for v in y]
    got = [None] * world
    dist.all_gather_object(got, {"ids": ids, "batches": batches, "next": nxt, "state": states[rank]})
    if rank == 0:
        json.dump({"ranks": got, "states": states}, open(out, "w"))
    dist.barrier()
    dist.destroy_process_group()

if __name__ == "__main__":
    port, world, pkg, source, batch, stop, state_in, out = sys.argv[1:9]
    mp.spawn(worker, args=(int(world), int(port), pkg, source, int(batch), int(stop), state_in, out),
             nprocs=int(world), join=True)
"""

PKG = os.path.join(os.path.dirname(__file__), "..", "..", "python")
N = 37  # the numbered fixture: label = record index


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(tmp_path, name, source, world, batch, stop=-1, state_in=""):
    script = tmp_path / "elastic.py"
    script.write_text(SCRIPT)
    out = str(tmp_path / name)
    subprocess.run([sys.executable, str(script), str(free_port()), str(world), PKG, source, str(batch), str(stop),
                    state_in, out], check=True, timeout=300)
    return json.load(open(out)), out


def fresh(source, world, batch, epoch):
    """A fresh run's ids per rank in `epoch` (one process, rank by rank)."""
    out = []
    if source.startswith("{"):
        source = stoker.Mix(**json.loads(source))
    for r in range(world):
        loader = stoker.Loader(source, batch_size=batch, shuffle=True, seed=1, transforms=[stoker.CenterCrop(8)],
                               threads=1, rank=r, world_size=world)
        loader.set_epoch(epoch)
        out.append([int(v) for _, y in loader for v in y])
    return out


def check_resumed(before_ids, after, world, batch):
    """before_ids: ids handed out before the save (all ranks); after: the resumed run's ranks."""
    after_ids = [i for r in after for i in r["ids"]]
    assert len({r["batches"] for r in after}) == 1, "every new rank the same batch count"
    assert len({len(r["ids"]) for r in after}) == 1, "and the same sample count"
    assert not set(before_ids) & set(after_ids), "nothing handed out before is handed out again"
    assert set(before_ids) | set(after_ids) == set(range(N)), "every record of the epoch handed out"
    pool = N - len(set(before_ids))
    share = -(-pool // world)
    assert len(after_ids) == world * share and len(set(after_ids)) == pool, "padding only to equal shares"
    assert [r["batches"] for r in after][0] == -(-share // batch)


@pytest.mark.parametrize("world,batch,kind", [(1, 4, "folder"), (3, 4, "folder"), (3, 5, "folder"), (3, 4, "shards")])
def test_two_ranks_saved_mid_epoch_resume_on_another_topology(request, tmp_path, world, batch, kind):
    # shards: 4 shards for 2 ranks, so the saved epoch was split by shard
    numbered = request.getfixturevalue("numbered" if kind == "folder" else "numbered_shards")
    saved, _ = run(tmp_path, "a.json", numbered, 2, 4, stop=3)
    states = saved["states"]
    assert states[0] == states[1], "one state for the job: every rank's is the same"
    assert "rank" not in states[0] and states[0]["batches_done"] == 3 and states[0]["world_size"] == 2
    before = [i for r in saved["ranks"] for i in r["ids"]]
    assert len(before) == 2 * 3 * 4 and len(set(before)) == 24
    state_file = str(tmp_path / "state.json")
    json.dump(states[0], open(state_file, "w"))
    resumed, _ = run(tmp_path, "b.json", numbered, world, batch, state_in=state_file)
    check_resumed(before, resumed["ranks"], world, batch)
    # The epoch after: exactly a fresh run's on the new topology.
    assert [r["next"] for r in resumed["ranks"]] == fresh(numbered, world, batch, 3)
    # Resumed on 3, saved again mid-way, resumed on 1: the chain still hands
    # out every record once.
    if (world, batch) == (3, 4):  # 13 records left: 2 batches of 4 per rank, so one is mid-epoch
        part, _ = run(tmp_path, "c.json", numbered, 3, batch, stop=1, state_in=state_file)
        st = part["states"][0]
        assert st["earlier"] == [{"world_size": 2, "batch_size": 4, "batches_done": 3}]
        json.dump(st, open(state_file, "w"))
        last, _ = run(tmp_path, "d.json", numbered, 1, 4, state_in=state_file)
        before2 = before + [i for r in part["ranks"] for i in r["ids"]]
        after2 = [i for r in last["ranks"] for i in r["ids"]]
        assert not set(before2) & set(after2) and set(before2) | set(after2) == set(range(N))


def test_killed_two_rank_job_resumes_on_three(numbered, tmp_path):
    script = tmp_path / "elastic.py"
    script.write_text(SCRIPT)
    out = str(tmp_path / "k.json")
    proc = subprocess.Popen([sys.executable, str(script), str(free_port()), "2", PKG, numbered, "4", "-2", "", out],
                            start_new_session=True)
    deadline = time.monotonic() + 120  # bounded: wait for 3 checkpointed batches
    while time.monotonic() < deadline:
        try:
            if json.load(open(out + ".state"))["batches_done"] >= 3:
                break
        except (OSError, ValueError):
            pass
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)  # the whole job: the launcher and both ranks
    proc.wait()
    state = json.load(open(out + ".state"))
    k = state["batches_done"]
    assert state["epoch"] == 2 and 3 <= k < 5, "killed mid-epoch"
    # What the job had handed out by its last checkpoint: each rank's first k batches.
    before = []
    for r in (0, 1):
        lines = open(f"{out}.log{r}").read().splitlines()
        assert len(lines) >= k
        before += [int(v) for line in lines[:k] for v in line.split()]
    json.dump(state, open(tmp_path / "state.json", "w"))
    resumed, _ = run(tmp_path, "k2.json", numbered, 3, 4, state_in=str(tmp_path / "state.json"))
    check_resumed(before, resumed["ranks"], 3, 4)
    assert [r["next"] for r in resumed["ranks"]] == fresh(numbered, 3, 4, 3)


def test_same_topology_resume_is_exact_and_other_settings_are_refused(numbered):
    kw = dict(batch_size=4, shuffle=True, seed=1, transforms=[stoker.CenterCrop(8)], threads=1)
    ref = stoker.Loader(numbered, **kw)
    ref.set_epoch(2)
    full = [[int(v) for v in y] for _, y in ref]
    a = stoker.Loader(numbered, **kw)
    a.set_epoch(2)
    it = iter(a)
    next(it), next(it)
    state = a.state_dict()
    b = stoker.Loader(numbered, **kw)
    b.load_state_dict(state)
    assert [[int(v) for v in y] for _, y in b] == full[2:]
    with pytest.raises(ValueError, match="shuffle was True when saved, is False"):
        stoker.Loader(numbered, **dict(kw, shuffle=False)).load_state_dict(state)
    with pytest.raises(ValueError, match="drop_last was False when saved, is True"):
        stoker.Loader(numbered, **dict(kw, drop_last=True)).load_state_dict(state)
    with pytest.raises(ValueError, match="batches_done was 99 when saved, is at most 5"):
        stoker.Loader(numbered, **dict(kw, batch_size=3)).load_state_dict(dict(state, world_size=2, batches_done=99))
    # A version-1 state (with a rank, without earlier parts) still parses;
    # mid-epoch of a shuffled epoch it named the old order's records
    # (before version 4), so it is refused by version; at the epoch's start
    # (or without shuffle) it loads.
    old = {k: v for k, v in state.items() if k != "earlier"}
    c = stoker.Loader(numbered, **kw)
    with pytest.raises(ValueError, match="version was 1 when saved, is 4 now; a shuffled epoch's order changed"):
        c.load_state_dict(dict(old, version=1, rank=0))
    c.load_state_dict(dict(old, version=1, rank=0, batches_done=0))
    assert [[int(v) for v in y] for _, y in c] == full
    plain = dict(kw, shuffle=False)
    p = stoker.Loader(numbered, **plain)
    p.load_state_dict(dict(old, version=1, rank=0, shuffle=False))
    ref_plain = stoker.Loader(numbered, **plain)
    ref_plain.set_epoch(2)
    assert [[int(v) for v in y] for _, y in p] == [[int(v) for v in y] for _, y in ref_plain][2:]


def test_inspect_state_says_where_the_epoch_stands(numbered, tmp_path):
    cli = os.path.join(os.environ.get("STOKER_BUILD", "build"), "tools", "stoker")
    if not os.path.exists(cli):
        pytest.skip("CLI not built")
    kw = dict(shuffle=True, seed=1, transforms=[stoker.CenterCrop(8)], threads=1)
    a = stoker.Loader(numbered, batch_size=4, rank=0, world_size=2, **kw)
    a.set_epoch(2)
    it = iter(a)
    next(it), next(it), next(it)
    b = stoker.Loader(numbered, batch_size=4, rank=2, world_size=3, **kw)
    b.load_state_dict(a.state_dict())
    b.set_epoch(2)
    next(iter(b))
    path = tmp_path / "state.json"
    path.write_text(json.dumps(b.state_dict()))
    out = subprocess.run([cli, "inspect-state", str(path)], check=True, capture_output=True, text=True).stdout
    lines = out.splitlines()
    assert lines[0].startswith(f"{path}: epoch 2 of a data set of 37 records (shuffle on, seed 1, drop_last off)")
    # 2 ranks: 19 records each, 5 batches; 3 handed out -> 24 records. 13 left
    # on 3 ranks: blocks of 5 (2 padding), 2 batches; the first batch of each
    # hands out 4 + 4 + 3 new records (the last block's 4th is padding).
    assert lines[1].split() == ["part", "1", "2", "ranks", "x", "batch", "4", "3", "of", "5", "batches", "per", "rank",
                                "handed", "out"]
    assert lines[2].split()[:9] == ["last", "3", "ranks", "x", "batch", "4", "1", "of", "2"]
    assert lines[3] == "records of epoch 2 handed out: 35 of 37; 2 not yet"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(dict(b.state_dict(), epoch="2")))
    r = subprocess.run([cli, "inspect-state", str(bad)], capture_output=True, text=True)
    assert r.returncode == 1 and "'epoch' must be an integer >= 0, got \"2\"" in r.stderr


def test_mixture_saved_on_two_ranks_resumes_on_three(numbered, tmp_path):
    """A mixture's epoch (120 draws: 0.25 of the 37 numbered records, 0.75 of
    a 5-record source labelled 100..104, drawn 18 times each) saved by 2
    ranks after 3 batches of 4, resumed on 3 ranks with batches of 5: the
    draws handed out before and after are the epoch's draws exactly (as a
    multiset: records repeat in a mixture), and the next epoch is a fresh
    3-rank run's."""
    small = tmp_path / "small.csv"
    rows = open(numbered).read().splitlines()[1:6]
    small.write_text("path,label\n" + "".join(f"{r.rsplit(',', 1)[0]},{i}\n" for i, r in enumerate(rows)))
    spec = json.dumps({"sources": {"big": numbered, "small": str(small)}, "weights": {"big": 1, "small": 3},
                       "samples_per_epoch": 120, "label_offset": {"small": 100}})
    saved, _ = run(tmp_path, "m.json", spec, 2, 4, stop=3)
    states = saved["states"]
    assert states[0] == states[1] and states[0]["mixture"][1] == {"name": "small", "size": 5, "count": 90}
    before = [i for r in saved["ranks"] for i in r["ids"]]
    assert len(before) == 24
    state_file = str(tmp_path / "mstate.json")
    json.dump(states[0], open(state_file, "w"))
    resumed, _ = run(tmp_path, "m2.json", spec, 3, 5, state_in=state_file)
    after = [r["ids"] for r in resumed["ranks"]]
    assert [len(a) for a in after] == [32, 32, 32], "96 draws left, 32 per rank, no padding needed"
    assert len({r["batches"] for r in resumed["ranks"]}) == 1
    epoch = [i for r in fresh(spec, 1, 4, 2) for i in r]
    assert collections.Counter(before) + collections.Counter(i for a in after for i in a) == collections.Counter(epoch)
    assert [r["next"] for r in resumed["ranks"]] == fresh(spec, 3, 5, 3)
