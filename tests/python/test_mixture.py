"""stoker.Mix: weighted mixtures of data sets. Samples are identified by their
labels (the numbered fixture: label = record index; a second source offset
by 1000), so every test checks which records were drawn, against the rules
of include/stoker/mixture.h."""
import collections
import json
import math
import os
import subprocess

import numpy as np
import pytest

import stoker

N = 37  # the numbered fixture's records
OFFSET = 1000


@pytest.fixture(scope="module")
def small(numbered, tmp_path_factory):
    """A second source: 11 of the numbered files, labels 0..10."""
    d = tmp_path_factory.mktemp("small")
    rows = [line for line in open(numbered).read().splitlines()[1:12]]
    path = str(d / "small.csv")
    with open(path, "w") as f:
        f.write("path,label\n")
        for i, row in enumerate(rows):
            f.write(f"{row.rsplit(',', 1)[0]},{i}\n")
    return path


def mix(numbered, small, **kw):
    args = dict(weights={"big": 0.3, "small": 0.7}, samples_per_epoch=200, label_offset={"small": OFFSET})
    args.update(kw)
    return stoker.Mix({"big": numbered, "small": small}, **args)


KW = dict(batch_size=8, transforms=[stoker.CenterCrop(8)], output="numpy")


def labels(loader, epoch):
    loader.set_epoch(epoch)
    return [int(v) for _, y in loader for v in y]


