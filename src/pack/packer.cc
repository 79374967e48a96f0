// stoker::pack: read -> decode/resize/encode on N threads -> write shards in order.

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
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
#include "pack/png_encode.h"
#include "transform/boxes.h"
#include "transform/nearest.h"
#include "source/manifest.h"
#include "source/shard_source.h"
#include "source/tar.h"
#include "stats/json.h"
#include "stoker/pack.h"
#include "stoker/source.h"
#include "transform/pipeline.h"
#include "transform/resize.h"
#include "util/thread.h"
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
  // The record's other members, each as written: (suffix, bytes).
  std::vector<std::pair<std::string, std::vector<std::uint8_t>>> members;
  std::uint64_t members_resized = 0;
};

struct Worker {
  std::vector<std::uint8_t> file, member;
  detail::ImageDecoder mask_decoder;
  detail::MaskBuffer mask, resized_mask;
  std::vector<detail::BoxRow> boxes;
  detail::ImageDecoder decoder;
  detail::ImageBuffer decoded, resized;
  detail::ResizeScratch scratch;
  detail::JpegEncoder encoder;
  detail::JpegTranscoder transcoder;
};

// A member's name in the shard: as named when it has an extension ("seg.png"),
// else the name with the extension its bytes say (a list file's column
// "mask" holding a PNG -> "mask.png"), or bare for a value ("7").
std::string member_suffix(const std::string& name, const std::vector<std::uint8_t>& bytes) {
  if (name.find('.') != std::string::npos) return name;
  const detail::Format f = detail::sniff_format(bytes.data(), bytes.size());
  if (f != detail::Format::kUnknown) return name + "." + std::string(detail::format_info(f).suffixes.front());
  const auto first = std::find_if(bytes.begin(), bytes.end(), [](std::uint8_t c) { return !std::isspace(c); });
  if (first != bytes.end() && (*first == '{' || *first == '[')) return name + ".json";
  return name;
}

// "seg.png" -> "seg": the name a loader's member= gives.
std::string member_base(const std::string& name) { return name.substr(0, name.find('.')); }

// The packed image's size: the original's, or torchvision's Resize(max_side)
// of it when its shorter side is over max_side (never an upscale).
void packed_size(const PackOptions& o, int W, int H, int* ow, int* oh) {
  *ow = W, *oh = H;
  if (o.max_side > 0 && std::min(W, H) > o.max_side) detail::resize_output_size(Resize{o.max_side, 0, 0}, W, H, ow, oh);
}

// The record's members other than its image and label, carried into the
// shard: masks of the image's size resized with it (nearest, PNG), boxes
// rescaled (JSON), the rest as they are.
Status carry_members(const Source& src, std::uint32_t rec, const PackOptions& o, int W, int H, Worker* w, Item* it) {
  int ow, oh;
  packed_size(o, W, H, &ow, &oh);
  const bool resized = ow != W || oh != H;
  for (const std::string& name : src.members(rec)) {
    // A shard sample's image (".jpg", ".png", ...) and label (".cls") are the record's own.
    if (name == "cls" || (name.find('.') == std::string::npos && detail::format_of_name("x." + name) != nullptr)) {
      continue;
    }
    Status st = src.read_member(rec, name, &w->member);
    if (!st.ok()) return Status(st.code(), "member '" + name + "': " + st.message());
    it->bytes_in += w->member.size();
    const std::string base = member_base(name);
    const bool boxes = std::find(o.box_members.begin(), o.box_members.end(), base) != o.box_members.end();
    if (resized && boxes) {
      st = detail::parse_boxes(w->member.data(), w->member.size(), o.boxes_format, "", &w->boxes);
      if (st.ok()) st = detail::check_boxes_on_canvas(W, H, &w->boxes);
      if (!st.ok()) return Status(st.code(), "member '" + name + "': " + st.message());
      detail::scale_boxes(W, H, ow, oh, &w->boxes);
      nlohmann::json rows = nlohmann::json::array(), labels = nlohmann::json::array();
      for (const auto& b : w->boxes) {
        rows.push_back({b.x0, b.y0, b.x1, b.y1});
        labels.push_back(b.label);
      }
      const std::string text = nlohmann::json{{"format", "xyxy"}, {"boxes", rows}, {"labels", labels}}.dump();
      it->members.push_back({base + ".json", std::vector<std::uint8_t>(text.begin(), text.end())});
      ++it->members_resized;
      continue;
    }
    const detail::Format f = detail::sniff_format(w->member.data(), w->member.size());
    if (resized && (f == detail::Format::kPng || f == detail::Format::kNpy) &&
        w->mask_decoder.open_mask(w->member.data(), w->member.size(), 178956970).ok() &&
        w->mask_decoder.width() == W && w->mask_decoder.height() == H) {
      st = w->mask_decoder.decode_mask(&w->mask);
      if (!st.ok()) return Status(st.code(), "member '" + name + "': " + st.message());
      detail::resize_nearest(w->mask.view(), ow, oh, &w->resized_mask);
      std::vector<std::uint8_t> png;
      st = detail::encode_png_mask(w->resized_mask.view(), &png);
      if (!st.ok()) return Status(st.code(), "member '" + name + "': " + st.message());
      it->members.push_back({base + ".png", std::move(png)});
      ++it->members_resized;
      continue;
    }
    it->members.push_back({member_suffix(name, w->member), w->member});
  }
  return Status::Ok();
}

