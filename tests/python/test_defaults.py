"""stoker.Loader's defaults are C++'s LoaderOptions{} (read through the one options codec), never copies."""
import inspect
import json

import stoker
from stoker import _stoker

# Loader parameters whose Python default stands for C++'s under another spelling.
PYTHON_SPELLING = {
    "rank": (None, 0),            # None: torch.distributed, else RANK, else C++'s 0
    "world_size": (None, 1),
    "image_root": (None, ""),
    "cache_dir": (None, ""),
    "progress": (None, "auto"),
    "transforms": ((), []),
    "fields": (None, []),
    "views": (None, []),
}
# C++ options that stoker.Loader takes through another parameter.
THROUGH = {"volume_transforms": "transforms"}


def test_every_loader_default_is_cpps():
    cpp = json.loads(_stoker._default_options())
    params = inspect.signature(stoker.Loader).parameters
    problems = []
    for key, value in cpp.items():
        name = THROUGH.get(key, key)
        if name not in params:
            problems.append(f"C++ option {key!r} has no stoker.Loader parameter")
            continue
        default = params[name].default
        if key in THROUGH:
            continue
        if name in PYTHON_SPELLING:
            py, c = PYTHON_SPELLING[name]
            if default != py or value != c:
                problems.append(f"{name}: Python {default!r} (expected {py!r}) for C++ {value!r} (expected {c!r})")
        elif default != value or type(default) is not type(value):
            problems.append(f"{name}: Python default {default!r}, C++ default {value!r}")
    assert not problems, problems

