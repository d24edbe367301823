// ScanResult (include/nnsight/scan_result.hpp).
#include <nnsight/error.hpp>
#include <nnsight/scan_result.hpp>

#include <sstream>

#include "core/shape_string.h"
#include "dsl/builder.h"
#include "dsl/dtype.h"

namespace nnsight {

std::string ScannedValue::describe() const {
  if (is_none) return "None";
  if (is_tensor) return dsl::dtype_name(dtype) + shape_string(shape);
  if (kind == "tuple" || kind == "list") {
    std::string out = kind + "(";
    for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i].describe();
    return out + ")";
  }
  return kind;
}

const ScannedValue* ScanResult::find(const Proxy& proxy) const {
  if (!proxy.valid()) throw Error("an empty proxy was given to a scan result");
  if (proxy.builder()->trace_id() != trace_id_) throw Error("the proxy belongs to another trace than the one scanned");
  const uint32_t invoke = proxy.builder()->invoke() + num_edits_;
  for (const auto& v : values_)
    if (v.invoke == invoke && v.node == proxy.node()) return &v;
  return nullptr;
}

bool ScanResult::has(const Proxy& proxy) const { return find(proxy) != nullptr; }

const ScannedValue& ScanResult::operator[](const Proxy& proxy) const {
  if (const ScannedValue* v = find(proxy)) return *v;
  throw Error("the scan computed no value for this proxy (node " + std::to_string(proxy.node()) +
              "): it lies in a branch or iteration that did not run");
}

const ScannedValue& ScanResult::operator[](const Saved& saved) const {
  auto it = saves_.find(saved.name());
  if (it == saves_.end())
    throw Error("the scan saw no save '" + saved.name() + "' (a save in a branch or iteration that did not run)");
  return it->second;
}

std::string ScanResult::str() const {
  std::ostringstream os;
  for (const auto& v : values_)
    os << "invoke " << v.invoke << " node " << v.node << "  " << v.where << "  " << v.what << "  " << v.describe()
       << "\n";
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const ScanResult& result) { return os << result.str(); }

}  // namespace nnsight
