// Pixel buffers passed between decode and transform: 8-bit interleaved RGB
// images, single-channel masks kept as stored, and rasters kept as stored
// (1 to N channels of uint8, uint16 or float32: stoker.Image(channels="stored")).
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
  std::uint64_t bytes() const { return pixels.capacity(); }  // what it holds (reused: its capacity)
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
  std::uint64_t bytes() const { return pixels.capacity(); }
};

// The sample type of a raster kept as stored.
enum class SampleType : std::uint8_t { kUint8, kUint16, kFloat32 };
inline int sample_bytes(SampleType t) { return t == SampleType::kUint8 ? 1 : t == SampleType::kUint16 ? 2 : 4; }
inline const char* sample_type_name(SampleType t) {
  return t == SampleType::kUint8 ? "uint8" : t == SampleType::kUint16 ? "uint16" : "float32";
}

// An owning raster of `channels` planes (planar: plane c holds channel c's
// height x width samples, rows packed), samples in host byte order; its
// capacity is reused across samples. NOTE: planar, because every geometric
// step runs per channel, and NCHW batches take a plane as a whole.
struct RasterBuffer {
  std::vector<std::uint8_t> pixels;
  int width = 0;
  int height = 0;
  int channels = 0;
  SampleType type = SampleType::kUint8;
  void reset(int w, int h, int c, SampleType t) {
    width = w;
    height = h;
    channels = c;
    type = t;
    const std::size_t need = plane_bytes() * static_cast<std::size_t>(c);
    if (pixels.size() < need) pixels.resize(need);
  }
  std::size_t plane_bytes() const {
    return static_cast<std::size_t>(width) * static_cast<std::size_t>(height) * static_cast<std::size_t>(sample_bytes(type));
  }
  std::uint8_t* plane(int c) { return pixels.data() + plane_bytes() * static_cast<std::size_t>(c); }
  const std::uint8_t* plane(int c) const { return pixels.data() + plane_bytes() * static_cast<std::size_t>(c); }
  std::uint64_t bytes() const { return pixels.capacity(); }
};

// A pixel rectangle: [x, x + width) x [y, y + height).
struct Box {
  int x = 0;
  int y = 0;
  int width = 0;
  int height = 0;
};

}  // namespace stoker::detail
