// torch.histogram (histogram.bin_ct and histogram.bins_tensor). Bin edges come from `range`, else
// from the input's min and max (widened by 0.5 each way when equal; [0, 1] for an empty input),
// spaced as CPU's linspace spaces them. An element's bin is the number of edges at or below it,
// minus one (the last edge closes the last bin), which is what CPU's interpolation with local
// search finds; elements outside the edges and NaNs count nowhere.
#include <cmath>
#include <sstream>
#include <string>

#include "lowering/helpers.h"
#include "lowering/rule_table.h"

namespace tpu::lowering {
namespace {

using V = std::vector<Value>;

Value Full(Ctx& c, double v, DType t, const Dims& d) { return ir::Constant(c.g, v, t, d); }
// A double as CPU prints it in messages (2, 0.5).
std::string FormatDouble(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}
Value Elem(Ctx& c, Value x, int64_t i) {
  return ir::Reshape(c.g, ir::Slice(c.g, x, {i}, {i + 1}), {});
}

// CPU's linspace(lo, hi, bins + 1), through linspace's own rule (runtime scalar endpoints).
Value Edges(Ctx& c, Value lo, Value hi, int64_t bins, DType t) {
  return CallRule(c, "aten::linspace", "",
                  {{"start", ValueArg(lo)}, {"end", ValueArg(hi)}, {"steps", IntArg(bins + 1)}},
                  {Type{t, {bins + 1}}})[0];
}

// hist [bins] of flat x [N] (weights w [N] or -1) over `edges` [bins + 1].
Value Count(Ctx& c, Value x, Value w, Value edges, DType t) {
  const int64_t n = c.T(x).dims[0], bins = c.T(edges).dims[0] - 1;
  Value e = ir::BroadcastInDim(c.g, edges, {n, bins + 1}, {1});
  Value xb = ir::BroadcastInDim(c.g, x, {n, bins + 1}, {0});
  Value below = ir::Convert(c.g, ir::Compare(c.g, e, xb, "LE"), DType::kS64);
  Value pos = ir::Reduce(c.g, below, ir::Constant(c.g, 0, DType::kS64), {1}, "stablehlo.add");
  pos = ir::Binary(c.g, "stablehlo.subtract", pos, Full(c, 1, DType::kS64, {n}));
  Value lo = ir::BroadcastInDim(c.g, Elem(c, edges, 0), {n}, {});
  Value hi = ir::BroadcastInDim(c.g, Elem(c, edges, bins), {n}, {});
  pos = ir::Select(c.g, ir::Compare(c.g, x, hi, "EQ"), Full(c, bins - 1, DType::kS64, {n}), pos);
  Value inside = ir::Binary(c.g, "stablehlo.and", ir::Compare(c.g, x, lo, "GE"),
                            ir::Compare(c.g, x, hi, "LE"));
  pos = ir::Select(c.g, inside, pos, Full(c, static_cast<double>(bins), DType::kS64, {n}));
  Value ones = w < 0 ? Full(c, 1, t, {n}) : w;
  return ir::Scatter(c.g, Full(c, 0, t, {bins}), AsVector(c, pos), ones, {0}, 0,
                     ir::ScalarRegion(t, "stablehlo.add"));
}

// density: hist / (sum(hist) * bin widths).
Value Density(Ctx& c, Value hist, Value edges) {
  const Type t = c.T(hist);
  const int64_t bins = t.dims[0];
  Value widths = ir::Binary(c.g, "stablehlo.subtract", ir::Slice(c.g, edges, {1}, {bins + 1}),
                            ir::Slice(c.g, edges, {0}, {bins}));
  Value total = ir::Reduce(c.g, hist, ir::Constant(c.g, 0, t.dtype), {0}, "stablehlo.add");
  return ir::Binary(
      c.g, "stablehlo.divide", hist,
      ir::Binary(c.g, "stablehlo.multiply", ir::BroadcastInDim(c.g, total, t.dims, {}), widths));
}

V Finish(Ctx& c, Value x, Value edges, DType t) {
  Value w = c.Has("weight") ? ir::Reshape(c.g, Cast(c, c.In("weight"), t), {c.T(x).dims[0]}) : -1;
  Value hist = Count(c, x, w, edges, t);
  if (c.Bool("density", false)) hist = Density(c, hist, edges);
  return {Cast(c, hist, c.out[0].dtype), Cast(c, edges, c.out[1].dtype)};
}

V HistogramBinCount(Ctx& c) {
  const DType t = AccOf(c.out[0].dtype);
  const int64_t bins = c.out[0].dims[0];
  Value x = Cast(c, c.In("self"), t);
  const int64_t n = c.T(x).numel();
  x = ir::Reshape(c.g, x, {n});
  Value lo, hi;
  if (c.Has("range")) {
    std::vector<double> r = c.Doubles("range");
    if (r.size() != 2) throw ArgError("torch.histogram(): range should have 2 elements");
    if (r[0] > r[1]) {
      throw ArgError("torch.histogramdd: min should not exceed max, but got min " +
                     FormatDouble(r[0]) + " max " + FormatDouble(r[1]) + " for dimension 0");
    }
    lo = ir::Constant(c.g, r[0], t), hi = ir::Constant(c.g, r[1], t);
  } else if (n == 0) {
    lo = ir::Constant(c.g, 0, t), hi = ir::Constant(c.g, 1, t);
  } else {
    lo = ir::Reduce(c.g, x, ir::Constant(c.g, INFINITY, t), {0}, "stablehlo.minimum");
    hi = ir::Reduce(c.g, x, ir::Constant(c.g, -INFINITY, t), {0}, "stablehlo.maximum");
  }
  auto is_finite = [&](Value v) { return c.g.Op1("stablehlo.is_finite", {v}, {DType::kPred, {}}); };
  Value finite = ir::Binary(c.g, "stablehlo.and", is_finite(lo), is_finite(hi));
  if (!c.Has("range") && n > 0) {  // XLA's min and max may skip NaNs; CPU's range would be NaN
    Value nan = ir::Reduce(c.g, ir::Compare(c.g, x, x, "NE"), ir::Constant(c.g, 0, DType::kPred),
                           {0}, "stablehlo.or");
    finite = ir::Binary(c.g, "stablehlo.and", finite, ir::Unary(c.g, "stablehlo.not", nan));
  }
  Expect(c, finite, -1, "RuntimeError", "torch.histogramdd: dimension 0's range is not finite");
  Value same = ir::Compare(c.g, lo, hi, "EQ");
  Value half = ir::Constant(c.g, 0.5, t);
  lo = ir::Select(c.g, same, ir::Binary(c.g, "stablehlo.subtract", lo, half), lo);
  hi = ir::Select(c.g, same, ir::Binary(c.g, "stablehlo.add", hi, half), hi);
  return Finish(c, x, Edges(c, lo, hi, bins, t), t);
}

V HistogramBinEdges(Ctx& c) {
  const DType t = AccOf(c.out[0].dtype);
  Value x = Cast(c, c.In("self"), t);
  x = ir::Reshape(c.g, x, {c.T(x).numel()});
  Value edges = Cast(c, c.In("bins"), t);
  return Finish(c, x, ir::Reshape(c.g, edges, {c.T(edges).numel()}), t);
}

}  // namespace

void AddHistogramRules(RuleMap& m) {
  m["aten::histogram.bin_ct"] = HistogramBinCount;
  m["aten::histogram.bins_tensor"] = HistogramBinEdges;
}

}  // namespace tpu::lowering
