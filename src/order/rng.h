// Counter-based randomness: every draw is a pure function of its key
// (seed, epoch, sample index, stream), never of a shared generator, so results
// do not depend on the thread count or on which thread made the sample.
#pragma once

#include <cmath>
#include <cstdint>

namespace stoker::detail {

inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

inline std::uint64_t mix_key(std::uint64_t a, std::uint64_t b, std::uint64_t c, std::uint64_t d) {
  std::uint64_t h = splitmix64(a);
  h = splitmix64(h ^ b);
  h = splitmix64(h ^ c);
  return splitmix64(h ^ d);
}

// A small fast generator seeded from a key (splitmix64 stream).
__extension__ typedef unsigned __int128 u128;

class Rng {
 public:
  explicit Rng(std::uint64_t key) : state_(key) {}
  std::uint64_t next_u64() {
    state_ += 0x9e3779b97f4a7c15ULL;
    std::uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) with 53 random bits.
  double uniform01() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform01(); }
  // Uniform integer in [0, n), unbiased (Lemire's method). REQUIRES: n > 0
  std::uint64_t below(std::uint64_t n) {
    u128 m = static_cast<u128>(next_u64()) * n;
    auto low = static_cast<std::uint64_t>(m);
    if (low < n) {
      std::uint64_t t = -n % n;
      while (low < t) {
        m = static_cast<u128>(next_u64()) * n;
        low = static_cast<std::uint64_t>(m);
      }
    }
    return static_cast<std::uint64_t>(m >> 64);
  }
  // Standard normal (Box-Muller, one value per two uniforms).
  double normal() {
    const double u1 = 1.0 - uniform01();  // (0, 1]
    const double u2 = uniform01();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  std::uint64_t state_;
};

// Stream tags, so that the order and each sample's transforms never share draws.
inline constexpr std::uint64_t kStreamOrder = 0x6f72646572ULL;      // "order"
inline constexpr std::uint64_t kStreamTransform = 0x7866726dULL;    // "xfrm"
inline constexpr std::uint64_t kStreamView = 0x76696577ULL;         // "view"
inline constexpr std::uint64_t kStreamWindow = 0x77696e646f77ULL;  // "window"
inline constexpr std::uint64_t kStreamPatch = 0x7061746368ULL;     // "patch"

// The transform stream of copy `copy` of view `view` (LoaderOptions::views):
// view 0's copy 0 is the single transform list's stream, so a one-view
// loader draws what a loader with those transforms draws.
inline std::uint64_t view_stream(int view, int copy) {
  if (view == 0 && copy == 0) return kStreamTransform;
  return mix_key(kStreamTransform, kStreamView, static_cast<std::uint64_t>(view), static_cast<std::uint64_t>(copy));
}

}  // namespace stoker::detail
