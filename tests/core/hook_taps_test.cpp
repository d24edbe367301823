#include "core/hook_taps.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/module.h"

namespace nnsight {
namespace {

// y = x * scale, its output a (y, None) tuple when tuple_size is 2.
class Scale : public Module {
 public:
  Scale(double s, int tuple_size = 0) : Module("Scale"), s_(s) { set_output_tuple_size(tuple_size); }
  at::Tensor forward(const at::Tensor& x) {
    return invoke(x, [&](const at::Tensor& in) { return in * s_; });
  }

 private:
  double s_;
};

// outer(x) = b(a(x)) + 1, every module a HookTaps may see.
class Chain : public Module {
 public:
  Chain() : Module("Chain") {
    a = register_module("a", std::make_shared<Scale>(2.0, 2));
    b = register_module("b", std::make_shared<Scale>(-3.0));
    assign_paths("");
  }
  at::Tensor forward(const at::Tensor& x) {
    return invoke(x, [&](const at::Tensor& in) { return b->forward(a->forward(in)) + 1; });
  }
  std::shared_ptr<Scale> a, b;
};

// What one hook saw: "<path> before|after", its input and its output (element 0).
struct Seen {
  std::string what;
  at::Tensor in, out;
  size_t out_size = 0;
};

// Hooks on the chain that write down what they see (in the order they run).
std::vector<HookHandle> watch(Chain& c, std::vector<Seen>& seen) {
  std::vector<HookHandle> h;
  h.push_back(c.register_forward_pre_hook([&](Module& m, const ModuleIO& in) {
    seen.push_back({m.path() + " before", in.at(0), at::Tensor(), 0});
    return std::optional<ModuleIO>();
  }));
  for (Module* m : {static_cast<Module*>(&c), static_cast<Module*>(c.a.get()), static_cast<Module*>(c.b.get())}) {
    h.push_back(m->register_forward_hook([&](Module& mm, const ModuleIO& in, const ModuleIO& out) {
      seen.push_back({mm.path() + " after", in.at(0), out.at(0), out.size()});
      return std::optional<ModuleIO>();
    }));
  }
  h.push_back(c.b->register_forward_pre_hook([&](Module& m, const ModuleIO& in) {
    seen.push_back({m.path() + " before", in.at(0), at::Tensor(), 0});
    return std::optional<ModuleIO>();
  }));
  return h;
}

TEST(HookTaps, HooksRunAfterTheForwardInItsOrderOnTheSameValues) {
  Chain c;
  std::vector<Seen> eager, deferred;
  const at::Tensor x = at::arange(6, at::kFloat).view({3, 2});
  auto handles = watch(c, eager);
  const at::Tensor y_eager = c.forward(x);
  for (auto& h : handles) h.remove();

  handles = watch(c, deferred);
  std::vector<HookTaps::Event> events;
  at::Tensor y;
  {
    HookTaps taps;
    y = c.forward(x);
    EXPECT_TRUE(deferred.empty()) << "no hook runs inside the recorded forward";
    events = taps.take_events();
  }
  EXPECT_EQ(HookTaps::active(), nullptr);
  EXPECT_TRUE(at::equal(y, y_eager));
  HookTaps::fire(events, 3, 3);

  ASSERT_EQ(deferred.size(), eager.size());
  const std::vector<std::string> order = {" before", "a after", "b before", "b after", " after"};
  for (size_t i = 0; i < eager.size(); ++i) {
    EXPECT_EQ(eager[i].what, order[i]);
    EXPECT_EQ(deferred[i].what, eager[i].what);
    EXPECT_TRUE(at::equal(deferred[i].in, eager[i].in)) << eager[i].what;
    EXPECT_EQ(deferred[i].out_size, eager[i].out_size) << eager[i].what;
    if (eager[i].out.defined()) EXPECT_TRUE(at::equal(deferred[i].out, eager[i].out)) << eager[i].what;
  }
  EXPECT_EQ(deferred[1].out_size, 2u) << "a's output is a (y, None) tuple for its hooks";
}

// Recorded on a padded batch, the hooks see the step's rows only, in copies
// of their own: the next forward overwrites the recorded values, not them.
TEST(HookTaps, FireGivesTheStepsRowsAsCopies) {
  Chain c;
  std::vector<Seen> seen;
  auto handles = watch(c, seen);
  at::Tensor x = at::arange(8, at::kFloat).view({4, 2});
  std::vector<HookTaps::Event> events;
  {
    HookTaps taps;
    c.forward(x);
    events = taps.take_events();
  }
  HookTaps::fire(events, 1, 4);
  ASSERT_EQ(seen.size(), 5u);
  EXPECT_TRUE(at::equal(seen[0].in, x.narrow(0, 0, 1)));
  EXPECT_TRUE(at::equal(seen[1].out, x.narrow(0, 0, 1) * 2));
  EXPECT_TRUE(at::equal(seen[4].out, x.narrow(0, 0, 1) * -6 + 1));
  const at::Tensor kept = seen[4].out.clone();
  for (auto& e : events)  // the next replay
    if (!e.output.empty()) e.output.at(0).fill_(7);
  EXPECT_TRUE(at::equal(seen[4].out, kept));
}

// What a deferred hook returns is not applied (only reading hooks are
// deferred), and recordings do not nest.
TEST(HookTaps, ReplacementsAreNotAppliedAndRecordingsDoNotNest) {
  Scale m(2.0);
  auto h = m.register_forward_hook(
      [](Module&, const ModuleIO&, const ModuleIO& out) { return std::optional<ModuleIO>(out.tensor() + 100); });
  const at::Tensor x = at::ones({2, 2});
  EXPECT_TRUE(at::equal(m.forward(x), x * 2 + 100));
  HookTaps taps;
  EXPECT_TRUE(at::equal(m.forward(x), x * 2)) << "recorded, not run";
  EXPECT_THROW(HookTaps(), c10::Error);
  ASSERT_EQ(taps.events().size(), 1u);
  EXPECT_NO_THROW(HookTaps::fire(taps.events(), 2, 2));
}

}  // namespace
}  // namespace nnsight
