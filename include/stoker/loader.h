// stoker::Loader: batches of decoded, transformed images from a Source,
// produced by a pool of C++ threads into a ring of reusable batch buffers.
//
//   stoker::LoaderOptions opt;
//   opt.batch_size = 64; opt.shuffle = true;
//   opt.transforms = {stoker::RandomResizedCrop{}, stoker::RandomHorizontalFlip{},
//                     stoker::Normalize{{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}}};
//   stoker::Loader loader("data/train", opt);
//   for (int epoch = 0; epoch < 3; ++epoch) {
//     loader.set_epoch(epoch);
//     for (const stoker::Batch& b : loader) { /* b.tensor("image"), b.tensor("label") */ }
//   }
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "stoker/mixture.h"
#include "stoker/options.h"
#include "stoker/source.h"
#include "stoker/stats.h"
#include "stoker/status.h"
#include "stoker/transforms.h"

namespace stoker {

namespace detail {
struct SlotLease;
}

// One tensor of a batch: a view of its part of the batch buffer.
struct TensorView {
  std::string name;                // the field's name (its key in a Python batch dict)
  std::string descr;               // NumPy dtype string: "<f4", "|u1", "<i4", "<i8", ...
  std::vector<std::int64_t> dims;  // {size, dims of one sample...}
  void* data = nullptr;
  std::size_t bytes = 0;
};

// One batch, viewing a buffer of the loader's ring: a tensor per output of
// the sample schema (LoaderOptions::fields), in schema order; for the
// default schema, images [size, C, H, W] (or [size, H, W, C]) and int64
// labels [size]. The buffer is reused only after every copy of this Batch is
// destroyed, and stays valid after the Loader is destroyed. Copies share the
// buffer. Thread-compatible.
class Batch {
 public:
  Batch() = default;
  // Every tensor of the batch, in schema order (a boxes field gives three:
  // <name>, <name>_labels, <name>_count).
  const std::vector<TensorView>& tensors() const { return tensors_; }
  // The tensor named `name`, or nullptr.
  const TensorView* tensor(const std::string& name) const;
  std::size_t size() const { return size_; }
  std::size_t index() const { return index_; }  // batch index within the epoch
  DType dtype() const { return dtype_; }

  // DEPRECATED (the single-tensor accessors of before named fields; removed
  // in the next release): each is a part of tensors().
  // The first tensor's data (the default schema's images or arrays) and the
  // first label field's values (nullptr when the schema has none).
  [[deprecated("use tensors()[0].data or tensor(\"image\")->data")]] const void* images() const;
  [[deprecated("use tensors()[0].data or tensor(\"image\")->data")]] void* mutable_images();
  [[deprecated("use tensor(\"label\")->data")]] const std::int64_t* labels() const;
  // Images: {size, C, H, W} or {size, H, W, C} according to the layout.
  [[deprecated("use tensors()[0].dims")]] std::array<std::int64_t, 4> shape() const { return shape_; }
  [[deprecated("use tensors()[0].bytes")]] std::size_t image_bytes() const;  // bytes of images()
  // The first tensor's shape and NumPy dtype string ("<f4", "|u1", ...).
  [[deprecated("use tensors()[0].dims")]] const std::vector<std::int64_t>& dims() const { return dims_; }
  [[deprecated("use tensors()[0].descr")]] const std::string& descr() const { return descr_; }

