#include "cache/auto_cache.h"

#include <cstdio>

#include "cache/sample_cache.h"

namespace stoker::detail {
namespace {

std::string mb(double bytes) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.0f MB", bytes / 1e6);
  return b;
}

}  // namespace

CacheChoice choose_cache(const SetFootprint& f, std::uint64_t budget, int cache_max_side) {
  constexpr double kEntry = sizeof(SampleCache::Entry) + 64;  // per record, as the cache charges it
  const double n = static_cast<double>(f.records);
  const double decoded = n * (f.decoded_bytes + kEntry), encoded = n * (f.encoded_bytes * 1.05 + kEntry);
  const double b = static_cast<double>(budget);
  const std::string sizes = "estimated from " + std::to_string(f.sampled) + " of " + std::to_string(f.records) +
                            " records: " + mb(encoded) + " encoded, " +
                            (f.image ? mb(decoded) + " decoded" : std::string("no image field")) +
                            "; memory_budget " + mb(b);
  const bool exact = f.max_short_side <= cache_max_side;
  const bool acceptable = f.image && (exact || 2 * f.output_side <= cache_max_side);
  if (acceptable && decoded <= b) {
    return {Cache::kDecoded,
            "\"decoded\": the decoded set fits (" + sizes + "); " +
                (exact ? std::string("no image is downscaled (shorter sides <= cache_max_side ") +
                             std::to_string(cache_max_side) + "), so it is exact"
                       : "images downscaled to cache_max_side " + std::to_string(cache_max_side) + " for output " +
                             std::to_string(f.output_side) + " (at most half of it: about 40 dB or better)")};
  }
  if (encoded <= b) {
    std::string why = !f.image             ? "there is no image to keep decoded"
                      : decoded > b        ? "the decoded set does not fit"
                                           : "images would be downscaled to cache_max_side " +
                                                 std::to_string(cache_max_side) + ", more than half of output " +
                                                 std::to_string(f.output_side) + " (quality)";
    return {Cache::kRam, "\"ram\": the encoded set fits, " + why + " (" + sizes + ")"};
  }
  return {Cache::kMmap, "\"mmap\": not even the encoded set fits (" + sizes + ")"};
}

}  // namespace stoker::detail
