#include "decode/jpeg_restart_insert.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <string>

#include "decode/jpeg_restart.h"

namespace stoker::detail {
namespace {

// Bits of the Huffman lookup tables: every code this long or shorter is
// found with one lookup, and in AC tables as many whole symbols (code and
// extra bits) as fit in this many bits. DC codes are shorter (at most 9 bits
// in the standard tables, 11 in any): a smaller table for them.
constexpr int kFastBits = 12;
constexpr int kDcFastBits = 9;
// The zigzag advance of an end-of-block: past any block's end (64), so that
// one comparison ends a block, and far enough that an overflowing run (at
// most 63 + 16) is told apart from it.
constexpr int kEob = 128;
// Zero bytes after the unstuffed data. An MCU is checked against the end of
// its segment once decoded, and decodes at most 10 blocks of 31 + 63 * 31
// bits (248 bytes) before that; the bit reader loads 8 bytes at a time.
constexpr std::size_t kPadBytes = 4096;
// The largest category a DC difference has in an 8-bit JPEG (F.1.2.1).
constexpr int kMaxDcCategory = 11;

std::uint64_t load_be64(const std::uint8_t* p) {
  std::uint64_t w;
  std::memcpy(&w, p, 8);
  if constexpr (std::endian::native == std::endian::little) w = __builtin_bswap64(w);
  return w;
}

void store_be64(std::uint8_t* p, std::uint64_t w) {
  if constexpr (std::endian::native == std::endian::little) w = __builtin_bswap64(w);
  std::memcpy(p, &w, 8);
}

int be16(const std::uint8_t* p) { return p[0] << 8 | p[1]; }

std::string hex2(int v) {
  static const char kDigits[] = "0123456789ABCDEF";
  return std::string{kDigits[(v >> 4) & 15], kDigits[v & 15]};
}

// A Huffman table as a DHT segment defines it.
struct HuffSpec {
  bool defined = false;
  std::uint8_t counts[16] = {};  // codes of each length, 1 to 16 bits
  std::uint8_t symbols[256] = {};
};

// The standard DC tables (JPEG Annex K.3 and K.4): each codes every
// category 0 to 11.
HuffSpec standard_dc_table(bool luminance) {
  static const std::uint8_t kLuma[16] = {0, 1, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0};
  static const std::uint8_t kChroma[16] = {0, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0};
  HuffSpec h;
  h.defined = true;
  std::memcpy(h.counts, luminance ? kLuma : kChroma, 16);
  for (int i = 0; i <= kMaxDcCategory; ++i) h.symbols[i] = static_cast<std::uint8_t>(i);
  return h;
}

int total_codes(const HuffSpec& h) {
  int total = 0;
  for (int l = 0; l < 16; ++l) total += h.counts[l];
  return total;
}

// A Huffman table for decoding: fast[] holds, for each head of the data
// (kDcFastBits or kFastBits bits), what it starts with. Longer codes are
// found as libjpeg finds them (the largest code of each length).
//   DC tables: bits 0-4, the length of the first code and its extra bits
//   together when they fit in the head (else 0); bits 5-9, the code's
//   length when it fits (else 0); bits 10-13, its symbol (the category);
//   bits 16-31, the DC difference (int16) when code and extra bits fit.
//   AC tables: bits 0-4, the length of the whole symbols (code and extra
//   bits) that fit, taken while the last taken is not an end-of-block, or
//   of the first symbol alone when its code fits but not its extra bits;
//   bits 5-11, how far they move along the zigzag (run + 1 each, 16 for a
//   ZRL; kNoSymbols for none); bit 12, they end with an end-of-block. Then
//   the first symbol alone, when its code fits: bits 13-17, the length of
//   its code and extra bits (0: an invalid symbol); bits 18-25, its advance
//   (kEob for an end-of-block); bits 26-29, its code's length.
constexpr std::uint32_t kNoSymbols = 127;
constexpr std::uint32_t kEobBit = 1u << 12;

struct DecodeTable {
  std::uint32_t fast[1 << kFastBits];
  int fast_bits = 0;
  std::int32_t maxcode[17];
  std::int32_t valoffset[17];
  std::uint8_t symbols[256];
  HuffSpec built_from;  // to skip rebuilding the same table for the next image
  std::vector<std::uint32_t> scratch;
};

// The zigzag advance of AC symbol `sym` (kEob for an end-of-block), 0 for
// symbols without one (no extra bits, neither EOB nor ZRL: invalid).
int ac_advance(int sym) {
  const int r = sym >> 4, s = sym & 15;
  if (s != 0) return r + 1;
  return r == 15 ? 16 : r == 0 ? kEob : 0;
}

// False when libjpeg-turbo would refuse the table (its checks in
// jpeg_make_d_derived_tbl): more than 256 codes, codes that do not fit their
// lengths (or an all-ones code), DC symbols above 15.
bool build_decode_table(const HuffSpec& h, bool dc, DecodeTable* t) {
  const int bits = dc ? kDcFastBits : kFastBits;
  if (t->built_from.defined && t->fast_bits == bits &&
      std::memcmp(t->built_from.counts, h.counts, sizeof(h.counts)) == 0 &&
      std::memcmp(t->built_from.symbols, h.symbols, sizeof(h.symbols)) == 0) {
    return true;
  }
  t->built_from.defined = false;
  t->fast_bits = bits;
  const int total = total_codes(h);
  if (total > 256) return false;
  if (dc) {
    for (int i = 0; i < total; ++i) {
      if (h.symbols[i] > 15) return false;
    }
  }
  std::memcpy(t->symbols, h.symbols, sizeof(t->symbols));
  // First the code each head starts with: length << 16 | symbol << 24.
  const int size = 1 << bits, mask = size - 1;
  std::fill(t->fast, t->fast + size, 0u);
  int code = 0, p = 0;
  for (int l = 1; l <= 16; ++l) {
    const int count = h.counts[l - 1];
    if (count > 0 && code + count >= (1 << l)) return false;
    t->valoffset[l] = p - code;
    t->maxcode[l] = count > 0 ? code + count - 1 : -1;
    for (int i = 0; i < count; ++i, ++p, ++code) {
      if (l > bits) continue;
      const int shift = bits - l;
      std::fill(t->fast + (code << shift), t->fast + ((code + 1) << shift),
                static_cast<std::uint32_t>(l) << 16 | static_cast<std::uint32_t>(h.symbols[p]) << 24);
    }
    code <<= 1;
  }
  if (dc) {
    for (int i = 0; i < size; ++i) {
      const std::uint32_t e = t->fast[i];
      const int l = static_cast<int>(e >> 16 & 31), cat = static_cast<int>(e >> 24);
      std::uint32_t out = static_cast<std::uint32_t>(l) << 5 | static_cast<std::uint32_t>(cat) << 10;
      if (l > 0 && l + cat <= bits) {
        const int v = (i >> (bits - l - cat)) & ((1 << cat) - 1);
        const int diff = cat == 0 ? 0 : v < (1 << (cat - 1)) ? v - (1 << cat) + 1 : v;
        out |= static_cast<std::uint32_t>(l + cat) | static_cast<std::uint32_t>(static_cast<std::uint16_t>(diff)) << 16;
      }
      t->fast[i] = out;
    }
  } else {
    // The first symbol of each head: its code and extra bits' length (63
    // when the code does not fit or the symbol is invalid) | advance << 8.
    std::vector<std::uint32_t>& first = t->scratch;
    first.resize(static_cast<std::size_t>(size));
    for (int i = 0; i < size; ++i) {
      const std::uint32_t e = t->fast[i];
      const int l = static_cast<int>(e >> 16 & 31), sym = static_cast<int>(e >> 24), a = ac_advance(sym);
      first[static_cast<std::size_t>(i)] =
          static_cast<std::uint32_t>(l != 0 && a != 0 ? l + (sym & 15) : 63) | static_cast<std::uint32_t>(a) << 8;
    }
    // Then as many whole symbols as fit, up to an end-of-block.
    for (int i = 0; i < size; ++i) {
      const std::uint32_t f = first[static_cast<std::size_t>(i)];
      const int a1 = static_cast<int>(f >> 8);
      int used = 0, adv = 0;
      bool eob = false;
      for (std::uint32_t g = f; static_cast<int>(g & 63) <= bits - used;) {
        used += static_cast<int>(g & 63);
        if ((g >> 8) == kEob) {
          eob = true;
          break;
        }
        adv += static_cast<int>(g >> 8);
        if (used == bits) break;
        g = first[static_cast<std::size_t>((i << used) & mask)];
      }
      std::uint32_t out = 0;
      if (used > 0) {
        out = static_cast<std::uint32_t>(used) |
              std::min<std::uint32_t>(static_cast<std::uint32_t>(adv), kNoSymbols) << 5 | (eob ? kEobBit : 0);
      } else if ((f & 63) != 63 && a1 != kEob) {  // the code fits, not its extra bits (at most 12 + 15)
        out = (f & 63) | static_cast<std::uint32_t>(a1) << 5;
      } else {
        out = kNoSymbols << 5;
      }
      if ((f & 63) != 63) out |= (f & 63) << 13 | static_cast<std::uint32_t>(a1) << 18;
      t->fast[i] = out | (t->fast[i] >> 16 & 31) << 26;
    }
  }
  t->built_from = h;
  return true;
}

// The symbol at the head of `buf` (at least 16 bits valid) and its code's
// length in *len; -1 when no code matches. `code_len`: the code's length
// when the fast table has it (else 0: longer than its head).
int slow_symbol(const DecodeTable& t, std::uint64_t buf, int code_len, int* len) {
  for (int l = code_len != 0 ? code_len : t.fast_bits + 1; l <= 16; ++l) {
    const auto code = static_cast<std::int32_t>(buf >> (64 - l));
    if (code <= t.maxcode[l]) {
      const std::int32_t i = code + t.valoffset[l];
      if (i < 0 || i > 255) return -1;
      *len = l;
      return t.symbols[i];
    }
  }
  return -1;
}

// MSB-first bits of the unstuffed data (which holds at least 8 readable
// bytes past any point read).
struct BitReader {
  const std::uint8_t* base = nullptr;
  const std::uint8_t* p = nullptr;  // the next byte not yet in buf
  std::uint64_t buf = 0;            // the next n bits at its top, zeros below
  int n = 0;

