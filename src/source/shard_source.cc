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
#include <sstream>

#include "source/file_reader.h"
#include "source/shard_index.h"
#include "source/remote/transport.h"
#include "source/shard_bytes.h"
#include "source/shard_source.h"
#include "source/tar.h"
#include "stoker/source.h"
#include "stoker/stats.h"
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
  return !remote_scheme(spec).empty() || ends_with(spec, ".tar") || spec.find('{') != std::string::npos || spec.find_first_of("*?[") != std::string::npos;
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

class ShardSource final : public Source {
 public:
  ShardSource(std::vector<std::string> names, std::vector<ShardIndex> indexes, std::unique_ptr<ShardBytes> bytes)
      : names_(std::move(names)), bytes_(std::move(bytes)) {
    for (std::size_t s = 0; s < indexes.size(); ++s) {
      starts_.push_back(records_.size());
      std::string name = names_[s];
      if (remote_scheme(name).empty()) name = std::filesystem::path(name).filename().string();
      for (auto& r : indexes[s].records) {
        const std::uint32_t first = static_cast<std::uint32_t>(members_.size());
        if (members_.size() + r.members.size() > UINT32_MAX) {
          throw Error(Code::kResourceExhausted, "shards hold more than 2^32 members");
        }
        for (const auto& m : r.members) members_.push_back({m.offset, m.size, intern(m.suffix)});
        records_.push_back({static_cast<std::uint32_t>(s), r.offset, r.size, r.label, std::move(r.error),
                            name + ":" + r.key, first, static_cast<std::uint32_t>(r.members.size())});
      }
    }
    if (records_.empty()) {
      throw Error(Code::kNotFound, "shards (" + std::to_string(names_.size()) + " files) hold no samples");
    }
  }

