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
import sys
import time
from typing import TYPE_CHECKING, Any, Dict, Iterable, Iterator, List, Literal, Optional, Tuple, Union

from stoker._stoker import (  # noqa: F401
    CenterCrop,
    Normalize,
    AugMix,
    AutoAugment,
    ColorJitter,
    GaussianBlur,
    Grayscale,
    RandAugment,
    RandomAdjustSharpness,
    RandomAffine,
    RandomApply,
    RandomAutocontrast,
    RandomCrop,
    RandomEqualize,
    RandomErasing,
    RandomInvert,
    RandomPosterize,
    RandomRotation,
    RandomShortestSize,
    RandomSolarize,
    TrivialAugmentWide,
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
from stoker import _pystage
from stoker.fields import Boxes, Bytes, Image, Label, Mask, Tensor, Volume, LabelVolume, detection_targets, \
    FIELD_TYPES as _FIELD_TYPES, _Field
from stoker.volume import (CenterSpatialCrop, NormalizeIntensity, RandCropByPosNegLabel, RandFlip, RandRotate90,
                           RandSpatialCrop, RandSpatialCropSamples, ScaleIntensityRange, SpatialPad, Spacing,
                           VolumeTransform as _VolumeTransform, VOLUME_TRANSFORM_TYPES as _VOLUME_TRANSFORM_TYPES)
from stoker.mixture import Mix
from stoker.batch_transforms import CutMix, MixUp, RandomChoice
from stoker.enums import AutoAugmentPolicy, InterpolationMode
from stoker import batch_transforms as _batch_transforms
from stoker._profiling import profile  # noqa: F401
from stoker._pystage import PyTransform, Stage as _Stage
from stoker.records import Records, Files as _Files
from stoker.dataloader import DataLoader

def write_manifest(pattern: Union[str, "os.PathLike[str]"], out: Union[str, "os.PathLike[str]"] = "",
                   labels: str = "cls") -> str:
    """Writes the manifest of local tar shards (docs/manifest.md) from their ``.idx`` sidecars.

    A loader given the shards' pattern (or the manifest's path) then knows the epoch's size and each shard's
    record count from this one file, and opens a shard and reads its index only when it first reads that shard.
    ``stoker pack`` writes one itself; this is for shards made otherwise (``stoker manifest PATTERN`` on the
    command line). Sidecars missing or stale are built (and written beside their shards) as a loader would.

    Args:
        pattern (str or os.PathLike): the shards: a brace pattern or glob (``"d/train-{000..099}.tar"``).
        out (str or os.PathLike): the manifest's path; ``""`` (the default): beside the shards, the pattern's file name up to its
            first ``{ * ? [ %`` with trailing ``- _ .`` cut, plus ``.manifest`` (``"d/train.manifest"``).
        labels (str): where labels come from, ``"cls"`` or ``"json:<field>"``.

    Returns:
        str: the manifest's path.

    Raises:
        FileNotFoundError: a shard, or a glob that matches nothing (named).
        OSError: a shard cannot be read (named).
        ValueError: bad ``labels``, or a URL (manifests are written where the shards are made).

    Example:
        >>> path = stoker.write_manifest("shards/train-{000000..000007}.tar")  # doctest: +SKIP
        >>> loader = stoker.Loader("shards/train-{000000..000007}.tar")       # doctest: +SKIP
    """
    return _stoker.write_manifest(os.fspath(pattern), os.fspath(out) if out else "", labels)


# NOTE: the transform and field names above and below are spelled out, not made from the C++ registries: type
# checkers and IDEs read a py.typed package's exports from its imports and a literal __all__ only.
# tests/python/test_names.py checks both against _stoker._transform_names() and the field table.
__all__ = ["Loader", "profile", "RandomResizedCrop", "Resize", "CenterCrop", "RandomHorizontalFlip",
           "RandomVerticalFlip", "RandomGrayscale", "Normalize", "SampleError", "decode_image", "write_manifest", "Image", "Mask",
           "Boxes", "Label", "Tensor", "Mix", "MixUp", "CutMix", "RandomChoice", "ColorJitter", "Grayscale",
           "GaussianBlur", "RandomSolarize", "RandomPosterize", "RandomAutocontrast", "RandomEqualize",
           "RandomAdjustSharpness", "RandomInvert", "RandomRotation", "RandomAffine", "TrivialAugmentWide",
           "RandAugment", "AutoAugment", "RandomErasing", "RandomApply", "AugMix", "RandomCrop",
           "RandomShortestSize", "detection_targets", "Volume", "LabelVolume", "Bytes", "RandSpatialCrop",
           "RandSpatialCropSamples", "RandCropByPosNegLabel", "CenterSpatialCrop", "SpatialPad", "RandFlip",
           "RandRotate90", "ScaleIntensityRange", "NormalizeIntensity", "Spacing", "DataLoader", "Records",
           "PyTransform"]


def __getattr__(name):
    # NOTE: stoker.datasets imports torch; `import stoker` alone does not.
    if name == "datasets":
        import importlib
        return importlib.import_module("stoker.datasets")
    raise AttributeError(f"module 'stoker' has no attribute {name!r}")
__version__ = _stoker.__version__  # one source: project(stoker VERSION ...) in CMakeLists.txt

if TYPE_CHECKING:
    import torch

# Types of Loader's arguments.
_Path = Union[str, os.PathLike]
_Source = Union[_Path, List[_Path], Tuple[_Path, ...], Mix]
# Any transform: the image transforms' Union, made from the C++ variant by the bindings (the stub spells it for type
# checkers), or a volume transform (VolumeTransform's subclasses are the C++ registry's, stoker.volume checks).
_Transform = Union[_stoker._Transform, _VolumeTransform]
_FieldType = _Field  # any field class (stoker.fields.FIELD_TYPES)

# Loader's defaults: LoaderOptions{} through the one options codec (src/options/options.cc), not copies.
_DEFAULTS = json.loads(_stoker._default_options())


def _mix_keys(fields):
    """(image key, label key) of the batches MixUp/CutMix act on: (None, None) for (images, labels) tuples."""
    if fields is None:
        return None, None
    images = [f.name for f in fields if isinstance(f, Image)]
    labels = [f.name for f in fields if isinstance(f, Label)]
    if len(images) != 1 or not labels:
        raise ValueError("batch_transforms: MixUp/CutMix need a schema with one stoker.Image and a stoker.Label, got "
                         f"{[f.name for f in fields]}")
    return images[0], labels[0]


def _resolve_distributed(rank, world_size):
    """rank/world_size: given, else torch.distributed when initialised, else RANK/WORLD_SIZE, else 0/1."""
    if rank is not None and world_size is not None:
        return int(rank), int(world_size)
    r = w = None
    # NOTE: only when the program imported it: a process group cannot be
    # initialised without it, and importing torch here took 1.2 s of a
    # numpy-output loader's start-up.
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        r, w = dist.get_rank(), dist.get_world_size()
    if r is None and "WORLD_SIZE" in os.environ:
        r, w = int(os.environ.get("RANK", "0")), int(os.environ["WORLD_SIZE"])
    if r is None:
        r, w = 0, 1
    return (int(rank) if rank is not None else r), (int(world_size) if world_size is not None else w)


# How long a rank waits for the other ranks' host names (_note_local_ranks): a bound, so that a loader made on
# some ranks only (an evaluation on rank 0) costs at most this once, then keeps LOCAL_WORLD_SIZE's count.
_LOCAL_RANKS_WAIT_S = 60.0
_local_ranks_noted = False


def _note_local_ranks(share_cache, cache):
    """The ranks on this node when torch.distributed is initialised and LOCAL_WORLD_SIZE is not set (mp.spawn, a
    launcher other than torchrun): each rank puts its host name in the process group's store and reads the
    others' (a bounded wait, once per process); the engine then counts the ranks on this host as LOCAL_WORLD_SIZE
    would (share_cache="auto", the node budget's share, the preloads' starts). Never a collective: a rank that
    makes no loader only delays the others' first loader by the bound."""
    global _local_ranks_noted
    if _local_ranks_noted or "LOCAL_WORLD_SIZE" in os.environ or share_cache == "off" or cache == "mmap":
        return
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return
    _local_ranks_noted = True
    world, rank = dist.get_world_size(), dist.get_rank()
    if world < 2:
        return
    import datetime
    import socket
    from torch.distributed import distributed_c10d
    store = distributed_c10d._get_default_store()
    host = socket.gethostname()
    keys = [f"stoker/host/{r}" for r in range(world)]
    store.set(keys[rank], host)
    try:
        store.wait(keys, datetime.timedelta(seconds=_LOCAL_RANKS_WAIT_S))
    except RuntimeError:
        print(f"stoker: torch.distributed: not every rank of {world} made a loader within {_LOCAL_RANKS_WAIT_S:.0f} s,"
              " so the ranks on this host are not known: LOCAL_WORLD_SIZE counts them (unset: 1)", file=sys.stderr)
        return
    local = sum(store.get(k).decode() == host for k in keys)
    _stoker._set_local_ranks(local, f"torch.distributed: {local} of {world} ranks on host {host}")


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


def _transforms_json(transforms):
    """stoker's transforms as the options' JSON carries them (each by its C++ definition's to_json)."""
    return [json.loads(t) for t in _stoker._transforms_json(list(transforms))]


def _view_args(views):
    """Loader(views=) as the options' JSON carries it: [{name, count, transforms}], checked here for its types."""
    if views is None:
        return []
    if not isinstance(views, dict) or not views:
        raise ValueError(f"views must be a non-empty dict {{name: (count, [transforms])}}, got {views!r}")
    out = []
    for name, spec in views.items():
        if not isinstance(name, str) or not isinstance(spec, (tuple, list)) or len(spec) != 2:
            raise ValueError(f"views: each entry must be name: (count, [transforms]), got {name!r}: {spec!r}")
        count, transforms = spec
        if not isinstance(count, int) or isinstance(count, bool):
            raise ValueError(f"views: view {name!r}: count must be an int, got {count!r}")
        transforms = list(transforms)
        for t in transforms:
            if not isinstance(t, _stoker._transform_types):
                raise ValueError(f"views: view {name!r}: {t!r} is not a stoker transform")
        out.append(dict(name=name, count=count, transforms=_transforms_json(transforms)))
    return out


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

    Iterable like a torch.utils.data.DataLoader: each ``for`` loop runs one
    epoch (the next one, or the one set_epoch() chose). A batch is
    ``(images, labels)`` (torch.Tensor [B, 3, H, W] float32 and [B] int64 with
    the defaults), or with ``fields=`` a dict of tensors keyed by the fields'
    names. Batches are handed over without a copy: the tensors view a buffer
    of the loader's ring, which is reused only after every tensor viewing it
    is freed.

    Args:
        source (str, os.PathLike, or a list or tuple of them): an ImageFolder
            directory (class = sorted sub-directory names, as torchvision),
            WebDataset-style tar shards (a .tar path, a brace pattern like
            "train-{000000..000015}.tar", a glob, or a list of them; shards
            elsewhere as URLs: "https://host/train-{000000..000127}.tar",
            "s3://bucket/prefix/train-{...}.tar" or "s3://bucket/prefix/*.tar"
            with the AWS CLI's environment variables and ~/.aws profiles,
            or "pipe:CMD" for a command printing the shard; a data set's
            ``.manifest`` file, or one pattern with its manifest beside it,
            opens from that file alone and reads each shard's index only
            when it first reads that shard: docs/manifest.md), or a
            list file of `path,label` lines (or a CSV whose header row names
            its columns, e.g. `image,mask,label`; a header of `image` alone
            lists images without labels: every label is -1, and
            ``fields=[stoker.Image()]`` leaves the label out of the batch),
            or a stoker.Mix of several
            data sets drawn with weights (an epoch is then its
            samples_per_epoch draws; order, sharding and resume apply to
            them).
        batch_size (int): samples per batch, as torch.utils.data.DataLoader.
            Default 64.
        shuffle (bool): shuffle each epoch, as DataLoader; the order of an
            epoch depends on (seed, epoch) only, whatever the thread count.
            Default False.
        seed (int): the seed of the order and of the random transforms
            (each sample's draws depend on (seed, epoch, record) only).
            Default 0.
        drop_last (bool): drop the last batch of a rank when it would be
            partial, as DataLoader. Default False.
        shuffle_window (int): tar shards only: shuffle within windows of
            this many consecutive shards of the epoch's shuffled shard order
            instead of over the whole epoch (or a rank's whole share of
            shards), so a rank reads at most this many shards at a time, as
            streaming from an object store needs. Still a function of
            (seed, epoch); no effect without shuffle. Default 0 (the whole
            epoch).
        transforms (sequence): torchvision's transforms as they are (a
            ``transforms.Compose``, a list, or a preset object whose call
            only delegates to one): each mapped onto stoker's kernel where
            that reproduces torchvision exactly for its parameters, and from
            the first that does not (a Lambda, a custom class, a subclass, an
            interpolation or fill stoker does not reproduce), the rest run
            in Python on stoker's worker threads on what torchvision would
            hand them (a PIL image before ToTensor, a tensor after); dtype
            and layout then follow the torchvision pipeline. stats()
            ["python_transforms"] and one stderr line say what runs as
            Python and why. Or stoker's own: stoker.RandomResizedCrop, Resize, CenterCrop,
            RandomCrop, RandomShortestSize, RandomHorizontalFlip,
            RandomVerticalFlip, RandomGrayscale,
            Normalize, and the image stage (ColorJitter, Grayscale,
            GaussianBlur, RandomSolarize, RandomPosterize,
            RandomAutocontrast, RandomEqualize, RandomAdjustSharpness,
            RandomInvert, RandomRotation, RandomAffine, TrivialAugmentWide,
            RandAugment, AutoAugment, AugMix, RandomApply: after every crop, resize
            and flip) and RandomErasing (after Normalize), with torchvision's
            semantics on PIL images followed by ToTensor. The result must have a fixed size, so images need a
            RandomResizedCrop, CenterCrop or Resize((h, w)) after any
            Resize(int); the default () suits only .npy arrays and schemas
            without an Image. With a stoker.Volume field: MONAI's volume
            transforms instead (stoker.Spacing, RandSpatialCrop,
            RandSpatialCropSamples, RandCropByPosNegLabel, CenterSpatialCrop,
            SpatialPad, RandFlip, RandRotate90, ScaleIntensityRange,
            NormalizeIntensity; see stoker.volume), one sampling crop among
            them. Default ().
        threads (int): worker threads; 0 = autotuned (start with max_threads,
            default one per core, then give cores back to the training step
            while the loader is ahead; stats()["autotune_log"] says what
            changed and why). Default 0.
        prefetch (int): batches made ahead (0 = autotuned from max(2,
            threads), deepened up to twice that for a bursty consumer).
            Memory for batches is bounded: batch buffers <= ring_depth_max +
            H, where ring_depth_max is prefetch (or 2 x max(2, threads) when
            0) and H is the most batches you hold at once, counting the one
            being handed out (a loop that keeps nothing: 2, since the
            previous batch is still bound to the loop variable while the next
            is fetched). stats(): batch_buffers (allocated: the most ever in
            use), batch_buffers_in_use, batch_buffers_held(_peak),
            ring_depth_max. Default 0.
        rank (int, optional): this process's share of each epoch, in [0,
            world_size); None = from torch.distributed when initialised, else
            RANK, else 0. Every rank gets the same number of batches: without
            drop_last the epoch is padded with its first samples (as torch's
            DistributedSampler). Default None.
        world_size (int, optional): the number of shares; None = from
            torch.distributed when initialised, else WORLD_SIZE, else 1.
            Default None.
        on_corrupt (str): "skip" (count it and use the next sample) or
            "raise" (stoker.SampleError, an OSError, naming file and reason,
            in order). Default "skip".
        dtype (str): "float32" (ToTensor scale, then Normalize) or "uint8"
            (no Normalize). .npy arrays keep their own dtype. Default
            "float32".
        layout (str): "NCHW" or "NHWC". Default "NCHW".
        output (str): "torch" (torch.Tensor) or "numpy" (numpy.ndarray).
            Default "torch".
        max_image_pixels (int): images with more pixels are refused (a
            sample error, counted as resource_exhausted) before any pixel
            memory is allocated. Default 178956970, Pillow's
            decompression-bomb limit.
        max_volume_voxels (int): volumes (stoker.Volume, LabelVolume) with
            more voxels, channels included, are refused the same way, from
            their header. Default 2**31.
        labels (str): for shards, "cls" (the .cls member) or "json:<field>"
            (an integer field of the .json member). Default "cls".
        image_root (str or os.PathLike, optional): for a COCO instances
            JSON source (a ``.json`` path: one record per image, in
            increasing id order as torchvision's CocoDetection, with members
            "boxes" and "image_id"), the folder its ``file_name`` are
            relative to. Default None: the JSON's folder.
        skip_empty (bool): COCO: leave out images without annotations.
            Default False (kept, with zero boxes).
        keep_crowd (bool): COCO: keep ``iscrowd`` annotations as boxes.
            Default False (dropped, as torchvision's detection references
            drop them).
        kind (str): "auto", "image", or "array": .npy samples of any numeric
            dtype (3D scans, features) batched as they are, without
            transforms, when every sample has the dtype and shape of the
            first; "auto" picks arrays when the first sample is a .npy that is
            not a uint8 image. Only "auto" with ``fields``. Default "auto".
        device (str or torch.device, optional): None or "cpu" (CPU tensors
            viewing the loader's buffers, no copy) or "cuda" / "cuda:N": each
            batch is copied through pinned memory to the device on a side CUDA
            stream, one batch ahead, so it is there when the step asks. Needs
            torch with CUDA. Default None.
        pin_memory (bool): CPU tensors in page-locked memory (one copy), for
            users who copy to the device themselves. Needs torch with CUDA.
            Default False.
        decode_scale (str): "exact" (JPEGs decoded at full resolution, only
            the crop's region; bit-exact with torchvision on PIL) or "auto": a
            crop shrunk 2x or more is decoded at 1/2, 1/4 or 1/8 scale by
            libjpeg-turbo (faster; pixels within a small tolerance of
            torchvision's). Default "exact".
        cache (str): "mmap" (read each epoch; the OS page cache keeps the
            files), "ram" (encoded bytes kept after the first read) or
            "decoded" (pixels kept after the first decode, shorter side
            downscaled to cache_max_side, and every epoch transforms that
            stored image). What does not fit in memory_budget is served by the
            slower path (stats(): cache_hits, cache_misses, cache_bytes).
            "auto" chooses one at construction from a few records' sizes and
            image headers (no full read): "decoded" when the decoded set fits
            memory_budget and either no image is downscaled or the output is
            at most half of cache_max_side, else "ram" when the encoded set
            fits, else "mmap"; stats()["cache_mode"] and
            stats()["cache_auto"] (and a line on stderr unless
            progress=False) say which and why. Default "mmap".
        memory_budget (int): bytes for the cache (0 = half the available
            memory, never above the cgroup limit, divided by LOCAL_WORLD_SIZE
            when torchrun runs several ranks on a node). Default 0.
        cache_dir (str or os.PathLike): remote shards: a node-local folder
            they land in, shared by every rank on the machine (each shard
            fetched once per node). None (the default): shards stream
            through memory (within memory_budget).
        cache_limit (int): bytes stoker's files in cache_dir may take, least
            recently used shards evicted beyond it (0 = 80% of the file
            system's free space). Default 0.
        remote_connections (int): remote shards: transfers at once, each
            on a kept-alive connection. Default 8.
        remote_retries (int): remote shards: retries of a request that
            failed in a retryable way (timeout, reset, 429, 5xx, a pipe:
            command's non-zero exit), with exponential backoff and jitter; a
            broken transfer resumes from its last byte. Default 8.
        cache_max_side (int): with cache="decoded", the most the shorter
            side of a stored image may be; the default 448 keeps
            RandomResizedCrop(224) output within 40 dB PSNR of the exact path
            (see bench/cache_quality.py). Default 448.
        share_cache (str): with cache="ram" or "decoded", one cache per
            machine: loaders on a node reading the same data with the same
            cache-relevant options map one file of shared memory in
            share_cache_dir, so each record is read, stored and charged once
            per node (each entry charged to the memory_budget of the rank
            that stored it; the file's size: the cache budget times the
            ranks on the node). "auto" shares when several ranks share the
            node: LOCAL_WORLD_SIZE > 1 (torchrun), or, without it, an
            initialised torch.distributed group with several ranks on this
            host (each rank's host name through the group's store, once per
            process, waiting at most 60 s for the other ranks' first loader);
            it falls back to a cache of this process's own, with one line on
            stderr, when the directory cannot hold it; "on" always shares and
            raises instead; "off" never.
            stats(): shared_cache (which and why), shared_cache_entries,
            shared_cache_bytes, shared_cache_hits, shared_cache_filled.
            Default "auto".
        share_cache_dir (str or os.PathLike): the directory of the shared
            cache's file, a tmpfs (the file is removed when the last loader
            using it goes). Default "/dev/shm".
        max_threads (int): with threads=0, the most workers the tuner uses
            (0 = one per available core). Default 0.
        trace (bool): record a span per sample stage per thread and per wait
            (also on when STOKER_TRACE=<file> is set: the process's trace is
            written there at exit); write_trace(path) writes this loader's.
            Default False.
        stage_timing (bool): False skips the per-stage clocks (stats() then
            counts samples only). Default True.
        preload (bool): with cache="ram", background threads (at lower CPU
            priority; at idle priority when they rewrite what they store)
            read every record into RAM from the start, in parallel,
            until the set is in or memory_budget is spent; batches never wait
            for them. stats(): cache_preload ("loading", "done", "budget
            full"), cache_preload_records, cache_preload_bytes,
            cache_preload_s. Default True.
        cache_rewrite (bool): with cache="ram", JPEGs without restart markers
            are rewritten losslessly in the cache (the same coefficients, so
            the same pixels: batches never change) into the random-access
            form of ``stoker pack --lossless``, so later epochs decode only
            what each crop covers. A worker rewrites a record as it is about
            to decode it: in the first epoch while that costs at most 1% of
            its time (counting the decode it saves), from the second epoch on
            always, so the rewrite is done when the second epoch ends; idle
            CPU takes the records not read. Local files are kept only
            rewritten: the first epoch reads the others from the files, as
            cache="mmap" does, so it is no slower; remote shards are kept as
            read and rewritten later (also by at most 9% of the workers'
            time). Baseline JPEGs get restart markers inserted (a fraction of
            a decode), others libjpeg's transcode. stats(): cache_rewrite
            ("off", "rewriting", "done"), cache_rewritten (of them
            cache_rewrite_on_read by the workers as they read),
            cache_rewrite_settled (records in their final form),
            cache_rewrite_bytes_before / _after, cache_rewrite_cpu_s.
            Default True.
        progress (bool, optional): a progress line on stderr while
            preloading: None (when stderr is a terminal), True (always) or
            False. Default None.
        max_consecutive_corrupt (int): under on_corrupt="skip", how many
            corrupt samples in a row at one place make its batch fail anyway
            (the data set is then mostly broken), >= 1. Default 64.
        fields (list, optional): None (batches are (images, labels) tuples)
            or the sample schema: a list of stoker.Image, Mask, Boxes, Label
            and Tensor fields, each named by its key in the batch, which is
            then a dict of tensors::

                fields=[stoker.Image("image"), stoker.Mask("mask", fill=255),
                        stoker.Boxes("boxes", max_boxes=100), stoker.Label("label")]

            Masks and boxes get the image's crops, resizes and flips (masks
            with nearest-neighbour, boxes clipped, those under 1 px dropped
            and counted); a missing member or a mask of another size than its
            image is a sample error naming the record, under on_corrupt.
            Default None.
        batch_transforms (sequence): stoker.MixUp, stoker.CutMix or
            stoker.RandomChoice of them (torchvision v2's semantics), applied
            to each batch as it is handed out; labels become float32
            [B, num_classes]; draws from (seed, epoch, batch index), so resume
            stays exact. Needs dtype "float32" and layout "NCHW". Not with
            ``views``. Default ().
        target_transform (callable, optional): as torchvision datasets':
            applied in Python to each sample's target (the label, or a
            stoker.Records' target) on stoker's worker threads. Default None.
        collate_fn (callable, optional): as torch's DataLoader: the list of
            (sample, target) of a batch -> the batch, run in Python on a
            stoker worker thread once the batch's samples are made. Default
            None (stoker's own batches; torch's default_collate when the
            samples pass through Python).
        batch_transform (callable, optional): batch -> batch, run in Python
            on a stoker worker thread after the collate (off the training
            loop's thread). Default None.
        views (dict, optional): multi-crop (DINO, SwAV, SimCLR): {name:
            (count, [transforms])}, each view ``count`` independently drawn
            copies of its transforms over the sample's one read and one
            decode (of the union of the copies' regions), batched as
            ``name`` [B, count, 3, H, W] (NHWC: [B, count, H, W, 3]) in place
            of the image; batches are dicts (views, then the label or the
            other fields). Every copy's draws depend on (seed, epoch,
            record, view, copy) only; the first view's first copy draws
            what ``transforms=`` would. Needs ``transforms=()``; the schema
            may not hold masks or boxes. Default None.

    Yields:
        tuple or dict: per batch of the epoch, in order: ``(images,
        labels)``, or with ``fields`` a dict of tensors in schema order;
        torch.Tensor (on ``device`` when given) or numpy.ndarray as ``output``
        says. len(loader) batches per epoch on this rank.

    Raises:
        ValueError: an argument out of its range or of the wrong type, named
            in the message: a transform or field that is not stoker's, a
            transform's parameters or order (Normalize last, RandomGrayscale
            after every resize), the schema's rules; device or pin_memory
            with output="numpy" or without CUDA; with output="torch", a batch
            dtype torch lacks; a malformed list file.
        FileNotFoundError: ``source`` (or a shard) does not exist, or holds
            no records (an empty list file, an ImageFolder without class
            sub-directories or images).
        OSError: ``source`` cannot be read.
        ImportError: output="torch" (the default) without torch installed.
        stoker.SampleError: while iterating, see ``on_corrupt``.

    Attributes:
        batch_size (int), rank (int), world_size (int), output (str),
        pin_memory (bool): as resolved from the arguments.
        transforms (list): the transforms.
        fields (list or None): the schema.
        device (torch.device or None): the CUDA device batches are copied
            to; torch.device("cpu") for device="cpu" with pin_memory=True;
            else None.

    Example:
        >>> loader = stoker.Loader("data/train", batch_size=64, shuffle=True, seed=0,
        ...                        transforms=[stoker.RandomResizedCrop(224), stoker.RandomHorizontalFlip(),
        ...                                    stoker.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
        >>> for epoch in range(90):
        ...     for images, labels in loader:  # torch.Tensor [64, 3, 224, 224] float32, [64] int64
        ...         train_step(images, labels)
        ...     torch.save({"model": model.state_dict(), "loader": loader.state_dict()}, "ckpt.pt")
    """

    def __init__(self, source: _Source, batch_size: int = _DEFAULTS["batch_size"],
                 shuffle: bool = _DEFAULTS["shuffle"], seed: int = _DEFAULTS["seed"],
                 drop_last: bool = _DEFAULTS["drop_last"], transforms: Iterable[_Transform] = (),
                 threads: int = _DEFAULTS["threads"], prefetch: int = _DEFAULTS["prefetch"],
                 rank: Optional[int] = None, world_size: Optional[int] = None,
                 on_corrupt: Literal["skip", "raise"] = _DEFAULTS["on_corrupt"],
                 dtype: Literal["float32", "uint8"] = _DEFAULTS["dtype"],
                 layout: Literal["NCHW", "NHWC"] = _DEFAULTS["layout"], output: Literal["torch", "numpy"] = "torch",
                 max_image_pixels: int = _DEFAULTS["max_image_pixels"],
                 max_volume_voxels: int = _DEFAULTS["max_volume_voxels"], labels: str = _DEFAULTS["labels"],
                 image_root: Optional[_Path] = None, skip_empty: bool = _DEFAULTS["skip_empty"],
                 keep_crowd: bool = _DEFAULTS["keep_crowd"],
                 kind: Literal["auto", "image", "array"] = _DEFAULTS["kind"],
                 device: Union[str, "torch.device", None] = None, pin_memory: bool = False,
                 decode_scale: Literal["exact", "auto"] = _DEFAULTS["decode_scale"],
                 cache: Literal["mmap", "ram", "decoded", "auto"] = _DEFAULTS["cache"],
                 memory_budget: int = _DEFAULTS["memory_budget"], cache_max_side: int = _DEFAULTS["cache_max_side"],
                 max_threads: int = _DEFAULTS["max_threads"], trace: bool = _DEFAULTS["trace"],
                 stage_timing: bool = _DEFAULTS["stage_timing"], preload: bool = _DEFAULTS["preload"],
                 cache_rewrite: bool = _DEFAULTS["cache_rewrite"], shuffle_window: int = _DEFAULTS["shuffle_window"],
                 share_cache: Literal["auto", "on", "off"] = _DEFAULTS["share_cache"],
                 share_cache_dir: _Path = _DEFAULTS["share_cache_dir"],
                 cache_dir: Optional[_Path] = None, cache_limit: int = _DEFAULTS["cache_limit"],
                 remote_connections: int = _DEFAULTS["remote_connections"],
                 remote_retries: int = _DEFAULTS["remote_retries"], progress: Optional[bool] = None,
                 max_consecutive_corrupt: int = _DEFAULTS["max_consecutive_corrupt"],
                 fields: Optional[Iterable[_FieldType]] = None,
                 batch_transforms: Iterable[Union[MixUp, CutMix, RandomChoice]] = (),
                 views: Optional[Dict[str, Tuple[int, Iterable[_Transform]]]] = None,
                 target_transform: Optional[Any] = None, collate_fn: Optional[Any] = None,
                 batch_transform: Optional[Any] = None) -> None:
        mixture = None
        records = source if isinstance(source, (Records, _Files)) else None
        if isinstance(source, Mix):
            mixture = source._json()
        elif records is not None:
            pass
        elif isinstance(source, (str, os.PathLike)):
            sources = [os.fspath(source)]
        elif isinstance(source, (list, tuple)) and source and all(isinstance(s, (str, os.PathLike)) for s in source):
            sources = [os.fspath(s) for s in source]
        else:
            raise ValueError(f"source must be a path (str or os.PathLike), a non-empty list of shard paths, a "
                             f"stoker.Mix or stoker.Records, got {source!r}")
        if progress not in (None, True, False):
            raise ValueError(f"progress must be None, True or False, got {progress!r}")
        if output not in ("torch", "numpy"):
            raise ValueError(f"output must be 'torch' or 'numpy', got {output!r}")
        if output == "torch":
            import torch  # noqa: F401  (fail here, not at the first batch)
        self.device = _check_device(device, pin_memory, output)
        self.pin_memory = bool(pin_memory)
        # A torchvision Compose as it is, or a list.
        transforms = _pystage.as_list(transforms)
        # MONAI-named volume transforms go to the volume schema's list (options "volume_transforms").
        volume_transforms = [t for t in transforms if isinstance(t, _VOLUME_TRANSFORM_TYPES)]
        transforms = [t for t in transforms if not isinstance(t, _VOLUME_TRANSFORM_TYPES)]
        # torchvision's objects mapped onto stoker's kernels where exact; the rest (and any Python
        # callable) runs in Python on stoker's workers (stoker._pystage).
        target_of = records._target if isinstance(records, Records) else None
        transforms, dtype, layout, self._stage, reasons = _pystage.plan(
            transforms, dtype, layout, target_of, target_transform, collate_fn, batch_transform)
        self.python_transforms = [{"transform": t, "reason": r} for t, r in reasons]
        if reasons:
            print(f"stoker: {reasons[0][0]} and what follows it run as Python on stoker's threads: {reasons[0][1]}",
                  file=sys.stderr)
        if self._stage is not None and (fields is not None or views is not None):
            raise ValueError("a Python stage (a transform stoker has no kernel for, target_transform, collate_fn, "
                             "batch_transform, stoker.Records' targets) needs the default schema: not with fields= "
                             "or views=")
        if self._stage is not None and output != "torch":
            raise ValueError("a Python stage (a transform stoker has no kernel for, target_transform, collate_fn, "
                             "batch_transform, stoker.Records' targets) needs output='torch'")
        if fields is not None:
            fields = list(fields)
            for f in fields:
                if not isinstance(f, _FIELD_TYPES):
                    names = ", ".join(c.__name__ for c in _FIELD_TYPES)
                    raise ValueError(f"fields: {f!r} is not a stoker field ({names})")
            if not fields:
                raise ValueError("fields must name at least one field (or be None for images and labels)")
        self.fields = fields
        view_args = _view_args(views)
        if view_args and list(batch_transforms):
            raise ValueError("batch_transforms (MixUp/CutMix) act on one image per sample; views give several")
        rank, world_size = _resolve_distributed(rank, world_size)
        _note_local_ranks(share_cache, cache)
        self.output = output
        # NOTE: the options' types and ranges are checked once, in C++ (src/options/options.cc),
        # which names the option; the doctor's snapshot carries the same JSON.
        options = dict(batch_size=batch_size, shuffle=bool(shuffle), seed=seed, drop_last=bool(drop_last),
                       threads=threads, prefetch=prefetch, max_threads=max_threads, rank=rank,
                       world_size=world_size, on_corrupt=on_corrupt,
                       max_consecutive_corrupt=max_consecutive_corrupt, dtype=dtype, layout=layout,
                       max_image_pixels=max_image_pixels, max_volume_voxels=max_volume_voxels, labels=labels, kind=kind, decode_scale=decode_scale,
                       image_root=os.fspath(image_root) if image_root is not None else "",
                       skip_empty=bool(skip_empty), keep_crowd=bool(keep_crowd),
                       cache=cache, memory_budget=memory_budget, cache_max_side=cache_max_side,
                       trace=bool(trace), stage_timing=bool(stage_timing), preload=bool(preload),
                       cache_rewrite=bool(cache_rewrite), shuffle_window=shuffle_window, share_cache=share_cache,
                       share_cache_dir=os.fspath(share_cache_dir),
                       cache_dir=os.fspath(cache_dir) if cache_dir is not None else "", cache_limit=cache_limit,
                       remote_connections=remote_connections, remote_retries=remote_retries,
                       progress={None: "auto", True: "on", False: "off"}[progress],
                       fields=[f._json() for f in fields or ()], transforms=_transforms_json(transforms),
                       views=view_args, volume_transforms=[t._json() for t in volume_transforms])
        options_json = json.dumps(options, default=_json_value)
        stage = self._stage
        # What `stoker replay` reopens this loader from (save_replay); None: not reopenable.
        self._replay_source = None
        if mixture is not None:
            self._replay_source = {"mixture": json.loads(mixture)}
        elif records is None:
            self._replay_source = {"sources": sources}
        self._options = options_json
        if mixture is not None:
            self._impl = _stoker._Loader._mixture(mixture, options_json, stage)
        elif isinstance(records, Records):
            self._impl = _stoker._Loader._records(len(records), records._read, records.name, options_json, stage)
        elif records is not None:
            self._impl = _stoker._Loader._files(records.paths, records.labels, records.classes, records.name,
                                                records.root, options_json, stage)
        else:
            self._impl = _stoker._Loader(sources, options_json, stage)
        if stage is not None or isinstance(records, Records):
            _pystage.register(self._impl)
        if output == "torch" and stage is None:
            _check_torch_dtypes(self._impl.sample_tensors, fields is not None or bool(view_args))
        _profiling.register_loader(self)
        self.batch_size = batch_size
        self._h2d_ns = 0     # consumer-thread time staging and starting host-to-device copies
        self._h2d_bytes = 0
        self.rank, self.world_size = rank, world_size
        self.transforms = transforms + volume_transforms
        self.batch_transforms = _batch_transforms.BatchTransforms(list(batch_transforms), layout, dtype)
        if self.batch_transforms:
            self._mix_keys = _mix_keys(fields)
        self._seed = seed

    def __len__(self) -> int:
        """Batches per epoch on this rank.

        Returns:
            int: ceil(num_samples / batch_size).

        Example:
            >>> len(stoker.Loader("data/train", batch_size=64, transforms=[stoker.CenterCrop(224)]))
            32
        """
        return len(self._impl)

    @property
    def num_samples(self) -> int:
        """Samples per epoch on this rank (padding included): ceil(dataset_size /
        world_size), or with drop_last floor(dataset_size / world_size) cut to
        a multiple of batch_size.

        Example:
            >>> stoker.Loader("data/train", batch_size=64, world_size=3, rank=0,
            ...               transforms=[stoker.CenterCrop(224)]).num_samples  # 2040 records
            680
        """
        return self._impl.num_samples

    @property
    def dataset_size(self) -> int:
        """Records in the source, over all ranks (before any padding); for a
        stoker.Mix, its draws per epoch.

        Example:
            >>> stoker.Loader("data/train", transforms=[stoker.CenterCrop(224)]).dataset_size
            2040
        """
        return self._impl.dataset_size

    @property
    def classes(self) -> List[str]:
        """Class names by label: an ImageFolder's sorted sub-directory names;
        empty for list files and shards.

        Example:
            >>> stoker.Loader("data/train", transforms=[stoker.CenterCrop(224)]).classes[:2]
            ['apple', 'banana']
        """
        return self._impl.classes

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch the next iteration runs (otherwise each iteration
        advances it by one), as DistributedSampler.set_epoch. After
        load_state_dict(), setting the restored epoch keeps the restored
        position, so the usual loop (load_state_dict once, set_epoch at the
        top of each epoch) resumes mid-epoch; setting another epoch drops it.

        Args:
            epoch (int): >= 0.

        Raises:
            ValueError: ``epoch`` is not an int >= 0.

        Example:
            >>> for epoch in range(start_epoch, 90):
            ...     loader.set_epoch(epoch)
            ...     for images, labels in loader:
            ...         ...
        """
        _check_int("epoch", epoch, 0)
        self._impl.set_epoch(epoch)

    @property
    def epoch(self) -> int:
        """The epoch the next iteration runs; while an iteration is running,
        the one after it.

        Example:
            >>> loader.set_epoch(5)
            >>> loader.epoch
            5
        """
        return self._impl.epoch

    def state_dict(self) -> Dict[str, Any]:
        """Where iteration stands, as a small JSON-serialisable dict: the epoch in
        progress and the batches of it each rank has handed out (between
        epochs: the next epoch and 0), the parts of the epoch run on other
        topologies, and the settings that define the order. It has no rank:
        ranks that step together (as DDP's all-reduce keeps them) have the
        same state, so saving rank 0's with the model's checkpoint is enough.

        Returns:
            dict: version, seed, epoch, batches_done, dataset_size,
            batch_size, shuffle, drop_last, shuffle_window (only when > 0),
            world_size, and earlier: a list of
            {world_size, batch_size, batches_done}, the parts of this epoch
            run on other topologies (elastic resume), in order.

        Example:
            >>> state = loader.state_dict()
            >>> state["epoch"], state["batches_done"]
            (3, 120)
        """
        return dict(self._impl.state_dict())

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Resume where a saved state stands. The seed is taken from the
        state; the loader must read the same data with the same shuffle and
        drop_last.

        - Same world_size and batch_size: the next iteration yields exactly
          the batches an uninterrupted run would have yielded after the saved
          point (any thread count or prefetch).
        - Another world_size and/or batch_size (elastic: a job restarted on
          fewer or more ranks): the records of the epoch that no rank has
          handed out are split over the new ranks as a fresh epoch is: every
          rank the same number of batches, padded with the first of those
          records (or cut to whole batches with drop_last), disjoint; no
          record of the epoch is handed out twice across the job, other than
          as padding. Each new rank takes a contiguous block of them, so a
          shard-split epoch keeps most of its locality. The epochs after are
          exactly a fresh run's on the new topology. A job may change size
          more than once within an epoch.

        Args:
            state (dict): a state_dict() of this or another loader (of any
                rank; a version 1 state, with a rank, also loads). A state
                of version 1 to 3 (before the order became a closed form
                in version 4) saved inside a shuffled epoch is refused,
                naming the version: the position names other records now.

        Raises:
            ValueError: ``state`` is not a dict or lacks a key; a setting that
                defines the epoch (version, dataset_size, shuffle, drop_last)
                differs, named in the message with the reason; a world_size or
                batch_size below 1; or a batches_done past the end of its
                part of the epoch.

        Example:
            >>> ckpt = torch.load("ckpt.pt")     # saved by rank 0, maybe with another world size
            >>> loader.load_state_dict(ckpt["loader"])
            >>> for epoch in range(ckpt["epoch"], 90):
            ...     loader.set_epoch(epoch)     # the restored epoch keeps its position
            ...     for images, labels in loader:
            ...         ...
        """
        if not isinstance(state, dict):
            raise ValueError(f"load_state_dict: state must be a dict, got {type(state).__name__}")
        self._impl.load_state_dict(state)

    def batch(self, epoch: int, index: int) -> Any:
        """Batch ``index`` of ``epoch`` on this rank, made again: bit for bit
        what iterating that epoch yields as its batch ``index`` (any thread
        count, prefetch or cache), batch transforms (MixUp/CutMix) included,
        without running the epoch up to it. It costs what one batch costs:
        the epoch's order gives the batch's records in closed form, and every
        random draw is keyed by (seed, epoch, record or batch). Iteration is
        not moved and stats() counts nothing for it.

        The epoch a restored state resumed on another topology (world_size or
        batch_size) is that resumed epoch; any other epoch is a fresh one on
        this loader's topology.

        Args:
            epoch (int): >= 0.
            index (int): the batch's index in the epoch, 0 <= index < len(self)
                (for a fresh epoch).

        Returns:
            The batch as the iteration yields it (see the class's Yields), on
            the CPU (``device`` is not applied).

        Raises:
            ValueError: index past the epoch's batches; with a Python stage
                (its stages are the caller's).
            stoker.SampleError: a bad sample of the batch under
                on_corrupt="raise" (under "skip" it is replaced as the epoch
                replaced it).

        Example:
            >>> images, labels = loader.batch(epoch=7, index=48213)  # the batch a loss spike points at
        """
        _check_int("epoch", epoch, 0)
        _check_int("index", index, 0)
        if self._stage is not None:
            raise ValueError("batch(): not with a Python stage (a transform stoker has no kernel for, "
                             "target_transform, collate_fn, batch_transform): its draws are the caller's")
        batch = self._impl.batch(epoch, index)
        if self.output == "torch":
            import torch
            batch = _staging.rebuild(batch, [torch.from_numpy(x) for x in _staging.leaves(batch)])
            xp = _batch_transforms._Torch(torch)
        else:
            xp = _batch_transforms._Numpy()
        if self.batch_transforms:
            batch = self._mixed(batch, epoch, index, xp)
        return batch

    def batch_provenance(self, epoch: int, index: int) -> Dict[str, Any]:
        """Which records made batch ``index`` of ``epoch`` on this rank, and
        every parameter drawn for each: the tool for "the loss spiked at batch
        48,213 of epoch 7". It costs O(batch): the order's records in closed
        form, each image's plan drawn from its header (no pixel decoded).

        Args:
            epoch (int): >= 0.
            index (int): the batch's index in the epoch, 0 <= index < len(self)
                (for a fresh epoch).

        Returns:
            dict: epoch, batch, rank, world_size, seed, batch_size, shuffle,
            samples and batch_transforms. ``samples`` is a list, in batch
            order, of dicts: position (in this rank's epoch), draw (the key
            of the sample's randomness with seed and epoch: the record, or a
            stoker.Mix's position), record (its index in the source),
            key (its path, or "shard.tar:key"), label, shard (the shard's
            index, tar shards), source and source_record (a stoker.Mix's
            source name and the record's index in it), and plan: the image's
            width and height, ``plan`` (decode_region, steps: each
            ``{"crop": [x, y, w, h]}`` in the frame of the image before it or
            ``{"resize": [w, h]}``, mirror, vflip, photometric, image_ops:
            each ``{"op", ...its magnitudes}``, erase boxes, augmix draws) and
            ``read`` (the region decoded and its DCT scale); for views, one
            plan per copy of each view; for volumes, the volume's shape and
            each patch's plan (start, size, pads, flips, quarter turns);
            ``null`` for a schema without images or volumes. A record whose
            plan cannot be drawn (unreadable, a bad header) has ``error``
            instead. ``batch_transforms`` lists the batch's MixUp/CutMix
            draws: ``{"transform", "lam"}`` or ``{"transform", "box",
            "lam_adjusted"}``.

        Raises:
            ValueError: index past the epoch's batches.

        Example:
            >>> p = loader.batch_provenance(epoch=7, index=48213)
            >>> [(s["key"], s["plan"]["plan"]["steps"]) for s in p["samples"]][:1]
            [('data/train/cat/0001.jpg', [{'crop': [12, 40, 301, 288], 'fill': [0, 0, 0]}, {'resize': [224, 224]}])]
        """
        _check_int("epoch", epoch, 0)
        _check_int("index", index, 0)
        p = self._impl.batch_provenance(epoch, index)
        p["batch_transforms"] = []
        if self.batch_transforms:
            image_key = self._mix_keys[0]
            dims = next(d for name, _, d in self._impl.sample_tensors if image_key is None or name == image_key)
            for t, params in self.batch_transforms.draws(self._seed, epoch, index, dims[-2], dims[-1]):
                p["batch_transforms"].append(dict(transform=type(t).__name__, **params))
        return p

    def save_replay(self, path: _Path) -> None:
        """Writes what ``stoker replay`` needs to rebuild this loader's batches
        as JSON: the sources (or the stoker.Mix), every option, and the
        state_dict() of now. ``stoker replay PATH`` then prints the
        provenance of the next batch this loader would hand out (or, with
        ``--epoch E --batch B``, of any batch) and ``--out batch.npz`` saves
        that batch's tensors (before batch_transforms, which run in Python).

        Args:
            path (str or os.PathLike): the file, replaced if it exists.

        Raises:
            ValueError: a loader over stoker.Records or stoker.datasets files
                (its records are Python's, not files a command can reopen),
                or with a Python stage.
            OSError: the file cannot be written.

        Example:
            >>> loader.save_replay("replay.json")   # beside the checkpoint
            $ stoker replay replay.json --epoch 7 --batch 48213 --out batch.npz
        """
        if self._replay_source is None or self._stage is not None:
            raise ValueError("save_replay: this loader cannot be reopened by `stoker replay` (its records or a "
                             "Python stage live in this process)")
        spec = dict(self._replay_source, options=json.loads(self._options), state=self.state_dict())
        with open(os.fspath(path), "w") as f:
            json.dump(spec, f, indent=1)

    def _mixed(self, batch, epoch, index, xp):
        """The batch after the loader's batch_transforms (MixUp/CutMix)."""
        image_key, label_key = self._mix_keys
        if image_key is None:
            images, labels = self.batch_transforms.apply(batch[0], batch[1], self._seed, epoch, index, xp)
            return images, labels
        images, labels = self.batch_transforms.apply(batch[image_key], batch[label_key], self._seed, epoch, index, xp)
        out = dict(batch)
        out[image_key], out[label_key] = images, labels
        return out

    def stats(self) -> Dict[str, Any]:
        """Per-stage busy seconds (in all and per thread), counts, consumer wait,
        time to first batch, autotune choices, cache use, corrupt samples by
        reason; with device/pin_memory, h2d_s: the consumer thread's time
        staging batches in pinned memory and starting their copies.

        Returns:
            dict: a snapshot of the counters since the loader was created
            (the Stats reference page, docs/stats.md, documents each, as
            the one stats table declares it): read_s, decode_s,
            transform_s, samples, bytes_read, batches, consumer_wait_s,
            consumer_active_s, time_to_first_batch_s, wall_s, threads,
            threads_max, prefetch, autotune, autotune_log, batch_buffers,
            batch_buffer_bytes, batch_buffers_in_use, batch_buffers_held,
            batch_buffers_held_peak, ring_depth_max, cache_hits, cache_misses,
            cache_records, cache_bytes, cache_holes_bytes, cache_budget_bytes,
            shared_cache, shared_cache_entries, shared_cache_bytes,
            shared_cache_hits, shared_cache_filled, shard_files_open, shard_file_opens,
            cache_mode, cache_auto, cache_preload, cache_preload_records,
            cache_preload_bytes, cache_preload_s, cache_rewrite,
            cache_rewritten, cache_rewrite_on_read, cache_rewrite_settled, cache_rewrite_bytes_before,
            cache_rewrite_bytes_after, cache_rewrite_cpu_s, corrupt, corrupt_by_reason, corrupt_examples,
            thread_errors (exceptions caught on stoker's threads, by kind), boxes_dropped,
            boxes_truncated, per_thread (a list of dicts: read_s, decode_s,
            transform_s, samples), mixture, remote (None, or for shards
            that live elsewhere a dict: bytes_fetched, requests, retries by
            cause, fetch_wait_s, latency_p50_ms, latency_p99_ms,
            prefetch_depth, shard_fetch_s, shard_consume_s, fetched_ahead_bytes, prefetch_log,
            resident_bytes, stray_reads,
            index, index_scanned_bytes, cache_dir_hits, cache_dir_misses,
            cache_dir_bytes_written, cache_dir_evictions,
            cache_dir_bypass), memory (the memory budget: budget, scope
            ("loader" when memory_budget was given, "process" when left at 0:
            shared by every such loader of the process), process_held, used,
            peak, over_bytes, accounts: bytes per account, batch_buffers,
            remote_shards, volume_cache, sample_cache, decode_scratch;
            reserved: reservations), h2d_s, h2d_bytes.

        Example:
            >>> s = loader.stats()
            >>> s["consumer_wait_s"] / s["consumer_active_s"]  # the share of time the loop waited for data
            0.02
        """
        s = self._impl.stats()
        s["h2d_s"] = self._h2d_ns * 1e-9
        s["h2d_bytes"] = self._h2d_bytes
        s["python_transforms"] = list(self.python_transforms)
        return s

    def write_trace(self, path: _Path) -> None:
        """Writes this loader's spans (needs trace=True or STOKER_TRACE) as a
        Chrome / Perfetto trace-event JSON file (without them it holds no
        events). Open it in ui.perfetto.dev or chrome://tracing.

        Args:
            path (str or os.PathLike): the file, replaced if it exists.

        Raises:
            OSError: the file cannot be written.

        Example:
            >>> loader = stoker.Loader("data/train", transforms=[stoker.CenterCrop(224)], trace=True)
            >>> for batch in loader:
            ...     pass
            >>> loader.write_trace("trace.json")
        """
        self._impl.write_trace(os.fspath(path))

    def __del__(self):
        impl = getattr(self, "_impl", None)
        if impl is not None:
            _profiling.loader_closing(impl)

    def __iter__(self) -> Iterator[Any]:
        """Starts the next epoch (see ``epoch``; one in progress is abandoned) and iterates its batches.

        Returns:
            iterator: over the epoch's batches (see the class's Yields); its
            len() is len(loader).

        Raises:
            stoker.SampleError: when a batch holding a bad sample is due (see
                on_corrupt).
        """
        return _Iterator(self)


class _Iterator:
    def __init__(self, loader):
        self._loader = loader
        self._impl = loader._impl
        self._done = False
        self._epoch = self._impl.epoch  # the epoch start_epoch() runs (the batch transforms' draws)
        self._impl.start_epoch()
        if loader.output == "torch":
            import torch
            self._convert = torch.from_numpy
            self._xp = _batch_transforms._Torch(torch)
        else:
            self._convert = None
            self._xp = _batch_transforms._Numpy()
        self._mix = loader.batch_transforms
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
        stage = self._loader._stage
        try:
            batch, index = self._impl.next_indexed()
        except Exception as e:  # raised in order, when its batch is due
            if stage is not None:
                original = stage.reraise(e)
                if original is not e:
                    original.add_note(f"stoker: {e}")
                    return original
            return e
        if index < 0:
            self._done = True
            return None
        if stage is not None:
            batch = stage.take(index)
        elif self._convert is not None:
            batch = _staging.rebuild(batch, [self._convert(x) for x in _staging.leaves(batch)])
        if self._mix:
            try:
                batch = self._mixed(tuple(batch) if stage is not None else batch, index)
            except Exception as e:
                return e
        return batch

    def _mixed(self, batch, index):
        """The batch after the loader's batch_transforms (MixUp/CutMix)."""
        return self._loader._mixed(batch, self._epoch, index, self._xp)

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
                # NOTE: the local dropped: the exception's traceback holds this frame, and a frame holding the
                # exception is a cycle that kept the iterator (so the loader, its cache and buffers) alive after
                # the caller dropped both, until the garbage collector ran.
                try:
                    raise item
                finally:
                    item = None
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
            try:
                raise current
            finally:
                current = None  # as above
        return self._stager.finish(current)
