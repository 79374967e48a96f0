"""torchvision's folder datasets without torchvision: drop-in ImageFolder and DatasetFolder.

    from stoker.datasets import ImageFolder      # was: from torchvision.datasets import ImageFolder
    dataset = ImageFolder("data/train", transform=preset)
    dataset.classes, dataset.class_to_idx, dataset.samples, dataset.targets, dataset[0]

The signatures, attributes, file rules, errors and indexing are torchvision
0.14's (torchvision/datasets/folder.py), so code that reads or indexes the
dataset works unchanged; stoker.DataLoader reads the file list from it
(``_stoker_records``) and decodes and transforms in C++ where it can. The
rules, as torchvision has them:
  - classes are the sub-directories of ``root`` (symlinks to directories and
    hidden directories included), sorted; their index is their rank;
  - each class directory is walked with ``os.walk(followlinks=True)``, the
    (dirpath, dirnames, filenames) triples sorted (so a class's own files
    come first, then its sub-directories in path-string order: ``a/b-c``
    before ``a/b/d``) and each directory's file names sorted;
  - a file is kept when its path, lowered, ends with one of ``extensions``
    (which must be lower-case), or when ``is_valid_file(path)`` is true;
    exactly one of the two is given;
  - a class without a kept file is an error (FileNotFoundError).
Nothing imports torchvision or PIL until a sample is loaded; the classes
derive from torch.utils.data.Dataset when torch is installed.
"""
import os
import sys
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

try:
    from torch.utils.data import Dataset as _Base
except ImportError:  # stoker runs without torch (output="numpy")
    _Base = object  # type: ignore[assignment,misc]

_Path = Union[str, os.PathLike]

#: torchvision's image extensions (ImageFolder's ``extensions``), in torchvision's order: the folder suffixes of
#: stoker's format table (src/decode/formats.cc), which tests/python/test_formats.py checks they equal.
IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


def has_file_allowed_extension(filename: str, extensions: Union[str, Tuple[str, ...]]) -> bool:
    """Whether ``filename``, lowered, ends with one of ``extensions`` (torchvision's rule).

    Args:
        filename (str): a file name or path.
        extensions (str or tuple of str): the allowed extensions, lower-case
            (an upper-case one never matches).

    Returns:
        bool: True when the name ends with one of them, whatever its case.

    Raises:
        TypeError: ``extensions`` is not a str or an iterable of str.

    Example:
        >>> has_file_allowed_extension("a/B.JPG", (".jpg", ".png"))
        True
    """
    return filename.lower().endswith(extensions if isinstance(extensions, str) else tuple(extensions))


def is_image_file(filename: str) -> bool:
    """Whether ``filename`` has one of IMG_EXTENSIONS, whatever its case.

    Args:
        filename (str): a file name or path.

    Returns:
        bool: has_file_allowed_extension(filename, IMG_EXTENSIONS).

    Raises:
        AttributeError: ``filename`` is not a str.

    Example:
        >>> is_image_file("cat.Png"), is_image_file("notes.txt")
        (True, False)
    """
    return has_file_allowed_extension(filename, IMG_EXTENSIONS)


def find_classes(directory: _Path) -> Tuple[List[str], Dict[str, int]]:
    """The class folders of ``directory``: its sub-directories, sorted, and their indices.

    Args:
        directory (str or os.PathLike): the dataset's root.

    Returns:
        (list of str, dict): the class names, sorted, and class name -> index.

    Raises:
        FileNotFoundError: ``directory`` does not exist or has no sub-directory.

    Example:
        >>> find_classes("data/sample")[0][:2]
        ['00_architecture', '01_birds']
    """
    classes = sorted(entry.name for entry in os.scandir(directory) if entry.is_dir())
    if not classes:
        raise FileNotFoundError(f"Couldn't find any class folder in {directory}.")
    return classes, {name: i for i, name in enumerate(classes)}


