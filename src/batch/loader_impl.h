// Loader::Impl, declared for the files that define it: loader.cc (the
// scheduler: epochs, workers, the ring, generations, the corrupt policy),
// loader_stats.cc (stats(), the doctor's snapshot, the trace),
// loader_resume.cc (state_dict / load_state_dict), loader_hook.cc (the
// caller's stages' barriers) and loader_api.cc (the public facade).
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "batch/autotune.h"
#include "batch/slot_pool.h"
#include "cache/cache_service.h"
#include "memory/memory_budget.h"
#include "order/order.h"
#include "sample/sample_maker.h"
#include "stats/channel.h"
#include "stats/counters.h"
#include "stats/trace.h"
#include "stoker/loader.h"
#include "util/thread_annotations.h"
#include "util/util.h"

namespace stoker {

class Loader::Impl {
 public:
  // `validated`: the public constructor that opened the source has checked
  // the options already (they are checked once per construction).
  Impl(std::shared_ptr<const Source> source, LoaderOptions opt, bool validated = false);

  ~Impl();

  // Stops the preload and the workers (each finishes the sample in hand) and
  // joins them; next() then throws kCancelled. Idempotent. Throws
  // kInvalidArgument on one of this loader's workers (it cannot join itself).
  void close();
  // Tells the workers to stop (each finishes the sample in hand), without
  // waiting for them.
  void request_stop() EXCLUDES(mu_);

  // Ends the epoch in flight: in-flight work is made stale by the generation
  // bump, workers finish the sample in hand, the ring's buffers go back.
  void halt_locked(detail::MutexLock& lock) REQUIRES(mu_);
  // NOTE: also called by the destructor, with no worker left to race.
  void release_ring() REQUIRES(mu_);

  // NOTE: after fork() the child has none of the worker threads; a loader
  // inherited that way must not be used (or joined) there.
  bool forked() const { return ::getpid() != creator_pid_; }
  void check_process() const;

  void start_epoch() EXCLUDES(mu_);

  // timeout_ns < 0: wait as long as it takes. On a timeout returns nullopt
  // with *timed_out set; calling again continues the wait.
  std::optional<Batch> next(std::int64_t timeout_ns = -1, bool* timed_out = nullptr) EXCLUDES(mu_);

  std::array<std::int64_t, 3> sample_shape() const {
    if (spec().arrays || spec().dims.size() != 3) return {0, 0, 0};
    return {spec().dims[0], spec().dims[1], spec().dims[2]};
  }

  Stats stats() const;

  // NOTE: set_epoch(e) for the epoch a restored state is in keeps its
  // position: the usual loop calls load_state_dict() once, then set_epoch()
  // at the top of every epoch, and must resume mid-epoch. Another epoch
  // drops it.
  void set_epoch(std::uint64_t e) EXCLUDES(mu_);

  Loader::State state() const EXCLUDES(mu_);

  void restore(const Loader::State& st) EXCLUDES(mu_);

  // Loader::batch and Loader::batch_provenance (loader_replay.cc).
  Batch replay(std::uint64_t epoch, std::size_t index) EXCLUDES(mu_);
  std::string provenance(std::uint64_t epoch, std::size_t index) const EXCLUDES(mu_);
  std::uint64_t epoch() const EXCLUDES(mu_);

  // A snapshot for `stoker doctor` (see stats/channel.h): what this loader
  // reads, with every option it runs with (the doctor's probes rebuild it
  // from them), and stats().
  void publish(bool final);
  std::string trace_events() const;

  std::size_t batch_len(std::size_t b) const { return std::min(opt_.batch_size, seq_.size() - b * opt_.batch_size); }

  std::shared_ptr<const Source> source_;
  std::vector<std::string> specs_;
  std::string mixture_json_;  // created from a Mixture: it, for the doctor's probes
  LoaderOptions opt_;
  // This loader's number in the process: its channel file and trace thread ids.
  const int id_ = [] {
    static std::atomic<int> n{0};
    return n.fetch_add(1);
  }();
  std::shared_ptr<detail::MemoryBudget> memory_;  // the budget every part charges (src/memory/)
  std::optional<detail::SampleMaker> maker_;     // one sample from one record (thread-free)
  // The caching policy (cache/cache_service.h); null for volumes (their own cache).
  // NOTE: after maker_, so it is destroyed first (its preload reads through the maker).
  std::unique_ptr<detail::CacheService> caching_;
  const detail::SampleSpec& spec() const { return maker_->spec(); }
  detail::OrderParams order_;
  std::size_t num_samples_ = 0;
  std::size_t num_batches_ = 0;
  int threads_ = 0;  // workers started

