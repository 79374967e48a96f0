// Image: decoded to RGB8 and transformed by the loader's pipeline; the owner
// of the 2D geometry. Its plan is drawn from (seed, epoch, record) in the
// full-resolution frame (Pipeline::plan_geometry) and applied through its
// read plan (plan_image_read: only the first crop's region is decoded,
// DCT-scaled with decode_scale="auto"); masks and boxes apply the same plan
// with their own kernels. With LoaderOptions::views, each copy of each view
// is planned in the full frame from its own stream and the union of their
// first crops is decoded once. With a hook, each image goes to it at its own
// size. cache="decoded" stores it with its shorter side at most
// cache_max_side.
#include <algorithm>
#include <optional>

#include "cache/ram_rewrite.h"
#include "decode/decode.h"
#include "order/rng.h"
#include "sample/fields/field.h"
#include "stats/json.h"
#include "transform/pipeline.h"
#include "transform/plan_json.h"
#include "transform/resize.h"
#include "transform/transform_defs.h"

namespace stoker::detail {
namespace {

struct ImageScratch : FieldScratch {
  ImageDecoder decoder;
  ImageBuffer decoded;
  SamplePlan plan;  // the read plan
  SamplePlan geo;   // the geometric plan, full-resolution frame
  ImageView view;   // the pixels the plan reads: its decode region (views: the union of their regions)
  Workspace workspace;
  std::vector<SamplePlan> view_plans;  // LoaderOptions::views: each copy's plan
  ImageBuffer stored;                  // cache=kDecoded: the image at its stored size (downscaled)
  ImageView stored_view;               // the stored form just made
  // LoaderOptions::hook: the image handed to it, float-aligned (uint8 samples use its bytes).
  std::vector<float> hooked;
  int hooked_width = 0, hooked_height = 0;
  std::uint64_t bytes() const override {
    std::uint64_t n = decoder.bytes() + decoded.bytes() + plan.bytes() + geo.bytes() + workspace.bytes() +
                      capacity_bytes(view_plans) + stored.bytes() + capacity_bytes(hooked);
    for (const SamplePlan& p : view_plans) n += p.bytes();
    return n;
  }
};

class ImageFieldOp final : public FieldOp {
 public:
  explicit ImageFieldOp(FieldSetup& setup) : FieldOp(setup) {
    if (!opt_.views.empty()) {
      for (const View& v : opt_.views) {
        try {
          views_.emplace_back(v.transforms, opt_.dtype, opt_.layout);
        } catch (const Error& e) {
          invalid("views: view '" + v.name + "': " + e.what());
        }
      }
    } else {
      pipeline_.emplace(opt_.transforms, opt_.dtype, opt_.layout, /*fixed_size=*/!opt_.hook);
    }
  }

  void declare(FieldSetup& setup) override {
    if (opt_.hook) return;  // each image goes to the hook at its own size (out())
    const char* descr = opt_.dtype == DType::kFloat32 ? "<f4" : "|u1";
    const std::size_t item = opt_.dtype == DType::kFloat32 ? 4 : 1;
    if (views_.empty()) {
      setup.add_output(f_.field.name, descr, dims(*pipeline_), item);
      return;
    }
    for (std::size_t v = 0; v < views_.size(); ++v) {  // the views in place of the image
      std::vector<std::int64_t> d = dims(views_[v]);
      d.insert(d.begin(), opt_.views[v].count);
      view_outputs_.push_back(static_cast<int>(setup.spec.outputs.size()));
      setup.add_output(opt_.views[v].name, descr, std::move(d), item, 1, /*own=*/v == 0);
    }
  }
  std::vector<std::int64_t> spatial_dims() const override {
    if (!pipeline_) return {};
    return {pipeline_->out_height(), pipeline_->out_width()};
  }
  std::unique_ptr<FieldScratch> scratch() const override { return std::make_unique<ImageScratch>(); }
  // Its pixels decoded whole and a workspace as large (crops, the image
  // stage), its outputs twice (a resize up), the hook's float32 image, the
  // stored form; from the header alone.
  std::uint64_t scratch_estimate(const std::uint8_t* bytes, std::size_t n) const override {
    ImageDecoder decoder;
    if (!bytes || !decoder.open(bytes, n, opt_.max_image_pixels).ok()) return FieldOp::scratch_estimate(bytes, n);
    const auto px = static_cast<std::uint64_t>(decoder.width()) * static_cast<std::uint64_t>(decoder.height()) * 3;
    std::uint64_t out = pipeline_ ? pipeline_->sample_bytes() : 0;
    for (std::size_t v = 0; v < views_.size(); ++v) {
      out += views_[v].sample_bytes() * static_cast<std::uint64_t>(opt_.views[v].count);
    }
    return 2 * px + 2 * out + (opt_.hook ? 4 * px : 0) + (opt_.cache.mode == Cache::kDecoded ? px : 0);
  }

