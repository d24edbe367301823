// fnmatch over module paths must agree with Python's fnmatch.fnmatchcase
// (what SGLang's forward_hooks use). The expected column was produced by
//   python3 -c "from fnmatch import fnmatchcase as f; print(f(name, pattern))"
// for each row.
#include <gtest/gtest.h>

#include "front/hooks/fnmatch.h"

namespace nnsight::hooks {
namespace {

struct Case {
  const char* name;
  const char* pattern;
  bool expected;
};

const Case kCases[] = {
    {"outer.0", "outer.*", true},
    {"outer.inner", "outer.*", true},
    {"outer.inner.x", "outer.*", true},
    {"outer", "outer.*", false},
    {"outer.0", "outer.?", true},
    {"outer.10", "outer.?", false},
    {"model.layers.3.mlp", "model.layers.*.mlp", true},
    {"model.layers.12.mlp", "model.layers.*.mlp", true},
    {"model.layers.3.self_attn.mlp", "model.layers.*.mlp", true},
    {"model.layers.3.mlp.down_proj", "model.layers.*.mlp", false},
    {"model.layers.7", "model.layers.[!0-4]", true},
    {"model.layers.3", "model.layers.[!0-4]", false},
    {"model.layers.3", "model.layers.[0-4]", true},
    {"]", "[]]", true},
    {"a", "[]a]", true},
    {"[abc", "[abc", true},
    {"a", "[abc", false},
    {"", "*", true},
    {"", "", true},
    {"x", "", false},
    {"a-", "a[-x]", true},
    {"b", "[a-]", false},
    {"-", "[a-]", true},
    {"c", "[z-a]", false},
    {"abc", "a*b*c", true},
    {"aXbYc", "a*b*c", true},
    {"abcbd", "a*b*d", true},
    {"a*b", "a[*]b", true},
    {"lm_head", "*", true},
    {"x.y", "*.*.*", false},
};

TEST(HookFnmatch, AgreesWithPythonFnmatch) {
  for (const auto& c : kCases)
    EXPECT_EQ(fnmatch(c.name, c.pattern), c.expected) << "name '" << c.name << "' pattern '" << c.pattern << "'";
}

TEST(HookFnmatch, CaseSensitive) {
  EXPECT_FALSE(fnmatch("Model.layers.0", "model.*"));
  EXPECT_TRUE(fnmatch("Model.layers.0", "[Mm]odel.*"));
}

TEST(HookFnmatch, ManyStarsDoNotBlowUp) {
  // Backtracking on '*' stays linear-ish: a long name against many stars.
  const std::string name(2000, 'a');
  EXPECT_FALSE(fnmatch(name, "*a*a*a*a*a*a*a*a*b"));
  EXPECT_TRUE(fnmatch(name, "*a*a*a*a*a*a*a*a*"));
}

}  // namespace
}  // namespace nnsight::hooks
