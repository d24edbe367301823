// logit_lens_bench: what the logit lens inside the trace costs against the
// untraced request, on the default model, in one process, alternating the
// variants round after round (medians of per-round ratios):
//   untraced     a one-token request with an empty trace body
//   lens last    logit_lens over all 30 layers at the last prompt position
//   lens all     logit_lens over all 30 layers at every prompt position
// Every lens variant runs the final norm and the LM head once per layer
// inside the trace (`call` nodes), where the model runs.
//
//   logit_lens_bench [--model PATH] [--rounds 9]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <nnsight/nnsight.hpp>

using namespace nnsight;
using clock_type = std::chrono::steady_clock;

namespace {
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
}  // namespace

int main(int argc, char** argv) {
  std::string model = "smollm2-135m";
  int rounds = 9;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--model")) model = argv[i + 1];
    if (!std::strcmp(argv[i], "--rounds")) rounds = std::atoi(argv[i + 1]);
  }
  const std::string prompt = "The Eiffel Tower is located in the city of";
  LanguageModel lm(EngineArgs().model(model).show_progress(false));
  auto untraced = [&] { lm.trace(prompt, SamplingParams().temperature(0).max_tokens(1), [](Tracer&) {}); };
  auto lens_last = [&] { logit_lens(lm, prompt, LogitLensOptions().positions({-1})); };
  auto lens_all = [&] { logit_lens(lm, prompt); };
  auto time = [](const auto& f) {
    const auto t0 = clock_type::now();
    f();
    return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
  };
  for (int w = 0; w < 2; ++w) untraced(), lens_last(), lens_all();  // warm up
  std::vector<double> t0, t1, t2, r1, r2;
  for (int r = 0; r < rounds; ++r) {
    const double a = time(untraced), b = time(lens_last), c = time(lens_all);
    t0.push_back(a), t1.push_back(b), t2.push_back(c), r1.push_back(b / a), r2.push_back(c / a);
  }
  const size_t n = lm.encode(prompt).size();
  std::printf("model %s, prompt of %zu tokens, %d rounds, medians\n", model.c_str(), n, rounds);
  std::printf("| variant | ms | ratio to untraced (median of per-round ratios) |\n|---|---|---|\n");
  std::printf("| untraced request (1 token) | %.1f | 1.00 |\n", median(t0));
  std::printf("| logit lens, 30 layers x last position | %.1f | %.2f |\n", median(t1), median(r1));
  std::printf("| logit lens, 30 layers x %zu positions | %.1f | %.2f |\n", n, median(t2), median(r2));
  return 0;
}
