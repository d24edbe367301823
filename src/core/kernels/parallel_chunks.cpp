#include "core/kernels/parallel_chunks.h"

#include <ATen/Parallel.h>
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NNSIGHT_CPU_RELAX() _mm_pause()
#else
#define NNSIGHT_CPU_RELAX() std::this_thread::yield()
#endif

namespace nnsight::kernels {

namespace {

// A job is cut into about this many chunks per thread, the smallest piece a
// thread claims: small enough that a thread arriving late or running slower
// leaves little for the others to wait on. A claim takes half of what is
// left of a range (at least one chunk), so a thread makes a handful of
// claims per job however many chunks its range has (with 4 chunks of one
// each, the last one's imbalance was visible: a decode step's down_proj
// 28.5-29.3 -> 26.5-27.3 us at one token with 16 and halving claims).
constexpr int64_t kChunksPerThread = 16;

// Each thread's chunks lie side by side (its home range, one claim word per
// range); a thread whose range is done takes chunks from the others' ranges.
// With one shared counter the threads took chunks in turn (0, 1, 2, ... to
// whoever came first), so each thread's chunks were apart: every chunk began
// a new stream from memory (the hardware prefetchers and the kernels' own
// prefetch, which runs past a chunk's end into the chunk after it, started
// over). Batch-1 decode of the default model with packed weights, median of
// 10 alternating runs: 158 -> 175 tokens/s.
constexpr int kMaxRanges = 256;

// An idle worker polls for this long before it sleeps. Between the kernels of
// one decode step the gaps are a few to a few tens of microseconds; a worker
// asleep is woken by the caller (a futex call) and joins late, never delaying it.
constexpr auto kSpin = std::chrono::microseconds(100);

// A range's claim word: generation (16 bits) | end chunk (24) | next chunk
// (24). A thread claims chunk `next` by one compare-and-swap of the whole word, so
// it can never take a chunk of a job other than the one it read, and it reads
// the job's function only after claiming (the caller cannot have moved on
// while a claimed chunk is not done).
constexpr int kCountBits = 24;
constexpr uint64_t kCountMask = (uint64_t(1) << kCountBits) - 1;
constexpr int64_t kMaxChunks = int64_t(kCountMask);

inline uint64_t make_word(uint64_t gen, uint64_t count, uint64_t next) {
  return (gen << (2 * kCountBits)) | (count << kCountBits) | next;
}
inline uint64_t word_count(uint64_t w) { return (w >> kCountBits) & kCountMask; }
inline uint64_t word_next(uint64_t w) { return w & kCountMask; }
inline uint64_t word_gen(uint64_t w) { return w >> (2 * kCountBits); }

thread_local bool t_in_pool = false;  // a pool worker, or a caller inside a job
thread_local int t_pool_threads = 0;  // set by SerialLibTorchScope; 0: at::get_num_threads()

// The OpenMP runtime LibTorch loaded (found by name, so it is the one
// LibTorch uses whichever libgomp/libomp it ships with), or nullptrs.
struct OmpApi {
  void (*set_num_threads)(int) = nullptr;
  int (*get_max_threads)() = nullptr;
};
const OmpApi& omp_api() {
  static const OmpApi api = [] {
    OmpApi a;
    a.set_num_threads = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
    a.get_max_threads = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
    if (a.set_num_threads == nullptr || a.get_max_threads == nullptr) a = OmpApi{};
    return a;
  }();
  return api;
}

class Pool {
 public:
  ~Pool() {
    {
      std::lock_guard<std::mutex> lk(sleep_mutex_);
      stop_ = true;
      ++wake_seq_;
    }
    wake_cv_.notify_all();
    for (auto& t : threads_) t.join();
  }

