// Mixtures: one loader over several data sets, each drawn with a weight.
//
//   stoker::Mixture mix;
//   mix.sources = {{"imagenet", {"data/train"}, 0.8}, {"extra", {"s/extra-{000..031}.tar"}, 0.2}};
//   mix.samples_per_epoch = 1'000'000;
//   stoker::Loader loader(mix, opt);
//
// An epoch of a mixture is samples_per_epoch draws. Source s gets
// count_s of them, its weight's share rounded by largest remainder (ties to
// the earlier source), the same in every epoch, so an epoch holds the
// weights exactly and each source's position is a closed form (below). Each
// source is walked without replacement in its own permutation of its
// records, a new one per pass (a function of (seed, source, pass)), and
// restarted when exhausted: draw k of source s over the whole run is record
// perm_{s, k / size_s}[k % size_s], and epoch e takes its draws
// e * count_s .. (e + 1) * count_s - 1.
//
// The epoch's draws are its positions [0, samples_per_epoch): source 0's
// count_0 draws first, then source 1's, and so on; the loader's order
// (shuffle, rank sharding, drop_last, resume, elastic resume) applies to
// these positions exactly as to the records of one data set, so which
// source a sample of a rank's batch comes from is a function of (seed,
// epoch, position), and with shuffle it is uniformly spread through the
// epoch. Without shuffle, positions and passes run in order (source 0's
// draws, then source 1's, each source in index order). Each sample's
// transform randomness is keyed by its position (a record drawn twice in an
// epoch gets two different augmentations).
//
// Labels are each source's own (folder classes, list labels, .cls), plus
// the source's label_offset, or mapped by label_map. The record member
// "mix:source" holds the sample's source index as text, so
// LabelField("source", "mix:source") puts it in the batch.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "stoker/source.h"

namespace stoker {

struct MixtureEntry {
  // Its name in stats(), messages and the state. Non-empty, unique.
  std::string name;
  // As Loader's sources: one spec (a folder, a list file, shards) or several
  // shard specs.
  std::vector<std::string> specs;
  // Its share of each epoch's draws (weights need not sum to 1). < 0: no
  // weight given; then every entry must have none, and the weights are the
  // sources' sizes (with the default samples_per_epoch, each source is
  // walked once per epoch: a concatenation). Default -1.
  double weight = -1;
  // Added to every label of this source (labels < 0, "no label", stay -1).
  std::int64_t label_offset = 0;
  // When non-empty: label -> label, applied instead of the offset; a label
  // not in the map is an error of that sample, naming it.
  std::map<std::int64_t, std::int64_t> label_map;
};

struct Mixture {
  std::vector<MixtureEntry> sources;
  // Draws per epoch (before rank sharding). 0: the sum of the sources' sizes.
  std::uint64_t samples_per_epoch = 0;
};

// The one JSON codec of a mixture (the Python API, the doctor's snapshot):
// {"sources": [{"name", "specs", "weight", "label_offset", "label_map":
// [[from, to], ...]}], "samples_per_epoch"}. Throws Error(kInvalidArgument)
// naming the key.
std::string mixture_to_json(const Mixture& m);
Mixture mixture_from_json(const std::string& json);

// Throws Error(kInvalidArgument) naming the entry and the rule it breaks.
void validate_mixture(const Mixture& m);

// A mixture's sources, opened and concatenated: record i of the whole is
// record i - start(s) of the source s holding it. index_dir: as open_shards.
class MixtureSource : public Source {
 public:
  struct Part {
    std::string name;
    std::shared_ptr<const Source> source;
    double weight = 0;           // resolved (the size when none was given)
    std::uint64_t start = 0;     // its first record in the concatenation
    std::uint64_t count = 0;     // its draws per epoch
    std::int64_t label_offset = 0;
    std::map<std::int64_t, std::int64_t> label_map;
  };
  // Opens every entry's specs (labels: as Loader's `labels` option). Throws
  // Error naming the entry.
  MixtureSource(const Mixture& mix, const std::string& labels = "cls", const std::string& index_dir = "");

  std::size_t size() const override { return size_; }
  std::string key(std::size_t i) const override;
  std::int64_t label(std::size_t i) const override;
  Status read(std::size_t i, std::vector<std::uint8_t>* out) const override;
  // "mix:source": the source index as text; anything else the source's.
  Status read_member(std::size_t i, const std::string& member, std::vector<std::uint8_t>* out) const override;
  bool member_extent(std::size_t i, const std::string& member, Extent* out) const override;
  std::vector<std::string> members(std::size_t i) const override;
  std::string relative_key(std::size_t i) const override;
  void use_memory(const std::shared_ptr<detail::MemoryBudget>& budget) const override;
  // Every part's (a remote part's records are fetched again).
  bool reads_again_locally() const override;
  // The sources' classes when they all have the same and no label offset or
  // map; else empty.
  const std::vector<std::string>& classes() const override { return classes_; }
  std::string describe() const override;

  const std::vector<Part>& parts() const { return parts_; }
  std::uint64_t samples_per_epoch() const { return samples_per_epoch_; }
  // The source holding record i of the concatenation.
  std::size_t part_of(std::size_t i) const;
  // The source of epoch position `pos` (REQUIRES: pos < samples_per_epoch()).
  std::size_t part_of_position(std::uint64_t pos) const;
  // The record (of the concatenation) position `pos` of `epoch` draws (see
  // the top of this file), in closed form: O(sources), no table.
  std::uint32_t draw(std::uint64_t seed, bool shuffle, std::uint64_t epoch, std::uint64_t pos) const;

 private:
  std::vector<Part> parts_;
  std::size_t size_ = 0;
  std::uint64_t samples_per_epoch_ = 0;
  std::vector<std::uint64_t> counts_;  // each part's count
  std::vector<std::uint64_t> sizes_, starts_;  // each part's records, first record
  std::vector<std::string> classes_;
};

}  // namespace stoker
