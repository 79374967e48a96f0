"""One memory budget per process: every loader left at memory_budget=0 charges the process's limit, resolved once
(a training and a validation loader never take two halves of the memory); a loader given memory_budget has its
own. The C++ side (MemoryBudgetTest) checks that concurrent charges of two loaders never exceed the limit."""
import gc
import os

import stoker
from memory_checks import memory_within, reserved_before_the_caches

KW = dict(batch_size=4, transforms=[stoker.Resize(24), stoker.CenterCrop(24)], dtype="uint8", threads=2,
          progress=False)


def held(loader):
    m = loader.stats()["memory"]
    return sum(max(m["accounts"][a], m["reserved"].get(a, 0)) for a in m["accounts"])


def test_loaders_left_at_zero_share_the_process_budget(numbered):
    # NOTE: no preload and no rewrite: their threads charge the cache in the background, and the
    # sums below compare snapshots taken one after the other.
    train = stoker.Loader(numbered, cache="ram", preload=False, cache_rewrite=False, **KW)
    val = stoker.Loader(numbered, **KW)
    for batch in train:
        pass
    del batch  # a batch keeps its buffer, and the buffer the budget that charged it
    a, b = train.stats()["memory"], val.stats()["memory"]
    assert a["scope"] == b["scope"] == "process"
    assert a["budget"] == b["budget"], "one limit, resolved once"
    assert a["accounts"]["sample_cache"] > 0
    assert b["process_held"] == held(train) + held(val), (a, b)
    assert b["process_held"] <= b["budget"]
    before = b["process_held"]
    mine = held(train)
    del train
    gc.collect()
    assert val.stats()["memory"]["process_held"] == before - mine, "a loader gone gives its bytes back"


def test_a_given_memory_budget_is_the_loaders_own(numbered):
    shared = stoker.Loader(numbered, **KW)
    own = stoker.Loader(numbered, memory_budget=64 << 20, **KW)
    m = own.stats()["memory"]
    assert m["scope"] == "loader" and m["budget"] == 64 << 20 and m["process_held"] == 0, m
    assert shared.stats()["memory"]["process_held"] == held(shared), "the other's bytes are not the process's"


def test_the_workers_decode_scratch_is_an_account_within_the_budget(photos):
    """Each worker's reused buffers (the record's bytes, decoded pixels, transform workspaces) are the
    decode_scratch account, reserved before the cache fills (threads x one record's estimate): with cache="ram"
    under a budget that holds about half the set beside the reservations, the accounts never sum above
    memory_budget after any batch, the workers' scratch stays within its reservation, and the cache took what
    was left."""
    kw = dict(KW, transforms=[stoker.RandomResizedCrop(32)], shuffle=True, seed=3)
    size = sum(os.path.getsize(os.path.join(r, n)) for r, _, names in os.walk(photos) for n in names)
    budget = size // 2 + reserved_before_the_caches(photos, cache="ram", **kw)
    loader = stoker.Loader(photos, cache="ram", memory_budget=budget, **kw)
    m = loader.stats()["memory"]
    assert m["accounts"]["decode_scratch"] == 0 < m["reserved"]["decode_scratch"], "reserved, nothing made yet"
    for epoch in (0, 1):
        loader.set_epoch(epoch)
        for batch in loader:
            m = memory_within(loader.stats(), budget)
            assert 0 < m["accounts"]["decode_scratch"] <= m["reserved"]["decode_scratch"], m
    s = loader.stats()
    assert 0 < s["cache_records"] < 24, "the cache got what the reservations left"
    assert m["accounts"]["sample_cache"] >= s["cache_bytes"] > 0
