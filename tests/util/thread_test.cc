// util/thread.h: spawn() names the thread, masks every signal, sets its
// priority and catches what reaches its top; exception_status() maps each
// kind of exception to its code.
#include "util/thread.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <new>
#include <optional>
#include <stdexcept>
#include <string>

namespace stoker::detail {
namespace {

// Runs `fn` on a spawned thread and returns what its sink got (nullopt: nothing).
std::optional<Status> run(std::function<void()> fn, Priority priority = Priority::kNormal) {
  std::optional<Status> got;
  std::thread t = spawn("stoker-test", priority, std::move(fn), [&](const Status& st) { got = st; });
  t.join();
  return got;
}

TEST(ThreadTest, SpawnNamesTheThreadBeforeItReturns) {
  std::atomic<bool> go{false};
  char inside[32] = {};
  std::thread t = spawn("stoker-a-name-longer-than-fifteen", Priority::kNormal, [&] {
    while (!go.load()) std::this_thread::yield();
    pthread_getname_np(pthread_self(), inside, sizeof inside);
  });
  char outside[32] = {};
  ASSERT_EQ(pthread_getname_np(t.native_handle(), outside, sizeof outside), 0);
  EXPECT_STREQ(outside, "stoker-a-name-l") << "named by the creator, cut to Linux's 15 characters";
  go = true;
  t.join();
  EXPECT_STREQ(inside, "stoker-a-name-l");
}

TEST(ThreadTest, SpawnBlocksEverySignalInTheThreadAndLeavesTheCreatorsMask) {
  sigset_t before, after, inside;
  sigemptyset(&inside);
  ASSERT_EQ(pthread_sigmask(SIG_SETMASK, nullptr, &before), 0);
  ASSERT_FALSE(sigismember(&before, SIGINT)) << "the test runner blocks SIGINT?";
  std::thread t = spawn("stoker-mask", Priority::kNormal, [&] { pthread_sigmask(SIG_SETMASK, nullptr, &inside); });
  t.join();
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCHLD, SIGPIPE, SIGALRM}) {
    EXPECT_TRUE(sigismember(&inside, sig)) << "signal " << sig << " reaches a stoker thread";
  }
  ASSERT_EQ(pthread_sigmask(SIG_SETMASK, nullptr, &after), 0);
  for (int sig = 1; sig < SIGRTMIN; ++sig) {
    EXPECT_EQ(sigismember(&after, sig), sigismember(&before, sig)) << "the creator's mask changed for " << sig;
  }
}

TEST(ThreadTest, SpawnSetsThePriority) {
  int nice_inside = -100, policy_inside = -1;
  auto got = run([&] {
    errno = 0;
    nice_inside = getpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)));
  }, Priority::kBackground);
  EXPECT_FALSE(got.has_value());
  EXPECT_GE(nice_inside, 10) << "background threads run at nice +10 (or lower already)";
  got = run([&] { policy_inside = sched_getscheduler(0); }, Priority::kIdle);
  EXPECT_EQ(policy_inside, SCHED_IDLE);
  const int nice_here = getpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)));
  got = run([&] { nice_inside = getpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid))); });
  EXPECT_EQ(nice_inside, nice_here) << "a normal thread keeps its creator's priority";
}

TEST(ThreadTest, EveryKindOfExceptionReachesTheSinkNeverTerminate) {
  auto got = run([] { throw std::runtime_error("boom"); });
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->code(), Code::kInternal);
  EXPECT_EQ(got->message(), "stoker-test: boom");

  got = run([] { throw std::bad_alloc(); });
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->code(), Code::kResourceExhausted);
  EXPECT_NE(got->message().find("out of memory"), std::string::npos) << got->message();

  got = run([] { throw Error(Code::kIOError, "disk gone"); });
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->code(), Code::kIOError) << "a stoker::Error keeps its code";
  EXPECT_EQ(got->message(), "stoker-test: disk gone");

  got = run([] { throw 42; });
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->code(), Code::kInternal);
  EXPECT_EQ(got->message(), "stoker-test: unknown exception");

  got = run([] {});
  EXPECT_FALSE(got.has_value()) << "no exception, no call";
}

TEST(ThreadTest, WithoutASinkOrWhenTheSinkThrowsTheErrorIsPrinted) {
  ::testing::internal::CaptureStderr();
  spawn("stoker-nosink", Priority::kNormal, [] { throw std::runtime_error("lost"); }).join();
  spawn("stoker-badsink", Priority::kNormal, [] { throw std::runtime_error("twice"); },
        [](const Status&) { throw std::runtime_error("the sink too"); })
      .join();
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("stoker: thread stoker-nosink stopped: internal: stoker-nosink: lost"), std::string::npos) << err;
  EXPECT_NE(err.find("stoker-badsink: twice"), std::string::npos) << err;
}

TEST(ThreadTest, ExceptionStatusOutsideAThread) {
  try {
    throw std::length_error("too long");
  } catch (...) {
    const Status st = exception_status("here");
    EXPECT_EQ(st.code(), Code::kInternal);
    EXPECT_EQ(st.message(), "here: too long");
  }
}

TEST(ThreadTest, InjectionPointsThrowOnlyWhereArmed) {
  EXPECT_NO_THROW(injection_point(ThreadSite::kPreload, 3));
  testing::throw_on_thread(ThreadSite::kPreload, 3);
  EXPECT_NO_THROW(injection_point(ThreadSite::kPreload, 2));
  EXPECT_NO_THROW(injection_point(ThreadSite::kFetcher, 3));
  EXPECT_THROW(injection_point(ThreadSite::kPreload, 3), std::runtime_error);
  testing::throw_on_thread(ThreadSite::kPreload, 3, /*bad_alloc=*/true);
  EXPECT_THROW(injection_point(ThreadSite::kPreload, 3), std::bad_alloc);
  testing::throw_on_thread(ThreadSite::kPreload, -1);
  EXPECT_NO_THROW(injection_point(ThreadSite::kPreload, 3));
  EXPECT_NO_THROW(injection_point(ThreadSite::kPreload, -1)) << "-1 clears; it never matches";
}

}  // namespace
}  // namespace stoker::detail
