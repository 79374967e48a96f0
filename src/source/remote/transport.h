// Moving the bytes of remote objects: HTTP(S) and S3 through libcurl, and
// `pipe:` commands. Retries, resumption and integrity checks live here; what
// to fetch and when is remote_bytes.h's business.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "stoker/status.h"

namespace stoker::detail {

// "http", "https", "s3", "pipe", or "" for a local path.
std::string remote_scheme(const std::string& spec);
// The URL as messages, keys and stats show it: without a user:password@.
std::string redact_url(const std::string& url);

// What identifies an object's bytes for a run: pinned at open, checked on
// every response, so a shard changed mid-run is an error, never mixed data.
struct ObjectInfo {
  std::uint64_t size = 0;
  std::string etag;  // as the server spells it (quotes kept); empty when it sends none
};

// Why a request was retried (the stats' keys).
enum class RetryCause { kTimeout, kConnect, kReset, kHttp429, kHttp5xx, kPipe, kCount };
inline constexpr const char* kRetryCauseNames[] = {"timeout", "connect", "reset", "http_429", "http_5xx", "pipe"};

// Request latencies (time to the first byte) in 64 log-spaced buckets from
// 0.05 ms to ~100 s; lock-free.
class LatencyHistogram {
 public:
  void add(double ms);
  // The q-quantile (0..1) in ms, the upper edge of its bucket; 0 when empty.
  double quantile(double q) const;

 private:
  static constexpr int kBuckets = 64;
  std::atomic<std::uint64_t> counts_[kBuckets] = {};
};

// Counters shared by a remote source's transfers (Stats::Remote reads them).
struct RemoteCounters {
  std::atomic<std::uint64_t> bytes_fetched{0};  // response bodies, sidecars and retried parts included
  std::atomic<std::uint64_t> requests{0};       // requests sent (each attempt, HEADs and listings too)
  std::atomic<std::uint64_t> retries[static_cast<int>(RetryCause::kCount)] = {};
  std::atomic<std::uint64_t> stray_reads{0};    // reads outside the epoch's plan (one ranged request each)
  std::atomic<std::uint64_t> fetch_wait_ns{0};  // reader threads' time waiting for bytes not yet arrived
  std::atomic<std::uint64_t> index_scanned_bytes{0};
  std::atomic<std::uint64_t> thread_errors{0};  // exceptions caught on fetcher threads (Stats::thread_errors["fetcher"])
  LatencyHistogram latency;
};

struct TransferOptions {
  int retries = 8;               // attempts after the first, per request
  int connect_timeout_ms = 5000;
  int low_speed_time_s = 30;     // under 1 KiB/s for this long: a timeout (retried)
  double backoff_base_s = 0.1;   // full jitter: uniform(0, min(backoff_max_s, base * 2^attempt))
  double backoff_max_s = 10;
};

// A store of objects named by URL. Thread-safe.
class Transport {
 public:
  // Receives a response's bytes in order; an error stops the transfer.
  using Sink = std::function<Status(const std::uint8_t*, std::size_t)>;
  static constexpr std::uint64_t kToEnd = UINT64_MAX;

  virtual ~Transport();
  // The object's size and ETag. Errors name the URL and the status (a 404 is kNotFound).
  virtual Status stat(const std::string& url, ObjectInfo* out) = 0;
  // Bytes [off, off + len) of the object (len = kToEnd: to its end) into
  // `sink`, in order, retrying per the options and resuming a broken
  // response from the last byte received. `pinned` (may be null): every
  // response's ETag and size must match it. Errors are kUnavailable (retries
  // spent, or the object changed) or kNotFound, naming the URL and cause.
  virtual Status get(const std::string& url, std::uint64_t off, std::uint64_t len, const ObjectInfo* pinned,
                     const Sink& sink) = 0;
  // An object small enough for memory (an index sidecar): a 404 is kNotFound.
  Status get_small(const std::string& url, std::string* out);
  // Objects whose URLs match a glob ("s3://b/p/*.tar"), in byte order of
  // their keys, with their size and ETag. Only S3 lists.
  virtual Status list(const std::string& pattern, std::vector<std::pair<std::string, ObjectInfo>>* out);
  // false for `pipe:`: a read of part of an object costs the whole.
  virtual bool ranged() const { return true; }
  // Wakes and fails every wait (backoff, transfer): the source is closing.
  void cancel();
  bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }

 protected:
  Transport(const TransferOptions& opt, RemoteCounters* counters) : opt_(opt), counters_(counters) {}
  // Sleeps the backoff of `attempt` (0-based), or `retry_after_s` when >= 0.
  // false when cancelled meanwhile.
  bool backoff(int attempt, double retry_after_s);
  void count_retry(RetryCause c) { counters_->retries[static_cast<int>(c)].fetch_add(1, std::memory_order_relaxed); }

  const TransferOptions opt_;
  RemoteCounters* const counters_;

 private:
  std::atomic<bool> cancelled_{false};
  std::mutex mu_;
  std::condition_variable cv_;
};

// http:// and https:// URLs.
std::unique_ptr<Transport> make_http_transport(const TransferOptions& opt, RemoteCounters* counters);
// s3://bucket/key URLs, configured from the AWS environment (s3.h). Throws
// Error when the configuration is refused or libcurl is older than 7.88.
std::unique_ptr<Transport> make_s3_transport(const TransferOptions& opt, RemoteCounters* counters);
// pipe:CMD: the object is CMD's standard output (run by /bin/sh -c); an exit
// status other than 0 is a failure, retried like a broken connection.
std::unique_ptr<Transport> make_pipe_transport(const TransferOptions& opt, RemoteCounters* counters);

}  // namespace stoker::detail
