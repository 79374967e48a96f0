#include "doctor/probe.h"

#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <stdexcept>

#include "util/temp_dir.h"
#include "stoker/loader.h"
#include "stoker/pack.h"
#include "stoker/source.h"

namespace stoker::doctor {
namespace {

namespace fs = std::filesystem;

// The records of sample_records(), as a source.
class SubsetSource : public Source {
 public:
  SubsetSource(std::shared_ptr<const Source> inner, std::size_t max_records)
      : inner_(std::move(inner)), index_(sample_records(inner_->size(), max_records)) {}
  std::size_t size() const override { return index_.size(); }
  std::string key(std::size_t i) const override { return inner_->key(index_[i]); }
  std::int64_t label(std::size_t i) const override { return inner_->label(index_[i]); }
  Status read(std::size_t i, std::vector<std::uint8_t>* out) const override { return inner_->read(index_[i], out); }
  Status read_member(std::size_t i, const std::string& member, std::vector<std::uint8_t>* out) const override {
    return inner_->read_member(index_[i], member, out);
  }
  bool member_extent(std::size_t i, const std::string& member, Extent* out) const override {
    return inner_->member_extent(index_[i], member, out);
  }
  std::vector<std::string> members(std::size_t i) const override { return inner_->members(index_[i]); }
  std::string relative_key(std::size_t i) const override { return inner_->relative_key(index_[i]); }
  const std::vector<std::string>& classes() const override { return inner_->classes(); }
  std::string describe() const override { return "sample of " + inner_->describe(); }

 private:
  std::shared_ptr<const Source> inner_;
  std::vector<std::size_t> index_;
};

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double x = q * static_cast<double>(v.size() - 1);
  const std::size_t i = static_cast<std::size_t>(x);
  return i + 1 < v.size() ? v[i] + (x - static_cast<double>(i)) * (v[i + 1] - v[i]) : v.back();
}

using Clock = std::chrono::steady_clock;
using detail::TempDir;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The calling thread's CPU time, in seconds.
double thread_cpu_s() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// One loader of a probe: the records and options to time, with the run's
// consumer replayed after every batch.
class Arm {
 public:
  Arm(std::shared_ptr<const Source> source, LoaderOptions o, int threads, const Consumer& consumer)
      : consumer_(consumer), records_(source->size()) {
    for (std::size_t i = 0; i < source->size(); ++i) {  // NOTE: a pipe's writer may be gone: reading would block
      struct stat st;
      if (::stat(source->key(i).c_str(), &st) == 0 && S_ISFIFO(st.st_mode)) {
        throw std::runtime_error("record '" + source->key(i) + "' is a pipe, which cannot be read again");
      }
    }
    o.threads = std::max(1, threads);
    o.prefetch = 0;
    o.shuffle = true;
    o.shuffle_window = 0;  // the probe's records are a sample of the run's, not its shards
    o.rank = 0;
    o.world_size = 1;
    o.drop_last = false;
    o.trace = false;
    // The warm-up epoch fills a "ram" cache; a background preload would only
    // compete with the epochs being timed (and print progress).
    o.cache.preload = false;
    o.cache.progress = Progress::kOff;
    o.stage_timing = true;
    o.batch_size = std::min<std::size_t>(o.batch_size, std::max<std::size_t>(1, source->size() / 4));
    loader_ = std::make_unique<Loader>(std::move(source), o);
  }
  // One epoch, untimed (fills a cache).
  void warm() {
    while (auto b = loader_->next()) step(b->size());
    s0_ = loader_->stats();
  }
  // Whole epochs until at least `seconds`: whole, so that the loader is idle
  // (nothing prefetched, no worker busy) while the other arms run.
  //
  // NOTE: each epoch starts with an empty pipeline (the consumer waits for a
  // whole first batch), a cost per epoch that the sample's short epochs would
  // overweight: the round's rate is that of an epoch of the run's length,
  // from the time to the first batch and the steady rate after it.
  void round(double seconds) {
    const auto t0 = Clock::now();
    double fill_s = 0, first_n = 0, steady_s = 0, steady_n = 0, epochs = 0;
    do {
      const auto e0 = Clock::now();
      Clock::time_point first;
      bool got_first = false;
      while (auto b = loader_->next()) {
        if (!got_first) {
          first = Clock::now();
          fill_s += std::chrono::duration<double>(first - e0).count();
          first_n += static_cast<double>(b->size());
          got_first = true;
        } else {
          steady_n += static_cast<double>(b->size());
        }
        step(b->size());
      }
      if (got_first) steady_s += since(first);
      epochs += 1;
    } while (since(t0) < seconds);
    const double n = first_n + steady_n, wall = since(t0);
    const double epoch = consumer_.epoch_samples;
    if (epoch > 0 && steady_n > 0 && steady_s > 0 && epochs > 0) {
      const double fill = fill_s / epochs, b0 = first_n / epochs;
      rates_.push_back(epoch / (fill + std::max(0.0, epoch - b0) * steady_s / steady_n));
    } else {
      rates_.push_back(n / wall);
    }
  }
  const std::vector<double>& rates() const { return rates_; }
  Cost cost() const {
    Cost c;
    const Stats s1 = loader_->stats();
    const double n = static_cast<double>(s1.samples - s0_.samples);
    if (n <= 0 || rates_.empty()) {
      c.error = "no samples timed";
      return c;
    }
    c.ok = true;
    c.records = records_;
    c.read_s = (s1.read_s - s0_.read_s) / n;
    c.decode_s = (s1.decode_s - s0_.decode_s) / n;
    c.transform_s = (s1.transform_s - s0_.transform_s) / n;
    c.per_sample_s = c.read_s + c.decode_s + c.transform_s;
    c.rate = quantile(rates_, 0.5);
    c.rate_lo = quantile(rates_, 0.25);
    c.rate_hi = quantile(rates_, 0.75);
    c.rounds = static_cast<int>(rates_.size());
    if (s1.cache_records) {
      c.cache_bytes_per_sample = static_cast<double>(s1.cache_bytes) / static_cast<double>(s1.cache_records);
    }
    return c;
  }

