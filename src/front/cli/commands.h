// The nnsight subcommands. Each declares itself on the root CLI11 app (its
// typed options, their help, which need or exclude which) and returns what
// runs it once the command line is parsed: the process exit status; output
// goes to stdout, logs and progress to stderr.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace nnsight::cli {

using RunCommand = std::function<int()>;

RunCommand add_generate_command(CLI::App& root);
RunCommand add_trace_command(CLI::App& root);
RunCommand add_bench_command(CLI::App& root);
RunCommand add_capture_read_command(CLI::App& root);
RunCommand add_serve_command(CLI::App& root);

}  // namespace nnsight::cli
