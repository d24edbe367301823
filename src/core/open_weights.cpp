// open_weights: picks the loader for a path (declared in core/weight_source.h).
#include <sys/stat.h>

#include <cstring>

#include <absl/strings/match.h>
#include <fstream>

#include <nnsight/error.hpp>

#include "core/gguf/gguf_weights.h"
#include "core/hf/hf_checkpoint.h"
#include "core/kernels/packed_linear.h"
#include "core/weight_source.h"

namespace nnsight {
namespace {

bool has_gguf_magic(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {0, 0, 0, 0};
  in.read(magic, 4);
  return in.gcount() == 4 && std::memcmp(magic, "GGUF", 4) == 0;
}

}  // namespace

std::unique_ptr<WeightSource> open_weights(const std::string& path, const OpenWeightsOptions& options) {
  struct stat st {};
  if (path.empty() || ::stat(path.c_str(), &st) != 0) {
    throw LoadError("no such model file or directory: " + path);
  }
  if (S_ISDIR(st.st_mode)) return std::make_unique<HfCheckpoint>(path);
  if (S_ISREG(st.st_mode)) {
    if (absl::EndsWith(path, ".gguf") || has_gguf_magic(path)) {
      // Without AVX2 (or off x86-64) the packed kernel decodes through the
      // portable scalar decoder and is slower than the float32 path:
      // dequantize at load there.
      const bool packed = options.keep_packed && kernels::packed_path_available(kernels::PackedPath::Fused);
      return std::make_unique<GgufWeights>(path, packed);
    }
    if (absl::EndsWith(path, ".safetensors")) return std::make_unique<HfCheckpoint>(path);
  }
  throw LoadError(path +
                  ": unrecognized model file (expected a .gguf file, a .safetensors file with "
                  "config.json beside it, or a Hugging Face checkpoint directory)");
}

}  // namespace nnsight
