#include "transform/batch_mix.h"

#include <algorithm>
#include <cstring>

namespace stoker::detail {

void mixup_inplace(float* x, std::size_t batch, std::size_t sample_elems, double lam, std::vector<float>* scratch) {
  if (batch == 0) return;
  // torch multiplies a float tensor by a Python float as float32 operands.
  const auto keep = static_cast<float>(lam), take = static_cast<float>(1.0 - lam);
  scratch->assign(x + (batch - 1) * sample_elems, x + batch * sample_elems);  // the last sample, rolled to the front
  // From the last sample down, so that sample i - 1 is still unmixed when sample i reads it.
  for (std::size_t i = batch; i-- > 0;) {
    float* cur = x + i * sample_elems;
    const float* prev = i > 0 ? cur - sample_elems : scratch->data();
    for (std::size_t k = 0; k < sample_elems; ++k) {
      const float a = prev[k] * take;
      const float b = cur[k] * keep;
      cur[k] = a + b;
    }
  }
}

void cutmix_inplace(float* x, std::size_t batch, int channels, int height, int width, int x1, int y1, int x2, int y2,
                    std::vector<float>* scratch) {
  if (batch == 0 || x2 <= x1 || y2 <= y1) return;
  const std::size_t plane = static_cast<std::size_t>(height) * width;
  const std::size_t sample = plane * channels;
  const auto row = static_cast<std::size_t>(x2 - x1);
  // The last sample's box, pasted into sample 0 at the end.
  scratch->resize(static_cast<std::size_t>(channels) * (y2 - y1) * row);
  float* saved = scratch->data();
  const float* last = x + (batch - 1) * sample;
  for (int c = 0; c < channels; ++c) {
    for (int y = y1; y < y2; ++y) {
      std::memcpy(saved + (static_cast<std::size_t>(c) * (y2 - y1) + (y - y1)) * row, last + c * plane + y * width + x1,
                  row * sizeof(float));
    }
  }
  for (std::size_t i = batch; i-- > 0;) {
    float* cur = x + i * sample;
    for (int c = 0; c < channels; ++c) {
      for (int y = y1; y < y2; ++y) {
        float* dst = cur + c * plane + static_cast<std::size_t>(y) * width + x1;
        const float* src = i > 0 ? dst - sample : saved + (static_cast<std::size_t>(c) * (y2 - y1) + (y - y1)) * row;
        std::memcpy(dst, src, row * sizeof(float));
      }
    }
  }
}

}  // namespace stoker::detail
