// Opening shards that live elsewhere (http(s)://, s3://, pipe:): expanding
// the specs, pinning each object's identity, getting each shard's index.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <thread>

#include "source/file_reader.h"
#include "source/manifest.h"
#include "source/remote/node_cache.h"
#include "source/remote/remote_bytes.h"
#include "source/remote/transport.h"
#include "source/shard_index.h"
#include "source/shard_source.h"
#include "util/thread.h"
#include "util/util.h"

namespace stoker::detail {
namespace {

struct Opened {
  std::string url;
  std::string name;     // the URL without user:password@: messages, cache keys, index file names
  ObjectInfo info;
  bool listed = false;  // info came from a listing
  ShardIndex index;
  std::string how;      // "sidecar", "cache", "scan"
};

bool has_glob(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

// Accepts an index for the object: built for these labels, of an object of
// this size (where the object was packed, its mtime, does not matter here).
bool index_matches(const ShardIndex& index, const ObjectInfo& info, bool size_known, const ShardOptions& opt) {
  return index.labels == opt.labels && (!size_known || index.shard_size == info.size);
}

// The index of one shard: from cache_dir or index_dir, else its `.idx`
// sidecar, else by reading the shard through (a scan).
Status index_shard(Transport* t, NodeCache* cache, RemoteCounters* counters, const ShardOptions& opt, Opened* o) {
  const bool pipe = remote_scheme(o->url) == "pipe";
  // The identity: from the listing, or asked (no size for a command's output).
  if (!pipe && !o->listed) {
    Status st = t->stat(o->url, &o->info);
    if (!st.ok()) return st;
  }
  auto try_text = [&](const std::string& text) {
    ShardIndex idx;
    if (!parse_index(text, &idx).ok() || !index_matches(idx, o->info, !pipe, opt)) return false;
    o->index = std::move(idx);
    if (pipe) o->info.size = o->index.shard_size;
    return true;
  };
  std::string text;
  if (cache && cache->load_index(o->name, o->info.etag, &text) && try_text(text)) {
    o->how = "cache";
    return Status::Ok();
  }
  if (!opt.index_dir.empty()) {
    std::vector<std::uint8_t> bytes;
    if (read_file(index_path(o->name, opt.index_dir), &bytes).ok() && try_text(std::string(bytes.begin(), bytes.end()))) {
      o->how = "cache";
      return Status::Ok();
    }
  }
  if (!pipe) {
    Status st = t->get_small(o->url + ".idx", &text);
    if (st.ok() && try_text(text)) {
      o->how = "sidecar";
      if (cache) cache->store_index(o->name, o->info.etag, text);
      return Status::Ok();
    }
    if (!st.ok() && st.code() != Code::kNotFound) return st;
  }
  // The scan: the whole shard through memory, indexed as a local one is.
  std::vector<std::uint8_t> data;
  if (!pipe) data.reserve(static_cast<std::size_t>(o->info.size));
  Status st = t->get(o->url, 0, Transport::kToEnd, pipe ? nullptr : &o->info, [&data](const std::uint8_t* p, std::size_t n) {
    data.insert(data.end(), p, p + n);
    return Status::Ok();
  });
  if (!st.ok()) return st;
  counters->index_scanned_bytes.fetch_add(data.size(), std::memory_order_relaxed);
  if (pipe) o->info.size = data.size();
  auto read_at = [&data](std::uint8_t* buf, std::size_t n, std::uint64_t off) -> long long {
    if (off >= data.size()) return 0;
    const std::size_t k = std::min<std::size_t>(n, data.size() - static_cast<std::size_t>(off));
    std::memcpy(buf, data.data() + off, k);
    return static_cast<long long>(k);
  };
  st = build_index(read_at, data.size(), o->name, opt.labels, &o->index);
  if (!st.ok()) return st;
  o->index.shard_size = data.size();
  o->how = "scan";
  const std::string serialized = serialize_index(o->index);
  if (cache) {
    cache->store_index(o->name, o->info.etag, serialized);
    // NOTE: the bytes are here already: they become the cache entry, so the
    // first epoch reads them from disk instead of fetching them again.
    std::unique_ptr<NodeCache::Entry> e;
    if (cache->open(o->name, o->info.etag, o->info.size, [t] { return t->cancelled(); }, &e).ok() &&
        e->state() == NodeCache::Entry::State::kDownload) {
      std::size_t done = static_cast<std::size_t>(e->resume_from());
      bool ok = true;
      while (ok && done < data.size()) {
        const ssize_t w = ::pwrite(e->fd(), data.data() + done, data.size() - done, static_cast<off_t>(done));
        if (w < 0 && errno == EINTR) continue;
        ok = w > 0;
        if (ok) done += static_cast<std::size_t>(w);
      }
      if (ok) (void)e->commit();
    }
  } else if (!opt.index_dir.empty()) {
    (void)write_file_atomically(index_path(o->name, opt.index_dir), serialized);
  }
  return Status::Ok();
}

}  // namespace

std::unique_ptr<Source> open_remote_shards(const std::vector<std::string>& specs, const ShardOptions& opt,
                                           const RemoteOptions& remote) {
  const std::string scheme = remote_scheme(specs.front());
  for (const auto& s : specs) {
    const std::string other = remote_scheme(s);
    const bool same = other == scheme || (other.rfind("http", 0) == 0 && scheme.rfind("http", 0) == 0);
    if (!same) {
      throw Error(Code::kInvalidArgument, "shards: '" + specs.front() + "' and '" + s + "' are of different kinds (" +
                                              scheme + ", " + other + "); one source reads one kind");
    }
  }
  if (remote.connections < 1) throw Error(Code::kInvalidArgument, "remote connections must be >= 1");
  TransferOptions topt;
  topt.retries = remote.retries;
  auto counters = std::make_shared<RemoteCounters>();
  std::shared_ptr<Transport> transport = scheme == "s3"     ? make_s3_transport(topt, counters.get())
                                         : scheme == "pipe" ? make_pipe_transport(topt, counters.get())
                                                            : make_http_transport(topt, counters.get());
  std::shared_ptr<NodeCache> cache;
  if (!remote.cache_dir.empty()) cache = std::make_shared<NodeCache>(remote.cache_dir, remote.cache_limit);

  // A data set's manifest: the one URL named, or `<stem>.manifest` beside
  // the one brace pattern (one request; a 404 opens as without one).
  if (scheme != "pipe" && specs.size() == 1 &&
      (ends_with(specs[0], kManifestSuffix) || (specs[0].find('{') != std::string::npos && !has_glob(specs[0])))) {
    const bool named = ends_with(specs[0], kManifestSuffix);
    const std::string murl = named ? specs[0] : manifest_beside(specs[0]);
    const std::string mname = redact_url(murl);
    std::string text;
    Status st = transport->get_small(murl, &text);
    if (!st.ok() && (named || st.code() != Code::kNotFound)) {
      throw Error(Status(st.code(), "manifest '" + mname + "': " + st.message()));
    }
    if (st.ok()) {
      auto m = std::make_shared<Manifest>();
      if (Status p = parse_manifest(text, mname, m.get()); !p.ok()) throw Error(p);
      std::vector<std::size_t> rows;
      if (named) {
        for (std::size_t r = 0; r < m->shards.size(); ++r) rows.push_back(r);
      } else if (Status p = manifest_rows(*m, murl, expand_braces(specs[0]), &rows); !p.ok()) {
        throw Error(Status(p.code(), redact_url(p.message())));
      }
      // NOTE: the shards' URLs and shown names are the manifest's rows, made
      // when asked for: nothing per shard but its row (and its state in the store).
      std::vector<std::uint32_t> rows32;
      std::vector<std::uint64_t> counts, sizes;
      if (!named) rows32.reserve(rows.size());
      counts.reserve(rows.size());
      sizes.reserve(rows.size());
      for (std::size_t r : rows) {
        if (!named) rows32.push_back(static_cast<std::uint32_t>(r));
        counts.push_back(m->shards[r].records);
        sizes.push_back(m->shards[r].bytes);
      }
      const std::shared_ptr<const Manifest> table = std::move(m);
      ShardNames urls(table, murl, rows32), names(table, mname, std::move(rows32));
      RemoteBytesOptions bopt;
      bopt.connections = remote.connections;
      bopt.memory_budget = remote.memory_budget;
      bopt.index_how = "manifest";
      auto bytes = std::make_unique<RemoteShardBytes>(std::move(urls), std::vector<ObjectInfo>{}, transport, counters,
                                                      cache, bopt);
      // NOTE: the loader is the store's own (it dies with it), so it may read the store's URLs and sizes.
      const RemoteShardBytes* store = bytes.get();
      bytes->set_index_loader([store, transport, cache, counters, opt, mname](std::uint32_t s, ShardIndex* out) {
        Opened o{store->url(s), redact_url(store->url(s)), store->info(s), true, {}, ""};
        Status ist;
        try {
          ist = index_shard(transport.get(), cache.get(), counters.get(), opt, &o);
        } catch (...) {
          ist = Status(Code::kUnavailable, exception_status("indexing shard " + o.name).message());
        }
        if (!ist.ok()) {
          return Status(Code::kUnavailable, "manifest '" + mname + "': shard '" + o.name + "': " + ist.message());
        }
        *out = std::move(o.index);
        return Status::Ok();
      });
      return make_manifest_shard_source(std::move(names), counts, std::move(sizes), mname, opt.index_records,
                                        std::move(bytes), opt.plan_walk);
    }
  }

  // Expansion: braces everywhere (inside a pipe: command too, as WebDataset
  // does), then globs by listing (S3 only).
  std::vector<Opened> shards;
  for (const auto& spec : specs) {
    for (auto& u : expand_braces(spec)) {
      if (scheme != "pipe" && has_glob(u)) {
        std::vector<std::pair<std::string, ObjectInfo>> found;
        Status st = transport->list(u, &found);
        if (!st.ok()) throw Error(st);
        if (found.empty()) throw Error(Code::kNotFound, "shard pattern '" + redact_url(u) + "' matches no object");
        for (auto& [url, info] : found) shards.push_back({url, redact_url(url), info, true, {}, ""});
      } else {
        shards.push_back({u, redact_url(u), {}, false, {}, ""});
      }
    }
  }
  if (shards.empty()) throw Error(Code::kInvalidArgument, "no shards given");

  // Identity and index of every shard, `connections` at a time (this thread
  // and helper openers).
  std::atomic<std::size_t> next{0};
  std::mutex mu;
  Status first_error;
  auto fail = [&](Status st) {
    std::lock_guard<std::mutex> lock(mu);
    if (first_error.ok()) first_error = std::move(st);
    next = shards.size();
  };
  auto work = [&] {
    for (;;) {
      const std::size_t i = next.fetch_add(1);
      if (i >= shards.size()) return;
      Status st;
      // NOTE: an exception while opening a shard (out of memory for its
      // index, a bug) is an error of the open like a network one: kUnavailable
      // (a ConnectionError in Python), raised by this function on the
      // caller's thread once every opener has stopped.
      try {
        injection_point(ThreadSite::kOpener, static_cast<std::int64_t>(i));
        st = index_shard(transport.get(), cache.get(), counters.get(), opt, &shards[i]);
      } catch (...) {
        const Status e = exception_status("opening shard " + shards[i].name);
        st = Status(Code::kUnavailable, e.message());
      }
      if (!st.ok()) fail(std::move(st));
    }
  };
  std::vector<std::thread> threads;
  const std::size_t n = std::min<std::size_t>(shards.size(), static_cast<std::size_t>(remote.connections));
  try {
    for (std::size_t i = 1; i < n; ++i) {
      threads.push_back(spawn("stoker-open", Priority::kNormal, work, [&](const Status& st) {
        fail(Status(Code::kUnavailable, st.message()));
      }));
    }
  } catch (...) {  // no more threads could be started: those that were (and this one) do the work
  }
  try {
    work();
  } catch (...) {
    fail(Status(Code::kUnavailable, exception_status("opening shards").message()));
  }
  for (auto& t : threads) t.join();
  if (!first_error.ok()) throw Error(first_error);

  std::size_t scanned = 0;
  std::vector<std::string> hows;
  for (const auto& o : shards) {
    scanned += o.how == "scan";
    if (std::find(hows.begin(), hows.end(), o.how) == hows.end()) hows.push_back(o.how);
  }
  std::sort(hows.begin(), hows.end());
  std::string how;
  for (const auto& h : hows) how += (how.empty() ? "" : "+") + h;
  if (scanned > 0 && scheme != "pipe") {
    std::fprintf(stderr,
                 "stoker: %zu of %zu shards have no usable .idx sidecar: each was read through before the first batch "
                 "(%.1f MB); `stoker pack` writes sidecars next to the shards: upload them too\n",
                 scanned, shards.size(), static_cast<double>(counters->index_scanned_bytes.load()) / 1e6);
  }

  std::vector<std::string> urls;
  std::vector<ObjectInfo> infos;
  std::vector<ShardIndex> indexes;
  for (auto& o : shards) {
    urls.push_back(o.url);
    infos.push_back(o.info);
    indexes.push_back(std::move(o.index));
  }
  RemoteBytesOptions bopt;
  bopt.connections = remote.connections;
  bopt.memory_budget = remote.memory_budget;  // 0: the budget's (use_memory(), else its own)
  bopt.index_how = how;
  std::vector<std::string> names;  // NOTE: what keys, messages and describe() show: no user:password@
  for (const auto& u : urls) names.push_back(redact_url(u));
  auto bytes = std::make_unique<RemoteShardBytes>(std::move(urls), std::move(infos), transport, counters, cache, bopt);
  return make_shard_source(std::move(names), std::move(indexes), std::move(bytes), opt.plan_walk);
}

}  // namespace stoker::detail
