// Exceptions of the DSL. Every message names the node (id, kind, op) and the
// user's source location where one is known.
#pragma once

#include "dsl/node.h"

#include <nnsight/error.hpp>
#include <nnsight/source_location.hpp>

#include <exception>
#include <string>

namespace nnsight::dsl {

// Bytes or JSON that are not a well-formed graph (or exceed a limit while
// decoding). The message says where: byte offset or JSON pointer, and node.
class DecodeError : public Error {
 public:
  using Error::Error;
};

// A well-formed graph that breaks a rule (unknown op, forward reference,
// wrong argument kind, bad iteration range, limit exceeded).
class ValidationError : public Error {
 public:
  ValidationError(NodeId node, SourceLoc loc, const std::string& what)
      : Error(what), node_(node), loc_(std::move(loc)) {}
  NodeId node() const { return node_; }
  const SourceLoc& loc() const { return loc_; }

 private:
  NodeId node_;
  SourceLoc loc_;
};

// A failure while running a graph (an op raised, a value never came).
class EvalError : public Error {
 public:
  EvalError(NodeId node, SourceLoc loc, const std::string& what) : Error(what), node_(node), loc_(std::move(loc)) {}
  NodeId node() const { return node_; }
  const SourceLoc& loc() const { return loc_; }

 private:
  NodeId node_;
  SourceLoc loc_;
};

// Thrown by a Provider from get/set when the request has finished, so the
// asked-for step will never come. Not an error by itself: it ends an `all`
// iteration cleanly; anywhere else the evaluator turns it into an EvalError.
class RequestFinished : public std::exception {
 public:
  const char* what() const noexcept override { return "the request finished"; }
};

// Thrown by a Provider when a value will never be produced for another reason
// (the module did not run at that step, the key does not exist). The
// evaluator reports it as an EvalError at the node that asked.
class ValueNeverProvided : public Error {
 public:
  using Error::Error;
};

// A builder used wrongly (proxy of another trace, unbalanced blocks, unknown
// op). Raised while the user's trace body runs, naming their source line; a
// TraceError, so the documented `catch (const TraceError&)` catches it.
class BuildError : public TraceError {
 public:
  using TraceError::TraceError;
};

}  // namespace nnsight::dsl
