// Factory rules are checked exactly against values printed by torch on CPU; random rules are
// checked statistically (means and variances within a few standard errors of 10k samples).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "rule_runner.h"

namespace tpu::testing {
namespace {

using rt::DType;

constexpr int64_t kN = 10000;

// The [seed, offset] state the dispatcher passes to random rules.
void State(RuleRun& r, double seed, double offset) {
  r.Tensor("generator", {DType::kU64, {2}}, {seed, offset});
}

double Mean(const std::vector<double>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

double Var(const std::vector<double>& v) {
  double m = Mean(v), s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return s / static_cast<double>(v.size() - 1);
}

// Sample mean and variance of kN draws match a distribution with this mean and variance
// (5 standard errors; the variance check assumes a moderate fourth moment).
void ExpectMoments(const std::vector<double>& v, double mean, double var) {
  ASSERT_EQ(v.size(), static_cast<size_t>(kN));
  double n = static_cast<double>(kN);
  EXPECT_NEAR(Mean(v), mean, 5 * std::sqrt(var / n));
  EXPECT_NEAR(Var(v), var, 5 * var * std::sqrt(2 / n) + 1e-12);
}

std::vector<double> Uniform(double seed, double offset, DType t = DType::kF32) {
  RuleRun r("aten::uniform_", "");
  r.Double("from", 0);
  r.Double("to", 1);
  State(r, seed, offset);
  r.Out({t, {kN}});
  return r.Run()[0];
}

TEST(FactoryRules, FillScalarTruncatesIntoInts) {
  RuleRun r("aten::fill_", "Scalar");
  r.Tensor("self", {DType::kS64, {2, 2}}, {0, 0, 0, 0});
  r.Tensor("value", {DType::kF64, {}}, {-2.7});
  r.Out({DType::kS64, {2, 2}});
  EXPECT_EQ(r.Run()[0], (std::vector<double>{-2, -2, -2, -2}));
}

TEST(FactoryRules, FillTensorAndZero) {
  RuleRun r("aten::fill_", "Tensor");
  r.Tensor("self", {DType::kF32, {3}}, {1, 2, 3});
  r.Tensor("value", {DType::kF32, {}}, {0.5});
  r.Out({DType::kF32, {3}});
  EXPECT_EQ(r.Run()[0], (std::vector<double>{0.5, 0.5, 0.5}));
  RuleRun z("aten::zero_", "");
  z.Tensor("self", {DType::kF32, {2}}, {1, 2});
  z.Out({DType::kF32, {2}});
  EXPECT_EQ(z.Run()[0], (std::vector<double>{0, 0}));
}

TEST(FactoryRules, ArangeFloatComputesInDouble) {
  // torch.arange(-1.5, 2.0, 0.3, dtype=torch.float32): element 5 is the double -5.55e-17.
  RuleRun r("aten::arange", "start_out");
  r.Tensor("start", {DType::kF64, {}}, {-1.5});
  r.Tensor("end", {DType::kF64, {}}, {2.0});
  r.Tensor("step", {DType::kF64, {}}, {0.3});
  r.Out({DType::kF32, {12}});
  std::vector<double> want = {-1.5,
                              -1.2000000476837158,
                              -0.8999999761581421,
                              -0.6000000238418579,
                              -0.30000001192092896,
                              static_cast<float>(-5.551115123125783e-17),
                              0.30000001192092896,
                              0.6000000238418579,
                              0.8999999761581421,
                              1.2000000476837158,
                              1.5,
                              1.7999999523162842};
  EXPECT_EQ(r.Run()[0], want);
}

TEST(FactoryRules, ArangeIntTruncatesStartAndStep) {
  // torch.arange(0.5, 5, 1.5, dtype=torch.int64) == [0, 1, 2, 3, 4].
  RuleRun r("aten::arange", "start_out");
  r.Tensor("start", {DType::kF64, {}}, {0.5});
  r.Tensor("end", {DType::kF64, {}}, {5});
  r.Tensor("step", {DType::kF64, {}}, {1.5});
  r.Out({DType::kS64, {5}});
  EXPECT_EQ(r.Run()[0], (std::vector<double>{0, 1, 2, 3, 4}));
}

TEST(FactoryRules, LinspaceMatchesTorchCpu) {
  // torch.linspace(-1, 2.3, n) for n = 9 and 20 (its vectorized loop rounds once per element).
  std::vector<std::vector<double>> wants = {
      {-1.0, -0.5874999761581421, -0.17500001192092896, 0.23749998211860657, 0.6499999761581421,
       1.0625, 1.4749999046325684, 1.8874999284744263, 2.299999952316284},
      {-1.0,
       -0.8263157606124878,
       -0.6526315808296204,
       -0.47894737124443054,
       -0.3052631616592407,
       -0.1315789520740509,
       0.042105257511138916,
       0.21578946709632874,
       0.38947367668151855,
       0.5631579160690308,
       0.7368420362472534,
       0.9105262756347656,
       1.0842105150222778,
       1.25789475440979,
       1.4315788745880127,
       1.605263113975525,
       1.778947353363037,
       1.9526314735412598,
       2.1263158321380615,
       2.299999952316284}};
  for (const auto& want : wants) {
    int64_t n = static_cast<int64_t>(want.size());
    RuleRun r("aten::linspace", "out");
    r.Tensor("start", {DType::kS64, {}}, {-1});
    r.Tensor("end", {DType::kF64, {}}, {2.3});
    r.Int("steps", n);
    r.Out({DType::kF32, {n}});
    std::vector<double> got = r.Run()[0];
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(got[i], want[i]) << n << " " << i;
  }
}

TEST(FactoryRules, LinspaceIntAndSingleStep) {
  RuleRun r("aten::linspace", "out");
  r.Tensor("start", {DType::kS64, {}}, {-3});
  r.Tensor("end", {DType::kS64, {}}, {5});
  r.Int("steps", 10);
  r.Out({DType::kS64, {10}});
  EXPECT_EQ(r.Run()[0], (std::vector<double>{-3, -2, -1, 0, 0, 1, 2, 3, 4, 5}));
  RuleRun one("aten::linspace", "out");
  one.Tensor("start", {DType::kF64, {}}, {4.5});
  one.Tensor("end", {DType::kF64, {}}, {7});
  one.Int("steps", 1);
  one.Out({DType::kF32, {1}});
  EXPECT_EQ(one.Run()[0], (std::vector<double>{4.5}));
}

TEST(FactoryRules, Logspace) {
  RuleRun r("aten::logspace", "out");
  r.Tensor("start", {DType::kF64, {}}, {-1});
  r.Tensor("end", {DType::kF64, {}}, {1});
  r.Int("steps", 5);
  r.Double("base", 2);
  r.Out({DType::kF32, {5}});
  std::vector<double> got = r.Run()[0];
  std::vector<double> want = {0.5, 0.7071067690849304, 1.0, 1.4142135381698608, 2.0};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << i;
  RuleRun i("aten::logspace", "out");
  i.Tensor("start", {DType::kS64, {}}, {0});
  i.Tensor("end", {DType::kS64, {}}, {3});
  i.Int("steps", 4);
  i.Double("base", 10);
  i.Out({DType::kS64, {4}});
  EXPECT_EQ(i.Run()[0], (std::vector<double>{1, 10, 100, 1000}));
}

TEST(FactoryRules, EyeRectangular) {
  RuleRun r("aten::eye", "m_out");
  r.Int("n", 2);
  r.Int("m", 3);
  r.Out({DType::kF32, {2, 3}});
  EXPECT_EQ(r.Run()[0], (std::vector<double>{1, 0, 0, 0, 1, 0}));
}

TEST(FactoryRules, UniformMomentsAndRange) {
  RuleRun r("aten::uniform_", "");
  r.Tensor("self", {DType::kF32, {kN}}, std::vector<double>(kN, 0));
  r.Double("from", -2);
  r.Double("to", 3);
  State(r, 42, 0);
  r.Out({DType::kF32, {kN}});
  std::vector<double> v = r.Run()[0];
  ExpectMoments(v, 0.5, 25.0 / 12);
  EXPECT_GE(*std::min_element(v.begin(), v.end()), -2);
  EXPECT_LT(*std::max_element(v.begin(), v.end()), 3);
}

TEST(FactoryRules, UniformBitsDependOnSeedAndOffset) {
  std::vector<double> a = Uniform(1, 0), b = Uniform(1, 0), c = Uniform(2, 0), d = Uniform(1, kN);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, d);
}

TEST(FactoryRules, RandomEmptyAndScalarShapes) {
  for (ir::Dims dims : {ir::Dims{}, ir::Dims{0}, ir::Dims{2, 0}}) {
    RuleRun u("aten::uniform_", "");
    State(u, 1, 0);
    u.Out({DType::kF32, dims});
    EXPECT_EQ(u.Run()[0].size(), dims.empty() ? 1u : 0u);
    RuleRun i("aten::random_", "to");
    i.Int("to", 4);
    State(i, 1, 0);
    i.Out({DType::kS32, dims});
    EXPECT_EQ(i.Run()[0].size(), dims.empty() ? 1u : 0u);
  }
}

TEST(FactoryRules, UniformHalfTypesStayBelowOne) {
  for (DType t : {DType::kBF16, DType::kF16, DType::kF64}) {
    std::vector<double> v = Uniform(7, 3, t);
    ExpectMoments(v, 0.5, 1.0 / 12);
    EXPECT_LT(*std::max_element(v.begin(), v.end()), 1);
    EXPECT_GE(*std::min_element(v.begin(), v.end()), 0);
  }
}

TEST(FactoryRules, NormalInPlace) {
  for (DType t : {DType::kF32, DType::kF64, DType::kBF16}) {
    RuleRun r("aten::normal_", "");
    r.Double("mean", 2);
    r.Double("std", 3);
    State(r, 5, 11);
    r.Out({t, {kN}});
    std::vector<double> v = r.Run()[0];
    ExpectMoments(v, 2, 9);
    for (double x : v) ASSERT_TRUE(std::isfinite(x));
  }
}

TEST(FactoryRules, NormalTensorMeanBroadcasts) {
  RuleRun r("aten::normal", "Tensor_Tensor");
  r.Tensor("mean", {DType::kF32, {2, 1}}, {-10, 10});
  r.Tensor("std", {DType::kF32, {}}, {0.5});
  State(r, 9, 0);
  r.Out({DType::kF32, {2, kN}});
  std::vector<double> v = r.Run()[0];
  ExpectMoments(std::vector<double>(v.begin(), v.begin() + kN), -10, 0.25);
  ExpectMoments(std::vector<double>(v.begin() + kN, v.end()), 10, 0.25);
}

TEST(FactoryRules, NormalFloatTensorScalarOutput) {
  RuleRun r("aten::normal", "float_Tensor_out");
  r.Double("mean", 1);
  r.Tensor("std", {DType::kF32, {}}, {0});
  State(r, 9, 0);
  r.Out({DType::kF32, {}});
  EXPECT_EQ(r.Run()[0], (std::vector<double>{1}));
}

TEST(FactoryRules, LogNormalAndCauchy) {
  RuleRun r("aten::log_normal_", "");
  r.Double("mean", 0);
  r.Double("std", 0.5);
  State(r, 3, 0);
  r.Out({DType::kF32, {kN}});
  std::vector<double> v = r.Run()[0];
  for (double& x : v) x = std::log(x);
  ExpectMoments(v, 0, 0.25);
  RuleRun c("aten::cauchy_", "");
  c.Double("median", 1);
  c.Double("sigma", 2);
  State(c, 3, 0);
  c.Out({DType::kF32, {kN}});
  std::vector<double> w = c.Run()[0];
  // Cauchy has no moments: the fraction below the median and inside median +- sigma is 1/2.
  double below = 0, inside = 0;
  for (double x : w) {
    below += x < 1;
    inside += std::abs(x - 1) < 2;
  }
  EXPECT_NEAR(below / kN, 0.5, 0.025);
  EXPECT_NEAR(inside / kN, 0.5, 0.025);
}

TEST(FactoryRules, BernoulliFloatP) {
  RuleRun r("aten::bernoulli_", "float");
  r.Tensor("self", {DType::kF32, {kN}}, std::vector<double>(kN, 0));
  r.Double("p", 0.3);
  State(r, 1, 2);
  r.Out({DType::kF32, {kN}});
  std::vector<double> v = r.Run()[0];
  for (double x : v) ASSERT_TRUE(x == 0 || x == 1);
  ExpectMoments(v, 0.3, 0.21);
}

TEST(FactoryRules, BernoulliTakesPFromSelf) {
  std::vector<double> p(kN);
  for (int64_t i = 0; i < kN; ++i) p[i] = i % 2 ? 0.9 : 0.0;
  RuleRun r("aten::bernoulli", "");
  r.Tensor("self", {DType::kF32, {kN}}, p);
  State(r, 1, 2);
  r.Out({DType::kF32, {kN}});
  std::vector<double> v = r.Run()[0], odd;
  for (int64_t i = 0; i < kN; ++i) {
    if (i % 2)
      odd.push_back(v[i]);
    else
      ASSERT_EQ(v[i], 0);
  }
  EXPECT_NEAR(Mean(odd), 0.9, 5 * std::sqrt(0.09 / (kN / 2)));
}

TEST(FactoryRules, BernoulliTensorPBroadcastsToBool) {
  RuleRun r("aten::bernoulli_", "Tensor");
  r.Tensor("self", {DType::kPred, {kN}}, std::vector<double>(kN, 0));
  r.Tensor("p", {DType::kF64, {}}, {0.75});
  State(r, 4, 0);
  r.Out({DType::kPred, {kN}});
  ExpectMoments(r.Run()[0], 0.75, 0.1875);
}

TEST(FactoryRules, RandomFromTo) {
  RuleRun r("aten::random_", "from");
  r.Int("from", -5);
  r.Int("to", 5);
  State(r, 8, 0);
  r.Out({DType::kS64, {kN}});
  std::vector<double> v = r.Run()[0];
  std::set<double> seen(v.begin(), v.end());
  EXPECT_EQ(seen, (std::set<double>{-5, -4, -3, -2, -1, 0, 1, 2, 3, 4}));
  ExpectMoments(v, -0.5, 99.0 / 12);
}

TEST(FactoryRules, RandomToAndPlainRanges) {
  RuleRun to("aten::random_", "to");
  to.Int("to", 3);
  State(to, 8, 0);
  to.Out({DType::kF32, {kN}});
  std::vector<double> v = to.Run()[0];
  EXPECT_EQ(std::set<double>(v.begin(), v.end()), (std::set<double>{0, 1, 2}));

  RuleRun u8("aten::random_", "");
  State(u8, 8, 0);
  u8.Out({DType::kU8, {kN}});
  ExpectMoments(u8.Run()[0], 127.5, (256.0 * 256 - 1) / 12);

  // Floats: integers in [0, 2^24].
  RuleRun f("aten::random_", "");
  State(f, 8, 0);
  f.Out({DType::kF32, {kN}});
  std::vector<double> w = f.Run()[0];
  for (double x : w) ASSERT_TRUE(x >= 0 && x <= 16777216 && x == std::floor(x));
  ExpectMoments(w, 8388608, 16777217.0 * 16777217.0 / 12);

  RuleRun b("aten::random_", "");
  State(b, 8, 0);
  b.Out({DType::kPred, {kN}});
  ExpectMoments(b.Run()[0], 0.5, 0.25);
}

TEST(FactoryRules, RandomInt64FullAndHalfRanges) {
  // from = int64 min without `to`: all 64 bits; plain random_: [0, 2^63).
  RuleRun full("aten::random_", "from");
  full.Int("from", INT64_MIN);
  full.None("to");
  State(full, 8, 0);
  full.Out({DType::kS64, {kN}});
  std::vector<double> v = full.Run()[0];
  auto neg = std::count_if(v.begin(), v.end(), [](double x) { return x < 0; });
  EXPECT_NEAR(static_cast<double>(neg) / kN, 0.5, 0.025);
  RuleRun half("aten::random_", "");
  State(half, 8, 0);
  half.Out({DType::kS64, {kN}});
  std::vector<double> w = half.Run()[0];
  EXPECT_GE(*std::min_element(w.begin(), w.end()), 0);
  EXPECT_NEAR(Mean(w) / 9223372036854775808.0, 0.5, 0.015);
}

TEST(FactoryRules, ExponentialAndGeometric) {
  RuleRun e("aten::exponential_", "");
  e.Double("lambd", 2);
  State(e, 6, 0);
  e.Out({DType::kF32, {kN}});
  std::vector<double> v = e.Run()[0];
  ExpectMoments(v, 0.5, 0.25);
  EXPECT_GT(*std::min_element(v.begin(), v.end()), 0);
  RuleRun g("aten::geometric_", "");
  g.Double("p", 0.25);
  State(g, 6, 0);
  g.Out({DType::kS64, {kN}});
  std::vector<double> w = g.Run()[0];
  ExpectMoments(w, 4, 0.75 / 0.0625);
  EXPECT_GE(*std::min_element(w.begin(), w.end()), 1);
}

TEST(FactoryRules, NativeDropoutTrain) {
  std::vector<double> x(kN);
  for (int64_t i = 0; i < kN; ++i) x[i] = static_cast<double>(i % 7) + 1;
  RuleRun r("aten::native_dropout", "");
  r.Tensor("input", {DType::kF32, {kN}}, x);
  r.Double("p", 0.2);
  r.None("train");  // None means training, as in PyTorch
  State(r, 12, 0);
  r.Out({DType::kF32, {kN}});
  r.Out({DType::kPred, {kN}});
  auto out = r.Run();
  ExpectMoments(out[1], 0.8, 0.16);
  for (int64_t i = 0; i < kN; ++i) {
    ASSERT_FLOAT_EQ(out[0][i], out[1][i] ? static_cast<float>(x[i] * 1.25f) : 0) << i;
  }
}

TEST(FactoryRules, NativeDropoutEvalAndPOne) {
  RuleRun r("aten::native_dropout", "");
  r.Tensor("input", {DType::kF32, {3}}, {1, 2, 3});
  r.Double("p", 0.5);
  r.Bool("train", false);
  r.Out({DType::kF32, {3}});
  r.Out({DType::kPred, {3}});
  auto out = r.Run();
  EXPECT_EQ(out[0], (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(out[1], (std::vector<double>{1, 1, 1}));
  RuleRun all("aten::native_dropout", "");
  all.Tensor("input", {DType::kF32, {3}}, {1, 2, 3});
  all.Double("p", 1);
  all.Bool("train", true);
  State(all, 1, 0);
  all.Out({DType::kF32, {3}});
  all.Out({DType::kPred, {3}});
  out = all.Run();
  EXPECT_EQ(out[0], (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(out[1], (std::vector<double>{0, 0, 0}));
}

TEST(FactoryRules, NativeDropoutBackward) {
  RuleRun r("aten::native_dropout_backward", "");
  r.Tensor("grad_output", {DType::kF32, {3}}, {1, 2, 3});
  r.Tensor("mask", {DType::kPred, {3}}, {1, 0, 1});
  r.Double("scale", 2);
  r.Out({DType::kF32, {3}});
  EXPECT_EQ(r.Run()[0], (std::vector<double>{2, 0, 6}));
}

TEST(FactoryRules, RandpermIsAPermutation) {
  RuleRun r("aten::randperm", "generator_out");
  r.Int("n", 100);
  State(r, 10, 0);
  r.Out({DType::kS64, {100}});
  std::vector<double> v = r.Run()[0], sorted = v;
  std::sort(sorted.begin(), sorted.end());
  std::vector<double> want(100);
  std::iota(want.begin(), want.end(), 0);
  EXPECT_EQ(sorted, want);
  EXPECT_NE(v, want);
}

}  // namespace
}  // namespace tpu::testing
