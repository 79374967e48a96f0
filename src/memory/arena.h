// Memory for the caches' entries: large anonymous mappings backed by
// transparent huge pages, handed out by bumping a pointer, a mapping given
// back when its last block is freed.
//
// Why not malloc: a RAM cache touches every byte of the set once, and on a
// virtual machine each 4 KiB page fault costs microseconds (measured on the
// development VM: 200-300 us to copy an 80 KB JPEG into fresh malloc'd
// memory, 11-12 us into a huge-page mapping populated ahead, arena.cc;
// populated outside the lock, ahead of the bump pointer).
// Those faults made the first epoch of cache="ram" 0.8x as fast as
// cache="mmap"'s, which copies nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>

namespace stoker::detail {

// Under AddressSanitizer ArenaBytes come from the heap (so overflows are
// caught) and the Arena's counters stay at zero.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kArenaOnHeap = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kArenaOnHeap = true;
#else
inline constexpr bool kArenaOnHeap = false;
#endif
#else
inline constexpr bool kArenaOnHeap = false;
#endif

class Arena {
 public:
  // chunk: the largest mapping (they start at 2 MiB and double; blocks
  // over a quarter of it get one of their own).
  explicit Arena(std::size_t chunk = std::size_t{32} << 20) : chunk_(chunk) {}
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  ~Arena();

  // n bytes, 16-byte aligned. Throws std::bad_alloc when the system has no
  // address space left.
  std::uint8_t* alloc(std::size_t n);
  // A block from alloc(), once.
  void free(std::uint8_t* p) noexcept;

  // Bytes in live blocks, and bytes the mappings still hold for freed
  // blocks (a mapping is returned only when all its blocks are freed).
  std::uint64_t live() const;
  std::uint64_t holes() const;

  struct Chunk;  // a mapping (arena.cc)

 private:
  Chunk* map_chunk(std::size_t cap);
  void unmap(Chunk* c) noexcept;
  // Unmaps a sealed chunk with no live block and no populate running (mu_ held).
  void maybe_unmap(Chunk* c) noexcept;

  const std::size_t chunk_;
  mutable std::mutex mu_;
  Chunk* current_ = nullptr;  // the one bumped
  std::size_t next_ = 0;      // the size of the last chunk mapped
  std::uint64_t live_ = 0, held_ = 0;  // held_: bytes handed out of mappings still mapped
};

// A cache entry's bytes: a block of an Arena (kept alive by the bytes that
// use it), or of the heap under AddressSanitizer (so overflows are caught),
// or a view of memory `keep` holds (a shared segment's block: never freed
// here).
class ArenaBytes {
 public:
  ArenaBytes() = default;
  ArenaBytes(std::shared_ptr<Arena> arena, std::size_t n);
  ArenaBytes(std::shared_ptr<const void> keep, const std::uint8_t* p, std::size_t n)
      : keep_(std::move(keep)), p_(const_cast<std::uint8_t*>(p)), n_(n) {}
  ArenaBytes(const ArenaBytes&) = delete;
  ArenaBytes& operator=(const ArenaBytes&) = delete;
  ArenaBytes(ArenaBytes&& o) noexcept { swap(o); }
  ArenaBytes& operator=(ArenaBytes&& o) noexcept {
    ArenaBytes(std::move(o)).swap(*this);
    return *this;
  }
  ~ArenaBytes();

  std::uint8_t* data() { return p_; }
  const std::uint8_t* data() const { return p_; }
  std::size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  void swap(ArenaBytes& o) noexcept {
    std::swap(keep_, o.keep_);
    std::swap(arena_, o.arena_);
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
  }

 private:
  std::shared_ptr<const void> keep_;  // a view's owner (then arena_ is null)
  std::shared_ptr<Arena> arena_;
  std::uint8_t* p_ = nullptr;
  std::size_t n_ = 0;
};

}  // namespace stoker::detail
