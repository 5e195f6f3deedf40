// Rule tests for linalg.cc and nn.cc. Expected values come from PyTorch CPU (float64) on the same
// inputs: Seq(n, off) below mirrors the generator ((i + off) * 7 % 11 - 5) / 4.
#include <cmath>

#include "rule_runner.h"

namespace tpu::testing {
namespace {

using rt::DType;
using Dims = ir::Dims;

std::vector<double> Seq(int64_t n, int64_t off = 0) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<double>(((i + off) * 7) % 11 - 5) * 0.25;
  return v;
}

int64_t Numel(const Dims& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

// A float64 tensor argument filled with Seq.
Value SeqArg(RuleRun& r, const std::string& name, const Dims& dims, int64_t off = 0) {
  return r.Tensor(name, {DType::kF64, dims}, Seq(Numel(dims), off));
}
void Scalar(RuleRun& r, const std::string& name, double v) {
  r.Tensor(name, {DType::kF64, {}}, {v});
}

void ExpectNear(const std::vector<double>& got, const std::vector<double>& want,
                double tol = 1e-7) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], tol * std::max(1.0, std::abs(want[i]))) << "at " << i;
  }
}

// PyTorch CPU results (see the header comment).
const std::vector<double> kConvOut = {
    0.8125,  1.125,   -0.5,    0,       2.5625,  -0.4375, 0.75,    -1.8125, 2.25,    1.1875,
    1.0625,  0.9375,  -0.3125, 0.75,    -0.8125, -1.3125, 0.875,   -1.25,   -1.3125, 1.5,
    -2.3125, 0,       1.4375,  -4.25,   -0.75,   -0.6875, -0.75,   0.0625,  2.375,   -0.3125,
    2.25,    0.25,    0.3125,  0.6875,  1.5,     2.5,     3.375,   -0.75,   3.625,   1.125,
    0.1875,  1.4375,  -0.9375, 1.375,   -0.25,   -0.75,   2.1875,  1.125,   -2,      0.4375,
    -0.8125, 0.125,   2.625,   -1.75,   2.375,   1.5,     -0.0625, -2.25,   0.375,   -2.75,
    1,       -0.1875, 0.1875,  -0.1875, -1,      -0.9375, -1,      -4.5,    1.1875,  -0.25,
    -0.5625, 2.375,   1,       0.75,    3.25,    1.9375,  -1.0625, 1.25,    0.1875,  1.4375,
    1.5625,  1.6875,  2.75,    -1.3125, -1.75,   1.375,   2.4375,  -0.5,    0,       1.625,
    -0.6875, -1.125,  -0.6875, 3.375,   1.1875,  1.0625,  -0.1875, -0.3125, 0.25,    0.6875,
    -4.5625, 0.875,   -1.25,   -1.5625, 1.25,    0.625,   0.4375,  1.875,   -4.25,   -0.75,
    -0.75,   1,       2.25,    2.75,    0.8125,  2.25,    0.25,    2.125,   0.4375,  -1.75,
    3.625,   4.5,     -0.75,   3.625,   0.0625,  0.25,    0.5,     -0.6875, 2.3125,  -0.25,
    -0.75,   0.875,   0.5625,  0.25,    0.6875,  -2.375,  0.125,   2.625,   -2,      1.625,
    -0.5,    -1.875,  -2,      0.375,   -2.75,   0.625,   -1.1875, -2.5,    0.375,   -0.875,
    -0.9375, -1,      -1.9375, -0.875,  1.25,    -0.3125, 3.3125,  1,       0.75,    1.75,
    1.1875,  0.9375,  1.4375,  1.3125,  1.4375,  1.5625,  1.5625,  2.125};
const std::vector<double> kConvGradInput = {
    0, 0, 0, 0, 0, 5.25,    -0.9375, -3.6875, 1.8125,  -2.3125,
    0, 0, 0, 0, 0, -0.25,   2.875,   -5,      2.9375,  0.5625,
    0, 0, 0, 0, 0, -0.1875, -0.25,   -1,      -0.375,  -0.4375,
    0, 0, 0, 0, 0, -0.9375, 0.875,   0.625,   1.0625,  -2.625,
    0, 0, 0, 0, 0, -1.625,  -2.875,  2.0625,  0.125,   0.9375,
    0, 0, 0, 0, 0, 2.8125,  -2.1875, -0.3125, 2.9375,  -2.0625,
    0, 0, 0, 0, 0, 2.0625,  -2.875,  -1.625,  2.375,   -0.5,
    0, 0, 0, 0, 0, 0.625,   0.875,   -0.9375, 0,       2.3125,
    0, 0, 0, 0, 0, -1.875,  2.8125,  -2.125,  0.5,     2.4375,
    0, 0, 0, 0, 0, -5,      2.875,   -0.25,   -0.625,  1.75,
    0, 0, 0, 0, 0, -3.6875, -0.9375, 5.25,    -0.9375, -3.6875,
    0, 0, 0, 0, 0, 2.75,    -0.25,   0.1875,  2.6875,  -3.0625,
    0, 0, 0, 0, 0, -2.3125, 1.8125,  -3.6875, -0.9375, 5.25,
    0, 0, 0, 0, 0, -1.0625, -2.75,   1.75,    -0.625,  -0.25,
    0, 0, 0, 0, 0, 2.8125,  -2.0625, 0.625,   2.625,   -0.1875,
    0, 0, 0, 0, 0, 0.75,    -2.25,   2.3125,  0,       -0.9375,
    0, 0, 0, 0, 0, 3.375,   -2.6875, -0.5,    2.375,   -1.625,
    0, 0, 0, 0, 0, -0.5625, 2.6875,  0.4375,  -2.5,    2.8125,
    0, 0, 0, 0, 0, -4.3125, 3.125,   0.9375,  0.125,   2.0625,
    0, 0, 0, 0, 0, -2.4375, 2.625,   -2.625,  1.0625,  0.625,
    0, 0, 0, 0, 0, -0.6875, -0.125,  -0.25,   0.3125,  -1.875,
    0, 0, 0, 0, 0, 2,       -0.4375, 0.5625,  2.9375,  -5,
    0, 0, 0, 0, 0, 2.5,     2.5,     -2.3125, 1.8125,  -3.6875,
    0, 0, 0, 0, 0, -1.0625, -0.625,  -0.875,  -2.5,    2.75};
