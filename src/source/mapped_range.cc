#include "source/mapped_range.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace stoker::detail {

void MappedRange::reset() {
  if (base_) munmap(base_, len_);
  base_ = nullptr;
}

Status MappedRange::map(const std::string& path, std::uint64_t offset, std::uint64_t size) {
  reset();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? Status::NotFound(path + ": no such file") : Status::IOError(path + ": " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return Status::IOError(path + ": " + std::strerror(e));
  }
  const auto file = static_cast<std::uint64_t>(st.st_size);
  if (size == UINT64_MAX) size = file > offset ? file - offset : 0;
  if (offset + size > file) {
    ::close(fd);
    return Status::IOError(path + ": shorter than its index says");
  }
  size_ = size;
  if (size == 0) {
    ::close(fd);
    data_ = nullptr;
    return Status();
  }
  const std::uint64_t page = static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
  const std::uint64_t start = offset / page * page;
  len_ = static_cast<std::size_t>(offset + size - start);
  void* p = mmap(nullptr, len_, PROT_READ, MAP_PRIVATE, fd, static_cast<off_t>(start));
  const int e = errno;
  ::close(fd);
  if (p == MAP_FAILED) return Status::IOError(path + ": mmap: " + std::strerror(e));
  base_ = p;
  // Only the pages a patch touches are read: no read-ahead of the volume.
  madvise(base_, len_, MADV_RANDOM);
  data_ = static_cast<const std::uint8_t*>(base_) + (offset - start);
  return Status();
}

}  // namespace stoker::detail
