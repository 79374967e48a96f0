// Where a tar shard source's bytes come from: local files (pread), or a
// remote store that streams shards in as the epoch's plan needs them
// (source/remote/remote_bytes.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "source/manifest.h"
#include "source/shard_index.h"
#include "stoker/status.h"
#include "util/thread_annotations.h"

namespace stoker {
struct Stats;
}
namespace stoker::detail {
class MemoryBudget;
struct ShardOptions;
}

namespace stoker::detail {

class ShardBytes {
 public:
  virtual ~ShardBytes() = default;
  // Replaces *out with bytes [off, off + size) of shard `shard`. Thread-safe.
  virtual Status read_at(std::uint32_t shard, std::uint64_t off, std::uint64_t size,
                         std::vector<std::uint8_t>* out) const = 0;
  // One shard's part in an epoch: its first and last position of use and
  // the byte span its records used there cover.
  struct Use {
    std::uint32_t shard;
    std::size_t first, last;
    std::uint64_t lo, hi;
  };
  // Source::plan / progress / io_stats, per shard (see stoker/source.h).
  virtual bool wants_plan() const { return false; }
  virtual void plan(std::vector<Use> /*uses, by first use*/, std::size_t /*from*/) const {}
  virtual void plan_ahead(std::vector<Use> /*the next epoch's uses, by first use*/) const {}
  virtual void progress(std::size_t /*done*/) const {}
  virtual void io_stats(Stats* /*s*/) const {}
  virtual void use_memory(const std::shared_ptr<MemoryBudget>& /*budget*/) const {}
  // The local file holding shard `shard`, "" when it is not local.
  virtual std::string local_path(std::uint32_t /*shard*/) const { return ""; }
  // Shard `shard`'s index, read when a source opened from a manifest first
  // needs it (source/manifest.h). Thread-safe.
  virtual Status load_index(std::uint32_t shard, ShardIndex* out) const;
};

// Local files: one pread per read, through a bounded pool of open file
// descriptors (least recently used closed first), so a source of 100k
// shards opens under any RLIMIT_NOFILE. A shard reopened is checked against
// the file the loader indexed (device, inode, size, mtime): a replaced or
// changed shard is an IOError naming it, never another file's bytes.
// Shards named by a manifest are opened first when first read: their size
// is the manifest's until then (another size is a stale manifest,
// kUnavailable naming it), their identity taken at that open.
class LocalShardBytes final : public ShardBytes {
 public:
  // A shard file as the loader indexed it (kept per shard, without the path).
  struct Identity {
    std::uint64_t dev = 0, ino = 0, size = 0;
    std::int64_t mtime_ns = 0;
    bool pinned = true;  // false: only `size` is known (from the manifest) until the first open
  };
  // A shard given by path.
  struct File : Identity {
    std::string path;
  };
  // `fds`: shards already open (-1: not), taken into the pool (closed past
  // max_open). max_open 0: a quarter of RLIMIT_NOFILE's soft limit, within
  // 16..1024. `manifest`: the manifest the files came from (messages), "" for none.
  LocalShardBytes(std::vector<File> files, std::vector<int> fds, std::size_t max_open = 0, std::string manifest = "");
  // The shards a manifest names (`paths`: its rows, ShardNames' manifest
  // form), none opened yet: each one's size is its row's until its first
  // open pins it. No path is copied: a shard's path is made from its row
  // when the shard is opened or named in a message.
  LocalShardBytes(ShardNames paths, std::size_t max_open, std::string manifest);
  ~LocalShardBytes() override;
  Status read_at(std::uint32_t shard, std::uint64_t off, std::uint64_t size, std::vector<std::uint8_t>* out) const override;
  std::string local_path(std::uint32_t shard) const override { return paths_[shard]; }
  // Loads or builds the shard's `.idx` as open_shards() does (`opt`'s labels and index_dir).
  void set_index_options(const ShardOptions& opt);
  Status load_index(std::uint32_t shard, ShardIndex* out) const override;
  void io_stats(Stats* s) const override;

  std::size_t max_open() const { return max_open_; }
  // Open descriptors now, and opens so far (the construction's included).
  std::size_t open_now() const;
  std::uint64_t opens() const;

  // The limit above for this process.
  static std::size_t default_max_open();

 private:
  struct Slot {
    int fd = -1;
    std::uint32_t users = 0;  // reads in flight
    std::uint64_t used = 0;   // tick of the last use (the LRU key while idle)
  };
  Status acquire(std::uint32_t shard, int* fd) const EXCLUDES(mu_);
  void release(std::uint32_t shard) const EXCLUDES(mu_);
  void evict_locked() const REQUIRES(mu_);

  const ShardNames paths_;
  mutable std::vector<Identity> ids_;  // NOTE: an unpinned shard's identity is written under mu_ at its first open
  const std::size_t max_open_;
  const std::string manifest_;
  std::string labels_ = "cls", index_dir_;
  mutable Mutex mu_;
  mutable std::vector<Slot> slots_ GUARDED_BY(mu_);
  mutable std::set<std::pair<std::uint64_t, std::uint32_t>> idle_ GUARDED_BY(mu_);  // (used, shard), open and unused
  mutable std::size_t open_ GUARDED_BY(mu_) = 0;
  mutable std::uint64_t tick_ GUARDED_BY(mu_) = 0;
  mutable std::uint64_t opens_ GUARDED_BY(mu_) = 0;
};

}  // namespace stoker::detail
