#include "decode/jpeg_transcode.h"

#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <jpeglib.h>

#include "decode/jpeg_restart.h"
#include "decode/libjpeg_error.h"

namespace stoker::detail {

struct JpegTranscoder::State {
  jpeg_compress_struct cinfo;
  jpeg_decompress_struct dinfo;
  LibjpegError err;  // shared: one thread drives both
};

JpegTranscoder::JpegTranscoder() : s_(std::make_unique<State>()) {
  std::memset(&s_->cinfo, 0, sizeof(s_->cinfo));
  std::memset(&s_->dinfo, 0, sizeof(s_->dinfo));
  s_->cinfo.err = install_libjpeg_error(&s_->err);
  s_->dinfo.err = s_->cinfo.err;
  jpeg_create_compress(&s_->cinfo);
  jpeg_create_decompress(&s_->dinfo);
}

JpegTranscoder::~JpegTranscoder() {
  jpeg_destroy_decompress(&s_->dinfo);
  jpeg_destroy_compress(&s_->cinfo);
}

namespace {

// Only trivially destructible locals: libjpeg errors longjmp out.
bool transcode(jpeg_decompress_struct* d, jpeg_compress_struct* c, LibjpegError* err, const std::uint8_t* data,
               std::size_t size, bool optimize, unsigned char** out, unsigned long* out_size) {
  if (setjmp(err->jump)) return false;
  jpeg_mem_src(d, data, static_cast<unsigned long>(size));
  jpeg_read_header(d, TRUE);
  jvirt_barray_ptr* coefficients = jpeg_read_coefficients(d);
  jpeg_mem_dest(c, out, out_size);
  jpeg_copy_critical_parameters(d, c);
  const int mcu_w = d->num_components == 1 ? 8 : 8 * d->max_h_samp_factor;
  c->restart_interval = static_cast<unsigned>(restart_interval_for(static_cast<int>(d->image_width), mcu_w));
  c->optimize_coding = optimize ? TRUE : FALSE;  // FALSE: the standard tables, which code every symbol
  jpeg_write_coefficients(c, coefficients);
  jpeg_finish_compress(c);
  jpeg_finish_decompress(d);
  return true;
}

}  // namespace

Status JpegTranscoder::to_restart_grid(const std::uint8_t* data, std::size_t size, std::vector<std::uint8_t>* out,
                                       bool optimize) {
  unsigned char* mem = nullptr;
  unsigned long mem_size = 0;
  s_->err.data_warning = 0;
  bool ok = transcode(&s_->dinfo, &s_->cinfo, &s_->err, data, size, optimize, &mem, &mem_size);
  if (ok && s_->err.data_warning) {  // truncated or damaged data, filled in by libjpeg: not the image
    std::free(mem);
    return Status::Corrupt(std::string("JPEG data: ") + s_->err.warning);
  }
  if (ok) out->assign(mem, mem + mem_size);
  std::free(mem);
  if (!ok) {
    jpeg_abort_compress(&s_->cinfo);
    jpeg_abort_decompress(&s_->dinfo);
    return Status::Corrupt(std::string("JPEG transcode: ") + s_->err.message);
  }
  return Status::Ok();
}

bool jpeg_needs_restart_grid(const std::uint8_t* data, std::size_t size) {
  if (size < 3 || data[0] != 0xFF || data[1] != 0xD8 || data[2] != 0xFF) return false;
  RestartLayout layout;
  return !parse_restart_layout(data, size, &layout);
}

}  // namespace stoker::detail
