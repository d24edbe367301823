#include "dsl/binary_codec.h"

#include "dsl/dtype.h"
#include "dsl/errors.h"
#include "dsl/tensor_bytes.h"
#include "dsl/utf8.h"

#include <cereal/archives/portable_binary.hpp>
#include <cereal/details/helpers.hpp>

#include <cmath>
#include <cstring>
#include <istream>
#include <limits>
#include <ostream>
#include <streambuf>
#include <unordered_map>

namespace nnsight::dsl {
namespace {

constexpr size_t kHeaderBytes = sizeof(kGraphMagic) + sizeof(uint16_t);

// ---- stream buffers ---------------------------------------------------------

// Appends whatever cereal writes to a std::string.
class StringSink : public std::streambuf {
 public:
  explicit StringSink(std::string& out) : out_(out) {}

 protected:
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    out_.append(s, static_cast<size_t>(n));
    return n;
  }
  int_type overflow(int_type c) override {
    if (!traits_type::eq_int_type(c, traits_type::eof())) out_.push_back(traits_type::to_char_type(c));
    return traits_type::not_eof(c);
  }

 private:
  std::string& out_;
};

// Counts bytes instead of storing them (encoded_size).
class CountingSink : public std::streambuf {
 public:
  uint64_t count = 0;

 protected:
  std::streamsize xsputn(const char*, std::streamsize n) override {
    count += static_cast<uint64_t>(n);
    return n;
  }
  int_type overflow(int_type c) override {
    if (!traits_type::eq_int_type(c, traits_type::eof())) ++count;
    return traits_type::not_eof(c);
  }
};

// Reads from a memory range; remaining() is exact, so every length field can
// be checked against it before anything is allocated.
class MemorySource : public std::streambuf {
 public:
  MemorySource(const char* data, size_t n) {
    char* p = const_cast<char*>(data);  // the get area is never written through
    setg(p, p, p + n);
  }
  size_t remaining() const { return static_cast<size_t>(egptr() - gptr()); }
  const char* cursor() const { return gptr(); }
  void skip(size_t n) { setg(eback(), gptr() + n, egptr()); }
};

// ---- writer -------------------------------------------------------------------

class Writer {
 public:
  explicit Writer(std::ostream& os) : ar_(os) {}

  void u8(uint8_t v) { ar_(v); }
  void u32(uint32_t v) { ar_(v); }
  void u64(uint64_t v) { ar_(v); }
  void i64(int64_t v) { ar_(v); }
  void f64(double v) {
    if (std::isnan(v)) v = std::numeric_limits<double>::quiet_NaN();  // canonical NaN
    ar_(v);
  }
  void bytes(const void* p, size_t n) {
    if (n) ar_(cereal::binary_data(static_cast<uint8_t*>(const_cast<void*>(p)), n));
  }
  void str(const std::string& s) {
    u64(s.size());
    bytes(s.data(), s.size());
  }

  void tensor(const at::Tensor& t) {
    auto code = dtype_code(t.scalar_type());
    if (!code) throw Error("cannot encode a tensor of dtype " + std::string(c10::toString(t.scalar_type())));
    at::Tensor c = contiguous_cpu(t);
    u8(*code);
    u8(static_cast<uint8_t>(c.dim()));
    for (int64_t d = 0; d < c.dim(); ++d) i64(c.size(d));
    bytes(c.data_ptr(), static_cast<size_t>(c.numel()) * c.element_size());
  }

  void value(const Value& v) {
    u8(static_cast<uint8_t>(v.kind()));
    switch (v.kind()) {
      case ValueKind::None:
        return;
      case ValueKind::Tensor:
        tensor(v.as_tensor());
        return;
      case ValueKind::Int:
        i64(v.as_int());
        return;
      case ValueKind::Double:
        f64(v.as_double());
        return;
      case ValueKind::Bool:
        u8(v.as_bool() ? 1 : 0);
        return;
      case ValueKind::List:
        u64(v.as_list().size());
        for (const Value& x : v.as_list()) value(x);
        return;
      case ValueKind::Tuple:
        u64(v.as_tuple().size());
        for (const at::Tensor& t : v.as_tuple()) {
          u8(t.defined() ? 1 : 0);
          if (t.defined()) tensor(t);
        }
        return;
      case ValueKind::Index:
        u64(v.as_index().size());
        for (const IndexItem& it : v.as_index()) index_item(it);
        return;
      case ValueKind::Dtype: {
        auto code = dtype_code(v.as_dtype());
        if (!code) throw Error("cannot encode dtype " + std::string(c10::toString(v.as_dtype())));
        u8(*code);
        return;
      }
      case ValueKind::String:
        str(v.as_string());
        return;
    }
  }

