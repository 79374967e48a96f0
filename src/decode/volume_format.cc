#include "decode/volume_format.h"

#include <dlfcn.h>
#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "decode/npy.h"

namespace stoker::detail {

std::size_t voxel_bytes(VoxelType t) {
  switch (t) {
    case VoxelType::kU8:
    case VoxelType::kI8:
      return 1;
    case VoxelType::kU16:
    case VoxelType::kI16:
      return 2;
    case VoxelType::kU32:
    case VoxelType::kI32:
    case VoxelType::kF32:
      return 4;
    case VoxelType::kF64:
      return 8;
  }
  return 1;
}

const char* voxel_name(VoxelType t) {
  switch (t) {
    case VoxelType::kU8:
      return "uint8";
    case VoxelType::kI8:
      return "int8";
    case VoxelType::kU16:
      return "uint16";
    case VoxelType::kI16:
      return "int16";
    case VoxelType::kU32:
      return "uint32";
    case VoxelType::kI32:
      return "int32";
    case VoxelType::kF32:
      return "float32";
    case VoxelType::kF64:
      return "float64";
  }
  return "?";
}

const char* volume_format_name(VolumeFormat f) {
  switch (f) {
    case VolumeFormat::kNpy:
      return "npy";
    case VolumeFormat::kNifti1:
      return "NIfTI-1";
    case VolumeFormat::kNifti2:
      return "NIfTI-2";
  }
  return "?";
}

namespace {

constexpr std::size_t kNifti1Size = 348, kNifti2Size = 540;
constexpr int kMaxChannels = 16;
// Sizes past this are refused as absurd whatever max_voxels says: strides and offsets stay int64.
constexpr std::uint64_t kMaxBytes = std::uint64_t{1} << 62;

std::string hex_bytes(const std::uint8_t* p, std::size_t n) {
  static const char* kHex = "0123456789abcdef";
  std::string s;
  for (std::size_t i = 0; i < n; ++i) {
    if (i) s += ' ';
    s += kHex[p[i] >> 4];
    s += kHex[p[i] & 15];
  }
  return s;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

// Python's repr of a shape tuple: "(5,)", "(2, 3)".
std::string shape_text(const std::vector<std::uint64_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

// Fixed-size fields of a header known to hold every offset read, in its byte order.
struct Fields {
  const std::uint8_t* p;
  bool big;

  std::uint64_t bits(std::size_t off, int bytes) const {
    std::uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) {
      const std::uint64_t b = p[off + static_cast<std::size_t>(i)];
      v = big ? (v << 8) | b : v | (b << (8 * i));
    }
    return v;
  }
  std::int64_t i16(std::size_t off) const { return static_cast<std::int16_t>(bits(off, 2)); }
  std::int64_t i32(std::size_t off) const { return static_cast<std::int32_t>(bits(off, 4)); }
  std::int64_t i64(std::size_t off) const { return static_cast<std::int64_t>(bits(off, 8)); }
  double f32(std::size_t off) const { return std::bit_cast<float>(static_cast<std::uint32_t>(bits(off, 4))); }
  double f64(std::size_t off) const { return std::bit_cast<double>(bits(off, 8)); }
};

// Where the fields of the two NIfTI versions lie (offsets verified against nibabel 5.0's
// nifti1.header_dtype / nifti2.header_dtype), and their widths.
struct NiftiLayout {
  VolumeFormat format;
  std::size_t size;     // sizeof_hdr
  std::size_t min_vox;  // smallest vox_offset of a single-file image (header + 4 extension bytes)
  bool wide;            // NIfTI-2: int64 dims, float64 reals, int32 xform codes
  std::size_t dim, datatype, bitpix, pixdim, vox_offset, scl_slope, scl_inter;
  std::size_t qform_code, sform_code, quatern_b, qoffset_x, srow_x;
  double quaternion_threshold;  // nibabel: -3 eps of the stored float type
};

constexpr NiftiLayout kNifti1{
    VolumeFormat::kNifti1, kNifti1Size, 352, false, 40, 70, 72, 76, 108, 112, 116, 252, 254, 256, 268, 280,
    -3.0 * FLT_EPSILON};
constexpr NiftiLayout kNifti2{
    VolumeFormat::kNifti2, kNifti2Size, 544, true, 16, 12, 14, 104, 168, 176, 184, 344, 348, 352, 376, 400,
    -3.0 * DBL_EPSILON};

// A header's typed fields.
struct Nifti {
  const NiftiLayout& l;
  Fields f;
  double real(std::size_t off, int i = 0) const {
    return l.wide ? f.f64(off + 8 * static_cast<std::size_t>(i)) : f.f32(off + 4 * static_cast<std::size_t>(i));
  }
  std::int64_t dim(int i) const {
    return l.wide ? f.i64(l.dim + 8 * static_cast<std::size_t>(i)) : f.i16(l.dim + 2 * static_cast<std::size_t>(i));
  }
  std::int64_t code(std::size_t off) const { return l.wide ? f.i32(off) : f.i16(off); }
};

// NIfTI datatype codes, with the names nibabel gives them.
struct NiftiType {
  int code;
  const char* name;
  int bitpix;
  bool supported;
  VoxelType type;
};

constexpr NiftiType kNiftiTypes[] = {
    {2, "uint8", 8, true, VoxelType::kU8},
    {4, "int16", 16, true, VoxelType::kI16},
    {8, "int32", 32, true, VoxelType::kI32},
    {16, "float32", 32, true, VoxelType::kF32},
    {64, "float64", 64, true, VoxelType::kF64},
    {256, "int8", 8, true, VoxelType::kI8},
    {512, "uint16", 16, true, VoxelType::kU16},
    {768, "uint32", 32, true, VoxelType::kU32},
    {0, "none", 0, false, VoxelType::kU8},
    {1, "binary", 1, false, VoxelType::kU8},
    {32, "complex64", 64, false, VoxelType::kU8},
    {128, "RGB24", 24, false, VoxelType::kU8},
    {255, "all", 0, false, VoxelType::kU8},
    {1024, "int64", 64, false, VoxelType::kU8},
    {1280, "uint64", 64, false, VoxelType::kU8},
    {1536, "float128", 128, false, VoxelType::kU8},
    {1792, "complex128", 128, false, VoxelType::kU8},
    {2048, "complex256", 256, false, VoxelType::kU8},
    {2304, "RGBA32", 32, false, VoxelType::kU8},
};

// The voxel type of a datatype code, checked against bitpix.
Status nifti_type(std::int64_t code, std::int64_t bitpix, VoxelType* type) {
  const NiftiType* t = nullptr;
  for (const auto& k : kNiftiTypes) {
    if (k.code == code) t = &k;
  }
  if (t == nullptr) return Status::Unsupported("NIfTI datatype code " + std::to_string(code) + " is unknown");
  if (!t->supported) {
    return Status::Unsupported("NIfTI datatype " + std::to_string(code) + " (" + t->name +
                               ") is not supported: volumes are uint8, int8, uint16, int16, uint32, int32, float32 "
                               "or float64");
  }
  if (bitpix != t->bitpix) {
    return Status::Corrupt("NIfTI bitpix " + std::to_string(bitpix) + " disagrees with datatype " +
                           std::to_string(code) + " (" + t->name + ", " + std::to_string(t->bitpix) + " bits)");
  }
  *type = t->type;
  return Status::Ok();
}

// The voxel count C*S0*S1*S2 against the caps, then the bytes against the file.
Status check_size(std::int64_t channels, const std::array<std::int64_t, 3>& shape, std::size_t item,
                  std::uint64_t max_voxels, std::uint64_t offset, std::uint64_t file_size, std::uint64_t* bytes) {
  if (channels > kMaxChannels) {
    return Status::ResourceExhausted("volume of " + std::to_string(channels) + " channels exceeds the " +
                                     std::to_string(kMaxChannels) + " supported");
  }
  std::uint64_t voxels = static_cast<std::uint64_t>(channels);
  bool overflow = false;
  for (auto s : shape) overflow |= __builtin_mul_overflow(voxels, static_cast<std::uint64_t>(s), &voxels);
  overflow |= __builtin_mul_overflow(voxels, std::uint64_t{item}, bytes);
  if (overflow || voxels > max_voxels || *bytes > kMaxBytes) {
    return Status::ResourceExhausted("volume of " + std::to_string(channels) + "x" + std::to_string(shape[0]) + "x" +
                                     std::to_string(shape[1]) + "x" + std::to_string(shape[2]) +
                                     " voxels exceeds max_voxels=" + std::to_string(max_voxels));
  }
  std::uint64_t end = 0;
  if (__builtin_add_overflow(offset, *bytes, &end) || end > file_size) {
    return Status::Corrupt("header says " + std::to_string(*bytes) + " bytes of voxels from offset " +
                           std::to_string(offset) + ", the file has " +
                           (file_size == UINT64_MAX ? std::string("fewer") : std::to_string(file_size)));
  }
  return Status::Ok();
}

// ---- .npy ----

// Where a .npy header ends by its length field (past n when n does not hold it).
std::uint64_t npy_header_end(const std::uint8_t* d, std::size_t n) {
  if (n < 12) return UINT64_MAX;
  if (d[6] == 1) return 10 + (d[8] | (std::uint64_t{d[9]} << 8));
  return 12 + (d[8] | (std::uint64_t{d[9]} << 8) | (std::uint64_t{d[10]} << 16) | (std::uint64_t{d[11]} << 24));
}

// The voxel type of a .npy descr ("<f4"); *big for stored big-endian.
bool npy_type(const std::string& d, VoxelType* type, bool* big) {
  static const struct {
    const char* code;
    VoxelType type;
  } kTypes[] = {{"u1", VoxelType::kU8},  {"i1", VoxelType::kI8},  {"u2", VoxelType::kU16}, {"i2", VoxelType::kI16},
                {"u4", VoxelType::kU32}, {"i4", VoxelType::kI32}, {"f4", VoxelType::kF32}, {"f8", VoxelType::kF64}};
  if (d.size() != 3) return false;
  for (const auto& k : kTypes) {
    if (d.compare(1, 2, k.code) != 0) continue;
    const bool one = voxel_bytes(k.type) == 1;
    // '=' is the writer's native order: little-endian on every platform stoker builds for.
    if (d[0] != '<' && d[0] != '>' && d[0] != '=' && !(one && d[0] == '|')) return false;
    *type = k.type;
    *big = d[0] == '>' && !one;
    return true;
  }
  return false;
}

Status parse_npy(const std::uint8_t* data, std::size_t n, std::uint64_t file_size, std::uint64_t max_voxels,
                 VolumeHeader* out) {
  NpyHeader h;
  Status s = parse_npy_header(data, n, &h, /*check_data=*/false);
  if (!s.ok()) {
    if (n < file_size && npy_header_end(data, n) > n) {
      return Status::Corrupt("the .npy header is longer than the " + std::to_string(n) + " bytes given");
    }
    return s;
  }
  VolumeHeader v;
  v.format = VolumeFormat::kNpy;
  bool big = false;
  if (!npy_type(h.descr, &v.type, &big)) {
    return Status::Unsupported("npy dtype '" + h.descr +
                               "' is not a voxel type (want |u1 |i1 <u2 <i2 <u4 <i4 <f4 <f8 or their '>' forms)");
  }
  v.swap = big;
  const auto& sh = h.shape;
  if (sh.size() != 3 && sh.size() != 4) {
    return Status::Unsupported("a volume is (D, H, W) or (C, D, H, W), got shape " + shape_text(sh));
  }
  for (auto d : sh) {
    if (d == 0) return Status::Corrupt("npy volume of zero size, shape " + shape_text(sh));
  }
  const std::size_t first = sh.size() - 3;  // index of S0
  const std::int64_t C = sh.size() == 4 ? static_cast<std::int64_t>(sh[0]) : 1;
  for (int i = 0; i < 3; ++i) v.shape[static_cast<std::size_t>(i)] = static_cast<std::int64_t>(sh[first + i]);
  v.data_offset = h.data_offset;
  s = check_size(C, v.shape, voxel_bytes(v.type), max_voxels, v.data_offset, file_size, &v.data_bytes);
  if (!s.ok()) return s;
  v.channels = static_cast<int>(C);
  const std::int64_t S0 = v.shape[0], S1 = v.shape[1], S2 = v.shape[2];
  if (!h.fortran_order) {
    v.strides = {S0 * S1 * S2, S1 * S2, S2, 1};
  } else if (sh.size() == 4) {
    v.strides = {1, C, C * S0, C * S0 * S1};
  } else {
    v.strides = {S0 * S1 * S2, 1, S0, S0 * S1};
  }
  for (int i = 0; i < 4; ++i) v.affine[static_cast<std::size_t>(i * 5)] = 1.0;
  *out = v;
  return Status::Ok();
}

// ---- NIfTI ----

// The data offset: vox_offset, at least the header and its 4 extension bytes.
Status nifti_offset(const Nifti& h, std::uint64_t* offset) {
  const std::size_t min = h.l.min_vox;
  if (h.l.wide) {
    const std::int64_t v = h.f.i64(h.l.vox_offset);
    if (v < static_cast<std::int64_t>(min)) {
      return Status::Corrupt("NIfTI vox_offset " + std::to_string(v) + " is below " + std::to_string(min) +
                             ", the end of the header");
    }
    *offset = static_cast<std::uint64_t>(v);
    return Status::Ok();
  }
  const double v = h.real(h.l.vox_offset);
  if (!std::isfinite(v)) return Status::Corrupt("NIfTI vox_offset is " + num(v));
  if (v < static_cast<double>(min)) {
    return Status::Corrupt("NIfTI vox_offset " + num(v) + " is below " + std::to_string(min) +
                           ", the end of the header");
  }
  if (v >= 0x1p62) return Status::Corrupt("NIfTI vox_offset " + num(v) + " is past any file");
  *offset = static_cast<std::uint64_t>(v);  // truncated, as nibabel's int()
  return Status::Ok();
}

// Shape (dim[1..3]) and channels (product of dim[4..dim[0]]), checked.
Status nifti_dims(const Nifti& h, std::array<std::int64_t, 3>* shape, std::int64_t* channels) {
  const std::int64_t nd = h.dim(0);
  if (nd < 1 || nd > 7) return Status::Corrupt("NIfTI dim[0] is " + std::to_string(nd) + ", not 1..7");
  *channels = 1;
  for (int i = 1; i <= static_cast<int>(nd); ++i) {
    const std::int64_t d = h.dim(i);
    if (d < 1) return Status::Corrupt("NIfTI dim[" + std::to_string(i) + "] is " + std::to_string(d) + ", not >= 1");
    if (i <= 3) {
      (*shape)[static_cast<std::size_t>(i - 1)] = d;
    } else if (__builtin_mul_overflow(*channels, d, channels)) {
      *channels = std::numeric_limits<std::int64_t>::max();
    }
  }
  return Status::Ok();
}

// nibabel's get_slope_inter, with a non-finite intercept read as 0 (nibabel refuses it).
void nifti_scaling(const Nifti& h, VolumeHeader* v) {
  const double slope = h.real(h.l.scl_slope);
  double inter = h.real(h.l.scl_inter);
  if (slope == 0 || !std::isfinite(slope)) return;
  if (!std::isfinite(inter)) inter = 0;
  if (slope == 1 && inter == 0) return;
  v->scaled = true;
  v->slope = slope;
  v->inter = inter;
}

// An xform code nibabel keeps: its check sets codes outside 0..5 to 0.
bool xform_used(std::int64_t code) { return code >= 1 && code <= 5; }

// nibabel's qform affine: fillpositive then quat2mat, in long double as nibabel's float128.
Status qform_affine(const Nifti& h, const double pix[4], std::array<double, 16>* a) {
  using LD = long double;
  const LD x = h.real(h.l.quatern_b), y = h.real(h.l.quatern_b, 1), z = h.real(h.l.quatern_b, 2);
  const LD w2 = 1.0L - (x * x + y * y + z * z);
  LD w = 0;
  if (w2 < 0) {
    if (w2 < static_cast<LD>(h.l.quaternion_threshold)) {
      return Status::Corrupt("NIfTI qform quaternion (" + num(static_cast<double>(x)) + ", " +
                             num(static_cast<double>(y)) + ", " + num(static_cast<double>(z)) + ") has norm > 1");
    }
  } else {
    w = std::sqrt(w2);  // NaN stays NaN: refused with the affine
  }
  LD R[3][3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  const LD nq = w * w + x * x + y * y + z * z;
  if (!(nq < DBL_EPSILON)) {
    const LD s = 2.0L / nq, X = x * s, Y = y * s, Z = z * s;
    const LD wX = w * X, wY = w * Y, wZ = w * Z, xX = x * X, xY = x * Y, xZ = x * Z, yY = y * Y, yZ = y * Z, zZ = z * Z;
    const LD m[3][3] = {
        {1 - (yY + zZ), xY - wZ, xZ + wY}, {xY + wZ, 1 - (xX + zZ), yZ - wX}, {xZ - wY, yZ + wX, 1 - (xX + yY)}};
    std::memcpy(R, m, sizeof(R));
  }
  const double qfac = pix[0] == -1 ? -1.0 : 1.0;  // nibabel's check sets anything but +-1 to 1
  const double zoom[3] = {pix[1], pix[2], pix[3] * qfac};
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) (*a)[static_cast<std::size_t>(i * 4 + j)] = static_cast<double>(R[i][j] * zoom[j]);
    (*a)[static_cast<std::size_t>(i * 4 + 3)] = h.real(h.l.qoffset_x, i);
  }
  return Status::Ok();
}

// nibabel's get_base_affine (both codes 0): shape_zoom_affine with x flipped, centred.
void base_affine(const Nifti& h, const double pix[4], std::array<double, 16>* a) {
  const std::int64_t nd = h.dim(0);
  for (int i = 0; i < 3; ++i) {
    const bool used = i < nd;
    const double size = used ? static_cast<double>(h.dim(i + 1)) : 1.0;
    const double zoom = (used ? pix[i + 1] : 1.0) * (i == 0 ? -1.0 : 1.0);
    const double origin = (size - 1) / 2.0;
    (*a)[static_cast<std::size_t>(i * 5)] = zoom;
    (*a)[static_cast<std::size_t>(i * 4 + 3)] = -origin * zoom;
  }
}

// Affine (get_best_affine) and spacing (get_zooms), from pixdim as nibabel's header check fixes it.
Status nifti_geometry(const Nifti& h, VolumeHeader* v) {
  double pix[4];
  for (int i = 0; i < 4; ++i) pix[i] = h.real(h.l.pixdim, i);
  for (int i = 1; i < 4; ++i) pix[i] = pix[i] == 0 ? 1.0 : std::fabs(pix[i]);  // nibabel: 0 -> 1, negative -> abs
  const std::int64_t nd = h.dim(0);
  for (int i = 0; i < 3; ++i) {
    v->spacing[static_cast<std::size_t>(i)] = i < nd ? pix[i + 1] : 1.0;
    if (!std::isfinite(v->spacing[static_cast<std::size_t>(i)])) {
      return Status::Corrupt("NIfTI pixdim[" + std::to_string(i + 1) + "] is " + num(pix[i + 1]));
    }
  }
  auto& a = v->affine;
  a = {};
  a[15] = 1.0;
  const char* source = "pixdim";
  if (xform_used(h.code(h.l.sform_code))) {
    source = "sform";
    for (int i = 0; i < 12; ++i) a[static_cast<std::size_t>(i)] = h.real(h.l.srow_x, i);
  } else if (xform_used(h.code(h.l.qform_code))) {
    source = "qform";
    Status s = qform_affine(h, pix, &a);
    if (!s.ok()) return s;
  } else {
    base_affine(h, pix, &a);
  }
  for (double e : a) {
    if (!std::isfinite(e))
      return Status::Corrupt(std::string("NIfTI affine (from the ") + source + ") holds " + num(e));
  }
  return Status::Ok();
}

Status parse_nifti(const Nifti& h, std::uint64_t file_size, std::uint64_t max_voxels, VolumeHeader* out) {
  VolumeHeader v;
  v.format = h.l.format;
  std::int64_t C = 1;
  Status s = nifti_dims(h, &v.shape, &C);
  if (s.ok()) s = nifti_type(h.f.i16(h.l.datatype), h.f.i16(h.l.bitpix), &v.type);
  if (s.ok()) s = nifti_offset(h, &v.data_offset);
  if (s.ok()) s = check_size(C, v.shape, voxel_bytes(v.type), max_voxels, v.data_offset, file_size, &v.data_bytes);
  if (s.ok()) s = nifti_geometry(h, &v);
  if (!s.ok()) return s;
  v.channels = static_cast<int>(C);
  v.swap = h.f.big && voxel_bytes(v.type) > 1;
  const std::int64_t S0 = v.shape[0], S1 = v.shape[1], S2 = v.shape[2];
  v.strides = {S0 * S1 * S2, 1, S0, S0 * S1};  // Fortran order: i fastest, channels slowest
  nifti_scaling(h, &v);
  *out = v;
  return Status::Ok();
}

// Which NIfTI version (if any) `data` holds, by sizeof_hdr and magic.
Status sniff_nifti(const std::uint8_t* d, std::size_t n, std::uint64_t file_size, const NiftiLayout** layout,
                   bool* big) {
  const Fields le{d, false}, be{d, true};
  const std::uint64_t size_le = le.bits(0, 4), size_be = be.bits(0, 4);
  const NiftiLayout* l = nullptr;
  for (const NiftiLayout* k : {&kNifti1, &kNifti2}) {
    if (size_le == k->size || size_be == k->size) l = k;
  }
  if (l == nullptr) {
    return Status::Corrupt("not a volume: neither .npy nor NIfTI-1/2 (magic " +
                           hex_bytes(d, std::min<std::size_t>(n, 4)) + ")");
  }
  const std::string name = volume_format_name(l->format);
  if (n < l->size) {
    if (n < file_size)
      return Status::Corrupt(name + " header of " + std::to_string(l->size) + " bytes is longer than the " +
                             std::to_string(n) + " bytes given");
    return Status::Corrupt("truncated " + name + " header: " + std::to_string(n) + " of " + std::to_string(l->size) +
                           " bytes");
  }
  *big = size_le != l->size;
  *layout = l;
  const bool v2 = l->wide;
  const std::uint8_t* magic = d + (v2 ? 4 : 344);
  if (std::memcmp(magic, v2 ? "n+2\0" : "n+1\0", 4) == 0) {
    if (!v2 || std::memcmp(d + 8, "\r\n\032\n", 4) == 0 || std::memcmp(d + 8, "\0\0\0\0", 4) == 0) return Status::Ok();
    return Status::Corrupt("NIfTI-2 end-of-line check bytes damaged (" + hex_bytes(d + 8, 4) +
                           "; was the file transferred in text mode?)");
  }
  if (std::memcmp(magic, v2 ? "ni2\0" : "ni1\0", 4) == 0) {
    return Status::Unsupported(name + " .hdr/.img pair (magic \"" + (v2 ? "ni2" : "ni1") +
                               "\"): only single-file .nii is supported");
  }
  return Status::Corrupt("not a volume: neither .npy nor NIfTI-1/2 (sizeof_hdr " + std::to_string(l->size) +
                         " but magic " + hex_bytes(magic, 4) + " at " + std::to_string(magic - d) + ")");
}

}  // namespace

Status parse_volume_header(const std::uint8_t* data, std::size_t n, std::uint64_t file_size, std::uint64_t max_voxels,
                           VolumeHeader* out) {
  if (n == 0) return Status::Corrupt("empty file (0 bytes)");
  if (n >= 6 && std::memcmp(data, "\x93NUMPY", 6) == 0) return parse_npy(data, n, file_size, max_voxels, out);
  if (n < 4) {
    return Status::Corrupt("not a volume: neither .npy nor NIfTI-1/2 (only " + std::to_string(n) +
                           " bytes: " + hex_bytes(data, n) + ")");
  }
  const NiftiLayout* layout = nullptr;
  bool big = false;
  Status s = sniff_nifti(data, n, file_size, &layout, &big);
  if (!s.ok()) return s;
  return parse_nifti(Nifti{*layout, Fields{data, big}}, file_size, max_voxels, out);
}

// ---- gzip ----

bool is_gzip(const std::uint8_t* data, std::size_t n) { return n >= 2 && data[0] == 0x1f && data[1] == 0x8b; }

std::uint32_t gzip_isize(const std::uint8_t* data, std::size_t n) {
  if (n < 18) return 0;
  const std::uint8_t* p = data + n - 4;
  return p[0] | (std::uint32_t{p[1]} << 8) | (std::uint32_t{p[2]} << 16) | (std::uint32_t{p[3]} << 24);
}

namespace {
constexpr std::size_t kChunk = std::size_t{1} << 30;  // zlib's counts are 32-bit
constexpr std::size_t kScratch = 64 << 10;
}  // namespace

GzipStream::GzipStream() : z_(std::make_unique<z_stream_s>()) {}

GzipStream::~GzipStream() {
  if (live_) inflateEnd(z_.get());
}

Status GzipStream::open(const std::uint8_t* data, std::size_t n) {
  if (live_) inflateEnd(z_.get());
  live_ = false;
  ended_ = false;
  deferred_ = Status::Ok();
  out_ = 0;
  in_ = data;
  in_size_ = left_ = n;
  *z_ = z_stream_s{};
  if (!is_gzip(data, n)) {
    return Status::Corrupt("not gzip: the data does not start with 1f 8b (first bytes: " +
                           hex_bytes(data, std::min<std::size_t>(n, 4)) + ")");
  }
  const int r = inflateInit2(z_.get(), 15 + 16);
  if (r == Z_MEM_ERROR) return Status::ResourceExhausted("gzip: out of memory for zlib's state");
  if (r != Z_OK) return Status::Internal("gzip: inflateInit2 failed (" + std::to_string(r) + ")");
  live_ = true;
  return Status::Ok();
}

std::size_t GzipStream::in_used() const { return in_size_ - left_ - z_->avail_in; }

void GzipStream::refill() {
  if (z_->avail_in != 0 || left_ == 0) return;
  const std::size_t take = std::min(left_, kChunk);
  z_->next_in = const_cast<Bytef*>(in_ + (in_size_ - left_));
  z_->avail_in = static_cast<uInt>(take);
  left_ -= take;
}

Status GzipStream::truncated() const {
  return Status::Corrupt("truncated gzip: the stream ends after " + std::to_string(out_) + " bytes of output (" +
                         std::to_string(in_used()) + " of input)");
}

Status GzipStream::inflate_error(int ret) const {
  if (ret == Z_MEM_ERROR) return Status::ResourceExhausted("gzip: out of memory in zlib");
  if (ret == Z_BUF_ERROR) return truncated();
  const std::string msg = z_->msg ? z_->msg : "error " + std::to_string(ret);
  const std::string at = " after " + std::to_string(out_) + " bytes of output";
  if (msg == "incorrect data check") return Status::Corrupt("gzip CRC mismatch (zlib: " + msg + ")" + at);
  if (msg == "incorrect length check") return Status::Corrupt("gzip ISIZE mismatch (zlib: " + msg + ")" + at);
  return Status::Corrupt("gzip data error: " + msg + at);
}

Status GzipStream::next_member() {
  std::size_t pos = in_used();
  while (pos < in_size_ && in_[pos] == 0) ++pos;  // zero padding, as Python's gzip skips it
  if (pos == in_size_) {
    ended_ = true;
    return Status::Ok();
  }
  if (in_[pos] != 0x1f || (pos + 1 < in_size_ && in_[pos + 1] != 0x8b)) {
    return Status::Corrupt("gzip: " + std::to_string(in_size_ - pos) + " bytes of trailing data after the stream (at " +
                           std::to_string(pos) + ", not another gzip member)");
  }
  inflateReset(z_.get());
  z_->next_in = nullptr;
  z_->avail_in = 0;
  left_ = in_size_ - pos;
  return Status::Ok();
}

Status GzipStream::inflate_some(std::uint8_t* dst, std::size_t want, std::size_t* got) {
  *got = 0;
  if (!live_) return Status::Internal("gzip: read before a successful open()");
  if (!deferred_.ok()) return deferred_;
  while (*got < want && !ended_) {
    refill();
    const std::size_t ask = std::min(want - *got, kChunk);
    z_->next_out = dst + *got;
    z_->avail_out = static_cast<uInt>(ask);
    const int r = inflate(z_.get(), Z_NO_FLUSH);
    const std::size_t made = ask - z_->avail_out;
    *got += made;
    out_ += made;
    Status s = r == Z_STREAM_END ? next_member() : r == Z_OK ? Status::Ok() : inflate_error(r);
    if (!s.ok()) {
      if (*got < want) return s;
      deferred_ = s;  // every byte asked for is good: the error lies after them
    }
  }
  return Status::Ok();
}

Status GzipStream::read(std::uint8_t* dst, std::size_t want) {
  std::size_t got = 0;
  Status s = inflate_some(dst, want, &got);
  if (!s.ok()) return s;
  return got < want ? truncated() : Status::Ok();
}

Status GzipStream::skip(std::uint64_t n) {
  if (!scratch_) scratch_ = std::make_unique<std::uint8_t[]>(kScratch);
  while (n > 0) {
    const std::size_t step = static_cast<std::size_t>(std::min<std::uint64_t>(n, kScratch));
    Status s = read(scratch_.get(), step);
    if (!s.ok()) return s;
    n -= step;
  }
  return Status::Ok();
}

Status GzipStream::finish() {
  std::uint8_t probe[64];
  std::size_t got = 0;
  const std::uint64_t expected = out_;
  Status s = inflate_some(probe, sizeof(probe), &got);
  if (got > 0) {
    return Status::Corrupt("gzip holds more data than the header says: output goes on past " +
                           std::to_string(expected) + " bytes");
  }
  return s;
}

std::uint64_t gzip_max_output(std::uint64_t n) {
  constexpr std::uint64_t kRatio = 1032, kSlack = 4096;
  if (n > (UINT64_MAX - kSlack) / kRatio) return UINT64_MAX;
  return n * kRatio + kSlack;
}

namespace {

// libdeflate (Debian's libdeflate0), loaded at run time when present: it
// inflates a whole gzip member about twice as fast as zlib's streaming
// inflate (bench/volume_bench.py's first epoch). Its C API (libdeflate.h,
// libdeflate_gzip_decompress_ex since 1.5), declared here: the -dev package
// is not needed, and without the library zlib does it all.
struct Libdeflate {
  void* (*alloc)() = nullptr;
  // (decompressor, in, in_n, out, out_n, in_used, out_made): 0 on success; with out_made null,
  // success only when the member inflates to exactly out_n bytes.
  int (*gzip_decompress_ex)(void*, const void*, std::size_t, void*, std::size_t, std::size_t*,
                            std::size_t*) = nullptr;
  void (*free_decompressor)(void*) = nullptr;
};
const Libdeflate* libdeflate() {
  static const Libdeflate* lib = []() -> const Libdeflate* {
    void* h = dlopen("libdeflate.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!h) return nullptr;
    static Libdeflate l;
    l.alloc = reinterpret_cast<void* (*)()>(dlsym(h, "libdeflate_alloc_decompressor"));
    l.gzip_decompress_ex = reinterpret_cast<int (*)(void*, const void*, std::size_t, void*, std::size_t, std::size_t*,
                                                    std::size_t*)>(dlsym(h, "libdeflate_gzip_decompress_ex"));
    l.free_decompressor = reinterpret_cast<void (*)(void*)>(dlsym(h, "libdeflate_free_decompressor"));
    return l.alloc && l.gzip_decompress_ex && l.free_decompressor ? &l : nullptr;
  }();
  return lib;
}
// One decompressor per thread (they are not thread-safe), freed at thread exit.
void* libdeflate_decompressor(const Libdeflate& l) {
  struct Owner {
    const Libdeflate* l = nullptr;
    void* d = nullptr;
    Owner() = default;
    Owner(const Owner&) = delete;
    Owner& operator=(const Owner&) = delete;
    ~Owner() {
      if (d) l->free_decompressor(d);
    }
  };
  thread_local Owner owner;
  if (!owner.d) {
    owner.l = &l;
    owner.d = l.alloc();
  }
  return owner.d;
}

// libdeflate's one-shot inflate of data[0, n) as one member of exactly `total` bytes, followed by
// nothing or zero padding only; false for anything else (zlib then reads it, and names the reason).
bool inflate_at_once(const std::uint8_t* data, std::size_t n, std::uint64_t total, std::vector<std::uint8_t>* out) {
  const Libdeflate* ld = libdeflate();
  if (ld == nullptr || total > SIZE_MAX) return false;
  void* d = libdeflate_decompressor(*ld);
  if (d == nullptr) return false;
  out->resize(static_cast<std::size_t>(total));
  std::size_t used = 0;
  if (ld->gzip_decompress_ex(d, data, n, out->data(), out->size(), &used, nullptr) != 0) return false;
  return used <= n && std::all_of(data + used, data + n, [](std::uint8_t b) { return b == 0; });
}

}  // namespace

Status inflate_gzip_volume(const std::uint8_t* data, std::size_t n, std::uint64_t max_voxels, VolumeHeader* h,
                           std::vector<std::uint8_t>* out) {
  GzipStream z;
  Status st = z.open(data, n);
  if (!st.ok()) return st;
  // The header, through the stream: the first min(kVolumeHeaderPrefix, output) bytes. Fewer
  // only when the whole output is that short: then the file's size is known.
  std::uint8_t head[kVolumeHeaderPrefix];
  std::size_t got = 0;
  st = z.read_some(head, sizeof(head), &got);
  if (!st.ok()) return st;
  const std::uint64_t known = got < sizeof(head) ? got : UINT64_MAX;
  st = parse_volume_header(head, got, known, max_voxels, h);
  if (!st.ok()) return st;
  const std::uint64_t total = h->data_offset + h->data_bytes;
  // NOTE: the rule against forged sizes: a header may ask for no more than n compressed bytes can
  // possibly inflate to (gzip_max_output: deflate's 1032:1), checked before anything of that
  // size is allocated; within it, truncation is found as the voxels are inflated.
  if (const std::uint64_t most = gzip_max_output(n); total > most) {
    return Status::Corrupt("the header says " + std::to_string(total) + " bytes uncompressed; " + std::to_string(n) +
                           " bytes of gzip inflate to at most " + std::to_string(most) +
                           " (deflate's limit is 1032:1): forged or truncated");
  }
  if (got > total) {
    return Status::Corrupt("gzip holds more data than the header says: output goes on past " + std::to_string(total) +
                           " bytes");
  }
  // The common file, one member whose trailer says the header's size: libdeflate at once, when
  // installed (ISIZE is only the hint to try it: its result is checked).
  if (gzip_isize(data, n) == static_cast<std::uint32_t>(total) && inflate_at_once(data, n, total, out)) {
    return Status::Ok();
  }
  // zlib: the voxels straight into *out, across members.
  out->resize(static_cast<std::size_t>(h->data_bytes));
  std::uint64_t have = 0;  // voxel bytes already in `head`
  if (h->data_offset < got) {
    have = std::min<std::uint64_t>(got - h->data_offset, h->data_bytes);
    std::memcpy(out->data(), head + h->data_offset, static_cast<std::size_t>(have));
  } else {
    st = z.skip(h->data_offset - got);
    if (!st.ok()) return st;
  }
  st = z.read(out->data() + have, static_cast<std::size_t>(h->data_bytes - have));
  if (!st.ok()) return st;
  st = z.finish();
  if (!st.ok()) return st;
  h->data_offset = 0;
  return Status::Ok();
}

}  // namespace stoker::detail
