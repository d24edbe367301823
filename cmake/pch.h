// Precompiled header for the library and the test binary: the LibTorch headers
// dominate every translation unit's compile time on a 2-core machine.
#pragma once
#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>