  void index_item(const IndexItem& it) {
    u8(static_cast<uint8_t>(it.kind));
    switch (it.kind) {
      case IndexItem::Kind::Int:
        i64(it.integer);
        return;
      case IndexItem::Kind::Slice:
        u8(static_cast<uint8_t>((it.start ? 1 : 0) | (it.stop ? 2 : 0)));
        if (it.start) i64(*it.start);
        if (it.stop) i64(*it.stop);
        i64(it.step);
        return;
      case IndexItem::Kind::Ellipsis:
      case IndexItem::Kind::None:
        return;
      case IndexItem::Kind::Tensor:
        tensor(it.tensor);
        return;
    }
  }

  void refs(const std::vector<NodeId>& args) {
    u64(args.size());
    for (NodeId a : args) u32(a);
  }

  void graph(const Graph& g) {
    u32(g.invoke);
    // File table in order of first use.
    std::vector<const std::string*> files;
    std::vector<uint32_t> file_of(g.nodes.size());
    std::unordered_map<std::string_view, uint32_t> index;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const std::string& f = g.nodes[i].loc.file;
      auto [it, inserted] = index.emplace(std::string_view(f), static_cast<uint32_t>(files.size()));
      if (inserted) files.push_back(&f);
      file_of[i] = it->second;
    }
    u64(files.size());
    for (const std::string* f : files) str(*f);
    u64(g.nodes.size());
    for (size_t i = 0; i < g.nodes.size(); ++i) node(g.nodes[i], file_of[i]);
  }

  void node(const Node& n, uint32_t file) {
    u8(static_cast<uint8_t>(n.kind));
    u32(file);
    u32(n.loc.line);
    switch (n.kind) {
      case NodeKind::Const:
        value(n.value);
        return;
      case NodeKind::Get:
        str(n.name);
        step(n.step);
        return;
      case NodeKind::Set:
        str(n.name);
        step(n.step);
        refs(n.args);
        return;
      case NodeKind::Op:
      case NodeKind::Apply:
      case NodeKind::Call:
        str(n.name);
        refs(n.args);
        return;
      case NodeKind::Save:
        str(n.name);
        u8(static_cast<uint8_t>(n.save_mode));
        refs(n.args);
        return;
      case NodeKind::Iter:
        u8(n.range.all ? 1 : 0);
        i64(n.range.start);
        if (!n.range.all) i64(n.range.stop);
        i64(n.range.stride);
        return;
      case NodeKind::Cond:
      case NodeKind::Grad:
      case NodeKind::Backward:
        refs(n.args);
        return;
      case NodeKind::Else:
      case NodeKind::End:
      case NodeKind::Stop:
        return;
      case NodeKind::External:
        u32(n.ext_invoke);
        u32(n.ext_node);
        return;
    }
  }

  void step(const StepSpec& s) {
    u8(static_cast<uint8_t>(s.mode));
    i64(s.value);
  }

 private:
  cereal::PortableBinaryOutputArchive ar_;
};

void write_header(std::string& out) {
  out.append(kGraphMagic, sizeof(kGraphMagic));
  uint16_t v = kGraphFormatVersion;
  char le[2] = {static_cast<char>(v & 0xff), static_cast<char>(v >> 8)};
  out.append(le, 2);
}

// ---- reader -------------------------------------------------------------------

class Reader {
 public:
  Reader(MemorySource& src, std::istream& is, size_t total, const Limits& limits)
      : src_(src), ar_(is), total_(total), limits_(limits) {}

