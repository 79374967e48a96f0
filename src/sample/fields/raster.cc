// Image, kept as stored (Field::channels and Field::dtype kStored): a raster
// of 1..N channels of uint8, uint16 or float32 (a 13-band satellite tile, a
// 16-bit microscope frame, a gray JPEG), the owner of the 2D geometry as the
// RGB image is. The plan is drawn by a Pipeline of the same transforms (so
// the same crops and sizes as an RGB image of that size would get), the
// first crop's region decoded (TIFF: only its strips or tiles), and the
// plan run on each channel (transform/raster.h: Pillow's per-mode
// arithmetic). The channel count and sample type are record 0's (the first
// readable record's); a file with others is a corrupt sample.
// cache="decoded" keeps the raster whole, as decoded (never downscaled).
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <optional>

#include "decode/decode.h"
#include "order/rng.h"
#include "sample/fields/field.h"
#include "transform/plan_json.h"
#include "transform/pipeline.h"
#include "transform/raster.h"
#include "transform/transform_defs.h"

namespace stoker::detail {
namespace {

// The first records read for the channel count and sample type (the first readable one decides).
constexpr std::size_t kProbeRecords = 16;

struct RasterScratch : FieldScratch {
  ImageDecoder decoder;
  RasterBuffer raster;   // the plan's decode region (or, for cache="decoded", the whole raster)
  SamplePlan geo;        // the geometric plan, full-resolution frame
  SamplePlan plan;       // the read plan: steps relative to the decode region
  const std::uint8_t* planes = nullptr;  // what apply() runs the plan on: C planes of width x height
  int width = 0, height = 0;
  std::vector<std::uint8_t> wide;  // uint16 samples as int32 (Pillow's "I")
  RasterWorkspace ws;
  std::uint64_t bytes() const override {
    return decoder.bytes() + raster.bytes() + geo.bytes() + plan.bytes() + capacity_bytes(wide) + ws.bytes();
  }
};

class RasterFieldOp final : public FieldOp {
 public:
  explicit RasterFieldOp(FieldSetup& setup) : FieldOp(setup) {
    const std::string me = field_name(f_) + " (image, channels=\"stored\")";
    if (!opt_.views.empty()) invalid(me + ": views (multi-crop) need an RGB image");
    if (opt_.hook) invalid(me + ": a hook receives RGB images; it does not take stored channels");
    probe_first(kProbeRecords, "channel count and sample type", [&](const std::vector<std::uint8_t>& bytes) {
      ImageDecoder dec;
      Status st = dec.open_raster(bytes.data(), bytes.size(), opt_.max_image_pixels);
      if (st.ok()) channels_ = dec.channels(), type_ = dec.sample_type();
      return st;
    });
    const std::string keeps = field_name(f_) + " keeps stored channels (" + std::to_string(channels_) + ")";
    const Normalize* normalize = nullptr;
    const RandomErasing* erasing = nullptr;
    for (const Transform& t : opt_.transforms) {
      const TransformTraits traits = transform_traits(t);
      const std::string name = transform_name(t);
      if (traits.colour) invalid("transform " + name + ": needs an RGB image; " + keeps);
      if (const auto* n = std::get_if<Normalize>(&t)) {
        check_transform(t);
        const auto c = static_cast<std::size_t>(channels_);
        if ((n->mean.size() != 1 && n->mean.size() != c) || (n->std.size() != 1 && n->std.size() != c)) {
          invalid("transform Normalize: mean has " + std::to_string(n->mean.size()) + " values and std " +
                  std::to_string(n->std.size()) + "; " + keeps + ": give 1 or " + std::to_string(channels_) + " each");
        }
        normalize = n;
        continue;
      }
      if (const auto* e = std::get_if<RandomErasing>(&t)) {
        erasing = e;
        continue;
      }
      const auto* crop = std::get_if<RandomCrop>(&t);
      const bool fill_ok = !crop || crop->fill == std::array<int, 3>{0, 0, 0};
      const bool per_channel = (traits.geometric && !traits.image_stage && !traits.photometric && !traits.on_tensor) ||
                               warps(t);
      if (!per_channel || !fill_ok) {
        invalid("transform " + name + (fill_ok ? "" : " with a non-zero fill") +
                ": not available on a raster kept as stored (" + keeps +
                "); crops, resizes, flips, RandomRotation, RandomAffine (one fill value), Normalize and RandomErasing are");
      }
    }
    // NOTE: planned as float32 so that a Normalize passes the pipeline's checks; the write is ours.
    pipeline_.emplace(opt_.transforms, DType::kFloat32, opt_.layout, /*fixed_size=*/true, channels_);
    write_.nhwc = opt_.layout == Layout::kNHWC;
    write_.to_float = normalize != nullptr;
    write_.div255 = type_ == SampleType::kUint8;
    if (normalize) write_.mean = normalize->mean, write_.std = normalize->std;
    if (erasing && !erasing->random_values && erasing->value.size() != 1 &&
        erasing->value.size() != static_cast<std::size_t>(channels_)) {
      invalid("transform RandomErasing: value has " + std::to_string(erasing->value.size()) + " values; " + keeps +
              ": give 1 or " + std::to_string(channels_));
    }
    if (erasing && erasing->random_values && !write_.to_float && type_ != SampleType::kFloat32) {
      invalid("transform RandomErasing: value='random' needs float32 output (" + keeps + " of " +
              sample_type_name(type_) + "): put it after Normalize");
    }
  }

