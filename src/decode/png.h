// PNG decoding with libpng.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "decode/image.h"
#include "stoker/status.h"

namespace stoker::detail {

class PngDecoder {
 public:
  // Reads the size from the IHDR chunk.
  Status open(const std::uint8_t* data, std::size_t size, int* width, int* height);
  // Decodes the whole image opened last, then views `region` of it.
  Status decode(const Box& region, ImageBuffer* buf, ImageView* view);

 private:
  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
  int width_ = 0, height_ = 0;
  std::vector<std::uint8_t*> rows_;
};

}  // namespace stoker::detail
