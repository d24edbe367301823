// NCCL process group. NCCL and the CUDA runtime are resolved with dlopen at
// first use: the library links neither, so it loads on machines without
// them, and in a process whose CUDA LibTorch already loaded them the same
// copies are used (RTLD_NOLOAD is tried first).
#include "tp/nccl_process_group.h"
#include "tp/collective_error.h"

#include <dlfcn.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <ATen/ATen.h>

#include <cstring>
#include <mutex>
#include <string>

#include <nnsight/error.hpp>

#if NNSIGHT_TORCH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

namespace nnsight::tp {

namespace {

struct CudaApi {
  cudaError_t (*GetDeviceCount)(int*) = nullptr;
  cudaError_t (*SetDevice)(int) = nullptr;
  cudaError_t (*StreamSynchronize)(cudaStream_t) = nullptr;
  const char* (*GetErrorString)(cudaError_t) = nullptr;
  std::string error;  // why it could not be loaded
  bool ok() const { return error.empty(); }
};

struct NcclApi {
  ncclResult_t (*GetUniqueId)(ncclUniqueId*) = nullptr;
  ncclResult_t (*CommInitRank)(ncclComm_t*, int, ncclUniqueId, int) = nullptr;
  ncclResult_t (*CommDestroy)(ncclComm_t) = nullptr;
  ncclResult_t (*CommAbort)(ncclComm_t) = nullptr;
  ncclResult_t (*AllReduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                            cudaStream_t) = nullptr;
  ncclResult_t (*AllGather)(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*Broadcast)(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) = nullptr;
  const char* (*GetErrorString)(ncclResult_t) = nullptr;
  std::string error;
  bool ok() const { return error.empty(); }
};

void* open_first(std::initializer_list<const char*> names, std::string& tried) {
  for (int pass = 0; pass < 2; ++pass) {
    for (const char* n : names) {
      if (void* h = ::dlopen(n, RTLD_NOW | RTLD_LOCAL | (pass == 0 ? RTLD_NOLOAD : 0))) return h;
      if (pass == 1) tried += std::string(tried.empty() ? "" : ", ") + n;
    }
  }
  return nullptr;
}

template <class F>
bool resolve(void* lib, const char* name, F& fn, std::string& error) {
  fn = reinterpret_cast<F>(::dlsym(lib, name));
  if (!fn && error.empty()) error = std::string("symbol ") + name + " is missing";
  return fn != nullptr;
}

const CudaApi& cuda() {
  static CudaApi api = [] {
    CudaApi a;
    std::string tried;
    void* lib = open_first({"libcudart.so.12", "libcudart.so.13", "libcudart.so.11.0", "libcudart.so"}, tried);
    if (!lib) {
      a.error = "cannot load the CUDA runtime (tried " + tried + ")";
      return a;
    }
    resolve(lib, "cudaGetDeviceCount", a.GetDeviceCount, a.error);
    resolve(lib, "cudaSetDevice", a.SetDevice, a.error);
    resolve(lib, "cudaStreamSynchronize", a.StreamSynchronize, a.error);
    resolve(lib, "cudaGetErrorString", a.GetErrorString, a.error);
    return a;
  }();
  return api;
}

const NcclApi& nccl() {
  static NcclApi api = [] {
    NcclApi a;
    std::string tried;
    void* lib = open_first({"libnccl.so.2", "libnccl.so"}, tried);
    if (!lib) {
      a.error = "cannot load NCCL (tried " + tried + ")";
      return a;
    }
    resolve(lib, "ncclGetUniqueId", a.GetUniqueId, a.error);
    resolve(lib, "ncclCommInitRank", a.CommInitRank, a.error);
    resolve(lib, "ncclCommDestroy", a.CommDestroy, a.error);
    resolve(lib, "ncclCommAbort", a.CommAbort, a.error);
    resolve(lib, "ncclAllReduce", a.AllReduce, a.error);
    resolve(lib, "ncclAllGather", a.AllGather, a.error);
    resolve(lib, "ncclBroadcast", a.Broadcast, a.error);
    resolve(lib, "ncclGetErrorString", a.GetErrorString, a.error);
    return a;
  }();
  return api;
}

ncclDataType_t nccl_type(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
      return ncclFloat32;
    case at::kHalf:
      return ncclFloat16;
    case at::kBFloat16:
      return ncclBfloat16;
    case at::kDouble:
      return ncclFloat64;
    case at::kLong:
      return ncclInt64;
    case at::kInt:
      return ncclInt32;
    case at::kChar:
      return ncclInt8;
    case at::kByte:
    case at::kBool:
      return ncclUint8;
    default:
      throw Error(std::string("NCCL: no NCCL type for ") + c10::toString(t));
  }
}

class NcclProcessGroup final : public ProcessGroup {
 public:
  NcclProcessGroup(ncclComm_t comm, int rank, int world, int device)
      : comm_(comm), rank_(rank), world_(world), device_(device) {}
  ~NcclProcessGroup() override {
    // Abort rather than destroy: destroy waits for outstanding work, which
    // never ends when a peer is gone.
    if (comm_) nccl().CommAbort(comm_);
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  std::string backend() const override { return "nccl"; }

  void all_reduce_sum(at::Tensor& t) override {
    check(t, "all-reduce");
    at::Tensor buf = t.is_contiguous() ? t : t.contiguous();
    check_nccl(nccl().AllReduce(buf.data_ptr(), buf.data_ptr(), static_cast<size_t>(buf.numel()),
                                nccl_type(buf.scalar_type()), ncclSum, comm_, stream()),
               "all-reduce");
    if (!buf.is_same(t)) t.copy_(buf);
  }

  at::Tensor all_gather(const at::Tensor& t, int64_t dim) override {
    check(t, "all-gather");
    at::Tensor in = t.contiguous();
    std::vector<int64_t> shape{world_};
    for (auto s : in.sizes()) shape.push_back(s);
    at::Tensor out = at::empty(shape, in.options());  // [world, ...]: rank r's part at out[r]
    check_nccl(nccl().AllGather(in.data_ptr(), out.data_ptr(), static_cast<size_t>(in.numel()),
                                nccl_type(in.scalar_type()), comm_, stream()),
               "all-gather");
    return at::cat(out.unbind(0), dim);
  }

  void broadcast(at::Tensor& t, int root) override {
    check(t, "broadcast");
    at::Tensor buf = t.is_contiguous() ? t : t.contiguous();
    check_nccl(nccl().Broadcast(buf.data_ptr(), buf.data_ptr(), static_cast<size_t>(buf.numel()),
                                nccl_type(buf.scalar_type()), root, comm_, stream()),
               "broadcast");
    if (!buf.is_same(t)) t.copy_(buf);
  }

  void barrier() override {
    at::Tensor one = at::ones({1}, at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, device_));
    all_reduce_sum(one);
    cudaError_t e = cuda().StreamSynchronize(stream());
    if (e != cudaSuccess)
      throw CollectiveError(std::string("tensor-parallel barrier (nccl): ") + cuda().GetErrorString(e));
  }

