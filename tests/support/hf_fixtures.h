// The Hugging Face fixtures, in two sets: tests/data/models (written by
// transformers 4.51.3, scripts/make-model-fixtures) and tests/data/models-v5
// (the same architectures written by transformers 5.x, configs in its
// spelling, scripts/make-model-fixtures-v5). Parameterized tests run on both;
// their names say which set ("transformers4_mistral", "transformers5_mistral").
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace nnsight {
namespace testing {

struct HfFixtureCase {
  int transformers_major;  // 4 or 5
  std::string arch;
};

// $NNSIGHT_MODEL_FIXTURES/<arch> (4.x set) or $NNSIGHT_MODEL_FIXTURES_V5/<arch>
// (5.x set) when set (other checkpoints made by the same scripts), else the
// committed tests/data/models[-v5]/<arch>.
std::string hf_fixture_dir(const HfFixtureCase& f);

// Each architecture of the 4.x set, then each of the 5.x set.
std::vector<HfFixtureCase> hf_fixtures(const std::vector<std::string>& v4_archs,
                                       const std::vector<std::string>& v5_archs);

// "transformers4_mistral"
std::string hf_fixture_name(const ::testing::TestParamInfo<HfFixtureCase>& info);

// Whether the directory came from the environment (not a committed fixture).
bool hf_fixture_overridden(const HfFixtureCase& f);

// For gtest's messages.
void PrintTo(const HfFixtureCase& f, std::ostream* os);

}  // namespace testing
}  // namespace nnsight
