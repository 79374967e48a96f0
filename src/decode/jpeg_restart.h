// Random access into JPEGs written with restart markers on a grid that
// divides every MCU row (`stoker pack` writes them so). Each restart segment
// is byte-aligned and starts with the DC predictions reset, so the segments
// that cover a rectangle can be cut out by copying bytes into a smaller,
// valid JPEG of just that rectangle: decoding it costs the rectangle's
// entropy decoding, not that of every row above it and every column beside
// it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace stoker::detail {

struct RestartLayout {
  int width = 0, height = 0;
  int mcu_w = 0, mcu_h = 0;  // pixels per MCU
  int mcus_per_row = 0;
  int interval = 0;          // MCUs per restart segment; divides mcus_per_row
  std::size_t sof_dims = 0;  // offset of the SOF's height (2 bytes), then width (2 bytes)
  std::size_t sos = 0;       // offset of the SOS marker
  std::size_t data = 0;      // first byte of the entropy-coded data
};

// False unless the bytes are a baseline (SOF0/SOF1), single-scan JPEG with a
// restart interval that divides each MCU row; only the headers are read.
bool parse_restart_layout(const std::uint8_t* p, std::size_t n, RestartLayout* out);

// Writes into *out a JPEG of the restart segments that cover pixel columns
// [x0, x1) and rows [y0, y1) of the image (the tables as they were, the SOF
// size patched, the segments' RSTn renumbered from 0); *ox, *oy: where its
// pixel (0, 0) lies in the image. False when the markers are not where the
// layout says (corrupt data): decode the original instead.
bool cut_restart_segments(const std::uint8_t* p, std::size_t n, const RestartLayout& layout, int x0, int y0, int x1,
                          int y1, std::vector<std::uint8_t>* out, int* ox, int* oy);

// The restart interval (MCUs) `stoker pack` writes for an image `width`
// pixels wide with MCUs `mcu_w` pixels wide: the largest divisor of the MCUs
// per row whose segments are at most 64 pixels wide.
int restart_interval_for(int width, int mcu_w);

}  // namespace stoker::detail
