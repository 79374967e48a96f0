#include "transform/resize.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace stoker::detail {
namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;  // Pillow's PRECISION_BITS

inline std::uint8_t clip8(std::int32_t v) {
  v >>= kPrecisionBits;
  return static_cast<std::uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v));
}

void horizontal_pass_scalar(const ImageView& src, int y0, int rows, const ResampleAxis& ax, ImageBuffer* out) {
  const int out_w = static_cast<int>(ax.first.size());
  for (int y = 0; y < rows; ++y) {
    const std::uint8_t* in = src.row(y0 + y);
    std::uint8_t* o = out->row(y);
    for (int x = 0; x < out_w; ++x) {
      const std::int32_t* k = &ax.weights[static_cast<std::size_t>(x) * static_cast<std::size_t>(ax.ksize)];
      const std::uint8_t* p = in + ax.first[static_cast<std::size_t>(x)] * 3;
      const int n = ax.count[static_cast<std::size_t>(x)];
      std::int32_t s0 = 1 << (kPrecisionBits - 1), s1 = s0, s2 = s0;
      for (int t = 0; t < n; ++t, p += 3) {
        s0 += p[0] * k[t];
        s1 += p[1] * k[t];
        s2 += p[2] * k[t];
      }
      o[3 * x + 0] = clip8(s0);
      o[3 * x + 1] = clip8(s1);
      o[3 * x + 2] = clip8(s2);
    }
  }
}

#if defined(__x86_64__)
// One tap of all three channels per instruction: a pixel's 3 bytes (plus the
// next pixel's first, ignored) widened to 4 x int32, times the weight. The
// same integer arithmetic as the scalar pass, so the result is identical.
// Reads and writes one byte past a pixel: ImageBuffer's slack covers the
// buffer's end, and within a row the next pixel is written afterwards.
__attribute__((target("sse4.1"))) void horizontal_pass_sse41(const ImageView& src, int y0, int rows,
                                                              const ResampleAxis& ax, ImageBuffer* out) {
  const int out_w = static_cast<int>(ax.first.size());
  const __m128i half = _mm_set1_epi32(1 << (kPrecisionBits - 1));
  for (int y = 0; y < rows; ++y) {
    const std::uint8_t* in = src.row(y0 + y);
    std::uint8_t* o = out->row(y);
    for (int x = 0; x < out_w; ++x) {
      const std::int32_t* k = &ax.weights[static_cast<std::size_t>(x) * static_cast<std::size_t>(ax.ksize)];
      const std::uint8_t* p = in + ax.first[static_cast<std::size_t>(x)] * 3;
      const int n = ax.count[static_cast<std::size_t>(x)];
      __m128i acc = half;
      int t = 0;
      for (; t + 1 < n; t += 2, p += 6) {
        std::int32_t a, b;
        std::memcpy(&a, p, 4);
        std::memcpy(&b, p + 3, 4);
        acc = _mm_add_epi32(acc, _mm_mullo_epi32(_mm_cvtepu8_epi32(_mm_cvtsi32_si128(a)), _mm_set1_epi32(k[t])));
        acc = _mm_add_epi32(acc, _mm_mullo_epi32(_mm_cvtepu8_epi32(_mm_cvtsi32_si128(b)), _mm_set1_epi32(k[t + 1])));
      }
      if (t < n) {
        std::int32_t a;
        std::memcpy(&a, p, 4);
        acc = _mm_add_epi32(acc, _mm_mullo_epi32(_mm_cvtepu8_epi32(_mm_cvtsi32_si128(a)), _mm_set1_epi32(k[t])));
      }
      acc = _mm_srai_epi32(acc, kPrecisionBits);
      const __m128i packed = _mm_packus_epi16(_mm_packs_epi32(acc, acc), acc);  // clamps to [0, 255]
      const std::int32_t v = _mm_cvtsi128_si32(packed);
      std::memcpy(o + 3 * x, &v, 4);
    }
  }
}
#endif

#if defined(__x86_64__)
// AVX2: two output pixels per 256-bit register (one per 128-bit lane), two
// taps per vpmaddwd. The SSE4.1 kernel spends ~35-40 uops per output pixel
// (broadcasts, widenings, 32-bit multiplies); this one about half. Pillow's
// 22-bit weights do not fit int16, so each is split as w = hi * 2^11 + lo
// (lo in [0, 2^11), |hi| <= 2^11) and the sums recombine as
// (sum_hi << 11) + sum_lo: the same integers as the scalar pass, so the
// result is identical (tested against it). Each pixel runs P tap pairs,
// weights zero-padded; pixels whose 8-byte loads would pass the row's end
// take the careful path.
struct PairWeights2 {
  std::int32_t hi[8], lo[8];  // lanes 0-3: pixel x's (w_t, w_t+1) int16 pair, lanes 4-7: pixel x+1's
};

__attribute__((target("avx2"))) inline __m256i spread_pairs(__m256i raw) {
  // Per lane: R0 R1 G0 G1 B0 B1 0 0 as int16, from the bytes R0 G0 B0 R1 G1 B1.
  const __m256i spread = _mm256_setr_epi8(0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1,  //
                                          0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1);
  return _mm256_shuffle_epi8(raw, spread);
}

