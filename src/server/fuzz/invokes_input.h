// The HTTP fuzzer's input for a trace recorded by a C++ client (the last
// endpoint of src/server/fuzz/http_fuzzer.cpp): the raw binary payloads, so
// that libFuzzer mutates their bytes rather than their base64. An input is one
// or more invokes separated by kInvokeSeparator, each a line holding the
// invoke's JSON fields (prompt_token_ids, sampling_params, invoke_index) and
// then its payload bytes. invokes_body() turns it into the JSON body a client
// POSTs to /v1/traces, {"invokes": [{..., "payload": base64}]}
// (docs/server.md); invokes_input() is the inverse, for writing seeds from
// recorded bodies (tests/server/fuzz_seeds_test.cpp).
#pragma once

#include <algorithm>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "dsl/base64.h"

namespace nnsight::server::fuzz {

constexpr std::string_view kInvokeSeparator = "\n@@invoke@@\n";

// An invoke whose line is not a JSON object is sent as its text, inside
// {"invokes": [...]}, so that broken JSON reaches the server too.
inline std::string invokes_body(std::string_view in) {
  nlohmann::json invokes = nlohmann::json::array();
  std::string raw = "{\"invokes\": [";
  bool objects = true;
  size_t at = 0;
  for (;;) {
    const size_t end = std::min(in.find(kInvokeSeparator, at), in.size());
    const std::string_view record = in.substr(at, end - at);
    const size_t nl = record.find('\n');
    const std::string_view fields = record.substr(0, nl);
    const std::string_view payload = nl == std::string_view::npos ? std::string_view() : record.substr(nl + 1);
    nlohmann::json inv = nlohmann::json::parse(fields, nullptr, false);
    objects = objects && inv.is_object();
    if (objects) {
      inv["payload"] = dsl::base64_encode(payload);
      invokes.push_back(std::move(inv));
    }
    raw += (at == 0 ? "" : ", ") + std::string(fields);
    if (end == in.size()) break;
    at = end + kInvokeSeparator.size();
  }
  return objects ? nlohmann::json{{"invokes", std::move(invokes)}}.dump() : raw + "]}";
}

// The fuzzer's input for a recorded body's "invokes" (other fields dropped).
inline std::string invokes_input(const nlohmann::json& body) {
  std::string out;
  for (const auto& inv : body.at("invokes")) {
    nlohmann::json fields = inv;
    fields.erase("payload");
    if (!out.empty()) out += kInvokeSeparator;
    out += fields.dump() + "\n" + dsl::base64_decode(inv.at("payload").get<std::string>(), "payload");
  }
  return out;
}

}  // namespace nnsight::server::fuzz