  std::uint64_t pos() const { return static_cast<std::uint64_t>(p - base) * 8 - static_cast<std::uint64_t>(n); }
  void seek(std::uint64_t bit) {  // REQUIRES: bit % 8 == 0
    p = base + (bit >> 3);
    buf = 0;
    n = 0;
  }
};

enum class BlockError { kNone, kBadCode, kBadSymbol, kOverflow };

// Reads one block: *diff gets its DC difference and *dc_bits the length of
// the DC's code and extra bits; the AC symbols are passed over. On
// kBadSymbol *diff holds the symbol.
inline BlockError read_block(BitReader* r, const DecodeTable& dct, const DecodeTable& act, std::int32_t* diff,
                             int* dc_bits) {
  // Locals, not members: the hot loop keeps them in registers.
  std::uint64_t buf = r->buf;
  int n = r->n;
  const std::uint8_t* p = r->p;
  const auto refill = [&] {
    buf |= load_be64(p) >> n;
    p += (63 - n) >> 3;
    n |= 56;
  };
  BlockError error = BlockError::kNone;
  if (n < 32) refill();
  const int n_dc = n;
  const std::uint32_t d = dct.fast[buf >> (64 - kDcFastBits)];
  *diff = 0;
  if ((d & 31) != 0) {
    *diff = static_cast<std::int16_t>(d >> 16);
    buf <<= d & 31;
    n -= static_cast<int>(d & 31);
  } else {
    int len = 0;
    const int t = slow_symbol(dct, buf, static_cast<int>(d >> 5 & 31), &len);
    if (t < 0) return BlockError::kBadCode;
    buf <<= len;
    n -= len;
    if (t > 0) {
      const auto v = static_cast<std::int32_t>(buf >> (64 - t));
      *diff = v < (1 << (t - 1)) ? v - (1 << t) + 1 : v;
      buf <<= t;
      n -= t;
    }
  }
  *dc_bits = n_dc - n;
  int k = 1;
  for (;;) {
    // NOTE: refilled every time, without a branch: faster than refilling
    // when fewer than 32 bits are left (a branch that mispredicts often).
    refill();
    const std::uint32_t e = act.fast[buf >> (64 - kFastBits)];
    const int adv = static_cast<int>(e >> 5 & 127);
    if (k + adv < 64) {  // every symbol of the entry lies in this block
      buf <<= e & 31;
      n -= static_cast<int>(e & 31);
      k += adv;
      if (e & kEobBit) break;
      continue;
    }
    // The block ends inside the entry, or no whole symbol fits in it: one
    // symbol.
    const int one = static_cast<int>(e >> 13 & 31);
    if (one != 0) {
      buf <<= one;
      n -= one;
      k += static_cast<int>(e >> 18 & 255);
      if (k >= 64) break;
      continue;
    }
    int len = 0;
    const int rs = slow_symbol(act, buf, static_cast<int>(e >> 26 & 15), &len);
    if (rs < 0) {
      error = BlockError::kBadCode;
      break;
    }
    const int a = ac_advance(rs);
    if (a == 0) {
      *diff = rs;
      error = BlockError::kBadSymbol;
      break;
    }
    buf <<= len;
    n -= len;
    buf <<= rs & 15;
    n -= rs & 15;
    k += a;
    if (k >= 64) break;
  }
  if (k > 64 && k < kEob) error = BlockError::kOverflow;
  r->buf = buf;
  r->n = n;
  r->p = p;
  return error;
}

// A DC table for encoding: each category's code and length (0: not coded).
struct DcEncoder {
  std::uint16_t code[16] = {};
  std::uint8_t len[16] = {};
};

DcEncoder dc_encoder(const HuffSpec& h) {
  DcEncoder e;
  int code = 0, p = 0;
  for (int l = 1; l <= 16; ++l) {
    for (int i = 0; i < h.counts[l - 1]; ++i, ++p, ++code) {
      const int sym = h.symbols[p];
      if (sym < 16 && e.len[sym] == 0) {
        e.code[sym] = static_cast<std::uint16_t>(code);
        e.len[sym] = static_cast<std::uint8_t>(l);
      }
    }
    code <<= 1;
  }
  return e;
}

// Entropy-coded data between two markers, as bit offsets into the unstuffed
// copy; `marker`: the code of the marker that ends it (0xD0-0xD7: RSTn), -1
// when the input ends first.
struct Segment {
  std::uint64_t start = 0, end = 0;
  int marker = -1;
};

// MSB-first bits written with 0xFF bytes stuffed (FF -> FF 00), into a
// vector grown on demand.
class BitWriter {
 public:
  void start(std::vector<std::uint8_t>* out) {
    out_ = out;
    at_ = out->size();
    acc_ = 0;
    bits_ = 0;
  }
  // Room for `bytes` more output bytes (stuffed), beyond the bits held.
  void reserve(std::size_t bytes) {
    const std::size_t need = at_ + bytes + 32;
    if (need > out_->size()) out_->resize(std::max(need, out_->size() * 2));
  }
  // REQUIRES: n <= 56, v < 2^n, reserve() for them.
  void put(std::uint64_t v, int n) {
    acc_ = acc_ << n | v;
    bits_ += n;
    const int bytes = bits_ >> 3;
    if (bytes == 0) return;
    bits_ &= 7;
    // The whole bytes at the top of a word: written 8 at a time, kept as
    // far as they go.
    const std::uint64_t w = (acc_ >> bits_) << (64 - 8 * bytes);
    std::uint8_t* o = out_->data() + at_;
    const std::uint64_t x = ~w;
    if (((x - 0x0101010101010101u) & ~x & 0x8080808080808080u & (~std::uint64_t{0} << (64 - 8 * bytes))) == 0) {
      store_be64(o, w);
      at_ += static_cast<std::size_t>(bytes);
      return;
    }
    for (int i = 0; i < bytes; ++i) {  // a 0xFF among them
      *o = static_cast<std::uint8_t>(w >> (56 - 8 * i));
      if (*o++ == 0xFF) *o++ = 0;
    }
    at_ = static_cast<std::size_t>(o - out_->data());
  }
  // Bits [a, b) of `src` (MSB first), which holds 8 readable bytes past b / 8.
  void copy(const std::uint8_t* src, std::uint64_t a, std::uint64_t b) {
    reserve(static_cast<std::size_t>((b - a) >> 2));  // stuffing at most doubles the bytes
    for (; b - a >= 56; a += 56) put((load_be64(src + (a >> 3)) << (a & 7)) >> 8, 56);
    const int n = static_cast<int>(b - a);
    if (n > 0) put((load_be64(src + (a >> 3)) << (a & 7)) >> (64 - n), n);
  }
  // Pads to a byte with 1-bits, then writes the marker FF `code`.
  void pad_and_marker(int code) {
    reserve(8);
    if (bits_ > 0) put((1u << (8 - bits_)) - 1, 8 - bits_);
    out_->data()[at_++] = 0xFF;
    out_->data()[at_++] = static_cast<std::uint8_t>(code);
  }
  void finish() { out_->resize(at_); }