 private:
  struct RingEntry {
    std::int64_t batch = -1;
    detail::Slot* slot = nullptr;  // null when the buffer could not be had (then error says why)
    std::size_t remaining = 0;
    bool ready = false;
    Status error;
    std::size_t error_pos = SIZE_MAX;
  };
  // What next() waits for: batch b in entry e, or a reason to stop waiting.
  bool ready_locked(const RingEntry& e, std::size_t b) const REQUIRES(mu_) {
    return stop_ || !broken_.ok() || (e.batch == static_cast<std::int64_t>(b) && e.ready);
  }

  // Called by next() under mu_ with the batch just delivered: closes a
  // measurement window every kWindowNs (and kWindowBatches) and lets the
  // tuner change the active workers and the ring depth.
  static constexpr std::int64_t kWindowNs = 300'000'000;
  static constexpr std::uint64_t kWindowBatches = 3;
  void autotune_locked(std::int64_t now, std::int64_t waited) REQUIRES(mu_);
  std::uint64_t busy_ns() const;

  // A worker. NOTE: what can throw on it is caught where it happens, so the
  // batch in hand always completes (its ring entry counts every task off,
  // with an error if need be) and nothing waits for it forever: the batch's
  // buffer (start_batch_locked), the task (run_task), the hook's stages
  // (their own barriers). What would still reach the thread's top ends in
  // worker_died().
  void worker_main(int id) EXCLUDES(mu_);

  // The first task of batch b takes the ring entry and a buffer for it.
  // NOTE: a buffer that cannot be had (std::bad_alloc: the pool grows only
  // when the consumer holds batches) fails that batch, whatever on_corrupt
  // says (no sample is at fault, none can replace it): its error is raised
  // when the consumer reaches it, iteration goes on after it, and
  // stats()["thread_errors"]["worker"] counts it.
  void start_batch_locked(RingEntry* e, std::size_t b) REQUIRES(mu_);

  // One task: the sample at epoch position t into `slot`, then the worker's
  // share of the cache's work (cache/cache_service.h: the cache="ram"
  // rewrite's, cache="decoded"'s records of the first batch). NOTE: make()
  // has its own barrier (a sample's exception is that sample's error, under
  // on_corrupt); anything thrown around it here (the error's message, the
  // corrupt log, out of memory) fails the batch like a lost buffer does, and
  // is counted.
  Status run_task(std::size_t t, std::uint64_t gen, std::uint64_t seed, std::uint64_t epoch, detail::Slot* slot,
                  std::size_t pos, bool first_epoch, detail::Scratch* ws) noexcept;

  // spawn()'s sink: something reached worker `id`'s top (not a task: those
  // are caught above), so the thread is gone. NOTE: the loader cannot count
  // on its share of the work (the tuner may hand it tasks), so it stops
  // serving batches: next() raises this error from the first batch not
  // ready yet (batches ready are still delivered), in the consumer's thread;
  // the process lives, and a new loader works.
  void worker_died(int id, const Status& st) EXCLUDES(mu_);

  // The hook's batch stage; an exception escaping it is the batch's error.
  Status hook_batch(std::uint64_t gen, std::uint64_t epoch, std::size_t b) noexcept;

  // The hook's sample stage for the sample `ws` holds; the same barrier.
  Status hook_sample(std::uint64_t gen, std::uint64_t epoch, std::size_t t, std::uint32_t rec,
                     detail::Scratch* ws) noexcept;

  // Fills position `pos` of `slot` with the sample at position `t` of the
  // epoch's order `seq`, or under kSkip with the next good sample of the
  // epoch; each bad one is counted in `corrupt` (null: nowhere, a replay).
  Status make_sample(const detail::RankOrder& seq, std::size_t t, std::uint64_t gen, std::uint64_t seed,
                     std::uint64_t epoch, detail::Slot* slot, std::size_t pos, detail::Scratch* ws,
                     detail::CorruptLog* corrupt);

