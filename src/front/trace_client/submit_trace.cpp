#include "front/trace_client/submit_trace.h"

#include <atomic>
#include <future>
#include <memory>

#include <nnsight/error.hpp>

#include "front/trace_client/collect_trace_result.h"
#include "front/trace_client/interrupt.h"
#include "front/trace_client/result_thread.h"
#include "front/trace_client/saves_to_host.h"

namespace nnsight::tracing {

std::vector<runner::RequestHandle> submit_trace(runner::AsyncEngine& engine, std::vector<runner::RequestInput> requests,
                                                runner::GroupCallback on_done, TraceSubmitOptions options) {
  std::vector<runner::StreamCallback> progress;
  if (options.on_step) progress.assign(requests.size(), options.on_step);
  auto arrange = [order = std::move(options.output_order), done = std::move(on_done)](
                     std::vector<RequestOutput> outputs, std::exception_ptr error) {
    if (!order.empty() && order.size() == outputs.size()) {
      std::vector<RequestOutput> arranged(outputs.size());
      for (size_t r = 0; r < outputs.size(); ++r) arranged[order[r]] = std::move(outputs[r]);
      outputs = std::move(arranged);
    }
    done(std::move(outputs), error);
  };
  return engine.submit_group(std::move(requests), std::move(progress), std::move(arrange));
}

TraceFuture submit_trace(runner::AsyncEngine& engine, std::vector<runner::RequestInput> requests,
                         std::vector<size_t> output_order) {
  const uint64_t submitted_at = interrupt_count();
  auto promise = std::make_shared<std::promise<TraceResult>>();
  std::future<TraceResult> future = promise->get_future();
  auto cancelled = std::make_shared<std::atomic<bool>>(false);
  // On the engine's loop thread. Saves on a device move to the host on the
  // result thread, so the loop goes on with the next step.
  auto on_done = [promise, cancelled](std::vector<RequestOutput> outputs, std::exception_ptr error) {
    if (error) return promise->set_exception(error);
    auto shared = std::make_shared<std::vector<RequestOutput>>(std::move(outputs));
    auto finish = [promise, cancelled, shared] {
      try {
        if (cancelled->load())
          for (const auto& o : *shared)
            if (o.finish_reason == FinishReason::kAbort || o.finish_reason == FinishReason::kError)
              throw TraceError("the trace was cancelled before it finished");
        promise->set_value(collect_trace_result(std::move(*shared)));
      } catch (...) {
        promise->set_exception(std::current_exception());
      }
    };
    // Saves already on the host have nothing to move: finishing here costs
    // less than waking another thread (a 1-token trace's whole overhead).
    // Saves on a GPU start for the host here (this thread only enqueues the
    // copies); the result thread waits for them to land.
    auto saves = std::make_shared<SavesToHost>(*shared);
    if (!saves->any()) return finish();
    run_on_result_thread([shared, saves, finish = std::move(finish)] {
      saves->land(*shared);
      finish();
    });
  };
  auto handles = submit_trace(engine, std::move(requests), std::move(on_done),
                              TraceSubmitOptions().order(std::move(output_order)));
  std::vector<uint64_t> ids;
  for (const auto& h : handles) ids.push_back(h.id);
  return TraceFuture(
      std::move(future),
      [&engine, ids, cancelled] {
        cancelled->store(true);
        for (uint64_t id : ids) engine.abort(id);
      },
      submitted_at);
}

}  // namespace nnsight::tracing
