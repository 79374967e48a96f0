"""stats() against the one stats table (src/stats/stats_table.cc): every key
the dict has is a stat of the table with a doc, and every stat of the table is
a key (groups and their items included); the dict is stats_json() parsed; the
reference page docs/stats.md is the table's."""
import json
import os
import sys

import stoker
from stoker import _stoker

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import stats_doc  # noqa: E402

KINDS = {"counter", "gauge", "seconds", "bytes", "string", "list of strings", "counts by name", "group",
         "list of groups"}
PY_TYPES = {"counter": int, "gauge": (int, float), "seconds": float, "bytes": int, "string": str,
            "list of strings": list, "counts by name": dict, "group": (dict, type(None)), "list of groups": list}


def check(d, table, where=""):
    """d's keys are the table's names; each value has its stat's type; groups recursively."""
    assert set(d) == {s["name"] for s in table}, where
    for s in table:
        assert s["kind"] in KINDS and len(s["doc"]) > 8 and s["from"], (where, s)
        v = d[s["name"]]
        assert isinstance(v, PY_TYPES[s["kind"]]), (where + s["name"], v)
        if s["kind"] == "group" and v is not None:
            check(v, s["fields"], where + s["name"] + ".")
        if s["kind"] == "list of groups":
            for item in v:
                check(item, s["fields"], where + s["name"] + "[].")


def test_every_key_of_stats_is_in_the_table_and_the_other_way(numbered):
    # A mixture under cache="ram": per_thread, mixture rows and the cache's stats filled.
    loader = stoker.Loader(stoker.Mix({"a": numbered, "b": numbered}), batch_size=8, threads=2,
                           cache="ram", transforms=[stoker.RandomResizedCrop(16)],
                           preload=False)  # NOTE: no preload filling the cache later: two reads of the stats agree
    for _ in loader:
        pass
    s = loader.stats()
    assert s["per_thread"] and len(s["mixture"]) == 2 and s["cache_mode"] == "ram"
    check(s, _stoker._stats_table())
    # The C++ dict is stats_json() parsed; the Python Loader adds its own (h2d_s, h2d_bytes, python_transforms).
    added = {t["name"] for t in _stoker._stats_table() if t["from"] == "stoker.Loader (Python)"}
    assert added == {"h2d_s", "h2d_bytes", "python_transforms"}
    inner = json.loads(loader._impl.stats_json())
    assert set(inner) == set(s) - added
    assert {k: v for k, v in s.items() if k not in added and k not in ("wall_s",)} == \
        {k: v for k, v in inner.items() if k != "wall_s"}


def test_the_reference_page_is_the_table():
    with open(stats_doc.PAGE) as f:
        page = stats_doc.current(f.read())
    assert page is not None, "docs/stats.md lost its generated table's markers"
    assert page == stats_doc.render(_stoker._stats_table()), \
        "docs/stats.md is not the stats table's: run scripts/stats_doc.py (see its docstring)"
    for s in _stoker._stats_table():
        assert f"| `{s['name']}` |" in page
