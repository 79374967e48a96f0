#include "source/shard_index.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <sstream>

namespace stoker::detail {

std::string escape_field(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == '\t') out += "\\t";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

bool unescape_field(const std::string& s, std::string* out) {
  out->clear();
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\') {
      *out += s[i];
      continue;
    }
    if (++i >= s.size()) return false;
    if (s[i] == '\\') *out += '\\';
    else if (s[i] == 't') *out += '\t';
    else if (s[i] == 'n') *out += '\n';
    else return false;
  }
  return true;
}

namespace {

std::string escape(const std::string& s) { return escape_field(s); }
bool unescape(const std::string& s, std::string* out) { return unescape_field(s, out); }

template <typename T>
bool parse_int(const std::string& s, T* v) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && p == s.data() + s.size() && !s.empty();
}

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    std::size_t p = line.find(sep, start);
    out.push_back(line.substr(start, p == std::string::npos ? std::string::npos : p - start));
    if (p == std::string::npos) return out;
    start = p + 1;
  }
}

}  // namespace

std::uint64_t fnv1a64(const char* data, std::size_t n) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (std::size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(data[i]);
    h *= 0x100000001b3ULL;
  }
  return h;
}

Status parse_label(const std::string& labels, const std::string& text, std::int64_t* label) {
  if (labels == "cls") {
    std::size_t b = text.find_first_not_of(" \t\r\n");
    std::size_t e = text.find_last_not_of(" \t\r\n");
    std::string t = b == std::string::npos ? "" : text.substr(b, e - b + 1);
    if (!parse_int(t, label)) return Status::Corrupt("label: .cls is not an integer: '" + t.substr(0, 40) + "'");
    return Status::Ok();
  }
  const std::string field = labels.substr(5);  // "json:<field>"
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Status::Corrupt("label: .json does not parse as a JSON object");
  auto it = j.find(field);
  if (it == j.end()) return Status::Corrupt("label: .json has no field '" + field + "'");
  if (!it->is_number_integer()) return Status::Corrupt("label: .json field '" + field + "' is not an integer");
  *label = it->get<std::int64_t>();
  return Status::Ok();
}

std::string serialize_index(const ShardIndex& index) {
  std::ostringstream o;
  o << "stoker-index " << kIndexVersion << "\n"
    << "shard_size " << index.shard_size << "\n"
    << "shard_mtime_ns " << index.shard_mtime_ns << "\n"
    << "labels " << index.labels << "\n"
    << "records " << index.records.size() << "\n";
  for (const auto& r : index.records) {
    o << escape(r.key) << '\t' << escape(r.suffix) << '\t' << r.offset << '\t' << r.size << '\t' << r.label << '\t'
      << escape(r.error);
    for (const auto& m : r.members) o << '\t' << escape(m.suffix) << '\t' << m.offset << '\t' << m.size;
    o << '\n';
  }
  std::string body = o.str();
  char sum[40];
  std::snprintf(sum, sizeof(sum), "checksum %016llx\n",
                static_cast<unsigned long long>(fnv1a64(body.data(), body.size())));
  return body + sum;
}

Status parse_index(const std::string& text, ShardIndex* index) {
  auto bad = [](const std::string& why) { return Status::Corrupt("index: " + why); };
  std::size_t cs = text.rfind("checksum ");
  if (cs == std::string::npos || (cs > 0 && text[cs - 1] != '\n')) return bad("no checksum line");
  std::string sum_line = text.substr(cs + 9);
  if (sum_line.size() != 17 || sum_line[16] != '\n') return bad("malformed checksum line");
  char expect[17];
  std::snprintf(expect, sizeof(expect), "%016llx", static_cast<unsigned long long>(fnv1a64(text.data(), cs)));
  if (sum_line.compare(0, 16, expect) != 0) return bad("checksum mismatch");
  std::istringstream in(text.substr(0, cs));
  std::string line;
  auto header = [&](const char* name, std::string* value) {
    if (!std::getline(in, line)) return false;
    std::string prefix = std::string(name) + " ";
    if (line.compare(0, prefix.size(), prefix) != 0) return false;
    *value = line.substr(prefix.size());
    return true;
  };
  std::string v;
  int version = 0;
  if (!header("stoker-index", &v) || !parse_int(v, &version)) return bad("not a stoker index");
  if (version != kIndexVersion) return bad("version " + v + ", expected " + std::to_string(kIndexVersion));
  std::size_t count = 0;
  if (!header("shard_size", &v) || !parse_int(v, &index->shard_size)) return bad("bad shard_size");
  if (!header("shard_mtime_ns", &v) || !parse_int(v, &index->shard_mtime_ns)) return bad("bad shard_mtime_ns");
  if (!header("labels", &index->labels)) return bad("bad labels line");
  if (!header("records", &v) || !parse_int(v, &count)) return bad("bad records line");
  index->records.clear();
  index->records.reserve(std::min<std::size_t>(count, 1 << 20));
  while (std::getline(in, line)) {
    auto f = split(line, '\t');
    IndexRecord r;
    auto malformed = [&] { return bad("malformed record line " + std::to_string(index->records.size() + 1)); };
    if (f.size() < 6 || (f.size() - 6) % 3 != 0 || !unescape(f[0], &r.key) || !unescape(f[1], &r.suffix) ||
        !parse_int(f[2], &r.offset) || !parse_int(f[3], &r.size) || !parse_int(f[4], &r.label) ||
        !unescape(f[5], &r.error)) {
      return malformed();
    }
    auto outside = [&](std::uint64_t off, std::uint64_t n) { return off > index->shard_size || n > index->shard_size - off; };
    if (r.error.empty() && outside(r.offset, r.size)) return bad("record '" + r.key + "' lies outside the shard");
    for (std::size_t k = 6; k < f.size(); k += 3) {
      IndexMember m;
      if (!unescape(f[k], &m.suffix) || !parse_int(f[k + 1], &m.offset) || !parse_int(f[k + 2], &m.size)) {
        return malformed();
      }
      if (outside(m.offset, m.size)) return bad("member '" + r.key + "." + m.suffix + "' lies outside the shard");
      r.members.push_back(std::move(m));
    }
    index->records.push_back(std::move(r));
  }
  if (index->records.size() != count) return bad("record count mismatch");
  return Status::Ok();
}

}  // namespace stoker::detail
