// Elementwise ops: arithmetic, comparison, logical, bitwise, unary math, where/clamp/lerp.
#include <cmath>
#include <optional>

#include "lowering/helpers.h"
#include "lowering/rule_table.h"

namespace tpu::lowering {
namespace {

using V = std::vector<Value>;

// Unary op computed in the output dtype (ints become floats for exp, sin, ...).
V Un(Ctx& c, const char* op) { return {ir::Unary(c.g, op, Cast(c, c.In("self"), c.out[0].dtype))}; }

// self <op> other, both in the output dtype and shape.
V Bin(Ctx& c, const char* op, const char* other = "other") {
  return {ir::Binary(c.g, op, InAsOut(c, "self"), InAsOut(c, other))};
}

// other scaled by alpha (add/sub), skipped when alpha is absent.
Value Scaled(Ctx& c, const char* name) {
  Value b = InAsOut(c, name);
  if (!c.Has("alpha")) return b;
  Value alpha = Cast(c, c.In("alpha"), c.out[0].dtype, c.out[0].dims);
  return ir::Binary(c.g, c.out[0].dtype == DType::kPred ? "stablehlo.and" : "stablehlo.multiply", b,
                    alpha);
}

// Comparison in the promoted input dtype; result is bool.
V Cmp(Ctx& c, const char* dir) {
  const Dims& dims = c.out[0].dims;
  return {ir::Compare(c.g, Cast(c, c.In("self"), c.common, dims),
                      Cast(c, c.In("other"), c.common, dims), dir)};
}

V Logical(Ctx& c, const char* op) {
  const Dims& dims = c.out[0].dims;
  Value r = ir::Binary(c.g, op, Cast(c, c.In("self"), DType::kPred, dims),
                       Cast(c, c.In("other"), DType::kPred, dims));
  return {Cast(c, r, c.out[0].dtype)};
}

V Div(Ctx& c) {
  std::string mode = c.Str("rounding_mode", "");
  DType t = c.out[0].dtype;
  Value a = InAsOut(c, "self"), b = InAsOut(c, "other");
  if (mode.empty()) return {ir::Binary(c.g, "stablehlo.divide", a, b)};
  if (mode == "floor") return {FloorDivide(c, a, b)};
  Value q = ir::Binary(c.g, "stablehlo.divide", a, b);
  if (!rt::IsFloat(t)) return {q};
  return {ir::Select(c.g, ir::Compare(c.g, q, Splat(c, 0, q), "LT"),
                     ir::Unary(c.g, "stablehlo.ceil", q), ir::Unary(c.g, "stablehlo.floor", q))};
}

// Python modulo: the result takes the divisor's sign.
V Remainder(Ctx& c) {
  Value a = InAsOut(c, "self"), b = InAsOut(c, "other");
  Value r = ir::Binary(c.g, "stablehlo.remainder", a, b);
  Value zero = Splat(c, 0, r);
  Value fix = ir::Binary(
      c.g, "stablehlo.and", ir::Compare(c.g, r, zero, "NE"),
      ir::Compare(c.g, ir::Compare(c.g, r, zero, "LT"), ir::Compare(c.g, b, zero, "LT"), "NE"));
  return {ir::Select(c.g, fix, ir::Binary(c.g, "stablehlo.add", r, b), r)};
}

V Sign(Ctx& c) {
  Value x = Cast(c, c.In("self"), c.out[0].dtype);
  if (c.out[0].dtype == DType::kPred) return {x};
  if (rt::IsUnsigned(c.out[0].dtype))
    return {Cast(c, ir::Compare(c.g, x, Splat(c, 0, x), "NE"), c.out[0].dtype)};
  return {ir::Unary(c.g, "stablehlo.sign", x)};
}

V Abs(Ctx& c) {
  Value in = c.In("self");
  if (rt::IsComplex(c.T(in).dtype)) return {Cast(c, Magnitude(c, in), c.out[0].dtype)};
  Value x = Cast(c, in, c.out[0].dtype);
  if (c.out[0].dtype == DType::kPred || rt::IsUnsigned(c.out[0].dtype)) return {x};
  return {ir::Unary(c.g, "stablehlo.abs", x)};
}

V Round(Ctx& c) {
  Value x = Cast(c, c.In("self"), c.out[0].dtype);
  if (!rt::IsFloat(c.out[0].dtype)) return {x};
  int64_t decimals = c.Int("decimals", 0);
  if (decimals == 0) return {ir::Unary(c.g, "stablehlo.round_nearest_even", x)};
  Value scale = Splat(c, std::pow(10.0, static_cast<double>(decimals)), x);
  Value r = ir::Unary(c.g, "stablehlo.round_nearest_even",
                      ir::Binary(c.g, "stablehlo.multiply", x, scale));
  return {ir::Binary(c.g, "stablehlo.divide", r, scale)};
}

// Integer rounding ops are the identity.
V IntIdentityOr(Ctx& c, const char* op) {
  Value x = Cast(c, c.In("self"), c.out[0].dtype);
  return {rt::IsFloat(c.out[0].dtype) ? ir::Unary(c.g, op, x) : x};
}

V Reciprocal(Ctx& c) {
  Value x = Cast(c, c.In("self"), c.out[0].dtype);
  return {ir::Binary(c.g, "stablehlo.divide", Splat(c, 1, x), x)};
}

V Log2Base(Ctx& c, double inv_ln_base) {
  Value x = Cast(c, c.In("self"), c.out[0].dtype);
  return {ir::Binary(c.g, "stablehlo.multiply", ir::Unary(c.g, "stablehlo.log", x),
                     Splat(c, inv_ln_base, x))};
}

V Exp2(Ctx& c) {
  Value x = Cast(c, c.In("self"), c.out[0].dtype);
  return {ir::Binary(c.g, "stablehlo.power", Splat(c, 2, x), x)};
}

// x ** e for the exponents PyTorch's CPU kernel also special-cases: a multiply or a square root
// instead of a call to pow per element (the exponent is a parameter, so XLA cannot see it).
std::optional<Value> PowBySpecialExponent(Ctx& c, Value x, double e) {
  auto mul = [&](Value a, Value b) { return ir::Binary(c.g, "stablehlo.multiply", a, b); };
  auto recip = [&](Value a) { return ir::Binary(c.g, "stablehlo.divide", Splat(c, 1, a), a); };
  bool fp = rt::IsFloat(c.T(x).dtype);
  if (e == 1) return x;
  if (e == 2) return mul(x, x);
  if (e == 3) return mul(mul(x, x), x);
  if (!fp) return std::nullopt;
  if (e == 0.5) return ir::Unary(c.g, "stablehlo.sqrt", x);
  if (e == -0.5) return ir::Unary(c.g, "stablehlo.rsqrt", x);
  if (e == -1) return recip(x);
  if (e == -2) return recip(mul(x, x));
  return std::nullopt;
}

V Pow(Ctx& c) {
  // pow.Scalar has the scalar as `self` and the tensor as `exponent`.
  Value base = InAsOut(c, "self");
  Value e = InAsOut(c, "exponent");
  const Arg* ea = c.Find("exponent");
  if (ea != nullptr && ea->has_host_scalar) {
    if (auto v = PowBySpecialExponent(c, base, ea->host_scalar)) return {*v};
  }
  return {ir::Binary(c.g, "stablehlo.power", base, e)};
}

V IsFinite(Ctx& c) {
  Value x = c.In("self");
  if (!rt::IsFloat(c.T(x).dtype)) return {Splat(c, 1, c.out[0])};
  return {c.g.Op1("stablehlo.is_finite", {x}, c.out[0])};
}

V IsNan(Ctx& c) {
  Value x = c.In("self");
  if (!rt::IsFloat(c.T(x).dtype)) return {Splat(c, 0, c.out[0])};
  return {ir::Compare(c.g, x, x, "NE")};
}

V IsInf(Ctx& c) {
  Value x = c.In("self");
  if (!rt::IsFloat(c.T(x).dtype)) return {Splat(c, 0, c.out[0])};
  Value a = ir::Unary(c.g, "stablehlo.abs", x);
  return {ir::Compare(c.g, a, Splat(c, INFINITY, a), "EQ")};
}

V Where(Ctx& c) {
  const Dims& dims = c.out[0].dims;
  Value cond = Cast(c, c.In("condition"), DType::kPred, dims);
  return {ir::Select(c.g, cond, InAsOut(c, "self"), InAsOut(c, "other"))};
}

// max/min that propagate NaN like PyTorch (XLA:CPU's maximum/minimum return the other operand).
Value MaxMin(Ctx& c, Value a, Value b, bool is_max) {
  DType t = c.T(a).dtype;
  if (t == DType::kPred) return ir::Binary(c.g, is_max ? "stablehlo.or" : "stablehlo.and", a, b);
  Value r = ir::Binary(c.g, is_max ? "stablehlo.maximum" : "stablehlo.minimum", a, b);
  if (!rt::IsFloat(t)) return r;
  r = ir::Select(c.g, ir::Compare(c.g, a, a, "NE"), a, r);
  return ir::Select(c.g, ir::Compare(c.g, b, b, "NE"), b, r);
}

// fmax/fmin: a NaN operand loses to a number.
V FMaxMin(Ctx& c, bool is_max) {
  Value a = InAsOut(c, "self"), b = InAsOut(c, "other");
  Value r = MaxMin(c, a, b, is_max);
  if (!rt::IsFloat(c.T(a).dtype)) return {r};
  r = ir::Select(c.g, ir::Compare(c.g, a, a, "NE"), b, r);
  return {ir::Select(c.g, ir::Compare(c.g, b, b, "NE"), a, r)};
}

// torch.equal: same shape and all elements equal (a host-read bool).
V Equal(Ctx& c) {
  Value a = c.In("self"), b = c.In("other");
  if (c.T(a).dims != c.T(b).dims) return {ir::Constant(c.g, 0, DType::kPred)};
  Dims all;
  for (int64_t i = 0; i < c.T(a).rank(); ++i) all.push_back(i);
  Value eq = ir::Compare(c.g, Cast(c, a, c.common), Cast(c, b, c.common), "EQ");
  return {ir::Reduce(c.g, eq, ir::Constant(c.g, 1, DType::kPred), all, "stablehlo.and")};
}

V Clamp(Ctx& c) {
  Value x = InAsOut(c, "self");
  if (c.Has("min")) x = MaxMin(c, x, InAsOut(c, "min"), true);
  if (c.Has("max")) x = MaxMin(c, x, InAsOut(c, "max"), false);
  return {x};
}

V MaskedFill(Ctx& c) {
  const Dims& dims = c.out[0].dims;
  Value mask = Cast(c, c.In("mask"), DType::kPred, dims);
  return {ir::Select(c.g, mask, InAsOut(c, "value"), InAsOut(c, "self"))};
}

// Same formula as PyTorch's lerp kernel, for matching rounding.
V Lerp(Ctx& c) {
  Value a = InAsOut(c, "self"), b = InAsOut(c, "end"), w = InAsOut(c, "weight");
  Value diff = ir::Binary(c.g, "stablehlo.subtract", b, a);
  Value mag = ir::Abs(c.g, w);  // real for complex weights
  Value small = ir::Compare(c.g, mag, Splat(c, 0.5, mag), "LT");
  Value lo = ir::Binary(c.g, "stablehlo.add", a, ir::Binary(c.g, "stablehlo.multiply", w, diff));
  Value one_minus = ir::Binary(c.g, "stablehlo.subtract", Splat(c, 1, w), w);
  Value hi = ir::Binary(c.g, "stablehlo.subtract", b,
                        ir::Binary(c.g, "stablehlo.multiply", diff, one_minus));
  return {ir::Select(c.g, small, lo, hi)};
}

V AddcOp(Ctx& c, const char* op) {
  Value t = ir::Binary(c.g, op, InAsOut(c, "tensor1"), InAsOut(c, "tensor2"));
  if (c.Has("value")) t = ir::Binary(c.g, "stablehlo.multiply", InAsOut(c, "value"), t);
  return {ir::Binary(c.g, "stablehlo.add", InAsOut(c, "self"), t)};
}

V Shift(Ctx& c, bool left) {
  bool is_signed = rt::IsSigned(c.out[0].dtype);
  return Bin(
      c, left ? "stablehlo.shift_left"
              : (is_signed ? "stablehlo.shift_right_arithmetic" : "stablehlo.shift_right_logical"));
}

V Sigmoid(Ctx& c) { return Un(c, "stablehlo.logistic"); }

V Sgn(Ctx& c) { return Sign(c); }

V Frac(Ctx& c) {
  Value x = Cast(c, c.In("self"), c.out[0].dtype);
  Value t = ir::Select(c.g, ir::Compare(c.g, x, Splat(c, 0, x), "LT"),
                       ir::Unary(c.g, "stablehlo.ceil", x), ir::Unary(c.g, "stablehlo.floor", x));
  return {ir::Binary(c.g, "stablehlo.subtract", x, t)};
}

V SquareOrSelfMul(Ctx& c) {
  Value x = Cast(c, c.In("self"), c.out[0].dtype);
  return {ir::Binary(c.g, "stablehlo.multiply", x, x)};
}

V Xlogy(Ctx& c) {
  Value x = InAsOut(c, "self"), y = InAsOut(c, "other");
  Value prod = ir::Binary(c.g, "stablehlo.multiply", x, ir::Unary(c.g, "stablehlo.log", y));
  Value zero = Splat(c, 0, x);
  Value r = ir::Select(c.g, ir::Compare(c.g, x, zero, "EQ"), zero, prod);
  return {ir::Select(c.g, ir::Compare(c.g, y, y, "NE"), y, r)};
}

V Copysign(Ctx& c) {
  Value a = ir::Unary(c.g, "stablehlo.abs", InAsOut(c, "self"));
  Value b = InAsOut(c, "other");
  // Sign bit of b (handles -0.0): compare through the bit pattern via atan2-free test.
  Value neg = ir::Compare(c.g, ir::Binary(c.g, "stablehlo.atan2", b, Splat(c, -1, b)),
                          Splat(c, 0, b), "LT");
  return {ir::Select(c.g, neg, ir::Unary(c.g, "stablehlo.negate", a), a)};
}

V Hypot(Ctx& c) {
  Value a = InAsOut(c, "self"), b = InAsOut(c, "other");
  Value s = ir::Binary(c.g, "stablehlo.add", ir::Binary(c.g, "stablehlo.multiply", a, a),
                       ir::Binary(c.g, "stablehlo.multiply", b, b));
  return {ir::Unary(c.g, "stablehlo.sqrt", s)};
}

// log(b^a + b^other) in base e or 2 (logaddexp2): the larger plus log1p of the smaller's ratio.
V LogAddExp(Ctx& c, bool base2) {
  Value a = InAsOut(c, "self"), b = InAsOut(c, "other");
  if (rt::IsComplex(c.out[0].dtype)) {
    if (base2) throw LoweringError("complex inputs are not supported");  // CPU refuses them too
    return {ComplexLogAddExp(c.g, a, b)};
  }
  Value m = ir::Binary(c.g, "stablehlo.maximum", a, b);
  Value d = ir::Unary(c.g, "stablehlo.negate",
                      ir::Unary(c.g, "stablehlo.abs", ir::Binary(c.g, "stablehlo.subtract", a, b)));
  Value e = base2 ? ir::Binary(c.g, "stablehlo.power", Splat(c, 2, d), d)
                  : ir::Unary(c.g, "stablehlo.exponential", d);
  Value l = ir::Unary(c.g, "stablehlo.log_plus_one", e);
  if (base2) l = ir::Binary(c.g, "stablehlo.multiply", l, Splat(c, 1 / M_LN2, l));
  Value r = ir::Binary(c.g, "stablehlo.add", m, l);
  // Equal infinities: the difference is NaN, the answer is the infinity itself.
  return {ir::Select(c.g, ir::Compare(c.g, a, b, "EQ"),
                     ir::Binary(c.g, "stablehlo.add", a, Splat(c, base2 ? 1 : M_LN2, a)), r)};
}

}  // namespace

void AddElementwiseRules(RuleMap& m) {
  m["aten::abs"] = Abs;
  m["aten::acos"] = +[](Ctx& c) { return Un(c, "chlo.acos"); };
  m["aten::acosh"] = +[](Ctx& c) { return Un(c, "chlo.acosh"); };
  m["aten::add"] = +[](Ctx& c) {
    const char* op = c.out[0].dtype == DType::kPred ? "stablehlo.or" : "stablehlo.add";
    return V{ir::Binary(c.g, op, InAsOut(c, "self"), Scaled(c, "other"))};
  };
  m["aten::addcdiv"] = +[](Ctx& c) { return AddcOp(c, "stablehlo.divide"); };
  m["aten::addcmul"] = +[](Ctx& c) { return AddcOp(c, "stablehlo.multiply"); };
  m["aten::asin"] = +[](Ctx& c) { return Un(c, "chlo.asin"); };
  m["aten::asinh"] = +[](Ctx& c) { return Un(c, "chlo.asinh"); };
  // Real atan as atan2(x, |sign(x)|): equal to atan2(x, 1) wherever it matters (|sign(0)| = 0
  // keeps atan(±0) = ±0; NaN stays NaN). XLA:CPU 0.11.2 turns atan2(x, 1) into its own atan,
  // which is wrong from about 64 elements on an AVX2 machine; its atan2 is right.
  m["aten::atan"] = +[](Ctx& c) -> V {
    if (rt::IsComplex(c.out[0].dtype)) return Un(c, "chlo.atan");
    Value x = InAsOut(c, "self");
    Value one = ir::Unary(c.g, "stablehlo.abs", ir::Unary(c.g, "stablehlo.sign", x));
    return {ir::Binary(c.g, "stablehlo.atan2", x, one)};
  };
  m["aten::atan2"] = +[](Ctx& c) { return Bin(c, "stablehlo.atan2"); };
  m["aten::atanh"] = +[](Ctx& c) { return Un(c, "chlo.atanh"); };
  m["aten::bitwise_and"] = +[](Ctx& c) { return Bin(c, "stablehlo.and"); };
  m["aten::bitwise_left_shift"] = +[](Ctx& c) { return Shift(c, true); };
  m["aten::bitwise_not"] = +[](Ctx& c) { return Un(c, "stablehlo.not"); };
  m["aten::bitwise_or"] = +[](Ctx& c) { return Bin(c, "stablehlo.or"); };
  m["aten::bitwise_right_shift"] = +[](Ctx& c) { return Shift(c, false); };
  m["aten::bitwise_xor"] = +[](Ctx& c) { return Bin(c, "stablehlo.xor"); };
  m["aten::ceil"] = +[](Ctx& c) { return IntIdentityOr(c, "stablehlo.ceil"); };
  m["aten::clamp"] = Clamp;
  m["aten::clamp_max"] =
      +[](Ctx& c) { return V{MaxMin(c, InAsOut(c, "self"), InAsOut(c, "max"), false)}; };
  m["aten::clamp_min"] =
      +[](Ctx& c) { return V{MaxMin(c, InAsOut(c, "self"), InAsOut(c, "min"), true)}; };
  m["aten::copysign"] = Copysign;
  m["aten::cos"] = +[](Ctx& c) { return Un(c, "stablehlo.cosine"); };
  m["aten::cosh"] = +[](Ctx& c) { return Un(c, "chlo.cosh"); };
  m["aten::digamma"] = +[](Ctx& c) { return Un(c, "chlo.digamma"); };
  m["aten::div"] = Div;
  m["aten::eq"] = +[](Ctx& c) { return Cmp(c, "EQ"); };
  m["aten::equal"] = Equal;
  m["aten::erf"] = +[](Ctx& c) { return Un(c, "chlo.erf"); };
  m["aten::erfc"] = +[](Ctx& c) { return Un(c, "chlo.erfc"); };
  m["aten::erfinv"] = +[](Ctx& c) { return Un(c, "chlo.erf_inv"); };
  m["aten::exp"] = +[](Ctx& c) { return Un(c, "stablehlo.exponential"); };
  m["aten::exp2"] = Exp2;
  m["aten::expm1"] = +[](Ctx& c) { return Un(c, "stablehlo.exponential_minus_one"); };
  m["aten::floor"] = +[](Ctx& c) { return IntIdentityOr(c, "stablehlo.floor"); };
  m["aten::floor_divide"] =
      +[](Ctx& c) { return V{FloorDivide(c, InAsOut(c, "self"), InAsOut(c, "other"))}; };
  m["aten::fmax"] = +[](Ctx& c) { return FMaxMin(c, true); };
  m["aten::fmin"] = +[](Ctx& c) { return FMaxMin(c, false); };
  m["aten::fmod"] = +[](Ctx& c) { return Bin(c, "stablehlo.remainder"); };
  m["aten::frac"] = Frac;
  m["aten::ge"] = +[](Ctx& c) { return Cmp(c, "GE"); };
  m["aten::gt"] = +[](Ctx& c) { return Cmp(c, "GT"); };
  m["aten::hypot"] = Hypot;
  m["aten::isfinite"] = IsFinite;
  m["aten::isinf"] = IsInf;
  m["aten::isnan"] = IsNan;
  m["aten::le"] = +[](Ctx& c) { return Cmp(c, "LE"); };
  m["aten::lerp"] = Lerp;
  m["aten::lgamma"] = +[](Ctx& c) { return Un(c, "chlo.lgamma"); };
  m["aten::log"] = +[](Ctx& c) { return Un(c, "stablehlo.log"); };
  m["aten::log10"] = +[](Ctx& c) { return Log2Base(c, 1.0 / M_LN10); };
  m["aten::log1p"] = +[](Ctx& c) { return Un(c, "stablehlo.log_plus_one"); };
  m["aten::log2"] = +[](Ctx& c) { return Log2Base(c, 1.0 / M_LN2); };
  m["aten::logaddexp"] = +[](Ctx& c) { return LogAddExp(c, false); };
  m["aten::logaddexp2"] = +[](Ctx& c) { return LogAddExp(c, true); };
  m["aten::logical_and"] = +[](Ctx& c) { return Logical(c, "stablehlo.and"); };
  m["aten::logical_not"] = +[](Ctx& c) {
    Value x = Cast(c, c.In("self"), DType::kPred);
    return V{Cast(c, ir::Unary(c.g, "stablehlo.not", x), c.out[0].dtype)};
  };
  m["aten::logical_or"] = +[](Ctx& c) { return Logical(c, "stablehlo.or"); };
  m["aten::logical_xor"] = +[](Ctx& c) { return Logical(c, "stablehlo.xor"); };
  m["aten::lt"] = +[](Ctx& c) { return Cmp(c, "LT"); };
  m["aten::masked_fill"] = MaskedFill;
  m["aten::maximum"] =
      +[](Ctx& c) { return V{MaxMin(c, InAsOut(c, "self"), InAsOut(c, "other"), true)}; };
  m["aten::minimum"] =
      +[](Ctx& c) { return V{MaxMin(c, InAsOut(c, "self"), InAsOut(c, "other"), false)}; };
  m["aten::mul"] = +[](Ctx& c) {
    return Bin(c, c.out[0].dtype == DType::kPred ? "stablehlo.and" : "stablehlo.multiply");
  };
  m["aten::ne"] = +[](Ctx& c) { return Cmp(c, "NE"); };
  m["aten::neg"] = +[](Ctx& c) { return Un(c, "stablehlo.negate"); };
  m["aten::pow"] = Pow;
  m["aten::reciprocal"] = Reciprocal;
  m["aten::remainder"] = Remainder;
  m["aten::round"] = Round;
  m["aten::rsqrt"] = +[](Ctx& c) { return Un(c, "stablehlo.rsqrt"); };
  m["aten::sgn"] = Sgn;
  m["aten::sigmoid"] = Sigmoid;
  m["aten::sign"] = Sign;
  m["aten::sin"] = +[](Ctx& c) { return Un(c, "stablehlo.sine"); };
  m["aten::sinh"] = +[](Ctx& c) { return Un(c, "chlo.sinh"); };
  m["aten::sqrt"] = +[](Ctx& c) { return Un(c, "stablehlo.sqrt"); };
  m["aten::square"] = SquareOrSelfMul;
  m["aten::rsub"] = +[](Ctx& c) {
    return V{ir::Binary(c.g, "stablehlo.subtract", InAsOut(c, "other"), Scaled(c, "self"))};
  };
  m["aten::sub"] = +[](Ctx& c) {
    return V{ir::Binary(c.g, "stablehlo.subtract", InAsOut(c, "self"), Scaled(c, "other"))};
  };
  m["aten::tan"] = +[](Ctx& c) { return Un(c, "chlo.tan"); };
  m["aten::tanh"] = +[](Ctx& c) { return Un(c, "stablehlo.tanh"); };
  m["aten::trunc"] = +[](Ctx& c) {
    Value x = Cast(c, c.In("self"), c.out[0].dtype);
    if (!rt::IsFloat(c.out[0].dtype)) return V{x};
    return V{ir::Select(c.g, ir::Compare(c.g, x, Splat(c, 0, x), "LT"),
                        ir::Unary(c.g, "stablehlo.ceil", x), ir::Unary(c.g, "stablehlo.floor", x))};
  };
  m["aten::where"] = Where;
  m["aten::xlogy"] = Xlogy;
}

}  // namespace tpu::lowering
