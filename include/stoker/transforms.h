// Transforms, named and parameterised as torchvision names them, with the same
// semantics as torchvision 0.14 applied to a PIL image (bilinear resampling is
// PIL's antialiased bilinear, reproduced bit-exactly), followed by ToTensor.
#pragma once

#include <array>
#include <variant>
#include <vector>

namespace stoker {

// torchvision.transforms.RandomResizedCrop(size, scale, ratio), bilinear.
// Picks a box with area fraction in `scale` and aspect ratio (w/h) in `ratio`
// (log-uniform), 10 tries, then torchvision's central fallback; resizes the
// box to height x width.
struct RandomResizedCrop {
  int height = 224;
  int width = 224;
  std::array<double, 2> scale{0.08, 1.0};
  std::array<double, 2> ratio{3.0 / 4.0, 4.0 / 3.0};
};

// torchvision.transforms.Resize(size), bilinear with antialias (PIL).
// width <= 0: `height` is the size of the shorter side and the aspect ratio is
// kept (torchvision's int size), optionally capped by max_size on the longer
// side. Otherwise the output is exactly height x width. height and width
// both 0 with max_size > 0 is torchvision.transforms.v2's Resize(size=None,
// max_size): the longer side becomes max_size, the shorter
// int(max_size * shorter / longer).
struct Resize {
  int height = 256;
  int width = 0;
  int max_size = 0;  // 0: no cap
};

// torchvision.transforms.CenterCrop(size); pads with zeros when the image is
// smaller than the crop, as torchvision does.
struct CenterCrop {
  int height = 224;
  int width = 224;
};

// torchvision.transforms.RandomCrop(size, padding, pad_if_needed, fill,
// padding_mode="constant"): the image padded by `padding` (left, top, right,
// bottom), then with pad_if_needed on both sides of a dimension smaller
// than the crop by the difference (as torchvision pads it), then a crop of
// height x width at a uniformly drawn offset. A sample whose padded image is
// smaller than the crop is a sample error. Padding is `fill` for the image,
// a Mask field's own fill for masks.
struct RandomCrop {
  int height = 224;
  int width = 224;
  std::array<int, 4> padding{0, 0, 0, 0};
  bool pad_if_needed = false;
  std::array<int, 3> fill{0, 0, 0};
};

// torchvision.transforms.v2.RandomShortestSize(min_size, max_size): the
// shorter side resized to one of `min_size` (drawn uniformly), the longer
// capped at max_size (0: none), the aspect ratio kept: both sides scaled by
// r = min(m / shorter, max_size / longer), truncated (int(w * r)).
struct RandomShortestSize {
  std::vector<int> min_size{800};
  int max_size = 0;
};

// torchvision.transforms.RandomHorizontalFlip(p).
struct RandomHorizontalFlip {
  double p = 0.5;
};

// torchvision.transforms.RandomVerticalFlip(p).
struct RandomVerticalFlip {
  double p = 0.5;
};

// torchvision.transforms.RandomGrayscale(p): with probability p the image
// becomes gray, kept as 3 channels (PIL's convert("L"): L = (19595 R +
// 38470 G + 7471 B + 2^15) >> 16). A photometric transform: applied to each
// output row before the write, so no resize may follow it (a crop or flip
// may).
struct RandomGrayscale {
  double p = 0.1;
};

// torchvision.transforms.Normalize(mean, std) on the ToTensor output
// (values in [0, 1]); one value per channel (3), or one for all.
// Only valid with dtype float32 and only as the last transform.
struct Normalize {
  std::vector<float> mean;
  std::vector<float> std;
};

// --- The image stage: operations on the whole image after every resize,
// as torchvision 0.14 applies them to a PIL image (src/transform/image_ops.h
// says which are byte-exact and which within 1/255). No crop, resize or flip
// may follow one of them; their randomness is drawn per sample like the rest.

// Resampling for the warps (RandomRotation, RandomAffine, the policies).
enum class Interpolation { kNearest, kBilinear };

// torchvision.transforms.ColorJitter(brightness, contrast, saturation, hue):
// each factor drawn uniformly from its range, the four applied in a random
// order (torch.randperm(4) as torchvision draws it); a range equal to its
// identity ([1, 1], hue [0, 0]) is off.
struct ColorJitter {
  std::array<double, 2> brightness{1.0, 1.0};
  std::array<double, 2> contrast{1.0, 1.0};
  std::array<double, 2> saturation{1.0, 1.0};
  std::array<double, 2> hue{0.0, 0.0};
};

// torchvision.transforms.Grayscale(num_output_channels=3): PIL's convert("L")
// on every sample (the batch keeps 3 channels, so only 3 is accepted).
struct Grayscale {
  int num_output_channels = 3;
};

// torchvision.transforms.GaussianBlur(kernel_size, sigma): sigma drawn
// uniformly from [sigma[0], sigma[1]] per sample, the same for x and y.
struct GaussianBlur {
  int kernel_w = 3;
  int kernel_h = 3;
  std::array<double, 2> sigma{0.1, 2.0};
};

// torchvision.transforms.RandomSolarize(threshold, p): pixels >= threshold inverted.
struct RandomSolarize {
  double threshold = 128;
  double p = 0.5;
};

// torchvision.transforms.RandomPosterize(bits, p): keep the top `bits` bits.
struct RandomPosterize {
  int bits = 4;
  double p = 0.5;
};

// torchvision.transforms.RandomAutocontrast(p): ImageOps.autocontrast.
struct RandomAutocontrast {
  double p = 0.5;
};

// torchvision.transforms.RandomEqualize(p): ImageOps.equalize.
struct RandomEqualize {
  double p = 0.5;
};

// torchvision.transforms.RandomAdjustSharpness(sharpness_factor, p).
struct RandomAdjustSharpness {
  double sharpness_factor = 2.0;
  double p = 0.5;
};

// torchvision.transforms.RandomInvert(p).
struct RandomInvert {
  double p = 0.5;
};

// torchvision.transforms.RandomRotation(degrees, interpolation, expand=False,
// center, fill): the angle drawn uniformly from [degrees[0], degrees[1]],
// PIL's Image.rotate about the centre (or `center`, in pixels), `fill` outside.
struct RandomRotation {
  std::array<double, 2> degrees{0.0, 0.0};
  Interpolation interpolation = Interpolation::kNearest;
  bool has_center = false;
  std::array<double, 2> center{0.0, 0.0};
  std::array<int, 3> fill{0, 0, 0};
};

// torchvision.transforms.RandomAffine(degrees, translate, scale, shear,
// interpolation, fill, center), drawn as torchvision's get_params draws them.
struct RandomAffine {
  std::array<double, 2> degrees{0.0, 0.0};
  std::array<double, 2> translate{0.0, 0.0};  // max fraction of width, height; 0: none
  std::array<double, 2> scale{1.0, 1.0};
  std::array<double, 4> shear{0.0, 0.0, 0.0, 0.0};  // x range, then y range
  Interpolation interpolation = Interpolation::kNearest;
  bool has_center = false;
  std::array<double, 2> center{0.0, 0.0};
  std::array<int, 3> fill{0, 0, 0};
};

// torchvision.transforms.TrivialAugmentWide(num_magnitude_bins,
// interpolation, fill): one op of its table with a uniformly drawn magnitude.
struct TrivialAugmentWide {
  int num_magnitude_bins = 31;
  Interpolation interpolation = Interpolation::kNearest;
  std::array<int, 3> fill{0, 0, 0};
};

// torchvision.transforms.RandAugment(num_ops, magnitude, num_magnitude_bins,
// interpolation, fill).
struct RandAugment {
  int num_ops = 2;
  int magnitude = 9;
  int num_magnitude_bins = 31;
  Interpolation interpolation = Interpolation::kNearest;
  std::array<int, 3> fill{0, 0, 0};
};

// torchvision.transforms.AutoAugment(policy, interpolation, fill): the
// learned sub-policies of IMAGENET, CIFAR10 or SVHN.
enum class AutoAugmentPolicy { kImageNet, kCifar10, kSvhn };
struct AutoAugment {
  AutoAugmentPolicy policy = AutoAugmentPolicy::kImageNet;
  Interpolation interpolation = Interpolation::kNearest;
  std::array<int, 3> fill{0, 0, 0};
};

// torchvision.transforms.AugMix(severity, mixture_width, chain_depth, alpha,
// all_ops, interpolation, fill): mixture_width chains of 1-3 (or chain_depth)
// ops of its table run on the image as a uint8 tensor (torchvision's tensor
// ops: AugMix converts a PIL image with pil_to_tensor first), blended with
// the original by Dirichlet(alpha) weights, in float32, truncated to uint8.
struct AugMix {
  int severity = 3;
  int mixture_width = 3;
  int chain_depth = -1;  // <= 0: 1 to 3 per chain, drawn
  double alpha = 1.0;
  bool all_ops = true;
  Interpolation interpolation = Interpolation::kBilinear;
  bool has_fill = false;  // false: torchvision's fill=None
  std::array<float, 3> fill{0.0f, 0.0f, 0.0f};
};

// torchvision.transforms.RandomErasing(p, scale, ratio, value) on the output
// tensor (after Normalize, when there is one): a box of area fraction in
// `scale` and aspect ratio (h / w) in `ratio` set to `value` (1 or 3
// values), or with random_values to standard normal values drawn from
// stoker's generator (not torch's). Only RandomErasing may follow Normalize.
struct RandomErasing {
  double p = 0.5;
  std::array<double, 2> scale{0.02, 0.33};
  std::array<double, 2> ratio{0.3, 3.3};
  std::vector<float> value{0.0f};
  bool random_values = false;
};

struct RandomApply;

using Transform = std::variant<RandomResizedCrop, Resize, CenterCrop, RandomHorizontalFlip, RandomVerticalFlip,
                               RandomCrop, RandomShortestSize,
                               RandomGrayscale, Normalize, ColorJitter, Grayscale, GaussianBlur, RandomSolarize,
                               RandomPosterize, RandomAutocontrast, RandomEqualize, RandomAdjustSharpness, RandomInvert,
                               RandomRotation, RandomAffine, TrivialAugmentWide, RandAugment, AutoAugment,
                               RandomErasing, RandomApply, AugMix>;

// torchvision.transforms.RandomApply(transforms, p): the listed image-stage
// transforms (ColorJitter, GaussianBlur, ...), all or none, with probability p.
struct RandomApply {
  std::vector<Transform> transforms;
  double p = 0.5;
};

}  // namespace stoker