  Status plan(Sample* x, FieldScratch* fs) const override {
    auto& s = *static_cast<ImageScratch*>(fs);
    const auto [bytes, n] = x->bytes(f_);
    if (x->stored) return plan_stored(x, bytes, &s);
    Status st = s.decoder.open(bytes, n, opt_.max_image_pixels);
    const int width = s.decoder.width(), height = s.decoder.height();
    if (!views_.empty()) {
      if (st.ok()) st = plan_views(x, nullptr, &s);
      if (!st.ok()) {
        x->timer->decode();
        return tag(st);
      }
      x->geo.width = width;
      x->geo.height = height;
      return Status::Ok();
    }
    if (st.ok()) {
      draw(*x, width, height, &s.geo);
      if (!s.geo.error.empty()) return tag(Status::InvalidArgument(s.geo.error));
      s.plan = s.geo;
      plan_image_read(width, height, &s.plan, scales(s));
      const std::int64_t d0 = x->rewrite ? now_ns() : 0;
      st = s.decoder.decode(s.plan.decode_region, &s.decoded, &s.view, s.plan.scale_eighths);
      // The rewrite's first-epoch allowance counts what it saves (cache/ram_rewrite.h).
      if (x->rewrite && st.ok() && s.decoder.format() == Format::kJpeg) x->rewrite->note_decode(x->s->grid, now_ns() - d0);
      x->geo = {&s.geo, width, height, nullptr};
    }
    x->timer->decode();
    return tag(st);
  }

  Status apply(const Sample& x, FieldScratch* fs) const override {
    auto& s = *static_cast<ImageScratch*>(fs);
    if (views_.empty()) {
      pipeline_->run(s.plan, s.view, &s.workspace, out(x.out, &s));
      return Status::Ok();
    }
    std::size_t k = 0;
    for (std::size_t v = 0; v < views_.size(); ++v) {
      std::uint8_t* dst = detail::dest(spec_, x.out, view_outputs_[v]);
      for (int c = 0; c < opt_.views[v].count; ++c, ++k) {
        views_[v].run(s.view_plans[k], s.view, &s.workspace, dst + static_cast<std::size_t>(c) * views_[v].sample_bytes());
      }
    }
    return Status::Ok();
  }

