// nnsight serve: the model server (src/server/model_server.h, docs/server.md).
#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>
#include <stdexcept>

#include <unistd.h>

#include "front/cli/cli_options.h"
#include "front/cli/commands.h"
#include "front/cli/engine_options.h"
#include "server/model_server.h"

namespace nnsight::cli {

namespace {

volatile std::sig_atomic_t g_stop = 0;

constexpr int64_t kMaxMb = int64_t{1} << 30;  // 1 PiB: beyond any machine, far from overflow once scaled

// The options in the units a user types them (MB, not bytes); every number
// is range-checked before it is narrowed or scaled: --port 4294967297 is not
// port 1, and --max-saved-mb 2^50 does not overflow.
struct ServeCliOptions {
  server::ServeOptions serve;
  int64_t port = 8000, max_concurrent_traces = serve.limits.max_concurrent_traces,
          max_queued_traces = serve.limits.max_queued_traces, tokens_per_minute = 0, max_saved_mb = 256,
          max_body_mb = 64, max_connections = 512,
          max_connections_per_address = static_cast<int64_t>(serve.max_connections_per_address), max_retained_mb = 1024;
  EngineOptions engine;
};

int run(const CLI::App& cmd, ServeCliOptions& c) {
  server::ServeOptions& o = c.serve;
  o.engine = engine_args_from(cmd, c.engine);
  o.port = static_cast<int>(c.port);
  o.limits.max_concurrent_traces = c.max_concurrent_traces;
  o.limits.max_queued_traces = c.max_queued_traces;
  o.limits.max_tokens_per_minute = c.tokens_per_minute;
  o.limits.max_saved_bytes = c.max_saved_mb << 20;
  o.max_body_bytes = static_cast<size_t>(c.max_body_mb) << 20;
  o.max_connections = static_cast<size_t>(c.max_connections);
  o.max_connections_per_address = static_cast<size_t>(c.max_connections_per_address);
  o.max_retained_bytes = c.max_retained_mb << 20;

  // SIGINT/SIGTERM stop the server cleanly: running traces are cancelled.
  std::signal(SIGINT, [](int) { g_stop = 1; });
  std::signal(SIGTERM, [](int) { g_stop = 1; });
  server::ModelServer srv(o);
  std::cout << "nnsight serve: listening on http://" << o.host << ":" << srv.port() << std::endl;
  while (!g_stop) ::usleep(100 * 1000);
  std::cerr << "nnsight serve: stopping" << std::endl;
  srv.stop();
  return 0;
}

}  // namespace

RunCommand add_serve_command(CLI::App& root) {
  auto c = std::make_shared<ServeCliOptions>();
  server::ServeOptions& o = c->serve;
  CLI::App& cmd =
      *root.add_subcommand("serve", "an HTTP model server: OpenAI completions and traces as data (docs/server.md)");
  cmd.add_option("--host", o.host, "address to listen on")->capture_default_str();
  add_integer(cmd, "--port", c->port, "port; 0 = any free one, printed on stdout", 0, 65535);
  cmd.add_option("--api-keys", o.api_keys_file,
                 "FILE of 'tenant:key' or 'tenant:sha256:<hex>' lines; without it, no authentication");
  cmd.add_option("--served-model-name", o.served_model_name, "the model id clients use (default: the --model value)");
  add_integer(cmd, "--replicas", o.replicas, "engines behind the server", 1, 1024);
  cmd.add_option("--replica-worker-addresses", o.replica_worker_addresses,
                 "'H:P,H:P;H:P,H:P': workers started by hand, per replica");
  CLI::App& key = *cmd.add_option_group("Limits per API key");
  add_integer(key, "--max-concurrent-traces", c->max_concurrent_traces, "traces running at once", 1, 1 << 20);
  add_integer(key, "--max-queued-traces", c->max_queued_traces, "traces waiting", 0, 1 << 20);
  add_integer(key, "--tokens-per-minute", c->tokens_per_minute, "0 = off", 0, int64_t{1} << 50);
  CLI::App& request = *cmd.add_option_group("Limits per request");
  add_integer(request, "--max-saved-mb", c->max_saved_mb, "saves of one trace (beyond: it fails at that step, 413)", 1,
              kMaxMb);
  add_number(request, "--max-trace-seconds", o.limits.max_trace_seconds, "wall time of one trace", 1e-3, 1e7);
  add_integer(request, "--max-body-mb", c->max_body_mb, "request bodies", 1, kMaxMb);
  CLI::App& server = *cmd.add_option_group("Server");
  add_integer(server, "--max-connections", c->max_connections, "open connections", 1, 1 << 20);
  add_integer(server, "--max-connections-per-address", c->max_connections_per_address,
              "open connections from one client address", 1, 1 << 20);
  add_number(server, "--head-timeout", o.head_timeout_s, "seconds for a request's head to arrive", 1e-3, 1e7);
  add_number(server, "--read-timeout", o.read_timeout_s, "seconds for a request's body to arrive", 1e-3, 1e7);
  add_number(server, "--shutdown-grace", o.shutdown_grace_s,
             "on SIGTERM, seconds running requests get to send their error answer", 1e-3, 1e7);
  add_number(server, "--retention-s", o.retention_s, "saves kept until fetched, at most this long", 1e-3, 1e7);
  add_integer(server, "--max-retained-mb", c->max_retained_mb, "all saves kept until fetched", 1, kMaxMb);
  add_engine_options(cmd, c->engine);
  return [&cmd, c] { return run(cmd, *c); };
}

}  // namespace nnsight::cli
