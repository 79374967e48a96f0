// Every thread stoker starts is started by spawn(): the loader's workers,
// the cache="ram" preload, remote shards' fetchers and index openers, the
// packer's workers and the command-line tools' helpers. One place names the
// thread, masks signals, sets its priority and puts an exception barrier at
// its top, so an exception on a stoker thread is a reported error, never
// std::terminate (which would end the training process, Python and all).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <thread>

#include "stoker/status.h"

namespace stoker::detail {

enum class Priority {
  kNormal,      // as the creating thread
  kBackground,  // nice +10: decode workers win the CPU (the preload's reads)
  kIdle,        // SCHED_IDLE: only CPU time nothing else wants (the preload's idle rewrite)
};

// What an exception that reached a thread's top becomes; called on that
// thread, once, just before it ends. Must not throw (if it does, the
// message goes to stderr).
using ErrorSink = std::function<void(const Status&)>;

// Starts `fn` on a new thread that
// - is named `name` (cut to the 15 characters Linux keeps), by the creating
//   thread, so the name is there when spawn() returns (top -H, gdb, py-spy,
//   and the tests that count threads by name);
// - has every signal blocked, so Ctrl-C and friends reach the process's main
//   thread (where Python handles them) and never interrupt a read;
// - runs at `priority` (best effort: a refusal leaves it as it was);
// - catches anything thrown out of `fn` (std::bad_alloc, stoker::Error, any
//   std::exception, `...`) and hands it to `on_error` as a Status
//   (exception_status(name)); with no sink it is printed on stderr.
// The barrier is a try/catch around the thread's whole body: nothing on any
// per-sample path. Throws std::system_error when no thread can be started.
std::thread spawn(std::string name, Priority priority, std::function<void()> fn, ErrorSink on_error = {});

// Whether the calling thread is one spawn() started (any of stoker's).
bool on_stoker_thread() noexcept;

// Runs `fn` on a thread of its own (spawn(name, kNormal, fn)) that nobody
// waits for but join_deferred(): work the calling thread must not wait
// for, such as destroying a Loader on one of its own workers (Python's
// garbage collector, run by a transform on that worker, can free it there),
// which joins those workers. Threads that have ended are joined by the
// next call. Throws std::system_error when no thread can be started.
void defer_to_thread(std::string name, std::function<void()> fn);

// Waits for every thread defer_to_thread() started, those started while it
// waits included (Python calls it at exit, before its interpreter
// finalizes, since such work may still call into Python).
void join_deferred();

// The calling thread's priority (best effort): for a thread whose work
// changes kind (the preload, from reading to idle rewriting).
void set_thread_priority(Priority priority);

// Inside a catch block: the exception being handled as a Status whose
// message starts with `where`: stoker::Error keeps its code, std::bad_alloc
// is kResourceExhausted, anything else kInternal. Never throws (with no
// memory left for the message, the message is short).
Status exception_status(std::string_view where) noexcept;

// ---- Test hooks ----
// The places a test can make a stoker thread throw, and what `at` selects there.
enum class ThreadSite : int {
  kWorker,       // a worker taking the batch buffer for batch `at` (as if the pool's allocation threw)
  kWorkerStart,  // worker `at` at the top of its thread, outside any task
  kRewrite,      // the cache="ram" rewrite of record `at` (on a worker or a preload thread)
  kPreload,      // a preload thread reading record `at`
  kFetcher,      // a remote fetcher fetching shard `at`
  kOpener,       // a remote index opener opening shard `at`
  kPack,         // a pack worker making the record at position `at`
  kCount,
};
const char* thread_site_name(ThreadSite site);

namespace testing {
// Test hook: the thread at `site` throws while at `at` (std::bad_alloc when
// bad_alloc, else std::runtime_error), every time, until cleared with
// at = -1. For the tests of what each kind of thread does with an exception.
void throw_on_thread(ThreadSite site, std::int64_t at, bool bad_alloc = false);
}  // namespace testing

extern std::atomic<std::int64_t> g_throw_at[static_cast<int>(ThreadSite::kCount)];
[[noreturn]] void throw_injected(ThreadSite site);
// Throws when a test armed `site` for `at`: one load otherwise (a plain
// load on x86), at most once per batch or record, never per pixel.
inline void injection_point(ThreadSite site, std::int64_t at) {
  if (g_throw_at[static_cast<int>(site)].load(std::memory_order_acquire) == at) [[unlikely]] {
    throw_injected(site);
  }
}

}  // namespace stoker::detail
