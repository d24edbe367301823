// Graph files (src/front/trace_client/graph_file.h): every error about a
// hand-written JSON graph names its place in the file; node locations become
// file:line so later errors point there too.
#include "front/trace_client/graph_file.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <nnsight/error.hpp>

#include "dsl/errors.h"
#include "support/scratch_dir.h"

namespace nnsight::tracing {
namespace {

std::string error_of(const std::string& text) {
  try {
    GraphFile f = parse_graph_file("g.json", text);
    validate_graph_file(f);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

const char* kGood =
    "{\"nodes\": [\n"
    "  {\"kind\": \"get\", \"key\": \"model.layers.0.output\"},\n"
    "  {\"kind\": \"op\", \"op\": \"neg\", \"args\": [0]},\n"
    "  {\"kind\": \"save\", \"name\": \"h\", \"args\": [1], \"loc\": \"elsewhere.cpp:3\"}\n"
    "]}\n";

TEST(GraphFile, NodesAreLocatedInTheFile) {
  GraphFile f = parse_graph_file("g.json", kGood);
  ASSERT_EQ(f.graph.nodes.size(), 3u);
  ASSERT_EQ(f.node_positions.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(f.graph.nodes[i].loc.file, "g.json");
    EXPECT_EQ(f.graph.nodes[i].loc.line, i + 2);  // one node per line, from line 2
    EXPECT_EQ(f.where(static_cast<dsl::NodeId>(i)), "g.json:" + std::to_string(i + 2) + ":3");
  }
  EXPECT_EQ(f.where(99), "g.json");
  EXPECT_NO_THROW(validate_graph_file(f));
}

TEST(GraphFile, DecodeErrorsNameLineAndColumn) {
  // A syntax error: the missing comma on line 3.
  std::string msg = error_of("{\"nodes\": [\n  {\"kind\": \"get\", \"key\": \"logits\"}\n  {\"kind\": \"stop\"}\n]}");
  EXPECT_EQ(msg.rfind("g.json:3:3: ", 0), 0u) << msg;
  // An unknown field: its value's position, node and pointer.
  msg =
      error_of("{\"nodes\": [\n  {\"kind\": \"get\", \"key\": \"logits\"},\n  {\"kind\": \"stop\", \"bogus\": 1}\n]}");
  EXPECT_EQ(msg.rfind("g.json:3:29: ", 0), 0u) << msg;
  EXPECT_NE(msg.find("/nodes/1/bogus (node 1): unknown field 'bogus'"), std::string::npos) << msg;
  // A missing field: the enclosing node.
  msg = error_of("{\"nodes\": [\n  {\"kind\": \"stop\"},\n  {\"kind\": \"get\"}\n]}");
  EXPECT_EQ(msg.rfind("g.json:3:3: ", 0), 0u) << msg;
  EXPECT_NE(msg.find("missing field 'key'"), std::string::npos) << msg;
  // A wrong type deep in a value.
  msg = error_of(
      "{\"nodes\": [\n  {\"kind\": \"const\",\n   \"value\": {\"dtype\": \"float32\", \"shape\": [2], \"data\": [1, "
      "\"x\"]}}\n]}");
  EXPECT_EQ(msg.rfind("g.json:3:", 0), 0u) << msg;
  EXPECT_NE(msg.find("(node 0)"), std::string::npos) << msg;
}

TEST(GraphFile, ValidationErrorsNameTheNodesPosition) {
  // Node 2 refers to node 5, which does not come before it.
  std::string msg = error_of(
      "{\"nodes\": [\n  {\"kind\": \"get\", \"key\": \"logits\"},\n  {\"kind\": \"op\", \"op\": \"neg\", \"args\": "
      "[0]},\n"
      "      {\"kind\": \"op\", \"op\": \"neg\", \"args\": [5]}\n]}");
  EXPECT_EQ(msg.rfind("g.json:4:7: node 2 (op 'neg') at g.json:4: ", 0), 0u) << msg;
  // An op that does not exist.
  msg = error_of(
      "{\"nodes\": [\n  {\"kind\": \"get\", \"key\": \"logits\"},\n  {\"kind\": \"op\", \"op\": \"nope\", \"args\": "
      "[0]}\n]}");
  EXPECT_EQ(msg.rfind("g.json:3:3: node 1", 0), 0u) << msg;
  EXPECT_NE(msg.find("nope"), std::string::npos) << msg;
}

TEST(GraphFile, ReadsFilesAndReportsUnreadableOnes) {
  testing::ScratchDir dir;
  const std::string path = dir.write("patch.json", kGood);
  GraphFile f = load_graph_file(path);
  EXPECT_EQ(f.path, path);
  EXPECT_EQ(f.graph.nodes[1].loc.str(), path + ":3");
  EXPECT_THROW(load_graph_file(dir.file("missing.json")), Error);
  const std::string big = dir.write("big.json", std::string(100, ' ') + kGood);
  EXPECT_THROW(load_graph_file(big, dsl::Limits().encoded_bytes(50)), dsl::DecodeError);
}

// docs/cli.md's graphs are complete, valid graph files.
TEST(GraphFile, TheGraphsInTheCliGuideLoad) {
  std::ifstream in(std::string(NNSIGHT_SOURCE_DIR) + "/docs/cli.md");
  ASSERT_TRUE(in) << "docs/cli.md is missing";
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string md = ss.str();
  int blocks = 0;
  for (size_t pos = md.find("```json\n"); pos != std::string::npos; pos = md.find("```json\n", pos)) {
    const size_t start = pos + 8, end = md.find("```", start);
    ASSERT_NE(end, std::string::npos);
    const std::string block = md.substr(start, end - start);
    SCOPED_TRACE(block);
    GraphFile f = parse_graph_file("docs/cli.md", block);
    EXPECT_NO_THROW(validate_graph_file(f));
    ++blocks;
    pos = end + 3;
  }
  EXPECT_GE(blocks, 2);
}

}  // namespace
}  // namespace nnsight::tracing
