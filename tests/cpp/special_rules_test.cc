// Expected values come from PyTorch CPU (float32 unless noted).
#include <cmath>

#include "rule_runner.h"

namespace tpu::testing {
namespace {

using rt::DType;
using Vec = std::vector<double>;

void ExpectNear(const Vec& got, const Vec& want, double rtol = 1.3e-5, double atol = 1e-5) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "at " << i;
    } else if (got[i] != want[i]) {
      EXPECT_NEAR(got[i], want[i], atol + rtol * std::fabs(want[i])) << "at " << i;
    }
  }
}

const Vec kX = {-3, -0.5, 0, 0.25, 2, 9, -12, NAN};

Vec Unary(const char* op, const Vec& x, DType out = DType::kF32) {
  RuleRun r(op, "");
  r.Tensor("self", {DType::kF32, {static_cast<int64_t>(x.size())}}, x);
  r.Out({out, {static_cast<int64_t>(x.size())}});
  return r.Run()[0];
}

TEST(SpecialRules, IsPosInfIsNegInf) {
  Vec x = {INFINITY, -INFINITY, NAN, 1};
  EXPECT_EQ(Unary("aten::isposinf", x, DType::kPred), (Vec{1, 0, 0, 0}));
  EXPECT_EQ(Unary("aten::isneginf", x, DType::kPred), (Vec{0, 1, 0, 0}));
}

TEST(SpecialRules, Heaviside) {
  RuleRun r("aten::heaviside", "");
  r.Tensor("self", {DType::kF32, {4}}, {-1, 0, 2, 0});
  r.Tensor("values", {DType::kF32, {4}}, {5, 6, 7, 8});
  r.Out({DType::kF32, {4}});
  EXPECT_EQ(r.Run()[0], (Vec{0, 6, 1, 8}));
}

TEST(SpecialRules, LogSigmoidForwardAndBackward) {
  RuleRun f("aten::log_sigmoid_forward", "");
  f.Tensor("self", {DType::kF32, {8}}, kX);
  f.Out({DType::kF32, {8}});
  f.Out({DType::kF32, {8}});
  auto out = f.Run();
  ExpectNear(out[0],
             {-3.0485873222351074, -0.9740769863128662, -0.6931471824645996, -0.575939416885376,
              -0.12692801654338837, -0.0001234021910931915, -12.000005722045898, NAN});
  ExpectNear(out[1], {0.049787066876888275, 0.6065306663513184, 1.0, 0.7788007855415344,
                      0.1353352814912796, 0.00012340980174485594, 6.1442124206223525e-06, NAN});

  RuleRun b("aten::log_sigmoid_backward", "");
  b.Tensor("grad_output", {DType::kF32, {8}}, {1, 2, -1, 0.5, 1, 1, 3, 1});
  b.Tensor("self", {DType::kF32, {8}}, kX);
  b.Tensor("buffer", {DType::kF32, {0}}, {});  // CUDA-style empty buffer
  b.Out({DType::kF32, {8}});
  ExpectNear(b.Run()[0], {0.9525741338729858, 1.2449185848236084, -0.5, 0.21891175210475922,
                          0.11920291930437088, 0.00012339458044152707, 2.999981641769409, NAN});
}

TEST(SpecialRules, AngleOfReals) {
  ExpectNear(Unary("aten::angle", {-2, 0, 3, NAN, -0.0}), {M_PI, 0, 0, NAN, 0}, 1e-7, 0);
}

TEST(SpecialRules, FrexpIncludingSubnormalsAndSpecials) {
  RuleRun r("aten::frexp", "Tensor");
  r.Tensor("self", {DType::kF32, {8}}, {0, -0.0, 8, -3.5, 1e-40, 0.1, INFINITY, NAN});
  r.Out({DType::kF32, {8}});
  r.Out({DType::kS32, {8}});
  auto out = r.Run();
  ExpectNear(out[0], {0, -0.0, 0.5, -0.875, 0.5444488525390625, 0.800000011920929, INFINITY, NAN},
             0, 0);
  EXPECT_TRUE(std::signbit(out[0][1]));
  EXPECT_EQ(out[1], (Vec{0, 0, 4, 2, -132, -3, 0, 0}));
}

