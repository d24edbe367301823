#include "core/tokenizer/normalizer.h"

#include <c10/util/Exception.h>
#include <pcre2.h>

#include <nnsight/error.hpp>
#include <utility>

#include "core/tokenizer/onig_compat.h"

namespace nnsight {

struct Normalizer::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

NormalizeRule NormalizeRule::prepend(std::string text) {
  NormalizeRule r;
  r.kind = Kind::kPrepend;
  r.text = std::move(text);
  return r;
}

NormalizeRule NormalizeRule::replace(std::string pattern, std::string content) {
  NormalizeRule r;
  r.kind = Kind::kReplace;
  r.pattern = std::move(pattern);
  r.text = std::move(content);
  return r;
}

NormalizeRule NormalizeRule::replace_regex(std::string pattern, std::string content) {
  NormalizeRule r = replace(std::move(pattern), std::move(content));
  r.regex = true;
  return r;
}

Normalizer::Normalizer(std::vector<NormalizeRule> rules) : rules_(std::move(rules)) {
  for (const NormalizeRule& r : rules_) {
    if (r.kind == NormalizeRule::Kind::kReplace && r.pattern.empty()) {
      throw LoadError("normalizer: a Replace pattern is empty");
    }
    if (!r.regex) {
      compiled_.push_back(nullptr);
      continue;
    }
    const std::string pattern = onig_to_pcre2(r.pattern);
    int err = 0;
    PCRE2_SIZE err_offset = 0;
    auto c = std::make_unique<Compiled>();
    c->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP, &err,
                            &err_offset, nullptr);
    if (c->code == nullptr) {
      PCRE2_UCHAR buf[256];
      const int n = pcre2_get_error_message(err, buf, sizeof(buf));
      throw LoadError(
          "normalizer: Replace pattern '" + r.pattern + "' does not compile at offset " + std::to_string(err_offset) +
          ": " + (n < 0 ? std::string("PCRE2 error") : std::string(reinterpret_cast<const char*>(buf), size_t(n))));
    }
    (void)pcre2_jit_compile(c->code, PCRE2_JIT_COMPLETE);
    compiled_.push_back(std::move(c));
  }
}

Normalizer::~Normalizer() = default;
Normalizer::Normalizer(Normalizer&&) noexcept = default;
Normalizer& Normalizer::operator=(Normalizer&&) noexcept = default;

namespace {

void replace_literal(std::string_view in, const std::string& pattern, const std::string& content, std::string& out) {
  out.clear();
  size_t pos = 0;
  while (true) {
    const size_t hit = in.find(pattern, pos);
    if (hit == std::string_view::npos) break;
    out.append(in.substr(pos, hit - pos));
    out += content;
    pos = hit + pattern.size();
  }
  out.append(in.substr(pos));
}

void replace_regex(std::string_view in, pcre2_code* code, const std::string& content, std::string& out) {
  out.clear();
  pcre2_match_data* md = pcre2_match_data_create(1, nullptr);
  TORCH_CHECK(md != nullptr, "pcre2_match_data_create failed");
  const auto* s = reinterpret_cast<PCRE2_SPTR>(in.data());
  size_t pos = 0;     // next byte to copy
  size_t search = 0;  // where the next match may start
  while (search <= in.size()) {
    const int rc = pcre2_match(code, s, in.size(), search, 0, md, nullptr);
    if (rc < 0) {
      TORCH_CHECK(rc == PCRE2_ERROR_NOMATCH, "normalizer: PCRE2 match failed with code ", rc);
      break;
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    out.append(in.substr(pos, ov[0] - pos));
    out += content;
    pos = ov[1];
    if (ov[1] > ov[0]) {
      search = ov[1];
    } else {
      // An empty match: step over one character so the loop advances.
      if (ov[0] >= in.size()) break;
      size_t next = ov[0] + 1;
      while (next < in.size() && (static_cast<uint8_t>(in[next]) & 0xC0) == 0x80) ++next;
      out.append(in.substr(ov[0], next - ov[0]));
      pos = search = next;
    }
  }
  pcre2_match_data_free(md);
  out.append(in.substr(std::min(pos, in.size())));
}

}  // namespace

void Normalizer::apply(std::string_view text, std::string& out, std::string& tmp) const {
  out.assign(text.data(), text.size());
  for (size_t i = 0; i < rules_.size(); ++i) {
    const NormalizeRule& r = rules_[i];
    if (r.kind == NormalizeRule::Kind::kPrepend) {
      if (!out.empty()) out.insert(0, r.text);
      continue;
    }
    if (compiled_[i] == nullptr) {
      if (out.find(r.pattern) == std::string::npos) continue;
      replace_literal(out, r.pattern, r.text, tmp);
    } else {
      replace_regex(out, compiled_[i]->code, r.text, tmp);
    }
    out.swap(tmp);
  }
}

}  // namespace nnsight
