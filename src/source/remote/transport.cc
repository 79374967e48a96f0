// The transport-independent parts (transport.h): schemes, latency
// histogram, backoff, and `pipe:` commands.
#include "source/remote/transport.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>

extern char** environ;

namespace stoker::detail {

std::string remote_scheme(const std::string& spec) {
  if (spec.rfind("pipe:", 0) == 0) return "pipe";
  for (const char* s : {"http", "https", "s3"}) {
    if (spec.rfind(std::string(s) + "://", 0) == 0) return s;
  }
  return "";
}

std::string redact_url(const std::string& url) {
  const std::size_t scheme = url.find("://");
  if (scheme == std::string::npos || remote_scheme(url).empty() || remote_scheme(url) == "pipe") return url;
  const std::size_t host = scheme + 3;
  const std::size_t path = url.find('/', host);
  const std::size_t at = url.rfind('@', path == std::string::npos ? std::string::npos : path);
  if (at == std::string::npos || at < host) return url;
  return url.substr(0, host) + url.substr(at + 1);
}

namespace {
constexpr double kLatencyLo = 0.05;  // ms, the first bucket's upper edge
constexpr double kLatencyStep = 1.25;  // each bucket's edge is this times the previous one's
}  // namespace

void LatencyHistogram::add(double ms) {
  int b = ms <= kLatencyLo ? 0 : static_cast<int>(std::ceil(std::log(ms / kLatencyLo) / std::log(kLatencyStep)));
  b = std::clamp(b, 0, kBuckets - 1);
  counts_[b].fetch_add(1, std::memory_order_relaxed);
}

double LatencyHistogram::quantile(double q) const {
  std::uint64_t c[kBuckets], total = 0;
  for (int b = 0; b < kBuckets; ++b) total += c[b] = counts_[b].load(std::memory_order_relaxed);
  if (total == 0) return 0;
  const auto rank = static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(total)));
  std::uint64_t seen = 0;
  for (int b = 0; b < kBuckets; ++b) {
    seen += c[b];
    if (seen >= std::max<std::uint64_t>(rank, 1)) return kLatencyLo * std::pow(kLatencyStep, b);
  }
  return kLatencyLo * std::pow(kLatencyStep, kBuckets - 1);
}

Transport::~Transport() = default;

Status Transport::get_small(const std::string& url, std::string* out) {
  out->clear();
  return get(url, 0, kToEnd, nullptr, [out](const std::uint8_t* p, std::size_t n) {
    if (out->size() + n > (std::size_t{256} << 20)) return Status::ResourceExhausted("larger than 256 MiB");
    out->append(reinterpret_cast<const char*>(p), n);
    return Status::Ok();
  });
}

Status Transport::list(const std::string& pattern, std::vector<std::pair<std::string, ObjectInfo>>*) {
  return Status::InvalidArgument("'" + pattern + "': no listing over " + remote_scheme(pattern) +
                                 ": name the shards with a brace pattern (train-{000000..000127}.tar)");
}

void Transport::cancel() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
  }
  cv_.notify_all();
}

bool Transport::backoff(int attempt, double retry_after_s) {
  double s = retry_after_s;
  if (s < 0) {
    // NOTE: full jitter (the AWS architecture blog's "exponential backoff
    // and jitter"): ranks retrying together spread out. The draw never
    // touches the epoch's order.
    thread_local std::mt19937_64 rng{std::random_device{}()};
    const double cap = std::min(opt_.backoff_max_s, opt_.backoff_base_s * std::ldexp(1.0, std::min(attempt, 30)));
    s = std::uniform_real_distribution<double>(0, cap)(rng);
  }
  std::unique_lock<std::mutex> lock(mu_);
  return !cv_.wait_for(lock, std::chrono::duration<double>(s), [this] { return cancelled_.load(); });
}

// ---- pipe: ----
namespace {

class PipeTransport final : public Transport {
 public:
  PipeTransport(const TransferOptions& opt, RemoteCounters* counters) : Transport(opt, counters) {}

  Status stat(const std::string& url, ObjectInfo*) override {
    return Status::Unsupported(url + ": a command's output has no size before it runs");
  }
  bool ranged() const override { return false; }

  Status get(const std::string& url, std::uint64_t off, std::uint64_t len, const ObjectInfo* pinned,
             const Sink& sink) override {
    const std::string cmd = url.substr(5);
    std::uint64_t delivered = 0;  // of [off, off + len)
    for (int attempt = 0;; ++attempt) {
      std::string stderr_tail;
      std::uint64_t total = 0;
      bool complete = false;
      Status st = run(cmd, off, len, &delivered, sink, &stderr_tail, &total, &complete);
      if (st.ok() && pinned && complete && total != pinned->size) {
        return Status(Code::kUnavailable, url + " changed during the run: its output was " +
                                              std::to_string(pinned->size) + " bytes at open, " +
                                              std::to_string(total) + " now; the epoch's order came from the old index");
      }
      if (st.ok() || st.code() != Code::kUnavailable || cancelled()) return st;
      if (attempt >= opt_.retries) {
        return Status(Code::kUnavailable, st.message() + " (after " + std::to_string(attempt + 1) + " attempts)");
      }
      count_retry(RetryCause::kPipe);
      if (!backoff(attempt, -1)) return Status(Code::kCancelled, url + ": cancelled");
    }
  }

