"""stoker doctor's sitecustomize: times torch DataLoader loops with no change to the program.

`stoker doctor -- CMD` prepends this directory to CMD's PYTHONPATH (with
STOKER_DOCTOR=<channel dir> set), so every Python process it starts imports
this module at startup, in place of the first other sitecustomize on sys.path.
It then:

1. runs that other sitecustomize (Debian's, a virtualenv's, the user's), as the
   module `sitecustomize`, exactly as Python would have without this one (its
   errors are reported by site.py as they would have been);
2. only when STOKER_DOCTOR is set: puts a finder on sys.meta_path that waits for
   the program to import torch.utils.data.dataloader (torch's own __init__
   does). Nothing else is imported until then: torch is never imported from
   here. When it is, ../_profiling.py is loaded by path as the private module
   _stoker_autoprofile (not through the stoker package, whose __init__ loads the
   C++ extension) and its patch_dataloader() times every DataLoader iteration,
   publishing profile-<pid>-<n>.json snapshots into STOKER_DOCTOR like
   stoker.profile, with "auto": true.

Our own errors never reach the program: at most one line on stderr.
"""
import os
import sys

try:  # the import system's own classes, already loaded: importlib.util would add ~4 ms to every start
    from _frozen_importlib import module_from_spec as _stoker_module_from_spec
    from _frozen_importlib_external import PathFinder as _StokerPathFinder
except ImportError:  # not CPython
    from importlib.machinery import PathFinder as _StokerPathFinder
    from importlib.util import module_from_spec as _stoker_module_from_spec

_STOKER_TARGET = "torch.utils.data.dataloader"
_STOKER_MODULE = "_stoker_autoprofile"  # the name _profiling.py knows its doctor copy by
_stoker_warned = []


def _stoker_warn(what, e):
    """One line on stderr, once per process (the loaded _profiling.py shares the flag: _auto_warned)."""
    mod = sys.modules.get(_STOKER_MODULE)
    if _stoker_warned or getattr(mod, "_auto_warned", False):
        return
    _stoker_warned.append(e)
    if mod is not None:
        mod._auto_warned = True
    try:
        sys.stderr.write(f"stoker doctor: {what}: {type(e).__name__}: {e}\n")
    except Exception:  # noqa: BLE001
        pass


def _stoker_profiling_path():
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(os.path.dirname(here), "_profiling.py")  # python/stoker/_doctor_site/../_profiling.py
    if os.path.isfile(path):
        return path
    spec = _StokerPathFinder.find_spec("stoker")  # this directory copied elsewhere: stoker on sys.path, not imported
    for d in (spec and spec.submodule_search_locations) or ():
        if os.path.isfile(os.path.join(d, "_profiling.py")):
            return os.path.join(d, "_profiling.py")
    raise FileNotFoundError("stoker's _profiling.py, next to " + here)


def _stoker_patch(dataloader_module):
    try:
        mod = sys.modules.get(_STOKER_MODULE)
        if mod is None:
            import importlib.util
            spec = importlib.util.spec_from_file_location(_STOKER_MODULE, _stoker_profiling_path())
            mod = importlib.util.module_from_spec(spec)
            sys.modules[_STOKER_MODULE] = mod
            try:
                spec.loader.exec_module(mod)
            except BaseException:
                del sys.modules[_STOKER_MODULE]
                raise
            mod._auto_warned = bool(_stoker_warned)
        mod.patch_dataloader(dataloader_module)
    except Exception as e:  # noqa: BLE001
        _stoker_warn("DataLoader loops not timed", e)


class _StokerLoader:
    """The real loader of torch.utils.data.dataloader, patching the module once it has run."""

    def __init__(self, loader):
        self._loader = loader

    def __getattr__(self, name):
        return getattr(self._loader, name)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        try:
            module.__loader__ = self._loader
            if module.__spec__ is not None:
                module.__spec__.loader = self._loader
            sys.meta_path.remove(_stoker_finder)
        except Exception:  # noqa: BLE001
            pass
        _stoker_patch(module)


class _StokerFinder:
    """On sys.meta_path: answers only for torch.utils.data.dataloader, with the
    spec the other finders give, its loader wrapped to patch after it runs."""

    def find_spec(self, name, path=None, target=None):
        if name != _STOKER_TARGET:
            return None
        try:
            for finder in sys.meta_path:
                find = getattr(finder, "find_spec", None)
                if finder is self or find is None:
                    continue
                spec = find(name, path, target)
                if spec is not None:
                    if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                        spec.loader = _StokerLoader(spec.loader)
                    return spec
        except Exception as e:  # noqa: BLE001
            _stoker_warn("DataLoader loops not timed", e)
        return None

    def invalidate_caches(self):
        pass


def _stoker_next_sitecustomize():
    """The spec of the sitecustomize this one hides: the first on sys.path after this directory."""

    def ours(p):
        try:
            return os.path.realpath(p or os.curdir) == here
        except Exception:  # noqa: BLE001
            return False

    here = os.path.realpath(os.path.dirname(os.path.abspath(__file__)))
    first = next((i for i, p in enumerate(sys.path) if ours(p)), -1)
    rest = [p for p in sys.path[first + 1:] if isinstance(p, str) and not ours(p)]
    spec = _StokerPathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return None
    if spec.origin and os.path.realpath(spec.origin) == os.path.realpath(__file__):
        return None
    return spec


_stoker_finder = _StokerFinder()
if os.environ.get("STOKER_DOCTOR"):
    try:
        if _STOKER_TARGET in sys.modules:
            _stoker_patch(sys.modules[_STOKER_TARGET])
        else:
            sys.meta_path.insert(0, _stoker_finder)
    except Exception as _e:  # noqa: BLE001
        _stoker_warn("DataLoader loops not timed", _e)

try:
    _stoker_spec = _stoker_next_sitecustomize()
except Exception as _e:  # noqa: BLE001
    _stoker_spec = None
    _stoker_warn("could not look for the sitecustomize this one hides", _e)
if _stoker_spec is not None:
    # As `import sitecustomize` would have run it: sys.modules["sitecustomize"]
    # becomes that module (the import returns it); an exception of its own
    # propagates to site.py, which prints it and carries on, as without us.
    _stoker_other = _stoker_module_from_spec(_stoker_spec)
    sys.modules["sitecustomize"] = _stoker_other
    _stoker_spec.loader.exec_module(_stoker_other)
