#include "dsl/json_codec.h"

#include "dsl/base64.h"
#include "dsl/dtype.h"
#include "dsl/errors.h"
#include "dsl/tensor_bytes.h"

#include <nlohmann/json.hpp>

#include <ATen/ATen.h>

#include <cmath>
#include <limits>

namespace nnsight::dsl {
namespace {

using Json = nlohmann::ordered_json;

// ---- writing --------------------------------------------------------------------

Json tensor_json(const at::Tensor& t) {
  at::Tensor c = contiguous_cpu(t);
  if (!dtype_code(c.scalar_type()))
    throw Error("cannot encode a tensor of dtype " + std::string(c10::toString(c.scalar_type())));
  Json shape = Json::array();
  for (int64_t d = 0; d < c.dim(); ++d) shape.push_back(c.size(d));
  Json j = Json::object();
  j["dtype"] = dtype_name(c.scalar_type());
  j["shape"] = std::move(shape);
  j["data_b64"] =
      base64_encode(static_cast<const uint8_t*>(c.data_ptr()), static_cast<size_t>(c.numel()) * c.element_size());
  return j;
}

Json double_json(double v) {
  if (std::isnan(v)) return Json{{"double", "nan"}};
  if (std::isinf(v)) return Json{{"double", v > 0 ? "inf" : "-inf"}};
  return Json(v);
}

Json value_json(const Value& v);

Json index_item_json(const IndexItem& it) {
  switch (it.kind) {
    case IndexItem::Kind::Int:
      return Json(it.integer);
    case IndexItem::Kind::Slice: {
      Json s = Json::array();
      s.push_back(it.start ? Json(*it.start) : Json(nullptr));
      s.push_back(it.stop ? Json(*it.stop) : Json(nullptr));
      s.push_back(it.step);
      return Json{{"slice", std::move(s)}};
    }
    case IndexItem::Kind::Ellipsis:
      return Json("...");
    case IndexItem::Kind::None:
      return Json(nullptr);
    case IndexItem::Kind::Tensor:
      return tensor_json(it.tensor);
  }
  return Json(nullptr);
}

Json value_json(const Value& v) {
  switch (v.kind()) {
    case ValueKind::None:
      return Json(nullptr);
    case ValueKind::Tensor:
      return tensor_json(v.as_tensor());
    case ValueKind::Int:
      return Json(v.as_int());
    case ValueKind::Double:
      return double_json(v.as_double());
    case ValueKind::Bool:
      return Json(v.as_bool());
    case ValueKind::List: {
      Json a = Json::array();
      for (const Value& x : v.as_list()) a.push_back(value_json(x));
      return a;
    }
    case ValueKind::Tuple: {
      Json a = Json::array();
      for (const at::Tensor& t : v.as_tuple()) a.push_back(t.defined() ? tensor_json(t) : Json(nullptr));
      return Json{{"tuple", std::move(a)}};
    }
    case ValueKind::Index: {
      Json a = Json::array();
      for (const IndexItem& it : v.as_index()) a.push_back(index_item_json(it));
      return Json{{"index", std::move(a)}};
    }
    case ValueKind::Dtype:
      return Json{{"dtype", dtype_name(v.as_dtype())}};
    case ValueKind::String:
      return Json(v.as_string());
  }
  return Json(nullptr);
}

Json step_json(const StepSpec& s) {
  if (s.mode == StepSpec::Mode::Fixed) return Json(s.value);
  return Json{{"iter", s.value}};
}

Json node_json(const Node& n, size_t id) {
  Json j = Json::object();
  j["id"] = id;
  j["kind"] = node_kind_name(n.kind);
  switch (n.kind) {
    case NodeKind::Const:
      j["value"] = value_json(n.value);
      break;
    case NodeKind::Get:
      j["key"] = n.name;
      j["step"] = step_json(n.step);
      break;
    case NodeKind::Set:
      j["key"] = n.name;
      j["step"] = step_json(n.step);
      j["args"] = n.args;
      break;
    case NodeKind::Op:
      j["op"] = n.name;
      j["args"] = n.args;
      break;
    case NodeKind::Apply:
      j["function"] = n.name;
      j["args"] = n.args;
      break;
    case NodeKind::Call:
      j["module"] = n.name;
      j["args"] = n.args;
      break;
    case NodeKind::Save:
      j["name"] = n.name;
      j["args"] = n.args;
      if (n.save_mode == SaveMode::Append) j["mode"] = "append";
      break;
    case NodeKind::Iter:
      j["start"] = n.range.start;
      if (n.range.all) {
        j["stop"] = "all";
      } else {
        j["stop"] = n.range.stop;
      }
      j["stride"] = n.range.stride;
      break;
    case NodeKind::Cond:
    case NodeKind::Grad:
    case NodeKind::Backward:
      j["args"] = n.args;
      break;
    case NodeKind::Else:
    case NodeKind::End:
    case NodeKind::Stop:
      break;
    case NodeKind::External:
      j["invoke"] = n.ext_invoke;
      j["node"] = n.ext_node;
      break;
  }
  if (!n.loc.file.empty() || n.loc.line != 0) j["loc"] = n.loc.file + ":" + std::to_string(n.loc.line);
  return j;
}

// ---- reading --------------------------------------------------------------------

class Reader {
 public:
  explicit Reader(const Limits& limits) : limits_(limits) {}

