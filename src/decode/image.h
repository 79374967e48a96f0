// Pixel buffers passed between decode and transform: 8-bit interleaved RGB
// images, and single-channel masks kept as stored.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace stoker::detail {

// A read-only view of RGB8 pixels; rows `stride` bytes apart.
struct ImageView {
  const std::uint8_t* data = nullptr;
  int width = 0;
  int height = 0;
  std::ptrdiff_t stride = 0;
  const std::uint8_t* row(int y) const { return data + y * stride; }
};

// An owning RGB8 buffer whose capacity is reused across samples.
struct ImageBuffer {
  static constexpr std::size_t kSlack = 16;
  std::vector<std::uint8_t> pixels;
  int width = 0;
  int height = 0;
  std::ptrdiff_t stride = 0;
  void reset(int w, int h, int channels = 3) {
    width = w;
    height = h;
    stride = static_cast<std::ptrdiff_t>(w) * channels;
    // NOTE: kSlack bytes past the last pixel let SIMD kernels load and store
    // 4 bytes for a 3-byte pixel at the very end of the buffer.
    std::size_t need = static_cast<std::size_t>(stride) * static_cast<std::size_t>(h) + kSlack;
    if (pixels.size() < need) pixels.resize(need);
  }
  std::uint8_t* row(int y) { return pixels.data() + y * stride; }
  ImageView view() const { return {pixels.data(), width, height, stride}; }
};

// A read-only view of single-channel pixels kept as stored (segmentation
// masks: 8-bit gray or palette indices, or 16-bit), never converted to RGB;
// rows `stride` bytes apart, each pixel `bytes_per_pixel` bytes (1 or 2,
// 16-bit in host byte order).
struct MaskView {
  const std::uint8_t* data = nullptr;
  int width = 0;
  int height = 0;
  std::ptrdiff_t stride = 0;
  int bytes_per_pixel = 1;
  const std::uint8_t* row(int y) const { return data + y * stride; }
};

// An owning single-channel buffer whose capacity is reused across samples.
struct MaskBuffer {
  std::vector<std::uint8_t> pixels;
  int width = 0;
  int height = 0;
  std::ptrdiff_t stride = 0;
  int bytes_per_pixel = 1;
  void reset(int w, int h, int bpp) {
    width = w;
    height = h;
    bytes_per_pixel = bpp;
    stride = static_cast<std::ptrdiff_t>(w) * bpp;
    const std::size_t need = static_cast<std::size_t>(stride) * static_cast<std::size_t>(h);
    if (pixels.size() < need) pixels.resize(need);
  }
  std::uint8_t* row(int y) { return pixels.data() + y * stride; }
  MaskView view() const { return {pixels.data(), width, height, stride, bytes_per_pixel}; }
};

// A pixel rectangle: [x, x + width) x [y, y + height).
struct Box {
  int x = 0;
  int y = 0;
  int width = 0;
  int height = 0;
};

}  // namespace stoker::detail
