"""stoker.profile and the process's trace and stats channel.

stoker.profile(iterable) wraps any iterable of batches (a stoker.Loader, a
torch.utils.data.DataLoader, a generator) and measures, per batch, the
consumer's wait inside next() and the step time between batches (the
training step's own work). With STOKER_DOCTOR=<dir> set (stoker doctor
sets it), a snapshot of these numbers replaces <dir>/profile-<pid>-<n>.json
every 0.25 s and at the end; stoker loaders publish their own stats there
from C++. With STOKER_TRACE=<file> set, the process writes a Chrome /
Perfetto trace at exit: every loader's stage spans plus a span per step and
per wait of every profiled iterable, on one clock (CLOCK_MONOTONIC).
"""
import atexit
import itertools
import json
import os
import threading
import time
import weakref

_PUBLISH_NS = 250_000_000
_MAX_SPANS = 1 << 18
_ids = itertools.count()
_loaders = weakref.WeakSet()
_closed_parts = []  # trace events of loaders already destroyed
_profiles = weakref.WeakSet()
_lock = threading.Lock()


def _trace_path():
    p = os.environ.get("STOKER_TRACE")
    return p.replace("%p", str(os.getpid())) if p else None


def register_loader(loader):
    _loaders.add(loader)


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
    for _ in range(3):
        if isinstance(x, (tuple, list)) and x:
            x = x[0]
        elif isinstance(x, dict) and x:
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
    return d


class profile:
    """Wraps an iterable of batches and measures the consumer's wait for each
    batch and the step time between batches.

        for x, y in stoker.profile(torch.utils.data.DataLoader(...)):
            ...
        print(p.stats())   # keep a reference: p = stoker.profile(loader)

    stats(): batches, samples, wait_s (time blocked in next()), step_s (time
    between receiving a batch and asking for the next), wall_s, and
    wait_share = wait_s / (wait_s + step_s).
    """

    def __init__(self, iterable, name=None):
        self.iterable = iterable
        self.name = name or type(iterable).__name__
        self._id = next(_ids)
        self._batches = 0
        self._samples = 0
        self._wait_ns = 0
        self._step_ns = 0
        self._start_ns = None
        self._published_ns = 0
        self._channel = os.environ.get("STOKER_DOCTOR") or None
        self._spans = [] if _trace_path() else None
        self._info = None
        _profiles.add(self)

    def __len__(self):
        return len(self.iterable)

    def __iter__(self):
        it = iter(self.iterable)
        if self._info is None:
            self._info = _describe(self.iterable)
        mono = time.monotonic_ns
        last = None
        try:
            while True:
                t0 = mono()
                if self._start_ns is None:
                    self._start_ns = t0
                if last is not None:
                    self._step_ns += t0 - last
                    if self._spans is not None and len(self._spans) < _MAX_SPANS:
                        self._spans.append(("step", last, t0 - last))
                try:
                    item = next(it)
                except StopIteration:
                    return
                t1 = mono()
                self._wait_ns += t1 - t0
                if self._spans is not None and len(self._spans) < _MAX_SPANS:
                    self._spans.append(("wait", t0, t1 - t0))
                self._batches += 1
                self._samples += _batch_len(item)
                if self._channel and t1 - self._published_ns >= _PUBLISH_NS:
                    self._publish(False, t1)
                last = mono()
                yield item
        finally:
            if self._channel:
                self._publish(True, mono())

    def stats(self):
        wait, step = self._wait_ns * 1e-9, self._step_ns * 1e-9
        wall = 0.0 if self._start_ns is None else (time.monotonic_ns() - self._start_ns) * 1e-9
        out = {"name": self.name, "batches": self._batches, "samples": self._samples, "wait_s": wait,
               "step_s": step, "wall_s": wall, "wait_share": wait / (wait + step) if wait + step > 0 else 0.0}
        h2d = getattr(self.iterable, "_h2d_ns", None)  # a stoker.Loader with device= or pin_memory=
        if h2d:
            out["h2d_s"] = h2d * 1e-9
            out["h2d_bytes"] = getattr(self.iterable, "_h2d_bytes", 0)
        return out

    def _publish(self, final, now):
        self._published_ns = now
        snap = {"kind": "profile", "pid": os.getpid(), "id": self._id, "time_ns": now, "final": final,
                "info": self._info or {}, "stats": self.stats()}
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
        out = [json.dumps({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                           "args": {"name": f"stoker.profile({self.name})"}})]
        for name, start, dur in self._spans or ():
            out.append(json.dumps({"ph": "X", "name": "training step" if name == "step" else "wait for batch",
                                   "cat": "profile", "pid": pid, "tid": tid, "ts": start / 1000, "dur": dur / 1000}))
        return ",".join(out)


def _write_trace_at_exit():
    path = _trace_path()
    if not path:
        return
    pid = os.getpid()
    with _lock:
        parts = list(_closed_parts)
    for loader in list(_loaders):
        impl = getattr(loader, "_impl", None)
        if impl is not None:
            parts.append(impl.trace_events())
    for p in list(_profiles):
        if p._spans:
            parts.append(p._trace_events(pid))
    try:
        with open(path, "w") as f:
            f.write('{"traceEvents":[' + ",".join(x for x in parts if x) + '],"displayTimeUnit":"ms"}\n')
    except OSError as e:
        print(f"stoker: cannot write the trace to {path!r}: {e}")


atexit.register(_write_trace_at_exit)
