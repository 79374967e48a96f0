#include "source/manifest.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>
#include <unordered_map>

#include "source/file_reader.h"

namespace stoker::detail {
namespace {

template <typename T>
bool parse_int(const std::string& s, T* v) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && p == s.data() + s.size() && !s.empty();
}

}  // namespace

std::uint64_t Manifest::records() const {
  std::uint64_t n = 0;
  for (const auto& s : shards) n += s.records;
  return n;
}

std::string serialize_manifest(const Manifest& m) {
  std::ostringstream o;
  o << "stoker-manifest " << kManifestVersion << "\n"
    << "labels " << m.labels << "\n"
    << "pack " << (m.pack.empty() ? "-" : escape_field(m.pack)) << "\n"
    << "records " << m.records() << "\n"
    << "members";
  if (m.members.empty()) o << " -";
  for (const auto& [suffix, n] : m.members) o << ' ' << escape_field(suffix) << '=' << n;
  o << "\nshards " << m.shards.size() << "\n";
  for (const auto& s : m.shards) o << escape_field(s.name) << '\t' << s.records << '\t' << s.bytes << '\n';
  std::string body = o.str();
  char sum[40];
  std::snprintf(sum, sizeof(sum), "checksum %016llx\n",
                static_cast<unsigned long long>(fnv1a64(body.data(), body.size())));
  return body + sum;
}

Status parse_manifest(const std::string& text, const std::string& path, Manifest* m) {
  auto bad = [&path](const std::string& why) {
    return Status::Corrupt("manifest '" + path + "': " + why + "; write it again with `stoker manifest`");
  };
  if (text.rfind("stoker-manifest ", 0) != 0) return bad("not a stoker manifest");
  const std::size_t cs = text.rfind("checksum ");
  if (cs == std::string::npos || (cs > 0 && text[cs - 1] != '\n')) return bad("no checksum line (truncated?)");
  const std::string sum_line = text.substr(cs + 9);
  if (sum_line.size() != 17 || sum_line[16] != '\n') return bad("malformed checksum line (truncated?)");
  char expect[17];
  std::snprintf(expect, sizeof(expect), "%016llx", static_cast<unsigned long long>(fnv1a64(text.data(), cs)));
  if (sum_line.compare(0, 16, expect) != 0) return bad("checksum mismatch (the file is damaged)");
  std::istringstream in(text.substr(0, cs));
  std::string line, v;
  auto header = [&](const char* name, std::string* value) {
    if (!std::getline(in, line)) return false;
    const std::string prefix = std::string(name) + " ";
    if (line.compare(0, prefix.size(), prefix) != 0) return false;
    *value = line.substr(prefix.size());
    return true;
  };
  int version = 0;
  if (!header("stoker-manifest", &v) || !parse_int(v, &version)) return bad("not a stoker manifest");
  if (version != kManifestVersion) return bad("version " + v + ", expected " + std::to_string(kManifestVersion));
  Manifest out;
  std::uint64_t records = 0;
  std::size_t count = 0;
  if (!header("labels", &out.labels)) return bad("bad labels line");
  if (!header("pack", &v) || !unescape_field(v, &out.pack)) return bad("bad pack line");
  if (!header("records", &v) || !parse_int(v, &records)) return bad("bad records line");
  if (!header("members", &v)) return bad("bad members line");
  if (v != "-") {
    std::istringstream ms(v);
    std::string item;
    while (ms >> item) {
      const std::size_t eq = item.rfind('=');
      std::pair<std::string, std::uint64_t> e;
      if (eq == std::string::npos || !unescape_field(item.substr(0, eq), &e.first) ||
          !parse_int(item.substr(eq + 1), &e.second)) {
        return bad("bad members entry '" + item + "'");
      }
      out.members.push_back(std::move(e));
    }
  }
  if (!header("shards", &v) || !parse_int(v, &count)) return bad("bad shards line");
  out.shards.reserve(std::min<std::size_t>(count, 1 << 20));
  while (std::getline(in, line)) {
    ManifestShard s;
    const std::size_t t1 = line.find('\t'), t2 = t1 == std::string::npos ? t1 : line.find('\t', t1 + 1);
    if (t2 == std::string::npos || !unescape_field(line.substr(0, t1), &s.name) || s.name.empty() ||
        !parse_int(line.substr(t1 + 1, t2 - t1 - 1), &s.records) || !parse_int(line.substr(t2 + 1), &s.bytes)) {
      return bad("malformed shard line " + std::to_string(out.shards.size() + 1));
    }
    out.shards.push_back(std::move(s));
  }
  if (out.shards.size() != count) {
    return bad("lists " + std::to_string(out.shards.size()) + " shards, its header says " + std::to_string(count));
  }
  if (out.records() != records) {
    return bad("its shards hold " + std::to_string(out.records()) + " records, its header says " + std::to_string(records));
  }
  *m = std::move(out);
  return Status::Ok();
}

