// Lock contracts the compiler checks: clang's thread-safety analysis
// (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html), as leveldb and
// abseil use it. A member written `GUARDED_BY(mu_)` may be touched only with
// mu_ held, a function marked `REQUIRES(mu_)` only called with it held,
// `EXCLUDES(mu_)` only without. `make check-thread-safety` builds the core
// with clang's -Wthread-safety -Werror; under gcc every macro is empty.
//
// libstdc++'s std::mutex carries no annotations, so the analysis cannot see
// it: guarded state uses `Mutex`, locked by the scoped `MutexLock` (which can
// unlock and relock, like std::unique_lock) and waited on with `CondVar`
// (std::condition_variable on the MutexLock's std::unique_lock: no cost over
// the plain standard types).
//
// Condition waits are written as loops in the function that holds the lock
// (`while (!ready) cv.wait(lock);`), not as predicate lambdas: the analysis
// looks at a lambda's body alone and does not know the lock is held there.
//
// The escape hatches, each to be used with a comment saying why:
// - `Mutex::native()`: the std::mutex itself, for code the analysis cannot
//   follow (nothing done through it is checked);
// - `NO_THREAD_SAFETY_ANALYSIS` on a function the analysis cannot prove
//   (e.g. state handed between threads by another protocol);
// - a member left unannotated with a comment saying what protects it (e.g.
//   written under the lock while no worker holds a task, read by workers
//   without it: the loader's epoch order).
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define STOKER_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define STOKER_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) STOKER_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY STOKER_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) STOKER_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) STOKER_THREAD_ANNOTATION(pt_guarded_by(x))
#define REQUIRES(...) STOKER_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define EXCLUDES(...) STOKER_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define ACQUIRE(...) STOKER_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) STOKER_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) STOKER_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define ASSERT_CAPABILITY(x) STOKER_THREAD_ANNOTATION(assert_capability(x))
#define RETURN_CAPABILITY(x) STOKER_THREAD_ANNOTATION(lock_returned(x))
#define NO_THREAD_SAFETY_ANALYSIS STOKER_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace stoker::detail {

// std::mutex, annotated.
class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() ACQUIRE() NO_THREAD_SAFETY_ANALYSIS { mu_.lock(); }
  void unlock() RELEASE() NO_THREAD_SAFETY_ANALYSIS { mu_.unlock(); }
  bool try_lock() TRY_ACQUIRE(true) NO_THREAD_SAFETY_ANALYSIS { return mu_.try_lock(); }
  // Tells the analysis the caller holds it (a function it cannot follow
  // there, e.g. a callback run under the lock). No check at run time.
  void assert_held() const ASSERT_CAPABILITY(this) {}
  // The escape hatch: the std::mutex, unchecked (see the top of this file).
  std::mutex& native() RETURN_CAPABILITY(this) { return mu_; }

 private:
  std::mutex mu_;
};

// Holds a Mutex for its scope (std::unique_lock<std::mutex> underneath);
// unlock() and lock() release and retake it within the scope, and the
// analysis follows both.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) NO_THREAD_SAFETY_ANALYSIS : lock_(mu.native()) {}
  ~MutexLock() RELEASE() NO_THREAD_SAFETY_ANALYSIS {}
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void lock() ACQUIRE() NO_THREAD_SAFETY_ANALYSIS { lock_.lock(); }
  void unlock() RELEASE() NO_THREAD_SAFETY_ANALYSIS { lock_.unlock(); }

 private:
  friend class CondVar;
  std::unique_lock<std::mutex> lock_;
};

// std::condition_variable waited on with a MutexLock. Each wait releases
// the lock while it sleeps and holds it again when it returns, as the
// standard one does; spurious wake-ups happen, so wait in a loop.
class CondVar {
 public:
  void notify_one() noexcept { cv_.notify_one(); }
  void notify_all() noexcept { cv_.notify_all(); }
  void wait(MutexLock& lock) { cv_.wait(lock.lock_); }
  // false once `deadline` has passed.
  bool wait_until(MutexLock& lock, std::chrono::steady_clock::time_point deadline) {
    return cv_.wait_until(lock.lock_, deadline) == std::cv_status::no_timeout;
  }

 private:
  std::condition_variable cv_;
};

}  // namespace stoker::detail
