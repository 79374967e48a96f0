// A snapshot of a loader's counters since it was created. Every stat is
// declared once in src/stats/stats_table.cc (name, type, unit, doc), which
// writes and reads the JSON; docs/stats.md is its reference.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace stoker {

struct Stats {
  // Busy seconds summed over worker threads, per stage.
  double read_s = 0;       // reading record bytes
  double decode_s = 0;     // header parsing and decoding
  double transform_s = 0;  // crop/resize/flip/normalize and the write into the batch
  // In the caller's stage (LoaderOptions::hook: Python transforms, target_transform, collate), GIL wait included.
  double python_s = 0;
  std::uint64_t samples = 0;     // samples written into batches
  std::uint64_t bytes_read = 0;  // encoded bytes read
  std::uint64_t batches = 0;     // batches handed to the consumer
  // Seconds the consumer spent blocked in next(): the ground truth of
  // "input-bound".
  double consumer_wait_s = 0;
  // Seconds from the consumer's first next() to the last batch handed out:
  // consumer_wait_s / consumer_active_s is the share of its time the
  // training loop waited for data.
  double consumer_active_s = 0;
  // Seconds from the loader's creation to its first batch in hand (startup included).
  double time_to_first_batch_s = -1;
  // Seconds since the loader was created.
  double wall_s = 0;
  // Workers in use now, workers started, batches made ahead now.
  int threads = 0;
  int threads_max = 0;
  int prefetch = 0;
  // threads=0 / prefetch=0: "tuning" or "settled" ("off" when both are
  // fixed), and one line per change with the measurements behind it.
  std::string autotune;
  std::vector<std::string> autotune_log;
  // Batch buffers. A buffer is allocated only when none is free, so
  // batch_buffers is the most ever in use at once, and is bounded by
  //   batch_buffers <= ring_depth_max + batch_buffers_held_peak
  // where ring_depth_max is `prefetch`, or 2 x max(2, workers started) when
  // prefetch=0 (the tuner may deepen the ring that far), and the held peak
  // is the most batches the consumer kept alive at once, counting the one
  // being handed out (a loop that keeps nothing holds 2, in a C++ range-for
  // as in a Python for loop: the previous batch is still alive while next()
  // runs). Buffers are reused once released; none is ever freed
  // before the loader and every batch are gone.
  std::uint64_t batch_buffers = 0;
  std::uint64_t batch_buffer_bytes = 0;
  std::uint64_t batch_buffers_in_use = 0;     // in the ring or held by the consumer now
  std::uint64_t batch_buffers_held = 0;       // handed out, not yet released, now
  std::uint64_t batch_buffers_held_peak = 0;  // the most held at once
  int ring_depth_max = 0;
  // The cache mode in use ("mmap", "ram", "decoded"), and with cache="auto"
  // the line saying why it was chosen (empty otherwise).
  std::string cache_mode;
  std::string cache_auto;
  // cache="ram" / "decoded": lookups that found the sample, lookups that did
  // not, samples and bytes held, the memory entries replaced by their
  // rewritten form still hold (returned when the rest of their mapping is
  // freed), the budget (cache_bytes + cache_holes_bytes stay under it).
  std::uint64_t cache_hits = 0;
  std::uint64_t cache_misses = 0;
  std::uint64_t cache_records = 0;
  std::uint64_t cache_bytes = 0;
  std::uint64_t cache_holes_bytes = 0;
  std::uint64_t cache_budget_bytes = 0;
  // The cache shared by the node's loaders (LoaderOptions::share_cache):
  // "shared: <file> (created|attached, ...)" or "off: <why>"; the node's
  // entries and bytes in it, this process's lookups that found their
  // sample there, and the entries this process stored.
  std::string shared_cache = "off";
  std::uint64_t shared_cache_entries = 0;
  std::uint64_t shared_cache_bytes = 0;
  std::uint64_t shared_cache_hits = 0;
  std::uint64_t shared_cache_filled = 0;
  // Local tar shards: file descriptors open now (a bounded pool, least
  // recently used closed first) and opens so far (indexing included); 0 for
  // other sources.
  std::uint64_t shard_files_open = 0;
  std::uint64_t shard_file_opens = 0;
  // cache="ram" preload: "off", "loading", "done" (every record read),
  // "budget full" (stopped there); records and bytes it stored; its wall
  // time so far (or in all, once it ended).
  std::string cache_preload = "off";
  std::uint64_t cache_preload_records = 0;
  std::uint64_t cache_preload_bytes = 0;
  double cache_preload_s = 0;
  // cache="ram" rewrite (LoaderOptions::cache_rewrite): "off", "rewriting"
  // (cached records not yet looked at remain), "done"; records rewritten,
  // their image bytes before and after, and the CPU seconds it took.
  std::string cache_rewrite = "off";
  std::uint64_t cache_rewritten = 0;
  // ... of them, rewritten as a worker was about to decode them (the rest in the background)
  std::uint64_t cache_rewrite_on_read = 0;
  // records the rewrite is done with (rewritten, or needing none): how much of the set is in its final form
  std::uint64_t cache_rewrite_settled = 0;
  std::uint64_t cache_rewrite_bytes_before = 0;
  std::uint64_t cache_rewrite_bytes_after = 0;
  double cache_rewrite_cpu_s = 0;
  // Corrupt or unreadable samples, by reason (code name), and the first few
  // messages, each naming the file and the reason.
  std::uint64_t corrupt = 0;
  std::map<std::string, std::uint64_t> corrupt_by_reason;
  std::vector<std::string> corrupt_examples;
  // Exceptions caught on stoker's threads outside a sample, by thread kind
  // (empty when none): "worker" (a batch's buffer, or around a sample: that
  // batch raises, whatever on_corrupt says), "preload" (cache_preload then
  // says "error: ..."), "rewrite" (cache_rewrite then says "error: ..."),
  // "fetcher" (remote shards: the shard's reads raise kUnavailable). An
  // exception inside a sample is that sample's error (corrupt_by_reason).
  std::map<std::string, std::uint64_t> thread_errors;
  // Boxes fields: boxes dropped because the geometry left them under 1 px
  // wide or high (cropped away), and boxes past a field's max_boxes.
  std::uint64_t boxes_dropped = 0;
  std::uint64_t boxes_truncated = 0;
  // A mixture (stoker/mixture.h): per source, its weight's share of the
  // weights, its draws per epoch, and the samples of it handed out so far
  // (counted by the batches the consumer received, padding included), so
  // drawn / sum(drawn) can be held against the weights. Empty otherwise.
  struct MixturePart {
    std::string name;
    double weight_share = 0;
    std::uint64_t per_epoch = 0;
    std::uint64_t drawn = 0;
    bool operator==(const MixturePart&) const = default;
  };
  std::vector<MixturePart> mixture;

