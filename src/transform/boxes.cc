#include "transform/boxes.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <nlohmann/json.hpp>

#include "decode/npy.h"
#include "stoker/names.h"

namespace stoker::detail {
namespace {

// .npy data is read with memcpy into host integers and floats: the dtypes
// accepted are little-endian, and so must the host be.
static_assert(std::endian::native == std::endian::little, "boxes.cc reads little-endian .npy data as is");

// The shortest text that reads back as `v` ("12.5", not "12.500000"), so that
// messages show the value the member holds.
std::string num(double v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

Status box_error(std::size_t index, const std::string& why) {
  return Status::Corrupt("box " + std::to_string(index) + ": " + why);
}

// A label given as a float (a float .npy's 5th column, 3.0 in JSON) must
// still be an integer in int64's range; anything else is not a class id.
Status label_from_double(double v, std::size_t index, std::int64_t* label) {
  if (!(v == std::trunc(v) && v >= -0x1p63 && v < 0x1p63)) {
    return box_error(index, "label " + num(v) + " is not an integer");
  }
  *label = static_cast<std::int64_t>(v);
  return Status::Ok();
}

// Converts one row in `format` to xyxy, refusing what no box can be. A
// negative extent is named in the member's own terms (x1 < x0 for xyxy, a
// negative width for the others), so the message matches what the user wrote.
Status make_row(std::size_t index, const double v[4], BoxFormat format, std::int64_t label, BoxRow* row) {
  for (int j = 0; j < 4; ++j) {
    if (!std::isfinite(v[j])) {
      return box_error(index, "non-finite value " + num(v[j]) + " in column " + std::to_string(j));
    }
  }
  switch (format) {
    case BoxFormat::kXYXY:
      if (v[2] < v[0]) return box_error(index, "x1 < x0 (" + num(v[2]) + " < " + num(v[0]) + ")");
      if (v[3] < v[1]) return box_error(index, "y1 < y0 (" + num(v[3]) + " < " + num(v[1]) + ")");
      *row = {v[0], v[1], v[2], v[3], label};
      break;
    case BoxFormat::kXYWH:
    case BoxFormat::kCXCYWH: {
      if (v[2] < 0) return box_error(index, "negative width (" + num(v[2]) + ")");
      if (v[3] < 0) return box_error(index, "negative height (" + num(v[3]) + ")");
      if (format == BoxFormat::kXYWH) {
        *row = {v[0], v[1], v[0] + v[2], v[1] + v[3], label};
      } else {
        *row = {v[0] - v[2] / 2, v[1] - v[3] / 2, v[0] + v[2] / 2, v[1] + v[3] / 2, label};
      }
      break;
    }
  }
  // Finite inputs can still overflow (xywh 1e308 + 1e308).
  if (!std::isfinite(row->x1) || !std::isfinite(row->y1) || !std::isfinite(row->x0) || !std::isfinite(row->y0)) {
    return box_error(index, "coordinates overflow");
  }
  return Status::Ok();
}

// ---- .npy ----

struct NpyType {
  char kind;         // 'f', 'i' or 'u'
  std::size_t size;  // bytes
};

bool npy_type(const std::string& descr, NpyType* t) {
  if (descr.size() != 3 || (descr[0] != '<' && descr[0] != '|')) return false;
  t->kind = descr[1];
  t->size = static_cast<std::size_t>(descr[2] - '0');
  if (t->kind == 'f') return t->size == 4 || t->size == 8;
  if (t->kind == 'i' || t->kind == 'u') return t->size == 1 || t->size == 2 || t->size == 4 || t->size == 8;
  return false;
}

template <typename T>
T load(const std::uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));  // the data has no alignment promised
  return v;
}

double npy_double(const std::uint8_t* p, const NpyType& t) {
  switch (t.kind) {
    case 'f':
      return t.size == 4 ? static_cast<double>(load<float>(p)) : load<double>(p);
    case 'i':
      switch (t.size) {
        case 1:
          return load<std::int8_t>(p);
        case 2:
          return load<std::int16_t>(p);
        case 4:
          return load<std::int32_t>(p);
        default:
          return static_cast<double>(load<std::int64_t>(p));
      }
    default:
      switch (t.size) {
        case 1:
          return load<std::uint8_t>(p);
        case 2:
          return load<std::uint16_t>(p);
        case 4:
          return load<std::uint32_t>(p);
        default:
          return static_cast<double>(load<std::uint64_t>(p));
      }
  }
}

// Integer labels are read exactly (an int64 id past 2^53 survives), not through a double.
Status npy_label(const std::uint8_t* p, const NpyType& t, std::size_t index, std::int64_t* label) {
  if (t.kind == 'f') return label_from_double(npy_double(p, t), index, label);
  if (t.kind == 'u' && t.size == 8) {
    const std::uint64_t u = load<std::uint64_t>(p);
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      return box_error(index, "label " + std::to_string(u) + " does not fit int64");
    }
    *label = static_cast<std::int64_t>(u);
    return Status::Ok();
  }
  if (t.kind == 'i' && t.size == 8) {
    *label = load<std::int64_t>(p);
    return Status::Ok();
  }
  *label = static_cast<std::int64_t>(npy_double(p, t));  // exact: at most 32 bits
  return Status::Ok();
}