def make_dataset(directory: _Path, class_to_idx: Optional[Dict[str, int]] = None,
                 extensions: Optional[Union[str, Tuple[str, ...]]] = None,
                 is_valid_file: Optional[Callable[[str], bool]] = None) -> List[Tuple[str, int]]:
    """The samples of a class-folder tree: (path, class index) pairs, in torchvision's order.

    Args:
        directory (str or os.PathLike): the dataset's root (``~`` expanded).
        class_to_idx (dict, optional): class folder name -> index; a folder
            that does not exist is skipped. Default None: find_classes(directory).
        extensions (str or tuple of str, optional): the lower-case extensions
            of the files to keep.
        is_valid_file (callable, optional): keeps the files whose full path
            it returns true for. Exactly one of it and ``extensions`` is given.

    Returns:
        list of (str, int): the kept files' paths (``directory`` joined with
        the path under it) and class indices.

    Raises:
        ValueError: ``class_to_idx`` is empty; both or neither of
            ``extensions`` and ``is_valid_file`` given.
        FileNotFoundError: a class has no kept file, or (``class_to_idx``
            None) ``directory`` has no class folder.

    Example:
        >>> make_dataset("data/sample", extensions=IMG_EXTENSIONS)[0]
        ('data/sample/00_architecture/architecture_00000.jpg', 0)
    """
    directory = os.path.expanduser(directory)
    if class_to_idx is None:
        _, class_to_idx = find_classes(directory)
    elif not class_to_idx:
        raise ValueError("'class_to_index' must have at least one entry to collect any samples.")  # sic
    if (extensions is None) == (is_valid_file is None):
        raise ValueError("Both extensions and is_valid_file cannot be None or not None at the same time")
    keep = is_valid_file if extensions is None else (lambda path: has_file_allowed_extension(path, extensions))
    samples, found = [], set()
    for name in sorted(class_to_idx):
        class_dir = os.path.join(directory, name)
        if not os.path.isdir(class_dir):
            continue
        for dirpath, _, fnames in sorted(os.walk(class_dir, followlinks=True)):
            for fname in sorted(fnames):
                path = os.path.join(dirpath, fname)
                if keep(path):  # type: ignore[misc]
                    samples.append((path, class_to_idx[name]))
                    found.add(name)
    empty = set(class_to_idx) - found
    if empty:
        msg = f"Found no valid file for the classes {', '.join(sorted(empty))}. "
        if extensions is not None:
            msg += f"Supported extensions are: {extensions if isinstance(extensions, str) else ', '.join(extensions)}"
        raise FileNotFoundError(msg)
    return samples


def pil_loader(path: _Path) -> Any:
    """Opens an image file with PIL and converts it to RGB (torchvision's pil_loader).

    Args:
        path (str or os.PathLike): the file.

    Returns:
        PIL.Image.Image: the image, mode "RGB".

    Raises:
        OSError: the file cannot be read; PIL.UnidentifiedImageError (an
            OSError) when PIL cannot decode it.

    Example:
        >>> pil_loader("data/sample/00_architecture/architecture_00000.jpg").mode
        'RGB'
    """
    from PIL import Image
    with open(path, "rb") as f:
        return Image.open(f).convert("RGB")


def default_loader(path: _Path) -> Any:
    """ImageFolder's default loader: pil_loader (torchvision's with its default "PIL" backend).

    stoker.DataLoader decodes the files of a dataset with this loader (or
    torchvision's default_loader or pil_loader) itself, to the same pixels.

    Args:
        path (str or os.PathLike): the file.

    Returns:
        PIL.Image.Image: the image, mode "RGB".

    Raises:
        OSError: as pil_loader.

    Example:
        >>> default_loader("data/sample/00_architecture/architecture_00000.jpg").size
        (564, 441)
    """
    return pil_loader(path)


class StandardTransform:
    """A dataset's ``transforms``: its transform on the sample and target_transform on the target.

    As torchvision.datasets.vision.StandardTransform (the same repr).

    Args:
        transform (callable, optional): applied to the sample. Default None.
        target_transform (callable, optional): applied to the target. Default None.

    Raises:
        Whatever the transforms raise, when called.

    Example:
        >>> StandardTransform(None, str)(1, 2)
        (1, '2')
    """

    def __init__(self, transform: Optional[Callable] = None, target_transform: Optional[Callable] = None) -> None:
        self.transform = transform
        self.target_transform = target_transform

    def __call__(self, input: Any, target: Any) -> Tuple[Any, Any]:
        if self.transform is not None:
            input = self.transform(input)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return input, target

    def _format_transform_repr(self, transform: Callable, head: str) -> List[str]:
        lines = repr(transform).splitlines()
        return [head + lines[0]] + [" " * len(head) + line for line in lines[1:]]

    def __repr__(self) -> str:
        body = [type(self).__name__]
        if self.transform is not None:
            body += self._format_transform_repr(self.transform, "Transform: ")
        if self.target_transform is not None:
            body += self._format_transform_repr(self.target_transform, "Target transform: ")
        return "\n".join(body)


