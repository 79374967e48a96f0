// Loader::Impl's resume: the epoch to run next, state_dict() and
// load_state_dict() (whether a state applies is batch/resume.h's).
#include "batch/loader_impl.h"
#include "batch/resume.h"

namespace stoker {

using detail::MutexLock;

// NOTE: set_epoch(e) for the epoch a restored state is in keeps its
// position: the usual loop calls load_state_dict() once, then set_epoch()
// at the top of every epoch, and must resume mid-epoch. Another epoch
// drops it.
void Loader::Impl::set_epoch(std::uint64_t e) {
  MutexLock lock(mu_);
  if (e != next_epoch_) {
    resume_batches_ = 0;
    resume_earlier_.clear();
  }
  next_epoch_ = e;
}

Loader::State Loader::Impl::state() const {
  MutexLock lock(mu_);
  Loader::State st;
  st.seed = order_.seed;
  const bool in_epoch = running_ && deliver_ < epoch_batches_;
  st.epoch = in_epoch ? run_epoch_ : next_epoch_;
  st.batches_done = in_epoch ? deliver_ : resume_batches_;
  for (const auto& g : in_epoch ? run_earlier_ : resume_earlier_) {
    st.earlier.push_back({g.world_size, g.batch_size, g.batches_done});
  }
  st.dataset_size = order_.dataset_size;
  st.batch_size = order_.batch_size;
  st.shuffle = order_.shuffle;
  st.drop_last = order_.drop_last;
  st.world_size = order_.world_size;
  st.shuffle_window = order_.shuffle_window;
  if (mix_) {
    for (const auto& p : mix_->parts()) st.mixture.push_back({p.name, p.source->size(), p.count});
  }
  return st;
}

void Loader::Impl::restore(const Loader::State& st) {
  detail::check_restorable(st, state());
  std::vector<detail::Segment> earlier = detail::saved_segments(st, order_);  // O(dataset x parts)
  // NOTE: on the saved topology the saved part goes on where it stopped;
  // on another, it is one more earlier part and the rest is split anew.
  const bool same = st.world_size == order_.world_size && st.batch_size == order_.batch_size;
  if (same && st.batches_done > 0) earlier.pop_back();
  // Stop the epoch in flight (if any) before changing what defines the order.
  {
    MutexLock lock(mu_);
    halt_locked(lock);
    opt_.seed = st.seed;  // kept in step with order_ for options()
    order_.seed = st.seed;
    next_epoch_ = st.epoch;
    resume_batches_ = same ? static_cast<std::size_t>(st.batches_done) : 0;
    resume_earlier_ = std::move(earlier);
  }
}

std::uint64_t Loader::Impl::epoch() const {
  MutexLock lock(mu_);
  return next_epoch_;
}

}  // namespace stoker
