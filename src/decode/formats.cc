#include "decode/formats.h"

#include <cstring>
#include <string>

#include "util/util.h"

namespace stoker::detail {

const std::vector<FormatInfo>& formats() {
  static const std::vector<FormatInfo> f = {
      // format, name, suffixes, decoded, sample_member, in_folders, region, dct_scale, restart_cut
      {Format::kJpeg, "JPEG", {"jpg", "jpeg"}, true, true, true, true, true, true},
      {Format::kPng, "PNG", {"png"}, true, true, true, true, false, false},
      {Format::kNpy, ".npy", {"npy"}, true, true, false, true, false, false},
      // WebP: the first frame; lossless ones cropped to a region, lossy ones decoded whole (webp.h says why).
      {Format::kWebp, "WebP", {"webp"}, true, true, true, true, false, false},
      // TIFF: the first page; only the strips or tiles a region touches.
      {Format::kTiff, "TIFF", {"tif", "tiff"}, true, true, true, true, false, false},
      // BMP: only a region's rows are read.
      {Format::kBmp, "BMP", {"bmp"}, true, true, true, true, false, false},
      // GIF: the first frame. NOTE: not listed in folders: torchvision's
      // IMG_EXTENSIONS has no .gif, and record i must be ImageFolder's sample i.
      {Format::kGif, "GIF", {"gif"}, true, true, false, false, false, false},
      // torchvision's other IMG_EXTENSIONS: listed in folders, not decoded.
      {Format::kOther, "other image", {"ppm", "pgm"}, false, false, true, false, false, false},
  };
  return f;
}

const FormatInfo& format_info(Format f) {
  static const FormatInfo kUnknownInfo{Format::kUnknown, "unknown", {}, false, false, false, false, false, false};
  for (const auto& i : formats()) {
    if (i.format == f) return i;
  }
  return kUnknownInfo;
}

Format sniff_format(const std::uint8_t* data, std::size_t size) {
  if (size >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF) return Format::kJpeg;
  static const std::uint8_t kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (size >= 8 && std::memcmp(data, kPng, 8) == 0) return Format::kPng;
  if (size >= 6 && std::memcmp(data, "\x93NUMPY", 6) == 0) return Format::kNpy;
  if (size >= 12 && std::memcmp(data, "RIFF", 4) == 0 && std::memcmp(data + 8, "WEBP", 4) == 0) return Format::kWebp;
  // Classic TIFF (42) and BigTIFF (43), either byte order.
  if (size >= 4 && ((data[0] == 'I' && data[1] == 'I' && (data[2] == 42 || data[2] == 43) && data[3] == 0) ||
                    (data[0] == 'M' && data[1] == 'M' && data[2] == 0 && (data[3] == 42 || data[3] == 43)))) {
    return Format::kTiff;
  }
  if (size >= 2 && data[0] == 'B' && data[1] == 'M') return Format::kBmp;
  if (size >= 6 && (std::memcmp(data, "GIF87a", 6) == 0 || std::memcmp(data, "GIF89a", 6) == 0)) return Format::kGif;
  return Format::kUnknown;
}

const FormatInfo* format_of_name(std::string_view name) {
  for (const auto& i : formats()) {
    for (std::string_view s : i.suffixes) {
      if (name.size() > s.size() && name[name.size() - s.size() - 1] == '.' && ends_with_nocase(name, s)) return &i;
    }
  }
  return nullptr;
}

bool is_sample_suffix(std::string_view suffix) {
  for (const auto& i : formats()) {
    if (!i.sample_member) continue;
    for (std::string_view s : i.suffixes) {
      if (suffix == s) return true;
    }
  }
  return false;
}

const char* sample_suffixes_text() {
  static const std::string text = [] {
    std::vector<std::string_view> all;
    for (const auto& i : formats()) {
      if (i.sample_member) all.insert(all.end(), i.suffixes.begin(), i.suffixes.end());
    }
    std::string t;
    for (std::size_t k = 0; k < all.size(); ++k) {
      t += k == 0 ? "." : k + 1 == all.size() ? " or ." : ", .";
      t += all[k];
    }
    return t;
  }();
  return text.c_str();
}

const char* decoded_formats_text() {
  static const std::string text = [] {
    std::vector<std::string_view> all;
    for (const auto& i : formats()) {
      if (i.decoded) all.push_back(i.name);
    }
    std::string t;
    for (std::size_t k = 0; k < all.size(); ++k) {
      t += k == 0 ? "" : k + 1 == all.size() ? " or " : ", ";
      t += all[k];
    }
    return t;
  }();
  return text.c_str();
}

bool is_folder_image(std::string_view name) {
  const FormatInfo* f = format_of_name(name);
  return f && f->in_folders;
}

}  // namespace stoker::detail
