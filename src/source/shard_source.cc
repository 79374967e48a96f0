// WebDataset-style tar shards, read through their index sidecars.
#include <fcntl.h>
#include <glob.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "source/file_reader.h"
#include "source/manifest.h"
#include "source/shard_index.h"
#include "source/remote/transport.h"
#include "source/shard_bytes.h"
#include "source/shard_source.h"
#include "source/tar.h"
#include "stoker/source.h"
#include "stoker/stats.h"
#include "util/thread.h"
#include "util/util.h"

namespace stoker {
namespace detail {

std::vector<std::string> expand_braces(const std::string& pattern) {
  std::size_t open = pattern.find('{');
  if (open == std::string::npos) return {pattern};
  std::size_t close = pattern.find('}', open);
  if (close == std::string::npos) throw Error(Code::kInvalidArgument, "shard pattern '" + pattern + "': unmatched '{'");
  const std::string head = pattern.substr(0, open), tail = pattern.substr(close + 1);
  const std::string body = pattern.substr(open + 1, close - open - 1);
  std::vector<std::string> items;
  std::size_t dots = body.find("..");
  if (dots != std::string::npos) {
    std::string a = body.substr(0, dots), b = body.substr(dots + 2);
    long long lo = 0, hi = 0;
    try {
      std::size_t pa = 0, pb = 0;
      lo = std::stoll(a, &pa);
      hi = std::stoll(b, &pb);
      if (pa != a.size() || pb != b.size()) throw std::invalid_argument("");
    } catch (const std::exception&) {
      throw Error(Code::kInvalidArgument, "shard pattern '" + pattern + "': bad range {" + body + "}");
    }
    if (hi < lo || hi - lo > 10000000) {
      throw Error(Code::kInvalidArgument, "shard pattern '" + pattern + "': bad range {" + body + "}");
    }
    const int width = (a.size() > 1 && a[0] == '0') ? static_cast<int>(a.size()) : 0;
    for (long long v = lo; v <= hi; ++v) {
      std::string s = std::to_string(v);
      if (static_cast<int>(s.size()) < width) s.insert(0, static_cast<std::size_t>(width) - s.size(), '0');
      items.push_back(s);
    }
  } else {
    std::size_t start = 0;
    for (;;) {
      std::size_t c = body.find(',', start);
      items.push_back(body.substr(start, c == std::string::npos ? std::string::npos : c - start));
      if (c == std::string::npos) break;
      start = c + 1;
    }
  }
  std::vector<std::string> out;
  for (const auto& item : items) {
    for (auto& rest : expand_braces(tail)) out.push_back(head + item + rest);
  }
  return out;
}

std::vector<std::string> expand_shard_spec(const std::string& spec) {
  std::vector<std::string> out;
  for (const auto& p : expand_braces(spec)) {
    if (p.find_first_of("*?[") == std::string::npos) {
      out.push_back(p);
      continue;
    }
    glob_t g;
    int rc = ::glob(p.c_str(), 0, nullptr, &g);
    if (rc == GLOB_NOMATCH) throw Error(Code::kNotFound, "shard pattern '" + p + "' matches no file");
    if (rc != 0) throw Error(Code::kIOError, "shard pattern '" + p + "': glob failed");
    std::vector<std::string> found(g.gl_pathv, g.gl_pathv + g.gl_pathc);
    ::globfree(&g);
    std::sort(found.begin(), found.end());
    out.insert(out.end(), found.begin(), found.end());
  }
  return out;
}

bool looks_like_shards(const std::string& spec) {
  return !remote_scheme(spec).empty() || ends_with(spec, ".tar") || ends_with(spec, kManifestSuffix) || spec.find('{') != std::string::npos || spec.find_first_of("*?[") != std::string::npos;
}

namespace {

std::int64_t mtime_ns(const struct stat& st) {
  return static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec;
}

}  // namespace

// Where a shard's sidecar lives: next to it, or in index_dir under the
// shard's absolute path with '/' spelled '%'.
std::string index_path(const std::string& shard, const std::string& index_dir) {
  if (index_dir.empty()) return shard + ".idx";
  std::string flat =
      remote_scheme(shard).empty() ? std::filesystem::absolute(shard).lexically_normal().string() : shard;
  std::replace(flat.begin(), flat.end(), '/', '%');
  return index_dir + "/" + flat + ".idx";
}

Status load_or_build_index(const std::string& shard, int fd, const ShardOptions& opt, ShardIndex* index) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return Status::IOError(shard + ": cannot stat: " + std::strerror(errno));
  const std::uint64_t size = static_cast<std::uint64_t>(st.st_size);
  std::vector<std::string> candidates = {shard + ".idx"};
  if (!opt.index_dir.empty()) candidates.push_back(index_path(shard, opt.index_dir));
  for (const auto& idx_path : candidates) {
    std::vector<std::uint8_t> bytes;
    if (read_file(idx_path, &bytes).ok()) {  // refuses anything but a regular file
      std::string text(bytes.begin(), bytes.end());
      Status s = parse_index(text, index);
      if (s.ok() && index->shard_size == size && index->shard_mtime_ns == mtime_ns(st) && index->labels == opt.labels) {
        return Status::Ok();
      }
    }
  }
  auto read_at = [fd](std::uint8_t* buf, std::size_t n, std::uint64_t off) { return pread_full(fd, buf, n, off); };
  Status s = build_index(read_at, size, shard, opt.labels, index);
  if (!s.ok()) return s;
  // Written next to the shard (or into index_dir) when writable; else kept in memory.
  (void)write_index_file(shard, index, opt.index_dir);
  return Status::Ok();
}

Status write_index_file(const std::string& shard, ShardIndex* index, const std::string& index_dir) {
  struct stat st;
  if (::stat(shard.c_str(), &st) != 0) return Status::IOError(shard + ": cannot stat: " + std::strerror(errno));
  index->shard_size = static_cast<std::uint64_t>(st.st_size);
  index->shard_mtime_ns = mtime_ns(st);
  return write_file_atomically(index_path(shard, index_dir), serialize_index(*index));
}

namespace {

// True when suffix[from..] is one extension ("png", "npy"; "nii.gz" counts as one).
bool one_extension(const std::string& suffix, std::size_t from) {
  return suffix.find('.', from) == std::string::npos || suffix.compare(from, std::string::npos, "nii.gz") == 0;
}

// One shard's records, from its index: what reading them needs, about 72
// bytes a record of two members (a record 32, its key's bytes, a member 16):
// keys in one string, members in one table, suffixes interned (a shard has
// a few), the rare record's error aside. NOTE: compact because a full
// shuffle holds ShardOptions::index_records records' entries at once.
struct ShardRecords {
  struct Record {
    std::uint64_t offset;
    std::uint64_t size;
    std::int64_t label;
    std::uint32_t key_at;        // its key: keys[key_at, the next record's key_at)
    std::uint32_t first_member;  // its members: members[first_member, the next record's first_member)
  };
  struct Member {
    std::uint64_t offset;
    std::uint64_t size : 48;
    std::uint64_t suffix : 16;  // index into suffixes
  };
  std::vector<Record> records;  // one more at the end: where the last record's key and members end
  std::vector<Member> members;
  std::string keys;
  std::string prefix;  // "<shard>:", before each key
  std::vector<std::pair<std::uint32_t, std::string>> errors;  // (record, why), by record
  std::vector<std::string> suffixes;

