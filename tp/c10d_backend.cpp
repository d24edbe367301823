// Everything that touches LibTorch's c10d lives in this file: the stores
// (tp/store.h) and the gloo process group (tp/gloo_process_group.h). c10d's
// C++ API is not stable across LibTorch releases, so the differences between
// 1.13 (Debian) and 2.x (the pip wheels) are handled here and nowhere else:
//   - 2.x derives ProcessGroupGloo from c10d::Backend, 1.13 from ProcessGroup;
//     only members both have are used (allreduce, allgather, broadcast,
//     barrier, Work::wait, Options::create, Options::devices).
//   - c10::optional became std::optional in 2.x: only assigned, never named.
//   - 2.x builds expose ProcessGroupGloo.hpp only with USE_C10D_GLOO defined
//     (TorchConfig's interface definitions do that); CMake tries to compile
//     it and sets NNSIGHT_HAVE_GLOO / NNSIGHT_HAVE_C10D accordingly.
#include <ATen/ATen.h>
#include <torch/version.h>
#include <c10/core/InferenceMode.h>

#include <cstdlib>

#include <nnsight/error.hpp>

#include "tp/collective_error.h"
#include "tp/gloo_process_group.h"
#include "tp/store.h"

#if NNSIGHT_HAVE_C10D
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#endif
#if NNSIGHT_HAVE_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif

namespace nnsight::tp {

namespace {

// c10::Error carries a backtrace in what(); users need the message.
std::string message_of(const std::exception& e) {
  if (auto* ce = dynamic_cast<const c10::Error*>(&e)) return ce->what_without_backtrace();
  return e.what();
}

}  // namespace

#if NNSIGHT_HAVE_C10D

namespace {

class C10dStore final : public Store {
 public:
  C10dStore(c10::intrusive_ptr<c10d::Store> store, std::string where)
      : store_(std::move(store)), where_(std::move(where)) {}
  void set(const std::string& key, const std::vector<uint8_t>& value) override {
    try {
      store_->set(key, value);
    } catch (const std::exception& e) {
      throw Error("tensor-parallel rendezvous " + where_ + ": cannot set '" + key + "': " + message_of(e));
    }
  }
  std::vector<uint8_t> get(const std::string& key) override {
    try {
      return store_->get(key);
    } catch (const std::exception& e) {
      throw Error("tensor-parallel rendezvous " + where_ + ": '" + key + "' never arrived: " + message_of(e));
    }
  }
  const c10::intrusive_ptr<c10d::Store>& c10d() const { return store_; }

 private:
  c10::intrusive_ptr<c10d::Store> store_;
  std::string where_;
};

}  // namespace

std::shared_ptr<Store> open_store(const Rendezvous& where, int rank, int world_size,
                                  std::chrono::milliseconds timeout) {
  TORCH_CHECK(rank >= 0 && rank < world_size, "open_store: rank ", rank, " outside a world of ", world_size);
  try {
    c10::intrusive_ptr<c10d::Store> store;
    if (where.kind == Rendezvous::Kind::kFile) {
      store = c10::make_intrusive<c10d::FileStore>(where.path, world_size);
      store->setTimeout(timeout);
    } else {
      c10d::TCPStoreOptions opts;
      opts.port = static_cast<std::uint16_t>(where.port);
      opts.isServer = rank == 0;
      opts.numWorkers = world_size;
      opts.waitWorkers = true;
      opts.timeout = timeout;
      store = c10::make_intrusive<c10d::TCPStore>(where.host, opts);
    }
    return std::make_shared<C10dStore>(std::move(store), where.str());
  } catch (const std::exception& e) {
    throw Error("tensor-parallel rank " + std::to_string(rank) + " of " + std::to_string(world_size) +
                " cannot join the rendezvous " + where.str() + ": " + message_of(e));
  }
}

#else

std::shared_ptr<Store> open_store(const Rendezvous& where, int, int, std::chrono::milliseconds) {
  throw ConfigError("this LibTorch (" TORCH_VERSION
                    ") was built without torch.distributed (c10d); "
                    "tensor parallelism over the rendezvous " +
                    where.str() + " is not available");
}

#endif

#if NNSIGHT_HAVE_GLOO && NNSIGHT_HAVE_C10D

namespace {

class GlooProcessGroup final : public ProcessGroup {
 public:
  GlooProcessGroup(c10::intrusive_ptr<c10d::ProcessGroupGloo> pg, int rank, int world)
      : pg_(std::move(pg)), rank_(rank), world_(world) {}

  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  std::string backend() const override { return "gloo"; }

