// Reads whole files into a caller's reusable buffer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stoker/status.h"

namespace stoker::detail {

// Replaces *out with the bytes of `path`. Errors name the path and errno text.
Status read_file(const std::string& path, std::vector<std::uint8_t>* out);

// `path` relative to the folder `root` (Source::relative_key): "a/b.jpg"
// for "root/a/b.jpg"; `path` itself when root is empty or it is not below it.
std::string relative_path(const std::string& path, const std::string& root);

// pread until `n` bytes are read, the file ends or an error occurs (EINTR
// retried). Returns the bytes read, or -1 with errno set.
long long pread_full(int fd, std::uint8_t* buf, std::size_t n, std::uint64_t offset);

}  // namespace stoker::detail
