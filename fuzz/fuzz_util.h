// What the fuzz targets share: a folder on tmpfs for parsers that take a
// path, a Source serving records from memory, and a tiny .npy.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "stoker/source.h"
#include "util/temp_dir.h"

namespace stoker_fuzz {

// A folder made once per process (on /dev/shm when it is there: no disk
// writes per input), removed at exit; one a crashed run left (its process
// gone: a finding ends the process without destructors) is removed by the
// next run.
class ScratchDir {
 public:
  ScratchDir() : dir_(prefix(), base()) {}
  const std::string& path() const { return dir_.path(); }
  // Replaces the file `name` in the folder with `data`; returns its path.
  std::string write(const std::string& name, const std::uint8_t* data, std::size_t size) const {
    const std::string p = dir_.file(name);
    const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
      std::perror(p.c_str());
      std::abort();
    }
    for (std::size_t done = 0; done < size;) {
      const ssize_t n = ::write(fd, data + done, size - done);
      if (n <= 0) {
        std::perror(p.c_str());
        std::abort();
      }
      done += static_cast<std::size_t>(n);
    }
    ::close(fd);
    return p;
  }
  std::string write(const std::string& name, const std::string& text) const {
    return write(name, reinterpret_cast<const std::uint8_t*>(text.data()), text.size());
  }

 private:
  static constexpr const char* kPrefix = "stoker-fuzz-";
  static const char* base() { return access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp"; }
  // Removes the folders of runs whose process is gone, then names this
  // one's after its pid (a throw from TempDir is a finding too).
  static std::string prefix() {
    const std::string start = kPrefix;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(base(), ec)) {
      const std::string name = e.path().filename().string();
      if (name.compare(0, start.size(), start) != 0) continue;
      const long pid = std::strtol(name.c_str() + start.size(), nullptr, 10);
      // kill(pid, 0) sends nothing: it only asks whether the process is still there.
      if (pid > 0 && kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) std::filesystem::remove_all(e.path(), ec);
    }
    return start + std::to_string(getpid());
  }
  stoker::detail::TempDir dir_;
};

// Records held in memory: record i's bytes and label; no members, no files.
class MemorySource final : public stoker::Source {
 public:
  explicit MemorySource(std::vector<std::vector<std::uint8_t>> records, std::vector<std::int64_t> labels = {})
      : records_(std::move(records)), labels_(std::move(labels)) {
    labels_.resize(records_.size(), 0);
    for (std::size_t i = 0; i < records_.size(); ++i) keys_.push_back("memory/" + std::to_string(i));
  }
  std::size_t size() const override { return records_.size(); }
  std::string key(std::size_t i) const override { return keys_[i]; }
  std::int64_t label(std::size_t i) const override { return labels_[i]; }
  stoker::Status read(std::size_t i, std::vector<std::uint8_t>* out) const override {
    out->assign(records_[i].begin(), records_[i].end());
    return stoker::Status::Ok();
  }
  const std::vector<std::string>& classes() const override { return classes_; }
  std::string describe() const override { return "fuzz input (" + std::to_string(records_.size()) + " records)"; }

 private:
  std::vector<std::vector<std::uint8_t>> records_;
  std::vector<std::int64_t> labels_;
  std::vector<std::string> keys_, classes_;
};

// A C-order uint8 .npy of the given shape holding `fill`.
inline std::vector<std::uint8_t> tiny_npy(const std::vector<int>& shape, std::uint8_t fill) {
  std::string dims;
  std::size_t count = 1;
  for (int d : shape) {
    dims += std::to_string(d) + ", ";
    count *= static_cast<std::size_t>(d);
  }
  if (shape.size() > 1) dims.resize(dims.size() - 2);
  std::string header = "{'descr': '|u1', 'fortran_order': False, 'shape': (" + dims + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::vector<std::uint8_t> out = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, static_cast<std::uint8_t>(header.size() & 0xff),
                                   static_cast<std::uint8_t>(header.size() >> 8)};
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), count, fill);
  return out;
}

}  // namespace stoker_fuzz
