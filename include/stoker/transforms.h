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
// side. Otherwise the output is exactly height x width.
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

using Transform = std::variant<RandomResizedCrop, Resize, CenterCrop, RandomHorizontalFlip, RandomVerticalFlip,
                               RandomGrayscale, Normalize>;

}  // namespace stoker
