"""The sample schema: named fields of a batch (stoker.Loader(fields=[...])).

Each field's first argument is its key in the batch dict; `member=` names the
list file column or shard member suffix it is read from when that differs
(for labels and boxes also "json:<key>", a key of the record's .json member).
The kinds, their parameters, their checks and their docstrings are defined
once, in C++ (include/stoker/fields.h, src/sample/fields/: a FieldDef per
kind); these classes carry the parameters there and take their docstrings
from there.
"""
import os
from typing import Any, Dict, List, Literal, Optional, Tuple, Type, Union

from stoker import _stoker


class _Field:
    _kind: Optional[str] = None

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        # NOTE: each class's docstring is its kind's C++ definition's (FieldDef::doc), not a copy kept here.
        docs = _stoker._field_docs()
        if cls._kind not in docs:
            raise TypeError(f"stoker.{cls.__name__}: no field kind {cls._kind!r} in C++ "
                            f"(src/sample/fields/ defines {', '.join(docs)})")
        cls.__doc__ = docs[cls._kind]

    def __init__(self, name: str, member: Optional[str] = None, **params: Any) -> None:
        if not isinstance(name, str):
            raise ValueError(f"{type(self).__name__}: the name must be a str (its key in the batch), got {name!r}")
        if member is not None and not isinstance(member, str):
            raise ValueError(f"{type(self).__name__}({name!r}): member must be a str, got {member!r}")
        self.name = name
        self.member = member
        self._params = params

    def _set_folder(self, folder: Any) -> None:
        if folder is not None and not isinstance(folder, (str, os.PathLike)):
            raise ValueError(f"{type(self).__name__}({self.name!r}): folder must be a path, got {folder!r}")
        if folder is not None:
            self._params["folder"] = os.fspath(folder)

    def _json(self) -> Dict[str, Any]:
        return {"name": self.name, "kind": self._kind, "member": self.member or "", **self._params}

    def __repr__(self) -> str:
        args = [repr(self.name)] + [f"{k}={v!r}" for k, v in self._params.items()]
        if self.member is not None:
            args.append(f"member={self.member!r}")
        return f"{type(self).__name__}({', '.join(args)})"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self._json() == other._json()  # type: ignore[attr-defined]


class Image(_Field):
    _kind = "image"

    def __init__(self, name: str = "image", member: Optional[str] = None,
                 channels: Literal["rgb", "stored"] = "rgb", dtype: Literal["uint8", "stored"] = "uint8") -> None:
        params = {}
        if channels != "rgb":
            params["channels"] = channels
        if dtype != "uint8":
            params["dtype"] = dtype
        super().__init__(name, member, **params)


class Mask(_Field):
    _kind = "mask"

    def __init__(self, name: str, fill: int = 0, member: Optional[str] = None,
                 folder: Optional[Union[str, "os.PathLike[str]"]] = None) -> None:
        super().__init__(name, member, fill=fill)
        self._set_folder(folder)


class Boxes(_Field):
    _kind = "boxes"

    def __init__(self, name: str, max_boxes: int = 100, format: Literal["xyxy", "xywh", "cxcywh"] = "xyxy",
                 member: Optional[str] = None, folder: Optional[Union[str, "os.PathLike[str]"]] = None) -> None:
        super().__init__(name, member, max_boxes=max_boxes, format=format)
        self._set_folder(folder)


class Label(_Field):
    _kind = "label"

    def __init__(self, name: str = "label", member: Optional[str] = None) -> None:
        super().__init__(name, member)


class Tensor(_Field):
    _kind = "tensor"

    def __init__(self, name: str, member: Optional[str] = None,
                 folder: Optional[Union[str, "os.PathLike[str]"]] = None) -> None:
        super().__init__(name, member)
        self._set_folder(folder)


class Volume(_Field):
    _kind = "volume"

    def __init__(self, name: str = "image", member: Optional[str] = None,
                 folder: Optional[Union[str, "os.PathLike[str]"]] = None) -> None:
        super().__init__(name, member)
        self._set_folder(folder)


class LabelVolume(_Field):
    _kind = "label_volume"

    def __init__(self, name: str = "label", member: Optional[str] = None,
                 folder: Optional[Union[str, "os.PathLike[str]"]] = None, fill: int = 0) -> None:
        super().__init__(name, member, fill=fill)
        self._set_folder(folder)


class Bytes(_Field):
    _kind = "bytes"

    def __init__(self, name: str, max_bytes: int = 256, member: Optional[str] = None,
                 folder: Optional[Union[str, "os.PathLike[str]"]] = None) -> None:
        super().__init__(name, member, max_bytes=max_bytes)
        self._set_folder(folder)


def _registered() -> Tuple[Type[_Field], ...]:
    """The classes above in the C++ field table's order (src/sample/fields/fields.cc); a kind C++ defines without a
    class here fails the import (a class of a kind C++ does not define fails at its class statement)."""
    by_kind = {cls._kind: cls for cls in _Field.__subclasses__()}
    kinds = list(_stoker._field_docs())
    missing = [k for k in kinds if k not in by_kind]
    if missing:
        raise ImportError(f"stoker.fields: no Python class for the field kind(s) {', '.join(missing)}, defined in C++ "
                          "(src/sample/fields/)")
    return tuple(by_kind[k] for k in kinds)


# Every field class, in the C++ table's order, so a new kind is its definition and its class alone.
FIELD_TYPES = _registered()


def detection_targets(batch: Dict[str, Any], name: str = "boxes") -> List[Dict[str, Any]]:
    """A batch's boxes as torchvision's detection models take their targets.

    Splits the padded tensors of a Boxes field into one dict per sample, the
    form ``torchvision.models.detection`` models (Faster R-CNN, RetinaNet,
    FCOS, ...) take as ``targets``: each entry's "boxes" is
    ``batch[name][i, :count]`` and "labels" ``batch[name + "_labels"][i,
    :count]`` -- views of the batch, no copy (so they live as long as the
    batch; copy them to keep them past the next batch when the loader
    reuses its memory).

    Args:
        batch (dict): a batch of a Loader whose ``fields`` hold a Boxes
            field (torch tensors or numpy arrays).
        name (str): the Boxes field's name. Default "boxes".

    Returns:
        list of dict: per sample {"boxes": [n, 4] float32 (the field's
        format, xyxy by default), "labels": [n] int64}.

    Raises:
        KeyError: the batch has no Boxes field ``name`` (its ``name``,
            ``name_labels`` and ``name_count`` entries).

    Example:
        >>> loader = stoker.Loader("annotations/instances_val2017.json", image_root="val2017", batch_size=4,
        ...                        transforms=[stoker.Resize(None, max_size=512), stoker.CenterCrop(512)],
        ...                        fields=[stoker.Image(), stoker.Boxes("boxes")])
        >>> batch = next(iter(loader))
        >>> targets = stoker.detection_targets(batch)
        >>> len(targets), sorted(targets[0])
        (4, ['boxes', 'labels'])
    """
    for key in (name, name + "_labels", name + "_count"):
        if key not in batch:
            raise KeyError(f"detection_targets: the batch has no '{key}' (a Boxes field named {name!r} gives "
                           f"'{name}', '{name}_labels' and '{name}_count'); its keys: {sorted(batch)}")
    boxes, labels = batch[name], batch[name + "_labels"]
    counts = [int(c) for c in batch[name + "_count"]]
    return [{"boxes": boxes[i, :n], "labels": labels[i, :n]} for i, n in enumerate(counts)]
