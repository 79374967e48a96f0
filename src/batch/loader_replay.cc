// Loader::Impl's replay: any batch of any epoch made again, and which records
// and draws made it (batch provenance), in O(batch): the epoch's order gives
// the batch's records in closed form (order/order.h), and every sample's
// draws are keyed by (seed, epoch, draw), so nothing before the batch runs.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "batch/loader_impl.h"

namespace stoker {

using detail::MutexLock;

detail::RankOrder Loader::Impl::order_of(std::uint64_t epoch) const {
  std::vector<detail::Segment> earlier;
  {
    MutexLock lock(mu_);
    // NOTE: the epoch next to run keeps a restored state's parts (empty for
    // a fresh epoch); the one running (or last run) keeps its own.
    if (epoch == next_epoch_) {
      earlier = resume_earlier_;
    } else if (epochs_started_ > 0 && epoch == run_epoch_) {
      earlier = run_earlier_;
    }
  }
  // NOTE: order_ changes only in restore(), on the consumer's thread, as this.
  return detail::RankOrder(order_, epoch, earlier);
}

namespace {

std::size_t checked_batches(const detail::RankOrder& seq, std::size_t batch_size, std::uint64_t epoch,
                            std::size_t index, int rank) {
  const std::size_t batches = (seq.size() + batch_size - 1) / batch_size;
  if (index >= batches) {
    throw Error(Code::kInvalidArgument, "batch " + std::to_string(index) + " of epoch " + std::to_string(epoch) +
                                            ": rank " + std::to_string(rank) + " has " + std::to_string(batches) +
                                            " batches in that epoch (0.." + std::to_string(batches - 1) + ")");
  }
  return std::min(batch_size, seq.size() - index * batch_size);
}

}  // namespace

Batch Loader::Impl::replay(std::uint64_t epoch, std::size_t index) {
  check_process();
  if (opt_.hook) {
    throw Error(Code::kUnsupported, "batch(): not with a Python stage (a transform stoker has no kernel for, "
                                    "target_transform, collate_fn): its draws are the caller's");
  }
  const detail::RankOrder seq = order_of(epoch);
  const std::size_t len = checked_batches(seq, opt_.batch_size, epoch, index, opt_.rank);
  detail::Slot* slot = pool_->acquire();
  pool_->hand_out();
  Batch batch = batch_of(slot, index, len);  // from here its lease returns the buffer, thrown or not
  detail::Scratch ws;
  ws.memory.reset(memory_);  // released when it goes
  for (std::size_t pos = 0; pos < len; ++pos) {
    // NOTE: generation 0 is never compared (no hook); nothing is counted:
    // the epoch counted its bad samples when it ran.
    Status st = make_sample(seq, index * opt_.batch_size + pos, 0, order_.seed, epoch, slot, pos, &ws, nullptr);
    ws.memory.grow_to(ws.bytes());
    if (!st.ok()) throw Error(st);  // the first bad sample in batch order, as next() raises it
  }
  return batch;
}

std::string Loader::Impl::provenance(std::uint64_t epoch, std::size_t index) const {
  using nlohmann::json;
  const detail::RankOrder seq = order_of(epoch);
  const std::size_t len = checked_batches(seq, opt_.batch_size, epoch, index, opt_.rank);
  const std::uint64_t seed = order_.seed;
  json samples = json::array();
  detail::Scratch ws;
  ws.memory.reset(memory_);
  const std::vector<std::size_t>& starts = order_.shard_starts;  // one data set's shards (none for a mixture)
  for (std::size_t pos = 0; pos < len; ++pos) {
    const std::size_t t = index * opt_.batch_size + pos;
    const std::uint32_t item = seq.at(t);
    const std::uint32_t rec = mix_ ? mix_->draw(seed, order_.shuffle, epoch, item) : item;
    json s{{"position", t}, {"draw", item}, {"record", rec}, {"key", source_->key(rec)}, {"label", source_->label(rec)}};
    if (mix_) {
      const auto& part = mix_->parts()[mix_->part_of(rec)];
      s["source"] = part.name;
      s["source_record"] = rec - part.start;
    } else if (!starts.empty()) {
      s["shard"] = static_cast<std::size_t>(std::upper_bound(starts.begin(), starts.end(), rec) - starts.begin()) - 1;
    }
    std::string plan;
    const Status st = maker_->describe(rec, item, seed, epoch, &ws, &plan);
    ws.memory.grow_to(ws.bytes());
    if (st.ok()) {
      s["plan"] = json::parse(plan);
    } else {
      s["error"] = st.to_string();
    }
    samples.push_back(std::move(s));
  }
  json j{{"epoch", epoch},
         {"batch", index},
         {"rank", opt_.rank},
         {"world_size", order_.world_size},
         {"seed", seed},
         {"batch_size", opt_.batch_size},
         {"shuffle", order_.shuffle},
         {"samples", std::move(samples)}};
  return j.dump();
}

}  // namespace stoker
