#include "memory/arena.h"

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
// Populated ahead of the bump pointer: this far, a window at a time.
constexpr std::size_t kAhead = std::size_t{4} << 20;
constexpr std::size_t kWindow = kHuge;
std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

}  // namespace

struct Arena::Chunk {
  std::uint8_t* base = nullptr;
  std::size_t cap = 0;     // mapped bytes
  std::size_t used = 0;    // bumped so far
  std::size_t blocks = 0;  // live ones
  std::size_t populated = 0;  // bytes from base populated, or claimed for it
  int populating = 0;         // windows being populated (unmapped only after)
  bool sealed = false;        // no longer bumped: unmapped with its last block
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
  // NOTE: huge pages (best effort: with transparent huge pages off the
  // mapping works as before); populated ahead of the bump pointer by
  // alloc(), outside the lock.
  (void)::madvise(p, cap, MADV_HUGEPAGE);
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
  Chunk* c;
  std::uint8_t* block;
  std::size_t from = 0, to = 0;  // a window this call populates
  {
    std::lock_guard<std::mutex> lock(mu_);
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
          maybe_unmap(current_);
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
    block = reinterpret_cast<std::uint8_t*>(h + 1);
    // NOTE: every page faulted in by one populate call costs a fraction of
    // the faults the copies would take one by one (80 KB copied into fresh
    // memory: 204-260 us with 4 KiB faults, 6-127 us with huge pages
    // faulted by the copy, 11-12 us populated ahead). The call runs outside
    // the lock: populating fresh memory on a VM goes at about 0.5 GB/s, and
    // under the lock every other thread's alloc() and free() waited for it
    // (a 32 MiB chunk: ~60 ms of both workers). One window at a time per
    // chunk; a block past the populated part faults its own pages.
    const std::size_t want = std::min(c->cap, c->used + kAhead);
    if (c->populating == 0 && c->populated < want) {
      from = c->populated;
      to = std::min(c->cap, round_up(std::max(want, from + kWindow), kWindow));
      c->populated = to;
      ++c->populating;
    }
  }
  if (to > from) {
    (void)::madvise(c->base + from, to - from, MADV_POPULATE_WRITE);
    std::lock_guard<std::mutex> lock(mu_);
    --c->populating;
    maybe_unmap(c);
  }
  return block;
}

void Arena::free(std::uint8_t* p) noexcept {
  auto* h = reinterpret_cast<BlockHeader*>(p) - 1;
  std::lock_guard<std::mutex> lock(mu_);
  Chunk* c = h->chunk;
  live_ -= h->total;
  if (--c->blocks == 0 && !c->sealed) {  // the current one, empty: bumped again from its start
    held_ -= c->used;
    c->used = 0;
  }
  maybe_unmap(c);
}

void Arena::maybe_unmap(Chunk* c) noexcept {
  if (c->sealed && c->blocks == 0 && c->populating == 0) unmap(c);
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
  if (keep_) return;  // a view
  if constexpr (kArenaOnHeap) {
    delete[] p_;
  } else if (p_) {
    arena_->free(p_);
  }
}

}  // namespace stoker::detail
