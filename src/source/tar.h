// POSIX tar (ustar, GNU long names, pax headers): scanning and writing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stoker/status.h"

namespace stoker::detail {

struct TarMember {
  std::string name;        // full path inside the archive (pax/GNU long names applied)
  std::uint64_t offset;    // of the member's data
  std::uint64_t size;      // of the member's data
};

// Caps on untrusted header data.
inline constexpr std::uint64_t kMaxTarLongName = 1 << 16;     // GNU 'L' name bytes
inline constexpr std::uint64_t kMaxTarPaxHeader = 1 << 20;    // pax 'x' record bytes

// Lists the regular-file members of a tar archive read through `read_at`
// (pread-like: reads `n` bytes at `offset` into `buf`, returns bytes read or
// -1). Directories, links and global headers are skipped. Errors name
// `shard` and the byte offset: a bad header checksum, a member running past
// the end of the file, a truncated archive (no end-of-archive block).
template <typename ReadAt>
Status scan_tar(ReadAt&& read_at, std::uint64_t file_size, const std::string& shard, std::vector<TarMember>* out);

// Parses one 512-byte header block. Exposed for the fuzzer and tests.
struct TarHeader {
  std::string name;
  std::uint64_t size = 0;
  char type = '0';
  bool end = false;  // an all-zero block
};
Status parse_tar_header(const std::uint8_t* block, TarHeader* h, std::string* error);

// Parses a pax extended header's records ("len key=value\n"...), applying
// `path` and `size`. Returns false on malformed records.
bool parse_pax(const std::string& data, std::string* path, std::uint64_t* size);

// Writes a ustar archive; names longer than 100 bytes get a pax header.
// Data goes to `path + ".tmp-<pid>"`; finish() adds the end-of-archive
// blocks, fsyncs and renames it to `path` (and fsyncs the directory), so the
// final name only ever holds a complete archive.
class TarWriter {
 public:
  explicit TarWriter(std::string path);
  ~TarWriter();  // removes the temp file unless finish() succeeded
  TarWriter(const TarWriter&) = delete;
  TarWriter& operator=(const TarWriter&) = delete;

  Status open();
  Status add(const std::string& name, const std::uint8_t* data, std::size_t size, std::int64_t mtime);
  Status finish();
  std::uint64_t bytes_written() const { return offset_; }
  const std::string& path() const { return path_; }
  const std::vector<TarMember>& members() const { return members_; }

 private:
  Status write_all(const void* data, std::size_t n);
  Status write_header(const std::string& name, std::uint64_t size, char type, std::int64_t mtime);

  std::string path_, tmp_;
  int fd_ = -1;
  bool done_ = false;
  std::uint64_t offset_ = 0;
  std::vector<TarMember> members_;
};

// WebDataset's key rule: "dir/name.ext.more" -> key "dir/name", suffix
// "ext.more" (lower-cased). False when the base name has no dot.
bool split_key(const std::string& path, std::string* key, std::string* suffix);

}  // namespace stoker::detail

#include "source/tar_scan_inl.h"
