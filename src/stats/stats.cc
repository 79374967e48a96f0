#include <cstdio>
#include <sstream>

#include "stats/json.h"
#include "stoker/stats.h"

namespace stoker {
namespace detail {

std::string json_quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

}  // namespace detail

std::string Stats::to_json() const {
  using detail::json_quote;
  std::ostringstream o;
  o.precision(9);
  o << "{\"read_s\":" << read_s << ",\"decode_s\":" << decode_s << ",\"transform_s\":" << transform_s
    << ",\"python_s\":" << python_s << ",\"samples\":" << samples << ",\"bytes_read\":" << bytes_read << ",\"batches\":" << batches
    << ",\"consumer_wait_s\":" << consumer_wait_s << ",\"consumer_active_s\":" << consumer_active_s << ",\"time_to_first_batch_s\":" << time_to_first_batch_s
    << ",\"wall_s\":" << wall_s << ",\"threads\":" << threads << ",\"threads_max\":" << threads_max << ",\"prefetch\":" << prefetch
    << ",\"autotune\":" << json_quote(autotune)
    << ",\"batch_buffers\":" << batch_buffers << ",\"batch_buffer_bytes\":" << batch_buffer_bytes
    << ",\"batch_buffers_in_use\":" << batch_buffers_in_use << ",\"batch_buffers_held\":" << batch_buffers_held
    << ",\"batch_buffers_held_peak\":" << batch_buffers_held_peak << ",\"ring_depth_max\":" << ring_depth_max
    << ",\"cache_hits\":" << cache_hits << ",\"cache_misses\":" << cache_misses
    << ",\"cache_records\":" << cache_records << ",\"cache_bytes\":" << cache_bytes
    << ",\"cache_holes_bytes\":" << cache_holes_bytes
    << ",\"cache_budget_bytes\":" << cache_budget_bytes << ",\"shard_files_open\":" << shard_files_open
    << ",\"shard_file_opens\":" << shard_file_opens << ",\"cache_preload\":" << json_quote(cache_preload)
    << ",\"cache_preload_records\":" << cache_preload_records << ",\"cache_preload_bytes\":" << cache_preload_bytes
    << ",\"cache_preload_s\":" << cache_preload_s << ",\"cache_mode\":" << json_quote(cache_mode) << ",\"cache_auto\":" << json_quote(cache_auto)
    << ",\"cache_rewrite\":" << json_quote(cache_rewrite)
    << ",\"cache_rewritten\":" << cache_rewritten << ",\"cache_rewrite_on_read\":" << cache_rewrite_on_read
    << ",\"cache_rewrite_settled\":" << cache_rewrite_settled << ",\"cache_rewrite_bytes_before\":" << cache_rewrite_bytes_before
    << ",\"cache_rewrite_bytes_after\":" << cache_rewrite_bytes_after
    << ",\"cache_rewrite_cpu_s\":" << cache_rewrite_cpu_s << ",\"corrupt\":" << corrupt << ",\"corrupt_by_reason\":{";
  bool first = true;
  for (const auto& [k, v] : corrupt_by_reason) {
    o << (first ? "" : ",") << json_quote(k) << ":" << v;
    first = false;
  }
  o << "},\"thread_errors\":{";
  first = true;
  for (const auto& [k, v] : thread_errors) {
    o << (first ? "" : ",") << json_quote(k) << ":" << v;
    first = false;
  }
  o << "},\"boxes_dropped\":" << boxes_dropped << ",\"boxes_truncated\":" << boxes_truncated;
  o << ",\"corrupt_examples\":[";
  for (std::size_t i = 0; i < corrupt_examples.size(); ++i) o << (i ? "," : "") << json_quote(corrupt_examples[i]);
  o << "],\"per_thread\":[";
  for (std::size_t i = 0; i < per_thread.size(); ++i) {
    const Thread& t = per_thread[i];
    o << (i ? "," : "") << "{\"read_s\":" << t.read_s << ",\"decode_s\":" << t.decode_s
      << ",\"transform_s\":" << t.transform_s << ",\"python_s\":" << t.python_s << ",\"samples\":" << t.samples
      << "}";
  }
  o << "],\"mixture\":[";
  for (std::size_t i = 0; i < mixture.size(); ++i) {
    const MixturePart& m = mixture[i];
    o << (i ? "," : "") << "{\"name\":" << json_quote(m.name) << ",\"weight_share\":" << m.weight_share
      << ",\"per_epoch\":" << m.per_epoch << ",\"drawn\":" << m.drawn << "}";
  }
  o << "],\"remote\":";
  if (!remote.active) {
    o << "null";
  } else {
    const Remote& r = remote;
    o << "{\"bytes_fetched\":" << r.bytes_fetched << ",\"requests\":" << r.requests << ",\"retries\":{";
    first = true;
    for (const auto& [k, v] : r.retries) {
      o << (first ? "" : ",") << json_quote(k) << ":" << v;
      first = false;
    }
    o << "},\"fetch_wait_s\":" << r.fetch_wait_s << ",\"latency_p50_ms\":" << r.latency_p50_ms
      << ",\"latency_p99_ms\":" << r.latency_p99_ms << ",\"prefetch_depth\":" << r.prefetch_depth
      << ",\"shard_fetch_s\":" << r.shard_fetch_s << ",\"shard_consume_s\":" << r.shard_consume_s
      << ",\"fetched_ahead_bytes\":" << r.fetched_ahead_bytes
      << ",\"prefetch_log\":[";
    for (std::size_t i = 0; i < r.prefetch_log.size(); ++i) o << (i ? "," : "") << json_quote(r.prefetch_log[i]);
    o << "],\"resident_bytes\":" << r.resident_bytes << ",\"stray_reads\":" << r.stray_reads
      << ",\"index\":" << json_quote(r.index) << ",\"index_scanned_bytes\":" << r.index_scanned_bytes
      << ",\"cache_dir_hits\":" << r.cache_dir_hits << ",\"cache_dir_misses\":" << r.cache_dir_misses
      << ",\"cache_dir_bytes_written\":" << r.cache_dir_bytes_written
      << ",\"cache_dir_evictions\":" << r.cache_dir_evictions << ",\"cache_dir_bypass\":" << r.cache_dir_bypass << "}";
  }
  o << ",\"volume\":";
  if (!volume.active) {
    o << "null";
  } else {
    const Volume& v = volume;
    o << "{\"num_samples\":" << v.num_samples << ",\"patches\":" << v.patches << ",\"loads\":" << v.loads
      << ",\"bytes_read\":" << v.bytes_read << ",\"bytes_per_patch\":" << v.bytes_per_patch
      << ",\"inflate_bytes\":" << v.inflate_bytes << ",\"inflate_s\":" << v.inflate_s
      << ",\"cache_hits\":" << v.cache_hits << ",\"cache_misses\":" << v.cache_misses
      << ",\"cache_entries\":" << v.cache_entries << ",\"cache_bytes\":" << v.cache_bytes
      << ",\"cache_budget_bytes\":" << v.cache_budget_bytes << ",\"label_index_builds\":" << v.label_index_builds
      << ",\"posneg_one_class\":" << v.posneg_one_class << ",\"resample_s\":" << v.resample_s << "}";
  }
  o << ",\"memory\":";
  if (!memory.active) {
    o << "null";
  } else {
    o << "{\"budget\":" << memory.budget << ",\"used\":" << memory.used << ",\"peak\":" << memory.peak
      << ",\"over_bytes\":" << memory.over_bytes;
    for (const auto* group : {&memory.accounts, &memory.reserved}) {
      o << (group == &memory.accounts ? ",\"accounts\":{" : "},\"reserved\":{");
      first = true;
      for (const auto& [k, v] : *group) {
        o << (first ? "" : ",") << json_quote(k) << ":" << v;
        first = false;
      }
    }
    o << "}}";
  }
  o << ",\"autotune_log\":[";
  for (std::size_t i = 0; i < autotune_log.size(); ++i) o << (i ? "," : "") << json_quote(autotune_log[i]);
  o << "]}";
  return o.str();
}

}  // namespace stoker
