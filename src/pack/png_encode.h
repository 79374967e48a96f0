// PNG encoding of masks with libpng (for pack's resized masks).
#pragma once

#include <cstdint>
#include <vector>

#include "image/pixels.h"
#include "stoker/status.h"

namespace stoker::detail {

// A gray PNG of the mask's values as stored: 8-bit for 1-byte masks, 16-bit
// (big-endian in the file, as PNG stores it) for 2-byte ones; no gamma or
// colour chunks, so any reader gets the values back. Replaces *out.
Status encode_png_mask(const MaskView& mask, std::vector<std::uint8_t>* out);

}  // namespace stoker::detail
