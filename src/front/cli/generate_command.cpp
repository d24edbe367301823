// nnsight generate: text generation from the command line.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <stdexcept>

#include <nlohmann/json.hpp>
#include <nnsight/error.hpp>
#include <nnsight/llm.hpp>

#include "core/tokenizer/chat_template.h"
#include "front/cli/cli_options.h"
#include "front/cli/commands.h"
#include "front/cli/engine_options.h"
#include "runner/engine/llm_access.h"

namespace nnsight::cli {

namespace {

struct GenerateOptions {
  std::vector<std::string> prompts, stop;
  std::string prompts_file;
  int64_t max_tokens = 64, top_k = 0, seed = 0;
  double temperature = 0, top_p = 1, min_p = 0;
  bool ignore_eos = false, json = false, chat = false;
  EngineOptions engine;
};

int run(const CLI::App& cmd, const GenerateOptions& o) {
  std::vector<std::string> prompts = o.prompts;
  if (!o.prompts_file.empty()) {
    std::ifstream in(o.prompts_file);
    if (!in) throw std::invalid_argument("cannot read --prompts-file " + o.prompts_file);
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) prompts.push_back(line);
  }
  if (prompts.empty()) throw std::invalid_argument("give --prompt TEXT or --prompts-file FILE");
  const bool batch = prompts.size() > 1 || !o.prompts_file.empty();

  SamplingParams params;
  params.max_tokens(o.max_tokens).temperature(o.temperature).top_p(o.top_p).top_k(o.top_k).min_p(o.min_p);
  if (cmd.count("--seed")) params.seed(static_cast<uint64_t>(o.seed));
  if (!o.stop.empty()) params.stop(o.stop);
  params.ignore_eos(o.ignore_eos);
  params.validate();

  LLM llm(engine_args_from(cmd, o.engine));
  std::vector<RequestOutput> outs;
  if (o.chat) {
    // The template already writes the special tokens (BOS, turn markers), so
    // the text is tokenized without adding them again.
    const auto& tokenizer = runner::LLMAccess::engine(llm).tokenizer();
    if (!tokenizer || tokenizer->chat_template().empty()) {
      throw ConfigError(
          "--chat: the model has no chat template (tokenizer_config.json chat_template or GGUF "
          "tokenizer.chat_template)");
    }
    const ChatTemplate chat(tokenizer->chat_template());
    std::vector<LLM::Handle> handles;
    for (const auto& p : prompts) {
      const std::string text = chat.render({{"user", p}}, true, tokenizer->bos_token(), tokenizer->eos_token());
      handles.push_back(llm.submit(llm.encode(text, false), params));
    }
    for (size_t k = 0; k < handles.size(); ++k) {
      outs.push_back(handles[k].result.get());
      outs.back().prompt = prompts[k];
    }
  } else {
    outs = llm.generate(prompts, params);
  }
  int status = 0;
  for (const auto& out : outs) {
    if (!out.error.empty()) {
      std::fprintf(stderr, "nnsight generate: request failed: %s\n", out.error.c_str());
      status = 1;
    }
    if (o.json) {
      nlohmann::json j = {
          {"text", out.text}, {"token_ids", out.token_ids}, {"finish_reason", to_string(out.finish_reason)}};
      if (batch) j["prompt"] = out.prompt;
      std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else {
      std::cout << (batch ? escape_newlines(out.text) : out.text) << "\n";
    }
  }
  std::cout.flush();
  return status;
}

}  // namespace

RunCommand add_generate_command(CLI::App& root) {
  auto o = std::make_shared<GenerateOptions>();
  CLI::App& cmd = *root.add_subcommand("generate", "generate text from a prompt (or a file of prompts)");
  cmd.footer(
      "Prints only the generated text on stdout (one line per prompt in batch mode, newlines escaped as \\n); logs "
      "go to stderr.");
  cmd.add_option("--prompt", o->prompts, "a prompt (repeat for several)")->allow_extra_args(false);
  cmd.add_option("--prompts-file", o->prompts_file, "one prompt per line (batch mode)");
  add_integer(cmd, "--max-tokens", o->max_tokens, "tokens to generate", 1);
  add_number(cmd, "--temperature", o->temperature, "0 = greedy");
  add_number(cmd, "--top-p", o->top_p, "nucleus sampling, in (0, 1]");
  add_integer(cmd, "--top-k", o->top_k, "0 = off", 0);
  add_number(cmd, "--min-p", o->min_p, "0 = off");
  add_integer(cmd, "--seed", o->seed, "sampling seed", 0);
  cmd.add_option("--stop", o->stop, "stop at this text (repeatable)")->allow_extra_args(false);
  cmd.add_flag("--ignore-eos", o->ignore_eos, "keep going after the end-of-sequence token");
  cmd.add_flag("--json", o->json, "print {\"text\":..., \"token_ids\":[...]} per prompt (one line each)");
  cmd.add_flag("--chat", o->chat, "each prompt is one user message, rendered with the model's chat template");
  add_engine_options(cmd, o->engine);
  return [&cmd, o] { return run(cmd, *o); };
}

}  // namespace nnsight::cli
