#include "doctor/verdict.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "stoker/names.h"

namespace stoker::doctor {
namespace {

std::string fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));
std::string fmt(const char* f, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, f);
  std::vsnprintf(buf, sizeof(buf), f, ap);
  va_end(ap);
  return buf;
}

struct Means {
  double main_cpu = 0, main_running = 0, main_disk = 0;  // main thread: cores; share of samples in R, in D
  double cores_busy = 0, iowait = 0, tree_cpu = 0, root_cpu = 0, disk_mbs = 0, disk_iops = 0, tree_read_mbs = 0, rchar_mbs = 0, majflt = 0;
  double peak_pss = 0, page_cache = 0, gpu_util = -1;
  double children = 0;  // the command's child processes, on average
  // Other processes' runnable threads on average (the machine's less the
  // command's and the sampler's own); -1 when not sampled.
  double other_runnable = -1;
};

Means means(const std::vector<Sample>& samples) {
  Means m;
  int n = 0, g = 0, r = 0;
  double gpu = 0, runnable = 0;
  for (std::size_t i = 1; i < samples.size(); ++i) {  // the first sample only primes the counters
    const Sample& s = samples[i];
    for (double b : s.core_busy) m.cores_busy += b;
    m.iowait += s.iowait;
    m.tree_cpu += s.tree_cpu;
    m.root_cpu += s.root_cpu;
    m.main_cpu += s.main_thread_cpu;
    m.main_running += s.main_thread_state == 'R';
    m.main_disk += s.main_thread_state == 'D';
    m.disk_mbs += s.disk_read_mbs;
    m.disk_iops += s.disk_read_iops;
    m.tree_read_mbs += s.tree_read_mbs;
    m.rchar_mbs += s.tree_rchar_mbs;
    m.majflt += s.major_faults_per_s;
    m.children += std::max(0, s.processes - 1);
    if (s.procs_running > 0) {
      runnable += std::max(0, s.procs_running - 1 - s.tree_running);
      ++r;
    }
    for (const auto& x : s.gpus) {
      gpu += x.util;
      ++g;
    }
    ++n;
  }
  if (n) {
    m.cores_busy /= n;
    m.iowait /= n;
    m.tree_cpu /= n;
    m.root_cpu /= n;
    m.main_cpu /= n;
    m.main_running /= n;
    m.main_disk /= n;
    m.disk_mbs /= n;
    m.disk_iops /= n;
    m.tree_read_mbs /= n;
    m.rchar_mbs /= n;
    m.majflt /= n;
    m.children /= n;
  }
  if (g) m.gpu_util = gpu / g;
  if (r) m.other_runnable = runnable / r;
  for (const Sample& s : samples) {
    m.peak_pss = std::max(m.peak_pss, s.pss_mib);
    m.page_cache = s.page_cache_mib;
  }
  return m;
}

const Series* busiest(const std::map<std::string, Series>& all, const char* kind) {
  const Series* best = nullptr;
  for (const auto& [k, s] : all) {
    if (s.kind == kind && s.samples() > 0 && (!best || s.samples() > best->samples())) best = &s;
  }
  return best;
}

// The part of the loop the verdict and its predictions describe: the steady
// state after the start-up (workers starting, the autotuner exploring, a
// cache filling, the first reads from disk), which a training run of hours
// spends almost none of its time in, and which the applied changes are
// measured without (`make bench-doctor`). The start-up is the first epoch
// when it ended in the first half of the loop's time; otherwise its first
// fifth. The whole loop when its timeline is too short to split (under 1 s,
// or 2 snapshots, left after the start-up).
Steady steady_window(const Series& s, double epoch_samples, double samples, double active, double wait) {
  Steady w{samples, active, wait};
  if (s.points.size() < 3) return w;
  const Series::Point& end = s.points.back();
  if (end.active_s <= 0) return w;
  const Series::Point* start = nullptr;
  bool after_epoch = false;
  for (const auto& p : s.points) {
    if (epoch_samples > 0 && p.samples >= epoch_samples && p.active_s <= 0.5 * end.active_s) {
      start = &p;
      after_epoch = true;
      break;
    }
    if (epoch_samples > 0 && p.samples >= epoch_samples) break;
  }
  if (!start) {
    for (const auto& p : s.points) {
      if (p.active_s >= 0.2 * end.active_s) {
        start = &p;
        break;
      }
    }
  }
  if (!start || start == &end) return w;
  const double da = end.active_s - start->active_s, dn = end.samples - start->samples;
  const std::size_t left = static_cast<std::size_t>(&end - start) + 1;
  if (da < 1.0 || dn <= 0 || left < 2) return w;
  // Scaled to the totals' own clock and counts (the points may come from
  // another snapshot than the totals: a profile wrapping the loader).
  const double fa = active / end.active_s, fn = end.samples > 0 ? samples / end.samples : 1;
  w.active_s = da * fa;
  w.samples = dn * fn;
  w.wait_s = std::clamp((end.wait_s - start->wait_s) * fa, 0.0, w.active_s);
  w.skipped_s = start->active_s * fa;
  w.after_epoch = after_epoch;
  return w;
}

// "its 7.9 s" / "its 7.0 s after the first epoch (0.9 s of start-up left out)"
std::string window_text(const Steady& w) {
  if (w.skipped_s <= 0) return fmt("its %.1f s", w.active_s);
  return fmt("its %.1f s after the first %s (%.1f s of start-up left out)", w.active_s,
             w.after_epoch ? "epoch" : "fifth of the loop", w.skipped_s);
}

// The loop's rate after a change: StepModel (verdict.h). Model is its old
// name here.
using Model = StepModel;

// A prediction's range, as a share of it on either side: the statistical
// uncertainty of the probe's median (its rounds' IQR / 1.35 = sigma, over
// sqrt(rounds): the standard error; two of them for ~95%) plus the model's
// own error, which `make bench-doctor` measures by applying the suggestions
// (on the 2-core machine: applied rates 0-19% above the prediction's two
// estimates, one 10-13% below).
constexpr double kModelError = 0.15;
double half_width(double mid, double lo, double hi, int rounds) {
  if (mid <= 0 || rounds <= 0) return 0.9;
  return std::min(0.9, kModelError + 2 * relative_se(mid, lo, hi, rounds));
}

// A prediction's range from the run alone, where no probe measured it: the
// model's error plus two standard errors of the loop's own rate, from its
// rate between consecutive snapshots in the steady window (IQR / 1.35 /
// sqrt(intervals)). The model error and 10% when the window has too few.
double run_half_width(const Series& s, const Steady& w) {
  std::vector<double> rates;
  const double start = s.points.empty() ? 0 : s.points.back().active_s - (w.active_s > 0 ? w.active_s : 0);
  for (std::size_t i = 1; i < s.points.size(); ++i) {
    const auto& a = s.points[i - 1];
    const auto& b = s.points[i];
    const double da = b.active_s - a.active_s;
    if (a.active_s + 1e-9 < start || da < 0.1 || b.samples < a.samples) continue;
    rates.push_back((b.samples - a.samples) / da);
  }
  if (rates.size() < 4) return kModelError + 0.10;
  std::sort(rates.begin(), rates.end());
  auto q = [&](double x) {
    const double p = x * static_cast<double>(rates.size() - 1);
    const std::size_t i = static_cast<std::size_t>(p);
    return i + 1 < rates.size() ? rates[i] + (p - static_cast<double>(i)) * (rates[i + 1] - rates[i]) : rates.back();
  };
  return half_width(q(0.5), q(0.25), q(0.75), static_cast<int>(rates.size()));
}

// The machine's load while a probe ran, against the run's: other
// processes' runnable threads on average in each, for the basis.
// NOTE: not used to scale the probe's rate to the run's load. Scaled by a
// fair share per runnable thread (cores / (others + the loop's threads)),
// the DataLoader port's prediction moved away from what the changed script
// then measured in both of two `make bench-doctor` runs (x1.38: 181
// predicted, 124 measured; x0.77: 100 predicted, 126 measured), where the
// probe's own rate had been within 6%: this machine shares its cores between
// sessions first (sched_autogroup_enabled=1), not between threads, and its
// load drifts between minutes, so the probe's minute is the better guess.
struct LoadScale {
  double run = -1, probe = -1;
  std::string text() const {
    if (run < 0 || probe < 0) return "";
    return fmt("; the probe ran while other processes had %.1f runnable threads on average (the run: %.1f)", probe,
               run);
  }
};
LoadScale load_scale(const Means& m, const Cost& c) {
  LoadScale l;
  l.run = m.other_runnable;
  l.probe = c.others_runnable;
  return l;
}

void add(Verdict* v, std::string action, double predicted, std::string basis) {
  Suggestion s;
  s.action = std::move(action);
  s.predicted_rate = predicted;
  s.gain = v->rate > 0 && predicted > 0 ? predicted / v->rate : 0;
  s.basis = std::move(basis);
  v->suggestions.push_back(std::move(s));
}

// A JSON object's number, 0 when missing or not a number.
double number(const nlohmann::json& o, const char* key) {
  const auto it = o.find(key);
  return it != o.end() && it->is_number() ? it->get<double>() : 0;
}

// The most shards the remote prefetcher keeps started ahead of those in use
// (kMaxDepth in src/source/remote/remote_bytes.cc).
constexpr int kRemoteMaxDepth = 32;
// The most LoaderOptions::remote_connections (validate_options).
constexpr int kRemoteMaxConnections = 256;
// Larger shards are suggested when a request's p50 time to first byte is at
// least this share of a shard's fetch time.
constexpr double kLatencyShare = 0.25;

// "no retries" / "retries: 5 (http_5xx 3, timeout 2)"
std::string retries_text(const Stats::Remote& r) {
  double total = 0;
  std::string by;
  for (const auto& [cause, n] : r.retries) {
    if (n == 0) continue;
    total += static_cast<double>(n);
    by += fmt("%s%s %.0f", by.empty() ? "" : ", ", cause.c_str(), static_cast<double>(n));
  }
  return total > 0 ? fmt("retries: %.0f (%s)", total, by.c_str()) : "no retries";
}

