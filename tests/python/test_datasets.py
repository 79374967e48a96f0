"""stoker.datasets.ImageFolder and DatasetFolder against torchvision 0.14's:
every attribute, the file rules (nested and symlinked directories, extension
case, non-image files, is_valid_file), ds[i] with a transform and a
target_transform, the errors' types and messages; and that the module needs
neither torchvision nor PIL to be imported."""
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from stoker import datasets

tv = pytest.importorskip("torchvision.datasets")
T = pytest.importorskip("torchvision.transforms")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLE = os.path.join(ROOT, "data", "sample")


@pytest.fixture(scope="module")
def sample(request):
    """data/sample (make data) when it is there, else the photos fixture (the same generator, 4 classes x 6)."""
    if os.path.exists(os.path.join(SAMPLE, ".stoker-sample-complete")):
        return SAMPLE
    return request.getfixturevalue("photos")


def _image(path, mode="RGB", size=(13, 9), seed=0, **save):
    rng = np.random.default_rng(seed)
    bands = {"L": 1, "RGB": 3, "RGBA": 4}[mode]
    arr = rng.integers(0, 256, size=(size[1], size[0], bands), dtype=np.uint8)
    Image.fromarray(arr[..., 0] if bands == 1 else arr, mode).save(path, **save)


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """An ImageFolder with what torchvision's rules have to decide: nested sub-directories whose
    path-string order is not depth-first (sub, sub-2, sub/deep), upper-case extensions, non-image and
    hidden files, a file at the root, a symlinked class, a symlinked sub-directory, every image format."""
    base = tmp_path_factory.mktemp("tree")
    root, outside = base / "root", base / "outside"
    files = {
        "cat/b.jpg": "RGB", "cat/A.JPG": "RGB", "cat/c.Png": "RGBA", "cat/.hidden.jpg": "RGB",
        "cat/sub/d.jpeg": "RGB", "cat/sub-2/e.JPEG": "RGB", "cat/sub/deep/f.webp": "RGB",
        "dog/g.bmp": "RGB", "dog/h.ppm": "RGB", "dog/i.pgm": "L", "dog/j.tif": "RGB", "dog/k.TIFF": "RGBA",
        "dog/l.png": "L",
    }
    for i, (rel, mode) in enumerate(sorted(files.items())):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        _image(str(path), mode, size=(9 + i, 7 + 2 * i), seed=i,
               **({"format": "JPEG"} if rel.lower().endswith((".jpg", ".jpeg")) else {}))
    (root / "cat" / "notes.txt").write_text("not an image")
    (root / "cat" / "x.jpg.bak").write_text("not an image either")
    (root / "readme.jpg").write_text("a file at the root: no class")
    (outside / "eel").mkdir(parents=True)
    _image(str(outside / "eel" / "m.png"), "RGB", seed=40)
    _image(str(outside / "eel" / "o.jpg"), "RGB", seed=42, format="JPEG")
    (outside / "more").mkdir()
    _image(str(outside / "more" / "n.jpg"), "RGB", seed=41, format="JPEG")
    os.symlink(outside / "eel", root / "eel")             # a class that is a symlink
    os.symlink(outside / "more", root / "dog" / "linked")  # a sub-directory that is one (followlinks=True)
    return str(root)


ATTRS = ("root", "transform", "target_transform", "extensions", "classes", "class_to_idx", "samples", "targets")


def assert_same(ours, theirs):
    """Every attribute torchvision's dataset has, equal in ours (the loader: the same object when given)."""
    for name in ATTRS:
        assert getattr(ours, name) == getattr(theirs, name), name
        assert type(getattr(ours, name)) is type(getattr(theirs, name)), name
    assert len(ours) == len(theirs)
    assert repr(ours) == repr(theirs)
    if theirs.transforms is None:
        assert ours.transforms is None
    else:
        assert type(ours.transforms).__name__ == type(theirs.transforms).__name__ == "StandardTransform"
        assert ours.transforms.transform is theirs.transforms.transform
        assert ours.transforms.target_transform is theirs.transforms.target_transform
        assert repr(ours.transforms) == repr(theirs.transforms)
    if isinstance(theirs, tv.ImageFolder):
        assert ours.imgs == theirs.imgs and ours.imgs is ours.samples
    else:
        assert ours.loader is theirs.loader
    assert set(vars(theirs)) <= set(vars(ours)), set(vars(theirs)) - set(vars(ours))


