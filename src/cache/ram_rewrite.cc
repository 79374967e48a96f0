#include "cache/ram_rewrite.h"

#include <time.h>

#include <cstring>

#include "util/thread.h"
#include "util/util.h"

namespace stoker::detail {
namespace {

std::int64_t thread_cpu_ns() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<std::int64_t>(t.tv_sec) * 1'000'000'000LL + t.tv_nsec;
}

// The first epoch's allowance: the rewrites' net cost at most this share of
// a worker's sample time (so that epoch is at most that much slower than
// without the rewrite); the background share's from the second epoch on.
constexpr std::int64_t kFirstEpochPercent = 1;
constexpr std::int64_t kSharePercent = 9;

}  // namespace

RamRewrite::Outcome RamRewrite::rewrite_bytes(const std::uint8_t* data, std::size_t size,
                                              std::span<const std::uint64_t> ends, RewriteScratch* s) {
  const std::size_t part = static_cast<std::size_t>(image_part_);
  const std::uint64_t begin = part == 0 ? 0 : ends[part - 1];
  const std::uint64_t end = ends.empty() ? size : ends[part];
  const std::uint8_t* image = data + begin;
  if (!jpeg_needs_restart_grid(image, end - begin)) return Outcome::kAsIs;
  s->image_before = end - begin;
  // NOTE: the inserter (a fraction of a decode) where it applies; what it
  // refuses (progressive, arithmetic-coded, or bytes it finds damaged: then
  // libjpeg's verdict decides) goes through libjpeg's transcode, with the
  // standard Huffman tables, not optimised ones: half its CPU
  // (decode/jpeg_transcode.h) for a few percent more RAM.
  if (!s->inserter.insert(image, end - begin, &s->jpeg).ok() &&
      !s->transcoder.to_restart_grid(image, end - begin, &s->jpeg, /*optimize=*/false).ok()) {
    return Outcome::kCorrupt;
  }
  const std::size_t tail = size - end;
  s->record.resize(begin + s->jpeg.size() + tail);
  std::memcpy(s->record.data(), data, begin);
  std::memcpy(s->record.data() + begin, s->jpeg.data(), s->jpeg.size());
  std::memcpy(s->record.data() + begin + s->jpeg.size(), data + end, tail);
  s->ends.assign(ends.begin(), ends.end());
  const auto delta = static_cast<std::int64_t>(s->jpeg.size()) - static_cast<std::int64_t>(end - begin);
  for (std::size_t k = part; k < s->ends.size(); ++k) {
    s->ends[k] = static_cast<std::uint64_t>(static_cast<std::int64_t>(s->ends[k]) + delta);
  }
  return Outcome::kRewritten;
}

SampleCache::EntryPtr RamRewrite::rewrite_entry(std::uint32_t rec, const SampleCache::EntryPtr& old,
                                                RewriteScratch* s) {
  const std::int64_t t0 = thread_cpu_ns();
  injection_point(ThreadSite::kRewrite, static_cast<std::int64_t>(rec));
  const Outcome o = rewrite_bytes(old->data, old->size, old->ends, s);
  SampleCache::EntryPtr now = old;
  if (o == Outcome::kCorrupt) {
    // NOTE: bytes libjpeg cannot rewrite cannot be decoded either: off the
    // cache, so the worker that reads the record counts it (once per use,
    // under on_corrupt), as it would without the cache.
    cache_->refuse(rec);
    refused_.fetch_add(1, std::memory_order_relaxed);
  } else {
    // NOTE: over the budget, the original stays (still correct, only slower).
    if (o == Outcome::kRewritten) {
      if (SampleCache::EntryPtr next = cache_->replace(rec, old, s->record.data(), s->record.size(), s->ends)) {
        now = std::move(next);
        rewritten_.fetch_add(1, std::memory_order_relaxed);
        before_.fetch_add(s->image_before, std::memory_order_relaxed);
        after_.fetch_add(s->jpeg.size(), std::memory_order_relaxed);
      }
    }
    cache_->settle(rec, SampleCache::kFinal);
    settled_.fetch_add(1, std::memory_order_relaxed);
  }
  cpu_ns_.fetch_add(static_cast<std::uint64_t>(thread_cpu_ns() - t0), std::memory_order_relaxed);
  return now;
}

bool RamRewrite::running() const { return image_part_ >= 0 && !stopped_.load(std::memory_order_relaxed); }

bool RamRewrite::allowed(const RewriteScratch& s) const {
  if (!running()) return false;
  // NOTE: a record that can be read again is left for later instead
  // (on_miss).
  if (!s.first_epoch || store_on_read_) return true;
  return s.debt_ns * 100 <= s.first_ns * kFirstEpochPercent;
}

