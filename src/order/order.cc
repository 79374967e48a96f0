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

// Rank p.rank's positions rank, rank + world, ... of the epoch's list
// (DistributedSampler's rule; past its end, padding wraps to its start).
std::vector<std::uint32_t> strided(const OrderParams& p, const std::vector<std::uint32_t>& all) {
  const std::size_t n = all.size(), w = static_cast<std::size_t>(p.world_size), per_rank = samples_per_rank(p);
  std::vector<std::uint32_t> out;
  if (n == 0) return out;
  out.reserve(per_rank);
  for (std::size_t k = 0; k < per_rank; ++k) out.push_back(all[(static_cast<std::size_t>(p.rank) + k * w) % n]);
  return out;
}

// The epoch's shard order (by_shard's and windowed's).
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

// Each list cut to its share: ranks holding more pass their tails on, in
// order, to ranks holding less.
void balance(std::vector<std::vector<std::uint32_t>>& lists, std::size_t share) {
  std::vector<std::uint32_t> surplus;
  for (auto& l : lists) {
    if (l.size() > share) {
      surplus.insert(surplus.end(), l.begin() + static_cast<std::ptrdiff_t>(share), l.end());
      l.resize(share);
    }
  }
  std::size_t next = 0;
  for (auto& l : lists) {
    while (l.size() < share && next < surplus.size()) l.push_back(surplus[next++]);
  }
}
// Then, without drop_last, the lists still short are padded with the
// epoch's first records again, as DistributedSampler pads.
void pad(std::vector<std::vector<std::uint32_t>>& lists, std::size_t share) {
  std::size_t k = 0;
  for (auto& l : lists) {
    while (l.size() < share) l.push_back(lists[0].empty() ? 0u : lists[0][k++ % lists[0].size()]);
  }
}

// The records of the epoch's shards, in that order, shard k in list k mod m.
std::vector<std::vector<std::uint32_t>> deal(const OrderParams& p, const std::vector<std::size_t>& shards,
                                             std::size_t m) {
  const std::size_t n = p.dataset_size, S = p.shard_starts.size();
  std::vector<std::vector<std::uint32_t>> lists(m);
  for (std::size_t k = 0; k < S; ++k) {
    const std::size_t s = shards[k];
    const std::size_t begin = p.shard_starts[s], end = s + 1 < S ? p.shard_starts[s + 1] : n;
    for (std::size_t i = begin; i < end; ++i) lists[k % m].push_back(static_cast<std::uint32_t>(i));
  }
  return lists;
}

std::vector<std::uint32_t> by_shard(const OrderParams& p, std::uint64_t epoch) {
  const std::size_t n = p.dataset_size, w = static_cast<std::size_t>(p.world_size);
  std::vector<std::vector<std::uint32_t>> lists = deal(p, shard_order(p, epoch), w);
  if (p.shuffle) {
    for (std::size_t r = 0; r < w; ++r) {
      Rng rng(mix_key(p.seed, epoch, kStreamOrder, 2 + r));
      auto& l = lists[r];
      for (std::size_t i = l.size(); i-- > 1;) std::swap(l[i], l[rng.below(i + 1)]);
    }
  }
  const std::size_t share = p.drop_last ? n / w : (n + w - 1) / w;
  balance(lists, share);
  pad(lists, share);
  auto out = std::move(lists[static_cast<std::size_t>(p.rank)]);
  out.resize(samples_per_rank(p));
  return out;
}

// shuffle_window > 0 (epoch_order's comment in order.h).
std::vector<std::uint32_t> windowed(const OrderParams& p, std::uint64_t epoch) {
  const std::size_t n = p.dataset_size, w = static_cast<std::size_t>(p.world_size);
  const std::size_t W = p.shuffle_window;
  const bool split = split_by_shard(p);
  const std::size_t m = split ? w : 1;
  std::vector<std::vector<std::uint32_t>> lists = deal(p, shard_order(p, epoch), m);
  const std::size_t share = p.drop_last ? n / w : (n + w - 1) / w;
  if (split) balance(lists, share);
  if (p.shuffle) {
    auto shard_of = [&](std::uint32_t rec) {
      return static_cast<std::size_t>(std::upper_bound(p.shard_starts.begin(), p.shard_starts.end(), rec) -
                                      p.shard_starts.begin());
    };
    for (std::size_t q = 0; q < m; ++q) {
      auto& l = lists[q];
      std::size_t begin = 0, window = 0;
      while (begin < l.size()) {
        // W runs of one shard's records from `begin`.
        std::size_t end = begin;
        for (std::size_t runs = 0; runs < W && end < l.size(); ++runs) {
          const std::size_t s = shard_of(l[end]);
          while (end < l.size() && shard_of(l[end]) == s) ++end;
        }
        Rng rng(mix_key(p.seed, epoch, kStreamWindow, (static_cast<std::uint64_t>(q) << 32) | window));
        for (std::size_t i = end - begin; i-- > 1;) std::swap(l[begin + i], l[begin + rng.below(i + 1)]);
        begin = end;
        ++window;
      }
    }
  }
  if (split) {
    pad(lists, share);
    auto out = std::move(lists[static_cast<std::size_t>(p.rank)]);
    out.resize(samples_per_rank(p));
    return out;
  }
  return strided(p, lists[0]);
}

}  // namespace

std::vector<std::uint32_t> epoch_order(const OrderParams& p, std::uint64_t epoch) {
  if (p.shuffle_window > 0 && !p.shard_starts.empty()) return windowed(p, epoch);
  if (split_by_shard(p)) return by_shard(p, epoch);
  const std::size_t n = p.dataset_size;
  std::vector<std::uint32_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0u);
  if (p.shuffle && n > 1) {
    Rng rng(mix_key(p.seed, epoch, kStreamOrder, 0));
    for (std::size_t i = n - 1; i > 0; --i) {  // Fisher-Yates
      std::size_t j = rng.below(i + 1);
      std::swap(perm[i], perm[j]);
    }
  }
  return strided(p, perm);
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
    std::vector<std::vector<std::uint32_t>> lists(world);
    for (std::size_t r = 0; r < world; ++r) {
      if (s == 0) {
        OrderParams q = p;
        q.world_size = seg.world_size;
        q.rank = static_cast<int>(r);
        q.batch_size = seg.batch_size;
        lists[r] = epoch_order(q, epoch);
      } else {
        lists[r] = block(pool, world, r, seg.batch_size, p.drop_last);
      }
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
