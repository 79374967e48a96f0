// libFuzzer: the restart-marker inserter, differential against libjpeg-turbo.
// When the inserter rewrites an input, libjpeg must read the input without a
// warning about its data, and read the same coefficients and the same pixels
// (and give the same warnings, from the headers) from both; the
// output must be on the restart grid, and a rectangle cut from it must
// decode. Inputs libjpeg reads cleanly as single-scan baseline JPEGs but the
// inserter refuses are counted (printed at exit), not findings: it refuses
// some valid files (a DC value beyond 8-bit range, a table left to
// libjpeg's defaults, ...).
#include <csetjmp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

// clang-format off
#include <jpeglib.h>
#include <jerror.h>
// clang-format on

#include "decode/jpeg_restart.h"
#include "decode/jpeg_restart_insert.h"

namespace {

struct Error {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
  std::vector<int>* warnings;
};

// The warnings about the entropy-coded data (others, such as an unknown
// JFIF version, come from headers the output keeps as they are).
bool data_warning(int code) {
  return code == JWRN_HIT_MARKER || code == JWRN_JPEG_EOF || code == JWRN_MUST_RESYNC || code == JWRN_HUFF_BAD_CODE ||
         code == JWRN_EXTRANEOUS_DATA || code == JWRN_NOT_SEQUENTIAL;
}

struct Read {
  bool ok = false;
  bool too_big = false;       // over the pixel cap: not read
  std::vector<int> warnings;  // libjpeg's warning codes, in order
  bool baseline_single_scan = false;
  int width = 0, height = 0, components = 0;
  std::vector<JCOEF> coefficients;
  std::vector<std::uint8_t> pixels;
};

// Only trivially destructible locals: libjpeg errors longjmp out.
bool read_coefficients(jpeg_decompress_struct* c, Error* err, const std::uint8_t* data, std::size_t size, Read* r) {
  if (setjmp(err->jump)) return false;
  jpeg_mem_src(c, data, static_cast<unsigned long>(size));
  jpeg_read_header(c, TRUE);
  r->width = static_cast<int>(c->image_width);
  r->height = static_cast<int>(c->image_height);
  // NOTE: a small pixel cap keeps each run fast (a header may claim 65500x65500).
  r->too_big = static_cast<std::uint64_t>(c->image_width) * c->image_height > (1u << 22);
  if (r->too_big) return false;
  r->components = c->num_components;
  r->baseline_single_scan = !c->progressive_mode && !c->arith_code;
  jvirt_barray_ptr* arrays = jpeg_read_coefficients(c);
  for (int ci = 0; ci < c->num_components; ++ci) {
    const jpeg_component_info& comp = c->comp_info[ci];
    for (JDIMENSION y = 0; y < comp.height_in_blocks; ++y) {
      JBLOCKARRAY row = c->mem->access_virt_barray(reinterpret_cast<j_common_ptr>(c), arrays[ci], y, 1, FALSE);
      for (JDIMENSION x = 0; x < comp.width_in_blocks; ++x) {
        r->coefficients.insert(r->coefficients.end(), row[0][x], row[0][x] + DCTSIZE2);
      }
    }
  }
  jpeg_finish_decompress(c);
  return true;
}

bool read_pixels(jpeg_decompress_struct* c, Error* err, const std::uint8_t* data, std::size_t size, Read* r) {
  if (setjmp(err->jump)) return false;
  jpeg_mem_src(c, data, static_cast<unsigned long>(size));
  jpeg_read_header(c, TRUE);
  if (static_cast<std::uint64_t>(c->image_width) * c->image_height > (1u << 22)) return false;
  jpeg_start_decompress(c);
  const std::size_t stride = static_cast<std::size_t>(c->output_width) * static_cast<std::size_t>(c->output_components);
  r->pixels.resize(stride * c->output_height);
  while (c->output_scanline < c->output_height) {
    JSAMPROW row = r->pixels.data() + stride * c->output_scanline;
    jpeg_read_scanlines(c, &row, 1);
  }
  jpeg_finish_decompress(c);
  return true;
}

Read read(const std::uint8_t* data, std::size_t size, bool pixels) {
  Read r;
  jpeg_decompress_struct c;
  Error err;
  c.err = jpeg_std_error(&err.pub);
  err.warnings = &r.warnings;
  err.pub.error_exit = [](j_common_ptr ci) { std::longjmp(reinterpret_cast<Error*>(ci->err)->jump, 1); };
  err.pub.emit_message = [](j_common_ptr ci, int level) {
    if (level == -1) reinterpret_cast<Error*>(ci->err)->warnings->push_back(ci->err->msg_code);
  };
  jpeg_create_decompress(&c);
  r.ok = read_coefficients(&c, &err, data, size, &r);
  if (r.ok && pixels) {
    jpeg_abort_decompress(&c);
    r.ok = read_pixels(&c, &err, data, size, &r);
  }
  jpeg_destroy_decompress(&c);
  return r;
}

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "jpeg_restart_insert_fuzz: %s\n", what);
  std::abort();
}

