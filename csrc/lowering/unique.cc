#include "lowering/unique.h"

#include "lowering/helpers.h"

namespace tpu::lowering {
namespace {

Value S64(Graph& g, double v, const Dims& dims = {}) {
  return ir::Constant(g, v, DType::kS64, dims);
}

// Column c of x's rows taken in the order perm.
Value Column(Graph& g, Value x, Value perm, int64_t c) {
  const Type& t = g.type(x);
  int64_t m = t.dims[0];
  Value col = ir::Reshape(g, ir::Slice(g, x, {0, c}, {m, c + 1}), {m});
  return ir::Gather(g, col, ir::Reshape(g, perm, {m, 1}), {0}, 0);
}

// Inclusive prefix sum of an s64 vector.
Value CumSum(Graph& g, Value v) {
  Ctx c{g, {}, {}};
  return CallRule(c, "aten::cumsum", "", {{"self", ValueArg(v)}, {"dim", IntArg(0)}},
                  {g.type(v)})[0];
}

}  // namespace

UniqueGroups GroupRows(Graph& g, Value x, bool sort) {
  const Type t = g.type(x);
  const int64_t m = t.dims[0], r = t.dims[1];
  Value perm = ir::Iota(g, {DType::kS64, {m}}, 0);
  if (sort) {
    // Stable sorts by the last column first: the rows end in lexicographic order.
    for (int64_t c = r - 1; c >= 0; --c) {
      Value key = Column(g, x, perm, c);
      perm = g.Op("stablehlo.sort", {key, perm}, {g.type(key), g.type(perm)},
                  "dimension = 0 : i64, is_stable = true", {SortComparator(t.dtype, false)})[1];
    }
  }
  Value rows = ir::Gather(g, x, ir::Reshape(g, perm, {m, 1}), {0}, 0);
  Value first = ir::Constant(g, 1, DType::kPred, {m});
  if (m > 1) {
    Value a = ir::Slice(g, rows, {1, 0}, {m, r}), b = ir::Slice(g, rows, {0, 0}, {m - 1, r});
    Value differs = ir::Reduce(g, ir::Compare(g, a, b, "NE"), ir::Constant(g, 0, DType::kPred), {1},
                               "stablehlo.or");
    first = ir::Concat(g, {ir::Constant(g, 1, DType::kPred, {1}), differs}, 0);
  }
  return {rows, perm, first};
}

Value GroupCount(Graph& g, const UniqueGroups& u) {
  return ir::Reduce(g, ir::Convert(g, u.first, DType::kS64), S64(g, 0), {0}, "stablehlo.add");
}

std::vector<Value> GroupResults(Graph& g, const UniqueGroups& u, int64_t k) {
  const Type t = g.type(u.rows);
  const int64_t m = t.dims[0], r = t.dims[1];
  Value group = ir::Binary(g, "stablehlo.subtract", CumSum(g, ir::Convert(g, u.first, DType::kS64)),
                           S64(g, 1, {m}));
  Value at = ir::Reshape(g, group, {m, 1});
  Value values = ir::Scatter(g, ir::Constant(g, 0, t.dtype, {k, r}), at, u.rows, {0}, 0,
                             ir::OverwriteRegion(t.dtype));
  Value inverse = ir::Scatter(g, S64(g, 0, {m}), ir::Reshape(g, u.perm, {m, 1}), group, {0}, 0,
                              ir::OverwriteRegion(DType::kS64));
  auto add = std::make_shared<Graph>();
  {
    Value a = add->Param({DType::kS64, {}}), b = add->Param({DType::kS64, {}});
    add->results = {ir::Binary(*add, "stablehlo.add", a, b)};
  }
  Value counts = ir::Scatter(g, S64(g, 0, {k}), at, S64(g, 1, {m}), {0}, 0, add);
  return {values, inverse, counts};
}

}  // namespace tpu::lowering