// The number of shards from a shard source's description ("128 tar shards
// ('...', ...; 1000 records)"); 0 when it is not one.
double shard_count(const std::string& describe) {
  char* end = nullptr;
  const unsigned long n = std::strtoul(describe.c_str(), &end, 10);
  return end && end != describe.c_str() && std::strncmp(end, " tar shard", 10) == 0 ? static_cast<double>(n) : 0;
}

// The remote-shard lines of the evidence: what was fetched and how fast, the
// wait for it, the prefetcher's depth against what capped it, cache_dir.
void remote_evidence(Verdict* v, const Stats::Remote& r, double wall, double busy_read, double busy, int connections) {
  v->evidence.push_back(fmt("remote shards: %.1f MB/s fetched (%.1f MB in %.0f requests over the loader's %.1f s); time "
                            "to first byte p50 %.0f ms, p99 %.0f ms; %s",
                            wall > 0 ? r.bytes_fetched / wall / 1e6 : 0, r.bytes_fetched / 1e6,
                            static_cast<double>(r.requests), wall,
                            r.latency_p50_ms, r.latency_p99_ms, retries_text(r).c_str()));
  const std::string at_cap = r.prefetch_depth >= kRemoteMaxDepth ? fmt("at its cap of %d", kRemoteMaxDepth) : "";
  const std::string cap =
      r.prefetch_depth >= connections
          ? fmt("at the connections' limit: no more than %d fetched at once%s%s", connections,
                at_cap.empty() ? "" : "; ", at_cap.c_str())
          : at_cap.empty() ? std::string("below the connections' limit") : at_cap;
  v->evidence.push_back(fmt("the workers waited %.1f s for shard bytes not yet arrived: %.0f%% of their read time, %.0f%% "
                            "of all their time; prefetch depth %d shard%s ahead with %d connection%s (%s)%s%s%s",
                            r.fetch_wait_s, busy_read > 0 ? 100 * std::min(1.0, r.fetch_wait_s / busy_read) : 0,
                            busy > 0 ? 100 * std::min(1.0, r.fetch_wait_s / busy) : 0, r.prefetch_depth,
                            r.prefetch_depth == 1 ? "" : "s", connections, connections == 1 ? "" : "s", cap.c_str(),
                            r.prefetch_log.empty() ? "" : "; last change: \"",
                            r.prefetch_log.empty() ? "" : r.prefetch_log.back().c_str(),
                            r.prefetch_log.empty() ? "" : "\""));
  if (r.cache_dir_hits + r.cache_dir_misses + r.cache_dir_bypass > 0) {
    v->evidence.push_back(fmt("cache_dir: %.0f shards found there, %.0f fetched into it (%.1f MB written), %.0f evicted "
                              "to stay under cache_limit, %.0f bypassed it (no room)",
                              static_cast<double>(r.cache_dir_hits), static_cast<double>(r.cache_dir_misses),
                              r.cache_dir_bytes_written / 1e6, static_cast<double>(r.cache_dir_evictions),
                              static_cast<double>(r.cache_dir_bypass)));
  }
  if (!r.index.empty()) {
    v->evidence.push_back(fmt("shard indexes from: %s%s; %.0f reads outside the epoch's plan (one request each); %.1f MB "
                              "of shards in memory now",
                              r.index.c_str(),
                              r.index_scanned_bytes > 0 ? fmt(" (%.1f MB scanned)", r.index_scanned_bytes / 1e6).c_str() : "",
                              static_cast<double>(r.stray_reads), r.resident_bytes / 1e6));
  }
}

// Who used the CPU, from what was sampled: the command's main process (and
// its main thread), its child processes (counted, never assumed), and the
// other processes on the machine (busy cores beyond the command's).
void machine_evidence(Verdict* v, const RunFacts& f, const Means& m) {
  v->cpu_main_process = m.root_cpu;
  v->cpu_main_thread = m.main_cpu;
  v->cpu_children = std::max(0.0, m.tree_cpu - m.root_cpu);
  v->cpu_others = std::max(0.0, m.cores_busy - m.tree_cpu);
  const long children = std::lround(m.children);
  v->evidence.push_back(fmt("CPU: %.2f of %d cores busy on average: the command's main process %.2f (its main thread "
                            "%.2f), %s, other processes on the machine %.2f; iowait %.1f%% of CPU time",
                            m.cores_busy, f.cores, m.root_cpu, m.main_cpu,
                            children <= 0 && v->cpu_children < 0.05
                                ? "no child processes"
                                : fmt("its child process%s (%ld on average) %.2f", children == 1 ? "" : "es", children,
                                      v->cpu_children)
                                      .c_str(),
                            v->cpu_others, 100 * m.iowait));
  v->evidence.push_back(fmt("storage: %.1f MB/s read from disk by the command (all disks: %.1f MB/s, %.0f reads/s), "
                            "%.1f MB/s of read() calls in all (the rest from the page cache); %.1f major faults/s",
                            m.tree_read_mbs, m.disk_mbs, m.disk_iops, m.rchar_mbs, m.majflt));
  v->evidence.push_back(fmt("memory: peak PSS of the command %s; page cache %.0f MiB; available %.0f MiB",
                            m.peak_pss > 0 ? fmt("%.0f MiB", m.peak_pss).c_str() : "not measured (the run was too short)",
                            m.page_cache, f.mem_available_mib));
  if (m.gpu_util >= 0) v->evidence.push_back(fmt("GPU: %.0f%% utilised on average", 100 * m.gpu_util));
}

// The loop's iterations as timed in Python (the snapshot's "loop": a
// DataLoader or stoker.Loader timed by the doctor, or stoker.profile): each
// iteration's set-up in iter(), counted in the wait, and the time between
// iterations (evaluation, checkpoints, other loops), kept out of the step.
void loop_evidence(Verdict* v, const nlohmann::json& snap, const std::string& setup_what) {
  const auto it = snap.find("loop");
  if (it == snap.end() || !it->is_object()) return;
  v->iterations = static_cast<int>(number(*it, "iterations"));
  v->setup_s = number(*it, "setup_s");
  v->between_s = number(*it, "between_s");
  if (v->iterations <= 0) return;
  v->evidence.push_back(fmt("between epochs: %.1f s outside the loop (evaluation, checkpoints, other loops), kept out "
                            "of the step; %s: %.2f s over %d iteration%s, counted as waiting for data",
                            v->between_s, setup_what.c_str(), v->setup_s, v->iterations, v->iterations == 1 ? "" : "s"));
}

// The share of the loop's time it spent inside next() runnable but not
// running because other processes held the cores (the machine's contention,
// not the input), from the snapshot's "sched" (the whole loop's share of its
// wait, applied to the steady window's wait), the part of it other
// processes' CPU is of the CPU that competed (theirs and the input
// pipeline's: a loader that keeps the cores busy delays its consumer's
// wake-ups too, and that is the input's); 0 when not measured.
double wait_runq_share(const nlohmann::json& snap, double wait, double active, double input_cores,
                       double other_cores) {
  const auto sc = snap.find("sched");
  const auto st = snap.find("stats");
  if (sc == snap.end() || !sc->is_object() || st == snap.end() || !st->is_object() || active <= 0) return 0;
  const auto rq = sc->find("wait_runq_s");
  const double all_wait = number(*st, "wait_s");
  if (rq == sc->end() || !rq->is_number() || all_wait <= 0) return 0;
  const double others = std::max(0.0, other_cores), competing = others + std::max(0.0, input_cores);
  if (competing <= 0) return 0;
  return std::clamp(wait * std::clamp(rq->get<double>() / all_wait, 0.0, 1.0) / active * others / competing, 0.0, 1.0);
}

// The wait line's tail when the loop waited for a core inside next().
std::string wait_runq_text(double share) {
  if (share < 0.005) return "";
  return fmt("; %.0f%% of its time it was inside next() runnable but not running, waiting for a core that other "
             "processes held (the machine's contention, not the input), which the verdict does not count as "
             "waiting for data",
             100 * share);
}

// The step's split on the consuming thread (the snapshot's "sched"): its CPU,
// its wait for a core and the rest, and what competed with it for the
// cores; into the verdict's fields and the evidence.
void step_evidence(Verdict* v, const nlohmann::json& snap, double input_cores, double others, double others_runnable,
                   const char* input_what) {
  double cpu = 0, runq = 0, other = 0;
  v->input_cores = input_cores;
  if (!step_split(snap, v->step_per_sample_s, &cpu, &runq, &other)) {
    // NOTE: "step_runq_s" is null both where the kernel gives no
    // schedstat and where no batch was sampled; only the first is worth a
    // note (a loop of a few batches says nothing wrong about the machine).
    const auto sc = snap.find("sched");
    if (sc != snap.end() && sc->is_object() && number(*sc, "batches") > 0 &&
        !(sc->contains("step_runq_s") && (*sc)["step_runq_s"].is_number())) {
      v->notes.push_back("the step's wait for a core was not measured (no /proc/thread-self/schedstat): predictions "
                         "keep the step as measured, the cores the input pipeline took from it included");
    }
    return;
  }
  v->step_cpu_s = cpu;
  v->step_runq_s = runq;
  v->step_other_s = other;
  const double step = v->step_per_sample_s;
  v->evidence.push_back(fmt("the step, %.2f ms per sample: %.2f ms on the CPU, %.2f ms (%.0f%%) waiting for a core "
                            "(runnable, not running), %.2f ms off the CPU otherwise (a GPU, I/O, sleeps); competing "
                            "for the cores: %s %.2f cores, other processes %.2f%s",
                            1e3 * step, 1e3 * cpu, 1e3 * runq, step > 0 ? 100 * runq / step : 0, 1e3 * other,
                            input_what, input_cores, others,
                            others_runnable >= 0 ? fmt(" (%.1f threads runnable on average)", others_runnable).c_str()
                                                 : ""));
}

