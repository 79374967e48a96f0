// A bitmap over a volume's spatial voxels (C order) with a rank per 512
// bits, so that the k-th set or clear voxel is found in O(log n): an exactly
// uniform draw over either class at 1/8 + 1/128 byte per voxel. Built from a
// label volume by transform/volume (label_index()), kept by the volume
// cache, read by the patch sampler. Immutable once built; thread-safe to read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace stoker::detail {

class LabelIndex {
 public:
  LabelIndex() = default;
  // The index over `voxels` bits, bit i in words[i / 64] (bit i % 64).
  // REQUIRES: words.size() == (voxels + 63) / 64; bits past `voxels` are 0.
  LabelIndex(std::uint64_t voxels, std::vector<std::uint64_t> words);

  std::uint64_t voxels() const { return n_; }
  std::uint64_t count(bool set) const { return set ? set_ : n_ - set_; }
  // The flat (C-order) index of the k-th voxel of the class. REQUIRES: k < count(set)
  std::uint64_t select(bool set, std::uint64_t k) const;
  bool test(std::uint64_t i) const { return (words_[i >> 6] >> (i & 63)) & 1; }
  std::size_t bytes() const { return words_.size() * 8 + rank_.size() * 4; }

 private:
  std::uint64_t n_ = 0, set_ = 0;
  std::vector<std::uint64_t> words_;
  std::vector<std::uint32_t> rank_;  // set bits before each block of 8 words
};

}  // namespace stoker::detail
