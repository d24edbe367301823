// forward_hooks specs attached to models and engines: the seed's warnings
// and errors, fnmatch targeting, configs reaching factories, outputs
// replaced through built-in and plugin hooks (checked against models whose
// weights make the same change), hooks in worker processes, and removal when
// the runner goes away.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <nnsight/error.hpp>
#include <nnsight/forward_hook.hpp>

#include "front/hooks/forward_hook_installer.h"
#include "models/llama.h"
#include "runner/engine/engine.h"
#include "support/log_capture.h"
#include "support/scratch_dir.h"
#include "support/tiny_checkpoint.h"
#include "support/tiny_engine.h"
#include "support/tiny_models.h"

namespace nnsight {
namespace {

using nlohmann::json;
using testing::LogCapture;

// A factory the tests register: remembers the configs it was given and
// counts the calls of the hooks it made.
struct Recorder {
  std::vector<json> configs;
  std::vector<std::string> called_on;
};
Recorder& recorder() {
  static Recorder r;
  return r;
}
const detail::HookFactoryRegistrar kRecord("test_hooks", "record", [](const json& config) -> ForwardHookFn {
  recorder().configs.push_back(config);
  return [](const HookedModule& m, const HookValue&, const HookValue&) -> std::optional<HookValue> {
    recorder().called_on.push_back(m.path);
    return std::nullopt;
  };
});
const detail::HookFactoryRegistrar kNone("test_hooks", "none", [](const json&) { return ForwardHookFn(); });
const detail::HookFactoryRegistrar kBadShape("test_hooks", "bad_shape", [](const json&) -> ForwardHookFn {
  return [](const HookedModule&, const HookValue&, const HookValue& out) -> std::optional<HookValue> {
    return HookValue(out.tensor().narrow(-1, 0, 1));
  };
});

int64_t attached(CausalLM& model) {
  int64_t n = 0;
  for (auto& [p, m] : model.named_hookable_modules())
    if (m->has_hooks()) ++n;
  return n;
}

std::string config_error(CausalLM& model, const json& specs) {
  try {
    hooks::install_forward_hooks(model, specs);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ForwardHooks, SpecWithoutTargetModulesIsSkippedWithWarning) {
  auto model = testing::tiny_llama();
  LogCapture log;
  auto installed =
      hooks::install_forward_hooks(*model, json::parse(R"([{"name": "a", "hook_factory": "test_hooks:record"},
                              {"name": "b", "target_modules": [], "hook_factory": "test_hooks:record"}])"));
  EXPECT_EQ(installed.size(), 0u);
  EXPECT_EQ(attached(*model), 0);
  EXPECT_EQ(log.messages(LogLevel::kWarning),
            (std::vector<std::string>{"Hook spec 'a' has no 'target_modules', skipping",
                                      "Hook spec 'b' has no 'target_modules', skipping"}));
}

TEST(ForwardHooks, SpecWithoutHookFactoryIsSkippedWithWarning) {
  auto model = testing::tiny_llama();
  LogCapture log;
  auto installed = hooks::install_forward_hooks(*model, json::parse(R"([{"name": "x", "target_modules": ["model.norm"]},
                                                           {"target_modules": ["model.norm"], "hook_factory": ""}])"));
  EXPECT_EQ(installed.size(), 0u);
  EXPECT_EQ(log.messages(LogLevel::kWarning),
            (std::vector<std::string>{"Hook spec 'x' has no 'hook_factory', skipping",
                                      "Hook spec '' has no 'hook_factory', skipping"}));
}

TEST(ForwardHooks, FactoryReturningNullIsSkippedWithWarning) {
  auto model = testing::tiny_llama();
  LogCapture log;
  auto installed = hooks::install_forward_hooks(
      *model, json::parse(R"([{"name": "n", "target_modules": ["model.norm"], "hook_factory": "test_hooks:none"},
                              {"name": "p", "target_modules": ["model.norm"],
                               "hook_factory": ")" +
                          std::string(NNSIGHT_TEST_PLUGIN) + R"(:none"}])"));
  EXPECT_EQ(installed.size(), 0u);
  EXPECT_EQ(attached(*model), 0);
  EXPECT_EQ(
      log.messages(LogLevel::kWarning),
      (std::vector<std::string>{"Hook factory 'test_hooks:none' for spec 'n' returned None, not registering any hook",
                                "Hook factory '" + std::string(NNSIGHT_TEST_PLUGIN) +
                                    ":none' for spec 'p' returned None, not registering any hook"}));
}

TEST(ForwardHooks, NoMatchWarnsAndLaterSpecsStillAttach) {
  auto model = testing::tiny_llama();
  LogCapture log;
  auto installed = hooks::install_forward_hooks(
      *model, json::parse(R"([{"name": "miss", "target_modules": ["nothing.*", "model.layers.9"],
                               "hook_factory": "test_hooks:record"},
                              {"name": "hit", "target_modules": ["model.layers.*.mlp"],
                               "hook_factory": "test_hooks:record"}])"));
  EXPECT_TRUE(
      log.has(LogLevel::kWarning, "No modules matched hook spec 'miss' patterns=['nothing.*', 'model.layers.9']"));
  EXPECT_EQ(installed.size(), 2u);
  EXPECT_EQ(log.messages(LogLevel::kInfo),
            (std::vector<std::string>{"Registered forward hook 'hit' on model.layers.0.mlp",
                                      "Registered forward hook 'hit' on model.layers.1.mlp"}));
}

TEST(ForwardHooks, PatternsMatchEveryModulePathWithFnmatch) {
  auto model = testing::tiny_llama();
  LogCapture log;
  auto installed = hooks::install_forward_hooks(
      *model,
      json::parse(R"([{"name": "l1", "target_modules": ["model.layers.1.*"], "hook_factory": "test_hooks:record"}])"));
  // Every module below model.layers.1 (at any depth), but not the layer itself.
  std::vector<std::string> expected;
  for (auto& [path, m] : model->named_hookable_modules())
    if (path.rfind("model.layers.1.", 0) == 0) expected.push_back("Registered forward hook 'l1' on " + path);
  EXPECT_GE(expected.size(), 8u);  // norms, attention and its projections, MLP and its parts
  EXPECT_EQ(log.messages(LogLevel::kInfo), expected);
  EXPECT_EQ(installed.size(), expected.size());
}

TEST(ForwardHooks, ConfigReachesFactoryAndDefaultsToEmptyObject) {
  auto model = testing::tiny_llama();
  recorder() = Recorder{};
  auto installed = hooks::install_forward_hooks(
      *model, json::parse(R"([{"target_modules": ["model.norm"], "hook_factory": "test_hooks:record",
                               "config": {"tag": "x", "n": 3}},
                              {"target_modules": ["model.norm"], "hook_factory": "test_hooks.record"},
                              {"target_modules": ["model.norm"], "hook_factory": "test_hooks:record", "config": null}])"));
  ASSERT_EQ(recorder().configs.size(), 3u);
  EXPECT_EQ(recorder().configs[0], json::parse(R"({"tag": "x", "n": 3})"));
  EXPECT_EQ(recorder().configs[1], json::object());
  EXPECT_EQ(recorder().configs[2], json::object());
}

TEST(ForwardHooks, ResolutionErrorsFailAndDetachEarlierSpecs) {
  auto model = testing::tiny_llama();
  LogCapture log;
  const json first =
      json::parse(R"({"name": "ok", "target_modules": ["model.norm"], "hook_factory": "test_hooks:record"})");
  auto with = [&](const std::string& factory) {
    json specs = json::array({first});
    specs.push_back(json{{"name", "bad"}, {"target_modules", {"model.norm"}}, {"hook_factory", factory}});
    return specs;
  };
  EXPECT_EQ(config_error(*model, with("nodots")),
            "Invalid hook callable path 'nodots'. Expected 'module.submodule:factory' or 'module.submodule.factory'.");
  EXPECT_EQ(attached(*model), 0);
  EXPECT_EQ(config_error(*model, with("test_hooks:absent")),
            "Module 'test_hooks' has no attribute 'absent' (from hook path 'test_hooks:absent')");
  EXPECT_EQ(config_error(*model, with("missing_mod.sub.f")).rfind("No module named 'missing_mod.sub'", 0), 0u);
  EXPECT_EQ(config_error(*model, with(std::string(NNSIGHT_TEST_PLUGIN) + ":throws")),
            "Hook factory '" + std::string(NNSIGHT_TEST_PLUGIN) +
                ":throws' for spec 'bad' failed: test_plugin:throws refuses config {}");
  EXPECT_EQ(attached(*model), 0);
}

TEST(ForwardHooks, MalformedSpecsAreConfigErrors) {
  auto model = testing::tiny_llama();
  EXPECT_EQ(config_error(*model, json::parse("[3]")), "forward_hooks[0] must be a JSON object, got 3");
  EXPECT_EQ(config_error(*model, json::parse(R"([{"target_modules": [1], "hook_factory": "a:b"}])")),
            "forward_hooks[0].target_modules must hold strings, got 1");
  EXPECT_EQ(config_error(*model, json::parse(R"([{"target_modules": ["x"], "hook_factory": 5}])")),
            "forward_hooks[0].hook_factory must be a string, got 5");
}

TEST(ForwardHooks, HookSeesModuleAndReplacementShapeIsChecked) {
  auto model = testing::tiny_llama();
  recorder() = Recorder{};
  auto installed = hooks::install_forward_hooks(
      *model, json::parse(R"([{"target_modules": ["model.layers.0.mlp"], "hook_factory": "test_hooks:record"}])"));
  auto& llama = dynamic_cast<LlamaForCausalLM&>(*model);
  llama.model->layer_ptrs[0]->mlp->forward(at::randn({3, model->config().hidden_size}));
  EXPECT_EQ(recorder().called_on, std::vector<std::string>{"model.layers.0.mlp"});

  auto bad = hooks::install_forward_hooks(
      *model,
      json::parse(
          R"([{"name": "b", "target_modules": ["model.layers.1.mlp"], "hook_factory": "test_hooks:bad_shape"}])"));
  try {
    llama.model->layer_ptrs[1]->mlp->forward(at::randn({3, model->config().hidden_size}));
    FAIL() << "a wrongly shaped replacement must be refused";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "forward hook 'b' on model.layers.1.mlp returned a [3, 1] value; the output is [3, 32]");
  }
}

