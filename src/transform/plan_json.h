// A sample's drawn parameters as JSON, for batch provenance
// (Loader::batch_provenance): the image plan (plan.h) and a volume patch's
// (volume/ops.h), each field named as the struct names it.
#pragma once

#include <string>

#include "transform/plan.h"
#include "transform/volume/ops.h"

namespace stoker::detail {

// {"decode_region": [x, y, w, h], "scale_eighths", "steps": [{"crop": [x, y,
// w, h], "fill"} | {"resize": [w, h], "src_box"?}], "mirror", "vflip",
// "photometric": [...], "image_ops": [{"op", ...its parameters}],
// "erase": [{"box", "transform", "seed"}], "augmix": [{"w0", "chains"}]}.
std::string plan_to_json(const SamplePlan& plan);
// {"pre_before", "start", "size", "steps": [{"before", "after", "flip", "k",
// "axes"}], "out_start", "one_class"}.
std::string patch_plan_to_json(const PatchPlan& plan);

// Names in that JSON: ImageOp's kinds ("brightness", "affine", ...) and the
// policies' ops (torchvision's: "ShearX", "Rotate", ...).
const char* image_op_name(ImageOp::Kind kind);
const char* policy_op_name(PolicyOp op);

}  // namespace stoker::detail
