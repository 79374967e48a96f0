// A keyed bijection on [0, n), computed per position in O(1): the epoch's
// shuffle without materialising a permutation.
#pragma once

#include <cstdint>

#include "order/rng.h"

namespace stoker::detail {

// A 4-round Feistel network over the smallest even power of two 2^(2h) >= n
// (two halves of h bits; round function splitmix64(half ^ round key), masked
// to h bits), with cycle walking: a position whose image falls at or past n
// is mapped again until it lands in [0, n). Each round is invertible, so the
// network is a permutation of [0, 2^(2h)) and cycle walking restricts it to
// one of [0, n). Cost: 2^(2h) < 4n, so a lookup takes fewer than 4 network
// passes on average over positions (16 splitmix64 calls); memory is six
// words, whatever n. The round keys derive from `key` (mix_key(seed, epoch,
// stream, ...)), so the permutation is a function of that key alone.
// Without shuffle it is the identity.
class Bijection {
 public:
  Bijection() = default;
  Bijection(std::uint64_t n, std::uint64_t key, bool shuffle = true) : n_(n), shuffle_(shuffle && n > 1) {
    while ((std::uint64_t{1} << (2 * half_bits_)) < n && half_bits_ < 32) ++half_bits_;
    mask_ = half_bits_ >= 32 ? 0xffffffffULL : (std::uint64_t{1} << half_bits_) - 1;
    for (int r = 0; r < 4; ++r) keys_[r] = splitmix64(key + static_cast<std::uint64_t>(r) * 0x9e3779b97f4a7c15ULL);
  }
  std::uint64_t size() const { return n_; }
  // REQUIRES: i < size()
  std::uint64_t operator()(std::uint64_t i) const {
    if (!shuffle_) return i;
    std::uint64_t x = i;
    do x = network(x);
    while (x >= n_);
    return x;
  }

 private:
  std::uint64_t network(std::uint64_t x) const {
    std::uint64_t left = x >> half_bits_, right = x & mask_;
    for (std::uint64_t k : keys_) {
      const std::uint64_t next = left ^ (splitmix64(right ^ k) & mask_);
      left = right;
      right = next;
    }
    return (left << half_bits_) | right;
  }

  std::uint64_t n_ = 0;
  bool shuffle_ = false;
  unsigned half_bits_ = 1;
  std::uint64_t mask_ = 1;
  std::uint64_t keys_[4] = {};
};

}  // namespace stoker::detail
