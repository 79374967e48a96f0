// stoker inspect-state FILE: where in which epoch a saved loader state is.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "batch/resume.h"
#include "commands.h"
#include "order/mixture.h"
#include "order/order.h"
#include "stoker/status.h"

namespace stoker::cli {
namespace {

std::string topology(int world, std::uint64_t batch) {
  return std::to_string(world) + (world == 1 ? " rank" : " ranks") + " x batch " + std::to_string(batch);
}

void inspect_state(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(Code::kNotFound, "inspect-state: cannot open '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  Loader::State st;
  try {
    st = detail::state_from_json(text.str());
  } catch (const Error& e) {
    throw Error(Code::kInvalidArgument, "inspect-state: " + path + ": " + e.what());
  }
  detail::OrderParams p;
  p.dataset_size = static_cast<std::size_t>(st.dataset_size);
  p.shuffle = st.shuffle;
  p.seed = st.seed;
  p.drop_last = st.drop_last;
  p.batch_size = static_cast<std::size_t>(st.batch_size);
  p.world_size = st.world_size;
  // Validated as load_state_dict validates it (ranges, positions past the end).
  Loader::State current = st;
  current.version = Loader::State{}.version;
  detail::check_restorable(st, current);
  const std::vector<detail::Segment> segs = detail::saved_segments(st, p);
  std::printf("%s: epoch %llu of %s %llu %s (shuffle %s, seed %llu, drop_last %s), state version %d\n",
              path.c_str(), static_cast<unsigned long long>(st.epoch),
              st.mixture.empty() ? "a data set of" : "a mixture of", static_cast<unsigned long long>(st.dataset_size),
              st.mixture.empty() ? "records" : "draws per epoch", st.shuffle ? "on" : "off",
              static_cast<unsigned long long>(st.seed), st.drop_last ? "on" : "off", st.version);
  std::vector<detail::Segment> before;
  auto part = [&](const char* label, int world, std::uint64_t batch, std::uint64_t done) {
    detail::OrderParams q = p;
    q.world_size = world;
    q.batch_size = static_cast<std::size_t>(batch);
    q.rank = 0;
    const std::size_t share = detail::RankOrder(q, st.epoch, before).size();
    const std::size_t batches = (share + batch - 1) / batch;
    std::printf("  %-8s %-24s %llu of %zu batches per rank handed out\n", label, topology(world, batch).c_str(),
                static_cast<unsigned long long>(done), batches);
    if (done > 0) before.push_back({world, static_cast<std::size_t>(batch), static_cast<std::size_t>(done)});
  };
  for (std::size_t i = 0; i < st.earlier.size(); ++i) {
    const auto& e = st.earlier[i];
    part(("part " + std::to_string(i + 1)).c_str(), e.world_size, e.batch_size, e.batches_done);
  }
  part(st.earlier.empty() ? "saved" : "last", st.world_size, st.batch_size, st.batches_done);
  const std::vector<std::uint32_t> pool = detail::resume_pool(p, st.epoch, segs);
  const std::size_t left = pool.size();
  if (!st.mixture.empty()) {
    // The epoch's positions are each source's draws in turn (stoker/mixture.h).
    std::vector<std::uint64_t> counts, pending(st.mixture.size(), 0);
    for (const auto& m : st.mixture) counts.push_back(m.count);
    for (std::uint32_t pos : pool) ++pending[detail::mixture_part_of_position(counts, pos)];
    for (std::size_t i = 0; i < st.mixture.size(); ++i) {
      const auto& m = st.mixture[i];
      const std::uint64_t before_epoch = st.epoch * m.count, now = m.count - pending[i];
      std::printf("  source %zu '%s': %llu records, %llu draws per epoch; %llu of them handed out in epoch %llu; "
                  "%llu draws before it (%.2f passes)\n",
                  i, m.name.c_str(), static_cast<unsigned long long>(m.size), static_cast<unsigned long long>(m.count),
                  static_cast<unsigned long long>(now), static_cast<unsigned long long>(st.epoch),
                  static_cast<unsigned long long>(before_epoch),
                  m.size ? static_cast<double>(before_epoch) / static_cast<double>(m.size) : 0.0);
    }
  }
  std::printf("%s of epoch %llu handed out: %llu of %llu; %zu not yet\n",
              st.mixture.empty() ? "records" : "draws", static_cast<unsigned long long>(st.epoch),
              static_cast<unsigned long long>(st.dataset_size - left), static_cast<unsigned long long>(st.dataset_size),
              left);
  std::printf("resumes: on %s exactly where it stopped; on another topology the %zu records left are split anew\n",
              topology(st.world_size, st.batch_size).c_str(), left);
}

}  // namespace

void add_inspect_state_command(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("inspect-state", "Where in which epoch a saved loader state (JSON) is, part by part");
  cmd->add_option("file", *path, "a state_dict() saved as JSON")->required();
  cmd->callback([path] { inspect_state(*path); });
}

}  // namespace stoker::cli
