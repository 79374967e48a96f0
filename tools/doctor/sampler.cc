#include "doctor/sampler.h"

#include <dirent.h>
#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace stoker::doctor {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// NVML's C API, declared here: the doctor loads the library at run time so
// it needs no CUDA toolkit to build and runs where no GPU exists.
using nvmlReturn_t = int;
struct NvmlUtilization {
  unsigned gpu, memory;
};
struct NvmlMemory {
  unsigned long long total, free, used;
};
using InitFn = nvmlReturn_t (*)();
using CountFn = nvmlReturn_t (*)(unsigned*);
using HandleFn = nvmlReturn_t (*)(unsigned, void**);
using NameFn = nvmlReturn_t (*)(void*, char*, unsigned);
using UtilFn = nvmlReturn_t (*)(void*, NvmlUtilization*);
using MemFn = nvmlReturn_t (*)(void*, NvmlMemory*);

template <typename F>
F sym(void* lib, const char* name) {
  return reinterpret_cast<F>(dlsym(lib, name));
}

}  // namespace

Sampler::Sampler(pid_t root) : root_(root) {
  cores_ = std::max(1, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
  ticks_ = std::max(1L, sysconf(_SC_CLK_TCK));
  open_nvml();
}

Sampler::~Sampler() {
  if (nvml_) {
    if (auto shutdown = sym<InitFn>(nvml_, "nvmlShutdown")) shutdown();
    dlclose(nvml_);
  }
}

void Sampler::open_nvml() {
  nvml_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!nvml_) {
    const char* e = dlerror();
    gpu_note_ = std::string("no GPU sampled: libnvidia-ml.so.1 could not be loaded (") + (e ? e : "unknown") + ")";
    return;
  }
  auto init = sym<InitFn>(nvml_, "nvmlInit_v2");
  auto count = sym<CountFn>(nvml_, "nvmlDeviceGetCount_v2");
  auto handle = sym<HandleFn>(nvml_, "nvmlDeviceGetHandleByIndex_v2");
  auto name = sym<NameFn>(nvml_, "nvmlDeviceGetName");
  if (!init || !count || !handle || init() != 0 || count(&gpu_count_) != 0) {
    gpu_note_ = "no GPU sampled: NVML loaded but did not initialise";
    dlclose(nvml_);
    nvml_ = nullptr;
    gpu_count_ = 0;
    return;
  }
  std::string names;
  for (unsigned i = 0; i < gpu_count_; ++i) {
    void* h = nullptr;
    if (handle(i, &h) != 0) h = nullptr;
    gpu_handles_.push_back(h);
    char buf[96] = "?";
    if (h && name) name(h, buf, sizeof(buf));
    names += (i ? ", " : "") + std::string(buf);
  }
  gpu_note_ = "NVML: " + std::to_string(gpu_count_) + " GPU(s) (" + names + ")";
}

std::vector<pid_t> Sampler::tree() const {
  std::vector<pid_t> pids, todo{root_};
  while (!todo.empty()) {
    pid_t p = todo.back();
    todo.pop_back();
    if (::access(("/proc/" + std::to_string(p)).c_str(), F_OK) != 0) continue;
    pids.push_back(p);
    const std::string task = "/proc/" + std::to_string(p) + "/task";
    if (DIR* d = ::opendir(task.c_str())) {
      while (dirent* e = ::readdir(d)) {
        if (e->d_name[0] == '.') continue;
        std::istringstream in(slurp(task + "/" + e->d_name + "/children"));
        for (pid_t c; in >> c;) todo.push_back(c);
      }
      ::closedir(d);
    }
  }
  return pids;
}

