"""stoker.DataLoader: torch.utils.data.DataLoader's signature and attributes over stoker's engine.

A script ports by its import lines::

    from stoker.datasets import ImageFolder   # was: from torchvision.datasets import ImageFolder
    from stoker import DataLoader             # was: from torch.utils.data import DataLoader

The dataset's samples are read, decoded and transformed by stoker's C++
threads; its ``transform`` is mapped onto stoker's exact kernels as far as
they reproduce torchvision, and the rest of it, the ``target_transform`` and a
custom ``collate_fn`` run in Python on those threads (see stoker.Loader).
"""
import sys

_RECOGNISED_SAMPLERS = ("SequentialSampler", "RandomSampler", "DistributedSampler", "SubsetRandomSampler")


def _torch():
    import torch
    return torch


def _dataset_files(dataset):
    """(Files or Records, transform, target_transform) of a dataset stoker can read."""
    from stoker.records import Files, Records
    if isinstance(dataset, Records):
        return dataset, dataset.transform, dataset.target_transform
    subset = _torch().utils.data.Subset
    if isinstance(dataset, subset):  # random_split's parts: the records of the indices, in their order
        source, transform, target_transform = _dataset_files(dataset.dataset)
        return _subset(source, [int(i) for i in dataset.indices]), transform, target_transform
    rec = getattr(dataset, "_stoker_records", None)
    if rec is not None:
        info = rec()
    elif _is_torchvision_folder(dataset):
        info = _torchvision_records(dataset)
    else:
        raise TypeError(f"stoker.DataLoader: cannot read a {type(dataset).__module__}.{type(dataset).__name__}: "
                        f"stoker reads stoker.datasets.ImageFolder/DatasetFolder, torchvision's ImageFolder/"
                        f"DatasetFolder, and stoker.Records (wrap your dataset's encoded records: "
                        f"stoker.Records(lambda i: (encoded_bytes_or_path, target), size=len(dataset)))")
    if not info["default_loader"]:
        raise TypeError(f"stoker.DataLoader: {type(dataset).__name__}'s loader {dataset.loader!r} is not the "
                        f"default PIL loader: stoker decodes the files itself; return the file's bytes or path "
                        f"through stoker.Records to keep your own reading")
    files = Files(info["paths"], info["labels"], info["classes"], info["root"],
                  name=f"{type(dataset).__name__} '{info['root']}'")
    return files, getattr(dataset, "transform", None), getattr(dataset, "target_transform", None)


def _is_torchvision_folder(dataset):
    try:
        from torchvision.datasets import DatasetFolder
    except ImportError:
        return False
    return isinstance(dataset, DatasetFolder)


def _torchvision_records(dataset):
    import torchvision.datasets.folder as folder
    loader = dataset.loader
    default = loader is folder.pil_loader or (loader is folder.default_loader and
                                              _torchvision_backend() == "PIL")
    return {"paths": [p for p, _ in dataset.samples], "labels": [t for _, t in dataset.samples],
            "classes": list(dataset.classes), "root": str(dataset.root), "default_loader": default}


def _torchvision_backend():
    import torchvision
    return torchvision.get_image_backend()


def _default_collate(fn):
    if fn is None:
        return True
    try:
        from torch.utils.data import default_collate
    except ImportError:
        return False
    return fn is default_collate


