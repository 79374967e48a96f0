#include "transform/output_rows.h"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace stoker::detail {

void FloatTable::build(const float* mean, const float* std) {
  for (int c = 0; c < 3; ++c) {
    for (int v = 0; v < 256; ++v) {
      float f = static_cast<float>(v) / 255.0f;
      if (mean) f = (f - mean[c]) / std[c];
      value[c][v] = f;
      std::uint32_t bits;
      std::memcpy(&bits, &f, 4);
      for (int b = 0; b < 4; ++b) planes[c][b][v] = static_cast<std::uint8_t>(bits >> (8 * b));
    }
  }
}

namespace {

template <bool kMirror>
void float_nchw(const std::uint8_t* s, std::size_t W, std::size_t plane, const FloatTable& t, float* out) {
  for (std::size_t x = 0; x < W; ++x) {
    const std::uint8_t* p = s + 3 * (kMirror ? W - 1 - x : x);
    out[x] = t.value[0][p[0]];
    out[x + plane] = t.value[1][p[1]];
    out[x + 2 * plane] = t.value[2][p[2]];
  }
}

template <bool kMirror>
void float_nhwc(const std::uint8_t* s, std::size_t W, const FloatTable& t, float* out) {
  for (std::size_t x = 0; x < W; ++x, out += 3) {
    const std::uint8_t* p = s + 3 * (kMirror ? W - 1 - x : x);
    out[0] = t.value[0][p[0]];
    out[1] = t.value[1][p[1]];
    out[2] = t.value[2][p[2]];
  }
}

template <bool kMirror>
void u8_nchw(const std::uint8_t* s, std::size_t W, std::size_t plane, std::uint8_t* out) {
  for (std::size_t x = 0; x < W; ++x) {
    const std::uint8_t* p = s + 3 * (kMirror ? W - 1 - x : x);
    out[x] = p[0];
    out[x + plane] = p[1];
    out[x + 2 * plane] = p[2];
  }
}

template <bool kMirror>
void u8_nhwc(const std::uint8_t* s, std::size_t W, std::uint8_t* out) {
  if (!kMirror) {
    std::memcpy(out, s, W * 3);
    return;
  }
  for (std::size_t x = 0; x < W; ++x, out += 3) {
    const std::uint8_t* p = s + 3 * (W - 1 - x);
    out[0] = p[0];
    out[1] = p[1];
    out[2] = p[2];
  }
}

#if defined(__x86_64__)
// AVX-512 VBMI, float32 NCHW: 64 values of one channel at a time.
//   1. vpermi2b + vpermb gather the channel's 64 bytes (mirrored or not)
//      from the 192 bytes of the 64 pixels;
//   2. each byte of the 64 floats is looked up in its 256-byte plane of the
//      table (two vpermi2b over 128 bytes each, picked by the index's top
//      bit): exactly the table's values, no arithmetic;
//   3. two rounds of unpacks assemble the four byte planes into floats.
// The unpacks work within 128-bit lanes, so step 1 gathers in the order
// that makes them come out sequential: position 16l + 4j + q holds output
// 16j + 4l + q. Whole 64-byte lines leave with streaming stores (no read
// of the line first: a batch is larger than the caches and read later by
// the consumer; 5-8% of the transform, less memory traffic for the other
// cores), fenced by finish_output_rows().
#define STOKER_VBMI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi")))

struct GatherIndices {
  alignas(64) std::uint8_t low[2][3][64];   // [mirror][channel]: source byte (< 128) of each position
  alignas(64) std::uint8_t high[2][3][64];  // its offset from byte 128, where >= 128
  std::uint64_t from_high[2][3];            // positions whose byte is >= 128
  GatherIndices() {
    for (int m = 0; m < 2; ++m) {
      for (int c = 0; c < 3; ++c) {
        from_high[m][c] = 0;
        for (int p = 0; p < 64; ++p) {
          const int l = p / 16, j = (p / 4) % 4, q = p % 4;
          const int e = 16 * j + 4 * l + q;          // the output this position becomes
          const int px = m ? 63 - e : e;              // its pixel within the 64 read
          const int src = 3 * px + c;
          low[m][c][p] = static_cast<std::uint8_t>(src & 127);
          high[m][c][p] = static_cast<std::uint8_t>(src >= 128 ? src - 128 : 0);
          if (src >= 128) from_high[m][c] |= 1ull << p;
        }
      }
    }
  }
};

const GatherIndices& gather_indices() {
  static const GatherIndices k;  // both mirror states, built once
  return k;
}

template <bool kMirror>
STOKER_VBMI void float_nchw_avx512(const std::uint8_t* s, int W, std::size_t plane, const FloatTable& t, float* out) {
  const GatherIndices& idx = gather_indices();
  for (int c = 0; c < 3; ++c) {
    const __m512i lo_idx = _mm512_load_si512(idx.low[kMirror][c]);
    const __m512i hi_idx = _mm512_load_si512(idx.high[kMirror][c]);
    const __mmask64 from_high = idx.from_high[kMirror][c];
    __m512i tab[4][4];
    for (int b = 0; b < 4; ++b) {
      for (int k = 0; k < 4; ++k) tab[b][k] = _mm512_load_si512(t.planes[c][b] + 64 * k);
    }
    float* o = out + static_cast<std::size_t>(c) * plane;
    for (int x = 0; x < W; x += 64) {
      // The 64 pixels read: x.. (or, mirrored, the 64 ending at W-1-x); past
      // the row's ends they are padding whose outputs are not stored.
      const std::uint8_t* src = s + 3 * static_cast<std::ptrdiff_t>(kMirror ? W - 64 - x : x);
      const __m512i a = _mm512_loadu_si512(src);
      const __m512i b = _mm512_loadu_si512(src + 64);
      const __m512i cc = _mm512_loadu_si512(src + 128);
      __m512i v = _mm512_permutex2var_epi8(a, lo_idx, b);
      v = _mm512_mask_permutexvar_epi8(v, from_high, hi_idx, cc);
      const __mmask64 top = _mm512_movepi8_mask(v);
      __m512i pl[4];
      for (int k = 0; k < 4; ++k) {
        const __m512i lo = _mm512_permutex2var_epi8(tab[k][0], v, tab[k][1]);
        const __m512i hi = _mm512_permutex2var_epi8(tab[k][2], v, tab[k][3]);
        pl[k] = _mm512_mask_blend_epi8(top, lo, hi);
      }
      const __m512i u01l = _mm512_unpacklo_epi8(pl[0], pl[1]), u01h = _mm512_unpackhi_epi8(pl[0], pl[1]);
      const __m512i u23l = _mm512_unpacklo_epi8(pl[2], pl[3]), u23h = _mm512_unpackhi_epi8(pl[2], pl[3]);
      const __m512i d[4] = {_mm512_unpacklo_epi16(u01l, u23l), _mm512_unpackhi_epi16(u01l, u23l),
                            _mm512_unpacklo_epi16(u01h, u23h), _mm512_unpackhi_epi16(u01h, u23h)};
      const int left = W - x;
      for (int j = 0; j < 4; ++j) {
        const int n = left - 16 * j;
        if (n >= 16) {
          float* dst = o + x + 16 * j;
          if ((reinterpret_cast<std::uintptr_t>(dst) & 63) == 0) {
            _mm512_stream_si512(reinterpret_cast<__m512i*>(dst), d[j]);
          } else {
            _mm512_storeu_si512(dst, d[j]);
          }
        } else if (n > 0) {
          _mm512_mask_storeu_epi32(o + x + 16 * j, static_cast<__mmask16>((1u << n) - 1), d[j]);
        }
      }
    }
  }
}
#endif

}  // namespace

