// The fuzzer's seed corpus (tests/data/dsl/corpus/): encodings of valid
// graphs, binary (.bin) and JSON (.json). This test keeps it in step with the
// format: every seed must decode and validate, and must equal what the
// generator below writes today. Regenerate with
//   NNSIGHT_WRITE_DSL_CORPUS=1 ./build/tests/nnsight_tests --gtest_filter=DslCorpus.*
#include "dsl/binary_codec.h"
#include "dsl/json_codec.h"
#include "dsl/validate.h"
#include "support/dsl_op_cases.h"
#include "support/dsl_sample_graphs.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace nnsight::testing {
namespace {

namespace fs = std::filesystem;

const fs::path kCorpus = fs::path(NNSIGHT_SOURCE_DIR) / "tests/data/dsl/corpus";

// name -> file contents.
std::map<std::string, std::string> generate() {
  std::map<std::string, std::string> out;
  auto add = [&](const std::string& name, const dsl::Graph& g) {
    out[name + ".bin"] = dsl::encode_binary(g);
    out[name + ".json"] = dsl::to_json(g, 1);
  };
  add("every_kind", every_kind_graph());
  std::set<std::string> seen;
  for (const OpCase& c : op_cases())
    if (seen.insert(c.op).second) add("op_" + c.op, build_case_graph(c));
  return out;
}

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(DslCorpus, SeedsDecodeValidateAndAreCurrent) {
  std::map<std::string, std::string> want = generate();
  if (const char* w = std::getenv("NNSIGHT_WRITE_DSL_CORPUS"); w && std::string(w) == "1") {
    fs::create_directories(kCorpus);
    for (const auto& entry : fs::directory_iterator(kCorpus)) fs::remove(entry.path());
    for (const auto& [name, bytes] : want) std::ofstream(kCorpus / name, std::ios::binary) << bytes;
  }
  ASSERT_TRUE(fs::is_directory(kCorpus)) << kCorpus;
  size_t n = 0;
  for (const auto& entry : fs::directory_iterator(kCorpus)) {
    std::string name = entry.path().filename().string();
    SCOPED_TRACE(name);
    std::string bytes = read(entry.path());
    dsl::Graph g = entry.path().extension() == ".json" ? dsl::from_json(bytes) : dsl::decode_binary(bytes);
    EXPECT_NO_THROW(dsl::validate(g, dsl::ValidateOptions().with_functions(&sample_functions())));
    auto it = want.find(name);
    ASSERT_NE(it, want.end()) << "stale seed; regenerate the corpus (see the top of this file)";
    EXPECT_EQ(bytes, it->second) << "seed differs from today's encoding; regenerate the corpus";
    ++n;
  }
  EXPECT_EQ(n, want.size()) << "seeds missing; regenerate the corpus";
}

}  // namespace
}  // namespace nnsight::testing
