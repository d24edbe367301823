// Envoy (include/nnsight/envoy.hpp).
#include <nnsight/envoy.hpp>
#include <nnsight/error.hpp>
#include <nnsight/language_model.hpp>

#include <ATen/ATen.h>

#include "dsl/builder.h"
#include "front/trace_client/trace_recorder.h"

namespace nnsight {

std::string Envoy::type_name() const { return model_ ? model_->type_name(path_) : ""; }

Proxy Envoy::read(const std::string& suffix, CallSite site) const {
  const SourceLoc loc = site.loc();
  if (!model_) throw TraceError(loc.str() + ": an empty Envoy is used");
  auto* rec = tracing::TraceRecorder::current();
  if (!rec) throw TraceError(loc.str() + ": " + path_ + suffix + " is read outside a trace body");
  auto b = rec->builder(loc);
  const dsl::NodeId node = b->get(path_ + suffix, rec->step_for(path_, loc), loc);
  return Proxy(b, node);
}

Proxy Envoy::operator()(const Operand& x, CallSite site) const {
  const SourceLoc loc = site.loc();
  if (!model_) throw TraceError(loc.str() + ": an empty Envoy is used");
  if (!model_->callable(path_))
    throw TraceError(loc.str() + ": module '" + path_ + "' (" + type_name() +
                     ") cannot be called in a trace: attention and decoder layers need the step's positions and KV "
                     "cache; call their projections, norms or MLP instead");
  if (!tracing::TraceRecorder::current())
    throw TraceError(loc.str() + ": " + path_ + " is called outside a trace body");
  return call_module(path_, x, site);
}

void Envoy::skip(const Operand& value, CallSite site) const {
  const SourceLoc loc = site.loc();
  if (!model_) throw TraceError(loc.str() + ": an empty Envoy is used");
  auto* rec = tracing::TraceRecorder::current();
  if (!rec) throw TraceError(loc.str() + ": " + path_ + ".skip() outside a trace body");
  auto b = rec->builder(loc);
  dsl::NodeId v = 0;
  switch (value.kind()) {
    case Operand::Kind::Proxy:
      if (!value.proxy().valid()) throw TraceError(loc.str() + ": an empty proxy is used");
      v = b->import(*value.proxy().builder(), value.proxy().node(), loc);
      break;
    case Operand::Kind::Tensor:
      if (!value.tensor().defined()) throw TraceError(loc.str() + ": an undefined tensor is used");
      v = b->constant(dsl::Value(value.tensor().detach().clone()), loc);
      break;
    case Operand::Kind::Int:
      v = b->constant(dsl::Value(at::scalar_tensor(value.int_value())), loc);
      break;
    case Operand::Kind::Double:
      v = b->constant(dsl::Value(at::scalar_tensor(value.double_value())), loc);
      break;
    case Operand::Kind::Bool:
      v = b->constant(dsl::Value(at::scalar_tensor(value.bool_value())), loc);
      break;
  }
  b->set(path_ + ".skip", rec->step_for(path_, loc), v, loc);
}

Proxy Envoy::output(CallSite site) const { return read(".output", site); }
Proxy Envoy::input(CallSite site) const { return read(".input", site); }
Proxy Envoy::inputs(CallSite site) const { return read(".inputs", site); }

Envoy Envoy::next(CallSite site) const {
  auto* rec = tracing::TraceRecorder::current();
  if (!rec) throw TraceError(site.loc().str() + ": envoy.next() outside a trace body");
  rec->advance(path_, site.loc());
  return *this;
}

Envoy Envoy::operator[](const EnvoyChild& child) const {
  if (!model_) throw TraceError(child.site().loc().str() + ": an empty Envoy is used");
  return model_->envoy(path_.empty() ? child.name() : path_ + "." + child.name(), child.site());
}

}  // namespace nnsight
