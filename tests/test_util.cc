#include "test_util.h"

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <jpeglib.h>

namespace stoker::testing {

std::vector<std::uint8_t> test_pixels(int width, int height, std::uint32_t seed) {
  std::vector<std::uint8_t> p(static_cast<std::size_t>(width) * static_cast<std::size_t>(height) * 3);
  std::uint32_t s = seed * 2654435761u + 1;
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      s = s * 1664525u + 1013904223u;
      int noise = static_cast<int>(s >> 28) - 8;
      std::size_t i = (static_cast<std::size_t>(y) * static_cast<std::size_t>(width) + static_cast<std::size_t>(x)) * 3;
      p[i + 0] = static_cast<std::uint8_t>(std::clamp(x * 255 / std::max(1, width - 1) + noise, 0, 255));
      p[i + 1] = static_cast<std::uint8_t>(std::clamp(y * 255 / std::max(1, height - 1) + noise, 0, 255));
      p[i + 2] = static_cast<std::uint8_t>(std::clamp(static_cast<int>((seed * 37 + static_cast<unsigned>(x + y)) % 256), 0, 255));
    }
  }
  return p;
}

std::vector<std::uint8_t> encode_jpeg(const std::vector<std::uint8_t>& pixels, int width, int height, int channels,
                                      const JpegEncodeOptions& o) {
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* out = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &out, &size);
  c.image_width = static_cast<JDIMENSION>(width);
  c.image_height = static_cast<JDIMENSION>(height);
  c.input_components = channels;
  c.in_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, o.quality, TRUE);
  if (channels == 3) {
    c.comp_info[0].h_samp_factor = o.sampling == 422 || o.sampling == 420 ? 2 : 1;
    c.comp_info[0].v_samp_factor = o.sampling == 420 || o.sampling == 440 ? 2 : 1;
    if (o.shared_tables) {
      for (int i = 0; i < 3; ++i) c.comp_info[i].dc_tbl_no = c.comp_info[i].ac_tbl_no = 0;
    }
  }
  c.optimize_coding = o.optimize ? TRUE : FALSE;
  c.arith_code = o.arithmetic ? TRUE : FALSE;
  if (o.progressive) jpeg_simple_progression(&c);
  c.restart_interval = static_cast<unsigned>(o.restart_mcus);
  jpeg_start_compress(&c, TRUE);
  std::vector<std::uint8_t> row;
  while (c.next_scanline < c.image_height) {
    const std::uint8_t* src = pixels.data() + static_cast<std::size_t>(c.next_scanline) * static_cast<std::size_t>(width) * static_cast<std::size_t>(channels);
    row.assign(src, src + static_cast<std::size_t>(width) * static_cast<std::size_t>(channels));
    JSAMPROW r = row.data();
    jpeg_write_scanlines(&c, &r, 1);
  }
  jpeg_finish_compress(&c);
  std::vector<std::uint8_t> bytes(out, out + size);
  std::free(out);
  jpeg_destroy_compress(&c);
  return bytes;
}

void write_file(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

void write_file(const std::string& path, const std::string& text) {
  write_file(path, std::vector<std::uint8_t>(text.begin(), text.end()));
}

std::vector<std::uint8_t> npy_bytes(const std::string& descr, const std::string& shape, const void* data,
                                    std::size_t bytes, bool fortran) {
  std::string hdr =
      "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") + ", 'shape': " + shape + ", }";
  while ((10 + hdr.size() + 1) % 64 != 0) hdr += ' ';
  hdr += '\n';
  // Built as a string and copied once: GCC 12 warns falsely (-Warray-bounds) on
  // inserting into a vector made from a short initializer list.
  std::string file("\x93NUMPY\x01\x00", 8);
  file += static_cast<char>(hdr.size() & 0xff);
  file += static_cast<char>(hdr.size() >> 8);
  file += hdr;
  file.append(static_cast<const char*>(data), bytes);
  return std::vector<std::uint8_t>(file.begin(), file.end());
}

std::string numbered_list(const TempDir& d, int n, const std::vector<int>& corrupt) {
  std::string list = "path,label\n";
  for (int i = 0; i < n; ++i) {
    const int w = 24 + (i * 7) % 50, h = 20 + (i * 13) % 40;
    const std::string name = "img" + std::to_string(i) + ".jpg";
    auto bytes = encode_jpeg(test_pixels(w, h, static_cast<std::uint32_t>(i)), w, h);
    if (std::find(corrupt.begin(), corrupt.end(), i) != corrupt.end()) bytes.resize(bytes.size() / 2);
    write_file(d.file(name), bytes);
    list += name + "," + std::to_string(i) + "\n";
  }
  write_file(d.file("list.csv"), list);
  return d.file("list.csv");
}

}  // namespace stoker::testing
