#include "util/thread.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <new>
#include <stdexcept>
#include <utility>

namespace stoker::detail {
namespace {

constexpr std::int64_t kCleared = INT64_MIN;

std::atomic<bool> g_throw_bad_alloc[static_cast<int>(ThreadSite::kCount)];

// The thread's body: priority, then `fn` inside the barrier.
void thread_top(const std::string& name, Priority priority, const std::function<void()>& fn,
                const ErrorSink& on_error) noexcept {
  set_thread_priority(priority);
  Status st;
  try {
    fn();
    return;
  } catch (...) {
    st = exception_status(name);
  }
  if (on_error) {
    try {
      on_error(st);
      return;
    } catch (...) {
    }
  }
  std::fprintf(stderr, "stoker: thread %s stopped: %s\n", name.c_str(), st.to_string().c_str());
}

}  // namespace

std::atomic<std::int64_t> g_throw_at[static_cast<int>(ThreadSite::kCount)] = {
    kCleared, kCleared, kCleared, kCleared, kCleared, kCleared, kCleared};
static_assert(static_cast<int>(ThreadSite::kCount) == 7, "one initialiser per site");

std::thread spawn(std::string name, Priority priority, std::function<void()> fn, ErrorSink on_error) {
  if (name.size() > 15) name.resize(15);  // what Linux keeps (pthread_setname_np refuses more)
  // NOTE: the new thread inherits the creating thread's signal mask: all
  // blocked while it is created, then the creator's back.
  sigset_t all, saved;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &saved);
  struct Restore {
    const sigset_t* saved;
    ~Restore() { pthread_sigmask(SIG_SETMASK, saved, nullptr); }
  } restore{&saved};
  std::thread t([name, priority, fn = std::move(fn), sink = std::move(on_error)] {
    thread_top(name, priority, fn, sink);
  });
  pthread_setname_np(t.native_handle(), name.c_str());
  return t;
}

void set_thread_priority(Priority priority) {
  switch (priority) {
    case Priority::kNormal:
      return;
    case Priority::kBackground:
      (void)setpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)), 10);
      return;
    case Priority::kIdle: {
      // NOTE: SCHED_IDLE, not a nice level: under load even nice 19 takes a
      // share of the CPU from the workers, SCHED_IDLE only time nobody wants.
      sched_param param{};
      (void)pthread_setschedparam(pthread_self(), SCHED_IDLE, &param);
      return;
    }
  }
}

Status exception_status(std::string_view where) noexcept {
  Code code = Code::kInternal;
  try {
    try {
      throw;
    } catch (const Error& e) {
      code = e.code() == Code::kOk ? Code::kInternal : e.code();
      return Status(code, std::string(where) + ": " + e.what());
    } catch (const std::bad_alloc&) {
      code = Code::kResourceExhausted;
      return Status(code, std::string(where) + ": out of memory (std::bad_alloc)");
    } catch (const std::exception& e) {
      return Status(code, std::string(where) + ": " + e.what());
    } catch (...) {
      return Status(code, std::string(where) + ": unknown exception");
    }
  } catch (...) {
    // NOTE: no memory for the message: one short enough for the string's
    // own storage (no allocation).
    return Status(code, "out of memory");
  }
}

const char* thread_site_name(ThreadSite site) {
  switch (site) {
    case ThreadSite::kWorker: return "worker";
    case ThreadSite::kWorkerStart: return "worker_start";
    case ThreadSite::kRewrite: return "rewrite";
    case ThreadSite::kPreload: return "preload";
    case ThreadSite::kFetcher: return "fetcher";
    case ThreadSite::kOpener: return "opener";
    case ThreadSite::kPack: return "pack";
    case ThreadSite::kCount: break;
  }
  return "?";
}

void throw_injected(ThreadSite site) {
  if (g_throw_bad_alloc[static_cast<int>(site)].load(std::memory_order_relaxed)) throw std::bad_alloc();
  throw std::runtime_error(std::string("injected by testing::throw_on_thread(") + thread_site_name(site) + ")");
}

namespace testing {
void throw_on_thread(ThreadSite site, std::int64_t at, bool bad_alloc) {
  g_throw_bad_alloc[static_cast<int>(site)].store(bad_alloc, std::memory_order_relaxed);
  g_throw_at[static_cast<int>(site)].store(at < 0 ? kCleared : at, std::memory_order_release);
}
}  // namespace testing

}  // namespace stoker::detail
