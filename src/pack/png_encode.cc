#include "pack/png_encode.h"

#include <png.h>

#include <csetjmp>
#include <string>

namespace stoker::detail {
namespace {

struct Sink {
  std::vector<std::uint8_t>* out;
  std::string error;
};

void write_bytes(png_structp png, png_bytep data, png_size_t n) {
  auto* sink = static_cast<Sink*>(png_get_io_ptr(png));
  sink->out->insert(sink->out->end(), data, data + n);
}
void flush_nothing(png_structp) {}
void on_error(png_structp png, png_const_charp msg) {
  static_cast<Sink*>(png_get_error_ptr(png))->error = msg;
  png_longjmp(png, 1);
}
void on_warning(png_structp, png_const_charp) {}

// The whole write, between setjmp and libpng's longjmp on an error: only
// trivially destructible locals here.
bool write_png(png_structp png, png_infop info, Sink* sink, const MaskView& mask) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_write_fn(png, sink, write_bytes, flush_nothing);
  const int depth = mask.bytes_per_pixel == 2 ? 16 : 8;
  png_set_IHDR(png, info, static_cast<png_uint_32>(mask.width), static_cast<png_uint_32>(mask.height), depth,
               PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_set_compression_level(png, 6);
  png_write_info(png, info);
  if (depth == 16) png_set_swap(png);  // NOTE: host order (little-endian) in, PNG's big-endian out, as png.cc reads
  for (int y = 0; y < mask.height; ++y) png_write_row(png, mask.row(y));
  png_write_end(png, nullptr);
  return true;
}

}  // namespace

Status encode_png_mask(const MaskView& mask, std::vector<std::uint8_t>* out) {
  out->clear();
  Sink sink{out, {}};
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &sink, on_error, on_warning);
  if (!png) return Status::ResourceExhausted("png: cannot create the writer");
  png_infop info = png_create_info_struct(png);
  if (!info) {
    png_destroy_write_struct(&png, nullptr);
    return Status::ResourceExhausted("png: cannot create the info struct");
  }
  const bool ok = write_png(png, info, &sink, mask);
  png_destroy_write_struct(&png, &info);
  if (!ok) return Status::Internal("png: " + sink.error);
  return Status::Ok();
}

}  // namespace stoker::detail