 private:
  friend class Loader;
  std::shared_ptr<detail::SlotLease> lease_;
  std::size_t size_ = 0;
  std::size_t index_ = 0;
  std::array<std::int64_t, 4> shape_{};
  DType dtype_ = DType::kFloat32;
  std::vector<std::int64_t> dims_;
  std::string descr_;
  std::size_t bytes_ = 0;
  std::vector<TensorView> tensors_;
  const std::int64_t* labels_ = nullptr;
};

// Not thread-safe: one consumer thread iterates a Loader.
class Loader {
 public:
  // `source`: a directory (ImageFolder), tar shards (a .tar path, a brace
  // pattern or a glob; see open_shards) or a list file. Throws stoker::Error.
  Loader(const std::string& source, LoaderOptions options);
  // Several tar shard specs.
  Loader(const std::vector<std::string>& sources, LoaderOptions options);
  Loader(std::shared_ptr<const Source> source, LoaderOptions options);
  // A weighted mixture of data sets (stoker/mixture.h): each epoch is
  // mix.samples_per_epoch draws; the order, sharding and resume apply to
  // those draws as to the records of one data set.
  Loader(const Mixture& mix, LoaderOptions options);
  // Stops the workers promptly (they finish at most the sample in hand). In a
  // child process of fork(), leaves the inherited copy untouched.
  ~Loader();
  // Stops the workers now, as the destructor does (each finishes the sample
  // in hand); next() then throws Error(kCancelled). Idempotent. For a
  // LoaderOptions::hook whose owner must know no worker calls it any more
  // (Python before its interpreter finalizes).
  void close();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // Batches this rank yields per epoch.
  std::size_t num_batches() const;
  // Samples this rank yields per epoch (the padding included).
  std::size_t num_samples() const;
  const Source& source() const;
  const LoaderOptions& options() const;
  // Every tensor of one sample, in batch order: name, dtype and shape of one
  // sample (dims without the batch dimension; data null).
  std::vector<TensorView> sample_tensors() const;
  // DEPRECATED (removed in the next release): the first tensor of
  // sample_tensors(). Shape of one image sample in the output layout
  // ({C, H, W} or {H, W, C}); of one sample, images or arrays, and its NumPy
  // dtype string; whether samples are .npy arrays (the first tensor is
  // named "array").
  [[deprecated("use sample_tensors()[0].dims")]] std::array<std::int64_t, 3> sample_shape() const;
  [[deprecated("use sample_tensors()[0].dims")]] std::vector<std::int64_t> sample_dims() const;
  [[deprecated("use sample_tensors()[0].descr")]] std::string sample_descr() const;
  [[deprecated("use sample_tensors()[0].name == \"array\"")]] bool arrays() const;

  // The epoch the next start_epoch() runs; it advances by one after each
  // epoch that was started (finished or not), unless set_epoch() is called.
  // num_batches() is a fresh epoch's count: an epoch resumed on another
  // topology may have fewer. After load_state_dict(), set_epoch() of the restored epoch keeps the
  // restored position (the rest of that epoch runs); another epoch drops it.
  void set_epoch(std::uint64_t epoch);
  std::uint64_t epoch() const;

  // Starts (or restarts) iteration over the current epoch.
  void start_epoch();
  // The next batch of the epoch in order, or nullopt at its end. Blocks
  // while the batch is being made. Throws stoker::Error for a batch holding a
  // corrupt sample under OnCorrupt::kRaise (naming file and reason);
  // iteration may continue after it. Starts the epoch if none is running.
  std::optional<Batch> next();
  // next() waiting at most `timeout`: on a timeout returns nullopt with
  // *timed_out = true, and a later call continues with the same batch (so a
  // caller can check for interrupts while it waits).
  std::optional<Batch> next_for(std::chrono::nanoseconds timeout, bool* timed_out);

  Stats stats() const;

  // With LoaderOptions::trace (or STOKER_TRACE set): the spans recorded so
  // far as Chrome trace-event JSON objects, comma-separated (no brackets),
  // timestamps in microseconds of CLOCK_MONOTONIC (Python's
  // time.monotonic_ns() / 1000), so other spans of the process line up.
  // Empty when tracing is off.
  std::string trace_events() const;
  // Writes {"traceEvents": [...]} to `path` (open it in ui.perfetto.dev or
  // chrome://tracing). Throws stoker::Error when it cannot be written.
  void write_trace(const std::string& path) const;
  // DEPRECATED (removed in the next release; keep the sources you passed):
  // the sources this loader was created from, as given (empty when created
  // from a Source object).
  [[deprecated("keep the sources passed to the constructor")]] const std::vector<std::string>& source_specs() const;

