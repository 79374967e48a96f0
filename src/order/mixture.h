// Which record each position of a mixture's epoch draws (stoker/mixture.h):
// per-source draw counts, per-pass permutations, the epoch's table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace stoker::detail {

// Each source's draws per epoch: n * w_s / sum(w), rounded by largest
// remainder (ties to the earlier source), summing to n exactly.
// REQUIRES: weights >= 0 with a positive sum.
std::vector<std::uint64_t> mixture_counts(const std::vector<double>& weights, std::uint64_t n);

// The source whose draws position `pos` of an epoch is among (source 0's
// counts[0] positions first, then source 1's, ...).
std::size_t mixture_part_of_position(const std::vector<std::uint64_t>& counts, std::uint64_t pos);

// Pass `pass` of source `part` (of `size` records): its walk order, a
// Bijection keyed by (seed, part, pass); identity without shuffle.
// Materialised here for tests; mixture_draw computes one position of it.
std::vector<std::uint32_t> mixture_pass(std::uint64_t seed, bool shuffle, std::size_t part, std::uint64_t pass,
                                        std::size_t size);

// The record position `pos` of `epoch` draws, in closed form: O(sources)
// time, nothing per position (the loader's lookup; see mixture_draws).
std::uint32_t mixture_draw(const std::vector<std::uint64_t>& sizes, const std::vector<std::uint64_t>& starts,
                           const std::vector<std::uint64_t>& counts, std::uint64_t seed, bool shuffle,
                           std::uint64_t epoch, std::uint64_t pos);

// The epoch's table (tests): for each position, the record of the concatenation of
// the sources (source s's records start at starts[s]) it draws. Source s's
// positions take its draws epoch * counts[s] .. + counts[s] - 1, draw k
// being mixture_pass(seed, shuffle, s, k / size)[k % size].
std::vector<std::uint32_t> mixture_draws(const std::vector<std::uint64_t>& sizes,
                                         const std::vector<std::uint64_t>& starts,
                                         const std::vector<std::uint64_t>& counts, std::uint64_t seed, bool shuffle,
                                         std::uint64_t epoch);

}  // namespace stoker::detail