// ---- in engines

std::vector<runner::RequestInput> prompts(int n, int64_t max_tokens) {
  std::vector<runner::RequestInput> out;
  for (int i = 0; i < n; ++i) {
    runner::RequestInput in;
    for (int j = 0; j < 4 + 3 * i; ++j) in.prompt_token_ids.push_back(5 + (i * 11 + j * 7) % 90);
    in.params = SamplingParams().temperature(0).max_tokens(max_tokens).ignore_eos(true);
    out.push_back(in);
  }
  return out;
}

std::vector<std::vector<int32_t>> generate(runner::Engine& engine, int n = 4, int64_t max_tokens = 6) {
  auto ids = engine.add_requests(prompts(n, max_tokens));
  auto done = testing::run_to_completion(engine);
  std::vector<std::vector<int32_t>> out;
  for (auto id : ids) {
    EXPECT_EQ(done.at(id).error, "");
    out.push_back(done.at(id).token_ids);
  }
  return out;
}

EngineArgs engine_args() { return EngineArgs().kv_cache_memory_mb(4).show_progress(false); }

std::string hook_json(const std::string& target, const std::string& factory, const json& config = json::object()) {
  return json::array({json{{"name", "h"}, {"target_modules", {target}}, {"hook_factory", factory}, {"config", config}}})
      .dump();
}