void make_item(const Source& src, std::uint32_t rec, const PackOptions& o, Worker* w, Item* it) {
  it->status = src.read(rec, &w->file);
  it->bytes_in = w->file.size();
  if (!it->status.ok()) return;
  it->status = w->decoder.open(w->file.data(), w->file.size(), /*max_pixels=*/178956970);
  if (!it->status.ok()) return;
  const int W = w->decoder.width(), H = w->decoder.height();
  int ow, oh;
  packed_size(o, W, H, &ow, &oh);
  const bool resize = ow != W || oh != H;
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

// The pack options a manifest records (its "pack" line).
std::string pack_options_text(const PackOptions& o) {
  std::string boxes;
  for (const auto& m : o.box_members) boxes += (boxes.empty() ? "" : ",") + m;
  return "max_side=" + std::to_string(o.max_side) + " quality=" + std::to_string(o.quality) +
         " subsampling=" + std::to_string(o.subsampling) + " restart_markers=" + (o.restart_markers ? "1" : "0") +
         " keep=" + (o.keep ? "1" : "0") + " lossless=" + (o.lossless ? "1" : "0") + " raw=" + (o.raw ? "1" : "0") +
         " shuffle_seed=" + std::to_string(o.shuffle_seed) + " shard_size=" + std::to_string(o.shard_size) +
         " shard_count=" + std::to_string(o.shard_count) + " box_members=" + (boxes.empty() ? "-" : boxes);
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
  std::unique_ptr<Source> src = open_source(source, "cls", "", o.coco);
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
  // The data set's manifest (source/manifest.h), written beside the shards
  // once they all are; a previous one is removed now, so that an interrupted
  // pack leaves no manifest of other shards.
  const std::string manifest_path = detail::manifest_beside(o.out_pattern);
  fs::remove(manifest_path, ec);
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
  // NOTE: an exception on a pack worker (out of memory, a bug) fails the
  // pack with its message: the writer below raises it as an Error (after
  // stopping and joining the others), never std::terminate.
  Status failed;  // under mu
  std::vector<std::thread> pool;
  auto worker = [&] {
    Worker w;
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      consumed.wait(lock, [&] { return stop || next >= n || next < written + window; });
      if (stop || next >= n) return;
      const std::size_t p = next++;
      lock.unlock();
      Item item;
      detail::injection_point(detail::ThreadSite::kPack, static_cast<std::int64_t>(p));
      make_item(*src, order[p], o, &w, &item);
      if (item.status.ok()) item.status = carry_members(*src, order[p], o, w.decoder.width(), w.decoder.height(), &w, &item);
      lock.lock();
      ring[p % window] = std::move(item);
      produced.notify_all();
    }
  };
  auto worker_failed = [&](const Status& st) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (failed.ok()) failed = Status(st.code(), "pack worker " + st.message());
    }
    produced.notify_all();
  };
  auto stop_pool = [&] {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    consumed.notify_all();
    for (auto& t : pool) t.join();
  };
  try {
    for (int t = 0; t < threads; ++t) {
      pool.push_back(detail::spawn("stoker-pack" + std::to_string(t), detail::Priority::kNormal, worker, worker_failed));
    }
  } catch (...) {  // no more threads: those started are stopped and joined
    stop_pool();
    throw;
  }

  PackResult r;
  r.records_in = n;
  std::vector<std::string> report;
  std::unique_ptr<detail::TarWriter> tar;
  detail::ShardIndex index;
  detail::Manifest manifest;
  manifest.pack = pack_options_text(o);
  int shard_no = -1;
  std::size_t in_shard = 0;
  auto close_shard = [&] {
    if (!tar) return;
    Status s = tar->finish();
    if (!s.ok()) throw Error(s);
    r.bytes_out += tar->bytes_written();
    s = detail::write_index_file(tar->path(), &index);
    if (!s.ok()) throw Error(s);
    detail::manifest_add_shard(&manifest, detail::manifest_shard_name(manifest_path, tar->path()), index.shard_size, index);
    r.shards.push_back(tar->path());
    tar.reset();
  };
  auto last_progress = -1.0;
  try {
    for (std::size_t p = 0; p < n; ++p) {
      Item item;
      {
        std::unique_lock<std::mutex> lock(mu);
        produced.wait(lock, [&] { return ring[p % window].has_value() || !failed.ok(); });
        if (!ring[p % window].has_value()) throw Error(failed);
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
        // Every member into the tar and the index's member table (so a
        // loader's read_member finds masks, boxes and the rest by suffix).
        detail::IndexRecord ir;
        ir.key = key;
        ir.label = src->label(rec);
        auto add = [&](const std::string& suffix, const void* data, std::size_t size) {
          Status st = tar->add(std::string(key) + "." + suffix, static_cast<const std::uint8_t*>(data), size, mtime);
          if (st.ok()) ir.members.push_back({suffix, tar->members().back().offset, tar->members().back().size});
          return st;
        };
        Status s = add(item.ext, item.bytes.data(), item.bytes.size());
        if (s.ok()) {
          ir.suffix = item.ext;
          ir.offset = ir.members.back().offset;
          ir.size = ir.members.back().size;
        }
        const std::string cls = std::to_string(src->label(rec));
        if (s.ok() && src->label(rec) >= 0) s = add("cls", cls.data(), cls.size());
        // The pack's own record of the original path and size; "meta.json"
        // when the record carries a .json of its own.
        const bool own_json = std::any_of(item.members.begin(), item.members.end(),
                                          [](const auto& member) { return member.first == "json"; });
        if (s.ok()) s = add(own_json ? "meta.json" : "json", item.json.data(), item.json.size());
        for (const auto& [suffix, bytes] : item.members) {
          if (s.ok()) s = add(suffix, bytes.data(), bytes.size());
        }
        index.records.push_back(std::move(ir));
        if (!s.ok()) throw Error(s);
        ++in_shard;
        ++r.records_written;
        r.resized += item.resized;
        r.kept += item.kept;
        r.members += item.members.size();
        r.members_resized += item.members_resized;
      }
      if (o.on_progress && (seconds() - last_progress >= 0.2 || p + 1 == n)) {
        last_progress = seconds();
        PackProgress pr{n, p + 1, r.bytes_in, r.bytes_out + (tar ? tar->bytes_written() : 0), last_progress};
        o.on_progress(pr);
      }
    }
    close_shard();
  } catch (...) {
    stop_pool();
    throw;
  }
  for (auto& t : pool) t.join();
  if (Status s = detail::write_file_atomically(manifest_path, detail::serialize_manifest(manifest)); !s.ok()) throw Error(s);
  r.manifest = manifest_path;
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
