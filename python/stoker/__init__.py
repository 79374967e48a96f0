"""stoker: a C++ engine that keeps a training job's accelerator fed.

    import stoker
    loader = stoker.Loader("data/train", batch_size=64, shuffle=True, seed=0,
                           transforms=[stoker.RandomResizedCrop(224), stoker.RandomHorizontalFlip(),
                                       stoker.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    for images, labels in loader:   # torch.Tensor [B,3,224,224] float32, [B] int64
        ...

Batches are handed over without a copy: the tensors view a buffer of the
loader's ring, which is reused only after every tensor viewing it is freed.
"""
import json
import operator
import os
import time

from stoker._stoker import (  # noqa: F401
    CenterCrop,
    Normalize,
    RandomGrayscale,
    RandomHorizontalFlip,
    RandomResizedCrop,
    RandomVerticalFlip,
    Resize,
    SampleError,
    decode_image,
)
from stoker import _stoker
from stoker import _profiling
from stoker import _staging
from stoker.fields import Boxes, Image, Label, Mask, Tensor, FIELD_TYPES as _FIELD_TYPES
from stoker._profiling import profile  # noqa: F401

__all__ = ["Loader", "profile", "RandomResizedCrop", "Resize", "CenterCrop", "RandomHorizontalFlip",
           "RandomVerticalFlip", "RandomGrayscale", "Normalize", "SampleError", "decode_image", "Image", "Mask",
           "Boxes", "Label", "Tensor"]
__version__ = _stoker.__version__  # one source: project(stoker VERSION ...) in CMakeLists.txt

_DEFAULT_MAX_IMAGE_PIXELS = 178956970


def _resolve_distributed(rank, world_size):
    """rank/world_size: given, else torch.distributed when initialised, else RANK/WORLD_SIZE, else 0/1."""
    if rank is not None and world_size is not None:
        return int(rank), int(world_size)
    r = w = None
    try:
        import torch.distributed as dist
        if dist.is_available() and dist.is_initialized():
            r, w = dist.get_rank(), dist.get_world_size()
    except ImportError:
        pass
    if r is None and "WORLD_SIZE" in os.environ:
        r, w = int(os.environ.get("RANK", "0")), int(os.environ["WORLD_SIZE"])
    if r is None:
        r, w = 0, 1
    return (int(rank) if rank is not None else r), (int(world_size) if world_size is not None else w)


def _check_device(device, pin_memory, output):
    if device is None and not pin_memory:
        return None
    if output != "torch":
        raise ValueError("device and pin_memory need output='torch'")
    import torch
    try:
        dev = torch.device(device) if device is not None else None
    except (RuntimeError, TypeError):
        raise ValueError(f"device must be None, 'cpu' or 'cuda[:N]', got {device!r}") from None
    if dev is not None and dev.type == "cpu":
        return None if not pin_memory else dev
    if dev is not None and dev.type != "cuda":
        raise ValueError(f"device must be None, 'cpu' or 'cuda[:N]', got {device!r}")
    if not torch.cuda.is_available():
        what = f"device={device!r}" if dev is not None else "pin_memory=True"
        raise ValueError(f"{what} needs CUDA, but torch.cuda.is_available() is False "
                         f"(torch {torch.__version__} {'without' if torch.version.cuda is None else 'with'} "
                         f"CUDA support, no usable GPU); use device=None")
    return dev


def _json_value(v):
    """Integers of other types (numpy's) as ints; anything else by its repr, for C++ to name in its error."""
    try:
        return operator.index(v)
    except TypeError:
        return repr(v)


def _check_int(name, value, minimum):
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an int, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")


def _check_torch_dtypes(tensors, named):
    """Every batch tensor must have a torch dtype: found at construction, naming the field, not at the first batch."""
    import numpy as np
    import torch
    for name, dtype, _ in tensors:
        try:
            torch.from_numpy(np.empty(0, dtype=dtype))
        except (TypeError, ValueError):
            what = f"field {name!r}" if named else "the arrays"
            raise ValueError(f"{what}: dtype {dtype.str} ({dtype.name}) has no torch {torch.__version__} "
                             f"equivalent: use output='numpy', or store it as a signed or float dtype") from None