  [[noreturn]] void fail(const std::string& what) const {
    std::string where = "graph binary, byte " + std::to_string(offset());
    if (node_ >= 0) where += ", node " + std::to_string(node_);
    throw DecodeError(where + ": " + what);
  }
  size_t offset() const { return kHeaderBytes + total_ - src_.remaining(); }
  size_t remaining() const { return src_.remaining(); }

  void need(size_t n, const char* what) {
    if (remaining() < n)
      fail(std::string("truncated: ") + what + " needs " + std::to_string(n) + " bytes, " +
           std::to_string(remaining()) + " remain");
  }
  template <typename T>
  T prim(const char* what) {
    need(sizeof(T), what);
    T v;
    ar_(v);
    return v;
  }
  uint8_t u8(const char* what) { return prim<uint8_t>(what); }
  uint32_t u32(const char* what) { return prim<uint32_t>(what); }
  uint64_t u64(const char* what) { return prim<uint64_t>(what); }
  int64_t i64(const char* what) { return prim<int64_t>(what); }
  double f64(const char* what) { return prim<double>(what); }
  bool flag(const char* what) {
    uint8_t b = u8(what);
    if (b > 1) fail(std::string(what) + " must be 0 or 1, got " + std::to_string(b));
    return b == 1;
  }

  // A count of items that take at least min_item_bytes each: checked against
  // `max` and against what the remaining input can hold.
  uint64_t count(const char* what, uint64_t max, size_t min_item_bytes) {
    uint64_t n = u64(what);
    if (n > max) fail(std::string(what) + " " + std::to_string(n) + " exceeds the limit of " + std::to_string(max));
    if (min_item_bytes && n > remaining() / min_item_bytes)
      fail(std::string("truncated: ") + what + " " + std::to_string(n) + " needs at least " + std::to_string(n) +
           " x " + std::to_string(min_item_bytes) + " bytes, " + std::to_string(remaining()) + " remain");
    return n;
  }

  std::string str(const char* what) {
    uint64_t n = u64(what);
    if (n > limits_.max_string_length)
      fail(std::string(what) + " length " + std::to_string(n) + " exceeds the limit of " +
           std::to_string(limits_.max_string_length));
    if (n > remaining())
      fail(std::string("truncated: ") + what + " of " + std::to_string(n) + " bytes, " + std::to_string(remaining()) +
           " remain");
    std::string s(src_.cursor(), static_cast<size_t>(n));
    if (!valid_utf8(s)) fail(std::string(what) + " is not valid UTF-8");
    src_.skip(static_cast<size_t>(n));
    return s;
  }

  at::Tensor tensor() {
    uint8_t code = u8("tensor dtype");
    auto dtype = dtype_from_code(code);
    if (!dtype) fail("unknown tensor dtype code " + std::to_string(code));
    uint8_t rank = u8("tensor rank");
    if (rank > limits_.max_tensor_rank)
      fail("tensor rank " + std::to_string(rank) + " exceeds the limit of " + std::to_string(limits_.max_tensor_rank));
    need(size_t{rank} * 8, "tensor shape");
    std::vector<int64_t> shape(rank);
    for (auto& d : shape) d = i64("tensor dimension");
    uint64_t numel = 0;
    std::string err = check_tensor_shape(shape, limits_, &numel);
    if (!err.empty()) fail(err);
    uint64_t nbytes = numel * dtype_size(*dtype);
    if (constant_bytes_ + nbytes > limits_.max_constant_bytes)
      fail("constant tensors total more than the limit of " + std::to_string(limits_.max_constant_bytes) + " bytes");
    if (nbytes > remaining())
      fail("truncated: tensor data of " + std::to_string(nbytes) + " bytes, " + std::to_string(remaining()) +
           " remain");
    constant_bytes_ += nbytes;
    at::Tensor t;
    try {
      t = tensor_from_bytes(*dtype, shape, reinterpret_cast<const uint8_t*>(src_.cursor()), nbytes);
    } catch (const Error& e) {
      fail(e.what());
    }
    src_.skip(static_cast<size_t>(nbytes));
    return t;
  }

