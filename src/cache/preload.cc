#include "cache/preload.h"

#include "util/util.h"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace stoker::detail {

// NOTE: a few threads, because a cold disk or a network file system serves
// parallel reads faster; they run at nice +10 so that the decode workers win
// the CPU when the files are already in the page cache and reading costs
// only copies. Held back until go(): started with the loader, their
// allocations and copies made the first batch on the sample set 0.08 -> 0.13 s.
Preloader::Preloader(const Source& source, ReadRecord read, SampleCache* cache, Progress progress, int threads,
                     IdleWork idle)
    : source_(source),
      read_(std::move(read)),
      idle_(std::move(idle)),
      cache_(cache),
      tty_(::isatty(2) != 0),
      progress_(progress == Progress::kOn || (progress == Progress::kAuto && tty_)) {
  const int count = static_cast<int>(std::min<std::size_t>(source.size(), static_cast<std::size_t>(threads)));
  running_.store(count, std::memory_order_relaxed);
  for (int i = 0; i < count; ++i) {
    threads_.emplace_back([this, i] { run(i); });
    const std::string name = "stoker-load" + std::to_string(i);
    pthread_setname_np(threads_.back().native_handle(), name.c_str());
  }
}

Preloader::~Preloader() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true, std::memory_order_relaxed);
    quit_.store(true, std::memory_order_relaxed);
    cv_.notify_all();
  }
  for (auto& t : threads_) t.join();
}

void Preloader::go() {
  std::lock_guard<std::mutex> lock(mu_);
  go_ = true;
  cv_.notify_all();
}

Preloader::Report Preloader::report() const {
  static const char* const kStates[] = {"loading", "done", "budget full"};
  Report p;
  p.state = kStates[state_.load(std::memory_order_acquire)];
  p.records = records_.load(std::memory_order_relaxed);
  p.bytes = bytes_.load(std::memory_order_relaxed);
  const std::int64_t start = start_ns_.load(std::memory_order_relaxed), end = end_ns_.load(std::memory_order_relaxed);
  if (start) p.seconds = static_cast<double>((end ? end : now_ns()) - start) * 1e-9;
  return p;
}

void Preloader::run(int id) {
  (void)setpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)), 10);  // best effort
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(1), [&] { return go_ || stop_.load(std::memory_order_relaxed); });
  }
  std::int64_t unset = 0;
  start_ns_.compare_exchange_strong(unset, now_ns(), std::memory_order_relaxed);
  std::vector<std::uint8_t> buf;
  std::vector<std::uint64_t> ends;
  const std::size_t n = source_.size();
  std::int64_t printed_ns = now_ns();
  while (!stop_.load(std::memory_order_relaxed)) {
    const std::size_t i = next_.fetch_add(1, std::memory_order_relaxed);
    if (i >= n) break;
    if (cache_->contains(i)) continue;
    // NOTE: a record that fails to read is left to the worker that needs it,
    // which reads it again and applies on_corrupt (and counts it).
    if (!read_(i, &buf, &ends).ok()) continue;
    const auto r = cache_->insert(i, buf.data(), buf.size(), 0, 0, ends.size() > 1 ? &ends : nullptr);
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
  if (running_.fetch_sub(1, std::memory_order_acq_rel) == 1) {  // the last one out
    end_ns_.store(now_ns(), std::memory_order_relaxed);
    const bool full = full_.load(std::memory_order_relaxed);
    const bool finished = next_.load(std::memory_order_relaxed) >= n;
    if (full) {
      state_.store(2, std::memory_order_release);
    } else if (finished) {
      state_.store(1, std::memory_order_release);
    }  // else: stopped by the destructor
    if (progress_ && (full || finished)) print(true);
  }
  if (!idle_) return;
  // NOTE: SCHED_IDLE, not a nice level: under load even nice 19 takes a
  // share of the CPU from the workers, SCHED_IDLE only time nobody wants.
  sched_param param{};
  (void)pthread_setschedparam(pthread_self(), SCHED_IDLE, &param);  // best effort
  while (!quit_.load(std::memory_order_relaxed) && idle_(id)) {
  }
}

// "stoker: loading into RAM: 1234 of 2040 records, 98.1 MB, 45 MB/s"
void Preloader::print(bool last) const {
  const std::uint64_t recs = cache_->records();
  const double s = report().seconds;
  const double mb = static_cast<double>(cache_->bytes()) / 1e6;
  char line[512];
  if (!last) {
    std::snprintf(line, sizeof(line), "stoker: loading into RAM: %llu of %zu records, %.1f MB, %.0f MB/s",
                  static_cast<unsigned long long>(recs), source_.size(), mb,
                  s > 0 ? static_cast<double>(bytes_.load(std::memory_order_relaxed)) / 1e6 / s : 0.0);
  } else if (full_.load(std::memory_order_relaxed)) {
    std::snprintf(line, sizeof(line),
                  "stoker: RAM budget (%.1f MB) full at %llu of %zu records; the rest is read each epoch (%s)",
                  static_cast<double>(cache_->budget()) / 1e6, static_cast<unsigned long long>(recs), source_.size(),
                  source_.describe().c_str());
  } else {
    std::snprintf(line, sizeof(line), "stoker: loaded into RAM: %llu records, %.1f MB in %.1f s (%s)",
                  static_cast<unsigned long long>(recs), mb, s, source_.describe().c_str());
  }
  // On a terminal the line rewrites itself; elsewhere (logs) one per line.
  std::fprintf(stderr, tty_ ? (last ? "\r\033[K%s\n" : "\r\033[K%s") : "%s\n", line);
  std::fflush(stderr);
}

}  // namespace stoker::detail