TEST(SpecialRules, BesselFunctions) {
  ExpectNear(Unary("aten::i0", kX),
             {4.880792617797852, 1.063483476638794, 0.9999999403953552, 1.015686273574829,
              2.279585123062134, 1093.58837890625, 18948.92578125, NAN});
  ExpectNear(Unary("aten::special_i0e", kX),
             {0.2430003583431244, 0.6450353264808655, 0.9999999403953552, 0.7910172343254089,
              0.3085083067417145, 0.13495953381061554, 0.11642621457576752, NAN});
  ExpectNear(Unary("aten::special_i1", kX),
             {-3.9533705711364746, -0.25789427757263184, 0.0, 0.12597911059856415,
              1.5906368494033813, 1030.914794921875, -18141.349609375, NAN});
  ExpectNear(Unary("aten::special_i1e", kX),
             {-0.1968267261981964, -0.15642079710960388, 0.0, 0.09811262786388397,
              0.2152692824602127, 0.12722499668598175, -0.11146429926156998, NAN});
}

TEST(SpecialRules, PolygammaIncludingNegativeArguments) {
  const Vec x = {1.5, 2, 0.25, 7, -8.478373527526855, -0.3, 30, -2};
  std::vector<std::pair<int, Vec>> cases = {
      {1,
       {0.934802234172821, 0.6449340581893921, 17.19733238220215, 0.15354517102241516,
        9.804039001464844, 13.945158958435059, 0.033895060420036316, NAN}},
      {2,
       {-0.8287966251373291, -0.4041137993335724, -129.32774353027344, -0.023530473932623863,
        4.226896286010742, 67.63907623291016, -0.0011487652081996202, -INFINITY}},
      {3,
       {1.4090911149978638, 0.4939393997192383, 1538.7821044921875, 0.0071981982327997684,
        198.43621826171875, 766.6198120117188, 7.786003698129207e-05, INFINITY}},
      {4,
       {-3.4742496013641357, -0.8862661123275757, -24584.375, -0.003296771552413702,
        337.0426940917969, 9731.8330078125, -7.914941306808032e-06, -INFINITY}}};
  for (const auto& [n, want] : cases) {
    RuleRun r("aten::polygamma", "");
    r.Int("n", n);
    r.Tensor("self", {DType::kF32, {8}}, x);
    r.Out({DType::kF32, {8}});
    Vec got = r.Run()[0];
    if (n == 1) got.back() = NAN;  // a pole: ATen's float sin(-2 pi) leaves 3e14, not checked
    ExpectNear(got, want, 1e-5, 1e-5);
  }
}

TEST(SpecialRules, KthValue) {
  RuleRun r("aten::kthvalue", "values");
  r.Tensor("self", {DType::kF32, {2, 4}}, {3, 1, 2, 5, 0, -1, 4, -2});
  r.Int("k", 2);
  r.Int("dim", 1);
  r.Bool("keepdim", false);
  r.Out({DType::kF32, {2}});
  r.Out({DType::kS64, {2}});
  auto out = r.Run();
  EXPECT_EQ(out[0], (Vec{2, -1}));
  EXPECT_EQ(out[1], (Vec{2, 1}));
}

TEST(SpecialRules, BucketizeLeftAndRight) {
  for (bool right : {false, true}) {
    RuleRun r("aten::bucketize", "Tensor");
    r.Tensor("self", {DType::kF32, {2, 3}}, {0, 1, 5.5, 7, 9, 3});
    r.Tensor("boundaries", {DType::kF32, {4}}, {1, 3, 5, 7});
    r.Bool("out_int32", true);
    r.Bool("right", right);
    r.Out({DType::kS32, {2, 3}});
    r.Common(DType::kF32);
    EXPECT_EQ(r.Run()[0], right ? (Vec{0, 1, 3, 4, 4, 2}) : (Vec{0, 0, 3, 3, 4, 1}));
  }
}

