// The benchmarks' plain libjpeg-turbo decode to RGB (its libjpeg API,
// default settings: ISLOW IDCT, fancy upsampling; every row pointer at once,
// as TurboJPEG's tjDecompress2 does). No stoker code: it is the baseline
// stoker is measured against (bench/decode_ceiling) and the unit of
// bench/jpeg_restart_insert_bench.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <vector>

#include <csetjmp>

#include <jpeglib.h>

namespace bench {

struct LibjpegError {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
};
[[noreturn]] inline void libjpeg_error_exit(j_common_ptr c) {
  std::longjmp(reinterpret_cast<LibjpegError*>(c->err)->jump, 1);
}

// Decodes `data` whole into *pixels (RGB8, rows packed); *rows: the row
// pointers' storage, reused across calls. False when libjpeg fails (the
// decompressor is then aborted, ready for the next image). Only trivially
// destructible locals: libjpeg errors longjmp out.
inline bool decode_rgb(jpeg_decompress_struct* cinfo, LibjpegError* err, const std::uint8_t* data, std::size_t size,
                       std::vector<std::uint8_t>* pixels, std::vector<JSAMPROW>* rows) {
  if (setjmp(err->jump)) {
    jpeg_abort_decompress(cinfo);
    return false;
  }
  jpeg_mem_src(cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(cinfo, TRUE);
  cinfo->out_color_space = JCS_RGB;
  jpeg_start_decompress(cinfo);
  const std::size_t stride = static_cast<std::size_t>(cinfo->output_width) * 3;
  pixels->resize(stride * cinfo->output_height);
  rows->resize(cinfo->output_height);
  for (JDIMENSION y = 0; y < cinfo->output_height; ++y) (*rows)[y] = pixels->data() + stride * y;
  while (cinfo->output_scanline < cinfo->output_height) {
    jpeg_read_scanlines(cinfo, rows->data() + cinfo->output_scanline, cinfo->output_height - cinfo->output_scanline);
  }
  jpeg_finish_decompress(cinfo);
  return true;
}

}  // namespace bench
