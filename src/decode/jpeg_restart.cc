#include "decode/jpeg_restart.h"

#include <algorithm>
#include <cstring>

namespace stoker::detail {
namespace {

int be16(const std::uint8_t* p) { return p[0] << 8 | p[1]; }

// The marker that ends the segment starting at `from`: the offset of its
// 0xFF, or n when there is none. Stuffed bytes (FF 00) and fill bytes (FF FF)
// are passed over.
std::size_t next_marker(const std::uint8_t* p, std::size_t n, std::size_t from) {
  for (std::size_t i = from; i + 1 < n;) {
    const auto* ff = static_cast<const std::uint8_t*>(std::memchr(p + i, 0xFF, n - 1 - i));
    if (!ff) return n;
    i = static_cast<std::size_t>(ff - p);
    const std::uint8_t m = p[i + 1];
    if (m != 0x00 && m != 0xFF) return i;
    i += 1;
  }
  return n;
}

}  // namespace

bool parse_restart_layout(const std::uint8_t* p, std::size_t n, RestartLayout* out) {
  if (n < 4 || p[0] != 0xFF || p[1] != 0xD8) return false;
  RestartLayout L;
  int hmax = 1, vmax = 1, components = 0;
  bool sof = false;
  for (std::size_t i = 2; i + 4 <= n;) {
    if (p[i] != 0xFF) return false;
    const int m = p[i + 1];
    if (m == 0xFF) {  // fill byte
      ++i;
      continue;
    }
    const std::size_t len = static_cast<std::size_t>(be16(p + i + 2));
    if (len < 2 || i + 2 + len > n) return false;
    const std::uint8_t* s = p + i + 4;
    if (m == 0xC0 || m == 0xC1) {
      if (len < 8 || s[0] != 8) return false;
      components = s[5];
      if (components < 1 || len < 8 + 3 * static_cast<std::size_t>(components)) return false;
      L.sof_dims = i + 5;
      L.height = be16(s + 1);
      L.width = be16(s + 3);
      for (int c = 0; c < components; ++c) {
        hmax = std::max(hmax, s[7 + 3 * c] >> 4);
        vmax = std::max(vmax, s[7 + 3 * c] & 15);
      }
      sof = true;
    } else if ((m >= 0xC2 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC)) {
      return false;  // progressive, lossless, arithmetic or hierarchical
    } else if (m == 0xDD) {
      if (len < 4) return false;
      L.interval = be16(s);
    } else if (m == 0xDA) {
      if (!sof || len < 3 || s[0] != components) return false;  // one scan holding every component
      L.sos = i;
      L.data = i + 2 + len;
      break;
    } else if (m == 0xD9) {
      return false;
    }
    i += 2 + len;
  }
  if (!sof || L.sos == 0 || L.interval <= 0 || L.width <= 0 || L.height <= 0) return false;
  // A single component is not interleaved: its MCU is one 8x8 block.
  L.mcu_w = components == 1 ? 8 : 8 * hmax;
  L.mcu_h = components == 1 ? 8 : 8 * vmax;
  L.mcus_per_row = (L.width + L.mcu_w - 1) / L.mcu_w;
  if (L.mcus_per_row % L.interval != 0) return false;
  *out = L;
  return true;
}

bool cut_restart_segments(const std::uint8_t* p, std::size_t n, const RestartLayout& L, int x0, int y0, int x1,
                          int y1, std::vector<std::uint8_t>* out, int* ox, int* oy) {
  x0 = std::max(x0, 0);
  y0 = std::max(y0, 0);
  x1 = std::min(x1, L.width);
  y1 = std::min(y1, L.height);
  if (x1 <= x0 || y1 <= y0) return false;
  const int seg_w = L.interval * L.mcu_w, per_row = L.mcus_per_row / L.interval;
  const int s0 = x0 / seg_w, s1 = (x1 - 1) / seg_w;
  const int m0 = y0 / L.mcu_h, m1 = (y1 - 1) / L.mcu_h;
  const long first = static_cast<long>(m0) * per_row + s0, last = static_cast<long>(m1) * per_row + s1;
  const int w = std::min(L.width, (s1 + 1) * seg_w) - s0 * seg_w;
  const int h = std::min(L.height, (m1 + 1) * L.mcu_h) - m0 * L.mcu_h;
  out->assign(p, p + L.data);
  (*out)[L.sof_dims] = static_cast<std::uint8_t>(h >> 8);
  (*out)[L.sof_dims + 1] = static_cast<std::uint8_t>(h & 0xFF);
  (*out)[L.sof_dims + 2] = static_cast<std::uint8_t>(w >> 8);
  (*out)[L.sof_dims + 3] = static_cast<std::uint8_t>(w & 0xFF);
  // Walk the segments in order up to the last one needed (segment k starts
  // after the k-th RST marker, numbered (k - 1) mod 8); raster order is the
  // cut's own order, so each needed one is appended as it is reached.
  std::size_t at = L.data;
  int copied = 0;
  for (long k = 0;; ++k) {
    const std::size_t mark = next_marker(p, n, at);
    if (mark >= n) return false;
    const int s = static_cast<int>(k % per_row);
    if (k >= first && s >= s0 && s <= s1) {
      if (copied > 0) {
        out->push_back(0xFF);
        out->push_back(static_cast<std::uint8_t>(0xD0 + ((copied - 1) & 7)));
      }
      out->insert(out->end(), p + at, p + mark);
      ++copied;
    }
    if (k == last) break;
    const std::uint8_t m = p[mark + 1];
    if (m < 0xD0 || m > 0xD7 || (m & 7) != (k & 7)) return false;
    at = mark + 2;
  }
  out->push_back(0xFF);
  out->push_back(0xD9);
  *ox = s0 * seg_w;
  *oy = m0 * L.mcu_h;
  return true;
}

int restart_interval_for(int width, int mcu_w) {
  const int mcus = (width + mcu_w - 1) / mcu_w;
  int best = 1;
  for (int r = 1; r * mcu_w <= 64 && r <= mcus; ++r) {
    if (mcus % r == 0) best = r;
  }
  return best;
}

}  // namespace stoker::detail
