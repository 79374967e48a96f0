// Drawing the image stage's parameters for one sample: what torchvision
// 0.14's ColorJitter, GaussianBlur, RandomRotation, RandomAffine, the
// automatic augmentation policies and RandomErasing decide per image, as
// concrete ImageOps (image_ops.h) or erasing boxes in the sample's plan. The
// draws come from the sample's own generator (seed, epoch, record), never
// from torch's; given the same drawn values the ops equal torchvision's.
#pragma once

#include <string>

#include "stoker/transforms.h"
#include "transform/transform_defs.h"

namespace stoker::detail {

void plan_color_jitter(const ColorJitter& t, PlanState* s);
void plan_gaussian_blur(const GaussianBlur& t, PlanState* s);
void plan_rotation(const RandomRotation& t, PlanState* s);
void plan_affine(const RandomAffine& t, PlanState* s);
void plan_trivial_augment(const TrivialAugmentWide& t, PlanState* s);
void plan_rand_augment(const RandAugment& t, PlanState* s);
void plan_auto_augment(const AutoAugment& t, PlanState* s);
void plan_erasing(const RandomErasing& t, PlanState* s);
void plan_augmix(const AugMix& t, PlanState* s);

// AugMix's mix on `img` (the draws of one sample): mix = w0 * img, then per
// chain mix += weight * chain(img) (its ops by tensor_apply_op), in float32
// as torchvision's forward computes it, truncated to uint8.
void augmix_apply(const SamplePlan::AugMixDraw& d, ImageBuffer* img, ImageOpScratch* scratch);

// AugMix's magnitude table (all_ops or not): op `index` of the table's
// order, entry `bin` of 10, image width x height; *is_signed when given.
PolicyOp augmix_op(bool all_ops, int index, int bin, int width, int height, double* magnitude, bool* is_signed);

// One op of the policies' tables, as torchvision's _apply_op(img, name,
// magnitude) runs it on a width x height PIL image: appended to the plan
// (Identity appends nothing). Throws for an unknown name.
void add_policy_op(const std::string& name, double magnitude, Interpolation interpolation,
                   const std::array<int, 3>& fill, PlanState* s);

// torch.linspace(start, end, steps)[i] in float32, as torch 1.13 computes it
// on the CPU (the policies' magnitude tables).
float torch_linspace(float start, float end, int steps, int i);

// The magnitude table of op `name` in a policy's augmentation space
// ("wide": TrivialAugmentWide's, "rand": RandAugment's and AutoAugment's),
// `num_bins` bins, image width x height: entry `bin`, and whether the op is
// signed. Ops without magnitudes give 0. (A test hook compares every table
// with torchvision's.)
double policy_magnitude(const char* space, const std::string& name, int num_bins, int bin, int width, int height,
                        bool* is_signed);

}  // namespace stoker::detail