long g_rewritten = 0, g_refused = 0, g_refused_clean = 0;

void report() {
  std::fprintf(stderr, "jpeg_restart_insert_fuzz: %ld rewritten, %ld refused, of which %ld libjpeg reads cleanly\n",
               g_rewritten, g_refused, g_refused_clean);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static stoker::detail::JpegRestartInserter inserter;
  static std::vector<std::uint8_t> out;
  static const bool registered = std::atexit(report) == 0;
  (void)registered;
  const stoker::Status st = inserter.insert(data, size, &out);
  if (!st.ok()) {
    if (st.code() != stoker::Code::kCorrupt && st.code() != stoker::Code::kUnsupported) finding("unexpected code");
    if (st.message().empty()) finding("refused without a reason");
    ++g_refused;
    const Read in = read(data, size, /*pixels=*/false);
    bool clean = in.ok && in.baseline_single_scan;
    for (int w : in.warnings) clean = clean && !data_warning(w);
    if (clean) ++g_refused_clean;
    return 0;
  }
  ++g_rewritten;
  const Read in = read(data, size, /*pixels=*/true);
  if (in.too_big) return 0;
  if (!in.ok) finding("rewritten, but libjpeg cannot read the input");
  for (int w : in.warnings) {
    if (data_warning(w)) finding("rewritten, but libjpeg warns on the input's data");
  }
  const Read o = read(out.data(), out.size(), /*pixels=*/true);
  if (!o.ok) finding("libjpeg cannot read the output");
  if (o.warnings != in.warnings) finding("libjpeg warns otherwise on the output");
  if (o.width != in.width || o.height != in.height || o.components != in.components) finding("sizes differ");
  if (o.coefficients != in.coefficients) finding("coefficients differ");
  if (o.pixels != in.pixels) finding("pixels differ");
  stoker::detail::RestartLayout layout;
  if (!stoker::detail::parse_restart_layout(out.data(), out.size(), &layout)) finding("output not on a restart grid");
  if (layout.interval != stoker::detail::restart_interval_for(layout.width, layout.mcu_w)) finding("wrong interval");
  std::vector<std::uint8_t> cut;
  int ox = 0, oy = 0;
  if (!stoker::detail::cut_restart_segments(out.data(), out.size(), layout, in.width / 3, in.height / 3,
                                            in.width / 3 + 1, in.height / 3 + 1, &cut, &ox, &oy)) {
    finding("output cannot be cut");
  }
  const Read c = read(cut.data(), cut.size(), /*pixels=*/true);
  if (!c.ok) finding("a cut of the output does not decode");
  for (int w : c.warnings) {
    if (data_warning(w)) finding("libjpeg warns on the data of a cut of the output");
  }
  return 0;
}
