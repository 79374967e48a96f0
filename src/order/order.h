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
  // Shuffle within windows of this many shards (0: over the whole epoch, or
  // the whole rank's share when split by shard). Only with shard_starts.
  std::size_t shuffle_window = 0;
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
//
// With shuffle_window W > 0 (shards only), what a stream of shards needs:
// the shard order and the shards' assignment to ranks are the same as
// above (split by shard: shard k of the epoch's order to rank k mod world;
// otherwise one list), the surplus of ranks holding more than their share
// passed on as whole tails of shards before any shuffling, then each list
// is cut into windows of W consecutive runs of one shard's records and
// shuffled within each window only. So a rank reads at most W shards at a
// time, and the order is still a function of (seed, epoch) alone; without
// shuffle it is the order above.
std::vector<std::uint32_t> epoch_order(const OrderParams& p, std::uint64_t epoch);

// A part of an epoch run on one topology: every one of world_size ranks
// handed out its first batches_done batches of batch_size.
struct Segment {
  int world_size = 1;
  std::size_t batch_size = 1;
  std::size_t batches_done = 0;
};

// Elastic resume: the record indices rank p.rank yields in the rest of
// `epoch` on the topology of `p`, after the earlier segments `done` of that
// epoch (in the order they ran; the first on epoch_order's topology).
// Empty `done`: epoch_order(p, epoch).
//
// The rest is the pool of the epoch's records that no segment handed out:
// each segment's ranks' not-yet-handed-out records, rank by rank in order
// (dropping repeats: padding), then the records no rank of it held (cut by
// drop_last), in index order. The pool is split as a fresh epoch is, with the
// same guarantees (each rank the same count: ceil(n / world), padded with the
// pool's first records; with drop_last floor(n / world), cut to whole
// batches), but in contiguous blocks: rank r takes the pool's r-th block.
// NOTE: contiguous, not strided, so that a rank reads on from few of the old
// ranks' lists: when the epoch was split by shard those lists are mostly
// whole shards, and locality survives.
std::vector<std::uint32_t> resumed_order(const OrderParams& p, std::uint64_t epoch, const std::vector<Segment>& done);
// The pool above: the records of `epoch` that no part of `done` handed out
// (all of them, in index order, when `done` is empty).
std::vector<std::uint32_t> resume_pool(const OrderParams& p, std::uint64_t epoch, const std::vector<Segment>& done);

}  // namespace stoker::detail
