// Which memory the next call of the engine's memory-bound kernels (packed
// matmuls, paged attention) will read, learned from the order calls came
// in: a decode step makes the same calls in the same order every step, so
// the call that followed one last time follows it again. A kernel hands the
// prediction to the pool (WarmHint), whose idle worker then brings the next
// weights (or a layer's keys and values) into cache while the caller runs
// the serial code between two calls.
//
// Per thread: each thread's calls form their own sequence (in-process
// tensor-parallel ranks, concurrent engines). The table is shared and
// bounded; a wrong or stale prediction only costs useless prefetches.
#pragma once

#include "core/kernels/parallel_chunks.h"

namespace nnsight::kernels::detail {

// Records that the calling thread's current call, identified by `key` (its
// first weight byte, the same whatever PackedMatrix copy points at it),
// reads `reads`, and returns what the call that followed `key` on this
// thread the last time read (empty the first time, or when the table is full).
WarmHint record_call_predict_next(const void* key, const WarmHint& reads);

}  // namespace nnsight::kernels::detail
