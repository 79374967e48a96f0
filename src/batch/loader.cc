// The Loader's scheduler: order -> worker pool -> batch ring -> consumer.
// Loader::Impl is declared in loader_impl.h; its reports, resume, the hook's
// barriers and the public facade are in loader_{stats,resume,hook,api}.cc.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>

#include "batch/loader_impl.h"
#include "util/thread.h"

namespace stoker {

using detail::available_cores;
using detail::invalid;
using detail::MutexLock;
using detail::now_ns;
using detail::ThreadSite;
using detail::Slot;
using detail::SlotLease;
using detail::SlotPool;

namespace {
// The options, checked unless the constructor that opened the source did.
LoaderOptions checked(LoaderOptions opt, bool validated) {
  if (!validated) validate_options(opt);
  return opt;
}
}  // namespace

Loader::Impl::Impl(std::shared_ptr<const Source> source, LoaderOptions opt, bool validated)
    : source_(std::move(source)), opt_(checked(std::move(opt), validated)), created_ns_(now_ns()) {
  if (source_->size() == 0) throw Error(Code::kNotFound, source_->describe() + " has no records");
  maker_.emplace(*source_, opt_, nullptr);
  // NOTE: resolved once; every part that holds memory charges its account.
  memory_ = detail::MemoryBudget::for_option(opt_.memory_budget);
  if (maker_->keeps_own_cache()) {
    // NOTE: volumes keep their own cache: inflated .nii.gz volumes and label
    // indexes in every mode (no page cache holds inflated bytes), every
    // volume under "ram"/"decoded".
    maker_->set_own_cache(memory_, opt_.cache.mode == Cache::kRam || opt_.cache.mode == Cache::kDecoded);
  } else {
    detail::CacheService::Client client;
    client.footprint = [this](std::size_t i) { return maker_->footprint(static_cast<std::uint32_t>(i)); };
    client.read_record = [this](std::size_t i, std::vector<std::uint8_t>* bytes, std::vector<std::uint64_t>* ends) {
      return maker_->read_record(static_cast<std::uint32_t>(i), bytes, ends);
    };
    client.image = spec().image >= 0;
    if (client.image) {  // the image output's larger side: {C, H, W} or {H, W, C}
      const auto& image = spec().fields[static_cast<std::size_t>(spec().image)];
      // NOTE: with a hook the image has no output of a fixed size (none in outputs).
      const auto o = static_cast<std::size_t>(image.output);
      if (image.output >= 0 && o < spec().outputs.size() && spec().outputs[o].dims.size() == 3) {
        const auto& d = spec().outputs[o].dims;
        client.output_side = static_cast<int>(opt_.layout == Layout::kNCHW ? std::max(d[1], d[2]) : std::max(d[0], d[1]));
      }
      client.image_part = image.part;
    }
    caching_ = std::make_unique<detail::CacheService>(*source_, &opt_, memory_, std::move(client));
    maker_->set_cache(caching_->cache(), caching_->rewrite());
    if (caching_->cache()) maker_->set_first_batch_flag(&before_first_batch_);
  }
  if (source_->size() > 0xffffffffu) invalid("sources of more than 2^32 records are not supported");
  // NOTE: a mixture's order runs over its epoch's draws (positions), each
  // mapped to a record per epoch (start_epoch); one data set's over records.
  mix_ = dynamic_cast<const MixtureSource*>(source_.get());
  if (mix_) mix_drawn_.assign(mix_->parts().size(), 0);
  order_.dataset_size = mix_ ? mix_->samples_per_epoch() : source_->size();
  order_.batch_size = opt_.batch_size;
  order_.shuffle = opt_.shuffle;
  order_.seed = opt_.seed;
  order_.drop_last = opt_.drop_last;
  order_.rank = opt_.rank;
  order_.world_size = opt_.world_size;
  if (!mix_) order_.shard_starts = source_->shard_starts();
  if (opt_.shuffle_window > 0) {
    if (mix_) invalid("shuffle_window: not with a Mixture (its epoch is drawn positions, not runs of shards)");
    if (order_.shard_starts.empty()) {
      invalid("shuffle_window: needs tar shards (a window is a run of shards); " + source_->describe() + " has none");
    }
    order_.shuffle_window = opt_.shuffle_window;
  }
  num_samples_ = detail::samples_per_rank(order_);
  num_batches_ = detail::batches_per_rank(order_);
  threads_ = opt_.threads > 0 ? opt_.threads : opt_.max_threads > 0 ? opt_.max_threads : available_cores();
  const int depth = opt_.prefetch > 0 ? opt_.prefetch : std::max(2, threads_);
  const int max_depth = opt_.prefetch > 0 ? depth : 2 * depth;
  tuner_.emplace(threads_, threads_, opt_.threads == 0, depth, max_depth, depth, opt_.prefetch == 0);
  pool_ = std::make_shared<SlotPool>(spec().batch_bytes, memory_);
  ring_.resize(static_cast<std::size_t>(max_depth));
  // NOTE: the budget is shared in this order (src/memory/README.md): the
  // batch buffers first (the deepest ring and the two a consumer holds),
  // then a streaming source's plan, the workers' decode scratch (threads x
  // a record's estimate), and the caches fill what is left.
  (void)memory_->reserve(detail::MemoryAccount::kBatchBuffers,
                         static_cast<std::uint64_t>(max_depth + 2) * pool_->buffer_bytes());
  source_->use_memory(memory_);
  // NOTE: a streaming source starts fetching the first epoch now (the first
  // batch comes sooner), and refuses here an order its budget cannot hold.
  // The workers' scratch is estimated from up to 16 records read now, in one
  // shard: record 0's (no other index opened), a streaming source's first in
  // its plan (the shard the first batch waits for; no request of its own),
  // none with kind="image" (which promises no read at construction); the
  // largest estimate, twice (a vector grows by doubling). Unprobed, the
  // workers charge their scratch as it grows: within the room left, else
  // counted in over_bytes.
  std::vector<std::uint32_t> probe;
  const std::vector<std::size_t>& starts = order_.shard_starts;  // the source's (none for a mixture)
  auto shard_of = [&](std::size_t r) { return std::upper_bound(starts.begin(), starts.end(), r) - starts.begin(); };
  if (source_->wants_plan()) {
    const detail::RankOrder first(order_, 0, {});
    source_->plan(first, 0);
    for (std::size_t k = 0; k < std::min<std::size_t>(first.size(), 16); ++k) {
      if (shard_of(first.at(k)) == shard_of(first.at(0))) probe.push_back(first.at(k));
    }
  } else if (opt_.kind != SampleKind::kImage) {
    for (std::size_t r = 0; r < std::min<std::size_t>(source_->size(), 16) && shard_of(r) == shard_of(0); ++r) {
      probe.push_back(static_cast<std::uint32_t>(r));
    }
  }
  std::uint64_t scratch = 0;
  for (std::uint32_t r : probe) scratch = std::max(scratch, maker_->scratch_estimate(r));
  (void)memory_->reserve(detail::MemoryAccount::kDecodeScratch,
                         static_cast<std::uint64_t>(threads_) * 2 * scratch);
  if (const char* t = std::getenv("STOKER_TRACE"); t && *t) opt_.trace = true;
  if (opt_.trace) {
    opt_.stage_timing = true;
    for (int i = 0; i <= threads_; ++i) traces_.push_back(std::make_unique<detail::TraceBuffer>());
  }
  counters_.reserve(static_cast<std::size_t>(threads_));
  for (int i = 0; i < threads_; ++i) counters_.push_back(std::make_unique<detail::StageCounters>());
  workers_.reserve(static_cast<std::size_t>(threads_));
  // NOTE: spawn() (util/thread.h) names them stoker-w0, stoker-w1, ... (for
  // top -H, gdb and py-spy, and so tests can count them), with every signal
  // blocked (Ctrl-C reaches the consumer's thread, where Python handles it),
  // and catches what reaches a worker's top (worker_died).
  try {
    for (int i = 0; i < threads_; ++i) {
      workers_.push_back(detail::spawn("stoker-w" + std::to_string(i), detail::Priority::kNormal,
                                       [this, i] { worker_main(i); },
                                       [this, i](const Status& st) { worker_died(i, st); }));
    }
  } catch (...) {  // no more threads: those started are stopped and joined (a joinable std::thread would terminate)
    close();
    throw;
  }
}

Loader::Impl::~Impl() {
  if (channel_.on() && !forked() && !closed_) publish(true);
  close();
  release_ring();
}

// Stops the preload and the workers (each finishes the sample in hand) and
// joins them; next() then throws kCancelled. Idempotent.
void Loader::Impl::close() {
  for (const std::thread& t : workers_) {
    if (t.get_id() == std::this_thread::get_id()) {
      throw Error(Code::kInvalidArgument,
                  "Loader.close() was called on one of the loader's own worker threads (from a Python transform, "
                  "collate_fn or hook): a worker cannot wait for itself; close the loader from another thread");
    }
  }
  if (caching_) caching_->stop();
  request_stop();
  for (auto& t : workers_) {
    if (t.joinable()) t.join();
  }
  closed_ = true;
}

void Loader::Impl::request_stop() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  ready_cv_.notify_all();
}

