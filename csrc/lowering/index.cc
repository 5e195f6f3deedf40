// Indexing ops: gather/scatter families, advanced indexing, index_* ops, embedding, sort, topk.
// Index tensors are s64 (PyTorch's dtype); negative indices wrap where PyTorch lets them. XLA
// clamps out-of-bounds gathers and drops out-of-bounds scatters, so every rule checks its indices
// (ExpectIndex) and the op raises PyTorch's error instead of returning a clamped value.
#include <algorithm>
#include <string>

#include "lowering/helpers.h"
#include "lowering/rule_table.h"

namespace tpu::lowering {
namespace {

using V = std::vector<Value>;

// Full coordinates for gather/scatter along `dim`: position p maps to p with p[dim] = index[p].
// Shape index.dims + [rank].
Value Coords(Ctx& c, Value index, int64_t dim, int64_t size) {
  const Dims& dims = c.T(index).dims;
  ExpectIndex(c, index, size, false, "RuntimeError", OutOfBounds(dim, size));
  Value wrapped = Wrap(c, index, size);
  std::vector<Value> parts;
  for (int64_t d = 0; d < static_cast<int64_t>(dims.size()); ++d) {
    parts.push_back(AsVector(c, d == dim ? wrapped : ir::Iota(c.g, {DType::kS64, dims}, d)));
  }
  return ir::Concat(c.g, parts, static_cast<int64_t>(dims.size()));
}

// Combiner for a reduce name used by scatter / scatter_reduce; bools combine logically.
std::shared_ptr<ir::Graph> Combiner(DType t, const std::string& reduce) {
  bool pred = t == DType::kPred;
  if (reduce == "add" || reduce == "sum" || reduce == "mean") {
    return ir::ScalarRegion(t, pred ? "stablehlo.or" : "stablehlo.add");
  }
  if (reduce == "multiply" || reduce == "prod") {
    return ir::ScalarRegion(t, pred ? "stablehlo.and" : "stablehlo.multiply");
  }
  if (reduce == "amax") return ir::ScalarRegion(t, "stablehlo.maximum");
  if (reduce == "amin") return ir::ScalarRegion(t, "stablehlo.minimum");
  if (reduce.empty()) return ir::OverwriteRegion(t);
  throw LoweringError("unsupported reduce '" + reduce + "'");
}

// 0-d operands are treated as 1-element vectors.
Value Lift(Ctx& c, Value x) { return c.T(x).rank() == 0 ? ir::Reshape(c.g, x, {1}) : x; }

V GatherRule(Ctx& c) {
  // An empty index may differ from self in rank ((5,) gathered by (2, 0)): nothing to read.
  if (c.out[0].numel() == 0) return {Splat(c, 0, c.out[0])};
  Value x = Lift(c, c.In("self"));
  Value index = Lift(c, c.In("index"));
  int64_t rank = c.T(x).rank(), dim = ir::WrapDim(c.Int("dim"), rank);
  Value r = ir::Gather(c.g, x, Coords(c, index, dim, c.T(x).dims[dim]), AllDims(rank), 0);
  return {ir::Reshape(c.g, r, c.out[0].dims)};
}

// scatter / scatter_add / scatter.reduce: src (or a Scalar value) at index along dim.
V ScatterAlong(Ctx& c, const std::string& reduce) {
  // An empty index may differ from self in rank: nothing to scatter.
  if (c.T(c.In("index")).numel() == 0) return {Cast(c, c.In("self"), c.out[0].dtype)};
  DType t = c.out[0].dtype;
  Value x = Lift(c, Cast(c, c.In("self"), t));
  Value index = Lift(c, c.In("index"));
  int64_t rank = c.T(x).rank(), dim = ir::WrapDim(c.Int("dim"), rank);
  const Dims& idims = c.T(index).dims;
  Value upd;
  if (c.Has("src")) {
    upd = Lift(c, Cast(c, c.In("src"), t));
    upd = ir::Slice(c.g, upd, Dims(idims.size(), 0), idims);  // src may be larger than index
  } else {
    upd = Cast(c, c.In("value"), t, idims);
  }
  Value coords = Coords(c, index, dim, c.T(x).dims[dim]);
  Value r = ir::Scatter(c.g, x, coords, upd, AllDims(rank), 0, Combiner(t, reduce));
  return {ir::Reshape(c.g, r, c.out[0].dims)};
}

V ScatterReduce(Ctx& c) {
  std::string reduce = c.Str("reduce", "sum");
  bool include_self = c.Bool("include_self", true);
  DType t = c.out[0].dtype;
  if (rt::IsComplex(t) && (reduce == "amax" || reduce == "amin")) {
    throw LoweringError(reduce + " is not defined for complex numbers (as on CPU)");
  }
  Value x = Lift(c, Cast(c, c.In("self"), t));
  Value index = Lift(c, c.In("index"));
  int64_t rank = c.T(x).rank(), dim = ir::WrapDim(c.Int("dim"), rank);
  const Dims& idims = c.T(index).dims;
  Value src = ir::Slice(c.g, Lift(c, Cast(c, c.In("src"), t)), Dims(idims.size(), 0), idims);
  Value coords = Coords(c, index, dim, c.T(x).dims[dim]);
  auto put = [&](Value base, Value upd, const std::string& op) {
    return ir::Scatter(c.g, base, coords, upd, AllDims(rank), 0, Combiner(t, op));
  };
  if (!include_self) {
    // Scattered positions start from the reduction's identity instead of self.
    double init = reduce == "prod"   ? 1
                  : reduce == "amax" ? LowestOf(t)
                  : reduce == "amin" ? HighestOf(t)
                                     : 0;
    x = put(x, Splat(c, init, c.T(src)), "");
  }
  Value r = put(x, src, reduce);
  if (reduce == "mean") {
    // Counted in a real type (a complex mean divides by a real count).
    const DType ct = rt::RealOf(t);
    auto put_count = [&](Value base, Value upd) {
      return ir::Scatter(c.g, base, coords, upd, AllDims(rank), 0, Combiner(ct, "sum"));
    };
    Value count = put_count(Splat(c, include_self ? 1 : 0, ir::WithDType(c.T(x), ct)),
                            Splat(c, 1, ir::WithDType(c.T(src), ct)));
    count = ir::Binary(c.g, "stablehlo.maximum", count, Splat(c, 1, count));
    if (rt::IsComplex(t)) count = ir::Convert(c.g, count, t);
    r = rt::IsFloat(t) || rt::IsComplex(t) ? ir::Binary(c.g, "stablehlo.divide", r, count)
                                           : FloorDivide(c, r, count);
  }
  return {ir::Reshape(c.g, r, c.out[0].dims)};
}

// Advanced indexing: Tensor?[] indices broadcast together to B; result is self's unindexed
// dims with B at the first indexed dim when the indexed dims are adjacent, else in front.
struct Advanced {
  Value idx;         // s64, B + [k]
  Dims index_dims;   // self dims indexed, in order
  int64_t batch_at;  // where B sits in the result
};

// `checked`: the indices come from the user (the _unsafe_ forms come from decompositions).
Advanced AdvancedIndex(Ctx& c, Value self, const std::vector<Value>& indices, bool checked) {
  const Dims& sdims = c.T(self).dims;
  Dims batch;
  for (Value i : indices) {
    if (i < 0) continue;
    const Dims& d = c.T(i).dims;
    if (d.size() > batch.size()) batch.insert(batch.begin(), d.size() - batch.size(), 1);
    for (size_t k = 0; k < d.size(); ++k) {
      int64_t& b = batch[batch.size() - d.size() + k];
      if (b == 1) b = d[k];
    }
  }
  Advanced a{-1, {}, 0};
  std::vector<Value> parts;
  for (int64_t d = 0; d < static_cast<int64_t>(indices.size()); ++d) {
    Value i = indices[d];
    if (i < 0) continue;
    DType t = c.T(i).dtype;
    if (t == DType::kPred || t == DType::kU8) {
      throw LoweringError("boolean mask indices must be converted with nonzero() first");
    }
    a.index_dims.push_back(d);
    if (checked) ExpectIndex(c, i, sdims[d], true, "IndexError", OutOfBounds(d, sdims[d]));
    parts.push_back(AsVector(c, ir::BroadcastTo(c.g, Wrap(c, i, sdims[d]), batch)));
  }
  if (parts.empty()) throw LoweringError("index needs at least one index tensor");
  a.idx = ir::Concat(c.g, parts, static_cast<int64_t>(batch.size()));
  bool adjacent =
      a.index_dims.back() - a.index_dims.front() + 1 == static_cast<int64_t>(a.index_dims.size());
  a.batch_at = adjacent ? a.index_dims.front() : 0;
  return a;
}

V Index(Ctx& c, bool checked) {
  Value x = c.In("self");
  Advanced a = AdvancedIndex(c, x, c.List("indices"), checked);
  return {ir::Reshape(c.g, ir::Gather(c.g, x, a.idx, a.index_dims, a.batch_at), c.out[0].dims)};
}

std::string Shape(const Dims& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

// index_put's values broadcast to the shape `self[indices]` has; CPU raises this otherwise.
void ExpectBroadcastable(const Dims& from, const Dims& to) {
  bool ok = from.size() <= to.size();
  for (size_t i = 1; ok && i <= from.size(); ++i) {
    ok = from[from.size() - i] == 1 || from[from.size() - i] == to[to.size() - i];
  }
  if (!ok) {
    throw ArgError("shape mismatch: value tensor of shape " + Shape(from) +
                   " cannot be broadcast to indexing result of shape " + Shape(to));
  }
}

V IndexPut(Ctx& c, bool checked) {
  DType t = c.out[0].dtype;
  Value x = Cast(c, c.In("self"), t);
  Advanced a = AdvancedIndex(c, x, c.List("indices"), checked);
  // The update has the shape `self[indices]` would have.
  Dims udims;
  for (int64_t i = 0; i < c.T(x).rank(); ++i) {
    if (std::find(a.index_dims.begin(), a.index_dims.end(), i) == a.index_dims.end()) {
      udims.push_back(c.T(x).dims[i]);
    }
  }
  Dims batch = c.T(a.idx).dims;
  batch.pop_back();
  udims.insert(udims.begin() + a.batch_at, batch.begin(), batch.end());
  ExpectBroadcastable(c.T(c.In("values")).dims, udims);
  Value upd = Cast(c, c.In("values"), t, udims);
  std::string op = c.Bool("accumulate", false) ? "add" : "";
  return {ir::Scatter(c.g, x, a.idx, upd, a.index_dims, a.batch_at, Combiner(t, op))};
}

V IndexSelect(Ctx& c) {
  Value x = Lift(c, c.In("self"));
  int64_t dim = ir::WrapDim(c.Int("dim"), c.T(x).rank());
  Value index = Lift(c, c.In("index"));
  ExpectIndex(c, index, c.T(x).dims[dim], false, "IndexError", "index out of range in self");
  Value idx = AsVector(c, Wrap(c, index, c.T(x).dims[dim]));
  return {ir::Reshape(c.g, ir::Gather(c.g, x, idx, {dim}, dim), c.out[0].dims)};
}

// index_add / index_copy / index_fill: rows of `self` along dim at `index` get `upd`. Their
// index checks differ: which error, and whether negative indices wrap (index_fill's do).
struct IndexUpdateCheck {
  const char* type;
  const char* prefix;
  bool wraps;
};

V IndexUpdate(Ctx& c, const char* source, const std::string& op, IndexUpdateCheck check) {
  DType t = c.out[0].dtype;
  Value x = Lift(c, Cast(c, c.In("self"), t));
  int64_t dim = ir::WrapDim(c.Int("dim"), c.T(x).rank());
  Value index = Lift(c, c.In("index"));
  Dims udims = c.T(x).dims;
  udims[dim] = c.T(index).dims[0];
  Value src = Cast(c, c.In(source), t);
  Value upd =
      c.T(src).rank() == 0 ? ir::BroadcastTo(c.g, src, udims) : ir::Reshape(c.g, src, udims);
  if (c.Has("alpha")) {
    const char* mul = t == DType::kPred ? "stablehlo.and" : "stablehlo.multiply";
    upd = ir::Binary(c.g, mul, upd, Cast(c, c.In("alpha"), t, udims));
  }
  int64_t size = c.T(x).dims[dim];
  ExpectIndex(c, index, size, check.wraps, check.type, OutOfBounds(dim, size, check.prefix));
  Value idx = AsVector(c, Wrap(c, index, size));
  Value r = ir::Scatter(c.g, x, idx, upd, {dim}, dim, Combiner(t, op));
  return {ir::Reshape(c.g, r, c.out[0].dims)};
}

// Inclusive prefix sum of a 1-D value in log2(n) shifted adds.
Value PrefixSum(Ctx& c, Value x) {
  int64_t n = c.T(x).dims[0];
  Value zero = ir::Constant(c.g, 0, c.T(x).dtype);
  for (int64_t k = 1; k < n; k *= 2) {
    Value shifted = ir::Slice(c.g, ir::Pad(c.g, x, zero, {k}, {0}), {0}, {n});
    x = ir::Binary(c.g, "stablehlo.add", x, shifted);
  }
  return x;
}

// Flat mask of masked_scatter and the source position each true element reads.
std::pair<Value, Value> MaskPositions(Ctx& c, const Dims& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  Value mask = ir::Reshape(c.g, Cast(c, c.In("mask"), DType::kPred, dims), {n});
  Value pos = PrefixSum(c, Cast(c, mask, DType::kS64));
  return {mask, ir::Binary(c.g, "stablehlo.subtract", pos, Splat(c, 1, pos))};
}

V MaskedScatter(Ctx& c) {
  const Type& out = c.out[0];
  if (c.T(c.In("mask")).dtype != DType::kPred) {
    throw ArgError("masked_scatter_ only supports boolean masks, but got mask with dtype " +
                   std::string(rt::MlirName(c.T(c.In("mask")).dtype)));
  }
  Value x = Cast(c, c.In("self"), out.dtype, out.dims);
  Value src = Cast(c, c.In("source"), out.dtype);
  int64_t m = c.T(src).numel();
  if (m == 0 || out.numel() == 0) return {x};
  auto [mask, pos] = MaskPositions(c, out.dims);
  Type s64{DType::kS64, {}};
  pos = ir::Clamp(c.g, Splat(c, 0, s64), pos, Splat(c, m - 1, s64));
  Value taken = ir::Gather(c.g, ir::Reshape(c.g, src, {m}), AsVector(c, pos), {0}, 0);
  Value flat = ir::Reshape(c.g, x, {out.numel()});
  return {ir::Reshape(c.g, ir::Select(c.g, mask, taken, flat), out.dims)};
}

// Gradient of source: masked grad elements go back to their source positions.
V MaskedScatterBackward(Ctx& c) {
  const Type& out = c.out[0];
  Value grad = Cast(c, c.In("grad_output"), out.dtype);
  const Dims& gdims = c.T(grad).dims;
  int64_t n = c.T(grad).numel(), m = out.numel();
  if (n == 0 || m == 0) return {Splat(c, 0, out)};
  auto [mask, pos] = MaskPositions(c, gdims);
  // Unmasked elements get an out-of-bounds position, which scatter drops.
  pos = ir::Select(c.g, mask, pos, Splat(c, m, pos));
  Value r = ir::Scatter(c.g, Splat(c, 0, Type{out.dtype, {m}}), AsVector(c, pos),
                        ir::Reshape(c.g, grad, {n}), {0}, 0, Combiner(out.dtype, "add"));
  return {ir::Reshape(c.g, r, out.dims)};
}

// take: self as a flat array, indexed by `index` (negative indices wrap).
V Take(Ctx& c) {
  Value x = c.In("self");
  int64_t n = c.T(x).numel();
  Value index = c.In("index");
  ExpectIndex(
      c, index, n, true, "IndexError",
      "out of range: tried to access index {} on a tensor of " + std::to_string(n) + " elements.");
  if (n == 0 || c.out[0].numel() == 0) return {Splat(c, 0, c.out[0])};
  Value idx = AsVector(c, Wrap(c, index, n));
  return {ir::Gather(c.g, ir::Reshape(c.g, x, {n}), idx, {0}, 0)};
}

V Embedding(Ctx& c) {
  Value w = c.In("weight");
  ExpectIndex(c, c.In("indices"), c.T(w).dims[0], false, "IndexError",
              "index out of range in self");
  Value idx = AsVector(c, Wrap(c, c.In("indices"), c.T(w).dims[0]));
  return {ir::Gather(c.g, w, idx, {0}, 0)};
}

// embedding's max_norm: every row that `indices` names and whose norm_type-norm exceeds max_norm
// is scaled by max_norm / (norm + 1e-7), as ATen's embedding_renorm_ does.
V EmbeddingRenorm(Ctx& c) {
  Value w = c.In("self");
  const Type t = c.T(w);
  int64_t rows = t.dims[0];
  ExpectIndex(c, c.In("indices"), rows, false, "IndexError", "index out of range in self");
  if (t.numel() == 0 || c.T(c.In("indices")).numel() == 0) return {w};
  Value idx =
      AsVector(c, ir::Reshape(c.g, Wrap(c, c.In("indices"), rows), {c.T(c.In("indices")).numel()}));
  Type flags{DType::kPred, {rows}};
  Value used =
      ir::Scatter(c.g, Splat(c, 0, flags), idx, Splat(c, 1, Type{DType::kPred, {c.T(idx).dims[0]}}),
                  {0}, 0, ir::OverwriteRegion(DType::kPred));
  DType acc = AccOf(t.dtype);
  Value x = Cast(c, w, acc);
  Dims rest;
  for (int64_t d = 1; d < t.rank(); ++d) rest.push_back(d);
  Value ord = ir::Constant(c.g, c.Double("norm_type", 2), acc);
  Value norm = CallRule(c, "aten::linalg_vector_norm", "",
                        {{"self", ValueArg(x)}, {"ord", ValueArg(ord)}, {"dim", IntsArg(rest)}},
                        {Type{acc, {rows}}})[0];
  Value max_norm = Splat(c, c.Double("max_norm", 0), c.T(norm));
  Value scale = ir::Binary(c.g, "stablehlo.divide", max_norm,
                           ir::Binary(c.g, "stablehlo.add", norm, Splat(c, 1e-7, c.T(norm))));
  Value apply = ir::Binary(c.g, "stablehlo.and", used, ir::Compare(c.g, norm, max_norm, "GT"));
  scale = ir::Select(c.g, apply, scale, Splat(c, 1, c.T(norm)));
  Dims lead{0};
  Value r = ir::Binary(c.g, "stablehlo.multiply", x, ir::BroadcastInDim(c.g, scale, t.dims, lead));
  return {Cast(c, r, t.dtype)};
}

// Sums grad rows into a [num_weights, D] table; padding_idx rows get nothing.
V EmbeddingDenseBackward(Ctx& c) {
  DType t = c.out[0].dtype;
  Value grad = Cast(c, c.In("grad_output"), t);
  int64_t n = c.Int("num_weights"), pad = c.Int("padding_idx", -1);
  Value ind = Wrap(c, c.In("indices"), n);
  const Dims& idims = c.T(ind).dims;
  Value idx = AsVector(c, ind);
  Dims gdims = c.T(grad).dims;
  Dims row_dims(gdims.begin() + static_cast<int64_t>(idims.size()), gdims.end());
  Dims bmap(idims.size());
  for (size_t i = 0; i < idims.size(); ++i) bmap[i] = static_cast<int64_t>(i);
  auto per_index = [&](Value v) { return ir::BroadcastInDim(c.g, v, gdims, bmap); };
  if (pad >= 0) {
    Value keep = ir::Compare(c.g, ind, Splat(c, pad, ind), "NE");
    grad = ir::Select(c.g, per_index(keep), grad, Splat(c, 0, grad));
  }
  if (c.Bool("scale_grad_by_freq", false)) {
    Value counts = ir::Scatter(c.g, Splat(c, 0, Type{t, {n}}), idx, Splat(c, 1, Type{t, idims}),
                               {0}, 0, Combiner(t, "add"));
    Value per = ir::Gather(c.g, counts, idx, {0}, 0);
    grad = ir::Binary(c.g, "stablehlo.divide", grad, per_index(per));
  }
  Dims table{n};
  table.insert(table.end(), row_dims.begin(), row_dims.end());
  return {ir::Scatter(c.g, Splat(c, 0, Type{t, table}), idx, grad, {0}, 0, Combiner(t, "add"))};
}

// Stable sort of x along dim: (values, s64 indices).
V SortAlong(Ctx& c, Value x, int64_t dim, bool descending) {
  const Type& t = c.T(x);
  Value iota = ir::Iota(c.g, {DType::kS64, t.dims}, dim);
  return c.g.Op("stablehlo.sort", {x, iota}, {t, c.T(iota)},
                "dimension = " + std::to_string(dim) + " : i64, is_stable = true",
                {SortComparator(t.dtype, descending)});
}

V Sort(Ctx& c) {
  Value x = Lift(c, c.In("self"));
  V r = SortAlong(c, x, ir::WrapDim(c.Int("dim", -1), c.T(x).rank()), c.Bool("descending", false));
  return {ir::Reshape(c.g, r[0], c.out[0].dims), ir::Reshape(c.g, r[1], c.out[1].dims)};
}

V TopK(Ctx& c) {
  Value x = Lift(c, c.In("self"));
  int64_t dim = ir::WrapDim(c.Int("dim", -1), c.T(x).rank());
  V r = SortAlong(c, x, dim, c.Bool("largest", true));
  Dims limit = c.T(x).dims;
  limit[dim] = c.Int("k");
  Dims zero(limit.size(), 0);
  return {ir::Reshape(c.g, ir::Slice(c.g, r[0], zero, limit), c.out[0].dims),
          ir::Reshape(c.g, ir::Slice(c.g, r[1], zero, limit), c.out[1].dims)};
}

// self.flatten()[index] = source (or +=), as take's inverse; indices wrap and are checked.
V Put(Ctx& c) {
  Value x = c.In("self");
  const Type& t = c.out[0];
  int64_t n = t.numel(), k = c.T(c.In("index")).numel();
  ExpectIndex(
      c, c.In("index"), n, true, "IndexError",
      "out of range: tried to access index {} on a tensor of " + std::to_string(n) + " elements.");
  if (n == 0 || k == 0) return {x};
  Value idx = ir::Reshape(c.g, Wrap(c, c.In("index"), n), {k, 1});
  Value src = ir::Reshape(c.g, Cast(c, c.In("source"), t.dtype), {k});
  Value r = ir::Scatter(c.g, ir::Reshape(c.g, x, {n}), idx, src, {0}, 0,
                        Combiner(t.dtype, c.Bool("accumulate", false) ? "add" : ""));
  return {ir::Reshape(c.g, r, t.dims)};
}

// nonzero with a static row count: the coordinates of the first `size` true elements (a sort of
// their flat positions), rows past the count filled with fill_value.
V NonzeroStatic(Ctx& c) {
  const Type& out = c.out[0];
  Value x = c.In("self");
  const Dims shape = c.T(x).dims;
  int64_t n = c.T(x).numel(), size = out.dims[0], rank = static_cast<int64_t>(shape.size());
  if (out.numel() == 0) return {Splat(c, 0, out)};
  Value fill = Splat(c, static_cast<double>(c.Int("fill_value", -1)), Type{DType::kS64, {size, 1}});
  if (n == 0) return {ir::BroadcastTo(c.g, fill, out.dims)};
  Type flat{DType::kS64, {n}};
  Value mask = ir::Reshape(c.g, Cast(c, x, DType::kPred), {n});
  Value key = ir::Select(c.g, mask, ir::Iota(c.g, flat, 0), Splat(c, static_cast<double>(n), flat));
  Value pos = SortAlong(c, key, 0, false)[0];
  pos = size <= n ? ir::Slice(c.g, pos, {0}, {size})
                  : ir::Pad(c.g, pos, ir::Constant(c.g, static_cast<double>(n), DType::kS64), {0},
                            {size - n});
  pos = ir::Reshape(c.g, pos, {size, 1});
  Value none = ir::Compare(c.g, pos, Splat(c, static_cast<double>(n), c.T(pos)), "EQ");
  Dims strides = ir::ContiguousStrides(shape);
  std::vector<Value> coords;
  for (int64_t d = 0; d < rank; ++d) {
    Value q =
        ir::Binary(c.g, "stablehlo.divide", pos, Splat(c, static_cast<double>(strides[d]), pos));
    Value r = ir::Binary(c.g, "stablehlo.remainder", q, Splat(c, static_cast<double>(shape[d]), q));
    coords.push_back(ir::Select(c.g, none, fill, r));
  }
  return {ir::Concat(c.g, coords, 1)};
}

// repeat_interleave(repeats) with its output size known: entry j is the number of inclusive
// prefix sums of repeats at or below j (a scatter of ones at the prefix sums, then a cumsum).
V RepeatInterleave(Ctx& c) {
  const Type& out = c.out[0];
  Value r = Cast(c, c.In("repeats"), DType::kS64);
  int64_t n = c.T(r).numel(), total = out.numel();
  if (total == 0 || n == 0) return {Splat(c, 0, out)};
  auto cumsum = [&](Value v) {
    return CallRule(c, "aten::cumsum", "", {{"self", ValueArg(v)}, {"dim", IntArg(0)}},
                    {c.T(v)})[0];
  };
  Value at = ir::Reshape(c.g, cumsum(r), {n, 1});
  Type marks{DType::kS64, {total}};
  Value ones = Splat(c, 1, Type{DType::kS64, {n}});
  Value m = ir::Scatter(c.g, Splat(c, 0, marks), at, ones, {0}, 0, Combiner(DType::kS64, "add"));
  return {Cast(c, cumsum(m), out.dtype)};
}

}  // namespace

void AddIndexRules(RuleMap& m) {
  m["aten::_index_put_impl"] = +[](Ctx& c) { return IndexPut(c, true); };
  m["aten::_unsafe_index.Tensor"] = +[](Ctx& c) { return Index(c, false); };
  m["aten::_unsafe_index_put"] = +[](Ctx& c) { return IndexPut(c, false); };
  m["aten::embedding"] = Embedding;
  m["aten::embedding_dense_backward"] = EmbeddingDenseBackward;
  m["aten::gather"] = GatherRule;
  m["aten::index.Tensor"] = +[](Ctx& c) { return Index(c, true); };
  m["aten::index_add"] = +[](Ctx& c) {
    return IndexUpdate(c, "source", "add", {"RuntimeError", "", false});
  };
  m["aten::index_copy"] = +[](Ctx& c) {
    return IndexUpdate(c, "source", "", {"IndexError", "index_copy_(): ", false});
  };
  m["aten::index_fill"] = +[](Ctx& c) {
    return IndexUpdate(c, "value", "", {"IndexError", "", true});
  };
  m["aten::index_put"] = +[](Ctx& c) { return IndexPut(c, true); };
  m["aten::index_select"] = IndexSelect;
  m["aten::masked_scatter"] = MaskedScatter;
  m["aten::masked_scatter_backward"] = MaskedScatterBackward;
  m["aten::scatter.reduce"] = +[](Ctx& c) { return ScatterAlong(c, c.Str("reduce", "")); };
  m["aten::scatter.src"] = +[](Ctx& c) { return ScatterAlong(c, ""); };
  m["aten::scatter.value"] = +[](Ctx& c) { return ScatterAlong(c, ""); };
  m["aten::scatter.value_reduce"] = +[](Ctx& c) { return ScatterAlong(c, c.Str("reduce", "")); };
  m["aten::scatter_add"] = +[](Ctx& c) { return ScatterAlong(c, "add"); };
  m["aten::scatter_reduce.two"] = ScatterReduce;
  m["aten::sort"] = Sort;
  m["aten::sort.stable"] = Sort;
  m["aten::take"] = Take;
  m["aten::put"] = Put;
  m["aten::embedding_renorm"] = EmbeddingRenorm;
  m["aten::repeat_interleave.Tensor"] = RepeatInterleave;
  m["aten::nonzero_static"] = NonzeroStatic;
  m["aten::topk"] = TopK;
}

}  // namespace tpu::lowering