const std::vector<double> kConvGradWeight = {
    -1.5625, 2.75,    -3.25,   -4.4375, -3,      6,       9.4375, -4.875,  0.75,   -1.1875, 2.875,
    -3.375,  -3.375,  -4.5,    8.8125,  6.375,   -0.875,  -4,     -3.5,    5.625,  -3.125,  -1.875,
    -5.25,   8.5625,  9.0625,  -5.25,   -2.375,  -3.0625, 5.8125, -3.1875, 0,      -6.625,  11.5,
    0.625,   0.25,    -5.625,  -3.375,  5.75,    -2.3125, 0.6875, -5.4375, 9.0625, 5.9375,  -3.5625,
    -4.8125, -3.5625, 5.3125,  -2.3125, 2.6875,  -6.6875, 5.25,   -1,      3.4375, -5.875,  -1.4375,
    -1.0625, 6.1875,  2.6875,  -1,      -6.0625, -6.6875, 3.4375, 2.5625,  0.5,    -2.125,  2.8125,
    0.6875,  1.3125,  -5.625,  -6.625,  3,       3,       0.1875, -2.875,  3,      0,       5.25,
    -6.6875, -6.125,  -4.25,   7.9375,  2.875,   -2.5,    0.375,  -1.875,  9.0625, -5.4375, -6.625,
    -3.875,  8.5,     2.5,     -3.3125, -0.1875, -3.375,  11.5,   -6.625,  -3.5,   -7.125,  11.25,
    5.9375,  -2.1875, -2.0625, -4.4375, 8.5625,  -5.25,   -3.875, -6.625,  11.25};
const std::vector<double> kConvGradBias = {1.5, 0, -1.5, -0.25, 1, -0.5};
const std::vector<double> kConvTrOut = {
    -0.9375, 0,       1.9375,  0,       -2.3125, 0,       1,       0,       -0.8125, -2.1875,
    0,       3,       0,       -3.4375, 0,       3.1875,  0,       0.5625,  1,       0,
    -2,      0,       1.3125,  0,       0.5,     0,       -0.5,    1.6875,  0,       -4.1875,
    0,       2.4375,  0,       1.5,     0,       -2.9375, -1.1875, 0,       1.625,   0,
    0.8125,  0,       -1.375,  0,       1.1875,  -1.375,  0,       1.8125,  0,       0.0625,
    0,       -3.0625, 0,       0.625,   0.8125,  0,       0.9375,  0,       0.75,    0,
    0.5625,  0,       -1.5625, -1.5625, 0,       3.5,     0,       -4.4375, 0,       2.0625,
    0,       0.3125,  -0.8125, 0,       0.875,   0,       0.6875,  0,       -2.25,   0,
    0,       2.0625,  0,       -4.1875, 0,       2.3125,  0,       2.625,   0,       -2.0625,
    1,       0,       0.8125,  0,       -2.125,  0,       1.125,   0,       1.5625,  -1.25,
    0,       1.6875,  0,       0.5625,  0,       -1.9375, 0,       1,       1.1875,  0,
    -2.125,  0,       1.75,    0,       -1.9375, 0,       1.125,   1.125,   0,       0.5625,
    0,       0.75,    0,       1.625,   0,       0.0625,  -0.5625, 0,       1.6875,  0,
    -2,      0,       0.5,     0,       0.5,     -2.375,  0,       0.625,   0,       1.5,
    0,       -2.4375, 0,       -1.1875, 1.125,   0,       -2.0625, 0,       0.4375,  0,
    1.5625,  0,       -1.5,    0.9375,  0,       0.875,   0,       -2.375,  0,       0.5625,
    0,       1.375,   1.5625,  0,       1.125,   0,       -2.125,  0,       0.8125,  0,
    1,       -2.0625, 0,       2.625,   0,       2.3125,  0,       -4.1875, 0,       2.0625,
    0,       0,       -2.25,   0,       0.6875,  0,       0.875,   0,       -0.8125, 0.3125,
    0,       2.0625,  0,       -4.4375, 0,       3.5,     0,       -1.5625, -1.5625, 0,
    0.5625,  0,       0.75,    0,       0.9375,  0,       0.8125,  0.75,    0,       -2.5,
    0,       1.5625,  0,       -1.9375, 0,       1.375,   1.1875,  0,       -1.375,  0,
    0.8125,  0,       1.625,   0,       -1.1875, -2.9375, 0,       1.5,     0,       2.4375,
    0,       -4.1875, 0,       1.6875,  -0.5,    0,       0.5,     0,       1.3125,  0,
    -2,      0,       1,       0.5625,  0,       3.1875,  0,       -3.4375, 0,       3,
    0,       -2.1875, -0.8125, 0,       1,       0,       -2.3125, 0,       1.9375,  0,
    -0.9375, 1.5,     0,       -1.375,  0,       1.9375,  0,       -2.3125, 0,       1,
    0.8125,  0,       -2.5,    0,       0.3125,  0,       1.75,    0,       -1.3125, 2.375,
    0,       1.0625,  0,       -5,      0,       2.6875,  0,       0.625,   -1,      0,
    0.5,     0,       1.9375,  0,       -2.125,  0,       0.75,    0.125,   0,       -5.3125,
    0,       2.375,   0,       -0.9375, 0,       0.625,   -0.0625, 0,       2.125,   0,
    -1.9375, 0,       1.5625,  0,       -1.3125, -1.1875, 0,       1.125,   0,       0.9375,
    0,       0.75,    0,       0.625};