__attribute__((target("avx2"))) inline __m256i finish_pairs(__m256i acc_hi, __m256i acc_lo) {
  __m256i acc = _mm256_add_epi32(_mm256_add_epi32(_mm256_slli_epi32(acc_hi, 11), acc_lo),
                                 _mm256_set1_epi32(1 << (kPrecisionBits - 1)));
  acc = _mm256_srai_epi32(acc, kPrecisionBits);
  return _mm256_packus_epi16(_mm256_packs_epi32(acc, acc), acc);  // per lane: the pixel's 3 bytes first
}

// One output pixel (lane `half` of its pair's weights), loading only the bytes its taps cover.
__attribute__((target("avx2"))) void careful_pixel(const std::uint8_t* p, int n, const PairWeights2* w, int half,
                                                   std::uint8_t* o) {
  __m256i acc_hi = _mm256_setzero_si256(), acc_lo = _mm256_setzero_si256();
  for (int t = 0, j = 0; t < n; t += 2, ++j) {
    std::uint8_t bytes[16] = {};
    if (t + 1 < n) {
      std::memcpy(bytes, p + 3 * t, 6);
    } else {
      std::memcpy(bytes, p + 3 * t, 3);
    }
    const __m256i v = spread_pairs(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes))));
    const __m128i whi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[j].hi + 4 * half));
    const __m128i wlo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[j].lo + 4 * half));
    acc_hi = _mm256_add_epi32(acc_hi, _mm256_madd_epi16(v, _mm256_castsi128_si256(whi)));
    acc_lo = _mm256_add_epi32(acc_lo, _mm256_madd_epi16(v, _mm256_castsi128_si256(wlo)));
  }
  const std::int32_t v = _mm_cvtsi128_si32(_mm256_castsi256_si128(finish_pairs(acc_hi, acc_lo)));
  std::memcpy(o, &v, 3);
}

template <int P>
__attribute__((target("avx2"))) void horizontal_rows_avx2(const ImageView& src, int y0, int rows, const ResampleAxis& ax,
                                                          ImageBuffer* out, const PairWeights2* w, int npairs) {
  const int out_w = static_cast<int>(ax.first.size());
  const int n_pairs = P > 0 ? P : npairs;
  const std::ptrdiff_t row_bytes = static_cast<std::ptrdiff_t>(src.width) * 3;
  // Pixels whose loads all stay inside the row: first[] never decreases, so a prefix.
  int fast_end = 0;
  while (fast_end + 1 < out_w &&
         ax.first[static_cast<std::size_t>(fast_end + 1)] * 3 + 6 * static_cast<std::ptrdiff_t>(n_pairs) + 2 <= row_bytes) {
    fast_end += 2;
  }
  for (int y = 0; y < rows; ++y) {
    const std::uint8_t* in = src.row(y0 + y);
    std::uint8_t* o = out->row(y);
    int x = 0;
    for (; x < fast_end; x += 2) {
      const PairWeights2* pw = w + static_cast<std::ptrdiff_t>(x / 2) * n_pairs;
      const std::uint8_t* p0 = in + ax.first[static_cast<std::size_t>(x)] * 3;
      const std::uint8_t* p1 = in + ax.first[static_cast<std::size_t>(x + 1)] * 3;
      __m256i acc_hi = _mm256_setzero_si256(), acc_lo = _mm256_setzero_si256();
      for (int j = 0; j < n_pairs; ++j) {  // P > 0: a constant trip count, unrolled
        const __m256i raw = _mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p0 + 6 * j))),
            _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p1 + 6 * j)), 1);
        const __m256i v = spread_pairs(raw);
        acc_hi = _mm256_add_epi32(acc_hi, _mm256_madd_epi16(v, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pw[j].hi))));
        acc_lo = _mm256_add_epi32(acc_lo, _mm256_madd_epi16(v, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pw[j].lo))));
      }
      const __m256i packed = finish_pairs(acc_hi, acc_lo);
      const std::int32_t a = _mm_cvtsi128_si32(_mm256_castsi256_si128(packed));
      const std::int32_t b = _mm_cvtsi128_si32(_mm256_extracti128_si256(packed, 1));
      std::memcpy(o + 3 * x, &a, 4);  // its 4th byte is overwritten by the next pixel
      std::memcpy(o + 3 * x + 3, &b, 3);
    }
    for (; x < out_w; ++x) {
      careful_pixel(in + ax.first[static_cast<std::size_t>(x)] * 3, ax.count[static_cast<std::size_t>(x)],
                    w + static_cast<std::ptrdiff_t>(x / 2) * n_pairs, x & 1, o + 3 * x);
    }
  }
}

