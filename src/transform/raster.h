// A sample's geometric plan applied to a raster kept as stored
// (stoker.Image(channels="stored")): the same crops, resizes and flips as an
// RGB image's, on each channel on its own, and the write into the batch slot
// (the stored dtype, or float32 with ToTensor's scale and Normalize).
//
// The arithmetic, per sample type, is Pillow's Image.resize(BILINEAR, box)
// on a single-channel image of the matching mode (what torchvision's
// F.resize does to a PIL image of that mode):
//   uint8   -> mode "L": 22-bit fixed-point weights, uint8 between the
//              passes (the RGB kernels' rule, per channel; bit-exact);
//   uint16  -> mode "I" (int32): double weights summed in double, rounded
//              half away from zero (ROUND_UP) to int32 after each pass;
//   float32 -> mode "F": double weights summed in double, stored as float32
//              after each pass.
// Pillow's I;16 has no bilinear resize in 9.4, so 16-bit samples are taken as
// "I" (exact: every uint16 is an int32); a bilinear blend never leaves the
// input's range, so the int32 result is a uint16 value.
#pragma once

#include <cstdint>
#include <vector>

#include "image/pixels.h"
#include "stoker/transforms.h"
#include "transform/plan.h"
#include "transform/resize.h"
#include "util/util.h"

namespace stoker::detail {

// The planes as the kernels hold them: uint8, int32 (uint16 samples) or float32.
enum class PlaneType : std::uint8_t { kUint8, kInt32, kFloat32 };
inline PlaneType plane_type(SampleType t) {
  return t == SampleType::kUint8 ? PlaneType::kUint8 : t == SampleType::kUint16 ? PlaneType::kInt32 : PlaneType::kFloat32;
}
inline int plane_bytes(PlaneType t) { return t == PlaneType::kUint8 ? 1 : 4; }

// What the write produces.
struct RasterWrite {
  bool nhwc = false;
  // false: the planes' type as it is (uint8, int32, float32); true: float32,
  // ToTensor's value (x / 255 with div255: uint8 samples; else x), then
  // (x - mean[c]) / std[c] when `mean` is non-empty (one value for every
  // channel, or one per channel), in float32 as torch computes them.
  bool to_float = false;
  bool div255 = false;
  std::vector<float> mean, std;
};

struct RasterWorkspace {
  std::vector<std::uint8_t> a, b, temp;  // planes between steps, and a resize's horizontal pass
  ResampleAxis fixed_h, fixed_v;         // uint8: Pillow's fixed-point weights
  struct Axis {
    int ksize = 0;
    std::vector<int> first, count;
    std::vector<double> weights;
    std::uint64_t bytes() const { return capacity_bytes(first) + capacity_bytes(count) + capacity_bytes(weights); }
  } h, v;  // int32, float32: Pillow's double weights
  std::uint64_t bytes() const {
    return capacity_bytes(a) + capacity_bytes(b) + capacity_bytes(temp) + fixed_h.bytes() + fixed_v.bytes() +
           h.bytes() + v.bytes();
  }
};

// Pillow's bilinear resize of one plane (w x h, rows packed) of type `t` to
// out_w x out_h into *out; `box` (x0, y0, x1, y1), when given, the source
// region in fractional pixels. REQUIRES: out_w, out_h > 0.
void resize_plane(PlaneType t, const std::uint8_t* src, int w, int h, int out_w, int out_h, const double* box,
                  RasterWorkspace* ws, std::vector<std::uint8_t>* out);

// Runs `plan`'s steps (crops: zeros past the edges; resizes: as above) on
// each channel of `src` (the plan's decode region, planes of type `t`, every
// channel `src_w` x `src_h`), flips it as the plan says, warps it by its
// image stage's affine ops (RandomRotation, RandomAffine: after the flips,
// as the RGB image stage runs; their fill's first value), then writes the
// sample into `out` as `write` says, [C, H, W] or [H, W, C].
// REQUIRES: the plan has no photometric or erase entries, and no image-stage
// op other than kAffine.
void run_raster_plan(const SamplePlan& plan, PlaneType t, const std::uint8_t* src, int channels, int src_w, int src_h,
                     const RasterWrite& write, RasterWorkspace* ws, void* out);

// Pillow's Image.transform(size, AFFINE, matrix, NEAREST|BILINEAR,
// fillcolor=fill) on one w x h plane of type `t` (mode "L", "I" or "F")
// into `dst` (w x h, same type): NEAREST through Pillow's scale, fixed-point
// or float loops, BILINEAR through its generic engine and bilinear_filter8 /
// 32I / 32F (pil_affine.cc, beside the RGB and mask warps).
void pil_affine_plane(PlaneType t, const std::uint8_t* src, int w, int h, std::uint8_t* dst, const double matrix[6],
                      bool bilinear, int fill);

// RandomErasing on a written sample (w x h, `channels`, the type `write`
// and `t` give it, its layout): each of the plan's erase boxes set to its
// transform's value (one, or one per channel) or to standard normal values
// from stoker's generator, as Pipeline::erase does for RGB (F.erase on the
// output tensor). `transforms`: the list the plan was drawn from.
void raster_erase(const SamplePlan& plan, const std::vector<Transform>& transforms, PlaneType t, int channels, int w,
                  int h, const RasterWrite& write, void* out);

// The output size of `plan` on a w x h region.
void raster_out_size(const SamplePlan& plan, int w, int h, int* out_w, int* out_h);

}  // namespace stoker::detail
