#include "sample/sample_maker.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <new>
#include <stdexcept>

#include "decode/npy.h"
#include "order/rng.h"
#include "transform/nearest.h"
#include "transform/resize.h"
#include "util/util.h"

namespace stoker::detail {
namespace {

std::atomic<std::int64_t> g_throw_rec{-1};
std::atomic<bool> g_throw_bad_alloc{false};

// Records read at construction to learn a mask's pixel size or a tensor's
// dtype and shape (the first that has the member decides).
constexpr std::size_t kProbeRecords = 16;


const char* kind_name(FieldKind k) {
  switch (k) {
    case FieldKind::kImage: return "image";
    case FieldKind::kMask: return "mask";
    case FieldKind::kBoxes: return "boxes";
    case FieldKind::kLabel: return "label";
    case FieldKind::kTensor: return "tensor";
    case FieldKind::kVolume: return "volume";
    case FieldKind::kLabelVolume: return "label_volume";
  }
  return "?";
}

// "field 'seg' (member 'seg.png')", for messages.
std::string field_name(const FieldSpec& f) {
  std::string s = "field '" + f.field.name + "'";
  if (f.folder) {
    s += " (paired folder '" + f.folder->root() + "')";
  } else if (!f.primary && f.part >= 0) {
    s += " (member '" + f.field.member + (f.field.member.empty() ? f.member : "") + "')";
  }
  return s;
}


std::string size_text(int w, int h) { return std::to_string(w) + "x" + std::to_string(h); }

// An integer label held by a member: its text ("7\n", a .cls member or a
// list file's column), or a JSON member's field.
Status parse_label(const std::uint8_t* data, std::size_t size, const std::string& json_key, std::int64_t* out) {
  if (!json_key.empty()) {
    const auto j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return Status::Corrupt("not a JSON object");
    auto it = j.find(json_key);
    if (it == j.end()) return Status::NotFound("the JSON has no key '" + json_key + "'");
    if (!it->is_number_integer()) return Status::Corrupt("'" + json_key + "' is not an integer: " + it->dump());
    *out = it->get<std::int64_t>();
    return Status::Ok();
  }
  std::size_t b = 0, e = size;
  while (b < e && std::isspace(data[b])) ++b;
  while (e > b && std::isspace(data[e - 1])) --e;
  const char* first = reinterpret_cast<const char*>(data) + b;
  const char* last = reinterpret_cast<const char*>(data) + e;
  auto [p, ec] = std::from_chars(first, last, *out);
  if (ec != std::errc() || p != last || b == e) {
    return Status::Corrupt("not an integer: '" + std::string(first, std::min<std::size_t>(e - b, 40)) + "'");
  }
  return Status::Ok();
}

std::string dims_text(const std::vector<std::int64_t>& d) {
  std::string s = "(";
  for (auto x : d) s += std::to_string(x) + ",";
  return s + ")";
}

}  // namespace

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

namespace testing {
void throw_in_sample(std::int64_t rec, bool bad_alloc) {
  g_throw_bad_alloc.store(bad_alloc, std::memory_order_relaxed);
  g_throw_rec.store(rec, std::memory_order_release);
}
}  // namespace testing

SampleMaker::SampleMaker(const Source& source, const LoaderOptions& options, SampleCache* cache)
    : source_(source), opt_(options), cache_(cache) {
  resolve_schema();
  const bool volumes = std::any_of(spec_.fields.begin(), spec_.fields.end(),
                                   [](const FieldSpec& f) { return f.field.kind == FieldKind::kVolume; });
  if (volumes) {
    volumes_ = std::make_unique<VolumeMaker>(
        source_, opt_, &spec_.fields,
        [this](const FieldSpec& f, std::size_t rec, std::vector<std::uint8_t>* out) { return read_field(f, rec, out); },
        [this](FieldSpec* f, std::string name, std::string descr, std::vector<std::int64_t> dims, std::size_t item,
               int per_record) {
          if (f && f->field.kind == FieldKind::kLabel && spec_.label_output < 0) {
            spec_.label_output = static_cast<int>(spec_.outputs.size());
          }
          add_output(f, std::move(name), std::move(descr), std::move(dims), item, per_record);
        });
    place_outputs();
    return;
  }
  if (opt_.hook && (spec_.named || spec_.arrays || spec_.image < 0)) {
    invalid("a Python stage (a transform stoker has no kernel for, target_transform, collate_fn) applies to the "
            "default schema of images and labels, not to fields, views or .npy arrays");
  }
  if (spec_.image >= 0 && !opt_.views.empty()) {
    for (const View& v : opt_.views) {
      try {
        views_.emplace_back(v.transforms, opt_.dtype, opt_.layout);
      } catch (const Error& e) {
        invalid("views: view '" + v.name + "': " + e.what());
      }
    }
  } else if (spec_.image >= 0) {
    pipeline_.emplace(opt_.transforms, opt_.dtype, opt_.layout, /*fixed_size=*/!opt_.hook);
  } else if (opt_.cache == Cache::kDecoded) {
    invalid(spec_.arrays ? "cache='decoded' applies to images; use cache='ram' for arrays"
                         : "cache='decoded' keeps decoded images, and the schema has no image field: use cache='ram'");
  }
  decide_from_samples();
  // The outputs, in field order; each tensor's batch region 64-byte aligned.
  for (FieldSpec& f : spec_.fields) {
    switch (f.field.kind) {
      case FieldKind::kImage: {
        const char* descr = opt_.dtype == DType::kFloat32 ? "<f4" : "|u1";
        const std::size_t item = opt_.dtype == DType::kFloat32 ? 4 : 1;
        auto dims = [&](const Pipeline& p) {
          const std::int64_t h = p.out_height(), w = p.out_width();
          return opt_.layout == Layout::kNCHW ? std::vector<std::int64_t>{3, h, w} : std::vector<std::int64_t>{h, w, 3};
        };
        if (opt_.hook) break;  // each image goes to the hook at its own size (image_out)
        if (views_.empty()) {
          add_output(&f, f.field.name, descr, dims(*pipeline_), item);
          break;
        }
        for (std::size_t v = 0; v < views_.size(); ++v) {  // the views in place of the image
          std::vector<std::int64_t> d = dims(views_[v]);
          d.insert(d.begin(), opt_.views[v].count);
          view_outputs_.push_back(static_cast<int>(spec_.outputs.size()));
          add_output(v == 0 ? &f : nullptr, opt_.views[v].name, descr, std::move(d), item);
        }
        break;
      }
      case FieldKind::kMask:
        add_output(&f, f.field.name, f.mask_bytes == 1 ? "|u1" : "<i4",
                   {pipeline_->out_height(), pipeline_->out_width()}, f.mask_bytes == 1 ? 1 : 4);
        break;
      case FieldKind::kBoxes:
        add_output(&f, f.field.name, "<f4", {f.field.max_boxes, 4}, 4);
        add_output(nullptr, f.field.name + "_labels", "<i8", {f.field.max_boxes}, 8);
        add_output(nullptr, f.field.name + "_count", "<i8", {}, 8);
        break;
      case FieldKind::kLabel:
        if (spec_.label_output < 0) spec_.label_output = static_cast<int>(spec_.outputs.size());
        add_output(&f, f.field.name, "<i8", {}, 8);
        break;
      case FieldKind::kTensor:
        add_output(&f, f.field.name, f.tensor_descr, f.tensor_dims, f.tensor_item);
        break;
      case FieldKind::kVolume:
      case FieldKind::kLabelVolume:
        invalid("field '" + f.field.name + "': a label volume needs a Volume field in the schema");
    }
  }
  place_outputs();
}

SampleMaker::~SampleMaker() = default;

// Each output's region of the batch buffer, 64-byte aligned, in order.
void SampleMaker::place_outputs() {
  const OutputSpec& o0 = spec_.outputs.front();
  spec_.bytes = o0.bytes;
  spec_.dims = o0.dims;
  spec_.descr = o0.descr;
  std::size_t offset = 0;
  for (OutputSpec& o : spec_.outputs) {
    o.offset = offset;
    offset += (o.bytes * opt_.batch_size + 63) / 64 * 64;
  }
  spec_.batch_bytes = offset;
}

void SampleMaker::add_output(FieldSpec* f, std::string name, std::string descr, std::vector<std::int64_t> dims,
                             std::size_t item, int per_record) {
  OutputSpec o{std::move(name), std::move(descr), std::move(dims), item * static_cast<std::size_t>(per_record), 0,
               per_record};
  for (auto d : o.dims) o.bytes *= static_cast<std::size_t>(d);
  if (f) f->output = static_cast<int>(spec_.outputs.size());
  spec_.outputs.push_back(std::move(o));
}

// The schema the options give, or the default one; where each field's bytes
// come from.
void SampleMaker::resolve_schema() {
  std::vector<Field> fields = opt_.fields;
  spec_.named = !fields.empty() || !opt_.views.empty();
  if (fields.empty()) {
    decide_default_schema();
    fields = {spec_.arrays ? TensorField("array") : ImageField("image"), LabelField("label")};
  }
  for (std::size_t i = 0; i < fields.size(); ++i) {
    FieldSpec f;
    f.field = fields[i];
    const std::string& m = f.field.member;
    const bool spatial_or_tensor = f.field.kind == FieldKind::kMask || f.field.kind == FieldKind::kBoxes ||
                                   f.field.kind == FieldKind::kTensor || f.field.kind == FieldKind::kLabelVolume;
    if (m.empty() && (f.field.kind == FieldKind::kImage || f.field.kind == FieldKind::kVolume ||
                      (!spec_.named && f.field.kind == FieldKind::kTensor))) {
      f.primary = true;
    } else if (m.rfind("json:", 0) == 0 && (f.field.kind == FieldKind::kLabel || f.field.kind == FieldKind::kBoxes)) {
      f.member = "json";
      f.json_key = m.substr(5);
    } else if (!m.empty()) {
      f.member = m;
    } else if (spatial_or_tensor) {
      f.member = f.field.name;
    }
    if (!f.field.folder.empty()) {
      f.member.clear();
      f.folder = std::make_shared<const PairedFolder>(f.field.folder);
    }
    if (f.primary || !f.member.empty() || f.folder) f.part = spec_.parts++;
    if (f.field.kind == FieldKind::kImage) spec_.image = static_cast<int>(i);
    spec_.fields.push_back(std::move(f));
  }
}

// The default schema: images, or (kAuto, kArray) .npy arrays when record 0
// is a .npy that is not a uint8 image (or any .npy under kArray).
void SampleMaker::decide_default_schema() {
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
}

// A mask's pixel size and a tensor's dtype and shape: from the first of the
// first records that has the member.
void SampleMaker::decide_from_samples() {
  for (FieldSpec& f : spec_.fields) {
    if (f.field.kind != FieldKind::kMask && f.field.kind != FieldKind::kTensor) continue;
    std::vector<std::uint8_t> bytes;
    std::string first_error;
    bool found = false;
    for (std::size_t r = 0; r < std::min(source_.size(), kProbeRecords) && !found; ++r) {
      Status st = read_field(f, r, &bytes);
      if (st.ok() && f.field.kind == FieldKind::kMask) {
        ImageDecoder dec;
        MaskBuffer mask;
        st = dec.open_mask(bytes.data(), bytes.size(), opt_.max_image_pixels);
        if (st.ok()) st = dec.decode_mask(&mask);
        if (st.ok()) {
          f.mask_bytes = mask.bytes_per_pixel;
          found = true;
        }
      } else if (st.ok()) {
        NpyHeader h;
        st = sniff_format(bytes.data(), bytes.size()) == Format::kNpy ? parse_npy_header(bytes.data(), bytes.size(), &h)
                                                                       : Status::Unsupported("not a .npy array");
        if (st.ok() && h.fortran_order) st = Status::Unsupported(".npy in Fortran order");
        if (st.ok()) {
          f.tensor_descr = h.descr;
          f.tensor_item = h.item_size;
          f.tensor_dims.assign(h.shape.begin(), h.shape.end());
          found = true;
        }
      }
      if (!st.ok() && first_error.empty()) first_error = "record " + std::to_string(r) + " '" + source_.key(r) + "': " + st.message();
    }
    if (found && f.field.kind == FieldKind::kMask && f.mask_bytes == 1 && f.field.fill > 255) {
      invalid(field_name(f) + " (mask): fill=" + std::to_string(f.field.fill) +
              " does not fit its 8-bit masks (0..255, as record 0's)");
    }
    if (!found) {
      invalid(field_name(f) + " (" + kind_name(f.field.kind) + "): none of the first records has a readable one, so its " +
              (f.field.kind == FieldKind::kMask ? "pixel size" : "dtype and shape") + " is unknown; " + first_error);
    }
  }
}

// A field's bytes: the record itself, one of its members, or its file in
// the field's paired folder.
Status SampleMaker::read_field(const FieldSpec& f, std::size_t rec, std::vector<std::uint8_t>* out) const {
  if (f.primary) return source_.read(rec, out);
  if (f.folder) return f.folder->read(source_.relative_key(rec), out);
  return source_.read_member(rec, f.member, out);
}

// A field's error names the field (with a user's schema; the default
// schema's messages are the file's reason alone, as they always were).
Status SampleMaker::tag(const FieldSpec& f, const Status& st) const {
  return st.ok() || !spec_.named ? st : Status(st.code(), field_name(f) + ": " + st.message());
}

Status SampleMaker::make(std::uint32_t rec, std::uint64_t draw, std::uint64_t seed, std::uint64_t epoch, SampleOut out,
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
    if (volumes_) {
      st = volumes_->make(rec, draw, seed, epoch, spec_, out.batch, out.pos, &s->volume, s->counters);
    } else {
      st = opt_.cache == Cache::kDecoded ? process_decoded(rec, draw, seed, epoch, out, s)
                                           : process(rec, draw, seed, epoch, out, s);
    }
  } catch (const std::bad_alloc&) {
    st = Status::ResourceExhausted("out of memory while making the sample");
  } catch (const std::exception& e) {
    st = Status::Internal(std::string("exception while making the sample: ") + e.what());
  } catch (...) {
    st = Status::Internal("unknown exception while making the sample");
  }
  if (!st.ok()) {
    for (const FieldSpec& f : spec_.fields) {
      if (f.field.kind != FieldKind::kLabel) continue;
      const std::int64_t minus_one = -1;
      const int n = spec_.outputs[static_cast<std::size_t>(f.output)].per_record;
      for (int e = 0; e < n; ++e) std::memcpy(dest(out, f.output) + e * sizeof minus_one, &minus_one, sizeof minus_one);
    }
  }
  return st;
}