  [[noreturn]] void fail(const std::string& pointer, const std::string& what) const {
    std::string where = "graph JSON at " + (pointer.empty() ? std::string("/") : pointer);
    if (node_ >= 0) where += " (node " + std::to_string(node_) + ")";
    throw DecodeError(where + ": " + what);
  }

  static std::string type_name(const Json& j) { return j.type_name(); }

  int64_t integer(const Json& j, const std::string& ptr, const char* what) const {
    if (j.is_number_integer() && !j.is_number_unsigned()) return j.get<int64_t>();
    if (j.is_number_unsigned()) {
      uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        fail(ptr, std::string(what) + " " + std::to_string(u) + " does not fit in int64");
      return static_cast<int64_t>(u);
    }
    fail(ptr, std::string(what) + " must be an integer, got " + type_name(j));
  }

  uint32_t u32(const Json& j, const std::string& ptr, const char* what) const {
    int64_t v = integer(j, ptr, what);
    if (v < 0 || v > static_cast<int64_t>(std::numeric_limits<uint32_t>::max()))
      fail(ptr, std::string(what) + " " + std::to_string(v) + " is out of range");
    return static_cast<uint32_t>(v);
  }

  std::string str(const Json& j, const std::string& ptr, const char* what) const {
    if (!j.is_string()) fail(ptr, std::string(what) + " must be a string, got " + type_name(j));
    const std::string& s = j.get_ref<const std::string&>();
    if (s.size() > limits_.max_string_length)
      fail(ptr, std::string(what) + " length " + std::to_string(s.size()) + " exceeds the limit of " +
                    std::to_string(limits_.max_string_length));
    return s;
  }

  // Checks that an object has only the listed keys.
  void only_keys(const Json& j, const std::string& ptr, std::initializer_list<const char*> keys) const {
    for (auto it = j.begin(); it != j.end(); ++it) {
      bool known = false;
      for (const char* k : keys) known |= it.key() == k;
      if (!known) fail(ptr + "/" + it.key(), "unknown field '" + it.key() + "'");
    }
  }

  const Json& field(const Json& j, const std::string& ptr, const char* key) const {
    auto it = j.find(key);
    if (it == j.end()) fail(ptr, std::string("missing field '") + key + "'");
    return *it;
  }

