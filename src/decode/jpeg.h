// JPEG decoding with libjpeg-turbo's libjpeg API (region and row-limited).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "image/pixels.h"
#include "stoker/status.h"

namespace stoker::detail {

class JpegDecoder {
 public:
  JpegDecoder();
  ~JpegDecoder();
  JpegDecoder(const JpegDecoder&) = delete;
  JpegDecoder& operator=(const JpegDecoder&) = delete;

  // Reads the header; *width/*height get the image size.
  Status open(const std::uint8_t* data, std::size_t size, int* width, int* height);
  // Decodes `region` of the image opened last, decoded at scale_eighths/8,
  // into RGB8. REQUIRES: open() ok.
  Status decode(const Box& region, ImageBuffer* buf, ImageView* view, int scale_eighths = 8);
  // The components of the image opened last (1: gray, 3: YCbCr or RGB, 4: CMYK/YCCK). REQUIRES: open() ok.
  int components() const;
  // Releases the image opened last (safe to call at any time).
  void close();

  struct State;

 private:
  std::unique_ptr<State> s_;
};

}  // namespace stoker::detail
