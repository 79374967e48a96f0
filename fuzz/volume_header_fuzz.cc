// libFuzzer: the volume header parser (.npy, NIfTI-1/2) and the gzip reader over arbitrary bytes.
#include <algorithm>
#include <cstdint>
#include <memory>

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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  check_header(data, size);
  if (stoker::detail::is_gzip(data, size)) check_gzip(data, size);
  (void)stoker::detail::gzip_isize(data, size);
  return 0;
}