const std::vector<double> kConvTrGradInput = {
    0.1875, 3,       -3.125, 1.0625, -3.375,  -3.1875, -0.25,   4.75,   -0.3125, 4.6875,
    -3.375, -3.1875, 0.375,  -4.125, 1.6875,  2.6875,  0.8125,  2.75,   -0.125,  -4.375,
    3.125,  -4.5625, 0.8125, 2.75,   0.75,    1.3125,  -1.5625, -2.375, -2.9375, 0.0625,
    0.3125, 3.3125,  -2.75,  4.375,  -2.9375, 0.0625,  -2.1875, 2.0625, -0.5625, 3,
    0,      3.375,   -0.125, -0.875, 2.875,   -4.75,   0,       3.375};
const std::vector<double> kConvTrGradWeight = {
    -1.1875, -2.125, 2.1875,  -2.1875, 1.75,   2.1875,  -2.4375, 2.125,   -2.5,   -3.4375, 1.875,
    -2.5,    1.8125, -1.1875, 1.75,    2.1875, -2.125,  1.75,    3.25,    0.4375, -1.125,  4.0625,
    -3.5625, -1.125, 0.1875,  -4.6875, 4.1875, 0.4375,  -1,      4.1875,  0.5625, 3.25,    -3.5625,
    -1.125,  2.9375, -3.5625, -1.4375, 1.4375, -1.125,  -3.5625, 4.0625,  -1.125, 2.625,   -2.0625,
    0.4375,  4.1875, -6.75,   0.4375,  -2.25,  -1.4375, 4.0625,  -1.125,  1,      4.0625,  -0.375,
    0.625,   2.1875, 1.75,    -2.1875, 2.1875, -0.1875, 0.8125,  -3.4375, -2.5,   2.5,     -3.4375,
    0.6875,  -0.375, -2.1875, 2.1875,  0.3125, -2.1875};
const std::vector<double> kLnOut = {
    0.656528542, -0.343471458, 0.618694292,  -1.23479281, -0.09999872, -2.7499776,
    1.09999552,  -0.10000192,  0.361445713,  0.907630153, 0.810240952, 0.533132379,
    -0.09999872, -2.7499776,   1.09999552,   -0.10000192, 0.361445713, 0.907630153,
    0.810240952, 0.533132379,  -0.522088252, -1.30120476, 0.368473969, -0.79216857};
const std::vector<double> kLnMean = {0, 0.125, -0.4375, 0.375, -0.1875, -0.0625};
const std::vector<double> kLnRstd = {1.05044567, 1.59997952, 1.28514031,
                                     1.59997952, 1.28514031, 1.28514031};
const std::vector<double> kLnGradInput = {
    -0.294306273,   0.642945343,  0.144888908,  -0.493527978, 0.192001587,   -0.544021349,
    -0.455965851,   0.807985613,  1.07992686,   0.0316220548, -0.333201863,  -0.778347051,
    -0.00599656973, -0.258020172, -0.191974068, 0.45599081,   -0.0829125671, 0.424926036,
    -0.829122687,   0.487109218,  0.162193139,  -0.618213751, 0.288126021,   0.167894591};
const std::vector<double> kLnGradWeight = {0.557271966, 4.60938641, 0.755532756, 1.5437793};
const std::vector<double> kLnGradBias = {-0.25, -0.75, 1.5, 1};
const std::vector<double> kMaxOut = {-0.5, 0.25, 1,    1,    1.25,  1.25, 0.5,  0.5,
                                     0.75, 1,    1,    -0.5, -0.25, 0.5,  1.25, 1.25,
                                     1,    1,    0.75, 0.75, 1,     1.25, 1.25, -0.25};
const std::vector<double> kMaxIdx = {1, 3, 5, 5, 13, 13, 11, 11, 19, 27, 27, 23,
                                     1, 3, 5, 5, 19, 19, 11, 11, 19, 27, 27, 23};
const std::vector<double> kMaxGrad = {
    0, -0.5, 0, 1.25, 0, -0.5, 0, 0,     0, 0,     0, -0.25, 0, 1,    0, 0,    0, 0, 0, -0.25,
    0, 0,    0, -0.5, 0, 0,    0, -0.75, 0, 0,     0, 1.25,  0, 0.25, 0, 0.25, 0, 0, 0, 0,
    0, 0.5,  0, 0,    0, 0,    0, 0,     0, -2.25, 0, 0,     0, 1.25, 0, 0,    0, 0, 0, 0};
const std::vector<double> kAvgOut = {-0.25,
                                     0.0833333333,
                                     -0.0833333333,
                                     0.75,
                                     -0.0833333333,
                                     -0.0555555556,
                                     -0.222222222,
                                     0,
                                     0.3125,
                                     -0.0416666667,
                                     -0.208333333,
                                     -0.75,
                                     0,
                                     -0.125,
                                     0.166666667,
                                     1,
                                     -0.291666667,
                                     -0.111111111,
                                     0.0277777778,
                                     0.25,
                                     -0.125,
                                     0.208333333,
                                     0.0416666667,
                                     -0.5};
const std::vector<double> kAvgGrad = {-0.125,
                                      0.0833333333,
                                      0.208333333,
                                      0.25,
                                      0.0416666667,
                                      -0.333333333,
                                      0.0416666667,
                                      0.25,
                                      0.208333333,
                                      0.138888889,
                                      -0.0694444444,
                                      -0.194444444,
                                      0.166666667,
                                      0.166666667,
                                      0,
                                      -0.111111111,
                                      -0.111111111,
                                      0.138888889,
                                      0.104166667,
                                      -0.104166667,
                                      -0.208333333,
                                      -0.236111111,
                                      -0.0277777778,
                                      -0.0277777778,
                                      -0.0625,
                                      -0.270833333,
                                      -0.208333333,
                                      -0.125,
                                      0.0833333333,
                                      -0.166666667,
                                      0.3125,
                                      0.354166667,
                                      0.0416666667,
                                      -0.0833333333,
                                      -0.125,
                                      0.375,
                                      0.3125,
                                      0.243055556,
                                      -0.0694444444,
                                      -0.111111111,
                                      -0.0416666667,
                                      0.375,
                                      0,
                                      -0.111111111,
                                      -0.111111111,
                                      -0.0277777778,
                                      0.0833333333,
                                      0,
                                      -0.3125,
                                      -0.340277778,
                                      -0.0277777778,
                                      -0.0277777778,
                                      0,
                                      0.541666667,
                                      -0.3125,
                                      -0.229166667,
                                      0.0833333333,
                                      0,
                                      -0.0833333333,
                                      0.541666667};