Sample Sampler::take(double t) {
  Sample s;
  s.t = t;
  const double dt = last_t_ < 0 ? 0 : t - last_t_;
  const bool rates = dt > 0;

  // CPU per core.
  {
    std::istringstream in(slurp("/proc/stat"));
    std::string line;
    std::vector<std::vector<std::uint64_t>> cur;
    while (std::getline(in, line)) {
      if (line.compare(0, 14, "procs_running ") == 0) {
        s.procs_running = std::atoi(line.c_str() + 14);
        continue;
      }
      if (line.compare(0, 3, "cpu") != 0 || line.size() < 4 || !isdigit(static_cast<unsigned char>(line[3]))) continue;
      std::istringstream ls(line.substr(line.find(' ')));
      std::vector<std::uint64_t> f;
      for (std::uint64_t v; ls >> v;) f.push_back(v);
      f.resize(10, 0);
      cur.push_back(f);
    }
    double iow = 0, total_all = 0;
    for (std::size_t c = 0; c < cur.size(); ++c) {
      double busy = 0;
      if (rates && c < last_cpu_.size()) {
        std::uint64_t d[10];
        std::uint64_t total = 0;
        for (int k = 0; k < 8; ++k) {  // user nice system idle iowait irq softirq steal
          d[k] = cur[c][k] - last_cpu_[c][k];
          total += d[k];
        }
        if (total > 0) {
          busy = static_cast<double>(d[0] + d[1] + d[2] + d[5] + d[6] + d[7]) / static_cast<double>(total);
          iow += static_cast<double>(d[4]);
          total_all += static_cast<double>(total);
        }
      }
      s.core_busy.push_back(busy);
    }
    s.iowait = total_all > 0 ? iow / total_all : 0;
    last_cpu_ = std::move(cur);
  }

  // Disks: whole devices only (partitions would count twice), no loop/ram.
  {
    std::istringstream in(slurp("/proc/diskstats"));
    std::string line;
    std::uint64_t sectors = 0, reads = 0;
    while (std::getline(in, line)) {
      std::istringstream ls(line);
      unsigned major, minor;
      std::string name;
      std::uint64_t rd, rd_merged, sec;
      if (!(ls >> major >> minor >> name >> rd >> rd_merged >> sec)) continue;
      if (name.rfind("loop", 0) == 0 || name.rfind("ram", 0) == 0) continue;
      std::string sys = name;
      std::replace(sys.begin(), sys.end(), '/', '!');
      struct stat st;
      if (::stat(("/sys/block/" + sys).c_str(), &st) != 0) continue;
      sectors += sec;
      reads += rd;
    }
    if (rates) {
      s.disk_read_mbs = static_cast<double>(sectors - last_sectors_) * 512.0 / 1e6 / dt;
      s.disk_read_iops = static_cast<double>(reads - last_reads_) / dt;
    }
    last_sectors_ = sectors;
    last_reads_ = reads;
  }

  // Memory.
  {
    std::istringstream in(slurp("/proc/meminfo"));
    std::string key;
    double kib;
    std::string unit;
    while (in >> key >> kib) {
      std::getline(in, unit);
      if (key == "Cached:") s.page_cache_mib = kib / 1024;
      if (key == "MemAvailable:") s.mem_available_mib = kib / 1024;
    }
  }

  // The process tree.
  std::map<pid_t, ProcTimes> cur;
  ProcTimes delta;
  std::uint64_t root_delta = 0;
  for (pid_t p : tree()) {
    const std::string base = "/proc/" + std::to_string(p);
    std::string stat = slurp(base + "/stat");
    auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream ls(stat.substr(close + 2));
    std::vector<std::string> f;
    for (std::string v; ls >> v;) f.push_back(v);
    if (f.size() < 13) continue;
    ProcTimes pt;
    pt.majflt = std::stoull(f[9]);
    pt.utime = std::stoull(f[11]);
    pt.stime = std::stoull(f[12]);
    std::istringstream io(slurp(base + "/io"));
    std::string k;
    std::uint64_t v;
    while (io >> k >> v) {
      if (k == "read_bytes:") pt.read_bytes = v;
      if (k == "rchar:") pt.rchar = v;
    }
    const auto known = last_pss_mib_.find(p);
    if (samples_taken_ % kPssEvery == 0 || known == last_pss_mib_.end()) {
      std::istringstream smaps(slurp(base + "/smaps_rollup"));
      double pss = 0;
      for (std::string line; std::getline(smaps, line);) {
        if (line.rfind("Pss:", 0) == 0) {
          pss = std::stod(line.substr(4)) / 1024;
          break;
        }
      }
      last_pss_mib_[p] = pss;
      s.pss_mib += pss;
    } else {
      s.pss_mib += known->second;
    }
    const auto it = last_proc_.find(p);
    const ProcTimes last = it == last_proc_.end() ? ProcTimes{} : it->second;
    if (p == root_) root_delta = pt.utime + pt.stime - std::min(pt.utime + pt.stime, last.utime + last.stime);
    delta.utime += pt.utime - std::min(pt.utime, last.utime);
    delta.stime += pt.stime - std::min(pt.stime, last.stime);
    delta.majflt += pt.majflt - std::min(pt.majflt, last.majflt);
    delta.read_bytes += pt.read_bytes - std::min(pt.read_bytes, last.read_bytes);
    delta.rchar += pt.rchar - std::min(pt.rchar, last.rchar);
    cur[p] = pt;
    ++s.processes;
    // Its threads runnable now (running or waiting for a core).
    if (DIR* d = ::opendir((base + "/task").c_str())) {
      while (dirent* e = ::readdir(d)) {
        if (e->d_name[0] == '.') continue;
        const std::string ts = slurp(base + "/task/" + e->d_name + "/stat");
        const auto c = ts.rfind(')');
        if (c != std::string::npos && c + 2 < ts.size() && ts[c + 2] == 'R') ++s.tree_running;
      }
      ::closedir(d);
    }
  }
  if (rates) {
    s.tree_user = static_cast<double>(delta.utime) / static_cast<double>(ticks_) / dt;
    s.tree_system = static_cast<double>(delta.stime) / static_cast<double>(ticks_) / dt;
    s.tree_cpu = s.tree_user + s.tree_system;
    s.root_cpu = static_cast<double>(root_delta) / static_cast<double>(ticks_) / dt;
    s.major_faults_per_s = static_cast<double>(delta.majflt) / dt;
    s.tree_read_mbs = static_cast<double>(delta.read_bytes) / 1e6 / dt;
    s.tree_rchar_mbs = static_cast<double>(delta.rchar) / 1e6 / dt;
  }
  {  // The root's main thread: its CPU and state (tid == pid).
    const std::string stat = slurp("/proc/" + std::to_string(root_) + "/task/" + std::to_string(root_) + "/stat");
    const auto close = stat.rfind(')');
    if (close != std::string::npos && close + 2 < stat.size()) {
      std::istringstream ls(stat.substr(close + 2));
      std::vector<std::string> f;
      for (std::string v; ls >> v;) f.push_back(v);
      if (f.size() >= 13) {
        s.main_thread_state = f[0].empty() ? '?' : f[0][0];
        const std::uint64_t ticks = std::stoull(f[11]) + std::stoull(f[12]);
        if (rates) {
          s.main_thread_cpu = static_cast<double>(ticks - std::min(ticks, last_main_ticks_)) /
                              static_cast<double>(ticks_) / dt;
        }
        last_main_ticks_ = ticks;
      }
    }
  }
  std::erase_if(last_pss_mib_, [&](const auto& kv) { return cur.count(kv.first) == 0; });  // exited processes
  ++samples_taken_;
  last_proc_ = std::move(cur);

  // GPUs.
  if (has_gpu()) {
    auto util = sym<UtilFn>(nvml_, "nvmlDeviceGetUtilizationRates");
    auto mem = sym<MemFn>(nvml_, "nvmlDeviceGetMemoryInfo");
    for (void* h : gpu_handles_) {
      GpuSample g;
      NvmlUtilization u{};
      NvmlMemory m{};
      if (h && util && util(h, &u) == 0) g.util = u.gpu / 100.0;
      if (h && mem && mem(h, &m) == 0) {
        g.mem_used_mib = static_cast<double>(m.used) / (1 << 20);
        g.mem_total_mib = static_cast<double>(m.total) / (1 << 20);
      }
      s.gpus.push_back(g);
    }
  }
  last_t_ = t;
  return s;
}

}  // namespace stoker::doctor