  // Batch b (`len` samples) viewing `slot`, its lease taken (the pool counted
  // it handed out): loader_api.cc, with Batch.
  Batch batch_of(detail::Slot* slot, std::size_t b, std::size_t len) const;

  // The order of `epoch` on this rank (replay, provenance): a restored or
  // running epoch resumed on another topology keeps its parts.
  detail::RankOrder order_of(std::uint64_t epoch) const EXCLUDES(mu_);

  std::shared_ptr<detail::SlotPool> pool_;
  const std::int64_t created_ns_;
  const pid_t creator_pid_ = ::getpid();

  // The scheduling state: every member GUARDED_BY(mu_) is touched only
  // with mu_ held (checked by `make check-thread-safety`).
  mutable detail::Mutex mu_;
  detail::CondVar work_cv_;   // workers: a task may be available
  detail::CondVar ready_cv_;  // consumer: a batch may be ready
  detail::CondVar idle_cv_;   // restart: no sample in hand
  bool stop_ GUARDED_BY(mu_) = false;
  bool closed_ = false;  // close() ran: the workers are joined (the consumer's thread only)
  bool running_ GUARDED_BY(mu_) = false;
  Status broken_ GUARDED_BY(mu_);  // a worker thread stopped (worker_died): why
  std::uint64_t generation_ GUARDED_BY(mu_) = 0;
  std::uint64_t next_epoch_ GUARDED_BY(mu_) = 0;
  std::uint64_t run_epoch_ GUARDED_BY(mu_) = 0;
  std::uint64_t epochs_started_ GUARDED_BY(mu_) = 0;  // by this loader (the first one fills the cache)
  // NOTE: the epoch's order (a view computing each position from (seed,
  // epoch), or an elastic resume's list): written under mu_ by
  // start_epoch() while no task is in flight (halt_locked), read by the
  // workers' tasks without it; not GUARDED_BY, as the analysis cannot see
  // that protocol.
  detail::RankOrder seq_;
  const MixtureSource* mix_ = nullptr;       // source_, when it is a mixture
  std::vector<std::uint64_t> mix_drawn_ GUARDED_BY(mu_);  // per mixture source: samples handed out
  std::size_t epoch_batches_ GUARDED_BY(mu_) = 0;  // of the running epoch (fewer than num_batches_ when resumed elastically)
  // Parts of the epoch run on other topologies (order/order.h): for the next
  // start_epoch(), and of the running epoch.
  std::vector<detail::Segment> resume_earlier_ GUARDED_BY(mu_), run_earlier_ GUARDED_BY(mu_);
  std::size_t next_task_ GUARDED_BY(mu_) = 0;
  std::size_t deliver_ GUARDED_BY(mu_) = 0;
  std::size_t resume_batches_ GUARDED_BY(mu_) = 0;  // where the next start_epoch() begins
  int inflight_ GUARDED_BY(mu_) = 0;
  std::vector<RingEntry> ring_ GUARDED_BY(mu_);  // capacity: the most the ring may deepen to
  std::optional<detail::Tuner> tuner_ GUARDED_BY(mu_);
  std::uint64_t ring_blocked_ns_ GUARDED_BY(mu_) = 0;
  struct Window {
    std::int64_t start_ns = 0, wait_ns = 0;
    std::uint64_t batches = 0, busy_ns = 0, ring_blocked_ns = 0;
  } window_ GUARDED_BY(mu_);

  std::vector<std::unique_ptr<detail::StageCounters>> counters_;
  std::vector<std::unique_ptr<detail::TraceBuffer>> traces_;  // per worker, then the consumer's
  detail::DoctorChannel channel_{"loader", id_};
  detail::CorruptLog corrupt_;
  std::atomic<std::uint64_t> consumer_wait_ns_{0};
  std::atomic<std::uint64_t> batches_{0};
  std::atomic<std::int64_t> first_batch_ns_{-1};
  std::atomic<bool> before_first_batch_{true};  // cache="decoded": the first batch's misses are not kept
  std::int64_t first_next_ns_ GUARDED_BY(mu_) = -1;
  std::int64_t last_batch_ns_ GUARDED_BY(mu_) = -1;
  std::vector<std::thread> workers_;

  // Exceptions on workers outside a sample (start_batch_locked, run_task, worker_died).
  std::atomic<std::uint64_t> worker_errors_{0};
};

}  // namespace stoker