  // Runs the job with up to `threads` threads; false when another caller
  // holds the pool (the caller then runs the job itself).
  bool run(int64_t begin, int64_t end, int64_t chunk, int threads, detail::ChunkFn fn, void* ctx,
           const WarmHint& warm) {
    std::unique_lock<std::mutex> caller(caller_mutex_, std::try_to_lock);
    if (!caller.owns_lock()) return false;
    if (!warm.empty()) {
      for (int i = 0; i < 2; ++i) {
        warm_data_[i].store(static_cast<const char*>(warm.data[i]), std::memory_order_relaxed);
        warm_bytes_[i].store(warm.bytes[i], std::memory_order_relaxed);
      }
      // Published with the job (the range words' stores below are seq_cst).
      warm_gen_.fetch_add(1, std::memory_order_relaxed);
    }
    ensure_workers(threads - 1);
    active_workers_.store(threads - 1, std::memory_order_relaxed);
    const int64_t n = (end - begin + chunk - 1) / chunk;
    fn_ = fn;
    ctx_ = ctx;
    begin_ = begin;
    end_ = end;
    chunk_ = chunk;
    done_.store(0, std::memory_order_relaxed);
    gen_ = (gen_ + 1) & 0xFFFF;
    // Range r: chunks [r * n / R, (r + 1) * n / R). Ranges past R were left
    // empty by the job that used them (its caller claimed every chunk).
    const int r_count = static_cast<int>(std::min<int64_t>({threads, n, kMaxRanges}));
    if (r_count > ranges_used_.load(std::memory_order_relaxed)) ranges_used_.store(r_count, std::memory_order_relaxed);
    for (int r = r_count - 1; r >= 0; --r) {
      const auto first = static_cast<uint64_t>(r * n / r_count), last = static_cast<uint64_t>((r + 1) * n / r_count);
      ranges_[r].word.store(make_word(gen_, last, first), std::memory_order_seq_cst);
    }
    if (sleepers_.load(std::memory_order_seq_cst) > 0) {
      {
        std::lock_guard<std::mutex> lk(sleep_mutex_);
        ++wake_seq_;
      }
      wake_cv_.notify_all();
    }
    t_in_pool = true;
    while (claim_and_run(0)) {
    }
    t_in_pool = false;
    // Chunks claimed by workers that are still running (or descheduled).
    for (int spins = 0; done_.load(std::memory_order_acquire) < n; ++spins) {
      if (spins < 4096) {
        NNSIGHT_CPU_RELAX();
      } else {
        std::this_thread::yield();
      }
    }
    return true;
  }

  int64_t threads_started() const { return started_.load(); }
  int64_t warmed_bytes() const { return warmed_.load(); }

 private:
  // Claims one chunk of the current job, from range `home` first, and runs
  // it; false when none is left in any range.
  bool claim_and_run(int home) {
    const int r_count = ranges_used_.load(std::memory_order_acquire);
    for (int k = 0; k < r_count; ++k) {
      std::atomic<uint64_t>& word = ranges_[(home + k) % r_count].word;
      uint64_t w = word.load(std::memory_order_acquire);
      while (word_next(w) < word_count(w)) {
        // Half of what is left in the range, at least one chunk: few claims
        // while a range is long, one chunk at a time near its end, where a
        // thread that finished its own range takes over pieces of another's.
        const uint64_t take = std::max<uint64_t>(1, (word_count(w) - word_next(w)) / 2);
        if (word.compare_exchange_weak(w, w + take, std::memory_order_acq_rel, std::memory_order_acquire)) {
          const int64_t b = begin_ + static_cast<int64_t>(word_next(w)) * chunk_;
          fn_(ctx_, b, std::min(end_, b + static_cast<int64_t>(take) * chunk_));
          done_.fetch_add(static_cast<int64_t>(take), std::memory_order_release);
          return true;
        }
      }
    }
    return false;
  }

  // The first worker's place in the current WarmHint.
  struct WarmCursor {
    uint64_t gen = 0;
    int range = -1;  // the range being warmed (1, then 0); -1: done
    int64_t offset = 0;
  };

  // Asks for the next few lines of the current hint; false when it is done.
  bool warm_step(WarmCursor& c) {
    constexpr int64_t kLines = 4;  // between two looks at whether a job has come
    const uint64_t gen = warm_gen_.load(std::memory_order_relaxed);
    if (gen != c.gen) c = WarmCursor{gen, 1, 0};
    while (c.range >= 0) {
      const char* p = warm_data_[c.range].load(std::memory_order_relaxed);
      const int64_t n = warm_bytes_[c.range].load(std::memory_order_relaxed);
      if (p == nullptr || c.offset >= n) {
        --c.range;
        c.offset = 0;
        continue;
      }
      for (int64_t l = 0; l < kLines; ++l) __builtin_prefetch(p + c.offset + 64 * l, 0, 3);
      c.offset += 64 * kLines;
      // One writer: a plain add, not a locked one, in the idle loop.
      warmed_.store(warmed_.load(std::memory_order_relaxed) + 64 * kLines, std::memory_order_relaxed);
      return true;
    }
    return false;
  }

  bool claimable() const {
    const int r_count = ranges_used_.load(std::memory_order_acquire);
    for (int r = 0; r < r_count; ++r) {
      const uint64_t w = ranges_[r].word.load(std::memory_order_seq_cst);
      if (word_next(w) < word_count(w)) return true;
    }
    return false;
  }

  void ensure_workers(int wanted) {
    while (static_cast<int>(threads_.size()) < wanted) {
      const int index = static_cast<int>(threads_.size());
      threads_.emplace_back([this, index] { work(index); });
    }
  }

