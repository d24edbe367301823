// TraceFuture (include/nnsight/language_model.hpp): the one wait of a trace,
// local or remote.
#include <nnsight/error.hpp>
#include <nnsight/interrupt.hpp>
#include <nnsight/language_model.hpp>

#include <chrono>

#include "front/trace_client/interrupt.h"

namespace nnsight {

void TraceFuture::wait() const {
  // Polls the interrupt counter (a signal handler can only bump a counter).
  while (future_.wait_for(std::chrono::milliseconds(20)) != std::future_status::ready) {
    if (tracing::interrupt_count() != interrupts_at_) {
      cancel();
      future_.wait();
      throw Interrupted("the trace was interrupted; its requests were aborted");
    }
  }
  // Finished, but interrupted before it was collected: the caller asked to stop.
  if (tracing::interrupt_count() != interrupts_at_) throw Interrupted("the trace was interrupted");
}

TraceResult TraceFuture::get() {
  wait();
  return future_.get();
}

}  // namespace nnsight
