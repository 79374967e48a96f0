// stoker inspect PATH...: what a data set holds. stoker verify PATH...: does
// every record decode?
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "commands.h"
#include "decode/decode.h"
#include "order/order.h"
#include "progress.h"
#include "source/file_reader.h"
#include "source/shard_source.h"
#include "source/tar.h"
#include "stoker/source.h"
#include "util/thread.h"

namespace stoker::cli {
namespace {

// One bar per bucket.
void print_histogram(const char* title, const std::vector<std::string>& names, const std::vector<std::uint64_t>& counts) {
  std::printf("%s\n", title);
  std::uint64_t max = 1;
  for (auto c : counts) max = std::max(max, c);
  for (std::size_t i = 0; i < counts.size(); ++i) {
    std::printf("  %-14s %8llu %s\n", names[i].c_str(), static_cast<unsigned long long>(counts[i]),
                std::string(static_cast<std::size_t>(40 * counts[i] / max), '#').c_str());
  }
}

std::size_t bucket(std::uint64_t v, const std::vector<std::uint64_t>& edges) {
  std::size_t b = 0;
  while (b + 1 < edges.size() && v >= edges[b + 1]) ++b;
  return b;
}

// The records in index order (an unshuffled one-rank epoch: a view, no list).
detail::RankOrder record_order(std::size_t n) {
  detail::OrderParams p;
  p.dataset_size = n;
  return detail::RankOrder(p, 0, {});
}

void inspect(const std::vector<std::string>& paths) {
  auto src = open_sources(paths);
  std::printf("%s\n", src->describe().c_str());
  std::map<std::int64_t, std::uint64_t> per_label;
  const std::vector<std::uint64_t> side_edges{0, 128, 256, 384, 512, 1024};
  const std::vector<std::string> side_names{"< 128", "128-255", "256-383", "384-511", "512-1023", ">= 1024"};
  const std::vector<std::uint64_t> byte_edges{0, 16 << 10, 64 << 10, 128 << 10, 256 << 10, 1 << 20};
  const std::vector<std::string> byte_names{"< 16 KB", "16-64 KB", "64-128 KB", "128-256 KB", "256 KB-1 MB", ">= 1 MB"};
  std::vector<std::uint64_t> sides(side_edges.size()), bytes(byte_edges.size());
  std::map<std::string, std::uint64_t> bad;
  std::vector<std::uint8_t> buf;
  detail::ImageDecoder dec;
  std::uint64_t total_bytes = 0, total_px = 0, good = 0;
  // Remote shards stream in record order, each released once read through.
  if (src->wants_plan()) src->plan(record_order(src->size()), 0);
  for (std::size_t i = 0; i < src->size(); ++i) {
    if (src->wants_plan() && i % 64 == 0) src->progress(i);
    per_label[src->label(i)]++;
    Status s = src->read(i, &buf);
    if (s.ok()) s = dec.open(buf.data(), buf.size(), 1ull << 40);
    if (!s.ok()) {
      bad[code_name(s.code())]++;
      continue;
    }
    ++good;
    total_bytes += buf.size();
    total_px += static_cast<std::uint64_t>(dec.width()) * static_cast<std::uint64_t>(dec.height());
    sides[bucket(static_cast<std::uint64_t>(std::min(dec.width(), dec.height())), side_edges)]++;
    bytes[bucket(buf.size(), byte_edges)]++;
  }
  std::printf("records: %zu (%llu readable); mean %.1f KB, %.3f megapixels\n", src->size(),
              static_cast<unsigned long long>(good), good ? static_cast<double>(total_bytes) / good / 1e3 : 0.0,
              good ? static_cast<double>(total_px) / good / 1e6 : 0.0);
  for (const auto& [k, v] : bad) std::printf("  unreadable (%s): %llu\n", k.c_str(), static_cast<unsigned long long>(v));
  std::printf("classes: %zu\n", per_label.size());
  for (const auto& [label, n] : per_label) {
    std::string name = label >= 0 && static_cast<std::size_t>(label) < src->classes().size()
                           ? src->classes()[static_cast<std::size_t>(label)]
                           : "";
    std::printf("  %6lld %-24s %llu\n", static_cast<long long>(label), name.c_str(), static_cast<unsigned long long>(n));
  }
  print_histogram("shorter image side (px):", side_names, sides);
  print_histogram("file size:", byte_names, bytes);
  // Shards: members per sample and shard sizes, from the tar itself.
  std::map<std::size_t, std::uint64_t> members_per_sample;
  std::map<std::string, std::uint64_t> members_by_suffix;
  std::vector<std::string> shards;
  for (const auto& p : paths) {
    if (!detail::looks_like_shards(p)) continue;
    for (const auto& s : detail::expand_shard_spec(p)) shards.push_back(s);
  }
  if (shards.empty()) {
    // A list file's columns, a COCO file's members: the same for every record.
    const std::vector<std::string> members = src->size() ? src->members(0) : std::vector<std::string>{};
    if (!members.empty()) {
      std::string list;
      for (const auto& m : members) list += (list.empty() ? "" : ", ") + m;
      std::printf("members of each record (beside its image): %s\n", list.c_str());
    }
    return;
  }
  std::printf("shards: %zu\n", shards.size());
  for (const auto& path : shards) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || ::fstat(fd, &st) != 0) {
      if (fd >= 0) ::close(fd);
      std::printf("  %-40s cannot be read\n", path.c_str());
      continue;
    }
    auto read_at = [fd](std::uint8_t* b, std::size_t n, std::uint64_t off) { return detail::pread_full(fd, b, n, off); };
    std::vector<detail::TarMember> members;
    Status s = detail::scan_tar(read_at, static_cast<std::uint64_t>(st.st_size), path, &members);
    ::close(fd);
    std::size_t samples = 0, run = 0;
    std::string last;
    for (const auto& m : members) {
      std::string key, suffix;
      if (!detail::split_key(m.name, &key, &suffix)) continue;
      if (key != last && run) {
        members_per_sample[run]++;
        ++samples;
        run = 0;
      }
      last = key;
      ++run;
      members_by_suffix[suffix]++;
    }
    if (run) {
      members_per_sample[run]++;
      ++samples;
    }
    std::printf("  %-40s %10.1f MB %8zu samples%s\n", path.c_str(), static_cast<double>(st.st_size) / 1e6, samples,
                s.ok() ? "" : ("  DAMAGED: " + s.message()).c_str());
  }
  std::printf("members per sample:\n");
  for (const auto& [k, v] : members_per_sample) {
    std::printf("  %zu: %llu samples\n", k, static_cast<unsigned long long>(v));
  }
  std::printf("members by suffix (samples holding one):\n");
  for (const auto& [k, v] : members_by_suffix) {
    std::printf("  .%-22s %llu\n", k.c_str(), static_cast<unsigned long long>(v));
  }
}

