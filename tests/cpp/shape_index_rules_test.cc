#include <cmath>

#include "rule_runner.h"

namespace tpu::testing {
namespace {

using rt::DType;
using D = std::vector<double>;

// A Tensor[] / Tensor?[] argument; `None` entries are passed as an empty type with no values.
void List(RuleRun& r, const std::string& arg, const std::vector<std::pair<ir::Type, D>>& items) {
  Arg a;
  a.kind = Arg::Kind::kValues;
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].first.dtype == DType::kInvalid) {
      a.values.push_back(-1);
    } else {
      a.values.push_back(r.Tensor(arg + std::to_string(i), items[i].first, items[i].second));
    }
  }
  r.ctx().args.emplace_back(arg, a);
}

const ir::Type kNone{DType::kInvalid, {}};

TEST(ShapeIndexRules, CatMixedDtypesSkipsLegacyEmpty) {
  RuleRun r("aten::cat", "");
  List(r, "tensors",
       {{{DType::kS64, {1, 2}}, {1, 2}},
        {{DType::kF32, {0}}, {}},
        {{DType::kF32, {1, 2}}, {0.5, 1.5}}});
  r.Int("dim", -2);
  r.Out({DType::kF32, {2, 2}});
  EXPECT_EQ(r.Run()[0], (D{1, 2, 0.5, 1.5}));
}

TEST(ShapeIndexRules, RollAndRepeat) {
  RuleRun r("aten::roll", "");
  r.Tensor("self", {DType::kF32, {2, 3}}, {1, 2, 3, 4, 5, 6});
  r.Ints("shifts", {-1});
  r.Ints("dims", {1});
  r.Out({DType::kF32, {2, 3}});
  EXPECT_EQ(r.Run()[0], (D{2, 3, 1, 5, 6, 4}));
  RuleRun p("aten::repeat", "");
  p.Tensor("self", {DType::kF32, {2}}, {1, 2});
  p.Ints("repeats", {2, 2});
  p.Out({DType::kF32, {2, 4}});
  EXPECT_EQ(p.Run()[0], (D{1, 2, 1, 2, 1, 2, 1, 2}));
}

TEST(ShapeIndexRules, ReflectionPadAndBackward) {
  RuleRun r("aten::reflection_pad1d", "");
  r.Tensor("self", {DType::kF32, {1, 3}}, {1, 2, 3});
  r.Ints("padding", {2, 1});
  r.Out({DType::kF32, {1, 6}});
  EXPECT_EQ(r.Run()[0], (D{3, 2, 1, 2, 3, 2}));
  RuleRun b("aten::reflection_pad1d_backward", "");
  b.Tensor("grad_output", {DType::kF32, {1, 6}}, {1, 1, 1, 1, 1, 1});
  b.Tensor("self", {DType::kF32, {1, 3}}, {0, 0, 0});
  b.Ints("padding", {2, 1});
  b.Out({DType::kF32, {1, 3}});
  EXPECT_EQ(b.Run()[0], (D{1, 3, 2}));
}

