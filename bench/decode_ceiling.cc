// The decode ceiling: every JPEG of a folder read and fully decoded to RGB
// with plain libjpeg-turbo (bench/libjpeg_decode.h: its libjpeg API, default
// settings), on N threads. Shares no code with stoker on purpose: it is the
// baseline stoker is measured against.
//
//   decode_ceiling DIR [--threads N] [--passes P]
// Prints one JSON line: {"images":..., "seconds":..., "images_per_s":...}
// (best pass), after a first pass that warms the page cache.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>

#include <jpeglib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "jpeg_files.h"
#include "libjpeg_decode.h"

namespace {


// One open, fstat and read into a reused buffer: what a careful reader does.
bool read_file(const std::string& path, std::vector<unsigned char>* data) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st;
  bool ok = ::fstat(fd, &st) == 0;
  if (ok) {
    data->resize(static_cast<std::size_t>(st.st_size));
    std::size_t got = 0;
    while (ok && got < data->size()) {
      const ssize_t n = ::read(fd, data->data() + got, data->size() - got);
      if (n <= 0) ok = n == 0 ? false : errno == EINTR;
      if (n > 0) got += static_cast<std::size_t>(n);
    }
  }
  ::close(fd);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: decode_ceiling DIR [--threads N] [--passes P]\n";
    return 2;
  }
  std::string dir = argv[1];
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int passes = 3;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--threads") threads = std::stoi(argv[i + 1]);
    if (std::string(argv[i]) == "--passes") passes = std::stoi(argv[i + 1]);
  }
  const std::vector<std::string> files = bench::jpeg_files(dir);
  if (files.empty()) {
    std::cerr << "decode_ceiling: no JPEG files under " << dir << "\n";
    return 1;
  }
  double best = 1e100;
  std::atomic<long> failures{0};
  for (int pass = 0; pass <= passes; ++pass) {  // pass 0 warms the page cache
    std::atomic<std::size_t> next{0};
    auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&] {
        jpeg_decompress_struct cinfo;
        bench::LibjpegError err;
        cinfo.err = jpeg_std_error(&err.pub);
        err.pub.error_exit = bench::libjpeg_error_exit;
        jpeg_create_decompress(&cinfo);
        std::vector<unsigned char> data, pixels;
        std::vector<JSAMPROW> rows;
        for (std::size_t i; (i = next.fetch_add(1)) < files.size();) {
          if (!read_file(files[i], &data)) {
            failures.fetch_add(1);
            continue;
          }
          if (!bench::decode_rgb(&cinfo, &err, data.data(), data.size(), &pixels, &rows)) failures.fetch_add(1);
        }
        jpeg_destroy_decompress(&cinfo);
      });
    }
    for (auto& t : pool) t.join();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (pass > 0) best = std::min(best, s);
  }
  std::printf("{\"images\": %zu, \"threads\": %d, \"seconds\": %.4f, \"images_per_s\": %.1f, \"failures\": %ld}\n",
              files.size(), threads, best, static_cast<double>(files.size()) / best, failures.load());
  return 0;
}