class Loader:
    """Batches of decoded, transformed images, made by C++ threads.

    source: an ImageFolder directory (class = sorted sub-directory names, as
        torchvision), WebDataset-style tar shards (a .tar path, a brace
        pattern like "train-{000000..000015}.tar", a glob, or a list of
        them), or a list file of `path,label` lines (or a CSV whose header
        row names its columns, e.g. `image,mask,label`).
    fields: None (batches are (images, labels) tuples) or the sample schema:
        a list of stoker.Image, Mask, Boxes, Label and Tensor fields, each
        named by its key in the batch, which is then a dict of tensors:
            fields=[stoker.Image("image"), stoker.Mask("mask", fill=255),
                    stoker.Boxes("boxes", max_boxes=100), stoker.Label("label")]
        Masks and boxes get the image's crops, resizes and flips (masks with
        nearest-neighbour, boxes clipped, those under 1 px dropped and
        counted); a missing member or a mask of another size than its image
        is a sample error naming the record, under on_corrupt.
    labels: for shards, "cls" (the .cls member) or "json:<field>".
    kind: "auto" (default), "image", or "array": .npy samples of any
        numeric dtype (3D scans, features) batched as they are, without
        transforms, when every sample has the dtype and shape of the first;
        "auto" picks arrays when the first sample is a .npy that is not a
        uint8 image.
    batch_size, shuffle, seed, drop_last: as torch.utils.data.DataLoader;
        the order of an epoch depends on (seed, epoch) only.
    transforms: stoker.RandomResizedCrop, Resize, CenterCrop,
        RandomHorizontalFlip, RandomVerticalFlip, RandomGrayscale, Normalize, with torchvision's semantics on PIL
        images followed by ToTensor. The result must have a fixed size.
    trace: record a span per sample stage per thread and per wait (also on
        when STOKER_TRACE=<file> is set: the process's trace is written there
        at exit); write_trace(path) writes this loader's. stage_timing=False
        skips the per-stage clocks (stats() then counts samples only).
    threads: worker threads; 0 = autotuned (start with max_threads, default
        one per core, then give cores back to the training step while the
        loader is ahead; stats()["autotune_log"] says what changed and why).
        prefetch: batches made ahead (0 = autotuned from max(2, threads),
          deepened up to twice that for a bursty consumer).
          Memory for batches is bounded: batch buffers <= ring_depth_max + H,
          where ring_depth_max is prefetch (or 2 x max(2, threads) when 0)
          and H is the most batches you hold at once, counting the one being
          handed out (a loop that keeps nothing: 2, since the previous batch
          is still bound to the loop variable while the next is fetched).
          stats(): batch_buffers (allocated: the most ever in use),
          batch_buffers_in_use, batch_buffers_held(_peak), ring_depth_max.
    rank, world_size: this process's share of each epoch; None = from
        torch.distributed when initialised, else RANK / WORLD_SIZE, else 0 / 1.
    on_corrupt: "skip" (count it and use the next sample) or "raise"
        (stoker.SampleError, an OSError, naming file and reason, in order).
        max_consecutive_corrupt: under "skip", how many corrupt samples in a
        row one place tolerates before its batch fails anyway (the data set is
        then mostly broken).
    dtype: "float32" (ToTensor scale, then Normalize) or "uint8".
    layout: "NCHW" or "NHWC". output: "torch" or "numpy".
    decode_scale: "exact" (default: JPEGs decoded at full resolution, only the
        crop's region; bit-exact with torchvision on PIL) or "auto": a crop
        shrunk 2x or more is decoded at 1/2, 1/4 or 1/8 scale by libjpeg-turbo
        (faster; pixels within a small tolerance of torchvision's).
    cache: "mmap" (read each epoch; the OS page cache keeps the files), "ram"
        (encoded bytes kept after the first read) or "decoded" (pixels kept
        after the first decode, shorter side downscaled to cache_max_side, and
        every epoch transforms that stored image; the default 448 keeps
        RandomResizedCrop(224) output within 40 dB PSNR of the exact path,
        see bench/cache_quality.py). memory_budget: bytes for the
        cache (0 = half the available memory, never above the cgroup limit,
        divided by LOCAL_WORLD_SIZE when torchrun runs several ranks on a node);
        what does not fit is served by the slower path (stats(): cache_hits,
        cache_misses, cache_bytes).
    preload: with cache="ram", background threads (at lower CPU priority)
        read every record into RAM from the start, in parallel, until the set
        is in or memory_budget is spent; batches never wait for them.
        stats(): cache_preload ("loading", "done", "budget full"),
        cache_preload_records, cache_preload_bytes, cache_preload_s.
    progress: a progress line on stderr while preloading: None (when stderr
        is a terminal), True (always) or False.
    device: None (CPU tensors viewing the loader's buffers, no copy) or
        "cuda" / "cuda:N": each batch is copied through pinned memory to the
        device on a side CUDA stream, one batch ahead, so it is there when
        the step asks. pin_memory=True: CPU tensors in page-locked memory
        (one copy), for users who copy to the device themselves. Both need
        torch with CUDA; otherwise they raise ValueError.
    """

    def __init__(self, source, batch_size=64, shuffle=False, seed=0, drop_last=False, transforms=(),
                 threads=0, prefetch=0, rank=None, world_size=None, on_corrupt="skip", dtype="float32",
                 layout="NCHW", output="torch", max_image_pixels=_DEFAULT_MAX_IMAGE_PIXELS, labels="cls",
                 kind="auto", device=None, pin_memory=False, decode_scale="exact", cache="mmap",
                 memory_budget=0, cache_max_side=448, max_threads=0, trace=False, stage_timing=True,
                 preload=True, progress=None, max_consecutive_corrupt=64, fields=None):
        if isinstance(source, (str, os.PathLike)):
            sources = [os.fspath(source)]
        elif isinstance(source, (list, tuple)) and source and all(isinstance(s, (str, os.PathLike)) for s in source):
            sources = [os.fspath(s) for s in source]
        else:
            raise ValueError(f"source must be a path (str or os.PathLike) or a non-empty list of shard paths, "
                             f"got {source!r}")
        if progress not in (None, True, False):
            raise ValueError(f"progress must be None, True or False, got {progress!r}")
        if output not in ("torch", "numpy"):
            raise ValueError(f"output must be 'torch' or 'numpy', got {output!r}")
        if output == "torch":
            import torch  # noqa: F401  (fail here, not at the first batch)
        self.device = _check_device(device, pin_memory, output)
        self.pin_memory = bool(pin_memory)
        transforms = list(transforms)
        for t in transforms:
            if not isinstance(t, _stoker._transform_types):
                names = ", ".join(c.__name__ for c in _stoker._transform_types)
                raise ValueError(f"transforms: {t!r} is not a stoker transform ({names})")
        if fields is not None:
            fields = list(fields)
            for f in fields:
                if not isinstance(f, _FIELD_TYPES):
                    names = ", ".join(c.__name__ for c in _FIELD_TYPES)
                    raise ValueError(f"fields: {f!r} is not a stoker field ({names})")
            if not fields:
                raise ValueError("fields must name at least one field (or be None for images and labels)")
        self.fields = fields
        rank, world_size = _resolve_distributed(rank, world_size)
        self.output = output
        # NOTE: the options' types and ranges are checked once, in C++ (src/batch/options.cc),
        # which names the option; the doctor's snapshot carries the same JSON.
        options = dict(batch_size=batch_size, shuffle=bool(shuffle), seed=seed, drop_last=bool(drop_last),
                       threads=threads, prefetch=prefetch, max_threads=max_threads, rank=rank,
                       world_size=world_size, on_corrupt=on_corrupt,
                       max_consecutive_corrupt=max_consecutive_corrupt, dtype=dtype, layout=layout,
                       max_image_pixels=max_image_pixels, labels=labels, kind=kind, decode_scale=decode_scale,
                       cache=cache, memory_budget=memory_budget, cache_max_side=cache_max_side,
                       trace=bool(trace), stage_timing=bool(stage_timing), preload=bool(preload),
                       progress={None: "auto", True: "on", False: "off"}[progress],
                       fields=[f._json() for f in fields or ()])
        self._impl = _stoker._Loader(sources, json.dumps(options, default=_json_value), transforms)
        if output == "torch":
            _check_torch_dtypes(self._impl.sample_tensors, fields is not None)
        _profiling.register_loader(self)
        self.batch_size = batch_size
        self._h2d_ns = 0     # consumer-thread time staging and starting host-to-device copies
        self._h2d_bytes = 0
        self.rank, self.world_size = rank, world_size
        self.transforms = transforms

    def __len__(self):
        """Batches per epoch on this rank."""
        return len(self._impl)

    @property
    def num_samples(self):
        """Samples per epoch on this rank (padding included)."""
        return self._impl.num_samples

    @property
    def dataset_size(self):
        return self._impl.dataset_size

    @property
    def classes(self):
        return self._impl.classes

    def set_epoch(self, epoch):
        """The epoch the next iteration runs (otherwise each iteration advances it by one)."""
        _check_int("epoch", epoch, 0)
        self._impl.set_epoch(epoch)

    @property
    def epoch(self):
        return self._impl.epoch

    def state_dict(self):
        """Where iteration stands, as a small JSON-serialisable dict: the epoch in
        progress and the batches of it already handed out, plus the settings that
        define the order. Save it with the model's checkpoint."""
        return dict(self._impl.state_dict())

    def load_state_dict(self, state):
        """Resume: the next iteration yields exactly the batches an uninterrupted
        run would have yielded after the saved point (any thread count). Raises
        ValueError when a setting that defines the order differs."""
        if not isinstance(state, dict):
            raise ValueError(f"load_state_dict: state must be a dict, got {type(state).__name__}")
        self._impl.load_state_dict(state)

    def stats(self):
        """Per-stage busy seconds (in all and per thread), counts, consumer wait,
        time to first batch, autotune choices, cache use, corrupt samples by
        reason; with device/pin_memory, h2d_s: the consumer thread's time
        staging batches in pinned memory and starting their copies."""
        s = self._impl.stats()
        s["h2d_s"] = self._h2d_ns * 1e-9
        s["h2d_bytes"] = self._h2d_bytes
        return s

    def write_trace(self, path):
        """Writes this loader's spans (needs trace=True or STOKER_TRACE) as a
        Chrome / Perfetto trace-event JSON file."""
        self._impl.write_trace(os.fspath(path))

    def __del__(self):
        impl = getattr(self, "_impl", None)
        if impl is not None:
            _profiling.loader_closing(impl)

    def __iter__(self):
        return _Iterator(self)


