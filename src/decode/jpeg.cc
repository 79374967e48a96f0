#include "decode/jpeg.h"

#include "decode/jpeg_restart.h"
#include "decode/libjpeg_error.h"

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <string>

// clang-format off
#include <jpeglib.h>
#include <jerror.h>
// clang-format on

namespace stoker::detail {
namespace {

// Every libjpeg message: none is printed (libjpeg's default writes to
// stderr); the warnings that mean missing data are kept, and the decoder and
// the transcoder fail the image on them.
void on_message(j_common_ptr cinfo, int level) {
  if (level != -1) return;  // trace messages
  auto* err = reinterpret_cast<LibjpegError*>(cinfo->err);
  int code = cinfo->err->msg_code;
  // NOTE: these warnings mean libjpeg filled missing data with gray; PIL
  // raises "image file is truncated" for the same files. Other warnings
  // (e.g. extraneous bytes before a marker) leave the pixels intact.
  if ((code == JWRN_JPEG_EOF || code == JWRN_HIT_MARKER || code == JWRN_MUST_RESYNC) && !err->data_warning) {
    err->data_warning = code;
    cinfo->err->format_message(cinfo, err->warning);
  }
}

// PIL's cmyk2rgb on PIL's CMYK values (Adobe-inverted storage, "CMYK;I").
inline std::uint8_t cmyk_channel(int c_stored, int k_stored) {
  int c = 255 - c_stored, nk = k_stored;  // nk = 255 - k with k = 255 - k_stored
  int tmp = c * nk + 128;
  int m = ((tmp >> 8) + tmp) >> 8;
  int v = nk - m;
  return static_cast<std::uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v));
}

}  // namespace

jpeg_error_mgr* install_libjpeg_error(LibjpegError* err) {
  jpeg_error_mgr* pub = jpeg_std_error(&err->pub);
  err->pub.error_exit = [](j_common_ptr cinfo) {
    auto* e = reinterpret_cast<LibjpegError*>(cinfo->err);
    cinfo->err->format_message(cinfo, e->message);
    std::longjmp(e->jump, 1);
  };
  err->pub.emit_message = on_message;
  err->data_warning = 0;
  return pub;
}

struct JpegDecoder::State {
  jpeg_decompress_struct cinfo;
  LibjpegError err;
  bool open = false;
  const std::uint8_t* data = nullptr;
  std::size_t size = 0;
  std::vector<std::uint8_t> cmyk_row;
  std::vector<JSAMPROW> rows;
  bool restart = false;  // written with restart markers on a grid: random access
  RestartLayout layout;
  std::vector<std::uint8_t> cut;  // the segments a region needs, as a JPEG of their own
};

JpegDecoder::JpegDecoder() : s_(std::make_unique<State>()) {
  std::memset(&s_->cinfo, 0, sizeof(s_->cinfo));
  std::memset(&s_->err, 0, sizeof(s_->err));
  s_->cinfo.err = install_libjpeg_error(&s_->err);
  jpeg_create_decompress(&s_->cinfo);
}

JpegDecoder::~JpegDecoder() { jpeg_destroy_decompress(&s_->cinfo); }

void JpegDecoder::close() {
  if (s_->open) jpeg_abort_decompress(&s_->cinfo);
  s_->open = false;
}

