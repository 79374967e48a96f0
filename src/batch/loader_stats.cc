// Loader::Impl's reports: stats() assembled from the parts that count (the
// workers, the consumer, the tuner, the buffer pool, the source, the sample
// maker, the cache service, the corrupt log, a mixture's draws), the doctor's
// snapshot (stats/channel.h) and the trace (stats/trace.h).
#include <unistd.h>

#include "batch/loader_impl.h"
#include "stats/json.h"

namespace stoker {

using detail::MutexLock;
using detail::now_ns;

// The workers' busy time so far (the autotune's windows).
std::uint64_t Loader::Impl::busy_ns() const {
  std::uint64_t n = 0;
  for (const auto& c : counters_) n += c->busy_ns();
  return n;
}

Stats Loader::Impl::stats() const {
  Stats s;
  for (const auto& c : counters_) c->add_to(&s);
  s.batches = batches_.load(std::memory_order_relaxed);
  s.consumer_wait_s = static_cast<double>(consumer_wait_ns_.load(std::memory_order_relaxed)) * 1e-9;
  std::int64_t fb = first_batch_ns_.load(std::memory_order_relaxed);
  s.time_to_first_batch_s = fb < 0 ? -1.0 : static_cast<double>(fb) * 1e-9;
  s.wall_s = static_cast<double>(now_ns() - created_ns_) * 1e-9;
  {
    MutexLock lock(mu_);
    s.ring_depth_max = static_cast<int>(ring_.size());
    s.threads = tuner_->threads();
    s.prefetch = tuner_->depth();
    s.autotune = tuner_->state();
    s.autotune_log = tuner_->log();
    if (first_next_ns_ >= 0 && last_batch_ns_ >= first_next_ns_) {
      s.consumer_active_s = static_cast<double>(last_batch_ns_ - first_next_ns_) * 1e-9;
    }
  }
  s.threads_max = threads_;
  source_->io_stats(&s);
  maker_->add_stats(&s);
  const detail::SlotPool::Counts pc = pool_->counts();
  s.batch_buffers = pc.allocated;
  s.batch_buffer_bytes = s.batch_buffers * pool_->batch_bytes();
  s.batch_buffers_in_use = pc.in_use;
  s.batch_buffers_held = pc.held;
  s.batch_buffers_held_peak = pc.held_peak;
  memory_->add_stats(&s);
  corrupt_.add_to(&s);
  if (mix_) {
    double total = 0;
    for (const auto& p : mix_->parts()) total += p.weight;
    MutexLock lock(mu_);
    for (std::size_t i = 0; i < mix_->parts().size(); ++i) {
      const auto& p = mix_->parts()[i];
      s.mixture.push_back({p.name, p.weight / total, p.count, mix_drawn_[i]});
    }
  }
  if (caching_) {
    caching_->add_stats(&s, batches_.load(std::memory_order_relaxed));
  } else {
    s.cache_mode = cache_name(opt_.cache.mode);
  }
  if (const std::uint64_t n = worker_errors_.load(std::memory_order_relaxed)) s.thread_errors["worker"] += n;
  return s;
}

// A snapshot for `stoker doctor` (see stats/channel.h): what this loader
// reads, with every option it runs with (the doctor's probes rebuild it
// from them), and stats().
void Loader::Impl::publish(bool final) {
  std::string j = "\"describe\":";
  j += detail::json_quote(source_->describe());
  j += ",\"sources\":[";
  for (std::size_t i = 0; i < specs_.size(); ++i) {
    if (i) j += ",";
    j += detail::json_quote(specs_[i]);
  }
  j += "]";
  if (!mixture_json_.empty()) j += ",\"mixture\":" + mixture_json_;
  j += ",\"dataset_size\":" + std::to_string(order_.dataset_size);
  std::size_t sample_bytes = 0;  // every tensor of one sample
  for (const auto& o : spec().outputs) sample_bytes += o.bytes;
  j += ",\"sample_bytes\":" + std::to_string(sample_bytes);
  j += std::string(",\"arrays\":") + (spec().arrays ? "true" : "false");
  j += ",\"options\":" + options_to_json(opt_);
  j += ",\"stats\":" + stats().to_json();
  channel_.publish(final, j);
}

std::string Loader::Impl::trace_events() const {
  std::string out;
  const int pid = static_cast<int>(::getpid());
  for (std::size_t i = 0; i < traces_.size(); ++i) {
    const bool consumer = i + 1 == traces_.size();
    // NOTE: thread ids unique per loader: 1000 x (id + 1) + worker, the consumer at 1,000,000 + that base.
    const int base = 1000 * (id_ + 1);
    traces_[i]->append_json(&out, pid, consumer ? 1000000 + base : static_cast<int>(i) + 1 + base,
                            consumer ? "stoker consumer (next())" : "stoker worker " + std::to_string(i));
  }
  return out;
}

}  // namespace stoker
