#include "transform/pipeline.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "stoker/status.h"
#include "transform/augment.h"
#include "util/util.h"

namespace stoker::detail {
Pipeline::Pipeline(const std::vector<Transform>& transforms, DType dtype, Layout layout, bool fixed_size, int channels)
    : transforms_(transforms), dtype_(dtype), layout_(layout) {
  OutputSize size;
  const Normalize* normalize = nullptr;
  const char* photometric = nullptr;  // the first photometric or image-stage transform so far
  const char* image_stage = nullptr;  // the first image-stage transform so far
  const char* on_tensor = nullptr;    // the first transform on the output tensor so far
  for (const Transform& t : transforms_) {
    check_transform(t);
    const TransformTraits traits = transform_traits(t);
    if (normalize && !traits.on_tensor) {
      invalid(std::string("Normalize must be the last transform (it acts on the tensor after ToTensor); only "
                          "RandomErasing may follow it, not ") +
              transform_name(t));
    }
    if (on_tensor && !traits.on_tensor && !std::holds_alternative<Normalize>(t)) {
      invalid(std::string(transform_name(t)) + " after " + on_tensor +
              ": RandomErasing acts on the output tensor, so only Normalize or RandomErasing may follow it");
    }
    // NOTE: the photometric stage runs on the output rows, after every
    // resize; a resize listed after it would see other pixels than
    // torchvision's (crops and flips commute with it exactly). The image
    // stage runs on the final image: no crop or flip may follow it either.
    if (photometric && traits.resamples) {
      invalid(std::string(transform_name(t)) + " after " + photometric +
              ": photometric transforms apply to the output, so they must follow every resize");
    }
    // NOTE: a crop's padding is part of the image torchvision greys: a
    // coloured fill padded after RandomGrayscale stays coloured there, and
    // would be greyed here with the rest of the output row.
    if (const auto* c = std::get_if<RandomCrop>(&t);
        c && photometric && (c->pad_if_needed || c->padding != std::array<int, 4>{0, 0, 0, 0}) &&
        !(c->fill[0] == c->fill[1] && c->fill[1] == c->fill[2])) {
      invalid(std::string("RandomCrop with a coloured fill after ") + photometric +
              ": its padding would be greyed with the output rows (torchvision keeps the fill's colour); put the "
              "RandomCrop first, or use a grey fill");
    }
    // NOTE: RandomErasing writes its value into the output tensor as it is;
    // torchvision would normalise an erased value that a Normalize follows.
    if (on_tensor && std::holds_alternative<Normalize>(t)) {
      invalid(std::string("Normalize after ") + on_tensor +
              ": the erased value would not be normalised as torchvision's is; put RandomErasing after Normalize");
    }
    if (image_stage && traits.geometric) {
      invalid(std::string(transform_name(t)) + " after " + image_stage + ": " + image_stage +
              " applies to the final image, so crops, resizes and flips must come before it");
    }
    if (!photometric && (traits.photometric || traits.image_stage)) photometric = transform_name(t);
    if (!image_stage && traits.image_stage) image_stage = transform_name(t);
    if (!on_tensor && traits.on_tensor) on_tensor = transform_name(t);
    if (traits.image_stage) has_image_stage_ = true;
    size = output_size(t, size);
    if (const auto* n = std::get_if<Normalize>(&t)) {
      if (dtype_ != DType::kFloat32) invalid("Normalize requires dtype float32 (got uint8)");
      if (channels == 3 && ((n->mean.size() != 1 && n->mean.size() != 3) || (n->std.size() != 1 && n->std.size() != 3))) {
        invalid("Normalize: mean and std need 1 or 3 values for an RGB image, got " + std::to_string(n->mean.size()) +
                " and " + std::to_string(n->std.size()));
      }
      normalize = n;
    }
    if (const auto* e = std::get_if<RandomErasing>(&t); e && e->random_values && dtype_ != DType::kFloat32) {
      invalid("RandomErasing: value='random' requires dtype float32 (normal values do not fit uint8)");
    }
  }
  out_h_ = size.fixed ? size.height : 0;
  out_w_ = size.fixed ? size.width : 0;
  if (!size.fixed && fixed_size) {
    invalid("transforms must give every sample the same size to batch them: end with RandomResizedCrop, "
            "CenterCrop or Resize((h, w)), after any Resize(int)");
  }
  if (channels != 3) normalize = nullptr;  // a stored-channel raster: its field normalises (transform/raster.h)
  float mean[3], stdev[3];
  for (std::size_t c = 0; normalize && c < 3; ++c) {
    mean[c] = normalize->mean[normalize->mean.size() == 1 ? 0 : c];
    stdev[c] = normalize->std[normalize->std.size() == 1 ? 0 : c];
  }
  table_.build(normalize ? mean : nullptr, normalize ? stdev : nullptr);
}

std::size_t Pipeline::sample_bytes() const { return sample_bytes(out_w_, out_h_); }

std::size_t Pipeline::sample_bytes(int width, int height) const {
  return static_cast<std::size_t>(height) * static_cast<std::size_t>(width) * 3 *
         (dtype_ == DType::kFloat32 ? sizeof(float) : 1);
}

void Pipeline::sample_size(const SamplePlan& plan, int width, int height, int* out_width, int* out_height) {
  *out_width = width;
  *out_height = height;
  if (plan.steps.empty()) return;
  const Step& s = plan.steps.back();
  *out_width = s.kind == Step::kCrop ? s.box.width : s.width;
  *out_height = s.kind == Step::kCrop ? s.box.height : s.height;
}

void Pipeline::plan(int width, int height, Rng* rng, SamplePlan* plan, bool allow_scale) const {
  plan_geometry(width, height, rng, plan);
  plan_image_read(width, height, plan, allow_scale);
}

void Pipeline::plan_geometry(int width, int height, Rng* rng, SamplePlan* plan) const {
  plan->error.clear();
  plan->steps.clear();
  plan->photometric.clear();
  plan->image_ops.clear();
  plan->erase.clear();
  plan->augmix.clear();
  plan->mirror = false;
  plan->vflip = false;
  plan->scale_eighths = 8;
  plan->decode_region = {0, 0, width, height};
  PlanState state{width, height, plan, rng, 0};
  for (const Transform& t : transforms_) {
    plan_transform(t, &state);
    if (!plan->error.empty()) return;
    ++state.index;
  }
  // An image stage of grayscale conversions alone runs on the output rows
  // (per pixel, commutes with the flips): no whole image is built for it.
  const bool rows_only = std::all_of(plan->image_ops.begin(), plan->image_ops.end(),
                                     [](const ImageOp& op) { return op.kind == ImageOp::kGrayscale; });
  if (rows_only) {
    for (std::size_t i = 0; i < plan->image_ops.size(); ++i) {
      plan->photometric.push_back({SamplePlan::Photometric::kGrayscale});
    }
    plan->image_ops.clear();
  }
}

void plan_image_read(int width, int height, SamplePlan* plan, bool allow_scale) {
  // DCT-scaled decode: the smallest M/8 of 1/8, 2/8 and 4/8 that keeps the
  // first resize's input at least as large as its output.
  // NOTE: libjpeg-turbo also scales by 3/8, 5/8, 6/8 and 7/8, but with C
  // IDCTs (no SIMD): measured on the sample set (sample_bench --decode-scale
  // auto), allowing them made the region decode 36% slower, not faster.
  if (allow_scale && !plan->steps.empty()) {
    const bool crop_first = plan->steps[0].kind == Step::kCrop;
    const std::size_t r = crop_first ? 1 : 0;
    if (r < plan->steps.size() && plan->steps[r].kind == Step::kResize) {
      Box box = crop_first ? plan->steps[0].box : Box{0, 0, width, height};
      const bool inside = box.x >= 0 && box.y >= 0 && box.x + box.width <= width && box.y + box.height <= height;
      const int ow = plan->steps[r].width, oh = plan->steps[r].height;
      int m = std::max((8 * ow + box.width - 1) / box.width, (8 * oh + box.height - 1) / box.height);
      m = m <= 2 ? m : (m <= 4 ? 4 : 8);
      if (m < 8 && inside) {
        // The box on the image decoded at M/8 (ceil(W*M/8) x ceil(H*M/8)) is
        // fractional: resample exactly that region (Pillow's resize box), and
        // decode it with a margin for the filter's support (one pixel, or
        // the remaining shrink factor when it exceeds one).
        const double f = m / 8.0;
        const int sw = (width * m + 7) / 8, sh = (height * m + 7) / 8;
        const double fx0 = box.x * f, fy0 = box.y * f;
        const double fx1 = std::min<double>(sw, (box.x + box.width) * f);
        const double fy1 = std::min<double>(sh, (box.y + box.height) * f);
        const int mx = static_cast<int>(std::ceil(std::max(1.0, (fx1 - fx0) / ow))) + 1;
        const int my = static_cast<int>(std::ceil(std::max(1.0, (fy1 - fy0) / oh))) + 1;
        const int x0 = std::max(0, static_cast<int>(std::floor(fx0)) - mx);
        const int y0 = std::max(0, static_cast<int>(std::floor(fy0)) - my);
        const int x1 = std::min(sw, static_cast<int>(std::ceil(fx1)) + mx);
        const int y1 = std::min(sh, static_cast<int>(std::ceil(fy1)) + my);
        plan->scale_eighths = m;
        plan->decode_region = {x0, y0, x1 - x0, y1 - y0};
        plan->steps.erase(plan->steps.begin(), plan->steps.begin() + static_cast<std::ptrdiff_t>(r));
        Step& rs = plan->steps[0];
        rs.has_src_box = true;
        rs.src_box[0] = fx0 - x0;
        rs.src_box[1] = fy0 - y0;
        rs.src_box[2] = fx1 - x0;
        rs.src_box[3] = fy1 - y0;
        return;
      }
    }
  }
  // Decode only what the first crop reads.
  plan->decode_region = {0, 0, width, height};
  if (!plan->steps.empty() && plan->steps[0].kind == Step::kCrop) {
    Box& b = plan->steps[0].box;
    const int x0 = std::max(b.x, 0), y0 = std::max(b.y, 0);
    const int x1 = std::min(b.x + b.width, width), y1 = std::min(b.y + b.height, height);
    if (x1 > x0 && y1 > y0) {
      plan->decode_region = {x0, y0, x1 - x0, y1 - y0};
      b.x -= x0;
      b.y -= y0;
      if (b.x == 0 && b.y == 0 && b.width == x1 - x0 && b.height == y1 - y0) plan->steps.erase(plan->steps.begin());
    }
  }
}

// Writes output rows into one sample of the batch slot. As a RowSink, the
// last resize hands it each row while the row is hot.
class Pipeline::OutputWriter final : public RowSink {
 public:
  OutputWriter(const Pipeline& p, const SamplePlan& plan, Workspace* ws, void* out, int width, int height,
               bool flips = true)
      : p_(p),
        plan_(plan),
        mirror_(flips && plan.mirror),
        vflip_(flips && plan.vflip),
        out_(out),
        width_(width),
        height_(height) {
    const std::size_t need = kRowPad + 3 * static_cast<std::size_t>(width) + kRowPad;
    if (ws->row.size() < need) ws->row.resize(need);
    row_ = ws->row.data() + kRowPad;
  }
  // Before the sample counts as written and another thread hands the batch out.
  ~OutputWriter() { finish_output_rows(); }
  std::uint8_t* row(int /*y*/) override { return row_; }
  void done(int y) override {
    if (!plan_.photometric.empty()) apply_photometric(plan_, row_, width_);
    write_output_row(row_, width_, height_, vflip_ ? height_ - 1 - y : y, mirror_, p_.dtype_, p_.layout_, p_.table_,
                     out_);
  }
  // A row from elsewhere: copied into the padded buffer first.
  void write(const std::uint8_t* pixels, int y) {
    std::memcpy(row_, pixels, 3 * static_cast<std::size_t>(width_));
    done(y);
  }