const std::vector<double> kAvgPadOut = {-0.111111111,
                                        0.0555555556,
                                        -0.0555555556,
                                        0.25,
                                        -0.0555555556,
                                        -0.0555555556,
                                        -0.222222222,
                                        0,
                                        0.138888889,
                                        -0.0277777778,
                                        -0.138888889,
                                        -0.25,
                                        0,
                                        -0.0833333333,
                                        0.111111111,
                                        0.333333333,
                                        -0.194444444,
                                        -0.111111111,
                                        0.0277777778,
                                        0.125,
                                        -0.0555555556,
                                        0.138888889,
                                        0.0277777778,
                                        -0.166666667};
const std::vector<double> kAdaptOut = {
    -0.4375, 0.125, -0.0416666667, 0.0625,      -0.166666667, -0.138888889,  0,      -0.125,
    -0.125,  -0.25, 0.0416666667,  -0.3125,     0.3125,       -0.0416666667, 0.25,   0.125,
    0.125,   0,     0.138888889,   0.166666667, -0.0625,      0.0416666667,  -0.125, 0.4375};
const std::vector<double> kAdaptGrad = {0.125,
                                        0.0416666667,
                                        -0.0833333333,
                                        0.125,
                                        0.208333333,
                                        0.270833333,
                                        0.0625,
                                        0,
                                        0.0277777778,
                                        0.0277777778,
                                        0.236111111,
                                        0.208333333,
                                        0.104166667,
                                        -0.104166667,
                                        -0.125,
                                        -0.0138888889,
                                        0.111111111,
                                        0.111111111,
                                        0,
                                        -0.166666667,
                                        -0.166666667,
                                        0.0625,
                                        0.131944444,
                                        0.0694444444,
                                        -0.138888889,
                                        -0.208333333,
                                        -0.25,
                                        -0.0416666667,
                                        0.1875,
                                        0.145833333,
                                        -0.0416666667,
                                        -0.25,
                                        -0.208333333,
                                        -0.0833333333,
                                        0.125,
                                        -0.125,
                                        0.0833333333,
                                        0.208333333,
                                        0.25,
                                        0.0416666667,
                                        -0.145833333,
                                        -0.1875,
                                        0.0416666667,
                                        0.25,
                                        0.208333333,
                                        0.138888889,
                                        -0.0694444444,
                                        -0.131944444,
                                        -0.0625,
                                        0.166666667,
                                        0.166666667,
                                        0,
                                        -0.111111111,
                                        -0.111111111,
                                        0.0138888889,
                                        0.125,
                                        0.104166667,
                                        -0.104166667,
                                        -0.208333333,
                                        -0.236111111,
                                        -0.0277777778,
                                        -0.0277777778,
                                        0,
                                        -0.0625,
                                        -0.270833333,
                                        -0.208333333,
                                        -0.125,
                                        0.0833333333,
                                        -0.0416666667,
                                        -0.125};
const std::vector<double> kBnOut = {
    -1.26583738,  1.28076942,   -0.174434468, 2.37217234,   -0.712962321, -1.06852404,
    -0.446291036, -0.80185275,  -0.902036412, 1.64457039,   0.189366505,  -1.26583738,
    -0.624071893, -0.979633607, -0.357400607, -0.712962321, -0.53823544,  2.00837137,
    0.553167477,  -0.902036412, -0.535181464, -0.890743179, -1.24630489,  -0.624071893};
const std::vector<double> kBnMean = {-0.208333333, 0.145833333};
const std::vector<double> kBnInvstd = {1.16416311, 1.42224686};
const std::vector<double> kBnRunMean = {-0.695833333, 0.914583333};
const std::vector<double> kBnRunVar = {1.88049242, 0.953929924};
const std::vector<double> kBnGradInput = {
    -0.117692145,  -0.560259052, 1.40769805,   0.965131143,  -0.194013972, 0.299607559,
    0.169115915,   -0.315057268, 0.390771253,  -0.051795654, -2.08564925,  -0.117692145,
    -0.0729706762, 0.420650855,  0.290159211,  -0.194013972, 0.899234651,  0.456667744,
    -1.57718585,   0.390771253,  0.0480726196, -0.436100564, 0.0575209675, -0.0729706762};
const std::vector<double> kBnGradWeight = {-4.09882429, -3.05190472};
const std::vector<double> kBnGradBias = {2, -2};
const std::vector<double> kGnOut = {
    -1.49130267,   1.12065133,  -0.371893811, -0.351987961,  -0.65049699,  -0.949006019,
    -0.0214698909, 0.886503345, 1.79447658,   1.05930211,    -0.151328873, -1.36195985,
    0.60787058,    -1.1099082,  1.89620467,   -0.764314823,  -1.10787058,  -0.506648006,
    0.785277652,   1.81594492,  0.0122772,    -0.0572592928, -1.43148232,  0.973407977};
const std::vector<double> kGnMean = {-0.0833333333, -0.125, 0.291666667, -0.208333333};
const std::vector<double> kGnRstd = {1.19403612, 1.21063098, 1.37422303, 1.37422303};
const std::vector<double> kGnGradInput = {
    -0.562666306, 1.3820852,    0.270798624,  -0.993421935, -0.0897725619, -0.00702301933,
    1.07932534,   -0.505007158, 0.407586739,  -1.34078145,  0.782443425,   -0.423566896,
    2.02331641,   -0.130375708, -1.08530616,  0.110670353,  -0.668798738,  -0.249506159,
    -1.36999555,  0.533624784,  0.0366241993, 0.308354685,  -0.192915282,  0.68430716};
const std::vector<double> kGnGradWeight = {0.54095978, -1.82669135, -2.14313835, 1.18505934};
const std::vector<double> kGnGradBias = {1.75, 0.25, -1.25, 0};
const std::vector<double> kGelu = {-0.132062217, 0.345731231,  -0.154268769, 1.11793778,
                                   0.149676581,  -0.169970514, 0.841344746};
