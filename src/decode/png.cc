#include "decode/png.h"

#include <png.h>

#include <csetjmp>
#include <cstring>
#include <string>

namespace stoker::detail {
namespace {

struct MemoryReader {
  const std::uint8_t* data;
  std::size_t size;
  std::size_t pos;
};

void read_from_memory(png_structp png, png_bytep out, png_size_t n) {
  auto* r = static_cast<MemoryReader*>(png_get_io_ptr(png));
  if (n > r->size - r->pos) png_error(png, "truncated: read past the end of the data");
  std::memcpy(out, r->data + r->pos, n);
  r->pos += n;
}

struct ErrorSink {
  char message[256];
};

void on_error(png_structp png, png_const_charp msg) {
  auto* e = static_cast<ErrorSink*>(png_get_error_ptr(png));
  std::snprintf(e->message, sizeof(e->message), "%s", msg);
  png_longjmp(png, 1);
}
void on_warning(png_structp, png_const_charp) {}

std::uint32_t be32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | p[3];
}

// As PIL's open + convert("RGB"): palette indices through PIL's palette
// (entries past the file's PLTE are PIL's gray ramp; tRNS ignored), gray
// replicated, alpha dropped (not composited), 16-bit colour to its high byte,
// 16-bit gray (PIL's mode "I") clipped at 255. Palette and 16-bit gray images
// are read whole into `scratch` (as stored, one index or one host-order
// uint16 per pixel) and converted from there; the rest through libpng's
// transforms straight into `buf`. Only trivially destructible locals:
// libpng errors longjmp out.
bool decode_rgb(png_structp png, png_infop info, MemoryReader* reader, ImageBuffer* buf,
                std::vector<std::uint8_t*>* rows, std::vector<std::uint8_t>* scratch, PilPalette* palette) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_read_fn(png, reader, read_from_memory);
  png_read_info(png, info);
  const int color = png_get_color_type(png, info);
  const int depth = png_get_bit_depth(png, info);
  const bool indexed = color == PNG_COLOR_TYPE_PALETTE;
  const bool gray16 = color == PNG_COLOR_TYPE_GRAY && depth == 16;
  if (indexed) {
    palette->reset();
    png_colorp entries = nullptr;
    int n = 0;
    if (png_get_PLTE(png, info, &entries, &n) && entries) {
      for (int i = 0; i < n && i < 256; ++i) palette->set(i, entries[i].red, entries[i].green, entries[i].blue);
    }
    if (depth < 8) png_set_packing(png);
  } else if (gray16) {
    png_set_swap(png);  // NOTE: PNG stores big-endian; read as host-order uint16
  } else {
    if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
    if (depth == 16) png_set_strip_16(png);
    if (color & PNG_COLOR_MASK_ALPHA) png_set_strip_alpha(png);
    if (color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png);
  }
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  const std::size_t w = static_cast<std::size_t>(buf->width);
  const std::size_t bpp = indexed ? 1 : gray16 ? 2 : 3;
  if (png_get_rowbytes(png, info) != w * bpp) png_error(png, "unexpected row size after conversion to RGB");
  rows->resize(static_cast<std::size_t>(buf->height));
  if (bpp == 3) {
    for (int y = 0; y < buf->height; ++y) (*rows)[static_cast<std::size_t>(y)] = buf->row(y);
    png_read_image(png, rows->data());
    png_read_end(png, nullptr);
    return true;
  }
  if (scratch->size() < w * bpp * static_cast<std::size_t>(buf->height)) {
    scratch->resize(w * bpp * static_cast<std::size_t>(buf->height));
  }
  for (int y = 0; y < buf->height; ++y) (*rows)[static_cast<std::size_t>(y)] = scratch->data() + w * bpp * y;
  png_read_image(png, rows->data());
  png_read_end(png, nullptr);
  for (int y = 0; y < buf->height; ++y) {
    const std::uint8_t* in = (*rows)[static_cast<std::size_t>(y)];
    std::uint8_t* out = buf->row(y);
    for (std::size_t x = 0; x < w; ++x, out += 3) {
      if (indexed) {
        std::memcpy(out, (*palette)[in[x]], 3);
      } else {
        std::uint16_t v;
        std::memcpy(&v, in + 2 * x, 2);
        out[0] = out[1] = out[2] = pil_clip16(v);
      }
    }
  }
  return true;
}

