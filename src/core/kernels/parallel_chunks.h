// parallel_for for the engine's own CPU kernels: a fork-join whose join waits
// for the work, not for the threads.
//
// Why not at::parallel_for (OpenMP in the LibTorch builds used here) or
// another library: OpenMP ends every parallel region with a team barrier and
// hands each thread a fixed share, so the caller waits until every thread of
// the team has been scheduled, done its share and arrived. On a machine whose
// cores other processes share (the 2-core build VMs), one descheduled worker
// stalls every region while the caller spins: batch-1 decode of the default
// model ran at 0.5 tokens/s at load average 5 (54 with
// OMP_WAIT_POLICY=passive, 95 on the quiet machine), and the Llama-3-8B-shaped
// model spent about 40 % of its samples in OpenMP's barrier spin. oneTBB's
// work-stealing join would not wait for idle threads, but it is not a
// dependency of this project and would be a second pool beside LibTorch's
// anyway; this is about 300 lines. Here the caller claims chunks exactly like
// the workers do (each thread from its own contiguous range first, then from
// the others'), so a worker that is not running takes no chunk and the caller
// simply does more of them; it returns as soon as every chunk is done.
// Imbalance between threads evens out the same way.
//
// Which thread runs which chunk varies from call to call: a kernel must
// compute each output element inside one chunk, in an order that does not
// depend on the chunk's bounds (every kernel here does, which keeps their
// batch invariance).
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

namespace nnsight::kernels {

// Memory the next job will read. While the caller runs the serial code
// between two jobs (a decode step's norms, rotary, residual adds), the
// pool's first worker, once no chunk of the current job is left, asks for
// it with prefetches: the range its own share will start with first, then
// the caller's. A later job without a hint leaves it in place; a new hint
// replaces it. Only a hint: a prefetch of a stale or wrong address does not
// fault, and nothing computed depends on it.
struct WarmHint {
  const void* data[2] = {nullptr, nullptr};  // [0] where the caller's share starts, [1] where the worker's does
  int64_t bytes[2] = {0, 0};
  bool empty() const { return bytes[0] <= 0 && bytes[1] <= 0; }
};

namespace detail {
using ChunkFn = void (*)(void* ctx, int64_t begin, int64_t end);
// warm: the hint for after this job (see WarmHint; an empty one leaves the last in place).
void parallel_chunks(int64_t begin, int64_t end, int64_t grain, ChunkFn fn, void* ctx, const WarmHint& warm);
}  // namespace detail

// Calls f(b, e) on disjoint ranges covering [begin, end), on up to
// min(at::get_num_threads(), ceil((end - begin) / grain)) threads (the
// calling one included), as at::parallel_for would, each thread's share cut
// into a few chunks; with end - begin <= grain, one thread, or when called
// from inside a parallel region (this pool's or OpenMP's), f(begin, end)
// runs on the calling thread. While one caller uses
// the pool, another caller's work runs on its own thread. f must not throw.
// parallel_for (below), and then the pool's idle worker warms `next` (WarmHint).
template <class F>
void parallel_for_then_warm(int64_t begin, int64_t end, int64_t grain, const WarmHint& next, F&& f) {
  using Fn = std::remove_reference_t<F>;
  detail::parallel_chunks(
      begin, end, grain, [](void* ctx, int64_t b, int64_t e) { (*static_cast<Fn*>(ctx))(b, e); },
      const_cast<void*>(static_cast<const void*>(&f)), next);
}

template <class F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, F&& f) {
  parallel_for_then_warm(begin, end, grain, WarmHint{}, std::forward<F>(f));
}

// While one lives on this thread, LibTorch's own operators called from it
// run on it alone (its OpenMP thread count for this thread is 1), and
// kernels::parallel_for keeps the thread count at::get_num_threads() had
// when the scope began. An engine step (forward, logits, sampling) runs in
// one: an OpenMP worker that spins after each of LibTorch's parallel
// operators (for as long as GOMP_SPINCOUNT says) would otherwise hold a core
// that this pool's worker needs for the next kernel, and each such operator
// is one more team barrier for a descheduled thread to stall (see above).
// The operators left in a step are small elementwise ones and the sampler's. Where LibTorch does not use
// OpenMP the scope changes nothing for LibTorch.
class SerialLibTorchScope {
 public:
  SerialLibTorchScope();
  ~SerialLibTorchScope();
  SerialLibTorchScope(const SerialLibTorchScope&) = delete;
  SerialLibTorchScope& operator=(const SerialLibTorchScope&) = delete;

 private:
  int saved_omp_threads_ = 0;  // 0: nothing to restore
  int saved_pool_threads_ = 0;
};

// Threads that have run chunks for the pool (tests: whether the workers take part).
int64_t parallel_pool_threads_started();
// Bytes the pool's worker has asked for from WarmHints (tests: whether it warms).
int64_t parallel_pool_warmed_bytes();

}  // namespace nnsight::kernels
