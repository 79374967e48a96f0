// stoker pack SRC OUT_PATTERN: offline preparation into tar shards.
#include <cstdio>
#include <memory>
#include <string>

#include "commands.h"
#include "progress.h"
#include "stoker/pack.h"
#include "stoker/status.h"

namespace stoker::cli {
namespace {

struct PackArgs {
  std::string source;
  PackOptions opt;
  std::string subsampling = "444";
  std::string boxes_format = "xyxy";
  std::int64_t shuffle = -1;
};

std::string mb(std::uint64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.1f MB", static_cast<double>(bytes) / 1e6);
  return b;
}

}  // namespace

void add_pack_command(CLI::App& app) {
  auto a = std::make_shared<PackArgs>();
  auto* cmd = app.add_subcommand("pack", "Pack an image folder or list file into WebDataset tar shards");
  cmd->add_option("source", a->source, "ImageFolder directory, list file, COCO instances JSON or shards")->required();
  cmd->add_option("out_pattern", a->opt.out_pattern, "shard names, e.g. out/train-%06d.tar")->required();
  auto* size = cmd->add_option("--shard-size", a->opt.shard_size, "bytes per shard")->capture_default_str();
  cmd->add_option("--shard-count", a->opt.shard_count, "split into this many shards instead")->excludes(size);
  cmd->add_option("--max-side", a->opt.max_side, "downscale so the shorter side is at most N (never upscale)");
  cmd->add_option("--quality", a->opt.quality, "JPEG quality when re-encoding")->capture_default_str();
  cmd->add_option("--subsampling", a->subsampling, "chroma subsampling when re-encoding")
      ->check(CLI::IsMember({"444", "420"}))
      ->capture_default_str();
  cmd->add_flag("--keep", a->opt.keep, "copy the original bytes when no resize is needed (lossless)");
  cmd->add_flag("--lossless", a->opt.lossless,
                "when no resize is needed, rewrite JPEGs with the same pixels plus restart markers, so crops decode "
                "only what they cover (~1-2% more bytes)");
  cmd->add_flag("--no-restart-markers", [a](std::int64_t) { a->opt.restart_markers = false; },
                "re-encoded JPEGs without restart markers (smaller by ~2-4%; crops then decode every row above them)");
  cmd->add_flag("--raw", a->opt.raw, "store decoded uint8 pixels as .npy");
  cmd->add_option("--shuffle", a->shuffle, "shuffle the record order across shards with this seed");
  cmd->add_option("--threads", a->opt.threads, "worker threads (0 = one per core)")->capture_default_str();
  cmd->add_option("--boxes", a->opt.box_members,
                  "members holding boxes, rescaled with the image under --max-side (default: boxes)");
  cmd->add_option("--boxes-format", a->boxes_format, "the boxes members' format when their JSON does not say")
      ->check(CLI::IsMember({"xyxy", "xywh", "cxcywh"}))
      ->capture_default_str();
  cmd->add_option("--image-root", a->opt.coco.image_root, "COCO source: the folder of its images (default: the JSON's)");
  cmd->add_flag("--skip-empty", a->opt.coco.skip_empty, "COCO source: leave out images without annotations");
  cmd->add_flag("--keep-crowd", a->opt.coco.keep_crowd, "COCO source: keep iscrowd annotations");
  cmd->add_option("--report", a->opt.report_path, "where bad inputs are listed (default: OUT_DIR/pack-report.tsv)");
  cmd->callback([a] {
    a->opt.subsampling = std::stoi(a->subsampling);
    a->opt.boxes_format = a->boxes_format == "xywh"     ? BoxFormat::kXYWH
                          : a->boxes_format == "cxcywh" ? BoxFormat::kCXCYWH
                                                        : BoxFormat::kXYXY;
    a->opt.shuffle_seed = a->shuffle;
    auto progress = std::make_shared<Progress>("pack");
    a->opt.on_progress = [progress](const PackProgress& p) {
      progress->update(p.records_done, p.records_total, p.seconds,
                       mb(static_cast<std::uint64_t>(static_cast<double>(p.bytes_in) / std::max(p.seconds, 1e-9))) +
                           "/s in");
    };
    PackResult r = pack(a->source, a->opt);
    std::uint64_t skipped = 0;
    for (const auto& [k, v] : r.skipped_by_reason) skipped += v;
    std::printf("pack: %llu records in, %llu written, %llu skipped", static_cast<unsigned long long>(r.records_in),
                static_cast<unsigned long long>(r.records_written), static_cast<unsigned long long>(skipped));
    for (const auto& [k, v] : r.skipped_by_reason) std::printf(" (%s: %llu)", k.c_str(), static_cast<unsigned long long>(v));
    std::printf("\npack: %s in, %s out in %zu shard%s; %llu resized, %llu kept as is; %llu members carried (%llu "
                "resized with their image); %.1f s (%.0f records/s)\n",
                mb(r.bytes_in).c_str(), mb(r.bytes_out).c_str(), r.shards.size(), r.shards.size() == 1 ? "" : "s",
                static_cast<unsigned long long>(r.resized), static_cast<unsigned long long>(r.kept),
                static_cast<unsigned long long>(r.members), static_cast<unsigned long long>(r.members_resized), r.seconds,
                static_cast<double>(r.records_in) / std::max(r.seconds, 1e-9));
    std::printf("pack: manifest %s\n", r.manifest.c_str());
    if (!r.report_path.empty()) std::printf("pack: bad inputs are listed in %s\n", r.report_path.c_str());
    if (r.records_in != r.records_written + skipped) throw stoker::Error(stoker::Code::kCancelled, "record counts do not add up");
  });
}

}  // namespace stoker::cli
