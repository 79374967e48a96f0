// JPEG encoding with libjpeg-turbo (for pack's re-encode).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "image/pixels.h"
#include "stoker/status.h"

namespace stoker::detail {

// Thread-compatible; one per worker.
class JpegEncoder {
 public:
  JpegEncoder();
  ~JpegEncoder();
  // subsampling: 444 or 420. restart_markers: on a grid that divides each
  // MCU row (decode/jpeg_restart.h). Replaces *out.
  Status encode(const ImageView& image, int quality, int subsampling, bool restart_markers,
                std::vector<std::uint8_t>* out);

  struct State;

 private:
  std::unique_ptr<State> s_;
};

// A .npy file holding `image` as uint8 (H, W, 3). Replaces *out.
void encode_npy(const ImageView& image, std::vector<std::uint8_t>* out);

}  // namespace stoker::detail
