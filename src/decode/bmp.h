// BMP: a small reader of the uncompressed variants, converted as PIL's
// Image.open(path).convert("RGB") (Pillow 9.4's BmpImagePlugin).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "image/pixels.h"
#include "decode/pil_convert.h"
#include "stoker/status.h"

namespace stoker::detail {

// Reads what PIL reads, no more: the OS/2 1.x (12-byte), BITMAPINFOHEADER
// (40), OS/2 2.x (64), V4 (108) and V5 (124) headers; 1, 4 and 8-bit palette
// images and 16, 24 and 32-bit ones, uncompressed (BI_RGB) or with one of the
// bit-field layouts PIL knows (BI_BITFIELDS: 5-5-5 and 5-6-5 at 16 bits,
// B-G-R at 24, BGRX/XBGR/RGBA and their alpha variants at 32); palette images
// run-length encoded (RLE8, RLE4), read as PIL's BmpRleDecoder reads them
// (its quirks kept: runs clipped at the row's end, absolute runs not, RLE4's
// odd absolute runs short of their last pixel, word alignment by the file
// offset, a delta's (right, up) taken from the two bytes after its own);
// bottom-up and top-down. Alpha is dropped; 5 and 6-bit fields
// scale as v * 255 / max.
// Refused with the reason (kUnsupported): JPEG and PNG compression, RLE of
// more than 8 bits per pixel or with a black-and-white palette (PIL has no
// unpacker for either), 2 and 64-bit pixels, other headers and bit fields,
// palettes of more than 256 colours. The pixel data must be all there (PIL
// raises "image file is truncated", or for RLE "not enough image data",
// otherwise): checked at open(), before decode, for uncompressed data; for
// RLE (whose length the header does not give) when decode() runs out of it.
// NOTE: as PIL, a palette of two entries, black then white, makes the image
// 1-bit whatever its depth (PIL's mode "1"), and pixels whose index lies past
// the palette take PIL's gray ramp.
class BmpDecoder {
 public:
  // Parses the headers and the palette; the size is capped (max_pixels)
  // before anything else is looked at. `data` is kept until the next open().
  Status open(const std::uint8_t* data, std::size_t size, std::uint64_t max_pixels, int* width, int* height);
  // Converts only the rows and columns of `region` into buf (RLE: the whole
  // image's run-length data is expanded first: it is sequential); *view is
  // the region. REQUIRES: open() ok.
  Status decode(const Box& region, ImageBuffer* buf, ImageView* view);
  // What its buffers hold (their capacity).
  std::uint64_t bytes() const { return indices_.capacity(); }

 private:
  // Expands the RLE data from pixels_ into indices_ (one per pixel, rows
  // in stored order), as PIL's BmpRleDecoder.
  Status expand_rle();

  const std::uint8_t* data_ = nullptr;  // the file
  std::size_t size_ = 0;
  const std::uint8_t* pixels_ = nullptr;  // the first stored row (RLE: the first byte of the RLE data)
  int rle_ = 0;                           // 8 or 4 for RLE8 / RLE4, else 0
  std::vector<std::uint8_t> indices_;     // RLE: the expanded indices, width_ x height_, stored row order
  int width_ = 0, height_ = 0;
  bool top_down_ = false;
  std::size_t stride_ = 0;
  int bits_ = 0;  // bits per pixel as unpacked (1, 4, 8, 16, 24 or 32)
  // 16-bit: the 5-6-5 layout (else 5-5-5). 24/32-bit: the byte of R, G, B.
  bool rgb565_ = false;
  int r_byte_ = 2, g_byte_ = 1, b_byte_ = 0;
  PilPalette palette_;
};

}  // namespace stoker::detail
