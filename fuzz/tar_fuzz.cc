// libFuzzer: the tar reader and the sample grouping over arbitrary bytes.
#include <cstdint>
#include <cstring>

#include "source/shard_index.h"
#include "source/tar.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto read_at = [&](std::uint8_t* buf, std::size_t n, std::uint64_t off) -> long long {
    if (off >= size) return 0;
    std::size_t k = std::min<std::size_t>(n, size - static_cast<std::size_t>(off));
    std::memcpy(buf, data + off, k);
    return static_cast<long long>(k);
  };
  stoker::detail::ShardIndex index;
  (void)stoker::detail::build_index(read_at, size, "fuzz.tar", "cls", &index);
  (void)stoker::detail::build_index(read_at, size, "fuzz.tar", "json:label", &index);
  return 0;
}
