// PNG decoding with libpng.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "image/pixels.h"
#include "decode/pil_convert.h"
#include "stoker/status.h"

namespace stoker::detail {

class PngDecoder {
 public:
  // Reads the size from the IHDR chunk.
  Status open(const std::uint8_t* data, std::size_t size, int* width, int* height);
  // Decodes the whole image opened last, then views `region` of it; as PIL's
  // convert("RGB"): a palette's transparency (tRNS) and alpha dropped, 16-bit
  // gray clipped at 255 (PIL opens it as "I"), 16-bit colour to its high byte.
  Status decode(const Box& region, ImageBuffer* buf, ImageView* view);
  // The image opened last as a mask, as stored: gray (8-bit; 1, 2, 4-bit
  // scaled to 8 as PIL's "L"), palette indices (never their colours), or
  // 16-bit gray (host byte order, PIL's "I;16"). Colour PNGs are kUnsupported.
  // rows >= 0: stop after the first `rows` rows (non-interlaced PNGs; an
  // interlaced one is decoded whole).
  Status decode_mask(MaskBuffer* buf, int rows = -1);
  // The image opened last as stored (stoker.Image(channels="stored")): its
  // channels (gray 1, gray+alpha 2, RGB 3, RGBA 4; a palette expanded to its
  // colours: RGB 3, or RGBA 4 with transparency) and sample type (16-bit: uint16, host
  // order; 1, 2, 4-bit gray scaled to 8 as PIL's "L"), and the samples of
  // `region` as planes (the image is decoded whole).
  void stored_layout(int* channels, SampleType* type) const;
  Status decode_raster(const Box& region, RasterBuffer* buf);
  // What its buffers hold (their capacity).
  std::uint64_t bytes() const { return rows_.capacity() * sizeof(std::uint8_t*) + scratch_.capacity(); }

 private:
  template <typename Read>
  Status with_reader(Read&& read);
  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
  int width_ = 0, height_ = 0;
  std::vector<std::uint8_t*> rows_;
  std::vector<std::uint8_t> scratch_;  // palette indices or 16-bit gray, as stored
  PilPalette palette_;
};

}  // namespace stoker::detail