std::string shape_text(const std::vector<std::uint64_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

Status parse_npy_boxes(const std::uint8_t* data, std::size_t size, BoxFormat format, std::vector<BoxRow>* out) {
  NpyHeader h;
  Status s = parse_npy_header(data, size, &h);
  if (!s.ok()) return s;
  NpyType t;
  if (!npy_type(h.descr, &t)) {
    return Status::Corrupt("boxes npy: dtype '" + h.descr + "' (want little-endian f4, f8, i1-i8 or u1-u8)");
  }
  if (h.fortran_order) return Status::Corrupt("boxes npy: Fortran order (want C order)");
  std::uint64_t n = 0, cols = 4;
  if (h.shape.size() == 1 && h.shape[0] == 0) {
    n = 0;
  } else if (h.shape.size() == 2 && (h.shape[1] == 4 || h.shape[1] == 5)) {
    n = h.shape[0];
    cols = h.shape[1];
  } else {
    return Status::Corrupt("boxes npy: shape " + shape_text(h.shape) + " (want (n, 4), (n, 5) or (0,))");
  }
  // parse_npy_header checked that n rows of data are in the file, so n is bounded by its size.
  out->reserve(n);
  const std::uint8_t* p = data + h.data_offset;
  for (std::size_t i = 0; i < n; ++i, p += cols * t.size) {
    double v[4];
    for (std::size_t j = 0; j < 4; ++j) v[j] = npy_double(p + j * t.size, t);
    std::int64_t label = -1;
    if (cols == 5) {
      s = npy_label(p + 4 * t.size, t, i, &label);
      if (!s.ok()) return s;
    }
    BoxRow row;
    s = make_row(i, v, format, label, &row);
    if (!s.ok()) return s;
    out->push_back(row);
  }
  return Status::Ok();
}

// ---- JSON ----

using Json = nlohmann::json;

Status json_label(const Json& j, std::size_t index, std::int64_t* label) {
  if (j.is_number_unsigned()) {
    const auto u = j.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      return box_error(index, "label " + std::to_string(u) + " does not fit int64");
    }
    *label = static_cast<std::int64_t>(u);
    return Status::Ok();
  }
  if (j.is_number_integer()) {
    *label = j.get<std::int64_t>();
    return Status::Ok();
  }
  if (j.is_number_float()) return label_from_double(j.get<double>(), index, label);
  return box_error(index, std::string("label is a ") + j.type_name() + ", not an integer");
}

Status json_boxes(const Json& v, BoxFormat format, std::vector<BoxRow>* out) {
  const Json* rows = &v;
  const Json* labels = nullptr;
  if (v.is_object()) {
    const auto b = v.find("boxes");
    if (b == v.end()) return Status::Corrupt("boxes json: an object without \"boxes\"");
    rows = &*b;
    const auto l = v.find("labels");
    if (l != v.end()) labels = &*l;
    // The member may say its own format (a COCO source's "xywh"): it wins
    // over the field's, which is then only the batch's.
    const auto f = v.find("format");
    if (f != v.end()) {
      const std::optional<BoxFormat> named = f->is_string() ? find_name<BoxFormat>(f->get<std::string>()) : std::nullopt;
      if (!named) return Status::Corrupt("boxes json: \"format\" must be one of " + allowed_names<BoxFormat>() + ", got " + f->dump());
      format = *named;
    }
  }
  if (!rows->is_array()) {
    return Status::Corrupt(std::string("boxes json: a ") + rows->type_name() + ", not a list of boxes");
  }
  if (labels != nullptr && (!labels->is_array() || labels->size() != rows->size())) {
    return Status::Corrupt("boxes json: \"labels\" is not a list of " + std::to_string(rows->size()) +
                           " labels, one per box");
  }
  out->reserve(rows->size());
  for (std::size_t i = 0; i < rows->size(); ++i) {
    const Json& r = (*rows)[i];
    if (!r.is_array() || (r.size() != 4 && r.size() != 5)) {
      return box_error(i, std::string("a ") + (r.is_array() ? "list of " + std::to_string(r.size()) : r.type_name()) +
                              ", not [a, b, c, d] or [a, b, c, d, label]");
    }
    double c[4];
    for (std::size_t j = 0; j < 4; ++j) {
      if (!r[j].is_number()) return box_error(i, "column " + std::to_string(j) + " is a " + r[j].type_name());
      c[j] = r[j].get<double>();
    }
    std::int64_t label = -1;
    if (r.size() == 5 && labels != nullptr) return box_error(i, "a label in the row and in \"labels\"");
    if (r.size() == 5 || labels != nullptr) {
      Status s = json_label(r.size() == 5 ? r[4] : (*labels)[i], i, &label);
      if (!s.ok()) return s;
    }
    BoxRow row;
    Status s = make_row(i, c, format, label, &row);
    if (!s.ok()) return s;
    out->push_back(row);
  }
  return Status::Ok();
}

