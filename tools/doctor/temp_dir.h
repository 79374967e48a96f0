// A temporary directory, removed with everything in it when it goes out of
// scope: the doctor's stats channel and its probes' packed samples.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

namespace stoker::doctor {

class TempDir {
 public:
  // `prefix`: the name's start under the system's temporary directory.
  explicit TempDir(const std::string& prefix) {
    std::string t = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    if (!::mkdtemp(t.data())) {
      throw std::system_error(errno, std::generic_category(), "cannot create a temporary directory " + t);
    }
    path_ = t;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace stoker::doctor
