#include "cache/arena.h"

#include <sys/mman.h>

#include <algorithm>
#include <new>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older glibc headers lack it
#endif

namespace stoker::detail {
namespace {

constexpr std::size_t kAlign = 16;
constexpr std::size_t kHuge = std::size_t{2} << 20;
constexpr std::size_t kPage = 4096;
std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

}  // namespace

struct Arena::Chunk {
  std::uint8_t* base = nullptr;
  std::size_t cap = 0;     // mapped bytes
  std::size_t used = 0;    // bumped so far
  std::size_t blocks = 0;  // live ones
  bool sealed = false;     // no longer bumped: unmapped with its last block
};

// Each block starts with this header (kAlign bytes), so free() finds its
// chunk without a search.
struct BlockHeader {
  Arena::Chunk* chunk;
  std::size_t total;  // header and padding included
};
static_assert(sizeof(BlockHeader) == kAlign);

Arena::~Arena() {
  // NOTE: every ArenaBytes holds the arena, so no block is live here: only
  // the current chunk can still be mapped.
  if (current_) unmap(current_);
}

Arena::Chunk* Arena::map_chunk(std::size_t cap) {
  void* p = ::mmap(nullptr, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  // NOTE: huge pages, and every page faulted in now by one call: the
  // block is written right after anyway, and one populate call costs a
  // fraction of the page faults the copy would take one by one (measured:
  // 80 KB copied into fresh memory 204-260 us with 4 KiB faults, 6-127 us
  // with huge pages faulted by the copy, where compaction made the spread;
  // 11-12 us populated ahead). Both best effort: with transparent huge pages
  // off or a kernel before 5.14 the mapping works as before.
  (void)::madvise(p, cap, MADV_HUGEPAGE);
  (void)::madvise(p, cap, MADV_POPULATE_WRITE);
  auto* c = new Chunk;
  c->base = static_cast<std::uint8_t*>(p);
  c->cap = cap;
  return c;
}

void Arena::unmap(Chunk* c) noexcept {
  held_ -= c->used;
  ::munmap(c->base, c->cap);
  delete c;
}

std::uint8_t* Arena::alloc(std::size_t n) {
  const std::size_t total = round_up(n, kAlign) + sizeof(BlockHeader);
  std::lock_guard<std::mutex> lock(mu_);
  Chunk* c;
  if (total > chunk_ / 4) {  // a mapping of its own
    c = map_chunk(round_up(total, kPage));
    c->sealed = true;
  } else {
    if (!current_ || current_->cap - current_->used < total) {
      // NOTE: 2 MiB, then doubling up to chunk_: a small set (or a test's
      // few records) does not populate a whole chunk.
      next_ = next_ ? std::min(next_ * 2, chunk_) : std::min(kHuge, chunk_);
      Chunk* next = map_chunk(next_);
      if (current_) {
        current_->sealed = true;
        if (current_->blocks == 0) unmap(current_);
      }
      current_ = next;
    }
    c = current_;
  }
  auto* h = reinterpret_cast<BlockHeader*>(c->base + c->used);
  h->chunk = c;
  h->total = total;
  c->used += total;
  ++c->blocks;
  held_ += total;
  live_ += total;
  return reinterpret_cast<std::uint8_t*>(h + 1);
}

void Arena::free(std::uint8_t* p) noexcept {
  auto* h = reinterpret_cast<BlockHeader*>(p) - 1;
  std::lock_guard<std::mutex> lock(mu_);
  Chunk* c = h->chunk;
  live_ -= h->total;
  if (--c->blocks == 0) {
    if (c->sealed) {
      unmap(c);
    } else {  // the current one, empty: bumped again from its start
      held_ -= c->used;
      c->used = 0;
    }
  }
}

std::uint64_t Arena::live() const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_;
}

std::uint64_t Arena::holes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_ - live_;
}

ArenaBytes::ArenaBytes(std::shared_ptr<Arena> arena, std::size_t n) : n_(n) {
  (void)arena;  // unused under AddressSanitizer
  if constexpr (kArenaOnHeap) {
    p_ = new std::uint8_t[n ? n : 1];
  } else {
    p_ = arena->alloc(n);
    arena_ = std::move(arena);
  }
}

ArenaBytes::~ArenaBytes() {
  if constexpr (kArenaOnHeap) {
    delete[] p_;
  } else if (p_) {
    arena_->free(p_);
  }
}

}  // namespace stoker::detail