 private:
  const Pipeline& p_;
  const SamplePlan& plan_;
  bool mirror_, vflip_;
  void* out_;
  int width_, height_;
  std::uint8_t* row_;
};

namespace {

// `src` into `dst` with the plan's flips applied: the image stage's ops see
// the image as torchvision's do (after RandomHorizontalFlip/VerticalFlip).
void copy_flipped(const ImageView& src, bool mirror, bool vflip, ImageBuffer* dst) {
  dst->reset(src.width, src.height);
  for (int y = 0; y < src.height; ++y) {
    const std::uint8_t* in = src.row(vflip ? src.height - 1 - y : y);
    std::uint8_t* o = dst->row(y);
    if (!mirror) {
      std::memcpy(o, in, 3 * static_cast<std::size_t>(src.width));
      continue;
    }
    for (int x = 0, r = src.width - 1; x < src.width; ++x, --r) {
      o[3 * x] = in[3 * r];
      o[3 * x + 1] = in[3 * r + 1];
      o[3 * x + 2] = in[3 * r + 2];
    }
  }
}

}  // namespace

void Pipeline::run(const SamplePlan& plan, const ImageView& decoded, Workspace* ws, void* out) const {
  const bool stage = !plan.image_ops.empty();
  ImageView view = decoded;
  const ImageBuffer* current = nullptr;  // the buffer `view` lives in, if one of ws's
  auto spare = [&]() -> ImageBuffer* {
    for (ImageBuffer* b : {&ws->a, &ws->b, &ws->pad}) {
      if (b != current) return b;
    }
    return nullptr;
  };
  bool written = false;
  for (std::size_t i = 0; i < plan.steps.size(); ++i) {
    const Step& s = plan.steps[i];
    if (s.kind == Step::kCrop) {
      const Box& b = s.box;
      if (b.x >= 0 && b.y >= 0 && b.x + b.width <= view.width && b.y + b.height <= view.height) {
        view = ImageView{view.row(b.y) + 3 * b.x, b.width, b.height, view.stride};
        continue;
      }
      ImageBuffer* dst = spare();  // padding outside the image: the step's fill
      dst->reset(b.width, b.height);
      for (int y = 0; y < b.height; ++y) {
        std::uint8_t* o = dst->row(y);
        for (int x = 0; x < b.width; ++x, o += 3) std::memcpy(o, s.fill, 3);
      }
      const int x0 = std::max(b.x, 0), x1 = std::min(b.x + b.width, view.width);
      const int y0 = std::max(b.y, 0), y1 = std::min(b.y + b.height, view.height);
      for (int y = y0; y < y1 && x1 > x0; ++y) {
        std::memcpy(dst->row(y - b.y) + 3 * (x0 - b.x), view.row(y) + 3 * x0, static_cast<std::size_t>(x1 - x0) * 3);
      }
      view = dst->view();
      current = dst;
    } else if (i + 1 == plan.steps.size() && !stage) {  // the last step: its rows go straight to the output
      OutputWriter writer(*this, plan, ws, out, s.width, s.height);
      resize_bilinear(view, s.width, s.height, &ws->resize, &writer, Simd::kAvx512, s.has_src_box ? s.src_box : nullptr);
      written = true;
      break;
    } else {
      ImageBuffer* dst = spare();
      resize_bilinear(view, s.width, s.height, &ws->resize, dst, Simd::kAvx512, s.has_src_box ? s.src_box : nullptr);
      view = dst->view();
      current = dst;
    }
  }
  if (!written && !stage) {
    OutputWriter writer(*this, plan, ws, out, view.width, view.height);
    for (int y = 0; y < view.height; ++y) writer.write(view.row(y), y);
  } else if (stage) {
    // The image stage: the final image, flipped, then each op in order.
    copy_flipped(view, plan.mirror, plan.vflip, &ws->stage);
    for (const ImageOp& op : plan.image_ops) {
      if (op.kind == ImageOp::kAugMix) {
        augmix_apply(plan.augmix[static_cast<std::size_t>(op.factor)], &ws->stage, &ws->ops);
      } else {
        apply_image_op(op, &ws->stage, &ws->ops);
      }
    }
    OutputWriter writer(*this, plan, ws, out, ws->stage.width, ws->stage.height, /*flips=*/false);
    for (int y = 0; y < ws->stage.height; ++y) writer.write(ws->stage.row(y), y);
  }
  if (!plan.erase.empty()) {
    int w = 0, h = 0;
    sample_size(plan, decoded.width, decoded.height, &w, &h);
    erase(plan, out, w, h);
  }
}

void Pipeline::erase(const SamplePlan& plan, void* out, int width, int height) const {
  // F.erase(img, i, j, h, w, v): img[..., i:i+h, j:j+w] = v, on the output
  // tensor in its dtype and layout.
  const int H = height, W = width;
  const bool nchw = layout_ == Layout::kNCHW;
  for (const SamplePlan::Erase& e : plan.erase) {
    const auto& t = std::get<RandomErasing>(transforms_[static_cast<std::size_t>(e.transform)]);
    Rng normal(e.seed);
    for (int c = 0; c < 3; ++c) {
      for (int y = e.box.y; y < e.box.y + e.box.height; ++y) {
        for (int x = e.box.x; x < e.box.x + e.box.width; ++x) {
          // torch's normal_() over [3, h, w] in that order; here stoker's generator (Box-Muller).
          const float v = t.random_values ? static_cast<float>(normal.normal())
                                          : t.value[t.value.size() == 1 ? 0 : static_cast<std::size_t>(c)];
          const std::size_t at = nchw ? (static_cast<std::size_t>(c) * H + y) * W + x
                                      : (static_cast<std::size_t>(y) * W + x) * 3 + c;
          if (dtype_ == DType::kFloat32) {
            static_cast<float*>(out)[at] = v;
          } else {
            static_cast<std::uint8_t*>(out)[at] = static_cast<std::uint8_t>(static_cast<int>(v));
          }
        }
      }
    }
  }
}

}  // namespace stoker::detail
