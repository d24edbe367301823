// int8_agreement_bench: how far 8-bit activations move greedy generation from
// the exact float32 model, for this engine's EngineArgs::fast_untraced and,
// when given, for llama.cpp's own path (its llama-simple, greedy) on the same
// GGUF and prompts.
//
//   int8_agreement_bench [--model F.gguf] [--tokens 32] [--threads 2]
//                        [--llama-simple PATH]
//
// The exact engine and the fast_untraced engine each generate every prompt of
// a fixed 32-prompt corpus greedily (all prompts in one batch; ignore_eos).
// Against the exact continuations it prints, per path: continuations
// identical, tokens before the first difference (summed), tokens equal at the
// same position, and for this engine the |log p| difference of the chosen
// token while the two agree. llama.cpp's continuations are text; they are
// compared as the exact continuation's text (identical, and the tokens of the
// exact continuation whose text llama.cpp's starts with).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nnsight/llm.hpp>

#include "core/model_path.h"
#include "core/tokenizer/tokenizer_loader.h"
#include "support/bench_support.h"

using namespace nnsight;

namespace {

const std::vector<std::string>& corpus() {
  static const std::vector<std::string> prompts = {
      "The capital of France is",
      "Once upon a time, in a small village,",
      "The best way to learn a new language is",
      "Water boils at a temperature of",
      "In 1969, the first humans landed on",
      "My favourite recipe for pancakes starts with",
      "The main difference between a virus and a bacterium is",
      "To write a good essay, you should",
      "The Great Wall of China was built to",
      "Photosynthesis is the process by which",
      "def fibonacci(n):",
      "The stock market fell sharply today because",
      "A healthy breakfast usually includes",
      "The theory of relativity states that",
      "Dear customer, thank you for your order.",
      "The weather forecast for tomorrow says",
      "Machine learning models are trained by",
      "The largest planet in our solar system is",
      "She opened the door and saw",
      "Here are three tips for better sleep:",
      "The French Revolution began in",
      "import numpy as np\n",
      "The human heart has four chambers:",
      "Shakespeare wrote many plays, including",
      "To make a cup of tea, first",
      "The internet was originally developed by",
      "Honey never spoils because",
      "The most important rule of investing is",
      "Mount Everest is located in",
      "A triangle has three sides, and a square has",
      "The Amazon rainforest is home to",
      "In the beginning of the meeting, the manager said",
  };
  return prompts;
}

struct Gen {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<std::vector<float>> logprobs;
  std::vector<std::string> texts;
};

Gen generate(const std::string& model, int64_t tokens, int64_t threads, bool fast) {
  LLM llm(EngineArgs().model(model).fast_untraced(fast).num_threads(threads).show_progress(false));
  const auto outs =
      llm.generate(corpus(), SamplingParams().temperature(0).max_tokens(tokens).ignore_eos(true).logprobs(0));
  Gen g;
  for (const auto& o : outs) {
    g.tokens.push_back(o.token_ids);
    std::vector<float> lp;
    for (const auto& t : o.logprobs) lp.push_back(t.logprob);
    g.logprobs.push_back(lp);
    g.texts.push_back(o.text);
  }
  return g;
}

std::string run_llama_simple(const std::string& exe, const std::string& model, const std::string& prompt,
                             int64_t tokens) {
  std::string quoted = "'";
  for (char c : prompt) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  quoted += "'";
  // llama-simple prints the prompt and its continuation on stdout, the rest on stderr.
  // (It takes no thread count; greedy decoding does not depend on one.)
  const std::string cmd = exe + " -m '" + model + "' -n " + std::to_string(tokens) + " " + quoted + " 2>/dev/null";
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    std::array<char, 4096> buf{};
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
    pclose(p);
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();  // the newline it ends with
  const size_t at = out.find(prompt);
  return at == std::string::npos ? out : out.substr(at + prompt.size());
}

}  // namespace

int main(int argc, char** argv) {
  std::string model = bench::default_model_path(), llama_simple;
  int64_t tokens = 32, threads = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--model")
      model = v;
    else if (a == "--tokens")
      tokens = std::stoll(v);
    else if (a == "--threads")
      threads = std::stoll(v);
    else if (a == "--llama-simple")
      llama_simple = v;
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  const Gen exact = generate(model, tokens, threads, false);
  const Gen fast = generate(model, tokens, threads, true);
  const size_t n = corpus().size();
  int64_t same = 0, prefix = 0, equal_at = 0, agreeing = 0;
  double dsum = 0, dmax = 0;
  for (size_t i = 0; i < n; ++i) {
    const auto& a = exact.tokens[i];
    const auto& b = fast.tokens[i];
    same += a == b;
    size_t k = 0;
    while (k < a.size() && k < b.size() && a[k] == b[k]) {
      const double d = std::fabs(exact.logprobs[i][k] - fast.logprobs[i][k]);
      dsum += d;
      dmax = std::max(dmax, d);
      ++agreeing;
      ++k;
    }
    prefix += static_cast<int64_t>(k);
    for (size_t j = 0; j < a.size() && j < b.size(); ++j) equal_at += a[j] == b[j];
  }
  const int64_t total = static_cast<int64_t>(n) * tokens;
  std::printf(
      "| path | continuations identical | tokens before the first difference | tokens equal at the same position | "
      "mean / max abs(log p exact - log p) of the chosen token while they agree |\n|---|---|---|---|---|\n");
  std::printf(
      "| this engine, fast_untraced | %lld of %zu | %lld of %lld (%.1f %%) | %lld of %lld | %.3f / %.3f (%lld tokens) "
      "|\n",
      static_cast<long long>(same), n, static_cast<long long>(prefix), static_cast<long long>(total),
      100.0 * static_cast<double>(prefix) / static_cast<double>(total), static_cast<long long>(equal_at),
      static_cast<long long>(total), agreeing ? dsum / static_cast<double>(agreeing) : 0.0, dmax,
      static_cast<long long>(agreeing));
  std::printf("RESULT int8 identical %lld\nRESULT int8 prefix_tokens %lld\n", static_cast<long long>(same),
              static_cast<long long>(prefix));
  if (!llama_simple.empty()) {
    // Text against text: identical continuations, and how many of the exact
    // continuation's tokens llama.cpp's text reproduces before it departs.
    const Tokenizer tok = load_tokenizer_for_model(resolve_model_path(model));
    int64_t lsame = 0, lprefix = 0;
    for (size_t i = 0; i < n; ++i) {
      const std::string got = run_llama_simple(llama_simple, model, corpus()[i], tokens);
      lsame += got == exact.texts[i];
      int64_t k = 0;
      const auto& want = exact.tokens[i];
      while (k < static_cast<int64_t>(want.size())) {
        const std::string head = tok.decode(std::vector<int32_t>(want.begin(), want.begin() + k + 1));
        if (got.compare(0, head.size(), head) != 0) break;
        ++k;
      }
      lprefix += k;
    }
    std::printf("| llama.cpp (llama-simple, greedy) | %lld of %zu | %lld of %lld (%.1f %%) | - | - |\n",
                static_cast<long long>(lsame), n, static_cast<long long>(lprefix), static_cast<long long>(total),
                100.0 * static_cast<double>(lprefix) / static_cast<double>(total));
    std::printf("RESULT llama_cpp identical %lld\nRESULT llama_cpp prefix_tokens %lld\n", static_cast<long long>(lsame),
                static_cast<long long>(lprefix));
  }
  return 0;
}
