"""MONAI's crop, pad, sampling, flip/rot90 and intensity semantics re-implemented in numpy.

MONAI cannot be installed here (no PyPI), so the volume tests compare stoker with these
references. Each function follows one MONAI function, cited in its header comment (paths in
Project-MONAI/MONAI; read from monai/transforms/croppad/array.py @00620d93, monai/transforms/utils.py,
monai/data/utils.py, monai/transforms/intensity/array.py, monai/transforms/spatial/{array,functional}.py).
Arrays are channel-first (C, S0, S1, S2) unless noted; "spatial axis i" is array axis i + 1.
"""
import numpy as np


# monai/utils/misc.py fall_back_tuple(user_provided, default, func=lambda x: x and x > 0):
# an int is repeated per axis; entries that are None, 0 or negative take the default's value.
def fall_back_tuple(user_provided, default):
    ndim = len(default)
    user = (user_provided,) * ndim if np.isscalar(user_provided) else tuple(user_provided)
    if len(user) != ndim:
        raise ValueError(f"{user_provided} has not {ndim} entries")
    return tuple(int(u) if (u and u > 0) else int(d) for u, d in zip(user, default))


# ---------------------------------------------------------------- crops and pads

# monai/transforms/croppad/array.py Crop.compute_slices(roi_center, roi_size) (used by SpatialCrop,
# CenterSpatialCrop, RandCropByPosNegLabel): start = max(center - size // 2, 0), end = start + size
# (slicing then clips the end to the axis; the values go through torch.int16).
def crop_start_from_center(center, size):
    return tuple(max(int(c) - int(s) // 2, 0) for c, s in zip(center, size))


# monai/transforms/croppad/array.py CenterSpatialCrop.compute_slices: roi = fall_back_tuple(roi_size,
# shape) (non-positive = whole axis), centre = shape // 2, then Crop.compute_slices. Returns the
# window's start and its size after slicing (a roi larger than the axis keeps the whole axis).
def center_crop_start(shape, roi):
    shape = tuple(int(s) for s in shape)
    roi = fall_back_tuple(roi, shape)
    start = crop_start_from_center([s // 2 for s in shape], roi)
    size = tuple(min(st + r, s) - st for st, r, s in zip(start, roi, shape))
    return start, size


def center_spatial_crop(img, roi_size):
    start, size = center_crop_start(img.shape[1:], roi_size)
    return img[(slice(None),) + tuple(slice(a, a + n) for a, n in zip(start, size))]


# monai/transforms/croppad/array.py SpatialPad.compute_pad_width: size = fall_back_tuple(spatial_size,
# shape); width = max(size - shape, 0); "symmetric": (width // 2, width - width // 2), "end": (0, width).
# Spatial axes only (MONAI prepends (0, 0) for the channel).
def pad_width(shape, size, method="symmetric"):
    if method not in ("symmetric", "end"):
        raise ValueError(f"method {method!r}")
    size = fall_back_tuple(size, shape)
    out = []
    for sp, sh in zip(size, shape):
        width = max(int(sp) - int(sh), 0)
        out.append((width // 2, width - width // 2) if method == "symmetric" else (0, width))
    return out


# monai/transforms/croppad/array.py SpatialPad (mode="constant", Pad._np_pad / torch pad with `value`).
def spatial_pad(img, spatial_size, method="symmetric", value=0):
    widths = [(0, 0)] + pad_width(img.shape[1:], spatial_size, method)
    return np.pad(img, widths, mode="constant", constant_values=value)


# monai/data/utils.py get_valid_patch_size: min(ms, ps or ms) per axis (0/None = whole axis; RandSpatialCrop
# has already replaced non-positive entries by fall_back_tuple).
def get_valid_patch_size(dims, patch_size):
    patch = (patch_size,) * len(dims) if np.isscalar(patch_size) else tuple(patch_size)
    return tuple(min(int(ms), int(ps) or int(ms)) for ms, ps in zip(dims, patch))


# monai/data/utils.py get_random_patch: min_corner = rand_int(0, ms - ps + 1) if ms > ps else 0 per axis
# (an axis with ms <= ps draws nothing). rng_ints: a callable randint(low, high_exclusive), e.g.
# np.random.RandomState(0).randint. Returns the corner.
def get_random_patch_start(dims, patch_size, rng_ints):
    return tuple(int(rng_ints(0, ms - ps + 1)) if ms > ps else 0 for ms, ps in zip(dims, patch_size))


# The support of get_random_patch_start per axis, inclusive: [0, max(ms - ps, 0)].
def random_patch_start_range(dims, patch_size):
    return [(0, max(int(ms) - int(ps), 0)) for ms, ps in zip(dims, patch_size)]


# monai/transforms/croppad/array.py RandSpatialCrop.randomize/__call__ with random_size=False:
# size = fall_back_tuple(roi_size, shape); random_center: get_random_patch(shape, get_valid_patch_size(shape,
# size)); else CenterSpatialCrop(size). Returns (start, size) of the window.
def rand_spatial_crop_window(shape, roi_size, rng_ints, random_center=True):
    size = fall_back_tuple(roi_size, shape)
    if not random_center:
        return center_crop_start(shape, size)
    valid = get_valid_patch_size(shape, size)
    return get_random_patch_start(shape, valid, rng_ints), valid


# ---------------------------------------------------------------- pos/neg sampling

# monai/transforms/utils.py correct_crop_centers, line by line (numpy types kept: valid_end goes through
# astype(np.uint16), so shape + 1 - size / 2 is truncated toward zero; `valid_end - 1` is a numpy uint16).
def correct_crop_centers(centers, spatial_size, label_spatial_shape, allow_smaller=False):
    spatial_size = fall_back_tuple(spatial_size, label_spatial_shape)
    if any(np.subtract(label_spatial_shape, spatial_size) < 0):
        if not allow_smaller:
            raise ValueError("The size of the proposed random crop ROI is larger than the image size, "
                             f"got ROI size {spatial_size} and label image size {label_spatial_shape} respectively.")
        spatial_size = tuple(min(l, s) for l, s in zip(label_spatial_shape, spatial_size))
    valid_start = np.floor_divide(spatial_size, 2)
    valid_end = np.subtract(np.asarray(label_spatial_shape) + np.array(1), np.asarray(spatial_size) / np.array(2))
    valid_end = valid_end.astype(np.uint16)
    for i, valid_s in enumerate(valid_start):
        if valid_s == valid_end[i]:
            valid_end[i] += 1
    out = []
    for c, v_s, v_e in zip(centers, valid_start, valid_end):
        out.append(int(min(max(int(c), v_s), v_e - 1)))
    return tuple(out)


# monai/transforms/utils.py map_binary_to_indices (image=None): a multi-channel label drops channel 0
# (one-hot background), then foreground = any remaining channel NON-ZERO (np.any: negatives count),
# background = the rest; flat C-order indices over the spatial shape.
def map_binary_to_indices(label):
    label = np.asarray(label)
    if label.shape[0] > 1:
        label = label[1:]
    flat = np.any(label, 0).ravel()
    return np.nonzero(flat)[0], np.nonzero(~flat)[0]


# monai/transforms/utils.py generate_pos_neg_label_crop_centers: both classes empty -> ValueError; one
# empty -> pos_ratio 0 (no foreground) or 1 (no background), with a warning; per sample: foreground when
# rand() < pos_ratio, then randint(len(indices)), unravel, correct_crop_centers. pos_ratio = pos / (pos + neg)
# (RandCropByPosNegLabel.__init__: pos, neg >= 0, not both 0).
def generate_pos_neg_label_crop_centers(spatial_size, num_samples, pos_ratio, label_spatial_shape, fg_indices,
                                        bg_indices, rand_state, allow_smaller=False):
    if len(fg_indices) == 0 and len(bg_indices) == 0:
        raise ValueError("No sampling location available.")
    if len(fg_indices) == 0 or len(bg_indices) == 0:
        pos_ratio = 0 if len(fg_indices) == 0 else 1
    centers = []
    for _ in range(num_samples):
        indices = fg_indices if rand_state.rand() < pos_ratio else bg_indices
        idx = indices[rand_state.randint(len(indices))]
        center = np.unravel_index(idx, label_spatial_shape)
        centers.append(correct_crop_centers([int(c) for c in center], spatial_size, label_spatial_shape,
                                            allow_smaller))
    return tuple(centers)


def pos_ratio(pos, neg):
    if pos < 0 or neg < 0:
        raise ValueError(f"pos and neg must be nonnegative, got pos={pos} neg={neg}.")
    if pos + neg == 0:
        raise ValueError("Incompatible values: pos=0 and neg=0.")
    return pos / (pos + neg)


# monai/transforms/croppad/array.py RandCropByPosNegLabel.__call__: SpatialCrop(roi_center=c, roi_size) per
# centre; returns the window starts (the centres come from generate_pos_neg_label_crop_centers).
def posneg_starts(centers, spatial_size, shape):
    size = fall_back_tuple(spatial_size, shape)
    return [crop_start_from_center(c, size) for c in centers]


# ---------------------------------------------------------------- flips and rot90

# monai/transforms/utils.py map_spatial_axes (channel_first): None -> every spatial axis; a >= 0 -> a + 1;
# a < 0 stays (counts from the end).
def map_spatial_axes(img_ndim, spatial_axes=None):
    if spatial_axes is None:
        return list(range(1, img_ndim))
    axes = [spatial_axes] if np.isscalar(spatial_axes) else list(spatial_axes)
    return [a + 1 if a >= 0 else a for a in axes]


# monai/transforms/spatial/array.py Flip / RandFlip: when drawn (rand() < prob, one draw), torch.flip over
# ALL the listed spatial axes at once (None = every spatial axis). This is the flip itself.
def rand_flip(img, axes=None):
    return np.flip(img, axis=tuple(map_spatial_axes(img.ndim, axes))).copy()


# monai/transforms/spatial/array.py Rotate90 (k normalised to (4 + k % 4) % 4) and functional.rotate90:
# torch.rot90(img, k, map_spatial_axes(spatial_axes)), which rotates from the first axis towards the second
# as np.rot90 does (checked in test_monai_ref). RandRotate90: when drawn, k = randint(max_k) + 1.
def rand_rotate90(img, k, spatial_axes=(0, 1)):
    if len(spatial_axes) != 2:
        raise ValueError(f"spatial_axes must be 2 numbers to define the plane to rotate, got {spatial_axes}.")
    k = (4 + (k % 4)) % 4
    return np.rot90(img, k, axes=tuple(map_spatial_axes(img.ndim, spatial_axes))).copy()


# ---------------------------------------------------------------- intensity

# monai/transforms/intensity/array.py ScaleIntensityRange.__call__: a_max - a_min == 0 -> warn and return
# img - a_min (+ b_min when b_min is not None), with no division and no clip; else (img - a_min) / (a_max - a_min),
# then * (b_max - b_min) + b_min only when both are given, then clip(img, b_min, b_max) when clip (an edge that
# is None is not clipped; both None: torch.clamp raises). Computed here in `dtype` (MONAI: float32 output).
def scale_intensity_range(img, a_min, a_max, b_min=None, b_max=None, clip=False, dtype=np.float64):
    img = np.asarray(img).astype(dtype)
    if a_max - a_min == 0.0:
        return img - a_min if b_min is None else img - a_min + b_min
    img = (img - a_min) / (a_max - a_min)
    if b_min is not None and b_max is not None:
        img = img * (b_max - b_min) + b_min
    if clip:
        if b_min is None and b_max is None:
            raise ValueError("At least one of 'min' or 'max' must not be None (torch.clamp)")
        img = np.clip(img, b_min, b_max)
    return img


# monai/transforms/intensity/array.py NormalizeIntensity._normalize: nonzero -> statistics and output only on
# voxels != 0 (others unchanged; none nonzero -> unchanged); subtrahend = given or mean, divisor = given or
# the POPULATION std (np.std / torch.std(unbiased=False)); a divisor of 0 becomes 1 (scalar or per element).
# __call__: channel_wise -> each channel on its own with subtrahend[i] / divisor[i] (their length must be C);
# else the whole array at once. MONAI computes in float32 (dtype=np.float32 default); here `dtype`.
def _normalize(img, sub, div, nonzero, dtype):
    img = np.array(img, dtype=dtype, copy=True)
    if nonzero:
        mask = img != 0
        if not mask.any():
            return img
        masked = img[mask]
    else:
        mask = None
        masked = img
    _sub = sub if sub is not None else masked.mean()
    if isinstance(_sub, np.ndarray) and _sub.ndim > 0:
        _sub = np.broadcast_to(_sub.astype(dtype), img.shape)
        if mask is not None:
            _sub = _sub[mask]
    _div = div if div is not None else masked.std()
    if np.isscalar(_div) or (isinstance(_div, np.ndarray) and _div.ndim == 0):
        if _div == 0.0:
            _div = 1.0
    else:
        _div = np.array(np.broadcast_to(np.asarray(_div, dtype=dtype), img.shape))
        if mask is not None:
            _div = _div[mask]
        _div[_div == 0.0] = 1.0
    if mask is not None:
        img[mask] = (masked - _sub) / _div
        return img
    return (img - _sub) / _div


def normalize_intensity(img, subtrahend=None, divisor=None, nonzero=False, channel_wise=False, dtype=np.float64):
    img = np.array(img, dtype=dtype, copy=True)
    if channel_wise:
        if subtrahend is not None and len(subtrahend) != len(img):
            raise ValueError(f"img has {len(img)} channels, but subtrahend has {len(subtrahend)} components.")
        if divisor is not None and len(divisor) != len(img):
            raise ValueError(f"img has {len(img)} channels, but divisor has {len(divisor)} components.")
        for i in range(len(img)):
            img[i] = _normalize(img[i], subtrahend[i] if subtrahend is not None else None,
                                divisor[i] if divisor is not None else None, nonzero, dtype)
        return img
    return _normalize(img, subtrahend, divisor, nonzero, dtype)
