// `nnsight trace` on the default model: a hand-written JSON graph that
// ablates one MLP and saves two values writes a safetensors file whose
// tensors equal the same trace written in C++; the text goes to stdout.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>
#include <nnsight/nnsight.hpp>

#include "core/safetensors/safetensors_file.h"
#include "support/real_model.h"
#include "support/scratch_dir.h"

namespace nnsight {
namespace {

#ifndef NNSIGHT_CLI
#error "the test needs the nnsight CLI (NNSIGHT_CLI)"
#endif

struct CliRun {
  int status = -1;
  std::string output;  // stdout
  std::string errors;  // stderr
};

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

CliRun run_cli(const std::string& args) {
  CliRun r;
  testing::ScratchDir dir;
  const std::string err = dir.file("stderr");
  FILE* p = ::popen((std::string(NNSIGHT_CLI) + " " + args + " 2>" + quote(err)).c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  const auto bytes = testing::read_file_bytes(err);
  r.errors.assign(bytes.begin(), bytes.end());
  return r;
}

const char* kEiffel = "The Eiffel Tower is located in the city of";

TEST(RealModelTraceCli, AblationGraphMatchesTheCppTrace) {
  testing::ScratchDir dir;
  const std::string model = testing::default_model_path();
  const std::string graph = std::string(NNSIGHT_SOURCE_DIR) + "/tests/data/cli/ablate_mlp.json";
  const std::string out = dir.file("saves.safetensors");
  CliRun r = run_cli("trace --model " + quote(model) + " --prompt " + quote(kEiffel) + " --graph " + quote(graph) +
                     " --max-tokens 3 --out " + quote(out) + " --no-progress");
  ASSERT_EQ(r.status, 0) << r.errors;

  LanguageModel lm(EngineArgs().model(model).show_progress(false));
  Saved layer29, logits;
  TraceResult cpp = lm.trace(kEiffel, SamplingParams().temperature(0).max_tokens(3), [&](Tracer&) {
    auto mlp = lm.envoy("model.layers.28.mlp");
    mlp.output() = mlp.output() * 0.0;
    layer29 = lm.envoy("model.layers.29").output().save();
    logits = lm.logits().save();
  });
  EXPECT_EQ(r.output, cpp.text() + "\n");

  SafetensorsFile file(out);
  ASSERT_EQ(file.tensors().size(), 2u);
  at::Tensor h = file.load("layer29"), l = file.load("logits");
  EXPECT_EQ(h.sizes(), cpp[layer29].sizes());
  EXPECT_TRUE(at::equal(h, cpp[layer29]));
  EXPECT_TRUE(at::equal(l, cpp[logits]));
  EXPECT_EQ(file.metadata().at("format"), "nnsight.trace");
  EXPECT_EQ(nlohmann::json::parse(file.metadata().at("texts")), nlohmann::json({cpp.text()}));
  EXPECT_EQ(nlohmann::json::parse(file.metadata().at("prompts")), nlohmann::json({kEiffel}));

  // One graph for two prompts: the saves of each prompt under "<i>/".
  const std::string out2 = dir.file("two.safetensors");
  CliRun two = run_cli("trace --model " + quote(model) + " --prompt " + quote(kEiffel) + " --prompt " +
                       quote("The Colosseum is located in the city of") + " --graph " + quote(graph) + " --out " +
                       quote(out2) + " --no-progress");
  ASSERT_EQ(two.status, 0) << two.errors;
  SafetensorsFile f2(out2);
  EXPECT_EQ(f2.tensors().size(), 4u);
  EXPECT_LE((f2.load("0/logits") - cpp[logits]).abs().max().item<double>(), 1e-4);
  EXPECT_EQ(f2.load("1/layer29").size(0),
            static_cast<int64_t>(lm.encode("The Colosseum is located in the city of").size()));
}

// A graph naming "prompts": [0, 1] is one invoke over both prompts (docs/cli.md),
// the same as t.invoke({a, b}, body) in C++.
TEST(RealModelTraceCli, GraphNamingItsPromptsIsOneInvokeOverThem) {
  testing::ScratchDir dir;
  const std::string model = testing::default_model_path();
  const auto bytes = testing::read_file_bytes(std::string(NNSIGHT_SOURCE_DIR) + "/tests/data/cli/ablate_mlp.json");
  std::string text(bytes.begin(), bytes.end());
  text.replace(text.find('{'), 1, "{\n  \"prompts\": [0, 1],");
  const std::string graph = dir.file("both.json"), out = dir.file("both.safetensors");
  testing::write_file(graph, text);
  const char* kColosseum = "The Colosseum is located in the city of";
  CliRun r =
      run_cli("trace --model " + quote(model) + " --prompt " + quote(kEiffel) + " --prompt " + quote(kColosseum) +
              " --graph " + quote(graph) + " --max-tokens 2 --out " + quote(out) + " --no-progress");
  ASSERT_EQ(r.status, 0) << r.errors;

  LanguageModel lm(EngineArgs().model(model).show_progress(false));
  Saved layer29, logits;
  TraceResult cpp = lm.trace(SamplingParams().temperature(0).max_tokens(2), [&](Tracer& t) {
    t.invoke({kEiffel, kColosseum}, [&] {
      auto mlp = lm.envoy("model.layers.28.mlp");
      mlp.output() = mlp.output() * 0.0;
      layer29 = lm.envoy("model.layers.29").output().save();
      logits = lm.logits().save();
    });
  });
  ASSERT_EQ(cpp.outputs().size(), 2u);
  EXPECT_EQ(r.output, cpp.text(0) + "\n" + cpp.text(1) + "\n");
  SafetensorsFile file(out);
  ASSERT_EQ(file.tensors().size(), 2u);  // saved once, under their own names
  at::Tensor h = file.load("layer29"), l = file.load("logits");
  ASSERT_EQ(l.sizes(), (std::vector<int64_t>{2, 49152}));
  EXPECT_EQ(h.size(0), static_cast<int64_t>(lm.encode(kEiffel).size() + lm.encode(kColosseum).size()));
  EXPECT_TRUE(at::equal(h, cpp[layer29]));
  EXPECT_TRUE(at::equal(l, cpp[logits]));
}

TEST(RealModelTraceCli, GraphErrorsNameTheNodeAndItsPosition) {
  testing::ScratchDir dir;
  const std::string graph = std::string(NNSIGHT_SOURCE_DIR) + "/tests/data/cli/bad_reference.json";
  CliRun r = run_cli("trace --model " + quote(testing::default_model_path()) + " --prompt hi --graph " + quote(graph) +
                     " --out " + quote(dir.file("x.safetensors")) + " --no-progress");
  EXPECT_EQ(r.status, 1) << r.errors;
  EXPECT_NE(r.errors.find("bad_reference.json:4:5: node 1 (op 'softmax')"), std::string::npos) << r.errors;
  // A path the model does not have: found before anything runs, with the line.
  const std::string typo =
      dir.write("typo.json", "{\"nodes\": [\n  {\"kind\": \"get\", \"key\": \"model.layers.3.mpl.output\"}\n]}\n");
  r = run_cli("trace --model " + quote(testing::default_model_path()) + " --prompt hi --graph " + quote(typo) +
              " --out " + quote(dir.file("y.safetensors")) + " --no-progress");
  EXPECT_EQ(r.status, 1) << r.errors;
  EXPECT_NE(r.errors.find("typo.json:2"), std::string::npos) << r.errors;
  EXPECT_NE(r.errors.find("model.layers.3.mlp"), std::string::npos) << r.errors;
  // Usage errors.
  r = run_cli("trace --prompt hi --out x.safetensors");
  EXPECT_EQ(r.status, 2) << r.errors;
  EXPECT_NE(r.errors.find("--graph"), std::string::npos) << r.errors;
}

TEST(RealModelTraceCli, TraceThatCanNeverBeAdmittedExitsAtOnceNamingTheLimit) {
  testing::ScratchDir dir;
  const std::string graph = std::string(NNSIGHT_SOURCE_DIR) + "/tests/data/cli/ablate_mlp.json";
  const std::string model = quote(testing::default_model_path());
  const std::string prompts = " --prompt a --prompt b --prompt c --graph " + quote(graph) + " --out " +
                              quote(dir.file("x.safetensors")) + " --no-progress";
  const auto start = std::chrono::steady_clock::now();
  CliRun r = run_cli("trace --model " + model + " --max-num-seqs 2" + prompts);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.errors.find("max_num_seqs is 2"), std::string::npos) << r.errors;
  // Three prompts of three tokens each: one fits the budget of 4, the three together do not.
  r = run_cli("trace --model " + model +
              " --max-num-batched-tokens 4 --prompt 'one two three' --prompt 'four five six'"
              " --prompt 'seven eight nine' --graph " +
              quote(graph) + " --out " + quote(dir.file("y.safetensors")) + " --no-progress");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.errors.find("max_num_batched_tokens is 4"), std::string::npos) << r.errors;
  r = run_cli("trace --model " + model + " --kv-cache-mb 1 --max-tokens 4000" + prompts);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.errors.find("KV-cache blocks"), std::string::npos) << r.errors;
  // Three model loads included.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
}

