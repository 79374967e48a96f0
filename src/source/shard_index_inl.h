// build_index's template body (included by shard_index.h).
#pragma once

#include <charconv>

#include "decode/formats.h"
#include "source/tar.h"

namespace stoker::detail {

// Parses label text (a .cls member, or the field of a .json member).
Status parse_label(const std::string& labels, const std::string& text, std::int64_t* label);

template <typename ReadAt>
Status build_index(ReadAt&& read_at, std::uint64_t file_size, const std::string& shard, const std::string& labels,
                   ShardIndex* index) {
  std::vector<TarMember> members;
  Status s = scan_tar(read_at, file_size, shard, &members);
  if (!s.ok()) return s;
  index->shard_size = file_size;
  index->labels = labels;
  index->records.clear();
  const std::string label_suffix = labels == "cls" ? "cls" : "json";
  std::size_t i = 0;
  while (i < members.size()) {
    std::string key, suffix;
    if (!split_key(members[i].name, &key, &suffix)) {  // no extension: not part of a sample
      ++i;
      continue;
    }
    IndexRecord r;
    r.key = key;
    const TarMember* image = nullptr;
    const TarMember* label = nullptr;
    std::string names;
    for (; i < members.size(); ++i) {
      std::string k, sfx;
      if (!split_key(members[i].name, &k, &sfx)) continue;
      if (k != key) break;
      names += (names.empty() ? "." : ", .") + sfx;
      r.members.push_back({sfx, members[i].offset, members[i].size});
      if (!image && is_sample_suffix(sfx)) {
        image = &members[i];
        r.suffix = sfx;
      }
      if (!label && sfx == label_suffix) label = &members[i];
    }
    if (!image) {
      r.error = std::string("sample has no image member (") + sample_suffixes_text() + "); members: " + names;
    } else {
      r.offset = image->offset;
      r.size = image->size;
    }
    if (label && r.error.empty()) {
      if (label->size > (1u << 20)) {
        r.error = "label member ." + label_suffix + " of " + std::to_string(label->size) + " bytes";
      } else {
        std::string text(static_cast<std::size_t>(label->size), '\0');
        if (read_at(reinterpret_cast<std::uint8_t*>(text.data()), text.size(), label->offset) !=
            static_cast<long long>(text.size())) {
          return Status::IOError(shard + ": offset " + std::to_string(label->offset) + ": cannot read a label");
        }
        Status ls = parse_label(labels, text, &r.label);
        if (!ls.ok()) r.error = ls.message();
      }
    }
    index->records.push_back(std::move(r));
  }
  return Status::Ok();
}

}  // namespace stoker::detail
