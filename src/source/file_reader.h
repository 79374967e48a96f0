// Reads whole files into a caller's reusable buffer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stoker/status.h"

namespace stoker::detail {

// Replaces *out with the bytes of `path`. Errors name the path and errno text.
Status read_file(const std::string& path, std::vector<std::uint8_t>* out);

}  // namespace stoker::detail
