// The last pass of every sample: one RGB8 row, mirrored or not, converted to
// the batch's dtype and layout and written into the batch slot.
#pragma once

#include <cstddef>
#include <cstdint>

#include "stoker/options.h"
#include "transform/plan.h"
#include "transform/resize.h"

namespace stoker::detail {

// uint8 -> float32 per channel: ToTensor's v / 255, then Normalize's
// (x - mean) / std, in float32 operation for operation (so the table is
// exactly torchvision's result), plus the same table as byte planes for
// the AVX-512 writer's in-register lookups.
struct FloatTable {
  float value[3][256];
  alignas(64) std::uint8_t planes[3][4][256];  // byte b of value[c][v]
  // mean/std: three values each, or null for ToTensor alone.
  void build(const float* mean, const float* std);
};

// Readable bytes the writers may touch before and after a row (and ignore).
inline constexpr std::size_t kRowPad = 192;

// Writes row `y` of a width x height sample at `out` from the W RGB8 pixels
// at `row`. REQUIRES: kRowPad readable bytes before `row` and after its
// 3 * width bytes. `simd` caps the instruction set (tests compare levels).
// The plan's photometric stage on one output row of `width` RGB8 pixels, in
// place, in the plan's order. RandomGrayscale: PIL's convert("L") (ITU-R 601-2
// luma in 16-bit fixed point, rounded), copied to all three channels.
void apply_photometric(const SamplePlan& plan, std::uint8_t* row, int width);

void write_output_row(const std::uint8_t* row, int width, int height, int y, bool mirror, DType dtype, Layout layout,
                      const FloatTable& table, void* out, Simd simd = Simd::kAvx512);
// Orders the rows' streaming stores before anything written after: call once
// a sample's rows are written, before another thread may read it.
void finish_output_rows();

}  // namespace stoker::detail
