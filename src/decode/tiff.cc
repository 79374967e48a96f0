#include "decode/tiff.h"

#include <tiffio.h>

#include <algorithm>
#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "decode/pil_convert.h"

namespace stoker::detail {
namespace {

// The file, served from memory: read, seek and size for libtiff's directory
// reading, and a "mapping" so that strips are read in place (libtiff never
// writes to a mapping it opened read-only).
struct MemoryFile {
  const std::uint8_t* data = nullptr;
  std::uint64_t size = 0;
  std::uint64_t pos = 0;
};

tmsize_t mem_read(thandle_t h, void* out, tmsize_t n) {
  auto* f = static_cast<MemoryFile*>(h);
  if (n <= 0 || f->pos >= f->size) return 0;
  const std::uint64_t k = std::min<std::uint64_t>(static_cast<std::uint64_t>(n), f->size - f->pos);
  std::memcpy(out, f->data + f->pos, k);
  f->pos += k;
  return static_cast<tmsize_t>(k);
}
tmsize_t mem_write(thandle_t, void*, tmsize_t) { return -1; }
toff_t mem_seek(thandle_t h, toff_t off, int whence) {
  auto* f = static_cast<MemoryFile*>(h);
  // (unsigned arithmetic: a negative SEEK_CUR offset arrives as its two's complement)
  const std::uint64_t base = whence == SEEK_CUR ? f->pos : whence == SEEK_END ? f->size : 0;
  f->pos = base + off;
  return f->pos;
}
int mem_close(thandle_t) { return 0; }
toff_t mem_size(thandle_t h) { return static_cast<MemoryFile*>(h)->size; }
int mem_map(thandle_t h, void** base, toff_t* size) {
  auto* f = static_cast<MemoryFile*>(h);
  *base = const_cast<std::uint8_t*>(f->data);
  *size = f->size;
  return 1;
}
void mem_unmap(thandle_t, void*, toff_t) {}

// What libtiff reported while one TIFF handle was in use: its first error
// (usually the cause; later ones tend to be consequences).
struct Messages {
  std::string error;
  bool photometric_missing = false;
};

std::string format(const char* module, const char* fmt, va_list ap) {
  char text[512];
  std::vsnprintf(text, sizeof(text), fmt, ap);
  return (module && *module ? std::string(module) + ": " : std::string()) + text;
}

// NOTE: returning 1 keeps libtiff from also calling its global handlers
// (which print to stderr).
int on_error(TIFF*, void* user, const char* module, const char* fmt, va_list ap) {
  auto* m = static_cast<Messages*>(user);
  if (m->error.empty()) m->error = format(module, fmt, ap);
  return 1;
}
int on_warning(TIFF*, void* user, const char*, const char* fmt, va_list) {
  // libtiff guesses a missing Photometric tag; PIL takes 0 (min-is-white).
  if (std::strstr(fmt, "Photometric tag is missing")) static_cast<Messages*>(user)->photometric_missing = true;
  return 1;
}

struct TiffClose {
  void operator()(TIFF* t) const { TIFFClose(t); }
};

enum class Kind { kGray, kPalette, kRgb, kCmyk };
// How one gray sample of 16 or 32 bits becomes 8 (PIL's modes "I;16", "I"
// and "F", each converted to L as PIL converts it).
enum class Wide { kUint16, kInt16, kInt32, kFloat32 };

std::uint16_t u16(const std::uint8_t* p) {
  std::uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

}  // namespace

struct TiffDecoder::State {
  MemoryFile file;
  Messages messages;
  std::unique_ptr<TIFF, TiffClose> tif;
  std::uint32_t width = 0, height = 0;
  std::uint16_t bits = 1, spp = 1;
  bool planar = false;  // each sample in its own plane
  bool tiled = false;
  std::uint32_t unit_w = 0, unit_h = 0;  // a tile's size, or a strip's (the width, rows per strip)
  Kind kind = Kind::kGray;
  bool invert = false;         // min-is-white below 16 bits
  Wide wide = Wide::kUint16;   // gray of 16 or 32 bits
  bool premultiplied = false;  // associated alpha in sample 3
  PilPalette palette;
  std::vector<std::vector<std::uint8_t>> units;  // the strip or tile read last, one per plane

