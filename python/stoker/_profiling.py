"""stoker.profile, the DataLoader timing stoker doctor injects, and the
process's trace and stats channel.

stoker.profile(iterable) wraps any iterable of batches (a stoker.Loader, a
torch.utils.data.DataLoader, a generator) and measures, per batch, the
consumer's wait inside next() and the step time between batches (the
training step's own work). With STOKER_DOCTOR=<dir> set (stoker doctor
sets it), a snapshot of these numbers replaces <dir>/profile-<pid>-<n>.json
every 0.25 s and at the end; stoker loaders publish their own stats there
from C++. With STOKER_TRACE=<file> set, the process writes a Chrome /
Perfetto trace at exit: every loader's stage spans plus a span per step and
per wait of every profiled iterable, on one clock (CLOCK_MONOTONIC).

Under stoker doctor, python/stoker/_doctor_site/sitecustomize.py loads this
file a second time, by path and under the name _AUTO_MODULE (without
importing stoker, whose __init__ loads the C++ extension), once the program
imports torch.utils.data.dataloader, and calls patch_dataloader(): every
iteration of a torch DataLoader is then measured by the same _Recorder as
stoker.profile and published in the same format, with "auto": true in its
info. The two copies keep their own state: their snapshot ids do not collide,
the DataLoader timing stands aside while a stoker.profile of either copy is
iterating (no loop counted twice), and the trace is written once, by stoker's
copy when the program imported stoker.
"""
import atexit
import functools
import itertools
import json
import mmap
import os
import struct
import sys
import threading
import time
import weakref

_PUBLISH_NS = 250_000_000
_MAX_SPANS = 1 << 18
_AUTO_MODULE = "_stoker_autoprofile"  # the sitecustomize's copy of this file (the same name is in it)
_STOKER_MODULE = "stoker._profiling"
_ids = itertools.count(1 << 20 if __name__ == _AUTO_MODULE else 0)  # profile-<pid>-<id>.json: unique across copies
_loaders = weakref.WeakSet()
_closed_parts = []  # trace events of loaders already destroyed
_recorders = weakref.WeakSet()
_lock = threading.Lock()
_iterating = 0  # stoker.profile iterations in progress (the DataLoader timing stands aside meanwhile)


def _trace_path():
    p = os.environ.get("STOKER_TRACE")
    return p.replace("%p", str(os.getpid())) if p else None


# --- the consumer thread's CPU and its wait for a core ---------------------------
#
# Every batch boundary of a timed loop also reads the consuming thread's CPU time (time.thread_time_ns) and its time
# spent runnable but not running, waiting for a core (the second field of /proc/thread-self/schedstat): the step's
# wall time splits into its CPU, its wait for a core (contention: the input pipeline's workers and other processes
# taking the cores) and the rest (sleeping: a GPU, I/O). stoker doctor predicts the step after a change from this
# split. The step before every 4th batch and that batch's wait are split (three readings, ~2 us each), their
# shares applied to all steps and waits.

_runq_local = threading.local()  # .fd: this thread's /proc/thread-self/schedstat (-1: unreadable)


def _runq_reset_after_fork():
    global _runq_local, _collate_slot
    _runq_local = threading.local()  # the parent's fds name the parent's threads
    _collate_slot = None  # a DataLoader worker: its slot is known once its worker info is set


os.register_at_fork(after_in_child=_runq_reset_after_fork)


