// A model's chat template (tokenizer_config.json "chat_template", GGUF
// "tokenizer.chat_template"): the Jinja text that turns a conversation into
// the prompt the model was trained on. Rendered by the Jinja subset in
// core/jinja the way transformers' apply_chat_template(tokenize=False) does;
// docs/cli.md ("Chat") lists what the subset covers.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace nnsight {

namespace jinja {
struct Stmt;
}

struct ChatMessage {
  std::string role;
  std::string content;
};

class ChatTemplate {
 public:
  // Parses `source`; throws nnsight::ConfigError for text outside the
  // supported subset (the construct and its line:column).
  // Copies share the parsed template.
  explicit ChatTemplate(std::string source);

  // Renders as transformers' apply_chat_template(tokenize=False) would (the
  // template sees messages, add_generation_prompt, bos_token, eos_token, and
  // tools = documents = none). Throws nnsight::ConfigError for
  // raise_exception() in the template ("chat template: <its message>") or an
  // evaluation error ("chat template <line>:<column>: ..."). Thread-safe.
  std::string render(const std::vector<ChatMessage>& messages, bool add_generation_prompt, const std::string& bos_token,
                     const std::string& eos_token) const;

  const std::string& source() const { return source_; }

 private:
  std::string source_;
  std::shared_ptr<const std::vector<std::unique_ptr<jinja::Stmt>>> body_;
};

}  // namespace nnsight
