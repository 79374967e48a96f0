// http(s):// and s3:// objects through libcurl (transport.h): one easy handle
// per transfer, taken from a pool so connections are kept alive and reused.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>

#include "source/remote/curl_api.h"
#include "source/remote/s3.h"
#include "source/remote/transport.h"

namespace stoker::detail {
namespace {

// What one response said, parsed from its headers (reset per response, so a
// redirect's or a 100's headers do not leak into the final one).
struct Response {
  long status = 0;
  std::string etag;
  std::optional<std::uint64_t> content_length;
  std::optional<std::uint64_t> range_first, range_total;  // Content-Range: bytes first-last/total
  double retry_after_s = -1;
};

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\r' || s.back() == '\n' || s.back() == ' ' || s.back() == '\t')) s.pop_back();
  std::size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  return s.substr(i);
}

std::optional<std::uint64_t> to_u64(const std::string& s) {
  if (s.empty() || s.size() > 19 || s.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return std::stoull(s);
}

void parse_header(const std::string& line, Response* r) {
  if (line.rfind("HTTP/", 0) == 0) {
    *r = Response{};
    const std::size_t sp = line.find(' ');
    if (sp != std::string::npos) r->status = std::strtol(line.c_str() + sp + 1, nullptr, 10);
    return;
  }
  const std::size_t colon = line.find(':');
  if (colon == std::string::npos) return;
  std::string name = line.substr(0, colon);
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const std::string value = trim(line.substr(colon + 1));
  if (name == "etag") {
    r->etag = value;
  } else if (name == "content-length") {
    r->content_length = to_u64(value);
  } else if (name == "content-range" && value.rfind("bytes ", 0) == 0) {
    const std::size_t dash = value.find('-'), slash = value.find('/');
    if (dash != std::string::npos && slash != std::string::npos && dash < slash) {
      r->range_first = to_u64(value.substr(6, dash - 6));
      r->range_total = to_u64(value.substr(slash + 1));
    }
  } else if (name == "retry-after") {
    if (auto v = to_u64(value)) r->retry_after_s = static_cast<double>(std::min<std::uint64_t>(*v, 60));
  }
}

// Retryable curl results (libcurl-errors): the connection or the server
// failed, not the request.
std::optional<RetryCause> retryable(CURLcode c) {
  switch (c) {
    case CURLE_OPERATION_TIMEDOUT: return RetryCause::kTimeout;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_SSL_CONNECT_ERROR: return RetryCause::kConnect;
    case CURLE_PARTIAL_FILE:
    case CURLE_GOT_NOTHING:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM: return RetryCause::kReset;
    default: return std::nullopt;
  }
}

std::optional<RetryCause> retryable_status(long status) {
  if (status == 429) return RetryCause::kHttp429;
  if (status == 408 || status == 500 || status == 502 || status == 503 || status == 504) return RetryCause::kHttp5xx;
  return std::nullopt;
}

class HttpTransport final : public Transport {
 public:
  HttpTransport(const TransferOptions& opt, RemoteCounters* counters, std::optional<S3Config> s3)
      : Transport(opt, counters), api_(curl()), s3_(std::move(s3)) {
    if (s3_) {
      // NOTE: libcurl signs user-given headers (x-amz-content-sha256) only
      // from some 7.8x release on; 7.88 is the oldest seen to work.
      if (api_.version_num < 0x075800) {
        throw Error(Code::kUnsupported, "s3:// needs libcurl 7.88 or newer (CURLOPT_AWS_SIGV4); this is " + api_.version);
      }
      if (!s3_->credentials.empty()) {
        sigv4_ = "aws:amz:" + s3_->region + ":s3";
        userpwd_ = s3_->credentials.access_key + ":" + s3_->credentials.secret_key;
      }
    }
  }
  ~HttpTransport() override {
    for (CURL* h : pool_) api_.easy_cleanup(h);
  }

  Status stat(const std::string& url, ObjectInfo* out) override {
    Response r;
    std::string body;
    Status st = perform(url, /*head=*/true, 0, kToEnd, nullptr, nullptr, &r, &body, nullptr);
    if (!st.ok() && s3_ && r.status >= 400 && r.status != 404 && !retryable_status(r.status)) {
      // NOTE: a HEAD's error has no body; S3 says why (SignatureDoesNotMatch,
      // AccessDenied, ...) only in a GET's. Ask once more, for the message.
      std::uint64_t got = 0;
      const Sink none = [](const std::uint8_t*, std::size_t) { return Status::Ok(); };
      Status why = perform(url, false, 0, 1, nullptr, &none, &r, &body, &got);
      if (!why.ok()) return why;
    }
    if (!st.ok()) return st;
    if (!r.content_length) return Status(Code::kUnavailable, display(url) + ": the server sent no Content-Length");
    out->size = *r.content_length;
    out->etag = r.etag;
    return Status::Ok();
  }

  Status get(const std::string& url, std::uint64_t off, std::uint64_t len, const ObjectInfo* pinned,
             const Sink& sink) override {
    if (len == 0) return Status::Ok();
    std::uint64_t received = 0;
    Response r;
    std::string body;
    return perform(url, false, off, len, pinned, &sink, &r, &body, &received);
  }

  Status list(const std::string& pattern, std::vector<std::pair<std::string, ObjectInfo>>* out) override {
    if (!s3_) return Transport::list(pattern, out);
    S3Url u;
    Status st = parse_s3_url(pattern, &u, true);
    if (!st.ok()) return st;
    const std::string prefix = s3_glob_prefix(u.key);
    std::string token;
    for (int page = 0; page < 1000000; ++page) {
      std::string xml;
      const std::string request = s3_list_url(*s3_, u.bucket, prefix, token);
      st = get_small(request, &xml);
      if (!st.ok()) {
        return Status(st.code(), "listing s3://" + u.bucket + "/" + prefix + "*: " + st.message());
      }
      S3ListPage p;
      st = parse_s3_list(xml, &p);
      if (!st.ok()) return Status(st.code(), "listing s3://" + u.bucket + "/" + prefix + "*: " + st.message());
      for (auto& o : p.objects) {
        if (s3_key_matches(u.key, o.key)) out->push_back({"s3://" + u.bucket + "/" + o.key, {o.size, o.etag}});
      }
      if (!p.truncated) return Status::Ok();
      if (p.next_token.empty()) return Status::Corrupt("listing s3://" + u.bucket + ": truncated page without a token");
      token = p.next_token;
    }
    return Status::ResourceExhausted("listing s3://" + u.bucket + ": too many pages");
  }

 private:
  // What a message calls the object: its URL as the user gave it.
  static std::string display(const std::string& url) {
    const std::size_t q = url.find('?');
    return redact_url(q == std::string::npos ? url : url.substr(0, q));
  }
  std::string request_url(const std::string& url) const {
    if (s3_ && url.rfind("s3://", 0) == 0) {
      S3Url u;
      if (parse_s3_url(url, &u).ok()) return s3_object_url(*s3_, u);
    }
    return url;
  }

  CURL* take() {
    {
      std::lock_guard<std::mutex> lock(pool_mu_);
      if (!pool_.empty()) {
        CURL* h = pool_.back();
        pool_.pop_back();
        return h;
      }
    }
    CURL* h = api_.easy_init();
    if (!h) throw Error(Code::kResourceExhausted, "curl_easy_init failed");
    return h;
  }
  void give(CURL* h) {
    // NOTE: curl_easy_reset keeps the handle's live connections, DNS and
    // TLS session caches: the next transfer on it reuses the connection.
    api_.easy_reset(h);
    std::lock_guard<std::mutex> lock(pool_mu_);
    pool_.push_back(h);
  }

  struct Transfer {
    HttpTransport* self;
    Response* r;
    std::string* error_body;
    const Sink* sink;
    const ObjectInfo* pinned;
    std::uint64_t want_first;  // the first byte this response should start at
    std::uint64_t end;         // one past the last byte wanted (UINT64_MAX: to the end)
    std::uint64_t* received;   // bytes delivered to the sink so far (all attempts)
    std::uint64_t pos = 0;     // the object offset of the next body byte
    bool started = false;
    Status failure;            // set when the write callback aborts the transfer
    bool done_early = false;   // every byte wanted arrived; the rest of the body was refused
  };

  static std::size_t on_header(char* data, std::size_t size, std::size_t n, void* user) {
    auto* t = static_cast<Transfer*>(user);
    parse_header(std::string(data, size * n), t->r);
    return size * n;
  }

  static std::size_t on_body(char* data, std::size_t size, std::size_t n, void* user) {
    auto* t = static_cast<Transfer*>(user);
    const std::size_t bytes = size * n;
    const Response& r = *t->r;
    if (r.status >= 300 || r.status < 200) {
      if (t->error_body->size() < 65536) t->error_body->append(data, std::min<std::size_t>(bytes, 65536));
      return bytes;
    }
    t->self->counters_->bytes_fetched.fetch_add(bytes, std::memory_order_relaxed);
    if (!t->started) {
      t->started = true;
      // The response must be the bytes asked for, of the object pinned.
      std::uint64_t first = 0;
      std::optional<std::uint64_t> total;
      if (r.status == 206) {
        if (!r.range_first) {
          t->failure = Status(Code::kUnavailable, "a 206 response without Content-Range");
          return 0;
        }
        first = *r.range_first;
        total = r.range_total;
      } else {
        total = r.content_length;
      }
      if (first > t->want_first || (r.status == 200 && t->want_first > 0 && first != 0)) {
        t->failure = Status(Code::kUnavailable, "the server ignores Range (asked from byte " +
                                                    std::to_string(t->want_first) + ", got from " +
                                                    std::to_string(first) + ")");
        return 0;
      }
      if (t->pinned) {
        if (!t->pinned->etag.empty() && !r.etag.empty() && r.etag != t->pinned->etag) {
          t->failure = Status(Code::kUnavailable, "changed during the run: ETag " + t->pinned->etag + " at open, " +
                                                      r.etag + " now; the epoch's order came from the old index");
          return 0;
        }
        if (total && *total != t->pinned->size) {
          t->failure = Status(Code::kUnavailable, "changed during the run: " + std::to_string(t->pinned->size) +
                                                      " bytes at open, " + std::to_string(*total) +
                                                      " now; the epoch's order came from the old index");
          return 0;
        }
      }
      t->pos = first;
    }
    // Deliver the part of [pos, pos + bytes) inside [want_first, end).
    const std::uint64_t lo = std::max(t->pos, t->want_first);
    const std::uint64_t hi = std::min(t->pos + bytes, t->end);
    if (hi > lo) {
      Status st = (*t->sink)(reinterpret_cast<const std::uint8_t*>(data) + (lo - t->pos), static_cast<std::size_t>(hi - lo));
      if (!st.ok()) {
        t->failure = st;
        return 0;
      }
      *t->received += hi - lo;
      t->want_first = hi;
    }
    t->pos += bytes;
    if (t->want_first >= t->end && t->pos > t->end) {
      // NOTE: a server that answered 200 to a ranged request sends the whole
      // object; what is past the range is not needed.
      t->done_early = true;
      return 0;
    }
    return bytes;
  }

  static int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
    return static_cast<Transfer*>(user)->self->cancelled() ? 1 : 0;
  }

  // One request with its retries. head: HEAD (r gets the headers). Else GET
  // [off, off + len) into *sink, resuming after a failure from *received.
  Status perform(const std::string& url, bool head, std::uint64_t off, std::uint64_t len, const ObjectInfo* pinned,
                 const Sink* sink, Response* r, std::string* body, std::uint64_t* received) {
    const std::string target = request_url(url);
    const std::uint64_t end = len == kToEnd ? UINT64_MAX : off + len;
    std::string last_cause;
    for (int attempt = 0;; ++attempt) {
      if (cancelled()) return Status(Code::kCancelled, display(url) + ": cancelled");
      const std::uint64_t from = off + (received ? *received : 0);
      *r = Response{};
      body->clear();
      Transfer t{this, r, body, sink, pinned, from, end, received, 0, false, Status::Ok(), false};
      CURL* h = take();
      curl_slist* headers = nullptr;
      auto& a = api_;
      a.easy_setopt(h, CURLOPT_URL, target.c_str());
      a.easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
      a.easy_setopt(h, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
      a.easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
      a.easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(opt_.connect_timeout_ms));
      a.easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1024L);
      a.easy_setopt(h, CURLOPT_LOW_SPEED_TIME, static_cast<long>(opt_.low_speed_time_s));
      a.easy_setopt(h, CURLOPT_BUFFERSIZE, 512L * 1024);
      a.easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
      a.easy_setopt(h, CURLOPT_MAXREDIRS, 5L);
      a.easy_setopt(h, CURLOPT_HEADERFUNCTION, &HttpTransport::on_header);
      a.easy_setopt(h, CURLOPT_HEADERDATA, &t);
      a.easy_setopt(h, CURLOPT_WRITEFUNCTION, &HttpTransport::on_body);
      a.easy_setopt(h, CURLOPT_WRITEDATA, &t);
      a.easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
      a.easy_setopt(h, CURLOPT_XFERINFOFUNCTION, &HttpTransport::on_progress);
      a.easy_setopt(h, CURLOPT_XFERINFODATA, &t);
      std::string range;
      if (head) {
        a.easy_setopt(h, CURLOPT_NOBODY, 1L);
      } else if (from > 0 || (end != UINT64_MAX && !(pinned && end == pinned->size))) {
        // NOTE: the whole object is a plain GET; a part or a resumption a Range.
        range = std::to_string(from) + "-" + (end == UINT64_MAX ? std::string() : std::to_string(end - 1));
        a.easy_setopt(h, CURLOPT_RANGE, range.c_str());
      }
      if (pinned && !pinned->etag.empty() && !head) headers = a.slist_append(headers, ("If-Match: " + pinned->etag).c_str());
      if (s3_) {
        // NOTE: curl 7.88 signs the headers given here but does not add the
        // payload hash itself; S3 requires it (an empty body's SHA-256).
        headers = a.slist_append(
            headers, "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        if (!s3_->credentials.session_token.empty()) {
          headers = a.slist_append(headers, ("x-amz-security-token: " + s3_->credentials.session_token).c_str());
        }
        if (!sigv4_.empty()) {
          a.easy_setopt(h, CURLOPT_AWS_SIGV4, sigv4_.c_str());
          a.easy_setopt(h, CURLOPT_USERPWD, userpwd_.c_str());
        }
      }
      if (headers) a.easy_setopt(h, CURLOPT_HTTPHEADER, headers);
      counters_->requests.fetch_add(1, std::memory_order_relaxed);
      const CURLcode rc = a.easy_perform(h);
      curl_off_t ttfb_us = 0;
      if (a.easy_getinfo(h, CURLINFO_STARTTRANSFER_TIME_T, &ttfb_us) == CURLE_OK && ttfb_us > 0) {
        counters_->latency.add(static_cast<double>(ttfb_us) * 1e-3);
      }
      a.slist_free_all(headers);
      give(h);
      // The outcome.
      std::optional<RetryCause> cause;
      std::string what;
      if (rc == CURLE_WRITE_ERROR || rc == CURLE_ABORTED_BY_CALLBACK) {
        if (cancelled()) return Status(Code::kCancelled, display(url) + ": cancelled");
        if (t.done_early) return Status::Ok();
        if (t.failure.code() == Code::kUnavailable) return Status(Code::kUnavailable, display(url) + ": " + t.failure.message());
        return t.failure;
      }
      if (rc != CURLE_OK) {
        cause = retryable(rc);
        what = std::string(a.easy_strerror(rc));
        if (!cause) return Status(Code::kUnavailable, display(url) + ": " + what);
      } else if (r->status >= 400 || (r->status >= 300 && r->status < 400)) {
        const std::string s3_error = parse_s3_error(*body);
        what = "HTTP " + std::to_string(r->status) + (s3_error.empty() ? "" : " (" + s3_error + ")");
        if (s3_ && (r->status == 403 || r->status == 400) && !s3_->credentials.source.empty()) {
          what += "; credentials: " + s3_->credentials.source;
        }
        if (r->status == 412 && pinned) {
          return Status(Code::kUnavailable, display(url) + " changed during the run: HTTP 412 to If-Match " +
                                                pinned->etag + "; the epoch's order came from the old index");
        }
        cause = retryable_status(r->status);
        if (!cause) {
          const Code code = r->status == 404 ? Code::kNotFound : Code::kUnavailable;
          return Status(code, display(url) + ": " + what);
        }
      } else if (!head && end != UINT64_MAX && off + *received < end) {
        // The response ended early (a server closing cleanly mid-body).
        cause = RetryCause::kReset;
        what = "the response ended at byte " + std::to_string(off + *received) + " of " + std::to_string(end);
      } else {
        return Status::Ok();
      }
      if (attempt >= opt_.retries) {
        return Status(Code::kUnavailable, display(url) + ": " + what + " (after " + std::to_string(attempt + 1) + " attempts)");
      }
      count_retry(*cause);
      if (!backoff(attempt, r->retry_after_s)) return Status(Code::kCancelled, display(url) + ": cancelled");
    }
  }

  const CurlApi& api_;
  const std::optional<S3Config> s3_;
  std::string sigv4_, userpwd_;
  std::mutex pool_mu_;
  std::vector<CURL*> pool_;
};

}  // namespace

std::unique_ptr<Transport> make_http_transport(const TransferOptions& opt, RemoteCounters* counters) {
  return std::make_unique<HttpTransport>(opt, counters, std::nullopt);
}

std::unique_ptr<Transport> make_s3_transport(const TransferOptions& opt, RemoteCounters* counters) {
  return std::make_unique<HttpTransport>(opt, counters, resolve_s3_config());
}

}  // namespace stoker::detail
