// cache="auto": which cache mode fits a data set, from a sampled header pass
// (a few records read, their image headers parsed: no full read before the
// first batch), memory_budget and the quality table of cache_max_side.
#pragma once

#include <cstdint>
#include <string>

#include "stoker/options.h"

namespace stoker::detail {

// One record's size as stored (every member the schema reads), as
// cache="decoded" would keep it (the image at its stored size, other
// members as read), and its image's shorter side (0 without an image); ok
// false when it cannot be read or its image header parsed.
struct RecordFootprint {
  bool ok = false;
  std::uint64_t encoded = 0, decoded = 0;
  int short_side = 0;
};

// What the sampled records say about the whole set.
struct SetFootprint {
  std::uint64_t records = 0;    // in the set
  std::uint64_t sampled = 0;    // records measured (those that could be read and parsed)
  double encoded_bytes = 0;     // mean bytes per record as stored (every member the schema reads)
  double decoded_bytes = 0;     // mean bytes per record as cache="decoded" keeps it
  int max_short_side = 0;       // the largest shorter image side among them (0: no image field)
  bool image = false;           // the schema has an image field (cache="decoded" applies)
  int output_side = 0;          // the larger side of the transforms' output
};

struct CacheChoice {
  Cache mode = Cache::kMmap;
  std::string why;  // one line: the estimates and the rule that decided
};

// The rule, in order:
//  - "decoded" when the decoded set fits `budget` and its quality cost is
//    acceptable: no sampled image is downscaled (shorter side <=
//    cache_max_side: then the cache is exact), or the output is at most half
//    of cache_max_side (the table in options.h: 224 from 448 is 41.4 dB);
//  - else "ram" when the encoded set fits (counting 5% for the rewrite's
//    growth);
//  - else "mmap" (what does not fit would be read each epoch anyway; the OS
//    page cache keeps what it can).
CacheChoice choose_cache(const SetFootprint& f, std::uint64_t budget, int cache_max_side);

}  // namespace stoker::detail
