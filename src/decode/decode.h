// Format sniffing and the per-thread decoder used by the workers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "decode/formats.h"
#include "image/pixels.h"
#include "stoker/status.h"

namespace stoker::detail {


class JpegDecoder;
class PngDecoder;
class NpyDecoder;
class WebpDecoder;
class TiffDecoder;
class BmpDecoder;
class GifDecoder;

// Decodes one image at a time, in two steps: open() parses the header and
// gives the size; decode() produces RGB8 pixels of a region of the image,
// exactly as torchvision's default loader, PIL's
// Image.open(path).convert("RGB"), gives them (Pillow 9.4): grayscale
// replicated, palettes applied, CMYK/YCCK via PIL's formula, alpha and
// transparency dropped (never composited), 16-bit colour reduced to its high
// byte and 16-bit gray clipped at 255, as PIL converts each; the first frame
// or page of animations and multi-page files; EXIF orientation not applied
// (torchvision's loader does not call exif_transpose), but a TIFF's
// Orientation tag applied, as PIL's TIFF plugin applies it when it loads
// (width() and height() are then the oriented size). The formats:
// formats.h; each decoder's header states its variants.
// Reuses its buffers and codec state. Thread-compatible: one per worker.
class ImageDecoder {
 public:
  ImageDecoder();
  ~ImageDecoder();

  // Parses the header of `data` (kept by pointer until the next open()).
  // Refuses images larger than max_pixels before allocating pixel memory.
  // Messages carry the reason only; the caller prefixes file and record.
  Status open(const std::uint8_t* data, std::size_t size, std::uint64_t max_pixels);
  int width() const { return width_; }
  int height() const { return height_; }
  Format format() const { return format_; }

  // Decodes the pixels of `region` (clipped to the image) into `buf`; *view
  // is exactly the region. For JPEG only the rows from the region's top to
  // its bottom are decoded and columns outside it skip the IDCT; TIFF reads
  // only the strips or tiles the region touches, BMP only its rows; the
  // others decode whole. The result is identical to a full decode followed
  // by a crop.
  // scale_eighths < 8 (JPEG only): the region is in the coordinates of the
  // image decoded at scale_eighths/8 (libjpeg-turbo DCT scaling, 1/8 to 7/8;
  // that image is ceil(width * scale_eighths / 8) pixels wide).
  // REQUIRES: open() returned ok.
  Status decode(const Box& region, ImageBuffer* buf, ImageView* view, int scale_eighths = 8);

  // A segmentation mask, kept as stored (one channel: gray, palette indices
  // never turned into colours, 16-bit), as PIL's Image.open() keeps it:
  // open_mask() parses the header (PNG: gray or palette; .npy: uint8/uint16
  // HxW); decode_mask() decodes the whole mask. JPEG (lossy) and colour
  // images are kUnsupported with the reason. Messages carry the reason only.
  Status open_mask(const std::uint8_t* data, std::size_t size, std::uint64_t max_pixels);
  // REQUIRES: open_mask() returned ok.
  // rows >= 0: only the first `rows` rows need to be right (a crop's
  // bottom): a non-interlaced PNG stops inflating there, a .npy copies only
  // those; the buffer still has the mask's full size.
  Status decode_mask(MaskBuffer* buf, int rows = -1);

  // A raster kept as stored (stoker.Image(channels="stored",
  // dtype="stored")): open_raster() parses the header as open() does (the
  // size capped by max_pixels before any pixel memory) and learns what is
  // stored: channels() and sample_type(). TIFF keeps its samples (1..N,
  // contiguous or planar; uint8, uint16, float32; tiff.h); PNG its channels
  // (gray, gray+alpha, RGB, RGBA; 8 or 16 bits; png.h); a gray JPEG is 1
  // channel; the other formats are their RGB decode (3 channels uint8).
  // decode_raster() decodes `region` (TIFF: only the strips or tiles it
  // touches) as planes. Messages carry the reason only.
  Status open_raster(const std::uint8_t* data, std::size_t size, std::uint64_t max_pixels);
  int channels() const { return channels_; }
  SampleType sample_type() const { return type_; }
  // REQUIRES: open_raster() returned ok.
  Status decode_raster(const Box& region, RasterBuffer* buf);

  // What its own buffers hold (their capacity): the raster path's RGB
  // decode, PNG's rows and stored samples, BMP's RLE indices. NOTE: the
  // codecs' library state (libjpeg-turbo's, libtiff's, libwebp's, giflib's)
  // is theirs and not counted.
  std::uint64_t bytes() const;

 private:
  int channels_ = 3;
  SampleType type_ = SampleType::kUint8;
  ImageBuffer rgb_;  // decode_raster(): the RGB decode of the formats kept as their RGB
  Format format_ = Format::kUnknown;
  int width_ = 0;
  int height_ = 0;
  std::unique_ptr<JpegDecoder> jpeg_;
  std::unique_ptr<PngDecoder> png_;
  std::unique_ptr<NpyDecoder> npy_;
  std::unique_ptr<WebpDecoder> webp_;
  std::unique_ptr<TiffDecoder> tiff_;
  std::unique_ptr<BmpDecoder> bmp_;
  std::unique_ptr<GifDecoder> gif_;
};

}  // namespace stoker::detail
