// torchvision ImageFolder layout: root/<class>/**/<file>, scanned into a file
// list (file_list_source.h).
#include <algorithm>
#include <cctype>
#include <filesystem>

#include "decode/formats.h"
#include "source/file_list_source.h"
#include "stoker/source.h"

namespace fs = std::filesystem;

namespace stoker {
namespace {

// The records of an image folder, as torchvision.datasets.ImageFolder lists them.
class FolderScan {
 public:
  explicit FolderScan(const std::string& root) : root_(root) {
    std::error_code ec;
    if (!fs::is_directory(root, ec)) throw Error(Code::kNotFound, "image folder '" + root + "' is not a directory");
    for (const auto& e : fs::directory_iterator(root, fs::directory_options::follow_directory_symlink, ec)) {
      std::error_code ec2;
      if (e.is_directory(ec2)) classes_.push_back(e.path().filename().string());
    }
    if (ec) throw Error(Code::kIOError, "image folder '" + root + "': cannot list: " + ec.message());
    std::sort(classes_.begin(), classes_.end());
    if (classes_.empty()) throw Error(Code::kNotFound, "image folder '" + root + "' has no class sub-directories");
    for (std::size_t c = 0; c < classes_.size(); ++c) add_class(c);
    if (paths_.empty()) {
      throw Error(Code::kNotFound, "image folder '" + root + "': found no image files in its " +
                                       std::to_string(classes_.size()) + " class directories");
    }
  }

  std::vector<std::string> classes_;
  std::vector<std::string> paths_;
  std::vector<std::int64_t> labels_;

 private:
  // As torchvision: sorted(os.walk(class_dir, followlinks=True)), then each
  // directory's file names sorted.
  void add_class(std::size_t c) {
    std::string dir = (fs::path(root_) / classes_[c]).string();
    std::vector<std::string> dirs{dir};
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::follow_directory_symlink, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      std::error_code ec2;
      if (it->is_directory(ec2)) dirs.push_back(it->path().string());
    }
    std::sort(dirs.begin(), dirs.end());
    for (const auto& d : dirs) {
      std::vector<std::string> names;
      for (const auto& e : fs::directory_iterator(d, ec)) {
        std::error_code ec2;
        if (!e.is_directory(ec2) && detail::is_folder_image(e.path().filename().string())) {
          names.push_back(e.path().filename().string());
        }
      }
      std::sort(names.begin(), names.end());
      for (auto& n : names) {
        paths_.push_back((fs::path(d) / n).string());
        labels_.push_back(static_cast<std::int64_t>(c));
      }
    }
  }

  std::string root_;
};

}  // namespace

std::unique_ptr<Source> open_image_folder(const std::string& root) {
  FolderScan scan(root);
  return detail::make_file_list_source(std::move(scan.paths_), std::move(scan.labels_), std::move(scan.classes_),
                                       "image folder '" + root + "'", root);
}

}  // namespace stoker
