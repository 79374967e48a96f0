#include "order/mixture.h"

#include <algorithm>
#include <numeric>

#include "order/bijection.h"
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

namespace {
Bijection pass_order(std::uint64_t seed, bool shuffle, std::size_t part, std::uint64_t pass, std::uint64_t size) {
  return Bijection(size, mix_key(seed, kStreamMix, part, pass), shuffle);
}
}  // namespace

std::vector<std::uint32_t> mixture_pass(std::uint64_t seed, bool shuffle, std::size_t part, std::uint64_t pass,
                                        std::size_t size) {
  const Bijection b = pass_order(seed, shuffle, part, pass, size);
  std::vector<std::uint32_t> perm(size);
  for (std::size_t i = 0; i < size; ++i) perm[i] = static_cast<std::uint32_t>(b(i));
  return perm;
}

std::uint32_t mixture_draw(const std::vector<std::uint64_t>& sizes, const std::vector<std::uint64_t>& starts,
                           const std::vector<std::uint64_t>& counts, std::uint64_t seed, bool shuffle,
                           std::uint64_t epoch, std::uint64_t pos) {
  const std::size_t s = mixture_part_of_position(counts, pos);
  std::uint64_t first = 0;  // the source's first position in the epoch
  for (std::size_t q = 0; q < s; ++q) first += counts[q];
  const std::uint64_t k = epoch * counts[s] + (pos - first);  // the source's k-th draw
  return static_cast<std::uint32_t>(starts[s] + pass_order(seed, shuffle, s, k / sizes[s], sizes[s])(k % sizes[s]));
}

std::vector<std::uint32_t> mixture_draws(const std::vector<std::uint64_t>& sizes,
                                         const std::vector<std::uint64_t>& starts,
                                         const std::vector<std::uint64_t>& counts, std::uint64_t seed, bool shuffle,
                                         std::uint64_t epoch) {
  const std::uint64_t n = std::accumulate(counts.begin(), counts.end(), std::uint64_t{0});
  std::vector<std::uint32_t> out(n);
  for (std::uint64_t pos = 0; pos < n; ++pos) out[pos] = mixture_draw(sizes, starts, counts, seed, shuffle, epoch, pos);
  return out;
}

}  // namespace stoker::detail
