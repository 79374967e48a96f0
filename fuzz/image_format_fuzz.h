// What the per-format image fuzz targets (bmp, gif, tiff, webp) share: the
// input with the format's magic bytes forced in front, so that every run
// reaches that format's parser, then ImageDecoder::open with a small pixel
// cap and decode of the whole image and of regions. A region must equal the
// whole decode's crop, pixel for pixel (else the target traps: a finding).
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "decode/decode.h"

namespace stoker_fuzz {

inline void fuzz_image(const std::uint8_t* data, std::size_t size, const std::uint8_t* magic, std::size_t n_magic,
                       stoker::detail::Format expect) {
  static stoker::detail::ImageDecoder dec;
  static stoker::detail::ImageBuffer whole, part;
  std::vector<std::uint8_t> bytes(data, data + size);
  if (bytes.size() < n_magic + 2) bytes.resize(n_magic + 2);
  std::memcpy(bytes.data(), magic, n_magic);
  // NOTE: a small pixel cap keeps each run fast; the cap itself is what a
  // hostile header must not get past.
  if (!dec.open(bytes.data(), bytes.size(), /*max_pixels=*/1 << 20).ok()) return;
  if (dec.format() != expect) __builtin_trap();
  const int w = dec.width(), h = dec.height();
  stoker::detail::ImageView full, view;
  if (!dec.decode({0, 0, w, h}, &whole, &full).ok()) return;
  // Regions from the input's last bytes: corners, a middle, a 1x1.
  const std::uint8_t a = bytes[bytes.size() - 1], b = bytes[bytes.size() - 2];
  const stoker::detail::Box boxes[] = {{0, 0, 1, 1}, {w - 1, h - 1, 1, 1}, {a % w, b % h, w - a % w, h - b % h},
                                       {w / 3, h / 3, (w + 1) / 2, (h + 1) / 2}};
  for (const auto& r : boxes) {
    if (r.width <= 0 || r.height <= 0 || r.x + r.width > w || r.y + r.height > h) continue;
    if (!dec.open(bytes.data(), bytes.size(), 1 << 20).ok()) __builtin_trap();  // it opened a moment ago
    if (!dec.decode(r, &part, &view).ok()) continue;  // a corrupt strip the region reads may fail on its own
    if (view.width != r.width || view.height != r.height) __builtin_trap();
    for (int y = 0; y < r.height; ++y) {
      if (std::memcmp(view.row(y), full.row(r.y + y) + r.x * 3, static_cast<std::size_t>(r.width) * 3) != 0) {
        __builtin_trap();
      }
    }
  }
}

}  // namespace stoker_fuzz
