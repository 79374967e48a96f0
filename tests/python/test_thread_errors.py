"""An exception on each kind of stoker thread (a worker outside the sample, the
cache="ram" preload, a remote fetcher, a remote index opener) is counted or raised
as documented (src/util/README.md) and the process lives. Injected with
_testing.throw_on_thread(site, at, bad_alloc)."""
import time

import pytest

import stoker

KW = dict(batch_size=4, threads=2, transforms=[stoker.RandomResizedCrop(16)], output="numpy")
SITES = ("worker", "worker_start", "rewrite", "preload", "fetcher", "opener", "pack")


@pytest.fixture()
def inject():
    from stoker._stoker import _testing
    yield _testing.throw_on_thread
    for site in SITES:
        _testing.throw_on_thread(site, -1)


def epoch(loader):
    """Every batch of an epoch as its labels, or the exception it raised."""
    out, it = [], iter(loader)
    while True:
        try:
            out.append([int(v) for v in next(it)[1]])
        except StopIteration:
            return out
        except Exception as e:  # noqa: BLE001: what each batch raised is the point
            out.append(e)


@pytest.mark.parametrize("on_corrupt", ["skip", "raise"])
@pytest.mark.parametrize("bad_alloc", [False, True])
def test_a_workers_exception_outside_the_sample_fails_its_batch_only(inject, numbered, on_corrupt, bad_alloc):
    inject("worker", 2, bad_alloc)
    loader = stoker.Loader(numbered, on_corrupt=on_corrupt, **KW)
    got = epoch(loader)
    inject("worker", -1)
    assert isinstance(got[2], stoker.SampleError) and "worker: batch buffer" in str(got[2])
    assert [b for k, b in enumerate(got) if k != 2] == [list(range(4 * k, min(4 * k + 4, 37))) for k in range(10) if k != 2]
    st = loader.stats()
    assert st["thread_errors"] == {"worker": 1} and st["corrupt"] == 0
    assert sum(len(b) for b in epoch(loader)) == 37, "the next epoch is whole"


def test_a_worker_that_stops_makes_the_loader_raise_never_hang(inject, numbered):
    inject("worker_start", 0)
    loader = stoker.Loader(numbered, batch_size=2, threads=2, transforms=[stoker.RandomResizedCrop(16)])
    deadline = time.monotonic() + 60
    while loader.stats()["thread_errors"].get("worker") != 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    inject("worker_start", -1)
    with pytest.raises(stoker.SampleError, match="worker thread stoker-w0 stopped"):
        for _ in loader:
            pass
    assert sum(len(y) for _, y in stoker.Loader(numbered, **KW)) == 37, "a new loader works"


@pytest.mark.parametrize("bad_alloc", [False, True])
def test_a_preload_exception_stops_the_preload_and_says_so(inject, numbered, bad_alloc):
    inject("preload", 7, bad_alloc)
    loader = stoker.Loader(numbered, cache="ram", cache_rewrite=False, progress=False, **KW)
    deadline = time.monotonic() + 120
    while loader.stats()["cache_preload"] == "loading" and time.monotonic() < deadline:
        time.sleep(0.01)
    inject("preload", -1)
    st = loader.stats()
    assert st["cache_preload"].startswith("error: preload thread: "), st["cache_preload"]
    assert st["thread_errors"] == {"preload": 1}
    assert epoch(loader) == epoch(stoker.Loader(numbered, **KW)), "no batch changes"


@pytest.mark.parametrize("bad_alloc", [False, True])
def test_a_fetchers_exception_is_a_connection_error_at_the_batches_that_need_the_shard(inject, numbered_shards,
                                                                                       bad_alloc):
    inject("fetcher", 1, bad_alloc)  # before the loader: it starts fetching at once
    loader = stoker.Loader("pipe:cat " + numbered_shards, on_corrupt="skip", remote_connections=2, **KW)
    got = epoch(loader)
    inject("fetcher", -1)
    # Shard 1 holds records 10-18: batches 2, 3 and 4.
    raised = [k for k, b in enumerate(got) if isinstance(b, Exception)]
    assert raised == [2, 3, 4], got
    assert all(isinstance(got[k], ConnectionError) and "n-1.tar: fetch: " in str(got[k]) for k in raised)
    st = loader.stats()
    assert st["thread_errors"]["fetcher"] >= 1 and st["corrupt"] == 0
    assert sum(len(b) for b in epoch(loader)) == 37, "the next epoch fetches the shard again"


@pytest.mark.parametrize("bad_alloc", [False, True])
def test_an_openers_exception_is_a_connection_error_of_the_open(inject, numbered_shards, bad_alloc):
    inject("opener", 2, bad_alloc)
    with pytest.raises(ConnectionError, match="n-2.tar"):
        stoker.Loader("pipe:cat " + numbered_shards, remote_connections=4, **KW)
    inject("opener", -1)
    assert sum(len(b) for b in epoch(stoker.Loader("pipe:cat " + numbered_shards, **KW))) == 37


def test_an_unknown_site_is_refused(inject):
    with pytest.raises(ValueError, match="no site 'nowhere'"):
        inject("nowhere", 1)
