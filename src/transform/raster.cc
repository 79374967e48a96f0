#include "transform/raster.h"

#include "order/rng.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

namespace stoker::detail {
namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;  // Pillow's PRECISION_BITS (as resize.cc)

std::uint8_t clip8(std::int32_t v) {
  v >>= kPrecisionBits;
  return static_cast<std::uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v));
}

// Pillow's ROUND_UP for mode "I": half away from zero.
std::int32_t round_up(double f) {
  return static_cast<std::int32_t>(f >= 0.0 ? std::floor(f + 0.5F) : -std::floor(std::fabs(f) + 0.5F));
}

void compute_double_axis(int in_size, int out_size, double in0, double in1, RasterWorkspace::Axis* axis) {
  axis->first.resize(static_cast<std::size_t>(out_size));
  axis->count.resize(static_cast<std::size_t>(out_size));
  axis->weights.clear();
  const double scale = ((in1 < 0 ? in_size : in1) - in0) / out_size;
  axis->ksize = static_cast<int>(std::ceil(std::max(scale, 1.0))) * 2 + 1;
  axis->weights.assign(static_cast<std::size_t>(out_size) * static_cast<std::size_t>(axis->ksize), 0.0);
  bilinear_coeffs(in_size, out_size, in0, in1, [&](int xx, int xmin, int n, const double* k) {
    std::copy(k, k + n, &axis->weights[static_cast<std::size_t>(xx) * static_cast<std::size_t>(axis->ksize)]);
    axis->first[static_cast<std::size_t>(xx)] = xmin;
    axis->count[static_cast<std::size_t>(xx)] = n;
  });
}

// One pass of Pillow's 32-bit resample (ImagingResampleHorizontal_32bpc /
// Vertical_32bpc): out[i] = store(sum of in[first + t] * k[t] in double),
// along x (stride 1 between taps, `lines` rows) or y (stride `w`).
template <typename T>
T store(double v) {
  if constexpr (std::is_same_v<T, float>) {
    return static_cast<float>(v);
  } else {
    return round_up(v);
  }
}

template <typename T>
void pass_double_h(const T* in, int w, int y0, int rows, const RasterWorkspace::Axis& ax, T* out) {
  const int out_w = static_cast<int>(ax.first.size());
  for (int y = 0; y < rows; ++y) {
    const T* line = in + static_cast<std::ptrdiff_t>(y0 + y) * w;
    T* o = out + static_cast<std::ptrdiff_t>(y) * out_w;
    for (int x = 0; x < out_w; ++x) {
      const double* k = &ax.weights[static_cast<std::size_t>(x) * static_cast<std::size_t>(ax.ksize)];
      const T* p = line + ax.first[static_cast<std::size_t>(x)];
      double ss = 0.0;
      for (int t = 0; t < ax.count[static_cast<std::size_t>(x)]; ++t) ss += p[t] * k[t];
      o[x] = store<T>(ss);
    }
  }
}

template <typename T>
void pass_double_v(const T* in, int w, int row_offset, const RasterWorkspace::Axis& ax, T* out) {
  const int out_h = static_cast<int>(ax.first.size());
  for (int y = 0; y < out_h; ++y) {
    const double* k = &ax.weights[static_cast<std::size_t>(y) * static_cast<std::size_t>(ax.ksize)];
    const T* col = in + static_cast<std::ptrdiff_t>(ax.first[static_cast<std::size_t>(y)] - row_offset) * w;
    const int n = ax.count[static_cast<std::size_t>(y)];
    T* o = out + static_cast<std::ptrdiff_t>(y) * w;
    for (int x = 0; x < w; ++x) {
      double ss = 0.0;
      for (int t = 0; t < n; ++t) ss += col[static_cast<std::ptrdiff_t>(t) * w + x] * k[t];
      o[x] = store<T>(ss);
    }
  }
}

// Pillow's 8bpc passes on mode "L" (one byte per pixel).
void pass_fixed_h(const std::uint8_t* in, int w, int y0, int rows, const ResampleAxis& ax, std::uint8_t* out) {
  const int out_w = static_cast<int>(ax.first.size());
  for (int y = 0; y < rows; ++y) {
    const std::uint8_t* line = in + static_cast<std::ptrdiff_t>(y0 + y) * w;
    std::uint8_t* o = out + static_cast<std::ptrdiff_t>(y) * out_w;
    for (int x = 0; x < out_w; ++x) {
      const std::int32_t* k = &ax.weights[static_cast<std::size_t>(x) * static_cast<std::size_t>(ax.ksize)];
      const std::uint8_t* p = line + ax.first[static_cast<std::size_t>(x)];
      std::int32_t ss = 1 << (kPrecisionBits - 1);
      for (int t = 0; t < ax.count[static_cast<std::size_t>(x)]; ++t) ss += p[t] * k[t];
      o[x] = clip8(ss);
    }
  }
}

