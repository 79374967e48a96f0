#include "cache/preload.h"

#include "util/thread.h"
#include "util/util.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace stoker::detail {

// NOTE: a few threads, because a cold disk or a network file system serves
// parallel reads faster; they run at nice +10 (or idle priority when they
// rewrite) so that the decode workers win the CPU when the files are
// already in the page cache and reading costs only copies. A thread blocked
// on a read leaves the CPU idle, so even at idle priority the preload reads
// ahead where the workers wait on storage. Held back until go(): started
// with the loader, their allocations and copies made the first batch on the
// sample set 0.08 -> 0.13 s.
Preloader::Preloader(const Source& source, ReadRecord read, SampleCache* cache, Progress progress, int threads,
                     std::size_t start, StoreRecord store, std::string label, Priority priority)
    : source_(source),
      read_(std::move(read)),
      store_(std::move(store)),
      label_(std::move(label)),
      cache_(cache),
      tty_(::isatty(2) != 0),
      progress_(progress == Progress::kOn || (progress == Progress::kAuto && tty_)) {
  start_ = source.size() ? start % source.size() : 0;
  const int count = static_cast<int>(std::min<std::size_t>(source.size(), static_cast<std::size_t>(threads)));
  running_.store(count, std::memory_order_relaxed);
  try {
    for (int i = 0; i < count; ++i) {
      threads_.push_back(spawn("stoker-load" + std::to_string(i), priority, [this, i] { run(i); },
                               [this](const Status& st) { fail(st); }));
    }
  } catch (...) {  // no thread could be started: those that were are stopped and joined
    stop();
    throw;
  }
}

Preloader::~Preloader() { stop(); }

