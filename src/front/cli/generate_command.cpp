// nnsight generate: text generation from the command line.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <stdexcept>

#include <nlohmann/json.hpp>
#include <nnsight/error.hpp>
#include <nnsight/llm.hpp>

#include "core/tokenizer/chat_template.h"
#include "front/cli/cli_args.h"
#include "front/cli/commands.h"
#include "front/cli/engine_options.h"
#include "runner/engine/llm_access.h"

namespace nnsight::cli {

namespace {
const char* kHelp =
    "usage: nnsight generate --model NAME|PATH (--prompt TEXT | --prompts-file FILE) [options]\n"
    "  --prompt TEXT          prompt (repeat for several)\n"
    "  --prompts-file FILE    one prompt per line (batch mode)\n"
    "  --max-tokens N         tokens to generate (default 64)\n"
    "  --temperature T        0 = greedy (default 0)\n"
    "  --top-p P --top-k K --min-p P --seed S --stop STR (repeatable) --ignore-eos\n"
    "  --json                 print {\"text\":..., \"token_ids\":[...]} per prompt (one line each)\n"
    "  --chat                 each prompt is one user message, rendered with the model's chat template\n"
    "Engine options:\n" NNSIGHT_ENGINE_OPTIONS_HELP
    "Prints only the generated text on stdout (one line per prompt in batch mode,\n"
    "newlines escaped as \\n); logs go to stderr.\n";

}  // namespace

int generate_command(int argc, char** argv) {
  std::vector<std::string> flags = {"json", "ignore-eos", "chat", "help"};
  for (const auto& f : engine_flag_names()) flags.push_back(f);
  std::vector<std::string> known = {"model", "prompt", "prompts-file", "max-tokens", "temperature", "top-p", "top-k",
                                    "min-p", "seed",   "stop",         "ignore-eos", "json",        "chat",  "help"};
  for (const auto& o : engine_option_names()) known.push_back(o);
  for (const auto& f : engine_flag_names()) known.push_back(f);
  CliArgs args(argc, argv, 2, flags, known);
  if (args.has("help")) {
    std::fputs(kHelp, stdout);
    return 0;
  }

  std::vector<std::string> prompts = args.all("prompt");
  if (args.has("prompts-file")) {
    std::ifstream in(args.get("prompts-file"));
    if (!in) throw std::invalid_argument("cannot read --prompts-file " + args.get("prompts-file"));
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) prompts.push_back(line);
  }
  if (prompts.empty()) throw std::invalid_argument("give --prompt TEXT or --prompts-file FILE");
  const bool batch = prompts.size() > 1 || args.has("prompts-file");

  SamplingParams params;
  params.max_tokens(args.get_int("max-tokens", 64)).temperature(args.get_double("temperature", 0.0));
  params.top_p(args.get_double("top-p", 1.0)).top_k(args.get_int("top-k", 0)).min_p(args.get_double("min-p", 0.0));
  if (args.has("seed")) params.seed(static_cast<uint64_t>(args.get_int("seed", 0)));
  if (args.has("stop")) params.stop(args.all("stop"));
  params.ignore_eos(args.has("ignore-eos"));
  params.validate();

  LLM llm(engine_args_from(args));
  std::vector<RequestOutput> outs;
  if (args.has("chat")) {
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
  for (const auto& o : outs) {
    if (!o.error.empty()) {
      std::fprintf(stderr, "nnsight generate: request failed: %s\n", o.error.c_str());
      status = 1;
    }
    if (args.has("json")) {
      nlohmann::json j = {{"text", o.text}, {"token_ids", o.token_ids}, {"finish_reason", to_string(o.finish_reason)}};
      if (batch) j["prompt"] = o.prompt;
      std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else {
      std::cout << (batch ? escape_newlines(o.text) : o.text) << "\n";
    }
  }
  std::cout.flush();
  return status;
}

}  // namespace nnsight::cli