  Value value(uint64_t depth) {
    if (depth > limits_.max_depth) fail("values nested deeper than the limit of " + std::to_string(limits_.max_depth));
    uint8_t k = u8("value kind");
    if (k >= kNumValueKinds) fail("unknown value kind " + std::to_string(k));
    switch (static_cast<ValueKind>(k)) {
      case ValueKind::None:
        return Value();
      case ValueKind::Tensor:
        return Value(tensor());
      case ValueKind::Int:
        return Value::integer(i64("int value"));
      case ValueKind::Double:
        return Value::real(f64("double value"));
      case ValueKind::Bool:
        return Value::boolean(flag("bool value"));
      case ValueKind::List: {
        uint64_t n = count("list length", limits_.max_list_length, 1);
        std::vector<Value> items;
        items.reserve(n);
        for (uint64_t i = 0; i < n; ++i) items.push_back(value(depth + 1));
        return Value::list(std::move(items));
      }
      case ValueKind::Tuple: {
        uint64_t n = count("tuple length", limits_.max_list_length, 1);
        std::vector<at::Tensor> items;
        items.reserve(n);
        for (uint64_t i = 0; i < n; ++i) items.push_back(flag("tuple element present") ? tensor() : at::Tensor());
        return Value::tuple(std::move(items));
      }
      case ValueKind::Index: {
        uint64_t n = count("index length", limits_.max_list_length, 1);
        IndexSpec spec;
        spec.reserve(n);
        for (uint64_t i = 0; i < n; ++i) spec.push_back(index_item());
        return Value::index(std::move(spec));
      }
      case ValueKind::Dtype: {
        uint8_t code = u8("dtype");
        auto dt = dtype_from_code(code);
        if (!dt) fail("unknown dtype code " + std::to_string(code));
        return Value::dtype(*dt);
      }
      case ValueKind::String:
        return Value::string(str("string value"));
    }
    fail("unknown value kind " + std::to_string(k));
  }

  IndexItem index_item() {
    uint8_t k = u8("index item kind");
    switch (k) {
      case 0:
        return IndexItem::make_int(i64("index int"));
      case 1: {
        uint8_t flags = u8("slice flags");
        if (flags > 3) fail("slice flags " + std::to_string(flags) + " has unknown bits");
        std::optional<int64_t> start, stop;
        if (flags & 1) start = i64("slice start");
        if (flags & 2) stop = i64("slice stop");
        int64_t step = i64("slice step");
        return IndexItem::make_slice(start, stop, step);
      }
      case 2:
        return IndexItem::make_ellipsis();
      case 3:
        return IndexItem::make_none();
      case 4:
        return IndexItem::make_tensor(tensor());
      default:
        fail("unknown index item kind " + std::to_string(k));
    }
  }

  std::vector<NodeId> refs() {
    uint64_t n = count("argument count", limits_.max_list_length, 4);
    std::vector<NodeId> out(n);
    for (auto& a : out) a = u32("argument");
    return out;
  }

  StepSpec step() {
    uint8_t mode = u8("step mode");
    if (mode > 1) fail("unknown step mode " + std::to_string(mode));
    StepSpec s;
    s.mode = static_cast<StepSpec::Mode>(mode);
    s.value = i64("step");
    return s;
  }

  Graph graph() {
    Graph g;
    g.invoke = u32("invoke index");
    uint64_t nfiles = count("file count", limits_.max_nodes, 8);
    std::vector<std::string> files;
    files.reserve(nfiles);
    for (uint64_t i = 0; i < nfiles; ++i) files.push_back(str("file name"));
    // A node takes at least 9 bytes (kind, file, line).
    uint64_t nnodes = count("node count", limits_.max_nodes, 9);
    g.nodes.reserve(nnodes);
    for (uint64_t i = 0; i < nnodes; ++i) {
      node_ = static_cast<int64_t>(i);
      g.nodes.push_back(node(files));
    }
    node_ = -1;
    if (remaining() != 0) fail(std::to_string(remaining()) + " trailing bytes after the last node");
    return g;
  }

