#include "decode/bmp.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>

namespace stoker::detail {
namespace {

std::uint32_t le16(const std::uint8_t* p) { return std::uint32_t{p[0]} | (std::uint32_t{p[1]} << 8); }
std::uint32_t le32(const std::uint8_t* p) {
  return std::uint32_t{p[0]} | (std::uint32_t{p[1]} << 8) | (std::uint32_t{p[2]} << 16) | (std::uint32_t{p[3]} << 24);
}

std::string hex(std::uint32_t v) {
  char s[16];
  std::snprintf(s, sizeof(s), "0x%x", v);
  return s;
}

constexpr std::uint32_t kRaw = 0, kRle8 = 1, kRle4 = 2, kBitfields = 3;

}  // namespace

Status BmpDecoder::open(const std::uint8_t* data, std::size_t size, std::uint64_t max_pixels, int* width,
                        int* height) {
  if (size < 18) return Status::Corrupt("BMP: truncated header (" + std::to_string(size) + " bytes)");
  std::uint64_t offset = le32(data + 10);
  const std::uint32_t header_size = le32(data + 14);
  if (header_size != 12 && header_size != 40 && header_size != 64 && header_size != 108 && header_size != 124) {
    return Status::Unsupported("BMP: info header of " + std::to_string(header_size) +
                               " bytes (readable: 12, 40, 64, 108 or 124)");
  }
  if (size < 14 + std::size_t{header_size}) {
    return Status::Corrupt("BMP: truncated header (" + std::to_string(size) + " bytes, the header ends at " +
                           std::to_string(14 + header_size) + ")");
  }
  const std::uint8_t* h = data + 18;  // the info header after its size field
  std::uint64_t w = 0, ht = 0;
  std::uint32_t bits = 0, compression = kRaw, colors = 0;
  std::size_t padding = 4;  // bytes per palette entry
  top_down_ = false;
  if (header_size == 12) {
    w = le16(h);
    ht = le16(h + 2);
    bits = le16(h + 6);
    padding = 3;
  } else {
    // NOTE: as PIL: a height whose top byte is 0xFF is negative (top-down rows).
    top_down_ = h[7] == 0xFF;
    w = le32(h);
    ht = top_down_ ? (std::uint64_t{1} << 32) - le32(h + 4) : le32(h + 4);
    bits = le16(h + 10);
    compression = le32(h + 12);
    colors = le32(h + 28);
  }
  if (w == 0 || ht == 0) {
    return Status::Corrupt("BMP: invalid size " + std::to_string(w) + "x" + std::to_string(ht));
  }
  if (w * ht > max_pixels) {
    return Status::ResourceExhausted("image of " + std::to_string(w) + "x" + std::to_string(ht) +
                                     " pixels exceeds max_image_pixels=" + std::to_string(max_pixels));
  }
  if (w > 0x7fffffff || ht > 0x7fffffff) {
    return Status::Corrupt("BMP: invalid size " + std::to_string(w) + "x" + std::to_string(ht));
  }
  if (bits != 1 && bits != 4 && bits != 8 && bits != 16 && bits != 24 && bits != 32) {
    return Status::Unsupported("BMP: " + std::to_string(bits) + " bits per pixel (readable: 1, 4, 8, 16, 24, 32)");
  }
  rle_ = compression == kRle8 ? 8 : compression == kRle4 ? 4 : 0;
  if (rle_ && bits > 8) {
    // NOTE: as PIL, which has no unpacker from RLE's indices to RGB.
    return Status::Unsupported("BMP: RLE" + std::to_string(rle_) + " compression of " + std::to_string(bits) +
                               "-bit pixels (readable: RLE of 1, 4 or 8-bit palette images)");
  }
  if (!rle_ && compression != kRaw && compression != kBitfields) {
    return Status::Unsupported("BMP: compression " + std::to_string(compression) +
                               (compression == 4 ? " (JPEG)" : compression == 5 ? " (PNG)" : "") +
                               " is not supported");
  }
  const std::uint64_t n_colors = colors ? colors : std::uint64_t{1} << bits;
  // NOTE: as PIL: a data offset right after the header skips a palette the
  // writer forgot to leave room for.
  if (offset == 14 + std::uint64_t{header_size} && bits <= 8) offset += 4 * n_colors;
  std::size_t pos = 14 + header_size;  // where PIL's read goes on
  bits_ = static_cast<int>(bits);
  rgb565_ = false;
  r_byte_ = 2, g_byte_ = 1, b_byte_ = 0;  // BGR(X)
  if (compression == kBitfields) {
    std::uint32_t r, g, b, a = 0;
    if (header_size == 40) {  // the masks follow the header
      if (size < pos + 12) return Status::Corrupt("BMP: truncated bit fields");
      r = le32(data + pos), g = le32(data + pos + 4), b = le32(data + pos + 8);
      pos += 12;
    } else {
      r = le32(h + 36), g = le32(h + 40), b = le32(h + 44), a = le32(h + 48);
    }
    bool known = true;
    if (bits == 32 && r == 0xFF0000 && g == 0xFF00 && b == 0xFF && (a == 0 || a == 0xFF000000)) {
      // BGRX, BGRA
    } else if (bits == 32 && r == 0 && g == 0 && b == 0 && a == 0) {
      // PIL reads no masks as BGRA
    } else if (bits == 32 && r == 0xFF000000 && g == 0xFF0000 && b == 0xFF00 && (a == 0 || a == 0xFF)) {
      r_byte_ = 3, g_byte_ = 2, b_byte_ = 1;  // XBGR, ABGR
    } else if (bits == 32 && r == 0xFF && g == 0xFF00 && b == 0xFF0000 && a == 0xFF000000) {
      r_byte_ = 0, g_byte_ = 1, b_byte_ = 2;  // RGBA
    } else if (bits == 24 && r == 0xFF0000 && g == 0xFF00 && b == 0xFF) {
      // BGR
    } else if (bits == 16 && r == 0xF800 && g == 0x7E0 && b == 0x1F) {
      rgb565_ = true;
    } else if (bits == 16 && r == 0x7C00 && g == 0x3E0 && b == 0x1F) {
      // 5-5-5
    } else {
      known = false;
    }
    if (!known) {
      return Status::Unsupported("BMP: bit fields r=" + hex(r) + " g=" + hex(g) + " b=" + hex(b) + " a=" + hex(a) +
                                 " at " + std::to_string(bits) + " bits per pixel are not supported");
    }
  }
  if (bits <= 8) {
    if (n_colors > 256) {
      return Status::Unsupported("BMP: a palette of " + std::to_string(n_colors) + " colours (at most 256)");
    }
    const std::size_t avail = size > pos ? size - pos : 0;
    const std::size_t n_bytes = std::min(avail, static_cast<std::size_t>(n_colors) * padding);
    const std::uint8_t* p = data + pos;
    palette_.reset();
    for (std::size_t i = 0; i < n_bytes / padding; ++i) {
      palette_.set(static_cast<int>(i), p[i * padding + 2], p[i * padding + 1], p[i * padding]);
    }
    // NOTE: as PIL: a palette that is all gray ramp (or, of two entries,
    // black then white) is dropped and the pixels read as mode "L" (8 bits)
    // or "1" (1 bit), whatever the file's depth.
    bool gray = true;
    for (std::size_t i = 0; i < n_colors && gray; ++i) {
      const std::uint8_t v = n_colors == 2 ? (i == 0 ? 0 : 255) : static_cast<std::uint8_t>(i);
      gray = i * padding + 3 <= n_bytes && p[i * padding] == v && p[i * padding + 1] == v && p[i * padding + 2] == v;
    }
    if (gray) bits_ = n_colors == 2 ? 1 : 8;
    if (rle_ && bits_ == 1) {
      // NOTE: as PIL: its mode "1" has no unpacker from RLE's indices.
      return Status::Unsupported("BMP: RLE" + std::to_string(rle_) + " with a black-and-white palette");
    }
    pos += n_bytes;
  }
  if (offset == 0) offset = pos;
  data_ = data;
  size_ = size;
  if (rle_) {
    // RLE: every pixel an index (PIL reads the expanded data as 8-bit "P"
    // or "L"); how far the data reaches is known only once it is expanded.
    if (offset >= size) {
      return Status::Corrupt("BMP: truncated: the RLE data starts at byte " + std::to_string(offset) +
                             ", past the end of the file (" + std::to_string(size) + " bytes)");
    }
    bits_ = 8;
    pixels_ = data + offset;
    *width = width_ = static_cast<int>(w);
    *height = height_ = static_cast<int>(ht);
    return Status::Ok();
  }
  stride_ = static_cast<std::size_t>(((w * bits + 31) >> 3) & ~std::uint64_t{3});
  const std::uint64_t row_bytes = (w * static_cast<std::uint64_t>(bits_) + 7) / 8;
  if (row_bytes > stride_) {
    return Status::Unsupported("BMP: a " + std::to_string(bits) +
                               "-bit image whose palette is a gray ramp (read as 8-bit pixels, as PIL reads it, its "
                               "rows are too short)");
  }
  // (overflow-safe: stride_ * (ht - 1) is bounded by the file's size first)
  const bool fits = stride_ == 0 || ht - 1 <= (size - std::min<std::uint64_t>(size, offset + row_bytes)) / stride_;
  const std::uint64_t need = fits ? offset + stride_ * (ht - 1) + row_bytes : UINT64_MAX;
  if (!fits || need > size) {
    return Status::Corrupt("BMP: truncated: the pixel data (" + std::to_string(ht) + " rows of " +
                           std::to_string(stride_) + " bytes from byte " + std::to_string(offset) +
                           ") runs past the end of the file (" + std::to_string(size) + " bytes)");
  }
  pixels_ = data + offset;
  *width = width_ = static_cast<int>(w);
  *height = height_ = static_cast<int>(ht);
  return Status::Ok();
}

// PIL's BmpRleDecoder (Pillow 9.4), byte for byte: a flat run of indices
// (`n` long) grows by encoded runs (clipped at the row's end), absolute runs
// (not clipped; RLE4 reads n / 2 bytes of two pixels each, so an odd run
// loses its last pixel), end-of-line (zeros to the next row), delta (right +
// up rows of zeros, (right, up) read from the two bytes after the delta's
// own, as Pillow reads them) until it holds width x height indices; end-of-bitmap or
// the end of the data before that is "not enough image data" in PIL.
// Indices past the image are dropped, as PIL's raw decoder ignores them.
Status BmpDecoder::expand_rle() {
  const std::uint64_t w = static_cast<std::uint64_t>(width_), total = w * static_cast<std::uint64_t>(height_);
  indices_.assign(static_cast<std::size_t>(total), 0);
  std::uint64_t n = 0, x = 0;
  std::size_t pos = static_cast<std::size_t>(pixels_ - data_);
  auto put = [&](std::uint8_t v) {
    if (n < total) indices_[static_cast<std::size_t>(n)] = v;
    ++n;
  };
  while (n < total) {
    if (size_ - pos < 2) break;
    unsigned count = data_[pos], b = data_[pos + 1];
    pos += 2;
    if (count) {  // an encoded run
      if (x + count > w) count = static_cast<unsigned>(x < w ? w - x : 0);
      for (unsigned i = 0; i < count; ++i) {
        put(static_cast<std::uint8_t>(rle_ == 8 ? b : (i % 2 == 0 ? b >> 4 : b & 15)));
      }
      x += count;
    } else if (b == 0) {  // end of line
      n = (n + w - 1) / w * w;
      x = 0;
    } else if (b == 1) {  // end of bitmap
      break;
    } else if (b == 2) {  // delta
      // NOTE: as Pillow 9.4, which reads the delta's two bytes, drops them
      // and takes the next two as (right, up) (BmpRleDecoder reads twice).
      if (size_ - pos < 4) break;
      const std::uint64_t right = data_[pos + 2], up = data_[pos + 3];
      pos += 4;
      n += right + up * w;
      x = n % w;
    } else {  // an absolute run of b pixels
      const std::size_t want = rle_ == 8 ? b : b / 2;
      const std::size_t got = std::min(want, size_ - pos);
      for (std::size_t i = 0; i < got; ++i) {
        const std::uint8_t v = data_[pos + i];
        if (rle_ == 8) {
          put(v);
        } else {
          put(static_cast<std::uint8_t>(v >> 4));
          put(static_cast<std::uint8_t>(v & 15));
        }
      }
      pos += got;
      if (got < want) break;
      x += b;
      if (pos % 2 != 0) ++pos;  // NOTE: as PIL: aligned by the offset in the file, which may pass its end
      if (pos > size_) pos = size_;
    }
  }
  if (n < total) {
    return Status::Corrupt("BMP: the RLE" + std::to_string(rle_) + " data ends after " + std::to_string(n) +
                           " of the image's " + std::to_string(total) + " pixels (not enough image data)");
  }
  return Status::Ok();
}

Status BmpDecoder::decode(const Box& r, ImageBuffer* buf, ImageView* view) {
  if (rle_) {
    if (Status st = expand_rle(); !st.ok()) return st;
  }
  buf->reset(r.width, r.height);
  const int bytes = bits_ / 8;
  const std::size_t stride = rle_ ? static_cast<std::size_t>(width_) : stride_;
  const std::uint8_t* first = rle_ ? indices_.data() : pixels_;
  for (int oy = 0; oy < r.height; ++oy) {
    const int y = r.y + oy;
    const std::uint8_t* row = first + stride * static_cast<std::size_t>(top_down_ ? y : height_ - 1 - y);
    std::uint8_t* out = buf->row(oy);
    for (int x = r.x; x < r.x + r.width; ++x, out += 3) {
      switch (bits_) {
        case 1: std::copy_n(palette_[(row[x >> 3] >> (7 - (x & 7))) & 1], 3, out); break;
        case 4: std::copy_n(palette_[(x & 1) ? row[x >> 1] & 15 : row[x >> 1] >> 4], 3, out); break;
        case 8: std::copy_n(palette_[row[x]], 3, out); break;
        case 16: {
          const std::uint32_t v = le16(row + 2 * static_cast<std::size_t>(x));
          if (rgb565_) {
            out[0] = pil_scale((v >> 11) & 31, 31), out[1] = pil_scale((v >> 5) & 63, 63);
          } else {
            out[0] = pil_scale((v >> 10) & 31, 31), out[1] = pil_scale((v >> 5) & 31, 31);
          }
          out[2] = pil_scale(v & 31, 31);
          break;
        }
        default: {
          const std::uint8_t* p = row + static_cast<std::size_t>(bytes) * static_cast<std::size_t>(x);
          out[0] = p[r_byte_], out[1] = p[g_byte_], out[2] = p[b_byte_];
        }
      }
    }
  }
  *view = ImageView{buf->pixels.data(), r.width, r.height, buf->stride};
  return Status::Ok();
}

}  // namespace stoker::detail