  ShardRecords(const std::string& display_name, ShardIndex&& index) : prefix(display_name + ":") {
    records.reserve(index.records.size() + 1);
    std::size_t key_bytes = 0, member_count = 0;
    for (const auto& r : index.records) {
      key_bytes += r.key.size();
      member_count += r.members.size();
    }
    if (key_bytes > UINT32_MAX || member_count > UINT32_MAX) {
      throw Error(Code::kResourceExhausted, "shard '" + display_name + "' holds more than 2^32 members or key bytes");
    }
    keys.reserve(key_bytes);
    members.reserve(member_count);
    for (auto& r : index.records) {
      if (!r.error.empty()) errors.emplace_back(static_cast<std::uint32_t>(records.size()), std::move(r.error));
      records.push_back({r.offset, r.size, r.label, static_cast<std::uint32_t>(keys.size()),
                         static_cast<std::uint32_t>(members.size())});
      keys += r.key;
      for (const auto& m : r.members) {
        if (m.size >> 48) throw Error(Code::kResourceExhausted, "shard '" + display_name + "': a member of 2^48 bytes");
        members.push_back({m.offset, m.size, intern(display_name, m.suffix)});
      }
    }
    records.push_back({0, 0, -1, static_cast<std::uint32_t>(keys.size()), static_cast<std::uint32_t>(members.size())});
  }
  std::size_t size() const { return records.size() - 1; }
  // "<shard>:<key>"
  std::string key(std::size_t j) const {
    return prefix + keys.substr(records[j].key_at, records[j + 1].key_at - records[j].key_at);
  }
  // Why record j cannot be read; empty when it can.
  const std::string& error(std::size_t j) const {
    static const std::string none;
    auto it = std::lower_bound(errors.begin(), errors.end(), j, [](const auto& e, std::size_t v) { return e.first < v; });
    return it != errors.end() && it->first == j ? it->second : none;
  }
  // Record j's members: [first, last).
  std::pair<std::uint32_t, std::uint32_t> member_range(std::size_t j) const {
    return {records[j].first_member, records[j + 1].first_member};
  }
  std::uint32_t intern(const std::string& display_name, const std::string& suffix) {
    auto it = std::find(suffixes.begin(), suffixes.end(), suffix);
    if (it != suffixes.end()) return static_cast<std::uint32_t>(it - suffixes.begin());
    if (suffixes.size() > 0xffff) throw Error(Code::kResourceExhausted, "shard '" + display_name + "': over 65536 member suffixes");
    suffixes.push_back(suffix);
    return static_cast<std::uint32_t>(suffixes.size() - 1);
  }
  // read_member's rule: the member named exactly ("seg.png"), else the one
  // "<member>.<ext>" ("seg" for "seg.png", as a schema field names it
  // without its format). Null when none; *ambiguous when several.
  const Member* find(std::size_t j, const std::string& member, bool* ambiguous) const {
    const Member* found = nullptr;
    int prefixed = 0;
    const auto [first, last] = member_range(j);
    for (std::uint32_t k = first; k < last; ++k) {
      const std::string& suffix = suffixes[members[k].suffix];
      if (suffix == member) return &members[k];
      if (suffix.size() > member.size() && suffix.compare(0, member.size(), member) == 0 &&
          suffix[member.size()] == '.' && one_extension(suffix, member.size() + 1)) {
        found = &members[k];
        ++prefixed;
      }
    }
    *ambiguous = prefixed > 1;
    return prefixed == 1 ? found : nullptr;
  }
};

// Tar shards as one Source. Per shard it keeps a name, its first record and
// (while loaded) its records; a source opened from a manifest loads a
// shard's index when a record of it is first asked for and evicts the least
// recently used ones past `index_records` records, so its memory does not
// grow with the data set's records. A source given every index keeps them all.
class ShardSource final : public Source {
 public:
  ShardSource(std::vector<std::string> names, std::vector<ShardIndex> indexes, std::unique_ptr<ShardBytes> bytes,
              std::size_t plan_walk)
      : names_(std::move(names)),
        bytes_(std::move(bytes)),
        plan_walk_(plan_walk),
        loaded_(names_.size()),
        used_(names_.size(), 0) {
    std::size_t n = 0;
    for (std::size_t s = 0; s < indexes.size(); ++s) {
      starts_.push_back(n);
      n += indexes[s].records.size();
      loaded_[s] = std::make_shared<const ShardRecords>(display_name(s), std::move(indexes[s]));
    }
    size_ = n;
    if (size_ == 0) throw Error(Code::kNotFound, "shards (" + std::to_string(names_.size()) + " files) hold no samples");
  }
  // From a manifest: shard s holds counts[s] records; its index is read by
  // bytes->load_index() when first needed.
  ShardSource(ShardNames names, const std::vector<std::uint64_t>& counts, std::vector<std::uint64_t> sizes,
              std::string manifest, std::size_t index_records, std::unique_ptr<ShardBytes> bytes, std::size_t plan_walk)
      : names_(std::move(names)),
        bytes_(std::move(bytes)),
        manifest_(std::move(manifest)),
        sizes_(std::move(sizes)),
        index_records_(index_records),
        plan_walk_(plan_walk),
        loaded_(names_.size()),
        used_(names_.size(), 0) {
    std::size_t n = 0;
    for (std::uint64_t c : counts) {
      starts_.push_back(n);
      n += static_cast<std::size_t>(c);
    }
    size_ = n;
    if (size_ == 0) throw Error(Code::kNotFound, "manifest '" + manifest_ + "': its shards hold no samples");
  }