Status SampleMaker::read_record(std::uint32_t rec, std::vector<std::uint8_t>* bytes,
                                std::vector<std::uint64_t>* ends) const {
  bytes->clear();
  ends->clear();
  if (spec_.parts == 1) {
    const FieldSpec& f = *std::find_if(spec_.fields.begin(), spec_.fields.end(), [](const FieldSpec& x) { return x.part == 0; });
    return tag(f, read_field(f, rec, bytes));
  }
  std::vector<std::uint8_t> buf;
  for (const FieldSpec& f : spec_.fields) {
    if (f.part < 0) continue;
    Status st = read_field(f, rec, &buf);
    if (!st.ok()) return tag(f, st);
    bytes->insert(bytes->end(), buf.begin(), buf.end());
    ends->push_back(bytes->size());
  }
  return Status::Ok();
}

RecordFootprint SampleMaker::footprint(std::uint32_t rec) const {
  RecordFootprint f;
  std::vector<std::uint8_t> bytes;
  std::vector<std::uint64_t> ends;
  if (!read_record(rec, &bytes, &ends).ok()) return f;
  f.encoded = bytes.size();
  f.decoded = bytes.size();
  if (spec_.image >= 0) {
    const std::size_t part = static_cast<std::size_t>(spec_.fields[static_cast<std::size_t>(spec_.image)].part);
    const std::uint64_t begin = part == 0 ? 0 : ends[part - 1], end = ends.empty() ? bytes.size() : ends[part];
    ImageDecoder d;
    if (!d.open(bytes.data() + begin, end - begin, opt_.max_image_pixels).ok()) return f;
    int w = d.width(), h = d.height();
    f.short_side = std::min(w, h);
    if (f.short_side > opt_.cache_max_side) resize_output_size(Resize{opt_.cache_max_side, 0, 0}, d.width(), d.height(), &w, &h);
    f.decoded = f.decoded - (end - begin) + static_cast<std::uint64_t>(w) * static_cast<std::uint64_t>(h) * 3;
  }
  f.ok = true;
  return f;
}