  // RandomRotation, RandomAffine (or a RandomApply of them) with one fill
  // value for every channel: warps run per channel (pil_affine_plane).
  static bool warps(const Transform& t) {
    auto one_fill = [](const std::array<int, 3>& f) { return f[0] == f[1] && f[1] == f[2]; };
    if (const auto* r = std::get_if<RandomRotation>(&t)) return one_fill(r->fill);
    if (const auto* a = std::get_if<RandomAffine>(&t)) return one_fill(a->fill);
    if (const auto* a = std::get_if<RandomApply>(&t)) return std::all_of(a->transforms.begin(), a->transforms.end(), warps);
    return false;
  }

  void declare(FieldSetup& setup) override {
    const std::int64_t h = pipeline_->out_height(), w = pipeline_->out_width(), c = channels_;
    std::vector<std::int64_t> dims = write_.nhwc ? std::vector<std::int64_t>{h, w, c} : std::vector<std::int64_t>{c, h, w};
    const bool u8 = !write_.to_float && type_ == SampleType::kUint8;
    const char* descr = u8 ? "|u1" : write_.to_float || type_ == SampleType::kFloat32 ? "<f4" : "<i4";
    setup.add_output(f_.field.name, descr, std::move(dims), u8 ? 1 : 4);
  }
  std::vector<std::int64_t> spatial_dims() const override { return {pipeline_->out_height(), pipeline_->out_width()}; }
  std::unique_ptr<FieldScratch> scratch() const override { return std::make_unique<RasterScratch>(); }
  // The planes decoded, the decoder's RGB decode (formats kept as RGB),
  // uint16 widened to int32, the workspace's planes (two and a resize's
  // pass); its output twice (a resize up).
  std::uint64_t scratch_estimate(const std::uint8_t* bytes, std::size_t n) const override {
    ImageDecoder decoder;
    if (!bytes || !decoder.open_raster(bytes, n, opt_.max_image_pixels).ok()) {
      return FieldOp::scratch_estimate(bytes, n);
    }
    const std::uint64_t px = static_cast<std::uint64_t>(decoder.width()) * static_cast<std::uint64_t>(decoder.height()),
                        planes = px * static_cast<std::uint64_t>(channels_ * sample_bytes(type_));
    return 4 * planes + 3 * px + (type_ == SampleType::kUint16 ? 2 * planes : 0) + 2 * output().bytes;
  }

  Status plan(Sample* x, FieldScratch* fs) const override {
    auto& s = *static_cast<RasterScratch*>(fs);
    const auto [bytes, n] = x->bytes(f_);
    if (x->stored) {  // cache="decoded": the raster whole, as store() kept it
      x->timer->decode();
      s.width = x->stored_width, s.height = x->stored_height;
      draw(x, &s);
      if (!s.geo.error.empty()) return tag(Status::InvalidArgument(s.geo.error));
      s.plan = s.geo;  // run on the whole raster: its first crop is a step
      s.planes = widen(bytes, s.width, s.height, &s);
      return Status::Ok();
    }
    Status st = open(bytes, n, &s);
    if (st.ok()) {
      s.width = s.decoder.width(), s.height = s.decoder.height();
      draw(x, &s);
      if (!s.geo.error.empty()) return tag(Status::InvalidArgument(s.geo.error));
      s.plan = s.geo;
      plan_image_read(s.width, s.height, &s.plan, /*allow_scale=*/false);
      st = s.decoder.decode_raster(s.plan.decode_region, &s.raster);
      if (st.ok()) s.planes = widen(s.raster.pixels.data(), s.raster.width, s.raster.height, &s);
    }
    x->timer->decode();
    return tag(st);
  }

  // The plan plan() draws, from the header (the stored form is the raster
  // whole, so its frame is the same under cache="decoded").
  Status describe(Sample* x, FieldScratch* fs, std::string* json) const override {
    auto& s = *static_cast<RasterScratch*>(fs);
    const auto [bytes, n] = x->bytes(f_);
    Status st = open(bytes, n, &s);
    if (!st.ok()) return tag(st);
    s.width = s.decoder.width(), s.height = s.decoder.height();
    draw(x, &s);
    if (!s.geo.error.empty()) return tag(Status::InvalidArgument(s.geo.error));
    *json = "{\"width\":" + std::to_string(s.width) + ",\"height\":" + std::to_string(s.height) +
            ",\"plan\":" + plan_to_json(s.geo) + "}";
    return Status::Ok();
  }

