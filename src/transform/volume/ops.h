// Patches of 3D volumes: the transform list compiled once (VolumeProgram),
// each patch's draws (PatchPlan: where its window lies, which flips and
// rotations), the copy of a window out of a volume's voxels without
// touching the rest (gather), and the steps after the crop on the patch.
// Thread-free; the sample path (sample/volume_maker.cc) drives it.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "decode/volume_format.h"
#include "image/label_index.h"
#include "order/rng.h"
#include "stoker/status.h"
#include "stoker/volume.h"

namespace stoker::detail {

using Shape3 = std::array<std::int64_t, 3>;
// "(96, 96, 96)", for messages.
std::string shape_text(const Shape3& s);

// The transform stream of patch p of a sample (patch 0 is the sample's
// transform stream itself).
std::uint64_t patch_stream(int p);

// A volume's voxels in memory (a mapped file, a cache entry, a read buffer):
// voxel (c, s0, s1, s2) at data + h.data_offset + item * (c*st[0] + ...).
struct VolumeView {
  const std::uint8_t* data = nullptr;
  VolumeHeader h;
};

// Which voxels of a label volume are foreground (non-zero in any channel;
// a multi-channel label's channel 0, one-hot background, left out, as
// MONAI's map_binary_to_indices), as an index over its spatial voxels in C
// order (s0, s1, s2).
LabelIndex label_index(const VolumeView& v);

// A step after the sampling crop.
struct PostStep {
  enum Kind { kPad, kFlip, kRot90, kIntensity } kind = kPad;
  int op = -1;  // its index in the transform list
  // A pointwise intensity op that only flips and rotations precede after
  // the crop: applied while gathering (they commute), not as a pass.
  bool fused = false;
};

// The transform list compiled: what comes before the crop, the crop, and the
// steps after it.
struct VolumeProgram {
  std::vector<VolumeTransform> ops;
  int spacing = -1;              // Spacing (the first op) or -1
  int pre_pad = -1;              // a SpatialPad before the crop (at most one)
  std::vector<int> pre_pointwise;  // pointwise intensity ops before the crop, in order
  int sampling = -1;             // the sampling crop
  std::vector<PostStep> post;
  bool post_pad = false;         // a SpatialPad among the post steps (the patch grows after the gather)
  std::vector<int> gathered;     // the pointwise ops applied while gathering: pre_pointwise, then the fused post ones
  int num_samples = 1;
  std::string label_key;         // RandCropByPosNegLabel's label field ("" for the others)
};
// Throws Error(kInvalidArgument) (check_volume_transforms' rules, and more
// than one SpatialPad before the crop, or one before RandCropByPosNegLabel).
VolumeProgram compile_volume_program(const std::vector<VolumeTransform>& ops,
                                     const std::vector<std::string>& label_fields);

// One patch's draws, shared by every field of the sample.
struct PatchPlan {
  Shape3 pre_before{0, 0, 0};  // the pre-crop pad before the volume
  Shape3 start{0, 0, 0};       // the window (in volume voxels; < 0 or past the end: pad)
  Shape3 size{0, 0, 0};
  // Per post step: pad widths before/after, flip mask (bit a: spatial axis a),
  // quarter turns and their axes.
  struct Step {
    Shape3 before{0, 0, 0}, after{0, 0, 0};
    int flip = 0, k = 0, a = 0, b = 1;
  };
  std::vector<Step> steps;
  Shape3 out_start{0, 0, 0};  // the patch's first voxel in the volume after every pad (before flips)
  bool one_class = false;     // RandCropByPosNegLabel found one class empty
};

// Draws patch p's plan for a volume of spatial `shape`. `index` is the label
// index (RandCropByPosNegLabel only). A volume the list cannot cut a patch
// of `patch` from is a sample error naming why.
Status plan_patch(const VolumeProgram& prog, const Shape3& shape, const Shape3& patch, const LabelIndex* index,
                  Rng* rng, PatchPlan* out);

// A patch being made: channels x size in C order, in T (float for intensity
// volumes, the output's integer type for label volumes).
template <typename T>
struct Block {
  int channels = 1;
  Shape3 size{0, 0, 0};
  T* data = nullptr;  // channels * prod(size)
  std::int64_t voxels() const { return size[0] * size[1] * size[2]; }
};

// Copies the plan's window of `v` into `out` (sized plan.size), voxels
// outside the volume (the pre-crop pad) set to `pad`. Intensity volumes
// (float) get NIfTI scaling and `pointwise` (prog.gathered) on every voxel
// read; labels are copied as integers. Returns the bytes of voxels read.
std::uint64_t gather(const VolumeView& v, const PatchPlan& plan, const VolumeProgram& prog,
                     const std::vector<int>& pointwise, float pad, Block<float>* out);
template <typename T>
std::uint64_t gather_label(const VolumeView& v, const PatchPlan& plan, T pad, Block<T>* out);

// Applies the post-crop steps to a block; a pad step moves the block into
// `spare` (grown as needed) and swaps. Intensity steps apply to float blocks
// only. `fill` is the pad value.
void apply_post(const VolumeProgram& prog, const PatchPlan& plan, float fill, Block<float>* b,
                std::vector<float>* own, std::vector<float>* spare);
template <typename T>
void apply_post_label(const VolumeProgram& prog, const PatchPlan& plan, T fill, Block<T>* b, std::vector<T>* own,
                      std::vector<T>* spare);

// A pointwise intensity op on n floats (ScaleIntensityRange, or
// NormalizeIntensity with both statistics given).
void apply_pointwise(const VolumeTransform& op, float* x, std::size_t n);
// Its value for one number (pad values).
float pointwise_value(const VolumeTransform& op, float x);

}  // namespace stoker::detail
