// A sample's plan: every geometric step its transforms take, decided from
// (seed, epoch, record) and the image size in the header, before any pixel
// is decoded.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "image/pixels.h"
#include "transform/image_ops.h"
#include "util/util.h"

namespace stoker::detail {

// One concrete geometric step, in the coordinates of the image before it.
struct Step {
  enum Kind { kCrop, kResize } kind;
  Box box;               // kCrop: may extend past the image: zeros there
  int width, height;     // kResize: output size
  bool has_src_box = false;
  double src_box[4] = {0, 0, 0, 0};  // kResize: fractional source region (x0, y0, x1, y1)
  std::uint8_t fill[3] = {0, 0, 0};  // kCrop: the image's colour past its edges (masks use their own fill)
};

// Everything one sample's transforms do, decided before decoding.
struct SamplePlan {
  // Non-empty: a transform cannot apply to this sample (a RandomCrop larger
  // than the padded image): the sample is an error with this message.
  std::string error;
  Box decode_region;        // the part of the (scaled) source image the steps read
  int scale_eighths = 8;    // decode at scale_eighths/8 (JPEG DCT scaling)
  std::vector<Step> steps;  // applied to the decoded region
  bool mirror = false;      // horizontal flip, applied while writing the output
  bool vflip = false;       // vertical flip, applied while writing the output (rows in reverse)
  // The photometric stage: per-pixel operations drawn for this sample,
  // applied in order to each output row (uint8 RGB) just before the write.
  struct Photometric {
    enum Kind { kGrayscale } kind;
  };
  std::vector<Photometric> photometric;
  // The image stage (image_ops.h): whole-image operations drawn for this
  // sample, applied in order to the final RGB8 image (flips applied first).
  std::vector<ImageOp> image_ops;
  // RandomErasing on the written output: the box, and the drawn
  // transform's index in the list (its value), or a seed for random values.
  struct Erase {
    Box box;
    int transform = 0;
    std::uint64_t seed = 0;
  };
  std::vector<Erase> erase;
  // AugMix's draws (an ImageOp kAugMix refers to one by its index): the
  // original's weight, and per chain its weight and ops (tensor semantics).
  struct AugMixDraw {
    float w0 = 0;
    struct Chain {
      float weight = 0;
      std::vector<std::pair<PolicyOp, double>> ops;
    };
    std::vector<Chain> chains;
    bool bilinear = true;
    bool has_fill = false;
    float fill[3] = {0, 0, 0};
  };
  std::vector<AugMixDraw> augmix;
  // What its lists hold (their capacity), reused from sample to sample.
  std::uint64_t bytes() const {
    std::uint64_t n = capacity_bytes(steps) + capacity_bytes(photometric) + capacity_bytes(image_ops) +
                      capacity_bytes(erase) + capacity_bytes(augmix);
    for (const AugMixDraw& a : augmix) {
      n += capacity_bytes(a.chains);
      for (const AugMixDraw::Chain& c : a.chains) n += capacity_bytes(c.ops);
    }
    return n;
  }
};

}  // namespace stoker::detail