  std::size_t size() const override { return size_; }
  std::string key(std::size_t i) const override {
    const auto [s, j] = locate(i);
    Status st;
    auto shard = get(s, &st);
    if (!shard) return display_name(s) + ":#" + std::to_string(j);  // read() says why
    return shard->key(j);
  }
  std::int64_t label(std::size_t i) const override {
    const auto [s, j] = locate(i);
    Status st;
    auto shard = get(s, &st);
    return shard ? shard->records[j].label : -1;  // read() says why
  }
  Status read(std::size_t i, std::vector<std::uint8_t>* out) const override {
    const auto [s, j] = locate(i);
    Status st;
    auto shard = get(s, &st);
    if (!shard) return st;
    if (const std::string& why = shard->error(j); !why.empty()) return Status::Corrupt(why);
    const auto& r = shard->records[j];
    return bytes_->read_at(s, r.offset, r.size, out);
  }
  bool member_extent(std::size_t i, const std::string& member, Extent* out) const override {
    const auto [s, j] = locate(i);
    std::string path = bytes_->local_path(s);
    if (path.empty()) return false;
    Status st;
    auto shard = get(s, &st);
    if (!shard) return false;  // read_member says why
    const auto& r = shard->records[j];
    if (member.empty()) {
      if (!shard->error(j).empty()) return false;  // read() says why
      *out = {std::move(path), r.offset, r.size};
      return true;
    }
    bool ambiguous = false;
    const ShardRecords::Member* m = shard->find(j, member, &ambiguous);
    if (!m) return false;
    *out = {std::move(path), m->offset, m->size};
    return true;
  }
  Status read_member(std::size_t i, const std::string& member, std::vector<std::uint8_t>* out) const override {
    const auto [s, j] = locate(i);
    Status st;
    auto shard = get(s, &st);
    if (!shard) return st;
    bool ambiguous = false;
    if (const ShardRecords::Member* m = shard->find(j, member, &ambiguous)) return bytes_->read_at(s, m->offset, m->size, out);
    std::string have;
    for (const std::string& m : members(i)) have += (have.empty() ? "." : ", .") + m;
    if (ambiguous) return Status::NotFound("member '" + member + "' is ambiguous (members: " + have + ")");
    return Status::NotFound("no member '" + member + "' (members: " + have + ")");
  }
  std::vector<std::string> members(std::size_t i) const override {
    const auto [s, j] = locate(i);
    Status st;
    auto shard = get(s, &st);
    std::vector<std::string> out;
    if (!shard) return out;
    const auto [first, last] = shard->member_range(j);
    for (std::uint32_t k = first; k < last; ++k) out.push_back(shard->suffixes[shard->members[k].suffix]);
    return out;
  }
  const std::vector<std::string>& classes() const override { return classes_; }
  std::vector<std::size_t> shard_starts() const override { return starts_; }
  std::string describe() const override {
    return std::to_string(names_.size()) + " tar shard" + (names_.size() == 1 ? "" : "s") + " ('" + names_[0] +
           "'" + (names_.size() > 1 ? ", ..." : "") + "; " + std::to_string(size_) + " records" +
           (manifest_.empty() ? "" : "; manifest '" + manifest_ + "'") + ")";
  }
  bool wants_plan() const override { return bytes_->wants_plan(); }
  void plan(const RecordOrder& seq, std::size_t from) const override {
    if (bytes_->wants_plan()) bytes_->plan(uses(seq, from), from);
  }
  void plan_ahead(const RecordOrder& seq) const override {
    if (bytes_->wants_plan()) bytes_->plan_ahead(uses(seq, 0));
  }
  void progress(std::size_t done) const override { bytes_->progress(done); }
  void io_stats(Stats* s) const override { bytes_->io_stats(s); }
  void use_memory(const std::shared_ptr<MemoryBudget>& budget) const override { bytes_->use_memory(budget); }

