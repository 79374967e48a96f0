"""Enum names are C++'s (include/stoker/names.h, through _stoker._enum_names()): the Python enums, the
Literal types of stoker.Loader's and the fields' parameters, the field classes' kinds and the transforms'
enum defaults read or match them, and C++ refuses an unknown name listing the allowed ones."""
import inspect
import json
import typing

import pytest

import stoker
from stoker import _stoker
from stoker.fields import FIELD_TYPES

NAMES = _stoker._enum_names()


def test_every_enum_has_names():
    for key in ("on_corrupt", "dtype", "kind", "layout", "decode_scale", "progress", "cache", "box_format",
                "interpolation", "autoaugment_policy", "pad_method", "field_kind"):
        assert NAMES[key] and all(isinstance(n, str) and n for n in NAMES[key]), key
        assert len(set(NAMES[key])) == len(NAMES[key]), key


@pytest.mark.parametrize("enum, key", [(stoker.InterpolationMode, "interpolation"),
                                       (stoker.AutoAugmentPolicy, "autoaugment_policy")])
def test_python_enums_are_cpps(enum, key):
    assert [m.value for m in enum] == NAMES[key]
    assert [m.name for m in enum] == [n.upper() for n in NAMES[key]]


@pytest.mark.parametrize("param", ["on_corrupt", "dtype", "layout", "kind", "decode_scale", "cache"])
def test_loader_literals_are_cpps(param):
    annotation = inspect.signature(stoker.Loader).parameters[param].annotation
    assert typing.get_origin(annotation) is typing.Literal
    assert list(typing.get_args(annotation)) == NAMES[param]


def test_boxes_format_literal_is_cpps():
    annotation = inspect.signature(stoker.Boxes).parameters["format"].annotation
    assert list(typing.get_args(annotation)) == NAMES["box_format"]
    assert inspect.signature(stoker.Boxes).parameters["format"].default == NAMES["box_format"][0]


def test_field_classes_are_cpps_kinds():
    assert [cls._kind for cls in FIELD_TYPES] == NAMES["field_kind"]


def _default(cls, param):
    """A pybind11 constructor's default of `param`, from its signature line: interpolation: object = 'nearest'."""
    import re
    found = re.search(param + r": [\w.]+ = '(\w+)'", cls.__init__.__doc__)
    assert found, (cls.__name__, param, cls.__init__.__doc__.splitlines()[0])
    return found.group(1)


@pytest.mark.parametrize("cls, args", [(stoker.RandomRotation, [0]), (stoker.RandomAffine, [0]),
                                       (stoker.TrivialAugmentWide, []), (stoker.RandAugment, []),
                                       (stoker.AutoAugment, []), (stoker.AugMix, [])])
def test_transform_enum_defaults_are_cpps(cls, args):
    """Each default is the C++ struct's, named by the one table: the constructor's default equals what the
    default-made transform's JSON (written by its C++ definition) says."""
    made = json.loads(_stoker._transforms_json([cls(*args)])[0])
    assert _default(cls, "interpolation") == made["interpolation"]
    assert made["interpolation"] in NAMES["interpolation"]
    if cls is stoker.AutoAugment:
        assert _default(cls, "policy") == made["policy"] and made["policy"] in NAMES["autoaugment_policy"]


@pytest.mark.parametrize("kwargs, message", [
    (dict(cache="disk"), "cache must be one of 'mmap', 'ram', 'decoded', 'auto', got 'disk'"),
    (dict(layout="CHW"), "layout must be one of 'NCHW', 'NHWC', got 'CHW'"),
    (dict(on_corrupt="ignore"), "on_corrupt must be one of 'skip', 'raise', got 'ignore'"),
])
def test_unknown_names_list_the_allowed(kwargs, message):
    with pytest.raises(ValueError, match=message):
        stoker.Loader("/nonexistent/folder", **kwargs)


def test_enum_arguments_take_names_enums_and_torchvisions():
    assert "bilinear" in repr(stoker.RandomRotation(10, interpolation="bilinear"))
    assert "bilinear" in repr(stoker.RandomRotation(10, interpolation=stoker.InterpolationMode.BILINEAR))
    assert "svhn" in repr(stoker.AutoAugment(stoker.AutoAugmentPolicy.SVHN))
    with pytest.raises(ValueError, match="interpolation must be InterpolationMode.NEAREST or BILINEAR"):
        stoker.RandomRotation(10, interpolation="bicubic")
    with pytest.raises(ValueError, match="is not recognized"):
        stoker.AutoAugment("coco")
    with pytest.raises(ValueError, match="SpatialPad: method must be one of 'symmetric', 'end', got 'middle'"):
        stoker.Loader("/nonexistent/folder", fields=[stoker.Volume("image")], transforms=[stoker.SpatialPad(8, method="middle")])


# ------------------------------------------------- the Python surface against the C++ transform registries

def _stub():
    import ast
    import os
    path = os.path.join(os.path.dirname(stoker.__file__), "_stoker.pyi")
    return ast.parse(open(path).read())


