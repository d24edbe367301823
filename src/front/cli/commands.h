// The nnsight subcommands. Each returns the process exit status; output goes
// to stdout, logs and progress to stderr.
#pragma once

namespace nnsight::cli {

int generate_command(int argc, char** argv);
int bench_command(int argc, char** argv);
int capture_read_command(int argc, char** argv);
int trace_command(int argc, char** argv);
int serve_command(int argc, char** argv);

}  // namespace nnsight::cli
