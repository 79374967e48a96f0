// stoker::pack: read -> decode/resize/encode on N threads -> write shards in order.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <numeric>
#include <optional>
#include <thread>

#include "decode/decode.h"
#include "order/rng.h"
#include "decode/jpeg_transcode.h"
#include "pack/jpeg_encode.h"
#include "source/shard_source.h"
#include "source/tar.h"
#include "stats/json.h"
#include "stoker/pack.h"
#include "stoker/source.h"
#include "transform/pipeline.h"
#include "transform/resize.h"
#include "util/util.h"

namespace fs = std::filesystem;

namespace stoker {
namespace {

using detail::invalid;

// Validates a printf pattern with exactly one integer conversion.
void check_pattern(const std::string& p) {
  int conversions = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (p[i] != '%') continue;
    if (i + 1 < p.size() && p[i + 1] == '%') {
      ++i;
      continue;
    }
    std::size_t j = i + 1;
    while (j < p.size() && (std::isdigit(static_cast<unsigned char>(p[j])) || p[j] == '0')) ++j;
    if (j >= p.size() || (p[j] != 'd' && p[j] != 'u')) invalid("out pattern '" + p + "': only %d-style conversions");
    ++conversions;
    i = j;
  }
  if (conversions != 1) invalid("out pattern '" + p + "' needs exactly one %d (e.g. out/train-%06d.tar)");
}

std::string shard_name(const std::string& pattern, int n) {
  std::string out;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%') {
      out += pattern[i];
      continue;
    }
    if (pattern[i + 1] == '%') {
      out += '%';
      ++i;
      continue;
    }
    std::size_t j = i + 1;
    int width = 0;
    while (std::isdigit(static_cast<unsigned char>(pattern[j]))) width = width * 10 + (pattern[j++] - '0');
    std::string num = std::to_string(n);
    if (static_cast<int>(num.size()) < width) num.insert(0, static_cast<std::size_t>(width) - num.size(), '0');
    out += num;
    i = j;
  }
  return out;
}

struct Item {
  Status status;
  std::string ext;
  std::vector<std::uint8_t> bytes;
  std::string json;
  std::uint64_t bytes_in = 0;
  bool resized = false, kept = false;
};

struct Worker {
  std::vector<std::uint8_t> file;
  detail::ImageDecoder decoder;
  detail::ImageBuffer decoded, resized;
  detail::ResizeScratch scratch;
  detail::JpegEncoder encoder;
  detail::JpegTranscoder transcoder;
};

void make_item(const Source& src, std::uint32_t rec, const PackOptions& o, Worker* w, Item* it) {
  it->status = src.read(rec, &w->file);
  it->bytes_in = w->file.size();
  if (!it->status.ok()) return;
  it->status = w->decoder.open(w->file.data(), w->file.size(), /*max_pixels=*/178956970);
  if (!it->status.ok()) return;
  const int W = w->decoder.width(), H = w->decoder.height();
  const bool resize = o.max_side > 0 && std::min(W, H) > o.max_side;
  int ow = W, oh = H;
  if (resize) detail::resize_output_size(Resize{o.max_side, 0, 0}, W, H, &ow, &oh);
  it->json = "{\"path\": " + detail::json_quote(src.key(rec)) + ", \"width\": " + std::to_string(W) +
             ", \"height\": " + std::to_string(H) + ", \"label\": " + std::to_string(src.label(rec)) + "}";
  if ((o.keep || o.lossless) && !resize) {
    it->kept = true;
    // NOTE: a JPEG libjpeg cannot rewrite is copied as it is (still lossless).
    if (!o.lossless || !o.restart_markers || w->decoder.format() != detail::Format::kJpeg ||
        !w->transcoder.to_restart_grid(w->file.data(), w->file.size(), &it->bytes).ok()) {
      it->bytes.assign(w->file.begin(), w->file.end());
    }
    it->ext = detail::format_info(w->decoder.format()).suffixes.front();
    // NOTE: verify the kept bytes decode, so that a pack never carries a
    // corrupt record the loader would trip on.
  }
  detail::ImageView view;
  it->status = w->decoder.decode({0, 0, W, H}, &w->decoded, &view);
  if (!it->status.ok() || it->kept) return;
  if (resize) {
    detail::resize_bilinear(view, ow, oh, &w->scratch, &w->resized);
    view = w->resized.view();
    it->resized = true;
  }
  if (o.raw) {
    detail::encode_npy(view, &it->bytes);
    it->ext = "npy";
  } else {
    it->status = w->encoder.encode(view, o.quality, o.subsampling, o.restart_markers, &it->bytes);
    it->ext = "jpg";
  }
}

}  // namespace

