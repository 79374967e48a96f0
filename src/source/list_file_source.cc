// A list file: `path,label` per line, parsed into a file list (file_list_source.h).
#include <charconv>
#include <filesystem>

#include "source/file_list_source.h"
#include "source/file_reader.h"
#include "source/list_file.h"
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

}  // namespace

namespace detail {

Status parse_list(const std::string& text, const std::string& name, const std::string& base,
                  std::vector<std::string>* paths, std::vector<std::int64_t>* labels) {
  std::size_t lineno = 0, start = 0;
  bool header_allowed = true;
  auto where = [&] { return name + ":" + std::to_string(lineno) + ": "; };
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string t = trim(text.substr(start, end - start));
    start = end + 1;
    ++lineno;
    if (t.empty() || t[0] == '#') continue;
    const std::size_t comma = t.rfind(',');
    if (comma == std::string::npos) return Status::InvalidArgument(where() + "expected 'path,label', got '" + t.substr(0, 80) + "'");
    const std::string path = trim(t.substr(0, comma));
    const std::string lab = trim(t.substr(comma + 1));
    std::int64_t label = 0;
    auto [p, ec] = std::from_chars(lab.data(), lab.data() + lab.size(), label);
    const bool is_int = ec == std::errc() && p == lab.data() + lab.size() && label >= 0;
    if (!is_int && header_allowed) {  // a header line such as "path,label"
      header_allowed = false;
      continue;
    }
    header_allowed = false;
    if (!is_int) return Status::InvalidArgument(where() + "label must be a non-negative integer, got '" + lab.substr(0, 40) + "'");
    if (path.empty()) return Status::InvalidArgument(where() + "empty path");
    fs::path fp(path);
    paths->push_back(fp.is_absolute() || base.empty() ? path : (fs::path(base) / fp).string());
    labels->push_back(label);
  }
  if (paths->empty()) return Status::NotFound("list file '" + name + "' lists no records");
  return Status::Ok();
}

}  // namespace detail

std::unique_ptr<Source> open_list_file(const std::string& list) {
  std::vector<std::uint8_t> bytes;
  Status st = detail::read_file(list, &bytes);
  if (!st.ok()) throw Error(Code::kNotFound, "list file '" + list + "' cannot be read: " + st.message());
  std::vector<std::string> paths;
  std::vector<std::int64_t> labels;
  st = detail::parse_list(std::string(bytes.begin(), bytes.end()), list, fs::path(list).parent_path().string(), &paths,
                          &labels);
  if (!st.ok()) throw Error(st);
  return detail::make_file_list_source(std::move(paths), std::move(labels), {}, "list file '" + list + "'");
}

}  // namespace stoker
