// libFuzzer: JPEG, PNG and .npy header parsing and decoding through stoker's
// decoder, full image and a region (any format the bytes sniff as; the
// per-format targets bmp/gif/tiff/webp_fuzz force theirs).
#include <cstdint>

#include "decode/decode.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static stoker::detail::ImageDecoder dec;
  stoker::detail::ImageBuffer buf;
  stoker::detail::ImageView view;
  // NOTE: a small pixel cap keeps each run fast; the cap itself is what a
  // hostile header must not get past.
  if (!dec.open(data, size, /*max_pixels=*/1 << 22).ok()) return 0;
  const int w = dec.width(), h = dec.height();
  (void)dec.decode({0, 0, w, h}, &buf, &view);
  if (dec.open(data, size, 1 << 22).ok() && w > 2 && h > 2) {
    (void)dec.decode({w / 3, h / 3, w / 2, h / 2}, &buf, &view);
  }
  return 0;
}
