// libFuzzer: a whole .nii.gz (or .nii/.npy) volume read the way a training
// run reads it: a Loader with a VolumeField over a one-record source, so the
// volume maker's probe inflates the file (inflate_gzip_volume: the header from
// the inflated prefix, its size bounded by deflate's 1032:1, then the voxels by
// libdeflate at once when installed and the trailer's ISIZE agrees, else by
// GzipStream across members); then one batch cuts a padded, centred patch out
// of them.
// (volume_header_fuzz drives the header parser and GzipStream's piecewise
// reads directly.)
//
// Byte 0 picks how the rest becomes the record, so that the fuzzer can
// mutate the uncompressed header while the gzip framing stays valid:
//   bits 0-1: 0 the rest gzipped by the target, 1 the rest as the gzip stream
//             itself, 2 the rest uncompressed (no gzip), 3 gzipped as two members;
//   bits 2-3: the deflate level (1, 6, 9, 0 = stored blocks);
//   bit 4: zero padding after the stream; bit 5: a trailer byte flipped (CRC);
//   bit 6: the last 1-4 bytes cut off; bit 7: cache="ram" (volumes kept whole).
// A bad volume is a stoker::Error from the constructor or next(); anything
// else escaping is a finding. And gzip is only framing: when the target
// gzipped the rest without damage (one member or two, padded or not) and the
// rest is exactly one volume file (its header's voxels end where it ends),
// the .nii.gz must give the batch the uncompressed file gives, or fail as it does.
#include <zlib.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "decode/volume_format.h"
#include "fuzz_util.h"
#include "stoker/loader.h"

namespace {

constexpr std::uint64_t kMaxVoxels = 1 << 18;

// One gzip member of `in` (windowBits 15 + 16: gzip framing).
void gzip_member(const std::uint8_t* in, std::size_t n, int level, std::vector<std::uint8_t>* out) {
  z_stream z{};
  if (deflateInit2(&z, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) __builtin_trap();
  const std::size_t at = out->size();
  out->resize(at + deflateBound(&z, n) + 32);
  z.next_in = const_cast<std::uint8_t*>(in);
  z.avail_in = static_cast<uInt>(n);
  z.next_out = out->data() + at;
  z.avail_out = static_cast<uInt>(out->size() - at);
  if (deflate(&z, Z_FINISH) != Z_STREAM_END) __builtin_trap();
  out->resize(out->size() - z.avail_out);
  deflateEnd(&z);
}

std::vector<std::uint8_t> record_bytes(std::uint8_t mode, const std::uint8_t* data, std::size_t size) {
  static constexpr int kLevels[] = {1, 6, 9, 0};
  const int level = kLevels[(mode >> 2) & 3];
  std::vector<std::uint8_t> out;
  switch (mode & 3) {
    case 1:
      out.assign(data, data + size);
      break;
    case 2:
      return std::vector<std::uint8_t>(data, data + size);
    case 3:
      gzip_member(data, size / 2, level, &out);
      gzip_member(data + size / 2, size - size / 2, level, &out);
      break;
    default:
      gzip_member(data, size, level, &out);
  }
  if (mode & 16) out.insert(out.end(), 1 + size % 7, 0);
  if ((mode & 32) && out.size() >= 8) out[out.size() - 8 + size % 8] ^= 0x5a;
  if (mode & 64) out.resize(out.size() - std::min<std::size_t>(out.size(), 1 + size % 4));
  return out;
}

// The record through a Loader: the batch's voxels, or nothing when the volume is refused.
std::optional<std::vector<std::uint8_t>> load(std::vector<std::uint8_t> record, bool ram) {
  auto source = std::make_shared<stoker_fuzz::MemorySource>(std::vector<std::vector<std::uint8_t>>{std::move(record)});
  stoker::LoaderOptions o;
  o.fields = {stoker::VolumeField("image")};
  o.volume_transforms = {stoker::SpatialPad{{6, 6, 6}}, stoker::CenterSpatialCrop{{6, 6, 6}}};
  o.batch_size = 1;
  o.threads = 1;
  o.prefetch = 1;
  o.on_corrupt = stoker::OnCorrupt::kRaise;
  o.cache.progress = stoker::Progress::kOff;
  o.stage_timing = false;
  o.cache.mode = ram ? stoker::Cache::kRam : stoker::Cache::kMmap;
  o.cache.preload = false;
  o.memory_budget = 64 << 20;
  // NOTE: the parser's own cap, kept small so that each run is fast; what a hostile header must not get past.
  o.max_volume_voxels = kMaxVoxels;
  try {
    stoker::Loader loader(source, o);
    std::optional<stoker::Batch> b = loader.next();
    if (!b || b->size() != 1) __builtin_trap();
    const stoker::TensorView* t = b->tensor("image");
    if (t == nullptr || t->dims.size() != 5 || t->dims[2] != 6 || t->dims[3] != 6 || t->dims[4] != 6) __builtin_trap();
    const auto* p = static_cast<const std::uint8_t*>(t->data);
    return std::vector<std::uint8_t>(p, p + t->bytes);
  } catch (const stoker::Error&) {
    return std::nullopt;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::uint8_t mode = data[0];
  ++data;
  --size;
  const bool ram = (mode & 128) != 0;
  const std::optional<std::vector<std::uint8_t>> got = load(record_bytes(mode, data, size), ram);
  if ((mode & 3) == 1 || (mode & 3) == 2 || (mode & (32 | 64))) return 0;
  stoker::detail::VolumeHeader h;
  if (!stoker::detail::parse_volume_header(data, size, size, kMaxVoxels, &h).ok()) return 0;
  if (h.data_offset + h.data_bytes != size) return 0;
  const std::optional<std::vector<std::uint8_t>> plain = load(std::vector<std::uint8_t>(data, data + size), ram);
  if (got.has_value() != plain.has_value() || (got && *got != *plain)) __builtin_trap();
  return 0;
}
