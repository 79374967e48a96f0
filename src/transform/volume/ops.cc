// Patches of 3D volumes: MONAI's crop, pad, flip, rotate and intensity
// semantics (monai/transforms/croppad/array.py, spatial/array.py,
// intensity/array.py, transforms/utils.py), on windows read straight from
// the voxels that hold them.
#include "transform/volume/ops.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <utility>

#include "transform/volume/defs.h"
#include "util/util.h"

namespace stoker::detail {
namespace {

Shape3 roi_of(const std::array<int, 3>& roi, const Shape3& shape) {
  Shape3 r;
  for (int a = 0; a < 3; ++a) r[a] = roi[a] > 0 ? roi[a] : shape[a];
  return r;
}

// A voxel of type S at p, in the machine's order (swapped when stored big-endian).
template <typename S>
inline S load(const std::uint8_t* p, bool swap) {
  S v;
  if (!swap) {
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  std::uint8_t b[sizeof(S)];
  for (std::size_t i = 0; i < sizeof(S); ++i) b[i] = p[sizeof(S) - 1 - i];
  std::memcpy(&v, b, sizeof v);
  return v;
}

// Calls f(S{}) with S the C++ type of t.
template <typename F>
decltype(auto) with_type(VoxelType t, F&& f) {
  switch (t) {
    case VoxelType::kU8: return f(std::uint8_t{});
    case VoxelType::kI8: return f(std::int8_t{});
    case VoxelType::kU16: return f(std::uint16_t{});
    case VoxelType::kI16: return f(std::int16_t{});
    case VoxelType::kU32: return f(std::uint32_t{});
    case VoxelType::kI32: return f(std::int32_t{});
    case VoxelType::kF32: return f(float{});
    case VoxelType::kF64: return f(double{});
  }
  return f(std::uint8_t{});
}

// An affine map of each value with an optional clip: one pointwise op.
struct Stage {
  double mul = 1, add = 0;
  bool clip = false;
  double lo = 0, hi = 0;
  double operator()(double x) const {
    x = x * mul + add;
    return clip ? std::min(std::max(x, lo), hi) : x;
  }
};

Stage stage_of(const VolumeTransform& op) {
  Stage s;
  if (const auto* r = std::get_if<ScaleIntensityRange>(&op)) {
    // MONAI: a_max == a_min leaves x - a_min (+ b_min); else scaled to [0, 1], then to [b_min, b_max].
    if (r->a_max == r->a_min) {
      s.mul = 1;
      s.add = -r->a_min + (r->b_min ? *r->b_min : 0.0);
    } else {
      s.mul = 1.0 / (r->a_max - r->a_min);
      s.add = -r->a_min * s.mul;
      if (r->b_min && r->b_max) {
        const double w = *r->b_max - *r->b_min;
        s.mul *= w;
        s.add = s.add * w + *r->b_min;
      }
    }
    if (r->clip && r->a_max != r->a_min) {  // MONAI clips to the bounds given (not in the a_max == a_min case)
      s.clip = true;
      s.lo = r->b_min ? *r->b_min : -HUGE_VAL;
      s.hi = r->b_max ? *r->b_max : HUGE_VAL;
    }
  } else if (const auto* n = std::get_if<NormalizeIntensity>(&op)) {
    double div = n->divisor.empty() ? 1.0 : n->divisor[0];
    if (div == 0.0) div = 1.0;  // MONAI: a divisor of 0 divides by 1
    s.mul = 1.0 / div;
    s.add = -(n->subtrahend.empty() ? 0.0 : n->subtrahend[0]) / div;
  }
  return s;
}

// Strides (in elements) of a C-order block of `size`, per spatial axis.
Shape3 block_strides(const Shape3& size) { return {size[1] * size[2], size[2], 1}; }

// Visits the lines of a window of a volume along the volume's fastest
// spatial axis: f(channel, first voxel offset in the volume (elements) or -1
// when the line lies outside it, the line's start in the block, the
// in-volume range [lo, hi) along the line). The block is C order, `size`.
template <typename F>
void for_lines(const VolumeHeader& h, const Shape3& start, const Shape3& size, int channels, F&& f) {
  int fa = 2;  // the axis of the smallest stride: lines along it read contiguous voxels
  for (int a = 0; a < 3; ++a) {
    if (h.strides[static_cast<std::size_t>(a) + 1] < h.strides[static_cast<std::size_t>(fa) + 1] && h.shape[static_cast<std::size_t>(a)] > 1) fa = a;
  }
  int ga = -1, ha = -1;  // the other two, outer = the larger source stride
  for (int a = 0; a < 3; ++a) {
    if (a == fa) continue;
    if (ga < 0) {
      ga = a;
    } else {
      ha = a;
    }
  }
  if (h.strides[static_cast<std::size_t>(ga) + 1] > h.strides[static_cast<std::size_t>(ha) + 1]) std::swap(ga, ha);
  const Shape3 bs = block_strides(size);
  const std::int64_t vox = size[0] * size[1] * size[2];
  const std::int64_t lo = std::max<std::int64_t>(0, -start[static_cast<std::size_t>(fa)]);
  const std::int64_t hi = std::clamp<std::int64_t>(h.shape[static_cast<std::size_t>(fa)] - start[static_cast<std::size_t>(fa)], 0,
                                                   size[static_cast<std::size_t>(fa)]);
  for (int c = 0; c < channels; ++c) {
    for (std::int64_t ih = 0; ih < size[static_cast<std::size_t>(ha)]; ++ih) {
      const std::int64_t vh = start[static_cast<std::size_t>(ha)] + ih;
      for (std::int64_t ig = 0; ig < size[static_cast<std::size_t>(ga)]; ++ig) {
        const std::int64_t vg = start[static_cast<std::size_t>(ga)] + ig;
        const std::int64_t dst = c * vox + ih * bs[static_cast<std::size_t>(ha)] + ig * bs[static_cast<std::size_t>(ga)];
        const bool inside = vh >= 0 && vh < h.shape[static_cast<std::size_t>(ha)] && vg >= 0 &&
                            vg < h.shape[static_cast<std::size_t>(ga)] && lo < hi;
        const std::int64_t src = inside ? c * h.strides[0] + vh * h.strides[static_cast<std::size_t>(ha) + 1] +
                                              vg * h.strides[static_cast<std::size_t>(ga) + 1] +
                                              (start[static_cast<std::size_t>(fa)] + lo) * h.strides[static_cast<std::size_t>(fa) + 1]
                                        : -1;
        f(src, dst, fa, bs[static_cast<std::size_t>(fa)], h.strides[static_cast<std::size_t>(fa) + 1], lo, hi,
          size[static_cast<std::size_t>(fa)]);
      }
    }
  }
}

template <typename T>
void flip_axis(Block<T>* b, int axis) {
  const Shape3& s = b->size;
  const std::int64_t vox = b->voxels();
  for (int c = 0; c < b->channels; ++c) {
    T* d = b->data + c * vox;
    if (axis == 2) {
      for (std::int64_t r = 0; r < s[0] * s[1]; ++r) std::reverse(d + r * s[2], d + (r + 1) * s[2]);
    } else if (axis == 1) {
      for (std::int64_t i0 = 0; i0 < s[0]; ++i0) {
        T* plane = d + i0 * s[1] * s[2];
        for (std::int64_t i1 = 0; i1 < s[1] / 2; ++i1) {
          std::swap_ranges(plane + i1 * s[2], plane + (i1 + 1) * s[2], plane + (s[1] - 1 - i1) * s[2]);
        }
      }
    } else {
      const std::int64_t plane = s[1] * s[2];
      for (std::int64_t i0 = 0; i0 < s[0] / 2; ++i0) {
        std::swap_ranges(d + i0 * plane, d + (i0 + 1) * plane, d + (s[0] - 1 - i0) * plane);
      }
    }
  }
}

// out = in with spatial axes a and b swapped (their sizes equal).
template <typename T>
void swap_axes(const Block<T>& in, int a, int b, T* out) {
  const Shape3& s = in.size;
  const Shape3 st = block_strides(s);
  Shape3 ost = st;
  std::swap(ost[static_cast<std::size_t>(a)], ost[static_cast<std::size_t>(b)]);
  const std::int64_t vox = in.voxels();
  for (int c = 0; c < in.channels; ++c) {
    const T* src = in.data + c * vox;
    T* dst = out + c * vox;
    for (std::int64_t i0 = 0; i0 < s[0]; ++i0) {
      for (std::int64_t i1 = 0; i1 < s[1]; ++i1) {
        const T* row = src + i0 * st[0] + i1 * st[1];
        T* o = dst + i0 * ost[0] + i1 * ost[1];
        for (std::int64_t i2 = 0; i2 < s[2]; ++i2) o[i2 * ost[2]] = row[i2];
      }
    }
  }
}

// np.rot90(x, k, axes=(a, b)) on the spatial axes, in place (through spare).
template <typename T>
void rot90(Block<T>* b, int k, int a, int ax_b, std::vector<T>* spare) {
  k = ((k % 4) + 4) % 4;
  if (k == 0) return;
  if (k == 2) {
    flip_axis(b, a);
    flip_axis(b, ax_b);
    return;
  }
  const std::size_t n = static_cast<std::size_t>(b->voxels()) * static_cast<std::size_t>(b->channels);
  if (spare->size() < n) spare->resize(n);
  if (k == 1) flip_axis(b, ax_b);  // transpose(flip(m, b))
  swap_axes(*b, a, ax_b, spare->data());
  std::memcpy(b->data, spare->data(), n * sizeof(T));
  if (k == 3) flip_axis(b, ax_b);  // flip(transpose(m), b)
}

template <typename T>
void pad_block(Block<T>* b, const Shape3& before, const Shape3& after, T fill, std::vector<T>* own, std::vector<T>* spare) {
  Shape3 ns;
  for (int a = 0; a < 3; ++a) ns[static_cast<std::size_t>(a)] = b->size[static_cast<std::size_t>(a)] + before[static_cast<std::size_t>(a)] + after[static_cast<std::size_t>(a)];
  if (ns == b->size) return;
  const std::int64_t nvox = ns[0] * ns[1] * ns[2];
  spare->assign(static_cast<std::size_t>(nvox * b->channels), fill);
  const std::int64_t vox = b->voxels();
  for (int c = 0; c < b->channels; ++c) {
    for (std::int64_t i0 = 0; i0 < b->size[0]; ++i0) {
      for (std::int64_t i1 = 0; i1 < b->size[1]; ++i1) {
        const T* src = b->data + c * vox + (i0 * b->size[1] + i1) * b->size[2];
        T* dst = spare->data() + c * nvox + ((i0 + before[0]) * ns[1] + i1 + before[1]) * ns[2] + before[2];
        std::memcpy(dst, src, static_cast<std::size_t>(b->size[2]) * sizeof(T));
      }
    }
  }
  std::swap(*own, *spare);
  b->data = own->data();
  b->size = ns;
}

// MONAI NormalizeIntensity._normalize on a float block (per channel with channel_wise).
void normalize(const NormalizeIntensity& n, Block<float>* b) {
  const std::int64_t vox = b->voxels();
  auto pick = [](const std::vector<double>& v, int c) { return v.size() == 1 ? v[0] : v[static_cast<std::size_t>(c)]; };
  auto run = [&](float* x, std::int64_t count, int c) {
    double sum = 0, sq = 0;
    std::int64_t m = 0;
    for (std::int64_t i = 0; i < count; ++i) {
      if (n.nonzero && x[i] == 0.0f) continue;
      sum += x[i];
      ++m;
    }
    if (m == 0) return;  // MONAI: no voxel selected, unchanged
    const double mean = sum / static_cast<double>(m);
    for (std::int64_t i = 0; i < count; ++i) {
      if (n.nonzero && x[i] == 0.0f) continue;
      const double d = x[i] - mean;
      sq += d * d;
    }
    const double sub = n.subtrahend.empty() ? mean : pick(n.subtrahend, c);
    double div = n.divisor.empty() ? std::sqrt(sq / static_cast<double>(m)) : pick(n.divisor, c);
    if (div == 0.0) div = 1.0;
    for (std::int64_t i = 0; i < count; ++i) {
      if (n.nonzero && x[i] == 0.0f) continue;
      x[i] = static_cast<float>((x[i] - sub) / div);
    }
  };
  if (n.channel_wise) {
    for (int c = 0; c < b->channels; ++c) run(b->data + c * vox, vox, c);
  } else {
    run(b->data, vox * b->channels, 0);
  }
}

}  // namespace

std::string shape_text(const Shape3& s) {
  std::string out = "(";
  out += std::to_string(s[0]);
  out += ", ";
  out += std::to_string(s[1]);
  out += ", ";
  out += std::to_string(s[2]);
  out += ")";
  return out;
}

std::uint64_t patch_stream(int p) {
  if (p == 0) return kStreamTransform;
  return mix_key(kStreamTransform, kStreamPatch, static_cast<std::uint64_t>(p), 0);
}

// ---- The label index ----------------------------------------------------------------------

LabelIndex label_index(const VolumeView& v) {
  const VolumeHeader& h = v.h;
  const auto n = static_cast<std::uint64_t>(h.shape[0] * h.shape[1] * h.shape[2]);
  std::vector<std::uint64_t> words((n + 63) / 64, 0);
  const Shape3 flat = block_strides(h.shape);
  const std::uint8_t* base = v.data + h.data_offset;
  const std::size_t item = voxel_bytes(h.type);
  with_type(h.type, [&](auto zero) {
    using S = decltype(zero);
    // MONAI map_binary_to_indices: a multi-channel (one-hot) label's channel 0 is the background.
    const std::int64_t first = h.channels > 1 ? 1 : 0;
    for_lines(h, {0, 0, 0}, h.shape, h.channels,
              [&](std::int64_t src, std::int64_t dst, int fa, std::int64_t, std::int64_t sstep, std::int64_t lo,
                  std::int64_t hi, std::int64_t) {
                if (src < 0 || dst / static_cast<std::int64_t>(n) < first) return;
                // dst is the C-order index of the line's start within one channel's block
                const std::int64_t vox = static_cast<std::int64_t>(n);
                std::int64_t i = dst % vox + lo * flat[static_cast<std::size_t>(fa)];
                const std::uint8_t* p = base + static_cast<std::size_t>(src) * item;
                for (std::int64_t j = lo; j < hi; ++j, i += flat[static_cast<std::size_t>(fa)], p += sstep * static_cast<std::int64_t>(item)) {
                  if (load<S>(p, h.swap) != S{0}) words[static_cast<std::size_t>(i) >> 6] |= 1ULL << (i & 63);
                }
              });
  });
  return LabelIndex(n, std::move(words));
}

// ---- The program ------------------------------------------------------------------------------

VolumeProgram compile_volume_program(const std::vector<VolumeTransform>& ops,
                                     const std::vector<std::string>& label_fields) {
  check_volume_transforms(ops, label_fields);
  VolumeProgram p;
  p.ops = ops;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const VolumeTransform& t = ops[i];
    const VolumeTraits tr = volume_traits(t);
    const int idx = static_cast<int>(i);
    if (p.sampling < 0) {
      if (tr.sampling) {
        p.sampling = idx;
        p.num_samples = tr.num_samples;
        if (const auto* pn = std::get_if<RandCropByPosNegLabel>(&t)) {
          p.label_key = pn->label_key;
          if (p.pre_pad >= 0) {
            invalid("volume transforms: SpatialPad before RandCropByPosNegLabel is not supported (its centres are "
                    "drawn from the label as stored); pad after the crop, or crop with RandSpatialCrop");
          }
        }
      } else if (std::holds_alternative<Spacing>(t)) {
        p.spacing = idx;
      } else if (std::holds_alternative<SpatialPad>(t)) {
        if (p.pre_pad >= 0) invalid("volume transforms: one SpatialPad before the sampling crop at most");
        p.pre_pad = idx;
      } else {
        p.pre_pointwise.push_back(idx);
      }
      continue;
    }
    PostStep s;
    s.op = idx;
    if (std::holds_alternative<SpatialPad>(t)) {
      s.kind = PostStep::kPad;
      p.post_pad = true;
    } else if (std::holds_alternative<RandFlip>(t)) {
      s.kind = PostStep::kFlip;
    } else if (std::holds_alternative<RandRotate90>(t)) {
      s.kind = PostStep::kRot90;
    } else {
      s.kind = PostStep::kIntensity;
    }
    p.post.push_back(s);
  }
  p.gathered = p.pre_pointwise;
  for (PostStep& s : p.post) {
    if (s.kind == PostStep::kFlip || s.kind == PostStep::kRot90) continue;
    if (s.kind != PostStep::kIntensity || !volume_traits(p.ops[static_cast<std::size_t>(s.op)]).pointwise) break;
    s.fused = true;
    p.gathered.push_back(s.op);
  }
  return p;
}

// ---- Planning ---------------------------------------------------------------------------------

Status plan_patch(const VolumeProgram& prog, const Shape3& shape, const Shape3& patch, const LabelIndex* index,
                  Rng* rng, PatchPlan* out) {
  PatchPlan& pl = *out;
  pl.steps.assign(prog.post.size(), {});
  pl.one_class = false;
  Shape3 cur = shape;
  pl.pre_before = {0, 0, 0};
  auto pad_widths = [](const SpatialPad& sp, const Shape3& s, Shape3* before, Shape3* after) {
    const Shape3 size = roi_of(sp.spatial_size, s);
    for (std::size_t a = 0; a < 3; ++a) {
      const std::int64_t w = std::max<std::int64_t>(size[a] - s[a], 0);
      (*before)[a] = sp.method == PadMethod::kSymmetric ? w / 2 : 0;
      (*after)[a] = w - (*before)[a];
    }
  };
  if (prog.pre_pad >= 0) {
    Shape3 after;
    pad_widths(std::get<SpatialPad>(prog.ops[static_cast<std::size_t>(prog.pre_pad)]), cur, &pl.pre_before, &after);
    for (std::size_t a = 0; a < 3; ++a) cur[a] += pl.pre_before[a] + after[a];
  }
  // The sampling crop, in the (padded) volume's frame.
  Shape3 start{0, 0, 0}, size = cur;
  const VolumeTransform& crop = prog.ops[static_cast<std::size_t>(prog.sampling)];
  auto centred = [&](const std::array<int, 3>& roi_size) {
    // MONAI SpatialCrop(roi_center=shape // 2, roi_size): start = max(c - roi // 2, 0), clipped at the end.
    const Shape3 roi = roi_of(roi_size, cur);
    for (std::size_t a = 0; a < 3; ++a) {
      start[a] = std::max<std::int64_t>(cur[a] / 2 - roi[a] / 2, 0);
      size[a] = std::min(start[a] + roi[a], cur[a]) - start[a];
    }
  };
  auto random_patch = [&](const std::array<int, 3>& roi_size, bool random_center) {
    if (!random_center) return centred(roi_size);
    // MONAI get_random_patch over get_valid_patch_size: corner uniform in [0, dim - size].
    const Shape3 roi = roi_of(roi_size, cur);
    for (std::size_t a = 0; a < 3; ++a) {
      size[a] = std::min(roi[a], cur[a]);
      start[a] = static_cast<std::int64_t>(rng->below(static_cast<std::uint64_t>(cur[a] - size[a]) + 1));
    }
  };
  if (const auto* rc = std::get_if<RandSpatialCrop>(&crop)) {
    random_patch(rc->roi_size, rc->random_center);
  } else if (const auto* rs = std::get_if<RandSpatialCropSamples>(&crop)) {
    random_patch(rs->roi_size, rs->random_center);
  } else if (const auto* cc = std::get_if<CenterSpatialCrop>(&crop)) {
    centred(cc->roi_size);
  } else if (const auto* pn = std::get_if<RandCropByPosNegLabel>(&crop)) {
    size = roi_of(pn->spatial_size, cur);
    for (std::size_t a = 0; a < 3; ++a) {
      if (size[a] > cur[a]) {
        return Status::Unsupported("RandCropByPosNegLabel: spatial_size " + shape_text(size) +
                                       " is larger than the volume " + shape_text(cur) + " (pad it with SpatialPad)");
      }
    }
    const double u = rng->uniform01();
    bool fg = u < pn->pos / (pn->pos + pn->neg);
    if (index->count(fg) == 0) {
      fg = !fg;
      pl.one_class = true;
      if (index->count(fg) == 0) return Status::Corrupt("RandCropByPosNegLabel: the label volume has no voxels");
    }
    const std::uint64_t flat = index->select(fg, rng->below(index->count(fg)));
    const std::int64_t c[3] = {static_cast<std::int64_t>(flat / static_cast<std::uint64_t>(cur[1] * cur[2])),
                               static_cast<std::int64_t>(flat / static_cast<std::uint64_t>(cur[2]) % static_cast<std::uint64_t>(cur[1])),
                               static_cast<std::int64_t>(flat % static_cast<std::uint64_t>(cur[2]))};
    for (std::size_t a = 0; a < 3; ++a) {
      // MONAI correct_crop_centers: valid_start = size // 2,
      // valid_end = uint16(shape + 1 - size / 2), +1 when equal; c clipped to [start, end - 1].
      const std::int64_t vs = size[a] / 2;
      // NOTE: MONAI's uint16 cast truncates; axes past 65535 voxels (where it would wrap) are truncated too.
      std::int64_t ve = static_cast<std::int64_t>(static_cast<double>(cur[a]) + 1.0 - static_cast<double>(size[a]) / 2.0);
      if (ve == vs) ++ve;
      const std::int64_t centre = std::min(std::max(c[a], vs), ve - 1);
      start[a] = std::max<std::int64_t>(centre - size[a] / 2, 0);
    }
  }
  for (std::size_t a = 0; a < 3; ++a) pl.start[a] = start[a] - pl.pre_before[a];
  pl.size = size;
  // The steps after the crop.
  cur = size;
  Shape3 out_start = pl.start;
  for (std::size_t i = 0; i < prog.post.size(); ++i) {
    const VolumeTransform& t = prog.ops[static_cast<std::size_t>(prog.post[i].op)];
    PatchPlan::Step& st = pl.steps[i];
    switch (prog.post[i].kind) {
      case PostStep::kPad:
        pad_widths(std::get<SpatialPad>(t), cur, &st.before, &st.after);
        for (std::size_t a = 0; a < 3; ++a) {
          cur[a] += st.before[a] + st.after[a];
          out_start[a] -= st.before[a];
        }
        break;
      case PostStep::kFlip: {
        const auto& f = std::get<RandFlip>(t);
        if (rng->uniform01() < f.prob) {
          if (f.spatial_axis.empty()) {
            st.flip = 7;
          } else {
            for (int ax : f.spatial_axis) st.flip |= 1 << ((ax + 3) % 3);
          }
        }
        break;
      }
      case PostStep::kRot90: {
        const auto& r = std::get<RandRotate90>(t);
        const int k = static_cast<int>(rng->below(static_cast<std::uint64_t>(r.max_k))) + 1;
        st.a = (r.spatial_axes[0] + 3) % 3;
        st.b = (r.spatial_axes[1] + 3) % 3;
        if (rng->uniform01() < r.prob) st.k = k;
        if (cur[static_cast<std::size_t>(st.a)] != cur[static_cast<std::size_t>(st.b)] && st.k % 2 == 1) {
          return Status::Unsupported("RandRotate90: axes " + std::to_string(st.a) + " and " +
                                         std::to_string(st.b) + " of the patch " + shape_text(cur) + " differ in size");
        }
        break;
      }
      case PostStep::kIntensity:
        break;
    }
  }
  pl.out_start = out_start;
  if (cur != patch) {
    std::string why = "the transforms cut a patch of " + shape_text(cur) + " from this volume " + shape_text(shape) +
                      ", not the loader's " + shape_text(patch);
    for (std::size_t a = 0; a < 3; ++a) {
      if (cur[a] < patch[a]) {
        why += " (the volume is smaller than the patch on axis " + std::to_string(a) +
               ": add SpatialPad after the crop)";
        break;
      }
    }
    return Status::Unsupported(why);
  }
  return Status();
}

// ---- Pointwise intensity --------------------------------------------------------------------------

void apply_pointwise(const VolumeTransform& op, float* x, std::size_t n) {
  const Stage s = stage_of(op);
  for (std::size_t i = 0; i < n; ++i) x[i] = static_cast<float>(s(x[i]));
}

float pointwise_value(const VolumeTransform& op, float x) { return static_cast<float>(stage_of(op)(x)); }

// ---- Gather -------------------------------------------------------------------------------------

namespace {

// Copies the window [start, start + size) of a volume into the C-order block
// `out` (channels x size), voxels outside the volume set to `pad`, each read
// voxel through conv(S) -> T. Rows along s2 when s2 is contiguous (.npy);
// 16 x 16 tiles of (s0, s2) when s0 is (NIfTI), so that both the reads and
// the writes stay in cache lines; any other layout voxel by voxel. Returns
// the bytes of voxels read.
template <typename S, typename T, typename Conv>
std::uint64_t copy_window(const VolumeHeader& h, const std::uint8_t* base, const Shape3& start, const Shape3& size,
                          T pad, Conv conv, T* out) {
  Shape3 lo, hi;  // the part inside the volume, in window coordinates
  bool empty = false;
  for (std::size_t a = 0; a < 3; ++a) {
    lo[a] = std::clamp<std::int64_t>(-start[a], 0, size[a]);
    hi[a] = std::clamp<std::int64_t>(h.shape[a] - start[a], lo[a], size[a]);
    empty = empty || lo[a] == hi[a];
  }
  const std::int64_t vox = size[0] * size[1] * size[2];
  const bool padded = empty || lo != Shape3{0, 0, 0} || hi != size;
  if (padded) std::fill(out, out + vox * h.channels, pad);
  if (empty) return 0;
  constexpr std::size_t kItem = sizeof(S);
  const bool swap = h.swap;
  auto at = [&](int c, std::int64_t i0, std::int64_t i1, std::int64_t i2) {
    return base + static_cast<std::size_t>(c * h.strides[0] + (start[0] + i0) * h.strides[1] +
                                           (start[1] + i1) * h.strides[2] + (start[2] + i2) * h.strides[3]) * kItem;
  };
  for (int c = 0; c < h.channels; ++c) {
    T* o = out + c * vox;
    if (h.strides[3] == 1) {
      for (std::int64_t i0 = lo[0]; i0 < hi[0]; ++i0) {
        for (std::int64_t i1 = lo[1]; i1 < hi[1]; ++i1) {
          const std::uint8_t* p = at(c, i0, i1, lo[2]);
          T* d = o + (i0 * size[1] + i1) * size[2];
          if (!swap && reinterpret_cast<std::uintptr_t>(p) % alignof(S) == 0) {
            const S* q = reinterpret_cast<const S*>(p);
            for (std::int64_t i2 = lo[2]; i2 < hi[2]; ++i2) d[i2] = conv(q[i2 - lo[2]]);
          } else {
            for (std::int64_t i2 = lo[2]; i2 < hi[2]; ++i2, p += kItem) d[i2] = conv(load<S>(p, swap));
          }
        }
      }
    } else if (h.strides[1] == 1) {
      constexpr std::int64_t kTile = 16;
      for (std::int64_t i1 = lo[1]; i1 < hi[1]; ++i1) {
        for (std::int64_t t2 = lo[2]; t2 < hi[2]; t2 += kTile) {
          const std::int64_t e2 = std::min(t2 + kTile, hi[2]);
          for (std::int64_t t0 = lo[0]; t0 < hi[0]; t0 += kTile) {
            const std::int64_t e0 = std::min(t0 + kTile, hi[0]);
            for (std::int64_t i2 = t2; i2 < e2; ++i2) {
              const std::uint8_t* p = at(c, t0, i1, i2);
              T* d = o + (t0 * size[1] + i1) * size[2] + i2;
              const std::int64_t step = size[1] * size[2];
              if (!swap && reinterpret_cast<std::uintptr_t>(p) % alignof(S) == 0) {
                const S* q = reinterpret_cast<const S*>(p);
                for (std::int64_t i0 = 0; i0 < e0 - t0; ++i0) d[i0 * step] = conv(q[i0]);
              } else {
                for (std::int64_t i0 = 0; i0 < e0 - t0; ++i0, p += kItem) d[i0 * step] = conv(load<S>(p, swap));
              }
            }
          }
        }
      }
    } else {
      for (std::int64_t i0 = lo[0]; i0 < hi[0]; ++i0) {
        for (std::int64_t i1 = lo[1]; i1 < hi[1]; ++i1) {
          T* d = o + (i0 * size[1] + i1) * size[2];
          for (std::int64_t i2 = lo[2]; i2 < hi[2]; ++i2) d[i2] = conv(load<S>(at(c, i0, i1, i2), swap));
        }
      }
    }
  }
  return static_cast<std::uint64_t>((hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]) * h.channels) * kItem;
}

}  // namespace

