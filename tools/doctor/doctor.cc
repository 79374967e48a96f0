// stoker doctor [options] -- CMD ARGS...: runs a training command, samples
// the machine and the command's processes while it runs, collects the
// in-process stats of its stoker loaders and stoker.profile-wrapped
// iterables, and reports where the training loop's time went, with the
// changes to try and what each is predicted to gain.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "doctor/channel.h"
#include "doctor/html.h"
#include "doctor/probe.h"
#include "doctor/sampler.h"
#include "source/remote/transport.h"
#include "doctor/sweep.h"
#include "util/temp_dir.h"
#include "doctor/verdict.h"
#include "util/thread.h"

namespace stoker::cli {
namespace {

namespace fs = std::filesystem;
using namespace stoker::doctor;
using detail::TempDir;

struct DoctorArgs {
  std::vector<std::string> command;
  std::string report = "stoker-doctor.html";
  std::string json;
  std::string trace;
  double interval = 0.5;
  bool probe = true;
  bool sweep = false;
  bool quiet = false;
  bool instrument = true;  // prepend the DataLoader-timing sitecustomize to PYTHONPATH
};

volatile sig_atomic_t g_interrupts = 0;
void on_signal(int) { g_interrupts = g_interrupts + 1; }

std::int64_t mono_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The command's stderr, passed through to the doctor's as it comes, its last
// bytes kept for the report of a failed run. Reads until the pipe's every
// writer is gone (the command and any process that inherited it), or, once
// stop() is called, until it has been quiet for a moment.
class StderrTee {
 public:
  static constexpr std::size_t kKeep = 8192;
  explicit StderrTee(int fd) : fd_(fd) {
    thread_ = detail::spawn("stoker-stderr", detail::Priority::kNormal, [this] { loop(); });
  }
  ~StderrTee() { stop(); }
  StderrTee(const StderrTee&) = delete;
  StderrTee& operator=(const StderrTee&) = delete;
  void stop() {
    if (!thread_.joinable()) return;
    stopping_.store(true);
    thread_.join();
    ::close(fd_);
  }
  std::string tail() {
    std::lock_guard<std::mutex> lock(mu_);
    return tail_;
  }