  at::Tensor tensor(const Json& j, const std::string& ptr) {
    only_keys(j, ptr, {"dtype", "shape", "data_b64", "data"});
    std::string dname = str(field(j, ptr, "dtype"), ptr + "/dtype", "dtype");
    auto dtype = dtype_from_name(dname);
    if (!dtype) fail(ptr + "/dtype", "unknown dtype '" + dname + "'");
    const Json& js = field(j, ptr, "shape");
    if (!js.is_array()) fail(ptr + "/shape", "shape must be an array, got " + type_name(js));
    if (js.size() > limits_.max_tensor_rank)
      fail(ptr + "/shape", "tensor rank " + std::to_string(js.size()) + " exceeds the limit of " +
                               std::to_string(limits_.max_tensor_rank));
    std::vector<int64_t> shape;
    for (size_t i = 0; i < js.size(); ++i)
      shape.push_back(integer(js[i], ptr + "/shape/" + std::to_string(i), "dimension"));
    uint64_t numel = 0;
    std::string err = check_tensor_shape(shape, limits_, &numel);
    if (!err.empty()) fail(ptr + "/shape", err);
    uint64_t nbytes = numel * dtype_size(*dtype);
    if (constant_bytes_ + nbytes > limits_.max_constant_bytes)
      fail(ptr,
           "constant tensors total more than the limit of " + std::to_string(limits_.max_constant_bytes) + " bytes");
    bool has_b64 = j.contains("data_b64"), has_data = j.contains("data");
    if (has_b64 == has_data) fail(ptr, "a tensor needs exactly one of 'data_b64' and 'data'");
    constant_bytes_ += nbytes;
    if (has_b64) {
      const Json& jd = j["data_b64"];
      if (!jd.is_string()) fail(ptr + "/data_b64", "data_b64 must be a string, got " + type_name(jd));
      const std::string& text = jd.get_ref<const std::string&>();
      auto size = base64_decoded_size(text);
      if (!size) fail(ptr + "/data_b64", "not valid base64 (length " + std::to_string(text.size()) + ")");
      if (*size != nbytes)
        fail(ptr + "/data_b64", "holds " + std::to_string(*size) + " bytes, but dtype " + dname +
                                    " and the shape need " + std::to_string(nbytes));
      std::vector<uint8_t> bytes(nbytes);
      if (!base64_decode(text, bytes.data())) fail(ptr + "/data_b64", "not valid base64");
      try {
        return tensor_from_bytes(*dtype, shape, bytes.data(), bytes.size());
      } catch (const Error& e) {
        fail(ptr + "/data_b64", e.what());
      }
    }
    return tensor_from_numbers(j["data"], ptr + "/data", *dtype, shape, numel);
  }

  // Hand-written {"data": [numbers]}: flat, row-major.
  at::Tensor tensor_from_numbers(const Json& jd, const std::string& ptr, at::ScalarType dtype,
                                 const std::vector<int64_t>& shape, uint64_t numel) {
    if (!jd.is_array()) fail(ptr, "data must be an array of numbers, got " + type_name(jd));
    if (jd.size() != numel)
      fail(ptr, "has " + std::to_string(jd.size()) + " numbers, but the shape needs " + std::to_string(numel));
    if (at::isComplexType(dtype)) fail(ptr, "complex tensors must use data_b64");
    auto opts = at::TensorOptions();
    if (dtype == at::kBool) {
      at::Tensor t = at::empty({static_cast<int64_t>(numel)}, opts.dtype(at::kBool));
      bool* p = t.data_ptr<bool>();
      for (size_t i = 0; i < numel; ++i) {
        const Json& x = jd[i];
        std::string ip = ptr + "/" + std::to_string(i);
        if (x.is_boolean()) {
          p[i] = x.get<bool>();
        } else {
          int64_t v = integer(x, ip, "bool element");
          if (v != 0 && v != 1) fail(ip, "a bool element must be true, false, 0 or 1");
          p[i] = v == 1;
        }
      }
      return t.reshape(shape).clone();
    }
    if (at::isIntegralType(dtype, false)) {
      at::Tensor t = at::empty({static_cast<int64_t>(numel)}, opts.dtype(at::kLong));
      int64_t* p = t.data_ptr<int64_t>();
      for (size_t i = 0; i < numel; ++i) {
        std::string ip = ptr + "/" + std::to_string(i);
        int64_t v = integer(jd[i], ip, "element");
        if (!fits(dtype, v)) fail(ip, std::to_string(v) + " does not fit in " + dtype_name(dtype));
        p[i] = v;
      }
      return t.to(dtype).reshape(shape).clone();
    }
    at::Tensor t = at::empty({static_cast<int64_t>(numel)}, opts.dtype(at::kDouble));
    double* p = t.data_ptr<double>();
    for (size_t i = 0; i < numel; ++i) {
      const Json& x = jd[i];
      if (x.is_number()) {
        p[i] = x.get<double>();
      } else {
        p[i] = real(x, ptr + "/" + std::to_string(i));
      }
    }
    return t.to(dtype).reshape(shape).clone();
  }