const std::vector<double> kGeluTanh = {-0.132285797, 0.34571401,   -0.15428599, 1.1177142,
                                       0.149675351,  -0.170039445, 0.841191991};
const std::vector<double> kGeluBack = {-0.153326979,    0.216873781, -0.0993786565, 1.12266158, 0,
                                       -0.000774278261, 0.812486603};
const std::vector<double> kGeluTanhBack = {-0.15311579, 0.216842476,    -0.0994725723, 1.12249263,
                                           0,           -0.00106174386, 0.812223063};
const std::vector<double> kSiluBack = {0.00789894386, 0.184990297, -0.19502911, 0.993680845, 0,
                                       -0.157400056,  0.695752884};
const std::vector<double> kMishBack = {-0.0183719531, 0.221606094, -0.217133008, 1.08046309, 0,
                                       -0.16074574,   0.786777165};
const std::vector<double> kSoftplus = {
    0.0394448671, 0.656630844, 0.156630844, 1.25, 0.487038492, 0.100706639, 1};
const std::vector<double> kElu = {-1.39421571, 1, -0.663597651, 2.5, 0.5, -0.938132164, 2};
const std::vector<double> kBce = {0.105360516, 0.693147181, 0.105360516, 100, 100};
const std::vector<double> kSmoothL1 = {0.5, 0.5, 0.5, 1.75, 0.5, 0.5, 1.75};
const std::vector<double> kHuber = {0.25, 0.25, 0.25, 0.875, 0.25, 0.25, 0.875};
const std::vector<double> kSmoothL1Back = {-0.5, 0.5, -1.25, 0.25, 0.75, -1, 0};

TEST(LinalgNnRules, MmAndAddmmBetaZeroIgnoresNan) {
  RuleRun r("aten::addmm", "");
  r.Tensor("self", {DType::kF32, {2, 2}}, {NAN, 1, 2, 3});
  r.Tensor("mat1", {DType::kF32, {2, 3}}, {1, 2, 3, 4, 5, 6});
  r.Tensor("mat2", {DType::kF32, {3, 2}}, {1, 0, 0, 1, 1, 1});
  Scalar(r, "beta", 0);
  Scalar(r, "alpha", 2);
  r.Out({DType::kF32, {2, 2}});
  EXPECT_EQ(r.Run()[0], (std::vector<double>{8, 10, 20, 22}));
}

TEST(LinalgNnRules, AddbmmSumsTheBatch) {
  RuleRun r("aten::addbmm", "");
  r.Tensor("self", {DType::kF32, {1, 2}}, {1, 1});
  r.Tensor("batch1", {DType::kF32, {2, 1, 2}}, {1, 2, 3, 4});
  r.Tensor("batch2", {DType::kF32, {2, 2, 2}}, {1, 0, 0, 1, 1, 1, 1, 1});
  Scalar(r, "beta", 0.5);
  Scalar(r, "alpha", 1);
  r.Out({DType::kF32, {1, 2}});
  // [1 2] + [7 7] + 0.5
  EXPECT_EQ(r.Run()[0], (std::vector<double>{8.5, 9.5}));
}

TEST(LinalgNnRules, Bf16MmAccumulatesInF32) {
  RuleRun r("aten::mm", "");
  // 1 + 2^-9 * 4 is exact in f32 but each partial 1 + 2^-9 would round away in bf16.
  r.Tensor("self", {DType::kF32, {1, 5}}, {1, 1.0 / 512, 1.0 / 512, 1.0 / 512, 1.0 / 512});
  r.Tensor("mat2", {DType::kF32, {5, 1}}, {1, 1, 1, 1, 1});
  r.Out({DType::kBF16, {1, 1}});
  EXPECT_EQ(r.Run()[0], (std::vector<double>{1.0078125}));
}

TEST(LinalgNnRules, ConvolutionGroupsStridePaddingDilationBias) {
  RuleRun r("aten::convolution", "");
  SeqArg(r, "input", {2, 4, 6, 5});
  SeqArg(r, "weight", {6, 2, 3, 3}, 3);
  SeqArg(r, "bias", {6}, 1);
  r.Ints("stride", {2, 1});
  r.Ints("padding", {1, 2});
  r.Ints("dilation", {2, 1});
  r.Bool("transposed", false);
  r.Ints("output_padding", {0, 0});
  r.Int("groups", 2);
  r.Out({DType::kF64, {2, 6, 2, 7}});
  ExpectNear(r.Run()[0], kConvOut);
}

TEST(LinalgNnRules, ConvolutionBackwardGrouped) {
  RuleRun r("aten::convolution_backward", "");
  SeqArg(r, "grad_output", {2, 6, 2, 7}, 5);
  SeqArg(r, "input", {2, 4, 6, 5});
  SeqArg(r, "weight", {6, 2, 3, 3}, 3);
  r.Ints("bias_sizes", {6});
  r.Ints("stride", {2, 1});
  r.Ints("padding", {1, 2});
  r.Ints("dilation", {2, 1});
  r.Bool("transposed", false);
  r.Ints("output_padding", {0, 0});
  r.Int("groups", 2);
  r.Ints("output_mask", {1, 1, 1});
  r.Out({DType::kF64, {2, 4, 6, 5}});
  r.Out({DType::kF64, {6, 2, 3, 3}});
  r.Out({DType::kF64, {6}});
  auto out = r.Run();
  ExpectNear(out[0], kConvGradInput);
  ExpectNear(out[1], kConvGradWeight);
  ExpectNear(out[2], kConvGradBias);
}

TEST(LinalgNnRules, TransposedConvolutionWithOutputPadding) {
  RuleRun r("aten::convolution", "");
  SeqArg(r, "input", {1, 4, 3, 4});
  SeqArg(r, "weight", {4, 3, 3, 2}, 2);
  r.None("bias");
  r.Ints("stride", {2, 2});
  r.Ints("padding", {1, 0});
  r.Ints("dilation", {1, 2});
  r.Bool("transposed", true);
  r.Ints("output_padding", {1, 0});
  r.Int("groups", 2);
  r.Out({DType::kF64, {1, 6, 6, 9}});
  ExpectNear(r.Run()[0], kConvTrOut);
}

