#include "front/capture/capture_observer.h"

#include <ATen/ATen.h>

#include <cmath>
#include <map>

#include <nnsight/error.hpp>

#include "core/log.h"
#include "front/capture/low_rank.h"

namespace nnsight::capture {

std::string decoder_layer_path(const ModelConfig& config, int64_t layer) {
  if (config.architecture == "gpt2") return "transformer.h." + std::to_string(layer);
  if (config.architecture == "gpt_neox") return "gpt_neox.layers." + std::to_string(layer);
  if (!config.multimodal.empty()) return "model.language_model.layers." + std::to_string(layer);
  return "model.layers." + std::to_string(layer);
}

namespace {

DType dtype_of(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
      return DType::kFloat32;
    case at::kBFloat16:
      return DType::kBFloat16;
    case at::kHalf:
      return DType::kFloat16;
    default:
      throw ConfigError(std::string("capture: unsupported model dtype ") + c10::toString(t));
  }
}

}  // namespace

CaptureObserver::CaptureObserver(CausalLM& model, const CaptureConfig& config, const std::string& engine_id, int rank,
                                 int64_t max_seqs)
    : config_(config),
      hidden_(model.config().hidden_size),
      dtype_(dtype_of(c10::typeMetaToScalarType(model.options().dtype()))) {
  const std::string where = config.layers.empty() ? "capture layers" : "capture layers '" + config.layers + "'";
  layers_ = parse_layer_list(config.layers, model.num_layers(), where);
  std::map<std::string, Module*> modules;
  for (auto& [path, m] : model.named_hookable_modules()) modules.emplace(path, m);

  RingOptions ro;
  ro.with_engine_id(engine_id)
      .with_rank(rank)
      .with_buffer_bytes(static_cast<uint64_t>(std::llround(config.buffer_size_gb * double(1ull << 30))))
      .with_hidden_size(hidden_)
      .with_dtype(dtype_)
      .with_compression_k(static_cast<int32_t>(config.compression_k))
      .with_sample_rate(config.sample_rate)
      .with_layers(layers_);
  ring_ = std::make_unique<RingWriter>(ro);

  const at::TensorOptions opts = model.options();
  rows_host_ = at::zeros({max_seqs}, at::TensorOptions().dtype(at::kLong));
  rows_device_ = opts.device().is_cpu() ? rows_host_ : rows_host_.to(opts.device());
  staging_ = at::zeros({static_cast<int64_t>(layers_.size()), max_seqs, hidden_}, opts);
  const bool asynchronous = config.asynchronous < 0 ? !opts.device().is_cpu() : config.asynchronous == 1;
  if (asynchronous)
    writer_ = std::make_unique<HostCopyQueue>();
  else if (!opts.device().is_cpu())
    staging_host_ = at::zeros_like(staging_, at::TensorOptions().device(at::kCPU));
  out_views_.resize(layers_.size());
  fired_.assign(layers_.size(), 0);
  meta_.reserve(static_cast<size_t>(max_seqs));

  for (size_t slot = 0; slot < layers_.size(); ++slot) {
    const std::string path = decoder_layer_path(model.config(), layers_[slot]);
    auto it = modules.find(path);
    if (it == modules.end()) {
      for (auto& h : hooks_) h.remove();
      throw ConfigError("capture: the model has no decoder layer module '" + path + "'");
    }
    hooks_.push_back(it->second->register_forward_hook(
        [this, slot](Module&, const ModuleIO&, const ModuleIO& output) -> std::optional<ModuleIO> {
          on_layer_output(slot, output.tensor());
          return std::nullopt;
        }));
  }
}

CaptureObserver::~CaptureObserver() {
  for (auto& h : hooks_) h.remove();
  writer_.reset();  // its queued records written, before the ring goes
}

void CaptureObserver::before_forward(const runner::StepContext& ctx) {
  meta_.clear();
  auto* rows = rows_host_.data_ptr<int64_t>();
  int64_t n = 0;
  for (const auto& r : *ctx.groups) {
    if (r.num_tokens <= 0 || !request_sampled(r.id, config_.sample_rate, config_.seed)) continue;
    rows[n++] = r.last_token_row();
    meta_.push_back(RowMeta{r.id, r.num_generated, r.last_position()});
  }
  n_ = n;
  std::fill(fired_.begin(), fired_.end(), 0);
  if (n == 0) return;
  if (rows_device_.data_ptr() != rows_host_.data_ptr()) rows_device_.narrow(0, 0, n).copy_(rows_host_.narrow(0, 0, n));
  rows_view_ = rows_device_.narrow(0, 0, n);
  for (size_t slot = 0; slot < out_views_.size(); ++slot)
    out_views_[slot] = staging_.select(0, static_cast<int64_t>(slot)).narrow(0, 0, n);
}