  Node node(const std::vector<std::string>& files) {
    Node n;
    uint8_t kind = u8("node kind");
    if (kind >= kNumNodeKinds) fail("unknown node kind " + std::to_string(kind));
    n.kind = static_cast<NodeKind>(kind);
    uint32_t file = u32("file index");
    if (file >= files.size())
      fail("file index " + std::to_string(file) + " out of range (" + std::to_string(files.size()) + " files)");
    n.loc.file = files[file];
    n.loc.line = u32("line");
    switch (n.kind) {
      case NodeKind::Const:
        n.value = value(0);
        break;
      case NodeKind::Get:
        n.set_key(str("key"));
        n.step = step();
        break;
      case NodeKind::Set:
        n.set_key(str("key"));
        n.step = step();
        n.args = refs();
        break;
      case NodeKind::Op:
        n.name = str("op name");
        n.args = refs();
        break;
      case NodeKind::Apply:
        n.name = str("function name");
        n.args = refs();
        break;
      case NodeKind::Call:
        n.name = str("module path");
        n.args = refs();
        break;
      case NodeKind::Save: {
        n.name = str("save name");
        uint8_t mode = u8("save mode");
        if (mode > 1) fail("unknown save mode " + std::to_string(mode));
        n.save_mode = static_cast<SaveMode>(mode);
        n.args = refs();
        break;
      }
      case NodeKind::Iter:
        n.range.all = flag("iter all flag");
        n.range.start = i64("iter start");
        if (!n.range.all) n.range.stop = i64("iter stop");
        n.range.stride = i64("iter stride");
        break;
      case NodeKind::Cond:
      case NodeKind::Grad:
      case NodeKind::Backward:
        n.args = refs();
        break;
      case NodeKind::Else:
      case NodeKind::End:
      case NodeKind::Stop:
        break;
      case NodeKind::External:
        n.ext_invoke = u32("external invoke");
        n.ext_node = u32("external node");
        break;
    }
    return n;
  }

 private:
  MemorySource& src_;
  cereal::PortableBinaryInputArchive ar_;
  size_t total_;
  const Limits& limits_;
  uint64_t constant_bytes_ = 0;
  int64_t node_ = -1;
};

}  // namespace

void encode_binary(const Graph& g, std::string& out) {
  write_header(out);
  StringSink sink(out);
  std::ostream os(&sink);
  Writer w(os);
  w.graph(g);
}

std::string encode_binary(const Graph& g) {
  std::string out;
  encode_binary(g, out);
  return out;
}

uint64_t encoded_size(const Graph& g) {
  CountingSink sink;
  {
    std::ostream os(&sink);
    Writer w(os);
    w.graph(g);
  }
  return kHeaderBytes + sink.count;
}

Graph decode_binary(std::string_view bytes, const Limits& limits) {
  if (bytes.size() > limits.max_encoded_bytes)
    throw DecodeError("graph binary: " + std::to_string(bytes.size()) + " bytes exceed the limit of " +
                      std::to_string(limits.max_encoded_bytes));
  if (bytes.size() < kHeaderBytes + 1)
    throw DecodeError("graph binary: truncated: " + std::to_string(bytes.size()) + " bytes is shorter than the header");
  if (std::memcmp(bytes.data(), kGraphMagic, sizeof(kGraphMagic)) != 0)
    throw DecodeError("graph binary: bad magic (not an nnsight graph)");
  uint16_t version = static_cast<uint16_t>(static_cast<uint8_t>(bytes[4]) | (static_cast<uint8_t>(bytes[5]) << 8));
  if (version != kGraphFormatVersion)
    throw DecodeError("graph binary: format version " + std::to_string(version) +
                      " is not supported (this build reads version " + std::to_string(kGraphFormatVersion) + ")");
  // cereal's first payload byte says the payload's endianness; only little
  // endian is written, and only that is accepted.
  if (static_cast<uint8_t>(bytes[kHeaderBytes]) != 1)
    throw DecodeError("graph binary, byte " + std::to_string(kHeaderBytes) + ": payload is not little endian (flag " +
                      std::to_string(static_cast<uint8_t>(bytes[kHeaderBytes])) + ")");
  MemorySource src(bytes.data() + kHeaderBytes, bytes.size() - kHeaderBytes);
  std::istream is(&src);
  try {
    Reader r(src, is, bytes.size() - kHeaderBytes, limits);
    return r.graph();
  } catch (const cereal::Exception& e) {
    throw DecodeError(std::string("graph binary: ") + e.what());
  }
}

}  // namespace nnsight::dsl
