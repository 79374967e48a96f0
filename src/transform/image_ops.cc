#include "transform/image_ops.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace stoker::detail {

void apply_image_op(const ImageOp& op, ImageBuffer* img, ImageOpScratch* scratch) {
  switch (op.kind) {
    case ImageOp::kGrayscale:
      pil_grayscale(img);
      return;
    case ImageOp::kBrightness:
      pil_brightness(img, op.factor);
      return;
    case ImageOp::kContrast:
      pil_contrast(img, op.factor);
      return;
    case ImageOp::kSaturation:
      pil_saturation(img, op.factor);
      return;
    case ImageOp::kSharpness:
      pil_sharpness(img, op.factor, scratch);
      return;
    case ImageOp::kHue:
      pil_hue(img, op.factor);
      return;
    case ImageOp::kSolarize:
      // pixels i >= threshold are inverted: for an integer i, i >= ceil(threshold)
      pil_solarize(img, static_cast<int>(std::clamp(std::ceil(op.factor), -1.0, 256.0)));
      return;
    case ImageOp::kPosterize:
      pil_posterize(img, static_cast<int>(op.factor));
      return;
    case ImageOp::kInvert:
      pil_invert(img);
      return;
    case ImageOp::kAutocontrast:
      pil_autocontrast(img);
      return;
    case ImageOp::kEqualize:
      pil_equalize(img);
      return;
    case ImageOp::kGaussianBlur:
      gaussian_blur(img, op.kernel_w, op.kernel_h, op.sigma_x, op.sigma_y, scratch);
      return;
    case ImageOp::kAugMix:  // needs the plan's draws: Pipeline::run calls augmix_apply
      return;
    case ImageOp::kAffine:
      pil_affine(img->view(), &scratch->tmp, op.matrix, op.bilinear, op.fill);
      std::swap(*img, scratch->tmp);
      return;
  }
}

}  // namespace stoker::detail
