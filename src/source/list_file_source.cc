// A list file: `path,label` per line.
#include <charconv>
#include <filesystem>
#include <fstream>

#include "source/file_reader.h"
#include "stoker/source.h"

namespace fs = std::filesystem;

namespace stoker {
namespace {

std::string trim(const std::string& s) {
  std::size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  std::size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

class ListFileSource final : public Source {
 public:
  explicit ListFileSource(const std::string& list) : list_(list) {
    std::ifstream in(list);
    if (!in) throw Error(Code::kNotFound, "list file '" + list + "' cannot be opened");
    fs::path base = fs::path(list).parent_path();
    std::string line;
    std::size_t lineno = 0;
    while (std::getline(in, line)) {
      ++lineno;
      std::string t = trim(line);
      if (t.empty() || t[0] == '#') continue;
      std::size_t comma = t.rfind(',');
      if (comma == std::string::npos) {
        throw Error(Code::kInvalidArgument,
                    list + ":" + std::to_string(lineno) + ": expected 'path,label', got '" + t + "'");
      }
      std::string path = trim(t.substr(0, comma));
      std::string lab = trim(t.substr(comma + 1));
      std::int64_t label = 0;
      auto [p, ec] = std::from_chars(lab.data(), lab.data() + lab.size(), label);
      if (ec != std::errc() || p != lab.data() + lab.size() || label < 0) {
        if (paths_.empty() && lineno == first_line(lineno)) {  // a header line such as "path,label"
          header_seen_ = true;
          continue;
        }
        throw Error(Code::kInvalidArgument, list + ":" + std::to_string(lineno) +
                                                ": label must be a non-negative integer, got '" + lab + "'");
      }
      if (path.empty()) throw Error(Code::kInvalidArgument, list + ":" + std::to_string(lineno) + ": empty path");
      fs::path fp(path);
      paths_.push_back(fp.is_absolute() ? path : (base / fp).string());
      labels_.push_back(label);
    }
    if (paths_.empty()) throw Error(Code::kNotFound, "list file '" + list + "' lists no records");
  }

  std::size_t size() const override { return paths_.size(); }
  const std::string& key(std::size_t i) const override { return paths_[i]; }
  std::int64_t label(std::size_t i) const override { return labels_[i]; }
  Status read(std::size_t i, std::vector<std::uint8_t>* out) const override {
    return detail::read_file(paths_[i], out);
  }
  const std::vector<std::string>& classes() const override { return classes_; }
  std::string describe() const override {
    return "list file '" + list_ + "' (" + std::to_string(paths_.size()) + " records)";
  }

 private:
  // The first non-comment line may be a header, once.
  std::size_t first_line(std::size_t lineno) {
    if (!first_data_line_) first_data_line_ = lineno;
    return header_seen_ ? 0 : first_data_line_;
  }

  std::string list_;
  std::vector<std::string> paths_;
  std::vector<std::int64_t> labels_;
  std::vector<std::string> classes_;
  bool header_seen_ = false;
  std::size_t first_data_line_ = 0;
};

}  // namespace

std::unique_ptr<Source> open_list_file(const std::string& path) { return std::make_unique<ListFileSource>(path); }

}  // namespace stoker
