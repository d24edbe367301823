// The server's parts that need no model: API keys, per-key limits, the trace
// result file, base64 and sampling params as JSON.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <nnsight/error.hpp>

#include "dsl/base64.h"
#include "dsl/errors.h"
#include "front/remote/json_integer.h"
#include "front/remote/sampling_params_json.h"
#include "front/trace_client/trace_result_file.h"
#include "front/trace_worker/trace_payload.h"
#include "server/api_keys.h"
#include "server/http_error.h"
#include "server/tenant_limits.h"
#include "support/scratch_dir.h"

namespace nnsight {
namespace {

using server::ApiKeys;
using server::HttpError;
using server::TenantLimits;

TEST(ApiKeys, PlainAndHashedKeysNameTheirTenant) {
  testing::ScratchDir dir;
  const std::string bob_key = "bob-secret-key-0123456789";
  const std::string file = dir.write(
      "keys", "# team keys\nalice: sk-alice-0123456789abcdef\n\nbob:sha256:" + ApiKeys::sha256_hex(bob_key) + "\n");
  ApiKeys keys = ApiKeys::load(file);
  EXPECT_TRUE(keys.enabled());
  EXPECT_EQ(keys.tenant("Bearer sk-alice-0123456789abcdef").value_or(""), "alice");
  EXPECT_EQ(keys.tenant("Bearer " + bob_key).value_or(""), "bob");
  EXPECT_FALSE(keys.tenant("Bearer sk-alice-0123456789abcdeX").has_value());
  EXPECT_FALSE(keys.tenant("").has_value());
  EXPECT_FALSE(keys.tenant("Basic sk-alice-0123456789abcdef").has_value());
  // The scheme is case-insensitive (RFC 9110 11.1).
  EXPECT_EQ(keys.tenant("bearer sk-alice-0123456789abcdef").value_or(""), "alice");
  EXPECT_EQ(keys.tenant("BEARER  sk-alice-0123456789abcdef").value_or(""), "alice");
  EXPECT_FALSE(keys.tenant("Bearersk-alice-0123456789abcdef").has_value());
  // The known SHA-256 of "abc".
  EXPECT_EQ(ApiKeys::sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(ApiKeys, MalformedFilesNameTheLine) {
  testing::ScratchDir dir;
  auto message = [&](const std::string& text) {
    try {
      ApiKeys::load(dir.write("k", text));
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("alice\n").find("k:1: expected 'tenant:key'"), std::string::npos);
  EXPECT_NE(message("a:0123456789abcdef0\nb:sha256:12\n").find("k:2: a sha256: entry needs 64 hex digits"),
            std::string::npos);
  EXPECT_NE(message("a:short\n").find("shorter than 16"), std::string::npos);
  EXPECT_NE(message("a:0123456789abcdef0\na:0123456789abcdef1\n").find("appears twice"), std::string::npos);
  EXPECT_NE(message("# nothing\n").find("holds no key"), std::string::npos);
  // Without a file everyone is one tenant.
  EXPECT_EQ(ApiKeys().tenant("").value_or(""), "anonymous");
}

TEST(TenantLimits, QueuesBeyondTheConcurrentLimitAndRefusesBeyondTheQueue) {
  server::TenantLimitOptions o;
  o.max_concurrent_traces = 2;
  o.max_queued_traces = 1;
  TenantLimits limits(o);
  std::vector<std::string> started;
  auto start = [&](std::string id) { return [&started, id] { started.push_back(id); }; };
  limits.enqueue("a", "1", start("1"));
  limits.enqueue("a", "2", start("2"));
  limits.enqueue("a", "3", start("3"));  // queued
  EXPECT_EQ(started, (std::vector<std::string>{"1", "2"}));
  try {
    limits.enqueue("a", "4", start("4"));
    FAIL() << "a full queue must refuse";
  } catch (const HttpError& e) {
    EXPECT_EQ(e.status(), 429);
    EXPECT_NE(std::string(e.what()).find("queued traces limit"), std::string::npos);
  }
  limits.enqueue("b", "5", start("5"));  // another key is not held up
  EXPECT_EQ(started.back(), "5");
  limits.finished("a");  // 3 takes the freed place
  EXPECT_EQ(started.back(), "3");
  limits.enqueue("a", "6", start("6"));  // queued again
  EXPECT_TRUE(limits.remove_queued("a", "6"));
  EXPECT_FALSE(limits.remove_queued("a", "6"));
  limits.finished("a");
  limits.finished("a");
  limits.enqueue("a", "7", start("7"));
  EXPECT_EQ(started.back(), "7");
}

TEST(TenantLimits, TokensPerMinute) {
  server::TenantLimitOptions o;
  o.max_tokens_per_minute = 100;
  TenantLimits limits(o);
  limits.charge_tokens("a", 60);
  limits.charge_tokens("a", 40);
  EXPECT_THROW(limits.charge_tokens("a", 1), HttpError);
  limits.charge_tokens("b", 100);  // per key
}

TEST(Base64, RoundTripsEveryLengthAndRefusesGarbage) {
  std::string bytes;
  for (int n = 0; n < 40; ++n) {
    EXPECT_EQ(dsl::base64_decode(dsl::base64_encode(bytes), "x"), bytes) << n;
    bytes += static_cast<char>(n * 37);
  }
  EXPECT_EQ(dsl::base64_encode("Man"), "TWFu");
  EXPECT_THROW(dsl::base64_decode("abc", "x"), ConfigError);
  EXPECT_THROW(dsl::base64_decode("a!c=", "x"), ConfigError);
}

TEST(SamplingParamsJson, RoundTripsAndNamesBadFields) {
  SamplingParams p;
  p.temperature(0.5).top_p(0.9).top_k(5).max_tokens(7).seed(3).stop({"."}).stop_token_ids({2}).logprobs(2);
  SamplingParams q = remote::sampling_params_from_json(remote::sampling_params_to_json(p), "sp");
  EXPECT_EQ(remote::sampling_params_to_json(q), remote::sampling_params_to_json(p));
  EXPECT_EQ(remote::sampling_params_from_json({{"stop", "x"}}, "sp").stop(), std::vector<std::string>{"x"});
  auto message = [](const nlohmann::json& j) {
    try {
      remote::sampling_params_from_json(j, "sp");
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({{"temprature", 1}}).find("sp.temprature: unknown sampling parameter"), std::string::npos);
  EXPECT_NE(message({{"max_tokens", "ten"}}).find("sp.max_tokens: wrong type"), std::string::npos);
  EXPECT_NE(message({{"temperature", -1}}).find("sp: "), std::string::npos);
  EXPECT_NE(message(nlohmann::json::array()).find("must be a JSON object"), std::string::npos);
  // Integers must be integers that fit: 2.5 is not 2, 2^63 is not negative.
  EXPECT_NE(message({{"max_tokens", 2.5}}).find("sp.max_tokens: expected a signed 64-bit integer, got 2.5"),
            std::string::npos);
  EXPECT_NE(message({{"max_tokens", nlohmann::json::parse("9223372036854775808")}}).find("sp.max_tokens: expected"),
            std::string::npos);
  EXPECT_NE(message({{"seed", -1}}).find("sp.seed: expected an unsigned 64-bit integer"), std::string::npos);
  EXPECT_NE(message({{"stop_token_ids", nlohmann::json::parse("[2, 4294967298]")}}).find("sp.stop_token_ids[1]"),
            std::string::npos);
}

TEST(JsonInteger, RangeCheckedBeforeNarrowing) {
  using nlohmann::json;
  EXPECT_EQ(remote::json_integer<int32_t>(json(7), "x"), 7);
  EXPECT_EQ(remote::json_integer<int32_t>(json(-7), "x"), -7);
  EXPECT_EQ(remote::json_integer<uint64_t>(json::parse("18446744073709551615"), "x"), ~uint64_t{0});
  // What a 32-bit narrowing would have turned into 1, 0 and 0.
  for (const char* wide : {"4294967297", "4294967296", "-4294967296", "2147483648"})
    EXPECT_THROW(remote::json_integer<int32_t>(json::parse(wide), "x"), ConfigError) << wide;
  EXPECT_THROW(remote::json_integer<int64_t>(json::parse("9223372036854775808"), "x"), ConfigError);
  EXPECT_THROW(remote::json_integer<int64_t>(json(2.5), "x"), ConfigError);
  EXPECT_THROW(remote::json_integer<int64_t>(json(2.0), "x"), ConfigError);  // a float, even if whole
  EXPECT_THROW(remote::json_integer<uint32_t>(json(-1), "x"), ConfigError);
  EXPECT_THROW(remote::json_integer<int32_t>(json(5), "x", 0, 4), ConfigError);
  try {
    remote::json_integers<int32_t>(json::parse("[1, 4294967297]"), "prompt", 0);
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "prompt[1]: expected an integer in [0, 2147483647], got 4294967297");
  }
}

TEST(TracePayload, OneVersionAndTheSavedBytesLimitRidesInSamplingParams) {
  tracing::TracePayload p;
  std::string bytes = tracing::encode_payload(p);
  EXPECT_EQ(bytes[4], 1);
  EXPECT_EQ(tracing::decode_payload(bytes, dsl::Limits()).num_requests, 1u);
  bytes[4] = 2;  // the limit once rode in the payload as version 2: refused, not misread
  EXPECT_THROW(tracing::decode_payload(bytes, dsl::Limits()), dsl::DecodeError);
  // A client may send a smaller limit with its sampling params.
  SamplingParams sp = remote::sampling_params_from_json(nlohmann::json{{"max_saved_bytes", 4096}}, "sampling_params");
  EXPECT_EQ(sp.max_saved_bytes(), 4096);
  EXPECT_EQ(remote::sampling_params_to_json(sp)["max_saved_bytes"], 4096);
  EXPECT_FALSE(remote::sampling_params_to_json(SamplingParams()).contains("max_saved_bytes"));
  EXPECT_THROW(remote::sampling_params_from_json(nlohmann::json{{"max_saved_bytes", -1}}, "sampling_params"),
               ConfigError);
}

TEST(TraceResultFile, RoundTripsSavesListsAndOutputs) {
  RequestOutput o;
  o.prompt_token_ids = {1, 2, 3};
  o.token_ids = {7, 8};
  o.text = "é x";
  o.finish_reason = FinishReason::kLength;
  std::map<std::string, SavedValue> saves;
  saves["h"] = SavedValue(at::arange(6, at::kFloat).reshape({2, 3}));
  std::vector<at::Tensor> items(12);
  items[0] = at::ones({2});
  items[11] = at::full({1}, 5.0);  // items 1..10 are None
  saves["steps"] = SavedValue::of_list(items);
  saves["n"] = SavedValue(at::scalar_tensor(3, at::kLong));
  TraceResult r({o}, saves);
  std::string bytes = tracing::encode_trace_result(r, {"prompt"});
  TraceResult back = tracing::decode_trace_result(bytes, "mem");
  ASSERT_EQ(back.outputs().size(), 1u);
  EXPECT_EQ(back.output().text, "é x");
  EXPECT_EQ(back.output().token_ids, o.token_ids);
  EXPECT_EQ(back.output().prompt_token_ids, o.prompt_token_ids);
  EXPECT_EQ(back.output().finish_reason, FinishReason::kLength);
  EXPECT_TRUE(back.saves().at("h").tensor.equal(saves["h"].tensor));
  EXPECT_TRUE(back.saves().at("n").tensor.equal(saves["n"].tensor));
  const auto& list = back.saves().at("steps");
  ASSERT_TRUE(list.is_list);
  ASSERT_EQ(list.list.size(), 12u);
  EXPECT_TRUE(list.list[0].equal(items[0]));
  EXPECT_FALSE(list.list[5].defined());
  EXPECT_TRUE(list.list[11].equal(items[11]));
  // Names sort in list order ("steps.00" .. "steps.11").
  auto flat = tracing::flatten_saves(r);
  EXPECT_EQ(flat[2].first, "steps.00");
  EXPECT_EQ(flat[3].first, "steps.11");
  EXPECT_THROW(tracing::decode_trace_result("not safetensors", "mem"), LoadError);
}

}  // namespace
}  // namespace nnsight
