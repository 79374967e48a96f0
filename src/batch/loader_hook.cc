// Loader::Impl's barriers around the caller's stages (LoaderOptions::hook:
// Python transforms, target_transform, collate): an exception escaping one
// is its sample's or its batch's error.
#include "batch/loader_impl.h"

namespace stoker {

using detail::now_ns;

// The hook's batch stage; an exception escaping it is the batch's error.
Status Loader::Impl::hook_batch(std::uint64_t gen, std::uint64_t epoch, std::size_t b) noexcept {
  try {
    return opt_.hook->batch(gen, epoch, b, batch_len(b));
  } catch (const std::exception& ex) {
    return Status(Code::kInternal, std::string("batch stage: ") + ex.what());
  } catch (...) {
    return Status(Code::kInternal, "batch stage: unknown exception");
  }
}

// The hook's sample stage for the sample `ws` holds; the same barrier.
Status Loader::Impl::hook_sample(std::uint64_t gen, std::uint64_t epoch, std::size_t t, std::uint32_t rec,
                                 detail::Scratch* ws) noexcept {
  const std::int64_t h0 = now_ns();
  Status st;
  try {
    HookSample hs;
    maker_->hook_sample(rec, *ws, &hs);
    st = opt_.hook->sample(gen, epoch, t / opt_.batch_size, t % opt_.batch_size, hs);
  } catch (const std::exception& ex) {
    st = Status(Code::kInternal, std::string("sample stage: ") + ex.what());
  } catch (...) {
    st = Status(Code::kInternal, "sample stage: unknown exception");
  }
  if (ws->counters) ws->counters->add_python(now_ns() - h0);
  return st;
}

}  // namespace stoker
