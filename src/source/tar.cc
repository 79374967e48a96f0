#include "source/tar.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>

namespace stoker::detail {
namespace {

// Octal field (NUL/space terminated) or GNU base-256 (high bit of byte 0).
bool parse_number(const std::uint8_t* f, std::size_t n, std::uint64_t* out) {
  if (f[0] & 0x80) {
    if (f[0] != 0x80) return false;  // negative or too wide
    std::uint64_t v = 0;
    for (std::size_t i = 1; i < n; ++i) {
      if (v >> 56) return false;
      v = (v << 8) | f[i];
    }
    *out = v;
    return true;
  }
  std::size_t i = 0;
  while (i < n && (f[i] == ' ' || f[i] == '\0')) {
    if (f[i] == '\0') {  // an empty field is zero
      *out = 0;
      return true;
    }
    ++i;
  }
  std::uint64_t v = 0;
  for (; i < n && f[i] >= '0' && f[i] <= '7'; ++i) {
    if (v >> 60) return false;
    v = v * 8 + static_cast<std::uint64_t>(f[i] - '0');
  }
  for (; i < n; ++i) {
    if (f[i] != ' ' && f[i] != '\0') return false;
  }
  *out = v;  // all spaces reads as zero
  return true;
}

std::string field(const std::uint8_t* f, std::size_t n) {
  std::size_t len = 0;
  while (len < n && f[len]) ++len;
  return std::string(reinterpret_cast<const char*>(f), len);
}

// n-1 zero-padded octal digits and a NUL, as GNU tar and Python write them;
// GNU base-256 when the value does not fit (members of 8 GiB and more).
void put_number(char* f, std::size_t n, std::uint64_t v) {
  if (n - 1 < 22 && (v >> (3 * (n - 1))) != 0) {
    std::memset(f, 0, n);
    f[0] = static_cast<char>(0x80);
    for (std::size_t i = n - 1; i > 0 && v; --i, v >>= 8) f[i] = static_cast<char>(v & 0xff);
    return;
  }
  f[n - 1] = '\0';
  for (std::size_t i = n - 1; i-- > 0; v >>= 3) f[i] = static_cast<char>('0' + (v & 7));
}

}  // namespace

Status parse_tar_header(const std::uint8_t* b, TarHeader* h, std::string* error) {
  bool zero = true;
  for (int i = 0; i < 512 && zero; ++i) zero = b[i] == 0;
  if (zero) {
    h->end = true;
    return Status::Ok();
  }
  std::uint64_t stored = 0;
  if (!parse_number(b + 148, 8, &stored)) {
    *error = "garbage tar header (unreadable checksum field)";
    return Status::Corrupt(*error);
  }
  std::uint64_t unsigned_sum = 0;
  std::int64_t signed_sum = 0;
  for (int i = 0; i < 512; ++i) {
    std::uint8_t c = (i >= 148 && i < 156) ? ' ' : b[i];
    unsigned_sum += c;
    signed_sum += static_cast<std::int8_t>(c);
  }
  if (stored != unsigned_sum && static_cast<std::int64_t>(stored) != signed_sum) {
    *error = "garbage tar header (checksum " + std::to_string(stored) + " != computed " +
             std::to_string(unsigned_sum) + ")";
    return Status::Corrupt(*error);
  }
  if (!parse_number(b + 124, 12, &h->size)) {
    *error = "garbage tar header (unreadable size field)";
    return Status::Corrupt(*error);
  }
  h->type = static_cast<char>(b[156]);
  h->name = field(b, 100);
  const bool ustar = std::memcmp(b + 257, "ustar\0", 6) == 0;  // POSIX; GNU writes "ustar  \0"
  if (ustar) {
    std::string prefix = field(b + 345, 155);
    if (!prefix.empty()) h->name = prefix + "/" + h->name;
  }
  return Status::Ok();
}

bool parse_pax(const std::string& data, std::string* path, std::uint64_t* size) {
  std::size_t pos = 0;
  while (pos < data.size()) {
    if (data[pos] == '\0') break;  // padding
    std::size_t sp = data.find(' ', pos);
    if (sp == std::string::npos || sp == pos || sp - pos > 20) return false;
    std::uint64_t len = 0;
    for (std::size_t i = pos; i < sp; ++i) {
      if (data[i] < '0' || data[i] > '9') return false;
      len = len * 10 + static_cast<std::uint64_t>(data[i] - '0');
    }
    if (len < sp - pos + 3 || len > data.size() - pos) return false;
    std::size_t end = pos + static_cast<std::size_t>(len);
    if (data[end - 1] != '\n') return false;
    std::size_t eq = data.find('=', sp + 1);
    if (eq == std::string::npos || eq >= end) return false;
    std::string key = data.substr(sp + 1, eq - sp - 1);
    std::string value = data.substr(eq + 1, end - 1 - (eq + 1));
    if (key == "path") {
      *path = value;
    } else if (key == "size") {
      std::uint64_t v = 0;
      if (value.empty() || value.size() > 19) return false;
      for (char c : value) {
        if (c < '0' || c > '9') return false;
        v = v * 10 + static_cast<std::uint64_t>(c - '0');
      }
      *size = v;
    }
    pos = end;
  }
  return true;
}

bool split_key(const std::string& path, std::string* key, std::string* suffix) {
  std::size_t slash = path.rfind('/');
  std::size_t base = slash == std::string::npos ? 0 : slash + 1;
  std::size_t dot = path.find('.', base);
  // WebDataset's regex needs one or more non-dot characters before the dot.
  if (dot == std::string::npos || dot == base) return false;
  *key = path.substr(0, dot);
  *suffix = path.substr(dot + 1);
  for (char& c : *suffix) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return true;
}

TarWriter::TarWriter(std::string path) : path_(std::move(path)) {
  tmp_ = path_ + ".tmp-" + std::to_string(::getpid());
}

TarWriter::~TarWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!done_ && !tmp_.empty()) ::unlink(tmp_.c_str());
}

