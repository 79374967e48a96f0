#include "decode/volume_format.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace stoker::detail {
namespace {

using Bytes = std::vector<std::uint8_t>;
constexpr std::uint64_t kUnknownSize = UINT64_MAX;
constexpr std::uint64_t kMaxVoxels = std::uint64_t{1} << 31;
const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

// A NIfTI-1 or -2 header to write by hand (fields at nibabel's header_dtype offsets).
struct NiftiSpec {
  int version = 1;
  bool big = false;
  std::vector<std::int64_t> dim{3, 4, 5, 6};  // dim[0], dim[1], ...; the rest are 1
  int datatype = 2, bitpix = 8;
  std::vector<double> pixdim{1, 1, 1, 1};  // pixdim[0] (qfac), pixdim[1..]; the rest are 1
  double vox_offset = 0;                   // 0: 352 (NIfTI-1) or 544 (NIfTI-2)
  double slope = 0, inter = 0;
  int qform = 0, sform = 0;
  std::array<double, 3> quat{0, 0, 0}, qoffset{0, 0, 0};
  std::array<double, 12> srow{};
  std::string magic;                 // empty: "n+1" / "n+2"
  std::string eol{"\r\n\032\n", 4};  // NIfTI-2 only
  bool data = true;                  // append the voxels (zeros)
};

class Writer {
 public:
  Writer(Bytes* b, bool big) : b_(b), big_(big) {}
  void put(std::size_t off, std::uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) {
      const int shift = 8 * (big_ ? bytes - 1 - i : i);
      (*b_)[off + static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(v >> shift);
    }
  }
  void i16(std::size_t off, std::int64_t v) { put(off, static_cast<std::uint64_t>(v), 2); }
  void i32(std::size_t off, std::int64_t v) { put(off, static_cast<std::uint64_t>(v), 4); }
  void i64(std::size_t off, std::int64_t v) { put(off, static_cast<std::uint64_t>(v), 8); }
  void f32(std::size_t off, double v) { put(off, std::bit_cast<std::uint32_t>(static_cast<float>(v)), 4); }
  void f64(std::size_t off, double v) { put(off, std::bit_cast<std::uint64_t>(v), 8); }

 private:
  Bytes* b_;
  bool big_;
};

Bytes nifti(const NiftiSpec& s) {
  const bool v2 = s.version == 2;
  const double offset = s.vox_offset != 0 ? s.vox_offset : (v2 ? 544 : 352);
  Bytes b(v2 ? 544 : 352, 0);
  Writer w(&b, s.big);
  w.i32(0, v2 ? 540 : 348);
  const std::string magic = s.magic.empty() ? (v2 ? "n+2" : "n+1") : s.magic;
  std::memcpy(b.data() + (v2 ? 4 : 344), magic.data(), magic.size());
  if (v2) std::memcpy(b.data() + 8, s.eol.data(), 4);
  auto real = [&](std::size_t off1, std::size_t off2, double v) { v2 ? w.f64(off2, v) : w.f32(off1, v); };
  for (std::size_t i = 0; i < 8; ++i) {
    const std::int64_t d = i < s.dim.size() ? s.dim[i] : 1;
    v2 ? w.i64(16 + 8 * i, d) : w.i16(40 + 2 * i, d);
    real(76 + 4 * i, 104 + 8 * i, i < s.pixdim.size() ? s.pixdim[i] : 1.0);
  }
  v2 ? w.i16(12, s.datatype) : w.i16(70, s.datatype);
  v2 ? w.i16(14, s.bitpix) : w.i16(72, s.bitpix);
  v2 ? w.i64(168, static_cast<std::int64_t>(offset)) : w.f32(108, offset);
  real(112, 176, s.slope);
  real(116, 184, s.inter);
  v2 ? w.i32(344, s.qform) : w.i16(252, s.qform);
  v2 ? w.i32(348, s.sform) : w.i16(254, s.sform);
  for (std::size_t i = 0; i < 3; ++i) {
    real(256 + 4 * i, 352 + 8 * i, s.quat[i]);
    real(268 + 4 * i, 376 + 8 * i, s.qoffset[i]);
  }
  for (std::size_t i = 0; i < 12; ++i) real(280 + 4 * i, 400 + 8 * i, s.srow[i]);
  if (s.data) {
    std::uint64_t voxels = 1;
    for (std::size_t i = 1; i <= static_cast<std::size_t>(s.dim[0]); ++i)
      voxels *= static_cast<std::uint64_t>(s.dim[i]);
    b.resize(static_cast<std::size_t>(offset) + voxels * static_cast<std::uint64_t>(s.bitpix / 8), 7);
  }
  return b;
}

// A .npy file, version 1.0, as numpy.save writes it (header padded to 64 bytes), with `data_bytes` of data.
Bytes npy(const std::string& descr, const std::string& shape, std::size_t data_bytes, bool fortran = false) {
  std::string h =
      "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") + ", 'shape': " + shape + ", }";
  while ((10 + h.size() + 1) % 64 != 0) h += ' ';
  h += '\n';
  Bytes b(10 + h.size() + data_bytes, 3);
  std::memcpy(b.data(), "\x93NUMPY\x01\x00", 8);
  b[8] = static_cast<std::uint8_t>(h.size() & 0xff);
  b[9] = static_cast<std::uint8_t>(h.size() >> 8);
  std::memcpy(b.data() + 10, h.data(), h.size());
  return b;
}

Status parse(const Bytes& b, VolumeHeader* h, std::uint64_t max_voxels = kMaxVoxels) {
  return parse_volume_header(b.data(), b.size(), b.size(), max_voxels, h);
}

// Parses b and expects a refusal with `code` whose message holds `what`.
void expect_refused(const Bytes& b, Code code, const std::string& what, std::uint64_t max_voxels = kMaxVoxels) {
  VolumeHeader h;
  Status s = parse(b, &h, max_voxels);
  EXPECT_EQ(s.code(), code) << s.to_string();
  EXPECT_NE(s.message().find(what), std::string::npos) << s.message();
}

void expect_affine(const VolumeHeader& h, const std::array<double, 12>& rows) {
  for (std::size_t i = 0; i < 12; ++i) EXPECT_NEAR(h.affine[i], rows[i], 1e-12) << "element " << i;
  EXPECT_EQ(h.affine[12], 0.0);
  EXPECT_EQ(h.affine[13], 0.0);
  EXPECT_EQ(h.affine[14], 0.0);
  EXPECT_EQ(h.affine[15], 1.0);
}