  static bool fits(at::ScalarType t, int64_t v) {
    switch (t) {
      case at::kByte:
        return v >= 0 && v <= 255;
      case at::kChar:
        return v >= -128 && v <= 127;
      case at::kShort:
        return v >= -32768 && v <= 32767;
      case at::kInt:
        return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
      default:
        return true;
    }
  }

  // A double: a JSON number, or {"double": "nan" | "inf" | "-inf"}.
  double real(const Json& j, const std::string& ptr) const {
    if (j.is_number()) return j.get<double>();
    if (j.is_object() && j.size() == 1 && j.contains("double")) {
      const Json& s = j["double"];
      if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
      if (s == "inf") return std::numeric_limits<double>::infinity();
      if (s == "-inf") return -std::numeric_limits<double>::infinity();
      fail(ptr + "/double", "must be \"nan\", \"inf\" or \"-inf\"");
    }
    fail(ptr, "expected a number, got " + type_name(j));
  }

  std::vector<Value> list_items(const Json& j, const std::string& ptr, uint64_t depth) {
    if (j.size() > limits_.max_list_length)
      fail(ptr, "list of " + std::to_string(j.size()) + " items exceeds the limit of " +
                    std::to_string(limits_.max_list_length));
    std::vector<Value> items;
    items.reserve(j.size());
    for (size_t i = 0; i < j.size(); ++i) items.push_back(value(j[i], ptr + "/" + std::to_string(i), depth + 1));
    return items;
  }

  IndexItem index_item(const Json& j, const std::string& ptr) {
    if (j.is_null()) return IndexItem::make_none();
    if (j.is_string()) {
      if (j == "...") return IndexItem::make_ellipsis();
      fail(ptr, "an index string must be \"...\"");
    }
    if (j.is_number_integer()) return IndexItem::make_int(integer(j, ptr, "index"));
    if (j.is_object() && j.contains("slice")) {
      only_keys(j, ptr, {"slice"});
      const Json& s = j["slice"];
      std::string sp = ptr + "/slice";
      if (!s.is_array() || s.size() < 2 || s.size() > 3)
        fail(sp, "a slice is [start, stop] or [start, stop, step] (null for an open bound)");
      std::optional<int64_t> start, stop;
      if (!s[0].is_null()) start = integer(s[0], sp + "/0", "slice start");
      if (!s[1].is_null()) stop = integer(s[1], sp + "/1", "slice stop");
      int64_t step = s.size() == 3 ? integer(s[2], sp + "/2", "slice step") : 1;
      return IndexItem::make_slice(start, stop, step);
    }
    if (j.is_object()) return IndexItem::make_tensor(tensor(j, ptr));
    fail(ptr, "not an index item: " + type_name(j));
  }