Status TarWriter::open() {
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) return Status::IOError(tmp_ + ": cannot create: " + std::strerror(errno));
  return Status::Ok();
}

Status TarWriter::write_all(const void* data, std::size_t n) {
  const auto* p = static_cast<const std::uint8_t*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd_, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return Status::IOError(tmp_ + ": write failed: " + std::strerror(errno));
    }
    p += w;
    n -= static_cast<std::size_t>(w);
    offset_ += static_cast<std::uint64_t>(w);
  }
  return Status::Ok();
}

Status TarWriter::write_header(const std::string& name, std::uint64_t size, char type, std::int64_t mtime) {
  char h[512];
  std::memset(h, 0, sizeof(h));
  std::memcpy(h, name.data(), std::min<std::size_t>(name.size(), 100));
  put_number(h + 100, 8, 0644);
  put_number(h + 108, 8, 0);
  put_number(h + 116, 8, 0);
  put_number(h + 124, 12, size);
  put_number(h + 136, 12, static_cast<std::uint64_t>(mtime < 0 ? 0 : mtime));
  std::memset(h + 148, ' ', 8);
  h[156] = type;
  std::memcpy(h + 257, "ustar\0" "00", 8);
  std::memcpy(h + 265, "stoker", 6);
  std::memcpy(h + 297, "stoker", 6);
  unsigned sum = 0;
  for (unsigned char c : h) sum += c;
  std::snprintf(h + 148, 8, "%06o", sum);
  h[155] = ' ';
  return write_all(h, sizeof(h));
}

Status TarWriter::add(const std::string& name, const std::uint8_t* data, std::size_t size, std::int64_t mtime) {
  if (name.size() > 100) {  // pax header carrying the long path
    std::string record = " path=" + name + "\n";
    std::size_t len = record.size();
    std::size_t digits = std::to_string(len).size();
    while (std::to_string(len + digits).size() != digits) ++digits;
    std::string pax = std::to_string(len + digits) + record;
    Status s = write_header("PaxHeaders/" + name.substr(name.size() - std::min<std::size_t>(name.size(), 80)),
                            pax.size(), 'x', mtime);
    if (!s.ok()) return s;
    if (!(s = write_all(pax.data(), pax.size())).ok()) return s;
    static const char zeros[512] = {};
    if (pax.size() % 512 && !(s = write_all(zeros, 512 - pax.size() % 512)).ok()) return s;
  }
  Status s = write_header(name, size, '0', mtime);
  if (!s.ok()) return s;
  members_.push_back({name, offset_, size});
  if (!(s = write_all(data, size)).ok()) return s;
  static const char zeros[512] = {};
  if (size % 512) return write_all(zeros, 512 - size % 512);
  return Status::Ok();
}

Status TarWriter::finish() {
  static const char zeros[1024] = {};
  Status s = write_all(zeros, sizeof(zeros));  // end-of-archive: two zero blocks
  if (!s.ok()) return s;
  if (::fsync(fd_) != 0) return Status::IOError(tmp_ + ": fsync failed: " + std::strerror(errno));
  ::close(fd_);
  fd_ = -1;
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    return Status::IOError(path_ + ": rename failed: " + std::strerror(errno));
  }
  done_ = true;
  std::string dir = std::filesystem::path(path_).parent_path().string();
  int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
  return Status::Ok();
}

}  // namespace stoker::detail
