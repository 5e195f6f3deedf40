#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <memory>
#include <thread>
#include <vector>

#include "ir/builder.h"
#include "test_client.h"

namespace tpu::ir {
namespace {

using tpu::testing::TestClient;

Graph AddMulGraph(int64_t n) {
  Graph g;
  Value a = g.Param({DType::kF32, {n}});
  Value b = g.Param({DType::kF32, {n}});
  Value s = Binary(g, "stablehlo.add", a, b);
  g.results = {Binary(g, "stablehlo.multiply", s, Constant(g, 2.0, DType::kF32, {n}))};
  return g;
}

std::vector<float> RunGraph(const Graph& g, std::vector<std::vector<float>> inputs) {
  std::vector<rt::ShapedType> outs;
  for (Value r : g.results) outs.push_back({g.type(r).dtype, g.type(r).dims});
  auto exe = TestClient().Compile(PrintModule(g), outs);
  std::vector<rt::BufferPtr> bufs;
  std::vector<PJRT_Buffer*> raw;
  for (size_t i = 0; i < inputs.size(); ++i) {
    bufs.push_back(
        TestClient().FromHost(inputs[i].data(), DType::kF32, g.type(g.params[i]).dims, 0));
    raw.push_back(bufs.back()->raw());
  }
  auto res = TestClient().Execute(*exe, raw, 0);
  std::vector<float> out(res[0]->numel());
  res[0]->ToHost(out.data(), out.size() * sizeof(float));
  return out;
}

TEST(Ir, PrintsGenericStableHlo) {
  std::string text = PrintModule(AddMulGraph(2));
  EXPECT_NE(text.find("func.func public @main(%v0: tensor<2xf32>, %v1: tensor<2xf32>)"),
            std::string::npos);
  EXPECT_NE(text.find("\"stablehlo.add\"(%v0, %v1)"), std::string::npos);
}

TEST(Ir, ADonatedParameterGivesItsBufferToTheResult) {
  Graph g = AddMulGraph(4);
  g.donations = {{0, 0}};
  EXPECT_NE(PrintModule(g).find("%v0: tensor<4xf32> {tf.aliasing_output = 0 : i32}"),
            std::string::npos);
  EXPECT_FALSE(StructuralHash(g) == StructuralHash(AddMulGraph(4)));
  auto exe = TestClient().Compile(PrintModule(g), {{DType::kF32, {4}}});
  std::vector<float> a{1, 2, 3, 4}, b{1, 1, 1, 1}, out(4);
  rt::BufferPtr x = TestClient().FromHost(a.data(), DType::kF32, {4}, 0);
  rt::BufferPtr y = TestClient().FromHost(b.data(), DType::kF32, {4}, 0);
  auto res = TestClient().Execute(*exe, {x->raw(), y->raw()}, 0);
  res[0]->ToHost(out.data(), sizeof(float) * out.size());
  EXPECT_EQ(out, (std::vector<float>{4, 6, 8, 10}));
  EXPECT_TRUE(x->Donated());
  EXPECT_FALSE(y->Donated());
  x->Await();  // a buffer given away counts as done for those who still wait on it
  EXPECT_TRUE(x->IsReady());
  auto called = std::make_shared<std::atomic<bool>>(false);
  x->OnReady([called] { called->store(true); });
  for (int i = 0; i < 500 && !called->load(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(called->load());
}

TEST(Ir, HashIsStructural) {
  EXPECT_EQ(StructuralHash(AddMulGraph(4)), StructuralHash(AddMulGraph(4)));
  EXPECT_FALSE(StructuralHash(AddMulGraph(4)) == StructuralHash(AddMulGraph(5)));
}

// cummin of a 0-d tensor made its unused zero before its parameter and returned the parameter;
// zero_ returned its zero. The same ops and types, told apart only by value numbers.
TEST(Ir, HashTellsAParamFromAConstantOfTheSameNumber) {
  Graph returns_param;
  Constant(returns_param, 0, DType::kF32);
  returns_param.results = {returns_param.Param({DType::kF32, {}})};
  Graph returns_constant;
  returns_constant.Param({DType::kF32, {}});
  returns_constant.results = {Constant(returns_constant, 0, DType::kF32)};
  ASSERT_EQ(returns_param.results, returns_constant.results);  // value 1 in both
  EXPECT_FALSE(StructuralHash(returns_param) == StructuralHash(returns_constant));
  EXPECT_FALSE(ShapelessHash(returns_param) == ShapelessHash(returns_constant));
}

TEST(Ir, RunsElementwise) {
  EXPECT_EQ(RunGraph(AddMulGraph(3), {{1, 2, 3}, {1, 1, 1}}), (std::vector<float>{4, 6, 8}));
}

TEST(Ir, RunsReduceWithRegion) {
  Graph g;
  Value x = g.Param({DType::kF32, {2, 3}});
  g.results = {Reduce(g, x, Constant(g, 0, DType::kF32), {1}, "stablehlo.add")};
  EXPECT_EQ(RunGraph(g, {{1, 2, 3, 4, 5, 6}}), (std::vector<float>{6, 15}));
}

TEST(Ir, RunsShapeOps) {
  Graph g;
  Value x = g.Param({DType::kF32, {2, 3}});
  Value t = Transpose(g, x, {1, 0});      // 3x2
  Value s = Slice(g, t, {1, 0}, {3, 2});  // rows 1..2
  Value neg_inf = Constant(g, -1.0 / 0.0, DType::kF32);
  Value m = Reduce(g, s, neg_inf, {0}, "stablehlo.maximum");  // max over rows
  g.results = {m};
  EXPECT_EQ(RunGraph(g, {{1, 2, 3, 4, 5, 6}}), (std::vector<float>{3, 6}));
}

}  // namespace
TEST(Ir, DynamicSizesCountTheRealEntriesAndReturnPlainBuffers) {
  // x is [2, 6] with 4 real entries per row (set_dimension_size): the mean counts them, and
  // exp(x), dynamic along dim 1, comes back as a plain [2, 6] buffer that a program takes in.
  Graph g;
  Value x = g.Param({DType::kF32, {2, 6}});
  Value n = g.Param({DType::kS32, {}});
  Value d = g.Op1("stablehlo.set_dimension_size", {x, n}, g.type(x), "dimension = 1 : i64");
  Value sum = Reduce(g, d, Constant(g, 0, DType::kF32), {1}, "stablehlo.add");
  Value count = BroadcastTo(g, ElementCount(g, d, {1}, DType::kF32), {2});
  g.results = {Binary(g, "stablehlo.divide", sum, count), Unary(g, "stablehlo.exponential", d)};
  auto exe = TestClient().Compile(PrintModule(g), {{DType::kF32, {2}}, {DType::kF32, {2, 6}}});
  std::vector<float> data{1, 2, 3, 6, 100, 100, 2, 2, 2, 2, 100, 100};
  int32_t real = 4;
  rt::BufferPtr a = TestClient().FromHost(data.data(), DType::kF32, {2, 6}, 0);
  rt::BufferPtr b = TestClient().FromHost(&real, DType::kS32, {}, 0);
  auto res = TestClient().Execute(*exe, {a->raw(), b->raw()}, 0);
  std::vector<float> mean(2);
  res[0]->ToHost(mean.data(), sizeof(float) * 2);
  EXPECT_EQ(mean, (std::vector<float>{3, 2}));
  // The dynamic result feeds the same program: a plain buffer of the static size.
  auto again = TestClient().Execute(*exe, {res[1]->raw(), b->raw()}, 0);
  again[0]->ToHost(mean.data(), sizeof(float) * 2);
  EXPECT_FLOAT_EQ(mean[1], std::exp(2.0f));
}

}  // namespace tpu::ir