// As PIL's open() keeps a mask: palette indices unpacked to a byte each (not
// expanded to colours), gray kept (below 8 bits scaled to 8, as PIL's "L"),
// 16-bit gray in host byte order. Only trivially destructible locals.
bool decode_mask_rows(png_structp png, png_infop info, MemoryReader* reader, MaskBuffer* buf,
                      std::vector<std::uint8_t*>* rows, int* bad_color, int wanted) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_read_fn(png, reader, read_from_memory);
  png_read_info(png, info);
  const int color = png_get_color_type(png, info);
  const int depth = png_get_bit_depth(png, info);
  if (color != PNG_COLOR_TYPE_GRAY && color != PNG_COLOR_TYPE_PALETTE) {
    *bad_color = color;
    return true;
  }
  if (color == PNG_COLOR_TYPE_PALETTE && depth < 8) png_set_packing(png);
  if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (depth == 16) png_set_swap(png);  // NOTE: PNG stores big-endian; the batch holds host order (little-endian)
  const int passes = png_set_interlace_handling(png);
  png_read_update_info(png, info);
  const int bpp = depth == 16 ? 2 : 1;
  buf->reset(static_cast<int>(png_get_image_width(png, info)), static_cast<int>(png_get_image_height(png, info)), bpp);
  if (png_get_rowbytes(png, info) != static_cast<png_size_t>(buf->stride)) png_error(png, "unexpected mask row size");
  if (passes == 1 && wanted >= 0 && wanted < buf->height) {
    // NOTE: rows come in order; the rest of the stream is never inflated
    // (nor checked: its corruption is no concern of this crop).
    for (int y = 0; y < wanted; ++y) png_read_row(png, buf->row(y), nullptr);
    return true;
  }
  rows->resize(static_cast<std::size_t>(buf->height));
  for (int y = 0; y < buf->height; ++y) (*rows)[static_cast<std::size_t>(y)] = buf->row(y);
  png_read_image(png, rows->data());
  png_read_end(png, nullptr);
  return true;
}

// As stored, interleaved into `scratch` (rows of width x channels samples):
// gray (1, 2, 4 bits scaled to 8 as PIL's "L"), gray+alpha, RGB, RGBA, 8 or
// 16 bits (host order); a palette expanded to its colours (RGB, or RGBA with
// a tRNS chunk; a gray or RGB image's tRNS is not expanded). Only trivially
// destructible locals.
bool decode_stored_rows(png_structp png, png_infop info, MemoryReader* reader, std::vector<std::uint8_t>* scratch,
                        std::vector<std::uint8_t*>* rows, int* channels, int* depth) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_read_fn(png, reader, read_from_memory);
  png_read_info(png, info);
  const int color = png_get_color_type(png, info);
  const int bits = png_get_bit_depth(png, info);
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color == PNG_COLOR_TYPE_GRAY && bits < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (bits == 16) png_set_swap(png);  // NOTE: PNG stores big-endian; read as host-order uint16
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  *channels = png_get_channels(png, info);
  *depth = png_get_bit_depth(png, info);
  const std::size_t stride = png_get_rowbytes(png, info);
  const std::size_t h = png_get_image_height(png, info);
  const std::size_t w = png_get_image_width(png, info);
  if (stride != w * static_cast<std::size_t>(*channels) * static_cast<std::size_t>(*depth / 8)) {
    png_error(png, "unexpected row size");
  }
  scratch->resize(stride * h);
  rows->resize(h);
  for (std::size_t y = 0; y < h; ++y) (*rows)[y] = scratch->data() + y * stride;
  png_read_image(png, rows->data());
  png_read_end(png, nullptr);
  return true;
}

const char* color_name(int color) {
  switch (color) {
    case PNG_COLOR_TYPE_RGB: return "RGB";
    case PNG_COLOR_TYPE_RGB_ALPHA: return "RGBA";
    case PNG_COLOR_TYPE_GRAY_ALPHA: return "gray+alpha";
    default: return "?";
  }
}

}  // namespace

Status PngDecoder::open(const std::uint8_t* data, std::size_t size, int* width, int* height) {
  data_ = data;
  size_ = size;
  if (size < 33 || std::memcmp(data + 12, "IHDR", 4) != 0) return Status::Corrupt("PNG: no IHDR chunk");
  std::uint32_t w = be32(data + 16), h = be32(data + 20);
  if (w == 0 || h == 0 || w > 0x7fffffffu || h > 0x7fffffffu) {
    return Status::Corrupt("PNG: invalid size " + std::to_string(w) + "x" + std::to_string(h));
  }
  *width = width_ = static_cast<int>(w);
  *height = height_ = static_cast<int>(h);
  return Status::Ok();
}

