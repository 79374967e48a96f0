"""The Python part of a pipeline, run on stoker's worker threads.

stoker's C++ makes each sample as far as its own kernels go (read, decode,
the transforms it reproduces exactly), then hands it to ``Stage.sample`` on
the same worker thread, which takes the GIL only for the Python: the rest
of the transforms (as torchvision would run them, on the PIL image or
tensor torchvision would have at that point), the target and its
``target_transform``. When a batch's last sample is in, ``Stage.batch``
collates it (torch's ``default_collate`` or the user's ``collate_fn``) and
runs ``batch_transform``, on that worker too: the training loop only picks
the batch up (``Stage.take``).

A sample that raises is returned to C++ as its message: C++ counts it under
``on_corrupt`` (reason "python") with the record's name; with
``on_corrupt="raise"`` the iterator re-raises the original exception, its
traceback intact (``Stage.reraise``).
"""
import atexit
import threading
import weakref

from stoker import _stoker
from stoker.records import NO_TARGET

# Loaders whose workers call into Python. NOTE: a worker that asks for the GIL once the interpreter is
# finalizing is ended by Python from inside C++ (an abort); so before that, at exit, their workers are stopped.
_live = weakref.WeakSet()


def register(impl):
    """`impl` (a _stoker._Loader whose threads run Python: a stage, or stoker.Records' read) is closed at exit,
    before the interpreter finalizes."""
    _live.add(impl)


@atexit.register
def _close_all():
    for impl in list(_live):
        try:
            impl.close()
        except Exception:  # noqa: BLE001 (exiting)
            pass
    # NOTE: a loader the garbage collector freed on a worker (its own or another loader's: the collector runs
    # wherever Python allocates) is closed on a thread of its own, which drops its Python references: waited for here.
    _stoker._join_closing()


class PyTransform:
    """A per-sample transform written in Python, run by stoker's workers.

    In ``transforms=`` (of stoker.Loader or a stoker.datasets dataset), it and
    every transform after it run in Python, on stoker's worker threads (the
    GIL held only while Python runs), on what torchvision would hand it at
    that point: a ``PIL.Image`` before ``ToTensor``/``PILToTensor``, a
    ``torch.Tensor`` after. After stoker's own transforms (which end in
    stoker's ToTensor and Normalize), it gets the tensor they made.

    Args:
        fn (callable): sample -> sample.
        name (str, optional): how stats() and messages name it. Default:
            fn's ``__name__``.

    Raises:
        TypeError: fn is not callable. An exception fn raises on a sample
            makes that sample corrupt under the loader's ``on_corrupt``
            (counted as "python"; ``"raise"`` re-raises it, its traceback
            intact).

    Example:
        >>> def add_noise(t):
        ...     return t + 0.01 * torch.randn_like(t)
        >>> loader = stoker.Loader("data/train", transforms=[
        ...     stoker.RandomResizedCrop(224), stoker.Normalize(mean, std), stoker.PyTransform(add_noise)])
    """

    def __init__(self, fn, name=None):
        if not callable(fn):
            raise TypeError(f"PyTransform: fn must be callable, got {fn!r}")
        self.fn = fn
        self.name = name or getattr(fn, "__name__", type(fn).__name__)

    def __call__(self, sample):
        return self.fn(sample)

    def __repr__(self):
        return f"PyTransform({self.name})"


def _message(e):
    return f"{type(e).__name__}: {e}"


