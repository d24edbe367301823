// GoogleTest entry point: fixes the intra-op thread count so timings and
// numerics do not depend on the machine's core count.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  at::set_num_threads(2);
  return RUN_ALL_TESTS();
}
