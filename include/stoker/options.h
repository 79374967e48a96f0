// Options of a stoker::Loader. Each documents its default; invalid values make
// the Loader constructor throw stoker::Error(kInvalidArgument) naming them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "stoker/fields.h"
#include "stoker/hook.h"
#include "stoker/source.h"
#include "stoker/transforms.h"
#include "stoker/volume.h"

namespace stoker {

enum class OnCorrupt {
  kSkip,   // count it by reason, fill its place with the next sample of the epoch
  kRaise,  // count it; Loader::next() throws when its batch is reached
};
enum class DType { kFloat32, kUInt8 };
enum class SampleKind {
  kAuto,   // arrays when record 0 is a .npy that is not a uint8 image, else images
  kImage,  // images (JPEG, PNG, WebP, TIFF, BMP, GIF) or uint8 .npy, through the transforms
  kArray,  // .npy arrays of any numeric dtype, batched as they are (no transforms);
           // every sample must have record 0's dtype and shape
};
enum class Layout { kNCHW, kNHWC };
enum class DecodeScale { kExact, kAuto };
enum class Progress { kAuto, kOn, kOff };
// Whether cache="ram" / "decoded" is one cache per machine (ShareCache in
// LoaderOptions::share_cache).
enum class ShareCache { kAuto, kOn, kOff };
enum class Cache {
  kMmap,     // read every epoch (the OS page cache keeps the files)
  kRam,      // encoded bytes kept in the loader's memory after the first read
  kDecoded,  // decoded pixels, downscaled to cache_max_side, kept after the first decode
  kAuto,     // one of the three, chosen at construction from a few records' sizes and
             // headers, memory_budget and cache_max_side (src/cache/auto_cache.h);
             // stats() cache_mode and cache_auto say which and why
};

// One view of a multi-crop sample (LoaderOptions::views): `count`
// independently drawn copies of `transforms` over the sample's one decoded
// image, batched as `name`: [N, count, 3, H, W] (NCHW) or [N, count, H, W, 3].
struct View {
  std::string name;
  int count = 1;  // REQUIRES: 1..64
  std::vector<Transform> transforms;  // REQUIRES: a fixed output size, as `transforms`
};

// What a loader keeps between epochs (LoaderOptions::cache).
struct CacheOptions {
  // Under memory_budget bytes. When the data set does not fit, part of it
  // is cached and the rest served by the slower path; stats() reports hits,
  // misses and bytes. Default kMmap (nothing kept by the loader; the OS
  // page cache keeps the files). A volume schema keeps its own cache under
  // the budget: gzipped volumes inflated on first use and each label's
  // foreground index in every mode (no page cache keeps inflated bytes),
  // every volume read whole with kRam and kDecoded; when the set (estimated
  // from record 0) does not fit, gzipped volumes that inflate 8x or more
  // (labels) are not kept, leaving the room to volumes that cost more to
  // inflate again. stats()["volume"] reports it. JSON: "cache".
  Cache mode = Cache::kMmap;
  // mode=kRam: from construction on, background threads (at lower CPU
  // priority: nice +10, or SCHED_IDLE when they rewrite what they store,
  // below) read every record into RAM in record order, in parallel, until
  // the set is in or the budget is spent; workers never wait for them (a
  // record not in yet is read by its worker as usual). stats() reports
  // cache_preload ("loading", "done", "budget full"), records and bytes.
  // Default true. JSON: "preload".
  bool preload = true;
  // mode=kRam: JPEGs without restart markers on the loader's grid are
  // rewritten losslessly in the cache (the same coefficients, so the same
  // pixels: batches never change) into the random-access form `stoker pack
  // --lossless` writes, so later epochs decode only what a crop covers. A
  // worker rewrites a record as it is about to decode it: in the loader's
  // first epoch while the rewrites' net cost (their time less the decode
  // time they save) stays under 1% of its sample time, from the second
  // epoch on always, so the rewrite is done when the second epoch ends;
  // the records not read go by idle CPU (the preload threads at SCHED_IDLE).
  // Records of a source read again cheaply (not streamed: local files) are
  // stored only rewritten: the first epoch reads the others from the files
  // as kMmap does, keeping only what it rewrote, so it costs no more than
  // kMmap's; a streamed source's records are stored as read and replaced
  // by their rewritten form later, also by at most 9% of the workers'
  // sample time (cache/ram_rewrite.h).
  // stats(): cache_rewrite ("off", "rewriting", "done"), records rewritten
  // (on read, settled), bytes before/after, CPU seconds. Default true.
  // JSON: "cache_rewrite".
  bool rewrite = true;
  // A progress line on stderr while preloading: kAuto (the default) when
  // stderr is a terminal, kOn always (a line every 2 s when it is not a
  // terminal), kOff never. JSON: "progress".
  Progress progress = Progress::kAuto;
  // mode=kDecoded: images are stored with their shorter side at most this
  // (torchvision's Resize rule, PIL's bilinear), and every epoch, first or
  // cached, transforms that stored image, so results do not depend on hits.
  // The default, 448, is the smallest side whose RandomResizedCrop(224)
  // output is within 40 dB PSNR of decoding the original
  // (bench/cache_quality.py on the sample set: 448 -> 41.4 dB, mean |diff|
  // 0.44/255; 320 -> 33.9 dB; 256 -> 31.8 dB): lower it to fit more images
  // in memory_budget. JSON: "cache_max_side".
  int max_side = 448;
  // mode=kRam / kDecoded: one cache per machine, in a file of shared memory
  // under share_dir (a tmpfs; default "/dev/shm") that every loader on the
  // node reading the same data with the same cache-relevant options maps,
  // so each record is stored and charged once per node (to the budget of
  // the rank that stored it; the file's size: this loader's cache budget
  // times LOCAL_WORLD_SIZE). kAuto (the default) shares when
  // LOCAL_WORLD_SIZE > 1 and falls back to a cache of this process's own,
  // with one line on stderr, when the directory cannot hold it; kOn always
  // shares and raises instead; kOff never shares. stats(): shared_cache
  // says which and why (src/cache/README.md). JSON: "share_cache",
  // "share_cache_dir".
  ShareCache share = ShareCache::kAuto;
  std::string share_dir = "/dev/shm";
};

struct LoaderOptions {
  // ---- Batches and their order -------------------------------------------
  // Samples per batch. Default 64. REQUIRES: > 0.
  std::size_t batch_size = 64;
  // Shuffle with a permutation derived from (seed, epoch); identical for any
  // thread count. Default false.
  bool shuffle = false;
  // Default 0.
  std::uint64_t seed = 0;
  // Shuffle within windows of this many shards instead of over the whole
  // epoch (tar shards only): the epoch's shard order is shuffled, each rank
  // takes its shards as without it, and records are shuffled only among
  // the records of W consecutive shards, so a rank reads at most W shards
  // at a time (what data streamed from elsewhere needs). The order is still
  // a function of (seed, epoch); without shuffle it changes nothing.
  // Default 0: over the whole epoch (or the rank's share of shards).
  std::size_t shuffle_window = 0;
  // Drop the last batch of a rank when it would be partial. Default false.
  bool drop_last = false;
  // This process's part of the epoch: rank in [0, world_size). Every rank
  // gets the same number of batches; without drop_last the epoch is padded
  // with its first samples (as torch's DistributedSampler does). Defaults 0, 1.
  int rank = 0;
  int world_size = 1;

