// libFuzzer: GIF through giflib (src/decode/gif.cc) via ImageDecoder: the
// first frame, its extensions, palettes, interlacing, the canvas it grows.
#include "image_format_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::uint8_t kMagic[] = {'G', 'I', 'F', '8', '9', 'a'};
  stoker_fuzz::fuzz_image(data, size, kMagic, sizeof(kMagic), stoker::detail::Format::kGif);
  return 0;
}
