#include "rule_runner.h"

namespace tpu::testing {
namespace {

using rt::DType;

TEST(ElementwiseRules, AddWithAlphaPromotesInts) {
  RuleRun r("aten::add", "Tensor");
  r.Tensor("self", {DType::kS64, {3}}, {1, 2, 3});
  r.Tensor("other", {DType::kF32, {1}}, {0.5});
  r.Tensor("alpha", {DType::kS64, {}}, {2});
  r.Out({DType::kF32, {3}});
  EXPECT_EQ(r.Run()[0], (std::vector<double>{2, 3, 4}));
}

TEST(ElementwiseRules, FloorDivideOfNegativeInts) {
  RuleRun r("aten::div", "Tensor_mode");
  r.Tensor("self", {DType::kS64, {4}}, {-7, 7, -6, 7});
  r.Tensor("other", {DType::kS64, {4}}, {2, -2, 3, 2});
  r.Str("rounding_mode", "floor");
  r.Out({DType::kS64, {4}});
  EXPECT_EQ(r.Run()[0], (std::vector<double>{-4, -4, -2, 3}));
}

TEST(ElementwiseRules, RemainderTakesDivisorSign) {
  RuleRun r("aten::remainder", "Tensor");
  r.Tensor("self", {DType::kF32, {3}}, {-3, 3, 5});
  r.Tensor("other", {DType::kF32, {3}}, {2, -2, 3});
  r.Out({DType::kF32, {3}});
  EXPECT_EQ(r.Run()[0], (std::vector<double>{1, -1, 2}));
}

TEST(ElementwiseRules, CompareUsesCommonDtype) {
  RuleRun r("aten::lt", "Tensor");
  r.Tensor("self", {DType::kS64, {2}}, {1, 2});
  r.Tensor("other", {DType::kF32, {2}}, {1.5, 1.5});
  r.Out({DType::kPred, {2}});
  r.Common(DType::kF32);
  EXPECT_EQ(r.Run()[0], (std::vector<double>{1, 0}));
}

}  // namespace
}  // namespace tpu::testing
