// cache="ram": moving the data set into RAM in the background. A few threads
// read every record of a source into a SampleCache, in record order, until
// the set is in or the budget is spent, printing progress on stderr. They
// wait for go() (the loader's first batch is out) or a second, whichever
// comes first, so the first batch never competes with them, and nothing
// ever waits for them: a record not in yet is read by its worker as usual.
// Copying records in, they run at nice +10; rewriting them as they store
// them (cache/ram_rewrite.h), at SCHED_IDLE: CPU work that only CPU time
// nothing else wants should pay for (the workers rewrite on read anyway).
#pragma once

#include <atomic>
#include <functional>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "cache/sample_cache.h"
#include "stoker/options.h"
#include "stoker/source.h"
#include "util/thread.h"
#include "util/thread_annotations.h"

namespace stoker::detail {

class Preloader {
 public:
  // progress: kOn prints to stderr (rewriting one line on a terminal, a
  // line every 2 s elsewhere), kAuto only on a terminal. The threads start
  // here, held back.
  // `read` reads record i as the cache keeps it: its bytes, and with
  // several members each one's end (sample/sample_maker.h read_record).
  using ReadRecord = std::function<Status(std::size_t i, std::vector<std::uint8_t>* bytes,
                                          std::vector<std::uint64_t>* ends)>;
  // `store` (may be empty: SampleCache::insert as read): stores record i's
  // bytes, read by preload thread `thread` (cache="ram" with its rewrite
  // stores them rewritten: RamRewrite::on_miss).
  using StoreRecord = std::function<SampleCache::Insert(int thread, std::size_t i, const std::vector<std::uint8_t>& bytes,
                                                        const std::vector<std::uint64_t>* ends)>;
  // `start`: the record to begin at (then on, wrapping around): ranks
  // filling one shared cache begin at different places, so their preloads
  // read disjoint parts.
  // `label`: which cache, for the progress lines (CacheService: "node-shared
  // cache /dev/shm/...", "cache of this process").
  // `priority`: the threads' (Priority::kIdle when `store` rewrites).
  Preloader(const Source& source, ReadRecord read, SampleCache* cache, Progress progress, int threads = 4,
            std::size_t start = 0, StoreRecord store = {}, std::string label = {},
            Priority priority = Priority::kBackground);
  // NOTE: an exception on a preload thread (out of memory while copying a
  // record in, a bug) stops the preload: report().state becomes
  // "error: <what>" and report().errors counts it; the records not in yet
  // are read by the workers as usual, so no batch changes.
  ~Preloader();  // stops the threads after the record in hand, and joins them
  Preloader(const Preloader&) = delete;
  Preloader& operator=(const Preloader&) = delete;

  void go();  // the first batch is out: start reading

  struct Report {
    std::string state = "loading";  // "loading", "done", "budget full", "error: <what>"
    std::uint64_t records = 0;      // stored by the preload (workers may store others)
    std::uint64_t bytes = 0;
    double seconds = 0;       // since reading began (0 while held back)
    std::uint64_t errors = 0;  // exceptions that stopped a preload thread
  };
  Report report() const EXCLUDES(mu_);

 private:
  void run(int id) EXCLUDES(mu_);
  void load(int id) EXCLUDES(mu_);
  void loading_ended();
  void fail(const Status& st) EXCLUDES(mu_);
  void stop() EXCLUDES(mu_);
  void print(bool last) const;

  const Source& source_;
  ReadRecord read_;
  StoreRecord store_;
  const std::string label_;
  SampleCache* cache_;
  const bool tty_;       // stderr is a terminal
  const bool progress_;  // print progress
  std::vector<std::thread> threads_;
  std::atomic<bool> stop_{false}, full_{false}, quit_{false};  // quit_: the destructor's
  std::atomic<std::size_t> next_{0};
  std::size_t start_ = 0;
  std::atomic<int> running_{0}, state_{0};  // state_: 0 loading, 1 done, 2 budget full, 3 error
  std::atomic<std::uint64_t> records_{0}, bytes_{0}, errors_{0};
  std::atomic<std::int64_t> start_ns_{0}, end_ns_{0};
  mutable Mutex mu_;
  CondVar cv_;  // go() or stop
  bool go_ GUARDED_BY(mu_) = false;
  std::string error_ GUARDED_BY(mu_);  // the first exception's message (state_ 3)
};

}  // namespace stoker::detail