// The tiny model with layer 1's MLP output multiplied by `factor` through its weights.
std::shared_ptr<CausalLM> scaled_mlp_model(double factor) {
  auto model = testing::tiny_llama();
  at::NoGradGuard no_grad;
  dynamic_cast<LlamaForCausalLM&>(*model).model->layer_ptrs[1]->mlp->down_proj->weight.mul_(factor);
  return model;
}

TEST(ForwardHooksEngine, ZeroingOneMlpEqualsZeroedWeights) {
  auto baseline = generate(*testing::tiny_engine(engine_args(), testing::tiny_llama()));
  auto hooked = generate(*testing::tiny_engine(
      engine_args().forward_hooks(hook_json("model.layers.1.mlp", "nnsight.hooks:zero")), testing::tiny_llama()));
  auto reference = generate(*testing::tiny_engine(engine_args(), scaled_mlp_model(0.0)));
  EXPECT_EQ(hooked, reference);
  EXPECT_NE(hooked, baseline) << "the ablation must change the generation";
}

// "request_ids" limits a built-in hook to those requests' rows; the other
// requests of the same batches are untouched.
TEST(ForwardHooksEngine, RequestIdsLimitTheHookToThoseRequests) {
  auto baseline = generate(*testing::tiny_engine(engine_args(), testing::tiny_llama()));
  auto reference = generate(*testing::tiny_engine(engine_args(), scaled_mlp_model(0.0)));
  // Request ids are assigned in submission order by each engine alike.
  auto probe = testing::tiny_engine(engine_args(), testing::tiny_llama());
  const auto ids = probe->add_requests(prompts(4, 6));
  auto hooked_engine =
      testing::tiny_engine(engine_args().forward_hooks(hook_json("model.layers.1.mlp", "nnsight.hooks:zero",
                                                                 json{{"request_ids", {ids[1], ids[3]}}})),
                           testing::tiny_llama());
  auto hooked = generate(*hooked_engine);
  ASSERT_EQ(hooked.size(), 4u);
  EXPECT_EQ(hooked[0], baseline[0]);
  EXPECT_EQ(hooked[1], reference[1]);
  EXPECT_EQ(hooked[2], baseline[2]);
  EXPECT_EQ(hooked[3], reference[3]);
  EXPECT_NE(reference[1], baseline[1]) << "the ablation must change the generation";
}

