// UTF-8 well-formedness (RFC 3629: no overlongs, no surrogates, <= U+10FFFF).
// Every string in a graph must be valid UTF-8 so that its JSON form exists.
#pragma once

#include <string_view>

namespace nnsight::dsl {

bool valid_utf8(std::string_view s);

}  // namespace nnsight::dsl