void write_output_row(const std::uint8_t* row, int width, int height, int y, bool mirror, DType dtype, Layout layout,
                      const FloatTable& table, void* out, Simd simd) {
  const std::size_t W = static_cast<std::size_t>(width), plane = W * static_cast<std::size_t>(height);
  const std::size_t yy = static_cast<std::size_t>(y);
  if (dtype == DType::kFloat32) {
    float* o = static_cast<float*>(out);
    if (layout == Layout::kNCHW) {
#if defined(__x86_64__)
      if (simd >= Simd::kAvx512 && simd_supported(Simd::kAvx512)) {
        return mirror ? float_nchw_avx512<true>(row, width, plane, table, o + yy * W)
                      : float_nchw_avx512<false>(row, width, plane, table, o + yy * W);
      }
#endif
      return mirror ? float_nchw<true>(row, W, plane, table, o + yy * W) : float_nchw<false>(row, W, plane, table, o + yy * W);
    }
    return mirror ? float_nhwc<true>(row, W, table, o + yy * W * 3) : float_nhwc<false>(row, W, table, o + yy * W * 3);
  }
  auto* o = static_cast<std::uint8_t*>(out);
  if (layout == Layout::kNCHW) {
    return mirror ? u8_nchw<true>(row, W, plane, o + yy * W) : u8_nchw<false>(row, W, plane, o + yy * W);
  }
  return mirror ? u8_nhwc<true>(row, W, o + yy * W * 3) : u8_nhwc<false>(row, W, o + yy * W * 3);
}

void finish_output_rows() {
#if defined(__x86_64__)
  _mm_sfence();
#endif
}

void apply_photometric(const SamplePlan& plan, std::uint8_t* row, int width) {
  for (const SamplePlan::Photometric& op : plan.photometric) {
    switch (op.kind) {
      case SamplePlan::Photometric::kGrayscale:
        for (int x = 0; x < width; ++x) {
          std::uint8_t* p = row + 3 * x;
          const auto l = static_cast<std::uint8_t>((p[0] * 19595u + p[1] * 38470u + p[2] * 7471u + 0x8000u) >> 16);
          p[0] = p[1] = p[2] = l;
        }
        break;
    }
  }
}

}  // namespace stoker::detail
