#include "core/module.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/container/modulelist.h>

namespace nnsight {
namespace {

// y = x * scale; a tensor-in, tensor-out module.
class Scale : public Module {
 public:
  explicit Scale(double s, int tuple_size = 0) : Module("Scale"), s_(s) { set_output_tuple_size(tuple_size); }
  at::Tensor forward(const at::Tensor& x) {
    ++calls;
    return invoke(x, [&](const at::Tensor& in) { return in * s_; });
  }
  int calls = 0;

 private:
  double s_;
};

class Outer : public Module {
 public:
  Outer() : Module("Outer") {
    inner = register_module("inner", std::make_shared<Scale>(2.0));
    list = register_module("layers", torch::nn::ModuleList());
    for (int i = 0; i < 3; ++i) list->push_back(std::make_shared<Scale>(1.0 + i));
    assign_paths("");
  }
  std::shared_ptr<Scale> inner;
  torch::nn::ModuleList list;
};

TEST(Module, PathsFollowRegistrationNames) {
  Outer o;
  EXPECT_EQ(o.path(), "");
  EXPECT_EQ(o.inner->path(), "inner");
  EXPECT_EQ(std::dynamic_pointer_cast<Scale>(o.list->ptr(2))->path(), "layers.2");
  auto named = o.named_hookable_modules();
  std::vector<std::string> paths;
  for (auto& [p, m] : named) paths.push_back(p);
  EXPECT_EQ(paths, (std::vector<std::string>{"", "inner", "layers.0", "layers.1", "layers.2"}));
}

TEST(Module, ForwardHookReadsAndReplacesOutput) {
  Scale m(3.0);
  at::Tensor seen_in, seen_out;
  auto h = m.register_forward_hook([&](Module&, const ModuleIO& in, const ModuleIO& out) {
    seen_in = in.at(0);
    seen_out = out.tensor();
    return std::optional<ModuleIO>(out.tensor() + 1);
  });
  auto x = at::ones({2, 2});
  auto y = m.forward(x);
  EXPECT_TRUE(at::equal(seen_in, x));
  EXPECT_TRUE(at::equal(seen_out, x * 3));
  EXPECT_TRUE(at::equal(y, x * 3 + 1));
  h.remove();
  EXPECT_FALSE(m.has_hooks());
  EXPECT_TRUE(at::equal(m.forward(x), x * 3));
}

TEST(Module, PreHookReplacesInputs) {
  Scale m(3.0);
  m.register_forward_pre_hook([](Module&, const ModuleIO& in) {
    EXPECT_TRUE(in.is_tuple());
    return std::optional<ModuleIO>(ModuleIO::tuple({in.at(0) * 0 + 5}));
  });
  EXPECT_TRUE(at::equal(m.forward(at::ones({1})), at::full({1}, 15.0)));
}

TEST(Module, HooksRunInRegistrationOrder) {
  Scale m(1.0);
  std::vector<int> order;
  m.register_forward_hook([&](Module&, const ModuleIO&, const ModuleIO& out) {
    order.push_back(1);
    return std::optional<ModuleIO>(out.tensor() * 10);
  });
  m.register_forward_hook([&](Module&, const ModuleIO&, const ModuleIO& out) {
    order.push_back(2);
    return std::optional<ModuleIO>(out.tensor() + 1);
  });
  // Second hook sees the first hook's replacement.
  EXPECT_TRUE(at::equal(m.forward(at::ones({1})), at::full({1}, 11.0)));
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
}

TEST(Module, TupleOutputsExposeElementZeroAndNone) {
  Scale m(2.0, /*tuple_size=*/2);
  m.register_forward_hook([&](Module&, const ModuleIO&, const ModuleIO& out) {
    EXPECT_TRUE(out.is_tuple());
    EXPECT_EQ(out.size(), 2u);
    EXPECT_FALSE(out.at(1).defined());
    EXPECT_THROW(out.at(2), std::out_of_range);
    return std::optional<ModuleIO>(ModuleIO::tuple({out.at(0) * 0, at::Tensor()}));
  });
  EXPECT_TRUE(at::equal(m.forward(at::ones({3})), at::zeros({3})));
}

TEST(Module, HandleOutlivesModuleAndHookMayRemoveItself) {
  HookHandle outer;
  {
    Scale m(1.0);
    HookHandle self;
    int fired = 0;
    self = m.register_forward_hook([&](Module&, const ModuleIO&, const ModuleIO&) {
      ++fired;
      self.remove();
      return std::optional<ModuleIO>();
    });
    outer = m.register_forward_pre_hook([](Module&, const ModuleIO&) { return std::optional<ModuleIO>(); });
    m.forward(at::ones({1}));
    m.forward(at::ones({1}));
    EXPECT_EQ(fired, 1);
    EXPECT_TRUE(outer.active());
  }
  EXPECT_FALSE(outer.active());
  outer.remove();  // no-op, no crash
}

}  // namespace
}  // namespace nnsight
