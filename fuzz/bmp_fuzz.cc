// libFuzzer: the BMP reader (src/decode/bmp.cc) through ImageDecoder: headers,
// palettes, bit fields, the truncation check, regions against the whole.
#include "image_format_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::uint8_t kMagic[] = {'B', 'M'};
  stoker_fuzz::fuzz_image(data, size, kMagic, sizeof(kMagic), stoker::detail::Format::kBmp);
  return 0;
}
