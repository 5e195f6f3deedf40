#include "lowering/helpers.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tpu::lowering {

Value Add(Ctx& c, Value a, Value b) { return ir::Binary(c.g, "stablehlo.add", a, b); }
Value Sub(Ctx& c, Value a, Value b) { return ir::Binary(c.g, "stablehlo.subtract", a, b); }
Value Mul(Ctx& c, Value a, Value b) { return ir::Binary(c.g, "stablehlo.multiply", a, b); }
Value Div(Ctx& c, Value a, Value b) { return ir::Binary(c.g, "stablehlo.divide", a, b); }

Value Cast(Ctx& c, Value x, DType t, const Dims& dims) {
  return ir::BroadcastTo(c.g, ir::Convert(c.g, x, t), dims);
}
Value Cast(Ctx& c, Value x, DType t) { return ir::Convert(c.g, x, t); }

Value InAsOut(Ctx& c, const std::string& name) {
  return Cast(c, c.In(name), c.out[0].dtype, c.out[0].dims);
}

Value Splat(Ctx& c, double v, Value like) { return Splat(c, v, c.T(like)); }
Value Splat(Ctx& c, double v, const Type& t) { return ir::Constant(c.g, v, t.dtype, t.dims); }

Dims ReduceDims(Ctx& c, int64_t rank, const std::string& name) {
  Dims dims = c.Ints(name);
  if (dims.empty()) {
    for (int64_t i = 0; i < rank; ++i) dims.push_back(i);
    return dims;
  }
  for (int64_t& d : dims) d = ir::WrapDim(d, rank);
  if (rank == 0) dims.clear();
  std::sort(dims.begin(), dims.end());
  dims.erase(std::unique(dims.begin(), dims.end()), dims.end());
  return dims;
}

Value KeepDims(Ctx& c, Value reduced, const Dims& in_dims, const Dims& dims, bool keepdim) {
  if (!keepdim) return reduced;
  Dims shape = in_dims;
  for (int64_t d : dims) shape[d] = 1;
  return ir::Reshape(c.g, reduced, shape);
}

Value FloorDivide(Ctx& c, Value a, Value b) {
  DType t = c.T(a).dtype;
  if (rt::IsFloat(t))
    return ir::Unary(c.g, "stablehlo.floor", ir::Binary(c.g, "stablehlo.divide", a, b));
  // Integers: truncated quotient, minus one when the signs differ and there is a remainder.
  Value q = ir::Binary(c.g, "stablehlo.divide", a, b);
  Value r = ir::Binary(c.g, "stablehlo.remainder", a, b);
  Value zero = Splat(c, 0, a);
  Value adjust = ir::Binary(
      c.g, "stablehlo.and", ir::Compare(c.g, r, zero, "NE"),
      ir::Compare(c.g, ir::Compare(c.g, r, zero, "LT"), ir::Compare(c.g, b, zero, "LT"), "NE"));
  return ir::Select(c.g, adjust, ir::Binary(c.g, "stablehlo.subtract", q, Splat(c, 1, a)), q);
}

DType FloatFor(DType t) { return rt::IsFloat(t) ? t : DType::kF32; }

double LowestOf(DType t) {
  switch (t) {
    case DType::kPred:
      return 0;
    case DType::kS8:
      return -128;
    case DType::kS16:
      return -32768;
    case DType::kS32:
      return std::numeric_limits<int32_t>::min();
    case DType::kS64:
      return static_cast<double>(std::numeric_limits<int64_t>::min());
    case DType::kU8:
    case DType::kU16:
    case DType::kU32:
    case DType::kU64:
      return 0;
    default:
      return -std::numeric_limits<double>::infinity();
  }
}

double HighestOf(DType t) {
  switch (t) {
    case DType::kPred:
      return 1;
    case DType::kS8:
      return 127;
    case DType::kS16:
      return 32767;
    case DType::kS32:
      return std::numeric_limits<int32_t>::max();
    case DType::kS64:
      return 9223372036854775807.0;
    case DType::kU8:
      return 255;
    case DType::kU16:
      return 65535;
    case DType::kU32:
      return 4294967295.0;
    case DType::kU64:
      return 18446744073709551615.0;
    default:
      return std::numeric_limits<double>::infinity();
  }
}

