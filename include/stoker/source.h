// Sources: indexed, immutable collections of records (key, bytes, label).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "stoker/status.h"

namespace stoker {

struct Stats;
namespace detail {
class MemoryBudget;  // src/memory/memory_budget.h
}

// An epoch's records for one rank, by position, computed on demand (the
// epoch's order is a closed form of (seed, epoch): nothing per record is
// held; order/order.h).
class RecordOrder {
 public:
  virtual ~RecordOrder() = default;
  virtual std::size_t size() const = 0;
  // REQUIRES: pos < size()
  virtual std::uint32_t at(std::size_t pos) const = 0;
  // The positions from `from` on as pieces, so that a source can plan per
  // shard without calling at() for every position: an exact piece says
  // positions first..last hold records rec, rec + stride, ... in turn; a
  // bounded one says records [rec, rec + count) are used, if at all, only
  // at positions within [first, last] (a shuffled window or epoch). Together
  // they cover every position from `from` on; the first and last `walk`
  // positions of a shuffled stretch come as exact pieces of one, so a
  // shard's first and last use there are exact. False: no pieces (a list),
  // the source walks at().
  struct Piece {
    std::size_t rec = 0, count = 0, stride = 1;
    std::size_t first = 0, last = 0;
    bool exact = true;
  };
  virtual bool pieces(std::size_t /*from*/, std::size_t /*walk*/, const std::function<void(const Piece&)>& /*use*/) const {
    return false;
  }
};

// An indexed, immutable set of records. Thread-safe: any number of workers
// may call read() concurrently.
class Source {
 public:
  virtual ~Source() = default;

  // Number of records.
  virtual std::size_t size() const = 0;
  // The record's name in messages: its file path (a shard sample: "<shard>:<key>"). REQUIRES: i < size()
  virtual std::string key(std::size_t i) const = 0;
  // Class index. REQUIRES: i < size()
  virtual std::int64_t label(std::size_t i) const = 0;
  // Replaces *out with the record's bytes. `out` is the caller's reusable
  // buffer (its capacity is kept). REQUIRES: i < size()
  virtual Status read(std::size_t i, std::vector<std::uint8_t>* out) const = 0;
  // A named member of record i: for tar shards the member "<key>.<member>"
  // ("seg.png", "depth.npy", "json"). Replaces *out with its bytes; a member
  // the record lacks is kNotFound naming it and the members there are.
  // Sources of one file per record have no other members. REQUIRES: i < size()
  virtual Status read_member(std::size_t i, const std::string& member, std::vector<std::uint8_t>* out) const;
  // Where a member's bytes lie in a local file, so that a part of it can be
  // read without the rest (3D volumes read only a patch's voxels). `member`
  // "" is the record itself. False when they do not lie in one local file
  // (remote shards, sources that transform bytes); then read_member.
  struct Extent {
    std::string path;
    std::uint64_t offset = 0, size = 0;
  };
  virtual bool member_extent(std::size_t /*i*/, const std::string& /*member*/, Extent* /*out*/) const { return false; }
  // The names of record i's members (empty for one file per record).
  virtual std::vector<std::string> members(std::size_t /*i*/) const { return {}; }
  // The record's path relative to the folder its source names records from
  // (an image folder's root, a list file's folder, a COCO file's
  // image_root); a shard sample's key. Paired folders (Field::folder) match
  // it, without its extension. REQUIRES: i < size()
  virtual std::string relative_key(std::size_t i) const { return key(i); }
  // Class names by index, when known (ImageFolder); may be empty.
  virtual const std::vector<std::string>& classes() const = 0;
  // "image folder 'data/train' (2040 records, 12 classes)"
  virtual std::string describe() const = 0;
  // For sources stored in several files read sequentially (tar shards): the
  // first record of each file, records of a file being contiguous. Ranks then
  // split the epoch by file when there are at least as many files as ranks.
  // Empty: split by record.
  virtual std::vector<std::size_t> shard_starts() const { return {}; }

