// Parsing of list files (`path,label` lines, or CSV with a header row naming
// columns), separate from I/O for tests and fuzzing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "source/file_list_source.h"
#include "stoker/status.h"

namespace stoker::detail {

// `text` holds the list file `name`; relative paths are joined to `base`.
// Blank lines and `#` lines are skipped; the first other line is a header
// when its last field is not a non-negative integer, or when it is `image`
// (or `path`) alone (images without labels). A header of three or more
// columns (or two, when the second column is not the label; or that one
// column) names the columns: each row then has one CSV cell per column, the
// record's path is
// the column `image`, else `path`, else the first; the label the column
// `label` (else -1); the others go to *columns (when given). The format is
// described at open_list_file() in stoker/source.h. Errors name the file and
// line.
Status parse_list(const std::string& text, const std::string& name, const std::string& base,
                  std::vector<std::string>* paths, std::vector<std::int64_t>* labels, ListColumns* columns = nullptr);

}  // namespace stoker::detail