void horizontal_pass_avx2(const ImageView& src, int y0, int rows, const ResampleAxis& ax, ImageBuffer* out,
                          std::vector<std::int32_t>* scratch) {
  const int out_w = static_cast<int>(ax.first.size());
  const int npairs = (ax.ksize + 1) / 2;
  const std::size_t n = static_cast<std::size_t>((out_w + 1) / 2) * static_cast<std::size_t>(npairs);
  scratch->assign(n * (sizeof(PairWeights2) / sizeof(std::int32_t)), 0);
  auto* w = reinterpret_cast<PairWeights2*>(scratch->data());
  for (int x = 0; x < out_w; ++x) {
    const std::int32_t* k = &ax.weights[static_cast<std::size_t>(x) * static_cast<std::size_t>(ax.ksize)];
    const int count = ax.count[static_cast<std::size_t>(x)];
    for (int t = 0; t < count; ++t) {
      PairWeights2& pw = w[static_cast<std::size_t>(x / 2) * static_cast<std::size_t>(npairs) + static_cast<std::size_t>(t / 2)];
      const auto hi = static_cast<std::uint32_t>(static_cast<std::uint16_t>(k[t] >> 11));
      const auto lo = static_cast<std::uint32_t>(static_cast<std::uint16_t>(k[t] & 2047));
      const int shift = (t & 1) * 16;
      for (int l = 4 * (x & 1); l < 4 * (x & 1) + 4; ++l) {
        pw.hi[l] = static_cast<std::int32_t>(static_cast<std::uint32_t>(pw.hi[l]) | (hi << shift));
        pw.lo[l] = static_cast<std::int32_t>(static_cast<std::uint32_t>(pw.lo[l]) | (lo << shift));
      }
    }
  }
  switch (npairs) {
    case 1: return horizontal_rows_avx2<1>(src, y0, rows, ax, out, w, npairs);
    case 2: return horizontal_rows_avx2<2>(src, y0, rows, ax, out, w, npairs);
    case 3: return horizontal_rows_avx2<3>(src, y0, rows, ax, out, w, npairs);
    case 4: return horizontal_rows_avx2<4>(src, y0, rows, ax, out, w, npairs);
    default: return horizontal_rows_avx2<0>(src, y0, rows, ax, out, w, npairs);
  }
}
#endif

#if defined(__x86_64__)
// AVX-512 (VBMI + VNNI): five output pixels per 512-bit register, one int32
// lane per (pixel, channel), lane 15 idle. A group's taps all lie in one
// 64-byte window of the row, so one masked load (masked-off bytes read as
// zero and never fault: no careful path at the row's end) and, per pair of
// taps, one vpermb that places each lane's two taps as int16 (c_t, c_t+1),
// then one vpdpwssd per weight half (the same exact split as the AVX2 pass).
// The lanes come out as R0 G0 B0 R1 ... B4: one saturating narrow, one
// masked store. Two rows share each group's indices and weights.
#define STOKER_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni")))

constexpr int kPixels512 = 5;
constexpr int kMaxPairs512 = 4;
constexpr int kPrefetchRows = 4;  // two row pairs ahead

struct Group512 {
  std::int64_t offset;       // byte offset of the window in the row: 3 * first pixel
  std::uint64_t load_mask;   // window bytes inside the row
  std::uint16_t store_mask;  // output bytes of the group's pixels (15 for a full group)
};

// Per group: Group512 (in 64 bytes), then per tap pair the vpermb indices,
// hi and lo weights (64 bytes each). The kernel reads a group's fields one by
// one (group_offset(), group_load_mask(), group_store_mask()) rather than
// copying the struct out, which GCC 12 did through a 16-byte store to the
// stack and a k-register load from it (no measurable cost alone: the pass's
// stall was its rows' cache misses, see kPrefetchRows).
struct Plan512 {
  int npairs = 0;
  int groups = 0;
  std::size_t stride = 0;  // bytes per group in the scratch
};

// Lays out the groups' indices and weights in `scratch`; false when a
// group's taps do not fit one 64-byte window (strong downscales: the AVX2
// pass runs).
bool plan_avx512(const ResampleAxis& ax, int src_width, std::vector<std::int32_t>* scratch, Plan512* plan) {
  const int out_w = static_cast<int>(ax.first.size());
  const int npairs = (ax.ksize + 1) / 2;
  if (npairs > kMaxPairs512) return false;
  const int groups = (out_w + kPixels512 - 1) / kPixels512;
  for (int g = 0; g < groups; ++g) {
    const int x = kPixels512 * g, last = std::min(out_w, x + kPixels512) - 1;
    const int span = ax.first[static_cast<std::size_t>(last)] - ax.first[static_cast<std::size_t>(x)] + 2 * npairs;
    if (3 * span > 64) return false;
  }
  plan->npairs = npairs;
  plan->groups = groups;
  plan->stride = 64 + static_cast<std::size_t>(npairs) * 192;
  scratch->resize(static_cast<std::size_t>(groups) * plan->stride / sizeof(std::int32_t));  // every byte read is written
  auto* base = reinterpret_cast<std::uint8_t*>(scratch->data());
  const std::int64_t row_bytes = static_cast<std::int64_t>(src_width) * 3;
  for (int g = 0; g < groups; ++g) {
    std::uint8_t* d = base + static_cast<std::size_t>(g) * plan->stride;
    const int x = kPixels512 * g, n = std::min(out_w - x, kPixels512);
    const int f0 = ax.first[static_cast<std::size_t>(x)];
    Group512 head;
    head.offset = 3 * static_cast<std::int64_t>(f0);
    const std::int64_t avail = row_bytes - head.offset;
    head.load_mask = avail >= 64 ? ~0ull : (avail <= 0 ? 0ull : (1ull << avail) - 1);
    head.store_mask = static_cast<std::uint16_t>((1u << (3 * n)) - 1);
    std::memcpy(d, &head, sizeof(head));
    for (int j = 0; j < npairs; ++j) {
      std::uint8_t* idx = d + 64 + static_cast<std::size_t>(j) * 192;
      std::int16_t hi[32] = {}, lo[32] = {};
      std::memset(idx, 0, 64);
      for (int q = 0; q < n; ++q) {
        const std::size_t xi = static_cast<std::size_t>(x + q);
        // Tap 2j of pixel x+q, in pixels from the window start. NOTE: a
        // padded tap's index may pass the window: vpermb uses the low 6
        // bits, and such taps weigh zero.
        const int rel = ax.first[xi] - f0 + 2 * j;
        for (int c = 0; c < 3; ++c) {
          const int lane = 3 * q + c;
          idx[4 * lane] = static_cast<std::uint8_t>((3 * rel + c) & 63);
          idx[4 * lane + 2] = static_cast<std::uint8_t>((3 * (rel + 1) + c) & 63);
          for (int t = 2 * j; t < 2 * j + 2 && t < ax.count[xi]; ++t) {
            const std::int32_t k = ax.weights[xi * static_cast<std::size_t>(ax.ksize) + static_cast<std::size_t>(t)];
            hi[2 * lane + (t & 1)] = static_cast<std::int16_t>(k >> 11);
            lo[2 * lane + (t & 1)] = static_cast<std::int16_t>(k & 2047);
          }
        }
      }
      std::memcpy(idx + 64, hi, 64);
      std::memcpy(idx + 128, lo, 64);
    }
  }
  return true;
}

