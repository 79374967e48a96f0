// The index sidecar of a tar shard (`<shard>.idx`): one line per sample with
// the offset and size of its image member, its label and its member table
// (every member's suffix, offset and size), so that record i, or any member
// of it a schema asks for, is read with one pread. Text, so that it can be
// read with `less`.
//
//   stoker-index 3
//   shard_size 268435456
//   shard_mtime_ns 1733140000123456789
//   labels cls                       (or json:<field>)
//   records 2
//   <key>\t<suffix>\t<offset>\t<size>\t<label>\t<error>[\t<member suffix>\t<offset>\t<size>]...
//   ...
//   checksum <16 hex digits: FNV-1a 64 of every byte above>
//
// Keys, suffixes and errors escape '\\', '\t' and '\n'. An empty error field
// means the record is good; otherwise it says why reading it fails (no image
// member, bad label). An index of another version (version 1 had no member
// table; version 2 was written when only .jpg .jpeg .png .npy members held a
// sample's image, so a sample of .webp .tif .tiff .bmp or .gif was recorded
// as having none) is not read: the shard is indexed again, never misread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stoker/status.h"

namespace stoker::detail {

// One tar member of a sample: "seg.png" for <key>.seg.png.
struct IndexMember {
  std::string suffix;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  bool operator==(const IndexMember&) const = default;
};

struct IndexRecord {
  std::string key;
  std::string suffix;  // of the image member: jpg, png, npy, ...
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  std::int64_t label = -1;  // -1: the sample has no label member
  std::string error;
  std::vector<IndexMember> members;  // every member of the sample, in tar order
};

struct ShardIndex {
  std::uint64_t shard_size = 0;
  std::int64_t shard_mtime_ns = 0;
  std::string labels = "cls";  // where labels come from: "cls" or "json:<field>"
  std::vector<IndexRecord> records;
};

inline constexpr int kIndexVersion = 3;

std::string serialize_index(const ShardIndex& index);
// Strict: any malformed line, count mismatch or checksum mismatch fails.
Status parse_index(const std::string& text, ShardIndex* index);

// Groups a shard's members into samples by WebDataset's key rule and finds
// each sample's image member and label. `read_at` reads label members.
template <typename ReadAt>
Status build_index(ReadAt&& read_at, std::uint64_t file_size, const std::string& shard, const std::string& labels,
                   ShardIndex* index);

std::uint64_t fnv1a64(const char* data, std::size_t n);

// A text field of an index or manifest line: '\\', '\t' and '\n' escaped.
std::string escape_field(const std::string& s);
// False for a malformed escape.
bool unescape_field(const std::string& s, std::string* out);

}  // namespace stoker::detail

#include "source/shard_index_inl.h"
