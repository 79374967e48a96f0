// The loader's default sample path on one thread, through SampleMaker (no
// workers, queues or Python): a folder source (JPEG image + its class label),
// RandomResizedCrop + RandomHorizontalFlip + Normalize, float32 NCHW, each
// record's sample made into a batch-sized buffer, its scratch charged to a
// memory budget after each as a worker's is. Deterministic, so its
// instruction count under callgrind compares two builds of the sample path:
//
//   valgrind --tool=callgrind build/bench/sample_maker_bench DIR --records 64
//
//   sample_maker_bench DIR [--records N] [--epochs E] [--size S] [--cache mmap|ram|decoded]
// Prints microseconds per sample (best epoch) and a checksum of the outputs.
// The batch buffer comes from the loader's SlotPool, so it is aligned as the
// loader's (2 MiB here): the output writer's streaming stores need 64-byte
// aligned rows, and a std::vector's 16-byte alignment made every store an
// ordinary one (twice the time of the write on this VM: bench/store_floor).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>

#include "batch/slot_pool.h"
#include "cache/sample_cache.h"
#include "sample/sample_maker.h"
#include "stoker/source.h"

int main(int argc, char** argv) {
  using namespace stoker;
  if (argc < 2) {
    std::cerr << "usage: sample_maker_bench DIR [--records N] [--epochs E] [--size S] [--cache mmap|ram|decoded]\n";
    return 2;
  }
  std::size_t records = 0;
  int epochs = 1, size = 224;
  std::string cache = "mmap";
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--records") records = std::stoul(argv[i + 1]);
    if (a == "--epochs") epochs = std::stoi(argv[i + 1]);
    if (a == "--size") size = std::stoi(argv[i + 1]);
    if (a == "--cache") cache = argv[i + 1];
  }
  LoaderOptions o;
  o.batch_size = 64;
  o.threads = 1;
  o.transforms = {RandomResizedCrop(size), RandomHorizontalFlip(),
                  Normalize({0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f})};
  o.cache.mode = cache == "ram" ? Cache::kRam : cache == "decoded" ? Cache::kDecoded : Cache::kMmap;
  std::unique_ptr<Source> src = open_source(argv[1]);
  if (records == 0 || records > src->size()) records = src->size();
  std::unique_ptr<detail::SampleCache> sc;
  if (o.cache.mode != Cache::kMmap) sc = std::make_unique<detail::SampleCache>(src->size(), std::uint64_t{1} << 31);
  detail::SampleMaker maker(*src, o, sc.get());
  detail::Scratch scratch;
  scratch.memory.reset(std::make_shared<detail::MemoryBudget>(std::uint64_t{1} << 40));
  detail::SlotPool pool(maker.spec().batch_bytes);
  std::uint8_t* const batch = pool.acquire()->data.get();
  const std::size_t batch_bytes = maker.spec().batch_bytes;
  double best = 1e300;
  std::uint64_t sum = 0;
  for (int e = 0; e < epochs; ++e) {
    const auto t0 = std::chrono::steady_clock::now();
    for (std::size_t r = 0; r < records; ++r) {
      const Status st = maker.make(static_cast<std::uint32_t>(r), 7, static_cast<std::uint64_t>(e),
                                   {batch, r % o.batch_size}, &scratch);
      if (!st.ok()) {
        std::cerr << "record " << r << ": " << st.message() << "\n";
        return 1;
      }
      scratch.memory.grow_to(scratch.bytes());  // as the loader's run_task
    }
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    for (std::size_t k = 0; k < batch_bytes; k += 61) sum = sum * 31 + batch[k];
  }
  std::printf("%zu records x %d epochs (cache=%s): %.1f us per sample (best epoch); checksum %016llx\n", records,
              epochs, cache.c_str(), best / static_cast<double>(records) * 1e6, static_cast<unsigned long long>(sum));
  return 0;
}
