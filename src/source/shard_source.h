// Internals of the tar shard source, exposed for the CLI and tests.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "source/manifest.h"
#include "source/shard_bytes.h"
#include "source/shard_index.h"
#include "stoker/source.h"
#include "stoker/status.h"

namespace stoker::detail {

struct ShardOptions {
  std::string labels = "cls";  // "cls" or "json:<field>"
  // Non-empty: a sidecar that must be (re)built is written here, never next
  // to the shard, and looked up here when the one beside the shard is stale.
  std::string index_dir;
  // Local shards: descriptors open at once (0: LocalShardBytes::default_max_open()).
  std::size_t max_open = 0;
  // Sources opened from a manifest: records of shard indexes held in memory
  // at once (least recently used shards evicted past it; the one being read
  // always kept). About 72 bytes each (two members): 2^19 is ~40 MiB.
  std::size_t index_records = std::size_t{1} << 19;
  // Streaming sources' plans (plan_uses): positions walked exactly at each
  // end of a shuffled epoch; the rest is bounded per window.
  std::size_t plan_walk = std::size_t{1} << 16;
};

// Source::plan's summary for a streaming store: per shard (shard s holds
// records [starts[s], starts[s + 1]), the last one up to `records`), its
// first and last position of use from `from` on and the byte span `span`
// widens *lo, *hi to for its records used there (records rec, rec + stride,
// ... up to last); by first use (ties by shard). From seq.pieces(): a
// shuffled epoch's first and last `walk` positions are exact, a shard used
// between them is given the whole window (shuffle_window) or stretch (a
// full shuffle) that holds it, so a plan costs O(shards + walk) at any
// record count. An order without pieces (a list) is walked position by
// position, as is any order of at most 2 * walk positions.
using RecordSpan = std::function<void(std::uint32_t shard, std::size_t rec, std::size_t last, std::size_t stride,
                                      std::uint64_t* lo, std::uint64_t* hi)>;
std::vector<ShardBytes::Use> plan_uses(const RecordOrder& seq, std::size_t from, std::size_t walk,
                                       const std::vector<std::size_t>& starts, std::size_t records,
                                       const RecordSpan& span);

// Loads `<shard>.idx` when it matches the shard (size, mtime, labels,
// checksum); otherwise builds it from the tar and writes it next to the shard
// (atomically) when the folder is writable, else keeps it in memory only.
Status load_or_build_index(const std::string& shard, int fd, const ShardOptions& opt, ShardIndex* index);

// Writes `<shard>.idx` for `index` atomically, taking the shard's current
// size and mtime. Returns an error when the folder is not writable.
Status write_index_file(const std::string& shard, ShardIndex* index, const std::string& index_dir = "");

// "a-{000..003}.tar" -> a-000.tar ... a-003.tar; "{a,b}" lists. Throws Error.
std::vector<std::string> expand_braces(const std::string& pattern);
// Braces, then globs (sorted). Throws Error when a glob matches nothing.
std::vector<std::string> expand_shard_spec(const std::string& spec);
// A path ending in .tar or .manifest, a brace or glob pattern, a URL or a pipe: command.
bool looks_like_shards(const std::string& spec);

// Where a shard's sidecar lives in index_dir: the shard's absolute path (or
// URL) with '/' spelled '%'; next to it when index_dir is empty.
std::string index_path(const std::string& shard, const std::string& index_dir);

// The tar shard source over shards already indexed, reading through `bytes`.
std::unique_ptr<Source> make_shard_source(std::vector<std::string> names, std::vector<ShardIndex> indexes,
                                          std::unique_ptr<ShardBytes> bytes, std::size_t plan_walk = ShardOptions{}.plan_walk);

// The tar shard source of a manifest's shards (source/manifest.h): shard s
// holds counts[s] records and is sizes[s] bytes; its index is read through
// bytes->load_index() when a record of it is first needed, and indexes past
// `index_records` records are evicted (least recently used first).
std::unique_ptr<Source> make_manifest_shard_source(ShardNames names, const std::vector<std::uint64_t>& counts,
                                                   std::vector<std::uint64_t> sizes, std::string manifest,
                                                   std::size_t index_records, std::unique_ptr<ShardBytes> bytes,
                                                   std::size_t plan_walk = ShardOptions{}.plan_walk);

// http(s)://, s3:// and pipe: shards (source/remote/remote_shards.cc).
std::unique_ptr<Source> open_remote_shards(const std::vector<std::string>& specs, const ShardOptions& opt,
                                           const RemoteOptions& remote);

}  // namespace stoker::detail
