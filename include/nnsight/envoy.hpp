// Envoy: a module of the served model, named by its Hugging Face path, as
// seen from inside a trace body. Reading .output() / .input() records a read
// of that value (a Proxy); assigning to it records a write.
//
//   auto mlp = lm.envoy("model.layers.28.mlp");
//   mlp.output() = mlp.output() * 0;      // ablation
//   auto h = lm.envoy("model.layers")[5].output();
//
// An Envoy is a light handle (model + path); creating one checks the path
// and suggests the closest known one when it is wrong.
#pragma once

#include <cstdint>
#include <string>

#include <nnsight/call_site.hpp>
#include <nnsight/proxy.hpp>

namespace nnsight {

class LanguageModel;

// A child of an Envoy: a name or an index, with the user's line (for errors).
class EnvoyChild {
 public:
  EnvoyChild(int64_t index, const char* file = __builtin_FILE(), unsigned line = __builtin_LINE())
      : name_(std::to_string(index)), site_(CallSite::at(file, line)) {}
  EnvoyChild(int index, const char* file = __builtin_FILE(), unsigned line = __builtin_LINE())
      : name_(std::to_string(index)), site_(CallSite::at(file, line)) {}
  EnvoyChild(std::string name, const char* file = __builtin_FILE(), unsigned line = __builtin_LINE())
      : name_(std::move(name)), site_(CallSite::at(file, line)) {}
  EnvoyChild(const char* name, const char* file = __builtin_FILE(), unsigned line = __builtin_LINE())
      : name_(name), site_(CallSite::at(file, line)) {}
  const std::string& name() const { return name_; }
  const CallSite& site() const { return site_; }

 private:
  std::string name_;
  CallSite site_;
};

class Envoy {
 public:
  Envoy() = default;

  const std::string& path() const { return path_; }
  // The module's class name as Hugging Face names it ("LlamaMLP").
  std::string type_name() const;

  // The module's output at the current step: a tensor [tokens, ...] of this
  // invoke's rows, or a tuple for modules that return one (self_attn).
  Proxy output(CallSite site = CallSite()) const;
  // Its first positional input (a tensor), or all of them (a tuple).
  Proxy input(CallSite site = CallSite()) const;
  Proxy inputs(CallSite site = CallSite()) const;

  // Runs this module on x inside the trace, with the weights of the process
  // that runs the model: lm.envoy("lm_head")(lm.envoy("model.norm")(h)).
  // No hooks fire (other traces', forward hooks, capture) and the KV cache
  // is untouched. Norms, linears, MLPs, embeddings and the LM head can be
  // called; attention and decoder layers cannot (they need the step's
  // positions and cache): a TraceError at this line.
  Proxy operator()(const Operand& x, CallSite site = CallSite()) const;

  // Skips this module for the invoke's rows at the current step: its output
  // there is `value` ([rows, ...], or broadcastable to the output) and its
  // body does not run for them. When every row of the batch is skipped the
  // body (and every module inside it) does not run at all; when other
  // requests share the batch it runs for them and the skipped rows take
  // `value`. Modules whose output is split across tensor-parallel ranks (q/k/v
  // or up projections) cannot be skipped at TP > 1.
  void skip(const Operand& value, CallSite site = CallSite()) const;

  // Moves this module's step cursor one generation step ahead: later
  // .output()/.input() calls on this path address the next step.
  Envoy next(CallSite site = CallSite()) const;

  // Children: lm.envoy("model.layers")[5]["mlp"] (containers such as
  // "model.layers" are navigable; an unknown child is a TraceError at the
  // user's line naming the closest known path).
  Envoy operator[](const EnvoyChild& child) const;

 private:
  friend class LanguageModel;
  Envoy(const LanguageModel* model, std::string path) : model_(model), path_(std::move(path)) {}
  Proxy read(const std::string& suffix, CallSite site) const;

  const LanguageModel* model_ = nullptr;
  std::string path_;
};

}  // namespace nnsight