class _Iterator:
    def __init__(self, loader):
        self._loader = loader
        self._impl = loader._impl
        self._done = False
        self._impl.start_epoch()
        if loader.output == "torch":
            import torch
            self._convert = torch.from_numpy
        else:
            self._convert = None
        self._device = loader.device if loader.device is not None and loader.device.type == "cuda" else None
        self._pin = loader.pin_memory
        self._stager = None
        if self._device is not None or self._pin:
            import torch
            self._stager = _staging.Stager(torch, self._device, loader)
            if self._device is not None:
                self._pending = self._start(self._fetch())

    def __iter__(self):
        return self

    def __len__(self):
        return len(self._impl)

    def _fetch(self):
        """The next CPU batch (a tuple, or a dict with fields=), or None at the end, or the exception it raised."""
        if self._done:
            return None
        try:
            batch = self._impl.next()
        except Exception as e:  # raised in order, when its batch is due
            return e
        if batch is None:
            self._done = True
            return None
        if self._convert is not None:
            return _staging.rebuild(batch, [self._convert(x) for x in _staging.leaves(batch)])
        return batch

    def _start(self, item):
        """Starts the batch's copy to the device on the side stream."""
        if item is None or isinstance(item, Exception):
            return item
        return self._stager.start(item)

    def __next__(self):
        if self._device is None:
            item = self._fetch()
            if item is None:
                raise StopIteration
            if isinstance(item, Exception):
                raise item
            if self._pin:
                staged, _ = self._stager.pinned(item)
                # NOTE: clones stay pinned; the staging buffers are reused
                return _staging.rebuild(staged, [x.clone() for x in _staging.leaves(staged)])
            return item
        current = self._pending
        if current is None:
            raise StopIteration
        self._pending = self._start(self._fetch())  # overlaps with the caller's step
        if isinstance(current, Exception):
            raise current
        return self._stager.finish(current)
