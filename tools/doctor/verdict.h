// From the run's measurements to a verdict: where the training loop's time
// went, the evidence, and ranked changes with the rate each is predicted to
// reach, computed from measurements (the run's own and the probe's).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "doctor/channel.h"
#include "doctor/probe.h"
#include "doctor/sampler.h"

namespace stoker::doctor {

// kRemoteStorage: storage-bound, and the storage is remote shards (https://,
// s3://, pipe:): the workers' reads were mostly waits for shard bytes not yet
// fetched.
// kDecompression: decode-bound, and the decoding was mostly inflating
// gzipped volumes (.nii.gz; stats "volume": Stats::Volume).
// kCollate: a DataLoader's workers (or, with num_workers=0, the loop's
// thread) spent at least kCollateShare of their CPU in its collate_fn
// (timed by the doctor's sitecustomize: the snapshot's "collate").
enum class Bottleneck {
  kCompute,
  kStorage,
  kRemoteStorage,
  kDecode,
  kDecompression,
  kTransform,
  kCollate,
  kHostToDevice,
  kNoData
};
const char* bottleneck_name(Bottleneck b);  // "input-bound on decode", ...

struct Suggestion {
  std::string action;          // what to change
  double predicted_rate = 0;   // samples/s of the training loop after the change (0: not predicted)
  double predicted_lo = 0, predicted_hi = 0;  // its range: from the probes' spread (quartiles of their timed chunks)
  double gain = 0;             // predicted_rate / the run's rate
  std::string basis;           // how the prediction was made
};

// The part of the loop the verdict describes: its steady state, after the
// start-up (see steady_window in verdict.cc).
struct Steady {
  double samples = 0, active_s = 0, wait_s = 0;  // in the window
  double skipped_s = 0;                          // the start-up left out (0: the whole loop)
  bool after_epoch = false;                      // the start-up was the first epoch (else its first fifth)
};

struct Verdict {
  Bottleneck kind = Bottleneck::kNoData;
  // No loop reported its wait (not Python, or nothing the doctor times): the
  // verdict is inferred from what was sampled, and says so.
  bool inferred = false;
  std::string consumer;        // which loader / profiled iterable the verdict is about
  double rate = 0;             // samples/s the training loop consumed
  double wait_share = 0;       // of the loop's time, waiting for the next batch
  // Of the loop's time, inside next() but runnable and not running (waiting
  // for a core: contention, not the input; part of wait_share). The verdict
  // counts wait_share - wait_runq_share as waiting for data.
  double wait_runq_share = 0;
  double step_per_sample_s = 0;
  Steady steady;               // rate, wait_share and step are this window's
  std::vector<std::string> evidence;
  std::vector<Suggestion> suggestions;  // best first
  std::vector<std::string> notes;       // probes that could not run, etc.
  double probe_s = 0;                   // wall time the probes took, in all
  // A DataLoader script: the change that ports it to stoker (its import
  // lines, as a unified diff against the script's file), when found.
  std::string port_diff;
  // The command failed (a non-zero exit the doctor did not cause by passing
  // on Ctrl-C): no verdict. `failure` says so ("the command failed (exit 1)
  // after 1.6 s: no verdict"); `stderr_lines`: the last lines it wrote.
  bool failed = false;
  std::string failure;
  std::vector<std::string> stderr_lines;
  // The loop the verdict is about, timed in Python (a DataLoader, a
  // stoker.Loader, stoker.profile): its iterations (epochs), their set-up in
  // iter() (a DataLoader starting its workers; counted in the wait) and the
  // time between them (evaluation, checkpoints, other loops; not the step).
  int iterations = 0;
  double setup_s = 0, between_s = 0;
  // Who used the CPU, as sampled (cores on average): the command's main
  // process and its main thread, its child processes, the rest of the
  // machine.
  double cpu_main_process = 0, cpu_main_thread = 0, cpu_children = 0, cpu_others = 0;
  // The step per sample split as the consuming thread measured it (the
  // snapshot's "sched"): its CPU time, its wait for a core (runnable, not
  // running: the cores taken by the input pipeline and other processes), and
  // the rest (off the CPU: a GPU, I/O, sleeps). Negative: not measured.
  double step_cpu_s = -1, step_runq_s = -1, step_other_s = -1;
  // The input pipeline's CPU that competed with the step (cores: a
  // DataLoader's worker processes, a stoker loader's threads).
  double input_cores = 0;
};

// The step split (Verdict::step_cpu_s...) from a profile snapshot's "sched",
// applied to `step_per_sample_s` (the steady window's step) by the shares
// of the whole loop's step time. False when the snapshot has no CPU time
// or no run-queue wait (a kernel without /proc/thread-self/schedstat).
bool step_split(const nlohmann::json& snap, double step_per_sample_s, double* cpu, double* runq, double* other);

// The model behind every modelled prediction. The loop overlaps the input
// side and the step, so it runs at the slower of the two, and no faster than
// the cores can do both. The step keeps its CPU time and its time off the
// CPU; its wait for a core follows the machine's contention as the change
// leaves it, a fair share: when runnable, each thread gets
// min(1, cores / runnable threads) of a core. The run measured the step's
// share (its CPU over its CPU plus its wait for a core); other processes'
// runnable threads are estimated as their CPU over that share, the input's
// as its CPU over it (at most its threads); a change that makes the input
// side use other cores changes the step's share in proportion to the fair
// share (so that no change predicts the run as it was), and, where other
// processes' runnable threads were sampled, at most the fair share itself
// (a step thread that slept while the loop waited got more than its share
// on waking; a step that becomes the bottleneck no longer sleeps). The cores
// the loop can use at all are its threads' fair share of them (the step's and
// the input's runnable threads against other processes').
struct StepModel {
  double loader_time = 0;  // the loop's time per sample now (input-bound: the input side's)
  double step = 0;         // the step's time per sample (wall, as measured)
  int cores = 1;
  double fetch = 0;        // the consumer's own cost of taking a batch (Python), per sample
  // The step's split (runq < 0: not measured: the step stays as measured,
  // and counts as CPU work, an upper bound of its CPU).
  double step_cpu = -1, step_runq = -1;
  double input_cores = 0;   // the input pipeline's CPU now, cores
  double input_cpu = 0;     // and per sample
  int input_threads = 0;    // its threads or processes (0: not known)
  double other_cores = 0;   // other processes' CPU now, cores
  double other_threads = -1;  // and their runnable threads, as sampled (-1: not sampled)
  // The step's share of a core while runnable, now (1 when not measured).
  double share_now() const;
  // Other processes' runnable threads (as sampled, else their CPU over that
  // share), and the input's at `input_used` cores (over that share, at most
  // its threads).
  double others_runnable() const;
  double input_runnable(double input_used) const;
  // The step per sample when the input pipeline uses `input_after` cores.
  double step_after(double input_after) const;
  // The loop's rate after a change that multiplies the input side's time
  // per sample by `ratio` and makes its CPU per sample `cpu_per_sample`.
  double rate(double ratio, double cpu_per_sample) const;
};

// A share of a DataLoader's loading CPU in its collate_fn that makes the
// verdict "input-bound on collate".
constexpr double kCollateShare = 0.5;

// A series' name for charts and the report: which loop it is ("DataLoader in
// train_one_epoch (train.py:40)", "stoker loader over ...").
// A loader's memory budget (its stats' "memory": Stats::Memory) as evidence
// lines: the budget, then one per account with its bytes and share of the
// budget (the names as the loader writes them, src/memory/memory_budget.h).
std::vector<std::string> memory_lines(const Stats::Memory& m);
// The node-shared cache's memory, once for the node (not per rank): one
// line, or "" when the loader's cache is not shared (stats' shared_cache).
std::string shared_cache_line(const Stats& st);
std::string series_label(const Series& s);

// The probe, replaceable in tests.
struct Probes {
  // Told what is being measured next ("cache=\"decoded\""), for a status line.
  std::function<void(const std::string&)> progress = [](const std::string&) {};
  // The loader as configured (result 0) and with each change, interleaved.
  std::function<std::vector<Cost>(const LoaderSetup&, const std::vector<Change>&, std::size_t, int)> measure =
      [](const LoaderSetup& s, const std::vector<Change>& c, std::size_t n, int t) { return doctor::measure(s, c, n, t); };
  std::function<Cost(const std::vector<std::string>&, int, const std::string&, const Consumer&, std::size_t)>
      measure_files = [](const std::vector<std::string>& f, int t, const std::string& x, const Consumer& c,
                         std::size_t b) { return doctor::measure_files(f, t, x, c, b); };
};

struct RunFacts {
  double wall_s = 0;
  int cores = 1;
  std::vector<Sample> samples;
  std::map<std::string, Series> series;
  double mem_available_mib = 0;
  int exit_code = 0;
  bool interrupted = false;  // Ctrl-C / SIGTERM reached the doctor and was passed on: a non-zero exit is no failure
  std::string stderr_tail;   // the last bytes the command wrote to stderr
};

// Remote-bound: storage-bound (the read-share test) and the workers waited
// for remote bytes at least this share of their read time.
constexpr double kRemoteWaitShare = 0.5;

// Decompression-bound: decode the largest stage, and inflating volumes at
// least this share of the workers' decode time.
constexpr double kInflateShare = 0.5;
// The volume cache counts as full at this share of its budget.
constexpr double kVolumeCacheFull = 0.9;

// Input-bound when the loop waited at least this share of its time.
constexpr double kInputBoundShare = 0.15;

Verdict diagnose(const RunFacts& facts, const Probes& probes = {}, bool probe = true);

}  // namespace stoker::doctor
