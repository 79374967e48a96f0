#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "source/file_reader.h"
#include "source/shard_source.h"
#include "stoker/source.h"

namespace stoker {
namespace detail {

namespace {

// Reads fd into *out (closing fd): a regular file up to out->size() bytes
// (fewer if it shrank since fstat); a named pipe (a record produced on
// demand, or storage slow on purpose), growing *out, until EOF, at most
// kMaxStreamBytes.
constexpr std::size_t kMaxStreamBytes = 1ull << 30;
Status read_fd(int fd, const std::string& path, bool pipe, std::vector<std::uint8_t>* out) {
  std::size_t done = 0;
  Status st;
  for (;;) {
    if (done == out->size()) {
      if (!pipe) break;
      if (done >= kMaxStreamBytes) {
        st = Status::ResourceExhausted(path + ": pipe yielded more than " + std::to_string(kMaxStreamBytes) + " bytes");
        break;
      }
      out->resize(std::max<std::size_t>(2 * done, 65536));
    }
    ssize_t n = ::read(fd, out->data() + done, out->size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      st = Status::IOError(path + ": read failed at byte " + std::to_string(done) + ": " + std::strerror(errno));
      break;
    }
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  out->resize(done);
  ::close(fd);
  return st;
}

}  // namespace

Status read_file(const std::string& path, std::vector<std::uint8_t>* out) {
  int fd;
  do {  // NOTE: a signal (Ctrl-C) landing on this worker thread must not count as an I/O error
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    int e = errno;
    return {e == ENOENT ? Code::kNotFound : Code::kIOError, path + ": cannot open: " + std::strerror(e)};
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return Status::IOError(path + ": cannot stat: " + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode)) {
    ::close(fd);
    return Status::IOError(path + ": not a regular file or pipe");
  }
  const bool pipe = S_ISFIFO(st.st_mode);
  out->resize(pipe ? 0 : static_cast<std::size_t>(st.st_size));
  return read_fd(fd, path, pipe, out);
}

std::string relative_path(const std::string& path, const std::string& root) {
  if (root.empty()) return path;
  const std::string r = std::filesystem::path(path).lexically_relative(root).generic_string();
  return r.empty() || r.rfind("..", 0) == 0 ? path : r;
}

long long pread_full(int fd, std::uint8_t* buf, std::size_t n, std::uint64_t offset) {
  std::size_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(fd, buf + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) break;
    done += static_cast<std::size_t>(r);
  }
  return static_cast<long long>(done);
}

}  // namespace detail

Status Source::read_member(std::size_t i, const std::string& member, std::vector<std::uint8_t>* out) const {
  (void)out;
  return Status::NotFound("record '" + key(i) + "' has no member '" + member +
                          "': this source holds one file per record (members are the files of a tar shard sample)");
}

std::unique_ptr<Source> open_source(const std::string& spec, const std::string& labels, const std::string& index_dir,
                                    const CocoOptions& coco, const RemoteOptions& remote) {
  if (detail::looks_like_shards(spec)) return open_shards({spec}, labels, index_dir, remote);
  std::error_code ec;
  auto st = std::filesystem::status(spec, ec);
  if (ec || !std::filesystem::exists(st)) {
    throw Error(Code::kNotFound, "source '" + spec + "' does not exist");
  }
  if (std::filesystem::is_directory(st)) return open_image_folder(spec);
  const std::string ext = std::filesystem::path(spec).extension().string();
  if (ext == ".json" || ext == ".JSON") return open_coco(spec, coco);
  return open_list_file(spec);
}

std::unique_ptr<Source> open_sources(const std::vector<std::string>& specs, const std::string& labels,
                                     const std::string& index_dir, const CocoOptions& coco, const RemoteOptions& remote) {
  if (specs.empty()) throw Error(Code::kInvalidArgument, "source: no path given");
  if (specs.size() == 1) return open_source(specs[0], labels, index_dir, coco, remote);
  for (const auto& s : specs) {
    std::error_code ec;
    if (std::filesystem::is_directory(s, ec)) {
      throw Error(Code::kInvalidArgument, "source: a list of paths must name tar shards, got directory '" + s + "'");
    }
  }
  return open_shards(specs, labels, index_dir, remote);
}

}  // namespace stoker
