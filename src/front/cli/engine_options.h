// Engine options shared by the subcommands (--model, --dtype, --executor, ...).
#pragma once

#include <string>
#include <vector>

#include <nnsight/engine_args.hpp>

#include "front/cli/cli_args.h"

#define NNSIGHT_ENGINE_OPTIONS_HELP                                                                    \
  "  --model NAME|PATH      smollm2-135m (default), a .gguf file or a HF directory\n"                  \
  "  --dtype float32|bfloat16   --device cpu|cuda   --seed-engine S\n"                                 \
  "  --executor inproc|mp   --tensor-parallel-size N   --threads N\n"                                  \
  "  --tp-rendezvous tcp://HOST:PORT   --worker-addresses H:P,H:P,...  (docs/tensor_parallel.md)\n"    \
  "  --worker-secret-file F   secret shared with workers started by hand (or NNSIGHT_WORKER_SECRET)\n" \
  "  --max-worker-restarts N   (after worker failures; -1 = always (default), 0 = never)\n"            \
  "  --function-plugins LIB.so,...   libraries registering user functions (docs/functions.md)\n"       \
  "  --attach NAME=FILE@HOOK_POINT   an SAE, probe or steering vector (docs/attached-modules.md)\n"  \
  "  --max-num-seqs N   --max-num-batched-tokens N   --kv-cache-mb N   --block-size N\n"               \
  "  --intervention-memory-mb N   (per traced request; 0 = sized for the machine)\n"                   \
  "  --no-prefix-caching   --no-chunked-prefill   --no-progress\n"                                     \
  "  --dequantize   GGUF weights decoded to dtype at load, not kept packed (docs/weights.md)\n"        \
  "  --forward-hooks FILE|JSON   hook specs (docs/hooks.md)   --engine-id ID\n"                        \
  "  --capture   --capture-layers 0,5,10-12   --capture-sample-rate F\n"                               \
  "  --capture-compression-k K   --capture-buffer-gb G   (docs/capture.md)\n"

namespace nnsight::cli {

std::vector<std::string> engine_option_names();  // options taking a value
std::vector<std::string> engine_flag_names();    // options without one
EngineArgs engine_args_from(const CliArgs& args);

}  // namespace nnsight::cli