TEST(LinalgNnRules, TransposedConvolutionBackward) {
  RuleRun r("aten::convolution_backward", "");
  SeqArg(r, "grad_output", {1, 6, 6, 9}, 4);
  SeqArg(r, "input", {1, 4, 3, 4});
  SeqArg(r, "weight", {4, 3, 3, 2}, 2);
  r.None("bias_sizes");
  r.Ints("stride", {2, 2});
  r.Ints("padding", {1, 0});
  r.Ints("dilation", {1, 2});
  r.Bool("transposed", true);
  r.Ints("output_padding", {1, 0});
  r.Int("groups", 2);
  r.Ints("output_mask", {1, 1, 0});
  r.Out({DType::kF64, {1, 4, 3, 4}});
  r.Out({DType::kF64, {4, 3, 3, 2}});
  r.Out({DType::kF64, {0}});
  auto out = r.Run();
  ExpectNear(out[0], kConvTrGradInput);
  ExpectNear(out[1], kConvTrGradWeight);
}

TEST(LinalgNnRules, LayerNormForwardAndBackward) {
  RuleRun f("aten::native_layer_norm", "");
  SeqArg(f, "input", {2, 3, 4});
  f.Ints("normalized_shape", {4});
  SeqArg(f, "weight", {4}, 2);
  SeqArg(f, "bias", {4}, 7);
  f.Double("eps", 1e-5);
  f.Out({DType::kF64, {2, 3, 4}});
  f.Out({DType::kF64, {2, 3, 1}});
  f.Out({DType::kF64, {2, 3, 1}});
  auto fo = f.Run();
  ExpectNear(fo[0], kLnOut);
  ExpectNear(fo[1], kLnMean);
  ExpectNear(fo[2], kLnRstd);

  RuleRun b("aten::native_layer_norm_backward", "");
  SeqArg(b, "grad_out", {2, 3, 4}, 3);
  SeqArg(b, "input", {2, 3, 4});
  b.Ints("normalized_shape", {4});
  b.Tensor("mean", {DType::kF64, {2, 3, 1}}, kLnMean);
  b.Tensor("rstd", {DType::kF64, {2, 3, 1}}, kLnRstd);
  SeqArg(b, "weight", {4}, 2);
  SeqArg(b, "bias", {4}, 7);
  b.Ints("output_mask", {1, 1, 1});
  b.Out({DType::kF64, {2, 3, 4}});
  b.Out({DType::kF64, {4}});
  b.Out({DType::kF64, {4}});
  auto bo = b.Run();
  ExpectNear(bo[0], kLnGradInput, 1e-6);
  ExpectNear(bo[1], kLnGradWeight, 1e-6);
  ExpectNear(bo[2], kLnGradBias);
}

TEST(LinalgNnRules, BatchNormTrainingAndBackward) {
  RuleRun f("aten::_native_batch_norm_legit_functional", "");
  SeqArg(f, "input", {3, 2, 2, 2});
  SeqArg(f, "weight", {2}, 3);
  SeqArg(f, "bias", {2}, 4);
  SeqArg(f, "running_mean", {2}, 5);
  f.Tensor("running_var", {DType::kF64, {2}}, {2, 1});
  f.Bool("training", true);
  f.Double("momentum", 0.1);
  f.Double("eps", 1e-5);
  f.Out({DType::kF64, {3, 2, 2, 2}});
  for (int i = 0; i < 4; ++i) f.Out({DType::kF64, {2}});
  auto fo = f.Run();
  ExpectNear(fo[0], kBnOut, 1e-6);
  ExpectNear(fo[1], kBnMean);
  ExpectNear(fo[2], kBnInvstd, 1e-6);
  ExpectNear(fo[3], kBnRunMean);
  ExpectNear(fo[4], kBnRunVar);

  RuleRun b("aten::native_batch_norm_backward", "");
  SeqArg(b, "grad_out", {3, 2, 2, 2}, 1);
  SeqArg(b, "input", {3, 2, 2, 2});
  SeqArg(b, "weight", {2}, 3);
  b.None("running_mean");
  b.None("running_var");
  b.Tensor("save_mean", {DType::kF64, {2}}, kBnMean);
  b.Tensor("save_invstd", {DType::kF64, {2}}, kBnInvstd);
  b.Bool("train", true);
  b.Double("eps", 1e-5);
  b.Ints("output_mask", {1, 1, 1});
  b.Out({DType::kF64, {3, 2, 2, 2}});
  b.Out({DType::kF64, {2}});
  b.Out({DType::kF64, {2}});
  auto bo = b.Run();
  ExpectNear(bo[0], kBnGradInput, 1e-6);
  ExpectNear(bo[1], kBnGradWeight, 1e-6);
  ExpectNear(bo[2], kBnGradBias);
}

TEST(LinalgNnRules, GroupNormForwardAndBackward) {
  RuleRun f("aten::native_group_norm", "");
  SeqArg(f, "input", {2, 4, 3});
  SeqArg(f, "weight", {4}, 3);
  SeqArg(f, "bias", {4}, 4);
  f.Int("N", 2);
  f.Int("C", 4);
  f.Int("HxW", 3);
  f.Int("group", 2);
  f.Double("eps", 1e-5);
  f.Out({DType::kF64, {2, 4, 3}});
  f.Out({DType::kF64, {2, 2}});
  f.Out({DType::kF64, {2, 2}});
  auto fo = f.Run();
  ExpectNear(fo[0], kGnOut, 1e-6);
  ExpectNear(fo[1], kGnMean);
  ExpectNear(fo[2], kGnRstd, 1e-6);

  RuleRun b("aten::native_group_norm_backward", "");
  SeqArg(b, "grad_out", {2, 4, 3}, 2);
  SeqArg(b, "input", {2, 4, 3});
  b.Tensor("mean", {DType::kF64, {2, 2}}, kGnMean);
  b.Tensor("rstd", {DType::kF64, {2, 2}}, kGnRstd);
  SeqArg(b, "weight", {4}, 3);
  b.Int("N", 2);
  b.Int("C", 4);
  b.Int("HxW", 3);
  b.Int("group", 2);
  b.Ints("output_mask", {1, 1, 1});
  b.Out({DType::kF64, {2, 4, 3}});
  b.Out({DType::kF64, {4}});
  b.Out({DType::kF64, {4}});
  auto bo = b.Run();
  ExpectNear(bo[0], kGnGradInput, 1e-6);
  ExpectNear(bo[1], kGnGradWeight, 1e-6);
  ExpectNear(bo[2], kGnGradBias);
}