def _is_default_loader(loader: Any) -> bool:
    if loader is default_loader or loader is pil_loader:
        return True
    tv = sys.modules.get("torchvision.datasets.folder")  # torchvision's loaders exist only once it is imported
    if tv is None:
        return False
    if loader is tv.pil_loader:
        return True
    return loader is tv.default_loader and sys.modules["torchvision"].get_image_backend() == "PIL"


class DatasetFolder(_Base):
    """torchvision.datasets.DatasetFolder: samples in class folders, ``root/<class>/**/<file>``.

    The classes are ``root``'s sub-directories, sorted (find_classes); the
    samples, each class's files that have one of ``extensions`` or that
    ``is_valid_file`` accepts, walked as torchvision walks them
    (make_dataset; both overridable in a subclass, as torchvision's).
    ``dataset[i]`` is ``(transform(loader(path)), target_transform(target))``.

    Args:
        root (str or os.PathLike): the root directory (``~`` expanded when a str).
        loader (callable): loads a sample from its path.
        extensions (tuple of str, optional): the lower-case extensions of the
            sample files. Default None.
        transform (callable, optional): applied to each loaded sample. Default None.
        target_transform (callable, optional): applied to each target. Default None.
        is_valid_file (callable, optional): keeps the files whose full path it
            returns true for; exactly one of it and ``extensions``. Default None.

    Attributes:
        root, loader, extensions, transform, target_transform: as given.
        transforms (StandardTransform or None): both transforms, None when neither is given.
        classes (list of str): the class names, sorted.
        class_to_idx (dict): class name -> index.
        samples (list of (str, int)): each sample's path and class index.
        targets (list of int): each sample's class index.

    Raises:
        FileNotFoundError: ``root`` has no class folder, or a class has no sample file.
        ValueError: both or neither of ``extensions`` and ``is_valid_file`` given.

    Example:
        >>> ds = DatasetFolder("data/sample", loader=pil_loader, extensions=(".jpg",))
        >>> len(ds), ds.classes[0], ds.samples[0]
        (2040, '00_architecture', ('data/sample/00_architecture/architecture_00000.jpg', 0))
    """

    _repr_indent = 4

    def __init__(self, root: _Path, loader: Callable[[str], Any], extensions: Optional[Tuple[str, ...]] = None,
                 transform: Optional[Callable] = None, target_transform: Optional[Callable] = None,
                 is_valid_file: Optional[Callable[[str], bool]] = None) -> None:
        self.root = os.path.expanduser(root) if isinstance(root, str) else root
        self.transform = transform
        self.target_transform = target_transform
        self.transforms = (StandardTransform(transform, target_transform)
                           if transform is not None or target_transform is not None else None)
        classes, class_to_idx = self.find_classes(self.root)
        samples = self.make_dataset(self.root, class_to_idx, extensions, is_valid_file)
        self.loader = loader
        self.extensions = extensions
        self.classes = classes
        self.class_to_idx = class_to_idx
        self.samples = samples
        self.targets = [s[1] for s in samples]

    @staticmethod
    def make_dataset(directory: _Path, class_to_idx: Dict[str, int], extensions: Optional[Tuple[str, ...]] = None,
                     is_valid_file: Optional[Callable[[str], bool]] = None) -> List[Tuple[str, int]]:
        """The samples: (path, class index) pairs (module-level make_dataset; override to list them otherwise).

        Args:
            directory (str or os.PathLike): the root, ``self.root``.
            class_to_idx (dict): class name -> index (required here).
            extensions (tuple of str, optional): the lower-case extensions to keep. Default None.
            is_valid_file (callable, optional): keeps the paths it returns true
                for; exactly one of it and ``extensions``. Default None.

        Returns:
            list of (str, int): the samples.

        Raises:
            ValueError: ``class_to_idx`` None or empty; both or neither of
                ``extensions`` and ``is_valid_file``.
            FileNotFoundError: a class has no kept file.

        Example:
            >>> DatasetFolder.make_dataset("data/sample", {"01_birds": 0}, extensions=(".jpg",))[0]
            ('data/sample/01_birds/birds_00000.jpg', 0)
        """
        if class_to_idx is None:  # the method's find_classes, maybe overridden, is not the module's
            raise ValueError("The class_to_idx parameter cannot be None.")
        return make_dataset(directory, class_to_idx, extensions=extensions, is_valid_file=is_valid_file)

    def find_classes(self, directory: _Path) -> Tuple[List[str], Dict[str, int]]:
        """The class folders: ``directory``'s sub-directories, sorted, and class name -> index.

        Override it to keep a subset of the classes or read another layout.

        Args:
            directory (str or os.PathLike): the root, ``self.root``.

        Returns:
            (list of str, dict): the class names and class name -> index.

        Raises:
            FileNotFoundError: ``directory`` has no sub-directory.

        Example:
            >>> ImageFolder("data/sample").find_classes("data/sample")[1]["01_birds"]
            1
        """
        return find_classes(directory)

    def __getitem__(self, index: int) -> Tuple[Any, Any]:
        """The sample ``index``: ``(transform(loader(path)), target_transform(target))``.

        Args:
            index (int): its index in ``samples``.

        Returns:
            tuple: (sample, target); each transform applied when not None.

        Raises:
            IndexError: ``index`` out of range; whatever the loader or the transforms raise.
        """
        path, target = self.samples[index]
        sample = self.loader(path)
        if self.transform is not None:
            sample = self.transform(sample)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return sample, target

    def __len__(self) -> int:
        """The number of samples."""
        return len(self.samples)

    def extra_repr(self) -> str:
        """Extra lines of the repr (override to add some); "" here."""
        return ""

    def __repr__(self) -> str:
        body = [f"Number of datapoints: {len(self)}"]
        if self.root is not None:
            body.append(f"Root location: {self.root}")
        body += self.extra_repr().splitlines()
        if getattr(self, "transforms", None) is not None:
            body += [repr(self.transforms)]
        return "\n".join([f"Dataset {type(self).__name__}"] + [" " * self._repr_indent + line for line in body])

    def _stoker_records(self) -> Dict[str, Any]:
        """What stoker.DataLoader reads of the dataset: the files, their labels, the classes.

        Returns:
            dict: "paths" (list of str, each sample's path), "labels" (list of
            int, each sample's target as ``dataset[i]`` returns it before
            target_transform: ``samples[i][1]``), "classes" (list of str),
            "root" (str), "default_loader" (bool: the loader is this module's
            default_loader or pil_loader, or torchvision's, so stoker may
            decode the files itself).
        """
        return {"paths": [os.fspath(p) for p, _ in self.samples], "labels": [int(t) for _, t in self.samples],
                "classes": list(self.classes), "root": os.fspath(self.root),
                "default_loader": _is_default_loader(self.loader)}


