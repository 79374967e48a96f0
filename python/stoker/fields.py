"""The sample schema: named fields of a batch (stoker.Loader(fields=[...])).

Each field's first argument is its key in the batch dict; `member=` names the
list file column or shard member suffix it is read from when that differs
(for labels and boxes also "json:<key>", a key of the record's .json member).
The kinds, their parameters and their checks are defined once, in C++
(include/stoker/fields.h, src/options/options.cc); these classes carry them
there.
"""
import os
from typing import Any, Dict, List, Literal, Optional, Union


# The Attributes and Raises sections every field's docstring shares, put in
# place of its "<common sections>" line when the class is made.
_COMMON_SECTIONS = """    Attributes:
        name (str), member (str or None): as given.

    Raises:
        ValueError: ``name`` or ``member`` is not a str. The schema's rules
            (names unique in the batch, at most one Image, Mask and Boxes
            only beside an Image, parameters in range) are checked by
            stoker.Loader, which raises ValueError naming the field.
"""


class _Field:
    _kind: Optional[str] = None

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if cls.__doc__:
            cls.__doc__ = cls.__doc__.replace("    <common sections>\n", _COMMON_SECTIONS)

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
    """An image, decoded to RGB and transformed: float32 [B, 3, H, W] by default.

    Decoded as stoker.decode_image decodes it, then the loader's transforms;
    its dtype and layout are the loader's (``dtype=``, ``layout=``). At most
    one per schema: Mask and Boxes fields follow its geometry.

    With ``channels="stored", dtype="stored"`` it is a raster kept as stored:
    1 to N channels of uint8, uint16 or float32 (a 13-band TIFF, a 16-bit
    gray PNG or TIFF, a gray JPEG as 1 channel, an RGBA PNG as 4), batched
    [B, C, H, W] (or [B, H, W, C] with layout="NHWC") as uint8, int32 (uint16
    samples: torch 1.13 has no uint16) or float32 as stored, or float32 after
    Normalize (ToTensor's /255 for uint8 samples, then (x - mean[c]) / std[c],
    with 1 or C values each); the loader's ``dtype=`` does not apply. Crops,
    resizes, flips, RandomRotation and RandomAffine apply to each channel as
    Pillow's resize and transform do to a single-channel image of the
    matching mode ("L", "I", "F"); colour transforms are refused. Every record must have the channel count and
    sample type of the first readable one; a file that does not is a corrupt
    sample under ``on_corrupt``. See the guide's "Rasters beyond RGB".

    Args:
        name (str): its key in the batch. Default "image".
        member (str, optional): the list file column or shard member suffix
            it is read from. Default None: the record itself (a list file's
            path column, an ImageFolder file, a shard's image member).
        channels (str): "rgb" (the default: converted to RGB) or "stored".
        dtype (str): "uint8" (the default) or "stored"; "stored" exactly
            when ``channels="stored"``.

    <common sections>

    Example:
        >>> loader = stoker.Loader("data/train.csv", batch_size=8, transforms=[stoker.CenterCrop(224)],
        ...                        fields=[stoker.Image(), stoker.Label()])
        >>> batch = next(iter(loader))
        >>> batch["image"].shape, batch["image"].dtype
        (torch.Size([8, 3, 224, 224]), torch.float32)
    """
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
    """A segmentation mask, as stored: uint8 [B, H, W] (int32 for 16-bit masks).

    Decoded as stored (8-bit gray or palette indices, or 16-bit; PNG or .npy),
    never converted to RGB. Crops, resizes and flips follow the image's with
    nearest-neighbour resampling; ``fill`` pads what lies outside the image
    (CenterCrop of a smaller image). A mask must have its image's size, and
    the pixel size (8 or 16-bit) of record 0's mask; a mask that does not, or
    is missing, is a sample error under ``on_corrupt`` (stoker.SampleError
    with on_corrupt="raise").

    Args:
        name (str): its key in the batch.
        fill (int): the value of padded pixels, in [0, 65535]. Default 0.
        member (str, optional): the list file column or shard member suffix
            it is read from. Default None: the one named ``name``.
        folder (str or os.PathLike, optional): a paired folder instead of a
            member: the file under it whose path relative to it, without
            extension, is the record's path relative to its source's folder
            (image folder root, list file's folder, COCO image_root)
            without extension: images ``data/seg/images/a/b.jpg`` of the
            folder ``data/seg/images`` pair with ``data/seg/masks/a/b.png``
            (VOC, ADE20K, Cityscapes-style trees). A record without its file
            is a sample error (not_found). Default None.

    <common sections>

    Example:
        >>> loader = stoker.Loader("data/seg.csv", batch_size=8, transforms=[stoker.RandomResizedCrop(256)],
        ...                        fields=[stoker.Image(), stoker.Mask("mask", fill=255)])
        >>> batch = next(iter(loader))
        >>> batch["mask"].shape, batch["mask"].dtype
        (torch.Size([8, 256, 256]), torch.uint8)
    """
    _kind = "mask"

    def __init__(self, name: str, fill: int = 0, member: Optional[str] = None,
                 folder: Optional[Union[str, "os.PathLike[str]"]] = None) -> None:
        super().__init__(name, member, fill=fill)
        self._set_folder(folder)