std::uint64_t gather(const VolumeView& v, const PatchPlan& plan, const VolumeProgram& prog,
                     const std::vector<int>& pointwise, float pad, Block<float>* out) {
  const VolumeHeader& h = v.h;
  std::vector<Stage> stages;
  stages.reserve(pointwise.size() + 1);
  if (h.scaled) stages.push_back({h.slope, h.inter, false, 0, 0});
  for (int i : pointwise) stages.push_back(stage_of(prog.ops[static_cast<std::size_t>(i)]));
  const std::uint8_t* base = v.data + h.data_offset;
  return with_type(h.type, [&](auto zero) -> std::uint64_t {
    using S = decltype(zero);
    if (stages.empty()) {
      return copy_window<S, float>(h, base, plan.start, plan.size, pad, [](S x) { return static_cast<float>(x); },
                                   out->data);
    }
    return copy_window<S, float>(h, base, plan.start, plan.size, pad,
                                 [&](S x) {
                                   double y = static_cast<double>(x);
                                   for (const Stage& st : stages) y = st(y);
                                   return static_cast<float>(y);
                                 },
                                 out->data);
  });
}

template <typename T>
std::uint64_t gather_label(const VolumeView& v, const PatchPlan& plan, T pad, Block<T>* out) {
  const VolumeHeader& h = v.h;
  return with_type(h.type, [&](auto zero) -> std::uint64_t {
    using S = decltype(zero);
    return copy_window<S, T>(h, v.data + h.data_offset, plan.start, plan.size, pad,
                             [](S x) { return static_cast<T>(x); }, out->data);
  });
}
template std::uint64_t gather_label<std::uint8_t>(const VolumeView&, const PatchPlan&, std::uint8_t, Block<std::uint8_t>*);
template std::uint64_t gather_label<std::int32_t>(const VolumeView&, const PatchPlan&, std::int32_t, Block<std::int32_t>*);