// A remote-bound loader's suggestions. `fr`: the share of the workers' time
// spent waiting for remote bytes, what each change shortens. Predicted as the
// local storage verdict's cache="ram" is (the input side's time per sample
// scaled, the step and the cores bounding it), where a model applies.
void remote_suggestions(Verdict* v, const Stats::Remote& r, double bytes_read, const nlohmann::json& snap,
                        const nlohmann::json& opts, const Model& model, double cpu, double busy_read, double busy, double wall,
                        double loader_samples, int connections) {
  const double fr = busy > 0 ? std::min(r.fetch_wait_s, busy_read) / busy : 0;
  const double cpu_left = cpu * (1 - fr);  // waiting is no CPU work
  const double dataset_mb = loader_samples > 0 ? bytes_read / loader_samples *
                                                     snap.value("dataset_size", 0.0) / 1e6
                                               : 0;
  const double shards = shard_count(snap.value("describe", std::string()));
  const double shard_mb = shards > 0 ? dataset_mb / shards : 0;
  const double mbs = wall > 0 ? r.bytes_fetched / wall / 1e6 : 0;
  // NOTE: not cache="ram" (nor, without this note, the probe's measured
  // cache="decoded"): the prefetcher fetches every shard of each epoch's plan
  // whether its records are cached in memory or not.
  v->notes.push_back("with remote shards, in-memory caches (cache=\"ram\", cache=\"decoded\") take the wait out of "
                     "the loop from the second epoch but not the transfers: every shard is still fetched each epoch; "
                     "with cache_dir each is fetched once per node");
  const std::string cache_dir = opts.value("cache_dir", std::string());
  if (cache_dir.empty()) {
    add(v,
        fmt("cache_dir=\"<a folder on local disk>\": shards land there as they are fetched (once per node, shared by "
            "every rank on the machine) and are read locally from the second epoch on; the data set is about %.0f MB "
            "(cache_limit: 80%% of the file system's free space unless set)",
            dataset_mb),
        model.rate(std::max(0.005, 1 - fr), cpu_left),
        fmt("the workers waited for remote bytes %.0f%% of their time; from the second epoch that wait is gone (the "
            "rest of their read time, %.0f%%, stays); the first epoch still fetches",
            100 * fr, busy > 0 ? 100 * (busy_read / busy - fr) : 0));
  } else if (r.cache_dir_evictions > 0 || r.cache_dir_bypass > 0) {
    const double limit = opts.value("cache_limit", 0.0);
    add(v,
        fmt("A larger cache_limit (now %s) or a cache_dir with more room: the data set is about %.0f MB; %.0f shards were "
            "evicted and %.0f bypassed it (no room), and are fetched again each epoch",
            limit > 0 ? fmt("%.0f MB", limit / 1e6).c_str() : "80% of the free space", dataset_mb,
            static_cast<double>(r.cache_dir_evictions), static_cast<double>(r.cache_dir_bypass)),
        0, "not predicted: depends on how much of the data set then stays in cache_dir");
  } else {
    v->notes.push_back(fmt("cache_dir is set and nothing was evicted: the %.0f shards fetched into it this run are read "
                           "locally from the second epoch on (a wait within the first epoch remains)",
                           static_cast<double>(r.cache_dir_misses)));
  }
  // A shard's fetch time: logged by the prefetcher's tuner; else estimated
  // from the shard size and the rate per connection in use.
  double fetch_s = r.shard_fetch_s;
  bool estimated = false;
  const int in_flight = std::max(1, std::min(connections, r.prefetch_depth));
  if (fetch_s <= 0 && shard_mb > 0 && mbs > 0) {
    fetch_s = shard_mb * in_flight / mbs;
    estimated = true;
  }
  const double latency_share = fetch_s > 0 ? r.latency_p50_ms / 1e3 / fetch_s : 0;
  if (r.prefetch_depth >= connections && connections < kRemoteMaxConnections) {
    const int k = std::min(kRemoteMaxConnections, 2 * connections);
    add(v,
        fmt("remote_connections=%d (now %d): the prefetcher wanted %d shards ahead and could fetch %d at once", k,
            connections, r.prefetch_depth, connections),
        model.rate((1 - fr) + fr * connections / k, cpu_left),
        fmt("the wait for remote bytes (%.0f%% of the workers' time) scales with 1/connections (%d -> %d) while each "
            "transfer is bound by its own latency and rate rather than the link's (%.1f MB/s fetched now%s): an upper "
            "bound where the link or the server is the limit",
            100 * fr, connections, k, mbs,
            fetch_s > 0 ? fmt("; p50 time to first byte %.0f ms of a shard's %.2f s fetch%s", r.latency_p50_ms, fetch_s,
                              estimated ? " (estimated)" : "")
                              .c_str()
                        : ""));
  }
  if (fetch_s > 0 && latency_share >= kLatencyShare) {
    add(v,
        fmt("Larger shards%s (stoker pack ... --shard-size): a request's p50 time to first byte, %.0f ms, is %.0f%% of a "
            "shard's %.2f s fetch%s, paid once per shard",
            shard_mb > 0 ? fmt(" (now about %.0f MB each)", shard_mb).c_str() : "", r.latency_p50_ms,
            100 * latency_share, fetch_s, estimated ? " (estimated)" : ""),
        0,
        fmt("not predicted: shards 4x larger would spend up to %.0f%% less time fetching per byte, if the rest of a "
            "fetch scales with its bytes",
            100 * 0.75 * std::min(1.0, latency_share)));
  }
}

// The volume line of the evidence: patches and loads, bytes read per patch,
// inflation, the volume cache against its budget, resampling.
void volume_evidence(Verdict* v, const Stats::Volume& vf) {
  constexpr double kMiB = 1 << 20;
  v->evidence.push_back(fmt("volumes: %.0f patches from %.0f loads; %.2f MB read per patch; %.2f GB inflated (.nii.gz) "
                            "in %.1f s; volume cache: %.0f hits, %.0f misses, %.0f of %.0f MiB of its budget used "
                            "(%.0f entries)%s",
                            static_cast<double>(vf.patches), static_cast<double>(vf.loads), vf.bytes_per_patch / 1e6,
                            vf.inflate_bytes / 1e9, vf.inflate_s, static_cast<double>(vf.cache_hits),
                            static_cast<double>(vf.cache_misses), vf.cache_bytes / kMiB, vf.cache_budget_bytes / kMiB,
                            static_cast<double>(vf.cache_entries),
                            vf.resample_s > 0 ? fmt("; resampling (Spacing) %.1f s", vf.resample_s).c_str() : ""));
}

// A decompression-bound loader's suggestions. `ds`: the share of the
// workers' time spent decoding (for volumes: inflating), what a volume
// cache that holds every volume removes from the second epoch on. Predicted
// as the storage verdict's cache="ram" is.
void volume_suggestions(Verdict* v, const Stats::Volume& vf, const nlohmann::json& snap, const nlohmann::json& opts,
                        const Model& model, double cpu, double ds, double mem_available_mib) {
  constexpr double kMiB = 1 << 20;
  // NOTE: the counters as doubles: the arithmetic below is in real numbers.
  const double loads = static_cast<double>(vf.loads), hits = static_cast<double>(vf.cache_hits),
               misses = static_cast<double>(vf.cache_misses), inflated = static_cast<double>(vf.inflate_bytes),
               cache_bytes = static_cast<double>(vf.cache_bytes),
               budget_bytes = static_cast<double>(vf.cache_budget_bytes);
  const bool full = budget_bytes > 0 && cache_bytes >= kVolumeCacheFull * budget_bytes;
  // The volumes a record load opens (image and label volumes), from the
  // cache's own counts: each is a hit or a miss.
  const double per_load = loads > 0 ? (hits + misses) / loads : 0;
  const double records = snap.value("dataset_size", 0.0);
  const double per_epoch = records / std::max(1, opts.value("world_size", 1)) * per_load;  // volumes a rank loads per epoch
  const double per_miss = misses > 0 ? inflated / misses : 0;
  // Misses beyond one epoch's volumes: volumes inflated again.
  const bool again = per_epoch > 0 && misses > per_epoch;
  if (full && per_epoch <= 0) {
    v->notes.push_back("memory_budget not estimated: the snapshot gives no dataset_size or no volume loads");
  } else if (full && again && per_miss > 0) {
    const double volumes = records * per_load;
    const double need = per_miss * volumes;
    const double budget = std::ceil(1.1 * need / kMiB) * kMiB;  // 10% headroom, whole MiB
    const double fit = std::min(1.0, 0.5 * mem_available_mib * kMiB / budget);
    const double removed = fit * ds;
    add(v,
        fmt("memory_budget=%.0f (now %.0f; the volume cache is %.0f%% full and volumes are inflated again): the "
            "inflated volumes, about %.0f MiB, then stay in memory, inflated once rather than on every load; %s",
            budget, budget_bytes, 100 * cache_bytes / budget_bytes, need / kMiB,
            fit >= 1 ? "they fit in half the available memory"
                     : fmt("only %.0f%% of them fit in half the available memory (%.0f MiB available)", 100 * fit,
                           mem_available_mib)
                           .c_str()),
        model.rate(std::max(0.005, 1 - removed), cpu * (1 - removed)),
        fmt("decoding (inflating .nii.gz) was %.0f%% of the workers' time; with the volumes kept it is gone from the "
            "second epoch on%s; %.0f cache misses against %.0f volumes loaded per epoch; the inflated set estimated as "
            "%.1f MB per miss (inflate_bytes / cache_misses) x %.0f volumes (dataset_size %.0f records x %.2f volumes "
            "per load, (cache_hits + cache_misses) / loads), plus 10%%",
            100 * ds, fit >= 1 ? "" : fmt(" for the %.0f%% that fits", 100 * fit).c_str(), misses,
            per_epoch, per_miss / 1e6, volumes, records, per_load));
  } else if (full && !again) {
    v->notes.push_back(fmt("the volume cache is full (%.0f of %.0f MiB), but its %.0f misses are no more than the %.0f "
                           "volumes loaded per epoch: no volume is known to be inflated twice yet",
                           cache_bytes / kMiB, budget_bytes / kMiB, misses, per_epoch));
  } else if (budget_bytes > 0) {
    v->notes.push_back(fmt("the volume cache holds %.0f of its %.0f MiB: volumes it keeps are inflated once; %.0f "
                           "misses over %.0f loads",
                           cache_bytes / kMiB, budget_bytes / kMiB, misses, loads));
  }
  add(v, "Store the volumes uncompressed (.nii or .npy): a patch then reads only its bytes, no inflation", 0,
      fmt("not predicted: depends on the storage's rate for the patches' reads; %.2f GB were inflated in %.1f s of "
          "the workers' time",
          inflated / 1e9, vf.inflate_s));
}

