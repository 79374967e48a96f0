// One sample from one record, without threads: read (or a cache hit),
// decode, plan the transforms from (seed, epoch, record), run them, and
// write the result into its place in a batch buffer. The loader's workers
// each own a Scratch and call make(); tests call it directly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cache/sample_cache.h"
#include "decode/decode.h"
#include "stats/counters.h"
#include "stats/trace.h"
#include "stoker/options.h"
#include "stoker/source.h"
#include "transform/pipeline.h"

namespace stoker::detail {

// What one sample of a batch is, decided once from the options and record 0.
struct SampleSpec {
  bool arrays = false;             // .npy arrays batched as they are (no transforms)
  std::size_t bytes = 0;           // one sample's bytes in the batch buffer
  std::vector<std::int64_t> dims;  // one sample's shape ({C, H, W} / {H, W, C} for images)
  std::string descr;               // its NumPy dtype string ("<f4", "|u1", ...)
};

// A worker's reusable state: buffers, the decoder, where stage times go.
struct Scratch {
  StageCounters* counters = nullptr;  // may be null (no counting)
  TraceBuffer* trace = nullptr;       // tracing only
  std::vector<std::uint8_t> file;
  ImageDecoder decoder;
  ImageBuffer decoded;
  SamplePlan plan;
  Workspace workspace;
  ImageBuffer stored;  // cache=kDecoded: the image at its stored size
};

// Where one sample goes: its bytes in the batch buffer and its label.
struct SampleOut {
  void* data = nullptr;
  std::int64_t* label = nullptr;
};

class SampleMaker {
 public:
  // Decides the spec (reading record 0 when the kind is not evident from its
  // name). Throws Error(kInvalidArgument) for options that cannot apply.
  // `cache` (may be null) is shared by every worker; source and cache must
  // outlive the maker.
  SampleMaker(const Source& source, const LoaderOptions& options, SampleCache* cache);

  const SampleSpec& spec() const { return spec_; }

  // Makes record `rec`'s sample of `epoch` into `out`. Never throws: an
  // exception escaping the sample path (a bug, or std::bad_alloc) becomes a
  // kInternal (kResourceExhausted) Status like any other bad sample. On
  // failure *out.label is -1. Messages carry the reason only: the caller
  // names the record.
  Status make(std::uint32_t rec, std::uint64_t seed, std::uint64_t epoch, SampleOut out, Scratch* s) const noexcept;

 private:
  void decide_spec();
  Status process(std::uint32_t rec, std::uint64_t seed, std::uint64_t epoch, void* out, Scratch* s) const;
  Status process_decoded(std::uint32_t rec, std::uint64_t seed, std::uint64_t epoch, void* out, Scratch* s) const;
  Status copy_array(const std::uint8_t* data, std::size_t size, void* out) const;

  const Source& source_;
  const LoaderOptions& opt_;
  SampleCache* cache_;
  std::optional<Pipeline> pipeline_;  // images only
  SampleSpec spec_;
};

namespace testing {
// Test hook: make() throws while making record `rec` (std::bad_alloc when
// bad_alloc, else std::runtime_error), until cleared with rec = -1. For
// tests of the exception barrier; costs one relaxed load per sample.
void throw_in_sample(std::int64_t rec, bool bad_alloc = false);
}  // namespace testing

}  // namespace stoker::detail
