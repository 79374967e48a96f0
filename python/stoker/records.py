"""stoker.Records: data kept anywhere Python reaches (LMDB, HDF5, a database, a custom store), decoded and
augmented by stoker; and the in-memory file lists stoker.datasets hand to the loader."""
import os
import threading


# A record returned without a target: its sample is the image alone (batches of images).
NO_TARGET = object()


class Records:
    """Records that Python code returns, one per index, for stoker.Loader and stoker.DataLoader.

    Each record is the encoded image (bytes, bytearray or memoryview: JPEG,
    PNG, WebP, TIFF, BMP, GIF or .npy, told apart by their first bytes, as
    stoker.Loader reads from files) or a path to one (str
    or os.PathLike), optionally with a target: ``(image, target)``. stoker
    reads it on its worker threads (the GIL held only while your code runs),
    decodes and transforms it; the target, any Python object, is passed
    through (``target_transform`` applies) and collated as torch's
    ``default_collate`` would.

    Args:
        data (sequence or callable): ``data[i]`` for a sequence (anything
            with ``__len__`` and ``__getitem__``), or ``data(i)`` for a
            callable, which needs ``size``.
        size (int, optional): the number of records; default ``len(data)``.
        name (str, optional): how messages and stats() name the records
            (record i is ``name[i]``). Default "records".
        transform (callable, optional): as a torchvision dataset's, for
            stoker.DataLoader(records) (stoker.Loader takes ``transforms=``).
        target_transform (callable, optional): likewise, for
            stoker.DataLoader(records).

    Raises:
        TypeError: ``data`` is neither a sequence nor a callable, or a
            callable without ``size``.
        ValueError: ``size`` < 1.

    Example:
        >>> env = lmdb.open("train.lmdb", readonly=True, lock=False)
        >>> def record(i):
        ...     with env.begin() as txn:
        ...         jpeg, label = pickle.loads(txn.get(f"{i:08d}".encode()))
        ...     return jpeg, label
        >>> loader = stoker.Loader(stoker.Records(record, size=env.stat()["entries"]), batch_size=64,
        ...                        transforms=[stoker.RandomResizedCrop(224), stoker.Normalize(mean, std)])
    """

    def __init__(self, data, size=None, name="records", transform=None, target_transform=None):
        if callable(data) and not hasattr(data, "__getitem__"):
            if size is None:
                raise TypeError("Records: a callable needs size= (the number of records)")
            self._get = data
        elif hasattr(data, "__getitem__") and (size is not None or hasattr(data, "__len__")):
            self._get = data.__getitem__
            size = len(data) if size is None else size
        else:
            raise TypeError(f"Records: data must be a sequence or a callable of the index, got {type(data).__name__}")
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"Records: size must be an int >= 1, got {size!r}")
        self.data = data
        self.size = size
        self.name = str(name)
        self.transform = transform
        self.target_transform = target_transform
        self._targets = {}  # record -> its target, from the last read of it
        self._lock = threading.Lock()

    def __len__(self):
        return self.size

    def __repr__(self):
        return f"Records({self.name}, size={self.size})"

    def _read(self, i):
        """Record i's bytes or path for C++; its target kept for the sample stage."""
        item = self._get(i)
        if isinstance(item, tuple):
            if len(item) != 2:
                raise ValueError(f"record {i}: expected bytes, a path or (bytes or path, target), "
                                 f"got a tuple of {len(item)}")
            item, target = item
            with self._lock:
                self._targets[i] = target
        if not isinstance(item, (bytes, bytearray, memoryview, str, os.PathLike)):
            raise TypeError(f"record {i}: expected bytes, bytearray, memoryview or a path, got {type(item).__name__}")
        return item

    def _target(self, i):
        """Record i's target, or NO_TARGET for a record returned without one."""
        with self._lock:
            return self._targets.get(i, NO_TARGET)


class Files:
    """An explicit list of image files and their integer labels (a dataset's samples), record i = paths[i]."""

    def __init__(self, paths, labels, classes=(), root="", name="files"):
        self.paths = [os.fspath(p) for p in paths]
        self.labels = [int(t) for t in labels]
        if len(self.paths) != len(self.labels):
            raise ValueError(f"Files: {len(self.paths)} paths but {len(self.labels)} labels")
        if not self.paths:
            raise FileNotFoundError(f"{name}: no records")
        self.classes = list(classes)
        self.root = os.fspath(root)
        self.name = name

    def __len__(self):
        return len(self.paths)

    def __repr__(self):
        return f"Files({self.name}, {len(self.paths)} records)"
