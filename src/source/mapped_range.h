// A read-only mapping of part of a file: how a volume's patch reads only the
// pages it covers (sample/volume_store.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "stoker/status.h"

namespace stoker::detail {

// [offset, offset + size) of a file, mapped read-only with MADV_RANDOM (no
// read-ahead) and unmapped when done. Not thread-safe; movable only as a
// whole object's owner (no copies).
class MappedRange {
 public:
  MappedRange() = default;
  MappedRange(const MappedRange&) = delete;
  MappedRange& operator=(const MappedRange&) = delete;
  ~MappedRange() { reset(); }
  void reset();
  // size UINT64_MAX: to the file's end. A file shorter than offset + size
  // is an IOError; a missing one NotFound. Messages name the path.
  Status map(const std::string& path, std::uint64_t offset, std::uint64_t size);
  const std::uint8_t* data() const { return data_; }
  std::uint64_t size() const { return size_; }

 private:
  void* base_ = nullptr;
  std::size_t len_ = 0;
  const std::uint8_t* data_ = nullptr;
  std::uint64_t size_ = 0;
};

}  // namespace stoker::detail
