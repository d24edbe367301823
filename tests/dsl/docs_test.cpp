// docs/ir.md cannot rot: every ```json block in it is a complete graph that
// must load, validate, round-trip and run against a fake provider; every
// registered op must have a row in its op tables.
#include "dsl/binary_codec.h"
#include "dsl/json_codec.h"
#include "dsl/ops/registry.h"
#include "support/dsl_sample_graphs.h"
#include "support/dsl_testing.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace nnsight::testing {
namespace {

std::string read_doc() {
  std::ifstream f(std::string(NNSIGHT_SOURCE_DIR) + "/docs/ir.md");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<std::string> json_blocks(const std::string& md) {
  std::vector<std::string> out;
  size_t pos = 0;
  while ((pos = md.find("```json\n", pos)) != std::string::npos) {
    size_t start = pos + 8;
    size_t end = md.find("```", start);
    if (end == std::string::npos) break;
    out.push_back(md.substr(start, end - start));
    pos = end + 3;
  }
  return out;
}

// Answers every external with a made-up tensor, as the runtime would with the
// other invoke's value.
class DocProvider : public FakeProvider {
 public:
  dsl::Value external(uint32_t invoke, dsl::NodeId node) override {
    return dsl::Value(default_tensor("external", static_cast<int64_t>(invoke) * 1000 + node));
  }
};

TEST(DslDocs, EveryJsonExampleLoadsAndRuns) {
  std::string md = read_doc();
  ASSERT_FALSE(md.empty()) << "docs/ir.md not found";
  std::vector<std::string> blocks = json_blocks(md);
  EXPECT_GE(blocks.size(), 6u);
  for (size_t i = 0; i < blocks.size(); ++i) {
    SCOPED_TRACE("```json block " + std::to_string(i) + ":\n" + blocks[i]);
    dsl::Graph g = dsl::from_json(blocks[i]);
    // Exact round trips hold for hand-written JSON too.
    dsl::Graph back = dsl::decode_binary(dsl::encode_binary(g));
    EXPECT_EQ(dsl::to_json(dsl::from_json(dsl::to_json(back))), dsl::to_json(g));
    DocProvider p;
    p.finish_at(5);
    dsl::EvalStatus status = run_graph(g, p, &sample_functions());
    EXPECT_TRUE(status == dsl::EvalStatus::Completed || status == dsl::EvalStatus::Stopped);
    EXPECT_FALSE(p.saves.empty() && p.sets.empty()) << "an example should save or set something";
  }
}

TEST(DslDocs, EveryOpHasARow) {
  std::string md = read_doc();
  for (const dsl::OpDef& d : dsl::OpRegistry::global().ops())
    EXPECT_NE(md.find("| `" + d.name + "` |"), std::string::npos) << "docs/ir.md has no row for op " << d.name;
}

}  // namespace
}  // namespace nnsight::testing
