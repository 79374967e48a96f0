#include "sample/sample_maker.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <new>
#include <stdexcept>

#include "decode/npy.h"
#include "order/rng.h"
#include "transform/resize.h"
#include "util/util.h"

namespace stoker::detail {
namespace {

std::atomic<std::int64_t> g_throw_rec{-1};
std::atomic<bool> g_throw_bad_alloc{false};

// Times one sample's stages into the worker's counters (and its trace). Each
// mark ends the stage that began at the previous mark. Without stage timing
// the clock is not read (every lap is 0 ns) but samples are still counted.
class StageTimer {
 public:
  StageTimer(bool timing, Scratch* s, std::uint32_t rec) : timing_(timing), s_(s), rec_(rec), t_(clock()) {}
  void read(std::size_t bytes) {
    const std::int64_t d = lap(kTraceRead);
    if (s_->counters) s_->counters->add_read(d, bytes);
  }
  void decode() {
    const std::int64_t d = lap(kTraceDecode);
    if (s_->counters) s_->counters->add_decode(d);
  }
  void transform() {
    const std::int64_t d = lap(kTraceTransform);
    if (s_->counters) s_->counters->add_transform(d);
  }

 private:
  std::int64_t clock() const { return timing_ ? now_ns() : 0; }
  std::int64_t lap(std::uint8_t stage) {
    const std::int64_t now = clock(), d = now - t_;
    if (s_->trace) s_->trace->add(t_, d, rec_, stage);
    t_ = now;
    return d;
  }
  bool timing_;
  Scratch* s_;
  std::uint32_t rec_;
  std::int64_t t_;
};

}  // namespace

namespace testing {
void throw_in_sample(std::int64_t rec, bool bad_alloc) {
  g_throw_bad_alloc.store(bad_alloc, std::memory_order_relaxed);
  g_throw_rec.store(rec, std::memory_order_release);
}
}  // namespace testing

SampleMaker::SampleMaker(const Source& source, const LoaderOptions& options, SampleCache* cache)
    : source_(source), opt_(options), cache_(cache) {
  decide_spec();
  if (!spec_.arrays) {
    pipeline_.emplace(opt_.transforms, opt_.dtype, opt_.layout);
    spec_.bytes = pipeline_->sample_bytes();
    const std::int64_t h = pipeline_->out_height(), w = pipeline_->out_width();
    spec_.dims = opt_.layout == Layout::kNCHW ? std::vector<std::int64_t>{3, h, w} : std::vector<std::int64_t>{h, w, 3};
    spec_.descr = opt_.dtype == DType::kFloat32 ? "<f4" : "|u1";
  }
}

// kAuto/kArray: record 0 decides. An array sample is a .npy that is not a
// uint8 image (or any .npy under kArray).
void SampleMaker::decide_spec() {
  if (opt_.kind == SampleKind::kImage) return;
  if (opt_.kind == SampleKind::kAuto) {  // no read at start-up when the name says "image"
    const FormatInfo* f = format_of_name(source_.key(0));
    if (f && f->format != Format::kNpy) return;
  }
  std::vector<std::uint8_t> bytes;
  NpyHeader h;
  const bool npy = source_.read(0, &bytes).ok() && sniff_format(bytes.data(), bytes.size()) == Format::kNpy &&
                   parse_npy_header(bytes.data(), bytes.size(), &h).ok();
  if (!npy) {
    if (opt_.kind == SampleKind::kArray) {
      invalid("kind=array: record 0 '" + source_.key(0) + "' is not a readable .npy");
    }
    return;
  }
  const bool image_like = (h.descr == "|u1" || h.descr == "<u1") && !h.fortran_order &&
                          (h.shape.size() == 2 || (h.shape.size() == 3 && (h.shape[2] == 1 || h.shape[2] == 3 ||
                                                                            h.shape[2] == 4 || h.shape[0] == 1 ||
                                                                            h.shape[0] == 3)));
  if (opt_.kind == SampleKind::kAuto && image_like) return;
  if (h.fortran_order) invalid("kind=array: record 0 '" + source_.key(0) + "' is in Fortran order");
  if (!opt_.transforms.empty()) {
    invalid("transforms apply to images; the samples are .npy arrays (dtype " + h.descr +
            ") batched as they are: pass transforms=[] (or kind='image' for uint8 image arrays)");
  }
  spec_.arrays = true;
  spec_.descr = h.descr;
  spec_.bytes = h.item_size;
  for (auto d : h.shape) {
    spec_.dims.push_back(static_cast<std::int64_t>(d));
    spec_.bytes *= static_cast<std::size_t>(d);
  }
}

Status SampleMaker::make(std::uint32_t rec, std::uint64_t seed, std::uint64_t epoch, SampleOut out,
                         Scratch* s) const noexcept {
  Status st;
  // NOTE: the exception barrier: nothing thrown while making a sample may
  // reach the worker thread's top (std::terminate would end the training
  // process, Python and all); it becomes this sample's error, counted and
  // handled under the user's on_corrupt policy like a corrupt file.
  try {
    if (g_throw_rec.load(std::memory_order_acquire) == static_cast<std::int64_t>(rec)) {
      if (g_throw_bad_alloc.load(std::memory_order_relaxed)) throw std::bad_alloc();
      throw std::runtime_error("injected by testing::throw_in_sample");
    }
    st = process(rec, seed, epoch, out.data, s);
    if (st.ok() && out.label) *out.label = source_.label(rec);
  } catch (const std::bad_alloc&) {
    st = Status::ResourceExhausted("out of memory while making the sample");
  } catch (const std::exception& e) {
    st = Status::Internal(std::string("exception while making the sample: ") + e.what());
  } catch (...) {
    st = Status::Internal("unknown exception while making the sample");
  }
  if (!st.ok() && out.label) *out.label = -1;
  return st;
}

Status SampleMaker::process(std::uint32_t rec, std::uint64_t seed, std::uint64_t epoch, void* out, Scratch* s) const {
  if (opt_.cache == Cache::kDecoded && !spec_.arrays) return process_decoded(rec, seed, epoch, out, s);
  StageTimer timer(opt_.stage_timing, s, rec);
  const std::uint8_t* bytes = nullptr;
  std::size_t size = 0;
  Status st;
  const SampleCache::Entry* hit = cache_ ? cache_->find(rec) : nullptr;
  if (hit) {
    bytes = hit->bytes.data();
    size = hit->bytes.size();
  } else {
    st = source_.read(rec, &s->file);
    bytes = s->file.data();
    size = s->file.size();
    if (st.ok() && cache_) cache_->insert(rec, bytes, size);
  }
  timer.read(size);
  if (!st.ok()) return st;
  if (spec_.arrays) {
    st = copy_array(bytes, size, out);
    timer.decode();
    timer.transform();
    return st;
  }
  st = s->decoder.open(bytes, size, opt_.max_image_pixels);
  ImageView view;
  if (st.ok()) {
    Rng rng(mix_key(seed, epoch, rec, kStreamTransform));
    const bool scale = opt_.decode_scale == DecodeScale::kAuto && s->decoder.format() == Format::kJpeg;
    pipeline_->plan(s->decoder.width(), s->decoder.height(), &rng, &s->plan, scale);
    st = s->decoder.decode(s->plan.decode_region, &s->decoded, &view, s->plan.scale_eighths);
  }
  timer.decode();
  if (!st.ok()) return st;
  pipeline_->run(s->plan, view, &s->workspace, out);
  timer.transform();
  return Status::Ok();
}

// cache=kDecoded: every sample is transformed from its stored-size image
// (shorter side at most cache_max_side), decoded once and kept when the
// budget allows; so the output does not depend on whether it was a hit.
Status SampleMaker::process_decoded(std::uint32_t rec, std::uint64_t seed, std::uint64_t epoch, void* out,
                                    Scratch* s) const {
  StageTimer timer(opt_.stage_timing, s, rec);
  ImageView view;
  if (const auto* hit = cache_->find(rec)) {
    view = hit->view();
    timer.decode();
  } else {
    Status st = source_.read(rec, &s->file);
    timer.read(s->file.size());
    if (!st.ok()) return st;
    st = s->decoder.open(s->file.data(), s->file.size(), opt_.max_image_pixels);
    if (st.ok()) st = s->decoder.decode({0, 0, s->decoder.width(), s->decoder.height()}, &s->decoded, &view);
    if (!st.ok()) {
      timer.decode();
      return st;
    }
    if (std::min(view.width, view.height) > opt_.cache_max_side) {
      int w, h;
      resize_output_size(Resize{opt_.cache_max_side, 0, 0}, view.width, view.height, &w, &h);
      resize_bilinear(view, w, h, &s->workspace.resize, &s->stored);
      view = s->stored.view();
    }
    if (view.stride == static_cast<std::ptrdiff_t>(view.width) * 3) {
      cache_->insert(rec, view.data, static_cast<std::size_t>(view.stride) * static_cast<std::size_t>(view.height),
                     view.width, view.height);
    }
    timer.decode();
  }
  Rng rng(mix_key(seed, epoch, rec, kStreamTransform));
  pipeline_->plan(view.width, view.height, &rng, &s->plan);
  // The plan's decode region is a crop of the stored image.
  const auto& r = s->plan.decode_region;
  ImageView region{view.row(r.y) + 3 * r.x, r.width, r.height, view.stride};
  pipeline_->run(s->plan, region, &s->workspace, out);
  timer.transform();
  return Status::Ok();
}

// An array sample: checked against record 0's dtype and shape, copied as is.
Status SampleMaker::copy_array(const std::uint8_t* data, std::size_t size, void* out) const {
  NpyHeader h;
  Status st = sniff_format(data, size) == Format::kNpy ? parse_npy_header(data, size, &h)
                                                        : Status::Corrupt("not a .npy array (the samples are arrays)");
  const auto& dims = spec_.dims;
  if (st.ok() && (h.descr != spec_.descr || h.fortran_order ||
                  !std::equal(h.shape.begin(), h.shape.end(), dims.begin(), dims.end(),
                              [](std::uint64_t a, std::int64_t b) { return static_cast<std::int64_t>(a) == b; }))) {
    std::string want = "(", got = "(";
    for (auto d : dims) want += std::to_string(d) + ",";
    for (auto d : h.shape) got += std::to_string(d) + ",";
    st = Status::Unsupported("array of dtype " + h.descr + " shape " + got + ") differs from the batch's dtype " +
                             spec_.descr + " shape " + want + ")");
  }
  if (st.ok()) std::memcpy(out, data + h.data_offset, spec_.bytes);
  return st;
}

}  // namespace stoker::detail
