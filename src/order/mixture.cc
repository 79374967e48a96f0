#include "order/mixture.h"

#include <algorithm>
#include <numeric>

#include "order/rng.h"

namespace stoker::detail {

namespace {
constexpr std::uint64_t kStreamMix = 0x6d6978ULL;  // "mix": a source's pass permutations
}

std::vector<std::uint64_t> mixture_counts(const std::vector<double>& weights, std::uint64_t n) {
  const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
  std::vector<std::uint64_t> counts(weights.size());
  std::vector<double> rest(weights.size());
  std::uint64_t given = 0;
  for (std::size_t s = 0; s < weights.size(); ++s) {
    // NOTE: long double keeps n * w exact enough for n up to 2^32 and any weights.
    const long double q = static_cast<long double>(n) * weights[s] / total;
    counts[s] = std::min<std::uint64_t>(static_cast<std::uint64_t>(q), n);
    rest[s] = static_cast<double>(q - static_cast<long double>(counts[s]));
    given += counts[s];
  }
  std::vector<std::size_t> by_rest(weights.size());
  std::iota(by_rest.begin(), by_rest.end(), std::size_t{0});
  std::stable_sort(by_rest.begin(), by_rest.end(), [&](std::size_t a, std::size_t b) { return rest[a] > rest[b]; });
  for (std::size_t k = 0; given < n && k < by_rest.size(); ++k, ++given) ++counts[by_rest[k]];
  // Rounding could leave more than one short only with absurd weights; the
  // first positive-weight source takes what remains, so the sum is n.
  for (std::size_t s = 0; given < n && s < weights.size(); ++s) {
    if (weights[s] > 0) {
      counts[s] += n - given;
      given = n;
    }
  }
  return counts;
}

std::size_t mixture_part_of_position(const std::vector<std::uint64_t>& counts, std::uint64_t pos) {
  std::uint64_t end = 0;
  for (std::size_t s = 0; s < counts.size(); ++s) {
    end += counts[s];
    if (pos < end) return s;
  }
  return counts.empty() ? 0 : counts.size() - 1;
}

std::vector<std::uint32_t> mixture_pass(std::uint64_t seed, bool shuffle, std::size_t part, std::uint64_t pass,
                                        std::size_t size) {
  std::vector<std::uint32_t> perm(size);
  std::iota(perm.begin(), perm.end(), 0u);
  if (shuffle && size > 1) {
    Rng rng(mix_key(seed, kStreamMix, part, pass));
    for (std::size_t i = size - 1; i > 0; --i) std::swap(perm[i], perm[rng.below(i + 1)]);
  }
  return perm;
}

std::vector<std::uint32_t> mixture_draws(const std::vector<std::uint64_t>& sizes,
                                         const std::vector<std::uint64_t>& starts,
                                         const std::vector<std::uint64_t>& counts, std::uint64_t seed, bool shuffle,
                                         std::uint64_t epoch) {
  std::vector<std::uint32_t> out;
  out.reserve(std::accumulate(counts.begin(), counts.end(), std::uint64_t{0}));
  for (std::size_t s = 0; s < counts.size(); ++s) {
    if (counts[s] == 0) continue;
    const std::uint64_t size = sizes[s];
    std::uint64_t k = epoch * counts[s];  // this source's first draw of the epoch
    const std::uint64_t end = k + counts[s];
    std::vector<std::uint32_t> perm;
    std::uint64_t pass = ~std::uint64_t{0};
    for (; k < end; ++k) {
      if (k / size != pass) {
        pass = k / size;
        perm = mixture_pass(seed, shuffle, s, pass, static_cast<std::size_t>(size));
      }
      out.push_back(static_cast<std::uint32_t>(starts[s] + perm[k % size]));
    }
  }
  return out;
}

}  // namespace stoker::detail