class DataLoader:
    """torch.utils.data.DataLoader's drop-in: same arguments and attributes, stoker's threads.

    Args:
        dataset (Dataset): stoker.datasets.ImageFolder or DatasetFolder, torchvision's
            ImageFolder or DatasetFolder (with the default PIL loader), or a
            stoker.Records. Its ``transform`` (a torchvision Compose or list)
            runs as stoker.Loader runs torchvision transforms: exactly,
            mapped onto stoker's kernels as far as they reproduce it, the
            rest in Python; ``target_transform`` in Python.
        batch_size (int): as DataLoader. Default 1.
        shuffle (bool): as DataLoader (stoker's shuffled order; the seed
            is drawn from torch's generator, so torch.manual_seed fixes it).
            Default False.
        sampler (Sampler, optional): None, or torch's SequentialSampler, RandomSampler (without
            replacement, over the whole dataset), DistributedSampler (its
            rank, world size, shuffle, seed and drop_last; its set_epoch()
            is honoured) or SubsetRandomSampler (its indices). Any other
            sampler is a ValueError naming it.
        batch_sampler (BatchSampler, optional): None, or torch's
            BatchSampler over one of those.
        num_workers (int): stoker's worker threads (0: one thread, still off
            the training loop's thread). Default 0.
        collate_fn (callable): None or torch's default_collate: batches as
            torch's default collate gives them (stoker's zero-copy batches
            when nothing runs in Python); any other function runs in Python
            on the list of (sample, target), on a stoker thread.
        pin_memory (bool): pinned batches when CUDA is available (as torch,
            ignored without it). Default False.
        drop_last (bool): as DataLoader. Default False.
        timeout (float): must be 0 (a per-batch timeout is not supported: a
            ValueError otherwise).
        worker_init_fn (callable): not called: stoker's workers are threads
            of this process (a warning says so).
        multiprocessing_context (any): ignored (one stderr line) when given.
        generator (torch.Generator): the seed of the order is drawn from it.
        prefetch_factor (int): batches made ahead per worker. Default 2.
        persistent_workers (bool): accepted (stoker's threads persist).
        pin_memory_device (str): "" or "cuda".
        cache (str): stoker's own, keyword only: where the set is kept
            between epochs (stoker.Loader's ``cache``). Default "ram": each
            record kept in RAM under memory_budget once rewritten (its JPEGs
            losslessly, for region decoding: the same pixels), by the second
            epoch that reads it at the latest (the first reads the files as
            torch's workers do); what does not fit is read again each epoch. "mmap": read every epoch, as
            torch does. Never "decoded" or "auto": those may downscale, and
            the drop-in stays exact.

    Attributes:
        dataset, batch_size, sampler, batch_sampler, drop_last, num_workers,
        collate_fn, pin_memory, timeout, worker_init_fn, prefetch_factor,
        persistent_workers, generator: as given (sampler and batch_sampler
        made as torch makes them when not given); loader: the stoker.Loader
        behind it.

    Raises:
        TypeError: a dataset stoker cannot read (a generic Dataset: use
            stoker.Records), or a custom file loader.
        ValueError: a sampler or batch_sampler stoker cannot honour, or
            batch_size/shuffle/sampler/drop_last combined as torch refuses.

    Example:
        >>> from stoker.datasets import ImageFolder
        >>> from stoker import DataLoader
        >>> ds = ImageFolder("data/train", T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(),
        ...                                          T.ToTensor(), T.Normalize(MEAN, STD)]))
        >>> for images, targets in DataLoader(ds, batch_size=64, shuffle=True, num_workers=4):
        ...     ...
    """

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor=None, persistent_workers=False,
                 pin_memory_device="", cache="ram"):
        import stoker
        torch = _torch()
        tud = torch.utils.data
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable "
                             "multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if timeout:
            raise ValueError(f"stoker.DataLoader: timeout={timeout} is not supported (stoker's batches have no "
                             f"per-batch timeout); use timeout=0")
        if worker_init_fn is not None:
            print(f"stoker: worker_init_fn {getattr(worker_init_fn, '__name__', worker_init_fn)!s} is not called: "
                  f"stoker's workers are threads of this process", file=sys.stderr)
        if multiprocessing_context is not None:
            print("stoker: multiprocessing_context is ignored: stoker's workers are threads", file=sys.stderr)
        if cache not in ("ram", "mmap"):
            raise ValueError(f"stoker.DataLoader: cache={cache!r}: 'ram' or 'mmap' (the drop-in stays exact)")
        if pin_memory_device not in ("", "cuda"):
            raise ValueError(f"stoker.DataLoader: pin_memory_device={pin_memory_device!r}: only 'cuda'")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing."
                             "let num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor to None.")
        # The same argument checks as torch's DataLoader (its messages).
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, "
                                 "and drop_last")
            if type(batch_sampler) is not tud.BatchSampler:
                raise ValueError(f"stoker.DataLoader: batch_sampler {type(batch_sampler).__name__} is not "
                                 f"torch's BatchSampler: stoker cannot follow a custom batch order")
            batch_size, drop_last, sampler = batch_sampler.batch_size, batch_sampler.drop_last, batch_sampler.sampler
        elif batch_size is None:
            raise ValueError("stoker.DataLoader: batch_size=None (unbatched samples) is not supported")
        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor if num_workers > 0 else None
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.persistent_workers = persistent_workers
        self.generator = generator
        self.collate_fn = collate_fn if collate_fn is not None else tud.default_collate
        if sampler is None:
            sampler = tud.RandomSampler(dataset, generator=generator) if shuffle else tud.SequentialSampler(dataset)
        self.sampler = sampler
        if batch_sampler is None:
            batch_sampler = tud.BatchSampler(sampler, batch_size, drop_last)
        self.batch_sampler = batch_sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

        source, transform, target_transform = _dataset_files(dataset)
        kind = type(sampler).__name__
        if kind not in _RECOGNISED_SAMPLERS or type(sampler).__module__.split(".")[0] != "torch":
            raise ValueError(f"stoker.DataLoader: sampler {type(sampler).__module__}.{kind} is not one stoker "
                             f"can follow ({', '.join(_RECOGNISED_SAMPLERS)}); stoker makes its order in C++")
        rank, world_size, shuffled, seed = 0, 1, False, None
        self._sampler_epoch = None
        if kind == "RandomSampler":
            if sampler.replacement or sampler._num_samples is not None:
                raise ValueError("stoker.DataLoader: RandomSampler with replacement or num_samples is not "
                                 "supported (stoker shuffles each epoch's records once)")
            shuffled = True
            seed = self._draw_seed(torch, sampler.generator if sampler.generator is not None else generator)
        elif kind == "DistributedSampler":
            rank, world_size, shuffled, seed = sampler.rank, sampler.num_replicas, sampler.shuffle, sampler.seed
            if sampler.drop_last and not drop_last:
                print("stoker: DistributedSampler(drop_last=True) drops the uneven tail as the loader's "
                      "drop_last does (every rank the same number of whole batches)", file=sys.stderr)
                drop_last = True
            self._sampler_epoch = sampler
        elif kind == "SubsetRandomSampler":
            source = _subset(source, list(sampler.indices))
            shuffled = True
            seed = self._draw_seed(torch, sampler.generator if sampler.generator is not None else generator)
        if seed is None:
            seed = 0
        threads = max(1, num_workers)
        prefetch = (prefetch_factor or 2) * threads
        collate = None if _default_collate(collate_fn) else collate_fn
        self.loader = stoker.Loader(
            source, batch_size=batch_size, shuffle=shuffled, seed=int(seed) % 2 ** 63, drop_last=drop_last,
            transforms=transform if transform is not None else (), threads=threads, prefetch=prefetch, rank=rank,
            world_size=world_size, pin_memory=bool(pin_memory) and torch.cuda.is_available(),
            target_transform=target_transform, collate_fn=collate, progress=False, cache=cache,
            **({"preload": False} if cache == "ram" else {}))

    @staticmethod
    def _draw_seed(torch, generator):
        # NOTE: as torch's RandomSampler draws its seed: from the generator, else torch's default one.
        return int(torch.empty((), dtype=torch.int64).random_(generator=generator).item())

    def __len__(self):
        return len(self.loader)

    def __iter__(self):
        if self._sampler_epoch is not None:
            self.loader.set_epoch(int(self._sampler_epoch.epoch))
        it = iter(self.loader)
        # NOTE: torch's default_collate gives a list for a batch of (sample, target) tuples.
        return it if self.loader._stage is not None else _AsList(it)

    def stats(self):
        """The stoker.Loader's stats() (see there)."""
        return self.loader.stats()

    def __repr__(self):
        return f"stoker.DataLoader({self.dataset!r}, batch_size={self.batch_size}, num_workers={self.num_workers})"


class _AsList:
    """stoker's (images, labels) batches as the [images, labels] lists torch's default_collate makes."""

    def __init__(self, it):
        self._it = it

    def __iter__(self):
        return self

    def __len__(self):
        return len(self._it)

    def __next__(self):
        return list(next(self._it))


def _subset(source, indices):
    from stoker.records import Files, Records
    if isinstance(source, Records):
        raise ValueError("stoker.DataLoader: SubsetRandomSampler over stoker.Records: give Records the subset")
    return Files([source.paths[i] for i in indices], [source.labels[i] for i in indices], source.classes,
                 source.root, name=source.name)
