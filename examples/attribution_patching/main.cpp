// Attribution patching (NNsight's tutorial) on the residual stream: which
// layers' last-token outputs carry the difference between a clean and a
// corrupted prompt? One gradient trace estimates every layer's patching
// effect at once, (clean - corrupted) . d metric / d output, with metric the
// logit difference of the two answers; real patching (one trace per layer)
// measures it. Prints both and their rank correlation.
//   attribution_patching [--model M] [--clean TEXT] [--corrupt TEXT] [--answers " Paris" " Rome"]
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include <nnsight/nnsight.hpp>

using namespace nnsight;

namespace {
std::vector<double> ranks(const std::vector<double>& v) {
  std::vector<size_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (size_t i = 0; i < order.size(); ++i) r[order[i]] = static_cast<double>(i);
  return r;
}
}  // namespace

int main(int argc, char** argv) {
  std::string model = "smollm2-135m";
  std::string clean = "The Eiffel Tower is located in the city of";
  std::string corrupt = "The Colosseum is located in the city of";
  std::string good = " Paris", bad = " Rome";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--model")) {
      model = argv[i + 1];
    } else if (!std::strcmp(argv[i], "--clean")) {
      clean = argv[i + 1];
    } else if (!std::strcmp(argv[i], "--corrupt")) {
      corrupt = argv[i + 1];
    } else if (!std::strcmp(argv[i], "--answers") && i + 2 < argc) {
      good = argv[i + 1];
      bad = argv[i + 2];
      ++i;
    } else {
      std::fprintf(stderr, "usage: attribution_patching [--model M] [--clean T] [--corrupt T] [--answers A B]\n");
      return 2;
    }
  }
  try {
    LanguageModel lm(EngineArgs().model(model).show_progress(false));
    const auto g = lm.encode(good, false), b = lm.encode(bad, false);
    if (g.size() != 1 || b.size() != 1) throw Error("each answer must be one token");
    const int64_t layers = lm.config().num_layers;
    const SamplingParams greedy = SamplingParams().temperature(0).max_tokens(1);
    auto path = [](int64_t l) { return "model.layers." + std::to_string(l); };

    // One trace: the clean outputs, the corrupted outputs and their gradients.
    std::vector<Saved> c(layers), x(layers), grad(layers);
    Saved metric;
    TraceResult attr = lm.trace(greedy, [&](Tracer& t) {
      t.invoke(clean, [&] {
        for (int64_t l = 0; l < layers; ++l) c[l] = lm.envoy(path(l)).output()[{-1}].save();
      });
      t.invoke(corrupt, [&] {
        std::vector<Proxy> h;
        for (int64_t l = 0; l < layers; ++l) h.push_back(lm.envoy(path(l)).output());
        auto logits = lm.logits();
        auto m = logits[{0, g[0]}] - logits[{0, b[0]}];
        m.backward();
        metric = m.save();
        for (int64_t l = 0; l < layers; ++l) {
          x[l] = h[l][{-1}].save();
          grad[l] = h[l].grad()[{-1}].save();
        }
      });
    });
    const double base = attr[metric].item<double>();

    std::vector<double> estimate(layers), real(layers);
    for (int64_t l = 0; l < layers; ++l) {
      estimate[l] = ((attr[c[l]] - attr[x[l]]) * attr[grad[l]]).sum().item<double>();
      Saved m;
      TraceResult patched = lm.trace(greedy, [&](Tracer& t) {
        Proxy h;
        t.invoke(clean, [&] { h = lm.envoy(path(l)).output()[{-1}]; });
        t.invoke(corrupt, [&] {
          lm.envoy(path(l)).output()[{-1}] = h;
          auto logits = lm.logits();
          m = (logits[{0, g[0]}] - logits[{0, b[0]}]).save();
        });
      });
      real[l] = patched[m].item<double>() - base;
    }

    std::printf("metric: logit(%s) - logit(%s) on the corrupted prompt = %.3f\n", good.c_str(), bad.c_str(), base);
    std::printf("layer  attribution  real patching\n");
    for (int64_t l = 0; l < layers; ++l)
      std::printf("%5lld  %+11.3f  %+13.3f\n", static_cast<long long>(l), estimate[l], real[l]);
    const std::vector<double> re = ranks(estimate), rr = ranks(real);
    double d2 = 0;
    for (int64_t l = 0; l < layers; ++l) d2 += (re[l] - rr[l]) * (re[l] - rr[l]);
    const double n = static_cast<double>(layers);
    const double rho = 1.0 - 6.0 * d2 / (n * (n * n - 1));
    std::printf("Spearman rank correlation of attribution and real patching: %.3f\n", rho);
    return rho > 0.5 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "attribution_patching: %s\n", e.what());
    return 1;
  }
}