// ---- NIfTI shapes and types ----

TEST(VolumeFormatTest, Nifti1ThreeD) {
  NiftiSpec s;
  s.pixdim = {1, 2, 3, 4};
  VolumeHeader h;
  ASSERT_TRUE(parse(nifti(s), &h).ok());
  EXPECT_EQ(h.format, VolumeFormat::kNifti1);
  EXPECT_EQ(h.type, VoxelType::kU8);
  EXPECT_FALSE(h.swap);
  EXPECT_EQ(h.channels, 1);
  EXPECT_EQ(h.shape, (std::array<std::int64_t, 3>{4, 5, 6}));
  EXPECT_EQ(h.strides, (std::array<std::int64_t, 4>{120, 1, 4, 20}));  // Fortran order: i fastest
  EXPECT_EQ(h.data_offset, 352u);
  EXPECT_EQ(h.data_bytes, 120u);
  EXPECT_FALSE(h.scaled);
  EXPECT_EQ(h.spacing, (std::array<double, 3>{2, 3, 4}));
}

TEST(VolumeFormatTest, Nifti1ChannelsFromDim4To7) {
  NiftiSpec s;
  s.dim = {4, 4, 5, 6, 3};
  VolumeHeader h;
  ASSERT_TRUE(parse(nifti(s), &h).ok());
  EXPECT_EQ(h.channels, 3);
  EXPECT_EQ(h.shape, (std::array<std::int64_t, 3>{4, 5, 6}));
  EXPECT_EQ(h.strides, (std::array<std::int64_t, 4>{120, 1, 4, 20}));
  EXPECT_EQ(h.data_bytes, 360u);
  s.dim = {5, 4, 5, 6, 2, 3};
  ASSERT_TRUE(parse(nifti(s), &h).ok());
  EXPECT_EQ(h.channels, 6);
  s.dim = {7, 2, 2, 2, 2, 2, 2, 2};
  ASSERT_TRUE(parse(nifti(s), &h).ok());
  EXPECT_EQ(h.channels, 16);
  EXPECT_EQ(h.data_bytes, 128u);
}

TEST(VolumeFormatTest, Nifti1TwoDimsGiveDepthOne) {
  NiftiSpec s;
  s.dim = {2, 4, 5, 9};  // dim[3] is ignored past dim[0]
  s.pixdim = {1, 2, 3, 4};
  VolumeHeader h;
  ASSERT_TRUE(parse(nifti(s), &h).ok());
  EXPECT_EQ(h.shape, (std::array<std::int64_t, 3>{4, 5, 1}));
  EXPECT_EQ(h.strides, (std::array<std::int64_t, 4>{20, 1, 4, 20}));
  EXPECT_EQ(h.data_bytes, 20u);
  // nibabel: get_zooms() is (2.0, 3.0); the base affine's z zoom is 1 (shape_zoom_affine pads with 1).
  EXPECT_EQ(h.spacing, (std::array<double, 3>{2, 3, 1}));
  expect_affine(h, {-2, 0, 0, 3, 0, 3, 0, -6, 0, 0, 1, 0});
}

TEST(VolumeFormatTest, EveryDatatype) {
  const struct {
    int code, bits;
    VoxelType type;
    const char* name;
  } kCases[] = {{2, 8, VoxelType::kU8, "uint8"},      {256, 8, VoxelType::kI8, "int8"},
                {512, 16, VoxelType::kU16, "uint16"}, {4, 16, VoxelType::kI16, "int16"},
                {768, 32, VoxelType::kU32, "uint32"}, {8, 32, VoxelType::kI32, "int32"},
                {16, 32, VoxelType::kF32, "float32"}, {64, 64, VoxelType::kF64, "float64"}};
  for (int version : {1, 2}) {
    for (const auto& c : kCases) {
      NiftiSpec s;
      s.version = version;
      s.datatype = c.code;
      s.bitpix = c.bits;
      VolumeHeader h;
      Status st = parse(nifti(s), &h);
      ASSERT_TRUE(st.ok()) << c.name << ": " << st.to_string();
      EXPECT_EQ(h.type, c.type);
      EXPECT_STREQ(voxel_name(h.type), c.name);
      EXPECT_EQ(voxel_bytes(h.type) * 8, static_cast<std::size_t>(c.bits));
      EXPECT_EQ(h.data_bytes, 120u * voxel_bytes(h.type));
    }
  }
  EXPECT_STREQ(volume_format_name(VolumeFormat::kNpy), "npy");
  EXPECT_STREQ(volume_format_name(VolumeFormat::kNifti1), "NIfTI-1");
  EXPECT_STREQ(volume_format_name(VolumeFormat::kNifti2), "NIfTI-2");
}

TEST(VolumeFormatTest, BigEndianSwaps) {
  for (int version : {1, 2}) {
    NiftiSpec s;
    s.version = version;
    s.big = true;
    s.dim = {4, 4, 5, 6, 2};
    s.datatype = 4;
    s.bitpix = 16;
    s.pixdim = {1, 2, 3, 4};
    s.slope = 2;
    VolumeHeader h;
    ASSERT_TRUE(parse(nifti(s), &h).ok());
    EXPECT_TRUE(h.swap);
    EXPECT_EQ(h.type, VoxelType::kI16);
    EXPECT_EQ(h.channels, 2);
    EXPECT_EQ(h.shape, (std::array<std::int64_t, 3>{4, 5, 6}));
    EXPECT_EQ(h.spacing, (std::array<double, 3>{2, 3, 4}));
    EXPECT_TRUE(h.scaled);
    EXPECT_EQ(h.slope, 2.0);
    // One byte per voxel: nothing to swap.
    s.datatype = 2;
    s.bitpix = 8;
    ASSERT_TRUE(parse(nifti(s), &h).ok());
    EXPECT_FALSE(h.swap);
  }
}

