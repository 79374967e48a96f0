#include "transform/plan_json.h"

#include <nlohmann/json.hpp>

namespace stoker::detail {
namespace {

using nlohmann::json;

json box_json(const Box& b) { return json::array({b.x, b.y, b.width, b.height}); }
json shape_json(const Shape3& s) { return json::array({s[0], s[1], s[2]}); }
json rgb_json(const std::uint8_t c[3]) { return json::array({c[0], c[1], c[2]}); }

json op_json(const ImageOp& op) {
  json j{{"op", image_op_name(op.kind)}};
  switch (op.kind) {
    case ImageOp::kBrightness:
    case ImageOp::kContrast:
    case ImageOp::kSaturation:
    case ImageOp::kSharpness:
    case ImageOp::kHue:
    case ImageOp::kSolarize:
    case ImageOp::kPosterize:
      j["factor"] = op.factor;
      break;
    case ImageOp::kAugMix:
      j["augmix"] = static_cast<int>(op.factor);  // its draws: the plan's augmix[factor]
      break;
    case ImageOp::kGaussianBlur:
      j["kernel_size"] = json::array({op.kernel_w, op.kernel_h});
      j["sigma"] = json::array({op.sigma_x, op.sigma_y});
      break;
    case ImageOp::kAffine:
      j["matrix"] = json::array({op.matrix[0], op.matrix[1], op.matrix[2], op.matrix[3], op.matrix[4], op.matrix[5]});
      j["bilinear"] = op.bilinear;
      j["fill"] = rgb_json(op.fill);
      break;
    default:
      break;
  }
  return j;
}

}  // namespace

const char* image_op_name(ImageOp::Kind kind) {
  switch (kind) {
    case ImageOp::kGrayscale: return "grayscale";
    case ImageOp::kBrightness: return "brightness";
    case ImageOp::kContrast: return "contrast";
    case ImageOp::kSaturation: return "saturation";
    case ImageOp::kSharpness: return "sharpness";
    case ImageOp::kHue: return "hue";
    case ImageOp::kSolarize: return "solarize";
    case ImageOp::kPosterize: return "posterize";
    case ImageOp::kInvert: return "invert";
    case ImageOp::kAutocontrast: return "autocontrast";
    case ImageOp::kEqualize: return "equalize";
    case ImageOp::kGaussianBlur: return "gaussian_blur";
    case ImageOp::kAffine: return "affine";
    case ImageOp::kAugMix: return "augmix";
  }
  return "?";
}

const char* policy_op_name(PolicyOp op) {
  switch (op) {
    case PolicyOp::kIdentity: return "Identity";
    case PolicyOp::kShearX: return "ShearX";
    case PolicyOp::kShearY: return "ShearY";
    case PolicyOp::kTranslateX: return "TranslateX";
    case PolicyOp::kTranslateY: return "TranslateY";
    case PolicyOp::kRotate: return "Rotate";
    case PolicyOp::kBrightness: return "Brightness";
    case PolicyOp::kColor: return "Color";
    case PolicyOp::kContrast: return "Contrast";
    case PolicyOp::kSharpness: return "Sharpness";
    case PolicyOp::kPosterize: return "Posterize";
    case PolicyOp::kSolarize: return "Solarize";
    case PolicyOp::kAutoContrast: return "AutoContrast";
    case PolicyOp::kEqualize: return "Equalize";
    case PolicyOp::kInvert: return "Invert";
  }
  return "?";
}

std::string plan_to_json(const SamplePlan& p) {
  json steps = json::array();
  for (const Step& s : p.steps) {
    if (s.kind == Step::kCrop) {
      steps.push_back({{"crop", box_json(s.box)}, {"fill", rgb_json(s.fill)}});
    } else {
      json r{{"resize", json::array({s.width, s.height})}};
      if (s.has_src_box) r["src_box"] = json::array({s.src_box[0], s.src_box[1], s.src_box[2], s.src_box[3]});
      steps.push_back(std::move(r));
    }
  }
  json photometric = json::array();
  for (const auto& ph : p.photometric) {
    if (ph.kind == SamplePlan::Photometric::kGrayscale) photometric.push_back("grayscale");
  }
  json ops = json::array();
  for (const ImageOp& op : p.image_ops) ops.push_back(op_json(op));
  json erase = json::array();
  for (const auto& e : p.erase) erase.push_back({{"box", box_json(e.box)}, {"transform", e.transform}, {"seed", e.seed}});
  json augmix = json::array();
  for (const auto& a : p.augmix) {
    json chains = json::array();
    for (const auto& c : a.chains) {
      json cops = json::array();
      for (const auto& [op, magnitude] : c.ops) cops.push_back({{"op", policy_op_name(op)}, {"magnitude", magnitude}});
      chains.push_back({{"weight", c.weight}, {"ops", std::move(cops)}});
    }
    augmix.push_back({{"w0", a.w0}, {"chains", std::move(chains)}, {"bilinear", a.bilinear}});
  }
  json j{{"decode_region", box_json(p.decode_region)},
         {"scale_eighths", p.scale_eighths},
         {"steps", std::move(steps)},
         {"mirror", p.mirror},
         {"vflip", p.vflip},
         {"photometric", std::move(photometric)},
         {"image_ops", std::move(ops)},
         {"erase", std::move(erase)},
         {"augmix", std::move(augmix)}};
  return j.dump();
}

std::string patch_plan_to_json(const PatchPlan& p) {
  json steps = json::array();
  for (const auto& s : p.steps) {
    steps.push_back({{"before", shape_json(s.before)},
                     {"after", shape_json(s.after)},
                     {"flip", s.flip},
                     {"k", s.k},
                     {"axes", json::array({s.a, s.b})}});
  }
  json j{{"pre_before", shape_json(p.pre_before)}, {"start", shape_json(p.start)},         {"size", shape_json(p.size)},
         {"steps", std::move(steps)},             {"out_start", shape_json(p.out_start)}, {"one_class", p.one_class}};
  return j.dump();
}

}  // namespace stoker::detail
