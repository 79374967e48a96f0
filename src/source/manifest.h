// The data set manifest: one file beside a set of tar shards saying what
// they hold (each shard's name, record count and byte size, a summary of the
// samples' members, the pack options), so that a loader knows the epoch's
// size and every shard's place in it from one read, and reads a shard's
// `.idx` only when it first reads that shard (source/shard_source.cc). Text,
// so that it can be read with `less`:
//
//   stoker-manifest 1
//   labels cls                        (or json:<field>: the labels the counts were taken with)
//   pack <the pack options, escaped>  ("-" when written by `stoker manifest`)
//   records 300                       (the sum of the shards' counts)
//   members cls=300 jpg=300 json=300  (each member suffix and how many samples hold it; "-": none)
//   shards 3
//   <name>\t<records>\t<bytes>        (one line per shard, in the data set's order)
//   ...
//   checksum <16 hex digits: FNV-1a 64 of every byte above>
//
// A shard's name is relative to the manifest's folder (an absolute path is
// kept). Names escape '\\', '\t' and '\n'. docs/manifest.md is the user's page.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "source/shard_index.h"
#include "stoker/status.h"

namespace stoker::detail {

inline constexpr int kManifestVersion = 1;
// `<stem>.manifest`: see manifest_beside().
inline constexpr const char kManifestSuffix[] = ".manifest";

struct ManifestShard {
  std::string name;
  std::uint64_t records = 0;
  std::uint64_t bytes = 0;
  bool operator==(const ManifestShard&) const = default;
};

struct Manifest {
  std::string labels = "cls";
  std::string pack = "-";
  std::vector<std::pair<std::string, std::uint64_t>> members;  // suffix, samples holding it; sorted by suffix
  std::vector<ManifestShard> shards;
  std::uint64_t records() const;
  bool operator==(const Manifest&) const = default;
};

std::string serialize_manifest(const Manifest& m);
// Strict: a malformed line, a count that does not add up, a missing or wrong
// checksum (a truncated file) fail with kCorrupt naming `path` and the reason.
Status parse_manifest(const std::string& text, const std::string& path, Manifest* m);
// Reads and parses a local manifest file.
Status read_manifest(const std::string& path, Manifest* m);

// The manifest a brace/glob/printf pattern's shards have beside them: the
// pattern's folder, `<stem>.manifest`, the stem being the file name up to its
// first '{', '*', '?', '[' or '%' with trailing '-', '_' and '.' cut
// ("out/train-{000..099}.tar" -> "out/train.manifest"; "shards" when empty).
std::string manifest_beside(const std::string& pattern);
// A shard's path: `name` relative to the manifest's folder, unless absolute.
std::string manifest_shard_path(const std::string& manifest_path, const std::string& name);
// How a shard is named in a manifest at `manifest_path`: relative to its folder when under it.
std::string manifest_shard_name(const std::string& manifest_path, const std::string& shard_path);

// The manifest's row of each of `shards` (a pattern's expansion: paths or
// URLs). kInvalidArgument naming the manifest and the first shard it does
// not list (a shard added since it was written).
Status manifest_rows(const Manifest& m, const std::string& manifest_path, const std::vector<std::string>& shards,
                     std::vector<std::size_t>* rows);

// Adds shard `name` (`bytes` long, indexed as `index`) to `m`: its row and its samples' members.
void manifest_add_shard(Manifest* m, const std::string& name, std::uint64_t bytes, const ShardIndex& index);

// Shards' names (paths or URLs) by index: a list, or a manifest's rows read
// where they lie, so that a data set of 10^5 shards opened from its
// manifest keeps no string per shard beyond the manifest's own table.
// Immutable; copies share the manifest and the rows.
class ShardNames {
 public:
  ShardNames() = default;
  ShardNames(std::vector<std::string> names)  // NOLINT: a list is a ShardNames
      : list_(std::make_shared<const std::vector<std::string>>(std::move(names))) {}
  // Shard k is manifest_shard_path(base, m's row rows[k]); rows empty: row k.
  // `base` is the manifest's path or URL (the shown form, or the one fetched).
  ShardNames(std::shared_ptr<const Manifest> m, std::string base, std::vector<std::uint32_t> rows)
      : manifest_(std::move(m)),
        base_(std::move(base)),
        rows_(std::make_shared<const std::vector<std::uint32_t>>(std::move(rows))) {}
  std::size_t size() const {
    return manifest_ ? (rows_->empty() ? manifest_->shards.size() : rows_->size()) : list_ ? list_->size() : 0;
  }
  std::string operator[](std::size_t k) const {
    return manifest_ ? manifest_shard_path(base_, row(k)->name) : (*list_)[k];
  }
  // Shard k's manifest row; null for a list.
  const ManifestShard* row(std::size_t k) const {
    return manifest_ ? &manifest_->shards[rows_->empty() ? k : (*rows_)[k]] : nullptr;
  }

 private:
  // NOTE: shared, so that the copies a source and its bytes hold cost one table.
  std::shared_ptr<const std::vector<std::string>> list_;
  std::shared_ptr<const Manifest> manifest_;
  std::string base_;
  std::shared_ptr<const std::vector<std::uint32_t>> rows_;
};

}  // namespace stoker::detail
