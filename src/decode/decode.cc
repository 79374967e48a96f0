#include "decode/decode.h"

#include <cstring>
#include <string>

#include "decode/bmp.h"
#include "decode/gif.h"
#include "decode/jpeg.h"
#include "decode/npy.h"
#include "decode/png.h"
#include "decode/tiff.h"
#include "decode/webp.h"

namespace stoker::detail {

namespace {
std::string describe_magic(const std::uint8_t* data, std::size_t size) {
  static const char* kHex = "0123456789abcdef";
  std::string s;
  for (std::size_t i = 0; i < size && i < 4; ++i) {
    if (i) s += ' ';
    s += kHex[data[i] >> 4];
    s += kHex[data[i] & 15];
  }
  return s;
}
}  // namespace

ImageDecoder::ImageDecoder()
    : jpeg_(std::make_unique<JpegDecoder>()),
      png_(std::make_unique<PngDecoder>()),
      npy_(std::make_unique<NpyDecoder>()),
      webp_(std::make_unique<WebpDecoder>()),
      tiff_(std::make_unique<TiffDecoder>()),
      bmp_(std::make_unique<BmpDecoder>()),
      gif_(std::make_unique<GifDecoder>()) {}
ImageDecoder::~ImageDecoder() = default;

std::uint64_t ImageDecoder::bytes() const { return rgb_.bytes() + png_->bytes() + bmp_->bytes(); }

Status ImageDecoder::open(const std::uint8_t* data, std::size_t size, std::uint64_t max_pixels) {
  width_ = height_ = 0;
  if (size == 0) return Status::Corrupt("empty file (0 bytes)");
  format_ = sniff_format(data, size);
  Status s;
  switch (format_) {
    case Format::kJpeg: s = jpeg_->open(data, size, &width_, &height_); break;
    case Format::kPng: s = png_->open(data, size, &width_, &height_); break;
    case Format::kNpy: s = npy_->open(data, size, max_pixels, &width_, &height_); break;
    case Format::kWebp: s = webp_->open(data, size, max_pixels, &width_, &height_); break;
    case Format::kTiff: s = tiff_->open(data, size, max_pixels, &width_, &height_); break;
    case Format::kBmp: s = bmp_->open(data, size, max_pixels, &width_, &height_); break;
    case Format::kGif: s = gif_->open(data, size, max_pixels, &width_, &height_); break;
    case Format::kUnknown:
    case Format::kOther:
      format_ = Format::kUnknown;
      return Status::Unsupported(std::string("not a ") + decoded_formats_text() +
                                 " image (first bytes: " + describe_magic(data, size) + ")");
  }
  if (!s.ok()) {
    format_ = Format::kUnknown;  // NOTE: decode() then refuses; no half-open decoder is used
    return s;
  }
  std::uint64_t pixels = static_cast<std::uint64_t>(width_) * static_cast<std::uint64_t>(height_);
  if (pixels > max_pixels) {
    jpeg_->close();
    return Status::ResourceExhausted("image of " + std::to_string(width_) + "x" + std::to_string(height_) +
                                     " pixels exceeds max_image_pixels=" + std::to_string(max_pixels));
  }
  return Status::Ok();
}

Status ImageDecoder::decode(const Box& region, ImageBuffer* buf, ImageView* view, int scale_eighths) {
  // NOTE: only the format open() recognised decodes; nothing falls through
  // into another format's decoder.
  switch (format_) {
    case Format::kJpeg: return jpeg_->decode(region, buf, view, scale_eighths);
    case Format::kPng: return png_->decode(region, buf, view);
    case Format::kNpy: return npy_->decode(region, buf, view);
    case Format::kWebp: return webp_->decode(region, buf, view);
    case Format::kTiff: return tiff_->decode(region, buf, view);
    case Format::kBmp: return bmp_->decode(region, buf, view);
    case Format::kGif: return gif_->decode(region, buf, view);
    case Format::kUnknown:
    case Format::kOther: break;
  }
  return Status::Unsupported("decode() without a successful open()");
}

Status ImageDecoder::open_mask(const std::uint8_t* data, std::size_t size, std::uint64_t max_pixels) {
  width_ = height_ = 0;
  if (size == 0) return Status::Corrupt("empty file (0 bytes)");
  format_ = sniff_format(data, size);
  Status s;
  switch (format_) {
    case Format::kPng: s = png_->open(data, size, &width_, &height_); break;
    case Format::kNpy: s = npy_->open_mask(data, size, max_pixels, &width_, &height_); break;
    case Format::kJpeg:
      format_ = Format::kUnknown;
      return Status::Unsupported("mask: a JPEG; masks must be stored losslessly (PNG or .npy): lossy compression "
                                 "changes class indices at edges");
    case Format::kWebp:
    case Format::kTiff:
    case Format::kBmp:
    case Format::kGif: {
      const char* name = format_info(format_).name;
      format_ = Format::kUnknown;
      return Status::Unsupported(std::string("mask: a ") + name +
                                 ", not a PNG or .npy (masks are read as stored from those)");
    }
    case Format::kUnknown:
    case Format::kOther:
      format_ = Format::kUnknown;
      return Status::Unsupported("mask: not a PNG or .npy (first bytes: " + describe_magic(data, size) + ")");
  }
  if (!s.ok()) return s;
  if (static_cast<std::uint64_t>(width_) * static_cast<std::uint64_t>(height_) > max_pixels) {
    return Status::ResourceExhausted("mask of " + std::to_string(width_) + "x" + std::to_string(height_) +
                                     " pixels exceeds max_image_pixels=" + std::to_string(max_pixels));
  }
  return Status::Ok();
}

Status ImageDecoder::decode_mask(MaskBuffer* buf, int rows) {
  switch (format_) {
    case Format::kPng: return png_->decode_mask(buf, rows);
    case Format::kNpy: return npy_->decode_mask(buf, rows);
    default: break;
  }
  return Status::Unsupported("decode_mask() without a successful open_mask()");
}

Status ImageDecoder::open_raster(const std::uint8_t* data, std::size_t size, std::uint64_t max_pixels) {
  channels_ = 3;
  type_ = SampleType::kUint8;
  if (size > 0 && sniff_format(data, size) == Format::kTiff) {
    width_ = height_ = 0;
    format_ = Format::kTiff;
    Status s = tiff_->open(data, size, max_pixels, &width_, &height_, /*stored=*/true);
    if (!s.ok()) {
      format_ = Format::kUnknown;
      return s;
    }
    channels_ = tiff_->channels();
    type_ = tiff_->sample_type();
    return Status::Ok();
  }
  Status s = open(data, size, max_pixels);
  if (!s.ok()) return s;
  if (format_ == Format::kPng) png_->stored_layout(&channels_, &type_);
  if (format_ == Format::kJpeg && jpeg_->components() == 1) channels_ = 1;
  return Status::Ok();
}

Status ImageDecoder::decode_raster(const Box& region, RasterBuffer* buf) {
  if (format_ == Format::kTiff) return tiff_->decode_raster(region, buf);
  if (format_ == Format::kPng) {
    Status s = png_->decode_raster(region, buf);
    if (s.ok() && (buf->channels != channels_ || buf->type != type_)) {
      return Status::Corrupt("PNG: the pixels do not match the header's colour type and bit depth");
    }
    return s;
  }
  ImageView view;
  Status s = decode(region, &rgb_, &view);
  if (!s.ok()) return s;
  // NOTE: a gray JPEG decoded to RGB replicates its one channel: R is it.
  buf->reset(view.width, view.height, channels_, SampleType::kUint8);
  for (int k = 0; k < channels_; ++k) {
    std::uint8_t* out = buf->plane(k);
    for (int y = 0; y < view.height; ++y) {
      const std::uint8_t* in = view.row(y) + k;
      for (int x = 0; x < view.width; ++x) *out++ = in[3 * x];
    }
  }
  return Status::Ok();
}

}  // namespace stoker::detail
