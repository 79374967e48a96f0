"""The sample schema: named fields of a batch (stoker.Loader(fields=[...])).

Each field's first argument is its key in the batch dict; `member=` names the
list file column or shard member suffix it is read from when that differs
(for labels and boxes also "json:<key>", a key of the record's .json member).
The kinds, their parameters and their checks are defined once, in C++
(include/stoker/fields.h, src/batch/options.cc); these classes carry them
there.
"""


class _Field:
    _kind = None

    def __init__(self, name, member=None, **params):
        if not isinstance(name, str):
            raise ValueError(f"{type(self).__name__}: the name must be a str (its key in the batch), got {name!r}")
        if member is not None and not isinstance(member, str):
            raise ValueError(f"{type(self).__name__}({name!r}): member must be a str, got {member!r}")
        self.name = name
        self.member = member
        self._params = params

    def _json(self):
        return {"name": self.name, "kind": self._kind, "member": self.member or "", **self._params}

    def __repr__(self):
        args = [repr(self.name)] + [f"{k}={v!r}" for k, v in self._params.items()]
        if self.member is not None:
            args.append(f"member={self.member!r}")
        return f"{type(self).__name__}({', '.join(args)})"

    def __eq__(self, other):
        return type(self) is type(other) and self._json() == other._json()


class Image(_Field):
    """An image, decoded to RGB: float32 [B,3,H,W] (dtype, layout and transforms as the loader's).
    At most one per schema; masks and boxes follow its geometry."""
    _kind = "image"

    def __init__(self, name="image", member=None):
        super().__init__(name, member)


class Mask(_Field):
    """A segmentation mask as stored (8-bit gray or palette indices, or 16-bit), never converted to
    RGB: uint8 [B,H,W] (int32 for 16-bit masks). Crops, resizes and flips follow the image with
    nearest-neighbour; `fill` pads outside the image."""
    _kind = "mask"

    def __init__(self, name, fill=0, member=None):
        super().__init__(name, member, fill=fill)


class Boxes(_Field):
    """Bounding boxes [n,4] in `format` ('xyxy', 'xywh', 'cxcywh'), in the image's pixels: a .npy of
    [n,4] (or [n,5] with class ids) or JSON. They follow the geometry, are clipped, and those under
    1 px are dropped (stats()['boxes_dropped']). Batched as <name> float32 [B,max_boxes,4],
    <name>_labels int64 [B,max_boxes] (-1 padded) and <name>_count int64 [B]."""
    _kind = "boxes"

    def __init__(self, name, max_boxes=100, format="xyxy", member=None):
        super().__init__(name, member, max_boxes=max_boxes, format=format)


class Label(_Field):
    """An int64 label [B]: the source's (folder class, list file column `label`, shard .cls or
    labels='json:<key>'), or the integer a member holds."""
    _kind = "label"

    def __init__(self, name="label", member=None):
        super().__init__(name, member)


class Tensor(_Field):
    """A .npy member batched as it is: [B, ...] of record 0's dtype and shape."""
    _kind = "tensor"

    def __init__(self, name, member=None):
        super().__init__(name, member)


FIELD_TYPES = (Image, Mask, Boxes, Label, Tensor)
