// NpzFile on archives NumPy wrote (tests/data/saes/gemma_scope/, made by its
// make_gemma_scope_fixture.py): np.savez's stored arrays; the same arrays in
// a zip64 archive, and with one in Fortran order and one in float16; and
// np.savez_compressed's, refused with a message; broken files name the file.
#include "core/npz/npz_file.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>

#include "core/safetensors/safetensors_file.h"
#include "support/expect_load_error.h"
#include "support/scratch_dir.h"

namespace nnsight {
namespace {

std::string fixture(const std::string& name) {
  return std::string(NNSIGHT_SOURCE_DIR) + "/tests/data/saes/gemma_scope/" + name;
}

TEST(NpzFile, ReadsNumpysStoredArraysAlsoInZip64FortranOrderAndFloat16) {
  const NpzFile plain(fixture("params.npz"));
  ASSERT_EQ(plain.arrays().size(), 5u);
  const NpyArrayInfo* w = plain.find("W_enc");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->descr, "<f4");
  EXPECT_EQ(w->shape, (std::vector<int64_t>{8, 16}));
  EXPECT_FALSE(w->fortran_order);
  EXPECT_EQ(plain.find("nothing"), nullptr);
  const NpzFile zip64(fixture("zip64.npz"));
  const NpzFile odd(fixture("fortran_f16.npz"));
  EXPECT_TRUE(odd.find("W_enc")->fortran_order);
  EXPECT_EQ(odd.find("b_dec")->descr, "<f2");
  for (const char* name : {"W_enc", "W_dec", "b_enc", "b_dec", "threshold"}) {
    const at::Tensor a = plain.load_float(name);
    EXPECT_EQ(a.scalar_type(), at::kFloat);
    EXPECT_TRUE(at::equal(zip64.load_float(name), a)) << name;
    if (std::string(name) != "b_dec") {
      EXPECT_TRUE(at::equal(odd.load_float(name), a)) << name;
    }
  }
  // The float16 copy is the float32 array rounded, as NumPy's astype rounds it.
  const SafetensorsFile ref(fixture("reference.safetensors"));
  EXPECT_TRUE(at::equal(odd.load_float("b_dec"), ref.load("b_dec_f16")));
  EXPECT_FALSE(at::equal(odd.load_float("b_dec"), plain.load_float("b_dec"))) << "the fixture rounds something";
  // Fortran order: the same C-order values (W_enc[i][j]), not the raw column-major bytes.
  EXPECT_EQ(odd.load_float("W_enc")[2][5].item<float>(), plain.load_float("W_enc")[2][5].item<float>());
}

// An end-of-directory record that defers to the zip64 one (entries 0xFFFF,
// offset 0xFFFFFFFF), as in archives over 4 GiB: the zip64 record is read.
TEST(NpzFile, AnEndRecordDeferringToZip64IsRead) {
  std::ifstream in(fixture("zip64.npz"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t eocd = bytes.rfind(std::string("PK\x05\x06", 4));
  ASSERT_NE(eocd, std::string::npos);
  ASSERT_NE(bytes.rfind(std::string("PK\x06\x07", 4)), std::string::npos) << "the fixture has a zip64 locator";
  for (size_t i : {8, 9, 10, 11}) bytes[eocd + i] = '\xff';    // entries on this disk, in all
  for (size_t i : {16, 17, 18, 19}) bytes[eocd + i] = '\xff';  // the directory's offset
  testing::ScratchDir dir;
  std::ofstream(dir.file("deferred.npz"), std::ios::binary) << bytes;
  const NpzFile f(dir.file("deferred.npz"));
  ASSERT_EQ(f.arrays().size(), 5u);
  EXPECT_TRUE(at::equal(f.load_float("W_dec"), NpzFile(fixture("params.npz")).load_float("W_dec")));
}

TEST(NpzFile, CompressedAndBrokenArchivesAreErrorsNamingTheFile) {
  testing::expect_load_error([] { NpzFile f(fixture("compressed.npz")); },
                             {"compressed.npz: entry 'W_enc.npy' is compressed", "np.savez("});
  testing::ScratchDir dir;
  std::ifstream in(fixture("params.npz"), std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto write = [&](const std::string& name, const std::string& b) {
    std::ofstream(dir.file(name), std::ios::binary) << b;
    return dir.file(name);
  };
  testing::expect_load_error([&] { NpzFile f(write("short.npz", "PK")); }, {"short.npz: not a .npz archive"});
  testing::expect_load_error([&] { NpzFile f(write("text.npz", std::string(100, 'x'))); },
                             {"text.npz: not a .npz archive (no zip end-of-directory record)"});
  // The directory kept, the arrays' bytes cut: the directory points past the end.
  testing::expect_load_error(
      [&] { NpzFile f(write("cut.npz", bytes.substr(0, 600) + bytes.substr(bytes.size() - 22))); }, {"cut.npz"});
  // A .npy magic broken.
  std::string bad = bytes;
  const size_t magic = bad.find("\x93NUMPY");
  ASSERT_NE(magic, std::string::npos);
  bad[magic + 1] = 'X';
  testing::expect_load_error([&] { NpzFile f(write("magic.npz", bad)); },
                             {"magic.npz: entry 'W_enc.npy' is not a .npy array (bad magic)"});
  // A dtype it does not read.
  std::string ints = bytes;
  const size_t descr = ints.find("'<f4'");
  ASSERT_NE(descr, std::string::npos);
  ints[descr + 2] = 'i';
  testing::expect_load_error([&] { NpzFile f(write("ints.npz", ints)); },
                             {"ints.npz: entry 'W_enc.npy': dtype '<i4' is not supported"});
}

// Any byte of an archive changed (1,500 seeded corruptions, 1 to 4 bytes
// each): the reader either reads it or throws a LoadError, never anything
// else, and never reads outside the file (its reads are bounds-checked).
TEST(NpzFile, CorruptedArchivesLoadOrAreLoadErrors) {
  testing::ScratchDir dir;
  for (const char* name : {"params.npz", "zip64.npz"}) {
    std::ifstream in(fixture(name), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    uint64_t state = 12345;
    const auto next = [&] { return state = state * 6364136223846793005ull + 1442695040888963407ull; };
    int errors = 0;
    for (int i = 0; i < 750; ++i) {
      std::string b = bytes;
      const int flips = 1 + static_cast<int>(next() >> 62);
      for (int j = 0; j < flips; ++j) b[(next() >> 33) % b.size()] = static_cast<char>(next() >> 56);
      std::ofstream(dir.file("c.npz"), std::ios::binary | std::ios::trunc) << b;
      try {
        NpzFile f(dir.file("c.npz"));
        for (const NpyArrayInfo& a : f.arrays()) f.load_float(a.name);
      } catch (const LoadError&) {
        ++errors;
      }
    }
    EXPECT_GT(errors, 50) << name << ": the corruptions reach the structure";
  }
}

}  // namespace
}  // namespace nnsight