void pass_fixed_v(const std::uint8_t* in, int w, int row_offset, const ResampleAxis& ax, std::uint8_t* out) {
  const int out_h = static_cast<int>(ax.first.size());
  for (int y = 0; y < out_h; ++y) {
    const std::int32_t* k = &ax.weights[static_cast<std::size_t>(y) * static_cast<std::size_t>(ax.ksize)];
    const std::uint8_t* col = in + static_cast<std::ptrdiff_t>(ax.first[static_cast<std::size_t>(y)] - row_offset) * w;
    const int n = ax.count[static_cast<std::size_t>(y)];
    std::uint8_t* o = out + static_cast<std::ptrdiff_t>(y) * w;
    for (int x = 0; x < w; ++x) {
      std::int32_t ss = 1 << (kPrecisionBits - 1);
      for (int t = 0; t < n; ++t) ss += col[static_cast<std::ptrdiff_t>(t) * w + x] * k[t];
      o[x] = clip8(ss);
    }
  }
}

template <typename T>
void resize_typed(const T* src, int w, int h, int out_w, int out_h, const double* box, RasterWorkspace* ws,
                  std::vector<std::uint8_t>* out) {
  // As Pillow's ImagingResampleInner: a pass is skipped only when its size is
  // unchanged and the box spans the input; the horizontal pass runs over the
  // rows the vertical pass reads.
  const bool need_h = out_w != w || (box && (box[0] != 0 || box[2] != w));
  const bool need_v = out_h != h || (box && (box[1] != 0 || box[3] != h));
  out->resize(static_cast<std::size_t>(out_w) * static_cast<std::size_t>(out_h) * sizeof(T));
  T* dst = reinterpret_cast<T*>(out->data());
  if (!need_h && !need_v) {
    std::memcpy(dst, src, out->size());
    return;
  }
  constexpr bool k8 = std::is_same_v<T, std::uint8_t>;
  int y0 = 0, y1 = h;
  if (need_v) {
    if constexpr (k8) {
      compute_axis(h, out_h, &ws->fixed_v, box ? box[1] : 0, box ? box[3] : -1);
      y0 = ws->fixed_v.first.front(), y1 = ws->fixed_v.first.back() + ws->fixed_v.count.back();
    } else {
      compute_double_axis(h, out_h, box ? box[1] : 0, box ? box[3] : -1, &ws->v);
      y0 = ws->v.first.front(), y1 = ws->v.first.back() + ws->v.count.back();
    }
  }
  const T* vsrc = src;
  int row_offset = 0;
  if (need_h) {
    T* hdst = dst;
    if (need_v) {
      ws->temp.resize(static_cast<std::size_t>(out_w) * static_cast<std::size_t>(y1 - y0) * sizeof(T));
      hdst = reinterpret_cast<T*>(ws->temp.data());
    }
    if constexpr (k8) {
      compute_axis(w, out_w, &ws->fixed_h, box ? box[0] : 0, box ? box[2] : -1);
      pass_fixed_h(src, w, need_v ? y0 : 0, need_v ? y1 - y0 : h, ws->fixed_h, hdst);
    } else {
      compute_double_axis(w, out_w, box ? box[0] : 0, box ? box[2] : -1, &ws->h);
      pass_double_h(src, w, need_v ? y0 : 0, need_v ? y1 - y0 : h, ws->h, hdst);
    }
    if (!need_v) return;
    vsrc = hdst;
    row_offset = y0;
  }
  if constexpr (k8) {
    pass_fixed_v(vsrc, out_w, row_offset, ws->fixed_v, dst);
  } else {
    pass_double_v(vsrc, out_w, row_offset, ws->v, dst);
  }
}