 private:
  std::vector<std::uint8_t>* out_ = nullptr;
  std::size_t at_ = 0;
  std::uint64_t acc_ = 0;  // bits_ (< 8 between calls) bits not yet written, at the bottom
  int bits_ = 0;
};

struct FrameComponent {
  int id = 0, h = 1, v = 1, quant = 0;
};

struct ScanComponent {
  int dc = 0, ac = 0;  // Huffman table ids
  int blocks = 1;      // blocks per MCU
};

}  // namespace

struct JpegRestartInserter::State {
  // Parsed headers.
  HuffSpec dc_spec[4], ac_spec[4];
  bool quant_defined[4] = {};
  FrameComponent frame[4];
  int components = 0, width = 0, height = 0;
  int old_interval = 0;
  ScanComponent scan[4];
  std::size_t sos = 0, sos_len = 0, data = 0;  // the SOS segment; the entropy-coded data's first byte
  std::size_t headers_out = 0;                 // bytes of *out holding SOI and the segments kept
  // The entropy-coded data.
  std::vector<std::uint8_t> bits;  // unstuffed, then kPadBytes zeros
  std::vector<Segment> segments;
  DecodeTable dc_table[4], ac_table[4];
  BitWriter writer;

  Status parse_headers(const std::uint8_t* p, std::size_t n, std::vector<std::uint8_t>* out);
  Status unstuff(const std::uint8_t* p, std::size_t n);
  // One pass over the scan, writing the entropy-coded data. `replace`: the
  // DC tables (bit per id) replaced by the standard ones. A DC value the
  // output's table cannot code ends the pass with its table's bit in *need.
  Status rewrite(unsigned replace, unsigned* need);
};

JpegRestartInserter::JpegRestartInserter() : s_(std::make_unique<State>()) {}
JpegRestartInserter::~JpegRestartInserter() = default;

Status JpegRestartInserter::State::parse_headers(const std::uint8_t* p, std::size_t n, std::vector<std::uint8_t>* out) {
  for (auto& h : dc_spec) h.defined = false;
  for (auto& h : ac_spec) h.defined = false;
  std::fill(std::begin(quant_defined), std::end(quant_defined), false);
  components = width = height = old_interval = 0;
  if (n < 4 || p[0] != 0xFF || p[1] != 0xD8) return Status::Corrupt("JPEG header: no start-of-image marker");
  out->assign(p, p + 2);
  bool sof = false;
  for (std::size_t i = 2;;) {
    if (i >= n) return Status::Corrupt("JPEG truncated in its header (" + std::to_string(n) + " bytes)");
    if (p[i] != 0xFF) return Status::Corrupt("JPEG header: no marker at byte " + std::to_string(i));
    while (i + 1 < n && p[i + 1] == 0xFF) ++i;  // fill bytes
    if (i + 1 >= n) return Status::Corrupt("JPEG truncated in its header (" + std::to_string(n) + " bytes)");
    const int m = p[i + 1];
    const auto name = [&] { return "marker FF" + hex2(m) + " at byte " + std::to_string(i); };
    if (m == 0xD8 || m == 0xD9 || m == 0x00) return Status::Corrupt("JPEG header: " + name() + " before the scan");
    if ((m >= 0xD0 && m <= 0xD7) || m == 0x01) return Status::Unsupported("restart insert: " + name());
    if (i + 4 > n) return Status::Corrupt("JPEG truncated in its header (" + std::to_string(n) + " bytes)");
    const std::size_t len = static_cast<std::size_t>(be16(p + i + 2));
    if (len < 2) return Status::Corrupt("JPEG header: " + name() + " of length " + std::to_string(len));
    if (i + 2 + len > n) return Status::Corrupt("JPEG truncated in its header (" + std::to_string(n) + " bytes)");
    const std::uint8_t* s = p + i + 4;
    const std::size_t body = len - 2;
    bool keep = true;
    if (m == 0xC0 || m == 0xC1) {
      if (sof) return Status::Corrupt("JPEG header: a second frame header (" + name() + ")");
      sof = true;
      if (body < 6) return Status::Corrupt("JPEG header: frame header of length " + std::to_string(len));
      if (s[0] != 8) return Status::Unsupported("restart insert: " + std::to_string(s[0]) + "-bit JPEG");
      height = be16(s + 1);
      width = be16(s + 3);
      components = s[5];
      if (body != 6 + 3 * static_cast<std::size_t>(components)) {
        return Status::Corrupt("JPEG header: frame header of length " + std::to_string(len) + " for " +
                               std::to_string(components) + " components");
      }
      if (height == 0) return Status::Unsupported("restart insert: height given by a DNL marker");
      if (width == 0 || components == 0) return Status::Corrupt("JPEG header: empty image");
      if (width > 65500 || height > 65500) return Status::Corrupt("JPEG header: image too big");
      if (components > 4) {
        return Status::Unsupported("restart insert: " + std::to_string(components) + " components");
      }
      for (int c = 0; c < components; ++c) {
        FrameComponent& f = frame[c];
        f.id = s[6 + 3 * c];
        f.h = s[7 + 3 * c] >> 4;
        f.v = s[7 + 3 * c] & 15;
        f.quant = s[8 + 3 * c];
        if (f.h < 1 || f.h > 4 || f.v < 1 || f.v > 4) return Status::Corrupt("JPEG header: bad sampling factors");
        if (f.quant > 3) return Status::Corrupt("JPEG header: quantization table " + std::to_string(f.quant));
        for (int d = 0; d < c; ++d) {
          if (frame[d].id == f.id) return Status::Unsupported("restart insert: two components with one id");
        }
      }
    } else if (m >= 0xC2 && m <= 0xCF && m != 0xC4) {
      return Status::Unsupported("restart insert: not baseline Huffman-coded (SOF or DAC marker FF" + hex2(m) + ")");
    } else if (m == 0xC4) {
      for (std::size_t k = 0; k < body;) {
        if (body - k < 17) {
          return Status::Corrupt("JPEG header: Huffman table segment of length " + std::to_string(len));
        }
        const int index = s[k];
        if ((index >> 4) > 1 || (index & 15) > 3) {
          return Status::Corrupt("JPEG header: Huffman table id " + hex2(index));
        }
        HuffSpec& h = (index >> 4 ? ac_spec : dc_spec)[index & 15];
        std::memcpy(h.counts, s + k + 1, 16);
        const int total = total_codes(h);
        if (total > 256 || body - k - 17 < static_cast<std::size_t>(total)) {
          return Status::Corrupt("JPEG header: bad Huffman table");
        }
        std::memset(h.symbols, 0, sizeof(h.symbols));
        std::memcpy(h.symbols, s + k + 17, static_cast<std::size_t>(total));
        h.defined = true;
        k += 17 + static_cast<std::size_t>(total);
      }
    } else if (m == 0xDB) {
      for (std::size_t k = 0; k < body;) {
        const int prec = s[k] >> 4, id = s[k] & 15;
        const std::size_t need = 1 + 64 * static_cast<std::size_t>(prec + 1);
        if (prec > 1 || id > 3) return Status::Corrupt("JPEG header: quantization table " + hex2(s[k]));
        if (body - k < need) {
          return Status::Corrupt("JPEG header: quantization table segment of length " + std::to_string(len));
        }
        quant_defined[id] = true;
        k += need;
      }
    } else if (m == 0xDD) {
      if (len != 4) return Status::Corrupt("JPEG header: restart interval segment of length " + std::to_string(len));
      old_interval = be16(s);
      keep = false;  // replaced by the new interval
    } else if (m == 0xDA) {
      if (!sof) return Status::Corrupt("JPEG header: scan before the frame header");
      const int ns = body > 0 ? s[0] : 0;
      if (ns < 1 || ns > 4 || body != 4 + 2 * static_cast<std::size_t>(ns)) {
        return Status::Corrupt("JPEG header: scan header of length " + std::to_string(len));
      }
      if (ns != components) return Status::Unsupported("restart insert: several scans");
      int hmax = 1, vmax = 1, blocks = 0;
      for (int c = 0; c < components; ++c) {
        hmax = std::max(hmax, frame[c].h);
        vmax = std::max(vmax, frame[c].v);
      }
      for (int k = 0; k < ns; ++k) {
        const int id = s[1 + 2 * k], tables = s[2 + 2 * k];
        int c = 0;
        while (c < components && frame[c].id != id) ++c;
        if (c == components) return Status::Corrupt("JPEG header: scan of a component not in the frame");
        for (int j = 0; j < k; ++j) {
          if (s[1 + 2 * j] == id) return Status::Corrupt("JPEG header: a component twice in the scan");
        }
        ScanComponent& sc = scan[k];
        sc.dc = tables >> 4;
        sc.ac = tables & 15;
        if (sc.dc > 3 || sc.ac > 3) return Status::Corrupt("JPEG header: Huffman table id " + hex2(tables));
        if (!dc_spec[sc.dc].defined || !ac_spec[sc.ac].defined) {
          return Status::Unsupported("restart insert: a Huffman table the file leaves undefined");
        }
        if (!quant_defined[frame[c].quant]) {
          return Status::Corrupt("JPEG header: quantization table " + std::to_string(frame[c].quant) + " undefined");
        }
        if (hmax % frame[c].h != 0 || vmax % frame[c].v != 0) {
          return Status::Unsupported("restart insert: fractional sampling factors");
        }
        sc.blocks = components == 1 ? 1 : frame[c].h * frame[c].v;
        blocks += sc.blocks;
      }
      if (blocks > 10) return Status::Corrupt("JPEG header: " + std::to_string(blocks) + " blocks per MCU");
      const std::uint8_t* tail = s + 1 + 2 * ns;
      if (tail[0] != 0 || tail[1] != 63 || tail[2] != 0) {
        return Status::Unsupported("restart insert: scan of spectral selection or successive approximation");
      }
      sos = i;
      sos_len = 2 + len;
      data = i + 2 + len;
      headers_out = out->size();
      return Status::Ok();
    } else if (m == 0xDC || m == 0xDE || m == 0xDF) {
      return Status::Unsupported("restart insert: " + name());
    } else if (!(m >= 0xE0 && m <= 0xEF) && m != 0xFE) {
      return Status::Corrupt("JPEG header: unknown " + name());
    }
    if (keep) out->insert(out->end(), p + i, p + i + 2 + len);
    i += 2 + len;
  }
}

Status JpegRestartInserter::State::unstuff(const std::uint8_t* p, std::size_t n) {
  segments.clear();
  bits.resize(n - data + kPadBytes);
  std::uint8_t* const base = bits.data();
  std::uint8_t* o = base;
  const std::uint8_t* q = p + data;
  const std::uint8_t* const end = p + n;
  Segment seg;
  for (;;) {
    const auto* ff = static_cast<const std::uint8_t*>(std::memchr(q, 0xFF, static_cast<std::size_t>(end - q)));
    if (ff == nullptr) {  // the input ends inside the scan
      std::memcpy(o, q, static_cast<std::size_t>(end - q));
      o += end - q;
      seg.end = static_cast<std::uint64_t>(o - base) * 8;
      segments.push_back(seg);
      break;
    }
    std::memcpy(o, q, static_cast<std::size_t>(ff - q));
    o += ff - q;
    q = ff + 1;
    if (q < end && *q == 0x00) {  // stuffed
      *o++ = 0xFF;
      ++q;
      continue;
    }
    while (q < end && *q == 0xFF) ++q;  // fill bytes before a marker
    seg.end = static_cast<std::uint64_t>(o - base) * 8;
    if (q == end) {
      segments.push_back(seg);
      break;
    }
    if (*q == 0x00) return Status::Corrupt("JPEG data: fill bytes before a stuffed zero");
    seg.marker = *q++;
    segments.push_back(seg);
    if (seg.marker < 0xD0 || seg.marker > 0xD7) break;
    seg = Segment{seg.end, seg.end, -1};
  }
  std::memset(o, 0, kPadBytes);
  return Status::Ok();
}

Status JpegRestartInserter::State::rewrite(unsigned replace, unsigned* need) {
  int hmax = 1, vmax = 1;
  for (int c = 0; c < components; ++c) {
    hmax = std::max(hmax, frame[c].h);
    vmax = std::max(vmax, frame[c].v);
  }
  const int mcu_w = components == 1 ? 8 : 8 * hmax, mcu_h = components == 1 ? 8 : 8 * vmax;
  const std::int64_t per_row = (width + mcu_w - 1) / mcu_w;
  const std::int64_t mcus = per_row * ((height + mcu_h - 1) / mcu_h);
  const int interval = restart_interval_for(width, mcu_w);
  DcEncoder encoder[4];
  for (int t = 0; t < 4; ++t) {
    if (replace >> t & 1) {
      encoder[t] = dc_encoder(standard_dc_table(t == 0));
    } else if (dc_spec[t].defined) {
      encoder[t] = dc_encoder(dc_spec[t]);
    }
  }
  const auto where = [&](std::int64_t m) { return " (MCU " + std::to_string(m) + " of " + std::to_string(mcus) + ")"; };

  const std::uint8_t* const base = bits.data();
  BitReader reader;
  reader.base = reader.p = base;
  // The blocks of an MCU in scan order: the component and tables of each.
  int block_component[10], blocks = 0;
  const DecodeTable* block_dc[10];
  const DecodeTable* block_ac[10];
  for (int c = 0; c < components; ++c) {
    for (int b = 0; b < scan[c].blocks; ++b, ++blocks) {
      block_component[blocks] = c;
      block_dc[blocks] = &dc_table[scan[c].dc];
      block_ac[blocks] = &ac_table[scan[c].ac];
    }
  }

  std::size_t seg = 0;
  std::uint64_t copy_from = 0;
  std::uint32_t pred_in[4] = {}, pred_out[4] = {};
  int to_old = old_interval, to_new = interval;  // MCUs left in the current restart intervals
  int rst_in = 0, rst_out = 0;
  for (std::int64_t m = 0; m < mcus; ++m) {
    if (m > 0 && ((old_interval > 0 && to_old == 0) || to_new == 0)) {
      const std::uint64_t end = reader.pos();
      writer.copy(base, copy_from, end);
      copy_from = end;
      if (old_interval > 0 && to_old == 0) {  // the input's restart marker: DC predictions reset
        const Segment& s = segments[seg];
        if (((end + 7) & ~std::uint64_t{7}) != s.end) {
          return Status::Corrupt("JPEG data: bytes before a restart marker" + where(m));
        }
        if (s.marker != 0xD0 + (rst_in & 7)) {
          return Status::Corrupt(s.marker < 0 ? "JPEG truncated" + where(m)
                                              : "JPEG data: marker FF" + hex2(s.marker) + " where RST" +
                                                    std::to_string(rst_in & 7) + " belongs" + where(m));
        }
        ++rst_in;
        ++seg;
        reader.seek(segments[seg].start);
        copy_from = segments[seg].start;
        std::fill(std::begin(pred_in), std::end(pred_in), 0u);
        to_old = old_interval;
      }
      if (to_new == 0) {
        writer.pad_and_marker(0xD0 + (rst_out & 7));
        ++rst_out;
        std::fill(std::begin(pred_out), std::end(pred_out), 0u);
        to_new = interval;
      }
    }
    --to_old;
    --to_new;
    for (int i = 0; i < blocks; ++i) {
      const int c = block_component[i];
      const std::uint64_t block_at = reader.pos();
      std::int32_t diff = 0;
      int dc_bits = 0;
      const BlockError error = read_block(&reader, *block_dc[i], *block_ac[i], &diff, &dc_bits);
      if (error != BlockError::kNone) {
        return Status::Corrupt(error == BlockError::kBadCode ? "JPEG data: bad Huffman code" + where(m)
                               : error == BlockError::kBadSymbol
                                   ? "JPEG data: AC symbol " + hex2(diff) + where(m)
                                   : "JPEG data: a block of more than 64 coefficients" + where(m));
      }
      // The DC difference in the output: against 0 after a new restart
      // marker, against the previous block without the input's.
      const std::uint32_t value = pred_in[c] + static_cast<std::uint32_t>(diff);  // wraps as libjpeg's int does
      pred_in[c] = value;
      const auto out_diff = static_cast<std::int32_t>(value - pred_out[c]);
      pred_out[c] = value;
      const int dc_id = scan[c].dc;
      const bool replaced = (replace >> dc_id & 1) != 0;
      if (out_diff != diff || replaced) {
        const std::int64_t mag = out_diff < 0 ? -static_cast<std::int64_t>(out_diff) : out_diff;
        const int cat = std::bit_width(static_cast<std::uint64_t>(mag));
        const DcEncoder& e = encoder[dc_id];
        if (cat > 15 || e.len[cat] == 0) {
          if (cat > kMaxDcCategory || replaced) {
            return Status::Unsupported("restart insert: a DC value beyond the 8-bit range" + where(m));
          }
          *need = 1u << dc_id;
          return Status::Ok();
        } else {
          writer.copy(base, copy_from, block_at);
          writer.reserve(8);
          const std::int32_t extra = out_diff < 0 ? out_diff - 1 : out_diff;
          writer.put(
              static_cast<std::uint64_t>(e.code[cat]) << cat | (static_cast<std::uint32_t>(extra) & ((1u << cat) - 1)),
              e.len[cat] + cat);
          copy_from = block_at + static_cast<std::uint64_t>(dc_bits);
        }
      }
    }
    if (reader.pos() > segments[seg].end) {
      return Status::Corrupt(segments[seg].marker < 0
                                 ? "JPEG truncated" + where(m)
                                 : "JPEG data: marker FF" + hex2(segments[seg].marker) + " inside the scan" + where(m));
    }
  }
  // After the last MCU: padding bits, then (past any restart markers with
  // nothing after them, which libjpeg passes over) the end-of-image marker.
  const std::uint64_t end = reader.pos();
  if (((end + 7) & ~std::uint64_t{7}) != segments[seg].end) {
    return Status::Corrupt("JPEG data: bytes after the last MCU");
  }
  while (segments[seg].marker >= 0xD0 && segments[seg].marker <= 0xD7) {
    ++seg;
    if (segments[seg].end != segments[seg].start) return Status::Corrupt("JPEG data: bytes after the last MCU");
  }
  if (segments[seg].marker < 0) return Status::Corrupt("JPEG truncated: no end-of-image marker");
  if (segments[seg].marker != 0xD9) {
    return Status::Unsupported("restart insert: marker FF" + hex2(segments[seg].marker) + " after the scan");
  }
  writer.copy(base, copy_from, end);
  writer.pad_and_marker(0xD9);
  writer.finish();
  return Status::Ok();
}

Status JpegRestartInserter::insert(const std::uint8_t* data, std::size_t size, std::vector<std::uint8_t>* out) {
  State& s = *s_;
  Status st = s.parse_headers(data, size, out);
  if (!st.ok()) return st;
  for (int c = 0; c < s.components; ++c) {
    if (!build_decode_table(s.dc_spec[s.scan[c].dc], /*dc=*/true, &s.dc_table[s.scan[c].dc]) ||
        !build_decode_table(s.ac_spec[s.scan[c].ac], /*dc=*/false, &s.ac_table[s.scan[c].ac])) {
      return Status::Corrupt("JPEG header: bad Huffman table");
    }
  }
  st = s.unstuff(data, size);
  if (!st.ok()) return st;
  // NOTE: a pass ends at the first DC value its tables cannot code, and the
  // next replaces that table: a value a table misses tends to come early (in
  // the first rows), so this costs less than a pass that finds them all.
  unsigned replace = 0;
  for (int pass = 0; pass <= 4; ++pass) {
    out->resize(s.headers_out);
    if (replace != 0) {  // one DHT segment with the standard tables, after the file's
      const std::size_t at = out->size();
      out->insert(out->end(), {0xFF, 0xC4, 0, 0});
      for (int t = 0; t < 4; ++t) {
        if (!(replace >> t & 1)) continue;
        const HuffSpec h = standard_dc_table(t == 0);
        out->push_back(static_cast<std::uint8_t>(t));
        out->insert(out->end(), h.counts, h.counts + 16);
        out->insert(out->end(), h.symbols, h.symbols + total_codes(h));
      }
      (*out)[at + 2] = static_cast<std::uint8_t>((out->size() - at - 2) >> 8);
      (*out)[at + 3] = static_cast<std::uint8_t>((out->size() - at - 2) & 0xFF);
    }
    int hmax = 1;
    for (int c = 0; c < s.components; ++c) hmax = std::max(hmax, s.frame[c].h);
    const int interval = restart_interval_for(s.width, s.components == 1 ? 8 : 8 * hmax);
    out->insert(out->end(), {0xFF, 0xDD, 0, 4, static_cast<std::uint8_t>(interval >> 8),
                             static_cast<std::uint8_t>(interval & 0xFF)});
    out->insert(out->end(), data + s.sos, data + s.sos + s.sos_len);
    s.writer.start(out);
    s.writer.reserve(size - s.data + size / 8);
    unsigned need = 0;
    st = s.rewrite(replace, &need);
    if (!st.ok() || need == 0) return st;
    replace |= need;
  }
  return Status::Internal("restart insert: DC tables still short after replacing them");
}

Status insert_restart_markers(const std::uint8_t* data, std::size_t size, std::vector<std::uint8_t>* out) {
  JpegRestartInserter inserter;
  return inserter.insert(data, size, out);
}

}  // namespace stoker::detail