  std::size_t size() const override { return records_.size(); }
  const std::string& key(std::size_t i) const override { return records_[i].key; }
  std::int64_t label(std::size_t i) const override { return records_[i].label; }
  Status read(std::size_t i, std::vector<std::uint8_t>* out) const override {
    const Record& r = records_[i];
    if (!r.error.empty()) return Status::Corrupt(r.error);
    return read_at(r.shard, r.offset, r.size, out);
  }
  bool member_extent(std::size_t i, const std::string& member, Extent* out) const override {
    const Record& r = records_[i];
    std::string path = bytes_->local_path(r.shard);
    if (path.empty()) return false;
    if (member.empty()) {
      if (!r.error.empty()) return false;  // read() says why
      *out = {std::move(path), r.offset, r.size};
      return true;
    }
    const Member* m = find_member(r, member);
    if (!m) return false;
    *out = {std::move(path), m->offset, m->size};
    return true;
  }
  Status read_member(std::size_t i, const std::string& member, std::vector<std::uint8_t>* out) const override {
    const Record& r = records_[i];
    // The member named exactly ("seg.png"), else the one "<member>.<ext>"
    // ("seg" for "seg.png", as a schema field names it without its format).
    const Member* found = nullptr;
    int prefixed = 0;
    for (std::uint32_t k = r.first_member; k < r.first_member + r.n_members; ++k) {
      const std::string& suffix = suffixes_[members_[k].suffix];
      if (suffix == member) return read_at(r.shard, members_[k].offset, members_[k].size, out);
      if (suffix.size() > member.size() && suffix.compare(0, member.size(), member) == 0 &&
          suffix[member.size()] == '.' && one_extension(suffix, member.size() + 1)) {
        found = &members_[k];
        ++prefixed;
      }
    }
    if (prefixed == 1) return read_at(r.shard, found->offset, found->size, out);
    std::string have;
    for (const std::string& m : members(i)) have += (have.empty() ? "." : ", .") + m;
    if (prefixed > 1) return Status::NotFound("member '" + member + "' is ambiguous (members: " + have + ")");
    return Status::NotFound("no member '" + member + "' (members: " + have + ")");
  }
  std::vector<std::string> members(std::size_t i) const override {
    const Record& r = records_[i];
    std::vector<std::string> out;
    for (std::uint32_t k = r.first_member; k < r.first_member + r.n_members; ++k) out.push_back(suffixes_[members_[k].suffix]);
    return out;
  }
  const std::vector<std::string>& classes() const override { return classes_; }
  std::vector<std::size_t> shard_starts() const override { return starts_; }
  std::string describe() const override {
    return std::to_string(names_.size()) + " tar shard" + (names_.size() == 1 ? "" : "s") + " ('" + names_.front() +
           "'" + (names_.size() > 1 ? ", ..." : "") + "; " + std::to_string(records_.size()) + " records)";
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
  struct Record {
    std::uint32_t shard;
    std::uint64_t offset;
    std::uint64_t size;
    std::int64_t label;
    std::string error;
    std::string key;
    std::uint32_t first_member, n_members;  // its members: members_[first, first + n)
  };
  // A member of a sample; suffixes are interned (a data set has a few).
  struct Member {
    std::uint64_t offset;
    std::uint64_t size;
    std::uint32_t suffix;  // index into suffixes_
  };
  // Per shard: its first and last position from `from` on, and the byte
  // span of the records used there (a shard's records are contiguous); by first use.
  // NOTE: walks the order's view position by position (no list of the
  // epoch's records); what it keeps is per shard.
  std::vector<ShardBytes::Use> uses(const RecordOrder& seq, std::size_t from) const {
    std::vector<ShardBytes::Use> by_shard(names_.size(), {0, SIZE_MAX, 0, UINT64_MAX, 0});
    for (std::size_t p = from; p < seq.size(); ++p) {
      const Record& r = records_[seq.at(p)];
      ShardBytes::Use& u = by_shard[r.shard];
      u.shard = r.shard;
      if (u.first == SIZE_MAX) u.first = p;
      u.last = p;
      std::uint64_t lo = r.offset, hi = r.offset + r.size;
      for (std::uint32_t k = r.first_member; k < r.first_member + r.n_members; ++k) {
        lo = std::min(lo, members_[k].offset);
        hi = std::max(hi, members_[k].offset + members_[k].size);
      }
      u.lo = std::min(u.lo, lo);
      u.hi = std::max(u.hi, hi);
    }
    std::vector<ShardBytes::Use> out;
    for (const auto& u : by_shard) {
      if (u.first != SIZE_MAX) out.push_back(u);
    }
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    return out;
  }
  std::uint32_t intern(const std::string& suffix) {
    auto it = std::find(suffixes_.begin(), suffixes_.end(), suffix);
    if (it != suffixes_.end()) return static_cast<std::uint32_t>(it - suffixes_.begin());
    suffixes_.push_back(suffix);
    return static_cast<std::uint32_t>(suffixes_.size() - 1);
  }
  // read_member's rule (the member named exactly, else the one "<member>.<ext>"); null when none or ambiguous.
  const Member* find_member(const Record& r, const std::string& member) const {
    const Member* found = nullptr;
    int prefixed = 0;
    for (std::uint32_t k = r.first_member; k < r.first_member + r.n_members; ++k) {
      const std::string& suffix = suffixes_[members_[k].suffix];
      if (suffix == member) return &members_[k];
      if (suffix.size() > member.size() && suffix.compare(0, member.size(), member) == 0 &&
          suffix[member.size()] == '.' && one_extension(suffix, member.size() + 1)) {
        found = &members_[k];
        ++prefixed;
      }
    }
    return prefixed == 1 ? found : nullptr;
  }
  Status read_at(std::uint32_t shard, std::uint64_t offset, std::uint64_t size, std::vector<std::uint8_t>* out) const {
    return bytes_->read_at(shard, offset, size, out);
  }

  std::vector<std::string> names_;
  std::unique_ptr<ShardBytes> bytes_;
  std::vector<Record> records_;
  std::vector<Member> members_;
  std::vector<std::string> suffixes_;
  std::vector<std::string> classes_;
  std::vector<std::size_t> starts_;
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

LocalShardBytes::LocalShardBytes(std::vector<File> files, std::vector<int> fds, std::size_t max_open)
    : files_(std::move(files)), max_open_(max_open ? max_open : default_max_open()), slots_(files_.size()) {
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
  const File& f = files_[shard];
  int opened = ::open(f.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (opened < 0) return Status::IOError("shard '" + f.path + "': cannot reopen: " + std::strerror(errno));
  struct stat st;
  if (::fstat(opened, &st) != 0) {
    const int e = errno;
    ::close(opened);
    return Status::IOError("shard '" + f.path + "': cannot stat: " + std::strerror(e));
  }
  if (static_cast<std::uint64_t>(st.st_dev) != f.dev || static_cast<std::uint64_t>(st.st_ino) != f.ino ||
      static_cast<std::uint64_t>(st.st_size) != f.size || mtime_ns(st) != f.mtime_ns) {
    ::close(opened);
    return Status::IOError("shard '" + f.path + "' changed since the loader opened it (was " + std::to_string(f.size) +
                           " bytes, inode " + std::to_string(f.ino) + "; now " + std::to_string(st.st_size) +
                           " bytes, inode " + std::to_string(st.st_ino) + "); create the loader again");
  }
  MutexLock lock(mu_);
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

Status LocalShardBytes::read_at(std::uint32_t shard, std::uint64_t offset, std::uint64_t size,
                                std::vector<std::uint8_t>* out) const {
  out->resize(static_cast<std::size_t>(size));
  int fd = -1;
  if (Status st = acquire(shard, &fd); !st.ok()) return st;
  const long long n = pread_full(fd, out->data(), out->size(), offset);
  const int e = errno;
  release(shard);
  const std::string& path = files_[shard].path;
  if (n < 0) return Status::IOError(path + ": read failed: " + std::strerror(e));
  if (static_cast<std::size_t>(n) < out->size()) {
    return Status::IOError(path + ": shard shrank: offset " + std::to_string(offset + static_cast<std::uint64_t>(n)) +
                           " is past its end");
  }
  return Status::Ok();
}

std::unique_ptr<Source> make_shard_source(std::vector<std::string> names, std::vector<ShardIndex> indexes,
                                          std::unique_ptr<ShardBytes> bytes) {
  return std::make_unique<ShardSource>(std::move(names), std::move(indexes), std::move(bytes));
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
    files[s] = {paths[s], static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino),
                static_cast<std::uint64_t>(st.st_size), mtime_ns(st)};
    if (s < keep) {
      fds.push_back(fd);
    } else {
      ::close(fd);
    }
  }
  // Owns the descriptors from here.
  auto bytes = std::make_unique<LocalShardBytes>(std::move(files), std::move(fds), opt.max_open);
  return make_shard_source(paths, std::move(indexes), std::move(bytes));
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
  std::vector<std::string> paths;
  for (const auto& s : specs) {
    auto e = detail::expand_shard_spec(s);
    paths.insert(paths.end(), e.begin(), e.end());
  }
  if (paths.empty()) throw Error(Code::kInvalidArgument, "no shards given");
  return detail::open_local_shards(paths, opt);
}

}  // namespace stoker
