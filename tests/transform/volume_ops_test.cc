#include "transform/volume/ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace stoker::detail {
namespace {

// ---- fixtures ----

using I64 = std::int64_t;

I64 prod(const Shape3& s) { return s[0] * s[1] * s[2]; }
std::array<I64, 4> c_strides(const Shape3& s) { return {s[0] * s[1] * s[2], s[1] * s[2], s[2], 1}; }  // .npy
std::array<I64, 4> f_strides(const Shape3& s) { return {s[0] * s[1] * s[2], 1, s[0], s[0] * s[1]}; }  // NIfTI

std::string str(const Shape3& s) {
  return "(" + std::to_string(s[0]) + ", " + std::to_string(s[1]) + ", " + std::to_string(s[2]) + ")";
}

// Calls f(i0, i1, i2) over a C-order box.
template <typename F>
void for_each_voxel(const Shape3& s, F f) {
  for (I64 i0 = 0; i0 < s[0]; ++i0) {
    for (I64 i1 = 0; i1 < s[1]; ++i1) {
      for (I64 i2 = 0; i2 < s[2]; ++i2) f(i0, i1, i2);
    }
  }
}

// Where voxel (c, s0, s1, s2) lies.
enum class Order {
  kC,           // .npy: (S0*S1*S2, S1*S2, S2, 1)
  kNifti,       // NIfTI: s0 fastest, channels slowest (S0*S1*S2, 1, S0, S0*S1)
  kNpyFortran,  // .npy fortran_order of (C, S0, S1, S2): channels fastest (1, C, C*S0, C*S0*S1)
};

// How a volume's voxels are stored.
struct Layout {
  Order order = Order::kC;
  bool big_endian = false;   // bytes swapped (swap = true in the header)
  std::uint64_t offset = 0;  // data_offset
};

const char* order_name(Order o) { return o == Order::kC ? "C" : o == Order::kNifti ? "NIfTI" : "npy-Fortran"; }

// A volume in memory: `values` (channels x shape, C order) stored as `type`.
struct MemVolume {
  std::vector<std::uint8_t> bytes;
  VolumeHeader h;
  VolumeView view() const { return VolumeView{bytes.data(), h}; }
};

template <typename S>
void store(MemVolume* m, const std::vector<double>& values, const Layout& lay) {
  const VolumeHeader& h = m->h;
  const I64 n = prod(h.shape);
  for (int c = 0; c < h.channels; ++c) {
    for_each_voxel(h.shape, [&](I64 i0, I64 i1, I64 i2) {
      const double x = values[static_cast<std::size_t>(c * n + (i0 * h.shape[1] + i1) * h.shape[2] + i2)];
      const S v = static_cast<S>(x);
      std::uint8_t b[sizeof(S)];
      std::memcpy(b, &v, sizeof v);
      if (lay.big_endian) std::reverse(b, b + sizeof(S));
      const I64 at = c * h.strides[0] + i0 * h.strides[1] + i1 * h.strides[2] + i2 * h.strides[3];
      std::memcpy(m->bytes.data() + lay.offset + static_cast<std::size_t>(at) * sizeof(S), b, sizeof(S));
    });
  }
}

MemVolume make_volume(VoxelType type, int channels, const Shape3& shape, const std::vector<double>& values,
                      const Layout& lay) {
  MemVolume m;
  const std::size_t item = voxel_bytes(type);
  m.h.format = lay.order == Order::kNifti ? VolumeFormat::kNifti1 : VolumeFormat::kNpy;
  m.h.type = type;
  m.h.swap = lay.big_endian && item > 1;
  m.h.channels = channels;
  m.h.shape = shape;
  const I64 c = channels;
  m.h.strides = lay.order == Order::kC       ? c_strides(shape)
                : lay.order == Order::kNifti ? f_strides(shape)
                                             : std::array<I64, 4>{1, c, c * shape[0], c * shape[0] * shape[1]};
  m.h.data_offset = lay.offset;
  m.h.data_bytes = static_cast<std::uint64_t>(channels * prod(shape)) * item;
  m.bytes.assign(lay.offset + m.h.data_bytes, 0xEE);  // 0xEE: header bytes, never voxels
  switch (type) {
    case VoxelType::kU8:
      store<std::uint8_t>(&m, values, lay);
      break;
    case VoxelType::kI8:
      store<std::int8_t>(&m, values, lay);
      break;
    case VoxelType::kU16:
      store<std::uint16_t>(&m, values, lay);
      break;
    case VoxelType::kI16:
      store<std::int16_t>(&m, values, lay);
      break;
    case VoxelType::kU32:
      store<std::uint32_t>(&m, values, lay);
      break;
    case VoxelType::kI32:
      store<std::int32_t>(&m, values, lay);
      break;
    case VoxelType::kF32:
      store<float>(&m, values, lay);
      break;
    case VoxelType::kF64:
      store<double>(&m, values, lay);
      break;
  }
  return m;
}

VolumeProgram program(const std::vector<VolumeTransform>& ops, const std::vector<std::string>& labels = {}) {
  return compile_volume_program(ops, labels);
}

// The brute-force foreground of a label (channels x n, C order), as MONAI's map_binary_to_indices: non-zero
// in any channel, channel 0 left out of a multi-channel label.
std::vector<bool> foreground_of(const std::vector<double>& values, int channels, I64 n) {
  std::vector<bool> fg(static_cast<std::size_t>(n), false);
  for (int c = channels > 1 ? 1 : 0; c < channels; ++c) {
    for (I64 i = 0; i < n; ++i) {
      if (values[static_cast<std::size_t>(c * n + i)] != 0) fg[static_cast<std::size_t>(i)] = true;
    }
  }
  return fg;
}

// Checks index against the brute-force foreground: counts, test() and every select() of both classes.
void expect_index(const LabelIndex& index, const std::vector<bool>& fg, const std::string& what) {
  std::vector<std::uint64_t> pos, neg;
  for (std::size_t i = 0; i < fg.size(); ++i) (fg[i] ? pos : neg).push_back(i);
  ASSERT_EQ(index.voxels(), fg.size()) << what;
  ASSERT_EQ(index.count(true), pos.size()) << what;
  ASSERT_EQ(index.count(false), neg.size()) << what;
  int bad = 0;
  for (std::size_t i = 0; i < fg.size(); ++i) {
    if (index.test(i) != fg[i] && ++bad <= 5) ADD_FAILURE() << what << ": test(" << i << ")";
  }
  for (std::uint64_t k = 0; k < pos.size(); ++k) {
    const std::uint64_t got = index.select(true, k);
    if (got != pos[k] && ++bad <= 5)
      ADD_FAILURE() << what << ": select(fg, " << k << ") = " << got << ", want " << pos[k];
  }
  for (std::uint64_t k = 0; k < neg.size(); ++k) {
    const std::uint64_t got = index.select(false, k);
    if (got != neg[k] && ++bad <= 5)
      ADD_FAILURE() << what << ": select(bg, " << k << ") = " << got << ", want " << neg[k];
  }
  EXPECT_EQ(bad, 0) << what;
}

// ---- LabelIndex ----

TEST(LabelIndexTest, SelectMatchesBruteForceOnRandomBitmaps) {
  std::mt19937_64 gen(20240611);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const std::vector<Shape3> shapes = {{1, 1, 1}, {1, 1, 63}, {1, 1, 65}, {3, 5, 67},   {7, 9, 11},
                                      {8, 8, 8}, {4, 8, 32}, {5, 7, 31}, {13, 17, 19}, {1, 1, 513}};
  const std::vector<VoxelType> types = {VoxelType::kU8, VoxelType::kI16, VoxelType::kF32, VoxelType::kI32};
  int run = 0;
  for (const Shape3& shape : shapes) {
    for (double density : {0.01, 0.5, 0.99}) {
      const VoxelType type = types[static_cast<std::size_t>(run % 4)];
      const bool is_signed = type != VoxelType::kU8;
      const I64 n = prod(shape);
      std::vector<double> values(static_cast<std::size_t>(n));
      for (double& v : values) {
        if (u(gen) < density) {
          // any non-zero value is foreground (MONAI), negative ones too
          v = type == VoxelType::kF32 ? 0.25 : (u(gen) < 0.5 ? 1 : (is_signed ? -3 : 7));
        } else {
          v = 0;
        }
      }
      const Layout lay{static_cast<Order>(run % 3), run % 4 == 2, static_cast<std::uint64_t>(run % 5) * 4};
      const MemVolume m = make_volume(type, 1, shape, values, lay);
      const LabelIndex index = label_index(m.view());
      expect_index(index, foreground_of(values, 1, n),
                   "shape " + str(shape) + " density " + std::to_string(density) + " type " + voxel_name(type));
      ++run;
    }
  }
}

TEST(LabelIndexTest, EmptyAndFullForeground) {
  for (const Shape3& shape : {Shape3{5, 6, 7}, Shape3{8, 8, 8}, Shape3{1, 1, 1}}) {
    const I64 n = prod(shape);
    for (double v : {0.0, 3.0}) {
      const std::vector<double> values(static_cast<std::size_t>(n), v);
      const MemVolume m = make_volume(VoxelType::kU8, 1, shape, values, {});
      const LabelIndex index = label_index(m.view());
      const bool full = v > 0;
      EXPECT_EQ(index.count(full), static_cast<std::uint64_t>(n));
      EXPECT_EQ(index.count(!full), 0u);
      EXPECT_GT(index.bytes(), 0u);
      for (std::uint64_t k = 0; k < static_cast<std::uint64_t>(n); ++k) ASSERT_EQ(index.select(full, k), k);
    }
  }
}

TEST(LabelIndexTest, MultiChannelAndStorageOrderGiveTheSameIndex) {
  std::mt19937_64 gen(77);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const Shape3 shape{6, 5, 19};  // 570 voxels: not a multiple of 64
  const int channels = 3;
  const I64 n = prod(shape);
  std::vector<double> values(static_cast<std::size_t>(channels * n));
  for (double& v : values) v = u(gen) < 0.15 ? 2 : (u(gen) < 0.5 ? -1 : 0);  // sparse in each channel
  const std::vector<bool> fg = foreground_of(values, channels, n);
  struct Case {
    VoxelType type;
    Layout lay;
    const char* what;
  };
  const Case cases[] = {
      {VoxelType::kI16, Layout{Order::kC, false, 0}, "int16 C order"},
      {VoxelType::kI16, Layout{Order::kNifti, false, 352}, "int16 Fortran order (NIfTI)"},
      {VoxelType::kI16, Layout{Order::kNifti, true, 5}, "int16 big-endian Fortran order, odd offset"},
      {VoxelType::kF64, Layout{Order::kNifti, false, 8}, "float64 Fortran order"},
      {VoxelType::kI32, Layout{Order::kC, true, 0}, "int32 big-endian C order"},
      {VoxelType::kI16, Layout{Order::kNpyFortran, true, 0}, "int16 big-endian .npy Fortran order (channels fastest)"},
      {VoxelType::kI8, Layout{Order::kNpyFortran, false, 3}, "int8 .npy Fortran order"},
  };
  std::vector<std::vector<bool>> bitmaps;
  for (const Case& c : cases) {
    const MemVolume m = make_volume(c.type, channels, shape, values, c.lay);
    const LabelIndex index = label_index(m.view());
    expect_index(index, fg, c.what);
    std::vector<bool> bits;
    for (I64 i = 0; i < n; ++i) bits.push_back(index.test(static_cast<std::uint64_t>(i)));
    bitmaps.push_back(bits);
  }
  for (std::size_t i = 1; i < bitmaps.size(); ++i) EXPECT_EQ(bitmaps[i], bitmaps[0]) << cases[i].what;
  // One channel alone is not the union.
  std::size_t only_later = 0;
  for (I64 i = 0; i < n; ++i)
    only_later += fg[static_cast<std::size_t>(i)] && !(values[static_cast<std::size_t>(i)] > 0);
  EXPECT_GT(only_later, 0u);
}

// ---- gather ----

// Per-axis windows: inside, each face, both faces, and outside.
std::vector<std::pair<I64, I64>> axis_windows(I64 s) {
  return {{0, s}, {1, std::max<I64>(s - 2, 1)}, {-2, 3}, {s - 1, 3}, {-2, s + 4}, {s, 2}, {-3, 2}, {-1, 1}};
}

I64 overlap(I64 start, I64 size, I64 s) {
  return std::max<I64>(0, std::min(start + size, s) - std::max<I64>(start, 0));
}

// Checks a gathered block against src (channels x shape, C order) mapped by `map`, or `pad` outside the
// volume. Returns the mismatches.
template <typename T, typename F>
int check_window(const std::vector<double>& src, int channels, const Shape3& shape, const Shape3& start,
                 const Shape3& size, const T* out, double pad, double tol, F map, const std::string& what) {
  int bad = 0;
  const I64 n = prod(shape), m = prod(size);
  for (int c = 0; c < channels; ++c) {
    for_each_voxel(size, [&](I64 i0, I64 i1, I64 i2) {
      const I64 v0 = start[0] + i0, v1 = start[1] + i1, v2 = start[2] + i2;
      const bool in = v0 >= 0 && v0 < shape[0] && v1 >= 0 && v1 < shape[1] && v2 >= 0 && v2 < shape[2];
      const double want = in ? map(src[static_cast<std::size_t>(c * n + (v0 * shape[1] + v1) * shape[2] + v2)]) : pad;
      const double got = static_cast<double>(out[static_cast<std::size_t>(c * m + (i0 * size[1] + i1) * size[2] + i2)]);
      if (std::abs(got - want) > tol * std::max(1.0, std::abs(want)) && ++bad <= 3) {
        ADD_FAILURE() << what << " window start " << str(start) << " size " << str(size) << " voxel (" << c << ", "
                      << i0 << ", " << i1 << ", " << i2 << "): got " << got << ", want " << want;
      }
    });
  }
  return bad;
}

struct GatherCase {
  VoxelType type;
  Layout lay;
  double bias;  // voxel = linear C-order index + bias
};

class GatherTest : public ::testing::TestWithParam<GatherCase> {};

TEST_P(GatherTest, EveryVoxelIsTheSourceOrThePad) {
  const GatherCase& gc = GetParam();
  const VolumeProgram prog = program({CenterSpatialCrop{}});
  const int channels = 2;
  for (const Shape3& shape : {Shape3{4, 5, 6}, Shape3{1, 6, 5}, Shape3{5, 1, 1}}) {
    const I64 n = prod(shape);
    std::vector<double> values(static_cast<std::size_t>(channels * n));
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>(i) + gc.bias;
    const MemVolume m = make_volume(gc.type, channels, shape, values, gc.lay);
    const std::string what = std::string(voxel_name(gc.type)) + " " + order_name(gc.lay.order) +
                             (gc.lay.big_endian ? " big-endian" : "") + " offset " + std::to_string(gc.lay.offset) +
                             " shape " + str(shape);
    int bad = 0;
    for (const auto& w0 : axis_windows(shape[0])) {
      for (const auto& w1 : axis_windows(shape[1])) {
        for (const auto& w2 : axis_windows(shape[2])) {
          PatchPlan plan;
          plan.start = {w0.first, w1.first, w2.first};
          plan.size = {w0.second, w1.second, w2.second};
          std::vector<float> out(static_cast<std::size_t>(channels * prod(plan.size)), 12345.0f);
          Block<float> b{channels, plan.size, out.data()};
          const std::uint64_t read = gather(m.view(), plan, prog, {}, -0.5f, &b);
          bad += check_window(
              values, channels, shape, plan.start, plan.size, out.data(), -0.5, 0.0, [](double x) { return x; }, what);
          const I64 inside = overlap(w0.first, w0.second, shape[0]) * overlap(w1.first, w1.second, shape[1]) *
                             overlap(w2.first, w2.second, shape[2]);
          EXPECT_EQ(read, static_cast<std::uint64_t>(inside * channels) * voxel_bytes(gc.type))
              << what << " window " << str(plan.start) << " size " << str(plan.size);
          // The same window as labels (int32 and uint8 blocks).
          std::vector<std::int32_t> lab(out.size(), 777);
          Block<std::int32_t> lb{channels, plan.size, lab.data()};
          EXPECT_EQ(gather_label<std::int32_t>(m.view(), plan, -9, &lb), read);
          bad += check_window(
              values, channels, shape, plan.start, plan.size, lab.data(), -9.0, 0.0,
              [](double x) { return std::trunc(x); }, what + " (int32 label)");
          if (gc.bias == 0 && channels * n <= 255) {
            std::vector<std::uint8_t> lab8(out.size(), 77);
            Block<std::uint8_t> lb8{channels, plan.size, lab8.data()};
            EXPECT_EQ(gather_label<std::uint8_t>(m.view(), plan, 255, &lb8), read);
            bad += check_window(
                values, channels, shape, plan.start, plan.size, lab8.data(), 255.0, 0.0, [](double x) { return x; },
                what + " (uint8 label)");
          }
          if (bad > 10) return;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, GatherTest,
    ::testing::Values(GatherCase{VoxelType::kI16, Layout{Order::kC, false, 0}, 0},
                      GatherCase{VoxelType::kI16, Layout{Order::kNifti, false, 352}, -100},
                      GatherCase{VoxelType::kI16, Layout{Order::kC, true, 2}, -100},
                      GatherCase{VoxelType::kI16, Layout{Order::kNifti, true, 3}, 0},  // misaligned
                      GatherCase{VoxelType::kI16, Layout{Order::kNpyFortran, false, 0}, 0},
                      GatherCase{VoxelType::kF64, Layout{Order::kC, false, 8}, 0},
                      GatherCase{VoxelType::kF64, Layout{Order::kNifti, true, 8}, -0.25},
                      GatherCase{VoxelType::kF64, Layout{Order::kC, false, 4}, 0},      // misaligned
                      GatherCase{VoxelType::kF64, Layout{Order::kNifti, false, 4}, 0},  // misaligned
                      GatherCase{VoxelType::kF64, Layout{Order::kNpyFortran, true, 8}, 0},
                      GatherCase{VoxelType::kF32, Layout{Order::kNifti, true, 0}, 0.5},
                      GatherCase{VoxelType::kU8, Layout{Order::kNifti, false, 1}, 0},
                      GatherCase{VoxelType::kI8, Layout{Order::kC, false, 0}, -120},
                      GatherCase{VoxelType::kU16, Layout{Order::kNifti, true, 0}, 0},
                      GatherCase{VoxelType::kI32, Layout{Order::kC, false, 0}, -50},
                      GatherCase{VoxelType::kU32, Layout{Order::kNifti, true, 4}, 0}));

TEST(GatherScalingTest, NiftiScalingThenPreCropIntensity) {
  const Shape3 shape{4, 5, 6};
  const int channels = 2;
  const I64 n = prod(shape);
  std::vector<double> values(static_cast<std::size_t>(channels * n));
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>(i) - 20;
  const ScaleIntensityRange sir{-3.0, 100.0, 0.0, 1.0, true};
  const VolumeProgram prog = program({sir, CenterSpatialCrop{{4, 5, 6}}});
  ASSERT_EQ(prog.gathered, (std::vector<int>{0}));
  PatchPlan plan;
  plan.start = {-1, 2, -2};
  plan.size = {6, 4, 9};
  for (const GatherCase& gc : {GatherCase{VoxelType::kI16, Layout{Order::kNifti, false, 352}, 0},
                               GatherCase{VoxelType::kF64, Layout{Order::kNifti, true, 8}, 0},
                               GatherCase{VoxelType::kI16, Layout{Order::kC, false, 0}, 0}}) {
    MemVolume m = make_volume(gc.type, channels, shape, values, gc.lay);
    m.h.scaled = true;
    m.h.slope = 0.5;
    m.h.inter = -3.0;
    const std::string what = std::string(voxel_name(gc.type)) + " " + order_name(gc.lay.order);
    std::vector<float> out(static_cast<std::size_t>(channels * prod(plan.size)));
    Block<float> b{channels, plan.size, out.data()};
    // Scaling alone: raw * slope + inter; the pad is left as given.
    gather(m.view(), plan, prog, {}, 7.0f, &b);
    EXPECT_EQ(check_window(
                  values, channels, shape, plan.start, plan.size, out.data(), 7.0, 1e-6,
                  [](double x) { return x * 0.5 - 3.0; }, what + " scaled"),
              0);
    // Then ScaleIntensityRange with clip on the scaled value.
    gather(m.view(), plan, prog, prog.gathered, -1.0f, &b);
    EXPECT_EQ(check_window(
                  values, channels, shape, plan.start, plan.size, out.data(), -1.0, 1e-6,
                  [](double x) {
                    const double s = x * 0.5 - 3.0;
                    return std::clamp((s - -3.0) / (100.0 - -3.0), 0.0, 1.0);
                  },
                  what + " scaled + ScaleIntensityRange"),
              0);
    // Labels are copied as stored, never scaled.
    std::vector<std::int32_t> lab(out.size());
    Block<std::int32_t> lb{channels, plan.size, lab.data()};
    gather_label<std::int32_t>(m.view(), plan, 0, &lb);
    EXPECT_EQ(check_window(
                  values, channels, shape, plan.start, plan.size, lab.data(), 0.0, 0.0, [](double x) { return x; },
                  what + " label"),
              0);
  }
}

// ---- plan_patch ----

Status plan(const VolumeProgram& prog, const Shape3& shape, const Shape3& patch, std::uint64_t key, PatchPlan* out,
            const LabelIndex* index = nullptr) {
  Rng rng(key);
  return plan_patch(prog, shape, patch, index, &rng, out);
}

TEST(PlanPatchTest, RandSpatialCropCornersCoverTheValidRange) {
  const Shape3 shape{5, 3, 7};
  const VolumeProgram prog = program({RandSpatialCrop{{2, 3, 4}}});
  const Shape3 roi{2, 3, 4};
  std::array<std::vector<int>, 3> seen;
  for (int a = 0; a < 3; ++a)
    seen[static_cast<std::size_t>(a)].assign(
        static_cast<std::size_t>(shape[static_cast<std::size_t>(a)] - roi[static_cast<std::size_t>(a)] + 1), 0);
  const int draws = 2000;
  for (int d = 0; d < draws; ++d) {
    PatchPlan p;
    ASSERT_TRUE(plan(prog, shape, roi, mix_key(1, 2, static_cast<std::uint64_t>(d), 3), &p).ok());
    EXPECT_EQ(p.size, roi);
    EXPECT_EQ(p.pre_before, (Shape3{0, 0, 0}));
    EXPECT_EQ(p.out_start, p.start);
    for (std::size_t a = 0; a < 3; ++a) {
      ASSERT_GE(p.start[a], 0);
      ASSERT_LE(p.start[a], shape[a] - roi[a]);
      ++seen[a][static_cast<std::size_t>(p.start[a])];
    }
  }
  for (std::size_t a = 0; a < 3; ++a) {
    for (int c : seen[a]) {
      EXPECT_GT(c, draws / static_cast<int>(seen[a].size()) * 3 / 4) << "axis " << a;  // roughly uniform
    }
  }
  // A non-positive roi entry is the whole axis.
  PatchPlan p;
  ASSERT_TRUE(plan(program({RandSpatialCrop{{-1, 2, -1}}}), shape, {5, 2, 7}, 9, &p).ok());
  EXPECT_EQ(p.start[0], 0);
  EXPECT_EQ(p.start[2], 0);
  EXPECT_EQ(p.size, (Shape3{5, 2, 7}));
}

TEST(PlanPatchTest, RoiLargerThanTheVolumeNeedsAPad) {
  const Shape3 shape{5, 8, 3};
  const Shape3 roi{8, 8, 8};
  PatchPlan p;
  // No pad: the crop gives (5, 8, 3), not the loader's patch.
  Status s = plan(program({RandSpatialCrop{{8, 8, 8}}}), shape, roi, 1, &p);
  EXPECT_EQ(s.code(), Code::kUnsupported);
  EXPECT_NE(s.message().find("SpatialPad"), std::string::npos) << s.message();
  s = plan(program({CenterSpatialCrop{{8, 8, 8}}}), shape, roi, 1, &p);
  EXPECT_EQ(s.code(), Code::kUnsupported);
  s = plan(program({RandCropByPosNegLabel{{8, 8, 8}, "label", 1.0, 1.0, 1}}, {"label"}), shape, roi, 1, &p);
  EXPECT_EQ(s.code(), Code::kUnsupported);
  // SpatialPad before: the window starts before the volume (symmetric: width // 2 before).
  for (std::uint64_t key = 0; key < 20; ++key) {
    ASSERT_TRUE(
        plan(program({SpatialPad{{8, 8, 8}, PadMethod::kSymmetric}, RandSpatialCrop{{8, 8, 8}}}), shape, roi, key, &p)
            .ok());
    EXPECT_EQ(p.pre_before, (Shape3{1, 0, 2}));
    EXPECT_EQ(p.start, (Shape3{-1, 0, -2}));
    EXPECT_EQ(p.size, roi);
    EXPECT_EQ(p.out_start, (Shape3{-1, 0, -2}));
  }
  ASSERT_TRUE(
      plan(program({SpatialPad{{8, 8, 8}, PadMethod::kEnd}, CenterSpatialCrop{{8, 8, 8}}}), shape, roi, 0, &p).ok());
  EXPECT_EQ(p.pre_before, (Shape3{0, 0, 0}));
  EXPECT_EQ(p.start, (Shape3{0, 0, 0}));  // the window runs past the end
  // A bigger pad then a random crop: start in [-before, -before + padded - roi].
  std::set<I64> starts0;
  for (std::uint64_t key = 0; key < 200; ++key) {
    ASSERT_TRUE(
        plan(program({SpatialPad{{10, 8, 9}, PadMethod::kSymmetric}, RandSpatialCrop{{8, 8, 8}}}), shape, roi, key, &p)
            .ok());
    EXPECT_EQ(p.pre_before, (Shape3{2, 0, 3}));  // widths 5, 0, 6
    starts0.insert(p.start[0]);
    EXPECT_GE(p.start[2], -3);
    EXPECT_LE(p.start[2], -2);
  }
  EXPECT_EQ(starts0, (std::set<I64>{-2, -1, 0}));
  // SpatialPad after the crop: the crop is clipped, the pad step says where the patch lies.
  ASSERT_TRUE(
      plan(program({RandSpatialCrop{{8, 8, 8}}, SpatialPad{{8, 8, 8}, PadMethod::kSymmetric}}), shape, roi, 0, &p)
          .ok());
  EXPECT_EQ(p.start, (Shape3{0, 0, 0}));
  EXPECT_EQ(p.size, (Shape3{5, 8, 3}));
  ASSERT_EQ(p.steps.size(), 1u);
  EXPECT_EQ(p.steps[0].before, (Shape3{1, 0, 2}));
  EXPECT_EQ(p.steps[0].after, (Shape3{2, 0, 3}));
  EXPECT_EQ(p.out_start, (Shape3{-1, 0, -2}));
}

TEST(PlanPatchTest, PrePadWindowGathersPadAroundTheVolume) {
  const Shape3 shape{5, 8, 3};
  const I64 n = prod(shape);
  std::vector<double> values(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>(i) + 1;
  const MemVolume m = make_volume(VoxelType::kI16, 1, shape, values, Layout{Order::kNifti, false, 352});
  const VolumeProgram prog = program({SpatialPad{{8, 8, 8}, PadMethod::kSymmetric}, CenterSpatialCrop{{8, 8, 8}}});
  PatchPlan p;
  ASSERT_TRUE(plan(prog, shape, {8, 8, 8}, 0, &p).ok());
  std::vector<float> out(512);
  Block<float> b{1, p.size, out.data()};
  EXPECT_EQ(gather(m.view(), p, prog, {}, 0.0f, &b), static_cast<std::uint64_t>(n) * 2);
  // Output (i, j, k) is volume (i - 1, j, k - 2).
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[(1 * 8 + 0) * 8 + 2], 1.0f);
  EXPECT_EQ(out[(5 * 8 + 7) * 8 + 4], static_cast<float>(n));
  EXPECT_EQ(out[(5 * 8 + 7) * 8 + 5], 0.0f);
  EXPECT_EQ(check_window(
                values, 1, shape, p.start, p.size, out.data(), 0.0, 0.0, [](double x) { return x; }, "pre-pad"),
            0);
}

TEST(PlanPatchTest, CenterSpatialCropStart) {
  for (std::size_t a = 0; a < 3; ++a) {
    for (I64 s = 1; s <= 9; ++s) {
      for (int r = -1; r <= 11; ++r) {
        if (r == 0) continue;
        Shape3 shape{3, 4, 5};
        std::array<int, 3> roi{3, 4, 5};
        shape[a] = s;
        roi[a] = r;
        const I64 want_size = r < 0 ? s : std::min<I64>(r, s);
        const I64 want_start = r < 0 ? 0 : std::max<I64>(s / 2 - r / 2, 0);
        Shape3 patch = shape;
        patch[a] = want_size;
        for (const VolumeTransform& t :
             {VolumeTransform{CenterSpatialCrop{roi}}, VolumeTransform{RandSpatialCrop{roi, false, false}}}) {
          PatchPlan p;
          ASSERT_TRUE(plan(program({t}), shape, patch, 5, &p).ok()) << "axis " << a << " s " << s << " r " << r;
          EXPECT_EQ(p.start[a], want_start) << "axis " << a << " s " << s << " r " << r;
          EXPECT_EQ(p.size[a], want_size) << "axis " << a << " s " << s << " r " << r;
          EXPECT_EQ(p.start[(a + 1) % 3], 0);
        }
      }
    }
  }
}

// A one-channel uint8 label of `shape` with foreground where fg(flat index).
template <typename F>
LabelIndex index_of(const Shape3& shape, F fg) {
  std::vector<double> values(static_cast<std::size_t>(prod(shape)));
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = fg(static_cast<I64>(i)) ? 1 : 0;
  const MemVolume m = make_volume(VoxelType::kU8, 1, shape, values, Layout{Order::kNifti, false, 0});
  return label_index(m.view());
}

I64 flat_of(const Shape3& s, I64 i0, I64 i1, I64 i2) { return (i0 * s[1] + i1) * s[2] + i2; }

TEST(PlanPatchTest, PosNegCentresOnForegroundAwayFromBorders) {
  const Shape3 shape{20, 18, 22};
  const Shape3 size{6, 5, 8};
  // Valid centres (no correction): [size // 2, shape - size + size // 2] = [3, 17], [2, 15], [4, 18].
  auto in_blob = [&](I64 f) {
    const I64 i0 = f / (shape[1] * shape[2]), i1 = f / shape[2] % shape[1], i2 = f % shape[2];
    return i0 >= 8 && i0 <= 11 && i1 >= 7 && i1 <= 9 && i2 >= 9 && i2 <= 13;
  };
  const LabelIndex index = index_of(shape, in_blob);
  ASSERT_EQ(index.count(true), 60u);
  const VolumeProgram prog = program({RandCropByPosNegLabel{{6, 5, 8}, "label", 1.0, 0.0, 1}}, {"label"});
  std::set<I64> centres;
  for (std::uint64_t key = 0; key < 1500; ++key) {
    PatchPlan p;
    ASSERT_TRUE(plan(prog, shape, size, key, &p, &index).ok());
    EXPECT_FALSE(p.one_class);
    EXPECT_EQ(p.size, size);
    const I64 f = flat_of(shape, p.start[0] + size[0] / 2, p.start[1] + size[1] / 2, p.start[2] + size[2] / 2);
    ASSERT_TRUE(in_blob(f)) << "start " << str(p.start);
    centres.insert(f);
  }
  EXPECT_EQ(centres.size(), 60u);  // every foreground voxel drawn
  // neg only: windows inside the volume; one whose start is not at a clip bound on any axis was not
  // corrected, so its centre is the drawn voxel: background.
  const VolumeProgram neg = program({RandCropByPosNegLabel{{6, 5, 8}, "label", 0.0, 1.0, 1}}, {"label"});
  int uncorrected = 0;
  for (std::uint64_t key = 0; key < 500; ++key) {
    PatchPlan p;
    ASSERT_TRUE(plan(neg, shape, size, key, &p, &index).ok());
    bool interior = true;
    for (std::size_t a = 0; a < 3; ++a) {
      ASSERT_GE(p.start[a], 0);
      ASSERT_LE(p.start[a], shape[a] - size[a]);
      interior = interior && p.start[a] > 0 && p.start[a] < shape[a] - size[a];
    }
    if (interior) {
      ++uncorrected;
      EXPECT_FALSE(
          in_blob(flat_of(shape, p.start[0] + size[0] / 2, p.start[1] + size[1] / 2, p.start[2] + size[2] / 2)));
    }
  }
  EXPECT_GT(uncorrected, 100);
}

TEST(PlanPatchTest, PosNegCorrectsCentresLikeMonai) {
  // Each voxel as the only foreground (pos) or the only background (neg): the window starts at
  // clip(c - size // 2, 0, shape - size), MONAI's correct_crop_centers for a roi within the volume.
  const Shape3 shape{7, 6, 5};
  for (const Shape3& size : {Shape3{3, 4, 2}, Shape3{7, 1, 5}, Shape3{1, 6, 3}, Shape3{4, 5, 4}}) {
    const std::array<int, 3> ss{static_cast<int>(size[0]), static_cast<int>(size[1]), static_cast<int>(size[2])};
    const VolumeProgram pos = program({RandCropByPosNegLabel{ss, "label", 1.0, 0.0, 1}}, {"label"});
    const VolumeProgram neg = program({RandCropByPosNegLabel{ss, "label", 0.0, 2.0, 1}}, {"label"});
    for_each_voxel(shape, [&](I64 c0, I64 c1, I64 c2) {
      const I64 f = flat_of(shape, c0, c1, c2);
      const Shape3 c{c0, c1, c2};
      Shape3 want;
      for (std::size_t a = 0; a < 3; ++a) want[a] = std::clamp<I64>(c[a] - size[a] / 2, 0, shape[a] - size[a]);
      const LabelIndex only_fg = index_of(shape, [&](I64 i) { return i == f; });
      const LabelIndex only_bg = index_of(shape, [&](I64 i) { return i != f; });
      PatchPlan p;
      ASSERT_TRUE(plan(pos, shape, size, static_cast<std::uint64_t>(f), &p, &only_fg).ok());
      EXPECT_EQ(p.start, want) << "fg at " << str(c) << " size " << str(size);
      EXPECT_FALSE(p.one_class);
      ASSERT_TRUE(plan(neg, shape, size, static_cast<std::uint64_t>(f), &p, &only_bg).ok());
      EXPECT_EQ(p.start, want) << "bg at " << str(c) << " size " << str(size);
    });
  }
}

TEST(PlanPatchTest, PosNegWithOneClassEmptyDrawsTheOther) {
  const Shape3 shape{6, 7, 5};
  const Shape3 size{2, 3, 4};
  const VolumeProgram prog = program({RandCropByPosNegLabel{{2, 3, 4}, "label", 1.0, 0.0, 1}}, {"label"});
  const LabelIndex empty = index_of(shape, [](I64) { return false; });
  std::set<I64> starts;
  for (std::uint64_t key = 0; key < 300; ++key) {
    PatchPlan p;
    ASSERT_TRUE(plan(prog, shape, size, key, &p, &empty).ok());
    EXPECT_TRUE(p.one_class);
    for (std::size_t a = 0; a < 3; ++a) {
      ASSERT_GE(p.start[a], 0);
      ASSERT_LE(p.start[a], shape[a] - size[a]);
    }
    starts.insert(flat_of(shape, p.start[0], p.start[1], p.start[2]));
  }
  EXPECT_GT(starts.size(), 10u);  // background centres, spread over the volume
  // All foreground with neg only: one class too. Both classes present: not.
  const VolumeProgram neg = program({RandCropByPosNegLabel{{2, 3, 4}, "label", 0.0, 1.0, 1}}, {"label"});
  const LabelIndex full = index_of(shape, [](I64) { return true; });
  PatchPlan p;
  ASSERT_TRUE(plan(neg, shape, size, 1, &p, &full).ok());
  EXPECT_TRUE(p.one_class);
  const LabelIndex half = index_of(shape, [](I64 i) { return i % 2 == 0; });
  ASSERT_TRUE(plan(prog, shape, size, 1, &p, &half).ok());
  EXPECT_FALSE(p.one_class);  // reset from the previous plan
}

TEST(PlanPatchTest, PostStepDraws) {
  const Shape3 shape{9, 8, 7};
  const Shape3 patch{4, 4, 3};
  const VolumeProgram prog = program({RandSpatialCrop{{4, 4, 3}}, RandFlip{1.0, {-1, 0}}, RandRotate90{1.0, 5, {1, 0}},
                                      RandFlip{0.0, {}}, RandFlip{1.0, {}}});
  std::set<int> ks;
  for (std::uint64_t key = 0; key < 300; ++key) {
    PatchPlan p;
    ASSERT_TRUE(plan(prog, shape, patch, key, &p).ok());
    ASSERT_EQ(p.steps.size(), 4u);
    EXPECT_EQ(p.steps[0].flip, 5);  // axes -1 and 0
    EXPECT_EQ(p.steps[1].a, 1);
    EXPECT_EQ(p.steps[1].b, 0);
    EXPECT_GE(p.steps[1].k, 1);
    EXPECT_LE(p.steps[1].k, 5);
    ks.insert(p.steps[1].k);
    EXPECT_EQ(p.steps[2].flip, 0);  // prob 0
    EXPECT_EQ(p.steps[3].flip, 7);  // no axes: all three
  }
  EXPECT_EQ(ks, (std::set<int>{1, 2, 3, 4, 5}));
  // A quarter turn over axes of different sizes cannot keep the patch size.
  PatchPlan p;
  const Status s = plan(program({RandSpatialCrop{{4, 4, 3}}, RandRotate90{1.0, 1, {0, 2}}}), shape, patch, 0, &p);
  EXPECT_EQ(s.code(), Code::kUnsupported);
  // prob 0: never turned.
  ASSERT_TRUE(plan(program({RandSpatialCrop{{4, 4, 3}}, RandRotate90{0.0, 3, {0, 2}}}), shape, patch, 0, &p).ok());
  EXPECT_EQ(p.steps[0].k, 0);
}

bool same_plan(const PatchPlan& x, const PatchPlan& y) {
  if (x.pre_before != y.pre_before || x.start != y.start || x.size != y.size || x.out_start != y.out_start ||
      x.one_class != y.one_class || x.steps.size() != y.steps.size()) {
    return false;
  }
  for (std::size_t i = 0; i < x.steps.size(); ++i) {
    const PatchPlan::Step &a = x.steps[i], &b = y.steps[i];
    if (a.before != b.before || a.after != b.after || a.flip != b.flip || a.k != b.k || a.a != b.a || a.b != b.b) {
      return false;
    }
  }
  return true;
}

TEST(PlanPatchTest, SameKeySamePlan) {
  const Shape3 shape{9, 8, 7};
  const Shape3 patch{6, 6, 5};
  const VolumeProgram prog =
      program({SpatialPad{{10, 8, 7}, PadMethod::kSymmetric}, RandSpatialCrop{{4, 4, 5}},
               SpatialPad{{6, 6, 5}, PadMethod::kEnd}, RandFlip{0.5, {}}, RandRotate90{0.5, 3, {0, 1}}});
  std::set<std::pair<I64, I64>> starts;
  std::set<int> flips, ks;
  for (int sample = 0; sample < 200; ++sample) {
    const std::uint64_t key = mix_key(42, 1, static_cast<std::uint64_t>(sample), patch_stream(sample % 3));
    PatchPlan a, b;
    ASSERT_TRUE(plan(prog, shape, patch, key, &a).ok());
    ASSERT_TRUE(plan(prog, shape, patch, key, &b).ok());
    EXPECT_TRUE(same_plan(a, b)) << "key " << key;
    ASSERT_TRUE(plan(prog, shape, patch, key, &b).ok());  // a reused plan too
    EXPECT_TRUE(same_plan(a, b)) << "key " << key;
    starts.insert({a.start[0], a.start[1]});
    flips.insert(a.steps[1].flip);
    ks.insert(a.steps[2].k);
  }
  EXPECT_GT(starts.size(), 10u);  // different keys draw different plans
  EXPECT_EQ(flips, (std::set<int>{0, 7}));
  EXPECT_EQ(ks, (std::set<int>{0, 1, 2, 3}));
  EXPECT_NE(patch_stream(0), patch_stream(1));
  EXPECT_EQ(patch_stream(0), kStreamTransform);
}

TEST(CompileTest, StepsAndRules) {
  const VolumeProgram p =
      program({ScaleIntensityRange{0, 1, {}, {}, false}, NormalizeIntensity{{1.0}, {2.0}, false, false},
               RandCropByPosNegLabel{{2, 2, 2}, "seg", 1, 1, 4}, SpatialPad{{4, 4, 4}, PadMethod::kSymmetric},
               RandFlip{}, RandRotate90{}, NormalizeIntensity{}},
              {"seg"});
  EXPECT_EQ(p.pre_pad, -1);
  EXPECT_EQ(p.pre_pointwise, (std::vector<int>{0, 1}));
  EXPECT_EQ(p.gathered, (std::vector<int>{0, 1}));  // the NormalizeIntensity after the pad is not fused
  EXPECT_FALSE(p.post[3].fused);
  EXPECT_EQ(p.sampling, 2);
  EXPECT_EQ(p.num_samples, 4);
  EXPECT_EQ(p.label_key, "seg");
  ASSERT_EQ(p.post.size(), 4u);
  EXPECT_EQ(p.post[0].kind, PostStep::kPad);
  EXPECT_EQ(p.post[1].kind, PostStep::kFlip);
  EXPECT_EQ(p.post[2].kind, PostStep::kRot90);
  EXPECT_EQ(p.post[3].kind, PostStep::kIntensity);
  EXPECT_EQ(p.post[3].op, 6);
  const VolumeProgram q = program({ScaleIntensityRange{0, 1, {}, {}, false}, SpatialPad{{4, 4, 4}, PadMethod::kEnd},
                                   RandSpatialCropSamples{{2, 2, 2}, 3, true, false}});
  EXPECT_EQ(q.pre_pad, 1);
  EXPECT_EQ(q.sampling, 2);
  EXPECT_EQ(q.num_samples, 3);
  EXPECT_TRUE(q.label_key.empty());
  EXPECT_TRUE(q.post.empty());
  // Refused: two pads before the crop, a pad before RandCropByPosNegLabel, no crop, a flip before the crop.
  EXPECT_THROW(program({SpatialPad{}, SpatialPad{}, RandSpatialCrop{}}), Error);
  EXPECT_THROW(program({SpatialPad{}, RandCropByPosNegLabel{{2, 2, 2}, "seg", 1, 1, 1}}, {"seg"}), Error);
  EXPECT_THROW(program({SpatialPad{}}), Error);
  EXPECT_THROW(program({RandFlip{}, RandSpatialCrop{}}), Error);
  EXPECT_THROW(program({RandCropByPosNegLabel{{2, 2, 2}, "other", 1, 1, 1}}, {"seg"}), Error);
}

// ---- apply_post ----

// A channels x size array in C order, and numpy's flip / transpose / rot90 on its spatial axes.
struct Arr {
  int channels = 1;
  Shape3 size{0, 0, 0};
  std::vector<float> v;
  float at(int c, const Shape3& i) const {
    return v[static_cast<std::size_t>(c * prod(size) + (i[0] * size[1] + i[1]) * size[2] + i[2])];
  }
  float& at(int c, const Shape3& i) {
    return v[static_cast<std::size_t>(c * prod(size) + (i[0] * size[1] + i[1]) * size[2] + i[2])];
  }
};

Arr arange(int channels, const Shape3& size) {
  Arr m{channels, size, std::vector<float>(static_cast<std::size_t>(channels * prod(size)))};
  for (std::size_t i = 0; i < m.v.size(); ++i) m.v[i] = static_cast<float>(i) + 1;
  return m;
}

// np.flip(m, axis)
Arr np_flip(const Arr& m, int axis) {
  Arr out = m;
  for (int c = 0; c < m.channels; ++c) {
    for_each_voxel(m.size, [&](I64 i0, I64 i1, I64 i2) {
      Shape3 j{i0, i1, i2};
      j[static_cast<std::size_t>(axis)] =
          m.size[static_cast<std::size_t>(axis)] - 1 - j[static_cast<std::size_t>(axis)];
      out.at(c, {i0, i1, i2}) = m.at(c, j);
    });
  }
  return out;
}

// np.transpose(m, perm): out axis i is m's axis perm[i].
Arr np_transpose(const Arr& m, const std::array<int, 3>& perm) {
  Arr out = m;
  for (std::size_t i = 0; i < 3; ++i) out.size[i] = m.size[static_cast<std::size_t>(perm[i])];
  for (int c = 0; c < m.channels; ++c) {
    for_each_voxel(out.size, [&](I64 i0, I64 i1, I64 i2) {
      const Shape3 idx{i0, i1, i2};
      Shape3 j{0, 0, 0};
      for (std::size_t i = 0; i < 3; ++i) j[static_cast<std::size_t>(perm[i])] = idx[i];
      out.at(c, idx) = m.at(c, j);
    });
  }
  return out;
}

// numpy.rot90, literally (numpy/lib/function_base.py).
Arr np_rot90(const Arr& m, int k, int a, int b) {
  k = ((k % 4) + 4) % 4;  // Python's k %= 4
  if (k == 0) return m;
  if (k == 2) return np_flip(np_flip(m, a), b);
  std::array<int, 3> axes_list{0, 1, 2};
  std::swap(axes_list[static_cast<std::size_t>(a)], axes_list[static_cast<std::size_t>(b)]);
  if (k == 1) return np_transpose(np_flip(m, b), axes_list);
  return np_flip(np_transpose(m, axes_list), b);  // k == 3
}

// Runs apply_post on a copy of m with one post step set up by `step`.
template <typename F>
Arr post_one(const std::vector<VolumeTransform>& ops, const Arr& m, F step) {
  const VolumeProgram prog = program(ops);
  PatchPlan p;
  p.size = m.size;
  p.steps.assign(prog.post.size(), {});
  step(&p.steps.back());
  std::vector<float> own = m.v, spare;
  Block<float> b{m.channels, m.size, own.data()};
  apply_post(prog, p, 0.0f, &b, &own, &spare);
  Arr out{b.channels, b.size, std::vector<float>(b.data, b.data + static_cast<std::size_t>(b.channels * b.voxels()))};
  return out;
}

TEST(ApplyPostTest, FlipEachAxisMatchesAManualReverse) {
  const Arr m = arange(2, {3, 4, 5});
  for (int mask = 0; mask < 8; ++mask) {
    const Arr got =
        post_one({CenterSpatialCrop{{3, 4, 5}}, RandFlip{1.0, {}}}, m, [&](PatchPlan::Step* s) { s->flip = mask; });
    ASSERT_EQ(got.size, m.size);
    int bad = 0;
    for (int c = 0; c < 2; ++c) {
      for_each_voxel(m.size, [&](I64 i0, I64 i1, I64 i2) {
        const Shape3 j{(mask & 1) ? 2 - i0 : i0, (mask & 2) ? 3 - i1 : i1, (mask & 4) ? 4 - i2 : i2};
        if (got.at(c, {i0, i1, i2}) != m.at(c, j)) ++bad;
      });
    }
    EXPECT_EQ(bad, 0) << "flip mask " << mask;
  }
}

TEST(ApplyPostTest, Rot90MatchesNumpy) {
  // np.rot90([[1, 2], [3, 4]]) == [[2, 4], [1, 3]]; k=2: [[4, 3], [2, 1]]; axes (1, 0): [[3, 1], [4, 2]].
  const Arr m2{1, {2, 2, 1}, {1, 2, 3, 4}};
  auto rot = [&](const Arr& m, int k, int a, int b) {
    return post_one({CenterSpatialCrop{{-1, -1, -1}}, RandRotate90{1.0, 3, {a, b}}}, m, [&](PatchPlan::Step* s) {
      s->k = k;
      s->a = a;
      s->b = b;
    });
  };
  EXPECT_EQ(rot(m2, 1, 0, 1).v, (std::vector<float>{2, 4, 1, 3}));
  EXPECT_EQ(rot(m2, 2, 0, 1).v, (std::vector<float>{4, 3, 2, 1}));
  EXPECT_EQ(rot(m2, 1, 1, 0).v, (std::vector<float>{3, 1, 4, 2}));
  EXPECT_EQ(np_rot90(m2, 1, 0, 1).v, (std::vector<float>{2, 4, 1, 3}));  // the reference itself
  struct Case {
    int a, b;
    Shape3 size;
  };
  const Case cases[] = {{0, 1, {4, 4, 3}}, {1, 2, {2, 5, 5}}, {0, 2, {3, 2, 3}},
                        {1, 0, {4, 4, 3}}, {2, 1, {3, 2, 2}}, {2, 0, {3, 4, 3}}};
  for (const Case& c : cases) {
    const Arr m = arange(2, c.size);
    for (int k = 1; k <= 5; ++k) {
      const Arr want = np_rot90(m, k, c.a, c.b);
      const Arr got = rot(m, k, c.a, c.b);
      EXPECT_EQ(got.size, want.size);
      EXPECT_EQ(got.v, want.v) << "k " << k << " axes (" << c.a << ", " << c.b << ") size " << str(c.size);
    }
  }
  // k = 2 turns any plane, square or not.
  const Arr m = arange(2, {4, 3, 2});
  EXPECT_EQ(rot(m, 2, 0, 1).v, np_rot90(m, 2, 0, 1).v);
  EXPECT_EQ(rot(m, 2, 2, 0).v, np_rot90(m, 2, 2, 0).v);
}

TEST(ApplyPostTest, PadThenFlipThenIntensity) {
  for (PadMethod method : {PadMethod::kSymmetric, PadMethod::kEnd}) {
    const std::vector<VolumeTransform> ops = {CenterSpatialCrop{{2, 3, 2}}, SpatialPad{{4, 4, 5}, method},
                                              RandFlip{1.0, {0, 2}}, ScaleIntensityRange{0.0, 10.0, {}, {}, false}};
    const VolumeProgram prog = program(ops);
    const Shape3 shape{2, 3, 2};
    PatchPlan p;
    ASSERT_TRUE(plan(prog, shape, {4, 4, 5}, 3, &p).ok());
    const Shape3 before = method == PadMethod::kSymmetric ? Shape3{1, 0, 1} : Shape3{0, 0, 0};
    EXPECT_EQ(p.steps[0].before, before);
    EXPECT_EQ(p.steps[0].after, (Shape3{2 - before[0], 1 - before[1], 3 - before[2]}));
    EXPECT_EQ(p.steps[1].flip, 5);
    EXPECT_EQ(p.out_start, (Shape3{-before[0], -before[1], -before[2]}));
    const Arr m = arange(2, shape);
    // Float block: padded with -1, flipped, then scaled by 1/10 (the pad too).
    std::vector<float> own = m.v, spare;
    Block<float> b{2, shape, own.data()};
    apply_post(prog, p, -1.0f, &b, &own, &spare);
    ASSERT_EQ(b.size, (Shape3{4, 4, 5}));
    EXPECT_EQ(b.data, own.data());
    // Label block: padded with 9, flipped, never scaled.
    std::vector<std::int32_t> lown(m.v.begin(), m.v.end()), lspare;
    Block<std::int32_t> lb{2, shape, lown.data()};
    apply_post_label<std::int32_t>(prog, p, 9, &lb, &lown, &lspare);
    ASSERT_EQ(lb.size, (Shape3{4, 4, 5}));
    int bad = 0;
    for (int c = 0; c < 2; ++c) {
      for_each_voxel(b.size, [&](I64 i0, I64 i1, I64 i2) {
        const Shape3 j{3 - i0 - before[0], i1 - before[1], 4 - i2 - before[2]};  // flipped, then unpadded
        const bool in = j[0] >= 0 && j[0] < 2 && j[1] >= 0 && j[1] < 3 && j[2] >= 0 && j[2] < 2;
        const float v = in ? m.at(c, j) : -1.0f;
        const std::size_t at = static_cast<std::size_t>(c * 80 + (i0 * 4 + i1) * 5 + i2);
        if (std::abs(b.data[at] - v / 10.0f) > 1e-6f) ++bad;
        if (lb.data[at] != (in ? static_cast<std::int32_t>(v) : 9)) ++bad;
      });
    }
    EXPECT_EQ(bad, 0) << (method == PadMethod::kSymmetric ? "symmetric" : "end");
  }
}

float sir(double x, double a_min, double a_max, std::optional<double> b_min, std::optional<double> b_max, bool clip) {
  // MONAI ScaleIntensityRange.__call__ (a_max != a_min).
  double y = (x - a_min) / (a_max - a_min);
  if (b_min && b_max) y = y * (*b_max - *b_min) + *b_min;
  if (clip) y = std::clamp(y, b_min ? *b_min : -HUGE_VAL, b_max ? *b_max : HUGE_VAL);
  return static_cast<float>(y);
}

TEST(ApplyPostTest, ScaleIntensityRange) {
  Arr m = arange(2, {3, 4, 5});
  for (float& x : m.v) x = x * 5.0f - 250.0f;  // -245 .. 350
  struct Case {
    double a_min, a_max;
    std::optional<double> b_min, b_max;
    bool clip;
  };
  const Case cases[] = {{-100, 300, 0.0, 1.0, true},  {-100, 300, 0.0, 1.0, false}, {10, 20, {}, {}, false},
                        {300, -100, -1.0, 1.0, true}, {0, 100, {}, 0.5, true},      {0, 100, -2.0, {}, true},
                        {-50, 50, 2.0, 4.0, true}};
  for (const Case& c : cases) {
    const ScaleIntensityRange op{c.a_min, c.a_max, c.b_min, c.b_max, c.clip};
    // After a (zero-width) pad, so that apply_post runs it rather than the gather.
    const Arr got = post_one({CenterSpatialCrop{{3, 4, 5}}, SpatialPad{{3, 4, 5}}, op}, m, [](PatchPlan::Step*) {});
    int bad = 0;
    for (std::size_t i = 0; i < m.v.size(); ++i) {
      const float want = sir(m.v[i], c.a_min, c.a_max, c.b_min, c.b_max, c.clip);
      if (std::abs(got.v[i] - want) > 1e-6f * std::max(1.0f, std::abs(want))) ++bad;
      if (std::abs(pointwise_value(op, m.v[i]) - want) > 1e-6f * std::max(1.0f, std::abs(want))) ++bad;
    }
    EXPECT_EQ(bad, 0) << "a_min " << c.a_min << " a_max " << c.a_max << " clip " << c.clip;
  }
  // a_min == a_max: x - a_min (+ b_min).
  std::vector<float> x = {1.0f, 5.0f, 9.0f};
  apply_pointwise(ScaleIntensityRange{5.0, 5.0, 2.0, {}, false}, x.data(), x.size());
  EXPECT_EQ(x, (std::vector<float>{-2.0f, 2.0f, 6.0f}));
}

// MONAI's ScaleIntensityRange returns x - a_min (+ b_min) before its clip when a_min == a_max
// (monai/transforms/intensity/array.py: the early return skips `if self.clip`). volume_ops clips.
TEST(ApplyPostTest, ScaleIntensityRangeEqualBoundsDoesNotClip) {
  std::vector<float> x = {10.0f, 2.0f};
  apply_pointwise(ScaleIntensityRange{5.0, 5.0, 0.0, 1.0, true}, x.data(), x.size());
  EXPECT_EQ(x, (std::vector<float>{5.0f, -3.0f}));
}

// (x - mean) / std (population) over the selected voxels of each group.
std::vector<float> normalized(const std::vector<float>& v, std::size_t groups, bool nonzero) {
  std::vector<float> out = v;
  const std::size_t g = v.size() / groups;
  for (std::size_t k = 0; k < groups; ++k) {
    double sum = 0, sq = 0;
    int m = 0;
    for (std::size_t i = k * g; i < (k + 1) * g; ++i) {
      if (nonzero && v[i] == 0) continue;
      sum += v[i];
      ++m;
    }
    if (m == 0) continue;
    const double mean = sum / m;
    for (std::size_t i = k * g; i < (k + 1) * g; ++i) {
      if (nonzero && v[i] == 0) continue;
      sq += (v[i] - mean) * (v[i] - mean);
    }
    double sd = std::sqrt(sq / m);
    if (sd == 0) sd = 1;
    for (std::size_t i = k * g; i < (k + 1) * g; ++i) {
      if (nonzero && v[i] == 0) continue;
      out[i] = static_cast<float>((v[i] - mean) / sd);
    }
  }
  return out;
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::abs(got[i] - want[i]) > 1e-5f * std::max(1.0f, std::abs(want[i])) && ++bad <= 3) {
      ADD_FAILURE() << what << " [" << i << "]: got " << got[i] << ", want " << want[i];
    }
  }
}

TEST(ApplyPostTest, NormalizeIntensity) {
  Arr m = arange(2, {3, 4, 5});
  for (std::size_t i = 0; i < m.v.size(); ++i) {
    m.v[i] = (i % 3 == 0) ? 0.0f : static_cast<float>((i * 37) % 101) * (i < 60 ? 1.0f : 3.0f) - 20.0f;
  }
  const std::vector<VolumeTransform> crop = {CenterSpatialCrop{{3, 4, 5}}};
  auto run = [&](const NormalizeIntensity& n, const Arr& a) {
    std::vector<VolumeTransform> ops = crop;
    ops.push_back(n);
    return post_one(ops, a, [](PatchPlan::Step*) {}).v;
  };
  expect_near(run(NormalizeIntensity{{}, {}, false, false}, m), normalized(m.v, 1, false), "whole patch");
  expect_near(run(NormalizeIntensity{{}, {}, true, false}, m), normalized(m.v, 1, true), "nonzero");
  expect_near(run(NormalizeIntensity{{}, {}, false, true}, m), normalized(m.v, 2, false), "channel_wise");
  expect_near(run(NormalizeIntensity{{}, {}, true, true}, m), normalized(m.v, 2, true), "nonzero channel_wise");
  // Given statistics per channel.
  std::vector<float> want = m.v;
  for (std::size_t i = 0; i < want.size(); ++i) want[i] = i < 60 ? (want[i] - 1.0f) / 2.0f : (want[i] - 3.0f) / 4.0f;
  expect_near(run(NormalizeIntensity{{1.0, 3.0}, {2.0, 4.0}, false, true}, m), want, "given per channel");
  // A constant patch: std 0 divides by 1. All zero with nonzero: unchanged.
  Arr flat = m;
  std::fill(flat.v.begin(), flat.v.end(), 4.5f);
  expect_near(run(NormalizeIntensity{{}, {}, false, false}, flat), std::vector<float>(flat.v.size(), 0.0f), "constant");
  std::fill(flat.v.begin(), flat.v.end(), 0.0f);
  expect_near(run(NormalizeIntensity{{}, {}, true, false}, flat), flat.v, "all zero, nonzero");
  // Pointwise (both statistics given): (x - s) / d, a divisor of 0 divides by 1.
  std::vector<float> x = {2.0f, 10.0f, -6.0f};
  apply_pointwise(NormalizeIntensity{{2.0}, {4.0}, false, false}, x.data(), x.size());
  EXPECT_EQ(x, (std::vector<float>{0.0f, 2.0f, -2.0f}));
  EXPECT_EQ(pointwise_value(NormalizeIntensity{{2.0}, {0.0}, false, false}, 7.0f), 5.0f);
}

TEST(ApplyPostTest, PointwiseOpsAfterFlipsAreFusedIntoTheGather) {
  const std::vector<VolumeTransform> ops = {
      ScaleIntensityRange{0, 1000, {}, {}, false},      // 0: before the crop
      RandSpatialCrop{{4, 4, 3}},                       // 1
      RandFlip{1.0, {0}},                               // 2
      RandRotate90{1.0, 1, {0, 1}},                     // 3
      ScaleIntensityRange{0, 1, -1.0, 1.0, true},       // 4: fused (only a flip and a turn before it)
      NormalizeIntensity{{0.5}, {0.25}, false, false},  // 5: fused (pointwise)
      SpatialPad{{6, 4, 3}, PadMethod::kSymmetric},     // 6
      ScaleIntensityRange{-1, 1, 0.0, 10.0, false},     // 7: after the pad: a pass
      NormalizeIntensity{},                             // 8: statistics: a pass
  };
  const VolumeProgram prog = program(ops);
  EXPECT_EQ(prog.gathered, (std::vector<int>{0, 4, 5}));
  ASSERT_EQ(prog.post.size(), 7u);
  const bool fused[] = {false, false, true, true, false, false, false};
  for (std::size_t i = 0; i < 7; ++i) EXPECT_EQ(prog.post[i].fused, fused[i]) << "post step " << i;
  // A statistic before a pointwise op stops the fusion.
  const VolumeProgram q = program(
      {CenterSpatialCrop{{2, 2, 2}}, RandFlip{}, NormalizeIntensity{}, ScaleIntensityRange{0, 1, {}, {}, false}});
  EXPECT_TRUE(q.gathered.empty());

  const Shape3 shape{9, 8, 7};
  std::vector<double> values(static_cast<std::size_t>(prod(shape)));
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>((i * 7919) % 1000);
  const MemVolume m = make_volume(VoxelType::kF32, 1, shape, values, Layout{Order::kNifti, false, 352});
  for (std::uint64_t key = 0; key < 5; ++key) {
    PatchPlan p;
    ASSERT_TRUE(plan(prog, shape, {6, 4, 3}, key, &p).ok());
    std::vector<float> own(static_cast<std::size_t>(prod(p.size))), spare;
    Block<float> b{1, p.size, own.data()};
    gather(m.view(), p, prog, prog.gathered, 0.0f, &b);
    apply_post(prog, p, 0.0f, &b, &own, &spare);
    ASSERT_EQ(b.size, (Shape3{6, 4, 3}));
    // The reference: every step in MONAI's order.
    Arr x{1, p.size, std::vector<float>(static_cast<std::size_t>(prod(p.size)))};
    for_each_voxel(p.size, [&](I64 i0, I64 i1, I64 i2) {
      const double raw =
          values[static_cast<std::size_t>(flat_of(shape, p.start[0] + i0, p.start[1] + i1, p.start[2] + i2))];
      x.at(0, {i0, i1, i2}) = static_cast<float>(raw / 1000.0);
    });
    x = np_rot90(np_flip(x, 0), 1, 0, 1);
    for (float& v : x.v) v = static_cast<float>((std::clamp(v * 2.0 - 1.0, -1.0, 1.0) - 0.5) / 0.25);
    Arr padded{1, {6, 4, 3}, std::vector<float>(72, 0.0f)};
    for_each_voxel(x.size, [&](I64 i0, I64 i1, I64 i2) { padded.at(0, {i0 + 1, i1, i2}) = x.at(0, {i0, i1, i2}); });
    for (float& v : padded.v) v = static_cast<float>((v + 1.0) / 2.0 * 10.0);
    expect_near(std::vector<float>(b.data, b.data + 72), normalized(padded.v, 1, false), "key " + std::to_string(key));
  }
}

}  // namespace
}  // namespace stoker::detail