Status parse_json_boxes(const std::uint8_t* data, std::size_t size, BoxFormat format, const std::string& json_key,
                        std::vector<BoxRow>* out) {
  // The sample path returns Status: every nlohmann exception (parse errors,
  // and any access the checks above missed) stops here.
  try {
    const Json doc = Json::parse(data, data + size);
    if (json_key.empty()) return json_boxes(doc, format, out);
    if (!doc.is_object()) {
      return Status::Corrupt(std::string("boxes json: a ") + doc.type_name() + ", not an object with key '" + json_key +
                             "'");
    }
    const auto it = doc.find(json_key);
    if (it == doc.end()) return Status::Corrupt("boxes json: no key '" + json_key + "'");
    return json_boxes(*it, format, out);
  } catch (const Json::exception& e) {
    out->clear();
    return Status::Corrupt(std::string("boxes json: ") + e.what());
  }
}

}  // namespace

Status parse_boxes(const std::uint8_t* data, std::size_t size, BoxFormat format, const std::string& json_key,
                   std::vector<BoxRow>* out) {
  out->clear();
  Status s;
  if (size >= 6 && std::memcmp(data, "\x93NUMPY", 6) == 0) {
    // A key names a field of a .json member; a .npy member has none.
    if (!json_key.empty()) return Status::Corrupt("boxes: key '" + json_key + "' of a .npy member");
    s = parse_npy_boxes(data, size, format, out);
  } else {
    s = parse_json_boxes(data, size, format, json_key, out);
  }
  if (!s.ok()) out->clear();  // no half-parsed list for a caller that ignores the status
  return s;
}

Status check_boxes_on_canvas(int width, int height, std::vector<BoxRow>* boxes) {
  const double w = width, h = height;
  for (std::size_t i = 0; i < boxes->size(); ++i) {
    BoxRow& b = (*boxes)[i];
    const bool on = b.x0 >= -1 && b.y0 >= -1 && b.x1 <= w + 1 && b.y1 <= h + 1;
    if (!on) {
      return box_error(i, "xyxy (" + num(b.x0) + ", " + num(b.y0) + ", " + num(b.x1) + ", " + num(b.y1) +
                              ") lies outside its " + std::to_string(width) + "x" + std::to_string(height) +
                              " image (by more than 1 pixel)");
    }
  }
  for (BoxRow& b : *boxes) {
    b.x0 = std::clamp(b.x0, 0.0, w);
    b.x1 = std::clamp(b.x1, 0.0, w);
    b.y0 = std::clamp(b.y0, 0.0, h);
    b.y1 = std::clamp(b.y1, 0.0, h);
  }
  return Status::Ok();
}