 private:
  std::string display_name(std::size_t s) const {
    std::string name = names_[s];
    return remote_scheme(name).empty() ? std::filesystem::path(name).filename().string() : name;
  }
  // (shard, record within it) of record i.
  std::pair<std::uint32_t, std::size_t> locate(std::size_t i) const {
    const auto it = std::upper_bound(starts_.begin(), starts_.end(), i) - 1;
    return {static_cast<std::uint32_t>(it - starts_.begin()), i - *it};
  }
  // Shard s's records, loaded now if they are not; null and *err when its
  // index cannot be read or no longer matches the manifest.
  std::shared_ptr<const ShardRecords> get(std::uint32_t s, Status* err) const {
    {
      MutexLock lock(mu_);
      // NOTE: one thread loads a shard (a file read, or a request); the
      // others asking for it meanwhile wait for that one.
      while (!loaded_[s] && loading_.count(s)) loaded_cv_.wait(lock);
      if (loaded_[s]) {
        touch_locked(s);
        return loaded_[s];
      }
      loading_.insert(s);
    }
    // NOTE: an exception here (out of memory for an index) is that shard's
    // error, and never leaves `loading_` set (the waiters would hang).
    const std::size_t want = (s + 1 < starts_.size() ? starts_[s + 1] : size_) - starts_[s];
    std::shared_ptr<const ShardRecords> records;
    Status st;
    try {
      ShardIndex index;
      st = bytes_->load_index(s, &index);
      if (st.ok() && index.records.size() != want) {
        st = Status(Code::kUnavailable, "manifest '" + manifest_ + "' is stale: shard '" + names_[s] + "' holds " +
                                            std::to_string(index.records.size()) + " records, the manifest says " +
                                            std::to_string(want) + "; write it again with `stoker manifest`");
      }
      if (st.ok()) records = std::make_shared<const ShardRecords>(display_name(s), std::move(index));
    } catch (...) {
      st = exception_status("indexing shard '" + names_[s] + "'");
    }
    MutexLock lock(mu_);
    loading_.erase(s);
    loaded_cv_.notify_all();
    if (!st.ok()) {
      *err = std::move(st);
      return nullptr;
    }
    loaded_[s] = std::move(records);
    loaded_records_ += want;
    touch_locked(s);
    // Least recently used first, never the one just loaded.
    while (loaded_records_ > index_records_ && lru_.size() > 1) {
      const std::uint32_t victim = lru_.begin()->second;
      lru_.erase(lru_.begin());
      loaded_records_ -= loaded_[victim]->size();
      loaded_[victim].reset();
      used_[victim] = 0;
    }
    return loaded_[s];
  }
  void touch_locked(std::uint32_t s) const REQUIRES(mu_) {
    if (manifest_.empty()) return;  // every index given: nothing to evict
    if (used_[s]) lru_.erase({used_[s], s});
    used_[s] = ++tick_;
    lru_.emplace(used_[s], s);
  }
  // Per shard: its first and last position from `from` on, and the byte
  // span of the records used there (plan_uses). From a manifest the span is
  // the whole shard: no index is read to plan.
  std::vector<ShardBytes::Use> uses(const RecordOrder& seq, std::size_t from) const {
    if (!manifest_.empty()) {
      return plan_uses(seq, from, plan_walk_, starts_, size_,
                       [this](std::uint32_t s, std::size_t, std::size_t, std::size_t, std::uint64_t* lo, std::uint64_t* hi) {
                         *lo = 0;
                         *hi = sizes_[s];
                       });
    }
    return plan_uses(seq, from, plan_walk_, starts_, size_,
                     [this](std::uint32_t s, std::size_t rec, std::size_t last, std::size_t stride, std::uint64_t* lo,
                            std::uint64_t* hi) {
                       Status ignored;
                       auto shard = get(s, &ignored);
                       if (!shard) return;  // its reads say why
                       for (std::size_t i = rec; i <= last; i += stride) {
                         const auto& r = shard->records[i - starts_[s]];
                         *lo = std::min(*lo, r.offset);
                         *hi = std::max(*hi, r.offset + r.size);
                         const auto [first, end] = shard->member_range(i - starts_[s]);
                         for (std::uint32_t k = first; k < end; ++k) {
                           *lo = std::min(*lo, shard->members[k].offset);
                           *hi = std::max(*hi, shard->members[k].offset + shard->members[k].size);
                         }
                       }
                     });
  }