// Points s->part at each member's bytes: a cache entry's, or read now (and
// offered to the cache).
Status SampleMaker::read_parts(std::uint32_t rec, Scratch* s, std::size_t* bytes_read, bool look_up) const {
  s->part.resize(static_cast<std::size_t>(spec_.parts));
  *bytes_read = 0;
  s->hit = cache_ && look_up ? cache_->find(rec) : nullptr;  // held while the sample uses its bytes
  s->grid = false;
  if (s->hit && rewrite_) s->hit = rewrite_->on_hit(rec, std::move(s->hit), &s->rewrite);
  if (const SampleCache::Entry* hit = s->hit.get()) {
    s->grid = hit->grid;
    std::uint64_t begin = 0;
    for (int k = 0; k < spec_.parts; ++k) {
      const std::uint64_t end = spec_.parts == 1 ? hit->bytes.size() : hit->ends[static_cast<std::size_t>(k)];
      s->part[static_cast<std::size_t>(k)] = {hit->bytes.data() + begin, end - begin};
      begin = end;
    }
    *bytes_read = hit->bytes.size();
    return Status::Ok();
  }
  if (spec_.parts == 1) {  // one member: no copy into a bundle
    const FieldSpec& f = *std::find_if(spec_.fields.begin(), spec_.fields.end(), [](const FieldSpec& x) { return x.part == 0; });
    Status st = read_field(f, rec, &s->file);
    *bytes_read = s->file.size();
    if (!st.ok()) return tag(f, st);
    s->part[0] = {s->file.data(), s->file.size()};
    if (rewrite_) {
      if (rewrite_->on_miss(rec, s->file.data(), s->file.size(), nullptr, &s->rewrite)) {
        s->part[0] = {s->rewrite.record.data(), s->rewrite.record.size()};
        s->grid = true;
      }
    } else if (cache_ && opt_.cache == Cache::kRam) {
      cache_->insert(rec, s->file.data(), s->file.size());
    }
    return Status::Ok();
  }
  s->members.resize(static_cast<std::size_t>(spec_.parts));
  for (const FieldSpec& f : spec_.fields) {
    if (f.part < 0) continue;
    auto& buf = s->members[static_cast<std::size_t>(f.part)];
    Status st = read_field(f, rec, &buf);
    *bytes_read += buf.size();
    if (!st.ok()) return tag(f, st);
    s->part[static_cast<std::size_t>(f.part)] = {buf.data(), buf.size()};
  }
  if (cache_ && opt_.cache == Cache::kRam) {
    s->bundle.clear();
    s->ends.clear();
    for (const auto& m : s->members) {
      s->bundle.insert(s->bundle.end(), m.begin(), m.end());
      s->ends.push_back(s->bundle.size());
    }
    if (!rewrite_) {
      cache_->insert(rec, s->bundle.data(), s->bundle.size(), 0, 0, &s->ends);
    } else if (rewrite_->on_miss(rec, s->bundle.data(), s->bundle.size(), &s->ends, &s->rewrite)) {
      std::uint64_t begin = 0;
      for (std::size_t k = 0; k < s->members.size(); ++k) {
        s->part[k] = {s->rewrite.record.data() + begin, s->rewrite.ends[k] - begin};
        begin = s->rewrite.ends[k];
      }
      s->grid = true;
    }
  }
  return Status::Ok();
}

