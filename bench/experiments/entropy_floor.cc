// Is libjpeg-turbo's entropy decoding the floor of a region decode? Every
// baseline JPEG of a folder is Huffman-decoded to quantized coefficients by
// a hand-written decoder built the way fast decoders are: the entropy-coded
// data unstuffed into a zero-padded copy (so bits refill without branches,
// eight bytes at a time), and an 11-bit lookup table that yields up to two
// AC coefficients (code, extra bits, run and value) per load, EOB and ZRL
// included. Beside it, in the same rounds, libjpeg-turbo's own entropy-only
// pass: jpeg_skip_scanlines over every row but the last (coefficients
// decoded and discarded, as for the rows above a crop). The hand-written
// decoder is checked coefficient for coefficient against
// jpeg_read_coefficients on every file before anything is timed.
//
//   entropy_floor DIR [--rounds R]
// Not used by stoker: it answers whether replacing libjpeg-turbo's Huffman
// decoder would pay (src/decode/README.md has the answer, measured).
#include <cstddef>
#include <cstdio>

#include <jpeglib.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "jpeg_files.h"

namespace {

constexpr int kPairBits = 11;

// Zigzag to natural order; entries past 63 absorb runs that overflow a
// block (corrupt data), as libjpeg's table does.
struct Zigzag {
  std::uint8_t at[128];
  Zigzag() {
    static const std::uint8_t kOrder[64] = {0,  1,  8,  16, 9,  2,  3,  10, 17, 24, 32, 25, 18, 11, 4,  5,
                                            12, 19, 26, 33, 40, 48, 41, 34, 27, 20, 13, 6,  7,  14, 21, 28,
                                            35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51,
                                            58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63};
    for (int k = 0; k < 128; ++k) at[k] = k < 64 ? kOrder[k] : 63;
  }
};
const Zigzag kZigzag;

int extend(int v, int s) { return v < (1 << (s - 1)) ? v - (1 << s) + 1 : v; }

struct Table {
  // Up to two AC symbols per kPairBits-bit window. flags: 1 valid, 2 EOB
  // ends the block, 4 / 8 the first / second coefficient is present, 16 a
  // second symbol (coefficient or EOB) follows the first coefficient.
  // len: bits of both; len1: of the first alone.
  struct Pair {
    std::int16_t v1, v2;
    std::uint8_t r1, r2, len, len1, flags;
  };
  Pair pair[1 << kPairBits];
  int maxcode[18], mincode[17], valptr[17];
  std::uint8_t vals[256];

