// nnsight: command-line front of the library.
//   nnsight generate --model M --prompt P [...]
//   nnsight bench --model M --num-prompts N --input-len I --output-len O [...]
//   nnsight trace --model M --prompt P --graph FILE.json --out saves.safetensors
//   nnsight serve --model M [--port P] [--api-keys FILE]
//   nnsight capture-read --engine-id ID [--rank R] [--request ID] [--since SEQ] [--follow]
#include <cstdio>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include <nnsight/error.hpp>

#include "front/cli/commands.h"

namespace {
void usage(FILE* to) {
  std::fprintf(to,
               "usage: nnsight <command> [options]\n"
               "commands:\n"
               "  generate   generate text from a prompt (or a file of prompts)\n"
               "  trace      run intervention graphs written as JSON (docs/ir.md), save to safetensors\n"
               "  bench      measure prefill/decode throughput and latency\n"
               "  capture-read  print activations a running engine captures (docs/capture.md)\n"
               "  serve      an HTTP model server: OpenAI completions and traces as data (docs/server.md)\n"
               "run 'nnsight <command> --help' for its options\n");
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  // CLI11 picks the subcommand; each command parses its own options (CliArgs,
  // also CLI11) from the arguments after it.
  using Command = int (*)(int, char**);
  const std::pair<const char*, Command> commands[] = {{"generate", nnsight::cli::generate_command},
                                                      {"trace", nnsight::cli::trace_command},
                                                      {"bench", nnsight::cli::bench_command},
                                                      {"capture-read", nnsight::cli::capture_read_command},
                                                      {"serve", nnsight::cli::serve_command}};
  CLI::App app{"nnsight"};
  app.set_help_flag();
  Command chosen = nullptr;
  for (const auto& [name, fn] : commands) {
    CLI::App* sub = app.add_subcommand(name);
    sub->set_help_flag();
    sub->prefix_command();  // everything after the name belongs to the command
    sub->callback([&chosen, fn = fn] { chosen = fn; });
  }
  const std::string cmd = argv[1];
  try {
    app.parse(std::vector<std::string>{cmd});
  } catch (const CLI::ParseError&) {
    chosen = nullptr;
  }
  if (!chosen) {
    std::fprintf(stderr, "nnsight: unknown command '%s'\n", cmd.c_str());
    usage(stderr);
    return 2;
  }
  try {
    return chosen(argc, argv);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "nnsight %s: %s\n", cmd.c_str(), e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nnsight %s: error: %s\n", cmd.c_str(), e.what());
    return 1;
  }
}
