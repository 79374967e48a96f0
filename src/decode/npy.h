// .npy arrays (NumPy format versions 1-3): header parsing and uint8 images.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "image/pixels.h"
#include "stoker/status.h"

namespace stoker::detail {

struct NpyHeader {
  std::string descr;               // e.g. "|u1", "<f4"
  bool fortran_order = false;
  std::vector<std::uint64_t> shape;
  std::size_t data_offset = 0;     // bytes before the array data
  std::size_t item_size = 0;
  std::uint64_t data_bytes = 0;    // item_size x the shape's product
};

// Parses the header of `data`; with check_data, also that the array data
// fits in `size`. Refuses more than 8 dimensions and sizes past 2^48 bytes.
Status parse_npy_header(const std::uint8_t* data, std::size_t size, NpyHeader* h, bool check_data = true);

// A uint8 image: (H, W), (H, W, C) with C in {1, 3, 4}, or (C, H, W) with C
// in {1, 3}. Gets its size; then decode copies a region as RGB8 (gray
// replicated, alpha dropped), like PIL's convert("RGB").
class NpyDecoder {
 public:
  // Refuses images of more than max_pixels before looking at the data.
  Status open(const std::uint8_t* data, std::size_t size, std::uint64_t max_pixels, int* width, int* height);
  Status decode(const Box& region, ImageBuffer* buf, ImageView* view);
  // A mask: uint8 or uint16 (little-endian), (H, W), (H, W, 1) or (1, H, W),
  // in C order; decode_mask copies it as stored.
  Status open_mask(const std::uint8_t* data, std::size_t size, std::uint64_t max_pixels, int* width, int* height);
  Status decode_mask(MaskBuffer* buf, int rows = -1) const;  // rows >= 0: only the first rows

 private:
  int bytes_per_pixel_ = 1;
  const std::uint8_t* pixels_ = nullptr;
  int width_ = 0, height_ = 0, channels_ = 3;
  bool planar_ = false;
};

}  // namespace stoker::detail