void Preloader::stop() {
  {
    MutexLock lock(mu_);
    stop_.store(true, std::memory_order_relaxed);
    quit_.store(true, std::memory_order_relaxed);
    cv_.notify_all();
  }
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

void Preloader::go() {
  MutexLock lock(mu_);
  go_ = true;
  cv_.notify_all();
}

Preloader::Report Preloader::report() const {
  static const char* const kStates[] = {"loading", "done", "budget full"};
  Report p;
  const int state = state_.load(std::memory_order_acquire);
  if (state == 3) {
    MutexLock lock(mu_);
    p.state = "error: " + error_;
  } else {
    p.state = kStates[state];
  }
  p.records = records_.load(std::memory_order_relaxed);
  p.bytes = bytes_.load(std::memory_order_relaxed);
  p.errors = errors_.load(std::memory_order_relaxed);
  const std::int64_t start = start_ns_.load(std::memory_order_relaxed), end = end_ns_.load(std::memory_order_relaxed);
  if (start) p.seconds = static_cast<double>((end ? end : now_ns()) - start) * 1e-9;
  return p;
}

// A preload thread: its share of the set.
void Preloader::run(int id) {
  try {
    load(id);
  } catch (...) {
    fail(exception_status("preload thread"));
  }
  loading_ended();
}

void Preloader::load(int id) {
  {
    MutexLock lock(mu_);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (!go_ && !stop_.load(std::memory_order_relaxed)) {
      if (!cv_.wait_until(lock, deadline)) break;
    }
  }
  std::int64_t unset = 0;
  start_ns_.compare_exchange_strong(unset, now_ns(), std::memory_order_relaxed);
  std::vector<std::uint8_t> buf;
  std::vector<std::uint64_t> ends;
  const std::size_t n = source_.size();
  std::int64_t printed_ns = now_ns();
  while (!stop_.load(std::memory_order_relaxed)) {
    const std::size_t k = next_.fetch_add(1, std::memory_order_relaxed);
    if (k >= n) break;
    const std::size_t i = (start_ + k) % n;
    injection_point(ThreadSite::kPreload, static_cast<std::int64_t>(i));
    if (cache_->contains(i)) continue;
    // NOTE: a record that fails to read is left to the worker that needs it,
    // which reads it again and applies on_corrupt (and counts it).
    if (!read_(i, &buf, &ends).ok()) continue;
    const std::vector<std::uint64_t>* e = ends.size() > 1 ? &ends : nullptr;
    const auto r = store_ ? store_(id, i, buf, e) : cache_->insert(i, buf.data(), buf.size(), 0, 0, e);
    if (r == SampleCache::Insert::kNoRoom) {
      full_.store(true, std::memory_order_relaxed);
      stop_.store(true, std::memory_order_relaxed);
      break;
    }
    if (r == SampleCache::Insert::kStored) {
      records_.fetch_add(1, std::memory_order_relaxed);
      bytes_.fetch_add(buf.size(), std::memory_order_relaxed);
    }
    if (id == 0 && progress_) {
      const std::int64_t t = now_ns();
      if (t - printed_ns >= (tty_ ? 250'000'000 : 2'000'000'000)) {
        print(false);
        printed_ns = t;
      }
    }
  }
}

// A thread is done reading; the last one out says how the preload ended.
void Preloader::loading_ended() {
  if (running_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  end_ns_.store(now_ns(), std::memory_order_relaxed);
  const bool full = full_.load(std::memory_order_relaxed);
  const bool finished = next_.load(std::memory_order_relaxed) >= source_.size();
  int loading = 0;
  // NOTE: stopped by an error (state 3) or the destructor (still 0 when
  // neither full nor finished): left as it is.
  const bool ended = (full || finished) && state_.compare_exchange_strong(loading, full ? 2 : 1, std::memory_order_acq_rel);
  if (progress_ && ended) print(true);
}

// An exception on a preload thread: the preload stops (the records not in
// yet are read by the workers as usual), and says why.
void Preloader::fail(const Status& st) {
  errors_.fetch_add(1, std::memory_order_relaxed);
  {
    MutexLock lock(mu_);
    if (error_.empty()) error_ = st.message();
  }
  int loading = 0;
  state_.compare_exchange_strong(loading, 3, std::memory_order_acq_rel);
  stop_.store(true, std::memory_order_relaxed);
}

// "stoker: loading into RAM (node-shared cache /dev/shm/...): 1234 of 2040 records, 98.1 MB, 45 MB/s"
void Preloader::print(bool last) const {
  const std::uint64_t recs = cache_->records();
  const double s = report().seconds;
  const double mb = static_cast<double>(cache_->bytes()) / 1e6;
  const std::string which = label_.empty() ? "" : " (" + label_ + ")";
  char line[1024];
  if (!last) {
    std::snprintf(line, sizeof(line), "stoker: loading into RAM%s: %llu of %zu records, %.1f MB, %.0f MB/s",
                  which.c_str(), static_cast<unsigned long long>(recs), source_.size(), mb,
                  s > 0 ? static_cast<double>(bytes_.load(std::memory_order_relaxed)) / 1e6 / s : 0.0);
  } else if (full_.load(std::memory_order_relaxed)) {
    std::snprintf(line, sizeof(line),
                  "stoker: RAM budget (%.1f MB) full at %llu of %zu records; the rest is read each epoch (%s)%s",
                  static_cast<double>(cache_->budget()) / 1e6, static_cast<unsigned long long>(recs), source_.size(),
                  source_.describe().c_str(), which.c_str());
  } else {
    std::snprintf(line, sizeof(line), "stoker: loaded into RAM: %llu records, %.1f MB in %.1f s (%s)%s",
                  static_cast<unsigned long long>(recs), mb, s, source_.describe().c_str(), which.c_str());
  }
  // On a terminal the line rewrites itself; elsewhere (logs) one per line.
  std::fprintf(stderr, tty_ ? (last ? "\r\033[K%s\n" : "\r\033[K%s") : "%s\n", line);
  std::fflush(stderr);
}

}  // namespace stoker::detail
