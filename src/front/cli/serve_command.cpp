// nnsight serve: the model server (src/server/model_server.h, docs/server.md).
#include <csignal>
#include <cstdio>
#include <iostream>
#include <stdexcept>

#include <unistd.h>

#include "front/cli/cli_args.h"
#include "front/cli/commands.h"
#include "front/cli/engine_options.h"
#include "server/model_server.h"

namespace nnsight::cli {

namespace {
const char* kHelp =
    "usage: nnsight serve --model NAME|PATH [--host H] [--port P] [--api-keys FILE] [options]\n"
    "  --host H               address to listen on (default 127.0.0.1)\n"
    "  --port P               port (default 8000; 0 = any free one, printed on stdout)\n"
    "  --api-keys FILE        'tenant:key' or 'tenant:sha256:<hex>' per line; without it, no\n"
    "                         authentication (docs/server.md)\n"
    "  --served-model-name N  the model id clients use (default: the --model value)\n"
    "  --replicas N           engines behind the server (default 1)\n"
    "  --replica-worker-addresses 'H:P,H:P;H:P,H:P'   workers started by hand, per replica\n"
    "Limits per API key:\n"
    "  --max-concurrent-traces N (8)   --max-queued-traces N (64)   --tokens-per-minute N (0 = off)\n"
    "Limits per request:\n"
    "  --max-saved-mb N (256)   --max-trace-seconds S (600)   --max-body-mb N (64)\n"
    "  --intervention-memory-mb N   (an engine option: each traced request's working memory)\n"
    "Server:\n"
    "  --max-connections N (512)   --max-connections-per-address N (64)\n"
    "  --head-timeout S (10)   --read-timeout S (30)   (a request's head, then its body, must arrive in time)\n"
    "  --shutdown-grace S (10)   (on SIGTERM, running requests get this long to send their error answer)\n"
    "  --retention-s S (3600)   --max-retained-mb N (1024)   (saves kept until fetched)\n"
    "Engine options:\n" NNSIGHT_ENGINE_OPTIONS_HELP;

volatile std::sig_atomic_t g_stop = 0;
}  // namespace

int serve_command(int argc, char** argv) {
  std::vector<std::string> flags = {"help"};
  for (const auto& f : engine_flag_names()) flags.push_back(f);
  std::vector<std::string> known = {"model",
                                    "host",
                                    "port",
                                    "api-keys",
                                    "served-model-name",
                                    "replicas",
                                    "replica-worker-addresses",
                                    "max-concurrent-traces",
                                    "max-queued-traces",
                                    "tokens-per-minute",
                                    "max-saved-mb",
                                    "max-trace-seconds",
                                    "max-body-mb",
                                    "max-connections",
                                    "max-connections-per-address",
                                    "head-timeout",
                                    "read-timeout",
                                    "shutdown-grace",
                                    "retention-s",
                                    "max-retained-mb",
                                    "help"};
  for (const auto& o : engine_option_names()) known.push_back(o);
  for (const auto& f : engine_flag_names()) known.push_back(f);
  CliArgs args(argc, argv, 2, flags, known);
  if (args.has("help")) {
    std::fputs(kHelp, stdout);
    return 0;
  }
  // Every number is range-checked before it is narrowed or scaled: --port
  // 4294967297 is not port 1, and --max-saved-mb 2^50 does not overflow.
  auto bounded = [&](const std::string& name, int64_t fallback, int64_t lo, int64_t hi) {
    const int64_t v = args.get_int(name, fallback);
    if (v < lo || v > hi)
      throw std::invalid_argument("--" + name + " must be " + std::to_string(lo) + " to " + std::to_string(hi) +
                                  ", got " + std::to_string(v));
    return v;
  };
  auto seconds = [&](const std::string& name, double fallback) {
    const double v = args.get_double(name, fallback);
    if (!(v > 0 && v <= 1e7)) throw std::invalid_argument("--" + name + " must be a positive number of seconds");
    return v;
  };
  constexpr int64_t kMaxMb = int64_t{1} << 30;  // 1 PiB: beyond any machine, far from overflow once scaled
  server::ServeOptions o;
  o.engine = engine_args_from(args);
  o.host = args.get("host", o.host);
  o.port = static_cast<int>(bounded("port", o.port, 0, 65535));
  o.api_keys_file = args.get("api-keys");
  o.served_model_name = args.get("served-model-name");
  o.replicas = bounded("replicas", 1, 1, 1024);
  o.replica_worker_addresses = args.get("replica-worker-addresses");
  o.limits.max_concurrent_traces = bounded("max-concurrent-traces", o.limits.max_concurrent_traces, 1, 1 << 20);
  o.limits.max_queued_traces = bounded("max-queued-traces", o.limits.max_queued_traces, 0, 1 << 20);
  o.limits.max_tokens_per_minute = bounded("tokens-per-minute", 0, 0, int64_t{1} << 50);
  o.limits.max_saved_bytes = bounded("max-saved-mb", 256, 1, kMaxMb) << 20;
  o.limits.max_trace_seconds = seconds("max-trace-seconds", o.limits.max_trace_seconds);
  o.max_body_bytes = static_cast<size_t>(bounded("max-body-mb", 64, 1, kMaxMb)) << 20;
  o.max_connections = static_cast<size_t>(bounded("max-connections", 512, 1, 1 << 20));
  o.max_connections_per_address = static_cast<size_t>(
      bounded("max-connections-per-address", static_cast<int64_t>(o.max_connections_per_address), 1, 1 << 20));
  o.head_timeout_s = seconds("head-timeout", o.head_timeout_s);
  o.read_timeout_s = seconds("read-timeout", o.read_timeout_s);
  o.shutdown_grace_s = seconds("shutdown-grace", o.shutdown_grace_s);
  o.retention_s = seconds("retention-s", o.retention_s);
  o.max_retained_bytes = bounded("max-retained-mb", 1024, 1, kMaxMb) << 20;

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

}  // namespace nnsight::cli
