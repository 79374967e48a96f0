// A streaming source's plan without a walk of every position (issue 39):
// EpochOrder::pieces covers every position of a rank's epoch (exact pieces
// name the records at() gives, bounded ones hold the records at() gives in
// their positions), and plan_uses from the pieces agrees with the walk of
// every position: the same shards, each shard's exact uses inside its
// bounded ones, exact where the walk reaches (the epoch's first and last
// positions: the fetch order), and a shuffle_window's plan holding no more
// shards at once than the walk's plus a window.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <vector>

#include "order/order.h"
#include "source/shard_source.h"

namespace stoker::detail {
namespace {

// The order without its pieces: plan_uses walks every position (the plan before issue 39's change).
struct Walked final : RecordOrder {
  const RecordOrder& order;
  explicit Walked(const RecordOrder& o) : order(o) {}
  std::size_t size() const override { return order.size(); }
  std::uint32_t at(std::size_t pos) const override { return order.at(pos); }
};

// Shards of uneven sizes (an empty one too), `n` records in all.
std::vector<std::size_t> uneven_starts(std::size_t shards, std::size_t n) {
  std::vector<std::size_t> starts;
  std::size_t at = 0;
  for (std::size_t s = 0; s < shards; ++s) {
    starts.push_back(std::min(at, n));
    at += s == 2 ? 0 : 1 + (s * 7) % 5;
  }
  return starts;
}

// Byte spans: record i is bytes [10 i, 10 i + 7) of its shard's object.
void record_span(std::uint32_t, std::size_t rec, std::size_t last, std::size_t stride, std::uint64_t* lo,
                 std::uint64_t* hi) {
  for (std::size_t i = rec; i <= last; i += stride) {
    *lo = std::min<std::uint64_t>(*lo, 10 * i);
    *hi = std::max<std::uint64_t>(*hi, 10 * i + 7);
  }
}

std::size_t most_at_once(const std::vector<ShardBytes::Use>& uses, std::size_t size) {
  std::size_t most = 0;
  for (std::size_t p = 0; p < size; ++p) {
    std::size_t live = 0;
    for (const auto& u : uses) live += u.first <= p && p <= u.last;
    most = std::max(most, live);
  }
  return most;
}

struct Case {
  std::size_t shards;
  int world;
  std::size_t window, batch;
  bool shuffle, drop_last;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  for (std::size_t shards : {1u, 5u, 12u, 40u}) {
    for (int world : {1, 2, 3, 8}) {
      for (std::size_t window : {0u, 1u, 3u}) {
        for (bool shuffle : {false, true}) {
          for (bool drop_last : {false, true}) {
            out.push_back({shards, world, window, drop_last ? 4u : 1u, shuffle, drop_last});
          }
        }
      }
    }
  }
  return out;
}

// The order's parameters for case c: uneven shards (one empty), the last of 3 records.
OrderParams params_of(const Case& c, std::uint64_t seed) {
  OrderParams p;
  p.shard_starts = uneven_starts(c.shards, SIZE_MAX);
  p.dataset_size = p.shard_starts.back() + 3;
  p.world_size = c.world;
  p.batch_size = c.batch;
  p.shuffle = c.shuffle;
  p.drop_last = c.drop_last;
  p.shuffle_window = c.window;
  p.seed = seed;
  return p;
}

TEST(PlanTest, PiecesCoverEveryPositionWithItsRecord) {
  for (const Case& c : cases()) {
    OrderParams p = params_of(c, 17);
    for (int rank = 0; rank < c.world; ++rank) {
      p.rank = rank;
      const RankOrder order(p, 3, {});
      for (std::size_t walk : {0u, 2u, 1000u}) {
        for (std::size_t from : {std::size_t{0}, order.size() / 2, order.size() > 0 ? order.size() - 1 : 0}) {
          std::vector<RecordOrder::Piece> pieces;
          ASSERT_TRUE(order.pieces(from, walk, [&](const RecordOrder::Piece& pc) { pieces.push_back(pc); }));
          for (std::size_t pos = from; pos < order.size(); ++pos) {
            const std::size_t rec = order.at(pos);
            bool covered = false;
            for (const auto& pc : pieces) {
              if (pc.exact && pc.first <= pos && pos <= pc.last) {
                ASSERT_EQ(pc.rec + (pos - pc.first) * pc.stride, rec) << "exact piece wrong at " << pos;
                covered = true;
              } else if (!pc.exact && pc.first <= pos && pos <= pc.last && pc.rec <= rec && rec < pc.rec + pc.count) {
                covered = true;
              }
            }
            ASSERT_TRUE(covered) << "shards " << c.shards << " world " << c.world << " rank " << rank << " window "
                                 << c.window << " shuffle " << c.shuffle << " drop_last " << c.drop_last << " walk "
                                 << walk << " from " << from << ": position " << pos << " (record " << rec
                                 << ") in no piece";
          }
          for (const auto& pc : pieces) {
            ASSERT_GE(pc.first, from);
            ASSERT_LE(pc.first, pc.last);
            ASSERT_LT(pc.last, order.size());
            if (pc.exact) {
              ASSERT_EQ(pc.count, pc.last - pc.first + 1);
            }
          }
        }
      }
    }
  }
}

TEST(PlanTest, PerShardPlanAgreesWithTheWalkOfEveryPosition) {
  for (const Case& c : cases()) {
    OrderParams p = params_of(c, 5);
    for (int rank = 0; rank < c.world; ++rank) {
      p.rank = rank;
      const RankOrder order(p, 1, {});
      for (std::size_t from : {std::size_t{0}, order.size() / 3}) {
        const auto walked = plan_uses(Walked(order), from, 0, p.shard_starts, p.dataset_size, record_span);
        // A walk as long as the epoch: exactly the walk of every position.
        const auto whole = plan_uses(order, from, order.size(), p.shard_starts, p.dataset_size, record_span);
        ASSERT_EQ(whole.size(), walked.size());
        for (std::size_t k = 0; k < whole.size(); ++k) {
          EXPECT_EQ(whole[k].shard, walked[k].shard);
          EXPECT_EQ(whole[k].first, walked[k].first);
          EXPECT_EQ(whole[k].last, walked[k].last);
          EXPECT_EQ(whole[k].lo, walked[k].lo);
          EXPECT_EQ(whole[k].hi, walked[k].hi);
        }
        const std::size_t walk = 3;
        const auto planned = plan_uses(order, from, walk, p.shard_starts, p.dataset_size, record_span);
        std::map<std::uint32_t, ShardBytes::Use> by_shard;
        for (const auto& u : planned) by_shard[u.shard] = u;
        ASSERT_EQ(by_shard.size(), planned.size()) << "a shard planned twice";
        const std::size_t mid_lo = from + walk, mid_hi = order.size() >= walk + 1 ? order.size() - walk - 1 : 0;
        for (const auto& e : walked) {
          auto it = by_shard.find(e.shard);
          ASSERT_NE(it, by_shard.end()) << "shard " << e.shard << " used but not planned";
          const auto& b = it->second;
          EXPECT_LE(b.first, e.first);
          EXPECT_GE(b.last, e.last);
          EXPECT_LE(b.lo, e.lo);
          EXPECT_GE(b.hi, e.hi);
          // Where the walk reaches, the plan is exact: a shard first used there is fetched in its turn.
          if (!c.shuffle || e.first < mid_lo) {
            EXPECT_EQ(b.first, e.first) << "shard " << e.shard;
          }
          if (!c.shuffle || e.last > mid_hi) {
            EXPECT_EQ(b.last, e.last) << "shard " << e.shard;
          }
          if (!c.shuffle) {
            EXPECT_EQ(b.lo, e.lo);
            EXPECT_EQ(b.hi, e.hi);
          }
        }
        // Without a shuffle the plan is the walk's shards; split by shard with a window, the same shards too
        // when the epoch is read from its start and not cut by drop_last (else the window holding `from`,
        // or the one drop_last cuts, may hold a shard the rank no longer reads: fetched, never read).
        if (!c.shuffle || (c.window > 0 && split_by_shard(p) && from == 0 && !c.drop_last)) {
          EXPECT_EQ(planned.size(), walked.size());
        }
        if (c.window > 0) {
          EXPECT_LE(most_at_once(planned, order.size()), most_at_once(walked, order.size()) + c.window);
        }
      }
    }
  }
}

// A billion records over 10^5 shards, 8 ranks, shuffle_window 4: rank 0's
// plan comes from its 12,500 shards' runs and two walks of 2^16 positions,
// each shard within one window of 4 shards' records.
TEST(PlanTest, ABillionRecordsArePlannedPerShard) {
  OrderParams p;
  p.dataset_size = 1'000'000'000;
  for (std::size_t s = 0; s < 100'000; ++s) p.shard_starts.push_back(s * 10'000);
  p.world_size = 8;
  p.batch_size = 64;
  p.shuffle = true;
  p.seed = 1;
  p.shuffle_window = 4;
  const RankOrder order(p, 0, {});
  std::size_t calls = 0;
  const auto uses = plan_uses(order, 0, ShardOptions{}.plan_walk, p.shard_starts, p.dataset_size,
                              [&calls](std::uint32_t, std::size_t, std::size_t, std::size_t, std::uint64_t* lo,
                                       std::uint64_t* hi) {
                                ++calls;
                                *lo = 0;
                                *hi = 1;
                              });
  ASSERT_EQ(uses.size(), 12'500u);
  EXPECT_LT(calls, 12'500u * 2 + 2 * ShardOptions{}.plan_walk + 8);  // per shard and per walked position, no more
  for (const auto& u : uses) EXPECT_LE(u.last - u.first, 4u * 10'000) << "shard " << u.shard;
  EXPECT_EQ(uses.front().first, 0u);
  std::size_t last = 0;
  for (const auto& u : uses) last = std::max(last, u.last);
  EXPECT_EQ(last, order.size() - 1);
}

}  // namespace
}  // namespace stoker::detail
