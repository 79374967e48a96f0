// Paired folders (Field::folder): a mask, boxes or tensor file found by the
// record's relative path, as VOC/ADE20K/Cityscapes-style trees pair an
// image "images/a/b.jpg" with its mask "masks/a/b.png".
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "stoker/status.h"

namespace stoker::detail {

class PairedFolder {
 public:
  // Lists every regular file under `root` (recursively, following
  // symlinks) once. Throws Error(kNotFound) when root is not a directory.
  explicit PairedFolder(std::string root);

  // Reads the file whose path relative to the root, without its extension,
  // is `relative_key` without its own. kNotFound naming the folder and the
  // path looked for when there is none; kInvalidArgument when two files
  // match ("b.png" and "b.npy").
  Status read(const std::string& relative_key, std::vector<std::uint8_t>* out) const;
  // The path read() reads, with read()'s errors.
  Status find(const std::string& relative_key, std::string* path) const;

  const std::string& root() const { return root_; }
  std::size_t size() const { return files_.size(); }

 private:
  std::string root_;
  // relative path without extension -> the file's path; "" for an ambiguous stem
  std::unordered_map<std::string, std::string> files_;
};

}  // namespace stoker::detail