inline std::int64_t group_offset(const std::uint8_t* d) {
  std::int64_t v;
  std::memcpy(&v, d + offsetof(Group512, offset), sizeof(v));
  return v;
}
inline std::uint64_t group_load_mask(const std::uint8_t* d) {
  std::uint64_t v;
  std::memcpy(&v, d + offsetof(Group512, load_mask), sizeof(v));
  return v;
}
inline std::uint16_t group_store_mask(const std::uint8_t* d) {
  std::uint16_t v;
  std::memcpy(&v, d + offsetof(Group512, store_mask), sizeof(v));
  return v;
}

STOKER_AVX512 inline __m128i finish_group(__m512i acc_hi, __m512i acc_lo) {
  // NOTE: the maskz forms (all lanes) because GCC 12's unmasked ones start
  // from _mm512_undefined_epi32() and trip -Wmaybe-uninitialized.
  constexpr __mmask16 all = 0xFFFF;
  __m512i acc = _mm512_add_epi32(_mm512_add_epi32(_mm512_maskz_slli_epi32(all, acc_hi, 11), acc_lo),
                                 _mm512_set1_epi32(1 << (kPrecisionBits - 1)));
  acc = _mm512_maskz_max_epi32(all, _mm512_maskz_srai_epi32(all, acc, kPrecisionBits), _mm512_setzero_si512());
  return _mm512_maskz_cvtusepi32_epi8(all, acc);  // R0 G0 B0 R1 ... B4, clamped to 255
}

