#include "batch/resume.h"

#include <algorithm>
#include <string>

namespace stoker::detail {
namespace {

[[noreturn]] void differs(const char* what, const std::string& saved, const std::string& now, const char* why) {
  throw Error(Code::kInvalidArgument,
              std::string("load_state_dict: ") + what + " was " + saved + " when saved, is " + now + " now; " + why);
}
std::string str(bool b) { return b ? "True" : "False"; }

}  // namespace

void check_restorable(const Loader::State& st, const Loader::State& now) {
  if (st.version != 1 && st.version != now.version) {
    differs("version", std::to_string(st.version), std::to_string(now.version), "unknown state format");
  }
  if (st.dataset_size != now.dataset_size) {
    differs("dataset_size", std::to_string(st.dataset_size), std::to_string(now.dataset_size),
            "the data changed, so the saved order does not apply");
  }
  if (st.shuffle != now.shuffle) differs("shuffle", str(st.shuffle), str(now.shuffle), "the order differs");
  if (st.drop_last != now.drop_last) {
    differs("drop_last", str(st.drop_last), str(now.drop_last), "which records an epoch holds differs");
  }
  auto positive = [](const char* what, std::uint64_t v) {
    if (v < 1) throw Error(Code::kInvalidArgument, std::string("load_state_dict: ") + what + " must be >= 1, got " +
                                                       std::to_string(v));
  };
  positive("world_size", static_cast<std::uint64_t>(std::max(st.world_size, 0)));
  positive("batch_size", st.batch_size);
  for (const auto& p : st.earlier) {
    positive("earlier[].world_size", static_cast<std::uint64_t>(std::max(p.world_size, 0)));
    positive("earlier[].batch_size", p.batch_size);
  }
}

std::vector<Segment> saved_segments(const Loader::State& st, const OrderParams& order) {
  std::vector<Segment> segs;
  auto add = [&](int world, std::uint64_t batch, std::uint64_t done, const std::string& what) {
    OrderParams q = order;
    q.seed = st.seed;
    q.world_size = world;
    q.rank = 0;
    q.batch_size = static_cast<std::size_t>(batch);
    const std::size_t share = resumed_order(q, st.epoch, segs).size();
    const std::uint64_t batches = (share + batch - 1) / batch;
    if (done > batches) {
      differs(what.c_str(), std::to_string(done), "at most " + std::to_string(batches),
              "the position is past the end of the epoch");
    }
    if (done > 0) segs.push_back({world, static_cast<std::size_t>(batch), static_cast<std::size_t>(done)});
  };
  for (std::size_t i = 0; i < st.earlier.size(); ++i) {
    const auto& p = st.earlier[i];
    add(p.world_size, p.batch_size, p.batches_done, "earlier[" + std::to_string(i) + "].batches_done");
  }
  add(st.world_size, st.batch_size, st.batches_done, "batches_done");
  return segs;
}

}  // namespace stoker::detail
