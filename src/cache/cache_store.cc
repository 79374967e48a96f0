#include "cache/cache_store.h"

#include <cstdio>
#include <cstring>
#include <utility>

namespace stoker::detail {

struct ProcessStore::Owned {
  ArenaBytes bytes;
  std::vector<std::uint64_t> ends;
  CacheEntry view;
  std::uint64_t cost = 0;
};

ProcessStore::ProcessStore(std::size_t records, std::size_t chunk)
    : arena_(std::make_shared<Arena>(chunk)), replacements_(std::make_shared<Arena>(chunk)), entries_(records) {}

std::shared_ptr<const ProcessStore::Owned> ProcessStore::make(const std::shared_ptr<Arena>& arena,
                                                              const std::uint8_t* data, std::size_t n,
                                                              const EntryMeta& m) const {
  auto o = std::make_shared<Owned>();
  o->bytes = ArenaBytes(arena, n);
  if (n) std::memcpy(o->bytes.data(), data, n);
  if (m.ends) o->ends = *m.ends;
  o->view = {o->bytes.data(), n, m.width, m.height, {o->ends.data(), o->ends.size()}, m.grid};
  o->cost = cost(n, o->ends.size());
  return o;
}

EntryPtr ProcessStore::ptr(const std::shared_ptr<const Owned>& o) { return o ? EntryPtr(o, o->view) : EntryPtr(); }

EntryPtr ProcessStore::find(std::size_t i) const {
  std::shared_ptr<const Owned> o;
  {
    MutexLock lock(stripe(i));
    o = entries_[i];
  }
  return ptr(o);
}

bool ProcessStore::contains(std::size_t i) const {
  MutexLock lock(stripe(i));
  return entries_[i] != nullptr;
}

CacheStore::Stored ProcessStore::store(std::size_t i, const std::uint8_t* data, std::size_t n, const EntryMeta& m) {
  auto o = make(arena_, data, n, m);
  {
    MutexLock lock(stripe(i));
    if (entries_[i]) return Stored::kHeld;  // another thread stored it first
    entries_[i] = o;
  }
  count_.fetch_add(1, std::memory_order_relaxed);
  live_.fetch_add(o->cost, std::memory_order_relaxed);
  return Stored::kStored;
}

std::uint64_t ProcessStore::refuse(std::size_t i) {
  std::shared_ptr<const Owned> o;
  {
    MutexLock lock(stripe(i));
    o = std::exchange(entries_[i], nullptr);
  }
  if (!o) return 0;
  count_.fetch_sub(1, std::memory_order_relaxed);
  live_.fetch_sub(o->cost, std::memory_order_relaxed);
  return o->cost;
}

bool ProcessStore::replace(std::size_t i, const EntryPtr& old, const std::uint8_t* data, std::size_t n,
                           const EntryMeta& m, EntryPtr* now) {
  auto o = make(replacements_, data, n, m);
  std::shared_ptr<const Owned> gone;  // freed outside the lock
  {
    MutexLock lock(stripe(i));
    if (entries_[i].get() != old.owner()) return false;
    gone = std::exchange(entries_[i], o);
  }
  live_.fetch_add(o->cost, std::memory_order_relaxed);
  live_.fetch_sub(gone->cost, std::memory_order_relaxed);
  *now = ptr(o);
  return true;
}

EntryPtr SegmentStore::find(std::size_t i) const {
  SharedSegment::Block b;
  if (!seg_->find(static_cast<std::uint32_t>(i), &b)) return {};
  return EntryPtr(seg_, {b.data, b.size, b.width, b.height, b.ends, b.grid});
}

bool SegmentStore::contains(std::size_t i) const {
  SharedSegment::Block b;
  return seg_->find(static_cast<std::uint32_t>(i), &b);
}

CacheStore::Stored SegmentStore::store(std::size_t i, const std::uint8_t* data, std::size_t n, const EntryMeta& m) {
  switch (seg_->store(static_cast<std::uint32_t>(i), data, n, {m.width, m.height, m.grid, m.ends})) {
    case SharedSegment::Store::kStored:
      return Stored::kStored;
    case SharedSegment::Store::kHeld:
      return Stored::kHeld;
    case SharedSegment::Store::kNoRoom:
      if (!said_full_.exchange(true, std::memory_order_relaxed)) {
        std::fprintf(stderr, "stoker: shared cache %s is full (%s): records not in it are read as usual\n",
                     seg_->path().c_str(), seg_->full().c_str());
      }
      return Stored::kNoRoom;
    case SharedSegment::Store::kRefused:
      break;
  }
  return Stored::kRefused;
}

}  // namespace stoker::detail