class Boxes(_Field):
    """Bounding boxes in the image's pixels, carried through its geometry.

    Read from a .npy of [n, 4] (or [n, 5], the 5th column a class id) or JSON
    (a list of rows, or {"boxes": [...], "labels": [...]}), in ``format``.
    They follow the image's crops, resizes and flips (as
    torchvision.transforms.v2 does), are clipped to it, and those left under
    1 px wide or high are dropped (stats()["boxes_dropped"]); boxes past
    ``max_boxes`` are dropped too (stats()["boxes_truncated"]). Batched as
    three tensors: ``<name>`` float32 [B, max_boxes, 4] (zero padded),
    ``<name>_labels`` int64 [B, max_boxes] (the class ids; -1 for padding
    and boxes without one) and ``<name>_count`` int64 [B].

    Args:
        name (str): its key in the batch (with ``<name>_labels`` and
            ``<name>_count``).
        max_boxes (int): rows of the padded tensor, >= 1. Default 100.
        format (str): "xyxy", "xywh" or "cxcywh", of the stored boxes and of
            the batch's; a JSON member's own ``"format"`` key says the
            stored one instead (a COCO source's "boxes" member is
            ``{"format": "xywh", ...}``). Default "xyxy".
        member (str, optional): the list file column or shard member suffix
            it is read from, or "json:<key>", a key of the record's .json
            member. Default None: the one named ``name`` (for a COCO
            source, name the field "boxes" or pass member="boxes").
        folder (str or os.PathLike, optional): a paired folder of .npy or
            .json box files, matched as Mask's ``folder``. Default None.

    <common sections>

    Example:
        >>> loader = stoker.Loader("data/det-{000000..000007}.tar", batch_size=8,
        ...                        transforms=[stoker.Resize((512, 512))],
        ...                        fields=[stoker.Image(), stoker.Boxes("boxes", max_boxes=50)])
        >>> batch = next(iter(loader))
        >>> batch["boxes"].shape, batch["boxes_labels"].shape, batch["boxes_count"].shape
        (torch.Size([8, 50, 4]), torch.Size([8, 50]), torch.Size([8]))
    """
    _kind = "boxes"

    def __init__(self, name: str, max_boxes: int = 100, format: Literal["xyxy", "xywh", "cxcywh"] = "xyxy",
                 member: Optional[str] = None, folder: Optional[Union[str, "os.PathLike[str]"]] = None) -> None:
        super().__init__(name, member, max_boxes=max_boxes, format=format)
        self._set_folder(folder)


class Label(_Field):
    """An int64 label: [B].

    The source's label (an ImageFolder's class index, a list file's ``label``
    column, a shard's .cls member or the loader's ``labels="json:<key>"``),
    or with ``member`` the integer a member holds.

    Args:
        name (str): its key in the batch. Default "label".
        member (str, optional): a list file column or shard member suffix
            holding an integer, or "json:<key>", a key of the record's .json
            member. Default None: the source's label.

    <common sections>

    Example:
        >>> loader = stoker.Loader("data/train", batch_size=8, transforms=[stoker.CenterCrop(224)],
        ...                        fields=[stoker.Image(), stoker.Label("target")])
        >>> next(iter(loader))["target"].dtype
        torch.int64
    """
    _kind = "label"

    def __init__(self, name: str = "label", member: Optional[str] = None) -> None:
        super().__init__(name, member)


class Tensor(_Field):
    """A .npy member batched as it is: [B, ...] of record 0's dtype and shape.

    Any numeric dtype; no transform applies. A record whose array has another
    dtype or shape than record 0's, or lacks the member, is a sample error
    under ``on_corrupt``.

    Args:
        name (str): its key in the batch.
        member (str, optional): the list file column or shard member suffix
            it is read from. Default None: the one named ``name``.
        folder (str or os.PathLike, optional): a paired folder of .npy
            files, matched as Mask's ``folder``. Default None.

    <common sections>

    Example:
        >>> loader = stoker.Loader("data/train-{000000..000003}.tar", batch_size=8,
        ...                        transforms=[stoker.CenterCrop(224)],
        ...                        fields=[stoker.Image(), stoker.Tensor("features")])
        >>> next(iter(loader))["features"].shape
        torch.Size([8, 512])
    """
    _kind = "tensor"

    def __init__(self, name: str, member: Optional[str] = None,
                 folder: Optional[Union[str, "os.PathLike[str]"]] = None) -> None:
        super().__init__(name, member)
        self._set_folder(folder)


