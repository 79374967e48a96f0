// Volumes (3D scans): .npy and NIfTI-1/2 headers, and a forward gzip reader
// for .nii.gz. The header gives where each voxel lies in the uncompressed file;
// the caller then reads (or inflates) the voxels straight into their buffer.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "stoker/status.h"

struct z_stream_s;  // zlib's z_stream, kept out of this header

namespace stoker::detail {

// A voxel's type as stored (before any scaling).
enum class VoxelType : std::uint8_t { kU8, kI8, kU16, kI16, kU32, kI32, kF32, kF64 };
// Bytes per voxel: 1, 2, 4 or 8.
std::size_t voxel_bytes(VoxelType t);
// NumPy's name of the type: "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "float64".
const char* voxel_name(VoxelType t);

enum class VolumeFormat : std::uint8_t { kNpy, kNifti1, kNifti2 };
// "npy", "NIfTI-1", "NIfTI-2".
const char* volume_format_name(VolumeFormat f);

// What a volume file's header says: the layout of its voxels in the uncompressed file and
// (NIfTI) their scaling and place in the world.
struct VolumeHeader {
  VolumeFormat format = VolumeFormat::kNpy;
  VoxelType type = VoxelType::kU8;
  // Voxels stored in big-endian order: bytes must be swapped on this little-endian machine.
  // Never set for 1-byte types (nothing to swap).
  bool swap = false;
  int channels = 1;                            // C
  std::array<std::int64_t, 3> shape{1, 1, 1};  // spatial S0, S1, S2
  // Where voxel (c, s0, s1, s2) lies: data_offset + voxel_bytes(type) *
  // (c*strides[0] + s0*strides[1] + s1*strides[2] + s2*strides[3]).
  std::array<std::int64_t, 4> strides{0, 0, 0, 0};  // in voxels
  std::uint64_t data_offset = 0;                    // bytes from the start of the (uncompressed) file
  std::uint64_t data_bytes = 0;                     // C*S0*S1*S2*voxel_bytes
  bool scaled = false;                              // NIfTI scl_slope/scl_inter apply (value = raw*slope + inter)
  double slope = 1.0, inter = 0.0;
  std::array<double, 16> affine{};  // row-major 4x4 voxel (s0,s1,s2) -> world (mm), as nibabel's img.affine
  std::array<double, 3> spacing{1.0, 1.0, 1.0};  // voxel size along s0, s1, s2, as nibabel's header.get_zooms()
};

// The bytes a header needs to be parsed: parse_volume_header wants at least
// min(file size, kVolumeHeaderPrefix) bytes of the (uncompressed) file. (A .npy header can
// be longer in pathological cases: then it says so.)
inline constexpr std::size_t kVolumeHeaderPrefix = 4096;

// Parses the header at the start of `data` (`n` bytes available: the whole file, or a prefix
// of at least min(file_size, kVolumeHeaderPrefix) bytes). `file_size` is the whole
// (uncompressed) file's size, or UINT64_MAX when unknown (a .gz stream not inflated yet: then
// checking that the voxels fit is the caller's job). The format is sniffed by magic bytes,
// never by name: "\x93NUMPY" is .npy; sizeof_hdr (int32 at 0) of 348 or 540, in either byte
// order (which is also the voxels' byte order), with magic "n+1\0" at 344 (NIfTI-1) or
// "n+2\0\r\n\032\n" at 4 (NIfTI-2) is NIfTI. NIfTI follows nibabel: shape (i, j, k) = dim[1..3],
// channels the product of dim[4..dim[0]], Fortran order, affine = get_best_affine().
// Refuses (never reads past n) with
//  - Corrupt: unknown magic, dims out of range, vox_offset below the header's size, bitpix
//    disagreeing with datatype, voxels past file_size, a non-finite affine or spacing, a qform
//    quaternion of norm > 1;
//  - Unsupported: .hdr/.img pairs ("ni1"/"ni2"), other datatypes or dtypes, shapes that are
//    not (D, H, W) or (C, D, H, W) for .npy;
//  - ResourceExhausted: more than max_voxels voxels (C*S0*S1*S2), or more than 16 channels;
//    checked with overflow-safe arithmetic, before the data-size check.
Status parse_volume_header(const std::uint8_t* data, std::size_t n, std::uint64_t file_size, std::uint64_t max_voxels,
                           VolumeHeader* out);

// True when data starts with the gzip magic 1f 8b.
bool is_gzip(const std::uint8_t* data, std::size_t n);

// A gzip file (RFC 1952, zlib's inflate) read forwards in pieces: the header's prefix first,
// then the voxels straight into their final buffer, without an intermediate copy of the whole
// output. Concatenated members are read as one stream (as gzip -d and Python's gzip do) and
// zero padding after the last member is ignored.
class GzipStream {
 public:
  GzipStream();
  ~GzipStream();
  GzipStream(const GzipStream&) = delete;
  GzipStream& operator=(const GzipStream&) = delete;

