// Line and column of JSON pointers in a JSON text (dsl/json_position.h),
// checked against positions counted by hand in the literals below.
#include "dsl/json_position.h"

#include <gtest/gtest.h>

#include <string>

namespace nnsight::dsl {
namespace {

const std::string kDoc =
    "{\n"                                              // line 1
    "  \"format\": \"nnsight.graph\",\n"               // line 2
    "  \"a/b\": {\"x~y\": [10, {\"k\": \"]}\"}]},\n"   // line 3
    "  \"nodes\": [\n"                                 // line 4
    "    {\"kind\": \"get\", \"key\": \"logits\"},\n"  // line 5
    "    {\"kind\": \"op\", \"op\": \"neg\", \"args\": [0]},  {\"kind\": \"save\", \"name\": \"\\u00e9\\\"\"}\n"  // line
                                                                                                                  // 6
    "  ]\n"
    "}\n";

TEST(JsonPosition, LocatesPointers) {
  auto root = locate(kDoc, "");
  ASSERT_TRUE(root);
  EXPECT_EQ(root->line, 1u);
  EXPECT_EQ(root->column, 1u);
  auto fmt = locate(kDoc, "/format");
  ASSERT_TRUE(fmt);
  EXPECT_EQ(fmt->line, 2u);
  EXPECT_EQ(fmt->column, 13u);
  auto n1 = locate(kDoc, "/nodes/1");
  ASSERT_TRUE(n1);
  EXPECT_EQ(n1->line, 6u);
  EXPECT_EQ(n1->column, 5u);
  auto args0 = locate(kDoc, "/nodes/1/args/0");
  ASSERT_TRUE(args0);
  EXPECT_EQ(args0->line, 6u);
  EXPECT_EQ(args0->column, 42u);
  auto n2 = locate(kDoc, "/nodes/2/name");
  ASSERT_TRUE(n2);
  EXPECT_EQ(n2->line, 6u);
  EXPECT_EQ(n2->column, 73u);
  // Escaped pointer tokens (~1 is '/', ~0 is '~'); a string holding brackets is skipped whole.
  auto esc = locate(kDoc, "/a~1b/x~0y/1/k");
  ASSERT_TRUE(esc);
  EXPECT_EQ(esc->line, 3u);
  EXPECT_EQ(esc->column, 29u);
  EXPECT_EQ(kDoc.substr(esc->offset, 5), "\"]}\"}");
}

TEST(JsonPosition, MissingElementsAndBadPointers) {
  EXPECT_FALSE(locate(kDoc, "/nodes/3"));
  EXPECT_FALSE(locate(kDoc, "/nodes/01"));
  EXPECT_FALSE(locate(kDoc, "/nodes/-"));
  EXPECT_FALSE(locate(kDoc, "/nope"));
  EXPECT_FALSE(locate(kDoc, "format"));
  EXPECT_FALSE(locate(kDoc, "/format/0"));
  EXPECT_FALSE(locate("", "/a"));
  EXPECT_FALSE(locate("{\"a\": [1, 2", "/a/5"));
  EXPECT_FALSE(locate("{\"a\": \"unterminated", "/b"));
  EXPECT_FALSE(locate("[[[[[", "/0/0/0/0/0"));
}

TEST(JsonPosition, ElementStartsInOnePass) {
  auto starts = locate_elements(kDoc, "/nodes");
  ASSERT_EQ(starts.size(), 3u);
  EXPECT_EQ(starts[0].line, 5u);
  EXPECT_EQ(starts[0].column, 5u);
  EXPECT_EQ(starts[1].line, 6u);
  EXPECT_EQ(starts[1].column, 5u);
  EXPECT_EQ(starts[2].line, 6u);
  EXPECT_EQ(starts[2].column, 48u);
  for (const auto& s : starts) EXPECT_EQ(kDoc[s.offset], '{');
  EXPECT_TRUE(locate_elements(kDoc, "/format").empty());
  EXPECT_TRUE(locate_elements("{\"nodes\": []}", "/nodes").empty());
  EXPECT_TRUE(locate_elements("{\"nodes\": [1, ", "/nodes").empty());
}

TEST(JsonPosition, ColumnsCountCodePoints) {
  const std::string s = "{\"\xc3\xa9\xc3\xa9\": 1, \"b\": 2}";
  auto b = locate(s, "/b");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->column, 16u);
  EXPECT_EQ(b->offset, 17u);
  EXPECT_EQ(position_of("ab\ncd", 4).line, 2u);
  EXPECT_EQ(position_of("ab\ncd", 4).column, 2u);
  EXPECT_EQ(position_of("ab", 99).column, 3u);
}

}  // namespace
}  // namespace nnsight::dsl