  // Remote shards (http(s)://, s3://, pipe:; RemoteOptions in stoker/source.h).
  struct Remote {
    bool active = false;              // the source reads shards that live elsewhere
    std::uint64_t bytes_fetched = 0;  // response bodies: sidecars, retried parts and stray reads included
    std::uint64_t requests = 0;       // requests sent, every attempt (commands run, for pipe:)
    // Retried requests by cause: timeout, connect, reset, http_429, http_5xx, pipe.
    std::map<std::string, std::uint64_t> retries;
    double fetch_wait_s = 0;      // worker seconds spent waiting for shard bytes not yet arrived
    double latency_p50_ms = 0;    // time to the first byte of a response
    double latency_p99_ms = 0;
    int prefetch_depth = 0;       // shards fetched ahead of those in use (autotuned from the next two)
    double shard_fetch_s = 0;     // a shard's fetch time (moving average; 0 until measured)
    double shard_consume_s = 0;   // the time the loader takes to read through one (moving average)
    std::vector<std::string> prefetch_log;  // each depth change with the measurements behind it
    // Of bytes_fetched, those of shards fetched for the epoch expected next
    // while the current one ended (they are the next epoch's bytes).
    std::uint64_t fetched_ahead_bytes = 0;
    std::uint64_t resident_bytes = 0;       // shard bytes held in memory now
    std::uint64_t stray_reads = 0;          // reads outside the epoch's plan (one ranged request each)
    // How the shards' indexes were had: "sidecar" (<shard>.idx fetched),
    // "cache" (cache_dir or index_dir), "scan" (the shard read through), or
    // several joined by '+'; the bytes scanned.
    std::string index;
    std::uint64_t index_scanned_bytes = 0;
    // cache_dir: shards found there, fetched into it, bytes written, entries
    // evicted to stay under cache_limit, shards that bypassed it (no room).
    std::uint64_t cache_dir_hits = 0;
    std::uint64_t cache_dir_misses = 0;
    std::uint64_t cache_dir_bytes_written = 0;
    std::uint64_t cache_dir_evictions = 0;
    std::uint64_t cache_dir_bypass = 0;
    bool operator==(const Remote&) const = default;
  };
  Remote remote;

