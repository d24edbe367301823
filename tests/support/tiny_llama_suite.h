// A test suite sharing one LanguageModel over a tiny random Llama checkpoint,
// written once per suite: `class MySuite : public testing::TinyLlamaSuite<MySuite>`
// (the template parameter gives each suite its own model).
#pragma once

#include <gtest/gtest.h>

#include <nnsight/nnsight.hpp>

#include "support/scratch_dir.h"
#include "support/tiny_checkpoint.h"
#include "support/tiny_models.h"

namespace nnsight::testing {

template <class Suite>
class TinyLlamaSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir();
    write_hf_checkpoint(dir_->path(), *tiny_llama());
    lm_ = new LanguageModel(EngineArgs().model(dir_->path()).kv_cache_memory_mb(16).show_progress(false));
  }
  static void TearDownTestSuite() {
    delete lm_;
    lm_ = nullptr;
    delete dir_;
    dir_ = nullptr;
  }

  inline static ScratchDir* dir_ = nullptr;
  inline static LanguageModel* lm_ = nullptr;
};

}  // namespace nnsight::testing
