// CaptureObserver: single-pass activation capture on one model runner.
//
// Each chosen decoder layer gets a forward hook. Per step:
//   before_forward  picks the captured requests (sample rate) and writes the
//                   flat-batch row of each one's last scheduled token into a
//                   persistent index tensor;
//   layer hooks     one index_select per layer, into a preallocated staging
//                   block [layers, max_seqs, hidden] (no allocation);
//   after_forward   copies the block to the host once (GPU) and appends one
//                   record per (request, layer) to the shared-memory ring,
//                   or a rank-k factorization per layer (compression on).
//                   On a GPU the loop thread only starts that copy (a side
//                   stream, pinned memory: core/host_copy_queue.h); a
//                   thread of the observer's own waits for it and writes the
//                   ring, and a finishing request's records are all in the
//                   ring by the time its finish is reported (on_finished).
// The values are those of the forward that generates the text: nothing is
// recomputed. Hooks are removed and the segment unlinked on destruction.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <vector>

#include "core/host_copy_queue.h"
#include "core/module.h"
#include "front/capture/capture_config.h"
#include "front/capture/ring_writer.h"
#include "models/causal_lm.h"
#include "runner/model_runner/step_observer.h"

namespace nnsight::capture {

// "model.layers.N" (llama), "transformer.h.N" (gpt2), "gpt_neox.layers.N",
// "model.language_model.layers.N" (a multimodal checkpoint's text model).
std::string decoder_layer_path(const ModelConfig& config, int64_t layer);

class CaptureObserver : public runner::StepObserver {
 public:
  // Throws ConfigError for a bad layer list or an unusable buffer size.
  CaptureObserver(CausalLM& model, const CaptureConfig& config, const std::string& engine_id, int rank,
                  int64_t max_seqs);
  ~CaptureObserver() override;

  void before_forward(const runner::StepContext& ctx) override;
  // Every hook of its own: they only read (a copy of the captured rows), so
  // decode steps keep their CUDA graphs with capture on, its hooks run
  // after each replay (runner/model_runner/decode_graphs.h).
  size_t deferrable_hooks(const runner::StepContext& ctx) const override;
  void after_forward(const runner::StepContext& ctx) override;
  void on_finished(uint64_t id, runner::FinishedRequest& out) override;

  const std::string& segment_name() const { return ring_->name(); }
  const std::vector<int32_t>& layers() const { return layers_; }

 private:
  void on_layer_output(size_t slot, const at::Tensor& y);
  struct RowMeta {
    uint64_t request_id;
    int64_t step;
    int64_t position;
  };
  // block: [n, hidden] on the CPU, row i that of meta[i].
  void write_layer(size_t slot, const at::Tensor& block, const std::vector<RowMeta>& meta);

  CaptureConfig config_;
  int64_t hidden_;
  DType dtype_;
  std::vector<int32_t> layers_;
  std::unique_ptr<RingWriter> ring_;
  std::vector<HookHandle> hooks_;
  at::Tensor rows_host_;               // int64 [max_seqs]: flat row of each captured request's last token
  at::Tensor rows_device_;             // the same on the model's device
  at::Tensor staging_;                 // [layers, max_seqs, hidden] on the model's device, model dtype
  at::Tensor staging_host_;            // host copy target when the model is not on the CPU
  std::vector<at::Tensor> out_views_;  // staging_[slot][:n] for this step
  at::Tensor rows_view_;               // rows_device_[:n] for this step
  std::vector<RowMeta> meta_;          // per captured request, this step
  std::vector<uint8_t> fired_;         // per captured layer: its hook ran this step
  int64_t n_ = 0;
  // The writer of the ring when set (config asynchronous, or on a GPU by
  // default); destroyed before ring_, its jobs done.
  std::unique_ptr<HostCopyQueue> writer_;
};

}  // namespace nnsight::capture