Status read_manifest(const std::string& path, Manifest* m) {
  std::vector<std::uint8_t> bytes;
  if (Status st = read_file(path, &bytes); !st.ok()) return Status(st.code(), "manifest '" + path + "': " + st.message());
  return parse_manifest(std::string(bytes.begin(), bytes.end()), path, m);
}

std::string manifest_beside(const std::string& pattern) {
  const std::size_t slash = pattern.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : pattern.substr(0, slash + 1);
  std::string stem = pattern.substr(dir.size());
  stem = stem.substr(0, stem.find_first_of("{*?[%"));
  if (stem == pattern.substr(dir.size()) && stem.size() > 4 && stem.compare(stem.size() - 4, 4, ".tar") == 0) {
    stem.resize(stem.size() - 4);  // one shard: a.tar -> a.manifest
  }
  while (!stem.empty() && (stem.back() == '-' || stem.back() == '_' || stem.back() == '.')) stem.pop_back();
  return dir + (stem.empty() ? "shards" : stem) + kManifestSuffix;
}

std::string manifest_shard_path(const std::string& manifest_path, const std::string& name) {
  if (!name.empty() && name[0] == '/') return name;
  const std::size_t slash = manifest_path.rfind('/');
  return slash == std::string::npos ? name : manifest_path.substr(0, slash + 1) + name;
}

std::string manifest_shard_name(const std::string& manifest_path, const std::string& shard_path) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::absolute(fs::path(manifest_path)).parent_path().lexically_normal();
  const fs::path shard = fs::absolute(fs::path(shard_path)).lexically_normal();
  const fs::path rel = shard.lexically_relative(dir);
  if (rel.empty() || rel.begin()->string() == "..") return shard.string();
  return rel.string();
}

Status manifest_rows(const Manifest& m, const std::string& manifest_path, const std::vector<std::string>& shards,
                     std::vector<std::size_t>* rows) {
  auto key = [](const std::string& p) { return std::filesystem::path(p).lexically_normal().string(); };
  std::unordered_map<std::string, std::size_t> row_of;
  row_of.reserve(m.shards.size());
  for (std::size_t r = 0; r < m.shards.size(); ++r) row_of.emplace(key(manifest_shard_path(manifest_path, m.shards[r].name)), r);
  rows->clear();
  rows->reserve(shards.size());
  for (const auto& p : shards) {
    auto it = row_of.find(key(p));
    if (it == row_of.end()) {
      return Status(Code::kInvalidArgument, "manifest '" + manifest_path + "' is stale: it does not list shard '" + p +
                                                "'; write it again with `stoker manifest`");
    }
    rows->push_back(it->second);
  }
  return Status::Ok();
}

void manifest_add_shard(Manifest* m, const std::string& name, std::uint64_t bytes, const ShardIndex& index) {
  m->shards.push_back({name, index.records.size(), bytes});
  std::map<std::string, std::uint64_t> members(m->members.begin(), m->members.end());
  for (const auto& r : index.records) {
    for (const auto& mem : r.members) {
      // A sample counts once per suffix.
      bool first = true;
      for (const auto& other : r.members) {
        if (&other == &mem) break;
        if (other.suffix == mem.suffix) first = false;
      }
      if (first) ++members[mem.suffix];
    }
  }
  m->members.assign(members.begin(), members.end());
}

}  // namespace stoker::detail