TEST(VolumeFormatTest, Nifti2) {
  NiftiSpec s;
  s.version = 2;
  s.dim = {3, 5, 6, 7};
  s.datatype = 16;
  s.bitpix = 32;
  s.pixdim = {1, 0.5, 0.25, -2};
  VolumeHeader h;
  ASSERT_TRUE(parse(nifti(s), &h).ok());
  EXPECT_EQ(h.format, VolumeFormat::kNifti2);
  EXPECT_EQ(h.data_offset, 544u);
  EXPECT_EQ(h.data_bytes, 5u * 6 * 7 * 4);
  EXPECT_EQ(h.strides, (std::array<std::int64_t, 4>{210, 1, 5, 30}));
  // nibabel 5.0 (header written by hand, nib.load(p)): zooms (0.5, 0.25, 2.0) (negative pixdim -> abs),
  // affine [[-0.5,0,0,1],[0,0.25,0,-0.625],[0,0,2,-6]].
  EXPECT_EQ(h.spacing, (std::array<double, 3>{0.5, 0.25, 2}));
  expect_affine(h, {-0.5, 0, 0, 1, 0, 0.25, 0, -0.625, 0, 0, 2, -6});
  // nibabel accepts an all-zero end-of-line check, refuses a damaged one.
  s.eol = std::string(4, '\0');
  EXPECT_TRUE(parse(nifti(s), &h).ok());
  s.eol = "\r\n\n";
  s.eol += '\0';
  expect_refused(nifti(s), Code::kCorrupt, "end-of-line check");
}

// ---- .npy ----

TEST(VolumeFormatTest, NpyCOrder) {
  VolumeHeader h;
  Bytes b = npy("|u1", "(4, 5, 6)", 120);
  ASSERT_TRUE(parse(b, &h).ok());
  EXPECT_EQ(h.format, VolumeFormat::kNpy);
  EXPECT_EQ(h.type, VoxelType::kU8);
  EXPECT_EQ(h.channels, 1);
  EXPECT_EQ(h.shape, (std::array<std::int64_t, 3>{4, 5, 6}));
  EXPECT_EQ(h.strides, (std::array<std::int64_t, 4>{120, 30, 6, 1}));
  EXPECT_EQ(h.data_offset, 128u);  // numpy pads the header to a multiple of 64 bytes
  EXPECT_EQ(h.data_bytes, 120u);
  expect_affine(h, {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0});
  EXPECT_EQ(h.spacing, (std::array<double, 3>{1, 1, 1}));
  ASSERT_TRUE(parse(npy("<f4", "(3, 4, 5, 6)", 360 * 4), &h).ok());
  EXPECT_EQ(h.type, VoxelType::kF32);
  EXPECT_FALSE(h.swap);
  EXPECT_EQ(h.channels, 3);
  EXPECT_EQ(h.strides, (std::array<std::int64_t, 4>{120, 30, 6, 1}));
  EXPECT_EQ(h.data_bytes, 360u * 4);
  ASSERT_TRUE(parse(npy(">i2", "(4, 5, 6)", 240), &h).ok());
  EXPECT_EQ(h.type, VoxelType::kI16);
  EXPECT_TRUE(h.swap);
}

TEST(VolumeFormatTest, NpyFortranOrder) {
  VolumeHeader h;
  ASSERT_TRUE(parse(npy("<u2", "(4, 5, 6)", 240, /*fortran=*/true), &h).ok());
  EXPECT_EQ(h.strides[1], 1);
  EXPECT_EQ(h.strides[2], 4);
  EXPECT_EQ(h.strides[3], 20);
  ASSERT_TRUE(parse(npy("<f8", "(3, 4, 5, 6)", 360 * 8, /*fortran=*/true), &h).ok());
  EXPECT_EQ(h.channels, 3);
  EXPECT_EQ(h.strides, (std::array<std::int64_t, 4>{1, 3, 12, 60}));
}

TEST(VolumeFormatTest, NpyEveryDtype) {
  const char* kDescr[] = {"|u1", "|i1", "<u2", "<i2", "<u4", "<i4", "<f4", "<f8"};
  for (int i = 0; i < 8; ++i) {
    for (char order : {'<', '>'}) {
      std::string d = kDescr[i];
      if (d[0] == '<') d[0] = order;
      VolumeHeader h;
      Status s = parse(npy(d, "(2, 2, 2)", 64), &h);
      ASSERT_TRUE(s.ok()) << d << ": " << s.to_string();
      EXPECT_EQ(static_cast<int>(h.type), i);
      EXPECT_EQ(h.swap, d[0] == '>');
    }
  }
}

TEST(VolumeFormatTest, NpyRefusals) {
  expect_refused(npy("<c8", "(2, 2, 2)", 64), Code::kUnsupported, "'<c8'");
  expect_refused(npy("<i8", "(2, 2, 2)", 64), Code::kUnsupported, "'<i8'");
  expect_refused(npy("|b1", "(2, 2, 2)", 8), Code::kUnsupported, "'|b1'");
  expect_refused(npy("|u1", "(4, 5)", 20), Code::kUnsupported, "got shape (4, 5)");
  expect_refused(npy("|u1", "(2, 2, 2, 2, 2)", 32), Code::kUnsupported, "got shape (2, 2, 2, 2, 2)");
  expect_refused(npy("|u1", "(2, 0, 2)", 0), Code::kCorrupt, "zero size");
  expect_refused(npy("|u1", "(4, 5, 6)", 119), Code::kCorrupt,
                 "header says 120 bytes of voxels from offset 128, the file has 247");
  expect_refused(npy("|u1", "(17, 2, 2, 2)", 136), Code::kResourceExhausted, "17 channels");
  expect_refused(npy("|u1", "(100, 100, 100)", 0), Code::kResourceExhausted, "max_voxels=1000", 1000);
  // A header longer than the prefix given, of a longer file.
  Bytes b = npy("|u1", "(4, 5, 6)", 120);
  VolumeHeader h;
  Status s = parse_volume_header(b.data(), 40, b.size(), kMaxVoxels, &h);
  EXPECT_EQ(s.code(), Code::kCorrupt);
  EXPECT_NE(s.message().find("longer than the 40 bytes given"), std::string::npos) << s.message();
}

// ---- Affine and scaling (against nibabel 5.0) ----

