// Each transform's one definition, found through one table (transforms.cc:
// a Def<T> per alternative of stoker::Transform): its name as Python and the
// options JSON name it, its docstring (Python's __doc__), its parameter
// checks, its effect on the output size, the geometric step it plans for a
// sample, its JSON and its Python repr.
// Adding a transform: its struct in include/stoker/transforms.h, its Def<T>
// (kDoc included: it does not compile without one), its Python constructor
// (python/src/bind_transforms.cc: transform_class<T> names and documents
// it), its name where type checkers read it (python/stoker/__init__.py's
// import and __all__, the stub's class and _Transform: tests/python/
// test_names.py fails until they list it, from _stoker._transform_names();
// the runtime unions and type tuples are made from the variant) and its
// tests. Enum parameters are named by stoker/names.h.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "order/rng.h"
#include "stoker/transforms.h"
#include "transform/plan.h"

namespace stoker::detail {

// torchvision's RandomResizedCrop.get_params on a width x height image.
Box random_resized_crop_box(int width, int height, const std::array<double, 2>& scale,
                            const std::array<double, 2>& ratio, Rng* rng);
// torchvision's Resize output size for a width x height image.
void resize_output_size(const Resize& r, int width, int height, int* out_w, int* out_h);
// torchvision's center_crop box; may extend past the image (zero padding).
Box center_crop_box(int width, int height, int crop_w, int crop_h);

const char* transform_name(const Transform& t);
// The transform's docstring (its Def<T>'s kDoc, torchvision's style): the
// Python class's __doc__ and the API docs' text.
const char* transform_doc(const Transform& t);
// Throws Error(kInvalidArgument) naming the transform and the bad parameter.
void check_transform(const Transform& t);

// The output size after a transform: fixed (every sample height x width) or
// depending on the image.
struct OutputSize {
  bool fixed = false;
  int height = 0, width = 0;
};
OutputSize output_size(const Transform& t, OutputSize before);

// Planning one sample: the image's current size and the steps so far.
struct PlanState {
  int width = 0, height = 0;
  SamplePlan* plan = nullptr;
  Rng* rng = nullptr;
  int index = 0;  // the transform's position in the list
};
// Appends the transform's steps for this sample (drawing its randomness).
void plan_transform(const Transform& t, PlanState* s);
// What kind of transform it is (a Def<T>'s kPhotometric / kResamples / kColour ...,
// false when it does not say).
struct TransformTraits {
  bool photometric = false;  // per-pixel, applied to the output rows: no resize may follow it
  bool resamples = false;    // resizes the image
  bool geometric = false;    // crops, resizes or flips (plans steps or flips)
  bool image_stage = false;  // a whole-image op after the geometry (image_ops.h): no geometric transform may follow
  bool on_tensor = false;    // acts on the output tensor (RandomErasing): may follow Normalize
  bool image_only = false;   // the policies: apply to the image alone, so refused with masks and boxes (as v2)
  bool colour = false;       // colour-only (ColorJitter, Grayscale, the policies, ...): needs an RGB image, so
                             // refused on a raster kept as stored (stoker.Image(channels="stored"))
};
TransformTraits transform_traits(const Transform& t);

std::string transform_repr(const Transform& t);  // "RandomResizedCrop(size=(224, 224), scale=(0.08, 1), ...)"
std::string transform_to_json(const Transform& t);  // {"name": "RandomResizedCrop", "size": [224, 224], ...}
// Throws Error(kInvalidArgument) for an unknown name or missing parameters.
Transform transform_from_json(const std::string& json);

}  // namespace stoker::detail