Status SampleMaker::process(std::uint32_t rec, std::uint64_t draw, std::uint64_t seed, std::uint64_t epoch, SampleOut out,
                            Scratch* s) const {
  StageTimer timer(opt_.stage_timing, s, rec);
  std::size_t size = 0;
  Status st = read_parts(rec, s, &size);
  timer.read(size);
  if (!st.ok()) return st;
  return from_parts(rec, draw, seed, epoch, out, s, &timer);
}

// The sample from the bytes in s->part: the image's region (or a scaled
// decode) through the pipeline, then the other fields.
Status SampleMaker::from_parts(std::uint32_t rec, std::uint64_t draw, std::uint64_t seed, std::uint64_t epoch,
                               SampleOut out, Scratch* s, StageTimer* t) const {
  StageTimer& timer = *t;
  Status st;
  if (spec_.image < 0) {  // no geometry: labels and tensors
    timer.decode();
    st = other_fields(rec, 0, 0, out, s, false);
    timer.transform();
    return st;
  }
  const FieldSpec& image = spec_.fields[static_cast<std::size_t>(spec_.image)];
  const auto [bytes, n] = s->part[static_cast<std::size_t>(image.part)];
  st = s->decoder.open(bytes, n, opt_.max_image_pixels);
  if (!views_.empty()) {
    if (st.ok()) st = make_views(nullptr, draw, seed, epoch, out, s, &timer);
    if (!st.ok()) {
      timer.decode();
      return tag(image, st);
    }
    st = other_fields(rec, s->decoder.width(), s->decoder.height(), out, s, false);
    timer.transform();
    return st;
  }
  ImageView view;
  int width = 0, height = 0;
  if (st.ok()) {
    width = s->decoder.width();
    height = s->decoder.height();
    Rng rng(mix_key(seed, epoch, draw, kStreamTransform));
    pipeline_->plan_geometry(width, height, &rng, &s->geo);
    if (!s->geo.error.empty()) return tag(image, Status::InvalidArgument(s->geo.error));
    s->plan = s->geo;
    const bool scale = opt_.decode_scale == DecodeScale::kAuto && s->decoder.format() == Format::kJpeg;
    plan_image_read(width, height, &s->plan, scale);
    const std::int64_t d0 = rewrite_ ? now_ns() : 0;
    st = s->decoder.decode(s->plan.decode_region, &s->decoded, &view, s->plan.scale_eighths);
    // The rewrite's first-epoch allowance counts what it saves (cache/ram_rewrite.h).
    if (rewrite_ && st.ok() && s->decoder.format() == Format::kJpeg) rewrite_->note_decode(s->grid, now_ns() - d0);
  }
  timer.decode();
  if (!st.ok()) return tag(image, st);
  pipeline_->run(s->plan, view, &s->workspace, image_out(out, image, view, s));
  st = other_fields(rec, width, height, out, s, false);
  timer.transform();
  return st;
}