// Ends the epoch in flight: in-flight work is made stale by the generation
// bump, workers finish the sample in hand, the ring's buffers go back.
void Loader::Impl::halt_locked(MutexLock& lock) {
  ++generation_;
  running_ = false;
  while (inflight_ != 0) idle_cv_.wait(lock);
  release_ring();
}

// NOTE: also called by the destructor, with no worker left to race.
void Loader::Impl::release_ring() {
  for (auto& e : ring_) {
    if (e.slot) pool_->release(e.slot);
    e = RingEntry{};
  }
}

void Loader::Impl::check_process() const {
  if (forked()) {
    throw Error(Code::kInvalidArgument, "this loader was created in process " + std::to_string(creator_pid_) +
                                            " and cannot be used after fork() in process " +
                                            std::to_string(::getpid()) + "; create a new loader in the child");
  }
}

void Loader::Impl::start_epoch() {
  check_process();
  MutexLock lock(mu_);
  const std::uint64_t epoch = next_epoch_;
  std::vector<detail::Segment> earlier = resume_earlier_;
  lock.unlock();
  // Outside the lock: a view (per-shard tables) for a fresh epoch, the
  // rank's share of the pool after an elastic resume (O(dataset), once).
  detail::RankOrder seq(order_, epoch, earlier);
  // A streaming source fetches the next epoch's first shards while this one ends.
  detail::RankOrder ahead;
  if (source_->wants_plan() && !mix_) ahead = detail::RankOrder(order_, epoch + 1, {});
  lock.lock();
  halt_locked(lock);
  seq_ = std::move(seq);
  run_epoch_ = epoch;
  next_epoch_ = epoch + 1;
  ++epochs_started_;
  run_earlier_ = std::move(earlier);
  resume_earlier_.clear();
  epoch_batches_ = (seq_.size() + opt_.batch_size - 1) / opt_.batch_size;
  // NOTE: a restored state starts the epoch at its first batch not yet
  // handed out; the order and every sample's randomness are functions of
  // (seed, epoch, record), so the rest of the epoch is as it would have been.
  deliver_ = std::min<std::size_t>(resume_batches_, epoch_batches_);
  next_task_ = deliver_ * opt_.batch_size;
  resume_batches_ = 0;
  // NOTE: a streaming source (remote shards) fetches in the order this
  // epoch reads; it may refuse an epoch that cannot fit its budget.
  if (source_->wants_plan()) {
    source_->plan(seq_, next_task_);
    source_->plan_ahead(ahead);
  }
  running_ = true;
  window_ = Window{};  // NOTE: time between epochs (evaluation, checkpoints) is not the loader's
  lock.unlock();
  work_cv_.notify_all();
}

