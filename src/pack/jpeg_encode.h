// JPEG encoding with libjpeg-turbo (for pack's re-encode).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "decode/image.h"
#include "stoker/status.h"

namespace stoker::detail {

// Thread-compatible; one per worker.
class JpegEncoder {
 public:
  JpegEncoder();
  ~JpegEncoder();
  // subsampling: 444 or 420. Replaces *out.
  Status encode(const ImageView& image, int quality, int subsampling, std::vector<std::uint8_t>* out);

  struct State;

 private:
  std::unique_ptr<State> s_;
};

// A .npy file holding `image` as uint8 (H, W, 3). Replaces *out.
void encode_npy(const ImageView& image, std::vector<std::uint8_t>* out);

}  // namespace stoker::detail
