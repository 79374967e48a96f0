// A temporary directory, removed with everything in it when it goes out of
// scope: the doctor's stats channel and its probes' packed samples, the
// C++ tests' fixtures (tests/test_util.h) and the fuzz targets' folder.
#pragma once

#include <stdlib.h>

#include <cerrno>
#include <filesystem>
#include <string>
#include <system_error>

namespace stoker::detail {

class TempDir {
 public:
  // `prefix`: the name's start under `base`, by default the system's
  // temporary directory ($TMPDIR, else /tmp).
  explicit TempDir(const std::string& prefix, const std::string& base = {}) {
    const std::filesystem::path dir = base.empty() ? std::filesystem::temp_directory_path() : std::filesystem::path(base);
    std::string t = (dir / (prefix + "-XXXXXX")).string();
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
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace stoker::detail
