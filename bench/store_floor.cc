// The floor of a sample's output write: how long this machine takes to store
// one float32 3 x S x S sample (602,112 bytes at S = 224) into a batch-sized
// buffer, with the writer's streaming stores (64-byte non-temporal lines) and
// with ordinary stores, at the write order the output writer uses (three
// planes, one row of each at a time) and plain sequential. No lookups, no
// resize: only the bytes leaving the core. Rounds alternate the variants so
// drift on a shared machine hits each alike (and each runs first in turn).
//
//   store_floor [--rounds R] [--size S] [--batch B]
// Prints microseconds per sample and GB/s (best round) per variant.
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

#define STOKER_AVX512F __attribute__((target("avx512f")))

// One sample's planes written row by row as the output writer does: row y of
// channel 0, 1, 2, then row y + 1.
template <bool kStream>
STOKER_AVX512F void write_sample_rows(float* out, int size, int value) {
  const __m512i v = _mm512_set1_epi32(value);
  const std::size_t W = static_cast<std::size_t>(size), plane = W * W;
  for (std::size_t y = 0; y < W; ++y) {
    for (std::size_t c = 0; c < 3; ++c) {
      float* o = out + c * plane + y * W;
      std::size_t x = 0;
      for (; x + 16 <= W; x += 16) {
        if (kStream && (reinterpret_cast<std::uintptr_t>(o + x) & 63) == 0) {
          _mm512_stream_si512(reinterpret_cast<__m512i*>(o + x), v);
        } else {
          _mm512_storeu_si512(o + x, v);
        }
      }
      if (x < W) _mm512_mask_storeu_epi32(o + x, static_cast<__mmask16>((1u << (W - x)) - 1), v);
    }
  }
  _mm_sfence();
}

// The same bytes in address order.
STOKER_AVX512F void write_sample_sequential(float* out, int size, int value) {
  const __m512i v = _mm512_set1_epi32(value);
  const std::size_t n = 3 * static_cast<std::size_t>(size) * static_cast<std::size_t>(size);
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_stream_si512(reinterpret_cast<__m512i*>(out + i), v);
  for (; i < n; ++i) out[i] = 0.0f;
  _mm_sfence();
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 7, size = 224, batch = 64;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--rounds") rounds = std::atoi(argv[i + 1]);
    if (a == "--size") size = std::atoi(argv[i + 1]);
    if (a == "--batch") batch = std::atoi(argv[i + 1]);
  }
  if (!__builtin_cpu_supports("avx512f")) {
    std::fprintf(stderr, "store_floor: needs AVX-512F\n");
    return 1;
  }
  const std::size_t sample_floats = 3 * static_cast<std::size_t>(size) * static_cast<std::size_t>(size);
  const std::size_t sample_bytes = sample_floats * sizeof(float);
  // 64-byte aligned samples, as the loader's batch slots (a multiple of 64 bytes apart at S = 224).
  std::vector<float> buf(sample_floats * static_cast<std::size_t>(batch) + 16);
  float* base = reinterpret_cast<float*>((reinterpret_cast<std::uintptr_t>(buf.data()) + 63) & ~std::uintptr_t{63});
  std::fill(buf.begin(), buf.end(), 1.0f);  // touched once: no first-touch faults in the rounds
  const char* names[3] = {"streaming stores, row order", "ordinary stores, row order", "streaming stores, sequential"};
  double best[3] = {1e300, 1e300, 1e300};
  const int reps = 4;  // the batch written this many times per round
  for (int r = 0; r <= rounds; ++r) {
    for (int kk = 0; kk < 3; ++kk) {
      const int k = (kk + r) % 3;  // each variant runs first in some rounds
      const int v = r + k;
      const auto t0 = Clock::now();
      for (int rep = 0; rep < reps; ++rep) {
        for (int s = 0; s < batch; ++s) {
          float* o = base + static_cast<std::size_t>(s) * sample_floats;
          if (k == 0) write_sample_rows<true>(o, size, v);
          if (k == 1) write_sample_rows<false>(o, size, v);
          if (k == 2) write_sample_sequential(o, size, v);
        }
      }
      const double t = std::chrono::duration<double>(Clock::now() - t0).count() / (reps * batch);
      if (r > 0) best[k] = std::min(best[k], t);  // round 0 warms up
    }
  }
  std::printf("%zu bytes per sample, batch %d, best of %d rounds (1 thread)\n", sample_bytes, batch, rounds);
  for (int k = 0; k < 3; ++k) {
    std::printf("%-30s %7.1f us per sample  %6.2f GB/s\n", names[k], best[k] * 1e6,
                static_cast<double>(sample_bytes) / best[k] / 1e9);
  }
  volatile float sink = base[sample_floats / 2];
  (void)sink;
  return 0;
}
