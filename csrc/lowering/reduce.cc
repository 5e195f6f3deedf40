// Reductions: sum/mean/prod, min/max with indices, var/std, norms, any/all, scans, softmax.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>

#include "lowering/helpers.h"
#include "lowering/rule_table.h"

namespace tpu::lowering {
namespace {

using V = std::vector<Value>;

// float16/bfloat16 accumulate in float32, as PyTorch's CPU kernels do.

// The lowest or highest value of t. 64-bit integers are written exactly (not through a double).
Value Bound(Ctx& c, DType t, bool highest) {
  std::string lit;
  if (t == DType::kS64) {
    lit = std::to_string(highest ? std::numeric_limits<int64_t>::max()
                                 : std::numeric_limits<int64_t>::min());
  } else if (t == DType::kU64) {
    lit = highest ? std::to_string(std::numeric_limits<uint64_t>::max()) : "0";
  } else {
    return ir::Constant(c.g, highest ? HighestOf(t) : LowestOf(t), t);
  }
  Type scalar{t, {}};
  return c.g.Op1("stablehlo.constant", {}, scalar, "value = dense<" + lit + "> : " + scalar.str());
}

// Reduces x over dims with a binary op starting at init; no dims is the identity.
Value Red(Ctx& c, Value x, const Dims& dims, const char* op, Value init) {
  return dims.empty() ? x : ir::Reduce(c.g, x, init, dims, op);
}
// Same, with a constant init.
Value RedK(Ctx& c, Value x, const Dims& dims, const char* op, double init) {
  return Red(c, x, dims, op, ir::Constant(c.g, init, c.T(x).dtype));
}
Value Sum(Ctx& c, Value x, const Dims& dims) {
  return RedK(c, x, dims, c.T(x).dtype == DType::kPred ? "stablehlo.or" : "stablehlo.add", 0);
}
Value MaxOf(Ctx& c, Value x, const Dims& dims, bool is_max) {
  DType t = c.T(x).dtype;
  if (t == DType::kPred) {
    return RedK(c, x, dims, is_max ? "stablehlo.or" : "stablehlo.and", !is_max);
  }
  const char* op = is_max ? "stablehlo.maximum" : "stablehlo.minimum";
  if (dims.empty()) return x;
  if (!rt::IsFloat(t)) return Red(c, x, dims, op, Bound(c, t, !is_max));
  // XLA:CPU's max/min reductions drop NaN; PyTorch propagates it, so pick NaN explicitly.
  auto r = std::make_shared<Graph>();
  Value a = r->Param(Type{t, {}}), b = r->Param(Type{t, {}});
  Value take_a = ir::Binary(*r, "stablehlo.or", ir::Compare(*r, a, b, is_max ? "GT" : "LT"),
                            ir::Compare(*r, a, a, "NE"));
  r->results = {ir::Select(*r, take_a, a, b)};
  Dims out;
  for (int64_t i = 0; i < c.T(x).rank(); ++i) {
    if (std::find(dims.begin(), dims.end(), i) == dims.end()) out.push_back(c.T(x).dims[i]);
  }
  return c.g.Op1("stablehlo.reduce", {x, Bound(c, t, !is_max)}, Type{t, out},
                 "dimensions = " + ir::I64Array(dims), {r});
}

// A reduced value broadcast back to the unreduced dims (the keepdim form, expanded).
Value Expand(Ctx& c, Value reduced, const Dims& in_dims, const Dims& dims) {
  Dims mapping;
  for (int64_t i = 0; i < static_cast<int64_t>(in_dims.size()); ++i) {
    if (std::find(dims.begin(), dims.end(), i) == dims.end()) mapping.push_back(i);
  }
  return ir::BroadcastInDim(c.g, reduced, in_dims, mapping);
}

// Result i in the schema's dtype and dims (this also applies keepdim).
Value Finish(Ctx& c, Value v, size_t i = 0) {
  return ir::Reshape(c.g, Cast(c, v, c.out[i].dtype), c.out[i].dims);
}

// "self" converted to the accumulation type of the first output.
Value Input(Ctx& c) { return Cast(c, c.In("self"), AccOf(c.out[0].dtype)); }

Value Arith(Ctx& c, const char* op, Value a, Value b) { return ir::Binary(c.g, op, a, b); }

V SumRule(Ctx& c, bool nan_to_zero) {
  Value x = Input(c);
  if (nan_to_zero && rt::IsFloat(c.T(x).dtype)) {
    x = ir::Select(c.g, ir::Compare(c.g, x, x, "NE"), Splat(c, 0, x), x);
  }
  return {Finish(c, Sum(c, x, ReduceDims(c, c.T(x).rank())))};
}

V Mean(Ctx& c) {
  Value x = Input(c);
  Dims dims = ReduceDims(c, c.T(x).rank());
  Value s = Sum(c, x, dims);
  Value n = ir::BroadcastTo(c.g, ir::ElementCount(c.g, x, dims, c.T(s).dtype), c.T(s).dims);
  return {Finish(c, Arith(c, "stablehlo.divide", s, n))};
}

V Prod(Ctx& c) {
  Value x = Input(c);
  bool pred = c.T(x).dtype == DType::kPred;
  Dims dims = ReduceDims(c, c.T(x).rank());
  return {Finish(c, RedK(c, x, dims, pred ? "stablehlo.and" : "stablehlo.multiply", 1))};
}

// Reduces x along dim to (extreme value, index of its first occurrence). NaN counts as the
// extreme, like PyTorch.
std::pair<Value, Value> ArgReduce(Ctx& c, Value x, int64_t dim, bool is_max) {
  if (c.T(x).dtype == DType::kPred) x = Cast(c, x, DType::kU8);
  Type t = c.T(x);
  Value idx = ir::Iota(c.g, Type{DType::kS64, t.dims}, dim);
  auto r = std::make_shared<Graph>();
  Value av = r->Param(Type{t.dtype, {}}), ai = r->Param(Type{DType::kS64, {}});
  Value bv = r->Param(Type{t.dtype, {}}), bi = r->Param(Type{DType::kS64, {}});
  Value better = ir::Compare(*r, av, bv, is_max ? "GT" : "LT");
  Value same = ir::Compare(*r, av, bv, "EQ");
  if (rt::IsFloat(t.dtype)) {
    Value a_nan = ir::Compare(*r, av, av, "NE"), b_nan = ir::Compare(*r, bv, bv, "NE");
    Value only_a = ir::Binary(*r, "stablehlo.and", a_nan, ir::Unary(*r, "stablehlo.not", b_nan));
    better = ir::Binary(*r, "stablehlo.or", better, only_a);
    same = ir::Binary(*r, "stablehlo.or", same, ir::Binary(*r, "stablehlo.and", a_nan, b_nan));
  }
  Value first = ir::Binary(*r, "stablehlo.and", same, ir::Compare(*r, ai, bi, "LT"));
  Value take_a = ir::Binary(*r, "stablehlo.or", better, first);
  r->results = {ir::Select(*r, take_a, av, bv), ir::Select(*r, take_a, ai, bi)};
  Dims out = t.dims;
  out.erase(out.begin() + dim);
  V res = c.g.Op(
      "stablehlo.reduce", {x, idx, Bound(c, t.dtype, !is_max), ir::Constant(c.g, 0, DType::kS64)},
      {Type{t.dtype, out}, Type{DType::kS64, out}}, "dimensions = " + ir::I64Array({dim}), {r});
  return {res[0], res[1]};
}

// x flattened (no dim) or made at least 1-d, with the dim to reduce.
std::pair<Value, int64_t> ArgOperand(Ctx& c, Value x) {
  const Dims& d = c.T(x).dims;
  if (c.Has("dim") && !d.empty()) return {x, ir::WrapDim(c.Int("dim"), c.T(x).rank())};
  return {ir::Reshape(c.g, x, {c.T(x).numel()}), 0};
}

V Extreme(Ctx& c, bool is_max) {
  Value x = c.In("self");
  if (!c.Has("dim")) return {Finish(c, MaxOf(c, x, ReduceDims(c, c.T(x).rank()), is_max))};
  auto [flat, dim] = ArgOperand(c, x);
  auto [v, i] = ArgReduce(c, flat, dim, is_max);
  return {Finish(c, v, 0), Finish(c, i, 1)};
}

V ArgExtreme(Ctx& c, bool is_max) {
  auto [flat, dim] = ArgOperand(c, c.In("self"));
  return {Finish(c, ArgReduce(c, flat, dim, is_max).second)};
}

V Amax(Ctx& c, bool is_max) {
  Value x = c.In("self");
  return {Finish(c, MaxOf(c, x, ReduceDims(c, c.T(x).rank()), is_max))};
}

V Aminmax(Ctx& c) {
  Value x = c.In("self");
  Dims dims = ReduceDims(c, c.T(x).rank());
  return {Finish(c, MaxOf(c, x, dims, false), 0), Finish(c, MaxOf(c, x, dims, true), 1)};
}

// var (and std, and the mean) by two passes: mean, then the sum of squared deviations.
// Of complex input, the mean is complex and the variance the mean of |x - mean|^2 (real).
V VarStd(Ctx& c, bool take_sqrt, bool with_mean) {
  const DType real = AccOf(c.out[0].dtype);
  const DType in = c.T(c.In("self")).dtype;
  Value x = rt::IsComplex(in)
                ? Cast(c, c.In("self"), real == DType::kF64 ? DType::kC128 : DType::kC64)
                : Input(c);
  const Dims in_dims = c.T(x).dims;
  Dims dims = ReduceDims(c, c.T(x).rank());
  Value n = ir::ElementCount(c.g, x, dims, real);
  Value s = Sum(c, x, dims);
  Value mean =
      Arith(c, "stablehlo.divide", s, ir::BroadcastTo(c.g, Cast(c, n, c.T(s).dtype), c.T(s).dims));
  Value d = Arith(c, "stablehlo.subtract", x, Expand(c, mean, in_dims, dims));
  Value m2 = Sum(c, ir::AbsSq(c.g, d), dims);
  Value corr = c.Has("correction") ? Cast(c, c.In("correction"), real)
                                   : Splat(c, c.Bool("unbiased", true) ? 1 : 0, c.T(n));
  // PyTorch divides by max(N - correction, 0).
  Value dof = Arith(c, "stablehlo.subtract", n, corr);
  Value divisor = Arith(c, "stablehlo.maximum", dof, Splat(c, 0, n));
  Value var = Arith(c, "stablehlo.divide", m2, ir::BroadcastTo(c.g, divisor, c.T(m2).dims));
  if (take_sqrt) var = ir::Unary(c.g, "stablehlo.sqrt", var);
  if (!with_mean) return {Finish(c, var)};
  return {Finish(c, var, 0), Finish(c, mean, 1)};
}

// Vector p-norm. The order is a runtime scalar, so every case is built and one is selected.
V Norm(Ctx& c, const char* ord_name) {
  Value x = Cast(c, Magnitude(c, c.In("self")), AccOf(c.out[0].dtype));
  DType t = c.T(x).dtype;
  Dims dims = ReduceDims(c, c.T(x).rank());
  Value a = ir::Unary(c.g, "stablehlo.abs", x);
  Value p = c.Has(ord_name) ? Cast(c, c.In(ord_name), t) : ir::Constant(c.g, 2, t);
  auto is = [&](double k, const Dims& shape) {
    Value pb = ir::BroadcastTo(c.g, p, shape);
    return ir::Compare(c.g, pb, Splat(c, k, pb), "EQ");
  };
  const Dims& xd = c.T(a).dims;
  Value pow_a = Arith(c, "stablehlo.power", a, ir::BroadcastTo(c.g, p, xd));
  Value term = ir::Select(c.g, is(2, xd), Arith(c, "stablehlo.multiply", a, a), pow_a);
  term = ir::Select(c.g, is(1, xd), a, term);
  term = ir::Select(c.g, is(0, xd), Cast(c, ir::Compare(c.g, a, Splat(c, 0, a), "NE"), t), term);
  Value s = Sum(c, term, dims);
  const Dims& rd = c.T(s).dims;
  Value inv_p = Arith(c, "stablehlo.divide", ir::Constant(c.g, 1, t), p);
  Value root = Arith(c, "stablehlo.power", s, ir::BroadcastTo(c.g, inv_p, rd));
  root = ir::Select(c.g, is(2, rd), ir::Unary(c.g, "stablehlo.sqrt", s), root);
  root = ir::Select(c.g, ir::Binary(c.g, "stablehlo.or", is(0, rd), is(1, rd)), s, root);
  root = ir::Select(c.g, is(INFINITY, rd), MaxOf(c, a, dims, true), root);
  root = ir::Select(c.g, is(-INFINITY, rd), MaxOf(c, a, dims, false), root);
  return {Finish(c, root)};
}

// Each slice along `dim` scaled down to p-norm maxnorm where its norm exceeds it (ATen's factor
// maxnorm / (norm + 1e-7)), computed in float for half types.
// Of complex input, the norms (and maxnorm) are real; the factor scales the complex values.
V Renorm(Ctx& c) {
  Value x = Input(c);
  const Type t = c.T(x);
  const DType real = rt::IsComplex(t.dtype) ? rt::RealOf(t.dtype) : t.dtype;
  int64_t dim = ir::WrapDim(c.Int("dim"), t.rank());
  Dims others, keep = t.dims;
  for (int64_t i = 0; i < t.rank(); ++i) {
    if (i != dim) {
      others.push_back(i);
      keep[i] = 1;
    }
  }
  Value norm = CallRule(c, "aten::linalg_vector_norm", "",
                        {{"self", ValueArg(x)},
                         {"ord", ValueArg(c.In("p"))},
                         {"dim", IntsArg(others)},
                         {"keepdim", BoolArg(true)}},
                        {Type{real, keep}})[0];
  Value maxnorm = Cast(c, c.In("maxnorm"), real, keep);
  Value factor = Div(c, maxnorm, Add(c, norm, Splat(c, 1e-7, norm)));
  factor = ir::Select(c.g, ir::Compare(c.g, norm, maxnorm, "GT"), factor, Splat(c, 1, norm));
  return {Finish(c, Mul(c, x, ir::BroadcastTo(c.g, Cast(c, factor, t.dtype), t.dims)))};
}

// log(sum(exp(x))) shifted by the max; infinite maxima are not subtracted (as in PyTorch).
V LogSumExp(Ctx& c) {
  Value x = Input(c);
  const Dims in_dims = c.T(x).dims;
  Dims dims = ReduceDims(c, c.T(x).rank());
  Value m = MaxOf(c, x, dims, true);
  Value inf = ir::Compare(c.g, ir::Unary(c.g, "stablehlo.abs", m), Splat(c, INFINITY, m), "EQ");
  m = ir::Select(c.g, inf, Splat(c, 0, m), m);
  Value e = ir::Unary(c.g, "stablehlo.exponential",
                      Arith(c, "stablehlo.subtract", x, Expand(c, m, in_dims, dims)));
  Value r = ir::Unary(c.g, "stablehlo.log", Sum(c, e, dims));
  return {Finish(c, Arith(c, "stablehlo.add", r, m))};
}

// all/any: dim absent reduces everything, but an explicit empty dim list reduces nothing.
V AllAny(Ctx& c, bool all) {
  Value x = Cast(c, c.In("self"), DType::kPred);
  bool none = c.Has("dim") && c.Ints("dim").empty();
  Dims dims = none ? Dims{} : ReduceDims(c, c.T(x).rank());
  return {Finish(c, RedK(c, x, dims, all ? "stablehlo.and" : "stablehlo.or", all))};
}

V CountNonzero(Ctx& c) {
  Value x = c.In("self");
  Value nz = Cast(c, ir::Compare(c.g, x, Splat(c, 0, x), "NE"), DType::kS64);
  return {Finish(c, Sum(c, nz, ReduceDims(c, c.T(x).rank())))};
}

// Inclusive scan along dim in log2(N) shift-and-combine steps (Hillis-Steele); unlike a
// reduce_window of size N this stays O(N log N) for long dims. A shift is a pad of k in front and
// -k at the end, whose attributes do not hold N, and the steps cover 512, 8192, ... (2^(4k+9)):
// the program's structure is then one for every N up to 512 (9 steps, where N <= 16 needs 4),
// and one for each factor of 16 above, which lets fused mode's bounded programs
// (eager/bounded.h) serve many lengths, for at most 4 steps more than N needs past 512.
using Combine = std::function<Value(Value, Value)>;
V Scan(Ctx& c, double identity, const Combine& combine) {
  Value x = Input(c);
  if (c.T(x).rank() == 0) x = ir::Reshape(c.g, x, {1});
  Dims dims = c.T(x).dims;
  int64_t dim = ir::WrapDim(c.Int("dim"), c.T(x).rank()), n = dims[dim];
  Value pad = ir::Constant(c.g, identity, c.T(x).dtype);
  Dims zeros(dims.size(), 0);
  int64_t span = n > 0 ? 512 : 0;
  while (span < n) span *= 16;
  for (int64_t k = 1; k < span; k *= 2) {
    Dims lo = zeros, hi = zeros;
    lo[dim] = k;
    hi[dim] = -k;
    x = combine(ir::Pad(c.g, x, pad, lo, hi), x);
  }
  return {Finish(c, x)};
}

// log(exp(a) + exp(b)), exact for infinite arguments.
Value LogAddExp(Ctx& c, Value a, Value b) {
  // Explicit select: XLA:CPU's maximum/minimum drop NaN.
  Value a_hi =
      ir::Binary(c.g, "stablehlo.or", ir::Compare(c.g, a, b, "GT"), ir::Compare(c.g, a, a, "NE"));
  Value hi = ir::Select(c.g, a_hi, a, b), lo = ir::Select(c.g, a_hi, b, a);
  Value d = ir::Unary(c.g, "stablehlo.exponential", Arith(c, "stablehlo.subtract", lo, hi));
  Value r = Arith(c, "stablehlo.add", hi, ir::Unary(c.g, "stablehlo.log_plus_one", d));
  Value skip = ir::Binary(c.g, "stablehlo.or", ir::Compare(c.g, lo, Splat(c, -INFINITY, lo), "EQ"),
                          ir::Compare(c.g, hi, Splat(c, INFINITY, hi), "EQ"));
  return ir::Select(c.g, skip, hi, r);
}

// Complex logcumsumexp in CPU's order, one position after another: the imaginary part of a
// complex logarithm is defined only up to 2 pi, and CPU's is the one its sequence accumulates.
V ComplexLogcumsumexp(Ctx& c) {
  Value x = Cast(c, c.In("self"), c.out[0].dtype);
  if (c.T(x).rank() == 0) x = ir::Reshape(c.g, x, {1});
  const Type t = c.T(x);
  const int64_t dim = ir::WrapDim(c.Int("dim"), t.rank());
  if (t.numel() == 0) return {Finish(c, x)};
  Dims one = t.dims;
  one[dim] = 1;
  const DType real = rt::RealOf(t.dtype);
  Value start =
      ir::Complex(c.g, ir::Constant(c.g, -INFINITY, real, one), ir::Constant(c.g, 0, real, one));
  auto out = For(c.g, 0, t.dims[dim], 1, {start, x, x}, [&](Graph& h, Value j, V& s) {
    std::vector<Value> at(t.rank(), ir::Constant(h, 0, DType::kS64));
    at[dim] = j;
    Value acc = ComplexLogAddExp(h, ir::DynamicSlice(h, s[2], at, one), s[0]);
    return V{acc, ir::DynamicUpdateSlice(h, s[1], acc, at), s[2]};
  });
  return {Finish(c, out[1])};
}

// Softmax family along one dim, computed in float32 for half types.
struct SoftmaxDims {
  Dims in_dims, dims;
};
SoftmaxDims SoftmaxShape(Ctx& c, Value& x) {
  if (c.T(x).rank() == 0) x = ir::Reshape(c.g, x, {1});
  return {c.T(x).dims, {ir::WrapDim(c.Int("dim"), c.T(x).rank())}};
}

V Softmax(Ctx& c, bool log) {
  Value x = Input(c);
  auto [in_dims, dims] = SoftmaxShape(c, x);
  Value z = Arith(c, "stablehlo.subtract", x, Expand(c, MaxOf(c, x, dims, true), in_dims, dims));
  Value e = ir::Unary(c.g, "stablehlo.exponential", z);
  Value s = Expand(c, Sum(c, e, dims), in_dims, dims);
  if (log) {
    return {Finish(c, Arith(c, "stablehlo.subtract", z, ir::Unary(c.g, "stablehlo.log", s)))};
  }
  return {Finish(c, Arith(c, "stablehlo.divide", e, s))};
}

V SoftmaxBackward(Ctx& c, bool log) {
  Value gy = c.In("grad_output");
  DType acc = AccOf(c.T(gy).dtype == DType::kF64 ? DType::kF64 : c.out[0].dtype);
  gy = Cast(c, gy, acc);
  Value y = Cast(c, c.In("output"), acc);
  auto [in_dims, dims] = SoftmaxShape(c, gy);
  y = ir::Reshape(c.g, y, in_dims);
  if (log) {
    Value s = Expand(c, Sum(c, gy, dims), in_dims, dims);
    Value p = ir::Unary(c.g, "stablehlo.exponential", y);
    return {Finish(c, Arith(c, "stablehlo.subtract", gy, Arith(c, "stablehlo.multiply", p, s)))};
  }
  Value s = Expand(c, Sum(c, Arith(c, "stablehlo.multiply", gy, y), dims), in_dims, dims);
  return {Finish(c, Arith(c, "stablehlo.multiply", y, Arith(c, "stablehlo.subtract", gy, s)))};
}

}  // namespace

void AddReduceRules(RuleMap& m) {
  m["aten::_log_softmax"] = +[](Ctx& c) { return Softmax(c, true); };
  m["aten::_log_softmax_backward_data"] = +[](Ctx& c) { return SoftmaxBackward(c, true); };
  m["aten::_logcumsumexp"] = +[](Ctx& c) {
    if (rt::IsComplex(c.out[0].dtype)) return ComplexLogcumsumexp(c);
    return Scan(c, -INFINITY, [&](Value a, Value b) { return LogAddExp(c, a, b); });
  };
  m["aten::_softmax"] = +[](Ctx& c) { return Softmax(c, false); };
  m["aten::_softmax_backward_data"] = +[](Ctx& c) { return SoftmaxBackward(c, false); };
  m["aten::all"] = +[](Ctx& c) { return AllAny(c, true); };
  m["aten::amax"] = +[](Ctx& c) { return Amax(c, true); };
  m["aten::amin"] = +[](Ctx& c) { return Amax(c, false); };
  m["aten::aminmax"] = Aminmax;
  m["aten::any"] = +[](Ctx& c) { return AllAny(c, false); };
  m["aten::argmax"] = +[](Ctx& c) { return ArgExtreme(c, true); };
  m["aten::argmin"] = +[](Ctx& c) { return ArgExtreme(c, false); };
  m["aten::count_nonzero"] = CountNonzero;
  m["aten::cumprod"] = +[](Ctx& c) {
    const char* op = c.out[0].dtype == DType::kPred ? "stablehlo.and" : "stablehlo.multiply";
    return Scan(c, 1, [&](Value a, Value b) { return Arith(c, op, a, b); });
  };
  m["aten::cumsum"] = +[](Ctx& c) {
    const char* op = c.out[0].dtype == DType::kPred ? "stablehlo.or" : "stablehlo.add";
    return Scan(c, 0, [&](Value a, Value b) { return Arith(c, op, a, b); });
  };
  m["aten::renorm"] = Renorm;
  m["aten::linalg_vector_norm"] = +[](Ctx& c) { return Norm(c, "ord"); };
  m["aten::logcumsumexp"] = m["aten::_logcumsumexp"];
  m["aten::logsumexp"] = LogSumExp;
  m["aten::max"] = +[](Ctx& c) { return Extreme(c, true); };
  m["aten::mean"] = Mean;
  m["aten::min"] = +[](Ctx& c) { return Extreme(c, false); };
  m["aten::nansum"] = +[](Ctx& c) { return SumRule(c, true); };
  m["aten::norm"] = +[](Ctx& c) { return Norm(c, "p"); };
  m["aten::prod"] = Prod;
  m["aten::std"] = +[](Ctx& c) { return VarStd(c, true, false); };
  m["aten::std_mean"] = +[](Ctx& c) { return VarStd(c, true, true); };
  m["aten::sum"] = +[](Ctx& c) { return SumRule(c, false); };
  m["aten::var"] = +[](Ctx& c) { return VarStd(c, false, false); };
  m["aten::var_mean"] = +[](Ctx& c) { return VarStd(c, false, true); };
}

}  // namespace tpu::lowering