std::size_t transform_boxes(const SamplePlan& plan, int width, int height, std::vector<BoxRow>* boxes, int* out_w,
                            int* out_h) {
  int W = width, H = height;
  // Each step maps x -> (x - x0) * sx, y -> (y - y0) * sy onto a W x H canvas,
  // then clamps to it, as torchvision's crop and resize of BoundingBoxes do.
  auto apply = [boxes](double x0, double y0, double sx, double sy, int w, int h) {
    for (BoxRow& b : *boxes) {
      b.x0 = std::clamp((b.x0 - x0) * sx, 0.0, static_cast<double>(w));
      b.x1 = std::clamp((b.x1 - x0) * sx, 0.0, static_cast<double>(w));
      b.y0 = std::clamp((b.y0 - y0) * sy, 0.0, static_cast<double>(h));
      b.y1 = std::clamp((b.y1 - y0) * sy, 0.0, static_cast<double>(h));
    }
  };
  // An empty source extent (never planned) collapses the boxes to 0, so they
  // are dropped, instead of scaling by infinity into NaNs that compare as kept.
  auto ratio = [](double out, double in) { return in > 0 ? out / in : 0.0; };
  for (const Step& s : plan.steps) {
    if (s.kind == Step::kCrop) {
      apply(s.box.x, s.box.y, 1, 1, s.box.width, s.box.height);
      W = s.box.width;
      H = s.box.height;
    } else if (s.has_src_box) {
      const double* r = s.src_box;
      apply(r[0], r[1], ratio(s.width, r[2] - r[0]), ratio(s.height, r[3] - r[1]), s.width, s.height);
      W = s.width;
      H = s.height;
    } else {
      apply(0, 0, ratio(s.width, W), ratio(s.height, H), s.width, s.height);
      W = s.width;
      H = s.height;
    }
  }
  for (BoxRow& b : *boxes) {
    if (plan.mirror) b = {W - b.x1, b.y0, W - b.x0, b.y1, b.label};
    if (plan.vflip) b = {b.x0, H - b.y1, b.x1, H - b.y0, b.label};
  }
  // The image stage's warps, as v2's affine on BoundingBoxes: the four
  // corners through the forward matrix (the inverse of the one PIL samples
  // the image with), their bounding box, clamped to the canvas.
  for (const ImageOp& op : plan.image_ops) {
    if (op.kind != ImageOp::kAffine) continue;
    const double* m = op.matrix;  // output -> input: x_in = m0 x + m1 y + m2, y_in = m3 x + m4 y + m5
    const double det = m[0] * m[4] - m[1] * m[3];
    const double f0 = m[4] / det, f1 = -m[1] / det, f3 = -m[3] / det, f4 = m[0] / det;
    const double f2 = -(f0 * m[2] + f1 * m[5]), f5 = -(f3 * m[2] + f4 * m[5]);
    for (BoxRow& b : *boxes) {
      const double xs[4] = {b.x0, b.x1, b.x1, b.x0}, ys[4] = {b.y0, b.y0, b.y1, b.y1};
      double x0 = 0, y0 = 0, x1 = 0, y1 = 0;
      for (int k = 0; k < 4; ++k) {
        const double x = f0 * xs[k] + f1 * ys[k] + f2, y = f3 * xs[k] + f4 * ys[k] + f5;
        x0 = k ? std::min(x0, x) : x;
        x1 = k ? std::max(x1, x) : x;
        y0 = k ? std::min(y0, y) : y;
        y1 = k ? std::max(y1, y) : y;
      }
      b = {std::clamp(x0, 0.0, static_cast<double>(W)), std::clamp(y0, 0.0, static_cast<double>(H)),
           std::clamp(x1, 0.0, static_cast<double>(W)), std::clamp(y1, 0.0, static_cast<double>(H)), b.label};
    }
  }
  if (out_w != nullptr) *out_w = W;
  if (out_h != nullptr) *out_h = H;
  // SanitizeBoundingBoxes(min_size=1); written as "not kept" so that a NaN is dropped too.
  const std::size_t before = boxes->size();
  boxes->erase(std::remove_if(boxes->begin(), boxes->end(),
                              [](const BoxRow& b) { return !(b.x1 - b.x0 >= 1 && b.y1 - b.y0 >= 1); }),
               boxes->end());
  return before - boxes->size();
}

void scale_boxes(int width, int height, int new_w, int new_h, std::vector<BoxRow>* boxes) {
  const double sx = static_cast<double>(new_w) / width, sy = static_cast<double>(new_h) / height;
  for (BoxRow& b : *boxes) {
    b.x0 *= sx;
    b.x1 *= sx;
    b.y0 *= sy;
    b.y1 *= sy;
  }
}

std::size_t write_boxes(const std::vector<BoxRow>& boxes, BoxFormat format, int max_boxes, float* xy,
                        std::int64_t* labels, std::int64_t* count) {
  const std::size_t cap = max_boxes > 0 ? static_cast<std::size_t>(max_boxes) : 0;
  const std::size_t n = std::min(boxes.size(), cap);
  for (std::size_t i = 0; i < n; ++i) {
    const BoxRow& b = boxes[i];
    double v[4] = {b.x0, b.y0, b.x1, b.y1};
    if (format != BoxFormat::kXYXY) {
      v[2] = b.x1 - b.x0;
      v[3] = b.y1 - b.y0;
      if (format == BoxFormat::kCXCYWH) v[0] = (b.x0 + b.x1) / 2, v[1] = (b.y0 + b.y1) / 2;
    }
    for (int j = 0; j < 4; ++j) xy[4 * i + static_cast<std::size_t>(j)] = static_cast<float>(v[j]);
    labels[i] = b.label;
  }
  std::fill(xy + 4 * n, xy + 4 * cap, 0.0f);
  std::fill(labels + n, labels + cap, std::int64_t{-1});
  *count = static_cast<std::int64_t>(n);
  return boxes.size() - n;
}

}  // namespace stoker::detail
