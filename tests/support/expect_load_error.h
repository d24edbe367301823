// expect_load_error: runs `f` and expects a LoadError whose message contains
// every fragment. Any other exception propagates and fails the test.
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

#include <nnsight/error.hpp>

namespace nnsight {
namespace testing {

template <typename F>
void expect_load_error(F&& f, std::initializer_list<std::string> fragments) {
  try {
    f();
    ADD_FAILURE() << "expected a LoadError, none was thrown";
  } catch (const LoadError& e) {
    const std::string msg = e.what();
    for (const std::string& frag : fragments) {
      EXPECT_NE(msg.find(frag), std::string::npos) << "message '" << msg << "' lacks '" << frag << "'";
    }
  }
}

}  // namespace testing
}  // namespace nnsight
