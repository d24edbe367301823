// nnsight: command-line front of the library. One CLI11 app with a
// subcommand per command (src/front/cli/*_command.cpp); each declares its
// typed options, and CLI11 writes the help and checks needs/excludes.
//   nnsight generate --model M --prompt P [...]
//   nnsight bench --model M --num-prompts N --input-len I --output-len O [...]
//   nnsight trace --model M --prompt P --graph FILE.json --out saves.safetensors
//   nnsight serve --model M [--port P] [--api-keys FILE]
//   nnsight capture-read --engine-id ID [--rank R] [--request ID] [--since SEQ] [--follow]
#include <cstdio>
#include <exception>
#include <map>
#include <stdexcept>
#include <string>

#include <CLI/CLI.hpp>

#include <nnsight/error.hpp>

#include "front/cli/commands.h"

int main(int argc, char** argv) {
  namespace cli = nnsight::cli;
  CLI::App app{"nnsight: generate, trace and serve with interventions (docs/cli.md)", "nnsight"};
  app.require_subcommand(1);
  app.footer("run 'nnsight <command> --help' for its options");
  std::map<std::string, cli::RunCommand> commands;
  commands["generate"] = cli::add_generate_command(app);
  commands["trace"] = cli::add_trace_command(app);
  commands["bench"] = cli::add_bench_command(app);
  commands["capture-read"] = cli::add_capture_read_command(app);
  commands["serve"] = cli::add_serve_command(app);

  const std::string first = argc > 1 ? argv[1] : "";
  if (argc < 2) {
    std::fputs(app.help().c_str(), stderr);
    return 2;
  }
  if (first != "--help" && first != "-h" && !commands.count(first)) {
    std::fprintf(stderr, "nnsight: unknown command '%s'\n%s", first.c_str(), app.help().c_str());
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    // Help asked of a command is that command's; it goes to stdout.
    const auto chosen = app.get_subcommands();
    std::fputs((chosen.empty() ? app.help() : chosen.front()->help()).c_str(), stdout);
    return 0;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "nnsight %s: %s\nrun 'nnsight %s --help' for its options\n", first.c_str(), e.what(),
                 first.c_str());
    return 2;
  }
  try {
    return commands.at(first)();
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "nnsight %s: %s\n", first.c_str(), e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nnsight %s: error: %s\n", first.c_str(), e.what());
    return 1;
  }
}
