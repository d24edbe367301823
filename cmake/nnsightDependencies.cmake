# Finds everything the library links against and collects the private ones in
# one INTERFACE target, nnsight_private_deps.

find_package(Torch REQUIRED)
# Every LibTorch library must come from the one prefix TorchConfig.cmake was
# found in. Its find_library() calls search the system paths before that
# prefix, so with Debian's libtorch-dev installed and CMAKE_PREFIX_PATH naming
# a pip wheel's share/cmake, c10 resolves to /usr/lib's 1.13 while torch comes
# from the wheel: two c10 libraries in one process, and a corrupted heap.
# Re-resolve such libraries inside the prefix, or stop here saying which.
get_filename_component(NNSIGHT_TORCH_PREFIX "${TORCH_INSTALL_PREFIX}" REALPATH)
set(_nnsight_torch_libs)
foreach(_lib IN LISTS TORCH_LIBRARIES)
  if(IS_ABSOLUTE "${_lib}" AND EXISTS "${_lib}")
    get_filename_component(_real "${_lib}" REALPATH)
    string(FIND "${_real}" "${NNSIGHT_TORCH_PREFIX}/" _at)
    get_filename_component(_name "${_lib}" NAME)
    # LibTorch's own libraries only (CUDA's may live anywhere).
    if(NOT _at EQUAL 0 AND _name MATCHES "^lib(c10|torch|caffe2|shm)")
      if(EXISTS "${NNSIGHT_TORCH_PREFIX}/lib/${_name}")
        message(STATUS "nnsight: ${_lib} is outside LibTorch's prefix; using ${NNSIGHT_TORCH_PREFIX}/lib/${_name}")
        set(_lib "${NNSIGHT_TORCH_PREFIX}/lib/${_name}")
      else()
        message(FATAL_ERROR "nnsight: LibTorch at ${NNSIGHT_TORCH_PREFIX} names ${_lib}, which lies outside it and "
                            "has no copy in ${NNSIGHT_TORCH_PREFIX}/lib: two LibTorch installations are mixed. "
                            "Point CMAKE_PREFIX_PATH at one LibTorch, or remove the other.")
      endif()
    endif()
  endif()
  list(APPEND _nnsight_torch_libs "${_lib}")
endforeach()
set(TORCH_LIBRARIES ${_nnsight_torch_libs})
# A pip wheel's CUDA libraries (libcudart, libnccl, cuBLAS, ...) live in
# site-packages/nvidia/*/lib, where the linker does not look for LibTorch's
# own dependencies: add them to the link and run paths.
file(GLOB NNSIGHT_WHEEL_CUDA_LIBDIRS "${NNSIGHT_TORCH_PREFIX}/../nvidia/*/lib")
if(NNSIGHT_WHEEL_CUDA_LIBDIRS)
  foreach(_dir IN LISTS NNSIGHT_WHEEL_CUDA_LIBDIRS)
    add_link_options("LINKER:-rpath-link,${_dir}")
  endforeach()
  list(APPEND CMAKE_BUILD_RPATH ${NNSIGHT_WHEEL_CUDA_LIBDIRS} "${NNSIGHT_TORCH_PREFIX}/lib")
  message(STATUS "nnsight: the pip wheel's CUDA libraries: ${NNSIGHT_WHEEL_CUDA_LIBDIRS}")
endif()
# CUDA builds of LibTorch 2.x name CUDA::nvToolsExt, which CUDA 12.5+ no longer
# ships (NVTX is header-only now): stand in an empty target so they configure.
if(TARGET torch::nvtoolsext AND NOT TARGET CUDA::nvToolsExt)
  add_library(CUDA::nvToolsExt INTERFACE IMPORTED)
