// MixUp and CutMix on a batch of float32 NCHW images, in place, as
// torchvision.transforms.v2 computes them (the batch paired with itself
// rolled by one): one pass over the batch instead of v2's roll, two
// multiplies and an add over whole tensors. The draws (lam, the box) are the
// caller's (python/stoker/batch_transforms.py draws them from (seed, epoch,
// batch index)).
#pragma once

#include <cstddef>
#include <vector>

namespace stoker::detail {

// x[i] = x[i - 1] * (1 - lam) + x[i] * lam for every sample i (x[-1] is the
// last sample, as roll(1, 0)), each product rounded to float32 and then
// added, as v2's `x.roll(1, 0).mul_(1.0 - lam).add_(x.mul(lam))`.
// `scratch` keeps a copy of the last sample.
void mixup_inplace(float* x, std::size_t batch, std::size_t sample_elems, double lam, std::vector<float>* scratch);

// x[i][:, y1:y2, x1:x2] = x[i - 1][:, y1:y2, x1:x2] (rolled by one), the
// batch [batch, channels, height, width].
void cutmix_inplace(float* x, std::size_t batch, int channels, int height, int width, int x1, int y1, int x2, int y2,
                    std::vector<float>* scratch);

}  // namespace stoker::detail
