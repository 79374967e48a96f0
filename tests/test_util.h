// Fixture makers for the C++ tests: temp directories and JPEG encoding.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stoker/loader.h"
#include "util/temp_dir.h"

namespace stoker::testing {

// The default schema's tensors of a batch (Batch::tensors(); the
// single-tensor accessors Batch::images() and labels() are deprecated): the
// images (or arrays), their bytes, and the "label" field's values.
inline const void* images_of(const Batch& b) { return b.tensors().at(0).data; }
inline std::size_t image_bytes_of(const Batch& b) { return b.tensors().at(0).bytes; }
inline const std::int64_t* labels_of(const Batch& b) {
  return static_cast<const std::int64_t*>(b.tensor("label")->data);
}

// A fresh directory under $TMPDIR, removed by the destructor (util/temp_dir.h).
class TempDir : public detail::TempDir {
 public:
  TempDir() : detail::TempDir("stoker-test") {}
};

// Deterministic RGB8 pixels: smooth gradients plus seeded noise (photo-like
// enough to exercise the codec).
std::vector<std::uint8_t> test_pixels(int width, int height, std::uint32_t seed);

// How a test JPEG is encoded. sampling: Y's sampling factors, 444, 422,
// 420 or 440 (Cb and Cr 1x1), ignored for gray input. restart_mcus > 0: a
// restart marker every that many MCUs.
struct JpegEncodeOptions {
  int quality = 90;
  int sampling = 444;
  bool progressive = false;
  int restart_mcus = 0;
  bool optimize = false;       // optimised Huffman tables
  bool arithmetic = false;     // arithmetic coding instead of Huffman
  bool shared_tables = false;  // every component on Huffman tables 0
};

// Encodes RGB8 (or gray when channels == 1) pixels as JPEG.
std::vector<std::uint8_t> encode_jpeg(const std::vector<std::uint8_t>& pixels, int width, int height, int channels,
                                      const JpegEncodeOptions& o);
inline std::vector<std::uint8_t> encode_jpeg(const std::vector<std::uint8_t>& pixels, int width, int height,
                                             int quality = 90, int subsampling = 444, int channels = 3,
                                             bool progressive = false, int restart_mcus = 0) {
  JpegEncodeOptions o;
  o.quality = quality;
  o.sampling = subsampling;
  o.progressive = progressive;
  o.restart_mcus = restart_mcus;
  return encode_jpeg(pixels, width, height, channels, o);
}

// A .npy file, version 1.0, written by hand as numpy.save does: the magic,
// the header's Python dict padded with spaces to a multiple of 64 bytes
// (newline included), then the data. `shape` as Python writes it: "(3, 4)".
std::vector<std::uint8_t> npy_bytes(const std::string& descr, const std::string& shape, const void* data,
                                    std::size_t bytes, bool fortran = false);

void write_file(const std::string& path, const std::vector<std::uint8_t>& bytes);
void write_file(const std::string& path, const std::string& text);

// N JPEGs of varied sizes (24 + 7i mod 50 by 20 + 13i mod 40) in `d`, listed in
// d/list.csv with label = record index (labels identify samples); the records in
// `corrupt` truncated to half. Returns the list file's path.
std::string numbered_list(const TempDir& d, int n, const std::vector<int>& corrupt = {});

}  // namespace stoker::testing