  // Decodes the whole image; its stored form has the shorter side at most
  // cache_max_side. NOTE: with may_defer, an image the cache would keep as
  // decoded (not downscaled) is left to the live path (decode_scale exact: a
  // region decode is the crop of the full decode, so the sample is the same).
  Status prepare_store(Sample* x, FieldScratch* fs, bool may_defer, bool* deferred) const override {
    auto& s = *static_cast<ImageScratch*>(fs);
    const auto [bytes, n] = x->bytes(f_);
    Status st = s.decoder.open(bytes, n, opt_.max_image_pixels);
    if (!st.ok()) return tag(st);
    if (may_defer && std::min(s.decoder.width(), s.decoder.height()) <= opt_.cache.max_side) {
      *deferred = true;
      return Status::Ok();
    }
    ImageView view;
    st = s.decoder.decode({0, 0, s.decoder.width(), s.decoder.height()}, &s.decoded, &view);
    if (!st.ok()) return tag(st);
    x->full_width = view.width;
    x->full_height = view.height;
    int w = view.width, h = view.height;
    if (std::min(view.width, view.height) > opt_.cache.max_side) {
      resize_output_size(Resize{opt_.cache.max_side, 0, 0}, view.width, view.height, &w, &h);
      resize_bilinear(view, w, h, &s.workspace.resize, &s.stored);
      view = s.stored.view();
    }
    x->stored_width = w;
    x->stored_height = h;
    s.stored_view = view;
    return Status::Ok();
  }
  Status store(const Sample&, FieldScratch* fs, std::vector<std::uint8_t>* out) const override {
    const ImageView& view = static_cast<ImageScratch*>(fs)->stored_view;
    for (int y = 0; y < view.height; ++y) {
      out->insert(out->end(), view.row(y), view.row(y) + 3 * static_cast<std::size_t>(view.width));
    }
    return Status::Ok();
  }
  bool footprint(const std::uint8_t* bytes, std::size_t n, RecordFootprint* f) const override {
    ImageDecoder d;
    if (!d.open(bytes, n, opt_.max_image_pixels).ok()) return false;
    int w = d.width(), h = d.height();
    f->short_side = std::min(w, h);
    if (f->short_side > opt_.cache.max_side) resize_output_size(Resize{opt_.cache.max_side, 0, 0}, d.width(), d.height(), &w, &h);
    f->decoded = f->decoded - n + static_cast<std::uint64_t>(w) * static_cast<std::uint64_t>(h) * 3;
    return true;
  }

  void hook(const FieldScratch* fs, HookSample* out) const override {
    const auto& s = *static_cast<const ImageScratch*>(fs);
    out->image = s.hooked.data();
    out->descr = opt_.dtype == DType::kFloat32 ? "<f4" : "|u1";
    const std::int64_t h = s.hooked_height, w = s.hooked_width;
    out->dims = opt_.layout == Layout::kNCHW ? std::vector<std::int64_t>{3, h, w} : std::vector<std::int64_t>{h, w, 3};
  }

  // The plan plan() draws, from the header alone. NOTE: under
  // cache="decoded" plans are drawn on the stored image (the shorter side at
  // most cache_max_side), whether or not it is in the cache yet: an image
  // that small is made live from the same frame.
  Status describe(Sample* x, FieldScratch* fs, std::string* json) const override {
    auto& s = *static_cast<ImageScratch*>(fs);
    const auto [bytes, n] = x->bytes(f_);
    Status st = s.decoder.open(bytes, n, opt_.max_image_pixels);
    if (!st.ok()) return tag(st);
    int width = s.decoder.width(), height = s.decoder.height();
    const bool stored = opt_.cache.mode == Cache::kDecoded && std::min(width, height) > opt_.cache.max_side;
    if (stored) resize_output_size(Resize{opt_.cache.max_side, 0, 0}, s.decoder.width(), s.decoder.height(), &width, &height);
    *json = "{\"width\":" + std::to_string(s.decoder.width()) + ",\"height\":" + std::to_string(s.decoder.height());
    if (stored) *json += ",\"stored\":[" + std::to_string(width) + "," + std::to_string(height) + "]";
    if (!views_.empty()) {
      *json += ",\"views\":{";
      for (std::size_t v = 0; v < views_.size(); ++v) {
        if (v) *json += ',';
        *json += json_quote(opt_.views[v].name) + ":[";
        for (int c = 0; c < opt_.views[v].count; ++c) {
          SamplePlan plan;
          draw_view(*x, v, c, width, height, &plan);
          if (!plan.error.empty()) return tag(Status::InvalidArgument(opt_.views[v].name + ": " + plan.error));
          if (c) *json += ',';
          *json += plan_to_json(plan);
        }
        *json += "]";
      }
      *json += "}}";
      return Status::Ok();
    }
    draw(*x, width, height, &s.geo);
    if (!s.geo.error.empty()) return tag(Status::InvalidArgument(s.geo.error));
    s.plan = s.geo;
    plan_image_read(width, height, &s.plan, opt_.cache.mode != Cache::kDecoded && scales(s));  // as plan() / plan_stored()
    const Box& r = s.plan.decode_region;
    *json += ",\"plan\":" + plan_to_json(s.geo) + ",\"read\":{\"decode_region\":[" + std::to_string(r.x) + "," +
             std::to_string(r.y) + "," + std::to_string(r.width) + "," + std::to_string(r.height) +
             "],\"scale_eighths\":" + std::to_string(s.plan.scale_eighths) + "}}";
    return Status::Ok();
  }