// ---- After the crop -------------------------------------------------------------------------------

namespace {
template <typename T, bool kIntensity>
void post_steps(const VolumeProgram& prog, const PatchPlan& plan, T fill, Block<T>* b, std::vector<T>* own,
                std::vector<T>* spare) {
  for (std::size_t i = 0; i < prog.post.size(); ++i) {
    const PatchPlan::Step& st = plan.steps[i];
    const VolumeTransform& t = prog.ops[static_cast<std::size_t>(prog.post[i].op)];
    switch (prog.post[i].kind) {
      case PostStep::kPad:
        pad_block(b, st.before, st.after, fill, own, spare);
        break;
      case PostStep::kFlip:
        for (int a = 0; a < 3; ++a) {
          if (st.flip & (1 << a)) flip_axis(b, a);
        }
        break;
      case PostStep::kRot90:
        if (st.k) rot90(b, st.k, st.a, st.b, spare);
        break;
      case PostStep::kIntensity:
        if (prog.post[i].fused) break;
        if constexpr (kIntensity) {
          const std::size_t n = static_cast<std::size_t>(b->voxels()) * static_cast<std::size_t>(b->channels);
          if (const auto* ni = std::get_if<NormalizeIntensity>(&t); ni && !volume_traits(t).pointwise) {
            normalize(*ni, b);
          } else {
            apply_pointwise(t, b->data, n);
          }
        }
        break;
    }
  }
}
}  // namespace

void apply_post(const VolumeProgram& prog, const PatchPlan& plan, float fill, Block<float>* b, std::vector<float>* own,
                std::vector<float>* spare) {
  post_steps<float, true>(prog, plan, fill, b, own, spare);
}

template <typename T>
void apply_post_label(const VolumeProgram& prog, const PatchPlan& plan, T fill, Block<T>* b, std::vector<T>* own,
                      std::vector<T>* spare) {
  post_steps<T, false>(prog, plan, fill, b, own, spare);
}
template void apply_post_label<std::uint8_t>(const VolumeProgram&, const PatchPlan&, std::uint8_t, Block<std::uint8_t>*,
                                             std::vector<std::uint8_t>*, std::vector<std::uint8_t>*);
template void apply_post_label<std::int32_t>(const VolumeProgram&, const PatchPlan&, std::int32_t, Block<std::int32_t>*,
                                             std::vector<std::int32_t>*, std::vector<std::int32_t>*);

}  // namespace stoker::detail
