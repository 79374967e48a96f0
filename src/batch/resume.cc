#include "batch/resume.h"

#include <algorithm>
#include <string>

#include <nlohmann/json.hpp>

namespace stoker::detail {
namespace {

[[noreturn]] void differs(const char* what, const std::string& saved, const std::string& now, const char* why) {
  throw Error(Code::kInvalidArgument,
              std::string("load_state_dict: ") + what + " was " + saved + " when saved, is " + now + " now; " + why);
}
std::string str(bool b) { return b ? "True" : "False"; }

}  // namespace

void check_restorable(const Loader::State& st, const Loader::State& now) {
  // NOTE: 1 (no `earlier`), 2, 3 (with shuffle_window) and 4 all parse; a
  // window that differs is refused below, by name.
  if (st.version < 1 || st.version > 4) {
    differs("version", std::to_string(st.version), std::to_string(now.version), "unknown state format");
  }
  // Before 4 a shuffled epoch had another order (a materialised
  // Fisher-Yates shuffle): a position inside such an epoch names other
  // records now. Unshuffled orders and epoch starts are the same.
  if (st.version < 4 && st.shuffle && (st.batches_done > 0 || !st.earlier.empty())) {
    const std::string why = "a shuffled epoch's order changed in version 4, so the saved position in epoch " +
                            std::to_string(st.epoch) +
                            " does not apply; load it with batches_done=0 and no earlier parts to start that epoch "
                            "over, or finish the epoch with the stoker that saved it";
    differs("version", std::to_string(st.version), std::to_string(now.version), why.c_str());
  }
  auto sources = [](const Loader::State& s) {
    if (s.mixture.empty()) return std::string("one data set");
    std::string d = "a mixture of";
    for (std::size_t i = 0; i < s.mixture.size(); ++i) {
      const auto& m = s.mixture[i];
      d += (i ? ", '" : " '") + m.name + "' (" + std::to_string(m.size) + " records, " + std::to_string(m.count) +
           " per epoch)";
    }
    return d;
  };
  if (st.mixture.size() != now.mixture.size() ||
      !std::equal(st.mixture.begin(), st.mixture.end(), now.mixture.begin(), [](const auto& a, const auto& b) {
        return a.name == b.name && a.size == b.size && a.count == b.count;
      })) {
    differs("the source", sources(st), sources(now), "the epoch's draws differ, so the saved position does not apply");
  }
  if (st.dataset_size != now.dataset_size) {
    differs("dataset_size", std::to_string(st.dataset_size), std::to_string(now.dataset_size),
            "the data changed, so the saved order does not apply");
  }
  if (st.shuffle != now.shuffle) differs("shuffle", str(st.shuffle), str(now.shuffle), "the order differs");
  if (st.shuffle_window != now.shuffle_window) {
    differs("shuffle_window", std::to_string(st.shuffle_window), std::to_string(now.shuffle_window), "the order differs");
  }
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
    const std::size_t share = RankOrder(q, st.epoch, segs).size();  // a view while segs is empty
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

std::string state_to_json(const Loader::State& st) {
  nlohmann::ordered_json j;
  j["version"] = st.version;
  j["seed"] = st.seed;
  j["epoch"] = st.epoch;
  j["batches_done"] = st.batches_done;
  j["dataset_size"] = st.dataset_size;
  j["batch_size"] = st.batch_size;
  j["shuffle"] = st.shuffle;
  j["drop_last"] = st.drop_last;
  if (st.shuffle_window > 0) j["shuffle_window"] = st.shuffle_window;
  j["world_size"] = st.world_size;
  j["earlier"] = nlohmann::ordered_json::array();
  for (const auto& p : st.earlier) {
    j["earlier"].push_back({{"world_size", p.world_size}, {"batch_size", p.batch_size}, {"batches_done", p.batches_done}});
  }
  if (!st.mixture.empty()) {
    j["mixture"] = nlohmann::ordered_json::array();
    for (const auto& m : st.mixture) j["mixture"].push_back({{"name", m.name}, {"size", m.size}, {"count", m.count}});
  }
  return j.dump();
}

namespace {

[[noreturn]] void bad_state(const std::string& what) { throw Error(Code::kInvalidArgument, "load_state_dict: " + what); }

const nlohmann::json& key(const nlohmann::json& j, const char* k, const char* where = "the state") {
  auto it = j.find(k);
  if (it == j.end()) bad_state(std::string(where) + " has no '" + k + "'");
  return *it;
}
std::uint64_t count(const nlohmann::json& j, const char* k, const char* where = "the state") {
  const auto& v = key(j, k, where);
  if (!v.is_number_unsigned()) bad_state(std::string("'") + k + "' must be an integer >= 0, got " + v.dump());
  return v.get<std::uint64_t>();
}
int small_count(const nlohmann::json& j, const char* k, const char* where = "the state") {
  const std::uint64_t v = count(j, k, where);
  if (v > 1u << 30) bad_state(std::string("'") + k + "' is out of range: " + std::to_string(v));
  return static_cast<int>(v);
}
bool flag(const nlohmann::json& j, const char* k) {
  const auto& v = key(j, k);
  if (!v.is_boolean()) bad_state(std::string("'") + k + "' must be true or false, got " + v.dump());
  return v.get<bool>();
}

}  // namespace

Loader::State state_from_json(const std::string& json) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json);
  } catch (const nlohmann::json::exception& e) {  // parse errors and numbers out of range (1e999)
    bad_state(std::string("not JSON: ") + e.what());
  }
  if (!j.is_object()) bad_state("the state must be a dict (a JSON object), got " + j.dump().substr(0, 80));
  Loader::State st;
  st.version = small_count(j, "version");
  st.seed = count(j, "seed");
  st.epoch = count(j, "epoch");
  st.batches_done = count(j, "batches_done");
  st.dataset_size = count(j, "dataset_size");
  st.batch_size = count(j, "batch_size");
  st.shuffle = flag(j, "shuffle");
  st.drop_last = flag(j, "drop_last");
  if (j.contains("shuffle_window")) st.shuffle_window = count(j, "shuffle_window");
  st.world_size = small_count(j, "world_size");
  if (auto it = j.find("earlier"); it != j.end()) {
    if (!it->is_array()) bad_state("'earlier' must be a list, got " + it->dump());
    for (const auto& e : *it) {
      if (!e.is_object()) bad_state("an earlier part must be a dict, got " + e.dump());
      st.earlier.push_back({small_count(e, "world_size", "the state's earlier part"),
                            count(e, "batch_size", "the state's earlier part"),
                            count(e, "batches_done", "the state's earlier part")});
    }
  }
  if (auto it = j.find("mixture"); it != j.end()) {
    if (!it->is_array()) bad_state("'mixture' must be a list, got " + it->dump());
    for (const auto& e : *it) {
      if (!e.is_object() || !e.contains("name") || !e["name"].is_string()) {
        bad_state("a mixture source must be a dict with a 'name', got " + e.dump());
      }
      st.mixture.push_back({e["name"].get<std::string>(), count(e, "size", "the state's mixture source"),
                            count(e, "count", "the state's mixture source")});
    }
  }
  return st;
}

}  // namespace stoker::detail