// A list save's elements are named so that they sort in list order.
TEST(RealModelTraceCli, ListSavesAreNamedInSortableOrder) {
  testing::ScratchDir dir;
  const std::string graph = std::string(NNSIGHT_SOURCE_DIR) + "/tests/data/cli/samples_12.json";
  const std::string out = dir.file("tokens.safetensors");
  CliRun r =
      run_cli("trace --model " + quote(testing::default_model_path()) + " --prompt " + quote(kEiffel) + " --graph " +
              quote(graph) + " --max-tokens 12 --ignore-eos --out " + quote(out) + " --no-progress");
  ASSERT_EQ(r.status, 0) << r.errors;
  SafetensorsFile file(out);
  std::vector<std::string> names;
  for (const auto& t : file.tensors()) names.push_back(t.name);
  std::sort(names.begin(), names.end());
  ASSERT_EQ(names.size(), 12u);
  for (size_t i = 0; i < names.size(); ++i)
    EXPECT_EQ(names[i], "tokens." + std::string(i < 10 ? "0" : "") + std::to_string(i));
  // In that order they are the generated tokens.
  LanguageModel lm(EngineArgs().model(testing::default_model_path()).show_progress(false));
  auto cpp = lm.trace(kEiffel, SamplingParams().temperature(0).max_tokens(12).ignore_eos(true), [](Tracer&) {});
  for (size_t i = 0; i < names.size(); ++i)
    EXPECT_EQ(file.load(names[i]).reshape({-1})[0].item<int64_t>(), cpp.output().token_ids[i]) << names[i];
}