  void build(const std::uint8_t* counts, const std::uint8_t* syms, bool ac) {
    int code = 0, k = 0;
    for (int len = 1; len <= 16; ++len) {
      valptr[len] = k;
      mincode[len] = code;
      k += counts[len - 1];
      code += counts[len - 1];
      maxcode[len] = counts[len - 1] ? code - 1 : -1;
      code <<= 1;
    }
    std::memcpy(vals, syms, static_cast<std::size_t>(std::min(k, 256)));
    maxcode[17] = 0x7fffffff;
    if (ac) build_pairs();
  }
  // The symbol at the top of a `bits`-bit window, if its code fits.
  bool symbol(std::uint32_t win, int bits, int* rs, int* len) const {
    for (int l = 1; l <= 16 && l <= bits; ++l) {
      const int c = static_cast<int>(win >> (bits - l));
      if (maxcode[l] >= 0 && c >= mincode[l] && c <= maxcode[l]) {
        *rs = vals[valptr[l] + c - mincode[l]];
        *len = l;
        return true;
      }
    }
    return false;
  }
  void build_pairs() {
    for (std::uint32_t idx = 0; idx < (1u << kPairBits); ++idx) {
      Pair e{0, 0, 0, 0, 0, 0, 0};
      int used = 0;
      for (int n = 0; n < 2; ++n) {
        const int left = kPairBits - used;
        int rs = 0, len = 0;
        if (left <= 0 || !symbol(idx & ((1u << left) - 1), left, &rs, &len)) break;
        if (rs == 0) {  // EOB
          used += len;
          e.flags |= n ? 19 : 3;
          break;
        }
        int r = rs >> 4, s = rs & 15, v = 0;
        if ((s == 0 && r != 15) || len + s > left) break;
        if (s) v = extend(static_cast<int>((idx >> (left - len - s)) & ((1u << s) - 1)), s);
        used += len + s;  // ZRL: 15 zeros, then a zero "coefficient"
        if (n == 0) {
          e.r1 = static_cast<std::uint8_t>(r);
          e.v1 = static_cast<std::int16_t>(v);
          e.len1 = static_cast<std::uint8_t>(used);
          e.flags |= 5;
        } else {
          e.r2 = static_cast<std::uint8_t>(r);
          e.v2 = static_cast<std::int16_t>(v);
          e.flags |= 24;
        }
      }
      e.len = static_cast<std::uint8_t>(used);
      pair[idx] = e;
    }
  }
};

// MSB-first bits over a zero-padded, unstuffed copy: refills without branches.
struct Bits {
  const std::uint8_t* p = nullptr;
  std::uint64_t buf = 0;
  int n = 0;
  void refill() {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    buf |= __builtin_bswap64(w) >> n;
    p += (63 - n) >> 3;
    n |= 56;
  }
  std::uint32_t peek(int k) const { return static_cast<std::uint32_t>(buf >> (64 - k)); }
  void skip(int k) {
    buf <<= k;
    n -= k;
  }
  int symbol(const Table& t) {  // after refill(): at least 56 bits
    const std::uint32_t look = peek(16);
    int len = 1;
    while (len <= 16 && static_cast<int>(look >> (16 - len)) > t.maxcode[len]) ++len;
    if (len > 16) return 0;  // bad code: read as EOB / zero DC difference
    const int code = static_cast<int>(look >> (16 - len));
    skip(len);
    return t.vals[(t.valptr[len] + code - t.mincode[len]) & 255];
  }
};

struct Component {
  int id, h, v, dc, ac;
};

// Quantized coefficients of every block in scan order into *out (64 each).
// Returns false for what this decoder does not handle (progressive,
// arithmetic, restart intervals, several scans). tables_only: stop after the
// headers and lookup tables (to time them apart).
bool decode_coefficients(const std::vector<std::uint8_t>& f, std::vector<std::uint8_t>* clean,
                         std::vector<std::int16_t>* out, bool tables_only = false) {
  std::vector<Table> dc(4), ac(4);
  std::vector<Component> comps;
  std::vector<int> scan;
  int width = 0, height = 0;
  const std::uint8_t* p = f.data() + 2;
  const std::uint8_t* end = f.data() + f.size();
  for (;;) {
    if (p + 4 > end || p[0] != 0xFF) return false;
    const int m = p[1], len = p[2] << 8 | p[3];
    const std::uint8_t* s = p + 4;
    if (p + 2 + len > end) return false;
    if (m == 0xC0 || m == 0xC1) {
      height = s[1] << 8 | s[2];
      width = s[3] << 8 | s[4];
      for (int i = 0; i < s[5]; ++i) comps.push_back({s[6 + 3 * i], s[7 + 3 * i] >> 4, s[7 + 3 * i] & 15, 0, 0});
    } else if (m == 0xC4) {
      for (const std::uint8_t* q = s; q < p + 2 + len;) {
        int total = 0;
        for (int i = 0; i < 16; ++i) total += q[1 + i];
        (q[0] >> 4 ? ac : dc)[q[0] & 3].build(q + 1, q + 17, q[0] >> 4);
        q += 17 + total;
      }
    } else if (m == 0xDD) {
      if (s[0] || s[1]) return false;
    } else if (m == 0xDA) {
      for (int i = 0; i < s[0]; ++i) {
        for (std::size_t c = 0; c < comps.size(); ++c) {
          if (comps[c].id != s[1 + 2 * i]) continue;
          comps[c].dc = s[2 + 2 * i] >> 4 & 3;
          comps[c].ac = s[2 + 2 * i] & 3;
          scan.push_back(static_cast<int>(c));
        }
      }
      p += 2 + len;
      break;
    } else if (m >= 0xC2 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) {
      return false;
    }
    p += 2 + len;
  }
  if (scan.size() != comps.size() || width == 0) return false;
  if (tables_only) return true;
  // Unstuff: FF 00 -> FF, up to the first marker.
  clean->resize(static_cast<std::size_t>(end - p) + 64);
  std::uint8_t* o = clean->data();
  while (p < end) {
    const auto* ff = static_cast<const std::uint8_t*>(std::memchr(p, 0xFF, static_cast<std::size_t>(end - p)));
    if (!ff) ff = end;
    std::memcpy(o, p, static_cast<std::size_t>(ff - p));
    o += ff - p;
    p = ff;
    if (p + 1 >= end || p[1] != 0) break;
    *o++ = 0xFF;
    p += 2;
  }
  std::memset(o, 0, 64);
  int hmax = 1, vmax = 1;
  for (const Component& c : comps) {
    hmax = std::max(hmax, c.h);
    vmax = std::max(vmax, c.v);
  }
  const long mcus = static_cast<long>((width + 8 * hmax - 1) / (8 * hmax)) * ((height + 8 * vmax - 1) / (8 * vmax));
  long blocks = 0;
  for (const Component& c : comps) blocks += mcus * c.h * c.v;
  out->resize(static_cast<std::size_t>(blocks) * 64);
  std::int16_t* blk = out->data();
  Bits b;
  b.p = clean->data();
  int pred[4] = {0, 0, 0, 0};
  for (long mcu = 0; mcu < mcus; ++mcu) {
    for (int ci : scan) {
      const Component& c = comps[static_cast<std::size_t>(ci)];
      const Table& ta = ac[static_cast<std::size_t>(c.ac)];
      for (int i = 0; i < c.h * c.v; ++i, blk += 64) {
        std::memset(blk, 0, 64 * sizeof(std::int16_t));
        b.refill();
        const int t = b.symbol(dc[static_cast<std::size_t>(c.dc)]) & 15;
        if (t) {
          pred[ci] += extend(static_cast<int>(b.peek(t)), t);
          b.skip(t);
        }
        blk[0] = static_cast<std::int16_t>(pred[ci]);
        for (int k = 1; k < 64;) {
          b.refill();
          const Table::Pair e = ta.pair[b.peek(kPairBits)];
          if (e.flags & 1) {
            // Branch-free pair: an absent coefficient writes a zero at a
            // position not yet written; the second is written first, so
            // when the first lands on position 63 the second's zero (at
            // "64", i.e. 63) cannot clobber it.
            const int k1 = k + e.r1;
            if (k1 >= 63 && (e.flags & 16)) {  // the block ends with the first: the rest is the next block's
              b.skip(e.len1);
              blk[kZigzag.at[k1]] = e.v1;
              break;
            }
            b.skip(e.len);
            const int k2 = k1 + ((e.flags >> 2) & 1) + e.r2;
            blk[kZigzag.at[k2]] = e.v2;
            blk[kZigzag.at[k1]] = e.v1;
            k = k2 + ((e.flags >> 3) & 1);
            if (e.flags & 2) break;
            continue;
          }
          const int rs = b.symbol(ta), r = rs >> 4, s = rs & 15;
          if (s == 0) {
            if (r != 15) break;
            k += 16;
            continue;
          }
          k += r;
          blk[kZigzag.at[k]] = static_cast<std::int16_t>(extend(static_cast<int>(b.peek(s)), s));
          b.skip(s);
          ++k;
        }
      }
    }
  }
  return true;
}

// libjpeg-turbo's coefficients in the same (scan) order.
std::vector<std::int16_t> reference_coefficients(const std::vector<std::uint8_t>& f) {
  jpeg_decompress_struct ci;
  jpeg_error_mgr je;
  ci.err = jpeg_std_error(&je);
  jpeg_create_decompress(&ci);
  jpeg_mem_src(&ci, f.data(), static_cast<unsigned long>(f.size()));
  jpeg_read_header(&ci, TRUE);
  jvirt_barray_ptr* arrays = jpeg_read_coefficients(&ci);
  std::vector<std::int16_t> out;
  const int hmax = ci.max_h_samp_factor, vmax = ci.max_v_samp_factor;
  const int mx = static_cast<int>((ci.image_width + 8 * static_cast<unsigned>(hmax) - 1) / (8 * static_cast<unsigned>(hmax)));
  const int my = static_cast<int>((ci.image_height + 8 * static_cast<unsigned>(vmax) - 1) / (8 * static_cast<unsigned>(vmax)));
  for (int y = 0; y < my; ++y) {
    for (int x = 0; x < mx; ++x) {
      for (int c = 0; c < ci.num_components; ++c) {
        jpeg_component_info* cp = &ci.comp_info[c];
        for (int by = 0; by < cp->v_samp_factor; ++by) {
          JBLOCKARRAY rows = ci.mem->access_virt_barray(reinterpret_cast<j_common_ptr>(&ci), arrays[c],
                                                        static_cast<JDIMENSION>(y * cp->v_samp_factor + by), 1, FALSE);
          for (int bx = 0; bx < cp->h_samp_factor; ++bx) {
            const JCOEF* blk = rows[0][x * cp->h_samp_factor + bx];
            out.insert(out.end(), blk, blk + 64);
          }
        }
      }
    }
  }
  jpeg_destroy_decompress(&ci);
  return out;
}

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: entropy_floor DIR [--rounds R]\n");
    return 2;
  }
  int rounds = 5;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--rounds") rounds = std::stoi(argv[i + 1]);
  }
  const std::vector<std::string> names = bench::jpeg_files(argv[1]);
  std::vector<std::vector<std::uint8_t>> files;
  std::vector<std::uint8_t> clean;
  std::vector<std::int16_t> coefs;
  for (const std::string& n : names) {  // only what the hand-written decoder handles, verified
    std::vector<std::uint8_t> f = bench::read_bytes(n);
    if (!decode_coefficients(f, &clean, &coefs)) continue;
    if (coefs != reference_coefficients(f)) {
      std::fprintf(stderr, "entropy_floor: %s: coefficients differ from libjpeg-turbo's\n", n.c_str());
      return 1;
    }
    files.push_back(std::move(f));
  }
  if (files.empty()) {
    std::fprintf(stderr, "entropy_floor: no baseline JPEGs under %s\n", argv[1]);
    return 1;
  }
  jpeg_decompress_struct ci;
  jpeg_error_mgr je;
  ci.err = jpeg_std_error(&je);
  jpeg_create_decompress(&ci);
  std::vector<std::uint8_t> row;
  std::vector<double> t_lib, t_own, t_tables;
  for (int r = 0; r <= rounds; ++r) {  // round 0 warms up
    auto t0 = Clock::now();
    for (const auto& f : files) {
      jpeg_mem_src(&ci, f.data(), static_cast<unsigned long>(f.size()));
      jpeg_read_header(&ci, TRUE);
      ci.out_color_space = JCS_RGB;
      jpeg_start_decompress(&ci);
      row.resize(static_cast<std::size_t>(ci.output_width) * 3);
      JSAMPROW rp = row.data();
      jpeg_skip_scanlines(&ci, ci.output_height - 1);
      jpeg_read_scanlines(&ci, &rp, 1);
      jpeg_abort_decompress(&ci);
    }
    const double lib = since(t0);
    t0 = Clock::now();
    for (const auto& f : files) decode_coefficients(f, &clean, &coefs);
    const double own = since(t0);
    t0 = Clock::now();
    for (const auto& f : files) decode_coefficients(f, &clean, &coefs, /*tables_only=*/true);
    const double tables = since(t0);
    if (r == 0) continue;
    t_tables.push_back(tables / static_cast<double>(files.size()) * 1e6);
    t_lib.push_back(lib / static_cast<double>(files.size()) * 1e6);
    t_own.push_back(own / static_cast<double>(files.size()) * 1e6);
  }
  jpeg_destroy_decompress(&ci);
  const double lib = *std::min_element(t_lib.begin(), t_lib.end());
  const double own = *std::min_element(t_own.begin(), t_own.end());
  const double tables = *std::min_element(t_tables.begin(), t_tables.end());
  std::printf("%s: %zu of %zu files (baseline, no restart markers), best of %d rounds, us per image (1 thread)\n",
              argv[1], files.size(), names.size(), rounds);
  // NOTE: libjpeg-turbo's figure includes its own per-image setup (headers,
  // 256-entry tables, one iMCU row decoded in full); the hand-written
  // decoder's two-symbol tables cost more to build, so they are shown apart.
  std::printf("| libjpeg-turbo entropy-only (skip all rows but the last) | hand-written Huffman decode (all coefficients) "
              "| of which headers and tables | libjpeg / hand-written | libjpeg / hand-written without tables |\n");
  std::printf("|---:|---:|---:|---:|---:|\n");
  std::printf("| %.1f | %.1f | %.1f | %.2f | %.2f |\n", lib, own, tables, lib / own, lib / (own - tables));
  return 0;
}