def _union_names(node):
    """The names of a `Union[A, B, ...]` annotation's members (ast)."""
    import ast
    return {n.id for n in ast.walk(node.slice) if isinstance(n, ast.Name)}


def test_transform_types_are_the_registry():
    names = _stoker._transform_names()
    assert [t.__name__ for t in _stoker._transform_types] == names["image"]
    assert {cls.__name__ for cls in stoker.volume.VolumeTransform.__subclasses__()} == set(names["volume"])


def test_every_transform_is_exported_and_in_the_unions():
    """A transform added to a C++ variant (or removed) fails here until stoker exposes it in each place."""
    import ast
    names = _stoker._transform_names()
    every = names["image"] + names["volume"]
    assert len(set(every)) == len(every)
    for name in every:
        assert name in stoker.__all__, name
        assert getattr(stoker, name).__name__ == name
    # the unions are made from the registries: the image transforms' by the bindings, then any VolumeTransform
    assert typing.get_args(_stoker._Transform) == _stoker._transform_types
    assert set(typing.get_args(stoker._Transform)) == {*_stoker._transform_types, stoker.volume.VolumeTransform}
    assert [cls.__name__ for cls in stoker.volume.VOLUME_TRANSFORM_TYPES] == names["volume"]
    stub = _stub()
    classes = {n.name for n in stub.body if isinstance(n, ast.ClassDef)}
    assert set(names["image"]) <= classes
    alias = next(n for n in stub.body if isinstance(n, ast.Assign) and n.targets[0].id == "_Transform")
    assert _union_names(alias.value) - {"Union"} == set(names["image"])
    # and nothing in __all__ looks like a transform the registries do not know
    transform_like = {n for n in stoker.__all__ if isinstance(getattr(stoker, n), type)
                      and (issubclass(getattr(stoker, n), _stoker._transform_types)
                           or issubclass(getattr(stoker, n), stoker.volume.VolumeTransform))}
    assert transform_like == set(every)


def test_every_field_class_is_exported():
    for cls in FIELD_TYPES:
        assert cls.__name__ in stoker.__all__ and getattr(stoker, cls.__name__) is cls


# ------------------------------------------------- docstrings from the C++ definitions

def test_every_transform_has_its_definitions_docstring():
    """Each registered transform's docstring is its C++ definition's (Def<T>::kDoc, VDef<T>::kDoc), and the Python
    class shows exactly that text: no second copy in Python to drift."""
    docs = _stoker._transform_docs()
    names = _stoker._transform_names()
    for group in ("image", "volume"):
        assert list(docs[group]) == names[group], group
        for name, doc in docs[group].items():
            summary = doc.splitlines()[0]
            assert summary.strip() and not summary.startswith(" "), name
            assert "Example:" in doc and f"stoker.{name}(" in doc, name
            assert "<raises>" not in doc, name
            assert getattr(stoker, name).__doc__ == doc, name
    # the volume transforms' shared section is put in each
    assert all("Raises:\n    ValueError:" in doc for doc in docs["volume"].values())


def test_every_field_kind_has_its_definitions_docstring():
    docs = _stoker._field_docs()
    assert list(docs) == NAMES["field_kind"]
    for cls in FIELD_TYPES:
        doc = docs[cls._kind]
        assert doc.splitlines()[0].strip() and "<common sections>" not in doc, cls
        assert "Attributes:\n    name (str), member (str or None): as given." in doc, cls
        assert cls.__doc__ == doc, cls


def test_a_class_without_a_definition_is_refused():
    with pytest.raises(TypeError, match="no volume transform of that name in C\\+\\+"):
        type("RandZoom", (stoker.volume.VolumeTransform,), {})
    with pytest.raises(TypeError, match="no field kind 'depth' in C\\+\\+"):
        type("Depth", (stoker.fields._Field,), {"_kind": "depth"})
    import gc
    gc.collect()  # the refused classes stay in __subclasses__() until collected
    assert "RandZoom" not in {cls.__name__ for cls in stoker.volume.VolumeTransform.__subclasses__()}


class _Registry:
    """_stoker with one more volume transform and field kind than Python has classes for."""
    def _transform_names(self):
        names = _stoker._transform_names()
        return {"image": names["image"], "volume": names["volume"] + ["RandGridDistortion"]}

    def _field_docs(self):
        return {**_stoker._field_docs(), "text": "A caption."}


def test_a_definition_without_a_class_fails_the_import(monkeypatch):
    monkeypatch.setattr(stoker.volume, "_stoker", _Registry())
    monkeypatch.setattr(stoker.fields, "_stoker", _Registry())
    with pytest.raises(ImportError, match=r"stoker.volume: no Python class for RandGridDistortion, defined in C\+\+"):
        stoker.volume._registered()
    with pytest.raises(ImportError, match=r"stoker.fields: no Python class for the field kind\(s\) text"):
        stoker.fields._registered()
