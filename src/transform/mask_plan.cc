#include "transform/mask_plan.h"

#include <algorithm>
#include <cstring>

#include "transform/image_ops.h"
#include "transform/nearest.h"

namespace stoker::detail {
namespace {

std::uint32_t pixel_at(const MaskView& v, int x, int y) {
  const std::uint8_t* p = v.row(y) + static_cast<std::ptrdiff_t>(x) * v.bytes_per_pixel;
  if (v.bytes_per_pixel == 1) return *p;
  std::uint16_t q;
  std::memcpy(&q, p, 2);
  return q;
}

// A crop that extends past the mask: a copy, `fill` outside.
void padded_crop(const MaskView& v, const Box& b, int fill, MaskBuffer* dst) {
  const int bpp = v.bytes_per_pixel;
  dst->reset(b.width, b.height, bpp);
  for (int y = 0; y < b.height; ++y) {
    std::uint8_t* o = dst->row(y);
    if (bpp == 1) {
      std::memset(o, fill, static_cast<std::size_t>(b.width));
    } else {
      const auto f = static_cast<std::uint16_t>(fill);
      for (int x = 0; x < b.width; ++x) std::memcpy(o + 2 * x, &f, 2);
    }
  }
  const int x0 = std::max(b.x, 0), x1 = std::min(b.x + b.width, v.width);
  const int y0 = std::max(b.y, 0), y1 = std::min(b.y + b.height, v.height);
  for (int y = y0; y < y1 && x1 > x0; ++y) {
    std::memcpy(dst->row(y - b.y) + static_cast<std::ptrdiff_t>(x0 - b.x) * bpp,
                v.row(y) + static_cast<std::ptrdiff_t>(x0) * bpp, static_cast<std::size_t>(x1 - x0) * bpp);
  }
}

}  // namespace

void run_mask_plan(const SamplePlan& geo, const MaskView& src, int fill, MaskWorkspace* ws, void* out,
                   int out_bytes_per_pixel) {
  MaskView view = src;
  const MaskBuffer* current = nullptr;
  auto spare = [&]() -> MaskBuffer* { return current == &ws->a ? &ws->b : &ws->a; };
  for (const Step& s : geo.steps) {
    if (s.kind == Step::kCrop) {
      const Box& b = s.box;
      if (b.x >= 0 && b.y >= 0 && b.x + b.width <= view.width && b.y + b.height <= view.height) {
        view = MaskView{view.row(b.y) + static_cast<std::ptrdiff_t>(b.x) * view.bytes_per_pixel, b.width, b.height,
                        view.stride, view.bytes_per_pixel};
        continue;
      }
      MaskBuffer* dst = spare();
      padded_crop(view, b, fill, dst);
      view = dst->view();
      current = dst;
    } else {
      MaskBuffer* dst = spare();
      resize_nearest(view, s.width, s.height, dst, s.has_src_box ? s.src_box : nullptr);
      view = dst->view();
      current = dst;
    }
  }
  bool mirror = geo.mirror, vflip = geo.vflip;
  // The image stage's warps (RandomRotation, RandomAffine), after the flips
  // as for the image: PIL's nearest warp with the mask's fill (as v2 warps
  // masks, whatever the image's interpolation).
  const bool warps = std::any_of(geo.image_ops.begin(), geo.image_ops.end(),
                                 [](const ImageOp& op) { return op.kind == ImageOp::kAffine; });
  if (warps) {
    MaskBuffer* dst = spare();
    const int bpp = view.bytes_per_pixel;
    dst->reset(view.width, view.height, bpp);
    for (int y = 0; y < view.height; ++y) {
      const std::uint8_t* in = view.row(vflip ? view.height - 1 - y : y);
      std::uint8_t* o = dst->row(y);
      for (int x = 0; x < view.width; ++x) {
        std::memcpy(o + static_cast<std::ptrdiff_t>(x) * bpp,
                    in + static_cast<std::ptrdiff_t>(mirror ? view.width - 1 - x : x) * bpp, static_cast<std::size_t>(bpp));
      }
    }
    view = dst->view();
    current = dst;
    mirror = vflip = false;
    for (const ImageOp& op : geo.image_ops) {
      if (op.kind != ImageOp::kAffine) continue;
      MaskBuffer* next = spare();
      pil_affine_mask(view, next, op.matrix, fill);
      view = next->view();
      current = next;
    }
  }
  const int w = view.width, h = view.height;
  for (int y = 0; y < h; ++y) {
    const int sy = vflip ? h - 1 - y : y;
    if (out_bytes_per_pixel == 1) {
      auto* o = static_cast<std::uint8_t*>(out) + static_cast<std::ptrdiff_t>(y) * w;
      const std::uint8_t* in = view.row(sy);
      if (!mirror) {
        std::memcpy(o, in, static_cast<std::size_t>(w));
      } else {
        for (int x = 0; x < w; ++x) o[x] = in[w - 1 - x];
      }
    } else {
      auto* o = static_cast<std::int32_t*>(out) + static_cast<std::ptrdiff_t>(y) * w;
      for (int x = 0; x < w; ++x) o[x] = static_cast<std::int32_t>(pixel_at(view, mirror ? w - 1 - x : x, sy));
    }
  }
}

}  // namespace stoker::detail
