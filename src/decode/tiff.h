// TIFF through libtiff: the first page, converted as PIL's
// Image.open(path).convert("RGB") (Pillow 9.4's TiffImagePlugin, which reads
// compressed TIFFs through the same libtiff calls).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "image/pixels.h"
#include "stoker/status.h"

namespace stoker::detail {

// The variants PIL opens, as PIL converts them to RGB (sample format
// unsigned integer; strips or tiles; contiguous or planar samples; any
// compression this libtiff has a codec for; fill order and predictors are
// libtiff's business):
//   gray, min-is-black or min-is-white, 1/2/4/8 bits (scaled to 8 as PIL's
//     "1", "L;2", "L;4"; min-is-white inverted), 16 bits (PIL's "I;16",
//     clipped at 255, never inverted, as PIL), 16/32-bit signed and 32-bit
//     unsigned (PIL's "I": clipped) and 32-bit float (PIL's "F": truncated
//     and clipped), 8-bit gray + unassociated alpha;
//   palette, 1/2/4/8 bits (+ unassociated alpha): ColorMap entries >> 8;
//   RGB, 8 bits with 0-3 extra samples or 16 bits (the high byte) with 0-1;
//     associated (premultiplied) alpha undone as PIL's "RGBa" (c * 255 / a);
//   CMYK (separated), 8 bits (+ extra samples) or 16 bits: PIL's cmyk2rgb;
//   YCbCr with JPEG compression: converted by libjpeg inside libtiff
//     (JPEGCOLORMODE_RGB), as PIL has it done.
// Other variants (colour of other sample formats, Lab, YCbCr without JPEG,
// old-style JPEG, ...) are kUnsupported with the reason. Extra samples and
// alpha are dropped. The Orientation tag IS applied (2-8: flips, rotations,
// transpositions), because PIL's TIFF plugin applies it when it loads the
// image, so torchvision's loader sees it applied (a JPEG's or WebP's EXIF
// orientation is not: see decode.h); width and height are those after it.
// Later pages are never read.
// NOTE: the one variant where the pixels differ from PIL's on purpose:
// uncompressed planar 16-bit RGB, whose planes PIL 9.4's own unpacker reads
// as 8-bit samples (each row's left half, every pixel twice); stoker gives
// the samples' high bytes, as PIL does when the same file is compressed.
// Errors and warnings libtiff reports go into the Status of the call that
// caused them, never to stderr: handlers are installed per TIFF handle
// (TIFFOpenOptions, libtiff >= 4.5), so decoders on other threads do not
// share them.
class TiffDecoder {
 public:
  TiffDecoder();
  ~TiffDecoder();
  TiffDecoder(const TiffDecoder&) = delete;
  TiffDecoder& operator=(const TiffDecoder&) = delete;

  // Reads the first directory; the size is capped (max_pixels) before any
  // pixel memory is allocated. `data` is kept until the next open().
  // stored: the samples are kept as they are (decode_raster()): any
  // photometric interpretation and 1..N samples per pixel, contiguous or
  // planar, of 8 or 16-bit unsigned integers or 32-bit floats (the
  // Orientation tag applied as for RGB); other sample formats and
  // JPEG-compressed YCbCr are kUnsupported with the reason.
  Status open(const std::uint8_t* data, std::size_t size, std::uint64_t max_pixels, int* width, int* height,
              bool stored = false);
  // Decodes `region` (of the image as oriented) into buf (*view is the
  // region): only the strips or tiles it touches are read and decompressed;
  // rows and columns outside it are not converted. REQUIRES: open() ok.
  Status decode(const Box& region, ImageBuffer* buf, ImageView* view);
  // After open(stored=true): the samples per pixel and their type, and the
  // samples of `region` (only the strips or tiles it touches) as planes.
  int channels() const;
  SampleType sample_type() const;
  Status decode_raster(const Box& region, RasterBuffer* buf);

  struct State;

 private:
  std::unique_ptr<State> s_;
};

}  // namespace stoker::detail
