#include "order/order.h"

#include <algorithm>
#include <numeric>

#include "order/rng.h"

namespace stoker::detail {

std::size_t samples_per_rank(const OrderParams& p) {
  const std::size_t n = p.dataset_size, w = static_cast<std::size_t>(p.world_size);
  std::size_t per_rank = p.drop_last ? n / w : (n + w - 1) / w;
  if (p.drop_last) per_rank -= per_rank % p.batch_size;
  return per_rank;
}

std::size_t batches_per_rank(const OrderParams& p) {
  return (samples_per_rank(p) + p.batch_size - 1) / p.batch_size;
}

bool split_by_shard(const OrderParams& p) {
  return p.world_size > 1 && p.shard_starts.size() >= static_cast<std::size_t>(p.world_size);
}

namespace {

// The epoch's shard order (by_shard's and windowed's): S entries, a
// Fisher-Yates shuffle keyed by (seed, epoch).
std::vector<std::size_t> shard_order(const OrderParams& p, std::uint64_t epoch) {
  const std::size_t S = p.shard_starts.size();
  std::vector<std::size_t> shards(S);
  std::iota(shards.begin(), shards.end(), std::size_t{0});
  if (p.shuffle) {
    Rng rng(mix_key(p.seed, epoch, kStreamOrder, 1));
    for (std::size_t i = S; i-- > 1;) std::swap(shards[i], shards[rng.below(i + 1)]);
  }
  return shards;
}

}  // namespace

// Appends positions [from, to) of `runs` (a list's runs) to `out` as runs
// starting at list position `at`.
void EpochOrder::slice_runs(const std::vector<Run>& runs, std::size_t from, std::size_t to, std::size_t at,
                            std::vector<Run>* out) {
  for (const auto& r : runs) {
    const std::size_t lo = std::max(from, r.pos), hi = std::min(to, r.pos + r.len);
    if (lo >= hi) continue;
    out->push_back({at, r.rec + (lo - r.pos), hi - lo});
    at += hi - lo;
  }
}

EpochOrder::EpochOrder(const OrderParams& p, std::uint64_t epoch)
    : n_(p.dataset_size),
      world_(static_cast<std::size_t>(p.world_size)),
      per_rank_(samples_per_rank(p)),
      share_(p.drop_last ? n_ / world_ : (n_ + world_ - 1) / world_),
      window_(p.shuffle_window),
      split_(split_by_shard(p)),
      shuffle_(p.shuffle),
      seed_(p.seed),
      epoch_(epoch) {
  const bool windowed = p.shuffle_window > 0 && !p.shard_starts.empty();
  if (!windowed && !split_) {
    kind_ = Kind::kPlain;
    perm_ = Bijection(n_, mix_key(p.seed, epoch, kStreamOrder, 0), p.shuffle);
    return;
  }
  kind_ = windowed ? Kind::kWindowed : Kind::kByShard;
  // Deal: shard k of the epoch's order to list k mod m.
  const std::size_t m = split_ ? world_ : 1, S = p.shard_starts.size();
  lists_.resize(m);
  const std::vector<std::size_t> shards = shard_order(p, epoch);
  for (std::size_t k = 0; k < S; ++k) {
    const std::size_t s = shards[k];
    const std::size_t begin = p.shard_starts[s], end = s + 1 < S ? p.shard_starts[s + 1] : n_;
    List& l = lists_[k % m];
    if (end > begin) l.runs.push_back({l.own, begin, end - begin});
    l.own += end - begin;
  }
  // Balance: lists holding more than the share pass their tails on, in
  // order, to the lists holding less (in order); padding follows.
  std::size_t surplus = 0, deficits = 0;
  for (List& l : lists_) {
    l.kept = split_ ? std::min(l.own, share_) : l.own;
    l.taken_from = deficits;
    if (split_ && l.own < share_) deficits += share_ - l.own;
    surplus += l.own - l.kept;
    surplus_ends_.push_back(surplus);
  }
  std::size_t pads = 0;
  for (List& l : lists_) {
    const std::size_t want = split_ && l.own < share_ ? share_ - l.own : 0;
    const std::size_t got = l.taken_from < surplus ? std::min(want, surplus - l.taken_from) : 0;
    l.length = l.kept + got;
    l.pad_from = pads;
    if (split_) pads += share_ - l.length;
  }
  if (kind_ == Kind::kByShard) {
    for (std::size_t q = 0; q < m; ++q) {
      lists_[q].shuffle = Bijection(lists_[q].own, mix_key(p.seed, epoch, kStreamOrder, 2 + q), p.shuffle);
    }
    return;
  }
  // shuffle_window: the balanced lists as runs (own runs cut to what is
  // kept, then the surplus taken: runs of the givers' tails), then windows
  // of W runs.
  std::vector<Run> surplus_runs;
  std::size_t at = 0;
  for (const List& l : lists_) {
    slice_runs(l.runs, l.kept, l.own, at, &surplus_runs);
    at += l.own - l.kept;
  }
  for (List& l : lists_) {
    std::vector<Run> runs;
    slice_runs(l.runs, 0, l.kept, 0, &runs);
    slice_runs(surplus_runs, l.taken_from, l.taken_from + (l.length - l.kept), l.kept, &runs);
    l.runs = std::move(runs);
    if (p.shuffle) {
      for (std::size_t r = 0; r < l.runs.size(); r += p.shuffle_window) l.windows.push_back(l.runs[r].pos);
    }
  }
}

std::size_t EpochOrder::table_bytes() const {
  std::size_t b = lists_.capacity() * sizeof(List) + surplus_ends_.capacity() * sizeof(std::size_t);
  for (const List& l : lists_) b += l.runs.capacity() * sizeof(Run) + l.windows.capacity() * sizeof(std::size_t);
  return b;
}

std::uint32_t EpochOrder::in_runs(const std::vector<Run>& runs, std::size_t pos) {
  auto it = std::upper_bound(runs.begin(), runs.end(), pos, [](std::size_t v, const Run& r) { return v < r.pos; });
  const Run& r = *(it - 1);
  return static_cast<std::uint32_t>(r.rec + (pos - r.pos));
}

std::uint32_t EpochOrder::shuffled(std::size_t q, std::size_t j) const {
  return in_runs(lists_[q].runs, static_cast<std::size_t>(lists_[q].shuffle(j)));
}

std::uint32_t EpochOrder::listed(std::size_t q, std::size_t j) const {
  const List& l = lists_[q];
  if (kind_ == Kind::kByShard) {
    if (j < l.kept) return shuffled(q, j);
    // The surplus, in order: each giver's shuffled tail [kept, own).
    const std::size_t t = l.taken_from + (j - l.kept);
    const auto g = static_cast<std::size_t>(std::upper_bound(surplus_ends_.begin(), surplus_ends_.end(), t) -
                                            surplus_ends_.begin());
    const std::size_t before = g == 0 ? 0 : surplus_ends_[g - 1];
    return shuffled(g, lists_[g].kept + (t - before));
  }
  if (l.windows.empty()) return in_runs(l.runs, j);
  const auto w = std::upper_bound(l.windows.begin(), l.windows.end(), j) - 1;
  const auto index = static_cast<std::uint64_t>(w - l.windows.begin());
  const std::size_t begin = *w, end = w + 1 != l.windows.end() ? *(w + 1) : l.length;
  const Bijection b(end - begin, mix_key(seed_, epoch_, kStreamWindow, (static_cast<std::uint64_t>(q) << 32) | index));
  return in_runs(l.runs, begin + static_cast<std::size_t>(b(j - begin)));
}

// NOTE: the lists still short are padded with list 0's records again, in
// order, counting on across lists (DistributedSampler pads with the first
// records); list 0's own padding repeats it, so all padding reads list 0's
// balanced records cyclically.
std::uint32_t EpochOrder::padded(std::size_t q, std::size_t j) const {
  const List& l = lists_[q];
  if (j < l.length) return listed(q, j);
  if (lists_[0].length == 0) return 0;
  const std::size_t k = l.pad_from + (j - l.length);
  return listed(0, (k % share_) % lists_[0].length);
}

std::uint32_t EpochOrder::at(int rank, std::size_t k) const {
  const auto r = static_cast<std::size_t>(rank);
  if (kind_ != Kind::kPlain && split_) return padded(r, k);
  // Strided (DistributedSampler): rank r takes positions r, r + world, ...;
  // past the end, padding wraps to the start.
  const std::size_t pos = (r + k * world_) % (n_ == 0 ? 1 : n_);
  if (kind_ == Kind::kPlain) return static_cast<std::uint32_t>(perm_(pos));
  return listed(0, pos);
}

void EpochOrder::pieces(int rank, std::size_t from, std::size_t walk,
                        const std::function<void(const RecordOrder::Piece&)>& use) const {
  using Piece = RecordOrder::Piece;
  const std::size_t end = per_rank_, r = static_cast<std::size_t>(rank), w = world_;
  if (from >= end || n_ == 0) return;
  auto exact_walk = [&](std::size_t a, std::size_t b) {  // positions [a, b), one by one
    for (std::size_t k = std::max(a, from); k < std::min(b, end); ++k) use(Piece{at(rank, k), 1, 1, k, k, true});
  };
  // NOTE: a shuffled stretch is bounded, except its first and last `walk`
  // positions: those are walked, so the shards read first (the fetch order)
  // and last have exact uses, and an order of at most 2 * walk positions is
  // exactly the walk of every position.
  std::size_t mid_lo = from, mid_hi = end - 1;
  if (shuffle_) {
    if (end - from <= 2 * walk) return exact_walk(from, end);
    exact_walk(from, from + walk);
    exact_walk(end - walk, end);
    mid_lo = from + walk;
    mid_hi = end - walk - 1;
  }
  auto exact = [&](std::size_t rec, std::size_t stride, std::size_t a, std::size_t b) {  // positions a..b
    b = std::min(b, end - 1);
    if (a < from) {
      if (b < from) return;
      rec += (from - a) * stride;
      a = from;
    }
    if (a <= b) use(Piece{rec, b - a + 1, stride, a, b, true});
  };
  auto bounded = [&](std::size_t rec, std::size_t count, std::size_t a, std::size_t b) {
    a = std::max(a, mid_lo);
    b = std::min(b, mid_hi);
    if (count > 0 && a <= b) use(Piece{rec, count, 1, a, b, false});
  };
  if (split_) {
    // Rank r reads list r: positions [0, length) listed, the rest padding.
    const List& l = lists_[r];
    exact_walk(l.length, end);
    if (l.length == 0) return;
    if (kind_ == Kind::kWindowed) {
      if (l.windows.empty()) {
        for (const Run& run : l.runs) exact(run.rec, 1, run.pos, run.pos + run.len - 1);
        return;
      }
      for (std::size_t i = 0; i < l.windows.size(); ++i) {
        const std::size_t begin = l.windows[i], wend = i + 1 < l.windows.size() ? l.windows[i + 1] : l.length;
        if (wend <= from) continue;
        for (std::size_t k = i * window_; k < std::min(l.runs.size(), (i + 1) * window_); ++k) {
          bounded(l.runs[k].rec, l.runs[k].len, begin, wend - 1);
        }
      }
      return;
    }
    // kByShard: positions [0, kept) are the list's own records, then the
    // givers' tails in surplus order (each giver's j-th surplus record its
    // shuffled position kept + j).
    auto own = [&](std::size_t q, std::size_t lo, std::size_t hi, std::size_t at) {  // list q's [lo, hi) at position `at`
      const List& g = lists_[q];
      if (lo >= hi) return;
      if (!shuffle_) {
        std::vector<Run> part;
        slice_runs(g.runs, lo, hi, at, &part);
        for (const Run& run : part) exact(run.rec, 1, run.pos, run.pos + run.len - 1);
        return;
      }
      for (const Run& run : g.runs) bounded(run.rec, run.len, at, at + (hi - lo) - 1);
    };
    own(r, 0, l.kept, 0);
    const std::size_t t0 = l.taken_from, t1 = l.taken_from + (l.length - l.kept);
    for (std::size_t g = 0; g < lists_.size() && t0 < t1; ++g) {
      const std::size_t before = g == 0 ? 0 : surplus_ends_[g - 1];
      const std::size_t lo = std::max(t0, before), hi = std::min(t1, surplus_ends_[g]);
      if (lo < hi) own(g, lists_[g].kept + (lo - before), lists_[g].kept + (hi - before), l.kept + (lo - t0));
    }
    return;
  }
  // One list (kPlain's records, or kWindowed's runs), strided: rank r's
  // k-th is the list's r + k * world, past the list's end padding.
  const std::size_t kwrap = n_ > r ? (n_ - r + w - 1) / w : 0;  // the first padding position
  exact_walk(kwrap, end);
  if (kwrap == 0) return;
  const std::size_t kend = std::min(kwrap, end) - 1;
  // Rank positions whose list position lies in [lo, hi]: [first_k(lo), last_k(hi)].
  auto first_k = [&](std::size_t lo) { return lo <= r ? 0 : (lo - r + w - 1) / w; };
  auto last_k = [&](std::size_t hi) { return hi < r ? SIZE_MAX : (hi - r) / w; };
  if (kind_ == Kind::kPlain) {
    if (!shuffle_) return exact(r, w, 0, kend);
    return bounded(0, n_, 0, kend);
  }
  const List& l = lists_[0];
  if (l.windows.empty()) {
    for (const Run& run : l.runs) {
      const std::size_t a = first_k(run.pos), b = last_k(run.pos + run.len - 1);
      if (b != SIZE_MAX && a <= b) exact(run.rec + (r + a * w - run.pos), w, a, std::min(b, kend));
    }
    return;
  }
  for (std::size_t i = 0; i < l.windows.size(); ++i) {
    const std::size_t begin = l.windows[i], wend = i + 1 < l.windows.size() ? l.windows[i + 1] : l.length;
    const std::size_t a = first_k(begin), b = last_k(wend - 1);
    if (b == SIZE_MAX || a > b || b < from) continue;
    for (std::size_t k = i * window_; k < std::min(l.runs.size(), (i + 1) * window_); ++k) {
      bounded(l.runs[k].rec, l.runs[k].len, a, std::min(b, kend));
    }
  }
}

std::vector<std::uint32_t> epoch_order(const OrderParams& p, std::uint64_t epoch) {
  const EpochOrder view(p, epoch);
  std::vector<std::uint32_t> out(view.size());
  for (std::size_t k = 0; k < out.size(); ++k) out[k] = view.at(p.rank, k);
  return out;
}

RankOrder::RankOrder(const OrderParams& p, std::uint64_t epoch, const std::vector<Segment>& done) : rank_(p.rank) {
  if (done.empty()) {
    view_ = std::make_shared<const EpochOrder>(p, epoch);
  } else {
    list_ = resumed_order(p, epoch, done);
  }
}

namespace {

// Rank r's share of `pool` on a topology (see resumed_order).
std::vector<std::uint32_t> block(const std::vector<std::uint32_t>& pool, std::size_t world, std::size_t rank,
                                 std::size_t batch, bool drop_last) {
  const std::size_t n = pool.size();
  std::size_t share = drop_last ? n / world : (n + world - 1) / world;
  if (drop_last) share -= share % batch;
  std::vector<std::uint32_t> out;
  if (n == 0) return out;
  out.reserve(share);
  for (std::size_t k = 0; k < share; ++k) out.push_back(pool[(rank * share + k) % n]);  // wraps: padding
  return out;
}

}  // namespace

std::vector<std::uint32_t> resumed_order(const OrderParams& p, std::uint64_t epoch, const std::vector<Segment>& done) {
  if (done.empty()) return epoch_order(p, epoch);
  return block(resume_pool(p, epoch, done), static_cast<std::size_t>(p.world_size), static_cast<std::size_t>(p.rank),
               p.batch_size, p.drop_last);
}

std::vector<std::uint32_t> resume_pool(const OrderParams& p, std::uint64_t epoch, const std::vector<Segment>& done) {
  const std::size_t n = p.dataset_size;
  if (done.empty()) {
    std::vector<std::uint32_t> all(n);
    std::iota(all.begin(), all.end(), 0u);
    return all;
  }
  std::vector<std::uint32_t> pool;
  std::vector<char> handed(n, 0);  // handed out by an earlier segment
  for (std::size_t s = 0; s < done.size(); ++s) {
    const Segment& seg = done[s];
    const auto world = static_cast<std::size_t>(seg.world_size);
    // NOTE: the old ranks' lists are materialised: a resume computes its
    // pool once, O(dataset); the first segment's come from the epoch's view.
    std::vector<std::vector<std::uint32_t>> lists(world);
    if (s == 0) {
      OrderParams q = p;
      q.world_size = seg.world_size;
      q.batch_size = seg.batch_size;
      const EpochOrder view(q, epoch);
      for (std::size_t r = 0; r < world; ++r) {
        lists[r].resize(view.size());
        for (std::size_t k = 0; k < view.size(); ++k) lists[r][k] = view.at(static_cast<int>(r), k);
      }
    } else {
      for (std::size_t r = 0; r < world; ++r) lists[r] = block(pool, world, r, seg.batch_size, p.drop_last);
    }
    const std::size_t cut = seg.batches_done * seg.batch_size;
    for (auto& l : lists)
      for (std::size_t i = 0; i < std::min(cut, l.size()); ++i) handed[l[i]] = 1;
    std::vector<char> pooled(n, 0);
    std::vector<std::uint32_t> next;
    for (auto& l : lists) {
      for (std::size_t i = std::min(cut, l.size()); i < l.size(); ++i) {
        const std::uint32_t rec = l[i];
        if (!handed[rec] && !pooled[rec]) {
          pooled[rec] = 1;
          next.push_back(rec);
        }
      }
    }
    // Records this segment's ranks did not hold (drop_last cut them): still
    // the epoch's, so they go on at the end, in index order.
    std::vector<char> held(n, 0);
    for (auto& l : lists)
      for (std::uint32_t rec : l) held[rec] = 1;
    for (std::uint32_t rec = 0; rec < n; ++rec) {
      if (!held[rec] && !handed[rec] && !pooled[rec]) {
        pooled[rec] = 1;
        next.push_back(rec);
      }
    }
    pool = std::move(next);
  }
  return pool;
}

}  // namespace stoker::detail
