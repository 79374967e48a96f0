#include "source/file_list_source.h"

#include "source/file_reader.h"

namespace stoker::detail {
namespace {

class FileListSource final : public Source {
 public:
  FileListSource(std::vector<std::string> paths, std::vector<std::int64_t> labels, std::vector<std::string> classes,
                 std::string what)
      : paths_(std::move(paths)), labels_(std::move(labels)), classes_(std::move(classes)), what_(std::move(what)) {}

  std::size_t size() const override { return paths_.size(); }
  const std::string& key(std::size_t i) const override { return paths_[i]; }
  std::int64_t label(std::size_t i) const override { return labels_[i]; }
  Status read(std::size_t i, std::vector<std::uint8_t>* out) const override { return read_file(paths_[i], out); }
  const std::vector<std::string>& classes() const override { return classes_; }
  std::string describe() const override {
    std::string d = what_ + " (" + std::to_string(paths_.size()) + " records";
    if (!classes_.empty()) d += ", " + std::to_string(classes_.size()) + " classes";
    return d + ")";
  }

 private:
  std::vector<std::string> paths_;
  std::vector<std::int64_t> labels_;
  std::vector<std::string> classes_;
  std::string what_;
};

}  // namespace

std::unique_ptr<Source> make_file_list_source(std::vector<std::string> paths, std::vector<std::int64_t> labels,
                                              std::vector<std::string> classes, std::string what) {
  return std::make_unique<FileListSource>(std::move(paths), std::move(labels), std::move(classes), std::move(what));
}

}  // namespace stoker::detail
