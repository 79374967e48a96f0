#include "cache/sample_cache.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace stoker::detail {
namespace {

std::uint64_t read_number(const char* path) {
  std::ifstream in(path);
  std::string s;
  if (!(in >> s) || s == "max") return UINT64_MAX;
  try {
    return std::stoull(s);
  } catch (const std::exception&) {
    return UINT64_MAX;
  }
}

}  // namespace

std::uint64_t default_memory_budget() {
  std::uint64_t available = 0;
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  std::uint64_t kb = 0;
  std::string unit;
  while (meminfo >> key >> kb) {
    std::getline(meminfo, unit);
    if (key == "MemAvailable:") available = kb * 1024;
  }
  std::uint64_t budget = available / 2;
  std::uint64_t limit = read_number("/sys/fs/cgroup/memory.max");
  std::uint64_t current = read_number("/sys/fs/cgroup/memory.current");
  if (limit == UINT64_MAX) {
    limit = read_number("/sys/fs/cgroup/memory/memory.limit_in_bytes");
    current = read_number("/sys/fs/cgroup/memory/memory.usage_in_bytes");
  }
  if (limit != UINT64_MAX && current != UINT64_MAX && limit > current) budget = std::min(budget, (limit - current) / 2);
  // NOTE: torchrun starts LOCAL_WORLD_SIZE ranks on a node, each with its
  // own loader and cache, all seeing the same available memory: each takes
  // its share, or together they would ask for that many halves of it.
  if (const char* env = std::getenv("LOCAL_WORLD_SIZE")) {
    char* end = nullptr;
    const long ranks = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && ranks > 1) budget /= static_cast<std::uint64_t>(ranks);
  }
  return budget;
}

}  // namespace stoker::detail
