#include "support/hf_fixtures.h"

#include <cstdlib>
#include <ostream>

namespace nnsight {
namespace testing {
namespace {

const char* override_root(const HfFixtureCase& f) {
  const char* root = std::getenv(f.transformers_major >= 5 ? "NNSIGHT_MODEL_FIXTURES_V5" : "NNSIGHT_MODEL_FIXTURES");
  return root != nullptr && *root != '\0' ? root : nullptr;
}

}  // namespace

std::string hf_fixture_dir(const HfFixtureCase& f) {
  const char* root = override_root(f);
  const std::string set = f.transformers_major >= 5 ? "/tests/data/models-v5" : "/tests/data/models";
  return (root != nullptr ? std::string(root) : std::string(NNSIGHT_SOURCE_DIR) + set) + "/" + f.arch;
}

bool hf_fixture_overridden(const HfFixtureCase& f) { return override_root(f) != nullptr; }

std::vector<HfFixtureCase> hf_fixtures(const std::vector<std::string>& v4_archs,
                                       const std::vector<std::string>& v5_archs) {
  std::vector<HfFixtureCase> out;
  for (const auto& a : v4_archs) out.push_back({4, a});
  for (const auto& a : v5_archs) out.push_back({5, a});
  return out;
}

std::string hf_fixture_name(const ::testing::TestParamInfo<HfFixtureCase>& info) {
  return "transformers" + std::to_string(info.param.transformers_major) + "_" + info.param.arch;
}

void PrintTo(const HfFixtureCase& f, std::ostream* os) {
  *os << "transformers " << f.transformers_major << " " << f.arch;
}

}  // namespace testing
}  // namespace nnsight