void diagnose_loader(const RunFacts& f, const Means& m, const Series& ls, const Series* ps, const Probes& probes,
                     bool probe, Verdict* v) {
  const auto& snap = ls.last;
  const Stats st = ls.loader_stats();
  const nlohmann::json opts = snap.contains("options") ? snap["options"] : nlohmann::json::object();
  const double loader_samples = static_cast<double>(st.samples);
  const double busy_read = st.read_s, busy_decode = st.decode_s, busy_transform = st.transform_s;
  // The Python part of a pipeline (transforms stoker has no kernel for, target_transform, collate) on the workers.
  const double busy_python = st.python_s;
  const double busy = busy_read + busy_decode + busy_transform + busy_python;
  double n = loader_samples, active = st.consumer_active_s, wait = st.consumer_wait_s;
  double fetch = 0, h2d = 0, h2d_bytes = 0;
  if (ps && ps->last["info"].value("stoker_loader", false)) {  // the profile wraps this loader: its step is known
    const auto& pst = ps->last["stats"];
    h2d = pst.value("h2d_s", 0.0);  // device= / pin_memory=: staging and starting copies, inside the wait
    h2d_bytes = pst.value("h2d_bytes", 0.0);
    n = pst.value("samples", 0.0);
    // Time in next() beyond the C++ wait: the Python side of taking a batch.
    // NOTE: per batch, each over its own count: the two snapshots are
    // published at different moments, and a difference of their totals
    // would be mostly that lag in an input-bound run.
    const double pb = pst.value("batches", 0.0), cb = static_cast<double>(st.batches);
    if (n > 0 && pb > 0 && cb > 0) {
      fetch = std::max(0.0, (pst.value("wait_s", 0.0) - h2d) / pb - wait / cb) * pb / n;
    }
    // Measured on the loop's thread: its CPU in next() is the cost of taking
    // a batch (the difference above also holds its waits for a core).
    const nlohmann::json sc = ps->last.contains("sched") && ps->last["sched"].is_object() ? ps->last["sched"]
                                                                                          : nlohmann::json::object();
    if (n > 0 && number(sc, "batches") > 0 && sc.contains("wait_runq_s") && sc["wait_runq_s"].is_number()) {
      fetch = number(sc, "wait_cpu_s") / n;
    }
    wait = pst.value("wait_s", 0.0);
    active = wait + pst.value("step_s", 0.0);
  }
  // NOTE: a snapshot without them (another version's) reads as one thread.
  const int threads = std::max(1, st.threads), threads_max = std::max(1, st.threads_max);
  v->consumer = "stoker loader over " + snap.value("describe", std::string("?"));
  const bool wrapped = ps && ps->last["info"].value("stoker_loader", false);
  const Steady w = steady_window(wrapped ? *ps : ls, snap.value("dataset_size", 0.0) / std::max(1, opts.value("world_size", 1)),
                                 n, active, wait);
  v->steady = w;
  n = w.samples, active = w.active_s, wait = w.wait_s;
  v->rate = active > 0 ? n / active : 0;
  v->wait_share = active > 0 ? std::clamp(wait / active, 0.0, 1.0) : 0;
  v->wait_runq_share = wrapped ? std::min(v->wait_share, wait_runq_share(ps->last, wait, active,
                                                                         std::max(0.0, m.root_cpu - m.main_cpu),
                                                                         std::max(0.0, m.cores_busy - m.tree_cpu)))
                                : 0;
  v->step_per_sample_s = n > 0 ? std::max(0.0, active - wait) / n : 0;
  const double cpu = loader_samples > 0 ? busy / loader_samples : 0;  // workers' CPU per sample now
  Model model;
  model.loader_time = n > 0 ? active / n : 0;
  model.step = v->step_per_sample_s;
  model.cores = f.cores;
  model.fetch = fetch;
  model.input_cpu = cpu;
  // The loader's threads are the process's other threads (the loop's is its main one).
  model.input_cores = std::max(0.0, m.root_cpu - m.main_cpu);
  model.input_threads = st.threads;
  model.other_cores = std::max(0.0, m.cores_busy - m.tree_cpu);
  model.other_threads = m.other_runnable;
  const double rs = busy > 0 ? busy_read / busy : 0, ds = busy > 0 ? busy_decode / busy : 0,
               xs = busy > 0 ? busy_transform / busy : 0, pys = busy > 0 ? busy_python / busy : 0;

  v->evidence.push_back(fmt("the training loop waited for data %.0f%% of %s (%s; %.0f samples at %.0f samples/s; "
                            "step %.2f ms per sample)%s",
                            100 * (v->wait_share - v->wait_runq_share), window_text(w).c_str(), v->consumer.c_str(), n,
                            v->rate, 1e3 * v->step_per_sample_s, wait_runq_text(v->wait_runq_share).c_str()));
  if (wrapped) {
    loop_evidence(v, ps->last, "starting each epoch (iter(): the epoch's set-up)");
    step_evidence(v, ps->last, model.input_cores, model.other_cores, m.other_runnable, "the loader's threads");
    if (v->step_runq_s >= 0) {
      model.step_cpu = v->step_cpu_s;
      model.step_runq = v->step_runq_s;
    }
  } else {
    v->notes.push_back("the loop was not timed in Python (not run under the doctor's sitecustomize, or not from "
                       "Python): the loader's own clock runs from its first next() to its last batch, so time between "
                       "epochs (evaluation, checkpoints) counts as the step, and time in next() outside the C++ wait "
                       "(staging, batch transforms) is not counted as waiting");
  }
  const double wall = st.wall_s;
  v->evidence.push_back(fmt("loader workers busy %.2f threads on average (%d in use of %d started, autotune %s): read %.0f%%, "
                            "decode %.0f%%, transform %.0f%% of their time; %.2f / %.2f / %.2f ms per sample",
                            wall > 0 ? busy / wall : 0, threads, threads_max, st.autotune.empty() ? "?" : st.autotune.c_str(),
                            100 * rs, 100 * ds, 100 * xs, loader_samples > 0 ? 1e3 * busy_read / loader_samples : 0,
                            loader_samples > 0 ? 1e3 * busy_decode / loader_samples : 0,
                            loader_samples > 0 ? 1e3 * busy_transform / loader_samples : 0));
  if (busy_python > 0) {
    v->evidence.push_back(fmt("Python on the workers (transforms stoker has no kernel for, target_transform, collate): "
                              "%.0f%% of their time, %.2f ms per sample, the GIL's waits included",
                              100 * pys, loader_samples > 0 ? 1e3 * busy_python / loader_samples : 0));
  }
  const Stats::Remote& rf = st.remote;
  const int connections = opts.value("remote_connections", 8);
  if (rf.active) remote_evidence(v, rf, wall, busy_read, busy, connections);
  const Stats::Volume& vf = st.volume;
  if (vf.active) volume_evidence(v, vf);
  if (st.memory.active) {
    for (std::string& line : memory_lines(st.memory)) v->evidence.push_back(std::move(line));
  }
  if (std::string line = shared_cache_line(st); !line.empty()) v->evidence.push_back(std::move(line));
  machine_evidence(v, f, m);

  if (v->wait_share - v->wait_runq_share < kInputBoundShare) {
    v->kind = Bottleneck::kCompute;
    add(v, "Speed up the model step (" + fmt("%.1f", 1e3 * v->step_per_sample_s * opts.value("batch_size", 1.0)) +
               " ms per batch): mixed precision, a faster device, a smaller or compiled model",
        0,
        fmt("the step is %.0f%% of the loop's time; no input-side change can gain more than %.2fx (all of the wait)",
            100 * (1 - v->wait_share), 1 / (1 - v->wait_share)));
    if (opts.value("threads", 0) > 0 && f.samples.size() > 1 && m.cores_busy > f.cores - 0.5) {
      add(v, "threads=0: let the loader give idle worker cores back to the model step", 0,
          fmt("the loader's workers were busy %.2f threads of %d while all cores were busy", wall > 0 ? busy / wall : 0,
              threads));
    }
    return;
  }
  if (h2d > 0) {
    v->evidence.push_back(fmt("host-to-device: the loop spent %.0f%% of its time staging batches in pinned memory and "
                              "starting their copies (%.0f MB/s)",
                              100 * h2d / active, h2d > 0 ? h2d_bytes / h2d / 1e6 : 0));
  }
  if (h2d > 0 && h2d >= 0.5 * wait) {  // most of the wait was the copy, not the workers
    v->kind = Bottleneck::kHostToDevice;
    const double saved = 0.75 * h2d / std::max(1.0, n);  // uint8: a quarter of float32's bytes
    const double t = std::max(1e-12, active / std::max(1.0, n) - saved);
    add(v, "dtype=\"uint8\" and Normalize on the device (x.float().sub_(mean).div_(std) after the copy): a quarter of "
           "the bytes to copy",
        1.0 / t, fmt("the copy took %.2f ms per sample; uint8 moves a quarter of the bytes", 1e3 * h2d / std::max(1.0, n)));
    return;
  }
  const bool storage = rs >= 0.4 || (m.iowait >= 0.2 && rs >= 0.25);
  // Remote: the reads were mostly waits for shard bytes still being fetched
  // (fetch_wait_s is spent inside the workers' read time).
  const bool remote = storage && rf.active && busy_read > 0 && rf.fetch_wait_s >= kRemoteWaitShare * busy_read;
  // Decompression: decode the largest stage, mostly inflating .nii.gz
  // volumes (inflate_s is spent inside the workers' decode time).
  const bool decompression = !remote && vf.active && busy_decode > 0 && ds >= rs && ds >= xs &&
                             vf.inflate_s >= kInflateShare * busy_decode;
  v->kind = remote          ? Bottleneck::kRemoteStorage
            : decompression ? Bottleneck::kDecompression
            : storage       ? Bottleneck::kStorage
            : ds >= std::max(xs, pys) ? Bottleneck::kDecode
                                      : Bottleneck::kTransform;  // Python transforms are transforms

  // More threads when cores sat idle. NOTE: not when the reads wait on remote
  // fetches: more workers would wait on the same shards.
  const double idle = f.cores - m.cores_busy;
  if (!remote && threads < f.cores && idle >= 0.5) {
    const int k = std::min(f.cores, threads + static_cast<int>(std::floor(idle + 0.25)));
    if (k > threads) {
      add(v, fmt("threads=%d (now %d): %.1f cores sat idle", k, threads, idle),
          model.rate(static_cast<double>(threads) / k, cpu),
          fmt("input time per sample scales with 1/threads (%d -> %d) while cores are idle", threads, k));
    }
  }
  if (remote) {
    remote_suggestions(v, rf, static_cast<double>(st.bytes_read), snap, opts, model, cpu, busy_read, busy, wall, loader_samples, connections);
  } else if (decompression) {
    volume_suggestions(v, vf, snap, opts, model, cpu, ds, f.mem_available_mib);
  } else if (storage) {
    const double dataset = snap.value("dataset_size", 0.0);
    const double bytes = loader_samples > 0 ? static_cast<double>(st.bytes_read) / loader_samples : 0;
    const double need_mib = bytes * dataset / (1 << 20);
    if (opts.value("cache", std::string(name_of(Cache::kMmap))) == name_of(Cache::kMmap)) {
      add(v, fmt("cache=\"ram\": the encoded data set (%.1f MiB) %s", need_mib,
                 need_mib < 0.5 * f.mem_available_mib ? "fits in half the available memory" : "fits only in part"),
          model.rate(std::max(0.005, 1 - rs), cpu * (1 - rs)),
          fmt("reads were %.0f%% of the workers' time; from the second epoch they come from memory", 100 * rs));
    }
    add(v, "Pack the records into tar shards on fast local storage (stoker pack): large sequential reads", 0,
        "not predicted: depends on the storage's sequential rate");
  }
  if (pys >= std::max({rs, ds, xs})) {
    add(v, "Replace the part of the pipeline that runs in Python with stoker's transforms (stats()[\"python_transforms\"] "
           "names each and why it did not map): it holds the GIL, so more threads do not speed it up",
        0, fmt("not predicted: the Python part took %.0f%% of the workers' time", 100 * pys));
    v->notes.push_back("no measured predictions: the probes do not run a loader's Python stage");
    return;
  }
  if (!probe) return;
  LoaderSetup setup;
  try {
    setup = setup_from_snapshot(snap);
  } catch (const std::exception& e) {
    v->notes.push_back(std::string("no measured predictions: ") + e.what());
    return;
  }
  constexpr std::size_t kProbeRecords = 192;
  // NOTE: the probe runs as many threads as the run did, so that contention
  // between them (shared caches, memory bandwidth, SMT siblings) is in its
  // costs, and replays the run's consumer: its step (and its cost of taking
  // a batch) after every batch, as CPU work when no GPU was sampled.
  const int pt = std::max(1, threads);
  setup.consumer.step_per_sample_s = v->step_per_sample_s + fetch;
  setup.consumer.busy = m.gpu_util < 0;
  if (v->step_runq_s >= 0) {  // the step as measured: its CPU (and taking the batch) as CPU work, the rest asleep
    setup.consumer.split = true;
    setup.consumer.cpu_per_sample_s = v->step_cpu_s + fetch;
    setup.consumer.sleep_per_sample_s = v->step_other_s;
  }
  setup.consumer.epoch_samples = snap.value("dataset_size", 0.0) / std::max(1, setup.options.world_size);
  const auto t_probe = std::chrono::steady_clock::now();
  auto probe_done = [&] {
    v->probe_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_probe).count();
  };
  // Which changes to measure, all in one interleaved probe.
  std::vector<Change> changes;
  // A schema's fields other than the image and the source's label are
  // members `stoker pack` does not carry yet: packed probes would measure a
  // loader that cannot run.
  const bool has_image = setup.options.fields.empty() ||
                         std::any_of(setup.options.fields.begin(), setup.options.fields.end(),
                                     [](const Field& x) { return x.kind == FieldKind::kImage; });
  const bool packable = std::all_of(setup.options.fields.begin(), setup.options.fields.end(), [](const Field& x) {
    return (x.kind == FieldKind::kImage || x.kind == FieldKind::kLabel) && x.member.empty();
  });
  const bool images = has_image && setup.options.kind != SampleKind::kArray;
  if (setup.options.cache.mode != Cache::kDecoded && images) changes.push_back(Change::kDecoded);
  if (v->kind != Bottleneck::kTransform && images && packable) {
    changes.push_back(Change::kPacked256);
    changes.push_back(Change::kLossless);
  } else if (v->kind != Bottleneck::kTransform && images) {
    v->notes.push_back("packing not probed: the schema reads members (masks, boxes, tensors) that stoker pack does "
                       "not carry yet");
  }
  if (v->kind == Bottleneck::kTransform && setup.options.dtype == DType::kFloat32) changes.push_back(Change::kUInt8);
  std::string probing = "the loader as configured";
  for (Change c : changes) probing += std::string(", ") + change_name(c);
  probes.progress(probing + " (interleaved rounds)");
  const std::vector<Cost> costs = probes.measure(setup, changes, kProbeRecords, pt);
  const Cost& base = costs.at(0);
  if (!base.ok) {
    v->notes.push_back("no measured predictions: measuring the loader on a sample failed: " + base.error);
    probe_done();
    return;
  }
  // A measured change is predicted two ways: the run's rate times the
  // change's rate ratio to the loader as configured (taken round by round,
  // so what the probe does not reproduce cancels, but the run's own noise
  // carries over), and the changed probe's own rate (the run's consumer
  // replayed, epochs of the run's length); the prediction is their mean.
  // Storage-bound runs read slower than the probe (its records are in the
  // page cache by then): a change that removes reads is predicted at the
  // probe's own rate alone. `fit`: the share of the data set the change
  // applies to (a cache that fits only in part); the rest stays as now.
  auto add_measured = [&](std::string action, const Cost& c, double fit, std::string basis) {
    if (c.ratio <= 0 || c.rate <= 0 || v->rate <= 0) return;
    const double now_t = 1 / v->rate;
    const LoadScale load = load_scale(m, c);
    const double own_t = 1 / c.rate;
    const double changed_t = storage ? own_t : 0.5 * (now_t / c.ratio + own_t);
    add(v, std::move(action), 1 / (fit * changed_t + (1 - fit) * now_t), std::move(basis) + load.text());
    Suggestion& s = v->suggestions.back();
    const double hw = std::max(half_width(c.rate, c.rate_lo, c.rate_hi, c.rounds),
                               storage ? 0.0 : half_width(c.ratio, c.ratio_lo, c.ratio_hi, c.rounds));
    s.predicted_lo = s.predicted_rate * (1 - hw);
    s.predicted_hi = s.predicted_rate * (1 + hw);
  };
  const std::string measured = fmt("measured here on %zu of the records, %d thread%s, the run's step replayed, %d "
                                   "interleaved rounds: %.0f samples/s, %.2f ms of work per sample as configured",
                                   base.records, pt, pt > 1 ? "s" : "", base.rounds, base.rate, 1e3 * base.per_sample_s);
  auto changed = [&](const Cost& c, const char* what) {
    return measured + fmt("; %s: %.2fx that round by round (quartiles %.2f-%.2fx), %.0f samples/s, %.2f ms of work "
                          "per sample",
                          what, c.ratio, c.ratio_lo, c.ratio_hi, c.rate, 1e3 * c.per_sample_s);
  };
  for (std::size_t i = 0; i < changes.size(); ++i) {
    const Cost& c = costs.at(i + 1);
    if (!c.ok) {
      v->notes.push_back(std::string(change_name(changes[i])) + " not measured: " + c.error);
      continue;
    }
    switch (changes[i]) {
      case Change::kDecoded: {
        const double need_mib = c.cache_bytes_per_sample * snap.value("dataset_size", 0.0) / (1 << 20);
        const double fit = need_mib > 0 ? std::min(1.0, 0.5 * f.mem_available_mib / need_mib) : 1.0;
        add_measured(fmt("cache=\"decoded\" (cache_max_side=%d): %.0f MiB for the data set, %s%s",
                         setup.options.cache.max_side, need_mib,
                         fit >= 1 ? "fits in half the available memory" : "fits in part",
                         fit >= 1 ? " (cache=\"auto\" picks it when it fits memory_budget)" : ""),
                     c, fit, changed(c, "from the decoded cache (second epoch on)"));
        break;
      }
      case Change::kPacked256:
        add_measured("Pack once at a smaller size: stoker pack SOURCE OUT/train-%06d.tar --max-side 256, then load "
                     "the shards",
                     c, 1.0, changed(c, "after packing the same records at --max-side 256"));
        break;
      case Change::kLossless:
        // The same pixels, so the same training: JPEGs rewritten with restart
        // markers, which crops decode in part. Suggested only where it helps.
        if (c.ratio_lo > 1.0 && c.ratio >= 1.05) {
          add_measured("Pack once, losslessly (the same pixels; crops then decode only what they cover): stoker pack "
                       "SOURCE OUT/train-%06d.tar --lossless, then load the shards; or, when the set fits in RAM, "
                       "cache=\"ram\" (or \"auto\"), which rewrites its JPEGs into this form in RAM over the first "
                       "epochs, on idle CPU and at most 9% of the workers' time",
                       c, 1.0, changed(c, "after packing the same records --lossless"));
        }
        break;
      case Change::kUInt8:
        add_measured("dtype=\"uint8\" and Normalize on the device (x.float().sub_(mean).div_(std) after the copy): a "
                     "quarter of the bytes written per sample",
                     c, 1.0, changed(c, "with uint8 output"));
        break;
      case Change::kNone: break;
    }
  }
  // Modelled (not measured) suggestions carry the base probe's uncertainty.
  for (Suggestion& s : v->suggestions) {
    if (s.predicted_rate > 0 && s.predicted_lo <= 0) {
      const double hw = half_width(base.rate, base.rate_lo, base.rate_hi, base.rounds);
      s.predicted_lo = s.predicted_rate * (1 - hw);
      s.predicted_hi = s.predicted_rate * (1 + hw);
    }
  }
  probe_done();
}