namespace {

// Returns false after a libjpeg error (message in err->message). Only
// trivially destructible locals live here: libjpeg errors longjmp out.
bool read_header(jpeg_decompress_struct* cinfo, LibjpegError* err, const std::uint8_t* data, std::size_t size) {
  if (setjmp(err->jump)) return false;
  jpeg_mem_src(cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(cinfo, TRUE);
  return true;
}

bool read_region(jpeg_decompress_struct* cinfo, LibjpegError* err, const Box* r, int scale_eighths, ImageBuffer* buf,
                 std::vector<std::uint8_t>* cmyk_row, std::vector<JSAMPROW>* row_ptrs, int* x_shift) {
  if (setjmp(err->jump)) return false;
  cinfo->scale_num = static_cast<unsigned>(scale_eighths);
  cinfo->scale_denom = 8;
  const bool cmyk = cinfo->jpeg_color_space == JCS_CMYK || cinfo->jpeg_color_space == JCS_YCCK;
  cinfo->out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  cinfo->dct_method = JDCT_ISLOW;  // PIL's default; exact
  jpeg_start_decompress(cinfo);
  int x0 = r->x, x1 = r->x + r->width;
  if (cinfo->max_h_samp_factor > 1) {
    // NOTE: fancy upsampling reads the neighbouring chroma sample on each
    // side, and treats the edge of a column crop as the image edge (it
    // repeats the outermost sample), which changes the outermost column of
    // the cropped range. One more column on each side keeps every pixel of
    // the region identical to a full decode. And the range stays at least 6
    // columns wide: libjpeg-turbo switches to plain (replicating) upsampling
    // for a crop whose chroma is under 2 samples wide.
    const int W = static_cast<int>(cinfo->output_width);
    x0 = std::max(0, x0 - 1);
    x1 = std::min(W, x1 + 1);
    if (x1 - x0 < 6) {
      x1 = std::min(W, x0 + 6);
      x0 = std::max(0, x1 - 6);
    }
  }
  JDIMENSION xoff = static_cast<JDIMENSION>(x0), w = static_cast<JDIMENSION>(x1 - x0);
  if (xoff > 0 || w < cinfo->output_width) {
    // Widens to iMCU boundaries: xoff moves left, w grows.
    jpeg_crop_scanline(cinfo, &xoff, &w);
  }
  *x_shift = r->x - static_cast<int>(xoff);
  const int out_w = static_cast<int>(cinfo->output_width);
  buf->reset(out_w, r->height);
  if (r->y > 0) jpeg_skip_scanlines(cinfo, static_cast<JDIMENSION>(r->y));
  if (!cmyk) {
    // Every remaining row at once: libjpeg returns up to a row group (one
    // or two iMCU rows of output) per call, without a call per row.
    std::vector<JSAMPROW>& rows = *row_ptrs;
    rows.resize(static_cast<std::size_t>(r->height));
    for (int y = 0; y < r->height; ++y) rows[static_cast<std::size_t>(y)] = buf->row(y);
    for (int y = 0; y < r->height;) {
      const JDIMENSION got = jpeg_read_scanlines(cinfo, rows.data() + y, static_cast<JDIMENSION>(r->height - y));
      if (got == 0) ERREXIT(cinfo, JERR_INPUT_EOF);
      y += static_cast<int>(got);
    }
    return true;
  }
  if (cmyk_row->size() < static_cast<std::size_t>(out_w) * 4) cmyk_row->resize(static_cast<std::size_t>(out_w) * 4);
  for (int y = 0; y < r->height; ++y) {  // CMYK: a row at a time through PIL's conversion
    JSAMPROW row = cmyk_row->data();
    if (jpeg_read_scanlines(cinfo, &row, 1) != 1) {
      ERREXIT(cinfo, JERR_INPUT_EOF);
    }
    std::uint8_t* out = buf->row(y);
    const std::uint8_t* in = cmyk_row->data();
    for (int x = 0; x < out_w; ++x, in += 4, out += 3) {
      out[0] = cmyk_channel(in[0], in[3]);
      out[1] = cmyk_channel(in[1], in[3]);
      out[2] = cmyk_channel(in[2], in[3]);
    }
  }
  return true;
}

bool has_end_marker(const std::uint8_t* data, std::size_t size) {
  // NOTE: in entropy-coded data 0xFF is always followed by 0x00 or RSTn, so
  // FF D9 near the end is the end-of-image marker. A file cut anywhere in its
  // scans lacks it, even when the rows a crop needs were all present.
  std::size_t from = size > 4096 ? size - 4096 : 0;
  for (std::size_t i = size; i-- > from + 1;) {
    if (data[i] == 0xD9 && data[i - 1] == 0xFF) return true;
  }
  return false;
}

}  // namespace

Status JpegDecoder::open(const std::uint8_t* data, std::size_t size, int* width, int* height) {
  close();
  s_->err.data_warning = 0;
  s_->data = data;
  s_->size = size;
  if (!read_header(&s_->cinfo, &s_->err, data, size)) {
    jpeg_abort_decompress(&s_->cinfo);
    if (s_->err.data_warning == JWRN_JPEG_EOF) {
      return Status::Corrupt("JPEG truncated in its header (" + std::to_string(size) + " bytes): " + s_->err.message);
    }
    return Status::Corrupt(std::string("JPEG header: ") + s_->err.message);
  }
  s_->open = true;
  if (!has_end_marker(data, size)) {
    close();
    return Status::Corrupt("JPEG truncated: no end-of-image marker in " + std::to_string(size) + " bytes");
  }
  *width = static_cast<int>(s_->cinfo.image_width);
  *height = static_cast<int>(s_->cinfo.image_height);
  s_->restart = s_->cinfo.restart_interval > 0 && parse_restart_layout(data, size, &s_->layout);
  if (s_->cinfo.num_components != 1 && s_->cinfo.num_components != 3 && s_->cinfo.num_components != 4) {
    int n = s_->cinfo.num_components;
    close();
    return Status::Unsupported("JPEG with " + std::to_string(n) + " components");
  }
  return Status::Ok();
}

int JpegDecoder::components() const { return s_->cinfo.num_components; }

Status JpegDecoder::decode(const Box& region, ImageBuffer* buf, ImageView* view, int scale_eighths) {
  Box r = region;
  if (s_->restart && scale_eighths == 8) {
    // Chroma upsampling reads one sample beyond the region on each side:
    // the cut keeps a pixel of margin so that its edges (treated as image
    // edges) stay outside the region.
    const bool sub = s_->cinfo.max_h_samp_factor > 1 || s_->cinfo.max_v_samp_factor > 1;
    const int m = sub ? 1 : 0;
    const bool whole_rows = r.y - m <= 0 && r.x - m <= 0 && r.x + r.width + m >= s_->layout.width;
    int ox = 0, oy = 0;
    if (!whole_rows && cut_restart_segments(s_->data, s_->size, s_->layout, r.x - m, r.y - m, r.x + r.width + m,
                                            r.y + r.height + m, &s_->cut, &ox, &oy)) {
      jpeg_abort_decompress(&s_->cinfo);
      if (read_header(&s_->cinfo, &s_->err, s_->cut.data(), s_->cut.size())) {
        r.x -= ox;
        r.y -= oy;
      } else {  // not expected: decode the original
        jpeg_abort_decompress(&s_->cinfo);
        if (!read_header(&s_->cinfo, &s_->err, s_->data, s_->size)) {
          close();
          return Status::Corrupt(std::string("JPEG header: ") + s_->err.message);
        }
      }
    }
  }
  int shift = 0;
  bool ok = read_region(&s_->cinfo, &s_->err, &r, scale_eighths, buf, &s_->cmyk_row, &s_->rows, &shift);
  int warning = s_->err.data_warning;
  close();
  if (!ok) return Status::Corrupt(std::string("JPEG data: ") + s_->err.message);
  if (warning) return Status::Corrupt(std::string("JPEG data: ") + s_->err.warning);
  *view = ImageView{buf->pixels.data() + shift * 3, r.width, r.height, buf->stride};
  return Status::Ok();
}

}  // namespace stoker::detail
