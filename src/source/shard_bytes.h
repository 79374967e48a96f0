// Where a tar shard source's bytes come from: local files (pread), or a
// remote store that streams shards in as the epoch's plan needs them
// (source/remote/remote_bytes.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "stoker/status.h"

namespace stoker {
struct Stats;
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
  // The local file holding shard `shard`, "" when it is not local.
  virtual std::string local_path(std::uint32_t /*shard*/) const { return ""; }
};

// Today's local files: one fd per shard, one pread per read. Takes the fds.
class LocalShardBytes final : public ShardBytes {
 public:
  LocalShardBytes(std::vector<std::string> paths, std::vector<int> fds);
  ~LocalShardBytes() override;
  Status read_at(std::uint32_t shard, std::uint64_t off, std::uint64_t size, std::vector<std::uint8_t>* out) const override;
  std::string local_path(std::uint32_t shard) const override { return paths_[shard]; }

 private:
  std::vector<std::string> paths_;
  std::vector<int> fds_;
};

}  // namespace stoker::detail