class ImageFolder(DatasetFolder):
    """torchvision.datasets.ImageFolder: images in class folders, ``root/<class>/**/<image>``.

    A DatasetFolder whose files are those with one of IMG_EXTENSIONS
    (whatever their case), or those ``is_valid_file`` accepts, and whose
    loader opens them with PIL as RGB. ``dataset[i]`` is
    ``(transform(image), target_transform(class index))``.

    Args:
        root (str or os.PathLike): the root directory (``~`` expanded when a str).
        transform (callable, optional): applied to each PIL image. Default None.
        target_transform (callable, optional): applied to each target. Default None.
        loader (callable): loads an image from its path. Default default_loader.
        is_valid_file (callable, optional): keeps the files whose full path it
            returns true for, instead of the extension check. Default None.

    Attributes:
        As DatasetFolder's (``extensions`` is IMG_EXTENSIONS, or None with
        ``is_valid_file``), and ``imgs``: ``samples`` itself.

    Raises:
        FileNotFoundError: ``root`` has no class folder, or a class has no image.

    Example:
        >>> ds = ImageFolder("data/sample")
        >>> len(ds), ds.classes[:2], ds.targets[-1]
        (2040, ['00_architecture', '01_birds'], 11)
        >>> image, target = ds[0]
        >>> image.mode, target
        ('RGB', 0)
    """

    def __init__(self, root: _Path, transform: Optional[Callable] = None, target_transform: Optional[Callable] = None,
                 loader: Callable[[str], Any] = default_loader,
                 is_valid_file: Optional[Callable[[str], bool]] = None) -> None:
        super().__init__(root, loader, IMG_EXTENSIONS if is_valid_file is None else None, transform=transform,
                         target_transform=target_transform, is_valid_file=is_valid_file)
        self.imgs = self.samples
