// ServeOptions: how `nnsight serve` runs, beside the engine's own EngineArgs.
// Chainable setters would add nothing for a struct filled once from the
// command line; defaults sit next to each field.
#pragma once

#include <cstdint>
#include <string>

#include <nnsight/engine_args.hpp>

namespace nnsight::server {

struct TenantLimitOptions {
  int64_t max_concurrent_traces = 8;    // traces of one key running at once
  int64_t max_queued_traces = 64;       // more of one key waiting for a place (beyond: 429)
  int64_t max_tokens_per_minute = 0;    // prompt + max_tokens of one key per minute; 0 = unlimited
  int64_t max_saved_bytes = 256 << 20;  // saves of one trace (beyond: the trace fails, 413)
  double max_trace_seconds = 600;       // wall time of one trace from its start (beyond: aborted)
};

struct ServeOptions {
  EngineArgs engine;               // every replica's engine
  std::string served_model_name;   // the id clients use; "" = engine.model()
  std::string host = "127.0.0.1";  // address to listen on
  int port = 8000;                 // 0 = any free port
  std::string api_keys_file;       // "" = no authentication (one tenant, "anonymous")
  int64_t replicas = 1;            // engines behind the server
  // Workers started by hand for each replica: "h:p,h:p;h:p,h:p" (replicas
  // separated by ';'); "" = each replica starts its own (or runs in process).
  std::string replica_worker_addresses;
  TenantLimitOptions limits;
  size_t max_body_bytes = 64 << 20;         // request bodies (beyond: 413 before the body is read)
  size_t max_connections = 512;             // open connections (beyond: one waiting for its head makes room, else 503)
  size_t max_connections_per_address = 64;  // open connections from one client address (beyond: 503)
  double head_timeout_s = 10;               // a request's head must arrive within this (else 408)
  double read_timeout_s = 30;               // a request's body must arrive within this (else 408)
  double shutdown_grace_s = 10;             // on stop, running requests get this long to send their error answer
  double retention_s = 3600;                // saves of a finished trace are kept this long unless fetched
  int64_t max_retained_bytes = 1ll << 30;   // all kept saves (beyond: the oldest are dropped)
};

}  // namespace nnsight::server
