#include <cmath>

#include "rule_runner.h"

namespace tpu::testing {
namespace {

using rt::DType;

void ExpectNear(const std::vector<double>& got, const std::vector<double>& want,
                double tol = 1e-5) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "at " << i;
    } else if (got[i] != want[i]) {
      EXPECT_NEAR(got[i], want[i], tol) << "at " << i;
    }
  }
}

TEST(ReduceRules, SumOfIntsKeepdim) {
  RuleRun r("aten::sum", "dim_IntList");
  r.Tensor("self", {DType::kS32, {2, 3}}, {1, 2, 3, 4, 5, 6});
  r.Ints("dim", {-1});
  r.Bool("keepdim", true);
  r.None("dtype");
  r.Out({DType::kS64, {2, 1}});
  EXPECT_EQ(r.Run()[0], (std::vector<double>{6, 15}));
}

TEST(ReduceRules, MeanOverAllDims) {
  RuleRun r("aten::mean", "dim");
  r.Tensor("self", {DType::kF32, {2, 2}}, {1, 2, 3, 4});
  r.None("dim");
  r.Bool("keepdim", true);
  r.Out({DType::kF32, {1, 1}});
  EXPECT_EQ(r.Run()[0], (std::vector<double>{2.5}));
}

TEST(ReduceRules, ArgmaxTakesFirstOfTiesAndNaN) {
  RuleRun r("aten::argmax", "");
  r.Tensor("self", {DType::kF32, {2, 4}}, {1, 5, 2, 5, 1, NAN, 3, NAN});
  r.Int("dim", 1);
  r.Bool("keepdim", false);
  r.Out({DType::kS64, {2}});
  EXPECT_EQ(r.Run()[0], (std::vector<double>{1, 1}));
}

TEST(ReduceRules, ArgminWithoutDimFlattens) {
  RuleRun r("aten::argmin", "");
  r.Tensor("self", {DType::kS64, {2, 2}}, {4, 1, 7, 1});
  r.None("dim");
  r.Bool("keepdim", true);
  r.Out({DType::kS64, {1, 1}});
  EXPECT_EQ(r.Run()[0], (std::vector<double>{1}));
}

TEST(ReduceRules, MaxDimReturnsValuesAndIndices) {
  RuleRun r("aten::max", "dim");
  r.Tensor("self", {DType::kF32, {2, 3}}, {3, 1, 3, 0, 2, 2});
  r.Int("dim", 0);
  r.Bool("keepdim", true);
  r.Out({DType::kF32, {1, 3}});
  r.Out({DType::kS64, {1, 3}});
  auto out = r.Run();
  EXPECT_EQ(out[0], (std::vector<double>{3, 2, 3}));
  EXPECT_EQ(out[1], (std::vector<double>{0, 1, 0}));
}

TEST(ReduceRules, MinOfInt64UsesExactBound) {
  RuleRun r("aten::min", "");
  r.Tensor("self", {DType::kS64, {3}}, {5, 9, 7});
  r.Out({DType::kS64, {}});
  EXPECT_EQ(r.Run()[0], (std::vector<double>{5}));
}

TEST(ReduceRules, AmaxPropagatesNaN) {
  RuleRun r("aten::amax", "");
  r.Tensor("self", {DType::kF32, {2, 2}}, {1, NAN, 3, 2});
  r.Ints("dim", {1});
  r.Bool("keepdim", false);
  r.Out({DType::kF32, {2}});
  ExpectNear(r.Run()[0], {NAN, 3});
}

TEST(ReduceRules, MaxDimPicksFirstNaN) {
  RuleRun r("aten::min", "dim");
  r.Tensor("self", {DType::kF32, {4}}, {1, NAN, -5, NAN});
  r.Int("dim", 0);
  r.Bool("keepdim", false);
  r.Out({DType::kF32, {}});
  r.Out({DType::kS64, {}});
  auto out = r.Run();
  ExpectNear(out[0], {NAN});
  EXPECT_EQ(out[1], (std::vector<double>{1}));
}

