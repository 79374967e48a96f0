// One file per record: image folders and list files are both this source;
// they differ only in how the list of (path, label) is made
// (image_folder_source.cc scans the tree as torchvision does,
// list_file_source.cc parses `path,label` lines).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "stoker/source.h"

namespace stoker::detail {

// `what` names the list in describe(): "image folder 'data/train'".
// REQUIRES: paths.size() == labels.size().
std::unique_ptr<Source> make_file_list_source(std::vector<std::string> paths, std::vector<std::int64_t> labels,
                                              std::vector<std::string> classes, std::string what);

}  // namespace stoker::detail