// Runs `read(png, info, &reader)` (one of the decode_* functions above) on
// a fresh libpng reader of the data opened last; libpng's errors, which
// longjmp out of it, become kCorrupt with libpng's message.
template <typename Read>
Status PngDecoder::with_reader(Read&& read) {
  ErrorSink sink{};
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &sink, on_error, on_warning);
  if (!png) return Status::ResourceExhausted("PNG: cannot create decoder");
  png_infop info = png_create_info_struct(png);
  if (!info) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    return Status::ResourceExhausted("PNG: cannot create decoder");
  }
  png_set_user_limits(png, 0x7fffffff, 0x7fffffff);
  MemoryReader reader{data_, size_, 0};
  const bool ok = read(png, info, &reader);
  png_destroy_read_struct(&png, &info, nullptr);
  if (!ok) return Status::Corrupt(std::string("PNG: ") + sink.message);
  return Status::Ok();
}

Status PngDecoder::decode(const Box& region, ImageBuffer* buf, ImageView* view) {
  buf->reset(width_, height_);
  Status st = with_reader([&](png_structp png, png_infop info, MemoryReader* reader) {
    return decode_rgb(png, info, reader, buf, &rows_, &scratch_, &palette_);
  });
  if (!st.ok()) return st;
  *view = ImageView{buf->pixels.data() + region.y * buf->stride + region.x * 3, region.width, region.height,
                    buf->stride};
  return Status::Ok();
}

Status PngDecoder::decode_mask(MaskBuffer* buf, int rows) {
  int bad_color = -1;
  Status st = with_reader([&](png_structp png, png_infop info, MemoryReader* reader) {
    return decode_mask_rows(png, info, reader, buf, &rows_, &bad_color, rows);
  });
  if (!st.ok()) return st;
  if (bad_color >= 0) {
    return Status::Unsupported(std::string("mask: a ") + color_name(bad_color) +
                               " PNG; a mask is single-channel: gray (8 or 16-bit) or palette indices");
  }
  return Status::Ok();
}

void PngDecoder::stored_layout(int* channels, SampleType* type) const {
  // IHDR (checked by open()): bit depth at byte 24, colour type at 25.
  const int depth = data_[24], color = data_[25];
  *channels = color == 0 ? 1 : color == 4 ? 2 : color == 6 ? 4 : 3;  // gray, gray+alpha, RGBA; RGB and palette: 3
  *type = depth == 16 ? SampleType::kUint16 : SampleType::kUint8;
  if (color != 3) return;
  // NOTE: libpng expands a palette's tRNS to alpha with its colours
  // (png_set_palette_to_rgb), so a palette with transparency is RGBA, as
  // PIL's convert("RGBA"). The chunks before the first IDAT say.
  for (std::size_t at = 8; at + 8 <= size_;) {
    const std::uint32_t n = be32(data_ + at);
    if (std::memcmp(data_ + at + 4, "IDAT", 4) == 0) break;
    if (std::memcmp(data_ + at + 4, "tRNS", 4) == 0) *channels = 4;
    if (n > size_ - at - 8) break;
    at += 8 + std::size_t{n} + 4;
  }
}

Status PngDecoder::decode_raster(const Box& r, RasterBuffer* buf) {
  int channels = 0, depth = 0;
  Status st = with_reader([&](png_structp png, png_infop info, MemoryReader* reader) {
    return decode_stored_rows(png, info, reader, &scratch_, &rows_, &channels, &depth);
  });
  if (!st.ok()) return st;
  const std::size_t bytes = depth == 16 ? 2 : 1;
  buf->reset(r.width, r.height, channels, depth == 16 ? SampleType::kUint16 : SampleType::kUint8);
  const std::size_t stride = static_cast<std::size_t>(width_) * static_cast<std::size_t>(channels) * bytes;
  for (int k = 0; k < channels; ++k) {
    std::uint8_t* out = buf->plane(k);
    for (int y = 0; y < r.height; ++y) {
      const std::uint8_t* in = scratch_.data() + static_cast<std::size_t>(r.y + y) * stride +
                               (static_cast<std::size_t>(r.x) * static_cast<std::size_t>(channels) + static_cast<std::size_t>(k)) * bytes;
      for (int x = 0; x < r.width; ++x, in += static_cast<std::size_t>(channels) * bytes, out += bytes) std::memcpy(out, in, bytes);
    }
  }
  return Status::Ok();
}

}  // namespace stoker::detail