  // 3D volumes (VolumeField; null in the JSON for other schemas).
  struct Volume {
    bool active = false;
    int num_samples = 1;             // patches per volume load
    std::uint64_t patches = 0;       // patches made
    std::uint64_t loads = 0;         // volume loads (records made)
    // Bytes of voxels read from files: a patch's window of an uncompressed
    // volume, whole labels for their foreground index, whole files that are
    // read into memory; patches cut from memory read none.
    std::uint64_t bytes_read = 0;
    double bytes_per_patch = 0;
    std::uint64_t inflate_bytes = 0;  // .nii.gz bytes inflated (once per volume when the cache holds them)
    double inflate_s = 0;             // worker seconds spent inflating
    std::uint64_t cache_hits = 0;     // volume loads served from the volume cache
    std::uint64_t cache_misses = 0;   // volume loads inflated or read whole (then kept when they fit)
    std::uint64_t cache_entries = 0;  // volumes and label indexes kept
    std::uint64_t cache_bytes = 0;
    std::uint64_t cache_budget_bytes = 0;
    std::uint64_t label_index_builds = 0;  // foreground indexes built (once per label volume when kept)
    std::uint64_t posneg_one_class = 0;    // RandCropByPosNegLabel patches whose class was empty (the other used)
    double resample_s = 0;                 // worker seconds resampling volumes (Spacing; once per volume when kept)
    bool operator==(const Volume&) const = default;
  };
  Volume volume;

  // The loader's memory budget (memory_budget; src/memory/README.md): its
  // limit, the bytes its accounts hold now and the most they held at once,
  // each account's bytes ("batch_buffers", "remote_shards", "volume_cache",
  // "sample_cache") and the reservations
  // (remote_shards: what its epoch's plan holds at once, kept from the
  // caches). used <= budget, except by what the loader needs to run at all
  // (its batch buffers; a remote shard needed now beyond the reservation)
  // when the budget is smaller: over_bytes says by how much, at most.
  struct Memory {
    bool active = false;
    std::uint64_t budget = 0;
    std::uint64_t used = 0;
    std::uint64_t peak = 0;
    std::uint64_t over_bytes = 0;
    std::string scope;
    std::uint64_t process_held = 0;
    std::map<std::string, std::uint64_t> accounts;
    std::map<std::string, std::uint64_t> reserved;
    bool operator==(const Memory&) const = default;
  };
  Memory memory;

  // Busy seconds and samples per worker thread (index = worker id).
  struct Thread {
    double read_s = 0, decode_s = 0, transform_s = 0, python_s = 0;
    std::uint64_t samples = 0;
    bool operator==(const Thread&) const = default;
  };
  std::vector<Thread> per_thread;

  // stats()'s JSON object (the Python dict's keys): every stat, as the one
  // table of stats declares them (src/stats/stats_table.cc, where each has
  // its doc; docs/stats.md lists them).
  std::string to_json() const;
  // The inverse: missing stats keep their defaults, unknown keys are ignored
  // (a snapshot of another version reads). Throws stoker::Error on text that
  // is not a JSON object. from_json(s.to_json()) == s.
  static Stats from_json(const std::string& text);

  bool operator==(const Stats&) const = default;
};

}  // namespace stoker
