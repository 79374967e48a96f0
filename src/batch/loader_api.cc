// The public facade: Batch's accessors and Loader's methods, each forwarding
// to Loader::Impl (loader_impl.h).
#include <cstdio>
#include <fstream>

#include "batch/loader_impl.h"
#include "util/thread.h"

namespace stoker {

// ---- Batch ----
const void* Batch::images() const { return lease_ ? lease_->slot->data.get() : nullptr; }
void* Batch::mutable_images() { return lease_ ? lease_->slot->data.get() : nullptr; }
const std::int64_t* Batch::labels() const { return labels_; }
const TensorView* Batch::tensor(const std::string& name) const {
  for (const TensorView& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}
std::size_t Batch::image_bytes() const { return bytes_; }

// A ring buffer's batch b (`len` samples) as the public Batch.
Batch Loader::Impl::batch_of(detail::Slot* slot, std::size_t b, std::size_t len) const {
  Batch batch;
  batch.lease_ = std::make_shared<detail::SlotLease>(pool_, slot);
  batch.size_ = len;
  batch.index_ = b;
  batch.dtype_ = opt_.dtype;
  batch.descr_ = spec().descr;
  batch.bytes_ = batch.size_ * spec().bytes;
  batch.dims_ = {static_cast<std::int64_t>(batch.size_)};
  batch.dims_.insert(batch.dims_.end(), spec().dims.begin(), spec().dims.end());
  if (!spec().arrays && spec().dims.size() == 3) {
    batch.shape_ = {static_cast<std::int64_t>(batch.size_), spec().dims[0], spec().dims[1], spec().dims[2]};
  }
  std::uint8_t* base = slot->data.get();
  batch.tensors_.reserve(spec().outputs.size());
  for (const detail::OutputSpec& o : spec().outputs) {
    TensorView t{o.name, o.descr, {static_cast<std::int64_t>(batch.size_) * o.per_record}, base + o.offset,
                 batch.size_ * o.bytes};
    t.dims.insert(t.dims.end(), o.dims.begin(), o.dims.end());
    batch.tensors_.push_back(std::move(t));
  }
  if (spec().label_output >= 0) {
    batch.labels_ = reinterpret_cast<const std::int64_t*>(base + spec().outputs[static_cast<std::size_t>(spec().label_output)].offset);
  }
  return batch;
}

// ---- Loader ----
namespace {
// The remote options a loader's source opens with: its own, with the loader's memory_budget (the one budget
// remote shards and caches share; not an option of its own).
RemoteOptions loader_remote(const LoaderOptions& o) {
  RemoteOptions r = o.remote;
  r.memory_budget = o.memory_budget;
  return r;
}
}  // namespace

// NOTE: the options are checked before the source is opened (a bad option
// is reported as such, not as a missing file, and before a long folder scan).
// NOTE: make_unique takes `options` by reference and copies it into Impl
// only after the source is open (its argument order is unspecified).
Loader::Loader(const std::string& source, LoaderOptions options)
    : impl_(std::make_unique<Impl>(
          std::shared_ptr<const Source>((validate_options(options), open_source(source, options.labels, "", options.coco, loader_remote(options)))),
          options, true)) {
  impl_->specs_ = {source};
}
Loader::Loader(const std::vector<std::string>& sources, LoaderOptions options)
    : impl_(std::make_unique<Impl>(
          std::shared_ptr<const Source>((validate_options(options), open_sources(sources, options.labels, "", options.coco, loader_remote(options)))),
          options, true)) {
  impl_->specs_ = sources;
}
Loader::Loader(std::shared_ptr<const Source> source, LoaderOptions options)
    : impl_(std::make_unique<Impl>(std::move(source), std::move(options))) {}
Loader::Loader(const Mixture& mix, LoaderOptions options)
    : impl_(std::make_unique<Impl>(
          std::shared_ptr<const Source>((validate_options(options), std::make_shared<MixtureSource>(mix, options.labels))),
          options, true)) {
  impl_->mixture_json_ = mixture_to_json(mix);
}
void Loader::close() {
  if (impl_ && !impl_->forked()) impl_->close();
}

Loader::~Loader() {
  // NOTE: in a child of fork() the worker threads do not exist and the
  // locks may have been held by them at the fork: leave it all untouched
  // (the child's copy of the memory is released when the child exits).
  if (impl_ && impl_->forked()) {
    (void)impl_.release();
    return;
  }
  // NOTE: on a stoker thread (Python's garbage collector, run by a Python
  // transform on a worker, can free a loader there, its own included) the
  // loader is closed and destroyed on a thread of its own: a worker cannot
  // join itself, and one loader's worker should not wait for another's.
  if (impl_ && detail::on_stoker_thread()) {
    Impl* impl = impl_.release();
    try {
      detail::defer_to_thread("stoker-close", [impl] { delete impl; });
    } catch (...) {  // no thread: its workers are told to stop, and it is left to the process's end
      std::fprintf(stderr, "stoker: a loader freed on one of stoker's threads could not be closed on a thread of its "
                           "own; its workers are stopped and its memory is kept until exit\n");
      impl->request_stop();
    }
  }
}

std::size_t Loader::num_batches() const { return impl_->num_batches_; }
std::size_t Loader::num_samples() const { return impl_->num_samples_; }
const Source& Loader::source() const { return *impl_->source_; }
const LoaderOptions& Loader::options() const { return impl_->opt_; }
std::array<std::int64_t, 3> Loader::sample_shape() const { return impl_->sample_shape(); }
std::vector<std::int64_t> Loader::sample_dims() const { return impl_->spec().dims; }
std::string Loader::sample_descr() const { return impl_->spec().descr; }
bool Loader::arrays() const { return impl_->spec().arrays; }
std::vector<TensorView> Loader::sample_tensors() const {
  std::vector<TensorView> out;
  for (const detail::OutputSpec& o : impl_->spec().outputs) out.push_back({o.name, o.descr, o.dims, nullptr, o.bytes});
  return out;
}
void Loader::set_epoch(std::uint64_t epoch) { impl_->set_epoch(epoch); }
std::uint64_t Loader::epoch() const { return impl_->epoch(); }
void Loader::start_epoch() { impl_->start_epoch(); }
std::optional<Batch> Loader::next() { return impl_->next(); }
std::optional<Batch> Loader::next_for(std::chrono::nanoseconds timeout, bool* timed_out) {
  return impl_->next(std::max<std::int64_t>(0, timeout.count()), timed_out);
}
Stats Loader::stats() const { return impl_->stats(); }
std::string Loader::trace_events() const { return impl_->trace_events(); }
void Loader::write_trace(const std::string& path) const {
  std::ofstream f(path, std::ios::trunc);
  f << "{\"traceEvents\":[" << impl_->trace_events() << "],\"displayTimeUnit\":\"ms\"}\n";
  f.close();
  if (!f) throw Error(Code::kIOError, "cannot write the trace to '" + path + "'");
}
const std::vector<std::string>& Loader::source_specs() const { return impl_->specs_; }
Loader::State Loader::state_dict() const { return impl_->state(); }
void Loader::load_state_dict(const State& state) { impl_->restore(state); }
Batch Loader::batch(std::uint64_t epoch, std::size_t index) { return impl_->replay(epoch, index); }
std::string Loader::batch_provenance(std::uint64_t epoch, std::size_t index) const {
  return impl_->provenance(epoch, index);
}

}  // namespace stoker