// Rows 0 and 2 count with weights 2 and 4; row 1 is ignored.
TEST(LinalgNnRules, NllLossMeanWithIgnoreIndexAndWeight) {
  std::vector<double> x = Seq(12);
  RuleRun f("aten::nll_loss_forward", "");
  f.Tensor("self", {DType::kF32, {3, 4}}, x);
  f.Tensor("target", {DType::kS64, {3}}, {1, -100, 3});
  f.Tensor("weight", {DType::kF32, {4}}, {1, 2, 3, 4});
  f.Int("reduction", 1);
  f.Int("ignore_index", -100);
  f.Out({DType::kF32, {}});
  f.Out({DType::kF32, {}});
  auto fo = f.Run();
  ExpectNear(fo[0], {-(x[1] * 2 + x[11] * 4) / 6}, 1e-6);
  ExpectNear(fo[1], {6});

  RuleRun b("aten::nll_loss_backward", "");
  b.Tensor("grad_output", {DType::kF32, {}}, {3});
  b.Tensor("self", {DType::kF32, {3, 4}}, x);
  b.Tensor("target", {DType::kS64, {3}}, {1, -100, 3});
  b.Tensor("weight", {DType::kF32, {4}}, {1, 2, 3, 4});
  b.Int("reduction", 1);
  b.Int("ignore_index", -100);
  b.Tensor("total_weight", {DType::kF32, {}}, {6});
  b.Out({DType::kF32, {3, 4}});
  std::vector<double> want(12, 0);
  want[1] = -1;
  want[11] = -2;
  ExpectNear(b.Run()[0], want, 1e-6);
}

TEST(LinalgNnRules, NllLoss2dNoneReduction) {
  RuleRun r("aten::nll_loss2d_forward", "");
  r.Tensor("self", {DType::kF32, {1, 2, 1, 2}}, {1, 2, 3, 4});
  r.Tensor("target", {DType::kS64, {1, 1, 2}}, {1, 0});
  r.None("weight");
  r.Int("reduction", 0);
  r.Int("ignore_index", 0);
  r.Out({DType::kF32, {1, 1, 2}});
  r.Out({DType::kF32, {}});
  EXPECT_EQ(r.Run()[0], (std::vector<double>{-3, 0}));
}

TEST(LinalgNnRules, MseLossMeanAndBackward) {
  RuleRun f("aten::mse_loss", "");
  f.Tensor("self", {DType::kF32, {4}}, {1, 2, 3, 4});
  f.Tensor("target", {DType::kF32, {4}}, {0, 2, 5, 4});
  f.Int("reduction", 1);
  f.Out({DType::kF32, {}});
  EXPECT_EQ(f.Run()[0], (std::vector<double>{1.25}));
  RuleRun b("aten::mse_loss_backward", "");
  b.Tensor("grad_output", {DType::kF32, {}}, {2});
  b.Tensor("self", {DType::kF32, {4}}, {1, 2, 3, 4});
  b.Tensor("target", {DType::kF32, {4}}, {0, 2, 5, 4});
  b.Int("reduction", 1);
  b.Out({DType::kF32, {4}});
  EXPECT_EQ(b.Run()[0], (std::vector<double>{1, 0, -2, 0}));
}

TEST(LinalgNnRules, BinaryCrossEntropyClampsLogs) {
  RuleRun r("aten::binary_cross_entropy", "");
  r.Tensor("self", {DType::kF64, {5}}, {0.1, 0.5, 0.9, 1.0, 0.0});
  r.Tensor("target", {DType::kF64, {5}}, {0, 1, 1, 0, 1});
  r.None("weight");
  r.Int("reduction", 0);
  r.Out({DType::kF64, {5}});
  ExpectNear(r.Run()[0], kBce);
}

TEST(LinalgNnRules, SmoothL1AndHuber) {
  for (const char* op : {"aten::smooth_l1_loss", "aten::huber_loss"}) {
    bool huber = std::string(op) == "aten::huber_loss";
    RuleRun r(op, "");
    SeqArg(r, "self", {7});
    SeqArg(r, "target", {7}, 2);
    r.Int("reduction", 0);
    r.Double(huber ? "delta" : "beta", 0.5);
    r.Out({DType::kF64, {7}});
    ExpectNear(r.Run()[0], huber ? kHuber : kSmoothL1);
  }
  RuleRun b("aten::smooth_l1_loss_backward", "");
  SeqArg(b, "grad_output", {7}, 1);
  SeqArg(b, "self", {7});
  SeqArg(b, "target", {7}, 2);
  b.Int("reduction", 0);
  b.Double("beta", 0.5);
  b.Out({DType::kF64, {7}});
  ExpectNear(b.Run()[0], kSmoothL1Back);
}