// Where the pipeline writes the image of `s->plan` from `region`: its place
// in the batch, or with a hook the scratch's buffer at the sample's own size.
void* SampleMaker::image_out(SampleOut out, const FieldSpec& image, const ImageView& region, Scratch* s) const {
  if (!opt_.hook) return dest(out, image.output);
  HookImage& h = s->hooked;
  Pipeline::sample_size(s->plan, region.width, region.height, &h.width, &h.height);
  h.data.resize((pipeline_->sample_bytes(h.width, h.height) + sizeof(float) - 1) / sizeof(float));
  return h.data.data();
}

void SampleMaker::hook_sample(std::uint32_t rec, const Scratch& s, HookSample* out) const {
  out->record = rec;
  out->label = source_.label(rec);
  out->image = s.hooked.data.data();
  out->descr = opt_.dtype == DType::kFloat32 ? "<f4" : "|u1";
  const std::int64_t h = s.hooked.height, w = s.hooked.width;
  out->dims = opt_.layout == Layout::kNCHW ? std::vector<std::int64_t>{3, h, w} : std::vector<std::int64_t>{h, w, 3};
}

// cache=kDecoded, a miss: the decoder open on record `rec`'s image (its
// parts in s->part) decodes it whole; its stored form (the image with its
// shorter side at most cache_max_side, then each other part's) goes into
// s->bundle / s->ends and is offered to the cache; *width, *height: the
// stored image's size.
Status SampleMaker::store_decoded(std::uint32_t rec, Scratch* s, int* width, int* height) const {
  const FieldSpec& image = spec_.fields[static_cast<std::size_t>(spec_.image)];
  ImageView view;
  Status st = s->decoder.decode({0, 0, s->decoder.width(), s->decoder.height()}, &s->decoded, &view);
  if (!st.ok()) return tag(image, st);
  const int full_w = view.width, full_h = view.height;
  int& w = *width;
  int& h = *height;
  w = full_w, h = full_h;
  if (std::min(view.width, view.height) > opt_.cache_max_side) {
    resize_output_size(Resize{opt_.cache_max_side, 0, 0}, view.width, view.height, &w, &h);
    resize_bilinear(view, w, h, &s->workspace.resize, &s->stored);
    view = s->stored.view();
  }
  // The stored record: the image's pixels, then each other part's stored form.
  s->bundle.clear();
  s->ends.clear();
  for (int y = 0; y < view.height; ++y) {
    s->bundle.insert(s->bundle.end(), view.row(y), view.row(y) + 3 * static_cast<std::size_t>(view.width));
  }
  s->ends.push_back(s->bundle.size());
  for (const FieldSpec& f : spec_.fields) {
    if (f.part < 0 || &f == &image) continue;
    const auto [bytes, n] = s->part[static_cast<std::size_t>(f.part)];
    if (f.field.kind == FieldKind::kMask) {
      st = decode_mask(f, bytes, n, full_w, full_h, s);
      if (!st.ok()) return tag(f, st);
      MaskView mv = s->mask.view();
      if (w != full_w || h != full_h) {
        resize_nearest(mv, w, h, &s->stored_mask);
        mv = s->stored_mask.view();
      }
      for (int y = 0; y < mv.height; ++y) {
        s->bundle.insert(s->bundle.end(), mv.row(y), mv.row(y) + static_cast<std::size_t>(mv.width) * mv.bytes_per_pixel);
      }
    } else if (f.field.kind == FieldKind::kBoxes) {
      st = parse_boxes(bytes, n, f.field.format, f.json_key, &s->boxes);
      if (st.ok()) st = check_boxes_on_canvas(full_w, full_h, &s->boxes);
      if (!st.ok()) return tag(f, st);
      scale_boxes(full_w, full_h, w, h, &s->boxes);
      const auto* b = reinterpret_cast<const std::uint8_t*>(s->boxes.data());
      s->bundle.insert(s->bundle.end(), b, b + s->boxes.size() * sizeof(BoxRow));
    } else {
      s->bundle.insert(s->bundle.end(), bytes, bytes + n);
    }
    s->ends.push_back(s->bundle.size());
  }
  if (cache_) cache_->insert(rec, s->bundle.data(), s->bundle.size(), w, h, spec_.parts > 1 ? &s->ends : nullptr);
  return Status::Ok();
}