  // Sources that stream their bytes in from elsewhere (remote shards) read
  // best when told the epoch ahead: wants_plan() says so; plan() gets the
  // epoch's records by position, to be read from position `from` on (so the
  // source fetches in order of first use and holds what is needed, within its
  // budget; it may throw Error(kInvalidArgument) when the epoch cannot fit);
  // progress() says positions below `done` are all read (what only they used
  // is released); io_stats() adds the source's transfer counters. A read
  // outside the plan still works (one request of its own).
  virtual bool wants_plan() const { return false; }
  // Whether a record read once can be read again at the cost of a local
  // read (not streamed in from elsewhere: local files, or a mixture of
  // only such sources). cache="ram" then stores records only in their
  // final form, leaving those the first epoch does not rewrite to be read
  // again (cache/ram_rewrite.h).
  virtual bool reads_again_locally() const { return !wants_plan(); }
  virtual void plan(const RecordOrder& /*records*/, std::size_t /*from*/) const {}
  // The epoch likely to follow (the next one), so the source can fetch its
  // first shards once this epoch's are all under way; plan() then says
  // which epoch it really is.
  virtual void plan_ahead(const RecordOrder& /*records*/) const {}
  virtual void progress(std::size_t /*done*/) const {}
  virtual void io_stats(Stats* /*stats*/) const {}
  // A source that holds memory of its own (remote shards in memory) charges
  // the loader's budget from now on (its remote_shards account), in place of
  // the budget it resolved alone; the Loader calls it before its first
  // plan(). A source used by one loader at a time.
  virtual void use_memory(const std::shared_ptr<detail::MemoryBudget>& /*budget*/) const {}
};

// How shards that live elsewhere are fetched: https://host/train-{000..127}.tar,
// s3://bucket/prefix/train-{...}.tar or s3://bucket/prefix/*.tar (AWS_* variables
// and ~/.aws profiles as the AWS CLI reads them), pipe:CMD (the shard is CMD's
// standard output). The epoch's order is the same as for the same shards on
// local disk.
struct RemoteOptions {
  // A node-local folder shards land in (atomically), shared by every process
  // on the machine (each shard fetched once per node), evicted least recently
  // used beyond cache_limit. Empty (the default): shards stream through memory.
  std::string cache_dir;
  // Bytes stoker's files in cache_dir may take. 0 (the default): 80% of the
  // file system's free space when the source opens.
  std::uint64_t cache_limit = 0;
  // Bytes of shards held in memory at once without cache_dir. 0 (the
  // default): the loader's memory budget (half the available memory).
  std::uint64_t memory_budget = 0;
  // Transfers at once (one connection each, kept alive). Default 8.
  int connections = 8;
  // Attempts after the first for a request that fails in a retryable way
  // (timeout, reset, 429, 5xx, a pipe: command's non-zero exit), with
  // exponential backoff and full jitter. Default 8.
  int retries = 8;
};

// A torchvision ImageFolder tree: root/<class>/**/<file>. Classes are the
// sorted sub-directory names, indexed from 0; files are those with
// torchvision's image extensions (case-insensitive), in torchvision's order,
// so record i here is ImageFolder's sample i. Throws stoker::Error.
std::unique_ptr<Source> open_image_folder(const std::string& root);

// A list file (CSV; blank and `#` lines skipped, CRLF ok). Relative paths
// are relative to the list file's directory, absolute ones kept.
//  - `path,label` lines: the label is the last comma field (a non-negative
//    integer), the path the rest (commas and all) or one quoted cell. The
//    first line may be a header (its last field not an integer).
//  - A header row naming columns: `image,mask,label`, `image,depth,seg`.
//    Each row has one cell per column: comma separated, spaces trimmed, a
//    cell in double quotes may hold commas ("" is a quote). The record's
//    path (key(), read()) is the column `image`, else `path`, else the first;
//    its label the column `label` (else -1). Every other column is a member
//    (members(), in header order): read_member(i, "<column>") reads the file
//    a cell names, or, for a column whose cells are all integers, returns the
//    cell's text ("7"); an empty cell is kNotFound. A two-column header whose
//    second column is `label` or whose first row's second cell is an integer
//    is the `path,label` form above.
//  - A header of the one column `image` (or `path`): an unlabelled set (for
//    self-supervised training), one path per row, every label -1.
// Throws stoker::Error naming the file and line.
std::unique_ptr<Source> open_list_file(const std::string& path);

// WebDataset-style tar shards: each spec is a path, a brace pattern
// ("train-{000000..000015}.tar") or a glob. Members are grouped into samples
// by WebDataset's key rule ("dir/key.ext"); the image is the sample's first
// member whose suffix names an image format (.jpg, .jpeg, .png, .npy, .webp,
// .tif, .tiff, .bmp, .gif: decode/formats.h); the label comes from its .cls member
// (labels = "cls") or an integer field of its .json member
// (labels = "json:<field>"); -1 when the sample has neither. Each shard is
// read through its index sidecar `<shard>.idx`, built when missing or stale
// (and written next to the shard when the folder is writable). A sample
// without an image member or with a bad label is a record whose read()
// fails (counted by the loader). Throws stoker::Error naming the shard and
// offset for a damaged tar. index_dir non-empty: sidecars that must be
// built go there instead (the user's folder is never written; the doctor's
// probes use this).
//
// A data set manifest (docs/manifest.md; `stoker pack` writes one, as does
// write_manifest()): a spec naming a `.manifest` file, or one brace/glob
// pattern with `<stem>.manifest` beside it (write_manifest's name), opens
// from it: the records and each shard's count come from that one read, and a
// shard is opened and its `.idx` read only when a record of it is first
// read (local shards; indexes beyond ShardOptions' budget evicted, least
// recently used first). A manifest that is damaged, truncated, or does not
// list a shard the pattern names throws Error naming it; a shard whose size
// or record count differs from the manifest's, or that is missing, is found
// at its first read: kUnavailable naming the manifest and the shard, raised
// at that batch whatever on_corrupt says.
std::unique_ptr<Source> open_shards(const std::vector<std::string>& specs, const std::string& labels = "cls",
                                    const std::string& index_dir = "", const RemoteOptions& remote = {});

// Writes the manifest of the local tar shards `pattern` names (a brace
// pattern, glob or path) from their `.idx` sidecars (built, and written
// beside each shard when missing or stale) to `out`, by default beside them:
// "d/train-{000..099}.tar" -> "d/train.manifest" (the pattern's file name
// up to its first '{', '*', '?', '[' or '%', trailing '-', '_', '.' cut).
// Returns its path. Throws Error naming a shard that cannot be read.
std::string write_manifest(const std::string& pattern, const std::string& out = "", const std::string& labels = "cls");

// How a COCO instances file becomes records (open_coco).
struct CocoOptions {
  // The folder the images' file_name are relative to. Empty (the default):
  // the JSON file's folder.
  std::string image_root;
  // Leave out images without annotations (after crowd ones are dropped).
  // Default false: kept, with zero boxes.
  bool skip_empty = false;
  // Keep iscrowd=1 annotations as boxes. Default false: dropped (counted in
  // describe()), as torchvision's detection references drop them.
  bool keep_crowd = false;
};

// A COCO instances JSON (instances_train2017.json): one record per entry of
// "images", in increasing id order (torchvision's CocoDetection order), key
// and read() its image file (image_root / file_name), label -1. Members:
// "boxes", the image's annotations as {"format": "xywh", "boxes": [[x, y, w,
// h], ...], "labels": [category_id, ...]} (a Boxes field converts them to
// its format), and "image_id", the id as text (a Label field can carry it).
// Annotation "segmentation"s are not read. Throws stoker::Error naming the
// file for malformed JSON (with the byte offset), a missing "images" list,
// an image without id or file_name, a duplicate id, or an annotation whose
// image_id is not an image's; a malformed bbox or category_id fails that
// image's sample (a counted sample error), not the file.
std::unique_ptr<Source> open_coco(const std::string& path, const CocoOptions& options = {});

// A directory opens as an image folder; a .tar path or a brace/glob pattern
// as shards; a .json file as COCO instances (with `coco`); any other file as
// a list file.
std::unique_ptr<Source> open_source(const std::string& spec, const std::string& labels = "cls",
                                    const std::string& index_dir = "", const CocoOptions& coco = {},
                                    const RemoteOptions& remote = {});
// One spec as open_source(); several must all be shard specs.
std::unique_ptr<Source> open_sources(const std::vector<std::string>& specs, const std::string& labels = "cls",
                                     const std::string& index_dir = "", const CocoOptions& coco = {},
                                     const RemoteOptions& remote = {});

}  // namespace stoker
