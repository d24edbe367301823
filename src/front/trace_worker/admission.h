// Admission: a new traced request's payload becomes mediators of its trace
// group, checked before any model time is spent.
//
//   admit_request   decodes the payload (bounded by the limits), checks each
//                   graph against the model's structure, validates it and adds
//                   one mediator per graph to the group
//   check_complete_trace  once every request of the trace has arrived: the checks
//                   that span invokes (a value of another invoke used before
//                   it exists, cross-invoke order)
// Both throw with the user's source location; the interleaver then fails the
// whole trace.
#pragma once

#include "dsl/function_registry.h"
#include "dsl/limits.h"
#include "front/trace_worker/module_caller.h"
#include "front/trace_worker/trace_group.h"
#include "front/trace_worker/trace_payload.h"
#include "runner/model_runner/model_structure.h"
#include "runner/step/step_data.h"

namespace nnsight::tracing {

struct AdmissionContext {
  const runner::ModelStructure* structure = nullptr;
  dsl::Limits limits;
  const dsl::FunctionRegistry* functions = nullptr;
  int64_t memory_budget_bytes = 0;       // what one request's graphs may hold at once; 0 = unbounded
  const ModuleCaller* caller = nullptr;  // runs `call` nodes
  int world_size = 1;                    // tensor-parallel ranks: gradients need 1
};

void admit_request(const runner::NewRequest& request, TracePayload payload, TraceGroup& group,
                   const AdmissionContext& ctx);
void check_complete_trace(TraceGroup& group, const AdmissionContext& ctx);

}  // namespace nnsight::tracing