void diagnose_profile(const RunFacts& f, const Means& m, const Series& ps, const Probes& probes, bool probe,
                      Verdict* v) {
  const auto& info = ps.last["info"];
  const auto& st = ps.last["stats"];
  const auto files = info.value("files", std::vector<std::string>{});  // a sample of the dataset's files, if known
  // A DataLoader script's port to stoker (python/stoker/_profiling.py: _port_info): the diff of its import
  // lines, and its transforms as stoker runs them ("probe": options JSON) when all of them map.
  const nlohmann::json port = info.contains("port") && info["port"].is_object() ? info["port"] : nlohmann::json::object();
  const std::string port_probe = port.contains("probe") ? port["probe"].dump() : "";
  const std::string unported = port.value("python", std::string());  // transforms that would run as Python
  // The pipeline the probe times, named transform by transform as the script
  // builds it (torchvision's class names and parameters): all of the script's,
  // or the part stoker runs, the rest named.
  std::string pipeline;
  if (port.contains("probe")) {
    std::string probed;
    for (const auto& t : port.value("probed_pipeline", std::vector<std::string>{})) probed += (probed.empty() ? "" : " + ") + t;
    pipeline = unported.empty() ? port.value("pipeline", std::string("the script's transforms"))
                                : "the part of the script's transforms stoker runs: " +
                                      (probed.empty() ? std::string("none (decode only)") : probed) + "; not timed: " +
                                      unported + " (would run as Python)";
  }
  // Why nothing was measured on the files, when nothing can be.
  const std::string unprobed =
      port.contains("probe") ? ""
      : unported.empty()     ? "the script's transforms are not known to the doctor (its dataset is not one "
                               "stoker.DataLoader reads, or stoker could not be imported into the script)"
                             : "none of the script's transforms maps to stoker's (" + unported +
                                   " would run as Python): no pipeline of stoker's to time";
  // The DataLoader's worker processes, as configured (-1: not a DataLoader,
  // or not known): the CPU is attributed to workers only when there are some.
  const int nw = info.contains("num_workers") && info["num_workers"].is_number_integer() ? info["num_workers"].get<int>() : -1;
  v->port_diff = port.value("diff", std::string());
  const std::string port_action = v->port_diff.empty() ? "" : "stoker.DataLoader and stoker.datasets in place of torch's and torchvision's (the two import lines below)";
  // The port keeps num_workers: stoker.DataLoader runs max(1, num_workers) threads; stoker.Loader's autotuner up to
  // every core.
  const int port_threads = !port_action.empty() && nw >= 0 ? std::max(1, nw) : f.cores;
  const Steady w = steady_window(ps, info.value("dataset_size", 0.0), st.value("samples", 0.0),
                                 st.value("wait_s", 0.0) + st.value("step_s", 0.0), st.value("wait_s", 0.0));
  v->steady = w;
  const double n = w.samples, wait = w.wait_s, active = w.active_s, step = active - wait;
  v->consumer = info.value("auto", false) ? st.value("name", std::string("?")) + " loop (timed by the doctor, no code change)"
                                           : "stoker.profile(" + st.value("name", std::string("?")) + ")";
  if (info.contains("dataset")) v->consumer += " over " + info.value("dataset", std::string("?"));
  v->rate = active > 0 ? n / active : 0;
  v->wait_share = active > 0 ? wait / active : 0;
  v->wait_runq_share = std::min(v->wait_share, wait_runq_share(ps.last, wait, active,
                                                                 nw > 0 ? std::max(0.0, m.tree_cpu - m.root_cpu) : 0,
                                                                 std::max(0.0, m.cores_busy - m.tree_cpu)));
  v->step_per_sample_s = n > 0 ? step / n : 0;
  const std::string workers = nw < 0 ? "" : nw == 0 ? "num_workers=0: loading on the loop's thread"
                                                    : fmt("%d worker%s", nw, nw == 1 ? "" : "s");
  v->evidence.push_back(fmt("the training loop waited for data %.0f%% of %s (%s%s%s; %.0f samples at %.0f "
                            "samples/s; step %.2f ms per sample)%s",
                            100 * (v->wait_share - v->wait_runq_share), window_text(w).c_str(), v->consumer.c_str(),
                            workers.empty() ? "" : ", ",
                            workers.c_str(), n, v->rate, 1e3 * v->step_per_sample_s,
                            wait_runq_text(v->wait_runq_share).c_str()));
  loop_evidence(v, ps.last,
                nw > 0    ? fmt("creating its iterator each epoch (the DataLoader starting its %d worker%s)", nw,
                                nw == 1 ? "" : "s").c_str()
                : nw == 0 ? "creating its iterator each epoch (num_workers=0: no workers to start)"
                          : "starting each iteration (iter())");
  machine_evidence(v, f, m);
  // What competed with the step for the cores: the worker processes (with
  // num_workers=0 the loading runs on the step's own thread, never beside it).
  const double workers_cpu = nw > 0 ? std::max(0.0, m.tree_cpu - m.root_cpu) : 0;
  step_evidence(v, ps.last, workers_cpu, std::max(0.0, m.cores_busy - m.tree_cpu), m.other_runnable,
                nw > 0 ? "the DataLoader's workers" : "the input pipeline");
  // The loading's CPU per sample: the workers', or with num_workers=0 the
  // loop's thread's while it waited (its "sched"); and the collate_fn's part.
  const double loading_cpu = nw > 0 ? (v->rate > 0 ? workers_cpu / v->rate : 0)
                             : nw == 0 && ps.last.contains("sched") && ps.last["sched"].is_object() &&
                                       st.value("samples", 0.0) > 0
                                 ? number(ps.last["sched"], "wait_cpu_s") / st.value("samples", 0.0)
                                 : 0;
  const nlohmann::json collate = ps.last.contains("collate") && ps.last["collate"].is_object() ? ps.last["collate"]
                                                                                               : nlohmann::json::object();
  const double collate_samples = number(collate, "samples");
  const double collate_cpu = collate_samples > 0 ? number(collate, "cpu_s") / collate_samples : 0;  // per sample
  const double collate_share = loading_cpu > 0 ? std::min(1.0, collate_cpu / loading_cpu) : 0;
  const bool collate_custom = !collate.empty() && !collate.value("default", true);
  const std::string collate_fn = collate.value("fn", std::string("collate_fn"));
  if (collate_samples > 0) {
    const double per_batch = number(collate, "calls") > 0 ? collate_samples / number(collate, "calls") : 0;
    v->evidence.push_back(fmt("collate: %s took %.2f ms of CPU per batch of %.0f (%.3f ms per sample), %.0f%% of the "
                              "loading's CPU (%s %.2f ms per sample)",
                              collate_fn.c_str(), 1e3 * collate_cpu * per_batch, per_batch, 1e3 * collate_cpu,
                              100 * collate_share, nw > 0 ? "the workers'" : "the loop's thread's", 1e3 * loading_cpu));
  }
  // A custom collate_fn would run as Python on stoker's threads (holding the
  // GIL), which the probe does not time: the port is predicted only where it
  // is a small part of the loading.
  const bool collate_unprobed = collate_custom && collate_share >= 0.1;
  // The loop's step as the probe replays it: as measured on the loop's
  // thread (its CPU as CPU work, its other time off the CPU as a sleep; its
  // wait for a core left to the probe's own contention), else the whole
  // step, busy without a GPU.
  Consumer consumer;
  consumer.epoch_samples = info.value("dataset_size", 0.0);
  consumer.step_per_sample_s = v->step_per_sample_s;
  consumer.busy = m.gpu_util < 0;
  if (v->step_runq_s >= 0) {
    consumer.split = true;
    consumer.cpu_per_sample_s = v->step_cpu_s;
    consumer.sleep_per_sample_s = v->step_other_s;
  }
  const std::size_t batch_size = info.contains("batch_size") && info["batch_size"].is_number_integer()
                                     ? static_cast<std::size_t>(std::max(1, info["batch_size"].get<int>()))
                                     : 0;
  auto measure_files = [&]() {
    if (!unprobed.empty()) {
      Cost c;
      c.error = unprobed;
      return c;
    }
    return probes.measure_files(files, port_threads, port_probe, consumer, batch_size);
  };
  const std::string replayed =
      consumer.split ? fmt("the loop's step replayed after each batch: its %.2f ms of CPU per sample as CPU work and "
                           "%.2f ms off the CPU as a sleep, beside stoker's threads (the run's %.2f ms waiting for a "
                           "core left to the probe's own contention: the cores the workers took are free for it)",
                           1e3 * consumer.cpu_per_sample_s, 1e3 * consumer.sleep_per_sample_s, 1e3 * v->step_runq_s)
                     : fmt("the loop's step replayed after each batch: %.2f ms per sample %s (its wait for a core not "
                           "measured: the cores the workers took from it are not in the prediction)",
                           1e3 * consumer.step_per_sample_s, consumer.busy ? "as CPU work" : "as a sleep");
  // The port (or stoker.Loader), predicted at the probe's own rate: stoker's
  // threads on the script's pipeline with the step replayed, on this machine
  // as loaded now.
  auto port_suggestion = [&](const Cost& c, const std::string& tail) {
    const LoadScale load = load_scale(m, c);
    add(v, (!port_action.empty() ? port_action
                                 : fmt("stoker.Loader(%s, ...) instead of the DataLoader",
                                       info.contains("root") ? ("'" + info.value("root", std::string()) + "'").c_str()
                                                             : "files")) +
               tail,
        c.rate,
        fmt("stoker measured here at %.0f samples/s (quartiles %.0f-%.0f) on %zu of the same files (%s, %d thread%s, "
            "batches of %zu), %s; its threads used %.2f ms of CPU per sample%s",
            c.rate, c.rate_lo, c.rate_hi, c.records, pipeline.c_str(), port_threads, port_threads == 1 ? "" : "s",
            batch_size > 0 ? batch_size : 64, replayed.c_str(), 1e3 * c.per_sample_s, load.text().c_str()));
    const double hw = half_width(c.rate, c.rate_lo, c.rate_hi, c.rounds);
    v->suggestions.back().predicted_lo = v->suggestions.back().predicted_rate * (1 - hw);
    v->suggestions.back().predicted_hi = v->suggestions.back().predicted_rate * (1 + hw);
    v->probe_s = c.seconds;
  };
  if (v->wait_share - v->wait_runq_share < kInputBoundShare) {
    v->kind = Bottleneck::kCompute;
    add(v, "Speed up the model step: mixed precision, a faster device, a smaller or compiled model", 0,
        fmt("the step is %.0f%% of the loop's time; no input-side change can gain more than %.2fx (all of the wait)",
            100 * (1 - v->wait_share), 1 / (1 - v->wait_share)));
    // On a CPU-bound step, the DataLoader's worker processes take cores from it.
    // NOTE: only workers that exist (num_workers > 0): child processes of a
    // num_workers=0 loop are something else of the program's.
    // NOTE: a share of the command's CPU too, not cores alone: on a machine
    // other processes load, the whole command gets few cores.
    if (m.gpu_util < 0 && nw > 0 && (workers_cpu >= 0.25 || (workers_cpu >= 0.05 && workers_cpu >= 0.15 * m.tree_cpu)) &&
        v->rate > 0) {
      v->evidence.push_back(fmt("the DataLoader's %d worker process%s used %.2f cores (%.2f ms of CPU per sample), cores "
                                "the step (on the CPU: no GPU sampled) competes for",
                                nw, nw == 1 ? "" : "es", workers_cpu, 1e3 * workers_cpu / v->rate));
      const std::string tail = ": less CPU per sample for the input, more for the step";
      const Cost c = probe && !files.empty() && !collate_unprobed ? measure_files() : Cost{};
      if (c.ok) {
        port_suggestion(c, tail);
      } else {
        add(v, (port_action.empty() ? "stoker.Loader instead of the DataLoader" : port_action) + tail, 0,
            fmt("the workers' %.2f ms of CPU per sample; not measured with stoker (%s)", 1e3 * workers_cpu / v->rate,
                files.empty()       ? "no file list from the dataset"
                : !probe            ? "--no-probe"
                : collate_unprobed  ? ("the collate_fn " + collate_fn + " would run as Python").c_str()
                                    : c.error.c_str()));
      }
    }
    return;
  }
  const bool storage = m.iowait >= 0.2 || (m.tree_read_mbs > 20 && m.cores_busy < 0.6 * f.cores);
  v->kind = storage ? Bottleneck::kStorage : Bottleneck::kDecode;
  {
    // Who did the loading, from what was sampled and the DataLoader's settings.
    const double children = std::max(0.0, m.tree_cpu - m.root_cpu), others = std::max(0.0, m.cores_busy - m.tree_cpu);
    std::string line;
    if (storage) {
      line = nw == 0 ? "the loop's own thread (num_workers=0) waited on storage (iowait / disk reads high, cores idle)"
                     : "the loading waited on storage (iowait / disk reads high, cores idle)";
    } else if (nw == 0) {
      line = fmt("the loading ran on the training loop's own thread (num_workers=0: no worker processes): reading, "
                 "decoding and transforming between steps, inside the loop's wait; the main thread used %.2f cores",
                 m.main_cpu);
    } else if (nw > 0) {
      line = fmt("the DataLoader's %d worker process%s used %.2f cores: decoding and transforming in Python (PIL), "
                 "which reports no stages of its own; the main process %.2f",
                 nw, nw == 1 ? "" : "es", children, m.root_cpu);
    } else {
      line = fmt("the command's main process used %.2f cores (its main thread %.2f), its child processes %.2f",
                 m.root_cpu, m.main_cpu, children);
    }
    if (others >= 0.5) {
      line += fmt("; other processes on the machine used %.2f cores, which the loading competed with", others);
    }
    v->evidence.push_back(line);
  }
  if (!storage && collate_share >= kCollateShare) {
    v->kind = Bottleneck::kCollate;
    add(v, "Speed up the collate_fn (" + collate_fn + "): " +
               (collate_custom ? "vectorise it (one torch.stack or torch.cat over the batch rather than work per "
                                 "sample), or move per-sample work into the dataset's transform"
                               : "smaller samples (uint8 rather than float32: a quarter of the bytes to stack)"),
        0,
        fmt("not predicted: it took %.0f%% of the loading's CPU (%.3f of %.3f ms per sample)", 100 * collate_share,
            1e3 * collate_cpu, 1e3 * loading_cpu));
  }
  if (!probe) return;
  if (files.empty()) {
    v->notes.push_back("no measured prediction for stoker: the profiled iterable exposes no file list "
                       "(a torchvision ImageFolder/DatasetFolder dataset does)");
    return;
  }
  if (collate_unprobed) {
    add(v, port_action.empty() ? "stoker.Loader instead of the DataLoader" : port_action, 0,
        fmt("not predicted: the collate_fn %s (%.0f%% of the loading's CPU) would run as Python on stoker's threads, "
            "holding the GIL; the probe does not run it",
            collate_fn.c_str(), 100 * collate_share));
    return;
  }
  const Cost c = measure_files();
  if (!c.ok) {
    v->notes.push_back("stoker not measured on these files: " + c.error);
    return;
  }
  v->evidence.push_back(fmt("the doctor's probe ran %zu of the same files through stoker with %s", c.records,
                            pipeline.c_str()));
  if (!storage && c.per_sample_s > 0 && v->kind != Bottleneck::kCollate) {
    v->kind = c.transform_s > c.decode_s ? Bottleneck::kTransform : Bottleneck::kDecode;
    v->evidence.push_back(fmt("the same files through stoker: decode %.0f%%, transform %.0f%% of the work per sample",
                              100 * c.decode_s / c.per_sample_s, 100 * c.transform_s / c.per_sample_s));
  }
  port_suggestion(c, "");
  if (!unported.empty()) {
    v->notes.push_back("not in the prediction: " + unported + " would run as Python on stoker's threads (stoker has "
                       "no exact kernel for it); the probe timed stoker's part of the pipeline only");
  }
}

