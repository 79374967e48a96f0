// libFuzzer: the index sidecar parser over arbitrary bytes.
#include <cstdint>
#include <string>

#include "source/shard_index.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  stoker::detail::ShardIndex index;
  if (stoker::detail::parse_index(text, &index).ok()) {
    // Whatever parses must serialize back to the same bytes.
    if (stoker::detail::serialize_index(index) != text) __builtin_trap();
  }
  return 0;
}