TEST(VolumeFormatTest, SformAffine) {
  NiftiSpec s;
  s.sform = 2;
  s.qform = 1;  // sform wins
  s.quat = {0.1, 0.2, 0.3};
  s.srow = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12.5};
  VolumeHeader h;
  ASSERT_TRUE(parse(nifti(s), &h).ok());
  expect_affine(h, s.srow);
  s.version = 2;
  s.srow[0] = 0.1;  // exact in float64 only
  ASSERT_TRUE(parse(nifti(s), &h).ok());
  EXPECT_EQ(h.affine[0], 0.1);
}

// The qform numbers come from nibabel 5.0: a header written by hand (numpy structured array of
// nib.nifti1.header_dtype / nib.nifti2.header_dtype), then `nib.load(p).affine`, printed with
// np.set_printoptions(precision=17).
TEST(VolumeFormatTest, QformAffineAsNibabel) {
  NiftiSpec s;
  s.qform = 1;
  s.quat = {0.1, 0.2, 0.3};
  s.pixdim = {-1, 2, 3, 4};
  s.qoffset = {10, 20, 30};
  VolumeHeader h;
  ASSERT_TRUE(parse(nifti(s), &h).ok());
  expect_affine(h, {1.4799999666213983, -1.5492513835553647, -1.7237789870466562, 10,  //
                    1.1928342604719482, 2.3999999552965154, 0.26188946074077313, 20,   //
                    -0.6218894804103061, 0.9164171348946458, -3.599999988079071, 30});
  // qfac other than +-1 reads as 1 (nibabel's header check fixes it): the third column flips.
  s.pixdim[0] = 0;
  ASSERT_TRUE(parse(nifti(s), &h).ok());
  expect_affine(h, {1.4799999666213983, -1.5492513835553647, 1.7237789870466562, 10,   //
                    1.1928342604719482, 2.3999999552965154, -0.26188946074077313, 20,  //
                    -0.6218894804103061, 0.9164171348946458, 3.599999988079071, 30});
  // NIfTI-2 keeps the float64 quaternion.
  s.version = 2;
  s.pixdim[0] = -1;
  ASSERT_TRUE(parse(nifti(s), &h).ok());
  expect_affine(h, {1.48, -1.5492513291892267, -1.7237789592793127, 10,  //
                    1.1928342194594843, 2.4, 0.2618894796396563, 20,     //
                    -0.6218894796396564, 0.9164171097297422, -3.6, 30});
}

TEST(VolumeFormatTest, QformNearUnitQuaternion) {
  // b = c = d = float32(0.5773503): 1 - b²-c²-d² is -6.9e-8, inside nibabel's -3 eps(float32):
  // fillpositive gives a = 0 (nibabel: quaternion [0, 0.57735031843185425, ...]).
  NiftiSpec s;
  s.qform = 1;
  s.quat = {0.5773503, 0.5773503, 0.5773503};
  s.pixdim = {1, 2, 3, 4};
  s.qoffset = {-5, 6.5, 7};
  VolumeHeader h;
  ASSERT_TRUE(parse(nifti(s), &h).ok());
  expect_affine(h, {-0.6666666666666666, 2, 2.6666666666666665, -5,   //
                    1.3333333333333333, -1, 2.6666666666666665, 6.5,  //
                    1.3333333333333333, 2, -1.3333333333333333, 7});
  // Further out nibabel raises "w2 should be positive".
  s.quat = {0.6, 0.6, 0.6};
  expect_refused(nifti(s), Code::kCorrupt, "norm > 1");
}

TEST(VolumeFormatTest, BaseAffineWhenBothCodesZero) {
  // nibabel: get_base_affine() = shape_zoom_affine(shape, zooms, x_flip=True), centred on the volume.
  NiftiSpec s;
  s.dim = {3, 5, 6, 7};
  s.pixdim = {1, 2, 3, 4};
  VolumeHeader h;
  ASSERT_TRUE(parse(nifti(s), &h).ok());
  expect_affine(h, {-2, 0, 0, 4, 0, 3, 0, -7.5, 0, 0, 4, -12});
  // pixdim 0 -> 1 and negative -> abs, as nibabel's header check fixes them: zooms (2.0, 1.0, 4.0).
  s.pixdim = {0, -2, 0, 4};
  ASSERT_TRUE(parse(nifti(s), &h).ok());
  EXPECT_EQ(h.spacing, (std::array<double, 3>{2, 1, 4}));
  expect_affine(h, {-2, 0, 0, 4, 0, 1, 0, -2.5, 0, 0, 4, -12});
  // Codes nibabel does not know (outside 0..5) are set to 0: sform_code 7 and -1 give the base affine.
  s.pixdim = {1, 2, 3, 4};
  s.srow = {1, 0, 0, 1, 0, 1, 0, 2, 0, 0, 1, 3};
  for (int code : {7, -1}) {
    s.sform = code;
    ASSERT_TRUE(parse(nifti(s), &h).ok());
    expect_affine(h, {-2, 0, 0, 4, 0, 3, 0, -7.5, 0, 0, 4, -12});
  }
  // 4D: only the spatial dims count.
  s.sform = 0;
  s.dim = {4, 5, 6, 7, 3};
  ASSERT_TRUE(parse(nifti(s), &h).ok());
  expect_affine(h, {-2, 0, 0, 4, 0, 3, 0, -7.5, 0, 0, 4, -12});
}

TEST(VolumeFormatTest, ScalingRules) {
  const struct {
    double slope, inter;
    bool scaled;
    double want_slope, want_inter;
  } kCases[] = {
      {0, 5, false, 1, 0},   {kNaN, 5, false, 1, 0}, {kInf, 5, false, 1, 0}, {1, 0, false, 1, 0},
      {2, 3, true, 2, 3},    {1, 5, true, 1, 5},     {0.5, 0, true, 0.5, 0}, {2, kNaN, true, 2, 0},
      {2, kInf, true, 2, 0}, {1, kInf, false, 1, 0},
  };
  for (int version : {1, 2}) {
    for (const auto& c : kCases) {
      NiftiSpec s;
      s.version = version;
      s.slope = c.slope;
      s.inter = c.inter;
      VolumeHeader h;
      ASSERT_TRUE(parse(nifti(s), &h).ok());
      EXPECT_EQ(h.scaled, c.scaled) << c.slope << " " << c.inter;
      EXPECT_EQ(h.slope, c.want_slope);
      EXPECT_EQ(h.inter, c.want_inter);
    }
  }
}

// ---- Refusals ----