  ShardNames names_;
  std::unique_ptr<ShardBytes> bytes_;
  const std::string manifest_;  // "": every index given at construction
  const std::vector<std::uint64_t> sizes_;  // from a manifest: each shard's bytes
  const std::size_t index_records_ = SIZE_MAX;
  std::size_t plan_walk_ = ShardOptions{}.plan_walk;
  std::vector<std::size_t> starts_;
  std::size_t size_ = 0;
  std::vector<std::string> classes_;
  mutable Mutex mu_;
  mutable std::vector<std::shared_ptr<const ShardRecords>> loaded_ GUARDED_BY(mu_);
  mutable std::vector<std::uint64_t> used_ GUARDED_BY(mu_);                      // tick of the last use, 0: not loaded
  mutable std::set<std::pair<std::uint64_t, std::uint32_t>> lru_ GUARDED_BY(mu_);  // (used, shard), loaded
  mutable std::set<std::uint32_t> loading_ GUARDED_BY(mu_);  // shards whose index a thread is loading now
  mutable CondVar loaded_cv_;                                // a load ended
  mutable std::size_t loaded_records_ GUARDED_BY(mu_) = 0;
  mutable std::uint64_t tick_ GUARDED_BY(mu_) = 0;
};

}  // namespace

std::size_t LocalShardBytes::default_max_open() {
  struct rlimit rl;
  std::uint64_t soft = 1024;
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) soft = static_cast<std::uint64_t>(rl.rlim_cur);
  // NOTE: a quarter: the rest stays the process's (sockets, the training
  // script's files, other loaders).
  return static_cast<std::size_t>(std::clamp<std::uint64_t>(soft / 4, 16, 1024));
}

namespace {

std::vector<std::string> paths_of(const std::vector<LocalShardBytes::File>& files) {
  std::vector<std::string> paths;
  paths.reserve(files.size());
  for (const auto& f : files) paths.push_back(f.path);
  return paths;
}

}  // namespace

LocalShardBytes::LocalShardBytes(std::vector<File> files, std::vector<int> fds, std::size_t max_open, std::string manifest)
    : paths_(paths_of(files)),
      ids_(files.begin(), files.end()),
      max_open_(max_open ? max_open : default_max_open()),
      manifest_(std::move(manifest)),
      slots_(ids_.size()) {
  MutexLock lock(mu_);
  for (std::size_t s = 0; s < fds.size() && s < slots_.size(); ++s) {
    if (fds[s] < 0) continue;
    ++opens_;
    if (open_ >= max_open_) {
      ::close(fds[s]);
      continue;
    }
    slots_[s].fd = fds[s];
    slots_[s].used = ++tick_;
    idle_.emplace(slots_[s].used, static_cast<std::uint32_t>(s));
    ++open_;
  }
}

LocalShardBytes::LocalShardBytes(ShardNames paths, std::size_t max_open, std::string manifest)
    : paths_(std::move(paths)),
      ids_(paths_.size()),
      max_open_(max_open ? max_open : default_max_open()),
      manifest_(std::move(manifest)),
      slots_(ids_.size()) {
  for (std::size_t s = 0; s < ids_.size(); ++s) {
    const ManifestShard* row = paths_.row(s);
    if (!row) throw Error(Code::kInternal, "LocalShardBytes: shard " + std::to_string(s) + " has no manifest row");
    ids_[s].size = row->bytes;
    ids_[s].pinned = false;
  }
}

LocalShardBytes::~LocalShardBytes() {
  MutexLock lock(mu_);
  for (const Slot& slot : slots_) {
    if (slot.fd >= 0) ::close(slot.fd);
  }
}

std::size_t LocalShardBytes::open_now() const {
  MutexLock lock(mu_);
  return open_;
}

std::uint64_t LocalShardBytes::opens() const {
  MutexLock lock(mu_);
  return opens_;
}

void LocalShardBytes::io_stats(Stats* s) const {
  MutexLock lock(mu_);
  s->shard_files_open = open_;
  s->shard_file_opens = opens_;
}

void LocalShardBytes::evict_locked() const {
  // NOTE: only idle descriptors close; with every one in use (more reads in
  // flight than the limit) the pool grows past it by those reads.
  while (open_ >= max_open_ && !idle_.empty()) {
    const std::uint32_t victim = idle_.begin()->second;
    idle_.erase(idle_.begin());
    ::close(slots_[victim].fd);
    slots_[victim].fd = -1;
    --open_;
  }
}