template <int kPairs>  // plan.npairs, as a constant: the tap loops unroll
STOKER_AVX512 void horizontal_rows_avx512(const ImageView& src, int y0, int rows, const Plan512& plan,
                                          const std::uint8_t* data, ImageBuffer* out) {
  const __mmask64 spread = 0x0555555555555555ull;  // bytes 0 and 2 of lanes 0-14
  constexpr int kOutBytes = 3 * kPixels512;
  int y = 0;
  for (; y + 1 < rows; y += 2) {
    const std::uint8_t* in0 = src.row(y0 + y);
    const std::uint8_t* in1 = src.row(y0 + y + 1);
    // The row pair kPrefetchRows below, fetched while this one is computed:
    // each row of the crop is a new stream the hardware prefetcher has not
    // seen, and its first lines' misses stalled the pass (the stored images
    // of cache="decoded" are larger than L2). The last pairs fetch their own
    // rows again, harmlessly.
    const int ahead = std::min(y + kPrefetchRows, rows - 2);
    const std::uint8_t* next0 = src.row(y0 + ahead);
    const std::uint8_t* next1 = src.row(y0 + ahead + 1);
    std::uint8_t* o0 = out->row(y);
    std::uint8_t* o1 = out->row(y + 1);
    for (int g = 0; g < plan.groups; ++g) {
      const std::uint8_t* d = data + static_cast<std::size_t>(g) * plan.stride;
      const std::int64_t offset = group_offset(d);
      const __mmask64 load_mask = group_load_mask(d);
      const __mmask16 store_mask = group_store_mask(d);
      // A group's window starts 3 * 5 * scale bytes after the previous one's:
      // its first and last bytes' lines cover every line the pass reads.
      _mm_prefetch(reinterpret_cast<const char*>(next0 + offset), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(next0 + offset + 63), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(next1 + offset), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(next1 + offset + 63), _MM_HINT_T0);
      const __m512i w0 = _mm512_maskz_loadu_epi8(load_mask, in0 + offset);
      const __m512i w1 = _mm512_maskz_loadu_epi8(load_mask, in1 + offset);
      __m512i h0 = _mm512_setzero_si512(), l0 = h0, h1 = h0, l1 = h0;
      for (int j = 0; j < kPairs; ++j) {
        const std::uint8_t* pj = d + 64 + static_cast<std::size_t>(j) * 192;
        const __m512i idx = _mm512_loadu_si512(pj);
        const __m512i whi = _mm512_loadu_si512(pj + 64);
        const __m512i wlo = _mm512_loadu_si512(pj + 128);
        const __m512i v0 = _mm512_maskz_permutexvar_epi8(spread, idx, w0);
        const __m512i v1 = _mm512_maskz_permutexvar_epi8(spread, idx, w1);
        h0 = _mm512_dpwssd_epi32(h0, v0, whi);
        l0 = _mm512_dpwssd_epi32(l0, v0, wlo);
        h1 = _mm512_dpwssd_epi32(h1, v1, whi);
        l1 = _mm512_dpwssd_epi32(l1, v1, wlo);
      }
      _mm_mask_storeu_epi8(o0 + kOutBytes * g, store_mask, finish_group(h0, l0));
      _mm_mask_storeu_epi8(o1 + kOutBytes * g, store_mask, finish_group(h1, l1));
    }
  }
  for (; y < rows; ++y) {
    const std::uint8_t* in0 = src.row(y0 + y);
    std::uint8_t* o0 = out->row(y);
    for (int g = 0; g < plan.groups; ++g) {
      const std::uint8_t* d = data + static_cast<std::size_t>(g) * plan.stride;
      const __m512i w0 = _mm512_maskz_loadu_epi8(group_load_mask(d), in0 + group_offset(d));
      __m512i h0 = _mm512_setzero_si512(), l0 = h0;
      for (int j = 0; j < kPairs; ++j) {
        const std::uint8_t* pj = d + 64 + static_cast<std::size_t>(j) * 192;
        const __m512i v0 = _mm512_maskz_permutexvar_epi8(spread, _mm512_loadu_si512(pj), w0);
        h0 = _mm512_dpwssd_epi32(h0, v0, _mm512_loadu_si512(pj + 64));
        l0 = _mm512_dpwssd_epi32(l0, v0, _mm512_loadu_si512(pj + 128));
      }
      _mm_mask_storeu_epi8(o0 + kOutBytes * g, group_store_mask(d), finish_group(h0, l0));
    }
  }
}

// False when the groups do not fit the kernel's window (the caller falls back).
bool horizontal_pass_avx512(const ImageView& src, int y0, int rows, const ResampleAxis& ax, ImageBuffer* out,
                            std::vector<std::int32_t>* scratch) {
  Plan512 plan;
  if (!plan_avx512(ax, src.width, scratch, &plan)) return false;
  const auto* data = reinterpret_cast<const std::uint8_t*>(scratch->data());
  switch (plan.npairs) {
    case 1: horizontal_rows_avx512<1>(src, y0, rows, plan, data, out); break;
    case 2: horizontal_rows_avx512<2>(src, y0, rows, plan, data, out); break;
    case 3: horizontal_rows_avx512<3>(src, y0, rows, plan, data, out); break;
    default: horizontal_rows_avx512<kMaxPairs512>(src, y0, rows, plan, data, out); break;  // plan_avx512 caps npairs
  }
  return true;
}
#endif

void horizontal_pass(const ImageView& src, int y0, int rows, const ResampleAxis& ax, ImageBuffer* out, Simd simd,
                     std::vector<std::int32_t>* scratch) {
#if defined(__x86_64__)
  if (simd >= Simd::kAvx512 && simd_supported(Simd::kAvx512) && horizontal_pass_avx512(src, y0, rows, ax, out, scratch)) {
    return;
  }
  if (simd >= Simd::kAvx2 && simd_supported(Simd::kAvx2)) return horizontal_pass_avx2(src, y0, rows, ax, out, scratch);
  if (simd >= Simd::kSse41 && simd_supported(Simd::kSse41)) return horizontal_pass_sse41(src, y0, rows, ax, out);
#else
  (void)simd;
  (void)scratch;
#endif
  horizontal_pass_scalar(src, y0, rows, ax, out);
}

// `src` row 0 is input row `row_offset` of the axis' coordinates.
__attribute__((always_inline)) inline void vertical_pass_body(const ImageView& src, int row_offset,
                                                             const ResampleAxis& ax, std::vector<std::int32_t>* accum,
                                                             RowSink* out) {
  const int out_h = static_cast<int>(ax.first.size());
  const std::size_t n = static_cast<std::size_t>(src.width) * 3;
  if (accum->size() < n) accum->resize(n);
  std::int32_t* acc = accum->data();
  for (int y = 0; y < out_h; ++y) {
    const std::int32_t* k = &ax.weights[static_cast<std::size_t>(y) * static_cast<std::size_t>(ax.ksize)];
    const int first = ax.first[static_cast<std::size_t>(y)] - row_offset;
    const int count = ax.count[static_cast<std::size_t>(y)];
    std::fill(acc, acc + n, 1 << (kPrecisionBits - 1));
    for (int t = 0; t < count; ++t) {
      const std::uint8_t* in = src.row(first + t);
      const std::int32_t w = k[t];
      for (std::size_t i = 0; i < n; ++i) acc[i] += in[i] * w;
    }
    std::uint8_t* o = out->row(y);
    for (std::size_t i = 0; i < n; ++i) o[i] = clip8(acc[i]);
    out->done(y);
  }
}

