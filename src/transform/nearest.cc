#include "transform/nearest.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace stoker::detail {
namespace {

// One pass over the output: each row is a gather through the column table
// from the source row the row table names. Pixels are moved with memcpy: a
// MaskView's rows are bytes with no alignment promised for 16-bit pixels.
template <typename Pixel>
void gather_rows(const MaskView& src, const std::vector<int>& cols, const std::vector<int>& rows, MaskBuffer* out) {
  const std::size_t width = cols.size();
  // Columns whose position fell past the source's right edge are a suffix (positions never decrease).
  const auto valid = static_cast<std::size_t>(std::find(cols.begin(), cols.end(), -1) - cols.begin());
  const std::size_t row_bytes = width * sizeof(Pixel);
  for (int y = 0; y < out->height; ++y) {
    std::uint8_t* o = out->row(y);
    const int r = rows[static_cast<std::size_t>(y)];
    if (r < 0) {
      std::memset(o, 0, row_bytes);
      continue;
    }
    // Upscaling repeats source rows: a repeated one is the previous output row again.
    if (y > 0 && r == rows[static_cast<std::size_t>(y) - 1]) {
      std::memcpy(o, out->row(y - 1), row_bytes);
      continue;
    }
    const std::uint8_t* in = src.row(r);
    for (std::size_t x = 0; x < valid; ++x) {
      std::memcpy(o + x * sizeof(Pixel), in + static_cast<std::size_t>(cols[x]) * sizeof(Pixel), sizeof(Pixel));
    }
    std::memset(o + valid * sizeof(Pixel), 0, row_bytes - valid * sizeof(Pixel));
  }
}

}  // namespace

void nearest_axis(int in_size, int out_size, double in0, double in1, int bytes_per_pixel, std::vector<int>* index) {
  // NOTE: Pillow parses the box as float32 and subtracts in float32 before
  // widening to double. A box edge such as 0.99999999 is 1.0 there, which can
  // move a position across an integer, so the same rounding happens here.
  const float lo = static_cast<float>(in0);
  const float hi = static_cast<float>(in1);
  const float extent = hi - lo;
  const double step = static_cast<double>(extent) / out_size;
  const double offset = lo;
  index->resize(static_cast<std::size_t>(out_size));
  double running = offset + step * 0.5;  // the 8-bit path's running sum
  for (int i = 0; i < out_size; ++i) {
    // NOTE: the 16-bit expression is left to the compiler as Pillow's C is:
    // on x86-64 (no FMA in the baseline) both round the product, then the sum.
    const double pos = bytes_per_pixel == 1 ? running : step * (i + 0.5) + offset;
    running += step;
    // Pillow's COORD(): truncation toward zero, and -1 for any negative position.
    const int v = pos < 0.0 ? -1 : static_cast<int>(pos);
    (*index)[static_cast<std::size_t>(i)] = v < in_size ? v : -1;
  }
}

void resize_nearest(const MaskView& src, int out_w, int out_h, MaskBuffer* out, const double* src_box) {
  // NOTE: Pillow copies (same size, no box) or crops (a whole-pixel box of the
  // output's size) instead of resampling; the rule gives the same pixels there
  // (a step of exactly 1.0, positions k + 0.5), so those need no case here.
  std::vector<int> cols, rows;
  const int bpp = src.bytes_per_pixel;
  nearest_axis(src.width, out_w, src_box ? src_box[0] : 0, src_box ? src_box[2] : src.width, bpp, &cols);
  nearest_axis(src.height, out_h, src_box ? src_box[1] : 0, src_box ? src_box[3] : src.height, bpp, &rows);
  out->reset(out_w, out_h, bpp);
  if (bpp == 1) {
    gather_rows<std::uint8_t>(src, cols, rows, out);
  } else {
    gather_rows<std::uint16_t>(src, cols, rows, out);
  }
}

}  // namespace stoker::detail