  // Starts reading the n compressed bytes at data (they must outlive the stream's use).
  // Corrupt when they do not start with the gzip magic.
  Status open(const std::uint8_t* data, std::size_t n);
  // Inflates exactly `want` bytes into dst. Corrupt "truncated gzip: ..." when the input or
  // the stream ends first, "gzip data error: <zlib's reason> after N bytes of output" for bad data.
  Status read(std::uint8_t* dst, std::size_t want);
  // Inflates up to `want` bytes into dst; *got < want only where the stream ends (after its
  // last member, padding skipped). Errors as read().
  Status read_some(std::uint8_t* dst, std::size_t want, std::size_t* got) { return inflate_some(dst, want, got); }
  // Inflates and drops n bytes.
  Status skip(std::uint64_t n);
  // After the expected output: checks that the stream ends there, every member's CRC-32 and
  // ISIZE verified. Corrupt "gzip holds more data than the header says" if output remains,
  // "gzip CRC mismatch ..." on a bad trailer, "truncated gzip ..." if the trailer is missing,
  // "gzip: N bytes of trailing data after the stream ..." for bytes after the last member that
  // are neither zero padding nor another member.
  Status finish();
  // Bytes inflated so far.
  std::uint64_t out_bytes() const { return out_; }

 private:
  // Inflates up to `want` bytes into dst, across members; stops early only at the end of the
  // last member (ended_). *got: the bytes produced.
  Status inflate_some(std::uint8_t* dst, std::size_t want, std::size_t* got);
  // At the end of a member: skips zero padding and starts the next member, if any.
  Status next_member();
  // Gives zlib more input when it has used what it had.
  void refill();
  // Input bytes zlib has consumed.
  std::size_t in_used() const;
  // Corrupt "truncated gzip: ..." at the current position.
  Status truncated() const;
  // Corrupt (or ResourceExhausted) for an inflate() result other than Z_OK/Z_STREAM_END.
  Status inflate_error(int ret) const;

  std::unique_ptr<z_stream_s> z_;
  bool live_ = false;                 // inflateInit2 succeeded, inflateEnd owed
  bool ended_ = false;                // the last member's trailer was read
  const std::uint8_t* in_ = nullptr;  // the whole compressed input
  std::size_t in_size_ = 0;
  std::size_t left_ = 0;  // bytes at the end of in_ not yet handed to zlib
  std::uint64_t out_ = 0;
  std::unique_ptr<std::uint8_t[]> scratch_;  // 64 KiB for skip()
  // An error met past the last byte a read asked for (a bad trailer, trailing data: zlib reads
  // the trailer in the call that ends the output): that read succeeds, the next call reports it.
  Status deferred_;
};

// The gzip trailer's ISIZE (the uncompressed size mod 2^32, of the last member only), 0 when n < 18.
// Only a hint: a file of several members, or zero-padded, ends otherwise.
std::uint32_t gzip_isize(const std::uint8_t* data, std::size_t n);

// The most output n bytes of gzip can inflate to. Deflate's largest ratio is 1032:1 (a 258-byte
// match per 2 bits: a 1-bit length code and a 1-bit distance code); gzip's framing (18 bytes a
// member) and zero padding make no output, so 1032 * n bounds the output of any n bytes; 4 KiB
// more is slack. Saturates at UINT64_MAX.
std::uint64_t gzip_max_output(std::uint64_t n);

// A gzipped volume file (.nii.gz, a gzipped .npy) inflated whole, its n bytes at data: the header
// read through the stream (the first min(kVolumeHeaderPrefix, output) bytes: the gzip trailer's
// ISIZE is not trusted, so files of several members, as pigz or `cat a.gz b.gz` write, and
// zero-padded ones read as gzip -d and nibabel read them), then the voxels inflated straight into
// *out, with no other copy of the output. On success *out holds the voxels at h->data_offset
// (h->data_offset is 0, or the file's own offset when the whole file was inflated at once).
// libdeflate (libdeflate.so.0, dlopen()ed when present) inflates a one-member file at once;
// zlib does the rest, and re-reads what libdeflate refused to name the reason.
// Refuses with
//  - the header's errors (parse_volume_header; the file's size is known to it only when the whole
//    output is shorter than the prefix);
//  - Corrupt "the header says T bytes uncompressed; N bytes of gzip inflate to at most M" when
//    T > gzip_max_output(n), before anything of T bytes is allocated (a forged header must not
//    make a worker allocate up to max_voxels x 8 bytes);
//  - GzipStream's errors: truncation, a CRC or ISIZE mismatch in any member, more output than
//    the header says, trailing bytes that are neither zero padding nor another member.
Status inflate_gzip_volume(const std::uint8_t* data, std::size_t n, std::uint64_t max_voxels, VolumeHeader* h,
                           std::vector<std::uint8_t>* out);

}  // namespace stoker::detail