  Status apply(const Sample& x, FieldScratch* fs) const override {
    auto& s = *static_cast<RasterScratch*>(fs);
    const bool whole = x.stored;
    const int w = whole ? s.width : s.raster.width, h = whole ? s.height : s.raster.height;
    run_raster_plan(s.plan, plane_type(type_), s.planes, channels_, w, h, write_, &s.ws, dest(x.out));
    if (!s.plan.erase.empty()) {
      raster_erase(s.plan, opt_.transforms, plane_type(type_), channels_, pipeline_->out_width(), pipeline_->out_height(),
                   write_, dest(x.out));
    }
    return Status::Ok();
  }

  // The raster decoded whole: its stored form, exact (never downscaled).
  Status prepare_store(Sample* x, FieldScratch* fs, bool may_defer, bool* deferred) const override {
    auto& s = *static_cast<RasterScratch*>(fs);
    const auto [bytes, n] = x->bytes(f_);
    Status st = open(bytes, n, &s);
    if (!st.ok()) return tag(st);
    if (may_defer) {  // the stored form is the raster as is: the live path gives the same sample
      *deferred = true;
      return Status::Ok();
    }
    st = s.decoder.decode_raster({0, 0, s.decoder.width(), s.decoder.height()}, &s.raster);
    if (!st.ok()) return tag(st);
    x->full_width = x->stored_width = s.raster.width;
    x->full_height = x->stored_height = s.raster.height;
    return Status::Ok();
  }
  Status store(const Sample&, FieldScratch* fs, std::vector<std::uint8_t>* out) const override {
    const RasterBuffer& r = static_cast<RasterScratch*>(fs)->raster;
    out->insert(out->end(), r.pixels.data(), r.pixels.data() + r.plane_bytes() * static_cast<std::size_t>(r.channels));
    return Status::Ok();
  }
  bool footprint(const std::uint8_t* bytes, std::size_t n, RecordFootprint* f) const override {
    ImageDecoder d;
    if (!d.open_raster(bytes, n, opt_.max_image_pixels).ok()) return false;
    // NOTE: never downscaled, so never short of cache_max_side (0: nothing to judge).
    f->short_side = 0;
    f->decoded = f->decoded - n + static_cast<std::uint64_t>(d.width()) * static_cast<std::uint64_t>(d.height()) *
                                      static_cast<std::uint64_t>(d.channels()) * static_cast<std::uint64_t>(sample_bytes(d.sample_type()));
    return true;
  }

 private:
  // Opens the raster and checks it against the field's channels and type.
  Status open(const std::uint8_t* bytes, std::size_t n, RasterScratch* s) const {
    Status st = s->decoder.open_raster(bytes, n, opt_.max_image_pixels);
    if (!st.ok()) return st;
    if (s->decoder.channels() != channels_) {
      return Status::Corrupt("has " + std::to_string(s->decoder.channels()) + " channels, the field declares " +
                             std::to_string(channels_) + " (as record 0's)");
    }
    if (s->decoder.sample_type() != type_) {
      return Status::Corrupt(std::string("has ") + sample_type_name(s->decoder.sample_type()) +
                             " samples, the field declares " + sample_type_name(type_) + " (as record 0's)");
    }
    return Status::Ok();
  }
  void draw(Sample* x, RasterScratch* s) const {
    Rng rng(mix_key(x->seed, x->epoch, x->draw, kStreamTransform));
    pipeline_->plan_geometry(s->width, s->height, &rng, &s->geo);
    x->geo = {&s->geo, s->width, s->height, nullptr};
  }
  // The planes the kernels take: uint16 samples widened to int32 (Pillow's
  // "I"); float32 ones where they lie, or copied when a cache entry holds
  // them at an address not 4-aligned.
  const std::uint8_t* widen(const std::uint8_t* planes, int w, int h, RasterScratch* s) const {
    const std::size_t count = static_cast<std::size_t>(w) * static_cast<std::size_t>(h) * static_cast<std::size_t>(channels_);
    if (type_ == SampleType::kFloat32 && reinterpret_cast<std::uintptr_t>(planes) % alignof(float) != 0) {
      s->wide.assign(planes, planes + count * 4);
      return s->wide.data();
    }
    if (type_ != SampleType::kUint16) return planes;
    s->wide.resize(count * 4);
    auto* out = reinterpret_cast<std::int32_t*>(s->wide.data());
    for (std::size_t i = 0; i < count; ++i) {
      std::uint16_t v;
      std::memcpy(&v, planes + 2 * i, 2);
      out[i] = v;
    }
    return s->wide.data();
  }

  int channels_ = 0;
  SampleType type_ = SampleType::kUint8;
  std::optional<Pipeline> pipeline_;
  RasterWrite write_;
};

}  // namespace

std::unique_ptr<FieldOp> make_raster_field(FieldSetup& setup) { return std::make_unique<RasterFieldOp>(setup); }

}  // namespace stoker::detail