Status LocalShardBytes::acquire(std::uint32_t shard, int* fd) const {
  {
    MutexLock lock(mu_);
    Slot& slot = slots_[shard];
    if (slot.fd >= 0) {
      if (slot.users++ == 0) idle_.erase({slot.used, shard});
      *fd = slot.fd;
      return Status::Ok();
    }
  }
  // NOTE: opened outside the lock (an open on NFS can take milliseconds);
  // two threads opening one shard keep the first one's descriptor.
  const std::string path = paths_[shard];
  int opened = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (opened < 0) {
    const int e = errno;
    if (!manifest_.empty()) {
      return Status(Code::kUnavailable, "manifest '" + manifest_ + "': shard '" + path + "': " + std::strerror(e));
    }
    return Status::IOError("shard '" + path + "': cannot reopen: " + std::strerror(e));
  }
  struct stat st;
  if (::fstat(opened, &st) != 0) {
    const int e = errno;
    ::close(opened);
    return Status::IOError("shard '" + path + "': cannot stat: " + std::strerror(e));
  }
  MutexLock lock(mu_);
  Identity& f = ids_[shard];
  if (!f.pinned) {
    if (static_cast<std::uint64_t>(st.st_size) != f.size) {
      ::close(opened);
      return Status(Code::kUnavailable, "manifest '" + manifest_ + "' is stale: shard '" + path + "' is " +
                                            std::to_string(st.st_size) + " bytes, the manifest says " +
                                            std::to_string(f.size) + "; write it again with `stoker manifest`");
    }
    f.dev = static_cast<std::uint64_t>(st.st_dev);
    f.ino = static_cast<std::uint64_t>(st.st_ino);
    f.mtime_ns = mtime_ns(st);
    f.pinned = true;
  }
  if (static_cast<std::uint64_t>(st.st_dev) != f.dev || static_cast<std::uint64_t>(st.st_ino) != f.ino ||
      static_cast<std::uint64_t>(st.st_size) != f.size || mtime_ns(st) != f.mtime_ns) {
    ::close(opened);
    return Status::IOError("shard '" + path + "' changed since the loader opened it (was " + std::to_string(f.size) +
                           " bytes, inode " + std::to_string(f.ino) + "; now " + std::to_string(st.st_size) +
                           " bytes, inode " + std::to_string(st.st_ino) + "); create the loader again");
  }
  Slot& slot = slots_[shard];
  ++opens_;
  if (slot.fd >= 0) {  // another thread opened it meanwhile
    ::close(opened);
    if (slot.users++ == 0) idle_.erase({slot.used, shard});
  } else {
    evict_locked();
    slot.fd = opened;
    slot.users = 1;
    ++open_;
  }
  *fd = slot.fd;
  return Status::Ok();
}

void LocalShardBytes::release(std::uint32_t shard) const {
  MutexLock lock(mu_);
  Slot& slot = slots_[shard];
  slot.used = ++tick_;
  if (--slot.users == 0) {
    idle_.emplace(slot.used, shard);
    evict_locked();  // the pool grew past its limit while every descriptor was in use
  }
}

void LocalShardBytes::set_index_options(const ShardOptions& opt) {
  labels_ = opt.labels;
  index_dir_ = opt.index_dir;
}

Status LocalShardBytes::load_index(std::uint32_t shard, ShardIndex* out) const {
  int fd = -1;
  if (Status st = acquire(shard, &fd); !st.ok()) return st;
  ShardOptions opt;
  opt.labels = labels_;
  opt.index_dir = index_dir_;
  Status st = load_or_build_index(paths_[shard], fd, opt, out);
  release(shard);
  return st;
}

Status LocalShardBytes::read_at(std::uint32_t shard, std::uint64_t offset, std::uint64_t size,
                                std::vector<std::uint8_t>* out) const {
  out->resize(static_cast<std::size_t>(size));
  int fd = -1;
  if (Status st = acquire(shard, &fd); !st.ok()) return st;
  const long long n = pread_full(fd, out->data(), out->size(), offset);
  const int e = errno;
  release(shard);
  // NOTE: the path is made (from the manifest's row) only for a message.
  if (n < 0) return Status::IOError(paths_[shard] + ": read failed: " + std::strerror(e));
  if (static_cast<std::size_t>(n) < out->size()) {
    return Status::IOError(paths_[shard] + ": shard shrank: offset " +
                           std::to_string(offset + static_cast<std::uint64_t>(n)) + " is past its end");
  }
  return Status::Ok();
}

