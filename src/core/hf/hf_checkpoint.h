// HfCheckpoint: a WeightSource over a Hugging Face checkpoint: config.json
// plus model.safetensors, or model.safetensors.index.json and its shards.
// Tensors are served as float32 under their Hugging Face names: GPT-2's
// Conv1D weights (stored [in, out]) transposed to [out, in], names saved
// without the "transformer." / "model." prefix given it, and a tied lm_head
// served from the embedding.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/safetensors/safetensors_file.h"
#include "core/weight_source.h"

namespace nnsight {

class HfCheckpoint final : public WeightSource {
 public:
  // `path`: the checkpoint directory, or one .safetensors file with a
  // config.json beside it. Throws LoadError naming the file at fault.
  explicit HfCheckpoint(const std::string& path);
  HfCheckpoint(const HfCheckpoint&) = delete;
  HfCheckpoint& operator=(const HfCheckpoint&) = delete;

  const std::string& describe() const override { return describe_; }
  const ModelConfig& config() const override { return config_; }
  std::vector<std::string> names() const override { return order_; }
  bool has(const std::string& name) const override { return entries_.count(name) > 0; }
  std::vector<int64_t> shape(const std::string& name) const override;
  at::Tensor load(const std::string& name, ShardSlice slice = ShardSlice::whole()) const override;

  // The directory's tokenizer.json, when there is one.
  std::optional<std::string> tokenizer_json_path() const;
  const std::string& directory() const { return dir_; }

 private:
  struct Entry {
    const SafetensorsFile* file = nullptr;
    std::string stored_name;  // as spelled in the file
    bool conv1d = false;      // stored [in, out], served transposed
  };
  const Entry& entry(const std::string& name) const;
  const SafetensorsFile& open_file(const std::string& file_name);
  void add_tensor(const SafetensorsFile& file, const std::string& stored_name);

  std::string describe_;
  std::string dir_;
  ModelConfig config_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::vector<std::string> order_;
  std::unordered_map<std::string, Entry> entries_;
};

}  // namespace nnsight
