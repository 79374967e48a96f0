// GIF through giflib: the first frame, converted as PIL's
// Image.open(path).convert("RGB") (Pillow 9.4's GifImagePlugin).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "image/pixels.h"
#include "decode/pil_convert.h"
#include "stoker/status.h"

namespace stoker::detail {

// The first frame only (an animation's later frames are never read), on a
// canvas of the logical screen's size, grown to the frame's extent when the
// frame reaches past it (as PIL grows it); the canvas outside the frame is
// the frame's transparent index when its graphic control extension has one,
// else index 0; indices through the frame's palette (its local one, else the
// global one; entries past it are PIL's gray ramp, no palette at all is
// gray). Transparency is never applied: convert("RGB") drops it.
// The frame is decoded whole: LZW is sequential, and a crop's rows are all
// of a first frame's work (interlaced frames hold every row in each pass).
// Truncated pixel data, an early end code, or a bad code is kCorrupt with
// giflib's reason (PIL raises "image file is truncated" for the same files).
class GifDecoder {
 public:
  GifDecoder();
  ~GifDecoder();
  GifDecoder(const GifDecoder&) = delete;
  GifDecoder& operator=(const GifDecoder&) = delete;

  // Reads the headers up to the first frame's descriptor; the canvas size
  // is capped (max_pixels) before any pixel memory. `data` is kept until the
  // next open().
  Status open(const std::uint8_t* data, std::size_t size, std::uint64_t max_pixels, int* width, int* height);
  // Decodes the first frame, then views `region` of the canvas.
  // REQUIRES: open() ok.
  Status decode(const Box& region, ImageBuffer* buf, ImageView* view);

  struct State;

 private:
  Status parse();  // opens the data and reads up to the first frame's pixels
  std::unique_ptr<State> s_;
};

}  // namespace stoker::detail
