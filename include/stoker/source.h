// Sources: indexed, immutable collections of records (key, bytes, label).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "stoker/status.h"

namespace stoker {

// An indexed, immutable set of records. Thread-safe: any number of workers
// may call read() concurrently.
class Source {
 public:
  virtual ~Source() = default;

  // Number of records.
  virtual std::size_t size() const = 0;
  // The record's name in messages: its file path. REQUIRES: i < size()
  virtual const std::string& key(std::size_t i) const = 0;
  // Class index. REQUIRES: i < size()
  virtual std::int64_t label(std::size_t i) const = 0;
  // Replaces *out with the record's bytes. `out` is the caller's reusable
  // buffer (its capacity is kept). REQUIRES: i < size()
  virtual Status read(std::size_t i, std::vector<std::uint8_t>* out) const = 0;
  // Class names by index, when known (ImageFolder); may be empty.
  virtual const std::vector<std::string>& classes() const = 0;
  // "image folder 'data/train' (2040 records, 12 classes)"
  virtual std::string describe() const = 0;
};

// A torchvision ImageFolder tree: root/<class>/**/<file>. Classes are the
// sorted sub-directory names, indexed from 0; files are those with
// torchvision's image extensions (case-insensitive), in torchvision's order,
// so record i here is ImageFolder's sample i. Throws stoker::Error.
std::unique_ptr<Source> open_image_folder(const std::string& root);

// A list file: one `path,label` per line (a `.csv` may start with a header
// line; `#` lines are comments). Relative paths are relative to the list
// file's directory. Throws stoker::Error naming the file and line.
std::unique_ptr<Source> open_list_file(const std::string& path);

// A directory opens as an image folder, a file as a list file.
std::unique_ptr<Source> open_source(const std::string& spec);

}  // namespace stoker