void vertical_pass_portable(const ImageView& src, int row_offset, const ResampleAxis& ax,
                            std::vector<std::int32_t>* accum, RowSink* out) {
  vertical_pass_body(src, row_offset, ax, accum, out);
}

#if defined(__x86_64__)
// NOTE: the same loop compiled for AVX2 (8 x int32 multiply-adds); chosen at
// run time. Not target_clones: an ifunc resolver runs before sanitizer
// runtimes start and crashes TSan builds.
__attribute__((target("avx2"))) void vertical_pass_avx2(const ImageView& src, int row_offset,
                                                        const ResampleAxis& ax, std::vector<std::int32_t>* accum,
                                                        RowSink* out) {
  vertical_pass_body(src, row_offset, ax, accum, out);
}
#endif

#if defined(__x86_64__)
// AVX-512 (BW + VNNI): 32 bytes of an output row at a time, every tap of the
// row in registers (no accumulator array in memory): two source rows'
// bytes widened to int16 and interleaved as (row t, row t+1) pairs, one
// vpdpwssd per weight half (the split of the horizontal passes). Rows with
// an odd tap count pair the last one with itself at weight zero.
constexpr int kMaxPairsVertical = 32;

STOKER_AVX512 void vertical_pass_avx512(const ImageView& src, int row_offset, const ResampleAxis& ax, RowSink* out) {
  constexpr __mmask32 all32 = 0xFFFFFFFFu;
  const int out_h = static_cast<int>(ax.first.size());
  const int n = src.width * 3;
  const __m512i half = _mm512_set1_epi32(1 << (kPrecisionBits - 1));
  const std::uint8_t* ra[kMaxPairsVertical];
  const std::uint8_t* rb[kMaxPairsVertical];
  __m512i whi[kMaxPairsVertical], wlo[kMaxPairsVertical];
  for (int y = 0; y < out_h; ++y) {
    const std::int32_t* k = &ax.weights[static_cast<std::size_t>(y) * static_cast<std::size_t>(ax.ksize)];
    const int first = ax.first[static_cast<std::size_t>(y)] - row_offset;
    const int count = ax.count[static_cast<std::size_t>(y)];
    const int npairs = (count + 1) / 2;
    for (int j = 0; j < npairs; ++j) {
      const int t = 2 * j;
      const std::int32_t wa = k[t], wb = t + 1 < count ? k[t + 1] : 0;
      ra[j] = src.row(first + t);
      rb[j] = t + 1 < count ? src.row(first + t + 1) : ra[j];
      auto pair = [](std::int32_t a, std::int32_t b) {
        return static_cast<int>(static_cast<std::uint32_t>(static_cast<std::uint16_t>(a)) |
                                (static_cast<std::uint32_t>(static_cast<std::uint16_t>(b)) << 16));
      };
      whi[j] = _mm512_set1_epi32(pair(wa >> 11, wb >> 11));
      wlo[j] = _mm512_set1_epi32(pair(wa & 2047, wb & 2047));
    }
    std::uint8_t* o = out->row(y);
    for (int i = 0; i < n; i += 32) {
      const __mmask32 m = n - i >= 32 ? all32 : static_cast<__mmask32>((1u << (n - i)) - 1);
      __m512i a_hi = _mm512_setzero_si512(), a_lo = a_hi, b_hi = a_hi, b_lo = a_hi;
      for (int j = 0; j < npairs; ++j) {
        const __m512i a = _mm512_maskz_cvtepu8_epi16(all32, _mm256_maskz_loadu_epi8(m, ra[j] + i));
        const __m512i b = _mm512_maskz_cvtepu8_epi16(all32, _mm256_maskz_loadu_epi8(m, rb[j] + i));
        const __m512i lo = _mm512_unpacklo_epi16(a, b);  // per 128-bit lane: elements 8l..8l+3 as (a, b)
        const __m512i hi = _mm512_unpackhi_epi16(a, b);  // elements 8l+4..8l+7
        a_hi = _mm512_dpwssd_epi32(a_hi, lo, whi[j]);
        a_lo = _mm512_dpwssd_epi32(a_lo, lo, wlo[j]);
        b_hi = _mm512_dpwssd_epi32(b_hi, hi, whi[j]);
        b_lo = _mm512_dpwssd_epi32(b_lo, hi, wlo[j]);
      }
      constexpr __mmask16 all16 = 0xFFFF;
      const __m512i A = _mm512_maskz_srai_epi32(
          all16, _mm512_add_epi32(_mm512_add_epi32(_mm512_maskz_slli_epi32(all16, a_hi, 11), a_lo), half), kPrecisionBits);
      const __m512i B = _mm512_maskz_srai_epi32(
          all16, _mm512_add_epi32(_mm512_add_epi32(_mm512_maskz_slli_epi32(all16, b_hi, 11), b_lo), half), kPrecisionBits);
      // packs per lane: A's 4 then B's 4 = elements 8l..8l+7 in order; then clamp to [0, 255] as clip8.
      const __m512i words = _mm512_maskz_max_epi16(all32, _mm512_packs_epi32(A, B), _mm512_setzero_si512());
      _mm256_mask_storeu_epi8(o + i, m, _mm512_maskz_cvtusepi16_epi8(all32, words));
    }
    out->done(y);
  }
}
#endif

