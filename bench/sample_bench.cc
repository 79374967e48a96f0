// Per-sample cost on one thread, without threads, queues or Python: the
// files of a folder held in memory, each planned (RandomResizedCrop(224) +
// flip + Normalize, float32 NCHW, as the loader does), region-decoded and
// transformed into a batch-sized output buffer; beside it, the same files
// fully decoded by stoker's decoder (the work a plain decoder does). Rounds
// alternate so drift on a shared machine hits both alike.
//
//   sample_bench DIR [--rounds R] [--size S] [--decode-scale exact|auto]
// Prints microseconds per image (best round) for: region decode,
// transform (resize + flip + normalize + write), their sum, full decode, and
// full / sum (the per-core speedup over decoding everything). With
// --decode-scale auto the region is DCT-scaled (decode_scale="auto"), and
// the output's distance from the exact output (same crops, uint8) is printed.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "decode/decode.h"
#include "jpeg_files.h"
#include "order/rng.h"
#include "transform/pipeline.h"

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

int main(int argc, char** argv) {
  using namespace stoker;
  using namespace stoker::detail;
  if (argc < 2) {
    std::cerr << "usage: sample_bench DIR [--rounds R] [--size S] [--decode-scale exact|auto]\n";
    return 2;
  }
  int rounds = 7, size = 224;
  bool scale = false;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--rounds") rounds = std::stoi(argv[i + 1]);
    if (std::string(argv[i]) == "--size") size = std::stoi(argv[i + 1]);
    if (std::string(argv[i]) == "--decode-scale") scale = std::string(argv[i + 1]) == "auto";
  }
  const std::vector<std::string> names = bench::jpeg_files(argv[1]);
  if (names.empty()) {
    std::cerr << "sample_bench: no JPEG files under " << argv[1] << "\n";
    return 1;
  }
  std::vector<std::vector<std::uint8_t>> files;
  for (const auto& n : names) files.push_back(bench::read_bytes(n));
  const std::vector<Transform> transforms = {RandomResizedCrop(size), RandomHorizontalFlip(),
                                             Normalize({0.485, 0.456, 0.406}, {0.229, 0.224, 0.225})};
  Pipeline pipeline(transforms, DType::kFloat32, Layout::kNCHW);
  static const std::size_t kBatch = std::getenv("BATCH1") ? 1 : 64;
  std::vector<float> out(kBatch * pipeline.sample_bytes() / sizeof(float));
  ImageDecoder dec;
  ImageBuffer buf;
  Workspace ws;
  SamplePlan plan;
  std::vector<double> t_decode, t_transform, t_full, t_entropy;
  for (int r = 0; r <= rounds; ++r) {  // round 0 warms up
    double dsum = 0, tsum = 0, fsum = 0, esum = 0;
    for (std::size_t i = 0; i < files.size(); ++i) {
      Rng rng(mix_key(0, static_cast<std::uint64_t>(r), i, kStreamTransform));
      auto t0 = Clock::now();
      Status st = dec.open(files[i].data(), files[i].size(), ~0ull);
      pipeline.plan(dec.width(), dec.height(), &rng, &plan, scale);
      ImageView view;
      if (st.ok()) st = dec.decode(plan.decode_region, &buf, &view, plan.scale_eighths);
      dsum += since(t0);
      if (!st.ok()) {
        std::cerr << names[i] << ": " << st.message() << "\n";
        return 1;
      }
      auto t1 = Clock::now();
      pipeline.run(plan, view, &ws, reinterpret_cast<std::uint8_t*>(out.data()) + (i % kBatch) * pipeline.sample_bytes());
      tsum += since(t1);
    }
    for (std::size_t i = 0; i < files.size(); ++i) {
      auto t0 = Clock::now();
      Status st = dec.open(files[i].data(), files[i].size(), ~0ull);
      ImageView view;
      if (st.ok()) st = dec.decode(Box{0, 0, dec.width(), dec.height()}, &buf, &view);
      fsum += since(t0);
      // Only the last row: every row above is skipped, i.e. entropy-decoded
      // without IDCT (plus one iMCU row decoded): what no region can avoid.
      t0 = Clock::now();
      st = dec.open(files[i].data(), files[i].size(), ~0ull);
      if (st.ok()) st = dec.decode(Box{0, dec.height() - 1, dec.width(), 1}, &buf, &view);
      esum += since(t0);
    }
    if (r == 0) continue;
    const double n = static_cast<double>(files.size());
    t_decode.push_back(dsum / n * 1e6);
    t_transform.push_back(tsum / n * 1e6);
    t_full.push_back(fsum / n * 1e6);
    t_entropy.push_back(esum / n * 1e6);
  }
  if (scale) {  // the same crops, exact and scaled, as uint8
    const std::vector<Transform> u8 = {RandomResizedCrop(size), RandomHorizontalFlip()};
    Pipeline p8(u8, DType::kUInt8, Layout::kNHWC);
    std::vector<std::uint8_t> a(p8.sample_bytes()), b(p8.sample_bytes());
    double sum = 0, sq = 0, n = 0;
    int scaled = 0, maxd = 0;
    for (int r = 1; r <= rounds; ++r) {
      for (std::size_t i = 0; i < files.size(); ++i) {
        for (int s8 = 0; s8 < 2; ++s8) {
          Rng rng(mix_key(0, static_cast<std::uint64_t>(r), i, kStreamTransform));
          ImageView view;
          Status st = dec.open(files[i].data(), files[i].size(), ~0ull);
          p8.plan(dec.width(), dec.height(), &rng, &plan, s8 == 1);
          if (st.ok()) st = dec.decode(plan.decode_region, &buf, &view, plan.scale_eighths);
          if (!st.ok()) return 1;
          p8.run(plan, view, &ws, s8 ? b.data() : a.data());
          if (s8 && plan.scale_eighths < 8) ++scaled;
        }
        for (std::size_t k = 0; k < a.size(); ++k) {
          const int d = std::abs(static_cast<int>(a[k]) - static_cast<int>(b[k]));
          sum += d;
          sq += static_cast<double>(d) * d;
          maxd = std::max(maxd, d);
        }
        n += static_cast<double>(a.size());
      }
    }
    std::printf("decode_scale=auto: %d of %zu samples scaled; vs exact (uint8): mean |diff| %.3f, max %d, PSNR %.1f dB\n",
                scaled, static_cast<std::size_t>(rounds) * files.size(), sum / n, maxd,
                10 * std::log10(255.0 * 255.0 / (sq / n)));
  }
  auto best = [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); };
  const double d = best(t_decode), t = best(t_transform), f = best(t_full), e = best(t_entropy);
  std::printf("%s: %zu images, best of %d rounds, us per image (1 thread)\n", argv[1], files.size(), rounds);
  std::printf("| region decode | transform | sample total | full decode | full / total | entropy only (last row) |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|\n");
  std::printf("| %.1f | %.1f | %.1f | %.1f | %.3f | %.1f (%.0f%% of full) |\n", d, t, d + t, f, f / (d + t), e,
              100 * e / f);
  return 0;
}