// Not a real-model test: every subcommand's --help lists the engine flags
// its parser accepts (the shared "Engine options" group; --dequantize was
// once accepted and missing from the help).
TEST(CliHelp, EverySubcommandListsTheEngineFlags) {
  for (const std::string cmd : {"generate", "trace", "serve", "bench"}) {
    const CliRun r = run_cli(cmd + " --help");
    EXPECT_EQ(r.status, 0) << cmd << ": " << r.errors;
    const std::string help = r.output + r.errors;
    for (const std::string flag : {"--no-prefix-caching", "--no-chunked-prefill", "--no-progress", "--capture",
                                   "--dequantize", "--fast-untraced"})
      EXPECT_NE(help.find(flag), std::string::npos) << "nnsight " << cmd << " --help does not list " << flag;
  }
}

// --fast-untraced: `nnsight generate` runs (its rows with 8-bit activations)
// and answers; with --capture it refuses to start, naming both.
TEST(RealModelTraceCli, FastUntracedGeneratesAndRefusesCapture) {
  const std::string model = " --model " + quote(testing::default_model_path()) + " --no-progress";
  const CliRun ok = run_cli("generate" + model + " --fast-untraced --max-tokens 3 --prompt " + quote(kEiffel));
  EXPECT_EQ(ok.status, 0) << ok.errors;
  EXPECT_NE(ok.output.find("Paris"), std::string::npos) << ok.output;
  const CliRun bad = run_cli("generate" + model + " --fast-untraced --capture --max-tokens 3 --prompt hi");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.errors.find("fast_untraced"), std::string::npos) << bad.errors;
  EXPECT_NE(bad.errors.find("capture"), std::string::npos) << bad.errors;
}

// Not a real-model test: usage errors are found before any model loads,
// exit with status 2 and name the option (and its range); help goes to stdout.
TEST(CliUsage, TypedOptionsNameTheOptionTheRangeAndTheConflict) {
  struct Case {
    std::string args, message;
  };
  const Case cases[] = {
      {"generate --prompt hi --max-tokens 99999999999999999999",
       "--max-tokens: expected an integer >= 1, got '99999999999999999999'"},
      {"generate --prompt hi --max-tokens 2.5", "--max-tokens: expected an integer >= 1, got '2.5'"},
      {"generate --prompt hi --temperature nan", "--temperature: expected a finite number, got 'nan'"},
      {"serve --port 70000", "--port: expected an integer in [0, 65535], got '70000'"},
      {"serve --max-saved-mb 0", "--max-saved-mb: expected an integer in [1, "},
      {"generate --prompt hi --bogus", "--bogus"},
      {"generate --prompt hi stray", "stray"},
      {"trace --prompt hi --graph g.json --out o --api-key k", "--api-key requires --remote"},
      {"capture-read --engine-id x --since 3 --latest 2", "--since excludes --latest"},
      {"capture-read --engine-id x --mark", "--mark requires --request"},
      {"capture-read --rank 1", "--engine-id is required"},
  };
  for (const auto& c : cases) {
    const CliRun r = run_cli(c.args);
    EXPECT_EQ(r.status, 2) << c.args << ": " << r.errors;
    EXPECT_NE(r.errors.find(c.message), std::string::npos) << c.args << ": " << r.errors;
  }
  CliRun r = run_cli("bogus");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.errors.find("unknown command 'bogus'"), std::string::npos) << r.errors;
  r = run_cli("--help");
  EXPECT_EQ(r.status, 0);
  for (const char* cmd : {"generate", "trace", "bench", "capture-read", "serve"})
    EXPECT_NE(r.output.find(cmd), std::string::npos) << cmd << " missing from: " << r.output;
  r = run_cli("serve --help");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.output.find("--max-connections-per-address"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Limits per request"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace nnsight
