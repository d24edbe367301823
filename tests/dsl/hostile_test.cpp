// Hostile input: every malformed, truncated, oversized or mutated encoding is
// rejected with a DecodeError (or, when it decodes, a ValidationError), never
// a crash, a hang or an allocation beyond the limits.
#include "dsl/binary_codec.h"
#include "dsl/errors.h"
#include "dsl/json_codec.h"
#include "dsl/validate.h"
#include "support/dsl_sample_graphs.h"
#include "support/dsl_testing.h"

#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

namespace nnsight::testing {
namespace {

// Little-endian byte builder for hand-made encodings.
struct Bytes {
  std::string s;
  Bytes() { s = std::string("NNSG\x01\x00\x01", 7); }  // magic, version 1, cereal LE flag
  Bytes& u8(uint8_t v) {
    s.push_back(static_cast<char>(v));
    return *this;
  }
  Bytes& u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) u8(static_cast<uint8_t>(v >> (8 * i)));
    return *this;
  }
  Bytes& u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) u8(static_cast<uint8_t>(v >> (8 * i)));
    return *this;
  }
  Bytes& text(const char* t) {
    s += t;
    return *this;
  }
  // invoke 0, one file "", `nodes` nodes follow.
  Bytes& prelude(uint64_t nodes) { return u32(0).u64(1).u64(0).u64(nodes); }
  // A Const node's header (kind 0, file 0, line 1).
  Bytes& const_node() { return u8(0).u32(0).u32(1); }
};