// A crop of one plane: a copy, zeros past the edges.
void crop_plane(const std::uint8_t* src, int w, int h, int bytes, const Box& b, std::vector<std::uint8_t>* out) {
  out->assign(static_cast<std::size_t>(b.width) * static_cast<std::size_t>(b.height) * static_cast<std::size_t>(bytes), 0);
  const int x0 = std::max(b.x, 0), x1 = std::min(b.x + b.width, w);
  const int y0 = std::max(b.y, 0), y1 = std::min(b.y + b.height, h);
  for (int y = y0; y < y1 && x1 > x0; ++y) {
    std::memcpy(out->data() + (static_cast<std::size_t>(y - b.y) * static_cast<std::size_t>(b.width) +
                               static_cast<std::size_t>(x0 - b.x)) * static_cast<std::size_t>(bytes),
                src + (static_cast<std::size_t>(y) * static_cast<std::size_t>(w) + static_cast<std::size_t>(x0)) *
                          static_cast<std::size_t>(bytes),
                static_cast<std::size_t>(x1 - x0) * static_cast<std::size_t>(bytes));
  }
}

// A plane flipped (a copy).
void flip_plane(const std::uint8_t* in, int w, int h, int bytes, bool mirror, bool vflip, std::vector<std::uint8_t>* out) {
  const std::size_t row = static_cast<std::size_t>(w) * static_cast<std::size_t>(bytes);
  out->resize(row * static_cast<std::size_t>(h));
  for (int y = 0; y < h; ++y) {
    const std::uint8_t* src = in + static_cast<std::size_t>(vflip ? h - 1 - y : y) * row;
    std::uint8_t* dst = out->data() + static_cast<std::size_t>(y) * row;
    if (!mirror) {
      std::memcpy(dst, src, row);
      continue;
    }
    for (int x = 0; x < w; ++x) {
      std::memcpy(dst + static_cast<std::size_t>(x) * static_cast<std::size_t>(bytes),
                  src + static_cast<std::size_t>(w - 1 - x) * static_cast<std::size_t>(bytes), static_cast<std::size_t>(bytes));
    }
  }
}

template <typename T>
void write_plane(const T* in, int w, int h, int c, int channels, const SamplePlan& plan, const RasterWrite& write,
                 void* out) {
  const float mean = write.mean.empty() ? 0.0f : write.mean[write.mean.size() == 1 ? 0 : static_cast<std::size_t>(c)];
  const float sd = write.std.empty() ? 1.0f : write.std[write.std.size() == 1 ? 0 : static_cast<std::size_t>(c)];
  const bool normalize = !write.mean.empty();
  // Element (y, x) of channel c in the sample.
  const std::size_t step = write.nhwc ? static_cast<std::size_t>(channels) : 1;
  for (int y = 0; y < h; ++y) {
    const T* row = in + static_cast<std::ptrdiff_t>(plan.vflip ? h - 1 - y : y) * w;
    const std::size_t base = write.nhwc ? static_cast<std::size_t>(y) * static_cast<std::size_t>(w) * step + static_cast<std::size_t>(c)
                                        : (static_cast<std::size_t>(c) * static_cast<std::size_t>(h) + static_cast<std::size_t>(y)) *
                                              static_cast<std::size_t>(w);
    for (int x = 0; x < w; ++x) {
      const T v = row[plan.mirror ? w - 1 - x : x];
      const std::size_t i = base + static_cast<std::size_t>(x) * step;
      if (write.to_float) {
        // ToTensor's float32 value (x / 255 for uint8), then Normalize's (x - mean) / std, in float32 as torch.
        float f = static_cast<float>(v);
        if (write.div255) f = f / 255.0f;
        if (normalize) f = (f - mean) / sd;
        static_cast<float*>(out)[i] = f;
      } else {
        static_cast<T*>(out)[i] = v;
      }
    }
  }
}

}  // namespace

void resize_plane(PlaneType t, const std::uint8_t* src, int w, int h, int out_w, int out_h, const double* box,
                  RasterWorkspace* ws, std::vector<std::uint8_t>* out) {
  switch (t) {
    case PlaneType::kUint8: return resize_typed(src, w, h, out_w, out_h, box, ws, out);
    case PlaneType::kInt32:
      return resize_typed(reinterpret_cast<const std::int32_t*>(src), w, h, out_w, out_h, box, ws, out);
    case PlaneType::kFloat32: return resize_typed(reinterpret_cast<const float*>(src), w, h, out_w, out_h, box, ws, out);
  }
}