TEST(SpecialRules, SearchSortedBatchedAndSorter) {
  RuleRun r("aten::searchsorted", "Tensor");
  r.Tensor("sorted_sequence", {DType::kF32, {2, 3}}, {1, 3, 5, 2, 4, 6});
  r.Tensor("self", {DType::kF32, {2, 2}}, {3, 6, 1, 4});
  r.Bool("out_int32", false);
  r.Bool("right", false);
  r.Str("side", "right");
  r.None("sorter");
  r.Out({DType::kS64, {2, 2}});
  r.Common(DType::kF32);
  EXPECT_EQ(r.Run()[0], (Vec{2, 3, 0, 2}));

  RuleRun s("aten::searchsorted", "Tensor");
  s.Tensor("sorted_sequence", {DType::kF32, {3}}, {5, 1, 3});
  s.Tensor("self", {DType::kF32, {2}}, {2, 5});
  s.Bool("right", false);
  s.Tensor("sorter", {DType::kS64, {3}}, {1, 2, 0});
  s.Out({DType::kS64, {2}});
  s.Common(DType::kF32);
  EXPECT_EQ(s.Run()[0], (Vec{1, 2}));
}

TEST(SpecialRules, IsInWithInvertAndNaN) {
  RuleRun r("aten::isin", "Tensor_Tensor");
  r.Tensor("elements", {DType::kS64, {2, 2}}, {1, 2, 3, 4});
  r.Tensor("test_elements", {DType::kS64, {3}}, {2, 3, 9});
  r.Out({DType::kPred, {2, 2}});
  r.Common(DType::kS64);
  EXPECT_EQ(r.Run()[0], (Vec{0, 1, 1, 0}));

  RuleRun s("aten::isin", "Tensor_Scalar");
  s.Tensor("elements", {DType::kF32, {3}}, {1, NAN, 3});
  s.Tensor("test_element", {DType::kF64, {}}, {3});
  s.Bool("invert", true);
  s.Out({DType::kPred, {3}});
  s.Common(DType::kF32);
  EXPECT_EQ(s.Run()[0], (Vec{1, 1, 0}));
}

TEST(SpecialRules, CumMaxAndCumMinHelpers) {
  const Vec x = {1, 3, 3, NAN, 5, 2, 4, 2, 4, 1, 0, 7};
  for (bool is_max : {true, false}) {
    RuleRun r(is_max ? "aten::_cummax_helper" : "aten::_cummin_helper", "");
    r.Tensor("self", {DType::kF32, {2, 6}}, x);
    r.Tensor("values", {DType::kF32, {2, 6}}, Vec(12, 0));
    r.Tensor("indices", {DType::kS64, {2, 6}}, Vec(12, 0));
    r.Int("dim", 1);
    auto out = r.Run();  // no returns: both come back as extra results
    ASSERT_EQ(out.size(), 2u);
    if (is_max) {
      ExpectNear(out[0], {1, 3, 3, NAN, NAN, NAN, 4, 4, 4, 4, 4, 7});
      EXPECT_EQ(out[1], (Vec{0, 1, 2, 3, 3, 3, 0, 0, 2, 2, 2, 5}));
    } else {
      ExpectNear(out[0], {1, 1, 1, NAN, NAN, NAN, 4, 2, 2, 1, 0, 0});
      EXPECT_EQ(out[1], (Vec{0, 0, 0, 3, 3, 3, 0, 1, 1, 3, 4, 4}));
    }
  }
}

TEST(SpecialRules, LinalgCross) {
  RuleRun r("aten::linalg_cross", "");
  r.Tensor("self", {DType::kF32, {2, 3}}, {1, 2, 3, 0, -1, 2});
  r.Tensor("other", {DType::kF32, {2, 3}}, {4, 5, 6, 1, 1, 1});
  r.Int("dim", -1);
  r.Out({DType::kF32, {2, 3}});
  EXPECT_EQ(r.Run()[0], (Vec{-3, 6, -3, -3, 2, 1}));
}

const Vec kX1 = {0, 1, 2, 1, -1, 0.5, 2, 2, 2};
const Vec kX2 = {1, 1, 1, 0, 0, 3};

