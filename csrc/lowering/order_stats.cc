// Order statistics along a dim: median, nanmedian (a stable sort, then the middle entry) and mode
// (counts of equal entries). Ties resolve as ATen's CPU kernels do: median takes the first of
// equal values in the input, mode the smallest most frequent value at its last position.
#include <cmath>
#include <numeric>

#include "lowering/helpers.h"
#include "lowering/rule_table.h"

namespace tpu::lowering {
namespace {

using V = std::vector<Value>;

// x broadcast back along `dim`, which a reduction removed.
Value Along(Ctx& c, Value x, const Dims& full, int64_t dim) {
  Dims map;
  for (int64_t i = 0; i < static_cast<int64_t>(full.size()); ++i) {
    if (i != dim) map.push_back(i);
  }
  return ir::BroadcastInDim(c.g, x, full, map);
}
Value S64(Ctx& c, double v, const Dims& dims) { return ir::Constant(c.g, v, DType::kS64, dims); }

// The input as a rank >= 1 value and the dim to reduce: the whole tensor flattened when the
// op has no dim (median()).
std::pair<Value, int64_t> Operand(Ctx& c) {
  Value x = c.In("self");
  const Type& t = c.T(x);
  if (!c.Has("dim")) return {ir::Reshape(c.g, x, {t.numel()}), 0};
  if (t.rank() == 0) return {ir::Reshape(c.g, x, {1}), 0};
  return {x, ir::WrapDim(c.Int("dim"), t.rank())};
}

// median and nanmedian: the entry at `pos` of the stable ascending sort (NaN sorts last).
// median takes the first NaN where there is one; nanmedian the middle of the numbers.
V Median(Ctx& c, bool skip_nan) {
  auto [x, dim] = Operand(c);
  const Type t = c.T(x);
  const int64_t n = t.dims[dim];
  V s = CallRule(c, "aten::sort", "stable",
                 {{"self", ValueArg(x)},
                  {"stable", BoolArg(true)},
                  {"dim", IntArg(dim)},
                  {"descending", BoolArg(false)}},
                 {t, Type{DType::kS64, t.dims}});
  Dims red = t.dims;
  red.erase(red.begin() + dim);
  Value nans = S64(c, 0, red);
  if (rt::IsFloat(t.dtype))
    nans = SumDim(c, ir::Convert(c.g, ir::Compare(c.g, x, x, "NE"), DType::kS64), dim);
  Value count = ir::Binary(c.g, "stablehlo.subtract", S64(c, static_cast<double>(n), red), nans);
  Value pos;
  if (skip_nan) {
    // (count - 1) / 2, truncated: 0 when every entry is NaN.
    pos = ir::Binary(c.g, "stablehlo.divide",
                     ir::Binary(c.g, "stablehlo.subtract", count, S64(c, 1, red)), S64(c, 2, red));
  } else {
    pos = ir::Select(c.g, ir::Compare(c.g, nans, S64(c, 0, red), "GT"), count,
                     S64(c, static_cast<double>((n - 1) / 2), red));
  }
  Value at =
      ir::Compare(c.g, ir::Iota(c.g, {DType::kS64, t.dims}, dim), Along(c, pos, t.dims, dim), "EQ");
  auto pick = [&](Value v) {
    Value zero = ir::Constant(c.g, 0, c.T(v).dtype, t.dims);
    return ir::Reshape(c.g, SumDim(c, ir::Select(c.g, at, v, zero), dim), c.out[0].dims);
  };
  if (c.out.size() == 1) return {pick(s[0])};
  return {pick(s[0]), ir::Reshape(c.g, pick(s[1]), c.out[1].dims)};
}

// mode: per entry, how many entries equal it; among the most frequent the smallest value; its
// last position. Quadratic in the dim's size (an [..., n, n] comparison).
V Mode(Ctx& c) {
  auto [x, dim] = Operand(c);
  DType out_t = c.T(x).dtype;
  if (out_t == DType::kPred) x = ir::Convert(c.g, x, DType::kS8);
  // The reduced dim last.
  Dims perm(c.T(x).rank());
  std::iota(perm.begin(), perm.end(), 0);
  perm.erase(perm.begin() + dim);
  perm.push_back(dim);
  x = ir::Transpose(c.g, x, perm);
  const Type t = c.T(x);
  const int64_t r = t.rank(), n = t.dims.back();
  Dims sq = t.dims;
  sq.push_back(n);
  Dims lead(r - 1);
  std::iota(lead.begin(), lead.end(), 0);
  Dims map_i = lead, map_j = lead;
  map_i.push_back(r - 1);
  map_j.push_back(r);
  Value xi = ir::BroadcastInDim(c.g, x, sq, map_i), xj = ir::BroadcastInDim(c.g, x, sq, map_j);
  Value counts = SumDim(c, ir::Convert(c.g, ir::Compare(c.g, xi, xj, "EQ"), DType::kS64), r);
  Value best = ir::Reduce(c.g, counts, S64(c, 0, {}), {r - 1}, "stablehlo.maximum");
  Value top = ir::Compare(c.g, counts, Along(c, best, t.dims, r - 1), "EQ");
  if (rt::IsFloat(t.dtype)) {
    top = ir::Binary(c.g, "stablehlo.and", top,
                     ir::Unary(c.g, "stablehlo.not", ir::Compare(c.g, x, x, "NE")));
  }
  Value high = ir::Constant(c.g, HighestOf(t.dtype), t.dtype, t.dims);
  Value value =
      ir::Reduce(c.g, ir::Select(c.g, top, x, high), ir::Constant(c.g, HighestOf(t.dtype), t.dtype),
                 {r - 1}, "stablehlo.minimum");
  if (rt::IsFloat(t.dtype)) {
    // Only NaNs: the mode is NaN.
    Value any = ir::Reduce(c.g, ir::Convert(c.g, top, DType::kS64), S64(c, 0, {}), {r - 1},
                           "stablehlo.add");
    Dims vd = c.T(value).dims;
    value = ir::Select(c.g, ir::Compare(c.g, any, S64(c, 0, vd), "EQ"),
                       ir::Constant(c.g, NAN, t.dtype, vd), value);
  }
  Value same = ir::Compare(c.g, x, Along(c, value, t.dims, r - 1), "EQ");
  Value iota = ir::Iota(c.g, {DType::kS64, t.dims}, r - 1);
  Value last = ir::Reduce(c.g, ir::Select(c.g, same, iota, S64(c, -1, t.dims)), S64(c, -1, {}),
                          {r - 1}, "stablehlo.maximum");
  if (rt::IsFloat(t.dtype)) {
    // A NaN mode sits at the last NaN.
    Value nan_at =
        ir::Reduce(c.g, ir::Select(c.g, ir::Compare(c.g, x, x, "NE"), iota, S64(c, -1, t.dims)),
                   S64(c, -1, {}), {r - 1}, "stablehlo.maximum");
    last = ir::Select(c.g, ir::Compare(c.g, value, value, "NE"), nan_at, last);
  }
  return {ir::Reshape(c.g, ir::Convert(c.g, value, out_t), c.out[0].dims),
          ir::Reshape(c.g, last, c.out[1].dims)};
}

}  // namespace

void AddOrderStatRules(RuleMap& m) {
  m["aten::median"] = +[](Ctx& c) { return Median(c, false); };
  m["aten::nanmedian"] = +[](Ctx& c) { return Median(c, true); };
  m["aten::mode"] = Mode;
}

}  // namespace tpu::lowering