// A first-epoch rewrite on the read path costs its time less what it saves
// on the sample that reads it (the mean decode from the original less the
// mean from rewritten bytes, once both are measured).
void RamRewrite::charge(RewriteScratch* s, std::int64_t ns) {
  if (!s->first_epoch) return;
  const std::int64_t g = grid_ns_.load(std::memory_order_relaxed), o = original_ns_.load(std::memory_order_relaxed);
  s->debt_ns += ns - (g > 0 && o > g ? o - g : 0);
}

void RamRewrite::note_decode(bool grid, std::int64_t ns) {
  std::atomic<std::int64_t>& mean = grid ? grid_ns_ : original_ns_;
  const std::int64_t m = mean.load(std::memory_order_relaxed);
  // NOTE: a racy update loses a sample now and then: a running mean, not a count.
  mean.store(m == 0 ? ns : m + (ns - m) / 64, std::memory_order_relaxed);
}

SampleCache::EntryPtr RamRewrite::on_hit(std::uint32_t rec, SampleCache::EntryPtr hit, RewriteScratch* s) noexcept {
  if (hit->grid || stores_final() || cache_->state(rec) != SampleCache::kPending || !allowed(*s) ||
      !cache_->claim(rec)) {
    return hit;
  }
  try {
    const std::int64_t t0 = now_ns();
    SampleCache::EntryPtr now = rewrite_entry(rec, hit, s);
    if (now != hit) on_read_.fetch_add(1, std::memory_order_relaxed);
    charge(s, now_ns() - t0);
    return cache_->state(rec) == SampleCache::kRefused ? hit : now;
  } catch (...) {
    failed(rec);
    return hit;
  }
}

bool RamRewrite::on_miss(std::uint32_t rec, const std::uint8_t* data, std::size_t size,
                         const std::vector<std::uint64_t>* ends, RewriteScratch* s, SampleCache::Insert* stored) noexcept {
  static const std::vector<std::uint64_t> kNone;
  SampleCache::Insert in = SampleCache::Insert::kAlreadyHeld;
  bool mine = false;  // this thread claimed the record
  try {
    if (allowed(*s) && !cache_->contains(rec)) {
      // NOTE: past its first epoch a worker also rewrites a record another
      // thread has claimed and stores it if it is first: a preload thread at
      // idle priority may hold its claim for long on a busy machine, and the
      // second epoch would end with that record still to store. The claimer
      // settles it (settle(): held by then, so final).
      const std::uint8_t st = cache_->state(rec);
      mine = st == SampleCache::kPending && cache_->claim(rec);
      const bool beside = !mine && st == SampleCache::kBusy && s->reader && !s->first_epoch && stores_final();
      if (mine || beside) {
        const std::int64_t t0 = now_ns(), c0 = thread_cpu_ns();
        injection_point(ThreadSite::kRewrite, static_cast<std::int64_t>(rec));
        const Outcome o = rewrite_bytes(data, size, ends ? *ends : kNone, s);
        cpu_ns_.fetch_add(static_cast<std::uint64_t>(thread_cpu_ns() - c0), std::memory_order_relaxed);
        bool rewritten = false;
        if (o == Outcome::kRewritten) {
          // Stored as final (never looked at again); without room the sample
          // still reads the rewritten bytes (the same pixels).
          in = cache_->insert(rec, s->record.data(), s->record.size(), 0, 0, ends ? &s->ends : nullptr, /*grid=*/true);
          if (in == SampleCache::Insert::kStored) {
            rewritten_.fetch_add(1, std::memory_order_relaxed);
            if (s->reader) on_read_.fetch_add(1, std::memory_order_relaxed);
            before_.fetch_add(s->image_before, std::memory_order_relaxed);
            after_.fetch_add(s->jpeg.size(), std::memory_order_relaxed);
          }
          rewritten = true;
        } else if (o == Outcome::kAsIs) {
          in = cache_->insert(rec, data, size, 0, 0, ends);
        } else if (mine) {  // corrupt: its decode says why, counted as without the cache
          cache_->refuse(rec);
          refused_.fetch_add(1, std::memory_order_relaxed);
          in = SampleCache::Insert::kRefused;
        }  // (beside: the claimer refuses it)
        if (o != Outcome::kCorrupt) {
          if (mine) {
            settle(rec, in);
          } else if (in == SampleCache::Insert::kStored) {
            settled_.fetch_add(1, std::memory_order_relaxed);
          }
        }
        charge(s, now_ns() - t0);
        if (stored) *stored = in;
        return rewritten;
      }
    }
  } catch (...) {
    failed(rec, mine);
  }
  // NOTE: only final forms stored (a source read again cheaply, or a shared
  // segment): the record is stored by whoever rewrites it (above: this
  // thread, another one or another process now, or later: the preload, the
  // next epoch's read), or it is settled; while the rewrite runs, nothing
  // here. A first-epoch miss left so costs no copy into fresh memory.
  if (!stores_final() || !running()) {
    try {
      in = cache_->insert(rec, data, size, 0, 0, ends);
    } catch (...) {  // no memory for it: the record stays uncached
      in = SampleCache::Insert::kNoRoom;
    }
  }
  if (stored) *stored = in;
  return false;
}

