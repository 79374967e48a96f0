"""The loader over a mix of good and damaged inputs: every damaged one counted
with the right reason, every good one delivered, nothing crashes."""
import collections
import json
import os
import subprocess
import sys

import pytest

import stoker

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


@pytest.fixture(scope="module")
def corpus(photo_files, tmp_path_factory):
    out = tmp_path_factory.mktemp("corrupt")
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "make_corruption_corpus.py"), *photo_files[:3],
                    "--out", str(out)], check=True, capture_output=True)
    items = json.load(open(out / "manifest.json"))
    tars = [it for it in items if it["expect"] == "open_error"]
    items = [it for it in items if it["expect"] != "open_error"]
    lst = out / "all.csv"
    lst.write_text("path,label\n" + "".join(f"{it['file']},{i}\n" for i, it in enumerate(items)))
    return items, str(lst), tars


def test_every_damaged_input_counted_with_its_reason(corpus):
    items, lst, _ = corpus
    loader = stoker.Loader(lst, batch_size=1, on_corrupt="raise", transforms=[stoker.RandomResizedCrop(16)],
                           max_image_pixels=50_000_000)
    delivered, errors = set(), {}
    it = iter(loader)
    for i in range(len(items)):
        try:
            _, y = next(it)
            delivered.add(int(y[0]))
        except stoker.SampleError as e:
            errors[i] = str(e)
    with pytest.raises(StopIteration):
        next(it)
    want = collections.Counter()
    for i, item in enumerate(items):
        name = os.path.basename(item["file"])
        if item["expect"] == "good":
            assert i in delivered, f"{name} should be delivered: {errors.get(i)}"
        elif item["expect"] == "any":
            assert (i in delivered) != (i in errors), name
            if i in errors:
                want["corrupt"] += 1
        else:
            assert i in errors, f"{name} should fail with {item['expect']}"
            assert name in errors[i], "the message names the file"
            want[item["expect"]] += 1
    stats = loader.stats()
    assert stats["corrupt_by_reason"] == dict(want)
    assert stats["corrupt"] == sum(want.values())
    assert sum(1 for it in items if it["expect"] != "good") >= 60, "a real corpus"


def test_skip_policy_over_the_corpus_delivers_only_good_data(corpus):
    items, lst, _ = corpus
    loader = stoker.Loader(lst, batch_size=8, on_corrupt="skip", transforms=[stoker.RandomResizedCrop(16)],
                           max_image_pixels=50_000_000, threads=2)
    bad = {i for i, it in enumerate(items) if it["expect"] not in ("good", "any")}
    got = [int(v) for _, y in loader for v in y]
    assert len(got) == len(items), "batches stay full"
    assert not set(got) & bad


def test_damaged_tars_fail_to_open_naming_the_shard(corpus):
    _, _, tars = corpus
    assert len(tars) == 5
    for item in tars:
        name = os.path.basename(item["file"])
        with pytest.raises(stoker.SampleError) as e:
            stoker.Loader(item["file"], batch_size=1, transforms=[stoker.CenterCrop(8)])
        assert name in str(e.value) and "offset" in str(e.value), str(e.value)


@pytest.mark.parametrize("bad_alloc", [False, True])
def test_exception_in_a_worker_is_a_counted_sample_error(numbered, bad_alloc):
    """A C++ exception thrown while making a sample (injected on record 5) never
    ends the process: it is that sample's error, counted by reason under the policy."""
    from stoker._stoker import _testing
    reason = "resource_exhausted" if bad_alloc else "internal"
    _testing.throw_in_sample(5, bad_alloc)
    try:
        skip = stoker.Loader(numbered, batch_size=4, threads=2, transforms=[stoker.RandomResizedCrop(16)])
        labels = [int(v) for _, y in skip for v in y]
        assert labels == list(range(5)) + [6] + list(range(6, 37)), "record 6 takes record 5's place"
        assert skip.stats()["corrupt_by_reason"] == {reason: 1}
        raise_ = stoker.Loader(numbered, batch_size=4, threads=2, on_corrupt="raise",
                               transforms=[stoker.RandomResizedCrop(16)])
        it = iter(raise_)
        next(it)
        with pytest.raises(stoker.SampleError, match="record 5 '.*img005.jpg'"):
            next(it)
        assert len(next(it)[1]) == 4, "iteration goes on after it"
    finally:
        _testing.throw_in_sample(-1)
