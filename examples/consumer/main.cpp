// Generates a few tokens with the engine through the installed public API.
//   consumer <model> <prompt>
#include <cstdio>

#include <nnsight/llm.hpp>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: consumer MODEL PROMPT\n");
    return 2;
  }
  nnsight::LLM llm(nnsight::EngineArgs().model(argv[1]).show_progress(false));
  auto out = llm.generate(argv[2], nnsight::SamplingParams().temperature(0).max_tokens(3));
  std::printf("%s\n", out.text.c_str());
  return out.error.empty() ? 0 : 1;
}
