// libFuzzer: the list-file parser over arbitrary bytes.
#include <cstdint>
#include <string>
#include <vector>

#include "source/list_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> paths;
  std::vector<std::int64_t> labels;
  (void)stoker::detail::parse_list(std::string(reinterpret_cast<const char*>(data), size), "fuzz.csv", "base", &paths,
                                   &labels);
  if (paths.size() != labels.size()) __builtin_trap();
  return 0;
}