PackResult pack(const std::string& source, const PackOptions& o) {
  check_pattern(o.out_pattern);
  if (o.quality < 1 || o.quality > 100) invalid("quality must be in [1, 100], got " + std::to_string(o.quality));
  if (o.subsampling != 444 && o.subsampling != 420) {
    invalid("subsampling must be 444 or 420, got " + std::to_string(o.subsampling));
  }
  if (o.raw && o.keep) invalid("--raw and --keep exclude each other (raw stores decoded pixels)");
  if (o.raw && o.lossless) invalid("--raw and --lossless exclude each other (raw stores decoded pixels)");
  if (o.keep && o.lossless) invalid("--keep and --lossless exclude each other (--keep copies the bytes as they are)");
  if (o.max_side < 0) invalid("max_side must be >= 0, got " + std::to_string(o.max_side));
  if (o.shard_count < 0) invalid("shard_count must be >= 0, got " + std::to_string(o.shard_count));
  if (o.shard_size == 0) invalid("shard_size must be > 0");
  if (o.threads < 0) invalid("threads must be >= 0, got " + std::to_string(o.threads));

  const auto t0 = std::chrono::steady_clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  std::unique_ptr<Source> src = open_source(source);
  const std::size_t n = src->size();
  std::vector<std::uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  if (o.shuffle_seed >= 0) {
    detail::Rng rng(detail::mix_key(static_cast<std::uint64_t>(o.shuffle_seed), 0, detail::kStreamOrder, 1));
    for (std::size_t i = n; i-- > 1;) std::swap(order[i], order[rng.below(i + 1)]);
  }

  const fs::path first = shard_name(o.out_pattern, 0);
  const fs::path dir = first.parent_path().empty() ? fs::path(".") : first.parent_path();
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (!fs::is_directory(dir, ec)) throw Error(Code::kIOError, "cannot create output folder '" + dir.string() + "'");
  // Temp files of an interrupted run: never under a final name, removed now.
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.find(".tar.tmp-") != std::string::npos || name.find(".idx.tmp-") != std::string::npos) {
      fs::remove(e.path(), ec);
    }
  }

  const int threads = o.threads > 0 ? o.threads : detail::available_cores();
  const std::size_t window = static_cast<std::size_t>(threads) * 8;
  std::vector<std::optional<Item>> ring(window);
  std::mutex mu;
  std::condition_variable produced, consumed;
  std::size_t next = 0, written = 0;
  bool stop = false;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      Worker w;
      std::unique_lock<std::mutex> lock(mu);
      for (;;) {
        consumed.wait(lock, [&] { return stop || next >= n || next < written + window; });
        if (stop || next >= n) return;
        const std::size_t p = next++;
        lock.unlock();
        Item item;
        make_item(*src, order[p], o, &w, &item);
        lock.lock();
        ring[p % window] = std::move(item);
        produced.notify_all();
      }
    });
  }

  PackResult r;
  r.records_in = n;
  std::vector<std::string> report;
  std::unique_ptr<detail::TarWriter> tar;
  detail::ShardIndex index;
  int shard_no = -1;
  std::size_t in_shard = 0;
  auto close_shard = [&] {
    if (!tar) return;
    Status s = tar->finish();
    if (!s.ok()) throw Error(s);
    r.bytes_out += tar->bytes_written();
    s = detail::write_index_file(tar->path(), &index);
    if (!s.ok()) throw Error(s);
    r.shards.push_back(tar->path());
    tar.reset();
  };
  auto last_progress = -1.0;
  try {
    for (std::size_t p = 0; p < n; ++p) {
      Item item;
      {
        std::unique_lock<std::mutex> lock(mu);
        produced.wait(lock, [&] { return ring[p % window].has_value(); });
        item = std::move(*ring[p % window]);
        ring[p % window].reset();
        written = p + 1;
      }
      consumed.notify_all();
      r.bytes_in += item.bytes_in;
      const std::uint32_t rec = order[p];
      if (!item.status.ok()) {
        r.skipped_by_reason[code_name(item.status.code())]++;
        report.push_back(src->key(rec) + "\t" + code_name(item.status.code()) + "\t" + item.status.message());
      } else {
        const int target = o.shard_count > 0 ? static_cast<int>(p * static_cast<std::size_t>(o.shard_count) / n) : -1;
        const bool full = o.shard_count > 0 ? (tar && target != shard_no)
                                            : (tar && tar->bytes_written() >= o.shard_size && in_shard > 0);
        if (!tar || full) {
          close_shard();
          shard_no = o.shard_count > 0 ? target : shard_no + 1;
          tar = std::make_unique<detail::TarWriter>(shard_name(o.out_pattern, shard_no));
          Status s = tar->open();
          if (!s.ok()) throw Error(s);
          index = detail::ShardIndex{};
          in_shard = 0;
        }
        char key[32];
        std::snprintf(key, sizeof(key), "%09zu", p);
        const auto mtime = static_cast<std::int64_t>(std::time(nullptr));
        Status s = tar->add(std::string(key) + "." + item.ext, item.bytes.data(), item.bytes.size(), mtime);
        const auto& m = tar->members().back();
        detail::IndexRecord ir;
        ir.key = key;
        ir.suffix = item.ext;
        ir.offset = m.offset;
        ir.size = m.size;
        ir.label = src->label(rec);
        index.records.push_back(ir);
        const std::string cls = std::to_string(src->label(rec));
        if (s.ok()) s = tar->add(std::string(key) + ".cls", reinterpret_cast<const std::uint8_t*>(cls.data()), cls.size(), mtime);
        if (s.ok()) {
          s = tar->add(std::string(key) + ".json", reinterpret_cast<const std::uint8_t*>(item.json.data()),
                       item.json.size(), mtime);
        }
        if (!s.ok()) throw Error(s);
        ++in_shard;
        ++r.records_written;
        r.resized += item.resized;
        r.kept += item.kept;
      }
      if (o.on_progress && (seconds() - last_progress >= 0.2 || p + 1 == n)) {
        last_progress = seconds();
        PackProgress pr{n, p + 1, r.bytes_in, r.bytes_out + (tar ? tar->bytes_written() : 0), last_progress};
        o.on_progress(pr);
      }
    }
    close_shard();
  } catch (...) {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    consumed.notify_all();
    for (auto& t : pool) t.join();
    throw;
  }
  for (auto& t : pool) t.join();
  if (!report.empty()) {
    r.report_path = o.report_path.empty() ? (dir / "pack-report.tsv").string() : o.report_path;
    std::ofstream out(r.report_path);
    out << "path\treason\tmessage\n";
    for (const auto& line : report) out << line << "\n";
    if (!out) throw Error(Code::kIOError, "cannot write the report '" + r.report_path + "'");
  }
  r.seconds = seconds();
  return r;
}

}  // namespace stoker
