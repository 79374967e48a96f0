#include "source/paired_folder.h"

#include <filesystem>

#include "source/file_reader.h"

namespace fs = std::filesystem;

namespace stoker::detail {
namespace {

// "a/b.jpg" -> "a/b" (only the last component's extension).
std::string without_extension(const std::string& relative) {
  return fs::path(relative).replace_extension().generic_string();
}

}  // namespace

PairedFolder::PairedFolder(std::string root) : root_(std::move(root)) {
  std::error_code ec;
  if (!fs::is_directory(root_, ec)) throw Error(Code::kNotFound, "paired folder '" + root_ + "' is not a directory");
  fs::recursive_directory_iterator it(root_, fs::directory_options::follow_directory_symlink, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    const std::string stem = without_extension(fs::path(it->path()).lexically_relative(root_).generic_string());
    auto [slot, added] = files_.emplace(stem, it->path().string());
    if (!added) slot->second.clear();  // two files for one record: ambiguous, said when read
  }
  if (ec) throw Error(Code::kIOError, "paired folder '" + root_ + "': cannot list: " + ec.message());
}

Status PairedFolder::read(const std::string& relative_key, std::vector<std::uint8_t>* out) const {
  std::string path;
  Status st = find(relative_key, &path);
  return st.ok() ? read_file(path, out) : st;
}

Status PairedFolder::find(const std::string& relative_key, std::string* path) const {
  const std::string stem = without_extension(relative_key);
  const auto it = files_.find(stem);
  if (it == files_.end()) {
    return Status::NotFound("no file '" + stem + ".*' in the paired folder '" + root_ + "'");
  }
  if (it->second.empty()) {
    return Status::InvalidArgument("several files '" + stem + ".*' in the paired folder '" + root_ +
                                   "' (which one pairs with the record is ambiguous)");
  }
  *path = it->second;
  return Status();
}

}  // namespace stoker::detail