// Nothing reported a wait: infer from the samples. The main thread of the
// command's process runs the training loop (a Python program's does); busy,
// it is the step (or loading done on that thread); idle while child
// processes (a DataLoader's workers) or the disk are busy, it waits for data.
void diagnose_inferred(const RunFacts& f, const Means& m, Verdict* v) {
  v->inferred = true;
  const double workers = std::max(0.0, m.tree_cpu - m.root_cpu);
  const double in_process_others = std::max(0.0, m.root_cpu - m.main_cpu);  // the process's other threads
  v->consumer = "the command's main thread (nothing reported its wait)";
  v->evidence.push_back(fmt("no training loop reported its wait (not a Python program, or no DataLoader or stoker "
                            "loader iterated): inferred from sampling: the main thread used %.2f cores and was running "
                            "in %.0f%% of samples, in disk wait in %.0f%%; the process's other threads used %.2f cores, "
                            "its child processes %.2f",
                            m.main_cpu, 100 * m.main_running, 100 * m.main_disk, in_process_others, workers));
  machine_evidence(v, f, m);
  const bool idle_main = m.main_cpu < 0.5 && m.main_running < 0.5;
  if (f.samples.size() < 3 || m.tree_cpu < 0.05) {
    v->kind = Bottleneck::kNoData;
  } else if (m.gpu_util >= 0.8 || (!idle_main && m.main_cpu >= 0.7)) {
    v->kind = Bottleneck::kCompute;
  } else if (idle_main && (m.iowait >= 0.2 || m.main_disk >= 0.3 ||
                           (m.tree_read_mbs > 20 && m.cores_busy < 0.6 * f.cores))) {
    v->kind = Bottleneck::kStorage;
  } else if (idle_main && workers + in_process_others >= 0.5) {
    v->kind = Bottleneck::kDecode;
    v->evidence.push_back(fmt("the main thread mostly waited while other threads or processes used %.2f cores: the "
                              "input side (decoding and transforms, which report no stages here)",
                              workers + in_process_others));
  } else {
    v->kind = Bottleneck::kNoData;
  }
  v->notes.push_back("inferred: a Python command's torch DataLoader loops are timed without code changes (the doctor "
                     "puts a sitecustomize on PYTHONPATH); otherwise wrap the loop's iterable in stoker.profile(...) or "
                     "use stoker.Loader to measure the wait share, the step time and the predicted gains");
}

}  // namespace