def assert_same_items(ours, theirs, indices):
    for i in indices:
        (a, ya), (b, yb) = ours[i], theirs[i]
        assert type(a) is type(b) and type(ya) is type(yb)
        assert ya == yb
        if isinstance(b, Image.Image):
            assert (a.mode, a.size) == (b.mode, b.size)
            assert np.array_equal(np.asarray(a), np.asarray(b))
        elif hasattr(b, "dtype"):
            assert a.dtype == b.dtype and a.shape == b.shape and bool((a == b).all())
        else:
            assert a == b


def test_sample_image_folder_equals_torchvision(sample):
    ours, theirs = datasets.ImageFolder(sample), tv.ImageFolder(sample)
    assert_same(ours, theirs)
    assert ours.extensions == datasets.IMG_EXTENSIONS == tv.folder.IMG_EXTENSIONS
    assert_same_items(ours, theirs, [0, len(theirs) // 2, len(theirs) - 1])


def test_sample_items_with_transforms_equal_torchvision(sample):
    tf = T.Compose([T.Resize(40), T.CenterCrop(32), T.PILToTensor()])
    target_tf = T.Lambda(lambda t: t * 10 + 1)
    ours = datasets.ImageFolder(sample, transform=tf, target_transform=target_tf)
    theirs = tv.ImageFolder(sample, transform=tf, target_transform=target_tf)
    assert_same(ours, theirs)
    assert repr(ours).splitlines()[3:] == repr(theirs).splitlines()[3:]  # StandardTransform, Transform: Compose(
    assert_same_items(ours, theirs, range(0, len(theirs), max(1, len(theirs) // 12)))


def test_torch_dataloader_batches_equal_torchvision(sample):
    import torch
    tf = T.Compose([T.Resize(24), T.CenterCrop(24), T.ToTensor()])
    ours, theirs = datasets.ImageFolder(sample, transform=tf), tv.ImageFolder(sample, transform=tf)
    assert isinstance(ours, torch.utils.data.Dataset)
    subset = list(range(0, len(theirs), max(1, len(theirs) // 20)))
    for (x, y), (u, v) in zip(torch.utils.data.DataLoader(torch.utils.data.Subset(ours, subset), batch_size=5),
                              torch.utils.data.DataLoader(torch.utils.data.Subset(theirs, subset), batch_size=5)):
        assert torch.equal(x, u) and torch.equal(y, v) and y.dtype == v.dtype


def test_tree_rules_equal_torchvision(tree):
    ours, theirs = datasets.ImageFolder(tree), tv.ImageFolder(tree)
    assert_same(ours, theirs)
    names = [os.path.relpath(p, tree) for p, _ in theirs.samples]
    # The rules the tree is there to pin: the triples of os.walk sorted by path string (sub-2 before sub/deep),
    # any case of an extension, hidden files, symlinked classes and sub-directories; no .txt, .bak, root files.
    assert names == ["cat/.hidden.jpg", "cat/A.JPG", "cat/b.jpg", "cat/c.Png", "cat/sub/d.jpeg",
                     "cat/sub-2/e.JPEG", "cat/sub/deep/f.webp", "dog/g.bmp", "dog/h.ppm", "dog/i.pgm", "dog/j.tif",
                     "dog/k.TIFF", "dog/l.png", "dog/linked/n.jpg", "eel/m.png", "eel/o.jpg"]
    assert ours.classes == ["cat", "dog", "eel"] and ours.targets == [0] * 7 + [1] * 7 + [2] * 2
    assert_same_items(ours, theirs, range(len(theirs)))


def test_tree_items_with_transforms_equal_torchvision(tree):
    tf = T.Compose([T.Resize((6, 5)), T.ToTensor(), T.Normalize([0.5] * 3, [0.25] * 3)])
    target_tf = T.Lambda(str)  # not str itself: torchvision's repr calls target_transform.__repr__() unbound
    ours = datasets.ImageFolder(tree, transform=tf, target_transform=target_tf)
    theirs = tv.ImageFolder(tree, transform=tf, target_transform=target_tf)
    assert_same(ours, theirs)
    assert_same_items(ours, theirs, range(len(theirs)))


def test_is_valid_file_equals_torchvision(tree):
    def keep(path):
        return "sub" in path or path.endswith((".txt", ".png"))
    ours, theirs = datasets.ImageFolder(tree, is_valid_file=keep), tv.ImageFolder(tree, is_valid_file=keep)
    assert_same(ours, theirs)
    assert ours.extensions is None
    assert any(p.endswith("notes.txt") for p, _ in ours.samples)


def test_dataset_folder_equals_torchvision(tree):
    def read(path):
        with open(path, "rb") as f:
            return f.read()
    for kw in (dict(extensions=(".jpg", ".jpeg")), dict(extensions=".png"), dict(extensions=[".bmp", ".png", ".jpg"]),
               dict(is_valid_file=lambda p: not p.endswith(".txt"))):
        ours, theirs = datasets.DatasetFolder(tree, read, **kw), tv.DatasetFolder(tree, read, **kw)
        assert_same(ours, theirs)
        assert_same_items(ours, theirs, range(len(theirs)))
    assert datasets.DatasetFolder(tree, read, extensions=".png").extensions == ".png"


def test_custom_loader_and_pathlike_root_equal_torchvision(tree):
    import pathlib
    def gray(path):
        with open(path, "rb") as f:
            return Image.open(f).convert("L")
    root = pathlib.Path(tree)
    ours, theirs = datasets.ImageFolder(root, loader=gray), tv.ImageFolder(root, loader=gray)
    assert_same(ours, theirs)
    assert isinstance(ours.root, pathlib.Path)
    assert_same_items(ours, theirs, range(len(theirs)))


def test_subclass_overrides_are_honoured_as_torchvision(tree):
    def only(base):
        class Only(base):
            def find_classes(self, directory):
                return ["dog", "eel"], {"dog": 0, "eel": 1}
        Only.__name__ = "Only"
        return Only
    ours, theirs = only(datasets.ImageFolder)(tree), only(tv.ImageFolder)(tree)
    assert_same(ours, theirs)
    assert ours.classes == ["dog", "eel"] and "Dataset Only" in repr(ours)


def test_module_functions_equal_torchvision(tree):
    assert datasets.find_classes(tree) == tv.folder.find_classes(tree)
    for kw in (dict(extensions=datasets.IMG_EXTENSIONS), dict(extensions=".jpg"),
               dict(is_valid_file=lambda p: p.endswith(("g", "f")))):
        assert datasets.make_dataset(tree, **kw) == tv.folder.make_dataset(tree, **kw)
        assert datasets.make_dataset(tree, {"cat": 5}, **kw) == tv.folder.make_dataset(tree, {"cat": 5}, **kw)
    for name in ("a.JPG", "b.jpg.bak", ".jpg", "c.tiff", "d.TXT"):
        assert datasets.is_image_file(name) == tv.folder.is_image_file(name)
        assert datasets.has_file_allowed_extension(name, (".jpg",)) == tv.folder.has_file_allowed_extension(
            name, (".jpg",))
    assert not datasets.has_file_allowed_extension("a.jpg", (".JPG",))  # upper-case extensions never match


def test_symlink_cycle_lists_what_torchvision_lists(tmp_path):
    (tmp_path / "a").mkdir()
    _image(str(tmp_path / "a" / "x.png"))
    os.symlink("..", tmp_path / "a" / "loop")  # os.walk(followlinks=True) follows it until the kernel's ELOOP
    ours, theirs = datasets.ImageFolder(str(tmp_path)), tv.ImageFolder(str(tmp_path))
    assert_same(ours, theirs)
    assert len(ours) > 1


def raised(fn):
    with pytest.raises(Exception) as info:
        fn()
    return type(info.value), str(info.value)


def test_errors_equal_torchvision(tree, tmp_path):
    def same(ours, theirs):
        a, b = raised(ours), raised(theirs)
        assert a == b
        return a
    both = dict(extensions=(".jpg",), is_valid_file=lambda p: True)
    assert same(lambda: datasets.DatasetFolder(tree, open, **both), lambda: tv.DatasetFolder(tree, open, **both))[0] \
        is ValueError
    assert same(lambda: datasets.DatasetFolder(tree, open), lambda: tv.DatasetFolder(tree, open))[0] is ValueError
    # no valid file in any class: upper-case extensions, an extension nobody has, is_valid_file never true
    for kw in (dict(extensions=(".JPG",)), dict(extensions=".gif"), dict(is_valid_file=lambda p: False)):
        t, msg = same(lambda: datasets.DatasetFolder(tree, open, **kw), lambda: tv.DatasetFolder(tree, open, **kw))
        assert t is FileNotFoundError and msg.startswith("Found no valid file for the classes cat, dog, eel.")
    # one class empty (a directory with only a non-image file), the others fine: the whole set is refused
    bad = tmp_path / "bad"
    (bad / "full").mkdir(parents=True)
    _image(str(bad / "full" / "a.png"))
    (bad / "hollow" / "deeper").mkdir(parents=True)
    (bad / "hollow" / "notes.txt").write_text("x")
    t, msg = same(lambda: datasets.ImageFolder(str(bad)), lambda: tv.ImageFolder(str(bad)))
    assert t is FileNotFoundError and msg.startswith("Found no valid file for the classes hollow. Supported extensions")
    # a root without class folders, a missing root
    (tmp_path / "flat").mkdir()
    _image(str(tmp_path / "flat" / "a.png"))
    assert same(lambda: datasets.ImageFolder(str(tmp_path / "flat")),
                lambda: tv.ImageFolder(str(tmp_path / "flat")))[0] is FileNotFoundError
    assert same(lambda: datasets.ImageFolder(str(tmp_path / "nowhere")),
                lambda: tv.ImageFolder(str(tmp_path / "nowhere")))[0] is FileNotFoundError
    # make_dataset: the static method wants class_to_idx, and neither accepts an empty one
    assert same(lambda: datasets.DatasetFolder.make_dataset(tree, None, (".jpg",)),
                lambda: tv.DatasetFolder.make_dataset(tree, None, (".jpg",)))[0] is ValueError
    assert same(lambda: datasets.make_dataset(tree, {}, (".jpg",)),
                lambda: tv.folder.make_dataset(tree, {}, (".jpg",)))[0] is ValueError
    # indexing past the end
    ours, theirs = datasets.ImageFolder(tree), tv.ImageFolder(tree)
    assert same(lambda: ours[len(ours)], lambda: theirs[len(theirs)])[0] is IndexError


def test_loaders_equal_torchvision(tree):
    for path, _ in datasets.ImageFolder(tree).samples:
        for ours, theirs in ((datasets.pil_loader, tv.folder.pil_loader),
                             (datasets.default_loader, tv.folder.default_loader)):
            a, b = ours(path), theirs(path)
            assert a.mode == b.mode == "RGB" and np.array_equal(np.asarray(a), np.asarray(b))


def test_stoker_records(tree):
    ds = datasets.ImageFolder(tree, transform=T.ToTensor(), target_transform=str)
    rec = ds._stoker_records()
    assert rec == {"paths": [p for p, _ in ds.samples], "labels": ds.targets, "classes": ds.classes,
                   "root": tree, "default_loader": True}
    assert all(type(v) is int for v in rec["labels"])
    for loader, default in ((datasets.pil_loader, True), (tv.folder.default_loader, True),
                            (tv.folder.pil_loader, True), (lambda p: datasets.pil_loader(p), False),
                            (tv.folder.accimage_loader, False)):
        assert datasets.ImageFolder(tree, loader=loader)._stoker_records()["default_loader"] is default
    import pathlib
    assert datasets.ImageFolder(pathlib.Path(tree))._stoker_records()["root"] == tree


def test_pickles_for_dataloader_workers(tree):
    ds = datasets.ImageFolder(tree, target_transform=str)
    again = pickle.loads(pickle.dumps(ds))
    assert again.samples == ds.samples and again.loader is datasets.default_loader
    assert np.array_equal(np.asarray(again[3][0]), np.asarray(ds[3][0])) and again[3][1] == "0"


def _run(code):
    package = os.environ.get("STOKER_PYTHONPATH", os.path.join(ROOT, "python"))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (package, os.environ.get("PYTHONPATH")) if p))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_needs_neither_torchvision_nor_pil_until_a_sample_is_loaded(tree):
    code = ("import sys\n"
            "import stoker.datasets as d\n"
            "assert 'torchvision' not in sys.modules and 'PIL' not in sys.modules, 'imported at import'\n"
            "sys.modules['torchvision'] = None  # as if it were not installed\n"
            f"ds = d.ImageFolder({tree!r})\n"
            "assert 'PIL' not in sys.modules and len(ds) == 16 and ds._stoker_records()['default_loader']\n"
            "img, y = ds[0]\n"
            "print(img.mode, img.size, y)\n")
    assert _run(code) == f"RGB {tv.ImageFolder(tree)[0][0].size} 0"


def test_works_without_torch(tree):
    code = ("import sys\n"
            "sys.modules['torch'] = sys.modules['torchvision'] = None  # as if neither were installed\n"
            "import stoker.datasets as d\n"
            f"ds = d.ImageFolder({tree!r}, target_transform=str)\n"
            "print(len(ds), ds[0][0].mode, ds[0][1], d.ImageFolder.__mro__[-2].__name__)\n")
    assert _run(code) == "16 RGB 0 DatasetFolder"