 private:
  // One run of the command: skips what earlier runs delivered.
  Status run(const std::string& cmd, std::uint64_t off, std::uint64_t len, std::uint64_t* delivered, const Sink& sink,
             std::string* stderr_tail, std::uint64_t* total, bool* complete) {
    const std::string url = "pipe:" + cmd;
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0) return Status::IOError(url + ": pipe: " + std::strerror(errno));
    if (::pipe2(err, O_CLOEXEC) != 0) {
      ::close(out[0]);
      ::close(out[1]);
      return Status::IOError(url + ": pipe: " + std::strerror(errno));
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_adddup2(&fa, err[1], 2);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    // NOTE: stoker's threads block every signal and Python ignores SIGPIPE;
    // a spawned command inherits both, so they are reset for it.
    sigset_t none, defaults;
    sigemptyset(&none);
    sigemptyset(&defaults);
    for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGQUIT, SIGHUP}) sigaddset(&defaults, sig);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    pid_t pid = -1;
    const char* argv[] = {"/bin/sh", "-c", cmd.c_str(), nullptr};
    const int rc = ::posix_spawn(&pid, "/bin/sh", &fa, &attr, const_cast<char* const*>(argv), environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    ::close(out[1]);
    ::close(err[1]);
    if (rc != 0) {
      ::close(out[0]);
      ::close(err[0]);
      return Status::IOError(url + ": cannot start /bin/sh: " + std::strerror(rc));
    }
    counters_->requests.fetch_add(1, std::memory_order_relaxed);
    const auto t0 = std::chrono::steady_clock::now();
    bool first = true, stopped_early = false;
    Status sink_status;
    std::vector<std::uint8_t> buf(std::size_t{1} << 20);
    pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
    int open_fds = 2;
    while (open_fds > 0) {
      if (cancelled()) break;
      int n = ::poll(fds, 2, 100);
      if (n < 0 && errno != EINTR) break;
      for (int k = 0; k < 2; ++k) {
        if (fds[k].fd < 0 || !(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        const ssize_t got = ::read(fds[k].fd, buf.data(), buf.size());
        if (got <= 0) {
          if (got < 0 && errno == EINTR) continue;
          ::close(fds[k].fd);
          fds[k].fd = -1;
          --open_fds;
          continue;
        }
        const auto g = static_cast<std::uint64_t>(got);
        if (k == 1) {
          stderr_tail->append(reinterpret_cast<const char*>(buf.data()), g);
          if (stderr_tail->size() > 4096) stderr_tail->erase(0, stderr_tail->size() - 4096);
          continue;
        }
        if (first) {
          first = false;
          counters_->latency.add(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        }
        counters_->bytes_fetched.fetch_add(g, std::memory_order_relaxed);
        // This chunk covers output bytes [*total, *total + g): deliver the part
        // in [off + *delivered, off + len) not delivered by an earlier run.
        const std::uint64_t lo = std::max(*total, off + *delivered);
        const std::uint64_t end = len == kToEnd ? UINT64_MAX : off + len;
        const std::uint64_t hi = std::min(*total + g, end);
        if (sink_status.ok() && hi > lo) {
          sink_status = sink(buf.data() + (lo - *total), static_cast<std::size_t>(hi - lo));
          *delivered += hi - lo;
        }
        *total += g;
        if (!sink_status.ok() || (len != kToEnd && *delivered >= len)) {
          stopped_early = true;  // NOTE: the rest is not needed: the command is stopped
          break;
        }
      }
      if (stopped_early) break;
    }
    for (auto& f : fds) {
      if (f.fd >= 0) ::close(f.fd);
    }
    if (stopped_early || cancelled()) ::kill(pid, SIGKILL);
    int wstatus = 0;
    while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
    }
    if (!sink_status.ok()) return sink_status;
    if (cancelled()) return Status(Code::kCancelled, url + ": cancelled");
    if (stopped_early) return Status::Ok();
    std::string tail = *stderr_tail;
    while (!tail.empty() && (tail.back() == '\n' || tail.back() == '\r')) tail.pop_back();
    if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) {
      *complete = true;
      if (len != kToEnd && *delivered < len) {
        return Status(Code::kUnavailable, url + ": output ended at byte " + std::to_string(*total) + ", before byte " +
                                              std::to_string(off + len));
      }
      return Status::Ok();
    }
    const std::string how = WIFEXITED(wstatus) ? "exited with status " + std::to_string(WEXITSTATUS(wstatus))
                                               : "was killed by signal " + std::to_string(WTERMSIG(wstatus));
    return Status(Code::kUnavailable, url + ": the command " + how + (tail.empty() ? "" : "; its stderr: " + tail));
  }
};

}  // namespace

std::unique_ptr<Transport> make_pipe_transport(const TransferOptions& opt, RemoteCounters* counters) {
  return std::make_unique<PipeTransport>(opt, counters);
}

}  // namespace stoker::detail