  void all_reduce_sum(at::Tensor& t) override {
    // Reduced in float32 whatever the dtype: bf16 sums lose digits, and
    // not every gloo build reduces bf16.
    const bool direct = t.is_contiguous() && t.scalar_type() == at::kFloat;
    std::vector<at::Tensor> bufs{direct ? t : t.to(at::kFloat).contiguous()};
    run("all-reduce", [&] { return pg_->allreduce(bufs); });
    if (!direct) t.copy_(bufs[0]);
  }

  at::Tensor all_gather(const at::Tensor& t, int64_t dim) override {
    std::vector<at::Tensor> in{t.contiguous()};
    std::vector<std::vector<at::Tensor>> out(1);
    {
      // Gloo copies into the outputs on its own thread, where InferenceMode
      // is off and in-place writes to inference tensors are refused: the
      // outputs must be ordinary tensors.
      c10::InferenceMode off(false);
      for (int r = 0; r < world_; ++r) out[0].push_back(at::empty_like(in[0]));
    }
    run("all-gather", [&] { return pg_->allgather(out, in); });
    return at::cat(out[0], dim);
  }

  void broadcast(at::Tensor& t, int root) override {
    std::vector<at::Tensor> bufs{t.is_contiguous() ? t : t.contiguous()};
    c10d::BroadcastOptions opts;
    opts.rootRank = root;
    run("broadcast", [&] { return pg_->broadcast(bufs, opts); });
    if (!bufs[0].is_same(t)) t.copy_(bufs[0]);
  }

  void barrier() override {
    run("barrier", [&] { return pg_->barrier(); });
  }

 private:
  template <class Start>
  void run(const char* what, Start&& start) {
    try {
      auto work = start();
      work->wait();
    } catch (const std::exception& e) {
      throw CollectiveError(std::string("tensor-parallel ") + what + " failed on rank " + std::to_string(rank_) +
                            " of " + std::to_string(world_) + " (gloo): " + message_of(e));
    }
  }

  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg_;
  int rank_, world_;
};

}  // namespace

bool gloo_available() { return true; }

namespace {

// LibTorch 2.x records every gloo collective in c10d's process-wide flight
// recorder (on unless TORCH_FR_BUFFER_SIZE=0), whose first record of each
// group inserts into a std::map before taking its lock: with several ranks'
// groups in one process (threads as ranks), their first collectives race,
// and about one run in 40 of ParallelLayers.* crashed inside that insert
// (torch 2.11). Nothing here reads the recorder, so it is off unless the
// user asked for it; set before the first group is made (the recorder reads
// the variable once). LibTorch 1.13 has no recorder and ignores it.
void turn_flight_recorder_off_unless_asked() {
  static const bool done = [] {
    if (std::getenv("TORCH_FR_BUFFER_SIZE") == nullptr && std::getenv("TORCH_NCCL_TRACE_BUFFER_SIZE") == nullptr)
      ::setenv("TORCH_FR_BUFFER_SIZE", "0", /*overwrite=*/0);
    return true;
  }();
  (void)done;
}

}  // namespace

std::shared_ptr<ProcessGroup> make_gloo_process_group(const std::shared_ptr<Store>& store, const Rendezvous& where,
                                                      int rank, int world_size, std::chrono::milliseconds timeout) {
  auto* c10d_store = dynamic_cast<C10dStore*>(store.get());
  TORCH_CHECK(c10d_store, "make_gloo_process_group: the store does not come from open_store");
  turn_flight_recorder_off_unless_asked();
  try {
    auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
    const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
    if (ifname && *ifname)
      opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
    else if (where.loopback())
      opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    else
      opts->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
    auto pg = c10::make_intrusive<c10d::ProcessGroupGloo>(c10d_store->c10d(), rank, world_size, opts);
    return std::make_shared<GlooProcessGroup>(std::move(pg), rank, world_size);
  } catch (const std::exception& e) {
    throw Error("tensor-parallel rank " + std::to_string(rank) + " of " + std::to_string(world_size) +
                " cannot connect its gloo group through " + where.str() + ": " + message_of(e));
  }
}

#else

bool gloo_available() { return false; }

std::shared_ptr<ProcessGroup> make_gloo_process_group(const std::shared_ptr<Store>&, const Rendezvous&, int, int,
                                                      std::chrono::milliseconds) {
  throw ConfigError("this LibTorch (" TORCH_VERSION
                    ") has no gloo backend (c10d ProcessGroupGloo); "
                    "CPU tensor parallelism needs it (Debian: install libgloo-dev)");
}

#endif

}  // namespace nnsight::tp