def test_each_epoch_holds_the_weights_and_sources_are_walked_without_replacement(numbered, small):
    loader = stoker.Loader(mix(numbered, small), shuffle=True, seed=3, **KW)
    assert loader.dataset_size == 200 and len(loader) == 25
    drawn = {"small": collections.Counter(), "big": collections.Counter()}
    for epoch in range(6):
        got = labels(loader, epoch)
        assert len(got) == 200
        small_ids = [v - OFFSET for v in got if v >= OFFSET]
        big_ids = [v for v in got if v < OFFSET]
        assert len(small_ids) == 140 and len(big_ids) == 60, "0.7 and 0.3 of 200 draws, every epoch"
        assert set(small_ids) <= set(range(11)) and set(big_ids) <= set(range(N))
        drawn["small"].update(small_ids)
        drawn["big"].update(big_ids)
        # Draws so far are whole passes of a permutation and a prefix of the
        # next: every record floor or ceil of draws / size times.
        for name, size, per_epoch in (("small", 11, 140), ("big", N, 60)):
            total = per_epoch * (epoch + 1)
            counts = [drawn[name][r] for r in range(size)]
            assert set(counts) <= {total // size, -(-total // size)}, (name, epoch, counts)
    assert loader.stats()["mixture"] == [
        {"name": "big", "weight_share": pytest.approx(0.3), "per_epoch": 60, "drawn": 360},
        {"name": "small", "weight_share": pytest.approx(0.7), "per_epoch": 140, "drawn": 840}]


def test_without_weights_the_mixture_is_a_concatenation(numbered, small):
    loader = stoker.Loader(stoker.Mix({"big": numbered, "small": small}, label_offset={"small": OFFSET}),
                           shuffle=False, **KW)
    assert loader.dataset_size == N + 11
    assert labels(loader, 0) == list(range(N)) + [OFFSET + i for i in range(11)]
    shuffled = stoker.Loader(stoker.Mix({"big": numbered, "small": small}, label_offset={"small": OFFSET}),
                             shuffle=True, seed=1, **KW)
    for epoch in (0, 1):
        assert sorted(labels(shuffled, epoch)) == list(range(N)) + [OFFSET + i for i in range(11)]


def test_source_frequencies_in_a_large_epoch_match_the_weights(numbered, small):
    """A rank's share of a 12000-draw epoch, and its first 50 batches: the
    count of each source within the binomial 99.9% bound (3.29 standard
    deviations; the draws are without replacement from the epoch, whose
    variance is smaller). Fixed seed."""
    m = stoker.Mix({"big": numbered, "small": small}, weights={"big": 2, "small": 1}, samples_per_epoch=12000,
                   label_offset={"small": OFFSET})
    loader = stoker.Loader(m, shuffle=True, seed=5, rank=1, world_size=3,
                           fields=[stoker.Label("label"), stoker.Label("source", member=stoker.Mix.SOURCE)],
                           batch_size=40, output="numpy")
    sources, labs = [], []
    for b in loader:
        sources += b["source"].tolist()
        labs += b["label"].tolist()
    assert len(sources) == 4000
    assert [s == 1 for s in sources] == [v >= OFFSET for v in labs], "the source index is the sample's source"
    for window in (sources[:2000], sources):
        n, p = len(window), 2 / 3
        assert abs(window.count(0) - n * p) <= 3.29 * math.sqrt(n * p * (1 - p)), (window.count(0), n)


def test_deterministic_whatever_the_threads_and_a_repeated_record_is_augmented_anew(numbered, small):
    kw = dict(KW, transforms=[stoker.RandomResizedCrop(16), stoker.RandomHorizontalFlip()], shuffle=True, seed=9)
    a = stoker.Loader(mix(numbered, small), threads=1, **kw)
    b = stoker.Loader(mix(numbered, small), threads=2, prefetch=5, **kw)
    for epoch in (0, 4):
        a.set_epoch(epoch)
        b.set_epoch(epoch)
        for (xa, ya), (xb, yb) in zip(a, b):
            np.testing.assert_array_equal(ya, yb)
            np.testing.assert_array_equal(xa, xb)
    # The small source's 11 records are each drawn 12 or 13 times an epoch:
    # each draw has its own crop.
    a.set_epoch(1)
    by_record = collections.defaultdict(list)
    for x, y in a:
        for img, lab in zip(x, y):
            by_record[int(lab)].append(img.copy())
    repeats = [v for k, v in by_record.items() if k >= OFFSET]
    assert all(len(v) >= 12 for v in repeats)
    assert all(len({img.tobytes() for img in v}) > len(v) // 2 for v in repeats)


def test_labels_offset_and_mapped_and_an_unmapped_label_is_counted(numbered, small):
    m = mix(numbered, small, label_offset=None, label_map={"small": {i: 500 + i for i in range(10)}})
    loader = stoker.Loader(m, shuffle=True, seed=0, on_corrupt="skip", **KW)
    got = labels(loader, 0)
    assert set(got) - set(range(N)) <= {500 + i for i in range(10)}
    st = loader.stats()
    # record 10 of "small" has label 10, not in the map: an error of that sample, counted, never -1 in a batch
    assert st["corrupt"] > 0 and st["corrupt_by_reason"] == {"corrupt": st["corrupt"]}
    assert "label 10 is not in its label_map" in st["corrupt_examples"][0]
    assert -1 not in got
    raising = stoker.Loader(m, shuffle=True, seed=0, on_corrupt="raise", **KW)
    with pytest.raises(stoker.SampleError, match="not in its label_map"):
        labels(raising, 0)


def test_mixture_resume_is_exact_and_epochs_are_a_function_of_seed_and_epoch(numbered, small):
    kw = dict(KW, transforms=[stoker.RandomResizedCrop(16)], shuffle=True, seed=2)
    ref = stoker.Loader(mix(numbered, small), **kw)
    runs = {e: [(x.copy(), y.copy()) for x, y in (ref.set_epoch(e) or ref)] for e in (0, 1, 2)}
    # Epoch 2 of a fresh loader is epoch 2 of the run (passes are a closed form).
    fresh = stoker.Loader(mix(numbered, small), **kw)
    fresh.set_epoch(2)
    for (x, y), (rx, ry) in zip(fresh, runs[2]):
        np.testing.assert_array_equal(y, ry)
        np.testing.assert_array_equal(x, rx)
    a = stoker.Loader(mix(numbered, small), **kw)
    a.set_epoch(1)
    it = iter(a)
    for _ in range(7):
        next(it)
    state = json.loads(json.dumps(a.state_dict()))
    assert state["mixture"] == [{"name": "big", "size": N, "count": 60}, {"name": "small", "size": 11, "count": 140}]
    b = stoker.Loader(mix(numbered, small), cache="ram", **kw)
    b.load_state_dict(state)
    b.set_epoch(1)
    rest = [(x.copy(), y.copy()) for x, y in b]
    assert len(rest) == len(runs[1]) - 7
    for (x, y), (rx, ry) in zip(rest, runs[1][7:]):
        np.testing.assert_array_equal(y, ry)
        np.testing.assert_array_equal(x, rx)
    after = [y.copy() for _, y in b]  # the epoch after: the uninterrupted run's epoch 2
    assert [list(y) for y in after] == [list(y) for _, y in runs[2]]


def test_a_state_of_another_mixture_or_of_one_data_set_is_refused(numbered, small):
    a = stoker.Loader(mix(numbered, small), shuffle=True, **KW)
    state = a.state_dict()
    other = stoker.Loader(mix(numbered, small, weights={"big": 0.5, "small": 0.5}), shuffle=True, **KW)
    with pytest.raises(ValueError, match=r"the source was a mixture of 'big' \(37 records, 60 per epoch\).*"
                                         r"is a mixture of 'big' \(37 records, 100 per epoch\)"):
        other.load_state_dict(state)
    plain = stoker.Loader(numbered, shuffle=True, **KW)
    with pytest.raises(ValueError, match="is one data set now"):
        plain.load_state_dict(state)
    with pytest.raises(ValueError, match="the source was one data set when saved"):
        a.load_state_dict(plain.state_dict())


def test_bad_mixtures_are_refused_naming_what(numbered, small):
    with pytest.raises(ValueError, match="non-empty dict"):
        stoker.Mix({})
    with pytest.raises(ValueError, match="'small' has none"):
        stoker.Mix({"big": numbered, "small": small}, weights={"big": 1})
    with pytest.raises(ValueError, match="names 'nope', which is not a source"):
        stoker.Mix({"big": numbered}, label_offset={"nope": 3})
    with pytest.raises(ValueError, match="samples_per_epoch must be an integer >= 1"):
        stoker.Mix({"big": numbered}, samples_per_epoch=0)
    with pytest.raises(ValueError, match="source 'big': the weight must be >= 0"):
        stoker.Loader(stoker.Mix({"big": numbered, "small": small}, weights={"big": -1, "small": 1}), **KW)
    with pytest.raises(ValueError, match="the weights must not all be 0"):
        stoker.Loader(stoker.Mix({"big": numbered, "small": small}, weights={"big": 0, "small": 0}), **KW)
    with pytest.raises(FileNotFoundError, match="mixture source 'gone'"):
        stoker.Loader(stoker.Mix({"big": numbered, "gone": "/nonexistent/x.csv"}), **KW)
    with pytest.raises(ValueError, match="stoker.Mix"):
        stoker.Loader({"big": numbered}, **KW)
    # Zero weight: the source is there, never drawn.
    z = stoker.Loader(stoker.Mix({"big": numbered, "small": small}, weights={"big": 1, "small": 0},
                                 label_offset={"small": OFFSET}), **KW)
    assert max(labels(z, 0)) < N and z.dataset_size == N + 11


def test_inspect_state_reports_each_source(numbered, small, tmp_path):
    cli = os.path.join(os.environ.get("STOKER_BUILD", "build"), "tools", "stoker")
    if not os.path.exists(cli):
        pytest.skip("CLI not built")
    a = stoker.Loader(mix(numbered, small), shuffle=True, seed=4, **KW)
    a.set_epoch(3)
    it = iter(a)
    seen = [next(it)[1] for _ in range(5)]
    big = sum(int((y < OFFSET).sum()) for y in seen)
    path = tmp_path / "state.json"
    path.write_text(json.dumps(a.state_dict()))
    out = subprocess.run([cli, "inspect-state", str(path)], check=True, capture_output=True, text=True).stdout
    assert "epoch 3 of a mixture of 200 draws per epoch" in out
    assert (f"source 0 'big': 37 records, 60 draws per epoch; {big} of them handed out in epoch 3; "
            f"180 draws before it (4.86 passes)") in out
    assert (f"source 1 'small': 11 records, 140 draws per epoch; {40 - big} of them handed out in epoch 3; "
            f"420 draws before it (38.18 passes)") in out
    assert "draws of epoch 3 handed out: 40 of 200; 160 not yet" in out
