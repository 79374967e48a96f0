#include "pack/jpeg_encode.h"

#include "decode/jpeg_restart.h"
#include "decode/libjpeg_error.h"

#include <csetjmp>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <jpeglib.h>

namespace stoker::detail {
namespace {

bool compress(jpeg_compress_struct* c, LibjpegError* err, const ImageView* img, int quality, int subsampling,
              bool restart_markers, unsigned char** out, unsigned long* size) {
  if (setjmp(err->jump)) return false;
  jpeg_mem_dest(c, out, size);
  c->image_width = static_cast<JDIMENSION>(img->width);
  c->image_height = static_cast<JDIMENSION>(img->height);
  c->input_components = 3;
  c->in_color_space = JCS_RGB;
  jpeg_set_defaults(c);
  jpeg_set_quality(c, quality, TRUE);
  c->comp_info[0].h_samp_factor = subsampling == 420 ? 2 : 1;
  c->comp_info[0].v_samp_factor = subsampling == 420 ? 2 : 1;
  c->optimize_coding = TRUE;
  // Restart markers on a grid that divides each MCU row (segments at most
  // 64 px wide): the loader decodes a crop from the segments that cover it
  // (decode/jpeg_restart.h), for ~2-4% more bytes.
  c->restart_interval =
      restart_markers ? static_cast<unsigned>(restart_interval_for(img->width, subsampling == 420 ? 16 : 8)) : 0;
  jpeg_start_compress(c, TRUE);
  while (c->next_scanline < c->image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(img->row(static_cast<int>(c->next_scanline)));
    jpeg_write_scanlines(c, &row, 1);
  }
  jpeg_finish_compress(c);
  return true;
}

}  // namespace

struct JpegEncoder::State {
  jpeg_compress_struct cinfo;
  LibjpegError err;
};

JpegEncoder::JpegEncoder() : s_(std::make_unique<State>()) {
  std::memset(&s_->cinfo, 0, sizeof(s_->cinfo));
  s_->cinfo.err = install_libjpeg_error(&s_->err);
  jpeg_create_compress(&s_->cinfo);
}

JpegEncoder::~JpegEncoder() {
  jpeg_destroy_compress(&s_->cinfo);
}

Status JpegEncoder::encode(const ImageView& image, int quality, int subsampling, bool restart_markers,
                          std::vector<std::uint8_t>* out) {
  unsigned char* mem = nullptr;
  unsigned long size = 0;
  bool ok = compress(&s_->cinfo, &s_->err, &image, quality, subsampling, restart_markers, &mem, &size);
  if (ok) out->assign(mem, mem + size);
  std::free(mem);
  if (!ok) {
    jpeg_abort_compress(&s_->cinfo);
    return Status::IOError(std::string("JPEG encode: ") + s_->err.message);
  }
  return Status::Ok();
}

void encode_npy(const ImageView& image, std::vector<std::uint8_t>* out) {
  std::string dict = "{'descr': '|u1', 'fortran_order': False, 'shape': (" + std::to_string(image.height) + ", " +
                     std::to_string(image.width) + ", 3), }";
  // Header padded with spaces so the data starts at a multiple of 64 (NumPy's rule).
  std::size_t total = 10 + dict.size() + 1;
  std::size_t pad = (64 - total % 64) % 64;
  dict.append(pad, ' ');
  dict += '\n';
  const std::size_t row = static_cast<std::size_t>(image.width) * 3;
  const std::size_t head = 10 + dict.size();
  out->resize(head + row * static_cast<std::size_t>(image.height));
  std::uint8_t* o = out->data();
  std::memcpy(o, "\x93NUMPY\x01\x00", 8);
  o[8] = static_cast<std::uint8_t>(dict.size() & 0xff);
  o[9] = static_cast<std::uint8_t>(dict.size() >> 8);
  std::memcpy(o + 10, dict.data(), dict.size());
  for (int y = 0; y < image.height; ++y) std::memcpy(o + head + row * static_cast<std::size_t>(y), image.row(y), row);
}

}  // namespace stoker::detail