 private:
  void check(const at::Tensor& t, const char* what) const {
    if (!t.is_cuda())
      throw Error(std::string("tensor-parallel ") + what + " (nccl) needs a CUDA tensor, got one on " +
                  t.device().str());
    cuda().SetDevice(device_);
  }
  void check_nccl(ncclResult_t r, const char* what) const {
    if (r != ncclSuccess)
      throw CollectiveError(std::string("tensor-parallel ") + what + " failed on rank " + std::to_string(rank_) +
                            " of " + std::to_string(world_) + " (nccl): " + nccl().GetErrorString(r));
  }
  cudaStream_t stream() const {
#if NNSIGHT_TORCH_CUDA
    return c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device_)).stream();
#else
    return nullptr;  // the legacy default stream, which LibTorch also uses unless told otherwise
#endif
  }

  ncclComm_t comm_;
  int rank_, world_, device_;
};

}  // namespace

bool nccl_compiled() { return true; }

int cuda_device_count() {
  const CudaApi& c = cuda();
  if (!c.ok()) return 0;
  int n = 0;
  return c.GetDeviceCount(&n) == cudaSuccess ? n : 0;
}

std::shared_ptr<ProcessGroup> make_nccl_process_group(const std::shared_ptr<Store>& store, int rank, int world_size,
                                                      int device) {
  const std::string who = "tensor-parallel rank " + std::to_string(rank) + " of " + std::to_string(world_size);
  TORCH_CHECK(world_size == 1 || store, "make_nccl_process_group: a group of ", world_size, " needs a store");
  const CudaApi& c = cuda();
  if (!c.ok()) throw Error(who + " (nccl): " + c.error);
  const NcclApi& n = nccl();
  if (!n.ok()) throw Error(who + " (nccl): " + n.error);
  const int count = cuda_device_count();
  if (device < 0 || device >= count)
    throw ConfigError(who + " (nccl): CUDA device " + std::to_string(device) + " does not exist (" +
                      std::to_string(count) + " visible)");
  if (cudaError_t e = c.SetDevice(device); e != cudaSuccess)
    throw Error(who + " (nccl): cannot use CUDA device " + std::to_string(device) + ": " + c.GetErrorString(e));
  ncclUniqueId id;
  static_assert(sizeof(id.internal) == NCCL_UNIQUE_ID_BYTES, "ncclUniqueId layout");
  if (rank == 0) {
    if (ncclResult_t r = n.GetUniqueId(&id); r != ncclSuccess)
      throw Error(who + " (nccl): ncclGetUniqueId: " + n.GetErrorString(r));
    if (world_size > 1) {
      std::vector<uint8_t> bytes(sizeof(id.internal));
      std::memcpy(bytes.data(), id.internal, bytes.size());
      store->set("nnsight/nccl_unique_id", bytes);
    }
  } else {
    std::vector<uint8_t> bytes = store->get("nnsight/nccl_unique_id");
    if (bytes.size() != sizeof(id.internal))
      throw Error(who + " (nccl): the rendezvous holds a malformed NCCL unique id");
    std::memcpy(id.internal, bytes.data(), bytes.size());
  }
  ncclComm_t comm = nullptr;
  if (ncclResult_t r = n.CommInitRank(&comm, world_size, id, rank); r != ncclSuccess)
    throw Error(who + " (nccl): ncclCommInitRank: " + n.GetErrorString(r));
  return std::make_shared<NcclProcessGroup>(comm, rank, world_size, device);
}

}  // namespace nnsight::tp