std::string decode_error(const std::string& bytes, const dsl::Limits& limits = dsl::Limits()) {
  return error_of<dsl::DecodeError>([&] { dsl::decode_binary(bytes, limits); });
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(DslHostile, EveryTruncationIsRejected) {
  std::string full = dsl::encode_binary(every_kind_graph());
  for (size_t n = 0; n < full.size(); ++n) {
    try {
      dsl::decode_binary(std::string_view(full.data(), n));
      ADD_FAILURE() << "prefix of " << n << " bytes decoded";
    } catch (const dsl::DecodeError& e) {
      if (n > 7) {
        EXPECT_TRUE(contains(e.what(), "truncated")) << n << ": " << e.what();
      }
    }
  }
  std::string json = dsl::to_json(every_kind_graph());
  for (size_t n = 0; n < json.size(); n += 7)
    EXPECT_THROW(dsl::from_json(std::string_view(json.data(), n)), dsl::DecodeError) << n;
}

TEST(DslHostile, WrongMagicAndVersion) {
  std::string good = dsl::encode_binary(every_kind_graph());
  std::string bad = good;
  bad[0] = 'X';
  EXPECT_TRUE(contains(decode_error(bad), "bad magic"));
  bad = good;
  bad[4] = 2;
  EXPECT_TRUE(contains(decode_error(bad), "format version 2 is not supported"));
  bad = good;
  bad[4] = '\xff';
  bad[5] = '\xff';
  EXPECT_TRUE(contains(decode_error(bad), "format version 65535"));
  bad = good;
  bad[6] = 0;  // big-endian payload flag
  EXPECT_TRUE(contains(decode_error(bad), "not little endian"));
  bad = good + "x";
  EXPECT_TRUE(contains(decode_error(bad), "1 trailing bytes"));
}

TEST(DslHostile, HugeLengthFieldsAreRejectedBeforeAllocating) {
  const uint64_t huge = uint64_t{1} << 62;
  // File name length.
  EXPECT_TRUE(
      contains(decode_error(Bytes().u32(0).u64(1).u64(huge).s), "file name length 4611686018427387904 exceeds"));
  // File count, node count.
  EXPECT_TRUE(contains(decode_error(Bytes().u32(0).u64(huge).s), "file count"));
  EXPECT_TRUE(contains(decode_error(Bytes().prelude(huge).s), "node count 4611686018427387904 exceeds"));
  // A node count within the limit but beyond what the bytes can hold.
  EXPECT_TRUE(contains(decode_error(Bytes().prelude(90000).s), "truncated: node count 90000"));
  // List length, op argument count, string value length.
  EXPECT_TRUE(contains(decode_error(Bytes().prelude(1).const_node().u8(5).u64(huge).s), "list length"));
  EXPECT_TRUE(
      contains(decode_error(Bytes().prelude(1).u8(3).u32(0).u32(1).u64(3).text("neg").u64(huge).s), "argument count"));
  EXPECT_TRUE(contains(decode_error(Bytes().prelude(1).const_node().u8(9).u64(huge).s), "string value length"));
  // Tensor dims whose product overflows int64.
  Bytes t;
  t.prelude(1).const_node().u8(1).u8(9).u8(3).u64(huge).u64(huge).u64(huge);
  EXPECT_TRUE(contains(decode_error(t.s), "element limit"));
}

TEST(DslHostile, GigabyteConstantDeclaredInTwentyBytes) {
  // A float32 tensor of 2^28 elements (1 GiB) with no data: rejected by the
  // element limit, then (limits raised) by the constant-bytes limit, then (all
  // raised) because the data is not there; in every case before allocating.
  Bytes b;
  b.prelude(1).const_node().u8(1).u8(9).u8(1).u64(uint64_t{1} << 28);
  EXPECT_TRUE(contains(decode_error(b.s), "element limit"));
  dsl::Limits big = dsl::Limits().tensor_elements(uint64_t{1} << 30);
  EXPECT_TRUE(contains(decode_error(b.s, big), "constant tensors total more than the limit of 268435456 bytes"));
  big.constant_bytes(uint64_t{1} << 31);
  EXPECT_TRUE(contains(decode_error(b.s, big), "truncated: tensor data of 1073741824 bytes"));
  // The same in JSON.
  std::string json = R"({"nodes":[{"kind":"const","value":{"dtype":"float32","shape":[268435456],"data":[]}}]})";
  EXPECT_TRUE(contains(error_of<dsl::DecodeError>([&] { dsl::from_json(json); }), "element limit"));
  EXPECT_TRUE(contains(error_of<dsl::DecodeError>([&] { dsl::from_json(json, big); }), "the shape needs 268435456"));
}

TEST(DslHostile, NoAllocationBeyondTheLimitsUnderAnAddressSpaceCap) {
  // In a child process whose address space may grow by at most 128 MiB, the
  // hostile inputs above must all fail with DecodeError: an attempt to
  // allocate what a length field says would hit the cap (std::bad_alloc).
  Bytes gig;
  gig.prelude(1).const_node().u8(1).u8(9).u8(1).u64(uint64_t{1} << 28);
  Bytes list;
  list.prelude(1).const_node().u8(5).u64(uint64_t{1} << 40);
  std::vector<std::string> inputs = {gig.s, list.s, Bytes().prelude(uint64_t{1} << 40).s};
  dsl::Limits loose = dsl::Limits()
                          .tensor_elements(uint64_t{1} << 40)
                          .constant_bytes(uint64_t{1} << 42)
                          .list_length(uint64_t{1} << 41)
                          .nodes(uint64_t{1} << 41);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    struct rlimit cur;
    getrlimit(RLIMIT_AS, &cur);
    // Current virtual size from /proc/self/statm (pages).
    FILE* f = fopen("/proc/self/statm", "r");
    unsigned long pages = 0;
    if (!f || fscanf(f, "%lu", &pages) != 1) _exit(3);
    fclose(f);
    struct rlimit lim;
    lim.rlim_cur = lim.rlim_max = pages * static_cast<unsigned long>(sysconf(_SC_PAGESIZE)) + (128ul << 20);
    if (setrlimit(RLIMIT_AS, &lim) != 0) _exit(4);
    for (const std::string& in : inputs) {
      for (const dsl::Limits& l : {dsl::Limits(), loose}) {
        try {
          dsl::decode_binary(in, l);
          _exit(5);
        } catch (const dsl::DecodeError&) {
        } catch (...) {
          _exit(6);  // e.g. std::bad_alloc: something allocated what the input asked for
        }
      }
    }
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(DslHostile, DeepNestingIsRejectedWithoutRecursingDeep) {
  // 100000 nested lists in binary.
  Bytes b;
  b.prelude(1).const_node();
  for (int i = 0; i < 100000; ++i) b.u8(5).u64(1);
  b.u8(0);
  EXPECT_TRUE(contains(decode_error(b.s), "nested deeper than the limit of 64"));
  // ... and in JSON.
  std::string json =
      R"({"nodes":[{"kind":"const","value":)" + std::string(100000, '[') + std::string(100000, ']') + "}]}";
  EXPECT_TRUE(contains(error_of<dsl::DecodeError>([&] { dsl::from_json(json); }), "nested deeper"));
  // 200 nested blocks decode (they are flat) but do not validate.
  dsl::Graph g;
  dsl::Node c;
  c.value = dsl::Value::boolean(true);
  g.nodes.push_back(c);
  for (int i = 0; i < 200; ++i) {
    dsl::Node cond;
    cond.kind = dsl::NodeKind::Cond;
    cond.args = {0};
    g.nodes.push_back(cond);
  }
  for (int i = 0; i < 200; ++i) {
    dsl::Node end;
    end.kind = dsl::NodeKind::End;
    g.nodes.push_back(end);
  }
  dsl::Graph back = dsl::decode_binary(dsl::encode_binary(g));
  std::string msg = error_of<dsl::ValidationError>([&] { dsl::validate(back); });
  EXPECT_TRUE(contains(msg, "node 65 (cond): blocks nested deeper than the limit of 64")) << msg;
}

TEST(DslHostile, ForwardReferencesAndUnknownOpsAreRejectedAtValidation) {
  // op 'neg' at node 0 referring to node 1.
  std::string fwd = Bytes().prelude(2).u8(3).u32(0).u32(7).u64(3).text("neg").u64(1).u32(1).const_node().u8(2).u64(5).s;
  std::string msg = error_of<dsl::ValidationError>([&] { dsl::validate(dsl::decode_binary(fwd)); });
  EXPECT_TRUE(contains(msg, "node 0 (op 'neg') at :7: argument 0 refers to node 1, which does not come before it"))
      << msg;
  std::string self = Bytes().prelude(1).u8(3).u32(0).u32(7).u64(3).text("neg").u64(1).u32(0).s;
  EXPECT_TRUE(contains(error_of<dsl::ValidationError>([&] { dsl::validate(dsl::decode_binary(self)); }),
                       "refers to node 0, which does not come before it"));
  std::string unknown = Bytes().prelude(1).u8(3).u32(0).u32(7).u64(6).text("system").u64(0).s;
  EXPECT_TRUE(contains(error_of<dsl::ValidationError>([&] { dsl::validate(dsl::decode_binary(unknown)); }),
                       "unknown op 'system'"));
}

TEST(DslHostile, BadEnumBytesAndValuesAreRejected) {
  EXPECT_TRUE(contains(decode_error(Bytes().prelude(1).u8(99).u32(0).u32(1).s), "unknown node kind 99"));
  EXPECT_TRUE(contains(decode_error(Bytes().prelude(1).u8(0).u32(5).u32(1).s), "file index 5 out of range"));
  EXPECT_TRUE(contains(decode_error(Bytes().prelude(1).const_node().u8(42).s), "unknown value kind 42"));
  EXPECT_TRUE(contains(decode_error(Bytes().prelude(1).const_node().u8(4).u8(2).s), "bool value must be 0 or 1"));
  EXPECT_TRUE(contains(decode_error(Bytes().prelude(1).const_node().u8(8).u8(77).s), "unknown dtype code 77"));
  EXPECT_TRUE(contains(decode_error(Bytes().prelude(1).const_node().u8(1).u8(1).u8(1).u64(2).u8(0).u8(2).s),
                       "bool tensor element 1 is 2"));
  EXPECT_TRUE(contains(decode_error(Bytes().prelude(1).const_node().u8(7).u64(1).u8(1).u8(4).s), "slice flags 4"));
  EXPECT_TRUE(
      contains(decode_error(Bytes().prelude(1).const_node().u8(9).u64(2).u8(0xc3).u8(0x28).s), "not valid UTF-8"));
  EXPECT_TRUE(contains(decode_error(Bytes().prelude(1).u8(1).u32(0).u32(1).u64(6).text("logits").u8(3).s),
                       "unknown step mode 3"));
}

// Mutations of valid encodings: whatever happens must be one of our errors.
TEST(DslHostile, RandomMutationsNeverCrash) {
  std::string binary = dsl::encode_binary(every_kind_graph());
  std::string json = dsl::to_json(every_kind_graph());
  std::mt19937_64 rng(12345);
  int decoded = 0;
  for (int round = 0; round < 3000; ++round) {
    bool use_json = round % 2 == 1;
    std::string s = use_json ? json : binary;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t pos = rng() % s.size();
      switch (rng() % 3) {
        case 0:
          s[pos] = static_cast<char>(rng());
          break;
        case 1:
          s[pos] ^= static_cast<char>(1u << (rng() % 8));
          break;
        default:
          s.erase(pos, 1 + rng() % 8);
          break;
      }
    }
    try {
      dsl::Graph g = use_json ? dsl::from_json(s) : dsl::decode_binary(s);
      ++decoded;
      dsl::validate(std::move(g), dsl::ValidateOptions().with_functions(&sample_functions()));
    } catch (const dsl::DecodeError&) {
    } catch (const dsl::ValidationError&) {
    }
  }
  EXPECT_GT(decoded, 0);  // some mutations (e.g. in tensor data) still decode
}

TEST(DslHostile, JsonNumbersOutOfRangeAreDecodeErrors) {
  // Found by the fuzzer: nlohmann reports a number overflow as out_of_range,
  // not as a parse error.
  std::string msg = error_of<dsl::DecodeError>([] { dsl::from_json(R"({"version":1e99999,"nodes":[]})"); });
  EXPECT_TRUE(contains(msg, "number overflow")) << msg;
  EXPECT_THROW(dsl::from_json(R"({"nodes":[{"kind":"const","value":-1e400}]})"), dsl::DecodeError);
}

// Inputs that once broke a decoder (tests/data/dsl/regressions/, also fed to
// the fuzzer as seeds): each must now decode or fail with a DecodeError.
TEST(DslHostile, FuzzerRegressions) {
  namespace fs = std::filesystem;
  fs::path dir = fs::path(NNSIGHT_SOURCE_DIR) / "tests/data/dsl/regressions";
  size_t n = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::ifstream f(entry.path(), std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    std::string bytes = ss.str();
    for (bool json : {false, true}) {
      try {
        dsl::Graph g = json ? dsl::from_json(bytes) : dsl::decode_binary(bytes);
        dsl::validate(std::move(g));
      } catch (const dsl::DecodeError&) {
      } catch (const dsl::ValidationError&) {
      }
    }
    ++n;
  }
  EXPECT_GT(n, 0u);
}

}  // namespace
}  // namespace nnsight::testing