  // ---- Workers -------------------------------------------------------------
  // Worker threads; 0 (the default) = autotuned: start with max_threads
  // workers (no probing delay before the first batch), then park workers
  // while the loader is ahead of the consumer (their cores go back to the
  // training step) and bring them back when the consumer waits. stats()
  // reports the count in use and every change with the measurements behind it.
  int threads = 0;
  // threads=0: the most workers the tuner uses; 0 (the default) = the
  // available cores.
  int max_threads = 0;
  // Batches decoded ahead of the consumer (ring depth); 0 (the default) =
  // autotuned from max(2, workers), deepened (up to twice that) when workers
  // sit idle for ring space while the consumer waits, i.e. the consumer is
  // bursty. Memory for batches is at most the depth x batch bytes, plus the
  // batches the consumer still holds.
  int prefetch = 0;

  // ---- What a sample is, and its transforms ---------------------------------
  // The sample schema (stoker/fields.h): its named fields, in batch order.
  // Default: empty, the default schema (image and label, or a .npy array and
  // label, as `kind` says).
  std::vector<Field> fields;
  // The default schema's sample: images or .npy arrays. Only kAuto with
  // `fields`. Default kAuto.
  SampleKind kind = SampleKind::kAuto;
  // Applied in order. The result must have a fixed size: the last
  // size-setting transform must be RandomResizedCrop, CenterCrop or a
  // Resize with both sides given. Default: none (which only fits images of
  // one size).
  std::vector<Transform> transforms;
  // Multi-crop (DINO, SwAV, SimCLR): several views of the image, each its
  // own transform list drawn `count` times per sample, all cut from one read
  // and one decode of the union of their regions; each view is a batch
  // tensor named as the view, in place of the image's. Copy c of view v
  // draws from its own stream; view 0's copy 0 draws what `transforms`
  // would. With views, `transforms` must be empty and the schema may not
  // have masks or boxes. Default: none.
  std::vector<View> views;
  // A stage of the caller's after stoker's transforms (stoker/hook.h): each
  // sample's image goes to hook->sample() at its own size instead of into
  // the batch buffer, so `transforms` need not end at a fixed size; the
  // batch buffer keeps the labels. The default schema of images only (no
  // fields, views or arrays). Not an option of the JSON codec. Default: none.
  std::shared_ptr<SampleHook> hook;
  // A schema with a VolumeField: its transforms (stoker/volume.h, MONAI's
  // names), in order, in place of `transforms`; one sampling crop gives the
  // patches (and their number per volume). Default: none.
  std::vector<VolumeTransform> volume_transforms;
  // Images only; arrays keep their own dtype. Default kFloat32.
  DType dtype = DType::kFloat32;
  // Default kNCHW.
  Layout layout = Layout::kNCHW;
  // kExact (the default): JPEGs decode at full resolution (only the crop's
  // region), so the output is bit-exact with torchvision on PIL images.
  // kAuto: when the first crop (or resize) shrinks the image 2x or more,
  // libjpeg-turbo decodes it at 1/2, 1/4 or 1/8 scale, the smallest that
  // keeps at least the output resolution: less IDCT and resize work, pixels
  // within a small tolerance of torchvision's (a DCT-domain downscale
  // instead of PIL's bilinear for that factor, and box edges rounded to the
  // scaled pixel grid).
  DecodeScale decode_scale = DecodeScale::kExact;
  // Volumes with more voxels (channels included) than this are refused
  // (counted as resource_exhausted) before any voxel memory is allocated.
  // Default 2^31.
  std::uint64_t max_volume_voxels = 1ULL << 31;
  // Images with more pixels than this are refused (counted as
  // resource_exhausted) before any pixel memory is allocated. The default is
  // Pillow's decompression-bomb error threshold (2 x 89,478,485).
  std::uint64_t max_image_pixels = 178956970;
  // Where tar shard samples take their label: "cls" (the .cls member, the
  // default) or "json:<field>" (an integer field of the .json member).
  std::string labels = "cls";
  // A COCO instances JSON source (source.h open_coco): the folder its
  // file_name are relative to (empty, the default: the JSON's folder),
  // whether images without boxes are left out (default false) and whether
  // crowd annotations are kept (default false: dropped). The options' JSON
  // and Python name them flat: image_root, skip_empty, keep_crowd.
  CocoOptions coco;

