// libFuzzer: a loader state as JSON (state_from_json, what load_state_dict
// and `stoker inspect-state` read), its codec round trip, then the state
// loaded into a real Loader (check_restorable, saved_segments: the elastic
// resume's arithmetic over the fuzzed sizes and parts) and the resumed epoch
// run to its end. Four loaders over the same 37 records (shuffle x
// drop_last, batch 4, one rank), made once; the state's own flags pick one,
// so that those checks are passed and the position and topology get fuzzed.
// The documented failure is stoker::Error(kInvalidArgument); anything else
// escaping is a finding.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "batch/resume.h"
#include "fuzz_util.h"
#include "stoker/loader.h"

namespace {

constexpr int kRecords = 37;

stoker::Loader& loader_for(bool shuffle, bool drop_last) {
  static std::unique_ptr<stoker::Loader> loaders[4];
  std::unique_ptr<stoker::Loader>& l = loaders[(shuffle ? 2 : 0) + (drop_last ? 1 : 0)];
  if (!l) {
    std::vector<std::vector<std::uint8_t>> records;
    std::vector<std::int64_t> labels;
    for (int i = 0; i < kRecords; ++i) {
      records.push_back(stoker_fuzz::tiny_npy({2, 3}, static_cast<std::uint8_t>(i)));
      labels.push_back(i);
    }
    stoker::LoaderOptions o;
    o.kind = stoker::SampleKind::kArray;
    o.batch_size = 4;
    o.shuffle = shuffle;
    o.drop_last = drop_last;
    o.seed = 7;
    o.threads = 1;
    o.prefetch = 1;
    o.on_corrupt = stoker::OnCorrupt::kRaise;
    o.cache.progress = stoker::Progress::kOff;
    o.stage_timing = false;
    l = std::make_unique<stoker::Loader>(std::make_shared<stoker_fuzz::MemorySource>(records, labels), o);
  }
  return *l;
}

bool same(const stoker::Loader::State& a, const stoker::Loader::State& b) {
  bool eq = a.version == b.version && a.seed == b.seed && a.epoch == b.epoch && a.batches_done == b.batches_done &&
            a.dataset_size == b.dataset_size && a.batch_size == b.batch_size && a.shuffle == b.shuffle &&
            a.drop_last == b.drop_last && a.shuffle_window == b.shuffle_window && a.world_size == b.world_size &&
            a.earlier.size() == b.earlier.size() && a.mixture.size() == b.mixture.size();
  for (std::size_t i = 0; eq && i < a.earlier.size(); ++i) {
    eq = a.earlier[i].world_size == b.earlier[i].world_size && a.earlier[i].batch_size == b.earlier[i].batch_size &&
         a.earlier[i].batches_done == b.earlier[i].batches_done;
  }
  for (std::size_t i = 0; eq && i < a.mixture.size(); ++i) {
    eq = a.mixture[i].name == b.mixture[i].name && a.mixture[i].size == b.mixture[i].size &&
         a.mixture[i].count == b.mixture[i].count;
  }
  return eq;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using stoker::detail::state_from_json;
  using stoker::detail::state_to_json;
  stoker::Loader::State st;
  try {
    st = state_from_json(std::string(reinterpret_cast<const char*>(data), size));
  } catch (const stoker::Error&) {
    return 0;
  }
  // The codec's round trip: what it reads, it writes back to the same state.
  if (!same(state_from_json(state_to_json(st)), st)) __builtin_trap();

  stoker::Loader& loader = loader_for(st.shuffle, st.drop_last);
  try {
    loader.load_state_dict(st);
  } catch (const stoker::Error&) {
    return 0;
  }
  // The resumed epoch: never more batches than a fresh one, every record a real one.
  const std::size_t fresh = loader.num_batches();
  std::size_t batches = 0;
  while (std::optional<stoker::Batch> b = loader.next()) {
    if (++batches > fresh) __builtin_trap();
    const auto* labels = static_cast<const std::int64_t*>(b->tensor("label")->data);
    for (std::size_t i = 0; labels && i < b->size(); ++i) {
      if (labels[i] < 0 || labels[i] >= kRecords) __builtin_trap();
    }
  }
  return 0;
}