TEST(VolumeFormatTest, UnknownMagic) {
  Bytes b(400, 0);
  std::memcpy(b.data(), "GIF89a", 6);
  expect_refused(b, Code::kCorrupt, "not a volume: neither .npy nor NIfTI-1/2 (magic 47 49 46 38)");
  NiftiSpec s;
  s.magic = "xyz";
  expect_refused(nifti(s), Code::kCorrupt, "not a volume");
  expect_refused(Bytes{0x93, 'N'}, Code::kCorrupt, "not a volume");
  expect_refused(Bytes{}, Code::kCorrupt, "empty");
  // A NIfTI header cut short.
  Bytes h = nifti(NiftiSpec{});
  h.resize(300);
  expect_refused(h, Code::kCorrupt, "truncated NIfTI-1 header");
  VolumeHeader v;
  Bytes full = nifti(NiftiSpec{});
  Status st = parse_volume_header(full.data(), 300, full.size(), kMaxVoxels, &v);
  EXPECT_EQ(st.code(), Code::kCorrupt);
}

TEST(VolumeFormatTest, HeaderImagePairsUnsupported) {
  NiftiSpec s;
  s.magic = "ni1";
  expect_refused(nifti(s), Code::kUnsupported, ".hdr/.img");
  s.version = 2;
  s.magic = "ni2";
  expect_refused(nifti(s), Code::kUnsupported, ".hdr/.img");
}

TEST(VolumeFormatTest, UnsupportedDatatypes) {
  const struct {
    int code, bits;
    const char* what;
  } kCases[] = {{128, 24, "128 (RGB24)"},    {32, 64, "32 (complex64)"},       {1024, 64, "1024 (int64)"},
                {1280, 64, "1280 (uint64)"}, {1792, 128, "1792 (complex128)"}, {2304, 32, "2304 (RGBA32)"},
                {1, 1, "1 (binary)"},        {1536, 128, "1536 (float128)"},   {77, 8, "code 77 is unknown"}};
  for (const auto& c : kCases) {
    NiftiSpec s;
    s.datatype = c.code;
    s.bitpix = c.bits;
    s.data = false;
    expect_refused(nifti(s), Code::kUnsupported, c.what);
  }
}

TEST(VolumeFormatTest, DimsOutOfRange) {
  for (int version : {1, 2}) {
    NiftiSpec s;
    s.version = version;
    s.data = false;
    s.dim = {0, 4, 5, 6};
    expect_refused(nifti(s), Code::kCorrupt, "dim[0] is 0");
    s.dim = {8, 4, 5, 6};
    expect_refused(nifti(s), Code::kCorrupt, "dim[0] is 8");
    s.dim = {3, 4, 0, 6};
    expect_refused(nifti(s), Code::kCorrupt, "dim[2] is 0");
    s.dim = {4, 4, 5, 6, -3};
    expect_refused(nifti(s), Code::kCorrupt, "dim[4] is -3");
  }
}

TEST(VolumeFormatTest, BitpixMustMatchDatatype) {
  NiftiSpec s;
  s.datatype = 4;
  s.bitpix = 8;
  s.data = false;
  expect_refused(nifti(s), Code::kCorrupt, "bitpix 8 disagrees with datatype 4 (int16, 16 bits)");
}

TEST(VolumeFormatTest, VoxOffset) {
  NiftiSpec s;
  s.vox_offset = 348;
  expect_refused(nifti(s), Code::kCorrupt, "vox_offset 348 is below 352, the end of the header");
  s.vox_offset = kNaN;
  s.data = false;
  expect_refused(nifti(s), Code::kCorrupt, "vox_offset is nan");
  s.version = 2;
  s.vox_offset = 540;
  s.data = true;
  expect_refused(nifti(s), Code::kCorrupt, "vox_offset 540 is below 544, the end of the header");
  // Past the file (a larger offset, with the bytes before the voxels written).
  s.version = 1;
  s.vox_offset = 1e6;
  s.data = false;
  expect_refused(nifti(s), Code::kCorrupt, "header says 120 bytes of voxels from offset 1000000, the file has 352");
  s.vox_offset = 1e30;
  expect_refused(nifti(s), Code::kCorrupt, "past any file");
  // A fractional vox_offset is truncated, as nibabel's int().
  s.vox_offset = 400.7f;
  s.data = true;
  VolumeHeader h;
  ASSERT_TRUE(parse(nifti(s), &h).ok());
  EXPECT_EQ(h.data_offset, 400u);
}

TEST(VolumeFormatTest, DataPastTheFile) {
  Bytes b = nifti(NiftiSpec{});
  b.pop_back();
  expect_refused(b, Code::kCorrupt, "header says 120 bytes of voxels from offset 352, the file has 471");
  // Size unknown (a .gz stream's prefix): the caller checks later.
  VolumeHeader h;
  EXPECT_TRUE(parse_volume_header(b.data(), 352, kUnknownSize, kMaxVoxels, &h).ok());
  // A prefix of kVolumeHeaderPrefix bytes of a larger file is enough.
  NiftiSpec s;
  s.dim = {3, 64, 64, 64};
  Bytes big = nifti(s);
  ASSERT_TRUE(parse_volume_header(big.data(), kVolumeHeaderPrefix, big.size(), kMaxVoxels, &h).ok());
  EXPECT_EQ(h.data_bytes, 64u * 64 * 64);
}

TEST(VolumeFormatTest, SizeCapsBeforeAllocation) {
  NiftiSpec s;
  s.dim = {3, 32767, 32767, 32767};
  s.data = false;  // a 352-byte file: the cap is checked before the data size
  expect_refused(nifti(s), Code::kResourceExhausted, "32767x32767x32767 voxels exceeds max_voxels=2147483648");
  s.version = 2;
  const std::int64_t huge = std::int64_t{1} << 62;
  s.dim = {3, huge, huge, 3};
  expect_refused(nifti(s), Code::kResourceExhausted, "exceeds max_voxels");
  s.dim = {7, huge, huge, huge, huge, huge, huge, huge};
  expect_refused(nifti(s), Code::kResourceExhausted, "channels exceeds the 16 supported");
  s.dim = {3, std::numeric_limits<std::int64_t>::max(), 2, 2};
  expect_refused(nifti(s), Code::kResourceExhausted, "exceeds max_voxels", UINT64_MAX);
  s.dim = {4, 2, 2, 2, 17};
  expect_refused(nifti(s), Code::kResourceExhausted, "17 channels");
  s.dim = {3, 100, 100, 100};
  expect_refused(nifti(s), Code::kResourceExhausted, "max_voxels=999999", 999999);
}

