#include <algorithm>
#include "decode/npy.h"

#include <cstdlib>
#include <cstring>

namespace stoker::detail {
namespace {

void skip_space(const std::string& s, std::size_t* i) {
  while (*i < s.size() && (s[*i] == ' ' || s[*i] == '\n')) ++*i;
}

// The value of `'key': ` in the header's Python dict literal, as raw text.
bool find_value(const std::string& hdr, const std::string& key, std::size_t* pos) {
  std::size_t k = hdr.find("'" + key + "'");
  if (k == std::string::npos) return false;
  std::size_t i = k + key.size() + 2;
  skip_space(hdr, &i);
  if (i >= hdr.size() || hdr[i] != ':') return false;
  ++i;
  skip_space(hdr, &i);
  *pos = i;
  return i < hdr.size();
}

}  // namespace

Status parse_npy_header(const std::uint8_t* data, std::size_t size, NpyHeader* h, bool check_data) {
  if (size < 10 || std::memcmp(data, "\x93NUMPY", 6) != 0) return Status::Corrupt("npy: bad magic");
  const int major = data[6];
  std::size_t len = 0, start = 0;
  if (major == 1) {
    len = data[8] | (std::size_t{data[9]} << 8);
    start = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) return Status::Corrupt("npy: truncated header");
    len = data[8] | (std::size_t{data[9]} << 8) | (std::size_t{data[10]} << 16) | (std::size_t{data[11]} << 24);
    start = 12;
  } else {
    return Status::Unsupported("npy: format version " + std::to_string(major));
  }
  if (len > size - start || len > (1u << 20)) return Status::Corrupt("npy: header runs past the end of the file");
  const std::string hdr(reinterpret_cast<const char*>(data + start), len);
  h->data_offset = start + len;
  std::size_t i;
  if (!find_value(hdr, "descr", &i) || hdr[i] != '\'') return Status::Corrupt("npy: no descr in header");
  std::size_t e = hdr.find('\'', i + 1);
  if (e == std::string::npos) return Status::Corrupt("npy: bad descr");
  h->descr = hdr.substr(i + 1, e - i - 1);
  if (!find_value(hdr, "fortran_order", &i)) return Status::Corrupt("npy: no fortran_order in header");
  h->fortran_order = hdr.compare(i, 4, "True") == 0;
  if (!find_value(hdr, "shape", &i) || hdr[i] != '(') return Status::Corrupt("npy: no shape in header");
  e = hdr.find(')', i);
  if (e == std::string::npos) return Status::Corrupt("npy: bad shape");
  h->shape.clear();
  std::size_t p = i + 1;
  while (p < e) {
    skip_space(hdr, &p);
    if (p >= e) break;
    std::uint64_t v = 0;
    bool digits = false;
    while (p < e && hdr[p] >= '0' && hdr[p] <= '9') {
      if (v > (1ULL << 40)) return Status::ResourceExhausted("npy: absurd shape in header");
      v = v * 10 + static_cast<std::uint64_t>(hdr[p] - '0');
      ++p;
      digits = true;
    }
    if (!digits) return Status::Corrupt("npy: bad shape");
    h->shape.push_back(v);
    skip_space(hdr, &p);
    if (p < e && hdr[p] == ',') ++p;
    if (h->shape.size() > 8) return Status::Unsupported("npy: more than 8 dimensions");
  }
  const std::string& d = h->descr;
  if (d.size() < 3 || (d[0] != '<' && d[0] != '>' && d[0] != '|' && d[0] != '=')) {
    return Status::Unsupported("npy: dtype '" + d + "'");
  }
  h->item_size = static_cast<std::size_t>(std::atoi(d.c_str() + 2));
  if (h->item_size == 0 || h->item_size > 16) return Status::Unsupported("npy: dtype '" + d + "'");
  std::uint64_t bytes = h->item_size;
  for (auto v : h->shape) {
    if (v != 0 && bytes > (1ULL << 48) / v) return Status::ResourceExhausted("npy: absurd shape in header");
    bytes *= v;
  }
  h->data_bytes = bytes;
  if (check_data && bytes > size - h->data_offset) {
    return Status::Corrupt("npy: truncated: the array needs " + std::to_string(bytes) +
                           " bytes, the file has " + std::to_string(size - h->data_offset));
  }
  return Status::Ok();
}

