#include "image/label_index.h"

#include <algorithm>
#include <bit>
#include <utility>

namespace stoker::detail {

LabelIndex::LabelIndex(std::uint64_t voxels, std::vector<std::uint64_t> words) : n_(voxels), words_(std::move(words)) {
  rank_.assign((words_.size() + 7) / 8 + 1, 0);
  std::uint64_t total = 0;
  for (std::size_t w = 0; w < words_.size(); ++w) {
    if (w % 8 == 0) rank_[w / 8] = static_cast<std::uint32_t>(total);
    total += static_cast<std::uint64_t>(std::popcount(words_[w]));
  }
  rank_[(words_.size() + 7) / 8] = static_cast<std::uint32_t>(total);
  set_ = total;
}

std::uint64_t LabelIndex::select(bool set, std::uint64_t k) const {
  const std::size_t blocks = rank_.size() - 1;
  // Voxels of the class before block b.
  auto before = [&](std::size_t b) -> std::uint64_t {
    const std::uint64_t fg = rank_[b];
    if (set) return fg;
    const std::uint64_t bits = std::min<std::uint64_t>(static_cast<std::uint64_t>(b) * 512, n_);
    return bits - fg;
  };
  std::size_t lo = 0, hi = blocks;  // the block holding it: before(lo) <= k < before(lo + 1)
  while (hi - lo > 1) {
    const std::size_t mid = (lo + hi) / 2;
    if (before(mid) <= k) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  std::uint64_t left = k - before(lo);
  for (std::size_t w = lo * 8; w < words_.size(); ++w) {
    std::uint64_t word = set ? words_[w] : ~words_[w];
    if (!set && (w + 1) * 64 > n_) word &= (n_ % 64 == 0) ? ~0ULL : ((1ULL << (n_ % 64)) - 1);
    const auto c = static_cast<std::uint64_t>(std::popcount(word));
    if (left < c) {
      for (std::uint64_t j = 0; j < left; ++j) word &= word - 1;  // drop the lowest set bits
      return w * 64 + static_cast<std::uint64_t>(std::countr_zero(word));
    }
    left -= c;
  }
  return n_ - 1;  // not reached when k < count(set)
}

}  // namespace stoker::detail