// timeout_ns < 0: wait as long as it takes. On a timeout returns nullopt
// with *timed_out set; calling again continues the wait.
std::optional<Batch> Loader::Impl::next(std::int64_t timeout_ns, bool* timed_out) {
  check_process();
  if (timed_out) *timed_out = false;
  MutexLock lock(mu_);
  if (!running_) {
    lock.unlock();
    start_epoch();
    lock.lock();
  }
  if (deliver_ >= epoch_batches_) {
    running_ = false;
    return std::nullopt;
  }
  const std::size_t b = deliver_;
  RingEntry& e = ring_[b % ring_.size()];
  const std::int64_t t0 = now_ns();
  if (first_next_ns_ < 0) first_next_ns_ = t0;
  const bool timed = timeout_ns >= 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(timed ? timeout_ns : 0);
  while (!ready_locked(e, b)) {
    if (!timed) {
      ready_cv_.wait(lock);
    } else if (!ready_cv_.wait_until(lock, deadline) && !ready_locked(e, b)) {
      consumer_wait_ns_.fetch_add(static_cast<std::uint64_t>(now_ns() - t0), std::memory_order_relaxed);
      if (timed_out) *timed_out = true;
      return std::nullopt;
    }
  }
  const std::int64_t t1 = now_ns();
  if (stop_) throw Error(Code::kCancelled, "loader stopped");
  // A worker thread stopped (worker_died): the batch may never come.
  if (!(e.batch == static_cast<std::int64_t>(b) && e.ready)) throw Error(broken_);
  if (opt_.trace) traces_.back()->add(t0, t1 - t0, static_cast<std::uint32_t>(b), detail::kTraceWait);
  consumer_wait_ns_.fetch_add(static_cast<std::uint64_t>(t1 - t0), std::memory_order_relaxed);
  if (first_batch_ns_.load(std::memory_order_relaxed) < 0) {
    first_batch_ns_.store(t1 - created_ns_);
    before_first_batch_.store(false, std::memory_order_relaxed);
    if (caching_) caching_->first_batch_out();
  }
  last_batch_ns_ = t1;
  Slot* slot = e.slot;  // null when its buffer could not be had (the batch then holds an error)
  if (slot) pool_->hand_out();  // the consumer's from here (under mu_, so the ring and the held count never overlap)
  Status error = std::move(e.error);
  e = RingEntry{};
  if (mix_) {
    for (std::size_t t = b * opt_.batch_size, end = t + batch_len(b); t < end; ++t) {
      ++mix_drawn_[mix_->part_of_position(seq_.at(t))];
    }
  }
  ++deliver_;
  const std::size_t done = std::min(seq_.size(), deliver_ * opt_.batch_size);
  autotune_locked(t1, t1 - t0);
  lock.unlock();
  if (source_->wants_plan()) source_->progress(done);
  work_cv_.notify_all();
  batches_.fetch_add(1, std::memory_order_relaxed);
  if (channel_.due(t1)) publish(false);

  if (!error.ok()) {
    if (slot) SlotLease give_back(pool_, slot);  // returns the buffer
    throw Error(error);
  }
  return batch_of(slot, b, batch_len(b));
}

