// libFuzzer: a mixture as JSON (mixture_from_json, what stoker.Mix hands the
// bindings and the doctor's snapshot holds), its codec round trip, then the
// mixture opened as a MixtureSource (weights, counts, label offsets and
// maps as parsed) and its epoch's draw table. Each entry's specs are
// replaced by one of three small list files written once to a tmpfs folder
// (which one: the first spec's length), so that no fuzzed path is opened.
// The documented failure is stoker::Error(kInvalidArgument); anything else
// escaping is a finding.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "stoker/mixture.h"

namespace {

bool same(const stoker::Mixture& a, const stoker::Mixture& b) {
  if (a.samples_per_epoch != b.samples_per_epoch || a.sources.size() != b.sources.size()) return false;
  for (std::size_t i = 0; i < a.sources.size(); ++i) {
    const stoker::MixtureEntry &x = a.sources[i], &y = b.sources[i];
    // NOTE: == on doubles: -0.0 == 0.0 and every other weight must come back bit for bit.
    if (x.name != y.name || x.specs != y.specs || !(x.weight == y.weight) || x.label_offset != y.label_offset ||
        x.label_map != y.label_map) {
      return false;
    }
  }
  return true;
}

// Three list files of 1, 5 and 13 records (labels 0, 1, ...); the images are never read.
const std::vector<std::string>& list_files() {
  static const stoker_fuzz::ScratchDir dir;
  static const std::vector<std::string> files = [] {
    std::vector<std::string> f;
    for (int n : {1, 5, 13}) {
      std::string text = "path,label\n";
      for (int i = 0; i < n; ++i) text += "img" + std::to_string(i) + ".jpg," + std::to_string(i) + "\n";
      f.push_back(dir.write("list" + std::to_string(n) + ".csv", text));
    }
    return f;
  }();
  return files;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  stoker::Mixture mix;
  try {
    mix = stoker::mixture_from_json(std::string(reinterpret_cast<const char*>(data), size));
  } catch (const stoker::Error&) {
    return 0;
  }
  // The codec's round trip: what it reads, it writes back to the same mixture.
  if (!same(stoker::mixture_from_json(stoker::mixture_to_json(mix)), mix)) __builtin_trap();

  for (stoker::MixtureEntry& e : mix.sources) e.specs = {list_files()[e.specs.front().size() % 3]};
  std::unique_ptr<stoker::MixtureSource> source;
  try {
    source = std::make_unique<stoker::MixtureSource>(mix);
  } catch (const stoker::Error&) {
    return 0;
  }
  // Counts: each source's share, summing to the draws per epoch exactly.
  std::uint64_t total = 0;
  for (const auto& p : source->parts()) total += p.count;
  if (total != source->samples_per_epoch()) __builtin_trap();
  std::vector<std::uint8_t> member;
  for (std::size_t i = 0; i < source->size(); ++i) {
    (void)source->label(i);
    (void)source->key(i);
    if (!source->read_member(i, "mix:source", &member).ok()) __builtin_trap();
    if (std::string(member.begin(), member.end()) != std::to_string(source->part_of(i))) __builtin_trap();
  }
  (void)source->describe();
  // The epoch's draws, each in closed form (the epoch is the user's samples_per_epoch: bounded here to keep
  // runs short): a record of the source the position belongs to.
  const std::uint64_t positions = std::min<std::uint64_t>(source->samples_per_epoch(), 1u << 14);
  for (std::uint64_t pos = 0; pos < positions; ++pos) {
    const std::uint32_t rec = source->draw(size, (size & 1) != 0, size % 5, pos);
    if (rec >= source->size()) __builtin_trap();
    if (source->part_of(rec) != source->part_of_position(pos)) __builtin_trap();
  }
  return 0;
}