 private:
  // The sample's geometric plan (or view v's copy c's) in a width x height
  // frame: the one place its random stream is named.
  void draw(const Sample& x, int width, int height, SamplePlan* geo) const {
    Rng rng(mix_key(x.seed, x.epoch, x.draw, kStreamTransform));
    pipeline_->plan_geometry(width, height, &rng, geo);
  }
  void draw_view(const Sample& x, std::size_t v, int c, int width, int height, SamplePlan* plan) const {
    Rng rng(mix_key(x.seed, x.epoch, x.draw, view_stream(static_cast<int>(v), c)));
    views_[v].plan_geometry(width, height, &rng, plan);
  }
  // decode_scale="auto" on a JPEG: the read plan may decode at a DCT scale.
  bool scales(const ImageScratch& s) const {
    return opt_.decode_scale == DecodeScale::kAuto && s.decoder.format() == Format::kJpeg;
  }
  std::vector<std::int64_t> dims(const Pipeline& p) const {
    const std::int64_t h = p.out_height(), w = p.out_width();
    return opt_.layout == Layout::kNCHW ? std::vector<std::int64_t>{3, h, w} : std::vector<std::int64_t>{h, w, 3};
  }

  // cache="decoded": the plan drawn on the stored image (the parts' first).
  Status plan_stored(Sample* x, const std::uint8_t* pixels, ImageScratch* s) const {
    x->timer->decode();
    const int width = x->stored_width, height = x->stored_height;
    const ImageView full{pixels, width, height, static_cast<std::ptrdiff_t>(width) * 3};
    x->geo.width = width;
    x->geo.height = height;
    if (!views_.empty()) return tag(plan_views(x, &full, s));
    draw(*x, width, height, &s->geo);
    if (!s->geo.error.empty()) return tag(Status::InvalidArgument(s->geo.error));
    s->plan = s->geo;
    plan_image_read(width, height, &s->plan, false);
    // The plan's decode region is a crop of the stored image.
    const auto& r = s->plan.decode_region;
    s->view = {full.row(r.y) + 3 * r.x, r.width, r.height, full.stride};
    x->geo.plan = &s->geo;
    return Status::Ok();
  }

  // LoaderOptions::views: every copy of every view planned in the image's
  // full frame (copy c of view v from its own stream), then one decode of the
  // union of their first crops (or, with `stored`, that region of the stored
  // image) into s->view, each copy's first crop moved into its frame. The
  // decoder is open on the image unless `stored`; a decode marks the timer.
  Status plan_views(Sample* x, const ImageView* stored, ImageScratch* s) const {
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
        draw_view(*x, v, c, width, height, &plan);
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
    if (stored) {
      s->view = {stored->row(region.y) + 3 * region.x, region.width, region.height, stored->stride};
    } else {
      // NOTE: the exact decode of the region is the crop of the full decode
      // (decode_scale applies to single transform lists only).
      Status st = s->decoder.decode(region, &s->decoded, &s->view);
      x->timer->decode();
      if (!st.ok()) return st;
    }
    for (SamplePlan& plan : s->view_plans) {
      if (!plan.steps.empty() && plan.steps[0].kind == Step::kCrop) {  // into the region's frame
        plan.steps[0].box.x -= region.x;
        plan.steps[0].box.y -= region.y;
      }
    }
    return Status::Ok();
  }