void Loader::Impl::autotune_locked(std::int64_t now, std::int64_t waited) {
  Window& w = window_;
  if (w.start_ns == 0) {  // the window starts at its epoch's first delivered batch
    w = Window{now, 0, 0, busy_ns(), ring_blocked_ns_};
    return;
  }
  w.wait_ns += waited;
  ++w.batches;
  if (now - w.start_ns < kWindowNs || w.batches < kWindowBatches) return;
  const std::uint64_t busy = busy_ns();
  detail::TuneWindow tw;
  tw.wall_s = static_cast<double>(now - w.start_ns) * 1e-9;
  tw.wait_s = static_cast<double>(w.wait_ns) * 1e-9;
  tw.busy_s = static_cast<double>(busy - w.busy_ns) * 1e-9;
  tw.ring_blocked_s = static_cast<double>(ring_blocked_ns_ - w.ring_blocked_ns) * 1e-9;
  tw.batches = w.batches;
  tw.first_batch = batches_.load(std::memory_order_relaxed) + 1 - w.batches;
  if (tuner_->observe(tw)) work_cv_.notify_all();
  w = Window{now, 0, 0, busy, ring_blocked_ns_};
}

// A worker. NOTE: what can throw on it is caught where it happens, so the
// batch in hand always completes (its ring entry counts every task off,
// with an error if need be) and nothing waits for it forever: the batch's
// buffer (start_batch_locked), the task (run_task), the hook's stages
// (their own barriers). What would still reach the thread's top ends in
// worker_died().
void Loader::Impl::worker_main(int id) {
  detail::injection_point(ThreadSite::kWorkerStart, id);
  detail::Scratch ws;
  ws.memory.reset(memory_);
  ws.counters = counters_[static_cast<std::size_t>(id)].get();
  if (opt_.trace) ws.trace = traces_[static_cast<std::size_t>(id)].get();
  MutexLock lock(mu_);
  for (;;) {
    for (;;) {
      if (stop_) return;
      const bool has_task = running_ && next_task_ < seq_.size();
      // The tuner's current worker count and ring depth (fixed ones when not tuning).
      const bool active = id < tuner_->threads();
      const bool ring_full = next_task_ / opt_.batch_size >= deliver_ + static_cast<std::size_t>(tuner_->depth());
      if (has_task && !ring_full && active) break;
      // NOTE: an active worker idle only for ring space is what tells the
      // tuner a deeper ring would help.
      const std::int64_t t = has_task && ring_full && active ? now_ns() : 0;
      work_cv_.wait(lock);
      if (t) ring_blocked_ns_ += static_cast<std::uint64_t>(now_ns() - t);
    }
    const std::size_t t = next_task_++;
    const std::size_t b = t / opt_.batch_size, pos = t % opt_.batch_size;
    const std::uint64_t gen = generation_;
    RingEntry& e = ring_[b % ring_.size()];
    if (e.batch != static_cast<std::int64_t>(b)) start_batch_locked(&e, b);
    Slot* slot = e.slot;
    const std::uint64_t epoch = run_epoch_, seed = order_.seed;
    const bool first_epoch = epochs_started_ <= 1;
    ++inflight_;
    lock.unlock();

    // NOTE: a batch without a buffer has failed whole: its tasks only count off.
    Status st = slot ? run_task(t, gen, seed, epoch, slot, pos, first_epoch, &ws)
                     : Status::Ok();

    lock.lock();
    --inflight_;
    if (inflight_ == 0) idle_cv_.notify_all();
    if (gen != generation_) continue;  // the epoch was restarted meanwhile
    if (!st.ok() && pos < e.error_pos) {
      e.error = std::move(st);
      e.error_pos = pos;
    }
    if (--e.remaining == 0) {
      if (opt_.hook && e.error.ok()) {
        // The caller's batch stage (a collate) runs here, on this worker,
        // before the batch can be handed out; ++inflight_ keeps a restart
        // waiting for it, as for a sample.
        ++inflight_;
        lock.unlock();
        const std::int64_t h0 = now_ns();
        Status hs = hook_batch(gen, epoch, b);
        ws.counters->add_python(now_ns() - h0);
        lock.lock();
        if (--inflight_ == 0) idle_cv_.notify_all();
        if (gen != generation_) continue;
        if (!hs.ok()) e.error = std::move(hs);
      }
      e.ready = true;
      ready_cv_.notify_all();
    }
  }
}

