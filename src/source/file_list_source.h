// One file per record: image folders and list files are both this source;
// they differ only in how the list of (path, label) is made
// (image_folder_source.cc scans the tree as torchvision does,
// list_file_source.cc parses list files, whose header may name columns).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "stoker/source.h"

namespace stoker::detail {

// A list file's named columns (a header row such as `image,mask,label`):
// the record's members beside its path and label. Empty `header`: none
// (image folders, `path,label` lists).
struct ListColumns {
  std::vector<std::string> header;   // every column, in header order
  std::string primary;               // the column of the record's path (key(), read())
  std::string label;                 // the label column; "" when there is none
  std::vector<std::string> members;  // the other columns, in header order
  std::vector<bool> is_file;         // per member: paths (read the file) or values (the cell's text)
  // Record i's member k: cells[i * members.size() + k], a resolved path or a
  // value; "" when the record has none.
  std::vector<std::string> cells;
};

// `what` names the list in describe(): "image folder 'data/train'"; `root`
// is the folder paths are relative to (relative_key()).
// REQUIRES: paths.size() == labels.size(); columns.cells.size() ==
// paths.size() * columns.members.size().
std::unique_ptr<Source> make_file_list_source(std::vector<std::string> paths, std::vector<std::int64_t> labels,
                                              std::vector<std::string> classes, std::string what, std::string root,
                                              ListColumns columns = {});

}  // namespace stoker::detail