  // Where the pipeline writes the image of s->plan: its place in the batch,
  // or with a hook the scratch's buffer at the sample's own size.
  void* out(SampleOut o, ImageScratch* s) const {
    if (!opt_.hook) return dest(o);
    Pipeline::sample_size(s->plan, s->view.width, s->view.height, &s->hooked_width, &s->hooked_height);
    s->hooked.resize((pipeline_->sample_bytes(s->hooked_width, s->hooked_height) + sizeof(float) - 1) / sizeof(float));
    return s->hooked.data();
  }

  std::optional<Pipeline> pipeline_;  // without views
  std::vector<Pipeline> views_;       // LoaderOptions::views: one pipeline per view
  std::vector<int> view_outputs_;     // each view's output
};

}  // namespace

// The image kept as stored (channels="stored", dtype="stored"): fields/raster.cc.
std::unique_ptr<FieldOp> make_raster_field(FieldSetup& setup);

extern const FieldDef kImageDef;
const FieldDef kImageDef{
    .kind = FieldKind::kImage,
    .name = "image",
    .doc = R"doc(An image, decoded to RGB and transformed: float32 [B, 3, H, W] by default.

Decoded as stoker.decode_image decodes it, then the loader's transforms;
its dtype and layout are the loader's (``dtype=``, ``layout=``). At most
one per schema: Mask and Boxes fields follow its geometry.

With ``channels="stored", dtype="stored"`` it is a raster kept as stored:
1 to N channels of uint8, uint16 or float32 (a 13-band TIFF, a 16-bit
gray PNG or TIFF, a gray JPEG as 1 channel, an RGBA PNG as 4), batched
[B, C, H, W] (or [B, H, W, C] with layout="NHWC") as uint8, int32 (uint16
samples: torch 1.13 has no uint16) or float32 as stored, or float32 after
Normalize (ToTensor's /255 for uint8 samples, then (x - mean[c]) / std[c],
with 1 or C values each); the loader's ``dtype=`` does not apply. Crops,
resizes, flips, RandomRotation and RandomAffine apply to each channel as
Pillow's resize and transform do to a single-channel image of the
matching mode ("L", "I", "F"); colour transforms are refused. Every record must have the channel count and
sample type of the first readable one; a file that does not is a corrupt
sample under ``on_corrupt``. See the guide's "Rasters beyond RGB".

Args:
    name (str): its key in the batch. Default "image".
    member (str, optional): the list file column or shard member suffix
        it is read from. Default None: the record itself (a list file's
        path column, an ImageFolder file, a shard's image member).
    channels (str): "rgb" (the default: converted to RGB) or "stored".
    dtype (str): "uint8" (the default) or "stored"; "stored" exactly
        when ``channels="stored"``.

<common sections>

Example:
    >>> loader = stoker.Loader("data/train.csv", batch_size=8, transforms=[stoker.CenterCrop(224)],
    ...                        fields=[stoker.Image(), stoker.Label()])
    >>> batch = next(iter(loader))
    >>> batch["image"].shape, batch["image"].dtype
    (torch.Size([8, 3, 224, 224]), torch.float32))doc",
    .role = Role::kOwner,
    .follows = FieldKind::kImage,
    .without_owner = nullptr,
    .member = DefaultMember::kRecord,
    .json_member = false,
    .folder = false,
    .in_volumes = false,
    .reads_itself = false,
    .params = {"channels", "dtype"},
    .suffixes = {},
    .check =
        [](const Field& f, const std::string& what) {
          if ((f.channels == ImageChannels::kStored) != (f.dtype == ImageDType::kStored)) {
            invalid(what + ": channels=\"stored\" and dtype=\"stored\" go together (a raster kept as stored), got channels=\"" +
                    (f.channels == ImageChannels::kStored ? "stored" : "rgb") + "\", dtype=\"" +
                    (f.dtype == ImageDType::kStored ? "stored" : "uint8") + "\"");
          }
        },
    .make = [](FieldSetup& s) -> std::unique_ptr<FieldOp> {
      if (s.field.field.channels == ImageChannels::kStored) return make_raster_field(s);
      return std::make_unique<ImageFieldOp>(s);
    },
};

}  // namespace stoker::detail
