// stoker bench SOURCE: loader throughput in C++ (no Python), per thread count.
#include <chrono>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "commands.h"
#include "stoker/loader.h"

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
};

void run(const BenchArgs& a) {
  std::printf("| threads | images/s | read s | decode s | transform s | consumer wait s | first batch s |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|\n");
  for (int threads : a.threads) {
    LoaderOptions o;
    o.batch_size = a.batch_size;
    o.shuffle = true;
    o.threads = threads;
    o.dtype = a.dtype == "uint8" ? DType::kUInt8 : DType::kFloat32;
    if (a.pipeline == "train") {
      o.transforms.emplace_back(RandomResizedCrop{a.size, a.size});
      o.transforms.emplace_back(RandomHorizontalFlip{});
    } else {
      o.transforms.emplace_back(Resize{a.size * 8 / 7, 0, 0});
      o.transforms.emplace_back(CenterCrop{a.size, a.size});
    }
    if (o.dtype == DType::kFloat32) o.transforms.push_back(Normalize{{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}});
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
  cmd->add_option("--dtype", a->dtype, "float32 or uint8")->check(CLI::IsMember({"float32", "uint8"}))->capture_default_str();
  cmd->callback([a] { run(*a); });
}

}  // namespace stoker::cli
