// Activation patching across two prompts: the residual stream of one layer at
// the last token of a source prompt replaces the same activation of a target
// prompt, in one batched trace. Prints both prompts' answers, clean and patched.
//   activation_patching [--model M] [--layer L] [--source TEXT] [--target TEXT]
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

#include <nnsight/nnsight.hpp>

using namespace nnsight;

int main(int argc, char** argv) {
  std::string model = "smollm2-135m";
  std::string source = "The Eiffel Tower is located in the city of";
  std::string target = "The Colosseum is located in the city of";
  int layer = 25;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--model"))
      model = argv[i + 1];
    else if (!std::strcmp(argv[i], "--layer"))
      layer = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--source"))
      source = argv[i + 1];
    else if (!std::strcmp(argv[i], "--target"))
      target = argv[i + 1];
    else {
      std::fprintf(stderr, "usage: activation_patching [--model M] [--layer L] [--source TEXT] [--target TEXT]\n");
      return 2;
    }
  }
  try {
    LanguageModel lm(EngineArgs().model(model).show_progress(false));
    const SamplingParams greedy = SamplingParams().temperature(0).max_tokens(1);
    const std::string path = "model.layers." + std::to_string(layer);

    // Both prompts as they are.
    TraceResult clean = lm.trace(greedy, [&](Tracer& t) {
      t.invoke(source, [] {});
      t.invoke(target, [] {});
    });
    // Invoke 0 reads the source's activation; invoke 1 writes it into the target.
    TraceResult patched = lm.trace(greedy, [&](Tracer& t) {
      Proxy h;
      t.invoke(source, [&] { h = lm.envoy(path).output()[{-1}]; });
      t.invoke(target, [&] { lm.envoy(path).output()[{-1}] = h; });
    });

    std::cout << "source: \"" << source << "\" -> \"" << clean.text(0) << "\"\n";
    std::cout << "target: \"" << target << "\" -> \"" << clean.text(1) << "\"\n";
    std::cout << "target patched at " << path << " (last token) -> \"" << patched.text(1) << "\"\n";
    const bool changed = patched.text(1) != clean.text(1);
    std::cout << (changed ? "the patch changed the target's answer\n" : "the patch did not change the answer\n");
    return changed ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "activation_patching: %s\n", e.what());
    return 1;
  }
}
