// COCO instances JSON as a Source: record i is torchvision's
// CocoDetection sample i (images sorted by id), its boxes and ids members.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "source/file_reader.h"
#include "stoker/source.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace stoker {
namespace {

// One annotation kept: its box as given (xywh) and its category.
struct CocoBox {
  double x, y, w, h;
  std::int64_t category;
};

struct CocoImage {
  std::int64_t id = 0;
  std::string path;           // image_root / file_name
  std::vector<CocoBox> boxes;
  std::string error;          // a malformed annotation of this image: its sample fails with this
};

class CocoSource final : public Source {
 public:
  CocoSource(std::string file, std::string root, std::vector<CocoImage> images, std::size_t annotations,
             std::size_t crowd_dropped, std::size_t empty_skipped)
      : file_(std::move(file)),
        root_(std::move(root)),
        images_(std::move(images)),
        annotations_(annotations),
        crowd_dropped_(crowd_dropped),
        empty_skipped_(empty_skipped) {}

  std::size_t size() const override { return images_.size(); }
  std::string key(std::size_t i) const override { return images_[i].path; }
  std::int64_t label(std::size_t) const override { return -1; }
  Status read(std::size_t i, std::vector<std::uint8_t>* out) const override {
    return detail::read_file(images_[i].path, out);
  }
  // "boxes": {"format": "xywh", "boxes": [[x, y, w, h], ...], "labels": [category_id, ...]}
  // (transform/boxes.h parses it); "image_id": the image's id as text.
  Status read_member(std::size_t i, const std::string& member, std::vector<std::uint8_t>* out) const override {
    const CocoImage& im = images_[i];
    std::string text;
    if (member == "boxes") {
      if (!im.error.empty()) return Status::Corrupt(file_ + ": image id " + std::to_string(im.id) + ": " + im.error);
      json boxes = json::array(), labels = json::array();
      for (const CocoBox& b : im.boxes) {
        boxes.push_back({b.x, b.y, b.w, b.h});
        labels.push_back(b.category);
      }
      text = json{{"format", "xywh"}, {"boxes", std::move(boxes)}, {"labels", std::move(labels)}}.dump();
    } else if (member == "image_id") {
      text = std::to_string(im.id);
    } else {
      return Status::NotFound("COCO record '" + im.path + "' has no member '" + member +
                              "' (members: boxes, image_id)");
    }
    out->assign(text.begin(), text.end());
    return Status::Ok();
  }
  std::vector<std::string> members(std::size_t) const override { return {"boxes", "image_id"}; }
  const std::vector<std::string>& classes() const override { return classes_; }
  std::string describe() const override {
    std::string d = "COCO instances '" + file_ + "' (" + std::to_string(images_.size()) + " images, " +
                    std::to_string(annotations_) + " boxes";
    if (crowd_dropped_) d += ", " + std::to_string(crowd_dropped_) + " crowd annotations dropped";
    if (empty_skipped_) d += ", " + std::to_string(empty_skipped_) + " images without boxes skipped";
    return d + "; images in '" + root_ + "')";
  }
  std::string relative_key(std::size_t i) const override { return detail::relative_path(images_[i].path, root_); }

