"""Exact resume: a restored loader yields exactly the rest of the uninterrupted run."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

import stoker

TF = [stoker.RandomResizedCrop(32), stoker.RandomHorizontalFlip()]


def make(source, threads=2, **kw):
    kw.setdefault("batch_size", 5)
    kw.setdefault("seed", 7)
    return stoker.Loader(source, shuffle=True, transforms=TF, threads=threads, **kw)


def epoch(loader):
    return [(x.clone(), y.clone()) for x, y in loader]


def same(a, b):
    return len(a) == len(b) and all(torch.equal(x0, x1) and torch.equal(y0, y1) for (x0, y0), (x1, y1) in zip(a, b))


@pytest.mark.parametrize("threads_before,threads_after", [(1, 2), (2, 1), (2, 3)])
def test_resume_at_every_breakpoint_equals_uninterrupted(photos, threads_before, threads_after):
    ref = make(photos, threads_before)
    ref.set_epoch(3)
    full = epoch(ref)
    n = len(full)
    for stop in sorted({0, 1, n // 2, n - 1, n}):
        a = make(photos, threads_before, prefetch=2)
        a.set_epoch(3)
        it = iter(a)
        for _ in range(stop):
            next(it)
        state = json.loads(json.dumps(a.state_dict()))  # survives a JSON round trip
        b = make(photos, threads_after, prefetch=5, seed=123)  # the state's seed wins
        b.load_state_dict(state)
        rest = epoch(b)
        if stop == n:
            assert state["epoch"] == 4 and state["batches_done"] == 0
            ref4 = make(photos, threads_before)
            ref4.set_epoch(4)
            assert same(rest, epoch(ref4)), "an epoch that ended resumes at the next one"
        else:
            assert (state["epoch"], state["batches_done"]) == (3, stop)
            assert same(rest, full[stop:]), f"resume after {stop} batches"
        # And the epoch after continues as the uninterrupted run would.
        assert b.epoch == (5 if stop == n else 4)


def test_resume_shard_source(photos, tmp_path):
    cli = os.path.join(os.environ.get("STOKER_BUILD", "build"), "tools", "stoker")
    if not os.path.exists(cli):
        pytest.skip("CLI not built")
    subprocess.run([cli, "pack", photos, str(tmp_path / "s-%02d.tar"), "--shard-count", "3"], check=True,
                   capture_output=True)
    spec = str(tmp_path / "s-{00..02}.tar")
    full = epoch(make(spec))
    a = make(spec)
    it = iter(a)
    next(it), next(it)
    b = make(spec, threads=1)
    b.load_state_dict(a.state_dict())
    assert same(epoch(b), full[2:])


def test_usual_loop_with_set_epoch_resumes_mid_epoch(photos):
    # load_state_dict once, then set_epoch at the top of every epoch: the
    # restored epoch runs from the saved batch on, the next ones in full.
    ref = make(photos)
    want = {}
    for e in (3, 4):
        ref.set_epoch(e)
        want[e] = epoch(ref)
    a = make(photos)
    a.set_epoch(3)
    it = iter(a)
    next(it), next(it), next(it)
    state = a.state_dict()
    b = make(photos, threads=1)
    b.load_state_dict(state)
    got = {}
    for e in (3, 4):
        b.set_epoch(e)
        got[e] = epoch(b)
    assert same(got[3], want[3][3:]), "the restored epoch resumes after its saved batch"
    assert same(got[4], want[4]), "the next epoch runs in full"
    # Another epoch than the restored one drops the position.
    c = make(photos)
    c.load_state_dict(state)
    c.set_epoch(4)
    assert same(epoch(c), want[4])


def test_state_mismatch_raises_clear_errors(photos):
    a = make(photos)
    state = a.state_dict()
    # Another batch_size or world_size is an elastic resume (test_elastic.py);
    # what defines the epoch's records and order is refused.
    with pytest.raises(ValueError, match="dataset_size was .* when saved, is .*the data changed"):
        make(photos).load_state_dict(dict(state, dataset_size=state["dataset_size"] + 1))
    with pytest.raises(ValueError, match="'epoch' must be an integer >= 0, got \"3\""):
        make(photos).load_state_dict(dict(state, epoch="3"))
    with pytest.raises(ValueError, match="'seed' must be an integer >= 0, got -1"):
        make(photos).load_state_dict(dict(state, seed=-1))
    with pytest.raises(ValueError, match="batch_size must be >= 1, got 0"):
        make(photos).load_state_dict(dict(state, batch_size=0))
    with pytest.raises(ValueError, match="the state's earlier part has no 'batches_done'"):
        make(photos).load_state_dict(dict(state, earlier=[{"world_size": 2, "batch_size": 5}]))
    with pytest.raises(ValueError, match="no 'epoch'"):
        make(photos).load_state_dict({k: v for k, v in state.items() if k != "epoch"})
    with pytest.raises(ValueError, match="past the end"):
        make(photos).load_state_dict(dict(state, batches_done=999))


CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import stoker
source, state_path, log_path, slow = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5] == "1"
loader = stoker.Loader(source, batch_size=3, shuffle=True, seed=5, transforms=[stoker.CenterCrop(8)], threads=2)
try:
    loader.load_state_dict(json.load(open(state_path)))
except FileNotFoundError:
    loader.set_epoch(2)
for x, y in loader:
    with open(log_path, "a") as log:          # "train" on the batch, then checkpoint
        log.write(" ".join(str(int(v)) for v in y) + "\n")
    with open(state_path + ".tmp", "w") as f:
        json.dump(loader.state_dict(), f)
    import os; os.replace(state_path + ".tmp", state_path)
    if slow:
        import time; time.sleep(0.05)
    if loader.state_dict()["epoch"] != 2:
        break
"""


def test_killed_process_resumes_with_exactly_the_unseen_samples(numbered, tmp_path):
    pkg = os.path.join(os.path.dirname(__file__), "..", "..", "python")
    state, log = str(tmp_path / "state.json"), str(tmp_path / "log.txt")
    proc = subprocess.Popen([sys.executable, "-c", CHILD, pkg, numbered, state, log, "1"])
    deadline = time.time() + 60
    while time.time() < deadline and (not os.path.exists(log) or len(open(log).read().splitlines()) < 4):
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done_before = len(open(log).read().splitlines())
    assert 4 <= done_before < 13, "killed mid-epoch"
    saved = json.load(open(state))
    k = saved["batches_done"]
    assert saved["epoch"] == 2 and k in (done_before, done_before - 1)  # the kill may land between log and save
    log2 = str(tmp_path / "log2.txt")
    subprocess.run([sys.executable, "-c", CHILD, pkg, numbered, state, log2, "0"], check=True, timeout=120)
    resumed = [[int(v) for v in line.split()] for line in open(log2).read().splitlines()]
    ref = stoker.Loader(numbered, batch_size=3, shuffle=True, seed=5, transforms=[stoker.CenterCrop(8)])
    ref.set_epoch(2)
    want = [[int(v) for v in y] for _, y in ref]
    assert resumed == want[k:], "exactly the batches not yet checkpointed, in order"
    before = [[int(v) for v in line.split()] for line in open(log).read().splitlines()]
    assert before[:k] == want[:k]


def test_a_number_out_of_range_in_a_state_is_a_value_error(photos):
    # nlohmann's out_of_range (a number past a double) is the state's error, not a RuntimeError (fuzz: state_fuzz).
    loader = stoker.Loader(photos, batch_size=4, transforms=[stoker.CenterCrop(8)])
    state = loader.state_dict()
    state["epoch"] = 10 ** 400
    with pytest.raises(ValueError):
        loader.load_state_dict(state)