TEST(VolumeFormatTest, NonFiniteGeometry) {
  NiftiSpec s;
  s.sform = 1;
  s.srow = {1, 0, 0, kNaN, 0, 1, 0, 0, 0, 0, 1, 0};
  expect_refused(nifti(s), Code::kCorrupt, "affine (from the sform) holds nan");
  s.sform = 0;
  s.pixdim = {1, kInf, 1, 1};
  expect_refused(nifti(s), Code::kCorrupt, "pixdim[1] is inf");
  s.qform = 1;
  s.pixdim = {1, 1, 1, 1};
  s.quat = {kNaN, 0, 0};
  expect_refused(nifti(s), Code::kCorrupt, "affine (from the qform) holds nan");
}

// ---- gzip ----

Bytes gzip(const Bytes& in, int level = 6) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  Bytes out(deflateBound(&z, in.size()) + 64);
  z.next_in = const_cast<Bytef*>(in.data());
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// Bytes that compress a little (a volume-like ramp with noise).
Bytes payload(std::size_t n) {
  Bytes b(n);
  std::uint32_t x = 12345;
  for (std::size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    b[i] = static_cast<std::uint8_t>((i / 7) + (x >> 29));
  }
  return b;
}

TEST(GzipStreamTest, ReadsBackInPieces) {
  const Bytes raw = payload(300000);
  const Bytes gz = gzip(raw);
  ASSERT_TRUE(is_gzip(gz.data(), gz.size()));
  EXPECT_EQ(gzip_isize(gz.data(), gz.size()), raw.size());
  GzipStream g;
  ASSERT_TRUE(g.open(gz.data(), gz.size()).ok());
  Bytes out(raw.size(), 0);
  ASSERT_TRUE(g.read(out.data(), 352).ok());
  ASSERT_TRUE(g.skip(100000).ok());
  EXPECT_EQ(g.out_bytes(), 100352u);
  ASSERT_TRUE(g.read(out.data() + 100352, 1).ok());
  ASSERT_TRUE(g.read(out.data() + 100353, 0).ok());
  Status s = g.read(out.data() + 100353, raw.size() - 100353);
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_TRUE(std::equal(raw.begin(), raw.begin() + 352, out.begin()));
  EXPECT_TRUE(std::equal(raw.begin() + 100352, raw.end(), out.begin() + 100352));
  s = g.finish();
  EXPECT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(g.out_bytes(), raw.size());
  // Reusable: open again.
  ASSERT_TRUE(g.open(gz.data(), gz.size()).ok());
  ASSERT_TRUE(g.skip(raw.size()).ok());
  EXPECT_TRUE(g.finish().ok());
}

TEST(GzipStreamTest, NiftiThroughGzip) {
  NiftiSpec s;
  s.dim = {3, 10, 10, 10};
  const Bytes raw = nifti(s);
  const Bytes gz = gzip(raw);
  GzipStream g;
  ASSERT_TRUE(g.open(gz.data(), gz.size()).ok());
  Bytes prefix(std::min<std::size_t>(kVolumeHeaderPrefix, gzip_isize(gz.data(), gz.size())));
  ASSERT_TRUE(g.read(prefix.data(), prefix.size()).ok());
  VolumeHeader h;
  ASSERT_TRUE(parse_volume_header(prefix.data(), prefix.size(), kUnknownSize, kMaxVoxels, &h).ok());
  EXPECT_EQ(h.data_bytes, 1000u);
  ASSERT_TRUE(g.finish().ok());
  EXPECT_EQ(g.out_bytes(), h.data_offset + h.data_bytes);
}

