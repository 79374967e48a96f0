// stoker bench SOURCE: loader throughput in C++ (no Python), per thread count.
#include <algorithm>
#include <chrono>
#include <fstream>
#include <thread>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "commands.h"
#include "doctor/html.h"
#include "doctor/sweep.h"
#include "stoker/loader.h"
#include "stoker/names.h"

namespace stoker::cli {
namespace {

struct BenchArgs {
  std::string source;
  std::size_t batch_size = 64;
  std::vector<int> threads{0};
  int epochs = 2;
  int size = 224;
  std::string pipeline = "train";
  std::string dtype = "float32";
  std::string sweep;  // "threads": throughput by thread count and cache mode
  std::string html;
  std::size_t records = 512;
};

// The dtypes' names (stoker/names.h), for --dtype.
std::vector<std::string> dtype_names() {
  std::vector<std::string> out;
  for (const auto& [value, name] : EnumNames<DType>::kNames) out.push_back(name);
  return out;
}

LoaderOptions options_for(const BenchArgs& a) {
  LoaderOptions o;
  o.batch_size = a.batch_size;
  o.shuffle = true;
  o.dtype = parse<DType>(a.dtype, "--dtype");
  if (a.pipeline == "train") {
    o.transforms.emplace_back(RandomResizedCrop{a.size, a.size});
    o.transforms.emplace_back(RandomHorizontalFlip{});
  } else {
    o.transforms.emplace_back(Resize{a.size * 8 / 7, 0, 0});
    o.transforms.emplace_back(CenterCrop{a.size, a.size});
  }
  if (o.dtype == DType::kFloat32) o.transforms.push_back(Normalize{{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}});
  return o;
}

// --sweep threads: 1..cores threads x cache modes on a sample of the source,
// a warm-up epoch then a timed epoch each (the doctor's measurement).
void run_sweep(const BenchArgs& a) {
  doctor::LoaderSetup setup;
  setup.sources = {a.source};
  setup.options = options_for(a);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::printf("stoker bench --sweep threads: %s, %zu records (spread over the source), batch %zu, %s %s\n",
              a.source.c_str(), a.records, a.batch_size, a.pipeline.c_str(), a.dtype.c_str());
  auto points = doctor::sweep(setup, a.records, cores, {Cache::kMmap, Cache::kRam, Cache::kDecoded});
  std::printf("%s", doctor::sweep_table(points).c_str());
  if (!a.html.empty()) {
    std::ofstream f(a.html);
    f << doctor::html_page("stoker bench --sweep threads",
                           "<h1>stoker bench --sweep threads</h1><p><code>" + doctor::html_escape(a.source) + "</code>, " +
                               std::to_string(a.records) + " records</p>" +
                               doctor::sweep_chart(points, "Throughput by threads and cache mode") + "<pre>" +
                               doctor::html_escape(doctor::sweep_table(points)) + "</pre>");
    if (!f) throw Error(Code::kIOError, "cannot write " + a.html);
    std::printf("chart: %s\n", a.html.c_str());
  }
}

void run(const BenchArgs& a) {
  std::printf("| threads | images/s | read s | decode s | transform s | consumer wait s | first batch s |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|\n");
  for (int threads : a.threads) {
    LoaderOptions o = options_for(a);
    o.threads = threads;
    Loader loader(a.source, o);
    for (const Batch& b : loader) (void)b;  // warm-up epoch
    Stats before = loader.stats();
    auto t0 = std::chrono::steady_clock::now();
    std::size_t images = 0;
    for (int e = 0; e < a.epochs; ++e) {
      for (const Batch& b : loader) images += b.size();
    }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    Stats st = loader.stats();
    std::printf("| %d | %.0f | %.2f | %.2f | %.2f | %.2f | %.3f |\n", st.threads, static_cast<double>(images) / s,
                st.read_s - before.read_s, st.decode_s - before.decode_s, st.transform_s - before.transform_s,
                st.consumer_wait_s - before.consumer_wait_s, st.time_to_first_batch_s);
    if (st.corrupt) std::printf("  (%llu corrupt samples skipped)\n", static_cast<unsigned long long>(st.corrupt));
  }
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  auto* cmd = app.add_subcommand("bench", "Measure loader throughput (C++ consumer, no model) per thread count");
  cmd->add_option("source", a->source, "ImageFolder directory or list file")->required();
  cmd->add_option("-b,--batch-size", a->batch_size, "samples per batch")->capture_default_str();
  cmd->add_option("-t,--threads", a->threads, "thread counts to sweep (0 = one per core)")->capture_default_str();
  cmd->add_option("-e,--epochs", a->epochs, "timed epochs after one warm-up epoch")->capture_default_str();
  cmd->add_option("-s,--size", a->size, "output size")->capture_default_str();
  cmd->add_option("-p,--pipeline", a->pipeline,
                  "train: RandomResizedCrop+flip(+Normalize); val: Resize+CenterCrop(+Normalize)")
      ->check(CLI::IsMember({"train", "val"}))
      ->capture_default_str();
  cmd->add_option("--dtype", a->dtype, "float32 or uint8")->check(CLI::IsMember(dtype_names()))->capture_default_str();
  cmd->add_option("--sweep", a->sweep, "threads: throughput by thread count (1..cores) and cache mode (mmap, ram, "
                                      "decoded) on --records records")
      ->check(CLI::IsMember({"threads"}));
  cmd->add_option("--records", a->records, "--sweep: records sampled from the source")->capture_default_str();
  cmd->add_option("--html", a->html, "--sweep: also write the chart as a self-contained HTML page");
  cmd->callback([a] {
    if (a->sweep.empty()) {
      run(*a);
    } else {
      run_sweep(*a);
    }
  });
}

}  // namespace stoker::cli
