#include "batch/resume.h"

#include <string>

namespace stoker::detail {
namespace {

[[noreturn]] void differs(const char* what, const std::string& saved, const std::string& now, const char* why) {
  throw Error(Code::kInvalidArgument,
              std::string("load_state_dict: ") + what + " was " + saved + " when saved, is " + now + " now; " + why);
}
std::string str(bool b) { return b ? "True" : "False"; }

}  // namespace

void check_restorable(const Loader::State& st, const Loader::State& now, std::uint64_t num_batches) {
  if (st.version != now.version) {
    differs("version", std::to_string(st.version), std::to_string(now.version), "unknown state format");
  }
  if (st.dataset_size != now.dataset_size) {
    differs("dataset_size", std::to_string(st.dataset_size), std::to_string(now.dataset_size),
            "the data changed, so the saved order does not apply");
  }
  if (st.batch_size != now.batch_size) {
    differs("batch_size", std::to_string(st.batch_size), std::to_string(now.batch_size),
            "the position is counted in batches");
  }
  if (st.shuffle != now.shuffle) differs("shuffle", str(st.shuffle), str(now.shuffle), "the order differs");
  if (st.drop_last != now.drop_last) differs("drop_last", str(st.drop_last), str(now.drop_last), "the epoch length differs");
  if (st.world_size != now.world_size) {
    differs("world_size", std::to_string(st.world_size), std::to_string(now.world_size),
            "each rank's share of the epoch depends on it; finish the epoch with the old world size or restart "
            "the epoch (set batches_done to 0)");
  }
  if (st.batches_done > num_batches) {
    differs("batches_done", std::to_string(st.batches_done), "at most " + std::to_string(num_batches),
            "the position is past the end of the epoch");
  }
}

}  // namespace stoker::detail
