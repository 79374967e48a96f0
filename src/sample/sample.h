// What one sample of a batch is (SampleSpec: the schema's fields resolved,
// and the batch tensors they write), where a sample goes (SampleOut), a
// worker's reusable state (Scratch) and the timer of a sample's stages:
// shared by the sample maker and the field kinds (sample/fields/).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cache/ram_rewrite.h"
#include "cache/sample_cache.h"
#include "memory/memory_budget.h"
#include "source/paired_folder.h"
#include "stats/counters.h"
#include "stats/trace.h"
#include "stoker/fields.h"
#include "stoker/source.h"
#include "util/util.h"

namespace stoker::detail {

// One tensor of a batch: `batch_size` samples of `bytes` each, starting at
// `offset` in the batch buffer.
struct OutputSpec {
  std::string name;                // its key in the batch
  std::string descr;               // NumPy dtype string ("<f4", "|u1", "<i8", ...)
  std::vector<std::int64_t> dims;  // one sample's shape
  std::size_t bytes = 0;           // one sample's bytes
  std::size_t offset = 0;          // where the tensor starts in the batch buffer (64-byte aligned)
  // Entries per sample: a volume's patches are `per_record` consecutive
  // entries of the batch tensor ([N * per_record, dims...]); `bytes` is all
  // of a sample's.
  int per_record = 1;
};

// A field of the schema, resolved: where its bytes come from and which
// outputs it writes. What its kind decides from the first records (a mask's
// pixel size, a tensor's dtype) is its kind's own (sample/fields/).
struct FieldSpec {
  Field field;
  bool primary = false;     // read with Source::read (the record itself), not read_member
  std::string member;       // else: the member read (for "json:<key>", "json")
  std::string json_key;     // "json:<key>" members: the key
  std::shared_ptr<const PairedFolder> folder;  // Field::folder: the paired folder it is read from
  int part = -1;            // index of its bytes among the record's parts (-1: the maker reads nothing for it)
  int output = -1;          // its first output
};

// What one sample of a batch is, decided once from the options and record 0.
struct SampleSpec {
  bool arrays = false;  // the default schema of .npy arrays (no transforms)
  bool named = false;   // the user gave a schema (batches are dicts)
  std::vector<FieldSpec> fields;
  std::vector<OutputSpec> outputs;
  int image = -1;         // the image field, if any
  int label_output = -1;  // the first label output, if any (Batch::labels())
  int parts = 0;          // members read per record
  std::size_t batch_bytes = 0;  // one batch buffer: every output for batch_size samples
  // Output 0 (the default schema's images or arrays), for the single-tensor API.
  std::size_t bytes = 0;
  std::vector<std::int64_t> dims;
  std::string descr;
};

// Where one sample goes: position `pos` of the batch buffer `batch`.
struct SampleOut {
  std::uint8_t* batch = nullptr;
  std::size_t pos = 0;
};

// Output k's place for sample `out.pos`.
inline std::uint8_t* dest(const SampleSpec& spec, SampleOut out, int k) {
  const OutputSpec& o = spec.outputs[static_cast<std::size_t>(k)];
  return out.batch + o.offset + out.pos * o.bytes;
}

// "field 'seg' (member 'seg.png')", for messages.
std::string field_name(const FieldSpec& f);
// A field's bytes: the record itself, one of its members, or its file in
// the field's paired folder.
Status read_field(const Source& source, const FieldSpec& f, std::size_t rec, std::vector<std::uint8_t>* out);

// A field kind's per-worker state (its decoder, its buffers), made by its
// kind (FieldOp::scratch()) and reused from sample to sample.
struct FieldScratch {
  virtual ~FieldScratch() = default;
  // What the buffers it owns hold: their capacity (a reused buffer keeps
  // what it grew to), counted in the decode_scratch account
  // (Scratch::bytes()). Called after every sample: a sum of capacities.
  virtual std::uint64_t bytes() const = 0;
};

// A worker's reusable state: the record's bytes, each field's own scratch,
// where stage times go.
struct Scratch {
  StageCounters* counters = nullptr;  // may be null (no counting)
  TraceBuffer* trace = nullptr;       // tracing only
  std::vector<std::uint8_t> file;     // the bytes of a one-part record
  std::vector<std::vector<std::uint8_t>> members;  // each part's bytes
  std::vector<std::uint8_t> bundle;   // parts concatenated (or their stored forms), for the cache
  std::vector<std::uint64_t> ends;
  std::vector<std::pair<const std::uint8_t*, std::size_t>> part;  // where each part's bytes are now
  SampleCache::EntryPtr hit;  // the cache entry the sample in hand reads
  bool grid = false;  // the image bytes in hand are in the random-access form (cache=kRam's rewrite)
  RewriteScratch rewrite;  // cache=kRam: the rewrite's buffers and this worker's allowance
  // Each field's own, by schema position (null: the kind keeps none); made
  // by the maker `fields_for` on its first sample here.
  std::vector<std::unique_ptr<FieldScratch>> fields;
  const void* fields_for = nullptr;

  // What this worker's buffers hold (their capacity): the record's bytes,
  // the cache's bundle and the rewrite's buffers, each field's scratch
  // (FieldScratch::bytes()): the loader's decode_scratch account. Not the
  // cache entry in hand (the cache's) nor a codec library's own state.
  std::uint64_t bytes() const {
    std::uint64_t n = capacity_bytes(file) + capacity_bytes(members) + capacity_bytes(bundle) + capacity_bytes(ends) +
                      capacity_bytes(part) + capacity_bytes(fields) + rewrite.bytes();
    for (const auto& m : members) n += capacity_bytes(m);
    for (const auto& f : fields) n += f ? f->bytes() : 0;
    return n;
  }
  // bytes() as charged to the loader's decode_scratch account: its owner
  // (a worker, batch()) gives it the budget (memory.reset()) and grows it
  // after each sample (memory.grow_to(bytes())); none: nothing counted.
  MemoryCharge memory{nullptr, MemoryAccount::kDecodeScratch};
};

// Times one sample's stages into the worker's counters (and its trace). Each
// mark ends the stage that began at the previous mark. Without stage timing
// the clock is not read (every lap is 0 ns) but samples are still counted.
class StageTimer {
 public:
  StageTimer(bool timing, Scratch* s, std::uint32_t rec) : timing_(timing), s_(s), rec_(rec), t_(clock()) {}
  void read(std::size_t bytes) {
    const std::int64_t d = lap(kTraceRead);
    if (s_->counters) s_->counters->add_read(d, bytes);
  }
  // A read that included `decode_ns` of decoding (an inflated volume): that
  // part counts as decode.
  void read_and_decode(std::int64_t decode_ns) {
    const std::int64_t d = lap(kTraceRead), dec = std::min(decode_ns, d);
    if (s_->counters) {
      s_->counters->add_read(d - dec, 0);
      s_->counters->add_decode(dec);
    }
  }
  void decode() {
    const std::int64_t d = lap(kTraceDecode);
    if (s_->counters) s_->counters->add_decode(d);
  }
  void transform() {
    const std::int64_t d = lap(kTraceTransform);
    if (s_->counters) s_->counters->add_transform(d);
  }

 private:
  std::int64_t clock() const { return timing_ ? now_ns() : 0; }
  std::int64_t lap(std::uint8_t stage) {
    const std::int64_t now = clock(), d = now - t_;
    if (s_->trace) s_->trace->add(t_, d, rec_, stage);
    t_ = now;
    return d;
  }
  bool timing_;
  Scratch* s_;
  std::uint32_t rec_;
  std::int64_t t_;
};

}  // namespace stoker::detail
