// Each volume transform's one definition (defs.cc: a VDef<T> per
// alternative of stoker::VolumeTransform): its MONAI name (the options JSON
// and Python use it), its docstring, its parameters as JSON both ways with
// their checks, and what kind of step it is. The Python classes
// (python/stoker/volume.py) carry the parameters here and take their
// __doc__ from here; the sample path is transform/volume/ops.h.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "stoker/volume.h"

namespace stoker::detail {

const char* volume_transform_name(const VolumeTransform& t);
// The transform's docstring (its VDef<T>'s kDoc with the shared Raises
// section): the Python class's __doc__.
std::string volume_transform_doc(const VolumeTransform& t);
// Throws Error(kInvalidArgument) naming the transform and the bad parameter.
void check_volume_transform(const VolumeTransform& t);
std::string volume_transform_to_json(const VolumeTransform& t);  // {"name": "RandFlip", "prob": 0.5, ...}
// Throws Error(kInvalidArgument) for an unknown name, a missing or an unknown parameter.
VolumeTransform volume_transform_from_json(const std::string& json);

struct VolumeTraits {
  bool sampling = false;   // draws the patches: RandSpatialCrop(Samples), RandCropByPosNegLabel, CenterSpatialCrop
  bool geometric = false;  // crops, pads, flips or rotates (applies to every volume field)
  bool pointwise = false;  // an intensity map of each voxel alone (may precede the sampling crop)
  bool intensity = false;  // applies to intensity volumes only
  int num_samples = 1;     // patches per volume load (sampling crops)
};
VolumeTraits volume_traits(const VolumeTransform& t);

// The list's rules, checked at construction: exactly one sampling crop; only
// SpatialPad and pointwise intensity transforms before it; RandRotate90 over
// axes of equal patch size; label_key naming a label volume of
// `label_fields`. Throws Error(kInvalidArgument).
void check_volume_transforms(const std::vector<VolumeTransform>& list, const std::vector<std::string>& label_fields);

// The patch size the list gives a volume of spatial shape `shape`, or false
// (with *why) when it cannot (a crop larger than the volume without a pad
// after it).
bool volume_output_shape(const std::vector<VolumeTransform>& list, const std::array<std::int64_t, 3>& shape,
                         std::array<std::int64_t, 3>* out, std::string* why);

}  // namespace stoker::detail
