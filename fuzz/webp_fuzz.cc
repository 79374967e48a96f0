// libFuzzer: WebP through libwebp (src/decode/webp.cc) via ImageDecoder: the
// container, the first frame's place on the canvas, lossy and lossless
// bitstreams.
#include "image_format_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::uint8_t kMagic[] = {'R', 'I', 'F', 'F'};
  // "RIFF" forced; bytes 8..11 must say "WEBP" too.
  std::vector<std::uint8_t> bytes(data, data + size);
  if (bytes.size() < 12) bytes.resize(12);
  std::memcpy(bytes.data() + 8, "WEBP", 4);
  stoker_fuzz::fuzz_image(bytes.data(), bytes.size(), kMagic, sizeof(kMagic), stoker::detail::Format::kWebp);
  return 0;
}
