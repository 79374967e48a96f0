// Which record goes in which batch slot: seeded per-epoch permutation,
// sharding by rank, drop_last.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "order/bijection.h"
#include "stoker/source.h"

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

// A part of an epoch run on one topology: every one of world_size ranks
// handed out its first batches_done batches of batch_size.
struct Segment {
  int world_size = 1;
  std::size_t batch_size = 1;
  std::size_t batches_done = 0;
};

// The order of an epoch, as a view: every rank's k-th record computed on
// demand, in O(1) for a plain shuffle (a Bijection over the records, then
// DistributedSampler's strided split) and O(log shards) for a shard split
// or shuffle_window, from per-shard and per-rank tables only (the epoch's
// shard order, each list's runs of one shard, prefix sums over ranks):
// nothing per record, so n = 10^9 costs what n = 10^3 costs. It yields
// exactly what epoch_order's comment below says, for every rank at once.
class EpochOrder {
 public:
  EpochOrder(const OrderParams& p, std::uint64_t epoch);
  // Records per rank (samples_per_rank).
  std::size_t size() const { return per_rank_; }
  // REQUIRES: rank < world_size, k < size()
  std::uint32_t at(int rank, std::size_t k) const;
  // Bytes the view holds beyond itself (its tables; tests bound it).
  std::size_t table_bytes() const;
  // Rank `rank`'s positions from `from` on as RecordOrder::Piece's, from
  // the tables alone: exact runs where the order is not shuffled (a run of
  // one shard, strided by the world when ranks share a list), bounded ones
  // where it is (each run of a window over the window's positions; a full
  // shuffle's runs over the whole stretch their list holds), the first and
  // last `walk` positions of a shuffled epoch and the padding (fewer than
  // world_size positions) walked exactly. O(runs + walk), never O(records).
  void pieces(int rank, std::size_t from, std::size_t walk,
              const std::function<void(const RecordOrder::Piece&)>& use) const;

 private:
  struct Run {  // a list's positions [pos, pos + len) are records [rec, rec + len)
    std::size_t pos, rec, len;
  };
  struct List {
    std::vector<Run> runs;             // the list before any shuffling (own shards; with a window, balanced)
    std::size_t own = 0;               // records dealt to it (split by shard)
    std::size_t kept = 0;              // of those, kept by balancing: min(own, share)
    std::size_t taken_from = 0;        // its first surplus index (by_shard: the deficits of the lists before it)
    std::size_t length = 0;            // after balancing, before padding
    std::size_t pad_from = 0;          // its first padding index (the padding of the lists before it)
    Bijection shuffle;                 // by_shard: over its own records
    std::vector<std::size_t> windows;  // shuffle_window: each window's first position
  };
  static void slice_runs(const std::vector<Run>& runs, std::size_t from, std::size_t to, std::size_t at,
                         std::vector<Run>* out);
  static std::uint32_t in_runs(const std::vector<Run>& runs, std::size_t pos);
  std::uint32_t shuffled(std::size_t q, std::size_t j) const;  // by_shard: list q's j-th before balancing
  std::uint32_t listed(std::size_t q, std::size_t j) const;    // list q's j-th after balancing
  std::uint32_t padded(std::size_t q, std::size_t j) const;    // ... after padding

  enum class Kind { kPlain, kByShard, kWindowed };
  Kind kind_ = Kind::kPlain;
  std::size_t n_ = 0, world_ = 1, per_rank_ = 0, share_ = 0;
  std::size_t window_ = 0;  // shuffle_window (kWindowed)
  bool split_ = false, shuffle_ = false;
  std::uint64_t seed_ = 0, epoch_ = 0;
  Bijection perm_;                         // kPlain: over the records
  std::vector<List> lists_;                // per rank when split, else one
  std::vector<std::size_t> surplus_ends_;  // by_shard: per list, the end of its surplus in the surplus order
};

// One rank's records of one epoch by position (what the loader and a
// streaming source read): the view above for a fresh epoch (nothing per
// record), or, after an elastic resume, the rank's share of the pool,
// computed once.
class RankOrder final : public RecordOrder {
 public:
  RankOrder() = default;
  RankOrder(const OrderParams& p, std::uint64_t epoch, const std::vector<Segment>& done);
  std::size_t size() const override { return view_ ? view_->size() : list_.size(); }
  std::uint32_t at(std::size_t k) const override { return view_ ? view_->at(rank_, k) : list_[k]; }
  bool materialised() const { return !view_; }
  // The view's pieces (EpochOrder::pieces); false for an elastic resume's list.
  bool pieces(std::size_t from, std::size_t walk, const std::function<void(const Piece&)>& use) const override {
    if (!view_) return false;
    view_->pieces(rank_, from, walk, use);
    return true;
  }

 private:
  std::shared_ptr<const EpochOrder> view_;
  int rank_ = 0;
  std::vector<std::uint32_t> list_;  // elastic resume only
};

// The record indices this rank yields in `epoch`, in order; batch b is
// [b * batch_size, min((b + 1) * batch_size, size())).
//
// The epoch's permutation of [0, dataset_size) is a function of (seed, epoch)
// only: a Bijection keyed by mix_key(seed, epoch, kStreamOrder, 0) (identity
// when !shuffle). Without drop_last it is padded with its own
// first elements to a multiple of world_size; with drop_last it is cut to one.
// Rank r takes positions r, r + world_size, ... (DistributedSampler's rule),
// then drop_last cuts the partial last batch. Every rank gets the same count.
//
// When split_by_shard(): the epoch's shard order is shuffled and shard k goes
// to rank k mod world_size, each rank shuffling its records (a Bijection over
// the rank's records, keyed by (seed, epoch, kStreamOrder, 2 + rank)); ranks holding
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
// shuffled within each window only (a Bijection over the window's records,
// keyed by (seed, epoch, kStreamWindow, list << 32 | window)). So a rank reads at most W shards at a
// time, and the order is still a function of (seed, epoch) alone; without
// shuffle it is the order above.
// Materialised from EpochOrder (tests, and an elastic resume's old ranks).
std::vector<std::uint32_t> epoch_order(const OrderParams& p, std::uint64_t epoch);

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