const char* bottleneck_name(Bottleneck b) {
  switch (b) {
    case Bottleneck::kCompute: return "compute-bound (the model step)";
    case Bottleneck::kStorage: return "input-bound on storage";
    case Bottleneck::kRemoteStorage: return "input-bound on storage (remote)";
    case Bottleneck::kDecode: return "input-bound on decode";
    case Bottleneck::kDecompression: return "input-bound on decompression (.nii.gz)";
    case Bottleneck::kTransform: return "input-bound on transforms";
    case Bottleneck::kCollate: return "input-bound on collate";
    case Bottleneck::kHostToDevice: return "input-bound on host-to-device copy";
    case Bottleneck::kNoData: return "no data";
  }
  return "?";
}

bool step_split(const nlohmann::json& snap, double step_per_sample_s, double* cpu, double* runq, double* other) {
  const auto sc = snap.find("sched");
  const auto st = snap.find("stats");
  if (sc == snap.end() || !sc->is_object() || st == snap.end() || !st->is_object()) return false;
  const auto rq = sc->find("step_runq_s");
  if (rq == sc->end() || !rq->is_number() || number(*sc, "batches") <= 0) return false;
  const double step = number(*st, "step_s");
  if (step <= 0) return false;
  // Shares of the loop's whole step time, applied to the steady window's step.
  const double c = std::clamp(number(*sc, "step_cpu_s") / step, 0.0, 1.0);
  const double r = std::clamp(rq->get<double>() / step, 0.0, 1.0 - c);
  *cpu = c * step_per_sample_s;
  *runq = r * step_per_sample_s;
  *other = std::max(0.0, step_per_sample_s - *cpu - *runq);
  return true;
}

