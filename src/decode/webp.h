// WebP through libwebp: the first frame, converted as PIL's
// Image.open(path).convert("RGB") (Pillow 9.4's WebPImagePlugin, which reads
// every WebP through libwebp's WebPAnimDecoder).
#pragma once

#include <cstddef>
#include <cstdint>

#include "image/pixels.h"
#include "stoker/status.h"

namespace stoker::detail {

// Lossy and lossless, still or animated (the first frame), with or without
// alpha. As PIL's WebPAnimDecoder gives it: a canvas of the container's
// size, black where the first frame does not cover it, the frame's RGB as
// libwebp decodes it (alpha dropped, not composited; fancy upsampling), so
// the pixels are libwebp's own, bit for bit. ICC profiles and EXIF
// orientation are not applied (PIL's loader applies neither).
// A lossless frame that covers the canvas is decoded through libwebp's
// cropping (use_cropping): only the region's pixels are converted and no row
// below it is decoded, with exactly the pixels of a whole decode (tested at
// every offset). A lossy frame is decoded whole. NOTE: libwebp crops a lossy
// frame at an even column and row and upsamples its chroma as if the crop's
// edges were the image's, which changes the pixels along them (almost every
// crop of a test image differed), so lossy frames never take that path.
// A truncated file, a bad chunk or bitstream is kCorrupt with the reason.
class WebpDecoder {
 public:
  // Parses the container (every chunk must be there: truncation is found
  // here) and the first frame's bitstream header; the canvas size is capped
  // (max_pixels) before any pixel memory. `data` is kept until the next open().
  Status open(const std::uint8_t* data, std::size_t size, std::uint64_t max_pixels, int* width, int* height);
  // Decodes the first frame (or, lossless, its part in `region`); *view is
  // the region. REQUIRES: open() ok.
  Status decode(const Box& region, ImageBuffer* buf, ImageView* view);

 private:
  const std::uint8_t* frame_ = nullptr;  // the first frame's bitstream (ALPH + VP8, or VP8L)
  std::size_t frame_size_ = 0;
  int canvas_w_ = 0, canvas_h_ = 0;
  int x_ = 0, y_ = 0, w_ = 0, h_ = 0;  // the frame on the canvas
  bool lossless_ = false;              // VP8L (no lossy VP8 data)
};

}  // namespace stoker::detail