 private:
  // The consumer's step after a batch: a busy wait (CPU work) or a sleep;
  // or, split, its CPU work on the thread's CPU clock and then its sleep.
  void step(std::size_t n) const {
    if (consumer_.split) {
      const double cpu = consumer_.cpu_per_sample_s * static_cast<double>(n);
      if (cpu > 0) {
        const double c0 = thread_cpu_s();
        while (thread_cpu_s() - c0 < cpu) {
        }
      }
      const double sleep = consumer_.sleep_per_sample_s * static_cast<double>(n);
      if (sleep > 0) std::this_thread::sleep_for(std::chrono::duration<double>(sleep));
      return;
    }
    const double s = consumer_.step_per_sample_s * static_cast<double>(n);
    if (s <= 0) return;
    const auto t = Clock::now();
    if (!consumer_.busy) {
      std::this_thread::sleep_for(std::chrono::duration<double>(s));
      return;
    }
    while (since(t) < s) {
    }
  }
  Consumer consumer_;
  std::size_t records_;
  std::unique_ptr<Loader> loader_;
  Stats s0_;
  std::vector<double> rates_;
};

// Round-robin over the arms (arm 0 as configured), each round a whole number
// of epochs of at least kProbeRoundSeconds per arm, until kProbeMinRounds
// rounds and kProbeMinSeconds, or kProbeMaxSeconds. Each changed arm's ratio
// to arm 0 is taken round by round, so the machine's drift cancels.
std::vector<Cost> interleave(std::vector<std::unique_ptr<Arm>>& arms, std::vector<Cost> out) {
  std::vector<std::size_t> live;
  for (std::size_t i = 0; i < arms.size(); ++i) {
    if (!arms[i]) continue;
    try {
      arms[i]->warm();
      live.push_back(i);
    } catch (const std::exception& e) {
      out[i].error = e.what();
      arms[i].reset();
    }
  }
  if (!arms[0]) return out;
  const std::vector<double>& base = arms[0]->rates();
  auto ratios = [&](std::size_t i) {
    std::vector<double> q;
    for (std::size_t r = 0; r < base.size() && r < arms[i]->rates().size(); ++r) {
      if (base[r] > 0) q.push_back(arms[i]->rates()[r] / base[r]);
    }
    return q;
  };
  auto se = [](const std::vector<double>& v) {
    return v.empty() ? 1.0
                     : relative_se(quantile(v, 0.5), quantile(v, 0.25), quantile(v, 0.75), static_cast<int>(v.size()));
  };
  // Every median known well enough: each loader's rate, each change's ratio.
  auto settled = [&] {
    for (std::size_t i : live) {
      if (se(arms[i]->rates()) > kProbeTargetSe || (i > 0 && se(ratios(i)) > kProbeTargetSe)) return false;
    }
    return true;
  };
  const auto t0 = Clock::now();
  double runnable = 0;
  int runnable_n = 0;
  for (int r = 0; r < kProbeMaxRounds; ++r) {
    for (std::size_t i : live) {
      arms[i]->round(kProbeRoundSeconds);
      if (const double x = others_runnable_now(); x >= 0) {
        runnable += x;
        ++runnable_n;
      }
    }
    if (since(t0) >= kProbeMaxSeconds) break;
    if (r + 1 >= kProbeMinRounds && since(t0) >= kProbeMinSeconds && settled()) break;
  }
  for (std::size_t i : live) {
    const double seconds = out[i].seconds;
    out[i] = arms[i]->cost();
    out[i].seconds = seconds + since(t0);
    out[i].others_runnable = runnable_n > 0 ? runnable / runnable_n : -1;
    const std::vector<double> q = ratios(i);
    if (!q.empty()) {
      out[i].ratio = quantile(q, 0.5);
      out[i].ratio_lo = quantile(q, 0.25);
      out[i].ratio_hi = quantile(q, 0.75);
    }
  }
  return out;
}

// The sample's records packed once into a temporary shard (stoker pack
// --max-side, or --lossless when max_side is 0). Image folders and list files only.
std::vector<std::string> pack_sample(const Source& all, const SubsetSource& subset, int max_side, const std::string& dir) {
  if (all.shard_starts().size() > 0) throw std::runtime_error("the records are already in shards");
  std::ofstream list(dir + "/records.csv");
  for (std::size_t i = 0; i < subset.size(); ++i) {
    list << fs::absolute(subset.key(i)).string() << "," << std::max<std::int64_t>(0, subset.label(i)) << "\n";
  }
  list.close();
  PackOptions p;
  p.out_pattern = dir + "/packed-%04d.tar";
  p.shard_count = 1;
  p.max_side = max_side;
  p.lossless = max_side == 0;
  p.threads = 0;
  PackResult r = pack(dir + "/records.csv", p);
  if (r.shards.empty()) throw std::runtime_error("packing the sample wrote no shard");
  return r.shards;
}

}  // namespace

