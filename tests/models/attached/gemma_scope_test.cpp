// Gemma Scope's SAEs as Google releases them (params.npz, no cfg.json):
// attached as a file or as the directory holding it, they compute what
// Gemma Scope's own JumpReLU formula gives on the same arrays (NumPy's,
// tests/data/saes/gemma_scope/make_gemma_scope_fixture.py): the encoder
// does not subtract b_dec; zip64 archives load alike; a compressed archive
// or a missing array is a LoadError naming the file.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>

#include "core/safetensors/safetensors_file.h"
#include "models/attached/attached_file.h"
#include "models/attached/sparse_autoencoder.h"
#include "support/expect_load_error.h"
#include "support/scratch_dir.h"

namespace nnsight {
namespace {

std::string fixture(const std::string& name) {
  return std::string(NNSIGHT_SOURCE_DIR) + "/tests/data/saes/gemma_scope/" + name;
}

TEST(GemmaScope, ParamsNpzIsAJumpReluSaeEqualToGemmaScopesFormula) {
  const SafetensorsFile ref(fixture("reference.safetensors"));
  const at::Tensor x = ref.load("x");  // [5, 8]
  for (const std::string& path : {fixture("params.npz"), fixture("zip64.npz"),
                                  std::string(NNSIGHT_SOURCE_DIR) + "/tests/data/saes/gemma_scope"}) {
    SCOPED_TRACE(path);
    auto sae = std::dynamic_pointer_cast<SparseAutoencoder>(load_attached_module(path));
    ASSERT_TRUE(sae);
    const at::Tensor acts = sae->encode_plain(x);
    EXPECT_TRUE(at::allclose(acts, ref.load("acts"), 1e-5, 1e-6)) << acts - ref.load("acts");
    EXPECT_TRUE(at::equal(acts.ne(0), ref.load("acts").ne(0))) << "the same features fire";
    EXPECT_TRUE(at::allclose(sae->call(x), ref.load("recon"), 1e-5, 1e-5));
  }
}

TEST(GemmaScope, BadArchivesNameTheFile) {
  testing::expect_load_error([] { load_attached_module(fixture("compressed.npz")); },
                             {"compressed.npz: entry 'W_enc.npy' is compressed"});
  testing::ScratchDir dir;
  testing::expect_load_error([&] { load_attached_module(dir.path()); },
                             {"a directory without sae_weights.safetensors (SAELens's layout) or params.npz"});
}

}  // namespace
}  // namespace nnsight
