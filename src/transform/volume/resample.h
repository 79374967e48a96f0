// MONAI's Spacing(pixdim) on 3D volumes: the output grid (shape, affine, and
// the input coordinate each output voxel samples) and the resampling onto it,
// trilinear (mode="bilinear") or nearest (mode="nearest"), with Spacing's
// defaults: diagonal=False, padding_mode="border", align_corners=False,
// scale_extent=False, recompute_affine=False. Reference: tests/python/spacing_ref.py.
//
// The grid (monai/transforms/spatial/array.py Spacing.__call__, monai/data/utils.py
// zoom_affine and compute_shape_offset):
//   - target spacing per axis: the original spacing (the affine's column norm) where
//     pixdim <= 0 or |orig - pixdim| <= 1e-3 (AFFINE_TOL), else pixdim;
//   - out_affine[:3, :3] = the input's directions (shear removed: R = Q * Zs, the
//     Cholesky factor of R^T R) with the target spacings as column norms;
//   - out_shape[j] = round_half_even(extent_j + 1), extent_j the spread of the
//     input's corner voxel centres (0 and n - 1 per axis) along output axis j,
//     computed as numpy does (on a rotated affine an exact half is decided by
//     float noise, in MONAI as here);
//   - out_affine[:3, 3] = the world position of the first input corner that is
//     the smallest along every output axis (corner 0 if none is): with kept
//     directions, the input's own translation;
//   - output voxel o samples input voxel coordinate inv(A_in) @ A_out @ o
//     (align_corners=False in MONAI's normalisation cancels out exactly);
//   - when the new affine is within 1e-3 (+1e-5 relative) of the input's, or the map
//     within that of the identity, and the shape is unchanged, MONAI returns the input
//     as it is: the plan is then the identity with the input's affine.
// Sampling (PyTorch grid_sample, padding_mode="border"): each input coordinate is
// clipped to [0, n - 1]; linear weights the 2x2x2 neighbours; nearest takes the
// clipped coordinate rounded half to even (std::nearbyint).
#pragma once

#include <array>
#include <cstdint>

#include "transform/volume/ops.h"

namespace stoker::detail {

struct SpacingPlan {
  Shape3 out_shape{0, 0, 0};
  std::array<double, 16> out_affine{};  // row-major 4x4, the output's voxel -> world
  std::array<double, 12> to_input{};    // row-major 3x4: input voxel coords (s0,s1,s2) of output voxel (o0,o1,o2)
};

// MONAI Spacing(pixdim) on a volume of spatial `shape` with voxel->world `affine`
// (row-major 4x4; the axes (s0, s1, s2) are nibabel's (i, j, k); the bottom row is
// ignored, as MONAI's to_affine_nd does). pixdim entries <= 0 (or NaN) keep that
// axis's spacing, and so does an entry within 1e-3 of it. In to_input, entries below 1e-9 in magnitude off the diagonal and in the
// translation are set to exactly 0 (rounding noise of the solve), so that a plan
// whose 3x3 part is diagonal samples each axis on its own (the separable path).
// Throws Error(kInvalidArgument) for a shape entry < 1, a non-finite affine, an
// infinite pixdim, or a singular affine.
SpacingPlan spacing_plan(const Shape3& shape, const std::array<double, 16>& affine,
                         const std::array<double, 3>& pixdim);

// Resamples `channels` C-order blocks (channel, s0, s1, s2) of `in_shape` onto
// plan.out_shape, as MONAI does for mode="bilinear" (trilinear in 3D) with
// padding_mode="border". out has channels * prod(out_shape) floats. Separable
// (per-axis indices and weights) when to_input's 3x3 part is diagonal; a plan that
// is the identity on the same shape copies the input.
void resample_linear(const float* in, int channels, const Shape3& in_shape, const SpacingPlan& plan, float* out);

// mode="nearest" (labels): every output voxel is one input voxel's value.
// Explicitly instantiated for std::uint8_t and std::int32_t.
template <typename T>
void resample_nearest(const T* in, int channels, const Shape3& in_shape, const SpacingPlan& plan, T* out);

extern template void resample_nearest<std::uint8_t>(const std::uint8_t*, int, const Shape3&, const SpacingPlan&,
                                                    std::uint8_t*);
extern template void resample_nearest<std::int32_t>(const std::int32_t*, int, const Shape3&, const SpacingPlan&,
                                                    std::int32_t*);

}  // namespace stoker::detail
