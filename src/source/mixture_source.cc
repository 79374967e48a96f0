// A mixture's sources as one Source (their concatenation), its JSON codec
// and its validation. What each epoch draws is order/mixture.h's.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "order/mixture.h"
#include "stoker/mixture.h"
#include "util/util.h"

namespace stoker {

using nlohmann::json;

namespace {

[[noreturn]] void bad(const std::string& what) { detail::invalid("mixture: " + what); }

const json& need(const json& j, const char* k, const std::string& where) {
  auto it = j.find(k);
  if (it == j.end()) bad(where + " has no '" + k + "'");
  return *it;
}

}  // namespace

void validate_mixture(const Mixture& m) {
  if (m.sources.empty()) bad("no sources given");
  std::set<std::string> names;
  std::size_t weighted = 0;
  double total = 0;
  for (const MixtureEntry& e : m.sources) {
    const std::string where = "source '" + e.name + "'";
    if (e.name.empty()) bad("every source needs a non-empty name");
    if (!names.insert(e.name).second) bad("the name '" + e.name + "' is given twice");
    if (e.specs.empty()) bad(where + " has no path");
    if (!std::isfinite(e.weight)) bad(where + ": the weight must be a finite number");
    if (e.weight >= 0) {
      ++weighted;
      total += e.weight;
    } else if (e.weight != -1) {
      bad(where + ": the weight must be >= 0, got " + std::to_string(e.weight));
    }
    if (e.label_offset != 0 && !e.label_map.empty()) bad(where + ": give label_offset or label_map, not both");
  }
  if (weighted != 0 && weighted != m.sources.size()) {
    bad("give a weight for every source or for none (then each source's weight is its size)");
  }
  if (weighted != 0 && !(total > 0)) bad("the weights must not all be 0");
  if (m.samples_per_epoch > 0xffffffffu) bad("samples_per_epoch must be below 2^32");
}

std::string mixture_to_json(const Mixture& m) {
  json j;
  j["sources"] = json::array();
  for (const MixtureEntry& e : m.sources) {
    json map = json::array();
    for (const auto& [from, to] : e.label_map) map.push_back({from, to});
    j["sources"].push_back({{"name", e.name},
                            {"specs", e.specs},
                            {"weight", e.weight < 0 ? json(nullptr) : json(e.weight)},
                            {"label_offset", e.label_offset},
                            {"label_map", map}});
  }
  j["samples_per_epoch"] = m.samples_per_epoch;
  return j.dump();
}

Mixture mixture_from_json(const std::string& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {  // parse errors and numbers out of range (1e999)
    bad(std::string("not JSON: ") + e.what());
  }
  if (!j.is_object()) bad("must be an object");
  Mixture m;
  const json& sources = need(j, "sources", "the mixture");
  if (!sources.is_array()) bad("'sources' must be a list");
  for (const json& s : sources) {
    if (!s.is_object()) bad("each source must be an object, got " + s.dump());
    MixtureEntry e;
    const json& name = need(s, "name", "a source");
    if (!name.is_string()) bad("a source's name must be a string, got " + name.dump());
    e.name = name.get<std::string>();
    const std::string where = "source '" + e.name + "'";
    const json& specs = need(s, "specs", where);
    if (!specs.is_array() || !std::all_of(specs.begin(), specs.end(), [](const json& x) { return x.is_string(); })) {
      bad(where + ": specs must be a list of paths, got " + specs.dump());
    }
    e.specs = specs.get<std::vector<std::string>>();
    if (auto w = s.find("weight"); w != s.end() && !w->is_null()) {
      if (!w->is_number()) bad(where + ": the weight must be a number, got " + w->dump());
      e.weight = w->get<double>();
      if (e.weight < 0) bad(where + ": the weight must be >= 0, got " + w->dump());
    }
    if (auto o = s.find("label_offset"); o != s.end()) {
      if (!o->is_number_integer()) bad(where + ": label_offset must be an integer, got " + o->dump());
      e.label_offset = o->get<std::int64_t>();
    }
    if (auto mp = s.find("label_map"); mp != s.end() && !mp->is_null()) {
      if (!mp->is_array()) bad(where + ": label_map must be a list of [from, to] pairs, got " + mp->dump());
      for (const json& pair : *mp) {
        if (!pair.is_array() || pair.size() != 2 || !pair[0].is_number_integer() || !pair[1].is_number_integer()) {
          bad(where + ": label_map entries must be [from, to] integer pairs, got " + pair.dump());
        }
        e.label_map[pair[0].get<std::int64_t>()] = pair[1].get<std::int64_t>();
      }
    }
    m.sources.push_back(std::move(e));
  }
  if (auto n = j.find("samples_per_epoch"); n != j.end() && !n->is_null()) {
    if (!n->is_number_unsigned()) bad("samples_per_epoch must be an integer >= 0, got " + n->dump());
    m.samples_per_epoch = n->get<std::uint64_t>();
  }
  validate_mixture(m);
  return m;
}

MixtureSource::MixtureSource(const Mixture& mix, const std::string& labels, const std::string& index_dir) {
  validate_mixture(mix);
  const bool weighted = mix.sources.front().weight >= 0;
  std::vector<double> weights;
  for (const MixtureEntry& e : mix.sources) {
    Part p;
    p.name = e.name;
    try {
      p.source = open_sources(e.specs, labels, index_dir);
    } catch (const Error& err) {
      throw Error(err.code(), "mixture source '" + e.name + "': " + err.what());
    }
    if (p.source->size() == 0) throw Error(Code::kNotFound, "mixture source '" + e.name + "' has no records");
    p.start = size_;
    size_ += p.source->size();
    p.weight = weighted ? e.weight : static_cast<double>(p.source->size());
    p.label_offset = e.label_offset;
    p.label_map = e.label_map;
    weights.push_back(p.weight);
    parts_.push_back(std::move(p));
  }
  if (size_ > 0xffffffffu) detail::invalid("mixtures of more than 2^32 records are not supported");
  samples_per_epoch_ = mix.samples_per_epoch ? mix.samples_per_epoch : size_;
  const auto counts = detail::mixture_counts(weights, samples_per_epoch_);
  for (std::size_t s = 0; s < parts_.size(); ++s) parts_[s].count = counts[s];
  counts_ = counts;
  for (const Part& p : parts_) {
    sizes_.push_back(p.source->size());
    starts_.push_back(p.start);
  }
  bool same = true;
  for (const Part& p : parts_) {
    same = same && p.label_offset == 0 && p.label_map.empty() && p.source->classes() == parts_[0].source->classes();
  }
  if (same) classes_ = parts_[0].source->classes();
}

std::size_t MixtureSource::part_of(std::size_t i) const {
  auto it = std::upper_bound(parts_.begin(), parts_.end(), i, [](std::size_t v, const Part& p) { return v < p.start; });
  return static_cast<std::size_t>(it - parts_.begin()) - 1;
}

std::size_t MixtureSource::part_of_position(std::uint64_t pos) const {
  return detail::mixture_part_of_position(counts_, pos);
}

std::string MixtureSource::key(std::size_t i) const {
  const Part& p = parts_[part_of(i)];
  return p.source->key(i - p.start);
}

std::int64_t MixtureSource::label(std::size_t i) const {
  const Part& p = parts_[part_of(i)];
  const std::int64_t l = p.source->label(i - p.start);
  if (l < 0) return l;
  if (!p.label_map.empty()) {
    auto it = p.label_map.find(l);
    return it == p.label_map.end() ? -1 : it->second;
  }
  std::int64_t out = 0;
  if (__builtin_add_overflow(l, p.label_offset, &out)) return -1;  // NOTE: no label rather than a wrapped one
  return out;
}

Status MixtureSource::read(std::size_t i, std::vector<std::uint8_t>* out) const {
  const Part& p = parts_[part_of(i)];
  const std::size_t r = i - p.start;
  if (!p.label_map.empty()) {  // NOTE: an unmapped label is the sample's error, not a silent -1
    const std::int64_t l = p.source->label(r);
    if (l >= 0 && !p.label_map.count(l)) {
      return Status(Code::kCorrupt, "mixture source '" + p.name + "': label " + std::to_string(l) +
                                                " is not in its label_map");
    }
  }
  return p.source->read(r, out);
}

bool MixtureSource::member_extent(std::size_t i, const std::string& member, Extent* out) const {
  const std::size_t s = part_of(i);
  return member != "mix:source" && parts_[s].source->member_extent(i - parts_[s].start, member, out);
}

Status MixtureSource::read_member(std::size_t i, const std::string& member, std::vector<std::uint8_t>* out) const {
  const std::size_t s = part_of(i);
  if (member == "mix:source") {
    const std::string text = std::to_string(s);
    out->assign(text.begin(), text.end());
    return Status::Ok();
  }
  return parts_[s].source->read_member(i - parts_[s].start, member, out);
}

std::vector<std::string> MixtureSource::members(std::size_t i) const {
  const Part& p = parts_[part_of(i)];
  std::vector<std::string> m = p.source->members(i - p.start);
  m.push_back("mix:source");
  return m;
}

std::string MixtureSource::relative_key(std::size_t i) const {
  const Part& p = parts_[part_of(i)];
  return p.source->relative_key(i - p.start);
}

void MixtureSource::use_memory(const std::shared_ptr<detail::MemoryBudget>& budget) const {
  for (const Part& p : parts_) p.source->use_memory(budget);
}

bool MixtureSource::reads_again_locally() const {
  return std::all_of(parts_.begin(), parts_.end(), [](const Part& p) { return p.source->reads_again_locally(); });
}

std::string MixtureSource::describe() const {
  std::string d = "mixture of " + std::to_string(parts_.size()) + " sources, " + std::to_string(samples_per_epoch_) +
                  " samples per epoch: ";
  for (std::size_t s = 0; s < parts_.size(); ++s) {
    if (s) d += "; ";
    d += "'" + parts_[s].name + "' " + parts_[s].source->describe() + ", " + std::to_string(parts_[s].count) +
         " per epoch";
  }
  return d;
}

std::uint32_t MixtureSource::draw(std::uint64_t seed, bool shuffle, std::uint64_t epoch, std::uint64_t pos) const {
  return detail::mixture_draw(sizes_, starts_, counts_, seed, shuffle, epoch, pos);
}

}  // namespace stoker