int verify(const std::vector<std::string>& paths, int threads) {
  auto src = open_sources(paths);
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::atomic<std::size_t> next{0}, done{0};
  std::mutex mu;
  std::vector<std::pair<std::size_t, std::string>> bad;
  const auto t0 = std::chrono::steady_clock::now();
  // Remote shards stream in record order; a shard is released once every
  // thread is past its records (the lowest record a thread holds).
  if (src->wants_plan()) src->plan(record_order(src->size()), 0);
  std::vector<std::atomic<std::size_t>> holding(static_cast<std::size_t>(threads));
  for (auto& h : holding) h = 0;
  std::vector<std::thread> pool;
  // A thread that stopped (an exception outside a record): the others finish
  // the records, and verify fails with its message.
  std::atomic<bool> died{false};
  std::string why_died;  // under mu
  for (int t = 0; t < threads; ++t) {
    pool.push_back(detail::spawn("stoker-verify", detail::Priority::kNormal, [&, t] {
      std::vector<std::uint8_t> buf;
      detail::ImageDecoder dec;
      detail::ImageBuffer img;
      detail::ImageView view;
      for (std::size_t i; (i = next.fetch_add(1)) < src->size(); done.fetch_add(1)) {
        holding[static_cast<std::size_t>(t)] = i;
        Status s;
        try {  // an exception on a record (out of memory, a bug) makes it a bad one
          s = src->read(i, &buf);
          if (s.ok()) s = dec.open(buf.data(), buf.size(), 178956970);
          if (s.ok()) s = dec.decode({0, 0, dec.width(), dec.height()}, &img, &view);
        } catch (...) {
          s = detail::exception_status("verify");
        }
        if (!s.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          bad.emplace_back(i, s.to_string());
        }
      }
      holding[static_cast<std::size_t>(t)] = SIZE_MAX;
    }, [&](const Status& st) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (why_died.empty()) why_died = st.to_string();
      }
      died = true;
    }));
  }
  Progress progress("verify");
  for (;;) {
    const std::size_t d = done.load();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    progress.update(d, src->size(), secs, "");
    if (d >= src->size() || died) break;
    if (src->wants_plan()) {
      std::size_t low = SIZE_MAX;
      for (const auto& h : holding) low = std::min<std::size_t>(low, h);
      src->progress(std::min(low, next.load()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  for (auto& t : pool) t.join();
  if (died) throw Error(Code::kInternal, "verify: a thread stopped: " + why_died);
  std::sort(bad.begin(), bad.end());
  for (const auto& [i, why] : bad) std::printf("BAD record %zu '%s': %s\n", i, src->key(i).c_str(), why.c_str());
  std::printf("verify: %zu records, %zu bad\n", src->size(), bad.size());
  return bad.empty() ? 0 : 1;
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  auto paths = std::make_shared<std::vector<std::string>>();
  auto* cmd = app.add_subcommand("inspect", "Records, classes, image and file size histograms, shard contents");
  cmd->add_option("paths", *paths, "image folder, list file, or tar shards (paths, brace patterns, globs)")
      ->required();
  cmd->callback([paths] { inspect(*paths); });
}

void add_verify_command(CLI::App& app) {
  auto paths = std::make_shared<std::vector<std::string>>();
  auto threads = std::make_shared<int>(0);
  auto* cmd = app.add_subcommand("verify", "Decode every record on all cores; list bad ones; exit 1 if any");
  cmd->add_option("paths", *paths, "image folder, list file, or tar shards")->required();
  cmd->add_option("--threads", *threads, "threads (0 = one per core)");
  cmd->callback([paths, threads] {
    int rc = verify(*paths, *threads);
    if (rc) throw ExitCode{rc};
  });
}

}  // namespace stoker::cli
