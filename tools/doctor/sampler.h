// What `stoker doctor` samples while the training command runs: CPU per core
// and for the process tree, disk reads, memory, page cache, major faults (all
// from /proc), and GPU utilisation and memory through NVML when
// libnvidia-ml.so.1 can be loaded.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace stoker::doctor {

struct GpuSample {
  double util = 0;        // 0..1, SM busy share over the driver's last period
  double mem_used_mib = 0;
  double mem_total_mib = 0;
};

struct Sample {
  double t = 0;                    // seconds since the command started
  std::vector<double> core_busy;   // per core, 0..1 (user + nice + system + irq + softirq + steal)
  double iowait = 0;               // share of all cores' time in iowait, 0..1
  double tree_cpu = 0;             // cores used by the command's process tree (user + system)
  double tree_user = 0, tree_system = 0;
  double root_cpu = 0;             // of which the command's own process (the rest: its children, e.g. DataLoader workers)
  double main_thread_cpu = 0;      // of which its main thread (the training loop of a Python program)
  char main_thread_state = '?';    // R running, S sleeping (waiting), D in uninterruptible (disk) wait, at the sample
  double disk_read_mbs = 0;        // whole disks, /proc/diskstats
  double disk_read_iops = 0;
  double tree_read_mbs = 0;        // the tree's read_bytes (storage, not page cache), /proc/PID/io
  double tree_rchar_mbs = 0;       // the tree's read() bytes, page cache hits included
  double pss_mib = 0;              // the tree's proportional set size
  double page_cache_mib = 0;       // Cached in /proc/meminfo
  double mem_available_mib = 0;
  double major_faults_per_s = 0;   // the tree's
  int processes = 0;
  // Runnable threads (running or waiting for a core) at the sample: the
  // machine's (/proc/stat procs_running, the sampler's own thread included)
  // and the command's tree's (threads in state R).
  int procs_running = 0, tree_running = 0;
  std::vector<GpuSample> gpus;
};

class Sampler {
 public:
  explicit Sampler(pid_t root);
  ~Sampler();
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  // A sample of the interval since the previous call (the first call
  // primes the counters and returns zeros for rates).
  Sample take(double t);
  int cores() const { return cores_; }
  // "NVML: 1 GPU (NVIDIA H100)" or why no GPU is sampled.
  const std::string& gpu_note() const { return gpu_note_; }
  bool has_gpu() const { return nvml_ != nullptr && gpu_count_ > 0; }

 private:
  struct ProcTimes {
    std::uint64_t utime = 0, stime = 0, majflt = 0, read_bytes = 0, rchar = 0;
  };
  std::vector<pid_t> tree() const;
  void open_nvml();

  pid_t root_;
  int cores_ = 1;
  long ticks_ = 100;
  double last_t_ = -1;
  std::vector<std::vector<std::uint64_t>> last_cpu_;  // per core: the /proc/stat fields
  std::uint64_t last_sectors_ = 0, last_reads_ = 0;
  std::uint64_t last_main_ticks_ = 0;
  std::map<pid_t, ProcTimes> last_proc_;
  // NOTE: PSS comes from smaps_rollup, which walks the process's page tables
  // (~8 ms of CPU for a process with torch loaded): read every kPssEvery-th
  // sample, per process, so the doctor does not take a core from the run.
  static constexpr int kPssEvery = 4;
  int samples_taken_ = 0;
  std::map<pid_t, double> last_pss_mib_;
  void* nvml_ = nullptr;
  unsigned gpu_count_ = 0;
  std::string gpu_note_;
  std::vector<void*> gpu_handles_;
};

}  // namespace stoker::doctor