class Volume(_Field):
    """A 3D scan, cut into patches: float32 [B*n, C, P0, P1, P2].

    Read from .npy ((D, H, W) or channels first (C, D, H, W), C or Fortran
    order), NIfTI-1/2 ``.nii`` or gzipped ``.nii.gz`` (nibabel's axis order,
    its 4th dim the channels; scl_slope/scl_inter applied), any numeric
    dtype, recognised by content. The loader's volume transforms
    (stoker.RandCropByPosNegLabel, RandSpatialCrop, ..., MONAI's names) cut
    ``n`` patches per volume load (the sampling crop's ``num_samples``),
    consecutive batch entries; an uncompressed volume's patch reads only the
    bytes it covers. Also in the batch: ``<name>_start`` int64 [B*n, 3] (the
    patch's first voxel in the volume, before flips) and ``<name>_affine``
    float64 [B*n, 4, 4] (voxel to world: the volume's affine, nibabel's
    ``img.affine``, moved to the patch; identity for .npy). At most one per
    schema; a volume schema holds Volume, LabelVolume and Label fields.

    Args:
        name (str): its key in the batch. Default "image".
        member (str, optional): the list file column or shard member suffix
            it is read from. Default None: the record itself (a list file's
            path column, e.g. ``image``).
        folder (str or os.PathLike, optional): a paired folder, matched as
            Mask's ``folder`` (``a.nii.gz`` pairs with ``a.nii.gz``).

    <common sections>

    Example:
        >>> loader = stoker.Loader("data/volumes/npy.csv", batch_size=2,
        ...     fields=[stoker.Volume("image"), stoker.LabelVolume("label")],
        ...     transforms=[stoker.RandCropByPosNegLabel((96, 96, 96), label_key="label", num_samples=4)])
        >>> batch = next(iter(loader))
        >>> batch["image"].shape, batch["label"].shape
        (torch.Size([8, 1, 96, 96, 96]), torch.Size([8, 1, 96, 96, 96]))
    """
    _kind = "volume"

    def __init__(self, name: str = "image", member: Optional[str] = None,
                 folder: Optional[Union[str, "os.PathLike[str]"]] = None) -> None:
        super().__init__(name, member)
        self._set_folder(folder)


class LabelVolume(_Field):
    """A label volume paired with the Volume: [B*n, C, P0, P1, P2] uint8 (int32 unless record 0's is uint8).

    Same spatial shape as its volume (else a sample error), integer values
    never scaled, every crop, pad, flip and rotation of the volume applied
    with nearest-neighbour semantics, ``fill`` where SpatialPad pads.
    RandCropByPosNegLabel's ``label_key`` names one.

    Args:
        name (str): its key in the batch. Default "label".
        member (str, optional): the list file column or shard member suffix
            it is read from. Default None: the one named ``name`` (a list
            file's ``label`` column of paths).
        folder (str or os.PathLike, optional): a paired folder (the Medical
            Segmentation Decathlon's ``imagesTr``/``labelsTr``).
        fill (int): padded voxels' value, in [0, 65535]. Default 0.

    <common sections>

    Example:
        >>> loader = stoker.Loader("data/volumes/nii.csv", batch_size=2,
        ...     fields=[stoker.Volume("image"), stoker.LabelVolume("label", fill=0)],
        ...     transforms=[stoker.RandSpatialCrop(64), stoker.SpatialPad(64)])
        >>> next(iter(loader))["label"].dtype
        torch.uint8
    """
    _kind = "label_volume"

    def __init__(self, name: str = "label", member: Optional[str] = None,
                 folder: Optional[Union[str, "os.PathLike[str]"]] = None, fill: int = 0) -> None:
        super().__init__(name, member, fill=fill)
        self._set_folder(folder)


class Bytes(_Field):
    """A member's bytes as they are (a caption, a token string, any blob): uint8 [B, max_bytes].

    No transform applies; the bytes are zero padded to ``max_bytes``, and
    ``<name>_length`` int64 [B] holds each member's size, so
    ``bytes(batch[name][i, :batch[name + "_length"][i]])`` is record i's
    member (``.decode()`` for text). A member longer than ``max_bytes``, or
    missing, is a sample error under ``on_corrupt``.

    Args:
        name (str): its key in the batch (with ``<name>_length``).
        max_bytes (int): the row of the padded tensor, >= 1. Default 256.
        member (str, optional): the list file column or shard member suffix
            it is read from. Default None: the one named ``name``.
        folder (str or os.PathLike, optional): a paired folder of files,
            matched as Mask's ``folder``. Default None.

    <common sections>

    Example:
        >>> loader = stoker.Loader("data/captions-{000000..000003}.tar", batch_size=8,
        ...                        transforms=[stoker.CenterCrop(224)],
        ...                        fields=[stoker.Image(), stoker.Bytes("txt", max_bytes=128)])
        >>> batch = next(iter(loader))
        >>> batch["txt"].shape, batch["txt_length"].shape
        (torch.Size([8, 128]), torch.Size([8]))
    """
    _kind = "bytes"

    def __init__(self, name: str, max_bytes: int = 256, member: Optional[str] = None,
                 folder: Optional[Union[str, "os.PathLike[str]"]] = None) -> None:
        super().__init__(name, member, max_bytes=max_bytes)
        self._set_folder(folder)


# Every field class, in definition order: the subclasses of _Field (each
# names its C++ kind, src/sample/fields/), so a new kind is its class alone.
FIELD_TYPES = tuple(_Field.__subclasses__())


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