  Value value(const Json& j, const std::string& ptr, uint64_t depth) {
    if (depth > limits_.max_depth)
      fail(ptr, "values nested deeper than the limit of " + std::to_string(limits_.max_depth));
    switch (j.type()) {
      case Json::value_t::null:
        return Value();
      case Json::value_t::boolean:
        return Value::boolean(j.get<bool>());
      case Json::value_t::number_integer:
      case Json::value_t::number_unsigned:
        return Value::integer(integer(j, ptr, "int"));
      case Json::value_t::number_float:
        return Value::real(j.get<double>());
      case Json::value_t::string:
        return Value::string(str(j, ptr, "string"));
      case Json::value_t::array:
        return Value::list(list_items(j, ptr, depth));
      case Json::value_t::object:
        break;
      default:
        fail(ptr, "unsupported JSON type " + type_name(j));
    }
    if (j.contains("tuple")) {
      only_keys(j, ptr, {"tuple"});
      const Json& a = j["tuple"];
      std::string tp = ptr + "/tuple";
      if (!a.is_array()) fail(tp, "a tuple is an array of tensors or nulls");
      if (a.size() > limits_.max_list_length) fail(tp, "tuple exceeds the list length limit");
      std::vector<at::Tensor> items;
      for (size_t i = 0; i < a.size(); ++i)
        items.push_back(a[i].is_null() ? at::Tensor() : tensor(a[i], tp + "/" + std::to_string(i)));
      return Value::tuple(std::move(items));
    }
    if (j.contains("index")) {
      only_keys(j, ptr, {"index"});
      const Json& a = j["index"];
      std::string ip = ptr + "/index";
      if (!a.is_array()) fail(ip, "an index is an array of items");
      if (a.size() > limits_.max_list_length) fail(ip, "index exceeds the list length limit");
      IndexSpec spec;
      for (size_t i = 0; i < a.size(); ++i) spec.push_back(index_item(a[i], ip + "/" + std::to_string(i)));
      return Value::index(std::move(spec));
    }
    if (j.contains("double")) return Value::real(real(j, ptr));
    if (j.contains("dtype") && j.size() == 1) {
      std::string name = str(j["dtype"], ptr + "/dtype", "dtype");
      auto dt = dtype_from_name(name);
      if (!dt) fail(ptr + "/dtype", "unknown dtype '" + name + "'");
      return Value::dtype(*dt);
    }
    if (j.contains("dtype")) return Value(tensor(j, ptr));
    fail(ptr, "an object value must be a tensor, {\"dtype\"}, {\"tuple\"}, {\"index\"} or {\"double\"}");
  }

  std::vector<NodeId> refs(const Json& n, const std::string& ptr) {
    const Json& a = field(n, ptr, "args");
    std::string ap = ptr + "/args";
    if (!a.is_array()) fail(ap, "args must be an array of node ids");
    if (a.size() > limits_.max_list_length) fail(ap, "too many arguments");
    std::vector<NodeId> out;
    out.reserve(a.size());
    for (size_t i = 0; i < a.size(); ++i) out.push_back(u32(a[i], ap + "/" + std::to_string(i), "node id"));
    return out;
  }

  StepSpec step(const Json& j, const std::string& ptr) {
    if (j.is_object()) {
      only_keys(j, ptr, {"iter"});
      return StepSpec::iter(integer(field(j, ptr, "iter"), ptr + "/iter", "iteration offset"));
    }
    return StepSpec::fixed(integer(j, ptr, "step"));
  }

  SourceLoc loc(const Json& j, const std::string& ptr) {
    std::string s = str(j, ptr, "loc");
    size_t colon = s.rfind(':');
    if (colon == std::string::npos) fail(ptr, "loc must be \"file:line\"");
    std::string digits = s.substr(colon + 1);
    if (digits.empty() || digits.size() > 10) fail(ptr, "loc must end in a line number");
    uint64_t line = 0;
    for (char c : digits) {
      if (c < '0' || c > '9') fail(ptr, "loc must end in a line number");
      line = line * 10 + static_cast<uint64_t>(c - '0');
    }
    if (line > std::numeric_limits<uint32_t>::max()) fail(ptr, "line number out of range");
    return SourceLoc{s.substr(0, colon), static_cast<uint32_t>(line)};
  }