bool SampleMaker::fill_deferred(Scratch* s) const {
  if (!has_deferred_.load(std::memory_order_relaxed) || (first_batch_ && first_batch_->load(std::memory_order_relaxed))) {
    return false;
  }
  std::uint32_t rec = 0;
  {
    MutexLock lock(deferred_mu_);
    if (deferred_.empty()) return false;
    rec = deferred_.back();
    deferred_.pop_back();
    if (deferred_.empty()) has_deferred_.store(false, std::memory_order_relaxed);
  }
  if (cache_->contains(rec)) return true;
  std::size_t size = 0;
  const std::size_t ip = static_cast<std::size_t>(spec_.fields[static_cast<std::size_t>(spec_.image)].part);
  int w = 0, h = 0;
  // NOTE: an error leaves the record out; the sample that next reads it
  // meets the same error and counts it under on_corrupt, as without the
  // cache.
  if (read_parts(rec, s, &size, /*look_up=*/false).ok() &&
      s->decoder.open(s->part[ip].first, s->part[ip].second, opt_.max_image_pixels).ok()) {
    (void)store_decoded(rec, s, &w, &h);
  }
  return true;
}

// cache=kDecoded: every sample is transformed from its stored form, decoded
// once and kept when the budget allows: the image with its shorter side at
// most cache_max_side, masks resized with it (nearest), boxes rescaled,
// other members as read. So the output does not depend on whether it was a
// hit.
Status SampleMaker::process_decoded(std::uint32_t rec, std::uint64_t draw, std::uint64_t seed, std::uint64_t epoch, SampleOut out,
                                    Scratch* s) const {
  StageTimer timer(opt_.stage_timing, s, rec);
  const FieldSpec& image = spec_.fields[static_cast<std::size_t>(spec_.image)];
  const std::size_t ip = static_cast<std::size_t>(image.part);
  ImageView view;
  s->hit = cache_ ? cache_->find(rec) : nullptr;
  if (const SampleCache::Entry* hit = s->hit.get()) {
    s->part.resize(static_cast<std::size_t>(spec_.parts));
    std::uint64_t begin = 0;
    for (int k = 0; k < spec_.parts; ++k) {
      const std::uint64_t end = spec_.parts == 1 ? hit->bytes.size() : hit->ends[static_cast<std::size_t>(k)];
      s->part[static_cast<std::size_t>(k)] = {hit->bytes.data() + begin, end - begin};
      begin = end;
    }
    view = {s->part[ip].first, hit->width, hit->height, static_cast<std::ptrdiff_t>(hit->width) * 3};
    timer.decode();
  } else {
    std::size_t size = 0;
    Status st = read_parts(rec, s, &size, /*look_up=*/false);  // just missed: not counted twice
    timer.read(size);
    if (!st.ok()) return st;
    st = s->decoder.open(s->part[ip].first, s->part[ip].second, opt_.max_image_pixels);
    if (!st.ok()) {
      timer.decode();
      return tag(image, st);
    }
    // NOTE: before the loader's first batch, an image the cache would keep
    // as decoded (not downscaled) is made from its region alone, exactly as
    // the stored form would give it (decode_scale exact: a region decode is
    // the crop of the full decode): the first batch then costs what it costs
    // without the cache. The record is stored later in the first epoch, by
    // fill_deferred(), so the second epoch does not pay for it.
    if (first_batch_ && first_batch_->load(std::memory_order_relaxed) && spec_.parts == 1 &&
        opt_.decode_scale == DecodeScale::kExact &&
        std::min(s->decoder.width(), s->decoder.height()) <= opt_.cache_max_side) {
      if (cache_) {
        MutexLock lock(deferred_mu_);
        deferred_.push_back(rec);
        has_deferred_.store(true, std::memory_order_relaxed);
      }
      return from_parts(rec, draw, seed, epoch, out, s, &timer);
    }
    int w = 0, h = 0;
    st = store_decoded(rec, s, &w, &h);
    if (!st.ok()) {
      timer.decode();
      return st;
    }
    // From here on the stored form is used, hit or not.
    std::uint64_t begin = 0;
    for (int k = 0; k < spec_.parts; ++k) {
      const std::uint64_t end = s->ends[static_cast<std::size_t>(k)];
      s->part[static_cast<std::size_t>(k)] = {s->bundle.data() + begin, end - begin};
      begin = end;
    }
    view = {s->part[ip].first, w, h, static_cast<std::ptrdiff_t>(w) * 3};
    timer.decode();
  }
  if (!views_.empty()) {
    Status st = make_views(&view, draw, seed, epoch, out, s, nullptr);
    if (!st.ok()) return tag(image, st);
    st = other_fields(rec, view.width, view.height, out, s, true);
    timer.transform();
    return st;
  }
  Rng rng(mix_key(seed, epoch, draw, kStreamTransform));
  pipeline_->plan_geometry(view.width, view.height, &rng, &s->geo);
  if (!s->geo.error.empty()) return tag(image, Status::InvalidArgument(s->geo.error));
  s->plan = s->geo;
  plan_image_read(view.width, view.height, &s->plan, false);
  // The plan's decode region is a crop of the stored image.
  const auto& r = s->plan.decode_region;
  ImageView region{view.row(r.y) + 3 * r.x, r.width, r.height, view.stride};
  pipeline_->run(s->plan, region, &s->workspace, image_out(out, image, region, s));
  const Status st = other_fields(rec, view.width, view.height, out, s, true);
  timer.transform();
  return st;
}

