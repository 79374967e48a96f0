#include "order/order.h"

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

std::vector<std::uint32_t> epoch_order(const OrderParams& p, std::uint64_t epoch) {
  const std::size_t n = p.dataset_size, w = static_cast<std::size_t>(p.world_size);
  std::vector<std::uint32_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0u);
  if (p.shuffle && n > 1) {
    Rng rng(mix_key(p.seed, epoch, kStreamOrder, 0));
    for (std::size_t i = n - 1; i > 0; --i) {  // Fisher-Yates
      std::size_t j = rng.below(i + 1);
      std::swap(perm[i], perm[j]);
    }
  }
  const std::size_t per_rank = samples_per_rank(p);
  std::vector<std::uint32_t> out;
  out.reserve(per_rank);
  for (std::size_t k = 0; k < per_rank; ++k) {
    std::size_t pos = static_cast<std::size_t>(p.rank) + k * w;  // may exceed n: padding wraps
    out.push_back(perm[pos % n]);
  }
  return out;
}

}  // namespace stoker::detail
