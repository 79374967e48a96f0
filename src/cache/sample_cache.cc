#include "cache/sample_cache.h"

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
  return budget;
}

}  // namespace stoker::detail
