// Iterates one epoch of an image folder (or list file, or shards) with
// stoker's C++ API and prints what it got: the smallest program built
// against an installed stoker (find_package or pkg-config).
#include <cstdint>
#include <cstdio>
#include <exception>
#include <vector>

#include "stoker/stoker.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s SOURCE\n", argv[0]);
    return 2;
  }
  try {
    stoker::LoaderOptions opt;
    opt.batch_size = 4;
    opt.threads = 2;
    opt.transforms = {stoker::RandomResizedCrop{32, 32}, stoker::RandomHorizontalFlip{},
                      stoker::Normalize{{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}}};
    stoker::Loader loader(argv[1], opt);
    std::size_t samples = 0;
    long long label_sum = 0;
    for (const stoker::Batch& b : loader) {
      const std::vector<std::int64_t>& s = b.tensor("image")->dims;
      const auto* labels = static_cast<const std::int64_t*>(b.tensor("label")->data);
      std::printf("batch %zu: %lld x %lld x %lld x %lld\n", b.index(), static_cast<long long>(s[0]),
                  static_cast<long long>(s[1]), static_cast<long long>(s[2]), static_cast<long long>(s[3]));
      for (std::size_t i = 0; i < b.size(); ++i) label_sum += labels[i];
      samples += b.size();
    }
    std::printf("%zu samples, label sum %lld, %s (stoker %s)\n", samples, label_sum,
                loader.source().describe().c_str(), STOKER_VERSION);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
