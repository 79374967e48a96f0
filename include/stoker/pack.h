// Offline preparation: an image folder or list file packed into
// WebDataset-style tar shards, optionally downscaled and re-encoded once, so
// that no epoch pays for it again.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "stoker/fields.h"
#include "stoker/source.h"

namespace stoker {

struct PackOptions {
  // Output shard names: a printf pattern with one integer conversion,
  // e.g. "out/train-%06d.tar".
  std::string out_pattern;
  // Start a new shard when the current one reaches this many bytes...
  std::uint64_t shard_size = 256ull << 20;
  // ...or, when > 0, split the records evenly into this many shards.
  int shard_count = 0;
  // Downscale so the shorter side is at most this (torchvision's Resize(int)
  // rule and PIL's antialiased bilinear); never upscale. 0: keep the size.
  int max_side = 0;
  // JPEG re-encoding settings: every source format (JPEG, PNG, WebP, TIFF,
  // BMP, GIF, .npy) is re-encoded to JPEG with them.
  int quality = 95;
  int subsampling = 444;  // 444 or 420
  // Restart markers on a grid (segments at most 64 px wide) in re-encoded
  // JPEGs: the loader then decodes a crop from just the segments covering
  // it instead of every row above it and every column beside it. ~2-4% more
  // bytes.
  bool restart_markers = true;
  // Copy the original bytes when no resize is needed (lossless pack), under
  // the member suffix of their format (decode/formats.h: .jpg .png .webp
  // .tif .bmp .gif .npy; a .tiff or .jpeg file's member is .tif or .jpg).
  bool keep = false;
  // When no resize is needed, rewrite JPEGs losslessly: the same quantized
  // coefficients (so the same pixels), optimized Huffman tables and restart
  // markers (unless restart_markers is false), so crops decode only the
  // segments covering them; ~1-2% more bytes. Other formats are copied.
  bool lossless = false;
  // Store decoded uint8 HWC pixels as .npy (decode once, never again).
  bool raw = false;
  // Members that are boxes (by member name, e.g. a list file's column or a
  // COCO source's "boxes"), rescaled with the image under max_side and
  // written as JSON {"format": "xyxy", "boxes", "labels"}; rows in
  // `boxes_format` unless the member's JSON says its own. Every other member
  // is carried too: masks (a PNG or .npy mask of the image's size) are
  // resized with nearest-neighbour under max_side and written as PNG, the
  // rest copied as they are. Default {"boxes"}.
  std::vector<std::string> box_members{"boxes"};
  BoxFormat boxes_format = BoxFormat::kXYXY;
  // A COCO instances JSON source: where its images are, and which are kept.
  CocoOptions coco;
  // Shuffle the record order across shards with this seed (< 0: keep order).
  std::int64_t shuffle_seed = -1;
  // Worker threads; 0 = one per core.
  int threads = 0;
  // Where bad inputs are listed (path, reason); "" = next to the shards as
  // pack-report.tsv. Written only when some input is bad.
  std::string report_path;
  // Called about every 0.2 s and at the end, from the writing thread.
  std::function<void(const struct PackProgress&)> on_progress;
};

struct PackProgress {
  std::uint64_t records_total = 0;
  std::uint64_t records_done = 0;   // written or skipped
  std::uint64_t bytes_in = 0;
  std::uint64_t bytes_out = 0;
  double seconds = 0;
};

struct PackResult {
  std::uint64_t records_in = 0;
  std::uint64_t records_written = 0;
  std::map<std::string, std::uint64_t> skipped_by_reason;  // code name -> count
  std::uint64_t bytes_in = 0;
  std::uint64_t bytes_out = 0;  // shard bytes, tar framing included
  std::uint64_t resized = 0;
  std::uint64_t kept = 0;       // original bytes copied
  std::uint64_t members = 0;    // other members carried (masks, boxes, JSON, ...)
  std::uint64_t members_resized = 0;  // masks resized and boxes rescaled with their image
  std::vector<std::string> shards;
  // The data set's manifest, written beside the shards ("out/train-%06d.tar"
  // -> "out/train.manifest"): a loader given the shards' pattern or this
  // file reads each shard's index only when it first reads that shard.
  std::string manifest;
  std::string report_path;      // "" when every input was good
  double seconds = 0;
};

// Packs `source` (an image folder, a list file, a COCO instances JSON or shards). Throws stoker::Error for
// bad options or an unwritable output; bad inputs are skipped, counted and
// listed in the report. Shards appear under their final names only when
// complete; a rerun after an interruption rewrites them all.
PackResult pack(const std::string& source, const PackOptions& options);

}  // namespace stoker