TEST(SpecialRules, CdistForwardAllNorms) {
  std::vector<std::pair<double, Vec>> cases = {
      {0, {2, 2, 2, 3, 3, 3}},
      {1, {2, 2, 2.5, 4.5, 3, 5}},
      {2,
       {1.4142135381698608, 1.4142135381698608, 2.0615527629852295, 2.872281312942505,
        1.7320507764816284, 3.0}},
      {0.5, {4, 4, 4.499999523162842, 12.824555397033691, 9, 14.656853675842285}},
      {3,
       {1.2599210739135742, 1.2599210739135742, 2.0103628635406494, 2.6024138927459717,
        1.4422495365142822, 2.571281671524048}},
      {INFINITY, {1, 1, 2, 2.5, 1, 2}}};
  for (const auto& [p, want] : cases) {
    for (int64_t mode : {0, 1}) {
      if (mode == 1 && p != 2) continue;
      RuleRun r("aten::_cdist_forward", "");
      r.Tensor("x1", {DType::kF32, {3, 3}}, kX1);
      r.Tensor("x2", {DType::kF32, {2, 3}}, kX2);
      r.Double("p", p);
      r.Int("compute_mode", mode);  // 1: the matmul form
      r.Out({DType::kF32, {3, 2}});
      ExpectNear(r.Run()[0], want, 1e-5, 1e-5);
    }
  }
}

TEST(SpecialRules, CdistBackward) {
  std::vector<std::pair<double, Vec>> cases = {
      {1, {-1, -1, 2, 2, -2.5, -2.5, 2, 2, 0}},
      {2,
       {-0.7071067690849304, -0.7071067690849304, 1.4142135381698608, 0.6963106393814087,
        -1.1813819408416748, -1.862044334411621, 1.2440168857574463, 1.2440168857574463,
        0.24401691555976868}},
      {0.5,
       {-2, -2, 4, 7.162277698516846, -7.912277698516846, -6.029821872711182, 5.707106590270996,
        5.707106590270996, -0.8284270763397217}},
      {3,
       {-0.6299604773521423, -0.6299604773521423, 1.2599209547042847, 0.2953093945980072,
        -0.7901679277420044, -1.8766123056411743, 1.0857572555541992, 1.0857572555541992,
        0.3294980525970459}},
      {INFINITY, {-1, -1, 2, 0, -0.5, -2, 2, 2, 1}}};
  for (const auto& [p, want] : cases) {
    RuleRun f("aten::_cdist_forward", "");
    f.Tensor("x1", {DType::kF32, {3, 3}}, kX1);
    f.Tensor("x2", {DType::kF32, {2, 3}}, kX2);
    f.Double("p", p);
    f.None("compute_mode");
    f.Out({DType::kF32, {3, 2}});
    Vec dist = f.Run()[0];
    RuleRun r("aten::_cdist_backward", "");
    r.Tensor("grad", {DType::kF32, {3, 2}}, {1, -1, 0.5, 2, 1, 1});
    r.Tensor("x1", {DType::kF32, {3, 3}}, kX1);
    r.Tensor("x2", {DType::kF32, {2, 3}}, kX2);
    r.Double("p", p);
    r.Tensor("cdist", {DType::kF32, {3, 2}}, dist);
    r.Out({DType::kF32, {3, 3}});
    ExpectNear(r.Run()[0], want, 1e-5, 1e-5);
  }
}

TEST(SpecialRules, HistcFixedAndDataRange) {
  RuleRun r("aten::histc", "");
  r.Tensor("self", {DType::kF32, {7}}, {1, 2, 1, 4, 10, -1, NAN});
  r.Int("bins", 4);
  r.Tensor("min", {DType::kS64, {}}, {0});
  r.Tensor("max", {DType::kS64, {}}, {4});
  r.Out({DType::kF32, {4}});
  EXPECT_EQ(r.Run()[0], (Vec{0, 2, 1, 1}));

  RuleRun d("aten::histc", "");
  d.Tensor("self", {DType::kF32, {4}}, {1, 2, 1, 4});
  d.Int("bins", 3);
  d.Tensor("min", {DType::kS64, {}}, {0});
  d.Tensor("max", {DType::kS64, {}}, {0});
  d.Out({DType::kF32, {3}});
  EXPECT_EQ(d.Run()[0], (Vec{2, 1, 1}));
}