  // Worker `index` takes part in jobs that want more than `index` workers
  // (the pool keeps the most threads any job asked for).
  void work(int index) {
    t_in_pool = true;
    started_.fetch_add(1);
    WarmCursor warm_cursor;
    warm_cursor.gen = warm_gen_.load(std::memory_order_relaxed);
    for (;;) {
      // Poll for a chunk, then sleep until a caller publishes a job.
      auto deadline = std::chrono::steady_clock::now() + kSpin;
      for (int i = 0;; ++i) {
        if (index < active_workers_.load(std::memory_order_relaxed) && claimable()) {
          while (claim_and_run(index + 1)) {
          }
          deadline = std::chrono::steady_clock::now() + kSpin;
        }
        if (index == 0 && warm_step(warm_cursor)) continue;
        NNSIGHT_CPU_RELAX();
        if ((i & 63) == 0 && std::chrono::steady_clock::now() > deadline) break;
      }
      std::unique_lock<std::mutex> lk(sleep_mutex_);
      if (stop_) return;
      const uint64_t seq = wake_seq_;
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      if (index >= active_workers_.load(std::memory_order_relaxed) || !claimable())
        wake_cv_.wait(lk, [&] { return wake_seq_ != seq || stop_; });
      sleepers_.fetch_sub(1, std::memory_order_seq_cst);
      if (stop_) return;
    }
  }

  std::mutex caller_mutex_;  // one caller at a time
  // The current job; written by the caller before the range words publish it.
  detail::ChunkFn fn_ = nullptr;
  void* ctx_ = nullptr;
  int64_t begin_ = 0, end_ = 0, chunk_ = 1;
  uint64_t gen_ = 0;
  struct alignas(64) Range {
    std::atomic<uint64_t> word{0};  // generation | end chunk | next chunk
  };
  Range ranges_[kMaxRanges];
  std::atomic<int> ranges_used_{0};  // the most ranges a job has used
  alignas(64) std::atomic<int64_t> done_{0};
  alignas(64) std::atomic<int> sleepers_{0};
  std::atomic<int> active_workers_{0};
  std::mutex sleep_mutex_;
  std::condition_variable wake_cv_;
  uint64_t wake_seq_ = 0;  // guarded by sleep_mutex_
  bool stop_ = false;      // guarded by sleep_mutex_
  std::atomic<int64_t> started_{0};
  std::vector<std::thread> threads_;
  // The current WarmHint (generation, then where and how much per range).
  alignas(64) std::atomic<uint64_t> warm_gen_{0};
  std::atomic<const char*> warm_data_[2] = {};
  std::atomic<int64_t> warm_bytes_[2] = {};
  alignas(64) std::atomic<int64_t> warmed_{0};  // written by the first worker only
};

Pool& pool() {
  // Never destroyed: workers may still poll while static destructors run.
  static Pool* p = new Pool();
  return *p;
}

}  // namespace

namespace detail {

void parallel_chunks(int64_t begin, int64_t end, int64_t grain, ChunkFn fn, void* ctx, const WarmHint& warm) {
  if (end <= begin) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t n = end - begin;
  const int threads = (n > grain && !t_in_pool && !at::in_parallel_region())
                          ? (t_pool_threads > 0 ? t_pool_threads : at::get_num_threads())
                          : 1;
  if (threads <= 1) {
    fn(ctx, begin, end);
    return;
  }
  // As at::parallel_for: min(threads, ceil(n / grain)) threads' worth of
  // work (so a share may be shorter than grain), cut into kChunksPerThread
  // chunks each.
  const int64_t shares = std::min<int64_t>(threads, (n + grain - 1) / grain);
  const int64_t wanted = std::min<int64_t>({kChunksPerThread * shares, n, kMaxChunks});
  const int64_t chunk = (n + wanted - 1) / wanted;
  if (!pool().run(begin, end, chunk, threads, fn, ctx, warm)) fn(ctx, begin, end);
}

}  // namespace detail

SerialLibTorchScope::SerialLibTorchScope() {
  // at::get_num_threads() also runs LibTorch's once-per-thread setup, which
  // would otherwise reset the OpenMP count inside the scope.
  saved_pool_threads_ = t_pool_threads;
  t_pool_threads = t_pool_threads > 0 ? t_pool_threads : at::get_num_threads();
  const OmpApi& omp = omp_api();
  if (omp.set_num_threads != nullptr && !at::in_parallel_region()) {
    saved_omp_threads_ = omp.get_max_threads();
    omp.set_num_threads(1);
  }
}

SerialLibTorchScope::~SerialLibTorchScope() {
  if (saved_omp_threads_ > 0) omp_api().set_num_threads(saved_omp_threads_);
  t_pool_threads = saved_pool_threads_;
}

int64_t parallel_pool_threads_started() { return pool().threads_started(); }

int64_t parallel_pool_warmed_bytes() { return pool().warmed_bytes(); }

}  // namespace nnsight::kernels
