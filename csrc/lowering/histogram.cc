// torch.histogram and torch.histogramdd (histogram.bin_ct, histogram.bins_tensor,
// _histogramdd_bin_edges, _histogramdd_from_bin_cts, _histogramdd_from_bin_tensors). A dim's bin
// edges come from `range`, else from its coordinates' min and max (widened by 0.5 each way when
// equal; [0, 1] for no points), spaced by linspace's own rule as CPU spaces them. A coordinate's
// bin is the number of edges at or below it, minus one (the last edge closes the last bin), which
// is what CPU's interpolation with local search finds; points outside the edges and NaNs count
// nowhere.
#include <cmath>
#include <sstream>
#include <string>

#include "lowering/helpers.h"
#include "lowering/rule_table.h"

namespace tpu::lowering {
namespace {

using V = std::vector<Value>;

Value Elem(Ctx& c, Value x, int64_t i) {
  return ir::Reshape(c.g, ir::Slice(c.g, x, {i}, {i + 1}), {});
}
// A double as CPU prints it in messages (2, 0.5).
std::string FormatDouble(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

// The points as [N, D] (the last dim holds a point's coordinates; 1 for torch.histogram).
Value Points(Ctx& c, int64_t dims, DType t) {
  Value x = Cast(c, c.In("self"), t);
  const int64_t n = dims == 0 ? 0 : c.T(x).numel() / dims;
  return ir::Reshape(c.g, x, {n, dims});
}
Value Column(Ctx& c, Value pts, int64_t k) {
  const int64_t n = c.T(pts).dims[0];
  return ir::Reshape(c.g, ir::Slice(c.g, pts, {0, k}, {n, k + 1}), {n});
}

// Dim k's bins + 1 edges: from range[2k], range[2k + 1] when given, else from the column's values.
Value ColumnEdges(Ctx& c, Value col, int64_t k, int64_t bins, const std::vector<double>& range,
                  DType t) {
  const int64_t n = c.T(col).dims[0];
  Value lo, hi;
  if (!range.empty()) {
    const double a = range[2 * k], b = range[2 * k + 1];
    if (a > b) {
      throw ArgError("torch.histogramdd: min should not exceed max, but got min " +
                     FormatDouble(a) + " max " + FormatDouble(b) + " for dimension " +
                     std::to_string(k));
    }
    lo = ir::Constant(c.g, a, t), hi = ir::Constant(c.g, b, t);
  } else if (n == 0) {
    lo = ir::Constant(c.g, 0, t), hi = ir::Constant(c.g, 1, t);
  } else {
    lo = ir::Reduce(c.g, col, ir::Constant(c.g, INFINITY, t), {0}, "stablehlo.minimum");
    hi = ir::Reduce(c.g, col, ir::Constant(c.g, -INFINITY, t), {0}, "stablehlo.maximum");
  }
  auto is_finite = [&](Value v) { return c.g.Op1("stablehlo.is_finite", {v}, {DType::kPred, {}}); };
  Value finite = ir::Binary(c.g, "stablehlo.and", is_finite(lo), is_finite(hi));
  if (range.empty() && n > 0) {  // XLA's min and max may skip NaNs; CPU's range would be NaN
    Value nan = ir::Reduce(c.g, ir::Compare(c.g, col, col, "NE"),
                           ir::Constant(c.g, 0, DType::kPred), {0}, "stablehlo.or");
    finite = ir::Binary(c.g, "stablehlo.and", finite, ir::Unary(c.g, "stablehlo.not", nan));
  }
  Expect(c, finite, -1, "RuntimeError",
         "torch.histogramdd: dimension " + std::to_string(k) + "'s range is not finite");
  Value same = ir::Compare(c.g, lo, hi, "EQ");
  Value half = ir::Constant(c.g, 0.5, t);
  lo = ir::Select(c.g, same, ir::Binary(c.g, "stablehlo.subtract", lo, half), lo);
  hi = ir::Select(c.g, same, ir::Binary(c.g, "stablehlo.add", hi, half), hi);
  return CallRule(c, "aten::linspace", "",
                  {{"start", ValueArg(lo)}, {"end", ValueArg(hi)}, {"steps", IntArg(bins + 1)}},
                  {Type{t, {bins + 1}}})[0];
}

// Each point's bin along one dim (s64 [N]) and whether it lies within the edges.
std::pair<Value, Value> Bins(Ctx& c, Value col, Value edges) {
  const int64_t n = c.T(col).dims[0], bins = c.T(edges).dims[0] - 1;
  Value e = ir::BroadcastInDim(c.g, edges, {n, bins + 1}, {1});
  Value xb = ir::BroadcastInDim(c.g, col, {n, bins + 1}, {0});
  Value below = ir::Convert(c.g, ir::Compare(c.g, e, xb, "LE"), DType::kS64);
  Value pos = ir::Reduce(c.g, below, ir::Constant(c.g, 0, DType::kS64), {1}, "stablehlo.add");
  pos = ir::Binary(c.g, "stablehlo.subtract", pos, ir::Constant(c.g, 1, DType::kS64, {n}));
  Value lo = ir::BroadcastInDim(c.g, Elem(c, edges, 0), {n}, {});
  Value hi = ir::BroadcastInDim(c.g, Elem(c, edges, bins), {n}, {});
  pos = ir::Select(c.g, ir::Compare(c.g, col, hi, "EQ"),
                   ir::Constant(c.g, bins - 1, DType::kS64, {n}), pos);
  Value inside = ir::Binary(c.g, "stablehlo.and", ir::Compare(c.g, col, lo, "GE"),
                            ir::Compare(c.g, col, hi, "LE"));
  return {pos, inside};
}

// The histogram [bins_0, ..., bins_{D-1}] of the points over each dim's edges, weighted and
// normalized as the arguments ask.
Value Hist(Ctx& c, Value pts, const V& edges, DType t) {
  const int64_t n = c.T(pts).dims[0], dims = static_cast<int64_t>(edges.size());
  Dims shape;
  int64_t cells = 1;
  for (Value e : edges) shape.push_back(c.T(e).dims[0] - 1), cells *= shape.back();
  Value flat = ir::Constant(c.g, 0, DType::kS64, {n});
  Value inside = ir::Constant(c.g, 1, DType::kPred, {n});
  for (int64_t k = 0; k < dims; ++k) {
    auto [pos, in] = Bins(c, Column(c, pts, k), edges[k]);
    flat =
        ir::Binary(c.g, "stablehlo.add",
                   ir::Binary(c.g, "stablehlo.multiply", flat,
                              ir::Constant(c.g, static_cast<double>(shape[k]), DType::kS64, {n})),
                   pos);
    inside = ir::Binary(c.g, "stablehlo.and", inside, in);
  }
  flat = ir::Select(c.g, inside, flat,
                    ir::Constant(c.g, static_cast<double>(cells), DType::kS64, {n}));
  Value w = c.Has("weight") ? ir::Reshape(c.g, Cast(c, c.In("weight"), t), {n})
                            : ir::Constant(c.g, 1, t, {n});
  Value hist = ir::Scatter(c.g, ir::Constant(c.g, 0, t, {cells}), AsVector(c, flat), w, {0}, 0,
                           ir::ScalarRegion(t, "stablehlo.add"));
  hist = ir::Reshape(c.g, hist, shape);
  if (!c.Bool("density", false)) return hist;
  // hist / sum(hist), then divided by each dim's bin widths along that dim.
  Value total = ir::Reduce(c.g, hist, ir::Constant(c.g, 0, t), AllDims(dims), "stablehlo.add");
  hist = ir::Binary(c.g, "stablehlo.divide", hist, ir::BroadcastInDim(c.g, total, shape, {}));
  for (int64_t k = 0; k < dims; ++k) {
    const int64_t b = shape[k];
    Value widths = ir::Binary(c.g, "stablehlo.subtract", ir::Slice(c.g, edges[k], {1}, {b + 1}),
                              ir::Slice(c.g, edges[k], {0}, {b}));
    hist = ir::Binary(c.g, "stablehlo.divide", hist, ir::BroadcastInDim(c.g, widths, shape, {k}));
  }
  return hist;
}

// Edges for every dim from the int bins and the optional range.
V EdgesFromCounts(Ctx& c, Value pts, const Dims& bins, DType t) {
  const std::vector<double> range = c.Doubles("range");  // its size is Meta's check
  V edges;
  for (size_t k = 0; k < bins.size(); ++k) {
    edges.push_back(ColumnEdges(c, Column(c, pts, static_cast<int64_t>(k)), static_cast<int64_t>(k),
                                bins[k], range, t));
  }
  return edges;
}

V HistogramBinCount(Ctx& c) {
  const DType t = AccOf(c.out[0].dtype);
  Value pts = Points(c, 1, t);
  V edges = EdgesFromCounts(c, pts, {c.out[0].dims[0]}, t);
  return {Cast(c, Hist(c, pts, edges, t), c.out[0].dtype), Cast(c, edges[0], c.out[1].dtype)};
}

V HistogramBinEdges(Ctx& c) {
  const DType t = AccOf(c.out[0].dtype);
  Value edges = Cast(c, c.In("bins"), t);
  edges = ir::Reshape(c.g, edges, {c.T(edges).numel()});
  return {Cast(c, Hist(c, Points(c, 1, t), {edges}, t), c.out[0].dtype),
          Cast(c, edges, c.out[1].dtype)};
}

int64_t PointDims(Ctx& c) {
  const Type& x = c.T(c.In("self"));
  return x.dims.empty() ? 1 : x.dims.back();
}

// torchtpu::_histogramdd_edges: dim `dim`'s edges (aten/histogramdd.cc gathers them).
V DdEdgesOfDim(Ctx& c) {
  const DType t = AccOf(c.out[0].dtype);
  const int64_t k = c.Int("dim");
  Value col = Column(c, Points(c, PointDims(c), t), k);
  return {
      Cast(c, ColumnEdges(c, col, k, c.Ints("bins")[k], c.Doubles("range"), t), c.out[0].dtype)};
}

V DdFromCounts(Ctx& c) {
  const DType t = AccOf(c.out[0].dtype);
  Value pts = Points(c, PointDims(c), t);
  return {Cast(c, Hist(c, pts, EdgesFromCounts(c, pts, c.Ints("bins"), t), t), c.out[0].dtype)};
}

V DdFromTensors(Ctx& c) {
  const DType t = AccOf(c.out[0].dtype);
  V edges;
  for (Value e : c.List("bins")) edges.push_back(ir::Reshape(c.g, Cast(c, e, t), {c.T(e).numel()}));
  return {Cast(c, Hist(c, Points(c, PointDims(c), t), edges, t), c.out[0].dtype)};
}

}  // namespace

void AddHistogramRules(RuleMap& m) {
  m["aten::histogram.bin_ct"] = HistogramBinCount;
  m["aten::histogram.bins_tensor"] = HistogramBinEdges;
  m["torchtpu::_histogramdd_edges"] = DdEdgesOfDim;
  m["aten::_histogramdd_from_bin_cts"] = DdFromCounts;
  m["aten::_histogramdd_from_bin_tensors"] = DdFromTensors;
}

}  // namespace tpu::lowering