TEST(SpecialRules, IndexReduceAllModes) {
  std::vector<std::tuple<const char*, bool, Vec>> cases = {
      {"prod", true, {20, -4, 3, 4, 15, 3}},
      {"prod", false, {20, -2, 3, 4, 3, 0.5}},
      {"mean", true, {4.333333492279053, 1, 3, 4, 3, 2.5}},
      {"mean", false, {6, 0.5, 3, 4, 2, 0.75}},
      {"amax", true, {10, 2, 3, 4, 5, 6}},
      {"amax", false, {10, 2, 3, 4, 3, 1}},
      {"amin", true, {1, -1, 3, 4, 1, 0.5}},
      {"amin", false, {2, -1, 3, 4, 1, 0.5}}};
  for (const auto& [reduce, include_self, want] : cases) {
    RuleRun r("aten::index_reduce", "");
    r.Tensor("self", {DType::kF32, {3, 2}}, {1, 2, 3, 4, 5, 6});
    r.Int("dim", 0);
    r.Tensor("index", {DType::kS64, {4}}, {0, 2, 0, 2});
    r.Tensor("source", {DType::kF32, {4, 2}}, {2, 2, 3, 0.5, 10, -1, 1, 1});
    r.Str("reduce", reduce);
    r.Bool("include_self", include_self);
    r.Out({DType::kF32, {3, 2}});
    ExpectNear(r.Run()[0], want);
  }
}

TEST(SpecialRules, SegmentReduceLengths) {
  const Vec data = {1, 2, 3, -4, 5, 6, NAN, 8, 9, 10};
  std::vector<std::tuple<const char*, Vec, Vec>> cases = {
      {"sum", {4, -2, 0, 0, NAN, 24}, {6, 0, 2, 2, NAN, 26}},
      {"max", {3, 2, -INFINITY, -INFINITY, NAN, 10}, {3, 2, 2, 2, NAN, 10}},
      {"mean", {2, -1, NAN, NAN, NAN, 8}, {3, 0, 2, 2, NAN, 8.666666984558105}},
      {"prod", {3, -8, 1, 1, NAN, 480}, {6, -16, 2, 2, NAN, 960}},
      {"min", {1, -4, INFINITY, INFINITY, NAN, 6}, {1, -4, 2, 2, NAN, 2}}};
  for (const auto& [reduce, plain, with_init] : cases) {
    for (bool init : {false, true}) {
      RuleRun r("aten::segment_reduce", "");
      r.Tensor("data", {DType::kF32, {5, 2}}, data);
      r.Str("reduce", reduce);
      r.Tensor("lengths", {DType::kS64, {3}}, {2, 0, 3});
      r.None("indices");
      r.None("offsets");
      r.Int("axis", 0);
      r.Bool("unsafe", false);
      if (init) {
        r.Tensor("initial", {DType::kF64, {}}, {2});
      } else {
        r.None("initial");
      }
      r.Out({DType::kF32, {3, 2}});
      Vec got = r.Run()[0];
      const Vec& want = init ? with_init : plain;
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        if (std::isnan(want[i])) {
          EXPECT_TRUE(std::isnan(got[i])) << reduce << " " << i;
        } else if (got[i] != want[i]) {
          EXPECT_NEAR(got[i], want[i], 1e-5) << reduce << " " << i;
        }
      }
    }
  }
}

