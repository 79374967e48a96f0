// The benchmarks' shared input: a folder's JPEG files, in sorted order.
#pragma once

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace bench {

// Paths of the regular files under `dir` (recursively) named *.jpg or
// *.jpeg, any case, sorted.
inline std::vector<std::string> jpeg_files(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    std::string ext = e.path().extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
    if (e.is_regular_file() && (ext == ".jpg" || ext == ".jpeg")) names.push_back(e.path().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// The whole file in memory.
inline std::vector<std::uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace bench
