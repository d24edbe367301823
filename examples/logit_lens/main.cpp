// Logit lens: what each decoder layer of the model would predict at each
// prompt position. Prints the table and writes the heatmap as SVG.
//   logit_lens [--model M] [--prompt TEXT] [--svg FILE]
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>

#include <nnsight/display.hpp>
#include <nnsight/nnsight.hpp>

int main(int argc, char** argv) {
  std::string model = "smollm2-135m";
  std::string prompt = "The Eiffel Tower is located in the city of";
  std::string svg_path = "logit_lens.svg";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--model"))
      model = argv[i + 1];
    else if (!std::strcmp(argv[i], "--prompt"))
      prompt = argv[i + 1];
    else if (!std::strcmp(argv[i], "--svg"))
      svg_path = argv[i + 1];
    else {
      std::fprintf(stderr, "usage: logit_lens [--model M] [--prompt TEXT] [--svg FILE]\n");
      return 2;
    }
  }
  try {
    nnsight::LanguageModel lm(nnsight::EngineArgs().model(model).show_progress(false));
    nnsight::LogitLens lens = nnsight::logit_lens(lm, prompt);

    // The same bundle a notebook displays: a text table and an SVG picture.
    nlohmann::json bundle = nnsight::mime_bundle_repr(lens);
    std::cout << bundle["text/plain"].get<std::string>();
    std::ofstream(svg_path) << bundle["image/svg+xml"].get<std::string>();
    std::cout << "wrote " << svg_path << "\n";

    const int64_t last = lens.num_layers() - 1;
    std::cout << "last layer predicts \"" << lens.token(last, -1) << "\" (p=" << lens.prob(last, -1) << ")\n";
    // Where the final answer first becomes the top token.
    for (int64_t r = 0; r < lens.num_layers(); ++r) {
      if (lens.token_id(r, -1) == lens.token_id(last, -1)) {
        std::cout << "first layer with that answer: " << lens.layers[static_cast<size_t>(r)] << "\n";
        break;
      }
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "logit_lens: %s\n", e.what());
    return 1;
  }
}