// Under tensor parallelism each rank's hooks see that rank's columns of a
// column-parallel output (docs/hooks.md); element-wise hooks on them give
// the same generation as in one process.
TEST(ForwardHooksEngine, ElementwiseHooksOnSplitOutputsEqualOneProcessAtTwoRanks) {
  testing::ScratchDir dir;
  testing::write_hf_checkpoint(dir.path(), *testing::tiny_random_model(testing::tiny_tp_llama_config(), 5));
  const std::string hooks = json::array({json{{"name", "half_up"},
                                              {"target_modules", {"model.layers.*.mlp.up_proj"}},
                                              {"hook_factory", "nnsight.hooks:scale"},
                                              {"config", {{"factor", 0.5}}}},
                                         json{{"name", "no_v"},
                                              {"target_modules", {"model.layers.1.self_attn.v_proj"}},
                                              {"hook_factory", "nnsight.hooks:zero"}}})
                                .dump();
  const EngineArgs base = engine_args().model(dir.path()).worker_timeout_s(60);
  runner::Engine plain(EngineArgs(base).executor("inproc"));
  runner::Engine one(EngineArgs(base).executor("inproc").forward_hooks(hooks));
  runner::Engine two(EngineArgs(base).tensor_parallel_size(2).forward_hooks(hooks));
  const auto baseline = generate(plain), expected = generate(one);
  EXPECT_NE(expected, baseline) << "the hooks must change the generation";
  EXPECT_EQ(generate(two), expected);
}

TEST(ForwardHooksEngine, PluginLoadedByPathReplacesOutput) {
  auto hooked = generate(*testing::tiny_engine(
      engine_args().forward_hooks(hook_json("model.layers.1.mlp", std::string(NNSIGHT_TEST_PLUGIN) + ":negate")),
      testing::tiny_llama()));
  auto reference = generate(*testing::tiny_engine(engine_args(), scaled_mlp_model(-1.0)));
  auto baseline = generate(*testing::tiny_engine(engine_args(), testing::tiny_llama()));
  EXPECT_EQ(hooked, reference);
  EXPECT_NE(hooked, baseline);
}

TEST(ForwardHooksEngine, ExampleSteeringPluginMatchesBuiltinAddVector) {
#ifndef NNSIGHT_EXAMPLE_STEERING_PLUGIN
  FAIL() << "examples were not built (NNSIGHT_BUILD_EXAMPLES=OFF): the steering plugin example is not tested";
#else
  std::vector<float> direction(32);
  for (size_t i = 0; i < direction.size(); ++i) direction[i] = 0.05f * static_cast<float>(i % 7) - 0.1f;
  auto plugin = generate(*testing::tiny_engine(
      engine_args().forward_hooks(hook_json("model.layers.0",
                                            std::string(NNSIGHT_EXAMPLE_STEERING_PLUGIN) + ":add_direction",
                                            json{{"direction", direction}, {"alpha", 8.0}})),
      testing::tiny_llama()));
  auto builtin = generate(
      *testing::tiny_engine(engine_args().forward_hooks(hook_json("model.layers.0", "nnsight.hooks:add_vector",
                                                                  json{{"vector", direction}, {"scale", 8.0}})),
                            testing::tiny_llama()));
  auto baseline = generate(*testing::tiny_engine(engine_args(), testing::tiny_llama()));
  EXPECT_EQ(plugin, builtin);
  EXPECT_NE(plugin, baseline);
  // Once loaded, the plugin's module name resolves too.
  auto by_name = generate(
      *testing::tiny_engine(engine_args().forward_hooks(hook_json("model.layers.0", "steering:add_direction",
                                                                  json{{"direction", direction}, {"alpha", 8.0}})),
                            testing::tiny_llama()));
  EXPECT_EQ(by_name, plugin);
#endif
}