class Stage:
    """The sample and batch hooks C++ calls (python/src/bind_python_stage.cc).

    Args:
        tail (list): callables run in order on each sample.
        tail_input (str): "pil" (C++ hands uint8 HWC: made a PIL RGB image),
            "tensor" (a torch tensor of C++'s CHW output) or "numpy".
        target_of (callable or None): record -> target; None: C++'s label.
        target_transform (callable or None): as torchvision's.
        collate (callable or None): list of (sample, target) -> batch; None:
            torch's default_collate.
        batch_transform (callable or None): batch -> batch, after collate.
    """

    def __init__(self, tail=(), tail_input="tensor", target_of=None, target_transform=None, collate=None,
                 batch_transform=None):
        self.tail = list(tail)
        self.tail_input = tail_input
        self.target_of = target_of
        self.target_transform = target_transform
        self.batch_transform = batch_transform
        self._torch = None
        if tail_input != "numpy" or collate is None:
            import torch
            self._torch = torch
        if collate is None:
            from torch.utils.data import default_collate
            collate = default_collate
        self.collate = collate
        if tail_input == "pil":
            from PIL import Image
            self._pil = Image
        self._lock = threading.Lock()  # NOTE: only for the dicts' multi-step updates; calls hold the GIL anyway
        self._samples = {}   # (run, batch) -> {pos: (sample, target)}
        self._batches = {}   # (run, batch) -> the collated batch
        self._errors = {}    # (run, batch, pos) or (run, batch, None) -> the exception

    # ---- called by C++ on a worker thread, with the GIL ----------------------
    def sample(self, run, epoch, batch, pos, record, label, image):
        try:
            x = self._input(image)
            for t in self.tail:
                x = t(x)
            target = self.target_of(record) if self.target_of is not None else label
            if target is NO_TARGET:
                item = x  # a stoker.Records record without a target: the sample is the image
            else:
                if self.target_transform is not None:
                    target = self.target_transform(target)
                item = (x, target)
        except Exception as e:  # noqa: BLE001 (every exception is the sample's: counted or re-raised)
            self._errors[(run, batch, pos)] = (e, record)
            return _message(e)
        with self._lock:
            self._errors.pop((run, batch, pos), None)  # an earlier record in this place was skipped
            self._samples.setdefault((run, batch), {})[pos] = item
        return None

    def batch(self, run, epoch, batch, size):
        with self._lock:
            samples = self._samples.pop((run, batch), {})
        try:
            items = [samples[i] for i in range(size)]
            out = self.collate(items)
            if self.batch_transform is not None:
                out = self.batch_transform(out)
        except Exception as e:  # noqa: BLE001
            self._errors[(run, batch, None)] = (e, None)
            return _message(e)
        with self._lock:
            self._batches[(run, batch)] = out
        return None

    # ---- called by the iterator ------------------------------------------------
    def take(self, batch):
        """Batch `batch` of the running epoch: C++ handed it out, so its batch() is done."""
        with self._lock:
            runs = [r for (r, b) in self._batches if b == batch]
            run = max(runs)
            out = self._batches.pop((run, batch))
            for key in [k for k in self._batches if k[0] < run]:
                del self._batches[key]
            for key in [k for k in self._samples if k[0] < run]:
                del self._samples[key]
        return out

    def reraise(self, error):
        """The exception this stage raised behind C++'s `error` (the batch due failed: C++ gives the sample's
        message after its record, "record N '...': ", or the batch stage's message), else `error` itself."""
        text = str(error)
        with self._lock:
            for key, (e, record) in sorted(self._errors.items(), key=lambda kv: (-kv[0][0], kv[0][1])):
                if (record is None and text == _message(e)) or \
                        (record is not None and text.startswith(f"record {record} ") and _message(e) in text):
                    del self._errors[key]
                    return e
        return error

    def _input(self, image):
        if image is None:
            return None
        if self.tail_input == "pil":
            return self._pil.fromarray(image, "RGB")
        if self.tail_input == "tensor":
            return self._torch.from_numpy(image)
        return image


def _delegate(t):
    """What `t` calls when its class's __call__ (or forward) is exactly ``return self.<attr>(<its argument>)``
    (torchvision's reference presets: ``return self.transforms(img)``), else None. Read from the method's
    source, so the replacement is exact: nothing else runs in that method."""
    import ast
    import inspect
    import textwrap
    for name in ("__call__", "forward"):
        fn = getattr(type(t), name, None)
        if fn is None or getattr(fn, "__module__", "").startswith(("torch", "torchvision")):
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
        except (OSError, TypeError, SyntaxError):
            return None
        f = tree.body[0] if tree.body else None
        if not isinstance(f, ast.FunctionDef) or len(f.args.args) != 2 or f.args.vararg or f.args.kwarg:
            return None
        body = [b for b in f.body if not (isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant))]
        if len(body) != 1 or not isinstance(body[0], ast.Return):
            return None
        call = body[0].value
        self_name, arg_name = f.args.args[0].arg, f.args.args[1].arg
        if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and not call.keywords
                and isinstance(call.func.value, ast.Name) and call.func.value.id == self_name
                and len(call.args) == 1 and isinstance(call.args[0], ast.Name) and call.args[0].id == arg_name):
            inner = getattr(t, call.func.attr, None)
            return inner if callable(inner) or isinstance(inner, (list, tuple)) else None
        return None
    return None