// The first task of batch b takes the ring entry and a buffer for it.
// NOTE: a buffer that cannot be had (std::bad_alloc: the pool grows only
// when the consumer holds batches) fails that batch, whatever on_corrupt
// says (no sample is at fault, none can replace it): its error is raised
// when the consumer reaches it, iteration goes on after it, and
// stats()["thread_errors"]["worker"] counts it.
void Loader::Impl::start_batch_locked(RingEntry* e, std::size_t b) {
  e->batch = static_cast<std::int64_t>(b);
  e->slot = nullptr;
  e->remaining = batch_len(b);
  e->ready = false;
  e->error = Status::Ok();
  e->error_pos = SIZE_MAX;
  try {
    detail::injection_point(ThreadSite::kWorker, static_cast<std::int64_t>(b));
    e->slot = pool_->acquire();
  } catch (...) {
    e->error = detail::exception_status("worker: batch buffer");
    e->error_pos = 0;
    worker_errors_.fetch_add(1, std::memory_order_relaxed);
  }
}

// One task: the sample at epoch position t into `slot`, then the worker's
// share of the cache's work (cache/cache_service.h: the cache="ram"
// rewrite's, cache="decoded"'s records of the first batch). NOTE: make()
// has its own barrier (a sample's exception is that sample's error, under
// on_corrupt); anything thrown around it here (the error's message, the
// corrupt log, out of memory) fails the batch like a lost buffer does, and
// is counted.
Status Loader::Impl::run_task(std::size_t t, std::uint64_t gen, std::uint64_t seed, std::uint64_t epoch, Slot* slot,
                              std::size_t pos, bool first_epoch, detail::Scratch* ws) noexcept {
  try {
    const std::int64_t m0 = now_ns();
    ws->rewrite.first_epoch = first_epoch;
    Status st = make_sample(seq_, t, gen, seed, epoch, slot, pos, ws, &corrupt_);
    if (caching_) {
      caching_->after_sample(&ws->rewrite, now_ns() - m0);
      if (opt_.cache.mode == Cache::kDecoded) maker_->fill_deferred(ws);
    }
    ws->memory.grow_to(ws->bytes());
    return st;
  } catch (...) {
    worker_errors_.fetch_add(1, std::memory_order_relaxed);
    return detail::exception_status("worker");
  }
}

