// Transforms of 3D volumes (VolumeField, LabelVolumeField), named and
// parameterised as MONAI names them, with MONAI's semantics on channel-first
// arrays (C, S0, S1, S2). They apply in list order to every volume field of
// the sample with one draw per patch shared by all fields (as a MONAI dict
// transform over keys=[image, label]); intensity transforms touch only
// intensity volumes. LoaderOptions::volume_transforms holds them.
//
// The list must give every sample one fixed patch size: it holds exactly one
// sampling crop (RandSpatialCrop, RandSpatialCropSamples,
// RandCropByPosNegLabel or CenterSpatialCrop) and whatever follows keeps the
// size fixed. Before the crop only SpatialPad and pointwise intensity
// transforms may come (ScaleIntensityRange; NormalizeIntensity with both
// subtrahend and divisor given), so a patch is read without reading its
// volume. A volume too small for the patch (without a SpatialPad to make up
// for it) is a sample error.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace stoker {

// monai.transforms.RandSpatialCrop(roi_size, random_center=True,
// random_size=False): a roi_size patch at a uniformly drawn corner
// (random_center=False: the centred one). random_size=True (MONAI's default)
// would give patches of varying size, which cannot be batched: refused.
// A non-positive roi_size entry means the whole axis.
struct RandSpatialCrop {
  std::array<int, 3> roi_size{96, 96, 96};
  bool random_center = true;
  bool random_size = false;
};

// monai.transforms.RandSpatialCropSamples(roi_size, num_samples,
// random_center=True, random_size=False): num_samples independent
// RandSpatialCrop patches of one volume load, consecutive batch entries.
struct RandSpatialCropSamples {
  std::array<int, 3> roi_size{96, 96, 96};
  int num_samples = 1;  // REQUIRES: 1..256
  bool random_center = true;
  bool random_size = false;
};

// monai.transforms.RandCropByPosNegLabel(spatial_size, label_key, pos=1.0,
// neg=1.0, num_samples=1): num_samples patches centred on a foreground voxel
// (non-zero in any channel; channel 0 of a multi-channel label, its one-hot
// background, left out, as MONAI does) with probability pos / (pos + neg), else on a
// background voxel, each voxel of its class equally likely; centres moved
// inside the volume as MONAI's correct_crop_centers does. When one class is
// empty every patch comes from the other (counted: posneg_one_class). The
// label's foreground index is built once per volume and cached.
struct RandCropByPosNegLabel {
  std::array<int, 3> spatial_size{96, 96, 96};
  std::string label_key;  // a LabelVolumeField's name
  double pos = 1.0;
  double neg = 1.0;
  int num_samples = 1;  // REQUIRES: 1..256
};

// monai.transforms.CenterSpatialCrop(roi_size): the centred roi_size box
// (start = max(shape // 2 - roi // 2, 0)); non-positive entries: the whole axis.
struct CenterSpatialCrop {
  std::array<int, 3> roi_size{96, 96, 96};
};

// monai.transforms.SpatialPad(spatial_size, method="symmetric",
// mode="constant"): each axis padded to at least spatial_size with zeros
// (label volumes with their field's fill): width = max(size - shape, 0),
// symmetric (width // 2 before) or at the end.
enum class PadMethod { kSymmetric, kEnd };
struct SpatialPad {
  std::array<int, 3> spatial_size{96, 96, 96};
  PadMethod method = PadMethod::kSymmetric;
};

// monai.transforms.RandFlip(prob=0.1, spatial_axis=None): with probability
// prob, every listed spatial axis flipped (one draw). Empty: all three.
struct RandFlip {
  double prob = 0.1;
  std::vector<int> spatial_axis;
};

// monai.transforms.RandRotate90(prob=0.1, max_k=3, spatial_axes=(0, 1)):
// with probability prob, k = 1 + uniform in [0, max_k) quarter turns in the
// plane of the two spatial axes (np.rot90(x, k, axes)). The two axes must
// have the same patch size (else batches would not stack).
struct RandRotate90 {
  double prob = 0.1;
  int max_k = 3;
  std::array<int, 2> spatial_axes{0, 1};
};

// monai.transforms.ScaleIntensityRange(a_min, a_max, b_min=None,
// b_max=None, clip=False): (x - a_min) / (a_max - a_min), then
// * (b_max - b_min) + b_min when both are given; clipped to [b_min, b_max]
// with clip. a_max == a_min: x - a_min (+ b_min).
struct ScaleIntensityRange {
  double a_min = 0.0;
  double a_max = 1.0;
  std::optional<double> b_min;
  std::optional<double> b_max;
  bool clip = false;
};

// monai.transforms.NormalizeIntensity(subtrahend=None, divisor=None,
// nonzero=False, channel_wise=False): (x - mean) / std (population) over the
// patch (or only its non-zero voxels, the rest left as they are; per channel
// with channel_wise); a given subtrahend/divisor replaces the statistic (one
// value, or one per channel with channel_wise); a divisor or std of 0
// divides by 1. Statistics are of the patch: computed statistics are only
// allowed after the sampling crop.
struct NormalizeIntensity {
  std::vector<double> subtrahend;  // empty: None
  std::vector<double> divisor;     // empty: None
  bool nonzero = false;
  bool channel_wise = false;
};

// monai.transforms.Spacing(pixdim, mode=("bilinear", "nearest")): each
// volume resampled to voxels of `pixdim` (mm; entries <= 0 keep the axis's
// spacing) along its own axes, as MONAI's grid (compute_shape_offset)
// defines it: trilinear for intensity volumes, nearest for label volumes,
// the affine updated. Done once per volume when it is first loaded and kept
// in the volume cache (under memory_budget; beyond it, per load: counted in
// stats()["volume"]["resample_s"]). Must be the first transform.
struct Spacing {
  std::array<double, 3> pixdim{1.0, 1.0, 1.0};
};

using VolumeTransform = std::variant<Spacing, RandSpatialCrop, RandSpatialCropSamples, RandCropByPosNegLabel,
                                     CenterSpatialCrop, SpatialPad, RandFlip, RandRotate90, ScaleIntensityRange,
                                     NormalizeIntensity>;

}  // namespace stoker
