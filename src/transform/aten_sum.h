// torch 1.13's float32 sum order on the CPU (ATen's AVX2 SumKernel.cpp,
// one thread), for the kernels that must round as torch does: the Gaussian
// blur's kernel normalisation (gaussian_blur.cc) and the tensor contrast's
// mean (functional_tensor.cc).
#pragma once

#include <algorithm>

namespace stoker::detail {

// SumKernel.cpp's row_sum over `size` vectors of kLanes floats (lane-wise): multi_row_sum's cascade over groups
// of 4 vectors into 4 accumulators, the vectors past the last group into the first, then the 4 added in order.
template <int kLanes>
inline void aten_row_sum(const float* x, int size, float out[kLanes]) {
  constexpr int kIlp = 4, kLevels = 4;
  const int groups = size / kIlp;  // multi_row_sum's `size`
  float acc[kLevels][kIlp][kLanes] = {};
  const auto add = [](float* a, const float* v) {
    for (int l = 0; l < kLanes; ++l) a[l] += v[l];
  };
  int level_power = 0;  // max(4, CeilLog2(groups) / 4)
  while ((1 << level_power) < groups) ++level_power;
  level_power = std::max(4, level_power / kLevels);
  const int level_step = 1 << level_power, level_mask = level_step - 1;
  int i = 0;
  while (i + level_step <= groups) {
    for (int j = 0; j < level_step; ++j, ++i) {
      for (int k = 0; k < kIlp; ++k) add(acc[0][k], x + (i * kIlp + k) * kLanes);
    }
    for (int j = 1; j < kLevels; ++j) {
      for (int k = 0; k < kIlp; ++k) {
        add(acc[j][k], acc[j - 1][k]);
        std::fill_n(acc[j - 1][k], kLanes, 0.0f);
      }
      if ((i & (level_mask << (j * level_power))) != 0) break;
    }
  }
  for (; i < groups; ++i) {
    for (int k = 0; k < kIlp; ++k) add(acc[0][k], x + (i * kIlp + k) * kLanes);
  }
  for (int j = 1; j < kLevels; ++j) {
    for (int k = 0; k < kIlp; ++k) add(acc[0][k], acc[j][k]);
  }
  for (int v = groups * kIlp; v < size; ++v) add(acc[0][0], x + v * kLanes);
  for (int k = 1; k < kIlp; ++k) add(acc[0][0], acc[0][k]);
  std::copy_n(acc[0][0], kLanes, out);
}

// torch.sum of a contiguous float32 vector as ATen 1.13 computes it with AVX2 (SumKernel.cpp, cascade_sum):
// under 8 floats, scalar_inner_sum (row_sum on scalars); else vectorized_inner_sum: row_sum over the
// 8-float vectors, the tail summed in order from 0, then the 8 lanes added to it in order.
inline float aten_sum(const float* x, int n) {
  constexpr int kLanes = 8;
  float lanes[kLanes];
  if (n < kLanes) {
    aten_row_sum<1>(x, n, lanes);
    return lanes[0];
  }
  const int nvec = n / kLanes;
  aten_row_sum<kLanes>(x, nvec, lanes);
  float total = 0.0f;
  for (int t = nvec * kLanes; t < n; ++t) total += x[t];
  for (int l = 0; l < kLanes; ++l) total += lanes[l];
  return total;
}

}  // namespace stoker::detail