Status NpyDecoder::open(const std::uint8_t* data, std::size_t size, std::uint64_t max_pixels, int* width,
                        int* height) {
  NpyHeader h;
  Status s = parse_npy_header(data, size, &h, /*check_data=*/false);
  if (!s.ok()) return s;
  if (h.descr != "|u1" && h.descr != "<u1" && h.descr != ">u1" && h.descr != "=u1") {
    return Status::Unsupported("npy image must be uint8, got dtype '" + h.descr + "'");
  }
  if (h.fortran_order) return Status::Unsupported("npy image in Fortran order");
  const auto& sh = h.shape;
  std::uint64_t H = 0, W = 0, C = 1;
  planar_ = false;
  if (sh.size() == 2) {
    H = sh[0], W = sh[1];
  } else if (sh.size() == 3 && (sh[2] == 1 || sh[2] == 3 || sh[2] == 4)) {
    H = sh[0], W = sh[1], C = sh[2];
  } else if (sh.size() == 3 && (sh[0] == 1 || sh[0] == 3)) {
    C = sh[0], H = sh[1], W = sh[2];
    planar_ = true;
  } else {
    return Status::Unsupported("npy array of this shape is not an image (want HxW, HxWxC or CxHxW)");
  }
  if (H == 0 || W == 0) return Status::Corrupt("npy image of zero size");
  if (H > 0x7fffffff || W > 0x7fffffff || H * W > max_pixels) {
    return Status::ResourceExhausted("npy image of " + std::to_string(W) + "x" + std::to_string(H) +
                                     " pixels exceeds max_image_pixels=" + std::to_string(max_pixels));
  }
  if (h.data_bytes > size - h.data_offset) {
    return Status::Corrupt("npy: truncated: the array needs " + std::to_string(h.data_bytes) + " bytes, the file has " +
                           std::to_string(size - h.data_offset));
  }
  pixels_ = data + h.data_offset;
  width_ = static_cast<int>(W);
  height_ = static_cast<int>(H);
  channels_ = static_cast<int>(C);
  *width = width_;
  *height = height_;
  return Status::Ok();
}

Status NpyDecoder::decode(const Box& r, ImageBuffer* buf, ImageView* view) {
  buf->reset(r.width, r.height);
  const std::size_t W = static_cast<std::size_t>(width_), plane = W * static_cast<std::size_t>(height_);
  for (int y = 0; y < r.height; ++y) {
    std::uint8_t* o = buf->row(y);
    const std::size_t row = static_cast<std::size_t>(r.y + y) * W;
    for (int x = 0; x < r.width; ++x, o += 3) {
      const std::size_t px = row + static_cast<std::size_t>(r.x + x);
      if (planar_) {
        for (int c = 0; c < 3; ++c) o[c] = pixels_[(channels_ == 1 ? 0 : static_cast<std::size_t>(c)) * plane + px];
      } else {
        const std::uint8_t* p = pixels_ + px * static_cast<std::size_t>(channels_);
        o[0] = p[0];
        o[1] = p[channels_ >= 3 ? 1 : 0];
        o[2] = p[channels_ >= 3 ? 2 : 0];
      }
    }
  }
  *view = buf->view();
  return Status::Ok();
}

Status NpyDecoder::open_mask(const std::uint8_t* data, std::size_t size, std::uint64_t max_pixels, int* width,
                             int* height) {
  NpyHeader h;
  Status s = parse_npy_header(data, size, &h);
  if (!s.ok()) return s;
  const std::string& d = h.descr;
  const bool u8 = d == "|u1" || d == "<u1" || d == ">u1" || d == "=u1";
  // NOTE: "=" is the writer's native order: little-endian on every platform stoker builds for.
  const bool u16 = d == "<u2" || d == "=u2";
  if (!u8 && !u16) return Status::Unsupported("npy mask must be uint8 or little-endian uint16, got dtype '" + d + "'");
  if (h.fortran_order) return Status::Unsupported("npy mask in Fortran order");
  const auto& sh = h.shape;
  std::uint64_t H = 0, W = 0;
  if (sh.size() == 2) {
    H = sh[0], W = sh[1];
  } else if (sh.size() == 3 && sh[2] == 1) {
    H = sh[0], W = sh[1];
  } else if (sh.size() == 3 && sh[0] == 1) {
    H = sh[1], W = sh[2];
  } else {
    return Status::Unsupported("npy mask must be HxW (or HxWx1, 1xHxW)");
  }
  if (H == 0 || W == 0) return Status::Corrupt("npy mask of zero size");
  if (H > 0x7fffffff || W > 0x7fffffff || H * W > max_pixels) {
    return Status::ResourceExhausted("npy mask of " + std::to_string(W) + "x" + std::to_string(H) +
                                     " pixels exceeds max_image_pixels=" + std::to_string(max_pixels));
  }
  pixels_ = data + h.data_offset;
  width_ = static_cast<int>(W);
  height_ = static_cast<int>(H);
  channels_ = 1;
  planar_ = false;
  bytes_per_pixel_ = u16 ? 2 : 1;
  *width = width_;
  *height = height_;
  return Status::Ok();
}

Status NpyDecoder::decode_mask(MaskBuffer* buf, int rows) const {
  buf->reset(width_, height_, bytes_per_pixel_);
  const int n = rows < 0 ? height_ : std::min(rows, height_);
  std::memcpy(buf->pixels.data(), pixels_, static_cast<std::size_t>(buf->stride) * static_cast<std::size_t>(n));
  return Status::Ok();
}

}  // namespace stoker::detail