void Expect(Ctx& c, Value ok, Value quoted, const std::string& type, const std::string& message) {
  if (c.T(ok).numel() == 0) return;
  if (c.T(ok).rank() == 0) {
    ok = ir::Reshape(c.g, ok, {1});
    if (quoted >= 0) quoted = ir::Reshape(c.g, quoted, {1});
  }
  const Dims dims = c.T(ok).dims;
  Dims all(dims.size());
  for (size_t d = 0; d < dims.size(); ++d) all[d] = static_cast<int64_t>(d);
  // The first failing position in row-major order, one dim after another: the least index
  // along dim 0 of the failing entries, then along dim 1 of those at it, ... No flat copy, whose
  // size would be a product of the dims (a bounded program's sizes are sums of them).
  const Type pos_t{DType::kS64, dims};
  const double none = 4611686018427387904.0;  // 2^62: past any index
  Value at = ir::Unary(c.g, "stablehlo.not", ok), least = -1;
  for (size_t d = 0; d < dims.size(); ++d) {
    Value iota = ir::Iota(c.g, pos_t, static_cast<int64_t>(d));
    Value m = ir::Reduce(c.g, ir::Select(c.g, at, iota, Splat(c, none, pos_t)),
                         ir::Constant(c.g, none, DType::kS64), all, "stablehlo.minimum");
    at = ir::Binary(c.g, "stablehlo.and", at,
                    ir::Compare(c.g, iota, ir::BroadcastInDim(c.g, m, dims, {}), "EQ"));
    if (d == 0) least = m;
  }
  Check check{ir::Compare(c.g, least, ir::Constant(c.g, none, DType::kS64), "LT"), -1, type,
              message};
  if (quoted >= 0) {
    const Value lowest = ir::IntConstant(c.g, uint64_t{1} << 63, DType::kS64);
    check.quoted = ir::Reduce(c.g,
                              ir::Select(c.g, at, Cast(c, quoted, DType::kS64),
                                         ir::BroadcastInDim(c.g, lowest, dims, {})),
                              lowest, all, "stablehlo.maximum");
  }
  c.checks.push_back(std::move(check));
}

void ExpectIndex(Ctx& c, Value index, int64_t size, bool wraps, const std::string& type,
                 const std::string& message) {
  Value i = Cast(c, index, DType::kS64);
  Value lo = ir::Compare(c.g, i, Splat(c, wraps ? -static_cast<double>(size) : 0.0, i), "GE");
  Value hi = ir::Compare(c.g, i, Splat(c, static_cast<double>(size), i), "LT");
  Expect(c, ir::Binary(c.g, "stablehlo.and", lo, hi), i, type, message);
}

std::string OutOfBounds(int64_t dim, int64_t size, const std::string& prefix) {
  return prefix + "index {} is out of bounds for dimension " + std::to_string(dim) + " with size " +
         std::to_string(size);
}

Value CheckResult(Graph& g, const std::vector<Check>& checks) {
  Value code = ir::Constant(g, 0, DType::kS64), quoted = ir::Constant(g, 0, DType::kS64);
  for (size_t k = checks.size(); k-- > 0;) {
    const Check& ch = checks[k];
    code = ir::Select(g, ch.failed, ir::Constant(g, static_cast<double>(k + 1), DType::kS64), code);
    if (ch.quoted >= 0) quoted = ir::Select(g, ch.failed, ch.quoted, quoted);
  }
  return ir::Concat(g, {ir::Reshape(g, code, {1}), ir::Reshape(g, quoted, {1})}, 0);
}

Arg ValueArg(Value v) {
  Arg a;
  a.kind = Arg::Kind::kValue;
  a.value = v;
  return a;
}
Arg IntArg(int64_t i) {
  Arg a;
  a.kind = Arg::Kind::kInt;
  a.i = i;
  return a;
}
Arg BoolArg(bool b) {
  Arg a;
  a.kind = Arg::Kind::kBool;
  a.b = b;
  return a;
}

std::vector<Value> CallRule(Ctx& c, const char* name, const char* overload,
                            std::vector<std::pair<std::string, Arg>> args, std::vector<Type> out) {
  Rule r = FindRule(name, overload);
  if (r == nullptr) throw LoweringError(std::string("no rule for ") + name);
  Ctx sub{c.g, std::move(args), std::move(out), c.common, c.random_seed};
  return r(sub);
}