TEST(ForwardHooksEngine, StartUpFailsOnBadFactoryPath) {
  auto model = testing::tiny_llama();
  try {
    testing::tiny_engine(engine_args().forward_hooks(hook_json("model.norm", "nodots")), model);
    FAIL() << "start-up must fail";
  } catch (const ConfigError& e) {
    EXPECT_EQ(
        std::string(e.what()),
        "Invalid hook callable path 'nodots'. Expected 'module.submodule:factory' or 'module.submodule.factory'.");
  }
  EXPECT_EQ(attached(*model), 0);
}

TEST(ForwardHooksEngine, HooksLeaveWithTheRunnerOfASharedModel) {
  auto model = testing::tiny_llama();
  const std::string specs = hook_json("model.layers.*.mlp", "nnsight.hooks:zero");
  {
    auto a = testing::tiny_engine(engine_args().forward_hooks(specs), model);
    EXPECT_EQ(attached(*model), 2);
    {
      auto b = testing::tiny_engine(engine_args().forward_hooks(specs), model);
      EXPECT_EQ(attached(*model), 2);  // both engines' hooks on the same two modules
    }
    EXPECT_EQ(attached(*model), 2);  // a's are still there
    auto ablated = generate(*a);
    auto reference = generate(*testing::tiny_engine(engine_args(), testing::tiny_llama()));
    EXPECT_NE(ablated, reference);
  }
  EXPECT_EQ(attached(*model), 0);
  // The model now generates as if never hooked.
  EXPECT_EQ(generate(*testing::tiny_engine(engine_args(), model)),
            generate(*testing::tiny_engine(engine_args(), testing::tiny_llama())));
}

TEST(ForwardHooksEngine, SpecsFromAFile) {
  testing::ScratchDir dir;
  const std::string file =
      dir.write("hooks.json", hook_json("model.layers.1.mlp", "nnsight.hooks:scale", json{{"factor", -1.0}}));
  auto from_file = generate(*testing::tiny_engine(engine_args().forward_hooks(file), testing::tiny_llama()));
  auto reference = generate(*testing::tiny_engine(engine_args(), scaled_mlp_model(-1.0)));
  EXPECT_EQ(from_file, reference);
  try {
    testing::tiny_engine(engine_args().forward_hooks(dir.file("absent.json")), testing::tiny_llama());
    FAIL() << "a missing file must fail start-up";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "forward_hooks: cannot read the file '" + dir.file("absent.json") + "'");
  }
  const std::string bad = dir.write("bad.json", "[{\"name\": ");
  try {
    testing::tiny_engine(engine_args().forward_hooks(bad), testing::tiny_llama());
    FAIL() << "malformed JSON must fail start-up";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("forward_hooks file '" + bad + "' is not valid JSON: ", 0), 0u) << e.what();
  }
}

TEST(ForwardHooksEngine, WorkerProcessesAttachHooksToo) {
  testing::ScratchDir dir;
  auto model = testing::tiny_llama();
  testing::write_hf_checkpoint(dir.path(), *model);
  const std::string specs = hook_json("model.layers.1.mlp", std::string(NNSIGHT_TEST_PLUGIN) + ":negate");
  runner::Engine mp(
      EngineArgs().model(dir.path()).kv_cache_memory_mb(4).show_progress(false).executor("mp").forward_hooks(specs));
  auto reference = generate(*testing::tiny_engine(engine_args(), scaled_mlp_model(-1.0)));
  EXPECT_EQ(generate(mp), reference);
  // And a bad path fails the workers' start-up with the seed's message.
  try {
    runner::Engine broken(EngineArgs()
                              .model(dir.path())
                              .kv_cache_memory_mb(4)
                              .show_progress(false)
                              .executor("mp")
                              .forward_hooks(hook_json("model.norm", "test_plugin_absent.mod:f")));
    FAIL() << "start-up must fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("No module named 'test_plugin_absent.mod'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace nnsight
