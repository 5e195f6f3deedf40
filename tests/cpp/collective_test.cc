// Collective programs run as one replicated execution over the test client's two devices.
#include "lowering/collective.h"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "ir/graph.h"
#include "test_client.h"

namespace tpu::lowering {
namespace {

using rt::BufferPtr;
using tpu::testing::TestClient;

// Runs `spec` with replica r holding inputs[r] (f32 or s32 data of the spec's one operand).
template <typename T>
std::vector<std::vector<T>> RunOnBoth(const CollectiveSpec& spec,
                                      const std::vector<std::vector<T>>& inputs) {
  rt::Client& c = TestClient();
  Graph g = CollectiveProgram(spec);
  std::vector<rt::ShapedType> outs;
  for (Value r : g.results) outs.push_back({g.type(r).dtype, g.type(r).dims});
  auto exe = c.CompileReplicated(ir::PrintModule(g), outs, {c.device_id(0), c.device_id(1)});
  std::vector<BufferPtr> keep;
  std::vector<std::vector<PJRT_Buffer*>> args;
  for (int r = 0; r < 2; ++r) {
    keep.push_back(c.FromHost(inputs[r].data(), spec.operands[0].dtype, spec.operands[0].dims, r));
    args.push_back({keep.back()->raw()});
  }
  auto results = c.ExecuteReplicated(*exe, args, {0, 1});
  std::vector<std::vector<T>> host;
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(results[r][0]->device(), r);
    host.emplace_back(results[r][0]->numel());
    results[r][0]->ToHost(host.back().data(), host.back().size() * sizeof(T));
  }
  return host;
}

CollectiveSpec Spec(Collective k, Dims dims, DType t = DType::kF32) {
  CollectiveSpec s;
  s.kind = k;
  s.size = 2;
  s.operands = {Type{t, std::move(dims)}};
  return s;
}

TEST(Collective, AllReduceSumAvgMax) {
  CollectiveSpec s = Spec(Collective::kAllReduce, {3});
  std::vector<std::vector<float>> in{{1, 2, 3}, {10, -20, 30}};
  EXPECT_EQ(RunOnBoth(s, in)[1], (std::vector<float>{11, -18, 33}));
  s.reduction = Reduction::kAvg;
  EXPECT_EQ(RunOnBoth(s, in)[0], (std::vector<float>{5.5f, -9, 16.5f}));
  s.reduction = Reduction::kMax;
  EXPECT_EQ(RunOnBoth(s, in)[0], (std::vector<float>{10, 2, 30}));
  s.reduction = Reduction::kPremulSum;
  s.factor = 0.5;
  EXPECT_EQ(RunOnBoth(s, in)[1], (std::vector<float>{5.5f, -9, 16.5f}));
}

TEST(Collective, BitwiseOnIntegersOnly) {
  CollectiveSpec s = Spec(Collective::kAllReduce, {2}, DType::kS32);
  s.reduction = Reduction::kBxor;
  EXPECT_EQ(RunOnBoth<int32_t>(s, {{6, 1}, {3, 1}})[0], (std::vector<int32_t>{5, 0}));
  EXPECT_THROW(CombinerOp(Reduction::kBand, DType::kF32), std::invalid_argument);
  EXPECT_THROW(CombinerOp(Reduction::kAvg, DType::kS64), std::invalid_argument);
}

TEST(Collective, BroadcastTakesTheRootsValue) {
  CollectiveSpec s = Spec(Collective::kBroadcast, {2});
  s.root = 1;
  float nan = std::numeric_limits<float>::quiet_NaN();
  auto out = RunOnBoth<float>(s, {{nan, nan}, {4, 5}});
  EXPECT_EQ(out[0], (std::vector<float>{4, 5}));
  EXPECT_EQ(out[1], (std::vector<float>{4, 5}));
}

TEST(Collective, GatherScatterAllToAllPermute) {
  auto gathered = RunOnBoth<float>(Spec(Collective::kAllGather, {2}), {{1, 2}, {3, 4}});
  EXPECT_EQ(gathered[0], (std::vector<float>{1, 2, 3, 4}));
  auto scattered =
      RunOnBoth<float>(Spec(Collective::kReduceScatter, {2, 2}), {{1, 2, 3, 4}, {10, 20, 30, 40}});
  EXPECT_EQ(scattered[0], (std::vector<float>{11, 22}));
  EXPECT_EQ(scattered[1], (std::vector<float>{33, 44}));
  auto swapped = RunOnBoth<float>(Spec(Collective::kAllToAll, {2, 1}), {{1, 2}, {3, 4}});
  EXPECT_EQ(swapped[0], (std::vector<float>{1, 3}));
  EXPECT_EQ(swapped[1], (std::vector<float>{2, 4}));
  CollectiveSpec p = Spec(Collective::kPermute, {2});
  p.pairs = {{0, 1}};
  auto moved = RunOnBoth<float>(p, {{7, 8}, {0, 0}});
  EXPECT_EQ(moved[1], (std::vector<float>{7, 8}));
  EXPECT_EQ(moved[0], (std::vector<float>{0, 0}));
}

TEST(Collective, DescribeNamesEverything) {
  CollectiveSpec s = Spec(Collective::kAllReduce, {4, 8});
  s.reduction = Reduction::kMax;
  EXPECT_EQ(Describe(s), "all_reduce(max) tensor<4x8xf32> over 2");
}

TEST(Runtime, CompileOptionsEncodeTheAssignment) {
  // {executable_build_options {num_replicas 1 num_partitions 1} compile_portable_executable},
  // then env_option_overrides {key "xla_cpu_use_xnnpack" value {bool_field false}}
  const std::string xnnpack_off("\x3a\x19\x0a\x13xla_cpu_use_xnnpack\x12\x02\x10\x00", 27);
  EXPECT_EQ(rt::CompileOptionsBytes({}),
            std::string("\x1a\x04\x20\x01\x28\x01\x20\x01", 8) + xnnpack_off);
  std::string two = rt::CompileOptionsBytes({3, 5});
  // num_replicas 2, num_partitions 1, device_assignment {2, 1, [3, 5]}
  EXPECT_EQ(
      two.substr(0, 18),
      std::string("\x1a\x10\x20\x02\x28\x01\x4a\x0a\x08\x02\x10\x01\x1a\x04\x08\x03\x08\x05", 18));
  EXPECT_EQ(two.substr(18), xnnpack_off);
}

}  // namespace
}  // namespace tpu::lowering