void raster_erase(const SamplePlan& plan, const std::vector<Transform>& transforms, PlaneType t, int channels, int w,
                  int h, const RasterWrite& write, void* out) {
  for (const SamplePlan::Erase& e : plan.erase) {
    const auto& x = std::get<RandomErasing>(transforms[static_cast<std::size_t>(e.transform)]);
    Rng normal(e.seed);
    for (int c = 0; c < channels; ++c) {
      for (int y = e.box.y; y < e.box.y + e.box.height; ++y) {
        for (int i = e.box.x; i < e.box.x + e.box.width; ++i) {
          const float v = x.random_values ? static_cast<float>(normal.normal())
                                          : x.value[x.value.size() == 1 ? 0 : static_cast<std::size_t>(c)];
          const std::size_t at = write.nhwc ? (static_cast<std::size_t>(y) * static_cast<std::size_t>(w) + static_cast<std::size_t>(i)) *
                                                      static_cast<std::size_t>(channels) + static_cast<std::size_t>(c)
                                            : (static_cast<std::size_t>(c) * static_cast<std::size_t>(h) + static_cast<std::size_t>(y)) *
                                                      static_cast<std::size_t>(w) + static_cast<std::size_t>(i);
          if (write.to_float || t == PlaneType::kFloat32) {
            static_cast<float*>(out)[at] = v;
          } else if (t == PlaneType::kInt32) {
            static_cast<std::int32_t*>(out)[at] = static_cast<std::int32_t>(v);
          } else {
            static_cast<std::uint8_t*>(out)[at] = static_cast<std::uint8_t>(static_cast<int>(v));
          }
        }
      }
    }
  }
}

void raster_out_size(const SamplePlan& plan, int w, int h, int* out_w, int* out_h) {
  *out_w = w, *out_h = h;
  for (const Step& s : plan.steps) {
    *out_w = s.kind == Step::kCrop ? s.box.width : s.width;
    *out_h = s.kind == Step::kCrop ? s.box.height : s.height;
  }
}

void run_raster_plan(const SamplePlan& plan, PlaneType t, const std::uint8_t* src, int channels, int src_w, int src_h,
                     const RasterWrite& write, RasterWorkspace* ws, void* out) {
  const int bytes = plane_bytes(t);
  const std::size_t plane = static_cast<std::size_t>(src_w) * static_cast<std::size_t>(src_h) * static_cast<std::size_t>(bytes);
  for (int c = 0; c < channels; ++c) {
    const std::uint8_t* p = src + plane * static_cast<std::size_t>(c);
    int w = src_w, h = src_h;
    std::vector<std::uint8_t>* cur = nullptr;
    for (const Step& s : plan.steps) {
      std::vector<std::uint8_t>* dst = cur == &ws->a ? &ws->b : &ws->a;
      if (s.kind == Step::kCrop) {
        crop_plane(p, w, h, bytes, s.box, dst);
        w = s.box.width, h = s.box.height;
      } else {
        resize_plane(t, p, w, h, s.width, s.height, s.has_src_box ? s.src_box : nullptr, ws, dst);
        w = s.width, h = s.height;
      }
      cur = dst;
      p = cur->data();
    }
    SamplePlan flips;  // the flips still to apply: none once the warps ran
    flips.mirror = plan.mirror, flips.vflip = plan.vflip;
    for (const ImageOp& op : plan.image_ops) {
      if (op.kind != ImageOp::kAffine) continue;
      if (flips.mirror || flips.vflip) {
        std::vector<std::uint8_t>* dst = cur == &ws->a ? &ws->b : &ws->a;
        flip_plane(p, w, h, bytes, flips.mirror, flips.vflip, dst);
        flips.mirror = flips.vflip = false;
        cur = dst;
        p = cur->data();
      }
      std::vector<std::uint8_t>* dst = cur == &ws->a ? &ws->b : &ws->a;
      dst->resize(static_cast<std::size_t>(w) * static_cast<std::size_t>(h) * static_cast<std::size_t>(bytes));
      pil_affine_plane(t, p, w, h, dst->data(), op.matrix, op.bilinear, op.fill[0]);
      cur = dst;
      p = cur->data();
    }
    switch (t) {
      case PlaneType::kUint8: write_plane(p, w, h, c, channels, flips, write, out); break;
      case PlaneType::kInt32:
        write_plane(reinterpret_cast<const std::int32_t*>(p), w, h, c, channels, flips, write, out);
        break;
      case PlaneType::kFloat32: write_plane(reinterpret_cast<const float*>(p), w, h, c, channels, flips, write, out); break;
    }
  }
}

}  // namespace stoker::detail