std::vector<ShardBytes::Use> plan_uses(const RecordOrder& seq, std::size_t from, std::size_t walk,
                                       const std::vector<std::size_t>& starts, std::size_t records,
                                       const RecordSpan& span) {
  std::vector<ShardBytes::Use> by_shard(starts.size(), {0, SIZE_MAX, 0, UINT64_MAX, 0});
  auto shard_of = [&](std::size_t rec) {
    return static_cast<std::uint32_t>(std::upper_bound(starts.begin(), starts.end(), rec) - starts.begin() - 1);
  };
  auto end_of = [&](std::uint32_t s) { return s + 1 < starts.size() ? starts[s + 1] : records; };
  // Shard s used within positions [first, last] by records rec, rec + stride, ... up to `last_rec`.
  auto add = [&](std::uint32_t s, std::size_t first, std::size_t last, std::size_t rec, std::size_t last_rec,
                 std::size_t stride) {
    ShardBytes::Use& u = by_shard[s];
    u.shard = s;
    u.first = std::min(u.first, first);
    u.last = std::max(u.last, last);
    span(s, rec, last_rec, stride, &u.lo, &u.hi);
  };
  const bool summarised = seq.pieces(from, walk, [&](const RecordOrder::Piece& p) {
    if (p.exact) {
      // Records p.rec + i * stride at positions p.first + i, i < p.count: cut where the shard changes.
      for (std::size_t i = 0; i < p.count;) {
        const std::size_t rec = p.rec + i * p.stride;
        const std::uint32_t s = shard_of(rec);
        const std::size_t in_shard = std::min(p.count - 1, i + (end_of(s) - 1 - rec) / p.stride);
        add(s, p.first + i, p.first + in_shard, rec, p.rec + in_shard * p.stride, p.stride);
        i = in_shard + 1;
      }
      return;
    }
    for (std::uint32_t s = shard_of(p.rec); s < starts.size() && starts[s] < p.rec + p.count; ++s) {
      const std::size_t lo = std::max(p.rec, starts[s]), hi = std::min(p.rec + p.count, end_of(s));
      if (lo < hi) add(s, p.first, p.last, lo, hi - 1, 1);
    }
  });
  if (!summarised) {
    for (std::size_t p = from; p < seq.size(); ++p) {
      const std::size_t rec = seq.at(p);
      add(shard_of(rec), p, p, rec, rec, 1);
    }
  }
  std::vector<ShardBytes::Use> out;
  for (const auto& u : by_shard) {
    if (u.first != SIZE_MAX && u.lo <= u.hi) out.push_back(u);  // lo > hi: its index failed, its reads say why
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.first != b.first ? a.first < b.first : a.shard < b.shard; });
  return out;
}

std::unique_ptr<Source> make_manifest_shard_source(ShardNames names, const std::vector<std::uint64_t>& counts,
                                                   std::vector<std::uint64_t> sizes, std::string manifest,
                                                   std::size_t index_records, std::unique_ptr<ShardBytes> bytes,
                                                   std::size_t plan_walk) {
  return std::make_unique<ShardSource>(std::move(names), counts, std::move(sizes), std::move(manifest), index_records,
                                       std::move(bytes), plan_walk);
}

Status ShardBytes::load_index(std::uint32_t shard, ShardIndex* /*out*/) const {
  return Status(Code::kInternal, "shard " + std::to_string(shard) + ": this source's indexes are all loaded at open");
}

std::unique_ptr<Source> make_shard_source(std::vector<std::string> names, std::vector<ShardIndex> indexes,
                                          std::unique_ptr<ShardBytes> bytes, std::size_t plan_walk) {
  return std::make_unique<ShardSource>(std::move(names), std::move(indexes), std::move(bytes), plan_walk);
}

namespace {

std::unique_ptr<Source> open_local_shards(const std::vector<std::string>& paths, const ShardOptions& opt) {
  // NOTE: each shard is opened to be indexed; the first ones' descriptors
  // stay in the pool, the rest are closed at once (a source of 100k shards
  // must not hold 100k descriptors).
  const std::size_t keep = opt.max_open ? opt.max_open : LocalShardBytes::default_max_open();
  std::vector<int> fds;
  auto close_all = [&fds] {
    for (int fd : fds) {
      if (fd >= 0) ::close(fd);
    }
  };
  std::vector<ShardIndex> indexes(paths.size());
  std::vector<LocalShardBytes::File> files(paths.size());
  for (std::size_t s = 0; s < paths.size(); ++s) {
    int fd = ::open(paths[s].c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      int e = errno;
      close_all();
      throw Error(e == ENOENT ? Code::kNotFound : Code::kIOError, "shard '" + paths[s] + "': " + std::strerror(e));
    }
    struct stat st;
    Status status = ::fstat(fd, &st) == 0 ? load_or_build_index(paths[s], fd, opt, &indexes[s])
                                          : Status::IOError(paths[s] + ": cannot stat: " + std::strerror(errno));
    if (!status.ok()) {
      ::close(fd);
      close_all();
      throw Error(status);
    }
    files[s].path = paths[s];
    files[s].dev = static_cast<std::uint64_t>(st.st_dev);
    files[s].ino = static_cast<std::uint64_t>(st.st_ino);
    files[s].size = static_cast<std::uint64_t>(st.st_size);
    files[s].mtime_ns = mtime_ns(st);
    if (s < keep) {
      fds.push_back(fd);
    } else {
      ::close(fd);
    }
  }
  // Owns the descriptors from here.
  auto bytes = std::make_unique<LocalShardBytes>(std::move(files), std::move(fds), opt.max_open);
  return make_shard_source(paths, std::move(indexes), std::move(bytes), opt.plan_walk);
}

// A local data set through its manifest: rows[k] is the manifest's shard
// row of the source's shard k. Nothing is opened here.
std::unique_ptr<Source> open_manifest_shards(const std::string& manifest_path, Manifest manifest,
                                             const std::vector<std::size_t>& rows, const ShardOptions& opt) {
  const auto m = std::make_shared<const Manifest>(std::move(manifest));
  std::vector<std::uint64_t> counts, sizes;
  std::vector<std::uint32_t> rows32;
  counts.reserve(rows.size());
  sizes.reserve(rows.size());
  rows32.reserve(rows.size());
  for (std::size_t r : rows) {
    const ManifestShard& row = m->shards[r];
    counts.push_back(row.records);
    sizes.push_back(row.bytes);
    rows32.push_back(static_cast<std::uint32_t>(r));
  }
  // One table of rows, shared by the bytes (paths) and the source (names).
  const ShardNames names(m, manifest_path, std::move(rows32));
  auto bytes = std::make_unique<LocalShardBytes>(names, opt.max_open, manifest_path);
  bytes->set_index_options(opt);
  return std::make_unique<ShardSource>(names, counts, std::move(sizes), manifest_path, opt.index_records,
                                       std::move(bytes), opt.plan_walk);
}

}  // namespace
}  // namespace detail