TEST(SpecialRules, SegmentReduceAxisOneLengthsAndOffsets) {
  RuleRun r("aten::segment_reduce", "");
  r.Tensor("data", {DType::kF32, {2, 6}}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  r.Str("reduce", "sum");
  r.Tensor("lengths", {DType::kS64, {2, 2}}, {1, 5, 3, 3});
  r.Int("axis", 1);
  r.Out({DType::kF32, {2, 2}});
  EXPECT_EQ(r.Run()[0], (Vec{0, 15, 21, 30}));

  RuleRun o("aten::segment_reduce", "");
  o.Tensor("data", {DType::kF32, {2, 6}}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  o.Str("reduce", "max");
  o.Tensor("offsets", {DType::kS64, {2, 3}}, {0, 2, 6, 0, 0, 4});
  o.Int("axis", 1);
  o.Out({DType::kF32, {2, 2}});
  EXPECT_EQ(o.Run()[0], (Vec{1, 5, -INFINITY, 9}));
}

TEST(SpecialRules, SegmentReduceBackwardTiesAndZeros) {
  const Vec data = {1, 2, 0, 3, 2, 2, 0, 5, 0, 1, 4, -1, 4, 2};
  std::vector<std::tuple<const char*, Vec, Vec>> cases = {
      // Ties: positive grads are split, negative ones are not (ATen's quirk).
      {"max",
       {1, 3, -INFINITY, -INFINITY, 2, 5, 4, 2},
       {1, 0, 0, -2, 0.5, 0, 0, 2, 0, 0, -1, 0, -1, 4}},
      // One zero in a segment: the product of the others; two zeros: 0.
      {"prod", {0, 6, 1, 1, 0, 10, 16, -2}, {0, -6, 1, -4, 0, 10, 0, 4, 0, 20, -4, 8, -4, -4}}};
  for (const auto& [reduce, output, want] : cases) {
    RuleRun r("aten::_segment_reduce_backward", "");
    r.Tensor("grad", {DType::kF32, {4, 2}}, {1, -2, 3, 3, 0.5, 2, -1, 4});
    r.Tensor("output", {DType::kF32, {4, 2}}, output);
    r.Tensor("data", {DType::kF32, {7, 2}}, data);
    r.Str("reduce", reduce);
    r.Tensor("lengths", {DType::kS64, {4}}, {2, 0, 3, 2});
    r.None("offsets");
    r.Int("axis", 0);
    r.None("initial");
    r.Out({DType::kF32, {7, 2}});
    EXPECT_EQ(r.Run()[0], want) << reduce;
  }
}

TEST(SpecialRules, BatchNormWithUpdateReturnsRunningStats) {
  RuleRun r("aten::_batch_norm_with_update", "");
  r.Tensor("input", {DType::kF32, {2, 2, 2}}, {1, 2, 3, 4, 0, -1, 2, 5});
  r.Tensor("weight", {DType::kF32, {2}}, {1, 2});
  r.Tensor("bias", {DType::kF32, {2}}, {0, 1});
  r.Tensor("running_mean", {DType::kF32, {2}}, {0.5, 1});
  r.Tensor("running_var", {DType::kF32, {2}}, {2, 1});
  r.Double("momentum", 0.1);
  r.Double("eps", 1e-5);
  r.Out({DType::kF32, {2, 2, 2}});
  r.Out({DType::kF32, {2}});
  r.Out({DType::kF32, {2}});
  r.Out({DType::kU8, {0}});
  auto out = r.Run();
  ASSERT_EQ(out.size(), 6u);
  ExpectNear(out[0],
             {0.4472118020057678, 1.3416354656219482, 0.1055762767791748, 1.894423484802246,
              -0.4472118020057678, -1.3416354656219482, -1.6832709312438965, 3.6832706928253174});
  ExpectNear(out[1], {0.5, 3.5});
  ExpectNear(out[2], {0.8944236040115356, 0.8944236040115356});
  EXPECT_TRUE(out[3].empty());
  ExpectNear(out[4], {0.5, 1.25});
  ExpectNear(out[5], {1.966666579246521, 1.066666603088379});
}

TEST(SpecialRules, HashTensorXorsBits) {
  RuleRun r("aten::hash_tensor", "");
  r.Tensor("self", {DType::kS64, {2, 2}}, {1, 2, 7, 4});
  r.Ints("dim", {1});
  r.Bool("keepdim", false);
  r.Int("mode", 0);
  r.Out({DType::kU64, {2}});
  EXPECT_EQ(r.Run()[0], (Vec{3, 3}));

  RuleRun f("aten::hash_tensor", "");
  f.Tensor("self", {DType::kF32, {2}}, {1.5, 2});
  f.Ints("dim", {});
  f.Int("mode", 0);
  f.Out({DType::kU64, {}});
  EXPECT_EQ(f.Run()[0], (Vec{9221120237041090560.0}));  // f64 bits 0x7FF8000000000000
}

TEST(SpecialRules, GatherWithEmptyIndexOfHigherRank) {
  RuleRun r("aten::gather", "");
  r.Tensor("self", {DType::kF32, {5}}, {1, 2, 3, 4, 5});
  r.Int("dim", 0);
  r.Tensor("index", {DType::kS64, {2, 0}}, {});
  r.Bool("sparse_grad", false);
  r.Out({DType::kF32, {2, 0}});
  EXPECT_TRUE(r.Run()[0].empty());
}

}  // namespace
}  // namespace tpu::testing