TEST(ShapeIndexRules, TriuWithOffset) {
  RuleRun r("aten::triu", "");
  r.Tensor("self", {DType::kF32, {3, 3}}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  r.Int("diagonal", -1);
  r.Out({DType::kF32, {3, 3}});
  EXPECT_EQ(r.Run()[0], (D{1, 2, 3, 4, 5, 6, 0, 8, 9}));
}

TEST(ShapeIndexRules, GatherWrapsNegativeIndex) {
  RuleRun r("aten::gather", "");
  r.Tensor("self", {DType::kF32, {2, 3}}, {1, 2, 3, 4, 5, 6});
  r.Int("dim", 1);
  r.Tensor("index", {DType::kS64, {2, 2}}, {-1, 0, 1, 1});
  r.Out({DType::kF32, {2, 2}});
  EXPECT_EQ(r.Run()[0], (D{3, 1, 5, 5}));
}

TEST(ShapeIndexRules, ScatterOverwriteAndAdd) {
  RuleRun r("aten::scatter", "src");
  r.Tensor("self", {DType::kF32, {2, 3}}, {0, 0, 0, 0, 0, 0});
  r.Int("dim", 0);
  r.Tensor("index", {DType::kS64, {1, 3}}, {1, 0, 1});
  r.Tensor("src", {DType::kF32, {2, 3}}, {7, 8, 9, 10, 11, 12});  // larger than index
  r.Out({DType::kF32, {2, 3}});
  EXPECT_EQ(r.Run()[0], (D{0, 8, 0, 7, 0, 9}));
  RuleRun a("aten::scatter_add", "");
  a.Tensor("self", {DType::kF32, {3}}, {1, 1, 1});
  a.Int("dim", 0);
  a.Tensor("index", {DType::kS64, {4}}, {0, 0, 2, 0});
  a.Tensor("src", {DType::kF32, {4}}, {1, 2, 3, 4});
  a.Out({DType::kF32, {3}});
  EXPECT_EQ(a.Run()[0], (D{8, 1, 4}));
}

TEST(ShapeIndexRules, ScatterReduceMeanExcludingSelf) {
  RuleRun r("aten::scatter_reduce", "two");
  r.Tensor("self", {DType::kS64, {3}}, {5, 5, 5});
  r.Int("dim", 0);
  r.Tensor("index", {DType::kS64, {3}}, {0, 0, 1});
  r.Tensor("src", {DType::kS64, {3}}, {-1, -2, 4});
  r.Str("reduce", "mean");
  r.Bool("include_self", false);
  r.Out({DType::kS64, {3}});
  EXPECT_EQ(r.Run()[0], (D{-2, 4, 5}));  // floor(-3 / 2) = -2
}

TEST(ShapeIndexRules, AdvancedIndexWithGapGoesFirst) {
  // x[[0, -1], :, [1, 0]] on a 2x2x2 tensor: index dims not adjacent -> batch dim first.
  RuleRun r("aten::index", "Tensor");
  r.Tensor("self", {DType::kF32, {2, 2, 2}}, {0, 1, 2, 3, 4, 5, 6, 7});
  List(r, "indices", {{{DType::kS64, {2}}, {0, -1}}, {kNone, {}}, {{DType::kS64, {2}}, {1, 0}}});
  r.Out({DType::kF32, {2, 2}});
  EXPECT_EQ(r.Run()[0], (D{1, 3, 4, 6}));
}

TEST(ShapeIndexRules, AdvancedIndexAdjacentBroadcast) {
  // x[:, [[0], [1]], [0, 1]] on 1x2x2: indices broadcast to 2x2, placed at dim 1.
  RuleRun r("aten::index", "Tensor");
  r.Tensor("self", {DType::kF32, {1, 2, 2}}, {0, 1, 2, 3});
  List(r, "indices", {{kNone, {}}, {{DType::kS64, {2, 1}}, {0, 1}}, {{DType::kS64, {2}}, {0, 1}}});
  r.Out({DType::kF32, {1, 2, 2}});
  EXPECT_EQ(r.Run()[0], (D{0, 1, 2, 3}));
}

TEST(ShapeIndexRules, IndexPutAccumulatesDuplicates) {
  RuleRun r("aten::index_put", "");
  r.Tensor("self", {DType::kF32, {3, 2}}, {0, 0, 0, 0, 0, 0});
  List(r, "indices", {{{DType::kS64, {3}}, {-1, 2, 0}}});
  r.Tensor("values", {DType::kF32, {2}}, {1, 10});  // broadcast over the indexed rows
  r.Bool("accumulate", true);
  r.Out({DType::kF32, {3, 2}});
  EXPECT_EQ(r.Run()[0], (D{1, 10, 0, 0, 2, 20}));
}

TEST(ShapeIndexRules, IndexSelectAndIndexAdd) {
  RuleRun r("aten::index_select", "");
  r.Tensor("self", {DType::kF32, {2, 3}}, {1, 2, 3, 4, 5, 6});
  r.Int("dim", 1);
  r.Tensor("index", {DType::kS64, {2}}, {2, 0});
  r.Out({DType::kF32, {2, 2}});
  EXPECT_EQ(r.Run()[0], (D{3, 1, 6, 4}));
  RuleRun a("aten::index_add", "");
  a.Tensor("self", {DType::kF32, {2, 2}}, {1, 1, 1, 1});
  a.Int("dim", 1);
  a.Tensor("index", {DType::kS64, {3}}, {1, 1, 0});
  a.Tensor("source", {DType::kF32, {2, 3}}, {1, 2, 3, 4, 5, 6});
  a.Tensor("alpha", {DType::kS64, {}}, {2});
  a.Out({DType::kF32, {2, 2}});
  EXPECT_EQ(a.Run()[0], (D{7, 7, 13, 19}));
}

TEST(ShapeIndexRules, EmbeddingBackwardSkipsPadding) {
  RuleRun r("aten::embedding_dense_backward", "");
  r.Tensor("grad_output", {DType::kF32, {3, 2}}, {1, 2, 3, 4, 5, 6});
  r.Tensor("indices", {DType::kS64, {3}}, {1, 0, 1});
  r.Int("num_weights", 3);
  r.Int("padding_idx", 0);
  r.Bool("scale_grad_by_freq", true);
  r.Out({DType::kF32, {3, 2}});
  EXPECT_EQ(r.Run()[0], (D{0, 0, 3, 4, 0, 0}));
}

TEST(ShapeIndexRules, SortIsStableWithNanLast) {
  RuleRun r("aten::sort", "stable");
  r.Tensor("self", {DType::kF32, {5}}, {2, NAN, 1, 2, -1});
  r.Bool("stable", true);
  r.Int("dim", 0);
  r.Bool("descending", false);
  r.Out({DType::kF32, {5}});
  r.Out({DType::kS64, {5}});
  auto out = r.Run();
  EXPECT_EQ(out[1], (D{4, 2, 0, 3, 1}));
  EXPECT_TRUE(std::isnan(out[0][4]));
  RuleRun d("aten::sort", "stable");
  d.Tensor("self", {DType::kF32, {5}}, {2, NAN, 1, 2, -1});
  d.Bool("stable", true);
  d.Int("dim", 0);
  d.Bool("descending", true);
  d.Out({DType::kF32, {5}});
  d.Out({DType::kS64, {5}});
  EXPECT_EQ(d.Run()[1], (D{1, 0, 3, 2, 4}));
}

TEST(ShapeIndexRules, TopK) {
  RuleRun r("aten::topk", "");
  r.Tensor("self", {DType::kF32, {2, 3}}, {1, 3, 2, 6, 5, 4});
  r.Int("k", 2);
  r.Int("dim", -1);
  r.Bool("largest", false);
  r.Bool("sorted", true);
  r.Out({DType::kF32, {2, 2}});
  r.Out({DType::kS64, {2, 2}});
  auto out = r.Run();
  EXPECT_EQ(out[0], (D{1, 2, 4, 5}));
  EXPECT_EQ(out[1], (D{0, 2, 2, 1}));
}

TEST(ShapeIndexRules, UnfoldBackwardOverlapping) {
  // x.unfold(0, 2, 1) on 3 elements: windows [0,1], [1,2].
  RuleRun r("aten::unfold_backward", "");
  r.Tensor("grad_in", {DType::kF32, {2, 2}}, {1, 2, 3, 4});
  r.Ints("input_sizes", {3});
  r.Int("dim", 0);
  r.Int("size", 2);
  r.Int("step", 1);
  r.Out({DType::kF32, {3}});
  EXPECT_EQ(r.Run()[0], (D{1, 5, 4}));
}

TEST(ShapeIndexRules, DiagonalFamily) {
  RuleRun e("aten::diag_embed", "");
  e.Tensor("self", {DType::kF32, {2}}, {1, 2});
  e.Int("offset", 1);
  e.Int("dim1", -2);
  e.Int("dim2", -1);
  e.Out({DType::kF32, {3, 3}});
  EXPECT_EQ(e.Run()[0], (D{0, 1, 0, 0, 0, 2, 0, 0, 0}));
  RuleRun d("aten::diagonal_copy", "");
  d.Tensor("self", {DType::kF32, {2, 3}}, {1, 2, 3, 4, 5, 6});
  d.Int("offset", -1);
  d.Int("dim1", 1);
  d.Int("dim2", 0);
  d.Out({DType::kF32, {2}});
  EXPECT_EQ(d.Run()[0], (D{2, 6}));
}

TEST(ShapeIndexRules, MaskedScatterAndBackward) {
  RuleRun r("aten::masked_scatter", "");
  r.Tensor("self", {DType::kF32, {2, 2}}, {0, 0, 0, 0});
  r.Tensor("mask", {DType::kPred, {2}}, {0, 1});  // broadcast over rows
  r.Tensor("source", {DType::kF32, {5}}, {7, 8, 9, 10, 11});
  r.Out({DType::kF32, {2, 2}});
  EXPECT_EQ(r.Run()[0], (D{0, 7, 0, 8}));
  RuleRun b("aten::masked_scatter_backward", "");
  b.Tensor("grad_output", {DType::kF32, {2, 2}}, {1, 2, 3, 4});
  b.Tensor("mask", {DType::kPred, {2}}, {0, 1});
  b.Ints("sizes", {5});
  b.Out({DType::kF32, {5}});
  EXPECT_EQ(b.Run()[0], (D{2, 4, 0, 0, 0}));
}

}  // namespace
}  // namespace tpu::testing
