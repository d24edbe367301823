// Provider keys in graphs: the typed key (core/provider_key.h) and the kinds
// of value each key's provider may hold.
#pragma once

#include "core/provider_key.h"
#include "dsl/value_kind.h"

namespace nnsight::dsl {

using nnsight::KeyKind;
using nnsight::parse_provider_key;
using nnsight::ProviderKey;

// The kinds a value of that key may have (for static checks).
KindMask provider_key_kinds(KeyKind kind);

}  // namespace nnsight::dsl