size_t CaptureObserver::deferrable_hooks(const runner::StepContext&) const {
  size_t n = 0;
  for (const HookHandle& h : hooks_) n += h.active() ? 1 : 0;
  return n;
}

void CaptureObserver::on_layer_output(size_t slot, const at::Tensor& y) {
  if (n_ == 0) return;
  // Whole rows only: under tensor parallelism a sharded value must be
  // gathered before it reaches here (decoder-layer outputs already are).
  TORCH_CHECK(y.dim() == 2 && y.size(1) == hidden_, "capture: decoder layer output is not [tokens, ", hidden_, "]");
  at::index_select_out(out_views_[slot], y, 0, rows_view_);  // [n, hidden]
  fired_[slot] = 1;
}

void CaptureObserver::write_layer(size_t slot, const at::Tensor& block, const std::vector<RowMeta>& meta) {
  const int32_t layer = layers_[slot];
  const int64_t n = block.size(0);
  const int64_t k = config_.compression_k;
  if (k > 0 && n > k) {
    LowRank lr = truncated_svd(block, k);
    // Rows first, then their basis: the basis outlives its rows in the ring.
    const uint64_t basis_seq = ring_->next_seq() + static_cast<uint64_t>(n);
    const float* c = lr.coefficients.data_ptr<float>();
    for (int64_t i = 0; i < n; ++i) {
      RecordMeta m;
      m.request_id = meta[static_cast<size_t>(i)].request_id;
      m.step = meta[static_cast<size_t>(i)].step;
      m.position = meta[static_cast<size_t>(i)].position;
      m.layer = layer;
      m.kind = RecordKind::kCoefficients;
      m.dtype = DType::kFloat32;
      m.shape0 = k;
      m.basis_seq = basis_seq;
      ring_->append(m, c + i * k, static_cast<uint64_t>(k) * 4);
    }
    RecordMeta b;
    b.layer = layer;
    b.kind = RecordKind::kBasis;
    b.dtype = DType::kFloat32;
    b.shape0 = k;
    b.shape1 = hidden_;
    const uint64_t seq = ring_->append(b, lr.basis.data_ptr(), static_cast<uint64_t>(k * hidden_) * 4);
    TORCH_CHECK(seq == basis_seq, "capture: basis sequence number mismatch");
    return;
  }
  const uint64_t row_bytes = static_cast<uint64_t>(hidden_) * dtype_size(dtype_);
  const auto* base = static_cast<const uint8_t*>(block.data_ptr());
  for (int64_t i = 0; i < n; ++i) {
    RecordMeta m;
    m.request_id = meta[static_cast<size_t>(i)].request_id;
    m.step = meta[static_cast<size_t>(i)].step;
    m.position = meta[static_cast<size_t>(i)].position;
    m.layer = layer;
    m.kind = RecordKind::kDense;
    m.dtype = dtype_;
    m.shape0 = hidden_;
    ring_->append(m, base + static_cast<uint64_t>(i) * row_bytes, row_bytes);
  }
}

void CaptureObserver::after_forward(const runner::StepContext&) {
  if (writer_) {
    if (n_ == 0) return;
    // The staging block is the next step's too: the copy leaves from a
    // clone, and the ring is written on the writer's thread once it landed.
    std::vector<at::Tensor> block = {staging_.narrow(1, 0, n_).clone()};  // [layers, n, hidden]
    writer_->push(std::move(block), [this, meta = meta_, fired = fired_](std::vector<at::Tensor>& host) {
      for (size_t slot = 0; slot < layers_.size(); ++slot)
        if (fired[slot]) write_layer(slot, host[0].select(0, static_cast<int64_t>(slot)), meta);
      ring_->publish();
    });
    n_ = 0;
    return;
  }
  if (n_ == 0) {
    ring_->publish();
    return;
  }
  at::Tensor host = staging_;
  if (staging_host_.defined()) {
    // One device-to-host copy per step for every layer.
    staging_host_.narrow(1, 0, n_).copy_(staging_.narrow(1, 0, n_));
    host = staging_host_;
  }
  for (size_t slot = 0; slot < layers_.size(); ++slot) {
    if (!fired_[slot]) continue;
    write_layer(slot, host.select(0, static_cast<int64_t>(slot)).narrow(0, 0, n_), meta_);
  }
  ring_->publish();
  n_ = 0;
}

void CaptureObserver::on_finished(uint64_t, runner::FinishedRequest&) {
  if (!writer_) return;
  // Its records are in the ring when its finish is reported: the last
  // step's copy has landed by now (the step's tokens crossed after it).
  writer_->drain();
  for (const std::string& e : writer_->take_errors()) log_warning("capture: writing records failed: " + e);
}

}  // namespace nnsight::capture