  Status failed(const std::string& what) const {
    return Status::Corrupt("TIFF: " + (messages.error.empty() ? what : messages.error));
  }
  // Converts n pixels from column x of the unit rows `rows` (one per plane)
  // into RGB8 at out.
  void convert(const std::uint8_t* const* rows, std::uint32_t x, std::uint32_t n, std::uint8_t* out) const;
  // One gray sample of 16 or 32 bits (host order) as PIL converts its mode to
  // L: integers clipped to [0, 255] (PIL reads unsigned 32-bit samples as
  // signed, "I;32N"); floats truncated toward zero and clipped, NaN to 0.
  std::uint8_t wide_to_8(const std::uint8_t* p) const {
    switch (wide) {
      case Wide::kUint16: return pil_clip16(u16(p));
      case Wide::kInt16: {
        std::int16_t v;
        std::memcpy(&v, p, 2);
        return static_cast<std::uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
      }
      case Wide::kInt32: {
        std::int32_t v;
        std::memcpy(&v, p, 4);
        return static_cast<std::uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
      }
      case Wide::kFloat32: {
        float v;
        std::memcpy(&v, p, 4);
        if (!(v > 0)) return 0;
        return v >= 255 ? 255 : static_cast<std::uint8_t>(v);
      }
    }
    return 0;
  }
  // Decodes `r`, a box of the image as stored, into buf (r.width x r.height).
  Status decode_stored(const Box& r, ImageBuffer* buf);
  std::uint16_t orientation = 1;  // the Orientation tag PIL applies: 1 (none) to 8
  ImageBuffer stored;             // a region as stored, before orientation
  // Output pixel (x, y) is stored pixel (sx, sy), as PIL's transpose methods
  // for orientations 2-8 map them (W, H: the stored size).
  void source(int x, int y, int* sx, int* sy) const {
    const int W = static_cast<int>(width), H = static_cast<int>(height);
    switch (orientation) {
      case 2: *sx = W - 1 - x, *sy = y; break;          // FLIP_LEFT_RIGHT
      case 3: *sx = W - 1 - x, *sy = H - 1 - y; break;  // ROTATE_180
      case 4: *sx = x, *sy = H - 1 - y; break;          // FLIP_TOP_BOTTOM
      case 5: *sx = y, *sy = x; break;                  // TRANSPOSE
      case 6: *sx = y, *sy = H - 1 - x; break;          // ROTATE_270
      case 7: *sx = W - 1 - y, *sy = H - 1 - x; break;  // TRANSVERSE
      case 8: *sx = W - 1 - y, *sy = x; break;          // ROTATE_90
      default: *sx = x, *sy = y; break;                 // 1
    }
  }
  // The stored box holding output region r: the map of two opposite corners.
  Box stored_box(const Box& r) const {
    int ax, ay, bx, by;
    source(r.x, r.y, &ax, &ay);
    source(r.x + r.width - 1, r.y + r.height - 1, &bx, &by);
    return {std::min(ax, bx), std::min(ay, by), std::abs(ax - bx) + 1, std::abs(ay - by) + 1};
  }
  bool keep = false;                     // opened with stored=true
  RasterBuffer stored_raster;            // decode_raster(): a region as stored, before orientation
  Status read_raster(const Box& r, RasterBuffer* buf);  // r: a box of the image as stored
  SampleType type = SampleType::kUint8;  // then: the samples' type