  Node node(const Json& j, const std::string& ptr, size_t index) {
    if (!j.is_object()) fail(ptr, "a node is an object, got " + type_name(j));
    if (j.contains("id") && integer(j["id"], ptr + "/id", "id") != static_cast<int64_t>(index))
      fail(ptr + "/id", "id must equal the node's position " + std::to_string(index));
    std::string kind = str(field(j, ptr, "kind"), ptr + "/kind", "kind");
    Node n;
    bool found = false;
    for (int k = 0; k < kNumNodeKinds; ++k)
      if (kind == node_kind_name(static_cast<NodeKind>(k))) {
        n.kind = static_cast<NodeKind>(k);
        found = true;
      }
    if (!found) fail(ptr + "/kind", "unknown node kind '" + kind + "'");
    if (j.contains("loc")) n.loc = loc(j["loc"], ptr + "/loc");
    switch (n.kind) {
      case NodeKind::Const:
        only_keys(j, ptr, {"id", "kind", "loc", "value"});
        n.value = value(field(j, ptr, "value"), ptr + "/value", 0);
        break;
      case NodeKind::Get:
        only_keys(j, ptr, {"id", "kind", "loc", "key", "step"});
        n.set_key(str(field(j, ptr, "key"), ptr + "/key", "key"));
        n.step = j.contains("step") ? step(j["step"], ptr + "/step") : StepSpec::fixed(0);
        break;
      case NodeKind::Set:
        only_keys(j, ptr, {"id", "kind", "loc", "key", "step", "args"});
        n.set_key(str(field(j, ptr, "key"), ptr + "/key", "key"));
        n.step = j.contains("step") ? step(j["step"], ptr + "/step") : StepSpec::fixed(0);
        n.args = refs(j, ptr);
        break;
      case NodeKind::Op:
        only_keys(j, ptr, {"id", "kind", "loc", "op", "args"});
        n.name = str(field(j, ptr, "op"), ptr + "/op", "op");
        n.args = j.contains("args") ? refs(j, ptr) : std::vector<NodeId>{};
        break;
      case NodeKind::Apply:
        only_keys(j, ptr, {"id", "kind", "loc", "function", "args"});
        n.name = str(field(j, ptr, "function"), ptr + "/function", "function");
        n.args = j.contains("args") ? refs(j, ptr) : std::vector<NodeId>{};
        break;
      case NodeKind::Call:
        only_keys(j, ptr, {"id", "kind", "loc", "module", "args"});
        n.name = str(field(j, ptr, "module"), ptr + "/module", "module");
        n.args = refs(j, ptr);
        break;
      case NodeKind::Save: {
        only_keys(j, ptr, {"id", "kind", "loc", "name", "args", "mode"});
        n.name = str(field(j, ptr, "name"), ptr + "/name", "name");
        n.args = refs(j, ptr);
        if (j.contains("mode")) {
          std::string m = str(j["mode"], ptr + "/mode", "mode");
          if (m == "append") {
            n.save_mode = SaveMode::Append;
          } else if (m != "replace") {
            fail(ptr + "/mode", "mode must be \"replace\" or \"append\"");
          }
        }
        break;
      }
      case NodeKind::Iter: {
        only_keys(j, ptr, {"id", "kind", "loc", "start", "stop", "stride"});
        n.range.start = j.contains("start") ? integer(j["start"], ptr + "/start", "start") : 0;
        const Json& stop = field(j, ptr, "stop");
        if (stop.is_string()) {
          if (stop != "all") fail(ptr + "/stop", "stop must be an integer or \"all\"");
          n.range.all = true;
        } else {
          n.range.stop = integer(stop, ptr + "/stop", "stop");
        }
        n.range.stride = j.contains("stride") ? integer(j["stride"], ptr + "/stride", "stride") : 1;
        break;
      }
      case NodeKind::Cond:
      case NodeKind::Grad:
      case NodeKind::Backward:
        only_keys(j, ptr, {"id", "kind", "loc", "args"});
        n.args = refs(j, ptr);
        break;
      case NodeKind::Else:
      case NodeKind::End:
      case NodeKind::Stop:
        only_keys(j, ptr, {"id", "kind", "loc"});
        break;
      case NodeKind::External:
        only_keys(j, ptr, {"id", "kind", "loc", "invoke", "node"});
        n.ext_invoke = u32(field(j, ptr, "invoke"), ptr + "/invoke", "invoke");
        n.ext_node = u32(field(j, ptr, "node"), ptr + "/node", "node");
        break;
    }
    return n;
  }