def as_list(transforms):
    """`transforms=` as a list: a list or tuple as it is, a Compose (or any one transform) as one item, an object
    whose call only delegates to an attribute (a preset class wrapping a Compose) as that attribute."""
    if transforms is None:
        return []
    if isinstance(transforms, (list, tuple)):
        return list(transforms)
    seen = 0
    while seen < 8 and not _is_stoker(transforms) and type(transforms).__name__ != "Compose":
        inner = _delegate(transforms)
        if inner is None:
            break
        transforms, seen = inner, seen + 1
        if isinstance(transforms, (list, tuple)):
            return list(transforms)
    return [transforms]


def _is_stoker(t):
    from stoker import _stoker
    return isinstance(t, _stoker._transform_types)


def plan(transforms, dtype, layout, target_of=None, target_transform=None, collate=None, batch_transform=None):
    """How a loader runs `transforms`: (native transforms, dtype, layout, Stage or None, reasons).

    - stoker's own transforms only: as given (the loader's dtype and layout), no stage.
    - stoker's own, then Python callables (PyTransform, any callable): stoker's
      run in C++; the callables get the tensor they made.
    - torchvision objects (with or without stoker's and callables):
      stoker._torchvision.split: the prefix stoker reproduces exactly runs in
      C++, the rest in Python as torchvision would run it; dtype and layout
      follow the torchvision pipeline (ToTensor: float32, PILToTensor: uint8).
    A stage is made when there is a Python tail, a target_of/target_transform,
    a collate or a batch_transform.
    """
    items = list(transforms)
    reasons = []
    tv = any(not _is_stoker(t) and not isinstance(t, PyTransform) and type(t).__module__.startswith("torchvision")
             for t in items) or any(type(t).__name__ == "Compose" for t in items)
    if not tv:
        native = []
        for t in items:
            if not _is_stoker(t):
                break
            native.append(t)
        tail = items[len(native):]
        for t in tail:
            if _is_stoker(t):
                raise ValueError(f"transforms: stoker.{type(t).__name__} after the Python transform "
                                 f"{tail[0]!r}: stoker's own transforms run before any Python one (use "
                                 f"torchvision's there)")
            if not callable(t):
                from stoker import _stoker
                names = ", ".join(c.__name__ for c in _stoker._transform_types)
                raise ValueError(f"transforms: {t!r} is not a stoker transform ({names}), a torchvision "
                                 f"transform or a callable")
        if tail:
            reasons = [(repr(tail[0]), "Python code")]
        tail_input = "tensor"
    else:
        from stoker import _torchvision
        sp = _torchvision.split(items)
        native, tail, reasons = sp.native, sp.tail, list(sp.reasons)
        if sp.dtype is None or (tail and sp.tail_input == "pil"):
            # NOTE: torchvision's sample is still a PIL image here: C++ hands over uint8 HWC.
            dtype, layout, tail_input = "uint8", "NHWC", "pil"
        else:
            dtype, layout, tail_input = sp.dtype, "NCHW", "tensor"
        if sp.dtype is None and not tail:
            tail_input = "pil"  # the samples stay PIL images, as torchvision's would (collate decides)
    needs_stage = bool(tail) or tail_input == "pil" and tv or target_of is not None or \
        target_transform is not None or collate is not None or batch_transform is not None
    stage = None
    if needs_stage:
        stage = Stage(tail, tail_input, target_of, target_transform, collate, batch_transform)
    return native, dtype, layout, stage, reasons
