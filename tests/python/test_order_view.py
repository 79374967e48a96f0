"""The epoch's order as a closed form (issue 39 item 2), through the loader.

The numbered records (37, label = record index; as 4 shards too) let each
batch say which records it holds. Ranks are given explicitly (rank,
world_size), so a job of several ranks runs in one process."""
import collections

import pytest

import stoker

KW = dict(transforms=[stoker.CenterCrop(8)], output="numpy")
N = 37


def labels(loader, epoch=2, batches=None):
    loader.set_epoch(epoch)
    out = []
    for _, y in loader:
        out.append([int(v) for v in y])
        if len(out) == batches:
            break
    return out


def flat(batches):
    return [i for b in batches for i in b]


def source(request, kind):
    return request.getfixturevalue("numbered" if kind == "folder" else "numbered_shards")


CASES = [("folder", 0), ("shards", 0), ("shards", 2)]


@pytest.mark.parametrize("kind,window", CASES)
@pytest.mark.parametrize("world", [1, 2, 3, 7, 8])
@pytest.mark.parametrize("drop_last", [False, True])
def test_every_record_once_per_epoch_across_ranks(request, kind, window, world, drop_last):
    src = source(request, kind)
    got = collections.Counter()
    per_rank = set()
    for r in range(world):
        loader = stoker.Loader(src, batch_size=2, shuffle=True, seed=5, rank=r, world_size=world, drop_last=drop_last,
                               shuffle_window=window, threads=1, **KW)
        ids = flat(labels(loader))
        per_rank.add(len(ids))
        got.update(ids)
    assert len(per_rank) == 1, "every rank the same count"
    share = per_rank.pop()
    if drop_last:
        assert max(got.values()) == 1 and len(got) == world * share and N - len(got) < world * 3
    else:
        assert set(got) == set(range(N)) and sum(got.values()) == world * share == world * -(-N // world)


@pytest.mark.parametrize("kind,window", CASES)
def test_identical_for_thread_counts_1_and_2(request, kind, window):
    src = source(request, kind)
    runs = [labels(stoker.Loader(src, batch_size=3, shuffle=True, seed=9, rank=1, world_size=3, shuffle_window=window,
                                 threads=t, **KW)) for t in (1, 2)]
    assert runs[0] == runs[1]
    assert sorted(flat(runs[0])) != flat(runs[0]), "shuffled"


@pytest.mark.parametrize("kind,window", CASES)
def test_exact_resume_mid_epoch(request, kind, window):
    src = source(request, kind)
    kw = dict(batch_size=3, shuffle=True, seed=4, rank=0, world_size=2, shuffle_window=window, threads=2, **KW)
    full = labels(stoker.Loader(src, **kw))
    part = stoker.Loader(src, **kw)
    head = labels(part, batches=2)
    state = part.state_dict()
    assert state["version"] == 4 and state["batches_done"] == 2
    resumed = stoker.Loader(src, **kw)
    resumed.load_state_dict(state)
    assert head + labels(resumed) == full


@pytest.mark.parametrize("kind,window", CASES)
@pytest.mark.parametrize("old,new", [(4, 3), (2, 5)])
def test_elastic_resume(request, kind, window, old, new):
    src = source(request, kind)
    kw = dict(batch_size=2, shuffle=True, seed=6, shuffle_window=window, threads=1, **KW)
    before, states = [], []
    for r in range(old):
        loader = stoker.Loader(src, rank=r, world_size=old, **kw)
        before += flat(labels(loader, batches=2))
        states.append(loader.state_dict())
    assert all(s == states[0] for s in states), "one state for the job"
    after, counts = [], set()
    for r in range(new):
        loader = stoker.Loader(src, rank=r, world_size=new, **kw)
        loader.load_state_dict(states[0])
        ids = flat(labels(loader))
        counts.add(len(ids))
        after += ids
    assert len(counts) == 1, "every new rank the same count"
    assert set(before) | set(after) == set(range(N)), "every record of the epoch handed out"
    assert not set(before) & set(after), "nothing handed out before is handed out again"
    pool = N - len(set(before))
    assert len(set(after)) == pool and len(after) == new * -(-pool // new), "padding only to equal shares"
