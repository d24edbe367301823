// Interrupting a trace that is waiting for its results, from another thread
// or from a signal handler. This is how a notebook kernel stops a long trace
// when the user presses "interrupt": the kernel's SIGINT watcher calls
// nnsight_request_interrupt(), and the cell's trace throws Interrupted.
//
//   std::thread([] { std::this_thread::sleep_for(1s); nnsight::request_interrupt(); }).detach();
//   try { lm.trace(prompt, SamplingParams().max_tokens(2000), body); }
//   catch (const nnsight::Interrupted&) { /* its requests were aborted; lm keeps serving */ }
#pragma once

#include <nnsight/error.hpp>

namespace nnsight {

// Thrown by a trace (LanguageModel::trace/generate, a submit() future's get(),
// logit_lens) that was interrupted while it waited for its results. Its
// requests were aborted and have finished; the engine keeps serving.
class Interrupted : public Error {
 public:
  using Error::Error;
};

// Interrupts every trace that is waiting for its results now. A trace that
// starts waiting later is not affected. Async-signal-safe; any thread.
void request_interrupt() noexcept;

}  // namespace nnsight

// The same, with C linkage, for callers that find it with dlsym (the
// notebook kernel calls it through ctypes from its signal watcher thread).
extern "C" void nnsight_request_interrupt(void);
