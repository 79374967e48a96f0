// PIL's conversions to RGB8 (Pillow 9.4, what torchvision's loader runs:
// Image.open(path).convert("RGB")), shared by the decoders whose files PIL
// reads through its own unpackers: PNG palettes, TIFF, BMP and GIF.
#pragma once

#include <array>
#include <cstdint>

namespace stoker::detail {

// A palette as PIL applies it: 256 RGB entries, those the file does not give
// left as PIL's default, a gray ramp (index i is (i, i, i)), so that an index
// past the file's palette converts as PIL converts it. Transparency is never
// applied (convert("RGB") drops it).
struct PilPalette {
  std::array<std::uint8_t, 256 * 3> rgb;
  PilPalette() { reset(); }
  void reset() {
    for (int i = 0; i < 256; ++i) rgb[i * 3] = rgb[i * 3 + 1] = rgb[i * 3 + 2] = static_cast<std::uint8_t>(i);
  }
  void set(int i, std::uint8_t r, std::uint8_t g, std::uint8_t b) {
    rgb[i * 3] = r;
    rgb[i * 3 + 1] = g;
    rgb[i * 3 + 2] = b;
  }
  const std::uint8_t* operator[](int i) const { return &rgb[i * 3]; }
};

// 16-bit gray ("I;16", and PNG's 16-bit gray, which PIL opens as "I") to
// RGB: clipped at 255, not scaled (PIL's I;16 -> L/RGB conversion).
inline std::uint8_t pil_clip16(std::uint16_t v) { return v > 255 ? 255 : static_cast<std::uint8_t>(v); }

// An n-bit channel (1..8 bits, `max` = 2^n - 1) to 8 bits as PIL's unpackers
// scale BMP 5/6-bit fields: v * 255 / max, truncated.
inline std::uint8_t pil_scale(std::uint32_t v, std::uint32_t max) { return static_cast<std::uint8_t>(v * 255 / max); }

// PIL's cmyk2rgb: each of R, G, B is (255 - k) - c * (255 - k) / 255 with
// PIL's rounded division by 255.
inline std::uint8_t pil_cmyk_channel(int c, int k) {
  const int nk = 255 - k;
  const int tmp = c * nk + 128;
  const int m = ((tmp >> 8) + tmp) >> 8;
  const int v = nk - m;
  return static_cast<std::uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v));
}

// PIL's unpackRGBa: premultiplied (associated) alpha undone, c * 255 / a
// truncated and clipped; a fully transparent pixel is black.
inline std::uint8_t pil_unpremultiply(int c, int a) {
  if (a == 0) return 0;
  if (a == 255) return static_cast<std::uint8_t>(c);
  const int v = c * 255 / a;
  return static_cast<std::uint8_t>(v > 255 ? 255 : v);
}

}  // namespace stoker::detail