TEST(GzipStreamTest, TruncatedInput) {
  const Bytes raw = payload(100000);
  Bytes gz = gzip(raw);
  gz.resize(gz.size() / 2);
  GzipStream g;
  ASSERT_TRUE(g.open(gz.data(), gz.size()).ok());
  Bytes out(raw.size());
  Status s = g.read(out.data(), out.size());
  EXPECT_EQ(s.code(), Code::kCorrupt);
  EXPECT_NE(s.message().find("truncated gzip: the stream ends after"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("(" + std::to_string(gz.size()) + " of input)"), std::string::npos) << s.message();
  // All the output there, the trailer missing.
  gz = gzip(raw);
  gz.resize(gz.size() - 4);
  ASSERT_TRUE(g.open(gz.data(), gz.size()).ok());
  ASSERT_TRUE(g.read(out.data(), out.size()).ok());
  s = g.finish();
  EXPECT_EQ(s.code(), Code::kCorrupt);
  EXPECT_NE(s.message().find("truncated gzip"), std::string::npos) << s.message();
}

TEST(GzipStreamTest, BadTrailer) {
  const Bytes raw = payload(50000);
  Bytes gz = gzip(raw);
  gz[gz.size() - 8] ^= 1;  // CRC-32
  GzipStream g;
  Bytes out(raw.size());
  ASSERT_TRUE(g.open(gz.data(), gz.size()).ok());
  ASSERT_TRUE(g.read(out.data(), out.size()).ok());
  Status s = g.finish();
  EXPECT_EQ(s.code(), Code::kCorrupt);
  EXPECT_NE(s.message().find("gzip CRC mismatch"), std::string::npos) << s.message();
  gz = gzip(raw);
  gz[gz.size() - 4] ^= 1;  // ISIZE
  ASSERT_TRUE(g.open(gz.data(), gz.size()).ok());
  ASSERT_TRUE(g.read(out.data(), out.size()).ok());
  s = g.finish();
  EXPECT_EQ(s.code(), Code::kCorrupt);
  EXPECT_NE(s.message().find("ISIZE mismatch"), std::string::npos) << s.message();
}

TEST(GzipStreamTest, BadData) {
  const Bytes raw = payload(50000);
  Bytes gz = gzip(raw, 1);
  gz[10] = 0xff;  // the first deflate block: BFINAL 1, BTYPE 11 (reserved)
  GzipStream g;
  Bytes out(raw.size());
  ASSERT_TRUE(g.open(gz.data(), gz.size()).ok());
  Status s = g.read(out.data(), out.size());
  EXPECT_EQ(s.code(), Code::kCorrupt);
  EXPECT_NE(s.message().find("gzip data error: invalid block type after 0 bytes of output"), std::string::npos)
      << s.message();
}

TEST(GzipStreamTest, MoreOutputThanExpected) {
  const Bytes raw = payload(50000);
  const Bytes gz = gzip(raw);
  GzipStream g;
  Bytes out(raw.size());
  ASSERT_TRUE(g.open(gz.data(), gz.size()).ok());
  ASSERT_TRUE(g.read(out.data(), raw.size() - 10).ok());
  Status s = g.finish();
  EXPECT_EQ(s.code(), Code::kCorrupt);
  EXPECT_NE(s.message().find("gzip holds more data than the header says"), std::string::npos) << s.message();
  // And fewer: asking past the end.
  ASSERT_TRUE(g.open(gz.data(), gz.size()).ok());
  out.resize(raw.size() + 1);
  s = g.read(out.data(), out.size());
  EXPECT_EQ(s.code(), Code::kCorrupt);
  EXPECT_NE(s.message().find("truncated gzip: the stream ends after 50000 bytes of output"), std::string::npos)
      << s.message();
}

TEST(GzipStreamTest, NotGzip) {
  const Bytes raw = nifti(NiftiSpec{});
  EXPECT_FALSE(is_gzip(raw.data(), raw.size()));
  EXPECT_EQ(gzip_isize(raw.data(), 10), 0u);
  GzipStream g;
  Status s = g.open(raw.data(), raw.size());
  EXPECT_EQ(s.code(), Code::kCorrupt);
  EXPECT_NE(s.message().find("not gzip"), std::string::npos) << s.message();
  std::uint8_t b[4];
  EXPECT_FALSE(g.read(b, 4).ok());
  // The magic, then a bad method byte.
  const Bytes fake{0x1f, 0x8b, 0x07, 0, 0, 0, 0, 0, 0, 3, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  ASSERT_TRUE(g.open(fake.data(), fake.size()).ok());
  s = g.read(b, 4);
  EXPECT_EQ(s.code(), Code::kCorrupt);
  EXPECT_NE(s.message().find("gzip data error: unknown compression method"), std::string::npos) << s.message();
}

TEST(GzipStreamTest, ConcatenatedMembersAndPadding) {
  const Bytes a = payload(30000), b = payload(20000);
  Bytes gz = gzip(a);
  const Bytes gb = gzip(b);
  gz.insert(gz.end(), gb.begin(), gb.end());
  gz.resize(gz.size() + 100, 0);  // zero padding, as Python's gzip skips it
  GzipStream g;
  ASSERT_TRUE(g.open(gz.data(), gz.size()).ok());
  Bytes out(a.size() + b.size());
  ASSERT_TRUE(g.read(out.data(), out.size()).ok());
  EXPECT_TRUE(std::equal(a.begin(), a.end(), out.begin()));
  EXPECT_TRUE(std::equal(b.begin(), b.end(), out.begin() + static_cast<std::ptrdiff_t>(a.size())));
  EXPECT_TRUE(g.finish().ok());
  // Anything but another member after the stream is refused.
  gz.push_back('x');
  ASSERT_TRUE(g.open(gz.data(), gz.size()).ok());
  ASSERT_TRUE(g.read(out.data(), out.size()).ok());
  Status s = g.finish();
  EXPECT_EQ(s.code(), Code::kCorrupt);
  EXPECT_NE(s.message().find("trailing data"), std::string::npos) << s.message();
}

// ---- a whole .nii.gz: inflate_gzip_volume ----

// A NIfTI-1 of dim (3, 40, 30, 20) int16 whose voxels are not all alike.
Bytes varied_nifti() {
  NiftiSpec s;
  s.dim = {3, 40, 30, 20};
  s.datatype = 4;
  s.bitpix = 16;
  Bytes raw = nifti(s);
  const Bytes p = payload(raw.size() - 352);
  std::copy(p.begin(), p.end(), raw.begin() + 352);
  return raw;
}

// The raw file gzipped as members cut at `cuts` (offsets into raw, ascending), then `pad` zero bytes.
Bytes gzip_members(const Bytes& raw, const std::vector<std::size_t>& cuts, std::size_t pad = 0) {
  Bytes gz;
  std::size_t at = 0;
  for (std::size_t i = 0; i <= cuts.size(); ++i) {
    const std::size_t to = i < cuts.size() ? cuts[i] : raw.size();
    const Bytes m = gzip(Bytes(raw.begin() + static_cast<std::ptrdiff_t>(at), raw.begin() + static_cast<std::ptrdiff_t>(to)));
    gz.insert(gz.end(), m.begin(), m.end());
    at = to;
  }
  gz.resize(gz.size() + pad, 0);
  return gz;
}

// inflate_gzip_volume's voxels, as stored at h.data_offset of the output.
Status inflate_whole(const Bytes& gz, VolumeHeader* h, Bytes* voxels) {
  Bytes out;
  Status s = inflate_gzip_volume(gz.data(), gz.size(), kMaxVoxels, h, &out);
  if (s.ok()) {
    EXPECT_LE(h->data_offset + h->data_bytes, out.size());
    voxels->assign(out.begin() + static_cast<std::ptrdiff_t>(h->data_offset),
                   out.begin() + static_cast<std::ptrdiff_t>(h->data_offset + h->data_bytes));
  }
  return s;
}

TEST(InflateGzipVolumeTest, OneMemberSeveralMembersAndZeroPaddingReadAlike) {
  const Bytes raw = varied_nifti();
  const Bytes want(raw.begin() + 352, raw.end());
  // F2 (fuzz/nii_gz_fuzz): the trailer's ISIZE is the last member's size (or padding), not the file's.
  const std::vector<std::pair<const char*, Bytes>> cases = {
      {"one member", gzip_members(raw, {})},
      {"one member, zero-padded", gzip_members(raw, {}, 512)},
      {"two members (cut after the voxels start)", gzip_members(raw, {raw.size() / 2})},
      {"three members (cut inside the header)", gzip_members(raw, {100, 348})},
      {"an empty member last, then padding", gzip_members(raw, {raw.size() / 3, raw.size()}, 7)},
      {"members cut past the 4 KiB header prefix, padded", gzip_members(raw, {4096, 5000}, 1)},
  };
  for (const auto& [what, gz] : cases) {
    VolumeHeader h;
    Bytes got;
    Status s = inflate_whole(gz, &h, &got);
    ASSERT_TRUE(s.ok()) << what << ": " << s.to_string();
    EXPECT_EQ(h.shape, (std::array<std::int64_t, 3>{40, 30, 20})) << what;
    EXPECT_EQ(h.type, VoxelType::kI16) << what;
    EXPECT_TRUE(got == want) << what;
  }
}

TEST(InflateGzipVolumeTest, DamagedStreamsNameTheReason) {
  const Bytes raw = varied_nifti();
  struct Case {
    const char* what;
    Bytes gz;
    const char* says;
  };
  std::vector<Case> cases;
  Bytes gz = gzip_members(raw, {raw.size() / 2});
  cases.push_back({"the first member's CRC", gz, "gzip CRC mismatch"});
  const Bytes first = gzip(Bytes(raw.begin(), raw.begin() + static_cast<std::ptrdiff_t>(raw.size() / 2)));
  cases.back().gz[first.size() - 8] ^= 1;
  cases.push_back({"the second member cut short", Bytes(gz.begin(), gz.end() - 6), "truncated gzip"});
  cases.push_back({"no second member", first, "truncated gzip"});
  Bytes junk = gzip_members(raw, {}, 16);
  junk.push_back('x');
  cases.push_back({"garbage after the padding", junk, "bytes of trailing data after the stream"});
  // Garbage whose last 4 bytes are the ISIZE libdeflate's try is keyed on: its result is checked too.
  junk = gzip_members(raw, {});
  const Bytes trailer(junk.end() - 4, junk.end());
  junk.insert(junk.end(), {'a', 'b', 'c'});
  junk.insert(junk.end(), trailer.begin(), trailer.end());
  cases.push_back({"garbage ending in the right ISIZE", junk, "bytes of trailing data after the stream"});
  Bytes more = raw;
  more.resize(raw.size() + 10, 1);
  cases.push_back({"more output than the header says", gzip_members(more, {raw.size()}),
                   "gzip holds more data than the header says"});
  cases.push_back({"less output than the header says", gzip_members(Bytes(raw.begin(), raw.end() - 1), {}),
                   "truncated gzip"});
  cases.push_back({"a header cut short", gzip_members(Bytes(raw.begin(), raw.begin() + 200), {}),
                   "truncated NIfTI-1 header: 200 of 348 bytes"});
  for (const Case& c : cases) {
    VolumeHeader h;
    Bytes got;
    Status s = inflate_whole(c.gz, &h, &got);
    EXPECT_EQ(s.code(), Code::kCorrupt) << c.what << ": " << s.to_string();
    EXPECT_NE(s.message().find(c.says), std::string::npos) << c.what << ": " << s.message();
  }
}

// F3 (fuzz/nii_gz_fuzz): a tiny .nii.gz whose header (and trailer) claim a huge volume is refused
// before anything of that size is allocated: n bytes of gzip inflate to at most 1032 * n.
TEST(InflateGzipVolumeTest, ForgedSizesAreRefusedBeforeAllocation) {
  EXPECT_EQ(gzip_max_output(0), 4096u);
  EXPECT_EQ(gzip_max_output(81), 81u * 1032 + 4096);
  EXPECT_EQ(gzip_max_output(UINT64_MAX / 100), UINT64_MAX);
  // 8 GiB (ISIZE cannot say it) and 128 MiB (ISIZE forged to say it); the stream holds the header
  // and 8 KiB of zeros: more than the header prefix, so that the whole output is not known then.
  for (const std::int64_t side : {1024, 256}) {
    NiftiSpec spec;
    spec.dim = {3, side, side, side};
    spec.datatype = 64;
    spec.bitpix = 64;
    spec.data = false;
    Bytes raw = nifti(spec);
    raw.resize(raw.size() + 8192, 0);
    Bytes gz = gzip(raw, 9);
    const std::uint64_t total = 352 + static_cast<std::uint64_t>(side * side * side) * 8;
    for (int i = 0; i < 4; ++i) gz[gz.size() - 4 + static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(total >> (8 * i));
    ASSERT_LT(gz.size(), 128u);
    VolumeHeader h;
    Bytes out;
    Status s = inflate_gzip_volume(gz.data(), gz.size(), kMaxVoxels, &h, &out);
    EXPECT_EQ(s.code(), Code::kCorrupt) << s.to_string();
    const std::string says = "the header says " + std::to_string(total) + " bytes uncompressed; " +
                             std::to_string(gz.size()) + " bytes of gzip inflate to at most " +
                             std::to_string(gz.size() * 1032 + 4096);
    EXPECT_NE(s.message().find(says), std::string::npos) << s.message();
    EXPECT_EQ(out.capacity(), 0u) << "nothing allocated for the claimed size";
    // The header alone (81 bytes of gzip, as the fuzzer's): the whole output is in hand, and short.
    raw.resize(352);
    gz = gzip(raw, 9);
    s = inflate_gzip_volume(gz.data(), gz.size(), kMaxVoxels, &h, &out);
    EXPECT_EQ(s.code(), Code::kCorrupt) << s.to_string();
    EXPECT_NE(s.message().find("bytes of voxels from offset 352"), std::string::npos) << s.message();
    EXPECT_EQ(out.capacity(), 0u) << "nothing allocated for the claimed size";
  }
  // At the bound, a real file still reads (a volume of zeros compresses about 1000:1).
  NiftiSpec zeros;
  zeros.dim = {3, 128, 128, 64};
  zeros.data = false;
  Bytes raw = nifti(zeros);
  raw.resize(352 + 128 * 128 * 64, 0);
  const Bytes gz = gzip(raw, 9);
  EXPECT_GT(raw.size(), gz.size() * 500) << "the test wants a file near deflate's limit";
  VolumeHeader h;
  Bytes got;
  Status s = inflate_whole(gz, &h, &got);
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_TRUE(got == Bytes(raw.begin() + 352, raw.end()));
}

}  // namespace
}  // namespace stoker::detail
