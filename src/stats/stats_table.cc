// The stats table (stats_table.h) and its JSON codec. Adding a stat is one
// line here and a member of Stats; adding a group (an object of its own
// stats, like "remote") is a struct in stoker/stats.h, its fields_of<>()
// table here, and one group<>() line in the top table.
#include "stats/stats_table.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include "memory/memory_budget.h"
#include "util/util.h"

namespace stoker {
namespace detail {
namespace {

using ojson = nlohmann::ordered_json;
using nlohmann::json;

// One stat of struct S: its description and how it goes to and from JSON.
template <typename S>
struct Stat {
  StatInfo info;
  ojson (*get)(const S&);
  void (*set)(S&, const json&);
};

template <typename T>
struct MemberOf;
template <typename C, typename T>
struct MemberOf<T C::*> {
  using Owner = C;
  using Type = T;
};
template <auto M>
using OwnerOf = typename MemberOf<decltype(M)>::Owner;
template <auto M>
using TypeOf = typename MemberOf<decltype(M)>::Type;

// The stats of a group or row type, in JSON order (specialised below).
template <typename S>
const std::vector<Stat<S>>& fields_of();

template <typename S>
std::vector<StatInfo> describe(const std::vector<Stat<S>>& table) {
  std::vector<StatInfo> out;
  for (const Stat<S>& s : table) out.push_back(s.info);
  return out;
}

template <typename S>
ojson write(const S& s) {
  ojson j = ojson::object();
  for (const Stat<S>& f : fields_of<S>()) j[f.info.name] = f.get(s);
  return j;
}
template <typename S>
void read(const json& j, S* s) {
  for (const Stat<S>& f : fields_of<S>()) {
    if (const auto it = j.find(f.info.name); it != j.end()) f.set(*s, *it);
  }
}

// A value of type T from JSON; anything else leaves *out as it is.
template <typename T>
void read_value(const json& v, T* out) {
  if constexpr (std::is_same_v<T, bool>) {
    if (v.is_boolean()) *out = v.get<bool>();
  } else if constexpr (std::is_floating_point_v<T>) {
    if (v.is_number()) *out = v.get<T>();
  } else if constexpr (std::is_integral_v<T>) {
    if (v.is_number_unsigned()) {
      *out = static_cast<T>(std::min<std::uint64_t>(v.get<std::uint64_t>(), std::numeric_limits<T>::max()));
    } else if (v.is_number_integer()) {
      const std::int64_t x = v.get<std::int64_t>();
      *out = x < 0 && std::is_unsigned_v<T> ? 0 : static_cast<T>(x);
    } else if (v.is_number_float()) {  // a snapshot's counter written as a float (1e9)
      const double x = v.get<double>();
      *out = x <= 0 && std::is_unsigned_v<T>                           ? 0
             : x >= static_cast<double>(std::numeric_limits<T>::max()) ? std::numeric_limits<T>::max()
                                                                       : static_cast<T>(x);
    }
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (v.is_string()) *out = v.get<std::string>();
  } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
    if (!v.is_array()) return;
    out->clear();
    for (const auto& e : v) {
      if (e.is_string()) out->push_back(e.get<std::string>());
    }
  } else if constexpr (std::is_same_v<T, std::map<std::string, std::uint64_t>>) {
    if (!v.is_object()) return;
    out->clear();
    for (const auto& [k, n] : v.items()) read_value(n, &(*out)[k]);
  } else {
    static_assert(sizeof(T) == 0, "a stat of a type the codec does not know");
  }
}

// A stat held in member M (a number, text, a list of texts, counts by name).
template <auto M>
Stat<OwnerOf<M>> stat(const char* name, StatKind kind, const char* unit, const char* doc, const char* from) {
  using S = OwnerOf<M>;
  return {{name, kind, unit, doc, from, {}},
          [](const S& s) -> ojson { return s.*M; },
          [](S& s, const json& v) { read_value(v, &(s.*M)); }};
}

// A group: an object of its own stats (fields_of<G>), null while the part is
// not in use when G has an `active` flag (it is then set by reading one).
template <auto M>
Stat<OwnerOf<M>> group(const char* name, const char* doc, const char* from) {
  using S = OwnerOf<M>;
  using G = TypeOf<M>;
  return {{name, StatKind::kGroup, "", doc, from, describe(fields_of<G>())},
          [](const S& s) -> ojson {
            if constexpr (requires(const G& g) { g.active; }) {
              if (!(s.*M).active) return nullptr;
            }
            return write(s.*M);
          },
          [](S& s, const json& v) {
            G g;
            if (v.is_object()) {
              if constexpr (requires(G & x) { x.active; }) g.active = true;
              read(v, &g);
            }
            s.*M = std::move(g);
          }};
}

// Rows: a list of objects of the row type's stats.
template <auto M>
Stat<OwnerOf<M>> rows(const char* name, const char* doc, const char* from) {
  using S = OwnerOf<M>;
  using R = typename TypeOf<M>::value_type;
  return {{name, StatKind::kRows, "", doc, from, describe(fields_of<R>())},
          [](const S& s) -> ojson {
            ojson a = ojson::array();
            for (const R& r : s.*M) a.push_back(write(r));
            return a;
          },
          [](S& s, const json& v) {
            if (!v.is_array()) return;
            (s.*M).clear();
            for (const auto& e : v) {
              R r;
              if (e.is_object()) read(e, &r);
              (s.*M).push_back(std::move(r));
            }
          }};
}

// A stat the Python stoker.Loader adds to the dict (none in Stats): listed
// for its doc; the codec skips it.
Stat<Stats> python_stat(const char* name, StatKind kind, const char* unit, const char* doc) {
  return {{name, kind, unit, doc, "stoker.Loader (Python)", {}}, nullptr, nullptr};
}

constexpr StatKind kCounter = StatKind::kCounter, kGauge = StatKind::kGauge, kSeconds = StatKind::kSeconds,
                   kBytes = StatKind::kBytes, kText = StatKind::kText, kTextList = StatKind::kTextList,
                   kCounts = StatKind::kCounts;

constexpr const char* kWorkers = "workers (stage counters)";
constexpr const char* kConsumer = "consumer (next())";
constexpr const char* kTuner = "scheduler (autotune)";
constexpr const char* kPool = "batch buffer pool";
constexpr const char* kCacheService = "cache service";
constexpr const char* kSource = "source (io_stats)";
constexpr const char* kCorrupt = "corrupt-sample log";
constexpr const char* kThreads = "threads' exception catchers";
constexpr const char* kBoxes = "boxes fields";
constexpr const char* kMixture = "mixture";
constexpr const char* kRemote = "remote shards (io_stats)";
constexpr const char* kVolume = "volume fields";
constexpr const char* kMemory = "the memory budget (src/memory/)";

template <>
const std::vector<Stat<Stats::Thread>>& fields_of<Stats::Thread>() {
  using T = Stats::Thread;
  static const std::vector<Stat<T>> t = {
      stat<&T::read_s>("read_s", kSeconds, "s", "this worker's busy seconds reading record bytes", kWorkers),
      stat<&T::decode_s>("decode_s", kSeconds, "s", "this worker's busy seconds decoding", kWorkers),
      stat<&T::transform_s>("transform_s", kSeconds, "s", "this worker's busy seconds transforming", kWorkers),
      stat<&T::python_s>("python_s", kSeconds, "s", "this worker's seconds in the caller's (Python) stages", kWorkers),
      stat<&T::samples>("samples", kCounter, "samples", "samples this worker wrote into batches", kWorkers),
  };
  return t;
}

template <>
const std::vector<Stat<Stats::MixturePart>>& fields_of<Stats::MixturePart>() {
  using M = Stats::MixturePart;
  static const std::vector<Stat<M>> t = {
      stat<&M::name>("name", kText, "", "the source's name in the mixture", kMixture),
      stat<&M::weight_share>("weight_share", kGauge, "", "its weight's share of the weights", kMixture),
      stat<&M::per_epoch>("per_epoch", kCounter, "samples", "its draws per epoch", kMixture),
      stat<&M::drawn>("drawn", kCounter, "samples", "its samples in the batches handed out so far (padding included)",
                      kMixture),
  };
  return t;
}

template <>
const std::vector<Stat<Stats::Remote>>& fields_of<Stats::Remote>() {
  using R = Stats::Remote;
  static const std::vector<Stat<R>> t = {
      stat<&R::bytes_fetched>("bytes_fetched", kBytes, "bytes",
                              "response bodies received (sidecars, retried parts and stray reads included)", kRemote),
      stat<&R::requests>("requests", kCounter, "requests", "requests sent, every attempt (commands run, for pipe:)",
                         kRemote),
      stat<&R::retries>("retries", kCounts, "requests",
                        "retried requests by cause: timeout, connect, reset, http_429, http_5xx, pipe", kRemote),
      stat<&R::fetch_wait_s>("fetch_wait_s", kSeconds, "s",
                             "worker seconds spent waiting for shard bytes not yet arrived", kRemote),
      stat<&R::latency_p50_ms>("latency_p50_ms", kGauge, "ms", "median time to a response's first byte", kRemote),
      stat<&R::latency_p99_ms>("latency_p99_ms", kGauge, "ms", "99th percentile of the time to a response's first byte",
                               kRemote),
      stat<&R::prefetch_depth>("prefetch_depth", kGauge, "shards", "shards fetched ahead of those in use (autotuned)",
                               kRemote),
      stat<&R::shard_fetch_s>("shard_fetch_s", kSeconds, "s", "a shard's fetch time (moving average; 0 until measured)",
                              kRemote),
      stat<&R::shard_consume_s>("shard_consume_s", kSeconds, "s",
                                "the time the loader takes to read through a shard (moving average)", kRemote),
      stat<&R::fetched_ahead_bytes>("fetched_ahead_bytes", kBytes, "bytes",
                                    "of bytes_fetched, those fetched for the next epoch while the current one ended",
                                    kRemote),
      stat<&R::prefetch_log>("prefetch_log", kTextList, "",
                             "each prefetch depth change with the measurements behind it", kRemote),
      stat<&R::resident_bytes>("resident_bytes", kBytes, "bytes", "shard bytes held in memory now", kRemote),
      stat<&R::stray_reads>("stray_reads", kCounter, "reads",
                            "reads outside the epoch's plan (one ranged request each)", kRemote),
      stat<&R::index>("index", kText, "",
                      "how the shards' indexes were had: sidecar, cache, scan, or several joined by '+'", kRemote),
      stat<&R::index_scanned_bytes>("index_scanned_bytes", kBytes, "bytes", "bytes read through to index shards",
                                    kRemote),
      stat<&R::cache_dir_hits>("cache_dir_hits", kCounter, "shards", "shards found in cache_dir", kRemote),
      stat<&R::cache_dir_misses>("cache_dir_misses", kCounter, "shards", "shards fetched into cache_dir", kRemote),
      stat<&R::cache_dir_bytes_written>("cache_dir_bytes_written", kBytes, "bytes", "bytes written into cache_dir",
                                        kRemote),
      stat<&R::cache_dir_evictions>("cache_dir_evictions", kCounter, "entries",
                                    "cache_dir entries evicted to stay under cache_limit", kRemote),
      stat<&R::cache_dir_bypass>("cache_dir_bypass", kCounter, "shards", "shards that bypassed cache_dir (no room)",
                                 kRemote),
  };
  return t;
}

template <>
const std::vector<Stat<Stats::Volume>>& fields_of<Stats::Volume>() {
  using V = Stats::Volume;
  static const std::vector<Stat<V>> t = {
      stat<&V::num_samples>("num_samples", kGauge, "patches", "patches per volume load", kVolume),
      stat<&V::patches>("patches", kCounter, "patches", "patches made", kVolume),
      stat<&V::loads>("loads", kCounter, "volumes", "volume loads (records made)", kVolume),
      stat<&V::bytes_read>("bytes_read", kBytes, "bytes",
                           "voxel bytes read from files (patches cut from memory read none)", kVolume),
      stat<&V::bytes_per_patch>("bytes_per_patch", kGauge, "bytes", "bytes_read / patches", kVolume),
      stat<&V::inflate_bytes>("inflate_bytes", kBytes, "bytes", ".nii.gz bytes inflated", kVolume),
      stat<&V::inflate_s>("inflate_s", kSeconds, "s", "worker seconds spent inflating", kVolume),
      stat<&V::cache_hits>("cache_hits", kCounter, "loads", "volume loads served from the volume cache", kVolume),
      stat<&V::cache_misses>("cache_misses", kCounter, "loads", "volume loads inflated or read whole", kVolume),
      stat<&V::cache_entries>("cache_entries", kGauge, "entries", "volumes and label indexes kept", kVolume),
      stat<&V::cache_bytes>("cache_bytes", kBytes, "bytes", "bytes the volume cache holds", kVolume),
      stat<&V::cache_budget_bytes>("cache_budget_bytes", kBytes, "bytes", "the volume cache's budget", kVolume),
      stat<&V::label_index_builds>("label_index_builds", kCounter, "indexes", "foreground indexes built", kVolume),
      stat<&V::posneg_one_class>("posneg_one_class", kCounter, "patches",
                                 "RandCropByPosNegLabel patches whose class was empty (the other used)", kVolume),
      stat<&V::resample_s>("resample_s", kSeconds, "s", "worker seconds resampling volumes (Spacing)", kVolume),
  };
  return t;
}

template <>
const std::vector<Stat<Stats::Memory>>& fields_of<Stats::Memory>() {
  using M = Stats::Memory;
  // NOTE: the accounts' names from their one table (memory_account_name).
  static const std::string accounts = [] {
    std::string doc = "bytes per account:";
    for (std::size_t k = 0; k < detail::kMemoryAccounts; ++k) {
      doc += std::string(k ? ", " : " ") + detail::memory_account_name(static_cast<detail::MemoryAccount>(k));
    }
    return doc;
  }();
  static const std::vector<Stat<M>> t = {
      stat<&M::budget>("budget", kGauge, "bytes",
                       "the loader's memory budget (memory_budget, or the process's: half of the available memory)",
                       kMemory),
      stat<&M::scope>("scope", kText, "",
                      "\"loader\": memory_budget was given, the loader's own; \"process\": left at 0, shared by every "
                      "such loader of the process",
                      kMemory),
      stat<&M::process_held>("process_held", kGauge, "bytes",
                             "scope \"process\": what every loader sharing the budget holds or reserves now", kMemory),
      stat<&M::used>("used", kGauge, "bytes", "bytes the accounts hold now", kMemory),
      stat<&M::peak>("peak", kGauge, "bytes", "the most the accounts held at once", kMemory),
      stat<&M::over_bytes>("over_bytes", kGauge, "bytes",
                           "the most used went above budget: what the loader needs to run at all, on a smaller budget",
                           kMemory),
      stat<&M::accounts>("accounts", kCounts, "bytes", accounts.c_str(), kMemory),
      stat<&M::reserved>("reserved", kCounts, "bytes",
                         "bytes reserved per account, kept from the others (remote_shards: its plan's peak)", kMemory),
  };
  return t;
}

template <>
const std::vector<Stat<Stats>>& fields_of<Stats>() {
  using S = Stats;
  static const std::vector<Stat<S>> t = {
      // The workers and the consumer.
      stat<&S::read_s>("read_s", kSeconds, "s", "busy seconds reading record bytes, summed over workers", kWorkers),
      stat<&S::decode_s>("decode_s", kSeconds, "s", "busy seconds parsing headers and decoding, summed over workers",
                         kWorkers),
      stat<&S::transform_s>("transform_s", kSeconds, "s",
                            "busy seconds transforming and writing into the batch, summed over workers", kWorkers),
      stat<&S::python_s>("python_s", kSeconds, "s",
                         "seconds in the caller's stages (Python transforms, collate), GIL wait included", kWorkers),
      stat<&S::samples>("samples", kCounter, "samples", "samples written into batches", kWorkers),
      stat<&S::bytes_read>("bytes_read", kBytes, "bytes", "encoded bytes read", kWorkers),
      stat<&S::batches>("batches", kCounter, "batches", "batches handed to the consumer", kConsumer),
      stat<&S::consumer_wait_s>("consumer_wait_s", kSeconds, "s",
                                "seconds the consumer spent blocked in next(): the ground truth of input-bound",
                                kConsumer),
      stat<&S::consumer_active_s>("consumer_active_s", kSeconds, "s",
                                  "seconds from the consumer's first next() to the last batch handed out", kConsumer),
      stat<&S::time_to_first_batch_s>("time_to_first_batch_s", kSeconds, "s",
                                      "from the loader's creation to its first batch in hand (-1 before it)",
                                      kConsumer),
      stat<&S::wall_s>("wall_s", kSeconds, "s", "seconds since the loader was created", kConsumer),
      stat<&S::threads>("threads", kGauge, "threads", "workers in use now", kTuner),
      stat<&S::threads_max>("threads_max", kGauge, "threads", "workers started", kTuner),
      stat<&S::prefetch>("prefetch", kGauge, "batches", "batches made ahead now (the ring's depth)", kTuner),
      stat<&S::autotune>("autotune", kText, "", "threads=0 / prefetch=0: tuning or settled (off when both are fixed)",
                         kTuner),
      // The batch buffers.
      stat<&S::batch_buffers>("batch_buffers", kCounter, "buffers",
                              "batch buffers allocated: the most ever in use at once", kPool),
      stat<&S::batch_buffer_bytes>("batch_buffer_bytes", kBytes, "bytes", "the batch buffers' memory", kPool),
      stat<&S::batch_buffers_in_use>("batch_buffers_in_use", kGauge, "buffers",
                                     "buffers in the ring or held by the consumer now", kPool),
      stat<&S::batch_buffers_held>("batch_buffers_held", kGauge, "buffers",
                                   "buffers handed out and not yet released, now", kPool),
      stat<&S::batch_buffers_held_peak>("batch_buffers_held_peak", kGauge, "buffers",
                                        "the most buffers the consumer held at once", kPool),
      stat<&S::ring_depth_max>("ring_depth_max", kGauge, "batches", "the deepest the ring may get", kTuner),
      // The cache service (cache/cache_service.h) and the sources' file pool.
      stat<&S::cache_hits>("cache_hits", kCounter, "lookups", "cache lookups that found the sample", kCacheService),
      stat<&S::cache_misses>("cache_misses", kCounter, "lookups", "cache lookups that did not", kCacheService),
      stat<&S::cache_records>("cache_records", kGauge, "records", "records the cache holds", kCacheService),
      stat<&S::cache_bytes>("cache_bytes", kBytes, "bytes", "bytes the cache holds", kCacheService),
      stat<&S::cache_holes_bytes>("cache_holes_bytes", kBytes, "bytes",
                                  "memory still held by entries replaced by their rewritten form", kCacheService),
      stat<&S::cache_budget_bytes>("cache_budget_bytes", kBytes, "bytes",
                                   "the cache's budget (cache_bytes + cache_holes_bytes stay under it)", kCacheService),
      stat<&S::shared_cache>("shared_cache", kText, "",
                             "which cache and why: shared: FILE (created or attached; node-shared: the ranks on the node, how they were counted), or off: WHY (a cache of this process's own)",
                             kCacheService),
      stat<&S::shared_cache_entries>("shared_cache_entries", kGauge, "records",
                                     "records in the shared cache, stored by any process on the node", kCacheService),
      stat<&S::shared_cache_bytes>("shared_cache_bytes", kBytes, "bytes",
                                   "the shared cache's bytes in use, node-wide (entries are final; holes only from a writer killed mid-write or a record refused)",
                                   kCacheService),
      stat<&S::shared_cache_hits>("shared_cache_hits", kCounter, "lookups",
                                  "this process's lookups that found their sample in the shared cache", kCacheService),
      stat<&S::shared_cache_filled>("shared_cache_filled", kCounter, "records",
                                    "records this process stored in the shared cache", kCacheService),
      stat<&S::shard_files_open>("shard_files_open", kGauge, "files",
                                 "local tar shards' file descriptors open now (a bounded pool)", kSource),
      stat<&S::shard_file_opens>("shard_file_opens", kCounter, "opens",
                                 "local tar shard opens so far, indexing included", kSource),
      stat<&S::cache_preload>("cache_preload", kText, "",
                              "cache=\"ram\" preload: off, loading, done, budget full, or error: ...", kCacheService),
      stat<&S::cache_preload_records>("cache_preload_records", kCounter, "records", "records the preload stored",
                                      kCacheService),
      stat<&S::cache_preload_bytes>("cache_preload_bytes", kBytes, "bytes", "bytes the preload stored", kCacheService),
      stat<&S::cache_preload_s>("cache_preload_s", kSeconds, "s", "the preload's wall time so far (or in all)",
                                kCacheService),
      stat<&S::cache_mode>("cache_mode", kText, "", "the cache mode in use: mmap, ram or decoded", kCacheService),
      stat<&S::cache_auto>("cache_auto", kText, "", "with cache=\"auto\", why it chose the mode (empty otherwise)",
                           kCacheService),
      stat<&S::cache_rewrite>("cache_rewrite", kText, "", "cache=\"ram\" rewrite: off, rewriting, done, or error: ...",
                              kCacheService),
      stat<&S::cache_rewritten>("cache_rewritten", kCounter, "records", "records the rewrite rewrote", kCacheService),
      stat<&S::cache_rewrite_on_read>("cache_rewrite_on_read", kCounter, "records",
                                      "of them, rewritten as a worker was about to decode them", kCacheService),
      stat<&S::cache_rewrite_settled>("cache_rewrite_settled", kCounter, "records",
                                      "records the rewrite is done with (rewritten, or needing none)", kCacheService),
      stat<&S::cache_rewrite_bytes_before>("cache_rewrite_bytes_before", kBytes, "bytes",
                                           "rewritten records' image bytes before", kCacheService),
      stat<&S::cache_rewrite_bytes_after>("cache_rewrite_bytes_after", kBytes, "bytes",
                                          "rewritten records' image bytes after", kCacheService),
      stat<&S::cache_rewrite_cpu_s>("cache_rewrite_cpu_s", kSeconds, "s", "CPU seconds the rewrite took",
                                    kCacheService),
      // Errors.
      stat<&S::corrupt>("corrupt", kCounter, "samples", "corrupt or unreadable samples", kCorrupt),
      stat<&S::corrupt_by_reason>("corrupt_by_reason", kCounts, "samples", "corrupt samples by reason (code name)",
                                  kCorrupt),
      stat<&S::thread_errors>("thread_errors", kCounts, "exceptions",
                              "exceptions caught on stoker's threads outside a sample, by thread kind "
                              "(worker, preload, rewrite, fetcher)",
                              kThreads),
      stat<&S::boxes_dropped>("boxes_dropped", kCounter, "boxes",
                              "boxes dropped because the geometry left them under 1 px wide or high", kBoxes),
      stat<&S::boxes_truncated>("boxes_truncated", kCounter, "boxes", "boxes past a field's max_boxes", kBoxes),
      stat<&S::corrupt_examples>("corrupt_examples", kTextList, "",
                                 "the first corrupt samples' messages, each naming the file and the reason", kCorrupt),
      // Groups.
      rows<&S::per_thread>("per_thread", "busy seconds and samples per worker thread (index = worker id)", kWorkers),
      rows<&S::mixture>(
          "mixture", "a mixture's sources: weight share, draws per epoch, samples drawn (empty otherwise)", kMixture),
      group<&S::remote>("remote", "remote shards' transfers (null for local data)", kRemote),
      group<&S::volume>("volume", "3D volume reads and the volume cache (null for other schemas)", kVolume),
      group<&S::memory>("memory", "the memory budget's accounts (src/memory/README.md)", kMemory),
      stat<&S::autotune_log>("autotune_log", kTextList, "", "each tuner change with the measurements behind it",
                             kTuner),
      // Added by the Python stoker.Loader.
      python_stat("h2d_s", kSeconds, "s",
                  "device= / pin_memory=: the consumer's seconds staging batches and starting their copies"),
      python_stat("h2d_bytes", kBytes, "bytes", "device= / pin_memory=: bytes copied to the device"),
      python_stat("python_transforms", kTextList, "",
                  "the transforms that run as Python (empty when all are stoker's)"),
  };
  return t;
}

}  // namespace

const char* stat_kind_name(StatKind k) {
  switch (k) {
    case StatKind::kCounter:
      return "counter";
    case StatKind::kGauge:
      return "gauge";
    case StatKind::kSeconds:
      return "seconds";
    case StatKind::kBytes:
      return "bytes";
    case StatKind::kText:
      return "string";
    case StatKind::kTextList:
      return "list of strings";
    case StatKind::kCounts:
      return "counts by name";
    case StatKind::kGroup:
      return "group";
    case StatKind::kRows:
      return "list of groups";
  }
  return "?";
}

const std::vector<StatInfo>& stats_table() {
  static const std::vector<StatInfo> t = describe(fields_of<Stats>());
  return t;
}

ojson stats_to_json(const Stats& s) {
  ojson j = ojson::object();
  for (const Stat<Stats>& f : fields_of<Stats>()) {
    if (f.get) j[f.info.name] = f.get(s);
  }
  return j;
}

Stats stats_from_json(const json& j) {
  Stats s;
  if (!j.is_object()) return s;
  for (const Stat<Stats>& f : fields_of<Stats>()) {
    if (!f.set) continue;
    if (const auto it = j.find(f.info.name); it != j.end()) f.set(s, *it);
  }
  return s;
}

}  // namespace detail

// NOTE: bytes that are not UTF-8 (a member name in Latin-1, in a corrupt
// sample's message) are written as U+FFFD rather than failing the snapshot.
std::string Stats::to_json() const {
  return detail::stats_to_json(*this).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Stats Stats::from_json(const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    detail::invalid(std::string("stats: not JSON: ") + e.what());
  }
  if (!j.is_object()) detail::invalid("stats: expected a JSON object, got " + j.dump().substr(0, 80));
  return detail::stats_from_json(j);
}

}  // namespace stoker
