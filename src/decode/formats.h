// Every file format stoker knows, in one table: its magic bytes (which
// decide: sniff_format never trusts a name), the suffixes that name it in
// folders and shards, and what its decoder produces and can do. Folder
// listing, the shard index, the sample maker, the packer and the decoder
// read this table; there is no other list of suffixes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace stoker::detail {

enum class Format { kUnknown, kJpeg, kPng, kNpy, kWebp, kTiff, kBmp, kGif, kOther };

struct FormatInfo {
  Format format;
  const char* name;                          // "JPEG"
  std::vector<std::string_view> suffixes;    // lower case, without the dot; the first is written by `stoker pack`
  bool decoded;                              // stoker has a decoder (else: listed, and counted as unsupported)
  bool sample_member;                        // a shard member of this suffix holds the sample's data
  bool in_folders;                           // an image folder lists it (torchvision's IMG_EXTENSIONS)
  // What its decoder can do (src/decode/README.md):
  bool region;        // decodes only (the strips, tiles or rows of) a region, not the whole image
  bool dct_scale;     // decodes at 1/8..7/8 scale (DecodeScale::kAuto)
  bool restart_cut;   // with restart markers, starts at the segment a region needs
};

// The table, in priority order (a shard sample with two image members takes
// the first format's).
const std::vector<FormatInfo>& formats();
const FormatInfo& format_info(Format f);

// From the first bytes: kUnknown when none matches (never a guess).
Format sniff_format(const std::uint8_t* data, std::size_t size);

// The format a file name's suffix names (ASCII case-insensitive), or null.
const FormatInfo* format_of_name(std::string_view file_name);
// A shard member suffix ("jpg", lower case) that holds a sample's data.
bool is_sample_suffix(std::string_view suffix);
// ".jpg, .jpeg, .png, ... or .gif": the sample suffixes, for messages.
const char* sample_suffixes_text();
// "JPEG, PNG, .npy, ... or GIF": the formats stoker decodes, for messages.
const char* decoded_formats_text();
// A file an image folder lists: torchvision's IMG_EXTENSIONS, so that record
// i is ImageFolder's sample i (formats stoker cannot decode are listed and
// counted as unsupported when read).
bool is_folder_image(std::string_view file_name);

}  // namespace stoker::detail
