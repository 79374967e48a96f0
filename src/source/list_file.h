// Parsing of list files (`path,label` lines), separate from I/O for tests and fuzzing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stoker/status.h"

namespace stoker::detail {

// `text` holds the list file `name`; relative paths are joined to `base`.
// Blank lines and `#` lines are skipped; the first other line may be a
// header (its label is not an integer). Errors name the file and line.
Status parse_list(const std::string& text, const std::string& name, const std::string& base,
                  std::vector<std::string>* paths, std::vector<std::int64_t>* labels);

}  // namespace stoker::detail