// LoaderOptions::views: every copy of every view planned in the image's
// full frame (copy c of view v from its own stream), then one decode of the
// union of their first crops (or, with `stored`, that region of the stored
// image), and each copy run from it into its place in the view's output.
// The decoder is open on the image unless `stored`; `timer` (when
// decoding) marks the decode.
Status SampleMaker::make_views(const ImageView* stored, std::uint64_t draw, std::uint64_t seed, std::uint64_t epoch,
                               SampleOut out, Scratch* s, StageTimer* timer) const {
  const int width = stored ? stored->width : s->decoder.width();
  const int height = stored ? stored->height : s->decoder.height();
  std::size_t copies = 0;
  for (const View& v : opt_.views) copies += static_cast<std::size_t>(v.count);
  s->view_plans.resize(copies);
  int x0 = width, y0 = height, x1 = 0, y1 = 0;  // the union of what the copies read
  std::size_t k = 0;
  for (std::size_t v = 0; v < views_.size(); ++v) {
    for (int c = 0; c < opt_.views[v].count; ++c, ++k) {
      SamplePlan& plan = s->view_plans[k];
      Rng rng(mix_key(seed, epoch, draw, view_stream(static_cast<int>(v), c)));
      views_[v].plan_geometry(width, height, &rng, &plan);
      if (!plan.error.empty()) return Status::InvalidArgument(opt_.views[v].name + ": " + plan.error);
      Box b{0, 0, width, height};
      if (!plan.steps.empty() && plan.steps[0].kind == Step::kCrop) b = plan.steps[0].box;
      const int bx0 = std::max(b.x, 0), by0 = std::max(b.y, 0);
      const int bx1 = std::min(b.x + b.width, width), by1 = std::min(b.y + b.height, height);
      if (bx1 <= bx0 || by1 <= by0) continue;  // all padding: reads nothing
      x0 = std::min(x0, bx0), y0 = std::min(y0, by0), x1 = std::max(x1, bx1), y1 = std::max(y1, by1);
    }
  }
  if (x1 <= x0 || y1 <= y0) x0 = 0, y0 = 0, x1 = std::min(width, 1), y1 = std::min(height, 1);
  const Box region{x0, y0, x1 - x0, y1 - y0};
  ImageView view;
  if (stored) {
    view = {stored->row(region.y) + 3 * region.x, region.width, region.height, stored->stride};
  } else {
    // NOTE: the exact decode of the region is the crop of the full decode
    // (decode_scale applies to single transform lists only).
    Status st = s->decoder.decode(region, &s->decoded, &view);
    if (timer) timer->decode();
    if (!st.ok()) return st;
  }
  k = 0;
  for (std::size_t v = 0; v < views_.size(); ++v) {
    std::uint8_t* dst = dest(out, view_outputs_[v]);
    for (int c = 0; c < opt_.views[v].count; ++c, ++k) {
      SamplePlan& plan = s->view_plans[k];
      if (!plan.steps.empty() && plan.steps[0].kind == Step::kCrop) {  // into the region's frame
        plan.steps[0].box.x -= region.x;
        plan.steps[0].box.y -= region.y;
      }
      views_[v].run(plan, view, &s->workspace, dst + static_cast<std::size_t>(c) * views_[v].sample_bytes());
    }
  }
  return Status::Ok();
}