TEST(ReduceRules, VarCorrection) {
  RuleRun r("aten::var", "correction");
  r.Tensor("self", {DType::kF32, {2, 3}}, {1, 2, 3, 2, 4, 9});
  r.Ints("dim", {1});
  r.Tensor("correction", {DType::kS64, {}}, {0});
  r.Bool("keepdim", false);
  r.Out({DType::kF32, {2}});
  ExpectNear(r.Run()[0], {2.0 / 3, 26.0 / 3});
}

TEST(ReduceRules, StdMeanDefaultCorrectionAndZeroDof) {
  RuleRun r("aten::std_mean", "correction");
  r.Tensor("self", {DType::kF32, {2, 1}}, {1, 3});
  r.Ints("dim", {1});
  r.None("correction");
  r.Bool("keepdim", false);
  r.Out({DType::kF32, {2}});
  r.Out({DType::kF32, {2}});
  auto out = r.Run();
  ExpectNear(out[0], {NAN, NAN});  // one element, correction 1: 0/0
  ExpectNear(out[1], {1, 3});
}

TEST(ReduceRules, CumsumLongDimAndIntPromotion) {
  RuleRun r("aten::cumsum", "");
  std::vector<double> x(37), want(37);
  for (int i = 0; i < 37; ++i) {
    x[i] = i % 5 - 2;
    want[i] = (i ? want[i - 1] : 0) + x[i];
  }
  r.Tensor("self", {DType::kS32, {37}}, x);
  r.Int("dim", -1);
  r.None("dtype");
  r.Out({DType::kS64, {37}});
  EXPECT_EQ(r.Run()[0], want);
}

TEST(ReduceRules, CumprodAlongDim0) {
  RuleRun r("aten::cumprod", "");
  r.Tensor("self", {DType::kF32, {3, 2}}, {1, 2, 3, 4, 5, 6});
  r.Int("dim", 0);
  r.None("dtype");
  r.Out({DType::kF32, {3, 2}});
  EXPECT_EQ(r.Run()[0], (std::vector<double>{1, 2, 3, 8, 15, 48}));
}

TEST(ReduceRules, LogcumsumexpWithInfinities) {
  RuleRun r("aten::_logcumsumexp", "");
  r.Tensor("self", {DType::kF32, {4}}, {-INFINITY, 0, 0, -INFINITY});
  r.Int("dim", 0);
  r.Out({DType::kF32, {4}});
  ExpectNear(r.Run()[0], {-INFINITY, 0, std::log(2.0), std::log(2.0)});
}

TEST(ReduceRules, LogcumsumexpPropagatesNaN) {
  RuleRun r("aten::_logcumsumexp", "");
  r.Tensor("self", {DType::kF32, {3}}, {1, NAN, 2});
  r.Int("dim", 0);
  r.Out({DType::kF32, {3}});
  ExpectNear(r.Run()[0], {1, NAN, NAN});
}

TEST(ReduceRules, ArgmaxOfScalarWithDim) {
  RuleRun r("aten::argmax", "");
  r.Tensor("self", {DType::kF32, {}}, {7});
  r.Int("dim", -1);
  r.Bool("keepdim", true);
  r.Out({DType::kS64, {}});
  EXPECT_EQ(r.Run()[0], (std::vector<double>{0}));
}

TEST(ReduceRules, SoftmaxAndBackward) {
  RuleRun f("aten::_softmax", "");
  f.Tensor("self", {DType::kF32, {1, 3}}, {1, 2, 3});
  f.Int("dim", 1);
  f.Bool("half_to_float", false);
  f.Out({DType::kF32, {1, 3}});
  std::vector<double> y = f.Run()[0];
  double s = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  ExpectNear(y, {std::exp(1.0) / s, std::exp(2.0) / s, std::exp(3.0) / s});

  RuleRun b("aten::_softmax_backward_data", "");
  b.Tensor("grad_output", {DType::kF32, {1, 3}}, {1, 0, 0});
  b.Tensor("output", {DType::kF32, {1, 3}}, y);
  b.Int("dim", 1);
  b.Out({DType::kF32, {1, 3}});
  // d softmax_0 / d x_j = y0 * (delta_0j - y_j).
  ExpectNear(b.Run()[0], {y[0] * (1 - y[0]), -y[0] * y[1], -y[0] * y[2]});
}

