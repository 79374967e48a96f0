// The image stage: operations on a sample's whole RGB8 image after every
// resize (colour, blur, the policies' ops, affine warps), each reproducing
// what torchvision 0.14 does to a PIL image (Pillow 9.4's C code, or
// torchvision's tensor code where it converts), with parameters drawn per
// sample at plan time (transforms.cc) and applied by the pipeline.
//
// Kernels live by family: pil_color.cc (the ImageEnhance blends, hue, LUT
// ops, autocontrast, equalize), pil_affine.cc (Image.transform AFFINE and the
// matrices torchvision builds), gaussian_blur.cc (torchvision's
// gaussian_blur); image_ops.cc dispatches.
#pragma once

#include <cstdint>
#include <vector>

#include "image/pixels.h"
#include "util/util.h"

namespace stoker::detail {

// One operation with its drawn parameters.
struct ImageOp {
  enum Kind : std::uint8_t {
    kGrayscale,     // PIL convert("L"), copied to 3 channels
    kBrightness,    // ImageEnhance.Brightness(img).enhance(factor)
    kContrast,      // ImageEnhance.Contrast(img).enhance(factor)
    kSaturation,    // ImageEnhance.Color(img).enhance(factor)
    kSharpness,     // ImageEnhance.Sharpness(img).enhance(factor)
    kHue,           // torchvision F_pil.adjust_hue(img, factor), factor in [-0.5, 0.5]
    kSolarize,      // ImageOps.solarize(img, threshold = factor)
    kPosterize,     // ImageOps.posterize(img, bits = factor)
    kInvert,        // ImageOps.invert(img)
    kAutocontrast,  // ImageOps.autocontrast(img)
    kEqualize,      // ImageOps.equalize(img)
    kGaussianBlur,  // torchvision F.gaussian_blur(img, [kernel_w, kernel_h], [sigma_x, sigma_y])
    kAffine,        // img.transform(img.size, AFFINE, matrix, NEAREST|BILINEAR, fillcolor=fill)
    kAugMix,        // AugMix's mix: the plan's augmix[factor] (Pipeline::run applies it)
  };
  Kind kind = kGrayscale;
  double factor = 0;  // the enhance factor, hue factor, solarize threshold or posterize bits
  int kernel_w = 0, kernel_h = 0;
  double sigma_x = 0, sigma_y = 0;
  double matrix[6] = {1, 0, 0, 0, 1, 0};  // kAffine: output (x, y) -> input (a x + b y + c, d x + e y + f)
  bool bilinear = false;
  std::uint8_t fill[3] = {0, 0, 0};
};

// Reusable memory for the kernels (one per worker).
struct ImageOpScratch {
  ImageBuffer tmp;
  std::vector<float> f0, f1;
  ImageBuffer orig, chain;  // AugMix: the original image and a chain's
  std::vector<float> mix;   // AugMix: the float32 mix
  std::uint64_t bytes() const {
    return tmp.bytes() + capacity_bytes(f0) + capacity_bytes(f1) + orig.bytes() + chain.bytes() + capacity_bytes(mix);
  }
};

// Applies `op` to `img` in place (a kernel may build its result in
// scratch->tmp and swap it in).
void apply_image_op(const ImageOp& op, ImageBuffer* img, ImageOpScratch* scratch);

// --- pil_color.cc: Pillow 9.4 exactly (integer paths byte for byte; the
// float blends and HSV round trip as Pillow computes them in C).
void pil_grayscale(ImageBuffer* img);
void pil_brightness(ImageBuffer* img, double factor);
void pil_contrast(ImageBuffer* img, double factor);
void pil_saturation(ImageBuffer* img, double factor);
void pil_sharpness(ImageBuffer* img, double factor, ImageOpScratch* scratch);
void pil_hue(ImageBuffer* img, double hue_factor);
void pil_solarize(ImageBuffer* img, int threshold);
void pil_posterize(ImageBuffer* img, int bits);
void pil_invert(ImageBuffer* img);
void pil_autocontrast(ImageBuffer* img);
void pil_equalize(ImageBuffer* img);

// --- gaussian_blur.cc: torchvision 0.14's gaussian_blur on a PIL image
// (pil_to_tensor, float32 kernel, reflect padding, conv2d, round, uint8).
// allow_avx2 false: the baseline (SSE2) build of the same code (tests
// compare the two).
void gaussian_blur(ImageBuffer* img, int kernel_w, int kernel_h, double sigma_x, double sigma_y,
                   ImageOpScratch* scratch, bool allow_avx2 = true);

// --- pil_affine.cc: Pillow 9.4's ImagingTransform(AFFINE) with NEAREST or
// BILINEAR and a fill colour, output the size of the input.
void pil_affine(const ImageView& src, ImageBuffer* dst, const double matrix[6], bool bilinear,
                const std::uint8_t fill[3]);
// The same warp on a single-channel mask (1 or 2 bytes per pixel), NEAREST.
void pil_affine_mask(const MaskView& src, MaskBuffer* dst, const double matrix[6], int fill);
// The inverse matrix torchvision 0.14's F.affine passes to PIL for a
// width x height image: _get_inverse_affine_matrix(center, angle, translate,
// scale, shear) with F_pil.affine's center (the image centre when `center` is
// null, else center[0..1] in pixels as given to F.affine).
void torchvision_affine_matrix(int width, int height, const double* center, double angle, double tx, double ty,
                               double scale, double shear_x, double shear_y, double out[6]);
// The matrix PIL's Image.rotate(angle, expand=False, center) uses (what
// torchvision's F.rotate on a PIL image runs), `center` null: the image centre.
void pil_rotate_matrix(int width, int height, double angle, const double* center, double out[6]);

// --- functional_tensor.cc: the ops of the policies' tables as torchvision 0.14's
// _apply_op runs them on a uint8 *tensor* image (F_t: _blend, the grid_sample
// warps, the tensor equalize...), which is what AugMix does to a PIL image
// (it converts it with pil_to_tensor first). In place on an RGB8 image.
enum class PolicyOp : std::uint8_t {
  kIdentity, kShearX, kShearY, kTranslateX, kTranslateY, kRotate, kBrightness, kColor, kContrast, kSharpness,
  kPosterize, kSolarize, kAutoContrast, kEqualize, kInvert
};
// `fill` null: torchvision's fill=None (grid_sample's zeros, no mask);
// else the fill colour (its mask-and-blend path).
void tensor_apply_op(ImageBuffer* img, PolicyOp op, double magnitude, bool bilinear, const float* fill,
                     ImageOpScratch* scratch);

}  // namespace stoker::detail