 private:
  void loop() {
    char buf[4096];
    for (;;) {
      pollfd p{fd_, POLLIN, 0};
      const int r = ::poll(&p, 1, 100);
      if (r < 0 && errno == EINTR) continue;
      if (r == 0) {
        if (stopping_.load()) return;  // the command has exited and nothing more came
        continue;
      }
      const ssize_t n = ::read(fd_, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;  // every writer closed it
      for (ssize_t done = 0; done < n;) {
        const ssize_t w = ::write(2, buf + done, static_cast<std::size_t>(n - done));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        done += w;
      }
      std::lock_guard<std::mutex> lock(mu_);
      tail_.append(buf, static_cast<std::size_t>(n));
      if (tail_.size() > 2 * kKeep) tail_.erase(0, tail_.size() - kKeep);
    }
  }
  int fd_;
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::string tail_;
  std::thread thread_;
};

// The throughput and wait of a series between its snapshots, with a gap
// (NaN) where the loop was not running: an interval whose timed loop time
// is under half of it (a profile: waits and steps only), or much longer than
// the series' usual one (a loader publishes only from next()). Across a gap
// the rate is over the loop's own time, not the clock's.
void series_rates(const Series& s, ChartSeries* rate, ChartSeries* wait) {
  std::vector<double> dts;
  for (std::size_t i = 1; i < s.points.size(); ++i) dts.push_back(s.points[i].t - s.points[i - 1].t);
  double usual = 0;
  if (!dts.empty()) {
    std::vector<double> d = dts;
    std::nth_element(d.begin(), d.begin() + static_cast<std::ptrdiff_t>(d.size() / 2), d.end());
    usual = d[d.size() / 2];
  }
  const double nan = std::nan("");
  for (std::size_t i = 1; i < s.points.size(); ++i) {
    const auto &p = s.points[i], &q = s.points[i - 1];
    const double dt = p.t - q.t;
    if (dt <= 0) continue;
    const double da = p.active_s - q.active_s;
    const bool gap = (s.kind == "profile" && da < 0.5 * dt) || (usual > 0 && dt > 4 * usual && dt > 1.0);
    double span = dt;
    if (gap) {
      rate->x.push_back(q.t);
      rate->y.push_back(nan);
      wait->x.push_back(q.t);
      wait->y.push_back(nan);
      if (s.kind != "profile" || da <= 0) continue;
      span = da;
    }
    rate->x.push_back(p.t);
    rate->y.push_back((p.samples - q.samples) / span);
    wait->x.push_back(p.t);
    wait->y.push_back(100 * std::clamp((p.wait_s - q.wait_s) / span, 0.0, 1.0));
  }
}

std::string status_line(const Sample& s, const std::map<std::string, Series>& series, int cores) {
  double busy = 0;
  for (double b : s.core_busy) busy += b;
  char b[320];
  int n = std::snprintf(b, sizeof(b), "doctor %6.1fs  CPU %.2f/%d cores  disk %.1f MB/s  PSS %.0f MiB", s.t, busy, cores,
                        s.tree_read_mbs, s.pss_mib);
  std::string line(b, static_cast<std::size_t>(n));
  // The busiest consumer's last interval: rate and wait share.
  const Series* best = nullptr;
  for (const auto& [k, x] : series) {
    if (!best || x.samples() > best->samples()) best = &x;
  }
  if (best && best->points.size() >= 2) {
    const auto& p = best->points[best->points.size() - 1];
    const auto& q = best->points[best->points.size() - 2];
    const double dt = p.t - q.t;
    if (dt > 0) {
      n = std::snprintf(b, sizeof(b), "  %s %.0f samples/s, waited %.0f%%", best->kind.c_str(), (p.samples - q.samples) / dt,
                        100 * std::min(1.0, (p.wait_s - q.wait_s) / dt));
      line.append(b, static_cast<std::size_t>(n));
    }
  }
  return line;
}

std::string terminal_report(const DoctorArgs& a, const RunFacts& f, const Verdict& v, int exit_code,
                             const std::string& gpu_note, const std::string& sweep_md) {
  std::string r = "\n=== stoker doctor ===\n";
  std::string cmd;
  for (const auto& c : a.command) cmd += (cmd.empty() ? "" : " ") + c;
  char b[256];
  std::snprintf(b, sizeof(b), "  ran %.1f s, exit %d, %d cores; ", f.wall_s, exit_code, f.cores);
  r += "command: " + cmd + "\n" + b + gpu_note + "\n\n";
  if (v.failed) {
    r += "VERDICT: none: " + v.failure + "\n";
    if (!v.stderr_lines.empty()) {
      r += "  the last lines of its stderr:\n";
      for (const auto& l : v.stderr_lines) r += "    " + l + "\n";
    }
    if (!a.report.empty()) r += "\nreport: " + a.report + "\n";
    return r;
  }
  r += std::string("VERDICT: ") + bottleneck_name(v.kind) + (v.inferred ? " (inferred from sampling)" : "") + "\n";
  for (const auto& e : v.evidence) r += "  - " + e + "\n";
  if (!v.suggestions.empty()) r += "\nTry, best predicted first:\n";
  int i = 0;
  for (const auto& s : v.suggestions) {
    if (s.predicted_rate > 0 && s.predicted_lo > 0 && v.rate > 0) {
      std::snprintf(b, sizeof(b), "  %d. [%.2fx (%.2f-%.2fx): %.0f -> %.0f samples/s (%.0f-%.0f)] ", ++i, s.gain,
                    s.predicted_lo / v.rate, s.predicted_hi / v.rate, v.rate, s.predicted_rate, s.predicted_lo,
                    s.predicted_hi);
    } else if (s.predicted_rate > 0) {
      std::snprintf(b, sizeof(b), "  %d. [%.2fx: %.0f -> %.0f samples/s] ", ++i, s.gain, v.rate, s.predicted_rate);
    } else {
      std::snprintf(b, sizeof(b), "  %d. [gain not predicted] ", ++i);
    }
    r += b + s.action + "\n       (" + s.basis + ")\n";
  }
  if (!v.port_diff.empty()) r += "\nThe change for this script (stoker's DataLoader and datasets, the rest as it is):\n" + v.port_diff;
  for (const auto& n : v.notes) r += "  note: " + n + "\n";
  if (v.probe_s > 0) {
    std::snprintf(b, sizeof(b), "  (predictions: probes took %.1f s; each range: 2 standard errors of the probes' rounds plus 15%% model error)\n",
                  v.probe_s);
    r += b;
  }
  if (v.step_runq_s >= 0 && std::any_of(v.suggestions.begin(), v.suggestions.end(),
                                        [](const Suggestion& s) { return s.predicted_rate > 0; })) {
    r += "  (the step in each prediction: its CPU and its time off the CPU as measured; its wait for a core as the "
         "change leaves it: replayed beside stoker's threads in a probe, or scaled with the CPU that competes with "
         "it, the input's and other processes')\n";
  }
  if (!sweep_md.empty()) r += "\nthroughput by threads and cache mode (sample of the loader's records):\n" + sweep_md;
  if (!a.report.empty()) r += "\nreport: " + a.report + "\n";
  return r;
}

std::string html_report(const DoctorArgs& a, const RunFacts& f, const Verdict& v, int exit_code,
                        const std::string& gpu_note, const std::string& sweep_svg, const std::string& sweep_md) {
  std::string cmd;
  for (const auto& c : a.command) cmd += (cmd.empty() ? "" : " ") + c;
  std::string h = "<h1>stoker doctor</h1><p><code>" + html_escape(cmd) + "</code></p>";
  char b[512];
  std::snprintf(b, sizeof(b), "<p>ran %.1f s, exit code %d, %d cores. %s</p>", f.wall_s, exit_code, f.cores,
                html_escape(gpu_note).c_str());
  h += b;
  if (v.failed) {
    h += "<div class=\"verdict\">" + html_escape("no verdict: " + v.failure) + "</div>";
    if (!v.stderr_lines.empty()) {
      std::string tail;
      for (const auto& l : v.stderr_lines) tail += l + "\n";
      h += "<h2>The last lines of its stderr</h2><pre>" + html_escape(tail) + "</pre>";
    }
  } else {
    h += std::string("<div class=\"verdict") + (v.kind == Bottleneck::kCompute ? " compute" : "") + "\">" +
         html_escape(bottleneck_name(v.kind)) + "</div>";
  }
  h += "<h2>Evidence</h2><ul>";
  for (const auto& e : v.evidence) h += "<li>" + html_escape(e) + "</li>";
  h += "</ul>";
  if (!v.suggestions.empty()) {
    h += "<h2>What to try</h2><table><tr><th>#</th><th>change</th><th>predicted samples/s</th><th>gain</th><th>basis</th></tr>";
    int i = 0;
    for (const auto& s : v.suggestions) {
      // As the terminal report rounds them: the rate and its range, the gain and its range.
      char rate[96] = "-", gain[64] = "-";
      if (s.predicted_rate > 0 && s.predicted_lo > 0 && v.rate > 0) {
        std::snprintf(rate, sizeof(rate), "%.0f (%.0f-%.0f)", s.predicted_rate, s.predicted_lo, s.predicted_hi);
        std::snprintf(gain, sizeof(gain), "%.2fx (%.2f-%.2fx)", s.gain, s.predicted_lo / v.rate, s.predicted_hi / v.rate);
      } else if (s.predicted_rate > 0) {
        std::snprintf(rate, sizeof(rate), "%.0f", s.predicted_rate);
        std::snprintf(gain, sizeof(gain), "%.2fx", s.gain);
      }
      h += "<tr><td>" + std::to_string(++i) + "</td><td>" + html_escape(s.action) + "</td><td class=\"n\">" + rate +
           "</td><td class=\"n\">" + gain + "</td><td>" + html_escape(s.basis) + "</td></tr>";
    }
    h += "</table>";
  }
  if (!v.port_diff.empty()) h += "<h2>The change for this script</h2><pre>" + html_escape(v.port_diff) + "</pre>";
  for (const auto& n : v.notes) h += "<p class=\"note\">" + html_escape(n) + "</p>";

  h += "<h2>Timelines</h2>";
  std::vector<double> t;
  for (std::size_t i = 1; i < f.samples.size(); ++i) t.push_back(f.samples[i].t);
  auto pick = [&](auto fn) {
    std::vector<double> y;
    for (std::size_t i = 1; i < f.samples.size(); ++i) y.push_back(fn(f.samples[i]));
    return y;
  };
  {
    std::vector<ChartSeries> cpu;
    for (int c = 0; c < f.cores; ++c) {
      cpu.push_back({"core " + std::to_string(c), t, pick([c](const Sample& s) {
                       return c < static_cast<int>(s.core_busy.size()) ? 100 * s.core_busy[static_cast<std::size_t>(c)] : 0.0;
                     })});
    }
    cpu.push_back({"iowait (all)", t, pick([](const Sample& s) { return 100 * s.iowait; })});
    ChartOptions o{"CPU busy per core", "seconds", "% busy", 100, false};
    h += svg_line_chart(cpu, o);
    ChartOptions o2{"CPU used by the command's processes", "seconds", "cores", static_cast<double>(f.cores), false};
    h += svg_line_chart({{"user", t, pick([](const Sample& s) { return s.tree_user; })},
                         {"system", t, pick([](const Sample& s) { return s.tree_system; })}},
                        o2);
  }
  {
    ChartOptions o{"Reads", "seconds", "MB/s", 0, false};
    h += svg_line_chart({{"from disk (command)", t, pick([](const Sample& s) { return s.tree_read_mbs; })},
                         {"read() calls (command)", t, pick([](const Sample& s) { return s.tree_rchar_mbs; })},
                         {"all disks", t, pick([](const Sample& s) { return s.disk_read_mbs; })}},
                        o);
  }
  {
    ChartOptions o{"Memory", "seconds", "MiB", 0, false};
    h += svg_line_chart({{"PSS (command)", t, pick([](const Sample& s) { return s.pss_mib; })},
                         {"page cache", t, pick([](const Sample& s) { return s.page_cache_mib; })}},
                        o);
  }
  if (!f.samples.empty() && !f.samples.back().gpus.empty()) {
    std::vector<ChartSeries> g;
    for (std::size_t k = 0; k < f.samples.back().gpus.size(); ++k) {
      g.push_back({"GPU " + std::to_string(k), t, pick([k](const Sample& s) { return k < s.gpus.size() ? 100 * s.gpus[k].util : 0.0; })});
    }
    ChartOptions o{"GPU utilisation (NVML)", "seconds", "%", 100, false};
    h += svg_line_chart(g, o);
  } else {
    h += "<p class=\"note\">GPU: " + html_escape(gpu_note) + "</p>";
  }
  {
    std::vector<ChartSeries> rate, wait;
    for (const auto& [k, s] : f.series) {
      ChartSeries r{series_label(s), {}, {}}, w = r;
      series_rates(s, &r, &w);
      rate.push_back(r);
      wait.push_back(w);
    }
    if (!rate.empty()) {
      h += svg_line_chart(rate, ChartOptions{"Throughput", "seconds", "samples/s", 0, false});
      h += svg_line_chart(wait, ChartOptions{"Consumer wait for the next batch", "seconds", "% of time", 100, false});
    }
  }
  {
    std::vector<std::string> labels;
    std::vector<std::vector<double>> values;
    for (const auto& [k, s] : f.series) {
      if (s.kind != "loader") continue;
      const Stats st = s.loader_stats();
      const double n = std::max(1.0, static_cast<double>(st.samples));
      labels.push_back(k);
      values.push_back({1e3 * st.read_s / n, 1e3 * st.decode_s / n, 1e3 * st.transform_s / n});
    }
    if (!labels.empty()) {
      h += svg_stacked_bars(labels, {"read", "decode", "transform"}, values, "Loader work per sample (busy time)", "ms");
    }
  }
  if (!sweep_svg.empty()) {
    h += "<h2>Throughput by threads and cache mode</h2>" + sweep_svg + "<pre>" + html_escape(sweep_md) + "</pre>";
  }
  return html_page("stoker doctor: " + cmd, h);
}

nlohmann::json json_report(const DoctorArgs& a, const RunFacts& f, const Verdict& v, int exit_code,
                           const std::string& gpu_note, const std::vector<SweepPoint>& sweep_points) {
  nlohmann::json j;
  j["command"] = a.command;
  j["exit_code"] = exit_code;
  j["wall_s"] = f.wall_s;
  j["cores"] = f.cores;
  j["gpu"] = gpu_note;
  // A failed command gets no verdict: null, and why.
  j["verdict"] = v.failed ? nlohmann::json(nullptr) : nlohmann::json(bottleneck_name(v.kind));
  j["failed"] = v.failed;
  if (v.failed) {
    j["failure"] = v.failure;
    j["stderr_tail"] = v.stderr_lines;
  }
  j["inferred"] = v.inferred;
  j["consumer"] = v.consumer;
  j["rate"] = v.rate;
  j["wait_share"] = v.wait_share;
  j["wait_runq_share"] = v.wait_runq_share;  // of wait_share: runnable inside next(), waiting for a core
  j["step_per_sample_s"] = v.step_per_sample_s;
  // The window rate, wait_share and step describe: the loop after its start-up.
  j["steady"] = {{"samples", v.steady.samples}, {"active_s", v.steady.active_s}, {"wait_s", v.steady.wait_s},
                 {"skipped_s", v.steady.skipped_s},
                 {"after", v.steady.skipped_s <= 0 ? "start" : v.steady.after_epoch ? "first epoch" : "first fifth"}};
  // The loop's epochs as timed in Python: their set-up (in the wait) and the time between them (not the step).
  j["loop"] = {{"iterations", v.iterations}, {"setup_s", v.setup_s}, {"between_s", v.between_s}};
  // Who used the CPU (cores on average), as sampled.
  j["cpu"] = {{"main_process", v.cpu_main_process}, {"main_thread", v.cpu_main_thread},
              {"child_processes", v.cpu_children}, {"other_processes", v.cpu_others}};
  // The step per sample on the loop's thread: its CPU, its wait for a core, the rest (null: not measured); the
  // input pipeline's cores that competed with it.
  auto or_null = [](double x) { return x >= 0 ? nlohmann::json(x) : nlohmann::json(nullptr); };
  j["step"] = {{"cpu_s", or_null(v.step_cpu_s)}, {"runq_s", or_null(v.step_runq_s)},
               {"other_s", or_null(v.step_other_s)}, {"input_cores", v.input_cores}};
  j["evidence"] = v.evidence;
  j["notes"] = v.notes;
  j["port_diff"] = v.port_diff;
  j["probe_s"] = v.probe_s;
  for (const auto& s : v.suggestions) {
    j["suggestions"].push_back({{"action", s.action}, {"predicted_rate", s.predicted_rate}, {"predicted_lo", s.predicted_lo}, {"predicted_hi", s.predicted_hi}, {"gain", s.gain}, {"basis", s.basis}});
  }
  for (const auto& [k, s] : f.series) {
    j["sources"][k] = s.last;
    j["sources"][k]["label"] = series_label(s);
    // NOTE: the probes reopen the user's specs as given; the report shows
    // them without a user:password@.
    if (auto it = j["sources"][k].find("sources"); it != j["sources"][k].end() && it->is_array()) {
      for (auto& spec : *it) {
        if (spec.is_string()) spec = detail::redact_url(spec.get<std::string>());
      }
    }
  }
  for (const auto& s : f.samples) {
    j["timeline"].push_back({{"t", s.t}, {"core_busy", s.core_busy}, {"iowait", s.iowait}, {"tree_cpu", s.tree_cpu},
                             {"disk_read_mbs", s.disk_read_mbs}, {"disk_read_iops", s.disk_read_iops},
                             {"tree_read_mbs", s.tree_read_mbs}, {"tree_rchar_mbs", s.tree_rchar_mbs},
                             {"root_cpu", s.root_cpu}, {"pss_mib", s.pss_mib}, {"page_cache_mib", s.page_cache_mib},
                             {"major_faults_per_s", s.major_faults_per_s}});
    if (!s.gpus.empty()) {
      auto& g = j["timeline"].back()["gpus"];
      for (const auto& x : s.gpus) g.push_back({{"util", x.util}, {"mem_used_mib", x.mem_used_mib}});
    }
  }
  for (const auto& p : sweep_points) j["sweep"].push_back({{"cache", p.cache}, {"threads", p.threads}, {"rate", p.rate}});
  return j;
}

// The doctor's sitecustomize: $STOKER_DOCTOR_SITE, else beside the installed
// package (the wheel puts this binary in stoker/_bin/ and the site in
// stoker/_doctor_site/), else the source tree this binary was built from.
std::string doctor_site_dir() {
  if (const char* site = std::getenv("STOKER_DOCTOR_SITE"); site && *site) return site;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path installed = exe.parent_path().parent_path() / "_doctor_site";
    if (fs::exists(installed / "sitecustomize.py", ec)) return installed.string();
  }
  return STOKER_DOCTOR_SITE_DIR;
}

int run(const DoctorArgs& a) {
  if (a.command.empty()) {
    std::fprintf(stderr, "stoker doctor: no command; usage: stoker doctor [options] -- CMD ARGS...\n");
    return 2;
  }
  std::unique_ptr<TempDir> channel_dir;
  try {
    channel_dir = std::make_unique<TempDir>("stoker-doctor");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stoker doctor: %s\n", e.what());
    return 2;
  }
  const std::string& dir = channel_dir->path();
  const std::string site_dir = doctor_site_dir();
  // The command's stderr comes through a pipe: passed on as it comes, its
  // last lines kept for the report when the command fails.
  int err_pipe[2] = {-1, -1};
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    std::perror("stoker doctor: pipe");
    return 2;
  }
  std::fflush(stderr);
  const std::int64_t start = mono_ns();
  pid_t child = ::fork();
  if (child < 0) {
    std::perror("stoker doctor: fork");
    return 2;
  }
  if (child == 0) {
    ::dup2(err_pipe[1], 2);  // dup2 clears O_CLOEXEC on fd 2; both pipe ends close at exec
    ::setenv("STOKER_DOCTOR", dir.c_str(), 1);
    if (!a.trace.empty()) ::setenv("STOKER_TRACE", a.trace.c_str(), 1);
    // Zero code changes: Python commands import our sitecustomize first (it
    // chains to any other), which times every torch DataLoader loop.
    if (a.instrument) {
      std::string path = site_dir;
      if (const char* pp = std::getenv("PYTHONPATH"); pp && *pp) path += std::string(":") + pp;
      ::setenv("PYTHONPATH", path.c_str(), 1);
    }
    std::vector<char*> argv;
    for (const auto& s : a.command) argv.push_back(const_cast<char*>(s.c_str()));
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    std::fprintf(stderr, "stoker doctor: cannot run '%s': %s\n", argv[0], std::strerror(errno));
    std::_Exit(127);
  }
  ::close(err_pipe[1]);
  StderrTee tee(err_pipe[0]);
  // Ctrl-C reaches the command (same process group); the doctor keeps
  // sampling until it exits, then reports.
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);

