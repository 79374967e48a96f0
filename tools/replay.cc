// stoker replay FILE --epoch E --batch B: which records and draws made a
// batch (its provenance), and the batch itself made again (--out .npz),
// without running the epoch up to it.
#include <zlib.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "batch/resume.h"
#include "commands.h"
#include "stoker/loader.h"
#include "stoker/mixture.h"
#include "stoker/options.h"

namespace stoker::cli {
namespace {

using nlohmann::json;

struct Args {
  std::string file, options;
  std::optional<std::uint64_t> epoch, batch;
  std::optional<int> rank;
  std::string out;
  bool as_json = false;
};

json read_json(const std::string& path, const char* what) {
  std::ifstream in(path);
  if (!in) throw Error(Code::kNotFound, std::string("replay: cannot open ") + what + " '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  try {
    return json::parse(text.str());
  } catch (const json::exception& e) {
    throw Error(Code::kInvalidArgument, "replay: " + path + ": not JSON: " + e.what());
  }
}

bool is_state(const json& j) { return j.is_object() && j.contains("batches_done") && j.contains("version"); }

// The loader FILE describes: {"sources": [...]} or {"mixture": {...}}, with
// "options" (stoker.Loader's keywords, as the options codec reads them) and
// an optional "state"; or a bare state with --options naming such a file.
struct Setup {
  json loader;
  std::optional<Loader::State> state;
};

Setup setup_of(const Args& a) {
  Setup s;
  json file = read_json(a.file, "file");
  if (is_state(file)) {
    if (a.options.empty()) {
      throw Error(Code::kInvalidArgument, "replay: " + a.file +
                                              " is a loader state; --options must name the loader's options file "
                                              "({\"sources\": [...], \"options\": {...}}, as Loader.save_replay writes)");
    }
    s.loader = read_json(a.options, "options file");
    s.state = detail::state_from_json(file.dump());
  } else {
    s.loader = std::move(file);
    if (!a.options.empty()) throw Error(Code::kInvalidArgument, "replay: --options is for a state file; " + a.file + " holds the options");
    if (s.loader.contains("state")) s.state = detail::state_from_json(s.loader["state"].dump());
  }
  const std::string& where = a.options.empty() ? a.file : a.options;
  if (!s.loader.is_object() || (!s.loader.contains("sources") && !s.loader.contains("mixture"))) {
    throw Error(Code::kInvalidArgument, "replay: " + where + ": names no \"sources\" (a list of paths) or \"mixture\"");
  }
  return s;
}

std::unique_ptr<Loader> open_loader(const Setup& s, const Args& a) {
  LoaderOptions o = options_from_json(s.loader.contains("options") ? s.loader["options"].dump() : "{}");
  if (a.rank) o.rank = *a.rank;
  // NOTE: a batch is the same for any thread count or cache; one worker,
  // no preload: nothing runs but the batch asked for.
  o.threads = 1;
  o.cache.preload = false;
  o.cache.progress = Progress::kOff;
  if (s.loader.contains("mixture")) return std::make_unique<Loader>(mixture_from_json(s.loader["mixture"].dump()), o);
  return std::make_unique<Loader>(s.loader["sources"].get<std::vector<std::string>>(), o);
}

// --- .npz: a zip of .npy files, stored (numpy.load reads it).
void put16(std::string* s, std::uint32_t v) {
  s->push_back(static_cast<char>(v & 0xff));
  s->push_back(static_cast<char>((v >> 8) & 0xff));
}
void put32(std::string* s, std::uint32_t v) {
  put16(s, v & 0xffff);
  put16(s, v >> 16);
}

std::string npy_bytes(const TensorView& t) {
  std::string shape = "(";
  for (std::int64_t d : t.dims) shape += std::to_string(d) + ", ";
  if (t.dims.size() > 1) shape.resize(shape.size() - 1);  // "(4, 3, )" -> "(4, 3,)": numpy's spelling of either is read
  shape += ")";
  std::string header = "{'descr': '" + t.descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  const std::size_t total = (10 + header.size() + 1 + 63) / 64 * 64;  // the data 64-byte aligned
  header.append(total - 10 - header.size() - 1, ' ');
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  put16(&out, static_cast<std::uint32_t>(header.size()));
  out += header;
  out.append(static_cast<const char*>(t.data), t.bytes);
  return out;
}

void write_npz(const std::string& path, const Batch& batch) {
  std::string zip, central;
  std::uint16_t entries = 0;
  for (const TensorView& t : batch.tensors()) {
    const std::string name = t.name + ".npy";
    const std::string data = npy_bytes(t);
    if (data.size() >= 0xffffffffu || zip.size() >= 0xffffffffu) {
      throw Error(Code::kResourceExhausted, "replay: --out: the batch is over 4 GiB (a zip without zip64)");
    }
    const auto crc = static_cast<std::uint32_t>(
        crc32(0L, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(data.size())));
    const auto offset = static_cast<std::uint32_t>(zip.size());
    auto header = [&](std::string* s, bool central_entry) {
      put32(s, central_entry ? 0x02014b50 : 0x04034b50);
      if (central_entry) put16(s, 20);  // made by
      put16(s, 20);                     // needed to extract
      put16(s, 0);                      // flags
      put16(s, 0);                      // stored
      put16(s, 0);                      // time
      put16(s, 0x21);                   // date: 1980-01-01
      put32(s, crc);
      put32(s, static_cast<std::uint32_t>(data.size()));
      put32(s, static_cast<std::uint32_t>(data.size()));
      put16(s, static_cast<std::uint32_t>(name.size()));
      put16(s, 0);  // extra
      if (central_entry) {
        put16(s, 0);  // comment
        put16(s, 0);  // disk
        put16(s, 0);  // internal attributes
        put32(s, 0);  // external attributes
        put32(s, offset);
      }
      *s += name;
    };
    header(&zip, false);
    zip += data;
    header(&central, true);
    ++entries;
  }
  const auto central_offset = static_cast<std::uint32_t>(zip.size());
  zip += central;
  put32(&zip, 0x06054b50);
  put16(&zip, 0);
  put16(&zip, 0);
  put16(&zip, entries);
  put16(&zip, entries);
  put32(&zip, static_cast<std::uint32_t>(central.size()));
  put32(&zip, central_offset);
  put16(&zip, 0);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(zip.data(), static_cast<std::streamsize>(zip.size()));
  f.close();
  if (!f) throw Error(Code::kIOError, "replay: cannot write '" + path + "'");
}

// One line per sample: where it came from, then its draws.
void print_provenance(const json& p) {
  std::printf("epoch %llu, batch %llu of rank %d of %d (seed %llu, batch_size %llu, shuffle %s): %zu samples\n",
              p["epoch"].get<unsigned long long>(), p["batch"].get<unsigned long long>(), p["rank"].get<int>(),
              p["world_size"].get<int>(), p["seed"].get<unsigned long long>(), p["batch_size"].get<unsigned long long>(),
              p["shuffle"].get<bool>() ? "on" : "off", p["samples"].size());
  std::size_t k = 0;
  for (const json& s : p["samples"]) {
    std::string where = "record " + std::to_string(s["record"].get<std::uint64_t>());
    if (s.contains("source")) {
      where += " (source '" + s["source"].get<std::string>() + "' record " +
               std::to_string(s["source_record"].get<std::uint64_t>()) + ")";
    }
    if (s.contains("shard")) where += " shard " + std::to_string(s["shard"].get<std::uint64_t>());
    std::printf("  [%zu] %s '%s' label %lld draw %llu\n", k++, where.c_str(), s["key"].get<std::string>().c_str(),
                static_cast<long long>(s["label"].get<std::int64_t>()), s["draw"].get<unsigned long long>());
    if (s.contains("error")) {
      std::printf("      error: %s\n", s["error"].get<std::string>().c_str());
    } else {
      std::printf("      %s\n", s["plan"].dump().c_str());
    }
  }
}

void replay(const Args& a) {
  const Setup s = setup_of(a);
  std::unique_ptr<Loader> loader = open_loader(s, a);
  std::uint64_t epoch = 0, batch = 0;
  if (s.state) {
    loader->load_state_dict(*s.state);
    // NOTE: by default the batch a resumed run hands out next: on the saved
    // topology the one after those done, on another the resumed epoch's first.
    const bool same = s.state->world_size == loader->options().world_size &&
                      s.state->batch_size == loader->options().batch_size;
    epoch = s.state->epoch;
    batch = same ? s.state->batches_done : 0;
  } else if (!a.epoch || !a.batch) {
    throw Error(Code::kInvalidArgument, "replay: " + a.file + " holds no state: give --epoch and --batch");
  }
  if (a.epoch) epoch = *a.epoch;
  if (a.batch) batch = *a.batch;
  const json p = json::parse(loader->batch_provenance(epoch, static_cast<std::size_t>(batch)));
  if (a.as_json) {
    std::printf("%s\n", p.dump(1).c_str());
  } else {
    print_provenance(p);
  }
  if (!a.out.empty()) {
    const Batch b = loader->batch(epoch, static_cast<std::size_t>(batch));
    write_npz(a.out, b);
    if (!a.as_json) std::printf("wrote %s: %zu tensors\n", a.out.c_str(), b.tensors().size());
  }
}

}  // namespace

void add_replay_command(CLI::App& app) {
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "replay", "Which records and drawn parameters made batch B of epoch E (its provenance), and the batch made "
                "again (--out), without running the epoch up to it");
  cmd->add_option("file", a->file,
                  "the loader's JSON: {\"sources\": [...] or \"mixture\": {...}, \"options\": {...}, \"state\"?: "
                  "{...}} (Loader.save_replay writes it), or a state_dict() saved as JSON (then --options)")
      ->required();
  cmd->add_option("--options", a->options, "with a state FILE: the loader's JSON (sources or mixture, and options)");
  cmd->add_option("--epoch,-e", a->epoch, "the epoch (default: the state's)");
  cmd->add_option("--batch,-b", a->batch, "the batch's index in the epoch (default: the state's next batch)");
  cmd->add_option("--rank", a->rank, "the rank whose batch it is (default: the options')");
  cmd->add_option("--out,-o", a->out, "write the batch's tensors to this .npz (numpy.load reads it)");
  cmd->add_flag("--json", a->as_json, "print the provenance as JSON");
  cmd->callback([a] { replay(*a); });
}

}  // namespace stoker::cli