 private:
  std::string file_, root_;
  std::vector<CocoImage> images_;
  std::vector<std::string> classes_;
  std::size_t annotations_, crowd_dropped_, empty_skipped_;
};

[[noreturn]] void bad(const std::string& file, const std::string& why) {
  throw Error(Code::kInvalidArgument, "COCO file '" + file + "': " + why);
}

std::int64_t integer(const std::string& file, const json& v, const std::string& what) {
  if (!v.is_number_integer()) bad(file, what + " must be an integer, got " + v.dump());
  return v.get<std::int64_t>();
}


// The images of a parsed instances file, with their kept annotations.
std::unique_ptr<Source> from_document(const std::string& path, json& doc, const CocoOptions& options) {
  if (!doc.is_object() || !doc.contains("images") || !doc["images"].is_array()) {
    bad(path, "not a COCO instances file: no \"images\" list");
  }
  std::string root = options.image_root;
  if (root.empty()) root = fs::path(path).parent_path().string();
  if (root.empty()) root = ".";
  while (root.size() > 1 && root.back() == '/') root.pop_back();

  std::vector<CocoImage> images;
  std::unordered_map<std::int64_t, std::size_t> by_id;
  const json& list = doc["images"];
  images.reserve(list.size());
  for (std::size_t k = 0; k < list.size(); ++k) {
    const json& im = list[k];
    const std::string where = "images[" + std::to_string(k) + "]";
    if (!im.is_object() || !im.contains("id") || !im.contains("file_name") || !im["file_name"].is_string()) {
      bad(path, where + " needs an integer \"id\" and a string \"file_name\"");
    }
    CocoImage c;
    c.id = integer(path, im["id"], where + ".id");
    const std::string name = im["file_name"].get<std::string>();
    c.path = fs::path(name).is_absolute() ? name : root + "/" + name;
    if (!by_id.emplace(c.id, images.size()).second) bad(path, where + ": image id " + std::to_string(c.id) + " appears twice");
    images.push_back(std::move(c));
  }
  std::size_t kept = 0, crowd = 0;
  if (doc.contains("annotations")) {
    const json& anns = doc["annotations"];
    if (!anns.is_array()) bad(path, "\"annotations\" must be a list");
    for (std::size_t k = 0; k < anns.size(); ++k) {
      const json& a = anns[k];
      const std::string where = "annotations[" + std::to_string(k) + "]";
      if (!a.is_object() || !a.contains("image_id")) bad(path, where + " has no \"image_id\"");
      const std::int64_t image_id = integer(path, a["image_id"], where + ".image_id");
      auto it = by_id.find(image_id);
      if (it == by_id.end()) bad(path, where + " refers to image id " + std::to_string(image_id) + ", not in \"images\"");
      CocoImage& im = images[it->second];
      // NOTE: torchvision's obj["iscrowd"] == 0, compared as JSON values: no cast of a float (1e30) to int.
      const auto is_crowd = a.find("iscrowd");
      if (is_crowd != a.end() && !is_crowd->is_number()) bad(path, where + ".iscrowd must be a number");
      if (is_crowd != a.end() && *is_crowd != json(0) && !options.keep_crowd) {
        ++crowd;
        continue;
      }
      // A malformed box or category fails its image's sample (counted under
      // on_corrupt), not the whole file.
      const json* bbox = a.contains("bbox") ? &a["bbox"] : nullptr;
      const bool box_ok = bbox && bbox->is_array() && bbox->size() == 4 &&
                          std::all_of(bbox->begin(), bbox->end(), [](const json& v) { return v.is_number(); });
      const json* cat = a.contains("category_id") ? &a["category_id"] : nullptr;
      const std::string id = a.contains("id") ? " (id " + a["id"].dump() + ")" : "";
      if (!box_ok) {
        if (im.error.empty()) im.error = "annotation" + id + ": bbox must be [x, y, width, height], got " + (bbox ? bbox->dump() : "nothing");
        continue;
      }
      if (!cat || !cat->is_number_integer()) {
        if (im.error.empty()) im.error = "annotation" + id + ": category_id must be an integer, got " + (cat ? cat->dump() : "nothing");
        continue;
      }
      im.boxes.push_back({(*bbox)[0].get<double>(), (*bbox)[1].get<double>(), (*bbox)[2].get<double>(),
                          (*bbox)[3].get<double>(), cat->get<std::int64_t>()});
      ++kept;
    }
  }
  // torchvision's CocoDetection: images in increasing id order.
  std::sort(images.begin(), images.end(), [](const CocoImage& a, const CocoImage& b) { return a.id < b.id; });
  std::size_t skipped = 0;
  if (options.skip_empty) {
    const auto end = std::remove_if(images.begin(), images.end(),
                                    [](const CocoImage& c) { return c.boxes.empty() && c.error.empty(); });
    skipped = static_cast<std::size_t>(images.end() - end);
    images.erase(end, images.end());
  }
  if (images.empty()) bad(path, "no images" + std::string(skipped ? " with annotations (skip_empty=True)" : ""));
  return std::make_unique<CocoSource>(path, root, std::move(images), kept, crowd, skipped);
}

}  // namespace

std::unique_ptr<Source> open_coco(const std::string& path, const CocoOptions& options) {
  std::vector<std::uint8_t> bytes;
  if (Status st = detail::read_file(path, &bytes); !st.ok()) throw Error(st.code(), "COCO file: " + st.message());
  // NOTE: polygons and RLE masks ("segmentation") are most of a COCO file
  // and unused here: dropped while parsing, so the DOM stays small.
  json doc;
  try {
    doc = json::parse(bytes.begin(), bytes.end(), [](int, json::parse_event_t event, json& parsed) {
      return !(event == json::parse_event_t::key && parsed == "segmentation");
    });
  } catch (const json::parse_error& e) {
    bad(path, std::string("malformed JSON at byte ") + std::to_string(e.byte) + ": " + e.what());
  } catch (const json::exception& e) {  // a number out of range (1e999)
    bad(path, std::string("malformed JSON: ") + e.what());
  }
  std::vector<std::uint8_t>().swap(bytes);
  try {
    return from_document(path, doc, options);
  } catch (const json::exception& e) {  // a value of the wrong type where the format names one
    bad(path, e.what());
  }
}

}  // namespace stoker
