// Values, dtypes, provider keys, base64 and UTF-8 checks.
#include "dsl/base64.h"
#include "dsl/dtype.h"
#include "dsl/provider_key.h"
#include "dsl/utf8.h"
#include "dsl/value.h"

#include <nnsight/error.hpp>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <limits>

namespace nnsight::testing {
namespace {

using dsl::Value;

TEST(DslValue, DtypeCodesAndNamesRoundTrip) {
  int n = 0;
  for (int code = 0; code < 256; ++code) {
    auto t = dsl::dtype_from_code(static_cast<uint8_t>(code));
    if (!t) continue;
    ++n;
    EXPECT_EQ(dsl::dtype_code(*t), code);
    EXPECT_EQ(dsl::dtype_from_name(dsl::dtype_name(*t)), t);
    EXPECT_EQ(dsl::dtype_size(*t), at::elementSize(*t));
  }
  EXPECT_EQ(n, 12);
  EXPECT_EQ(dsl::dtype_from_name("float32"), at::kFloat);
  EXPECT_EQ(dsl::dtype_from_name("bfloat16"), at::kBFloat16);
  EXPECT_FALSE(dsl::dtype_from_name("float8"));
  EXPECT_FALSE(dsl::dtype_code(at::kQInt8));
}

TEST(DslValue, IdenticalIsExact) {
  EXPECT_TRUE(dsl::identical(Value::real(std::numeric_limits<double>::quiet_NaN()),
                             Value::real(std::numeric_limits<double>::quiet_NaN())));
  EXPECT_FALSE(dsl::identical(Value::real(0.0), Value::real(-0.0)));
  EXPECT_FALSE(dsl::identical(Value::integer(1), Value::real(1.0)));
  EXPECT_FALSE(dsl::identical(Value::integer(1), Value::boolean(true)));
  EXPECT_TRUE(dsl::identical(Value(at::arange(6).reshape({2, 3})), Value(at::arange(6).reshape({2, 3}))));
  EXPECT_FALSE(dsl::identical(Value(at::arange(6).reshape({2, 3})), Value(at::arange(6).reshape({3, 2}))));
  EXPECT_FALSE(dsl::identical(Value(at::arange(6)), Value(at::arange(6).to(at::kInt))));
  EXPECT_TRUE(
      dsl::identical(Value(at::arange(6).reshape({2, 3}).t()), Value(at::arange(6).reshape({2, 3}).t().contiguous())));
  EXPECT_FALSE(
      dsl::identical(Value::tuple({at::ones({1}), at::Tensor()}), Value::tuple({at::ones({1}), at::ones({1})})));
  EXPECT_FALSE(dsl::identical(Value::index({dsl::IndexItem::make_slice(1, {})}),
                              Value::index({dsl::IndexItem::make_slice({}, 1)})));
  EXPECT_TRUE(Value(at::Tensor()).is_none());
}

TEST(DslValue, AccessorsCheckTheKind) {
  Value v = Value::list({Value::integer(1)});
  EXPECT_EQ(v.describe(), "list of 1 values");
  try {
    v.as_tensor();
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "expected a tensor, got list of 1 values");
  }
  EXPECT_EQ(Value(at::zeros({2, 3}, at::kBFloat16)).describe(), "tensor bfloat16[2, 3]");
  EXPECT_EQ(Value::integer(3).as_double(), 3.0);
  EXPECT_EQ(dsl::tensor_bytes(Value::list({Value(at::ones({4})), Value::tuple({at::ones({2}, at::kDouble)})})), 32u);
}

TEST(DslValue, ProviderKeys) {
  auto k = dsl::parse_provider_key("model.layers.3.self_attn.q_proj.output");
  ASSERT_TRUE(k);
  EXPECT_EQ(k->kind, dsl::KeyKind::ModuleOutput);
  EXPECT_EQ(k->module_path, "model.layers.3.self_attn.q_proj");
  EXPECT_EQ(dsl::parse_provider_key("transformer.h.0.inputs")->kind, dsl::KeyKind::ModuleInputs);
  EXPECT_EQ(dsl::parse_provider_key("lm_head.input")->kind, dsl::KeyKind::ModuleInput);
  EXPECT_EQ(dsl::parse_provider_key("samples")->kind, dsl::KeyKind::Samples);
  for (const char* bad : {"", "output", "a.b.", "a..output", "a.output.x", "a-b.output", "logits.output."})
    EXPECT_FALSE(dsl::parse_provider_key(bad)) << bad;
}

TEST(DslValue, Base64MatchesRfc4648Vectors) {
  const std::pair<const char*, const char*> vectors[] = {{"", ""},
                                                         {"f", "Zg=="},
                                                         {"fo", "Zm8="},
                                                         {"foo", "Zm9v"},
                                                         {"foob", "Zm9vYg=="},
                                                         {"fooba", "Zm9vYmE="},
                                                         {"foobar", "Zm9vYmFy"}};
  for (auto [plain, enc] : vectors) {
    std::string p = plain;
    EXPECT_EQ(dsl::base64_encode(reinterpret_cast<const uint8_t*>(p.data()), p.size()), enc);
    auto n = dsl::base64_decoded_size(enc);
    ASSERT_TRUE(n);
    ASSERT_EQ(*n, p.size());
    std::string out(*n, '\0');
    ASSERT_TRUE(dsl::base64_decode(enc, reinterpret_cast<uint8_t*>(out.data())));
    EXPECT_EQ(out, p);
  }
  uint8_t buf[8];
  for (const char* bad : {"Zg=", "Z===", "Zg=a", "Zh==", "Zm9=", "Zm 9", "=Zm9"}) {
    auto n = dsl::base64_decoded_size(bad);
    EXPECT_TRUE(!n || !dsl::base64_decode(bad, buf)) << bad;
  }
}

TEST(DslValue, Utf8Validation) {
  EXPECT_TRUE(dsl::valid_utf8("plain ascii"));
  EXPECT_TRUE(dsl::valid_utf8("h\xc3\xa9llo \xf0\x9f\x98\x80"));
  EXPECT_FALSE(dsl::valid_utf8("\xc3"));              // truncated
  EXPECT_FALSE(dsl::valid_utf8("\xc0\xaf"));          // overlong
  EXPECT_FALSE(dsl::valid_utf8("\xed\xa0\x80"));      // surrogate
  EXPECT_FALSE(dsl::valid_utf8("\xf4\x90\x80\x80"));  // > U+10FFFF
  EXPECT_FALSE(dsl::valid_utf8("\xff"));
}

}  // namespace
}  // namespace nnsight::testing
