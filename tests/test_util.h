// Fixture makers for the C++ tests: temp directories and JPEG encoding.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace stoker::testing {

// A fresh directory under $TMPDIR, removed by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Deterministic RGB8 pixels: smooth gradients plus seeded noise (photo-like
// enough to exercise the codec).
std::vector<std::uint8_t> test_pixels(int width, int height, std::uint32_t seed);

// Encodes RGB8 (or gray when channels == 1) pixels as JPEG. subsampling: 444, 422 or 420.
// restart_mcus > 0: a restart marker every that many MCUs.
std::vector<std::uint8_t> encode_jpeg(const std::vector<std::uint8_t>& pixels, int width, int height,
                                      int quality = 90, int subsampling = 444, int channels = 3,
                                      bool progressive = false, int restart_mcus = 0);

void write_file(const std::string& path, const std::vector<std::uint8_t>& bytes);
void write_file(const std::string& path, const std::string& text);

}  // namespace stoker::testing