  // ---- Memory: what is kept between epochs -------------------------------------
  // Bytes the loader's caches, remote shards and batch buffers share
  // (named accounts of one budget); 0, the default = half of the available
  // memory, never above the cgroup limit, divided by LOCAL_WORLD_SIZE when
  // torchrun starts several ranks on a node.
  std::uint64_t memory_budget = 0;
  // What the loader keeps between epochs (CacheOptions above); the options'
  // JSON and Python name its members flat: cache, preload, cache_rewrite,
  // progress, cache_max_side.
  CacheOptions cache;

  // ---- Data that lives elsewhere (RemoteOptions in stoker/source.h) -------------
  // Shards named by URL (https://, s3://) or command (pipe:) are fetched in
  // the epoch's order, a few ahead (autotuned), and held while the epoch needs
  // them: in memory under memory_budget, or with remote.cache_dir in a
  // node-local folder shared by every rank on the machine (each shard
  // fetched once per node, kept under remote.cache_limit bytes, least
  // recently used evicted; 0 = 80% of the file system's free space).
  // Batches equal those from the same shards on local disk. Transfers at
  // once: remote.connections (default 8, one kept-alive connection each);
  // retries of a request failing in a retryable way (timeout, reset, 429,
  // 5xx; a pipe: command's non-zero exit), with exponential backoff and
  // jitter, a broken transfer resumed from its last byte: remote.retries
  // (default 8). The options' JSON and Python name them flat: cache_dir,
  // cache_limit, remote_connections, remote_retries. NOTE: remote.memory_budget
  // is not an option of the loader's: the Loader opens its source with
  // memory_budget above.
  RemoteOptions remote;

  // ---- Bad input ------------------------------------------------------------------
  // Default kSkip.
  OnCorrupt on_corrupt = OnCorrupt::kSkip;
  // Under kSkip, consecutive corrupt samples tolerated in one place before
  // the batch fails anyway (the data set is then mostly broken). Default 64.
  int max_consecutive_corrupt = 64;

  // ---- Observability ----------------------------------------------------------
  // Per-stage timing (read/decode/transform busy time per thread). Off,
  // stats() counts samples and bytes only; bench/stats_overhead.py measures
  // what it costs (within noise of zero). Default true.
  bool stage_timing = true;
  // Record a span per sample stage per worker thread and per consumer wait,
  // for Loader::write_trace() (Chrome / Perfetto trace-event JSON). Also on
  // when the environment variable STOKER_TRACE names a file (the Python
  // package writes it at exit). At most kMaxTraceEvents per thread are kept.
  // Default false.
  bool trace = false;
};

// Throws Error(kInvalidArgument) naming the first option out of range (the
// Loader calls it; so do the bindings, before anything is opened).
void validate_options(const LoaderOptions& options);

// Every option as JSON (enums and transforms named as the Python API names
// them), and back; options missing from the JSON keep their defaults. The
// doctor's channel carries this, so its probes rebuild the loader the user
// ran. options_from_json throws Error(kInvalidArgument) on malformed input.
std::string options_to_json(const LoaderOptions& options);
// The name of a cache mode as the options' JSON and Python spell it ("mmap", ...).
const char* cache_name(Cache cache);
LoaderOptions options_from_json(const std::string& json);

}  // namespace stoker