  // Reads each strip or tile that box `r` (of the image as stored) touches,
  // once, and calls row(rows, y, x, n) for each of its rows inside `r`: the
  // unit's row (one per plane) holding image row y, columns [x, x + n) of
  // the image (x counted in the unit from its first column `rows` point to).
  template <typename Row>
  Status for_each_row(const Box& r, Row&& row);
};

void TiffDecoder::State::convert(const std::uint8_t* const* rows, std::uint32_t x, std::uint32_t n,
                                 std::uint8_t* out) const {
  if (bits < 8) {  // one sample: gray or palette index
    const std::uint8_t* p = rows[0];
    const unsigned per_byte = 8u / bits, mask = (1u << bits) - 1, scale = 255u / mask;
    for (std::uint32_t i = x; i < x + n; ++i, out += 3) {
      const unsigned v = (p[i / per_byte] >> ((per_byte - 1 - i % per_byte) * bits)) & mask;
      if (kind == Kind::kPalette) {
        std::memcpy(out, palette[static_cast<int>(v)], 3);
      } else {
        out[0] = out[1] = out[2] = static_cast<std::uint8_t>(invert ? 255 - v * scale : v * scale);
      }
    }
    return;
  }
  const int bytes = bits / 8;
  const std::size_t step = planar ? static_cast<std::size_t>(bytes) : static_cast<std::size_t>(bytes) * spp;
  // Sample k of pixel i, as 8 bits: 16-bit samples (host order: libtiff
  // swaps them) give their high byte, as PIL's ";16N" unpackers.
  auto sample8 = [&](std::uint32_t i, int k) -> unsigned {
    const std::uint8_t* p = planar ? rows[k] + i * step : rows[0] + i * step + static_cast<std::size_t>(k) * bytes;
    return bytes == 1 ? p[0] : u16(p) >> 8;
  };
  for (std::uint32_t i = x; i < x + n; ++i, out += 3) {
    switch (kind) {
      case Kind::kGray: {
        std::uint8_t v;
        if (bytes == 1) {
          v = static_cast<std::uint8_t>(invert ? 255 - sample8(i, 0) : sample8(i, 0));
        } else {
          v = wide_to_8(rows[0] + i * step);
        }
        out[0] = out[1] = out[2] = v;
        break;
      }
      case Kind::kPalette: std::memcpy(out, palette[static_cast<int>(sample8(i, 0))], 3); break;
      case Kind::kRgb:
        if (premultiplied) {
          const int a = static_cast<int>(sample8(i, 3));
          for (int k = 0; k < 3; ++k) out[k] = pil_unpremultiply(static_cast<int>(sample8(i, k)), a);
        } else {
          for (int k = 0; k < 3; ++k) out[k] = static_cast<std::uint8_t>(sample8(i, k));
        }
        break;
      case Kind::kCmyk: {
        const int k = static_cast<int>(sample8(i, 3));
        for (int c = 0; c < 3; ++c) out[c] = pil_cmyk_channel(static_cast<int>(sample8(i, c)), k);
        break;
      }
    }
  }
}

TiffDecoder::TiffDecoder() : s_(std::make_unique<State>()) {}
TiffDecoder::~TiffDecoder() = default;

Status TiffDecoder::open(const std::uint8_t* data, std::size_t size, std::uint64_t max_pixels, int* width,
                         int* height, bool stored) {
  State& s = *s_;
  s.tif.reset();
  s.messages = Messages{};
  s.file = MemoryFile{data, size, 0};
  TIFFOpenOptions* opts = TIFFOpenOptionsAlloc();
  if (!opts) return Status::ResourceExhausted("TIFF: cannot allocate libtiff's options");
  TIFFOpenOptionsSetErrorHandlerExtR(opts, on_error, &s.messages);
  TIFFOpenOptionsSetWarningHandlerExtR(opts, on_warning, &s.messages);
  // NOTE: libtiff's own allocations (directory arrays, raw strips, codec
  // state) are bounded by the file, not by what its header claims.
  const std::uint64_t cap = (std::uint64_t{64} << 20) + 2 * std::uint64_t{size};
  TIFFOpenOptionsSetMaxSingleMemAlloc(opts, static_cast<tmsize_t>(std::min<std::uint64_t>(cap, LLONG_MAX)));
  s.tif.reset(TIFFClientOpenExt("TIFF", "r", &s.file, mem_read, mem_write, mem_seek, mem_close, mem_size, mem_map,
                                mem_unmap, opts));
  TIFFOpenOptionsFree(opts);
  if (!s.tif) return s.failed("cannot read the header");
  TIFF* t = s.tif.get();
  std::uint32_t w = 0, h = 0;
  TIFFGetField(t, TIFFTAG_IMAGEWIDTH, &w);
  TIFFGetField(t, TIFFTAG_IMAGELENGTH, &h);
  if (w == 0 || h == 0) return Status::Corrupt("TIFF: invalid size " + std::to_string(w) + "x" + std::to_string(h));
  const std::uint64_t pixels = std::uint64_t{w} * h;
  if (pixels > max_pixels) {
    s.tif.reset();
    return Status::ResourceExhausted("image of " + std::to_string(w) + "x" + std::to_string(h) +
                                     " pixels exceeds max_image_pixels=" + std::to_string(max_pixels));
  }
  if (w > INT_MAX || h > INT_MAX) {
    return Status::Corrupt("TIFF: invalid size " + std::to_string(w) + "x" + std::to_string(h));
  }
  std::uint16_t bits = 1, spp = 1, format = SAMPLEFORMAT_UINT, config = PLANARCONFIG_CONTIG, photometric = 0;
  std::uint16_t compression = COMPRESSION_NONE, n_extra = 0;
  std::uint16_t* extra = nullptr;
  TIFFGetFieldDefaulted(t, TIFFTAG_BITSPERSAMPLE, &bits);
  TIFFGetFieldDefaulted(t, TIFFTAG_SAMPLESPERPIXEL, &spp);
  TIFFGetFieldDefaulted(t, TIFFTAG_SAMPLEFORMAT, &format);
  TIFFGetFieldDefaulted(t, TIFFTAG_PLANARCONFIG, &config);
  TIFFGetFieldDefaulted(t, TIFFTAG_COMPRESSION, &compression);
  TIFFGetField(t, TIFFTAG_EXTRASAMPLES, &n_extra, &extra);
  if (!TIFFGetField(t, TIFFTAG_PHOTOMETRIC, &photometric) || s.messages.photometric_missing) photometric = 0;
  if (compression == COMPRESSION_OJPEG) {
    return Status::Unsupported("TIFF: old-style JPEG compression (6); readable: new-style JPEG (7)");
  }
  if (!TIFFIsCODECConfigured(compression)) {
    const TIFFCodec* c = TIFFFindCODEC(compression);
    return Status::Unsupported("TIFF: compression " + std::to_string(compression) +
                               (c && c->name ? std::string(" (") + c->name + ")" : std::string()) +
                               " is not supported by this libtiff");
  }
  const std::string shape = std::to_string(spp) + " sample(s) of " + std::to_string(bits) + " bits";
  const bool gray = photometric == PHOTOMETRIC_MINISWHITE || photometric == PHOTOMETRIC_MINISBLACK;
  s.keep = stored;
  if (stored) {
    // NOTE: kept as stored: the photometric interpretation does not matter
    // (a 13-band tile is "min-is-black" with 13 samples), only the samples'.
    if (format == SAMPLEFORMAT_UINT && (bits == 8 || bits == 16)) {
      s.type = bits == 8 ? SampleType::kUint8 : SampleType::kUint16;
    } else if (format == SAMPLEFORMAT_IEEEFP && bits == 32) {
      s.type = SampleType::kFloat32;
    } else {
      return Status::Unsupported("TIFF: " + shape + " in sample format " + std::to_string(format) +
                                 " cannot be kept as stored (readable: 8 or 16-bit unsigned integers, 32-bit floats)");
    }
    if (photometric == PHOTOMETRIC_YCBCR && compression == COMPRESSION_JPEG) {
      return Status::Unsupported("TIFF: JPEG-compressed YCbCr cannot be kept as stored (libtiff would convert it)");
    }
  } else {
    // PIL's gray modes "I" and "F": 16 and 32-bit signed, 32-bit unsigned and float samples.
    s.wide = Wide::kUint16;
    if (gray && spp == 1 && format == SAMPLEFORMAT_INT && (bits == 16 || bits == 32)) {
      s.wide = bits == 16 ? Wide::kInt16 : Wide::kInt32;
    } else if (gray && spp == 1 && format == SAMPLEFORMAT_UINT && bits == 32) {
      s.wide = Wide::kInt32;
    } else if (gray && spp == 1 && format == SAMPLEFORMAT_IEEEFP && bits == 32) {
      s.wide = Wide::kFloat32;
    } else if (format != SAMPLEFORMAT_UINT) {
      return Status::Unsupported("TIFF: sample format " + std::to_string(format) + " with " + shape +
                                 " (readable: unsigned integers; for gray also 16/32-bit signed and 32-bit float)");
    }
    const bool low_bits = bits == 1 || bits == 2 || bits == 4;
    const bool unassociated_alpha = n_extra >= 1 && extra && extra[0] == EXTRASAMPLE_UNASSALPHA;
    s.invert = false;
    s.premultiplied = false;
    switch (photometric) {
      case PHOTOMETRIC_MINISWHITE:
      case PHOTOMETRIC_MINISBLACK:
        s.kind = Kind::kGray;
        if (spp == 1 && (low_bits || bits == 8 || bits == 16 || bits == 32)) {
          // NOTE: as PIL: min-is-white gray of 16 bits or more is not inverted.
          s.invert = photometric == PHOTOMETRIC_MINISWHITE && bits < 16;
        } else if (!(photometric == PHOTOMETRIC_MINISBLACK && spp == 2 && bits == 8 && unassociated_alpha)) {
          return Status::Unsupported("TIFF: gray with " + shape);
        }
        break;
      case PHOTOMETRIC_PALETTE: {
        s.kind = Kind::kPalette;
        if (!((spp == 1 && (low_bits || bits == 8)) || (spp == 2 && bits == 8 && unassociated_alpha))) {
          return Status::Unsupported("TIFF: palette with " + shape);
        }
        std::uint16_t *r = nullptr, *g = nullptr, *b = nullptr;
        if (!TIFFGetField(t, TIFFTAG_COLORMAP, &r, &g, &b) || !r || !g || !b) {
          return s.failed("palette image without a ColorMap");
        }
        // As PIL: each 16-bit entry's high byte.
        s.palette.reset();
        for (int i = 0; i < (1 << bits); ++i) {
          s.palette.set(i, static_cast<std::uint8_t>(r[i] >> 8), static_cast<std::uint8_t>(g[i] >> 8),
                        static_cast<std::uint8_t>(b[i] >> 8));
        }
        break;
      }
      case PHOTOMETRIC_RGB:
        s.kind = Kind::kRgb;
        if (!((bits == 8 && spp >= 3 && spp <= 6) || (bits == 16 && (spp == 3 || spp == 4)))) {
          return Status::Unsupported("TIFF: RGB with " + shape);
        }
        s.premultiplied = spp >= 4 && n_extra >= 1 && extra && extra[0] == EXTRASAMPLE_ASSOCALPHA;
        break;
      case PHOTOMETRIC_SEPARATED:
        s.kind = Kind::kCmyk;
        if (!((bits == 8 && spp >= 4 && spp <= 6) || (bits == 16 && spp == 4))) {
          return Status::Unsupported("TIFF: CMYK with " + shape);
        }
        break;
      case PHOTOMETRIC_YCBCR:
        if (compression != COMPRESSION_JPEG || config != PLANARCONFIG_CONTIG || bits != 8 || spp != 3) {
          return Status::Unsupported("TIFF: YCbCr other than 8-bit, contiguous and JPEG-compressed");
        }
        // As PIL: libjpeg (inside libtiff) converts to RGB and upsamples.
        if (!TIFFSetField(t, TIFFTAG_JPEGCOLORMODE, JPEGCOLORMODE_RGB)) return s.failed("cannot read YCbCr as RGB");
        s.kind = Kind::kRgb;
        break;
      default:
        return Status::Unsupported("TIFF: photometric interpretation " + std::to_string(photometric) +
                                   " (readable: gray, palette, RGB, CMYK, JPEG-compressed YCbCr)");
    }
  }
  s.width = w, s.height = h, s.bits = bits, s.spp = spp;
  // NOTE: PIL's TIFF plugin applies the Orientation tag when it loads the
  // image (TiffImageFile.load_end), so torchvision's loader sees it applied
  // (unlike a JPEG's EXIF orientation); so do we. Values outside 1-8 are
  // ignored by both.
  s.orientation = 1;
  TIFFGetFieldDefaulted(t, TIFFTAG_ORIENTATION, &s.orientation);
  if (s.orientation < 1 || s.orientation > 8) s.orientation = 1;
  s.planar = config == PLANARCONFIG_SEPARATE && spp > 1;
  s.tiled = TIFFIsTiled(t);
  if (s.tiled) {
    TIFFGetField(t, TIFFTAG_TILEWIDTH, &s.unit_w);
    TIFFGetField(t, TIFFTAG_TILELENGTH, &s.unit_h);
    if (s.unit_w == 0 || s.unit_h == 0) return s.failed("tile size of 0");
    // NOTE: a tile is decoded whole into memory of its own; nothing ties its
    // size to the image's, so it counts against the pixel cap as an image does.
    if (std::uint64_t{s.unit_w} * s.unit_h > max_pixels) {
      return Status::ResourceExhausted("TIFF: tiles of " + std::to_string(s.unit_w) + "x" + std::to_string(s.unit_h) +
                                       " pixels exceed max_image_pixels=" + std::to_string(max_pixels));
    }
  } else {
    std::uint32_t rows = 0;
    TIFFGetFieldDefaulted(t, TIFFTAG_ROWSPERSTRIP, &rows);
    if (rows == 0) return s.failed("RowsPerStrip of 0");
    s.unit_w = w;
    s.unit_h = std::min(rows, h);
  }
  const bool swap = s.orientation >= 5;  // transposed or rotated by 90 degrees: width and height trade places
  *width = static_cast<int>(swap ? h : w);
  *height = static_cast<int>(swap ? w : h);
  return Status::Ok();
}

Status TiffDecoder::decode(const Box& r, ImageBuffer* buf, ImageView* view) {
  State& s = *s_;
  if (!s.tif) return Status::Internal("TIFF: decode() without a successful open()");
  s.messages.error.clear();
  if (s.orientation == 1) {
    Status st = s.decode_stored(r, buf);
    if (st.ok()) *view = buf->view();
    return st;
  }
  auto source = [&](int x, int y, int* sx, int* sy) { s.source(x, y, sx, sy); };
  const Box stored = s.stored_box(r);
  Status st = s.decode_stored(stored, &s.stored);
  if (!st.ok()) return st;
  buf->reset(r.width, r.height);
  for (int y = 0; y < r.height; ++y) {
    std::uint8_t* out = buf->row(y);
    for (int x = 0; x < r.width; ++x, out += 3) {
      int sx, sy;
      source(r.x + x, r.y + y, &sx, &sy);
      std::memcpy(out, s.stored.row(sy - stored.y) + static_cast<std::ptrdiff_t>(sx - stored.x) * 3, 3);
    }
  }
  *view = buf->view();
  return Status::Ok();
}

template <typename Row>
Status TiffDecoder::State::for_each_row(const Box& r, Row&& row) {
  State& s = *this;
  TIFF* t = s.tif.get();
  const int planes = s.planar ? s.spp : 1;
  const tmsize_t unit_size = s.tiled ? TIFFTileSize(t) : TIFFStripSize(t);
  const tmsize_t row_size = s.tiled ? TIFFTileRowSize(t) : TIFFScanlineSize(t);
  if (unit_size <= 0 || row_size <= 0) return s.failed("cannot size a strip or tile");
  // The pixels of a unit's row must be in it (a lying BitsPerSample or
  // SamplesPerPixel against the codec's output would read past it).
  // (JPEG-compressed YCbCr comes out of libtiff as 8-bit RGB, three samples.)
  const std::uint64_t pixel_bits = std::uint64_t{s.bits} * (s.planar ? 1 : s.spp);
  if ((std::uint64_t{s.unit_w} * pixel_bits + 7) / 8 > static_cast<std::uint64_t>(row_size)) {
    return s.failed("rows shorter than their pixels");
  }
  s.units.resize(static_cast<std::size_t>(planes));
  for (auto& u : s.units) {
    if (u.size() < static_cast<std::size_t>(unit_size)) u.resize(static_cast<std::size_t>(unit_size));
  }
  const std::uint32_t x0 = static_cast<std::uint32_t>(r.x), y0 = static_cast<std::uint32_t>(r.y);
  const std::uint32_t x1 = x0 + static_cast<std::uint32_t>(r.width), y1 = y0 + static_cast<std::uint32_t>(r.height);
  std::vector<const std::uint8_t*> rows(static_cast<std::size_t>(planes));
  // Each strip or tile the region touches, once: rows and columns of it
  // outside the region are not converted.
  for (std::uint32_t uy = y0 / s.unit_h * s.unit_h; uy < y1; uy += s.unit_h) {
    for (std::uint32_t ux = x0 / s.unit_w * s.unit_w; ux < x1; ux += s.unit_w) {
      const std::uint32_t rows_here = std::min(s.unit_h, s.height - uy);
      for (int p = 0; p < planes; ++p) {
        const auto sample = static_cast<std::uint16_t>(p);
        // NOTE: zeroed first: a codec may report success without writing
        // every byte (fuzz/tiff_fuzz.cc found one); bytes left from another
        // strip would make the pixels depend on what was decoded before.
        std::memset(s.units[static_cast<std::size_t>(p)].data(), 0, static_cast<std::size_t>(unit_size));
        tmsize_t got;
        std::uint32_t index;
        if (s.tiled) {
          index = TIFFComputeTile(t, ux, uy, 0, sample);
          got = TIFFReadEncodedTile(t, index, s.units[static_cast<std::size_t>(p)].data(), unit_size);
        } else {
          index = TIFFComputeStrip(t, uy, sample);
          got = TIFFReadEncodedStrip(t, index, s.units[static_cast<std::size_t>(p)].data(), unit_size);
        }
        const std::uint64_t need = std::uint64_t{s.tiled ? s.unit_h : rows_here} * static_cast<std::uint64_t>(row_size);
        if (got < 0 || static_cast<std::uint64_t>(got) < need) {
          return s.failed(std::string("cannot read ") + (s.tiled ? "tile " : "strip ") + std::to_string(index));
        }
      }
      const std::uint32_t ry0 = std::max(uy, y0), ry1 = std::min(uy + rows_here, y1);
      const std::uint32_t cx0 = std::max(ux, x0), cx1 = std::min({ux + s.unit_w, x1, s.width});
      for (std::uint32_t y = ry0; y < ry1; ++y) {
        for (int p = 0; p < planes; ++p) {
          rows[static_cast<std::size_t>(p)] =
              s.units[static_cast<std::size_t>(p)].data() + static_cast<std::size_t>(y - uy) * row_size;
        }
        row(rows.data(), y - y0, cx0 - ux, cx0 - x0, cx1 - cx0);
      }
    }
  }
  return Status::Ok();
}

Status TiffDecoder::State::decode_stored(const Box& r, ImageBuffer* buf) {
  buf->reset(r.width, r.height);
  return for_each_row(r, [&](const std::uint8_t* const* rows, std::uint32_t y, std::uint32_t ux, std::uint32_t x,
                             std::uint32_t n) { convert(rows, ux, n, buf->row(static_cast<int>(y)) + std::size_t{x} * 3); });
}

int TiffDecoder::channels() const { return s_->spp; }
SampleType TiffDecoder::sample_type() const { return s_->type; }

Status TiffDecoder::decode_raster(const Box& r, RasterBuffer* buf) {
  State& s = *s_;
  if (!s.tif || !s.keep) return Status::Internal("TIFF: decode_raster() without a successful open(stored=true)");
  s.messages.error.clear();
  if (s.orientation == 1) return s.read_raster(r, buf);
  // The Orientation tag applied as for RGB (decode()), each plane's samples moved whole.
  const Box stored = s.stored_box(r);
  Status st = s.read_raster(stored, &s.stored_raster);
  if (!st.ok()) return st;
  const RasterBuffer& in = s.stored_raster;
  const std::size_t bytes = static_cast<std::size_t>(sample_bytes(s.type));
  buf->reset(r.width, r.height, in.channels, in.type);
  for (int k = 0; k < in.channels; ++k) {
    std::uint8_t* out = buf->plane(k);
    for (int y = 0; y < r.height; ++y) {
      for (int x = 0; x < r.width; ++x, out += bytes) {
        int sx, sy;
        s.source(r.x + x, r.y + y, &sx, &sy);
        std::memcpy(out, in.plane(k) + (static_cast<std::size_t>(sy - stored.y) * static_cast<std::size_t>(in.width) +
                                        static_cast<std::size_t>(sx - stored.x)) * bytes, bytes);
      }
    }
  }
  return Status::Ok();
}

Status TiffDecoder::State::read_raster(const Box& r, RasterBuffer* buf) {
  State& s = *this;
  const int c = s.spp;
  const std::size_t bytes = static_cast<std::size_t>(sample_bytes(s.type));
  buf->reset(r.width, r.height, c, s.type);
  // Sample k of unit column i: planar units hold one sample per pixel, contiguous ones all c.
  const std::size_t step = s.planar ? bytes : bytes * static_cast<std::size_t>(c);
  return s.for_each_row(r, [&](const std::uint8_t* const* rows, std::uint32_t y, std::uint32_t ux, std::uint32_t x,
                               std::uint32_t n) {
    for (int k = 0; k < c; ++k) {
      const std::uint8_t* in = s.planar ? rows[k] + ux * step : rows[0] + ux * step + static_cast<std::size_t>(k) * bytes;
      std::uint8_t* out = buf->plane(k) + (std::size_t{y} * static_cast<std::size_t>(r.width) + x) * bytes;
      if (step == bytes) {
        std::memcpy(out, in, n * bytes);
      } else {
        for (std::uint32_t i = 0; i < n; ++i, in += step, out += bytes) std::memcpy(out, in, bytes);
      }
    }
  });
}

}  // namespace stoker::detail
