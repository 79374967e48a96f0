// Bounding boxes (FieldKind::kBoxes): parsed from a record's member, checked
// against their image, carried through the sample's geometric plan with
// torchvision.transforms.v2's semantics, and written into the batch.
//
// Inside, every box is xyxy in doubles with its class id (BoxRow); the
// member's format is converted on the way in and the field's on the way out,
// so that each geometric step is one rule (torchvision's functionals convert
// to xyxy for the same reason).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "stoker/fields.h"
#include "stoker/status.h"
#include "transform/plan.h"

namespace stoker::detail {

// One box: always xyxy inside, label -1 when the member has none.
struct BoxRow {
  double x0, y0, x1, y1;
  std::int64_t label;
};

// Parses a boxes member into xyxy rows (*out is replaced). Accepted:
//  - .npy (sniffed: starts with "\x93NUMPY"): shape [n, 4] or [n, 5] (the 5th
//    column is the per-box class id, an integer even in a float array), or
//    [0] / [0, 4] / [0, 5] for none; dtype f4 f8 i1 i2 i4 i8 u1 u2 u4 u8,
//    little-endian ('<', or '|'); C order only.
//  - JSON: a list of rows [a, b, c, d] or [a, b, c, d, label]; or an object
//    {"boxes": [[a, b, c, d], ...], "labels": [...]} ("labels" optional, one
//    integer per box; "format" optional: "xyxy", "xywh" or "cxcywh", the
//    rows' format in place of `format`). With `json_key` non-empty the member is a JSON object
//    and the boxes are the value at that key (member "json:boxes" -> key
//    "boxes"), itself either form.
// Rows are in `format`. A non-finite value, a negative width or height, a
// non-integer label, a wrong shape or dtype, malformed JSON: Status::Corrupt
// whose message names the box (its index) and why, e.g.
// "box 3: x1 < x0 (12.5 < 40)". Never throws.
Status parse_boxes(const std::uint8_t* data, std::size_t size, BoxFormat format, const std::string& json_key,
                   std::vector<BoxRow>* out);

// Checks that the boxes lie on the width x height canvas of their image,
// within 1 pixel of tolerance (coordinates in [-1, W+1] x [-1, H+1]: boxes
// annotated on pixel centres or rounded outwards); outside that:
// Status::Corrupt naming the box and the canvas size (the boxes belong to
// another image, or to another size of it). Then clamps them to the canvas.
Status check_boxes_on_canvas(int width, int height, std::vector<BoxRow>* boxes);

// Applies a sample's geometric plan to boxes given in the full-resolution
// frame of a width x height image, as torchvision.transforms.v2 does to
// BoundingBoxes:
//  - Step::kCrop shifts by (-box.x, -box.y) and clamps to the crop's canvas
//    [0, box.width] x [0, box.height] (a crop past the image, CenterCrop's
//    padding, is the same rule with a negative offset);
//  - Step::kResize scales from the current canvas to the step's (width,
//    height); with has_src_box the source is the fractional region src_box
//    (x0, y0, x1, y1) of the current canvas: shift by (-x0, -y0), scale by
//    (width / (x1 - x0), height / (y1 - y0)), then clamp to the output;
//  - then plan.mirror flips x (x -> W - x, x0 and x1 swapped) and plan.vflip
//    flips y, W x H being the final canvas;
//  - last, boxes narrower or lower than 1 pixel (x1 - x0 < 1 or y1 - y0 < 1)
//    are removed (SanitizeBoundingBoxes(min_size=1)), the others kept in order.
// The plan's decode_region and scale_eighths are ignored: the plan given must
// be the geometric one, its first step in the full-resolution frame.
// NOTE: Pipeline::plan() rewrites the first crop relative to the decode region
// (and drops it when they coincide); such a plan is not that frame.
// Returns the number of boxes dropped; *out_w, *out_h (when given) receive
// the final canvas size. REQUIRES: width, height > 0, the boxes xyxy.
std::size_t transform_boxes(const SamplePlan& plan, int width, int height, std::vector<BoxRow>* boxes,
                            int* out_w = nullptr, int* out_h = nullptr);

// Rescales boxes from a width x height canvas to new_w x new_h (what
// cache="decoded" stores: images resized, their boxes with them).
// REQUIRES: width, height > 0.
void scale_boxes(int width, int height, int new_w, int new_h, std::vector<BoxRow>* boxes);

// Writes one sample's boxes into its place in the batch: `xy` float32
// [max_boxes, 4] in `format` (rows past the count zero), `labels` int64
// [max_boxes] (-1 past the count), *count = min(n, max_boxes). Returns how
// many were truncated (n - max_boxes when n > max_boxes, else 0).
std::size_t write_boxes(const std::vector<BoxRow>& boxes, BoxFormat format, int max_boxes, float* xy,
                        std::int64_t* labels, std::int64_t* count);

}  // namespace stoker::detail