// A record claimed on the read path, offered to the cache: final, unless
// another thread stored its original first (then a later pass takes it).
// Where only final forms are stored, what another thread stored is final.
void RamRewrite::settle(std::uint32_t rec, SampleCache::Insert in) {
  if (in == SampleCache::Insert::kAlreadyHeld) {
    cache_->settle(rec, stores_final() ? SampleCache::kFinal : SampleCache::kPending);
    return;
  }
  cache_->settle(rec, SampleCache::kFinal);
  settled_.fetch_add(1, std::memory_order_relaxed);
}

void RamRewrite::after_sample(RewriteScratch* s, std::int64_t sample_ns) noexcept {
  if (s->first_epoch) {
    s->first_ns += sample_ns;
    return;
  }
  // NOTE: the share's base is the sample time from the second epoch on
  // (the first one's is not counted, so the next epoch does not catch up on it).
  s->sample_ns += sample_ns;
  if (s->share_ns * 100 < s->sample_ns * kSharePercent) {
    const std::int64_t t0 = now_ns();
    rewrite_next(s, 64);
    s->share_ns += now_ns() - t0;
  }
}

bool RamRewrite::rewrite_next(RewriteScratch* s, std::size_t scan) noexcept {
  if (!running() || stores_final()) return false;  // final: stored rewritten
  std::size_t claimed = SIZE_MAX;
  try {
    for (std::size_t k = 0; k < scan; ++k) {
      std::size_t pos = cursor_.load(std::memory_order_relaxed), i = 0;
      do {
        if (!cache_->inserted(pos, &i)) return false;
      } while (!cursor_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed));
      if (cache_->state(i) != SampleCache::kPending) continue;
      const SampleCache::EntryPtr old = cache_->peek(i);
      if (!old || !cache_->claim(i)) continue;
      claimed = i;
      rewrite_entry(static_cast<std::uint32_t>(i), old, s);
      return true;
    }
    return false;
  } catch (...) {
    failed(claimed == SIZE_MAX ? UINT32_MAX : static_cast<std::uint32_t>(claimed));
    return false;
  }
}

// NOTE: the rewrite only makes reads faster, so an exception in it (out of
// memory, a bug) changes no sample: the record keeps the entry it had, the
// rewrite stops for this loader, and stats() says why (cache_rewrite
// "error: ...", thread_errors["rewrite"]).
void RamRewrite::failed(std::uint32_t rec, bool claimed) noexcept {
  Status st = exception_status(rec == UINT32_MAX ? "rewrite" : "rewrite of a cached record");
  if (claimed && rec != UINT32_MAX && cache_->state(rec) == SampleCache::kBusy) {
    cache_->settle(rec, SampleCache::kFinal);  // its entry as it was: correct, only slower
  }
  stopped_.store(true, std::memory_order_relaxed);
  try {
    MutexLock lock(mu_);
    if (error_.empty()) error_ = st.message();
  } catch (...) {
  }
  errors_.fetch_add(1, std::memory_order_release);  // after the message: add_stats() reads them in turn
}

void RamRewrite::add_stats(Stats* s, bool all_in) const {
  s->cache_rewritten = rewritten_.load(std::memory_order_relaxed);
  s->cache_rewrite_on_read = on_read_.load(std::memory_order_relaxed);
  s->cache_rewrite_settled = settled_.load(std::memory_order_relaxed);
  s->cache_rewrite_bytes_before = before_.load(std::memory_order_relaxed);
  s->cache_rewrite_bytes_after = after_.load(std::memory_order_relaxed);
  s->cache_rewrite_cpu_s = static_cast<double>(cpu_ns_.load(std::memory_order_relaxed)) * 1e-9;
  // Done once every cached record is settled and no more are coming. NOTE:
  // where only final forms are stored (a source read again cheaply, a cache
  // shared by the node's loaders) every entry was stored in its final form.
  const bool settled = stores_final() || s->cache_rewrite_settled >= cache_->records();
  s->cache_rewrite = all_in && settled ? "done" : "rewriting";
  if (const std::uint64_t n = errors_.load(std::memory_order_acquire)) {
    s->thread_errors["rewrite"] += n;
    MutexLock lock(mu_);
    s->cache_rewrite = "error: " + error_;
  }
}

}  // namespace stoker::detail