  Graph graph(const Json& j) {
    if (!j.is_object()) fail("", "a graph is an object, got " + type_name(j));
    only_keys(j, "", {"format", "version", "invoke", "nodes"});
    if (j.contains("format") && j["format"] != kGraphJsonFormat)
      fail("/format", std::string("format must be \"") + kGraphJsonFormat + "\"");
    if (j.contains("version")) {
      int64_t v = integer(j["version"], "/version", "version");
      if (v != 1) fail("/version", "format version " + std::to_string(v) + " is not supported (this build reads 1)");
    }
    Graph g;
    g.invoke = j.contains("invoke") ? u32(j["invoke"], "/invoke", "invoke") : 0;
    const Json& nodes = field(j, "", "nodes");
    if (!nodes.is_array()) fail("/nodes", "nodes must be an array");
    if (nodes.size() > limits_.max_nodes)
      fail("/nodes", std::to_string(nodes.size()) + " nodes exceed the limit of " + std::to_string(limits_.max_nodes));
    g.nodes.reserve(nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i) {
      node_ = static_cast<int64_t>(i);
      g.nodes.push_back(node(nodes[i], "/nodes/" + std::to_string(i), i));
    }
    node_ = -1;
    return g;
  }

 private:
  const Limits& limits_;
  uint64_t constant_bytes_ = 0;
  int64_t node_ = -1;
};

}  // namespace

std::string to_json(const Graph& g, int indent) {
  Json j = Json::object();
  j["format"] = kGraphJsonFormat;
  j["version"] = 1;
  j["invoke"] = g.invoke;
  Json nodes = Json::array();
  for (size_t i = 0; i < g.nodes.size(); ++i) nodes.push_back(node_json(g.nodes[i], i));
  j["nodes"] = std::move(nodes);
  try {
    return j.dump(indent);
  } catch (const Json::exception& e) {
    throw Error(std::string("graph cannot be written as JSON: ") + e.what());  // e.g. a string that is not UTF-8
  }
}

Graph from_json(std::string_view text, const Limits& limits) {
  if (text.size() > limits.max_encoded_bytes)
    throw DecodeError("graph JSON: " + std::to_string(text.size()) + " bytes exceed the limit of " +
                      std::to_string(limits.max_encoded_bytes));
  // The graph's own structure is a few levels deep (graph, nodes, node,
  // value); values add max_depth list levels plus a few for a tensor or an
  // index inside the innermost list.
  const int max_json_depth = static_cast<int>(std::min<uint64_t>(limits.max_depth, 1u << 20)) + 16;
  Json j;
  try {
    j = Json::parse(text.begin(), text.end(), [max_json_depth](int depth, Json::parse_event_t, Json&) {
      if (depth > max_json_depth)
        throw DecodeError("graph JSON: nested deeper than " + std::to_string(max_json_depth) + " levels");
      return true;
    });
  } catch (const Json::parse_error& e) {
    throw DecodeError(std::string("graph JSON: syntax error at byte ") + std::to_string(e.byte) + ": " + e.what());
  } catch (const Json::exception& e) {
    // e.g. out_of_range for a number that overflows a double ("1e99999").
    throw DecodeError(std::string("graph JSON: ") + e.what());
  }
  try {
    return Reader(limits).graph(j);
  } catch (const Json::exception& e) {
    throw DecodeError(std::string("graph JSON: ") + e.what());
  }
}

}  // namespace nnsight::dsl
