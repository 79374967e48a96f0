#include "util/thread.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <list>
#include <memory>
#include <new>
#include <stdexcept>
#include <utility>

#include "util/thread_annotations.h"

namespace stoker::detail {
namespace {

constexpr std::int64_t kCleared = INT64_MIN;

std::atomic<bool> g_throw_bad_alloc[static_cast<int>(ThreadSite::kCount)];

thread_local bool t_stoker_thread = false;

// The threads defer_to_thread() started; `ended` says which have returned.
struct Deferred {
  std::thread thread;
  std::shared_ptr<std::atomic<bool>> ended;
};
struct DeferredThreads {
  Mutex mu;
  std::list<Deferred> threads GUARDED_BY(mu);
};
// NOTE: never destroyed: a joinable std::thread destroyed at exit would
// call std::terminate, and one still running at exit simply ends with the process.
DeferredThreads& deferred_threads() {
  static DeferredThreads* d = new DeferredThreads;
  return *d;
}

// The thread's body: priority, then `fn` inside the barrier.
void thread_top(const std::string& name, Priority priority, const std::function<void()>& fn,
                const ErrorSink& on_error) noexcept {
  t_stoker_thread = true;
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

bool on_stoker_thread() noexcept { return t_stoker_thread; }

void defer_to_thread(std::string name, std::function<void()> fn) {
  DeferredThreads& d = deferred_threads();
  std::list<Deferred> done;
  {
    MutexLock lock(d.mu);
    for (auto it = d.threads.begin(); it != d.threads.end();) {
      auto next = std::next(it);
      if (it->ended->load(std::memory_order_acquire)) done.splice(done.end(), d.threads, it);
      it = next;
    }
    auto ended = std::make_shared<std::atomic<bool>>(false);
    std::thread t = spawn(std::move(name), Priority::kNormal, [fn = std::move(fn), ended]() mutable {
      struct Mark {
        std::atomic<bool>* ended;
        ~Mark() { ended->store(true, std::memory_order_release); }
      } mark{ended.get()};
      fn();
      fn = nullptr;  // what it holds is released on this thread, before it counts as ended
    });
    d.threads.push_back(Deferred{std::move(t), std::move(ended)});
  }
  for (Deferred& e : done) e.thread.join();  // returned already: no wait
}

void join_deferred() {
  DeferredThreads& d = deferred_threads();
  for (;;) {
    std::list<Deferred> all;
    {
      MutexLock lock(d.mu);
      if (d.threads.empty()) return;
      all.swap(d.threads);
    }
    for (Deferred& e : all) {
      if (e.thread.get_id() != std::this_thread::get_id()) e.thread.join();
      else e.thread.detach();
    }
  }
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