// spawn()'s sink: something reached worker `id`'s top (not a task: those
// are caught above), so the thread is gone. NOTE: the loader cannot count
// on its share of the work (the tuner may hand it tasks), so it stops
// serving batches: next() raises this error from the first batch not
// ready yet (batches ready are still delivered), in the consumer's thread;
// the process lives, and a new loader works.
void Loader::Impl::worker_died(int id, const Status& st) {
  worker_errors_.fetch_add(1, std::memory_order_relaxed);
  Status why;
  try {
    why = Status(st.code(), "worker thread stoker-w" + std::to_string(id) + " stopped: " + st.message());
  } catch (...) {
    why = Status(st.code(), "worker stopped");  // short: no allocation
  }
  {
    MutexLock lock(mu_);
    if (broken_.ok()) broken_ = std::move(why);
  }
  ready_cv_.notify_all();
}

// Fills position `pos` of `slot` with the sample at epoch position `t`, or
// under kSkip with the next good sample of the epoch.
Status Loader::Impl::make_sample(const detail::RankOrder& seq, std::size_t t, std::uint64_t gen, std::uint64_t seed,
                                 std::uint64_t epoch, Slot* slot, std::size_t pos, detail::Scratch* ws,
                                 detail::CorruptLog* corrupt) {
  const detail::SampleOut out{slot->data.get(), pos};
  std::size_t p = t;
  for (int attempt = 1;; ++attempt) {
    // A mixture's item is a position of the epoch's draws, the key of its
    // randomness (a record drawn twice is augmented twice, differently).
    const std::uint32_t item = seq.at(p);
    const std::uint32_t rec = mix_ ? mix_->draw(seed, order_.shuffle, epoch, item) : item;
    Status st = maker_->make(rec, item, seed, epoch, out, ws);
    if (st.ok() && opt_.hook) st = hook_sample(gen, epoch, t, rec, ws);
    if (st.ok()) return st;
    st = Status(st.code(), "record " + std::to_string(rec) + " '" + source_->key(rec) + "': " + st.message());
    // NOTE: data that could not be fetched (remote shards whose retries ran
    // out, an object changed mid-run) is not a corrupt sample: never skipped.
    if (st.code() == Code::kUnavailable || st.code() == Code::kCancelled) return st;
    if (corrupt) corrupt->add(st);
    if (opt_.on_corrupt == OnCorrupt::kRaise) return st;
    if (attempt >= opt_.max_consecutive_corrupt) {
      return Status(st.code(), "on_corrupt=skip gave up after " + std::to_string(attempt) +
                                   " consecutive corrupt samples; last: " + st.message());
    }
    p = (p + 1) % seq.size();  // NOTE: the next sample of the epoch takes the place
  }
}

}  // namespace stoker