double others_runnable_now() {
  std::ifstream stat("/proc/stat");
  int running = -1;
  for (std::string line; std::getline(stat, line);) {
    if (line.rfind("procs_running ", 0) == 0) {
      running = std::atoi(line.c_str() + 14);
      break;
    }
  }
  if (running < 0) return -1;
  int ours = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc/self/task", ec)) {
    std::ifstream f(e.path() / "stat");
    std::string st((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const auto c = st.rfind(')');
    if (c != std::string::npos && c + 2 < st.size() && st[c + 2] == 'R') ++ours;
  }
  return std::max(0, running - ours);
}

double relative_se(double median, double q1, double q3, int rounds) {
  if (median <= 0 || rounds <= 0) return 1.0;
  return (q3 - q1) / 1.35 / std::sqrt(static_cast<double>(rounds)) / median;
}

std::vector<std::size_t> sample_records(std::size_t n, std::size_t max_records) {
  const std::size_t m = std::min(n, max_records);
  std::vector<std::size_t> out(m);
  for (std::size_t j = 0; j < m; ++j) out[j] = j * n / m;
  return out;
}

LoaderSetup setup_from_snapshot(const nlohmann::json& snap) {
  LoaderSetup s;
  if (snap.contains("mixture")) {
    s.mixture = snap["mixture"].dump();
  } else if (!snap.contains("sources") || snap["sources"].empty()) {
    throw std::runtime_error("the loader was created from a Source object; its records cannot be reopened");
  } else {
    s.sources = snap["sources"].get<std::vector<std::string>>();
  }
  // Every option the user ran with (labels, decode_scale, layout, cache_max_side, ...).
  s.options = options_from_json(snap.contains("options") ? snap["options"].dump() : "{}");
  if (snap.value("arrays", false)) s.options.kind = SampleKind::kArray;
  return s;
}

const char* change_name(Change c) {
  switch (c) {
    case Change::kNone: return "as configured";
    case Change::kDecoded: return "cache=\"decoded\"";
    case Change::kUInt8: return "dtype=\"uint8\"";
    case Change::kPacked256: return "packed at --max-side 256";
    case Change::kLossless: return "packed --lossless";
  }
  return "?";
}

std::vector<Cost> measure(const LoaderSetup& setup, const std::vector<Change>& changes, std::size_t max_records,
                          int threads) {
  std::vector<Cost> out(changes.size() + 1);
  try {
    TempDir idx("stoker-probe-idx");  // NOTE: a stale index is rebuilt here, never beside the user's shards
    TempDir tmp("stoker-probe");
    std::shared_ptr<const Source> all =
        setup.mixture.empty()
            ? std::shared_ptr<const Source>(open_sources(setup.sources, setup.options.labels, idx.path(), setup.options.coco))
            : std::make_shared<MixtureSource>(mixture_from_json(setup.mixture), setup.options.labels, idx.path());
    auto subset = std::make_shared<SubsetSource>(all, max_records);
    std::vector<std::unique_ptr<Arm>> arms(out.size());
    arms[0] = std::make_unique<Arm>(subset, setup.options, threads, setup.consumer);
    for (std::size_t i = 0; i < changes.size(); ++i) {
      Cost& c = out[i + 1];
      const auto t = Clock::now();  // packing counts in the probe's time
      try {
        LoaderOptions o = setup.options;
        std::shared_ptr<const Source> src = subset;
        switch (changes[i]) {
          case Change::kNone: break;
          case Change::kDecoded: o.cache.mode = Cache::kDecoded; break;
          case Change::kUInt8:
            o.dtype = DType::kUInt8;
            std::erase_if(o.transforms, [](const Transform& x) { return std::holds_alternative<Normalize>(x); });
            break;
          case Change::kPacked256:
          case Change::kLossless: {
            const std::string dir = tmp.path() + "/" + std::to_string(i);
            fs::create_directories(dir);
            src = std::shared_ptr<const Source>(
                open_shards(pack_sample(*all, *subset, changes[i] == Change::kLossless ? 0 : 256, dir)));
            o.cache.mode = Cache::kMmap;
            break;
          }
        }
        arms[i + 1] = std::make_unique<Arm>(src, o, threads, setup.consumer);
      } catch (const std::exception& e) {
        c.error = e.what();
      }
      c.seconds = since(t);
    }
    return interleave(arms, std::move(out));
  } catch (const std::exception& e) {
    for (Cost& c : out) c.error = e.what();
  }
  return out;
}

Cost measure(const LoaderSetup& setup, std::size_t max_records, int threads) {
  return measure(setup, {}, max_records, threads)[0];
}

LoaderSetup files_setup(const std::vector<std::string>& files, const std::string& transforms, const std::string& dir) {
  if (files.empty()) throw std::runtime_error("no files");
  const std::string path = dir + "/records.csv";
  std::ofstream list(path);
  for (const auto& f : files) list << f << ",0\n";
  list.close();
  if (!list) throw std::runtime_error("cannot write " + path);
  LoaderSetup s;
  s.sources = {path};
  LoaderOptions& o = s.options;
  o.batch_size = 64;
  o.transforms = {RandomResizedCrop{}, RandomHorizontalFlip{},
                  Normalize{{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}}};
  if (!transforms.empty()) {
    // The options codec reads the script's pipeline as it reads a loader's snapshot.
    const LoaderOptions theirs = options_from_json(transforms);
    o.transforms = theirs.transforms;
    o.dtype = theirs.dtype;
    o.layout = theirs.layout;
  }
  return s;
}

Cost measure_files(const std::vector<std::string>& files, int threads, const std::string& transforms,
                   const Consumer& consumer, std::size_t batch_size) {
  Cost c;
  try {
    TempDir tmp("stoker-probe");
    LoaderSetup s = files_setup(files, transforms, tmp.path());
    if (batch_size > 0) s.options.batch_size = batch_size;
    std::vector<std::unique_ptr<Arm>> arms;
    arms.push_back(std::make_unique<Arm>(std::shared_ptr<const Source>(open_list_file(s.sources.at(0))), s.options,
                                         threads, consumer));
    return interleave(arms, std::vector<Cost>(1))[0];
  } catch (const std::exception& e) {
    c.error = e.what();
  }
  return c;
}

}  // namespace stoker::doctor