void vertical_pass(const ImageView& src, int row_offset, const ResampleAxis& ax, std::vector<std::int32_t>* accum,
                   RowSink* out, Simd simd) {
#if defined(__x86_64__)
  if (simd >= Simd::kAvx512 && simd_supported(Simd::kAvx512) && (ax.ksize + 1) / 2 <= kMaxPairsVertical) {
    return vertical_pass_avx512(src, row_offset, ax, out);
  }
  if (simd >= Simd::kAvx2 && simd_supported(Simd::kAvx2)) return vertical_pass_avx2(src, row_offset, ax, accum, out);
#else
  (void)simd;
#endif
  vertical_pass_portable(src, row_offset, ax, accum, out);
}

}  // namespace

bool simd_supported(Simd level) {
#if defined(__x86_64__)
  static const bool kSse41 = __builtin_cpu_supports("sse4.1");
  static const bool kAvx2 = __builtin_cpu_supports("avx2");
  static const bool kAvx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                              __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vbmi") &&
                              __builtin_cpu_supports("avx512vnni");
  switch (level) {
    case Simd::kNone: return true;
    case Simd::kSse41: return kSse41;
    case Simd::kAvx2: return kAvx2;
    case Simd::kAvx512: return kAvx512;
  }
  return false;
#else
  return level == Simd::kNone;
#endif
}

#if defined(__x86_64__)
namespace {

constexpr int kMaxVectorTaps = 64;  // wider kernels (downscales past 31x) take the scalar loop

// bilinear_coeffs' tap loop and normalize_coeffs_8bpc for eight outputs at a
// time, one per double lane, from their windows (computed by the caller, in
// code built without FMA: `in0 + (xx + 0.5) * scale` must not be fused).
// Per lane the same IEEE operations in the same order as the scalar loop:
// t = |((x + xmin) - center + 0.5) * ss|, w = t < 1 ? 1 - t : 0, the sum
// tap by tap (taps past a lane's count add +0.0, which leaves it as it
// is), each weight divided by the sum when it is not zero, then rounded
// half away from zero to 22-bit fixed point (w * 2^22 is exact, so a fused
// multiply-add there would round the same). Writes all ksize weights of
// each output (zeros past its count).
STOKER_AVX512 void axis_weights_avx512(const double* center, const int* first, const int* count, int out_size,
                                       int ksize, double ss, std::int32_t* weights) {
  const __m512d one = _mm512_set1_pd(1.0), zero = _mm512_setzero_pd(), ssv = _mm512_set1_pd(ss);
  const __m512d half = _mm512_set1_pd(0.5), minus_half = _mm512_set1_pd(-0.5);
  const __m512d fixed = _mm512_set1_pd(static_cast<double>(1 << kPrecisionBits));
  __m512d k[kMaxVectorTaps];
  for (int xx0 = 0; xx0 < out_size; xx0 += 8) {
    const int lanes = std::min(8, out_size - xx0);
    const auto valid = static_cast<__mmask8>((1u << lanes) - 1);
    const __m512d c = _mm512_maskz_loadu_pd(valid, center + xx0);
    const __m256i xmin = _mm256_maskz_loadu_epi32(valid, first + xx0);
    const __m256i n = _mm256_maskz_loadu_epi32(valid, count + xx0);
    int taps = 0;
    for (int i = 0; i < lanes; ++i) taps = std::max(taps, count[xx0 + i]);
    __m512d ww = zero;
    for (int x = 0; x < taps; ++x) {
      const __mmask8 in = _mm256_cmpgt_epi32_mask(n, _mm256_set1_epi32(x));  // x < n
      // NOTE: maskz forms, all lanes: the unmasked ones trip GCC 12's -Wmaybe-uninitialized (finish_group).
      const __m512d pos = _mm512_maskz_cvtepi32_pd(0xFF, _mm256_add_epi32(xmin, _mm256_set1_epi32(x)));
      const __m512d t = _mm512_abs_pd(_mm512_mul_pd(_mm512_add_pd(_mm512_sub_pd(pos, c), half), ssv));
      const __mmask8 taken = in & _mm512_cmp_pd_mask(t, one, _CMP_LT_OQ);
      k[x] = _mm512_maskz_sub_pd(taken, one, t);
      ww = _mm512_add_pd(ww, k[x]);
    }
    const __mmask8 nonzero = _mm512_cmp_pd_mask(ww, zero, _CMP_NEQ_UQ);
    for (int x = 0; x < ksize; ++x) {
      const __m512d w = x < taps ? _mm512_mask_div_pd(k[x], nonzero, k[x], ww) : zero;
      const __m512d r = _mm512_add_pd(_mm512_mask_blend_pd(_mm512_cmp_pd_mask(w, zero, _CMP_LT_OQ), half, minus_half),
                                      _mm512_mul_pd(w, fixed));
      alignas(32) std::int32_t q[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(q), _mm512_maskz_cvttpd_epi32(0xFF, r));
      for (int i = 0; i < lanes; ++i) {
        weights[static_cast<std::size_t>(xx0 + i) * static_cast<std::size_t>(ksize) + static_cast<std::size_t>(x)] = q[i];
      }
    }
  }
}

}  // namespace
#endif

