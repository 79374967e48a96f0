// Which record goes in which batch slot: seeded per-epoch permutation,
// sharding by rank, drop_last.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace stoker::detail {

struct OrderParams {
  std::size_t dataset_size = 0;
  std::size_t batch_size = 1;
  bool shuffle = false;
  std::uint64_t seed = 0;
  bool drop_last = false;
  int rank = 0;
  int world_size = 1;
  // First record of each shard (records of a shard contiguous); empty when
  // the source is not sharded.
  std::vector<std::size_t> shard_starts;
};

// Whether ranks split the epoch by shard: at least as many shards as ranks.
bool split_by_shard(const OrderParams& p);

// Samples per rank per epoch, after padding (no drop_last) or truncation
// (drop_last), as torch's DistributedSampler + BatchSampler count them.
std::size_t samples_per_rank(const OrderParams& p);
std::size_t batches_per_rank(const OrderParams& p);

// The record indices this rank yields in `epoch`, in order; batch b is
// [b * batch_size, min((b + 1) * batch_size, size())).
//
// The epoch's permutation of [0, dataset_size) is a function of (seed, epoch)
// only (identity when !shuffle). Without drop_last it is padded with its own
// first elements to a multiple of world_size; with drop_last it is cut to one.
// Rank r takes positions r, r + world_size, ... (DistributedSampler's rule),
// then drop_last cuts the partial last batch. Every rank gets the same count.
//
// When split_by_shard(): the epoch's shard order is shuffled and shard k goes
// to rank k mod world_size, each rank shuffling its records; ranks holding
// more than their share (ceil(n / world), or floor with drop_last) pass the
// surplus, in order, to ranks holding less, so ranks read mostly their own
// shards and the guarantees above hold unchanged.
std::vector<std::uint32_t> epoch_order(const OrderParams& p, std::uint64_t epoch);

}  // namespace stoker::detail
