#include "decode/gif.h"

#include <gif_lib.h>

#include <algorithm>
#include <cstring>
#include <string>

namespace stoker::detail {
namespace {

struct MemoryReader {
  const std::uint8_t* data = nullptr;
  std::size_t size = 0;
  std::size_t pos = 0;
};

int read_from_memory(GifFileType* gif, GifByteType* out, int n) {
  auto* r = static_cast<MemoryReader*>(gif->UserData);
  const std::size_t k = std::min(static_cast<std::size_t>(n < 0 ? 0 : n), r->size - r->pos);
  std::memcpy(out, r->data + r->pos, k);
  r->pos += k;
  return static_cast<int>(k);
}

struct GifClose {
  void operator()(GifFileType* gif) const {
    int error = 0;
    DGifCloseFile(gif, &error);
  }
};

Status gif_error(int code) {
  const char* what = GifErrorString(code);
  return Status::Corrupt(std::string("GIF: ") + (what ? what : "error " + std::to_string(code)));
}

}  // namespace

struct GifDecoder::State {
  MemoryReader reader;
  std::unique_ptr<GifFileType, GifClose> gif;  // positioned at the first frame's pixels
  int canvas_w = 0, canvas_h = 0;
  int transparent = -1;  // the first frame's transparent index
  std::vector<GifPixelType> line;
  std::vector<int> order;  // frame row of each line in file order
  PilPalette palette;
};

GifDecoder::GifDecoder() : s_(std::make_unique<State>()) {}
GifDecoder::~GifDecoder() = default;

Status GifDecoder::parse() {
  State& s = *s_;
  s.gif.reset();
  s.reader.pos = 0;
  s.transparent = -1;
  int error = 0;
  s.gif.reset(DGifOpen(&s.reader, read_from_memory, &error));
  if (!s.gif) return gif_error(error);
  GifFileType* gif = s.gif.get();
  for (;;) {
    GifRecordType type = UNDEFINED_RECORD_TYPE;
    if (DGifGetRecordType(gif, &type) == GIF_ERROR) return gif_error(gif->Error);
    if (type == IMAGE_DESC_RECORD_TYPE) break;
    if (type == TERMINATE_RECORD_TYPE) return Status::Corrupt("GIF: no image before the trailer");
    if (type != EXTENSION_RECORD_TYPE) return Status::Corrupt("GIF: unexpected record");
    int code = 0;
    GifByteType* ext = nullptr;
    if (DGifGetExtension(gif, &code, &ext) == GIF_ERROR) return gif_error(gif->Error);
    // A graphic control extension: PIL keeps the last transparent index
    // given before the frame (one without the flag leaves it as it was).
    if (code == GRAPHICS_EXT_FUNC_CODE && ext && ext[0] >= 4 && (ext[1] & 1)) s.transparent = ext[4];
    while (ext) {
      if (DGifGetExtensionNext(gif, &ext) == GIF_ERROR) return gif_error(gif->Error);
    }
  }
  if (DGifGetImageDesc(gif) == GIF_ERROR) return gif_error(gif->Error);
  const GifImageDesc& d = gif->Image;
  s.canvas_w = std::max(gif->SWidth, d.Left + d.Width);
  s.canvas_h = std::max(gif->SHeight, d.Top + d.Height);
  return Status::Ok();
}

Status GifDecoder::open(const std::uint8_t* data, std::size_t size, std::uint64_t max_pixels, int* width,
                        int* height) {
  s_->reader = MemoryReader{data, size, 0};
  Status st = parse();
  if (!st.ok()) return st;
  if (s_->canvas_w <= 0 || s_->canvas_h <= 0) {
    return Status::Corrupt("GIF: invalid size " + std::to_string(s_->canvas_w) + "x" + std::to_string(s_->canvas_h));
  }
  const std::uint64_t pixels = static_cast<std::uint64_t>(s_->canvas_w) * static_cast<std::uint64_t>(s_->canvas_h);
  if (pixels > max_pixels) {
    s_->gif.reset();
    return Status::ResourceExhausted("image of " + std::to_string(s_->canvas_w) + "x" +
                                     std::to_string(s_->canvas_h) +
                                     " pixels exceeds max_image_pixels=" + std::to_string(max_pixels));
  }
  *width = s_->canvas_w;
  *height = s_->canvas_h;
  return Status::Ok();
}

Status GifDecoder::decode(const Box& region, ImageBuffer* buf, ImageView* view) {
  State& s = *s_;
  if (!s.gif) {  // a second decode() of one open()
    Status st = parse();
    if (!st.ok()) return st;
  }
  GifFileType* gif = s.gif.get();
  const GifImageDesc& d = gif->Image;
  const ColorMapObject* map = d.ColorMap ? d.ColorMap : gif->SColorMap;
  s.palette.reset();
  if (map) {
    for (int i = 0; i < map->ColorCount && i < 256; ++i) {
      s.palette.set(i, map->Colors[i].Red, map->Colors[i].Green, map->Colors[i].Blue);
    }
  }
  buf->reset(s.canvas_w, s.canvas_h);
  const std::uint8_t* fill = s.palette[s.transparent >= 0 ? s.transparent : 0];
  const bool covered = d.Left == 0 && d.Top == 0 && d.Width == s.canvas_w && d.Height == s.canvas_h;
  if (!covered) {
    for (int y = 0; y < s.canvas_h; ++y) {
      std::uint8_t* out = buf->row(y);
      for (int x = 0; x < s.canvas_w; ++x, out += 3) std::memcpy(out, fill, 3);
    }
  }
  // Rows in file order: interlaced frames store rows 0, 8, 16...; 4, 12...;
  // 2, 6...; 1, 3...
  s.order.clear();
  if (d.Interlace) {
    static const int kStart[] = {0, 4, 2, 1}, kStep[] = {8, 8, 4, 2};
    for (int pass = 0; pass < 4; ++pass) {
      for (int y = kStart[pass]; y < d.Height; y += kStep[pass]) s.order.push_back(y);
    }
  } else {
    for (int y = 0; y < d.Height; ++y) s.order.push_back(y);
  }
  s.line.resize(static_cast<std::size_t>(d.Width));
  for (int y : s.order) {
    if (d.Width > 0 && DGifGetLine(gif, s.line.data(), d.Width) == GIF_ERROR) {
      const int code = gif->Error;
      s.gif.reset();
      return gif_error(code);
    }
    std::uint8_t* out = buf->row(d.Top + y) + static_cast<std::ptrdiff_t>(d.Left) * 3;
    for (int x = 0; x < d.Width; ++x, out += 3) std::memcpy(out, s.palette[s.line[static_cast<std::size_t>(x)]], 3);
  }
  s.gif.reset();
  *view = ImageView{buf->pixels.data() + region.y * buf->stride + region.x * 3, region.width, region.height,
                    buf->stride};
  return Status::Ok();
}

}  // namespace stoker::detail
