// What putting restart markers into a folder's JPEGs costs, per image, on one
// thread: (a) a full libjpeg-turbo decode to RGB (its libjpeg API with every
// row pointer at once, as TurboJPEG's tjDecompress2 does; default settings),
// the unit; (b) JpegTranscoder::to_restart_grid(optimize=false), the
// coefficient round trip through libjpeg; (c) JpegRestartInserter::insert.
// Each file's inserter output is first checked against the transcoder's: the
// same coefficients, read back by libjpeg (files the inserter refuses are
// counted and left out of its timing).
//
//   jpeg_restart_insert_bench DIR [--rounds R]
// Prints a Markdown table: best of R rounds, ms of thread CPU time per image.
#include <cstddef>
#include <cstdio>
#include <ctime>

#include <jpeglib.h>

#include <algorithm>
#include <csetjmp>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "decode/jpeg_restart_insert.h"
#include "decode/jpeg_transcode.h"
#include "jpeg_files.h"
#include "libjpeg_decode.h"

namespace {

using Err = bench::LibjpegError;
void no_message(j_common_ptr, int) {}

// Every quantized coefficient of the image, component by component.
bool coefficients(jpeg_decompress_struct* cinfo, Err* err, const std::uint8_t* data, std::size_t size,
                  std::vector<JCOEF>* out) {
  if (setjmp(err->jump)) {
    jpeg_abort_decompress(cinfo);
    return false;
  }
  out->clear();
  jpeg_mem_src(cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(cinfo, TRUE);
  jvirt_barray_ptr* arrays = jpeg_read_coefficients(cinfo);
  for (int c = 0; c < cinfo->num_components; ++c) {
    const jpeg_component_info& comp = cinfo->comp_info[c];
    for (JDIMENSION y = 0; y < comp.height_in_blocks; ++y) {
      JBLOCKARRAY row = cinfo->mem->access_virt_barray(reinterpret_cast<j_common_ptr>(cinfo), arrays[c], y, 1, FALSE);
      for (JDIMENSION x = 0; x < comp.width_in_blocks; ++x) out->insert(out->end(), row[0][x], row[0][x] + DCTSIZE2);
    }
  }
  jpeg_finish_decompress(cinfo);
  return true;
}

// CPU time of this thread: on a shared machine, time the thread was not
// running is not counted against any of the three.
double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: jpeg_restart_insert_bench DIR [--rounds R]\n");
    return 2;
  }
  int rounds = 3;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--rounds") rounds = std::stoi(argv[i + 1]);
  }
  const std::vector<std::string> names = bench::jpeg_files(argv[1]);
  std::vector<std::vector<std::uint8_t>> files;
  for (const std::string& n : names) files.push_back(bench::read_bytes(n));
  if (files.empty()) {
    std::fprintf(stderr, "jpeg_restart_insert_bench: no JPEG files under %s\n", argv[1]);
    return 1;
  }

  jpeg_decompress_struct cinfo;
  Err err;
  cinfo.err = jpeg_std_error(&err.pub);
  err.pub.error_exit = bench::libjpeg_error_exit;
  err.pub.emit_message = no_message;
  jpeg_create_decompress(&cinfo);
  stoker::detail::JpegTranscoder transcoder;
  stoker::detail::JpegRestartInserter inserter;

  // Check first: the inserter's output holds the transcoder's coefficients.
  std::vector<std::uint8_t> out, ref;
  std::vector<JCOEF> a, b;
  std::map<std::string, int> refused;
  std::size_t in_bytes = 0, insert_bytes = 0, transcode_bytes = 0;
  std::vector<std::size_t> usable;
  for (std::size_t i = 0; i < files.size(); ++i) {
    const auto& f = files[i];
    stoker::Status st = inserter.insert(f.data(), f.size(), &out);
    if (!st.ok()) {
      ++refused[stoker::code_name(st.code()) + std::string(": ") + st.message()];
      continue;
    }
    if (!transcoder.to_restart_grid(f.data(), f.size(), &ref, /*optimize=*/false).ok() ||
        !coefficients(&cinfo, &err, out.data(), out.size(), &a) ||
        !coefficients(&cinfo, &err, ref.data(), ref.size(), &b) || a != b) {
      std::fprintf(stderr, "jpeg_restart_insert_bench: %s: the inserter's output differs from the transcoder's\n",
                   names[i].c_str());
      return 1;
    }
    in_bytes += f.size();
    insert_bytes += out.size();
    transcode_bytes += ref.size();
    usable.push_back(i);
  }
  if (usable.empty()) {
    std::fprintf(stderr, "jpeg_restart_insert_bench: the inserter took none of the files\n");
    return 1;
  }

  std::vector<std::uint8_t> pixels;
  std::vector<JSAMPROW> rows;
  double t_decode = 1e100, t_transcode = 1e100, t_insert = 1e100;
  for (int r = 0; r <= rounds; ++r) {  // round 0 warms up
    double t0 = cpu_seconds();
    for (std::size_t i : usable) (void)bench::decode_rgb(&cinfo, &err, files[i].data(), files[i].size(), &pixels, &rows);
    const double dec = cpu_seconds() - t0;
    t0 = cpu_seconds();
    for (std::size_t i : usable) {
      (void)transcoder.to_restart_grid(files[i].data(), files[i].size(), &ref, /*optimize=*/false);
    }
    const double tra = cpu_seconds() - t0;
    t0 = cpu_seconds();
    for (std::size_t i : usable) (void)inserter.insert(files[i].data(), files[i].size(), &out);
    const double ins = cpu_seconds() - t0;
    if (r == 0) continue;
    t_decode = std::min(t_decode, dec);
    t_transcode = std::min(t_transcode, tra);
    t_insert = std::min(t_insert, ins);
  }
  jpeg_destroy_decompress(&cinfo);

  const double per = 1e3 / static_cast<double>(usable.size());
  std::printf("%s: %zu of %zu files (the rest refused by the inserter), best of %d rounds, ms per image (1 thread)\n",
              argv[1], usable.size(), files.size(), rounds);
  for (const auto& [why, count] : refused) std::printf("  refused %d: %s\n", count, why.c_str());
  std::printf(
      "| full decode to RGB | transcoder (optimize=false) | inserter | transcoder / decode | inserter / decode "
      "| bytes: input, transcoder, inserter |\n");
  std::printf("|---:|---:|---:|---:|---:|---|\n");
  std::printf("| %.3f | %.3f | %.3f | %.2f | %.2f | %zu, %zu (%+.1f%%), %zu (%+.1f%%) |\n", t_decode * per,
              t_transcode * per, t_insert * per, t_transcode / t_decode, t_insert / t_decode, in_bytes, transcode_bytes,
              100.0 * (static_cast<double>(transcode_bytes) / static_cast<double>(in_bytes) - 1), insert_bytes,
              100.0 * (static_cast<double>(insert_bytes) / static_cast<double>(in_bytes) - 1));
  return 0;
}
