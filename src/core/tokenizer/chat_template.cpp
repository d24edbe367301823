#include "core/tokenizer/chat_template.h"

#include "core/jinja/jinja_evaluator.h"
#include "core/jinja/jinja_parser.h"

namespace nnsight {

ChatTemplate::ChatTemplate(std::string source)
    : source_(std::move(source)), body_(std::make_shared<const jinja::Body>(jinja::parse_template(source_))) {}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                 const std::string& bos_token, const std::string& eos_token) const {
  using jinja::Value;
  jinja::ValueList list;
  list.reserve(messages.size());
  for (const ChatMessage& m : messages) {
    list.push_back(Value::make_dict({{"role", Value::string(m.role)}, {"content", Value::string(m.content)}}));
  }
  // What transformers' apply_chat_template passes (tools and documents are None without tools).
  const jinja::Globals globals = {
      {"messages", Value::make_list(std::move(list))},
      {"add_generation_prompt", Value::boolean(add_generation_prompt)},
      {"bos_token", Value::string(bos_token)},
      {"eos_token", Value::string(eos_token)},
      {"tools", Value::none()},
      {"documents", Value::none()},
  };
  return jinja::render(*body_, globals);
}

}  // namespace nnsight
