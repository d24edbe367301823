#include "dsl/utf8.h"

#include "core/tokenizer/utf8.h"

namespace nnsight::dsl {

bool valid_utf8(std::string_view s) { return utf8_valid_prefix(s) == s.size(); }

}  // namespace nnsight::dsl