// Every field but the image, from s->part: masks and boxes under the
// geometric plan s->geo of a width x height image. `stored`: the parts are
// cache=kDecoded's stored forms (mask pixels of the image's size, BoxRows).
Status SampleMaker::other_fields(std::uint32_t rec, int width, int height, SampleOut out, Scratch* s,
                                 bool stored) const {
  for (const FieldSpec& f : spec_.fields) {
    const auto [bytes, n] = f.part >= 0 ? s->part[static_cast<std::size_t>(f.part)]
                                        : std::pair<const std::uint8_t*, std::size_t>{nullptr, 0};
    Status st;
    switch (f.field.kind) {
      case FieldKind::kImage:
      case FieldKind::kVolume:
      case FieldKind::kLabelVolume:
        break;
      case FieldKind::kLabel: {
        std::int64_t label = 0;
        if (f.part < 0) {
          label = source_.label(rec);
        } else {
          st = parse_label(bytes, n, f.json_key, &label);
        }
        if (st.ok()) std::memcpy(dest(out, f.output), &label, sizeof label);
        break;
      }
      case FieldKind::kTensor: {
        const OutputSpec& o = spec_.outputs[static_cast<std::size_t>(f.output)];
        st = copy_array(o, bytes, n, dest(out, f.output));
        break;
      }
      case FieldKind::kMask: {
        MaskView mv;
        if (stored) {
          mv = {bytes, width, height, static_cast<std::ptrdiff_t>(width) * f.mask_bytes, f.mask_bytes};
        } else {
          // Only the rows down to the first crop's bottom are read by the plan.
          int rows = height;
          if (!s->geo.steps.empty() && s->geo.steps[0].kind == Step::kCrop) {
            const Box& b = s->geo.steps[0].box;
            rows = std::clamp(b.y + b.height, 0, height);
          }
          st = decode_mask(f, bytes, n, width, height, s, rows);
          mv = s->mask.view();
        }
        if (st.ok()) run_mask_plan(s->geo, mv, f.field.fill, &s->mask_ws, dest(out, f.output), f.mask_bytes == 1 ? 1 : 4);
        break;
      }
      case FieldKind::kBoxes: {
        if (stored) {
          s->boxes.resize(n / sizeof(BoxRow));
          if (n) std::memcpy(s->boxes.data(), bytes, n);
        } else {
          st = parse_boxes(bytes, n, f.field.format, f.json_key, &s->boxes);
          if (st.ok()) st = check_boxes_on_canvas(width, height, &s->boxes);
        }
        if (!st.ok()) break;
        const std::size_t dropped = transform_boxes(s->geo, width, height, &s->boxes);
        const std::size_t truncated =
            write_boxes(s->boxes, f.field.format, f.field.max_boxes, reinterpret_cast<float*>(dest(out, f.output)),
                        reinterpret_cast<std::int64_t*>(dest(out, f.output + 1)),
                        reinterpret_cast<std::int64_t*>(dest(out, f.output + 2)));
        if (s->counters) s->counters->add_boxes(dropped, truncated);
        if (truncated && !warned_truncated_.exchange(true, std::memory_order_relaxed)) {
          std::fprintf(stderr,
                       "stoker: field '%s': record '%s' has %zu boxes after the transforms, more than max_boxes=%d; "
                       "boxes past max_boxes are dropped and counted (stats()[\"boxes_truncated\"]; said once)\n",
                       f.field.name.c_str(), source_.key(rec).c_str(), s->boxes.size(), f.field.max_boxes);
        }
        break;
      }
    }
    if (!st.ok()) return tag(f, st);
  }
  return Status::Ok();
}

// A mask member decoded into s->mask, checked against its image's size and
// the batch's pixel size (record 0's).
Status SampleMaker::decode_mask(const FieldSpec& f, const std::uint8_t* bytes, std::size_t n, int width, int height,
                                Scratch* s, int rows) const {
  Status st = s->mask_decoder.open_mask(bytes, n, opt_.max_image_pixels);
  if (st.ok()) st = s->mask_decoder.decode_mask(&s->mask, rows);
  if (!st.ok()) return st;
  if (s->mask.width != width || s->mask.height != height) {
    return Status::Corrupt("the mask is " + size_text(s->mask.width, s->mask.height) + ", its image " +
                           size_text(width, height));
  }
  if (s->mask.bytes_per_pixel != f.mask_bytes) {
    return Status::Unsupported("the mask has " + std::to_string(8 * s->mask.bytes_per_pixel) +
                               "-bit pixels, the batch's " + std::to_string(8 * f.mask_bytes) +
                               "-bit ones (as record 0's)");
  }
  return Status::Ok();
}

// A tensor sample: checked against the batch's dtype and shape (record 0's),
// copied as is.
Status SampleMaker::copy_array(const OutputSpec& o, const std::uint8_t* data, std::size_t size, void* out) const {
  NpyHeader h;
  Status st = sniff_format(data, size) == Format::kNpy ? parse_npy_header(data, size, &h)
                                                        : Status::Corrupt("not a .npy array (the samples are arrays)");
  if (st.ok() && (h.descr != o.descr || h.fortran_order ||
                  !std::equal(h.shape.begin(), h.shape.end(), o.dims.begin(), o.dims.end(),
                              [](std::uint64_t a, std::int64_t b) { return static_cast<std::int64_t>(a) == b; }))) {
    std::vector<std::int64_t> got(h.shape.begin(), h.shape.end());
    st = Status::Unsupported("array of dtype " + h.descr + " shape " + dims_text(got) + " differs from the batch's dtype " +
                             o.descr + " shape " + dims_text(o.dims));
  }
  if (st.ok()) std::memcpy(out, data + h.data_offset, o.bytes);
  return st;
}

}  // namespace stoker::detail