TEST(ReduceRules, LogSoftmaxBackward) {
  RuleRun b("aten::_log_softmax_backward_data", "");
  b.Tensor("grad_output", {DType::kF32, {2}}, {1, 2});
  b.Tensor("output", {DType::kF32, {2}}, {std::log(0.25), std::log(0.75)});
  b.Int("dim", 0);
  b.Out({DType::kF32, {2}});
  ExpectNear(b.Run()[0], {1 - 0.25 * 3, 2 - 0.75 * 3});
}

TEST(ReduceRules, LogSumExpOfAllMinusInf) {
  RuleRun r("aten::logsumexp", "");
  r.Tensor("self", {DType::kF32, {2, 2}}, {-INFINITY, -INFINITY, 0, 0});
  r.Ints("dim", {1});
  r.Bool("keepdim", false);
  r.Out({DType::kF32, {2}});
  ExpectNear(r.Run()[0], {-INFINITY, std::log(2.0)});
}

TEST(ReduceRules, VectorNormOrders) {
  const std::vector<std::pair<double, double>> cases = {
      {2, 5}, {1, 7}, {0, 2}, {INFINITY, 4}, {-INFINITY, 0}, {3, std::cbrt(91.0)}};
  for (auto [ord, want] : cases) {
    RuleRun r("aten::linalg_vector_norm", "");
    r.Tensor("self", {DType::kF32, {3}}, {-3, 0, 4});
    r.Tensor("ord", {DType::kF64, {}}, {ord});
    r.None("dim");
    r.Bool("keepdim", false);
    r.None("dtype");
    r.Out({DType::kF32, {}});
    ExpectNear(r.Run()[0], {want});
  }
}

TEST(ReduceRules, AllWithEmptyDimListReducesNothing) {
  RuleRun r("aten::all", "dims");
  r.Tensor("self", {DType::kF32, {2}}, {0, 2});
  r.Ints("dim", {});
  r.Bool("keepdim", false);
  r.Out({DType::kPred, {2}});
  EXPECT_EQ(r.Run()[0], (std::vector<double>{0, 1}));
}

TEST(ReduceRules, AnyAndCountNonzero) {
  RuleRun a("aten::any", "dim");
  a.Tensor("self", {DType::kS64, {2, 2}}, {0, 0, 0, 3});
  a.Int("dim", 1);
  a.Bool("keepdim", false);
  a.Out({DType::kPred, {2}});
  EXPECT_EQ(a.Run()[0], (std::vector<double>{0, 1}));

  RuleRun n("aten::count_nonzero", "dim_IntList");
  n.Tensor("self", {DType::kF32, {2, 2}}, {0, 1, 2, 0});
  n.Ints("dim", {});
  n.Out({DType::kS64, {}});
  EXPECT_EQ(n.Run()[0], (std::vector<double>{2}));
}

TEST(ReduceRules, AminmaxAndNansum) {
  RuleRun a("aten::aminmax", "");
  a.Tensor("self", {DType::kF32, {4}}, {3, -1, 8, 2});
  a.None("dim");
  a.Bool("keepdim", false);
  a.Out({DType::kF32, {}});
  a.Out({DType::kF32, {}});
  auto out = a.Run();
  EXPECT_EQ(out[0], (std::vector<double>{-1}));
  EXPECT_EQ(out[1], (std::vector<double>{8}));

  RuleRun n("aten::nansum", "");
  n.Tensor("self", {DType::kF32, {3}}, {1, NAN, 2});
  n.None("dim");
  n.Bool("keepdim", false);
  n.None("dtype");
  n.Out({DType::kF32, {}});
  EXPECT_EQ(n.Run()[0], (std::vector<double>{3}));
}

TEST(ReduceRules, ProdOfBoolIsInt64) {
  RuleRun r("aten::prod", "dim_int");
  r.Tensor("self", {DType::kPred, {2, 2}}, {1, 1, 1, 0});
  r.Int("dim", 1);
  r.Bool("keepdim", false);
  r.None("dtype");
  r.Out({DType::kS64, {2}});
  EXPECT_EQ(r.Run()[0], (std::vector<double>{1, 0}));
}

}  // namespace
}  // namespace tpu::testing