TEST(LinalgNnRules, MaxPoolIndicesCeilModePaddingDilation) {
  RuleRun f("aten::max_pool2d_with_indices", "");
  SeqArg(f, "self", {2, 5, 6}, 1);
  f.Ints("kernel_size", {3, 2});
  f.Ints("stride", {2, 2});
  f.Ints("padding", {1, 1});
  f.Ints("dilation", {1, 2});
  f.Bool("ceil_mode", true);
  f.Out({DType::kF64, {2, 3, 4}});
  f.Out({DType::kS64, {2, 3, 4}});
  auto fo = f.Run();
  EXPECT_EQ(fo[0], kMaxOut);
  EXPECT_EQ(fo[1], kMaxIdx);

  RuleRun b("aten::max_pool2d_with_indices_backward", "");
  SeqArg(b, "grad_output", {2, 3, 4}, 2);
  SeqArg(b, "self", {2, 5, 6}, 1);
  b.Ints("kernel_size", {3, 2});
  b.Ints("stride", {2, 2});
  b.Ints("padding", {1, 1});
  b.Ints("dilation", {1, 2});
  b.Bool("ceil_mode", true);
  b.Tensor("indices", {DType::kS64, {2, 3, 4}}, kMaxIdx);
  b.Out({DType::kF64, {2, 5, 6}});
  EXPECT_EQ(b.Run()[0], kMaxGrad);
}

TEST(LinalgNnRules, MaxPoolFirstMaxWinsAndNanPropagates) {
  RuleRun r("aten::max_pool2d_with_indices", "");
  r.Tensor("self", {DType::kF32, {1, 2, 4}}, {1, 1, 5, NAN, 0, 1, 5, 2});
  r.Ints("kernel_size", {2, 2});
  r.Ints("stride", {2});
  r.Ints("padding", {0});
  r.Ints("dilation", {1});
  r.Bool("ceil_mode", false);
  r.Out({DType::kF32, {1, 1, 2}});
  r.Out({DType::kS64, {1, 1, 2}});
  auto out = r.Run();
  EXPECT_EQ(out[0][0], 1);
  EXPECT_TRUE(std::isnan(out[0][1]));
  EXPECT_EQ(out[1], (std::vector<double>{0, 3}));
}

TEST(LinalgNnRules, AvgPoolCeilModeAndPadCounting) {
  for (bool include_pad : {false, true}) {
    RuleRun f("aten::avg_pool2d", "");
    SeqArg(f, "self", {2, 5, 6}, 1);
    f.Ints("kernel_size", {3, 3});
    f.Ints("stride", {2, 2});
    f.Ints("padding", {1, 1});
    f.Bool("ceil_mode", true);
    f.Bool("count_include_pad", include_pad);
    f.None("divisor_override");
    f.Out({DType::kF64, {2, 3, 4}});
    ExpectNear(f.Run()[0], include_pad ? kAvgPadOut : kAvgOut);
  }
  RuleRun b("aten::avg_pool2d_backward", "");
  SeqArg(b, "grad_output", {2, 3, 4}, 2);
  SeqArg(b, "self", {2, 5, 6}, 1);
  b.Ints("kernel_size", {3, 3});
  b.Ints("stride", {2, 2});
  b.Ints("padding", {1, 1});
  b.Bool("ceil_mode", true);
  b.Bool("count_include_pad", false);
  b.None("divisor_override");
  b.Out({DType::kF64, {2, 5, 6}});
  ExpectNear(b.Run()[0], kAvgGrad);
}

TEST(LinalgNnRules, AdaptiveAvgPoolOverlappingBins) {
  RuleRun f("aten::_adaptive_avg_pool2d", "");
  SeqArg(f, "self", {1, 2, 5, 7});
  f.Ints("output_size", {3, 4});
  f.Out({DType::kF64, {1, 2, 3, 4}});
  ExpectNear(f.Run()[0], kAdaptOut);
  RuleRun b("aten::_adaptive_avg_pool2d_backward", "");
  SeqArg(b, "grad_output", {1, 2, 3, 4}, 1);
  SeqArg(b, "self", {1, 2, 5, 7});
  b.Out({DType::kF64, {1, 2, 5, 7}});
  ExpectNear(b.Run()[0], kAdaptGrad);
}

TEST(LinalgNnRules, Activations) {
  auto unary = [](const char* op, auto&& setup) {
    RuleRun r(op, "");
    SeqArg(r, "self", {7});
    setup(r);
    r.Out({DType::kF64, {7}});
    return r.Run()[0];
  };
  auto backward = [](const char* op, auto&& setup) {
    RuleRun r(op, "");
    SeqArg(r, "grad_output", {7}, 3);
    SeqArg(r, "self", {7});
    setup(r);
    r.Out({DType::kF64, {7}});
    return r.Run()[0];
  };
  auto none = [](RuleRun&) {};
  auto tanh = [](RuleRun& r) { r.Str("approximate", "tanh"); };
  ExpectNear(unary("aten::gelu", none), kGelu);
  ExpectNear(unary("aten::gelu", tanh), kGeluTanh);
  ExpectNear(backward("aten::gelu_backward", none), kGeluBack);
  ExpectNear(backward("aten::gelu_backward", tanh), kGeluTanhBack);
  ExpectNear(backward("aten::silu_backward", none), kSiluBack);
  ExpectNear(backward("aten::mish_backward", none), kMishBack);
  ExpectNear(unary("aten::softplus",
                   [](RuleRun& r) {
                     Scalar(r, "beta", 2);
                     Scalar(r, "threshold", 1);
                   }),
             kSoftplus);
  ExpectNear(unary("aten::elu",
                   [](RuleRun& r) {
                     Scalar(r, "alpha", 1.5);
                     Scalar(r, "scale", 2);
                     Scalar(r, "input_scale", 0.5);
                   }),
             kElu);
}

TEST(LinalgNnRules, ReluKeepsNanAndThresholdBackward) {
  RuleRun r("aten::relu", "");
  r.Tensor("self", {DType::kF32, {3}}, {-1, NAN, 2});
  r.Out({DType::kF32, {3}});
  auto out = r.Run()[0];
  EXPECT_EQ(out[0], 0);
  EXPECT_TRUE(std::isnan(out[1]));
  EXPECT_EQ(out[2], 2);
  RuleRun b("aten::threshold_backward", "");
  b.Tensor("grad_output", {DType::kF32, {3}}, {5, 6, 7});
  b.Tensor("self", {DType::kF32, {3}}, {0, 0.5, -1});
  Scalar(b, "threshold", 0);
  b.Out({DType::kF32, {3}});
  EXPECT_EQ(b.Run()[0], (std::vector<double>{0, 6, 0}));
}

}  // namespace
}  // namespace tpu::testing
