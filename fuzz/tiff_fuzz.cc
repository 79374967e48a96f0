// libFuzzer: TIFF through libtiff (src/decode/tiff.cc) via ImageDecoder:
// directories, layouts and codecs, strips and tiles a region reads, the size
// cap, messages kept off stderr. The input's first byte picks the byte order.
#include "image_format_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::uint8_t kLittle[] = {'I', 'I', 42, 0}, kBig[] = {'M', 'M', 0, 42};
  const bool big = size > 0 && data[0] == 'M';
  stoker_fuzz::fuzz_image(data, size, big ? kBig : kLittle, 4, stoker::detail::Format::kTiff);
  return 0;
}
