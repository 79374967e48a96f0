"""shuffle_window: records shuffled within windows of consecutive shards.

The numbered shards (37 records in 4 shards, label = record index) let each
batch say which records it holds; which shard holds a record is read from
the tar files themselves."""
import glob
import os
import tarfile

import pytest

import stoker


def shard_of_label(spec):
    """label -> shard number, from the tars' .cls members."""
    pattern = spec.replace("{0..3}", "*")
    out = {}
    for path in sorted(glob.glob(pattern)):
        k = int(os.path.basename(path).split("-")[1].split(".")[0])
        with tarfile.open(path) as t:
            for m in t.getmembers():
                if m.name.endswith(".cls"):
                    out[int(t.extractfile(m).read())] = k
    return out


def labels(loader, epoch=0):
    loader.set_epoch(epoch)
    return [int(v) for _, y in loader for v in y]


def most_open(seq, shard):
    """The most shards begun and not yet finished at any point of seq."""
    first, last = {}, {}
    for t, r in enumerate(seq):
        first.setdefault(shard[r], t)
        last[shard[r]] = t
    return max(sum(first[s] <= t <= last[s] for s in first) for t in range(len(seq)))


KW = dict(batch_size=5, transforms=[stoker.CenterCrop(8)], output="numpy")


def test_without_shuffle_the_order_is_unchanged(numbered_shards):
    plain = labels(stoker.Loader(numbered_shards, **KW))
    for w in (1, 2, 3):
        assert labels(stoker.Loader(numbered_shards, shuffle_window=w, **KW)) == plain


@pytest.mark.parametrize("window", [1, 2])
def test_each_record_once_at_most_window_shards_at_a_time(numbered_shards, window):
    shard = shard_of_label(numbered_shards)
    assert sorted(set(shard.values())) == [0, 1, 2, 3]
    loader = stoker.Loader(numbered_shards, shuffle=True, seed=3, shuffle_window=window, threads=2, **KW)
    epochs = [labels(loader, e) for e in range(3)]
    for seq in epochs:
        assert sorted(seq) == list(range(37))
        assert most_open(seq, shard) <= window
    assert epochs[0] != epochs[1]
    # A function of (seed, epoch): another loader, one thread, same batches.
    assert labels(stoker.Loader(numbered_shards, shuffle=True, seed=3, shuffle_window=window, threads=1, **KW), 1) \
        == epochs[1]
    # Within a window the records are shuffled, not in shard order.
    assert any(seq != sorted(seq, key=lambda r: (shard[r], r)) for seq in epochs)


def test_two_ranks_cover_the_epoch_each_reading_window_shards_at_a_time(numbered_shards):
    shard = shard_of_label(numbered_shards)
    seqs = [labels(stoker.Loader(numbered_shards, shuffle=True, seed=1, shuffle_window=1, rank=r, world_size=2,
                                 drop_last=True, **KW), 2) for r in range(2)]
    assert len(seqs[0]) == len(seqs[1]) and not set(seqs[0]) & set(seqs[1])
    for seq in seqs:
        assert most_open(seq, shard) <= 1


def test_resume_is_exact_and_the_state_names_the_window(numbered_shards):
    kw = dict(shuffle=True, seed=8, shuffle_window=2, **KW)
    full = stoker.Loader(numbered_shards, **kw)
    full.set_epoch(1)
    want = [y.tolist() for _, y in full]
    part = stoker.Loader(numbered_shards, **kw)
    part.set_epoch(1)
    it = iter(part)
    got = [next(it)[1].tolist() for _ in range(3)]
    state = part.state_dict()
    assert state["version"] == 4 and state["shuffle_window"] == 2
    resumed = stoker.Loader(numbered_shards, **kw)
    resumed.load_state_dict(state)
    got += [y.tolist() for _, y in resumed]
    assert got == want
    other = stoker.Loader(numbered_shards, shuffle=True, seed=8, **KW)
    with pytest.raises(ValueError, match="shuffle_window was 2 when saved, is 0 now"):
        other.load_state_dict(state)
    assert "shuffle_window" not in other.state_dict() and other.state_dict()["version"] == 4


def test_refused_without_shards(numbered):
    with pytest.raises(ValueError, match="shuffle_window: needs tar shards"):
        stoker.Loader(numbered, shuffle=True, shuffle_window=2, **KW)
    with pytest.raises(ValueError, match="shuffle_window"):
        stoker.Loader(numbered, shuffle_window=-1, **KW)
