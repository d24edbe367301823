# Sanitizer builds (scripts/sanitize, scripts/fuzz-http): NNSIGHT_SANITIZE
# instruments every target of the build -- the library, the programs, the
# tests -- with clang. LibTorch and the other system libraries stay
# uninstrumented (docs/testing.md, "Sanitizers", says what that misses).
#   address  AddressSanitizer + UndefinedBehaviorSanitizer (and LeakSanitizer)
#   thread   ThreadSanitizer
# With NNSIGHT_BUILD_FUZZ, an address build also carries libFuzzer's coverage
# instrumentation, so the HTTP fuzzer and the ASan test suite share one build
# of the library.
set(NNSIGHT_SANITIZE "" CACHE STRING "Instrument every target: address (ASan+UBSan) or thread (TSan); see scripts/sanitize")
set_property(CACHE NNSIGHT_SANITIZE PROPERTY STRINGS "" address thread)

if(NNSIGHT_SANITIZE STREQUAL "")
  return()
endif()
if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "NNSIGHT_SANITIZE needs clang (configure with CC=clang CXX=clang++); "
                      "the compiler is ${CMAKE_CXX_COMPILER_ID}")
endif()
if(NNSIGHT_SANITIZE STREQUAL "address")
  set(_nnsight_sanitize_flags -fsanitize=address,undefined -fno-sanitize-recover=undefined)
  if(NNSIGHT_BUILD_FUZZ)
    list(APPEND _nnsight_sanitize_flags -fsanitize=fuzzer-no-link)
  endif()
elseif(NNSIGHT_SANITIZE STREQUAL "thread")
  set(_nnsight_sanitize_flags -fsanitize=thread)
else()
  message(FATAL_ERROR "NNSIGHT_SANITIZE is '${NNSIGHT_SANITIZE}'; it must be address, thread or empty")
endif()
add_compile_options(${_nnsight_sanitize_flags} -fno-omit-frame-pointer)
add_link_options(${_nnsight_sanitize_flags})
# The fiber switches of the trace workers tell the sanitizer which stack runs
# (src/front/trace_worker/fiber_switch.h).
add_compile_definitions(NNSIGHT_SANITIZE_$<UPPER_CASE:${NNSIGHT_SANITIZE}>=1)
# The hand-written SIMD kernels (intrinsics over every packed format) are left
# uninstrumented: clang 14 takes over 15 minutes per file to instrument them
# (GCC compiles each in seconds), and the kernel tests check them against ATen.
# (Without the precompiled header, which carries the sanitizer flags.)
file(GLOB _nnsight_simd_kernels "${CMAKE_CURRENT_SOURCE_DIR}/src/core/kernels/*_avx2.cpp"
     "${CMAKE_CURRENT_SOURCE_DIR}/src/core/kernels/*_avx512.cpp")
set_source_files_properties(${_nnsight_simd_kernels} PROPERTIES SKIP_PRECOMPILE_HEADERS ON COMPILE_OPTIONS
  "-fno-sanitize=all;-fno-sanitize-coverage=trace-pc-guard,trace-cmp,indirect-calls,inline-8bit-counters,pc-table")
# -O1 keeps stack traces readable and compiles faster than -O2 on 2 cores.
set(CMAKE_CXX_FLAGS_RELWITHDEBINFO "-O1 -g1 -DNDEBUG")
message(STATUS "nnsight: sanitizers ${_nnsight_sanitize_flags}")