endif()
find_package(Threads REQUIRED)
find_package(Boost 1.74 REQUIRED COMPONENTS context)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(cereal QUIET)
find_package(PkgConfig REQUIRED)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
# utf8proc: Unicode normalization (NFC...) for tokenizer.json normalizers.
pkg_check_modules(UTF8PROC REQUIRED IMPORTED_TARGET libutf8proc)
find_package(absl REQUIRED)
# OpenSSL's libcrypto: HMAC-SHA256 and random challenges for worker authentication.
find_package(OpenSSL REQUIRED COMPONENTS Crypto)
find_package(CLI11 QUIET CONFIG)
if(NOT TARGET CLI11::CLI11)
  find_path(CLI11_INCLUDE_DIR CLI/CLI.hpp REQUIRED)
  add_library(CLI11::CLI11 INTERFACE IMPORTED)
  set_target_properties(CLI11::CLI11 PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${CLI11_INCLUDE_DIR}")
endif()

if(NOT TARGET cereal::cereal)
  find_path(CEREAL_INCLUDE_DIR cereal/cereal.hpp REQUIRED)
  add_library(cereal::cereal INTERFACE IMPORTED)
  set_target_properties(cereal::cereal PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${CEREAL_INCLUDE_DIR}")
elseif(TARGET cereal AND NOT TARGET cereal::cereal)
  add_library(cereal::cereal ALIAS cereal)
endif()

message(STATUS "nnsight: LibTorch ${Torch_VERSION} from ${TORCH_INSTALL_PREFIX}")

add_library(nnsight_private_deps INTERFACE)
target_link_libraries(nnsight_private_deps INTERFACE
  Boost::context nlohmann_json::nlohmann_json cereal::cereal PkgConfig::PCRE2 PkgConfig::UTF8PROC
  absl::flat_hash_map absl::inlined_vector absl::strings OpenSSL::Crypto
  Threads::Threads ${CMAKE_DL_LIBS} rt)

# glibc's vector math library (part of libc6 / libc6-dev): attention's
# softmax takes its 16-lane expf (row_ops.cpp, which alone gets the
# definition, in CMakeLists.txt). Without it the kernels use std::exp.
find_library(NNSIGHT_LIBMVEC mvec)
if(NNSIGHT_LIBMVEC)
  target_link_libraries(nnsight_private_deps INTERFACE ${NNSIGHT_LIBMVEC})
endif()

# at::parallel_for is a header template: with LibTorch's OpenMP backend it runs
# in parallel only in code compiled with OpenMP itself; without the flag every
# at::parallel_for in this project would run on the calling thread alone.
find_package(OpenMP)
if(OpenMP_CXX_FOUND)
  target_link_libraries(nnsight_private_deps INTERFACE OpenMP::OpenMP_CXX)
else()
  message(WARNING "nnsight: no OpenMP; the CPU kernels will run single-threaded")
endif()
target_compile_definitions(nnsight_private_deps INTERFACE PCRE2_CODE_UNIT_WIDTH=8)

# Whether this LibTorch was built with CUDA (the pip wheel is; Debian's is not).
if(TORCH_CUDA_LIBRARIES OR TARGET torch_cuda)
  set(NNSIGHT_WITH_CUDA ON)
else()
  set(NNSIGHT_WITH_CUDA OFF)
endif()

# ---- tensor-parallel backends ----------------------------------------------
# c10d (stores) and its gloo process group: LibTorch's C++ API for them moved
# between releases and some builds leave them out, so try to compile what
# tp/c10d_backend.cpp uses rather than trust version numbers.
# The checks link the library files, not LibTorch's imported targets: a
# try_compile project does not see the targets those depend on (the pip
# wheel's torch_cpu names protobuf::libprotobuf), and the libraries' own
# dependencies are resolved at run time, not here.
include(CheckCXXSourceCompiles)
find_library(NNSIGHT_TORCH_CPU_LIBRARY torch_cpu HINTS "${TORCH_INSTALL_PREFIX}/lib")
find_library(NNSIGHT_C10_LIBRARY c10 HINTS "${TORCH_INSTALL_PREFIX}/lib")
# LibTorch's ProcessGroupGloo.hpp includes gloo's own headers, which the
# torch wheels do not ship (Debian's libgloo-dev has them; on a machine
# without it, scripts/gpu-deps unpacks them into a prefix on
# CMAKE_PREFIX_PATH, where the compiler does not look by itself).
find_path(NNSIGHT_GLOO_INCLUDE_DIR gloo/algorithm.h HINTS ${TORCH_INCLUDE_DIRS})
set(NNSIGHT_GLOO_INCLUDE_DIRS)
# (Not a directory the compiler searches anyway: -I/usr/include breaks
# libstdc++'s #include_next.)
if(NNSIGHT_GLOO_INCLUDE_DIR AND NOT NNSIGHT_GLOO_INCLUDE_DIR IN_LIST CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES)
  set(NNSIGHT_GLOO_INCLUDE_DIRS ${NNSIGHT_GLOO_INCLUDE_DIR})
endif()
set(CMAKE_REQUIRED_INCLUDES ${TORCH_INCLUDE_DIRS} ${NNSIGHT_GLOO_INCLUDE_DIRS})
# torch_cpu's own definitions (USE_C10D_GLOO and friends) gate the headers.
get_target_property(_nnsight_torch_defs torch_cpu INTERFACE_COMPILE_DEFINITIONS)
set(CMAKE_REQUIRED_DEFINITIONS)
foreach(_def IN LISTS _nnsight_torch_defs)
  if(_def AND NOT _def MATCHES "\\$<")
    list(APPEND CMAKE_REQUIRED_DEFINITIONS "-D${_def}")
  endif()
endforeach()
set(CMAKE_REQUIRED_LIBRARIES ${NNSIGHT_TORCH_CPU_LIBRARY} ${NNSIGHT_C10_LIBRARY})
set(CMAKE_REQUIRED_LINK_OPTIONS "-Wl,--allow-shlib-undefined")
set(CMAKE_REQUIRED_FLAGS "-std=c++17 ${TORCH_CXX_FLAGS}")
set(CMAKE_REQUIRED_QUIET ON)
check_cxx_source_compiles([=[
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
int main() { c10d::TCPStoreOptions o; o.isServer = true; return o.port == 0; }
]=] NNSIGHT_HAVE_C10D)
check_cxx_source_compiles([=[
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
int main() { auto o = c10d::ProcessGroupGloo::Options::create(); return o ? 0 : 1; }
]=] NNSIGHT_HAVE_GLOO)
unset(CMAKE_REQUIRED_INCLUDES)
unset(CMAKE_REQUIRED_DEFINITIONS)
unset(CMAKE_REQUIRED_LIBRARIES)
unset(CMAKE_REQUIRED_LINK_OPTIONS)
unset(CMAKE_REQUIRED_FLAGS)
unset(CMAKE_REQUIRED_QUIET)

# NCCL: compiled whenever the CUDA toolkit and nccl.h are found (no GPU and
# no CUDA LibTorch needed to build it; libnccl is opened at run time).
option(NNSIGHT_WITH_NCCL "Build the NCCL tensor-parallel backend when the CUDA toolkit and nccl.h are found" ON)
set(NNSIGHT_HAVE_NCCL OFF)
if(NNSIGHT_WITH_NCCL)
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    find_path(NNSIGHT_NCCL_INCLUDE_DIR nccl.h
      HINTS $ENV{NCCL_HOME} $ENV{NCCL_ROOT} ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_ROOT}
      PATH_SUFFIXES include)
    if(NNSIGHT_NCCL_INCLUDE_DIR)
      set(NNSIGHT_HAVE_NCCL ON)
      set(NNSIGHT_NCCL_INCLUDE_DIRS ${NNSIGHT_NCCL_INCLUDE_DIR} ${CUDAToolkit_INCLUDE_DIRS})
    endif()
  endif()
endif()
message(STATUS "nnsight: tensor-parallel backends: c10d stores ${NNSIGHT_HAVE_C10D}, gloo ${NNSIGHT_HAVE_GLOO}, "
               "nccl ${NNSIGHT_HAVE_NCCL}; LibTorch CUDA ${NNSIGHT_WITH_CUDA}")

function(nnsight_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter
    -Wno-missing-field-initializers)
  if(NNSIGHT_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
