// nnsight trace: runs intervention graphs written in the JSON form
// (docs/ir.md) on prompts and writes every saved value to a safetensors file.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <stdexcept>

#include <nlohmann/json.hpp>
#include <nnsight/error.hpp>
#include <nnsight/llm.hpp>

#include "front/cli/cli_options.h"
#include "front/cli/commands.h"
#include "front/cli/engine_options.h"
#include "front/trace_client/graph_trace.h"
#include "front/trace_client/trace_result_file.h"
#include "front/remote/http_client.h"
#include "front/remote/sampling_params_json.h"

namespace nnsight::cli {

namespace {

struct TraceOptions {
  std::vector<std::string> prompts, graphs;
  std::string out, remote, api_key;
  int64_t max_tokens = 1, top_k = 0, seed = 0;
  double temperature = 0, top_p = 1;
  bool ignore_eos = false;
  EngineOptions engine;
};

// --remote URL: the same trace on a server (POST /v1/traces?wait=1), with the
// files' own text and names so its messages point into them.
int remote_trace(const CLI::App& cmd, const TraceOptions& o, const SamplingParams& params) {
  const std::vector<std::string>& graph_paths = o.graphs;
  nlohmann::json graphs = nlohmann::json::array(), names = nlohmann::json::array();
  for (const auto& path : graph_paths) {
    std::ifstream in(path, std::ios::binary);
    graphs.push_back(std::string(std::istreambuf_iterator<char>(in), {}));
    names.push_back(path);
  }
  nlohmann::json body = {{"prompts", o.prompts},
                         {"graphs", graphs},
                         {"graph_names", names},
                         {"sampling_params", remote::sampling_params_to_json(params)}};
  if (cmd.count("--model")) body["model"] = o.engine.model;
  std::string key = o.api_key;
  if (key.empty())
    if (const char* env = std::getenv("NNSIGHT_API_KEY")) key = env;
  remote::HttpClient http(o.remote, key);
  remote::HttpResult r = http.request("POST", "/v1/traces?wait=1", body.dump());
  if (r.status != 200) throw Error(remote::error_message(r));
  TraceResult result = tracing::decode_trace_result(r.body, "the server's answer");
  std::ofstream out(o.out, std::ios::binary);
  out.write(r.body.data(), static_cast<std::streamsize>(r.body.size()));
  if (!out) throw Error("cannot write '" + o.out + "'");
  for (const auto& output : result.outputs()) std::cout << escape_newlines(output.text) << "\n";
  std::cout.flush();
  return 0;
}

int run(const CLI::App& cmd, const TraceOptions& o) {
  const std::vector<std::string>& prompts = o.prompts;
  const std::vector<std::string>& graph_paths = o.graphs;
  SamplingParams params;
  params.max_tokens(o.max_tokens).temperature(o.temperature).top_p(o.top_p).top_k(o.top_k);
  if (cmd.count("--seed")) params.seed(static_cast<uint64_t>(o.seed));
  params.ignore_eos(o.ignore_eos);
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

  if (!o.remote.empty()) return remote_trace(cmd, o, params);
  LLM llm(engine_args_from(cmd, o.engine));
  TraceResult result = tracing::run_graph_trace(llm, prompts, graphs, params);

  tracing::write_trace_result(o.out, result, prompts);
  for (const auto& output : result.outputs()) std::cout << escape_newlines(output.text) << "\n";
  std::cout.flush();
  return 0;
}

}  // namespace

RunCommand add_trace_command(CLI::App& root) {
  auto o = std::make_shared<TraceOptions>();
  CLI::App& cmd = *root.add_subcommand(
      "trace", "run intervention graphs written as JSON (docs/ir.md) on prompts, save to safetensors");
  cmd.footer(
      "Prints the generated text on stdout, one line per prompt (newlines escaped as \\n). Errors in a graph name "
      "the node and its line:column in the JSON file.");
  cmd.add_option("--prompt", o->prompts, "a prompt: one invoke of the trace (repeat for several)")
      ->allow_extra_args(false)
      ->required();
  cmd.add_option("--graph", o->graphs,
                 "FILE.json: an intervention graph (docs/ir.md), one for every prompt (in --prompt order) or one "
                 "that every prompt runs; a graph with \"prompts\": [i, ...] is one invoke over those prompts")
      ->allow_extra_args(false)
      ->required();
  cmd.add_option("--out", o->out,
                 "FILE.safetensors for the saved values (a list save 'x' becomes 'x.0', 'x.1', ...; a graph run by "
                 "several prompts saves under '<prompt index>/<name>')")
      ->required();
  add_integer(cmd, "--max-tokens", o->max_tokens, "tokens to generate", 1);
  add_number(cmd, "--temperature", o->temperature, "0 = greedy");
  add_number(cmd, "--top-p", o->top_p, "nucleus sampling, in (0, 1]");
  add_integer(cmd, "--top-k", o->top_k, "0 = off", 0);
  add_integer(cmd, "--seed", o->seed, "sampling seed", 0);
  cmd.add_flag("--ignore-eos", o->ignore_eos, "keep going after the end-of-sequence token");
  CLI::Option* remote = cmd.add_option(
      "--remote", o->remote, "http://host:port: run it on an `nnsight serve` server instead of loading the model here");
  cmd.add_option("--api-key", o->api_key, "the server's key (default: $NNSIGHT_API_KEY)")->needs(remote);
  add_engine_options(cmd, o->engine);
  return [&cmd, o] { return run(cmd, *o); };
}

}  // namespace nnsight::cli
