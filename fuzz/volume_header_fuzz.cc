// libFuzzer: the volume header parser (.npy, NIfTI-1/2), the gzip reader and the whole-file
// inflate of a gzipped volume (inflate_gzip_volume) over arbitrary bytes.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "decode/volume_format.h"

namespace {

// A parsed header must describe voxels inside the file it came from.
void check_header(const std::uint8_t* data, std::size_t size) {
  stoker::detail::VolumeHeader h;
  const stoker::Status s = stoker::detail::parse_volume_header(data, size, size, std::uint64_t{1} << 31, &h);
  if (!s.ok()) return;
  if (h.data_offset > size || h.data_bytes > size - h.data_offset) __builtin_trap();
  if (h.channels < 1 || h.channels > 16) __builtin_trap();
  if (h.data_bytes != stoker::detail::voxel_bytes(h.type) * static_cast<std::uint64_t>(h.channels) *
                          static_cast<std::uint64_t>(h.shape[0] * h.shape[1] * h.shape[2])) {
    __builtin_trap();
  }
}

// Inflates up to 1 MiB in uneven pieces, then checks the end of the stream.
void check_gzip(const std::uint8_t* data, std::size_t size) {
  constexpr std::size_t kMax = 1 << 20;
  static const std::unique_ptr<std::uint8_t[]> out(new std::uint8_t[kMax]);
  stoker::detail::GzipStream g;
  if (!g.open(data, size).ok()) return;
  std::size_t done = 0, piece = 1;
  while (done < kMax) {
    const std::size_t want = std::min(piece, kMax - done);
    if (!g.read(out.get() + done, want).ok()) break;
    done += want;
    if (g.out_bytes() != done) __builtin_trap();
    piece = piece * 3 + 1;
  }
  (void)g.skip(100);
  (void)g.finish();
}

// A whole gzipped volume file: what is accepted holds the header's voxels, and never more than
// the compressed size can inflate to (what was allocated for it).
void check_whole(const std::uint8_t* data, std::size_t size) {
  stoker::detail::VolumeHeader h;
  std::vector<std::uint8_t> out;
  const stoker::Status s = stoker::detail::inflate_gzip_volume(data, size, std::uint64_t{1} << 18, &h, &out);
  if (out.size() > stoker::detail::gzip_max_output(size)) __builtin_trap();
  if (!s.ok()) return;
  if (h.data_offset > out.size() || h.data_bytes > out.size() - h.data_offset) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  check_header(data, size);
  if (stoker::detail::is_gzip(data, size)) {
    check_gzip(data, size);
    check_whole(data, size);
  }
  (void)stoker::detail::gzip_isize(data, size);
  return 0;
}