void compute_axis(int in_size, int out_size, ResampleAxis* axis, double in0, double in1, Simd simd) {
  // NOTE: the kernel size is known before the first emit (the same formula); sized here once.
  const double scale = ((in1 < 0 ? in_size : in1) - in0) / out_size;
  const int ksize = static_cast<int>(std::ceil(std::max(scale, 1.0))) * 2 + 1;
  axis->ksize = ksize;
  axis->first.resize(static_cast<std::size_t>(out_size));
  axis->count.resize(static_cast<std::size_t>(out_size));
#if defined(__x86_64__)
  if (simd >= Simd::kAvx512 && simd_supported(Simd::kAvx512) && ksize <= kMaxVectorTaps) {
    // The windows here, in code built for the baseline instruction set (no
    // fused multiply-add), as bilinear_coeffs computes them.
    const double filterscale = scale > 1.0 ? scale : 1.0;
    std::vector<double> centers(static_cast<std::size_t>(out_size));
    for (int xx = 0; xx < out_size; ++xx) {
      const BilinearWindow w = bilinear_window(in_size, in0, scale, filterscale, xx);
      centers[static_cast<std::size_t>(xx)] = w.center;
      axis->first[static_cast<std::size_t>(xx)] = w.xmin;
      axis->count[static_cast<std::size_t>(xx)] = w.n;
    }
    axis->weights.resize(static_cast<std::size_t>(out_size) * static_cast<std::size_t>(ksize));  // every one written
    axis_weights_avx512(centers.data(), axis->first.data(), axis->count.data(), out_size, ksize, 1.0 / filterscale,
                        axis->weights.data());
    return;
  }
#else
  (void)simd;
#endif
  axis->weights.assign(static_cast<std::size_t>(out_size) * static_cast<std::size_t>(ksize), 0);
  bilinear_coeffs(in_size, out_size, in0, in1, [&](int xx, int xmin, int n, const double* k) {
    std::int32_t* out = &axis->weights[static_cast<std::size_t>(xx) * static_cast<std::size_t>(ksize)];
    for (int x = 0; x < n; ++x) {
      const double w = k[x];
      out[x] = static_cast<std::int32_t>(w < 0 ? -0.5 + w * (1 << kPrecisionBits) : 0.5 + w * (1 << kPrecisionBits));
    }
    axis->first[static_cast<std::size_t>(xx)] = xmin;
    axis->count[static_cast<std::size_t>(xx)] = n;
  });
}

void resize_bilinear(const ImageView& src, int out_w, int out_h, ResizeScratch* s, RowSink* sink, Simd simd,
                     const double* box) {
  // As Pillow: a pass is skipped only when its size is unchanged and the box spans the input.
  const bool need_h = out_w != src.width || (box && (box[0] != 0 || box[2] != src.width));
  const bool need_v = out_h != src.height || (box && (box[1] != 0 || box[3] != src.height));
  auto copy_rows = [&](const ImageView& v) {
    for (int y = 0; y < out_h; ++y) {
      std::memcpy(sink->row(y), v.row(y), static_cast<std::size_t>(out_w) * 3);
      sink->done(y);
    }
  };
  if (!need_h && !need_v) return copy_rows(src);
  if (need_v) compute_axis(src.height, out_h, &s->vertical, box ? box[1] : 0, box ? box[3] : -1, simd);
  if (!need_h) return vertical_pass(src, 0, s->vertical, &s->accum, sink, simd);
  compute_axis(src.width, out_w, &s->horizontal, box ? box[0] : 0, box ? box[2] : -1, simd);
  int y0 = 0, y1 = src.height;
  if (need_v) {  // only the rows the vertical pass reads
    y0 = s->vertical.first.front();
    y1 = s->vertical.first.back() + s->vertical.count.back();
  }
  s->temp.reset(out_w, y1 - y0);
  horizontal_pass(src, y0, y1 - y0, s->horizontal, &s->temp, simd, &s->pair_weights);
  if (!need_v) return copy_rows(s->temp.view());
  vertical_pass(s->temp.view(), y0, s->vertical, &s->accum, sink, simd);
}

void resize_bilinear(const ImageView& src, int out_w, int out_h, ResizeScratch* s, ImageBuffer* dst, Simd simd,
                     const double* box) {
  struct IntoImage final : RowSink {
    ImageBuffer* image;
    explicit IntoImage(ImageBuffer* i) : image(i) {}
    std::uint8_t* row(int y) override { return image->row(y); }
  } sink(dst);
  dst->reset(out_w, out_h);
  resize_bilinear(src, out_w, out_h, s, &sink, simd, box);
}

}  // namespace stoker::detail