  Sampler sampler(child);
  Channel channel(dir, start);
  RunFacts facts;
  facts.cores = sampler.cores();
  const bool tty = ::isatty(2);
  int status = 0;
  double last_plain = 0;
  for (;;) {
    const double t = static_cast<double>(mono_ns() - start) * 1e-9;
    Sample s = sampler.take(t);
    channel.poll();
    facts.mem_available_mib = s.mem_available_mib;
    if (!a.quiet && facts.samples.size() > 0) {
      const std::string line = status_line(s, channel.series(), facts.cores);
      if (tty) {
        std::fprintf(stderr, "\r\033[K%s", line.c_str());
      } else if (t - last_plain >= 10) {
        std::fprintf(stderr, "%s\n", line.c_str());
        last_plain = t;
      }
    }
    facts.samples.push_back(std::move(s));
    // Sleep one interval, in short steps, watching for the command's exit.
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(a.interval);
    bool exited = false;
    while (std::chrono::steady_clock::now() < until) {
      pid_t r = ::waitpid(child, &status, WNOHANG);
      if (r == child) {
        exited = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (exited) break;
  }
  if (tty && !a.quiet) std::fprintf(stderr, "\r\033[K");
  facts.wall_s = static_cast<double>(mono_ns() - start) * 1e-9;
  channel.poll();
  facts.series = channel.series();
  const int exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  tee.stop();  // what the command wrote last is in before the report
  facts.exit_code = exit_code;
  facts.interrupted = g_interrupts > 0;
  facts.stderr_tail = tee.tail();
  const bool failed = exit_code != 0 && !facts.interrupted;

  if (!a.quiet && a.probe && !failed) {
    std::fprintf(stderr, "stoker doctor: the command ended (exit %d); measuring what changes would gain (one "
                 "interleaved probe: about 15-25 s on 2 cores)...\n", exit_code);
  }
  Probes probes;
  const std::int64_t probe_start = mono_ns();
  // The status line: what is being measured and for how long, redrawn every
  // 0.5 s on a terminal by a ticker thread while the probes run.
  std::mutex status_mu;
  std::condition_variable status_cv;
  std::string measuring;
  bool probes_done = false;
  auto draw = [&] {  // REQUIRES: status_mu held
    const double t = static_cast<double>(mono_ns() - probe_start) * 1e-9;
    std::fprintf(stderr, "\r\033[Kdoctor probes %5.1fs  measuring %s", t, measuring.c_str());
  };
  probes.progress = [&](const std::string& what) {
    if (a.quiet) return;
    std::lock_guard<std::mutex> lock(status_mu);
    measuring = what;
    if (tty) {
      draw();
    } else {
      std::fprintf(stderr, "stoker doctor: probes %.1f s: measuring %s\n",
                   static_cast<double>(mono_ns() - probe_start) * 1e-9, what.c_str());
    }
  };
  std::thread ticker;
  if (tty && !a.quiet) {
    ticker = detail::spawn("stoker-ticker", detail::Priority::kNormal, [&] {
      std::unique_lock<std::mutex> lock(status_mu);
      while (!status_cv.wait_for(lock, std::chrono::milliseconds(500), [&] { return probes_done; })) {
        if (!measuring.empty()) draw();
      }
    });
  }
  auto stop_ticker = [&] {
    if (!ticker.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(status_mu);
      probes_done = true;
    }
    status_cv.notify_all();
    ticker.join();
  };
  Verdict v;
  try {
    v = diagnose(facts, probes, a.probe);
  } catch (...) {
    stop_ticker();
    throw;
  }
  stop_ticker();
  if (tty && !a.quiet) std::fprintf(stderr, "\r\033[K");
  std::vector<SweepPoint> points;
  std::string sweep_md, sweep_svg;
  if (a.sweep && !failed) {
    const Series* ls = nullptr;
    const Series* ds = nullptr;  // a DataLoader over files (an ImageFolder): the sweep runs stoker on them
    for (const auto& [k, s] : facts.series) {
      if (s.kind == "loader" && (!ls || s.samples() > ls->samples())) ls = &s;
      if (s.kind == "profile" && s.last.contains("info") && s.last["info"].contains("files") &&
          (!ds || s.samples() > ds->samples())) {
        ds = &s;
      }
    }
    try {
      std::string title = "Throughput by threads (256 records of the loader's source)";
      std::unique_ptr<TempDir> list_dir;
      LoaderSetup setup;
      if (ls) {
        setup = setup_from_snapshot(ls->last);
      } else if (ds) {
        const auto& info = ds->last["info"];
        const auto files = info.value("files", std::vector<std::string>{});
        const nlohmann::json port = info.contains("port") && info["port"].is_object() ? info["port"] : nlohmann::json::object();
        if (!port.contains("probe")) {
          throw std::runtime_error("the DataLoader's transforms do not map to stoker's: no pipeline of stoker's to sweep");
        }
        list_dir = std::make_unique<TempDir>("stoker-sweep");
        setup = files_setup(files, port["probe"].dump(), list_dir->path());
        title = "Throughput by threads and cache mode: stoker on " + std::to_string(files.size()) +
                " of the DataLoader's files, its transforms";
      } else {
        throw std::runtime_error("no stoker loader, nor a DataLoader over image files, reported");
      }
      points = sweep(setup, 256, facts.cores, {Cache::kMmap, Cache::kRam, Cache::kDecoded});
      sweep_md = sweep_table(points);
      sweep_svg = sweep_chart(points, title);
    } catch (const std::exception& e) {
      v.notes.push_back(std::string("sweep not run: ") + e.what());
    }
  }
  std::printf("%s", terminal_report(a, facts, v, exit_code, sampler.gpu_note(), sweep_md).c_str());
  std::fflush(stdout);
  if (!a.report.empty()) {
    std::ofstream f(a.report);
    f << html_report(a, facts, v, exit_code, sampler.gpu_note(), sweep_svg, sweep_md);
    if (!f) std::fprintf(stderr, "stoker doctor: cannot write %s\n", a.report.c_str());
  }
  if (!a.json.empty()) {
    std::ofstream f(a.json);
    f << json_report(a, facts, v, exit_code, sampler.gpu_note(), points).dump(1) << "\n";
    if (!f) std::fprintf(stderr, "stoker doctor: cannot write %s\n", a.json.c_str());
  }
  return exit_code;
}

}  // namespace

void add_doctor_command(CLI::App& app) {
  auto a = std::make_shared<DoctorArgs>();
  auto* cmd = app.add_subcommand(
      "doctor",
      "Run a training command and report where its time goes: storage, decode, transforms or the model step, with "
      "the changes to try and their predicted gain. Usage: stoker doctor [options] -- CMD ARGS...");
  cmd->add_option("--report", a->report, "self-contained HTML report (\"\" = none)")->capture_default_str();
  cmd->add_option("--json", a->json, "also write the measurements and the verdict as JSON");
  cmd->add_option("--trace", a->trace, "set STOKER_TRACE: the command writes a Chrome/Perfetto trace here at exit");
  cmd->add_option("--interval", a->interval, "seconds between samples")->check(CLI::Range(0.05, 60.0))->capture_default_str();
  cmd->add_flag("!--no-probe", a->probe, "skip the measurements behind the predicted gains");
  cmd->add_flag("!--no-instrument", a->instrument,
                "do not prepend the sitecustomize that times torch DataLoader loops to PYTHONPATH");
  cmd->add_flag("--sweep", a->sweep, "after the run, measure throughput by threads and cache mode on a sample");
  cmd->add_flag("-q,--quiet", a->quiet, "no live status line");
  cmd->add_option("command", a->command, "the training command, after --")->required();
  cmd->callback([a] { throw ExitCode{run(*a)}; });
}

}  // namespace stoker::cli
