#include "doctor/probe.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>

#include "doctor/temp_dir.h"
#include "stoker/loader.h"
#include "stoker/pack.h"
#include "stoker/source.h"

namespace stoker::doctor {
namespace {

namespace fs = std::filesystem;

// Every k-th record of a source.
class SubsetSource : public Source {
 public:
  SubsetSource(std::shared_ptr<const Source> inner, std::size_t max_records) : inner_(std::move(inner)) {
    const std::size_t n = inner_->size();
    const std::size_t k = std::max<std::size_t>(1, n / std::max<std::size_t>(1, max_records));
    for (std::size_t i = 0; i < n && index_.size() < max_records; i += k) index_.push_back(i);
  }
  std::size_t size() const override { return index_.size(); }
  const std::string& key(std::size_t i) const override { return inner_->key(index_[i]); }
  std::int64_t label(std::size_t i) const override { return inner_->label(index_[i]); }
  Status read(std::size_t i, std::vector<std::uint8_t>* out) const override { return inner_->read(index_[i], out); }
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

Cost run(std::shared_ptr<const Source> source, LoaderOptions o, int threads, const Consumer& consumer) {
  Cost c;
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  auto since = [](clock::time_point t) { return std::chrono::duration<double>(clock::now() - t).count(); };
  try {
    for (std::size_t i = 0; i < source->size(); ++i) {  // NOTE: a pipe's writer may be gone: reading would block
      struct stat st;
      if (::stat(source->key(i).c_str(), &st) == 0 && S_ISFIFO(st.st_mode)) {
        throw std::runtime_error("record '" + source->key(i) + "' is a pipe, which cannot be read again");
      }
    }
    o.threads = std::max(1, threads);
    o.prefetch = 0;
    o.shuffle = true;
    o.rank = 0;
    o.world_size = 1;
    o.drop_last = false;
    o.trace = false;
    // The warm-up epoch fills a "ram" cache; a background preload would only
    // compete with the epochs being timed (and print progress).
    o.preload = false;
    o.progress = Progress::kOff;
    o.stage_timing = true;
    o.batch_size = std::min<std::size_t>(o.batch_size, std::max<std::size_t>(1, source->size() / 4));
    Loader loader(source, o);
    // The consumer's step after each batch: a busy wait (CPU work) or a sleep.
    auto step = [&](std::size_t n) {
      const double s = consumer.step_per_sample_s * static_cast<double>(n);
      if (s <= 0) return;
      const auto t = clock::now();
      if (!consumer.busy) {
        std::this_thread::sleep_for(std::chrono::duration<double>(s));
        return;
      }
      while (since(t) < s) {
      }
    };
    for (const Batch& b : loader) step(b.size());  // warm-up (fills a cache)
    const Stats s0 = loader.stats();
    // Timed: whole epochs until the minimum time, each batch's arrival logged.
    std::vector<std::pair<double, double>> log;  // (seconds since t0, samples so far)
    const auto t0 = clock::now();
    double n = 0;
    log.emplace_back(0.0, 0.0);
    while (true) {
      for (const Batch& b : loader) {
        n += static_cast<double>(b.size());
        log.emplace_back(since(t0), n);
        step(b.size());
        if (since(t0) >= kProbeMaxSeconds) break;
      }
      if (since(t0) >= kProbeMinSeconds) break;
    }
    const Stats s1 = loader.stats();
    const double busy_n = static_cast<double>(s1.samples - s0.samples);
    if (busy_n <= 0 || n <= 0) throw std::runtime_error("no samples");
    // Chunks of equal sample counts: each one's rate.
    std::vector<double> rates;
    std::size_t j = 0;
    for (int k = 1; k <= kProbeChunks; ++k) {
      const double target = n * k / kProbeChunks;
      const std::size_t i0 = j;
      while (j + 1 < log.size() && log[j].second < target) ++j;
      const double dn = log[j].second - log[i0].second, dt = log[j].first - log[i0].first;
      if (dn > 0 && dt > 0) rates.push_back(dn / dt);
    }
    if (rates.empty()) throw std::runtime_error("too few batches to time");
    c.records = source->size();
    c.read_s = (s1.read_s - s0.read_s) / busy_n;
    c.decode_s = (s1.decode_s - s0.decode_s) / busy_n;
    c.transform_s = (s1.transform_s - s0.transform_s) / busy_n;
    c.per_sample_s = c.read_s + c.decode_s + c.transform_s;
    c.rate = quantile(rates, 0.5);
    c.rate_lo = quantile(rates, 0.25);
    c.rate_hi = quantile(rates, 0.75);
    if (s1.cache_records) c.cache_bytes_per_sample = static_cast<double>(s1.cache_bytes) / static_cast<double>(s1.cache_records);
    c.ok = true;
  } catch (const std::exception& e) {
    c.error = e.what();
  }
  c.seconds = since(start);
  return c;
}

}  // namespace

LoaderSetup setup_from_snapshot(const nlohmann::json& snap) {
  LoaderSetup s;
  if (!snap.contains("sources") || snap["sources"].empty()) {
    throw std::runtime_error("the loader was created from a Source object; its records cannot be reopened");
  }
  s.sources = snap["sources"].get<std::vector<std::string>>();
  // Every option the user ran with (labels, decode_scale, layout, cache_max_side, ...).
  s.options = options_from_json(snap.contains("options") ? snap["options"].dump() : "{}");
  if (snap.value("arrays", false)) s.options.kind = SampleKind::kArray;
  return s;
}

Cost measure(const LoaderSetup& setup, std::size_t max_records, int threads) {
  try {
    TempDir idx("stoker-probe-idx");  // NOTE: a stale index is rebuilt here, never beside the user's shards
    std::shared_ptr<const Source> all(open_sources(setup.sources, setup.options.labels, idx.path()));
    return run(std::make_shared<SubsetSource>(all, max_records), setup.options, threads, setup.consumer);
  } catch (const std::exception& e) {
    Cost c;
    c.error = e.what();
    return c;
  }
}

Cost measure_packed(const LoaderSetup& setup, std::size_t max_records, int max_side, int threads) {
  Cost c;
  const auto t_start = std::chrono::steady_clock::now();  // packing counts in the probe's time
  try {
    if (setup.sources.size() != 1) throw std::runtime_error("the records are already in shards");
    TempDir idx("stoker-probe-idx");
    std::shared_ptr<const Source> all(open_source(setup.sources[0], setup.options.labels, idx.path()));
    if (all->shard_starts().size() > 0) throw std::runtime_error("the records are already in shards");
    SubsetSource subset(all, max_records);
    TempDir tmp("stoker-probe");
    std::ofstream list(tmp.path() + "/records.csv");
    for (std::size_t i = 0; i < subset.size(); ++i) {
      list << fs::absolute(subset.key(i)).string() << "," << std::max<std::int64_t>(0, subset.label(i)) << "\n";
    }
    list.close();
    PackOptions p;
    p.out_pattern = tmp.path() + "/packed-%04d.tar";
    p.shard_count = 1;
    p.max_side = max_side;
    p.lossless = max_side == 0;
    p.threads = 0;
    PackResult r = pack(tmp.path() + "/records.csv", p);
    if (r.shards.empty()) throw std::runtime_error("packing the sample wrote no shard");
    LoaderOptions o = setup.options;
    o.cache = Cache::kMmap;
    Cost c2 = run(std::shared_ptr<const Source>(open_shards(r.shards)), o, threads, setup.consumer);
    c2.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
    return c2;
  } catch (const std::exception& e) {
    c.error = e.what();
  }
  return c;
}

Cost measure_files(const std::vector<std::string>& files, int threads) {
  Cost c;
  try {
    if (files.empty()) throw std::runtime_error("no files");
    TempDir tmp("stoker-probe");
    std::ofstream list(tmp.path() + "/records.csv");
    for (const auto& f : files) list << f << ",0\n";
    list.close();
    LoaderOptions o;
    o.batch_size = 64;
    o.transforms = {RandomResizedCrop{}, RandomHorizontalFlip{},
                    Normalize{{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}}};
    return run(std::shared_ptr<const Source>(open_list_file(tmp.path() + "/records.csv")), o, threads, Consumer{});
  } catch (const std::exception& e) {
    c.error = e.what();
  }
  return c;
}

}  // namespace stoker::doctor