def _runq_ns():
    """The calling thread's time waiting on a run queue so far, in ns; -1 when the kernel does not say."""
    fd = getattr(_runq_local, "fd", None)
    if fd is None:
        try:
            fd = os.open("/proc/thread-self/schedstat", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            fd = -1
        _runq_local.fd = fd
    if fd < 0:
        return -1
    try:
        return int(os.pread(fd, 96, 0).split()[1])
    except (OSError, IndexError, ValueError):
        return -1


def _sched_now():
    """(the calling thread's CPU time, its run-queue wait so far or -1), in ns."""
    # NOTE: the run-queue wait first. Read after the thread's CPU clock, it lagged by the wait for a core on
    # waking (Linux 6.18): a step that ran on the CPU throughout was credited milliseconds of it.
    runq = _runq_ns()
    return time.thread_time_ns(), runq


_SCHED_EVERY = 4  # the step before every 4th batch and that batch's wait are split: 3 readings per 4 batches


def register_loader(loader):
    _loaders.add(loader)
    if os.environ.get("STOKER_DOCTOR") and not _stoker_patched:
        try:
            patch_stoker_iterator(sys.modules.get(type(loader).__module__))
        except Exception as e:  # noqa: BLE001 (our error, never the program's)
            _auto_failed(e)


def loader_closing(impl):
    if _trace_path():
        try:
            events = impl.trace_events()
        except Exception:  # noqa: BLE001 (interpreter shutdown)
            return
        if events:
            with _lock:
                _closed_parts.append(events)


def _batch_len(item):
    """Samples in a batch: the first dimension of its first tensor/array."""
    x = item
    for _ in (0, 1, 2):  # issubclass(type(x)): a failed isinstance() also looks up x.__class__ (slow on tensors)
        t = type(x)
        if t is list or t is tuple or issubclass(t, (tuple, list)):
            if not x:
                break
            x = x[0]
        elif issubclass(t, dict) and x:
            x = next(iter(x.values()))
        else:
            break
    shape = getattr(x, "shape", None)
    if shape is not None and len(shape) > 0:
        return int(shape[0])
    try:
        return len(x)
    except TypeError:
        return 1


def _describe(iterable):
    """What the profiled iterable reads, for the doctor's suggestions."""
    d = {"type": type(iterable).__module__ + "." + type(iterable).__name__}
    ds = getattr(iterable, "dataset", None)
    if ds is not None:
        d["dataset"] = type(ds).__module__ + "." + type(ds).__name__
        d["num_workers"] = getattr(iterable, "num_workers", None)
        d["batch_size"] = getattr(iterable, "batch_size", None)
        samples = getattr(ds, "samples", None) or getattr(ds, "imgs", None)
        if isinstance(samples, list) and samples and isinstance(samples[0], tuple):
            step = max(1, len(samples) // 256)
            d["files"] = [os.path.abspath(str(s[0])) for s in samples[::step][:256]]
            d["dataset_size"] = len(samples)
        root = getattr(ds, "root", None)
        if isinstance(root, (str, os.PathLike)):
            d["root"] = os.path.abspath(os.fspath(root))
    impl = getattr(iterable, "_impl", None)
    if impl is not None and hasattr(impl, "trace_events"):
        d["stoker_loader"] = True
    # NOTE: only under the doctor: it imports stoker (its C++ extension) into the program.
    if ds is not None and d["type"].startswith("torch.utils.data") and os.environ.get("STOKER_DOCTOR"):
        try:
            d["port"] = _port_info(ds)
        except Exception:  # noqa: BLE001 (a suggestion's detail: never the program's error)
            pass
    return d


# The import lines a torch/torchvision script changes to run on stoker: (pattern of the name's import, the name,
# stoker's line). Only a line that imports the name from that module qualifies; its other names stay on it.
_PORT_IMPORTS = (
    ("torch.utils.data", "DataLoader", "from stoker import DataLoader"),
    ("torchvision.datasets", "ImageFolder", "from stoker.datasets import ImageFolder"),
    ("torchvision.datasets", "DatasetFolder", "from stoker.datasets import DatasetFolder"),
)


def _port_diff(path):
    """The unified diff that ports the script at `path` to stoker: its `from torch.utils.data import DataLoader`
    and `from torchvision.datasets import ImageFolder` lines (other names on them kept); "" when it has none."""
    import difflib
    import re
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines(keepends=True)
    out = []
    changed = False
    for line in lines:
        new = [line]
        for module, name, stoker_line in _PORT_IMPORTS:
            m = re.match(r"^(\s*)from\s+" + re.escape(module) + r"\s+import\s+([\w\s,]+?)\s*(#.*)?$", new[0])
            if not m:
                continue
            names = [n.strip() for n in m.group(2).split(",") if n.strip()]
            if name not in names:
                continue
            rest = [n for n in names if n != name]
            indent = m.group(1)
            new = ([f"{indent}from {module} import {', '.join(rest)}\n"] if rest else []) + \
                [f"{indent}{stoker_line}\n"]
            changed = True
            break
        out += new
    if not changed:
        return ""
    name = os.path.basename(path)
    return "".join(difflib.unified_diff(lines, out, fromfile=f"a/{name}", tofile=f"b/{name}", n=0))


def _port_info(ds):
    """What the doctor says of porting this DataLoader's script: the diff of its import lines, and the dataset's
    transform as stoker would run it (mapped by stoker; the part that would run as Python named)."""
    out = {}
    # NOTE: stoker (its C++ extension) is imported into the program only for a dataset it could read.
    inner = getattr(ds, "dataset", ds) if type(ds).__name__ == "Subset" else ds
    if not (isinstance(getattr(inner, "samples", None), list) and callable(getattr(inner, "loader", None))):
        return out
    try:
        from stoker import _pystage, _stoker, _torchvision, dataloader
    except ImportError:
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # stoker's package folder's parent
        sys.path.append(here)
        try:
            from stoker import _pystage, _stoker, _torchvision, dataloader
        finally:
            sys.path.remove(here)
    try:
        dataloader._dataset_files(ds)  # only a dataset stoker.DataLoader reads gets the port
    except TypeError:
        return out
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if path and os.path.isfile(path):
        diff = _port_diff(path)
        if diff:
            out["diff"] = diff
    # The script's pipeline, transform by transform (torchvision's class names and parameters), and the part of it
    # stoker runs (what the doctor's probe times): all of it, or the prefix before the first transform it has no
    # kernel for (the rest would run as Python, and is named).
    tf = getattr(ds, "transform", None)
    items = _torchvision._flatten(_pystage.as_list(tf)) if tf is not None else []
    sp = _torchvision.split(items)
    mapped = items[:len(items) - len(sp.tail)]
    out["script_pipeline"] = [_torchvision.describe(t) for t in items]
    out["probed_pipeline"] = [_torchvision.describe(t) for t in mapped]
    if sp.tail:
        out["python"] = ", ".join(t for t, _ in sp.reasons[:1]) + (" and what follows it" if len(sp.tail) > 1 else "")
        out["python_reason"] = sp.reasons[0][1] if sp.reasons and len(sp.reasons[0]) > 1 else ""
    if mapped or not items:
        out["probe"] = {"transforms": [json.loads(j) for j in _stoker._transforms_json(sp.native)],
                        "dtype": sp.dtype or "uint8", "layout": "NCHW"}
    out["pipeline"] = ("the script's transforms: " + " + ".join(out["script_pipeline"])) if items else \
        "the script's dataset has no transform (decode only)"
    return out


class _Recorder:
    """One training loop's numbers: batches, samples, the consumer's wait for
    each batch and the step time between batches, published to the doctor's
    channel (STOKER_DOCTOR) and kept as trace spans (STOKER_TRACE).
    stoker.profile is one; so is every DataLoader timed under stoker doctor.
    An iteration (an epoch) reports each batch to _batch() and its end to _end()."""

    def __init__(self, name, info=None, label=None):
        self.name = name
        self._label = label or f"stoker.profile({name})"
        self._id = next(_ids)
        self._batches = 0
        self._samples = 0
        self._wait_ns = 0
        self._step_ns = 0
        self._start_ns = None
        # Each iteration's set-up (iter(): a DataLoader starting its workers, a stoker.Loader starting its epoch),
        # counted in the wait, and the time between iterations (evaluation, checkpoints, other loops: no step).
        self._setup_ns = 0
        self._between_ns = 0
        self._iterations = 0
        self._ended_ns = None  # when the last iteration ended (its StopIteration, or its last batch's handover)
        # The consuming thread's wall time, CPU time and run-queue wait (see _sched_now) in the sampled steps and
        # waits (the step before every _SCHED_EVERY-th batch and that batch's wait); runq stays known while every
        # reading had it.
        self._sched_step = [0, 0, 0]
        self._sched_wait = [0, 0, 0]
        self._sched_batches = 0
        self._runq_known = True
        self._collate = None  # the shared counters of a DataLoader's timed collate_fn (_TimedCollate)
        self._published_ns = 0
        self._published_batches = -1
        self._published_final = False
        self._channel = os.environ.get("STOKER_DOCTOR") or None
        self._spans = [] if _trace_path() else None
        self._info = info
        _recorders.add(self)

    def _begin(self, t):
        """An iteration (an epoch) starts at t: iter() was called. The time since the last one ended is between
        iterations (evaluation, checkpoints, another loop), never a step."""
        if self._ended_ns is not None and t > self._ended_ns:
            self._between_ns += t - self._ended_ns
        self._ended_ns = None
        self._iterations += 1

    def _batch(self, last, t0, t1, item, setup=None):
        """A batch asked for at t0 arrived at t1; the previous one of this
        iteration was handed over at `last` (None for its first, then
        `setup`: when its iter() was called, the set-up counted as wait)."""
        if last is not None:
            self._step_ns += t0 - last
        else:
            if setup is not None and setup < t0:
                self._setup_ns += t0 - setup
                t0 = setup  # the wait runs from the set-up's start
            if self._start_ns is None:
                self._start_ns = t0
        self._wait_ns += t1 - t0
        self._batches += 1
        self._samples += _batch_len(item)
        if self._spans is not None and len(self._spans) < _MAX_SPANS - 1:
            if last is not None:
                self._spans.append(("step", last, t0 - last))
            self._spans.append(("wait", t0, t1 - t0))
        if self._channel and t1 - self._published_ns >= _PUBLISH_NS:
            self._publish(False, t1)

    def _sample(self, acc, wall, a, b):
        """A sampled step or wait of `wall` ns, from the _sched_now() reading a to b."""
        acc[0] += wall
        acc[1] += b[0] - a[0]
        if a[1] >= 0 and b[1] >= 0:
            acc[2] += b[1] - a[1]
        else:
            self._runq_known = False

    def _end(self, last, t0):
        """The iteration ended: next() raised StopIteration at t0 (the last step ran from `last` to t0)."""
        if self._start_ns is None:
            self._start_ns = t0
        if last is not None:
            self._step_ns += t0 - last
            if self._spans is not None and len(self._spans) < _MAX_SPANS:
                self._spans.append(("step", last, t0 - last))
        self._ended_ns = t0

    def _abandoned(self, last):
        """The iteration ended without StopIteration (the loop broke) after its last batch's handover at `last`."""
        if last is not None and self._ended_ns is None:
            self._ended_ns = last

    def _loop(self):
        """The snapshot's "loop": iterations, their set-up (inside wait_s) and the time between them."""
        return {"iterations": self._iterations, "setup_s": self._setup_ns * 1e-9, "between_s": self._between_ns * 1e-9}

    def _sched_stats(self):
        """The snapshot's "sched": the consuming thread's CPU time and its wait for a core (runnable, not running)
        in the steps and in the waits, as shares of step_s and wait_s measured on `batches` sampled batches
        (the step before every _SCHED_EVERY-th batch and its wait); the run-queue waits are null where the
        kernel gave none (no /proc/thread-self/schedstat)."""
        known = self._runq_known and self._sched_batches > 0
        step, wait = self._step_ns * 1e-9, self._wait_ns * 1e-9
        sw, ww = self._sched_step, self._sched_wait

        def part(total, acc, k):
            return total * acc[k] / acc[0] if acc[0] > 0 else 0.0

        return {"batches": self._sched_batches, "step_cpu_s": part(step, sw, 1),
                "step_runq_s": part(step, sw, 2) if known else None,
                "wait_cpu_s": part(wait, ww, 1), "wait_runq_s": part(wait, ww, 2) if known else None}

    def stats(self):
        wait, step = self._wait_ns * 1e-9, self._step_ns * 1e-9
        wall = 0.0 if self._start_ns is None else (time.monotonic_ns() - self._start_ns) * 1e-9
        out = {"name": self.name, "batches": self._batches, "samples": self._samples, "wait_s": wait,
               "step_s": step, "wall_s": wall, "wait_share": wait / (wait + step) if wait + step > 0 else 0.0}
        # A stoker.Loader timed by the doctor, with device= or pin_memory=: its host-to-device time (as
        # stoker.profile's stats() gives it).
        owner = getattr(self, "_owner", None)
        loader = owner() if owner is not None else None
        h2d = getattr(loader, "_h2d_ns", None)
        if h2d:
            out["h2d_s"] = h2d * 1e-9
            out["h2d_bytes"] = getattr(loader, "_h2d_bytes", 0)
        return out

    def _publish(self, final, now):
        self._published_ns = now
        self._published_batches = self._batches
        self._published_final = final
        snap = {"kind": "profile", "pid": os.getpid(), "id": self._id, "time_ns": now, "final": final,
                "info": self._info or {}, "stats": self.stats(), "loop": self._loop(), "sched": self._sched_stats()}
        if self._collate is not None:
            snap["collate"] = self._collate.totals()
        path = os.path.join(self._channel, f"profile-{os.getpid()}-{self._id}.json")
        try:
            with open(path + ".tmp", "w") as f:
                json.dump(snap, f)
            os.replace(path + ".tmp", path)
        except OSError:
            pass  # the doctor reports a profile that went silent

    def __del__(self):
        if self._spans:
            with _lock:
                _closed_parts.append(self._trace_events(os.getpid()))
            self._spans = None

    def _trace_events(self, pid):
        tid = 2_000_000 + self._id
        out = [json.dumps({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": self._label}})]
        for name, start, dur in self._spans or ():
            out.append(json.dumps({"ph": "X", "name": "training step" if name == "step" else "wait for batch",
                                   "cat": "profile", "pid": pid, "tid": tid, "ts": start / 1000, "dur": dur / 1000}))
        return ",".join(out)


class profile(_Recorder):
    """Measure a training loop's wait for data: wraps an iterable of batches.

    Iterating it iterates ``iterable`` and times, per batch, the consumer's
    wait inside next() and the step between batches (the training step's own
    work). The counts add up over every iteration (epoch) of the wrapper.
    With STOKER_DOCTOR=<dir> set (stoker doctor sets it), a snapshot of them
    replaces <dir>/profile-<pid>-<n>.json every 0.25 s and at the end of each
    iteration; with STOKER_TRACE=<file> set, each wait and each step is a span
    of the process's Chrome / Perfetto trace, written at exit.

    Args:
        iterable (iterable): the batches: a stoker.Loader, a
            torch.utils.data.DataLoader, a generator, ...
        name (str, optional): its name in stats() and in stoker doctor's
            report. Default: the iterable's type name.

    Attributes:
        iterable: as given.
        name (str): as given, or the default.

    Raises:
        Whatever the iterable raises, unchanged; len() raises TypeError when
        the iterable has no len().

    Example:
        >>> p = stoker.profile(torch.utils.data.DataLoader(dataset, batch_size=64, num_workers=8))
        >>> for x, y in p:
        ...     train_step(x, y)
        >>> p.stats()["wait_share"]  # the share of the loop spent waiting for data
        0.41
    """

    def __init__(self, iterable, name=None):
        super().__init__(name or type(iterable).__name__)
        self.iterable = iterable

    def __len__(self):
        """len(iterable): batches per iteration."""
        return len(self.iterable)

    def __iter__(self):
        """Iterates ``iterable``, timing each batch; yields its batches unchanged."""
        global _iterating
        _iterating += 1  # before iter(): a DataLoader's iteration starts there
        try:
            mono = time.monotonic_ns
            setup = mono()
            self._begin(setup)
            it = iter(self.iterable)  # its set-up (starting workers, an epoch) is counted as the first batch's wait
            if self._info is None:
                t = mono()
                self._info = _describe(self.iterable)
                setup += mono() - t  # our own description is no wait of the loop
            last = s_last = None
            try:
                while True:
                    t0 = mono()
                    s0 = _sched_now() if s_last is not None else None
                    try:
                        item = next(it)
                    except StopIteration:
                        if s0 is not None:
                            self._sample(self._sched_step, t0 - last, s_last, s0)
                        self._end(last, t0)
                        return
                    t1 = mono()
                    if s0 is not None:  # a sampled step and wait
                        self._sample(self._sched_step, t0 - last, s_last, s0)
                        self._sample(self._sched_wait, t1 - t0, s0, _sched_now())
                        self._sched_batches += 1
                    self._batch(last, t0, t1, item, setup if last is None else None)
                    last = mono()
                    s_last = _sched_now() if self._batches % _SCHED_EVERY == 0 else None
                    yield item
            finally:
                self._abandoned(last)
                if self._channel:
                    self._publish(True, mono())
        finally:
            _iterating -= 1

    def stats(self):
        """The numbers so far, over every iteration.

        Returns:
            dict: ``name``; ``batches``; ``samples`` (the first dimension of
            each batch's first tensor or array); ``wait_s``, seconds blocked
            in next() and in each iteration's iter() (its set-up: a
            DataLoader starting its workers); ``step_s``, seconds between receiving a batch and
            asking for the next; ``wall_s``, seconds since the first batch was
            asked for; ``wait_share`` = wait_s / (wait_s + step_s) (0.0 before
            any); for a stoker.Loader with device= or pin_memory=, also
            ``h2d_s`` and ``h2d_bytes``: the consumer thread's time staging
            batches in pinned memory and starting their copies, and their
            bytes.

        Example:
            >>> p = stoker.profile(loader)
            >>> for batch in p:
            ...     pass
            >>> sorted(p.stats())
            ['batches', 'name', 'samples', 'step_s', 'wait_s', 'wait_share', 'wall_s']
        """
        out = super().stats()
        h2d = getattr(self.iterable, "_h2d_ns", None)  # a stoker.Loader with device= or pin_memory=
        if h2d:
            out["h2d_s"] = h2d * 1e-9
            out["h2d_bytes"] = getattr(self.iterable, "_h2d_bytes", 0)
        return out


# --- stoker doctor's DataLoader timing (zero code changes) -------------------

_auto = weakref.WeakKeyDictionary()  # DataLoader -> its _Recorder
_auto_all = []  # every DataLoader recorder, for the last snapshot at exit
_auto_warned = False


def _profile_iterating():
    """Whether a stoker.profile is iterating now, in this copy of the file or in stoker's."""
    return _iterating > 0 or getattr(sys.modules.get(_STOKER_MODULE), "_iterating", 0) > 0


def _auto_failed(e):
    """Our error, never the program's: that iteration goes untimed, and one line on stderr (the first time)."""
    global _auto_warned
    if not _auto_warned:
        _auto_warned = True
        try:
            sys.stderr.write(f"stoker doctor: a DataLoader loop left untimed after an error of the timing: "
                             f"{type(e).__name__}: {e}\n")
        except Exception:  # noqa: BLE001
            pass


class _AutoIteration:
    """One iteration (epoch) of a DataLoader or stoker.Loader iterator: its recorder, when its iter() was called
    (`setup`: counted as its first batch's wait), and when its last batch was handed over."""
    __slots__ = ("rec", "last", "fresh", "setup", "s_last")

    def __init__(self, rec, setup):
        self.rec = rec
        self.last = None
        self.fresh = True
        self.setup = setup
        self.s_last = None  # _sched_now() at the last batch's handover, when the next step is sampled


_SKIP_MODULES = ("torch", "stoker", "_stoker", "tqdm", "contextlib", "itertools")
# The iteration's own machinery, also where a program subclasses it (a DataLoader's __iter__, its iterator's).
_SKIP_FUNCTIONS = ("__init__", "__iter__", "_get_iterator", "_reset", "__next__")


def _where(depth=2):
    """Where the program iterates a loader: its first two frames outside torch, stoker and tqdm and outside the
    iteration's machinery ("train.py:40 in train_one_epoch", then its caller), naming the loop (train or
    evaluation) in the report."""
    out = []
    try:
        f = sys._getframe(depth)
    except ValueError:
        return out
    while f is not None and len(out) < 2:
        mod = f.f_globals.get("__name__", "") or ""
        if not (mod.split(".")[0] in _SKIP_MODULES or mod == _AUTO_MODULE or f.f_code.co_name in _SKIP_FUNCTIONS):
            out.append(f"{os.path.basename(f.f_code.co_filename)}:{f.f_lineno} in {f.f_code.co_name}")
        f = f.f_back
    return out


def _auto_recorder(loader):
    rec = _auto.get(loader)
    if rec is None:
        info = _describe(loader)
        info["auto"] = True
        where = _where(3)
        if where:
            info["where"] = where[0]
            if len(where) > 1:
                info["caller"] = where[1]
        # A DataLoader made again with the same settings (one per epoch) continues its predecessor's series.
        rec = next((r for r in _auto_all if r._owner() is None and r._info == info), None)
        if rec is None:
            rec = _Recorder(type(loader).__name__, info, label=f"{type(loader).__name__} (timed by stoker doctor)")
            _auto_all.append(rec)
        rec._owner = weakref.ref(loader)
        _auto[loader] = rec
    return rec


def patch_dataloader(module):
    """Times every iteration of a torch DataLoader from now on: wraps
    _BaseDataLoaderIter.__init__ and _reset (an iteration's start: a new
    iterator, or a persistent-workers iterator reused for the next epoch; both
    are handed the DataLoader) and __next__ (the consumer's wait; the step is
    the time from one __next__'s return to the next call), for single- and
    multi-process loading and any DataLoader subclass. An iteration whose
    first batch is asked for while a stoker.profile is iterating is left to it
    (profile(loader), profile(enumerate(loader)), profile(tqdm(loader)): no
    loop counted twice). The wrappers never raise errors of their own."""
    base = module._BaseDataLoaderIter
    orig_init, orig_next, orig_reset = base.__init__, base.__next__, base._reset
    if getattr(orig_next, "_stoker_auto", False):
        return
    mono = time.monotonic_ns

    def begin(self, args, kwargs, t, first):
        try:
            # A plain attribute (touching self.__dict__ would make every attribute access of torch's code slower).
            self._stoker_auto = None
            loader = args[0] if args else kwargs.get("loader")
            if loader is not None:
                rec = _auto_recorder(loader)
                self._stoker_auto = _AutoIteration(rec, t)
                if first:  # before the subclass's __init__ hands the collate_fn to its workers
                    _time_collate(self, loader, rec)
        except Exception as e:  # noqa: BLE001
            _auto_failed(e)

    @functools.wraps(orig_init)
    def __init__(self, *args, **kwargs):
        t = mono()  # iter(loader): the worker processes start in the subclass's __init__, around this one
        self._stoker_auto = False  # in __init__: its own _reset(first_iter=True) is this iteration's start
        orig_init(self, *args, **kwargs)
        begin(self, args, kwargs, t, True)

    @functools.wraps(orig_reset)
    def _reset(self, *args, **kwargs):
        t = mono()
        out = orig_reset(self, *args, **kwargs)
        if getattr(self, "_stoker_auto", None) is not False:  # a persistent-workers iterator's next epoch
            begin(self, args, kwargs, t, False)
        return out

    __next__ = _timed_next(orig_next, mono)
    __next__._stoker_auto = True
    base.__init__, base._reset, base.__next__ = __init__, _reset, __next__
    atexit.register(_auto_publish_at_exit, os.getpid())


def _timed_next(orig_next, mono):
    """An iterator class's __next__ timed into its _AutoIteration (self._stoker_auto): the first batch's wait from
    the iteration's iter() (its set-up: starting workers, an epoch), the step from one batch's handover to the
    next call, and the time since the recorder's previous iteration ended as between iterations."""

    @functools.wraps(orig_next)
    def __next__(self):
        try:
            st = self._stoker_auto
        except AttributeError:  # an iterator made before the patch
            st = None
        if not st:
            return orig_next(self)
        if st.fresh:  # the iteration's first batch: is a stoker.profile consuming it?
            st.fresh = False
            if _profile_iterating():
                self._stoker_auto = None
                return orig_next(self)
            try:
                rec = st.rec
                prev = getattr(rec, "_open", None)
                if prev is not None and prev is not st:
                    rec._abandoned(prev.last)  # the previous iteration broke off after its last batch
                    prev.last = None
                rec._open = st
                rec._begin(st.setup)
            except Exception as e:  # noqa: BLE001
                self._stoker_auto = None
                _auto_failed(e)
                return orig_next(self)
        t0 = mono()
        s0 = _sched_now() if st.s_last is not None else None
        try:
            item = orig_next(self)
        except StopIteration:
            try:
                if s0 is not None:
                    st.rec._sample(st.rec._sched_step, t0 - st.last, st.s_last, s0)
                st.rec._end(st.last, t0)
                st.last = st.s_last = None
                if st.rec._channel:
                    st.rec._publish(True, mono())
            except Exception as e:  # noqa: BLE001
                self._stoker_auto = None
                _auto_failed(e)
            raise
        except BaseException:
            st.last = st.s_last = None  # a worker's error: whatever the program does next is no step
            raise
        try:
            t1 = mono()
            rec = st.rec
            if s0 is not None:  # a sampled step and wait
                rec._sample(rec._sched_step, t0 - st.last, st.s_last, s0)
                rec._sample(rec._sched_wait, t1 - t0, s0, _sched_now())
                rec._sched_batches += 1
            setup, st.setup = (st.setup if st.last is None else None), None
            rec._batch(st.last, t0, t1, item, setup)
            st.last = mono()
            st.s_last = _sched_now() if rec._batches % _SCHED_EVERY == 0 else None
        except Exception as e:  # noqa: BLE001
            self._stoker_auto = None
            _auto_failed(e)
        return item

    __next__._stoker_auto = True
    return __next__


# A DataLoader's collate_fn, timed where it runs (its worker processes, or the loop's thread with num_workers=0):
# the CPU time of each call, summed per worker in memory shared with the workers (an anonymous shared mapping
# made before they fork), read by the recorder's snapshot ("collate"). Only for workers started by fork: a spawned
# worker would have to unpickle the counters.
_COLLATE_SLOTS = 64  # slot 0: the loop's own process; worker k: slot k + 1 (the last shared beyond)
_COLLATE_SLOT = struct.Struct("qqq")  # CPU ns, calls, samples


_collate_slot = None  # this process's slot (reset in a forked child: a worker finds its own)


def _worker_slot():
    global _collate_slot
    if _collate_slot is None:
        try:
            import torch.utils.data
            w = torch.utils.data.get_worker_info()
        except Exception:  # noqa: BLE001
            w = None
        _collate_slot = 0 if w is None else min(_COLLATE_SLOTS - 1, 1 + int(w.id))
    return _collate_slot


class _CollateCounters:
    """The counters of one DataLoader's timed collate_fn, shared with its workers."""

    def __init__(self, fn):
        self.shm = mmap.mmap(-1, _COLLATE_SLOTS * _COLLATE_SLOT.size)  # MAP_SHARED: the forked workers write here
        self.name = getattr(fn, "__module__", "?") + "." + getattr(fn, "__qualname__", type(fn).__name__)
        self.default = self.name in ("torch.utils.data._utils.collate.default_collate",
                                     "torch.utils.data._utils.collate.default_convert")

    def totals(self):
        cpu = calls = samples = 0
        for k in range(_COLLATE_SLOTS):
            c, n, m = _COLLATE_SLOT.unpack_from(self.shm, k * _COLLATE_SLOT.size)
            cpu, calls, samples = cpu + c, calls + n, samples + m
        return {"fn": self.name, "default": self.default, "cpu_s": cpu * 1e-9, "calls": calls, "samples": samples}


class _TimedCollate:
    """A collate_fn that adds its CPU time (the calling thread's) to its worker's slot of the shared counters."""
    __slots__ = ("fn", "counters")

    def __init__(self, fn, counters):
        self.fn = fn
        self.counters = counters

    def __call__(self, batch):
        t = time.thread_time_ns()
        try:
            return self.fn(batch)
        finally:
            try:
                dt = time.thread_time_ns() - t
                off = _worker_slot() * _COLLATE_SLOT.size
                c, n, m = _COLLATE_SLOT.unpack_from(self.counters.shm, off)
                _COLLATE_SLOT.pack_into(self.counters.shm, off, c + dt, n + 1,
                                         m + (len(batch) if isinstance(batch, list) else 1))
            except Exception:  # noqa: BLE001 (our timing, never the program's error)
                pass


def _forks(loader):
    """Whether the loader's workers (if any) start by fork, so that they share the collate counters."""
    if not getattr(loader, "num_workers", 0):
        return True
    ctx = getattr(loader, "multiprocessing_context", None)
    if ctx is not None:
        method = ctx.get_start_method() if hasattr(ctx, "get_start_method") else str(ctx)
    else:
        import multiprocessing
        # NOTE: get_start_method() without allow_none would fix the program's default context as a side effect.
        method = multiprocessing.get_start_method(allow_none=True) or multiprocessing.get_all_start_methods()[0]
    return method == "fork"


def _time_collate(it, loader, rec):
    """Times the collate_fn a new DataLoader iterator `it` will hand its workers (or call itself)."""
    fn = getattr(it, "_collate_fn", None)
    if fn is None or isinstance(fn, _TimedCollate) or not _forks(loader):
        return
    if rec._collate is None:
        rec._collate = _CollateCounters(fn)
    it._collate_fn = _TimedCollate(fn, rec._collate)


_stoker_patched = False


def patch_stoker_iterator(module):
    """Under stoker doctor: times every iteration of a stoker.Loader (stoker.DataLoader's included) as the
    DataLoader's are: the whole of next() (the C++ wait, staging, batch transforms, the Python side) and the
    epoch's set-up in iter() as the wait; the time between epochs apart from the step."""
    global _stoker_patched
    it_class = getattr(module, "_Iterator", None)
    if it_class is None or getattr(it_class.__next__, "_stoker_auto", False):
        _stoker_patched = True
        return
    mono = time.monotonic_ns
    orig_init, orig_next = it_class.__init__, it_class.__next__

    @functools.wraps(orig_init)
    def __init__(self, loader, *args, **kwargs):
        t = mono()
        self._stoker_auto = None
        orig_init(self, loader, *args, **kwargs)  # starts the epoch (and, with device=, fetches its first batch)
        try:
            self._stoker_auto = _AutoIteration(_auto_recorder(loader), t)
        except Exception as e:  # noqa: BLE001
            _auto_failed(e)

    it_class.__init__, it_class.__next__ = __init__, _timed_next(orig_next, mono)
    _stoker_patched = True
    atexit.register(_auto_publish_at_exit, os.getpid())


def _auto_publish_at_exit(pid):
    """The final snapshot of every timed DataLoader that has not published
    one since its last batch (a loop that ended with break)."""
    if os.getpid() != pid:
        return
    for rec in _auto_all:
        if rec._channel and rec._batches and not (rec._published_final and rec._batches == rec._published_batches):
            try:
                rec._publish(True, time.monotonic_ns())
            except Exception:  # noqa: BLE001
                pass


# --- the trace ----------------------------------------------------------------

def _trace_parts(pid):
    with _lock:
        parts = list(_closed_parts)
    for loader in list(_loaders):
        impl = getattr(loader, "_impl", None)
        if impl is not None:
            parts.append(impl.trace_events())
    for p in list(_recorders):
        if p._spans:
            parts.append(p._trace_events(pid))
    return parts


def _write_trace_at_exit():
    path = _trace_path()
    if not path:
        return
    stoker_copy = sys.modules.get(_STOKER_MODULE)
    if __name__ != _STOKER_MODULE and stoker_copy is not None and hasattr(stoker_copy, "_trace_parts"):
        return  # stoker's copy writes the trace, with this copy's spans
    pid = os.getpid()
    parts = _trace_parts(pid)
    auto = sys.modules.get(_AUTO_MODULE)
    if __name__ != _AUTO_MODULE and auto is not None and hasattr(auto, "_trace_parts"):
        parts += auto._trace_parts(pid)
    try:
        with open(path, "w") as f:
            f.write('{"traceEvents":[' + ",".join(x for x in parts if x) + '],"displayTimeUnit":"ms"}\n')
    except OSError as e:
        print(f"stoker: cannot write the trace to {path!r}: {e}")


atexit.register(_write_trace_at_exit)
