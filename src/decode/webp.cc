#include "decode/webp.h"

#include <webp/decode.h>
#include <webp/demux.h>

#include <cstring>
#include <memory>
#include <string>

namespace stoker::detail {
namespace {

struct DemuxDelete {
  void operator()(WebPDemuxer* d) const { WebPDemuxDelete(d); }
};

const char* status_text(VP8StatusCode s) {
  switch (s) {
    case VP8_STATUS_OK: return "ok";
    case VP8_STATUS_OUT_OF_MEMORY: return "out of memory";
    case VP8_STATUS_INVALID_PARAM: return "invalid parameter";
    case VP8_STATUS_BITSTREAM_ERROR: return "bitstream error";
    case VP8_STATUS_UNSUPPORTED_FEATURE: return "unsupported feature";
    case VP8_STATUS_SUSPENDED: return "suspended";
    case VP8_STATUS_USER_ABORT: return "aborted";
    case VP8_STATUS_NOT_ENOUGH_DATA: return "truncated bitstream (not enough data)";
  }
  return "unknown error";
}

}  // namespace

Status WebpDecoder::open(const std::uint8_t* data, std::size_t size, std::uint64_t max_pixels, int* width,
                         int* height) {
  frame_ = nullptr;
  frame_size_ = 0;
  WebPData whole{data, size};
  WebPDemuxState state = WEBP_DEMUX_PARSE_ERROR;
  std::unique_ptr<WebPDemuxer, DemuxDelete> demux(WebPDemuxPartial(&whole, &state));
  // NOTE: PIL's WebPAnimDecoderNew refuses a file whose chunks are not all
  // there, even when the first frame is; so does this.
  if (!demux || state != WEBP_DEMUX_DONE) {
    if (state == WEBP_DEMUX_PARSE_ERROR) return Status::Corrupt("WebP: invalid container (RIFF chunks)");
    return Status::Corrupt("WebP: truncated (the file ends inside its " +
                           std::string(state == WEBP_DEMUX_PARSING_HEADER ? "header" : "chunks") + ", " +
                           std::to_string(size) + " bytes)");
  }
  canvas_w_ = static_cast<int>(WebPDemuxGetI(demux.get(), WEBP_FF_CANVAS_WIDTH));
  canvas_h_ = static_cast<int>(WebPDemuxGetI(demux.get(), WEBP_FF_CANVAS_HEIGHT));
  if (canvas_w_ <= 0 || canvas_h_ <= 0) {
    return Status::Corrupt("WebP: invalid size " + std::to_string(canvas_w_) + "x" + std::to_string(canvas_h_));
  }
  const std::uint64_t pixels = static_cast<std::uint64_t>(canvas_w_) * static_cast<std::uint64_t>(canvas_h_);
  if (pixels > max_pixels) {
    return Status::ResourceExhausted("image of " + std::to_string(canvas_w_) + "x" + std::to_string(canvas_h_) +
                                     " pixels exceeds max_image_pixels=" + std::to_string(max_pixels));
  }
  WebPIterator it;
  if (!WebPDemuxGetFrame(demux.get(), 1, &it)) return Status::Corrupt("WebP: no frame");
  x_ = it.x_offset, y_ = it.y_offset, w_ = it.width, h_ = it.height;
  frame_ = it.fragment.bytes;
  frame_size_ = it.fragment.size;
  WebPDemuxReleaseIterator(&it);
  WebPBitstreamFeatures f;
  const VP8StatusCode st = WebPGetFeatures(frame_, frame_size_, &f);
  if (st != VP8_STATUS_OK) return Status::Corrupt(std::string("WebP: first frame: ") + status_text(st));
  if (f.width != w_ || f.height != h_ || x_ < 0 || y_ < 0 || x_ + w_ > canvas_w_ || y_ + h_ > canvas_h_) {
    return Status::Corrupt("WebP: first frame of " + std::to_string(f.width) + "x" + std::to_string(f.height) +
                           " does not fit its place (" + std::to_string(w_) + "x" + std::to_string(h_) + " at " +
                           std::to_string(x_) + "," + std::to_string(y_) + ") on the " + std::to_string(canvas_w_) +
                           "x" + std::to_string(canvas_h_) + " canvas");
  }
  lossless_ = f.format == 2;
  *width = canvas_w_;
  *height = canvas_h_;
  return Status::Ok();
}

Status WebpDecoder::decode(const Box& region, ImageBuffer* buf, ImageView* view) {
  const bool covers = x_ == 0 && y_ == 0 && w_ == canvas_w_ && h_ == canvas_h_;
  if (lossless_ && covers) {
    WebPDecoderConfig config;
    if (!WebPInitDecoderConfig(&config)) return Status::Internal("WebP: libwebp version mismatch");
    config.options.use_cropping = 1;
    config.options.crop_left = region.x;
    config.options.crop_top = region.y;
    config.options.crop_width = region.width;
    config.options.crop_height = region.height;
    buf->reset(region.width, region.height);
    config.output.colorspace = MODE_RGB;
    config.output.is_external_memory = 1;
    config.output.u.RGBA.rgba = buf->pixels.data();
    config.output.u.RGBA.stride = static_cast<int>(buf->stride);
    config.output.u.RGBA.size = static_cast<std::size_t>(buf->stride) * static_cast<std::size_t>(region.height);
    const VP8StatusCode st = WebPDecode(frame_, frame_size_, &config);
    WebPFreeDecBuffer(&config.output);
    if (st != VP8_STATUS_OK) return Status::Corrupt(std::string("WebP: ") + status_text(st));
    *view = buf->view();
    return Status::Ok();
  }
  buf->reset(canvas_w_, canvas_h_);
  if (!covers) {
    // NOTE: WebPAnimDecoder clears the canvas to transparent black before a
    // key frame (the first always is one).
    std::memset(buf->pixels.data(), 0, static_cast<std::size_t>(buf->stride) * static_cast<std::size_t>(canvas_h_));
  }
  WebPDecoderConfig config;
  if (!WebPInitDecoderConfig(&config)) return Status::Internal("WebP: libwebp version mismatch");
  config.output.colorspace = MODE_RGB;
  config.output.is_external_memory = 1;
  config.output.u.RGBA.rgba = buf->row(y_) + static_cast<std::ptrdiff_t>(x_) * 3;
  config.output.u.RGBA.stride = static_cast<int>(buf->stride);
  config.output.u.RGBA.size = static_cast<std::size_t>(buf->stride) * static_cast<std::size_t>(h_ - 1) +
                              static_cast<std::size_t>(w_) * 3;
  const VP8StatusCode st = WebPDecode(frame_, frame_size_, &config);
  WebPFreeDecBuffer(&config.output);
  if (st != VP8_STATUS_OK) return Status::Corrupt(std::string("WebP: ") + status_text(st));
  *view = ImageView{buf->pixels.data() + region.y * buf->stride + region.x * 3, region.width, region.height,
                    buf->stride};
  return Status::Ok();
}

}  // namespace stoker::detail
