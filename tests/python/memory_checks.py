"""The memory budget's invariant, as the tests of each part that holds memory check it (test_cache.py,
test_remote.py, test_volumes.py)."""

ACCOUNTS = {"batch_buffers", "remote_shards", "volume_cache", "sample_cache", "decode_scratch"}


def memory_within(stats, budget):
    """stats()["memory"] holds the named accounts, they sum to `used`, and neither they nor their peak ever
    went above `budget` (memory_budget). Returns the group."""
    m = stats["memory"]
    assert set(m["accounts"]) == ACCOUNTS, m
    assert m["budget"] == budget, m
    assert sum(m["accounts"].values()) == m["used"] <= budget, m
    assert m["peak"] <= budget and m["over_bytes"] == 0, m
    return m


def reserved_before_the_caches(source, **kw):
    """What a loader of these options (its cache mode included) reserves in memory_budget before any cache takes
    a byte: its batch buffers (the deepest ring and the two batches a loop holds) and its workers' decode scratch
    (threads x one record's estimate): a test that means to give a cache N bytes gives memory_budget N plus
    this."""
    import stoker
    r = stoker.Loader(source, **kw).stats()["memory"]["reserved"]
    return r["batch_buffers"] + r["decode_scratch"]


def scratch_reserved(source, **kw):
    """What a loader of these options reserves for its workers' decode scratch (threads x one record's
    estimate)."""
    import stoker
    return stoker.Loader(source, **kw).stats()["memory"]["reserved"]["decode_scratch"]
