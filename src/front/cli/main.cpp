// nnsight: command-line front of the library.
//   nnsight generate --model M --prompt P [...]
//   nnsight bench --model M --num-prompts N --input-len I --output-len O [...]
//   nnsight trace --model M --prompt P --graph FILE.json --out saves.safetensors
//   nnsight capture-read --engine-id ID [--rank R] [--request ID] [--since SEQ] [--follow]
#include <cstdio>
#include <cstring>
#include <exception>
#include <stdexcept>

#include <nnsight/error.hpp>

#include "front/cli/commands.h"

namespace {
void usage() {
  std::fprintf(stderr,
               "usage: nnsight <command> [options]\n"
               "commands:\n"
               "  generate   generate text from a prompt (or a file of prompts)\n"
               "  trace      run intervention graphs written as JSON (docs/ir.md), save to safetensors\n"
               "  bench      measure prefill/decode throughput and latency\n"
               "  capture-read  print activations a running engine captures (docs/capture.md)\n"
               "run 'nnsight <command> --help' for its options\n");
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    usage();
    return argc < 2 ? 2 : 0;
  }
  const std::string cmd = argv[1];
  try {
    if (cmd == "generate") return nnsight::cli::generate_command(argc, argv);
    if (cmd == "trace") return nnsight::cli::trace_command(argc, argv);
    if (cmd == "bench") return nnsight::cli::bench_command(argc, argv);
    if (cmd == "capture-read") return nnsight::cli::capture_read_command(argc, argv);
    std::fprintf(stderr, "nnsight: unknown command '%s'\n", cmd.c_str());
    usage();
    return 2;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "nnsight %s: %s\n", cmd.c_str(), e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nnsight %s: error: %s\n", cmd.c_str(), e.what());
    return 1;
  }
}
