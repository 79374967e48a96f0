// Restart markers put into a baseline JPEG without decoding it: the
// entropy-coded data is Huffman-decoded for its structure only (where each
// block's bits end, and each block's DC value), then copied bit for bit into
// the loader's random-access form (restart markers on decode/jpeg_restart.h's
// grid). Only the DC differences that the new restart intervals change are
// re-encoded; no dequantisation, no IDCT, no coefficient buffers. The output
// decodes to the same coefficients, so the same pixels, as the input.
// JpegTranscoder (decode/jpeg_transcode.h) does the same job for any JPEG
// libjpeg reads; this path refuses what it does not handle, and costs less
// than half a decode: per image, on one thread, 0.46 ms against 1.10 ms for
// a full libjpeg-turbo decode to RGB and 1.42 ms for the transcoder
// (optimize=false) on the sample set (q100 4:4:4), 0.28 / 0.63 / 0.68 ms on
// it re-encoded at q85 4:2:0 with optimized tables
// (bench/jpeg_restart_insert_bench).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "stoker/status.h"

namespace stoker::detail {

// Thread-compatible; one per thread (it keeps its scratch buffers and
// Huffman lookup tables from one image to the next).
class JpegRestartInserter {
 public:
  JpegRestartInserter();
  ~JpegRestartInserter();
  JpegRestartInserter(const JpegRestartInserter&) = delete;
  JpegRestartInserter& operator=(const JpegRestartInserter&) = delete;

  // Replaces *out with `data` rewritten with restart markers every
  // restart_interval_for(width, mcu_w) MCUs (parse_restart_layout accepts
  // it): the headers as they were, except that any DRI is replaced and a DC
  // Huffman table that cannot code an absolute DC value is replaced by the
  // standard one (JPEG Annex K); the same quantized coefficients. Returns
  //   - ok;
  //   - kUnsupported: a JPEG this path does not rewrite (progressive,
  //     arithmetic-coded, lossless, hierarchical, 12-bit, several scans, a
  //     Huffman table left undefined, a DC value beyond 8-bit range, ...):
  //     use JpegTranscoder;
  //   - kCorrupt: bytes that break the JPEG rules (a bad Huffman code,
  //     truncated data, a restart marker out of sequence, a block of more
  //     than 64 coefficients, bytes where a marker must be, no end-of-image
  //     marker, ...), with the reason. libjpeg-turbo reads some of these by
  //     filling in or ignoring the damage, so a caller that wants libjpeg's
  //     verdict falls back to JpegTranscoder on either code.
  // *out is unspecified after a failure.
  Status insert(const std::uint8_t* data, std::size_t size, std::vector<std::uint8_t>* out);

  struct State;

 private:
  std::unique_ptr<State> s_;
};

// JpegRestartInserter::insert with an inserter of its own (no state kept).
Status insert_restart_markers(const std::uint8_t* data, std::size_t size, std::vector<std::uint8_t>* out);

}  // namespace stoker::detail