std::unique_ptr<Source> open_shards(const std::vector<std::string>& specs, const std::string& labels,
                                    const std::string& index_dir, const RemoteOptions& remote) {
  detail::ShardOptions opt;
  opt.labels = labels;
  opt.index_dir = index_dir;
  if (labels != "cls" && labels.rfind("json:", 0) != 0) {
    throw Error(Code::kInvalidArgument, "labels must be 'cls' or 'json:<field>', got '" + labels + "'");
  }
  if (specs.empty()) throw Error(Code::kInvalidArgument, "no shards given");
  bool remote_specs = false, local_specs = false;
  for (const auto& s : specs) (detail::remote_scheme(s).empty() ? local_specs : remote_specs) = true;
  if (remote_specs && local_specs) {
    throw Error(Code::kInvalidArgument, "shards: local paths and URLs in one source ('" + specs.front() + "', ...); "
                                        "give one kind (a Mix can combine sources)");
  }
  if (remote_specs) return detail::open_remote_shards(specs, opt, remote);
  // A manifest named, or beside the one pattern given: its rows in the pattern's order.
  if (specs.size() == 1 && detail::ends_with(specs[0], detail::kManifestSuffix)) {
    detail::Manifest m;
    if (Status st = detail::read_manifest(specs[0], &m); !st.ok()) throw Error(st);
    std::vector<std::size_t> rows(m.shards.size());
    for (std::size_t r = 0; r < rows.size(); ++r) rows[r] = r;
    return detail::open_manifest_shards(specs[0], std::move(m), rows, opt);
  }
  std::vector<std::string> paths;
  for (const auto& s : specs) {
    auto e = detail::expand_shard_spec(s);
    paths.insert(paths.end(), e.begin(), e.end());
  }
  if (paths.empty()) throw Error(Code::kInvalidArgument, "no shards given");
  if (specs.size() == 1 && specs[0].find_first_of("{*?[") != std::string::npos) {
    const std::string beside = detail::manifest_beside(specs[0]);
    struct stat st;
    if (::stat(beside.c_str(), &st) == 0) {
      detail::Manifest m;
      if (Status s = detail::read_manifest(beside, &m); !s.ok()) throw Error(s);
      std::vector<std::size_t> rows;
      if (Status s = detail::manifest_rows(m, beside, paths, &rows); !s.ok()) throw Error(s);
      return detail::open_manifest_shards(beside, std::move(m), rows, opt);
    }
  }
  return detail::open_local_shards(paths, opt);
}

std::string write_manifest(const std::string& pattern, const std::string& out, const std::string& labels) {
  if (!detail::remote_scheme(pattern).empty()) {
    throw Error(Code::kInvalidArgument, "manifest: '" + pattern + "': local shards only (write it where the shards "
                                        "are made, then upload it beside them)");
  }
  if (labels != "cls" && labels.rfind("json:", 0) != 0) {
    throw Error(Code::kInvalidArgument, "labels must be 'cls' or 'json:<field>', got '" + labels + "'");
  }
  const std::string path = out.empty() ? detail::manifest_beside(pattern) : out;
  detail::ShardOptions opt;
  opt.labels = labels;
  detail::Manifest m;
  m.labels = labels;
  for (const auto& shard : detail::expand_shard_spec(pattern)) {
    const int fd = ::open(shard.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      const int e = errno;
      throw Error(e == ENOENT ? Code::kNotFound : Code::kIOError, "shard '" + shard + "': " + std::strerror(e));
    }
    struct stat st;
    detail::ShardIndex index;
    Status status = ::fstat(fd, &st) == 0 ? detail::load_or_build_index(shard, fd, opt, &index)
                                          : Status::IOError(shard + ": cannot stat: " + std::strerror(errno));
    ::close(fd);
    if (!status.ok()) throw Error(status);
    detail::manifest_add_shard(&m, detail::manifest_shard_name(path, shard), static_cast<std::uint64_t>(st.st_size),
                               index);
  }
  if (Status s = detail::write_file_atomically(path, detail::serialize_manifest(m)); !s.ok()) throw Error(s);
  return path;
}

}  // namespace stoker
