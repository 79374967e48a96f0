#include "source/file_list_source.h"

#include "source/file_reader.h"

namespace stoker::detail {
namespace {

std::string join(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

class FileListSource final : public Source {
 public:
  FileListSource(std::vector<std::string> paths, std::vector<std::int64_t> labels, std::vector<std::string> classes,
                 std::string what, std::string root, ListColumns columns)
      : paths_(std::move(paths)),
        labels_(std::move(labels)),
        classes_(std::move(classes)),
        what_(std::move(what)),
        root_(std::move(root)),
        cols_(std::move(columns)) {}

  std::size_t size() const override { return paths_.size(); }
  std::string key(std::size_t i) const override { return paths_[i]; }
  std::int64_t label(std::size_t i) const override { return labels_[i]; }
  Status read(std::size_t i, std::vector<std::uint8_t>* out) const override { return read_file(paths_[i], out); }

  bool member_extent(std::size_t i, const std::string& member, Extent* out) const override {
    std::string path;
    if (member.empty() || (!cols_.header.empty() && member == cols_.primary)) {
      path = paths_[i];
    } else {
      const std::size_t n = cols_.members.size();
      for (std::size_t k = 0; k < n && path.empty(); ++k) {
        if (cols_.members[k] == member && cols_.is_file[k]) path = cols_.cells[i * n + k];
      }
    }
    if (path.empty()) return false;
    *out = {path, 0, UINT64_MAX};  // the whole file, its size known when opened
    return true;
  }

  Status read_member(std::size_t i, const std::string& member, std::vector<std::uint8_t>* out) const override {
    if (cols_.header.empty()) return Source::read_member(i, member, out);
    if (member == cols_.primary) return read(i, out);
    if (!cols_.label.empty() && member == cols_.label) {
      const std::string s = std::to_string(labels_[i]);
      out->assign(s.begin(), s.end());
      return Status::Ok();
    }
    const std::size_t n = cols_.members.size();
    for (std::size_t k = 0; k < n; ++k) {
      if (cols_.members[k] != member) continue;
      const std::string& cell = cols_.cells[i * n + k];
      if (cell.empty()) return Status::NotFound("record '" + paths_[i] + "' has no value in column '" + member + "'");
      if (cols_.is_file[k]) return read_file(cell, out);
      out->assign(cell.begin(), cell.end());
      return Status::Ok();
    }
    return Status::NotFound("no column '" + member + "' (columns: " + join(cols_.header) + ")");
  }
  std::vector<std::string> members(std::size_t /*i*/) const override { return cols_.members; }
  std::string relative_key(std::size_t i) const override { return relative_path(paths_[i], root_); }

  const std::vector<std::string>& classes() const override { return classes_; }
  std::string describe() const override {
    std::string d = what_ + " (" + std::to_string(paths_.size()) + " records";
    if (!classes_.empty()) d += ", " + std::to_string(classes_.size()) + " classes";
    if (!cols_.header.empty()) d += "; columns " + join(cols_.header);
    return d + ")";
  }

 private:
  std::vector<std::string> paths_;
  std::vector<std::int64_t> labels_;
  std::vector<std::string> classes_;
  std::string what_;
  std::string root_;
  ListColumns cols_;
};

}  // namespace

std::unique_ptr<Source> make_file_list_source(std::vector<std::string> paths, std::vector<std::int64_t> labels,
                                              std::vector<std::string> classes, std::string what, std::string root,
                                              ListColumns columns) {
  return std::make_unique<FileListSource>(std::move(paths), std::move(labels), std::move(classes), std::move(what),
                                          std::move(root), std::move(columns));
}

}  // namespace stoker::detail