std::shared_ptr<ir::Graph> SortComparator(DType t, bool descending) {
  auto r = std::make_shared<ir::Graph>();
  Type s{t, {}}, i{DType::kS64, {}};
  Value a = r->Param(s), b = r->Param(s);
  r->Param(i);
  r->Param(i);
  Value less = descending ? ir::Compare(*r, a, b, "GT") : ir::Compare(*r, a, b, "LT");
  if (rt::IsFloat(t)) {
    Value a_nan = ir::Compare(*r, a, a, "NE"), b_nan = ir::Compare(*r, b, b, "NE");
    // Ascending: a < b also when only b is NaN; descending: when only a is NaN.
    Value first = descending ? a_nan : b_nan, second = descending ? b_nan : a_nan;
    Value nan_first =
        ir::Binary(*r, "stablehlo.and", first, ir::Unary(*r, "stablehlo.not", second));
    less = ir::Binary(*r, "stablehlo.or", less, nan_first);
  }
  r->results = {less};
  return r;
}

Value Magnitude(Ctx& c, Value x) {
  const Type& t = c.T(x);
  if (!rt::IsComplex(t.dtype)) return x;
  return c.g.Op1("stablehlo.abs", {x}, Type{rt::RealOf(t.dtype), t.dims});
}

DType AccOf(DType t) { return t == DType::kBF16 || t == DType::kF16 ? DType::kF32 : t; }

Value SumDim(Ctx& c, Value x, int64_t dim) {
  return ir::Reduce(c.g, x, ir::Constant(c.g, 0, c.T(x).dtype), {dim}, "stablehlo.add");
}

Arg IntsArg(Dims v) {
  Arg a;
  a.kind = Arg::Kind::kInts;
  a.ints = std::move(v);
  return a;
}

Dims AllDims(int64_t rank) {
  Dims d(rank);
  for (int64_t i = 0; i < rank; ++i) d[i] = i;
  return d;
}

Value Wrap(Ctx& c, Value index, int64_t size) {
  Value i = Cast(c, index, DType::kS64);
  Value neg = ir::Compare(c.g, i, Splat(c, 0, i), "LT");
  return ir::Select(c.g, neg, ir::Binary(c.g, "stablehlo.add", i, Splat(c, size, i)), i);
}

Value AsVector(Ctx& c, Value i) {
  Dims d = c.T(i).dims;
  d.push_back(1);
  return ir::Reshape(c.g, i, d);
}

// CPU's complex logaddexp step (ATen's _log_add_exp_helper): the operand with the larger real
// part (a NaN first) absorbs the other as max + log1p(exp(min - max)); equal infinite real parts
// give the -inf operand, or log(exp(min) + exp(max)) for +inf.
Value ComplexLogAddExp(Graph& h, Value x, Value y) {
  const Type t = h.type(x);
  const DType real = rt::RealOf(t.dtype);
  auto bin = [&](const char* op, Value a, Value b) { return ir::Binary(h, op, a, b); };
  auto isnan = [&](Value z) {
    Value re = ir::Real(h, z), im = ir::Imag(h, z);
    return bin("stablehlo.or", ir::Compare(h, re, re, "NE"), ir::Compare(h, im, im, "NE"));
  };
  Value xnan = isnan(x), ynan = isnan(y);
  Value xlt = ir::Compare(h, ir::Real(h, x), ir::Real(h, y), "LT");
  Value mn = ir::Select(h, ynan, y, ir::Select(h, xnan, x, ir::Select(h, xlt, x, y)));
  Value mx = ir::Select(h, ynan, y, ir::Select(h, xnan, x, ir::Select(h, xlt, y, x)));
  Value mnr = ir::Real(h, mn);
  Value inf = ir::Constant(h, INFINITY, real, t.dims);
  Value same_inf = bin("stablehlo.and", ir::Compare(h, ir::Abs(h, mnr), inf, "EQ"),
                       ir::Compare(h, mnr, ir::Real(h, mx), "EQ"));
  auto un = [&](const char* op, Value a) { return ir::Unary(h, op, a); };
  Value generic = bin(
      "stablehlo.add", mx,
      un("stablehlo.log_plus_one", un("stablehlo.exponential", bin("stablehlo.subtract", mn, mx))));
  Value both = un("stablehlo.log", bin("stablehlo.add", un("stablehlo.exponential", mn),
                                       un("stablehlo.exponential", mx)));
  Value neg = ir::Compare(h, mnr, ir::Constant(h, 0, real, t.dims), "LT");
  Value nan = ir::Constant(h, NAN, real, t.dims);
  return ir::Select(h, isnan(mn), ir::Complex(h, nan, nan),
                    ir::Select(h, same_inf, ir::Select(h, neg, mn, both), generic));
}

}  // namespace tpu::lowering