  // Where iteration stands, for resume: the epoch in progress and the
  // batches of it already handed out by each rank (or the next epoch and 0
  // between epochs), with the settings that define the order (the names of
  // PyTorch's and of the Python API). It has no rank: ranks that hand out
  // batches in step have the same state, so rank 0's is the job's.
  // Loading it into a loader over the same data with the same shuffle and
  // drop_last continues the epoch:
  //  - same world_size and batch_size: exactly the remaining batches of the
  //    uninterrupted run (any thread count or ring depth);
  //  - another world_size and/or batch_size (elastic): the records of the
  //    epoch no rank has handed out yet, split over the new ranks as a fresh
  //    epoch is (the same count on every rank, padded or cut per drop_last,
  //    disjoint); the epochs after it are a fresh run's on the new topology.
  //    `earlier` records the parts of the epoch run on other topologies, so
  //    a job can change size more than once within an epoch.
  // The seed is taken from the state. Throws Error(kInvalidArgument) naming
  // the setting that differs or the value that is out of range.
  struct State {
    // A part of the epoch run on another topology: each of world_size ranks
    // handed out batches_done batches of batch_size.
    struct Part {
      int world_size = 1;
      std::uint64_t batch_size = 1;
      std::uint64_t batches_done = 0;
    };
    // 4: the order as a closed-form bijection (order/order.h; issue 39).
    // Before: 1 (no `earlier`), 2, 3 (shuffle_window > 0), with the old
    // shuffle: they load where the position does not depend on it (no
    // shuffle, or the start of an epoch) and are refused by version otherwise.
    int version = 4;
    std::uint64_t seed = 0;
    std::uint64_t epoch = 0;
    std::uint64_t batches_done = 0;
    std::uint64_t dataset_size = 0;
    std::uint64_t batch_size = 0;
    bool shuffle = false;
    bool drop_last = false;
    std::uint64_t shuffle_window = 0;
    int world_size = 1;
    std::vector<Part> earlier;  // in the order they ran
    // A mixture's sources (empty for one data set): the epoch's draws are a
    // function of these and (seed, epoch), so a state loads only into a
    // mixture of the same names, sizes and draws per epoch. dataset_size is
    // then the draws per epoch.
    struct MixSource {
      std::string name;
      std::uint64_t size = 0;   // records
      std::uint64_t count = 0;  // draws per epoch
    };
    std::vector<MixSource> mixture;
  };
  State state_dict() const;
  void load_state_dict(const State& state);

  // Batch `index` of `epoch` on this rank, made again on the calling
  // thread: bit for bit the batch an uninterrupted epoch hands out (any
  // thread count, ring depth or cache), without running the epoch up to it.
  // It costs O(batch): the epoch's order gives the batch's records in closed
  // form and each sample's draws are keyed by (seed, epoch, draw), as
  // always. The epoch a restored state resumed on another topology (or that
  // one, running) is that resumed epoch; any other is a fresh epoch on this
  // loader's topology. It neither moves iteration nor counts in stats() (a
  // bad sample under on_corrupt="skip" is replaced as the epoch replaced it).
  // Throws Error(kInvalidArgument) for an index past the epoch's batches,
  // Error(kUnsupported) with LoaderOptions::hook (its stages are the
  // caller's), and a sample's error as next() raises it.
  Batch batch(std::uint64_t epoch, std::size_t index);
  // Which records made batch `index` of `epoch` on this rank and every
  // parameter drawn for each, as JSON (docs/guides/multi-gpu.md, "Which
  // records made batch N"): {"epoch", "batch", "rank", "world_size", "seed",
  // "batch_size", "shuffle", "samples": [{"position", "draw", "record",
  // "key", "label", ["shard"], ["source", "source_record"], "plan" |
  // "error"}]}. "plan" is the geometry owner's
  // draws (an image's crops, resizes, flips, colour and image ops with their
  // magnitudes, erase boxes, AugMix draws; a volume's patch plans), drawn from
  // each image's header: no pixel is decoded, so a sample that fails only
  // while decoding shows its plan here (batch() replaces or raises it).
  // O(batch). Throws Error(kInvalidArgument) for an index past the epoch.
  std::string batch_provenance(std::uint64_t epoch, std::size_t index) const;

  // Input iteration over one epoch: `for (const Batch& b : loader)`.
  class Iterator {
   public:
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    Iterator() = default;
    explicit Iterator(Loader* l) : loader_(l) { ++*this; }
    const Batch& operator*() const { return *batch_; }
    const Batch* operator->() const { return &*batch_; }
    Iterator& operator++() {
      batch_ = loader_->next();
      if (!batch_) loader_ = nullptr;
      return *this;
    }
    bool operator==(const Iterator& o) const { return loader_ == o.loader_; }

   private:
    Loader* loader_ = nullptr;
    std::optional<Batch> batch_;
  };
  Iterator begin() {
    start_epoch();
    return Iterator(this);
  }
  Iterator end() { return Iterator(); }

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace stoker
