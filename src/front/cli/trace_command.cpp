// nnsight trace: runs intervention graphs written in the JSON form
// (docs/ir.md) on prompts and writes every saved value to a safetensors file.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <stdexcept>

#include <nlohmann/json.hpp>
#include <nnsight/error.hpp>
#include <nnsight/llm.hpp>

#include "front/cli/cli_args.h"
#include "front/cli/commands.h"
#include "front/cli/engine_options.h"
#include "front/trace_client/graph_trace.h"
#include "front/trace_client/trace_result_file.h"
#include "front/remote/http_client.h"
#include "front/remote/sampling_params_json.h"

namespace nnsight::cli {

namespace {
const char* kHelp =
    "usage: nnsight trace --model NAME|PATH --prompt TEXT [--prompt TEXT ...] --graph FILE.json [--graph ...]\n"
    "                     --out FILE.safetensors [options]\n"
    "  --prompt TEXT          a prompt: one invoke of the trace (repeat for several)\n"
    "  --graph FILE.json      an intervention graph in the JSON form of docs/ir.md: one for\n"
    "                         every prompt (in --prompt order), or one that every prompt runs;\n"
    "                         a graph with \"prompts\": [i, ...] is one invoke over those prompts\n"
    "                         (--prompt indices from 0; then every graph names its prompts)\n"
    "  --out FILE             where the saved values go (safetensors; a list save 'x' becomes\n"
    "                         'x.0', 'x.1', ...; a shared graph run by several prompts saves\n"
    "                         under '<prompt index>/<name>')\n"
    "  --max-tokens N         tokens to generate (default 1)\n"
    "  --temperature T        0 = greedy (default 0)\n"
    "  --top-p P --top-k K --seed S --ignore-eos\n"
    "  --remote URL           run it on an `nnsight serve` server (http://host:port) instead of\n"
    "                         loading the model here; --api-key KEY (or NNSIGHT_API_KEY)\n"
    "Engine options:\n" NNSIGHT_ENGINE_OPTIONS_HELP
    "Prints the generated text on stdout, one line per prompt (newlines escaped as \\n).\n"
    "Errors in a graph name the node and its line:column in the JSON file.\n";

// --remote URL: the same trace on a server (POST /v1/traces?wait=1), with the
// files' own text and names so its messages point into them.
int remote_trace(const CliArgs& args, const std::vector<std::string>& prompts,
                 const std::vector<std::string>& graph_paths, const SamplingParams& params) {
  nlohmann::json graphs = nlohmann::json::array(), names = nlohmann::json::array();
  for (const auto& path : graph_paths) {
    std::ifstream in(path, std::ios::binary);
    graphs.push_back(std::string(std::istreambuf_iterator<char>(in), {}));
    names.push_back(path);
  }
  nlohmann::json body = {{"prompts", prompts},
                         {"graphs", graphs},
                         {"graph_names", names},
                         {"sampling_params", remote::sampling_params_to_json(params)}};
  if (args.has("model")) body["model"] = args.get("model");
  std::string key = args.get("api-key");
  if (key.empty())
    if (const char* env = std::getenv("NNSIGHT_API_KEY")) key = env;
  remote::HttpClient http(args.get("remote"), key);
  remote::HttpResult r = http.request("POST", "/v1/traces?wait=1", body.dump());
  if (r.status != 200) throw Error(remote::error_message(r));
  TraceResult result = tracing::decode_trace_result(r.body, "the server's answer");
  std::ofstream out(args.get("out"), std::ios::binary);
  out.write(r.body.data(), static_cast<std::streamsize>(r.body.size()));
  if (!out) throw Error("cannot write '" + args.get("out") + "'");
  for (const auto& o : result.outputs()) std::cout << escape_newlines(o.text) << "\n";
  std::cout.flush();
  return 0;
}

}  // namespace

int trace_command(int argc, char** argv) {
  std::vector<std::string> flags = {"ignore-eos", "help"};
  for (const auto& f : engine_flag_names()) flags.push_back(f);
  std::vector<std::string> known = {"model", "prompt", "graph",      "out",  "max-tokens", "temperature", "top-p",
                                    "top-k", "seed",   "ignore-eos", "help", "remote",     "api-key"};
  for (const auto& o : engine_option_names()) known.push_back(o);
  for (const auto& f : engine_flag_names()) known.push_back(f);
  CliArgs args(argc, argv, 2, flags, known);
  if (args.has("help")) {
    std::fputs(kHelp, stdout);
    return 0;
  }

  const std::vector<std::string> prompts = args.all("prompt");
  const std::vector<std::string> graph_paths = args.all("graph");
  if (prompts.empty()) throw std::invalid_argument("give at least one --prompt TEXT");
  if (graph_paths.empty()) throw std::invalid_argument("give --graph FILE.json (docs/ir.md)");
  if (!args.has("out")) throw std::invalid_argument("give --out FILE.safetensors for the saved values");

  SamplingParams params;
  params.max_tokens(args.get_int("max-tokens", 1)).temperature(args.get_double("temperature", 0.0));
  params.top_p(args.get_double("top-p", 1.0)).top_k(args.get_int("top-k", 0));
  if (args.has("seed")) params.seed(static_cast<uint64_t>(args.get_int("seed", 0)));
  params.ignore_eos(args.has("ignore-eos"));
  params.validate();

  // Graph files are read and decoded before the model loads: a typo costs no load time.
  std::vector<tracing::GraphFile> graphs;
  for (const auto& path : graph_paths) {
    graphs.push_back(tracing::load_graph_file(path));
    tracing::validate_graph_file(graphs.back());
  }
  bool named = false;
  for (const auto& g : graphs) named = named || !g.prompts.empty();
  if (!named && graph_paths.size() != 1 && graph_paths.size() != prompts.size())
    throw std::invalid_argument("give one --graph for all prompts or one per --prompt (got " +
                                std::to_string(graph_paths.size()) + " graphs for " + std::to_string(prompts.size()) +
                                " prompts)");
  tracing::invoke_prompts(graphs, prompts.size());  // graphs naming their "prompts" fit the prompts

  if (args.has("remote")) return remote_trace(args, prompts, graph_paths, params);
  LLM llm(engine_args_from(args));
  TraceResult result = tracing::run_graph_trace(llm, prompts, graphs, params);

  tracing::write_trace_result(args.get("out"), result, prompts);
  for (const auto& o : result.outputs()) std::cout << escape_newlines(o.text) << "\n";
  std::cout.flush();
  return 0;
}

}  // namespace nnsight::cli