double StepModel::share_now() const {
  if (step_runq < 0 || step_cpu <= 0) return 1.0;
  return std::clamp(step_cpu / (step_cpu + step_runq), 0.05, 1.0);
}

double StepModel::others_runnable() const {
  return other_threads >= 0 ? other_threads : std::min(64.0, std::max(0.0, other_cores) / share_now());
}

double StepModel::input_runnable(double input_used) const {
  const double n = std::max(0.0, std::min<double>(input_used, cores)) / share_now();
  return input_threads > 0 ? std::min<double>(input_threads, n) : n;
}

double StepModel::step_after(double input_after) const {
  if (step_runq < 0 || step_cpu < 0) return step;
  const double s = share_now();
  // Runnable threads beside the step: other processes' and the input's.
  auto fair = [&](double input) { return std::min(1.0, cores / (others_runnable() + 1 + input)); };
  const double fair_after = fair(input_runnable(input_after));
  // The measured share, moved as the fair share moves (no change: the run's);
  // at most the fair share itself when other processes' threads were sampled:
  // a step thread that slept while the loop waited for data got more than its
  // share on waking, which a step that becomes the bottleneck no longer does.
  double share = std::min(1.0, s * fair_after / fair(input_runnable(input_cores)));
  if (other_threads >= 0) share = std::min(share, fair_after);
  const double off_cpu = std::max(0.0, step - step_cpu - step_runq);
  return step_cpu / share + off_cpu;
}

double StepModel::rate(double ratio, double cpu_per_sample) const {
  const double in_time = loader_time * ratio;
  const bool split = step_runq >= 0 && step_cpu >= 0;
  // The input side's CPU (cores) at a loop time of t per sample.
  auto input_at = [&](double t) {
    if (t <= 0) return static_cast<double>(cores);
    return input_cpu > 0 && loader_time > 0 ? input_cores * (cpu_per_sample / input_cpu) * (loader_time / t)
                                            : cpu_per_sample / t;
  };
  // All the cores the loop can have: every core on a quiet machine; with
  // other processes' threads runnable, the loop's threads' fair share of
  // them (the step's thread and the input's runnable ones).
  auto budget = [&](double t) {
    double capacity = cores;
    if (split) {
      const double ours = 1 + input_runnable(input_at(t));
      capacity = std::min<double>(cores, cores * ours / (others_runnable() + ours));
    }
    return (cpu_per_sample + (split ? step_cpu : step) + fetch) / std::max(0.05, capacity);
  };
  auto f = [&](double t) { return std::max({in_time, step_after(input_at(t)) + fetch, budget(t)}); };
  // f never increases with t (a slower loop leaves the step more of the
  // cores): its fixed point by bisection.
  double lo = std::max({in_time, (cpu_per_sample + (split ? step_cpu : step) + fetch) / cores,
                        (split ? step_after(0) : step) + fetch});
  double hi = std::max({lo, step_after(cores) + fetch, budget(1e-9)});
  if (lo <= 0 && hi <= 0) return 0;
  if (f(lo) <= lo) return lo > 0 ? 1.0 / lo : 0;
  for (int i = 0; i < 60; ++i) {
    const double mid = 0.5 * (lo + hi);
    (f(mid) > mid ? lo : hi) = mid;
  }
  return hi > 0 ? 1.0 / hi : 0;
}

std::vector<std::string> memory_lines(const Stats::Memory& m) {
  constexpr double kMiB = 1 << 20;
  const auto budget = static_cast<double>(m.budget);
  const auto share = [&](double b) { return budget > 0 ? 100 * b / budget : 0.0; };
  std::vector<std::string> out;
  const std::string scope =
      m.scope == "process"
          ? fmt(" (the process's, shared by its loaders left at memory_budget=0: together they hold %.0f MiB)",
                static_cast<double>(m.process_held) / kMiB)
          : " (memory_budget)";
  out.push_back(fmt("memory budget %.0f MiB%s: its accounts hold %.0f MiB now (%.0f%%), at most %.0f MiB at once%s",
                    budget / kMiB, scope.c_str(), static_cast<double>(m.used) / kMiB, share(static_cast<double>(m.used)),
                    static_cast<double>(m.peak) / kMiB,
                    m.over_bytes > 0 ? fmt("; what the loader needs to run at all (its batch buffers, its workers' decode scratch) went %.0f MiB beyond it: raise memory_budget",
                                           static_cast<double>(m.over_bytes) / kMiB)
                                           .c_str()
                                     : ""));
  for (const auto& [name, n] : m.accounts) {
    const auto bytes = static_cast<double>(n);
    const auto r = m.reserved.find(name);
    const double reserved = r == m.reserved.end() ? 0 : static_cast<double>(r->second);
    out.push_back(fmt("memory account %s: %.1f MiB (%.0f%% of the budget)%s", name.c_str(), bytes / kMiB, share(bytes),
                      r == m.reserved.end() ? "" : fmt(", %.1f MiB reserved (%.0f%%)", reserved / kMiB, share(reserved)).c_str()));
  }
  return out;
}

std::string shared_cache_line(const Stats& st) {
  constexpr std::string_view kShared = "shared: ";
  if (st.shared_cache.rfind(kShared, 0) != 0) return "";
  const std::string what = st.shared_cache.substr(kShared.size());
  const std::string file = what.substr(0, what.find(' '));
  return fmt("node memory: the node-shared cache %s holds %.1f MiB for the node's %llu records, counted once "
             "whatever the number of ranks (a rank's sample_cache account holds what it stored: this one %llu "
             "records; it found %llu samples there)",
             file.c_str(), static_cast<double>(st.shared_cache_bytes) / (1 << 20),
             static_cast<unsigned long long>(st.shared_cache_entries),
             static_cast<unsigned long long>(st.shared_cache_filled),
             static_cast<unsigned long long>(st.shared_cache_hits));
}

std::string series_label(const Series& s) {
  const nlohmann::json& info = s.last.contains("info") && s.last["info"].is_object() ? s.last["info"] : nlohmann::json::object();
  const nlohmann::json& st = s.last.contains("stats") && s.last["stats"].is_object() ? s.last["stats"] : nlohmann::json::object();
  if (s.kind == "loader") {
    std::string d = s.last.value("describe", std::string("?"));
    if (d.size() > 40) d = d.substr(0, 37) + "...";
    return "stoker loader over " + d;
  }
  std::string name = st.value("name", std::string("loop"));
  if (info.value("stoker_loader", false) && name == "Loader") name = "stoker.Loader";
  if (!info.value("auto", false)) name = "stoker.profile(" + name + ")";
  // "train.py:40 in train_one_epoch": the loop's function, then where.
  const std::string where = info.value("where", std::string());
  const auto in = where.find(" in ");
  if (in != std::string::npos) return name + " in " + where.substr(in + 4) + " (" + where.substr(0, in) + ")";
  if (info.contains("root") && info["root"].is_string()) {
    const std::string root = info["root"].get<std::string>();
    return name + " over " + root.substr(root.find_last_of('/') + 1);
  }
  return name + " " + s.key.substr(s.key.find('-') + 1);
}

Verdict diagnose(const RunFacts& f, const Probes& probes_in, bool probe) {
  Verdict v;
  if (f.exit_code != 0 && !f.interrupted) {
    // A failed run's numbers describe a start-up and a crash, not training.
    v.failed = true;
    v.failure = fmt("the command failed (exit %d) after %.1f s: no verdict", f.exit_code, f.wall_s);
    std::vector<std::string> lines;
    std::string cur;
    for (char c : f.stderr_tail) {
      if (c == '\n' || c == '\r') {
        if (!cur.empty()) lines.push_back(cur);
        cur.clear();
      } else {
        cur += c;
      }
    }
    if (!cur.empty()) lines.push_back(cur);
    constexpr std::size_t kLines = 12;
    v.stderr_lines.assign(lines.size() > kLines ? lines.end() - kLines : lines.begin(), lines.end());
    return v;
  }
  if (f.exit_code != 0) {
    v.notes.push_back(fmt("the command was interrupted (exit %d): the verdict covers the run until then", f.exit_code));
  }
  // Every probe's wall time, whichever verdict runs it (probe_s in the report).
  double probe_s = 0;
  Probes probes = probes_in;
  probes.measure = [&](const LoaderSetup& s, const std::vector<Change>& c, std::size_t n, int t) {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = probes_in.measure(s, c, n, t);
    probe_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
  };
  probes.measure_files = [&](const std::vector<std::string>& files, int t, const std::string& x, const Consumer& c,
                             std::size_t b) {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = probes_in.measure_files(files, t, x, c, b);
    probe_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
  };
  const Means m = means(f.samples);
  const Series* ls = busiest(f.series, "loader");
  const Series* ps = busiest(f.series, "profile");
  const bool profile_is_stoker = ps && ps->last["info"].value("stoker_loader", false);
  const Series* timed = nullptr;  // the series the verdict's rate is from
  if (ps && !profile_is_stoker && (!ls || ps->samples() >= ls->samples())) {
    diagnose_profile(f, m, *ps, probes, probe, &v);
    timed = ps;
  } else if (ls) {
    diagnose_loader(f, m, *ls, ps, probes, probe, &v);
    timed = profile_is_stoker ? ps : ls;
  } else {
    diagnose_inferred(f, m, &v);
    return v;
  }
  // Predictions no probe gave a range (no probe ran: pipes, --no-probe, the
  // host-to-device rule): the model's error and the run's own noise.
  for (Suggestion& s : v.suggestions) {
    if (s.predicted_rate > 0 && s.predicted_lo <= 0) {
      const double hw = run_half_width(*timed, v.steady);
      s.predicted_lo = s.predicted_rate * (1 - hw);
      s.predicted_hi = s.predicted_rate * (1 + hw);
    }
  }
  v.probe_s = std::max(v.probe_s, probe_s);
  std::stable_sort(v.suggestions.begin(), v.suggestions.end(),
                   [](const Suggestion& a, const Suggestion& b) { return a.gain > b.gain; });
  return v;
}

}  // namespace stoker::doctor
