// libFuzzer: the index sidecar parser over arbitrary bytes.
//
// What parses must survive a round trip as values: serialize_index(parsed) parses back to the same
// index, and that text is a fixed point (serializing it again gives the same bytes). The bytes
// themselves need not come back: parse_index accepts numbers with leading zeros ("007"; F6), which
// serialize_index writes without. It keeps accepting them: an index is checksummed, so such a
// number was written on purpose (an editor, another tool) and means the same value, and refusing it
// would only re-index the shard.
#include <cstdint>
#include <string>

#include "source/shard_index.h"

namespace {

bool same_record(const stoker::detail::IndexRecord& a, const stoker::detail::IndexRecord& b) {
  return a.key == b.key && a.suffix == b.suffix && a.offset == b.offset && a.size == b.size && a.label == b.label &&
         a.error == b.error && a.members == b.members;
}

bool same_index(const stoker::detail::ShardIndex& a, const stoker::detail::ShardIndex& b) {
  if (a.shard_size != b.shard_size || a.shard_mtime_ns != b.shard_mtime_ns || a.labels != b.labels ||
      a.records.size() != b.records.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.records.size(); ++i) {
    if (!same_record(a.records[i], b.records[i])) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  stoker::detail::ShardIndex index;
  if (stoker::detail::parse_index(text, &index).ok()) {
    const std::string again = stoker::detail::serialize_index(index);
    stoker::detail::ShardIndex back;
    if (!stoker::detail::parse_index(again, &back).ok() || !same_index(index, back)) __builtin_trap();
    if (stoker::detail::serialize_index(back) != again) __builtin_trap();
  }
  return 0;
}
