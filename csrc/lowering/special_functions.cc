// Pointwise functions of torch.special and their neighbours: nan_to_num, nextafter, signbit, sinc,
// entr, xlog1py, zeta, ndtri, log_ndtr, spherical_bessel_j0, erfcx. Half types compute in float32
// and round once, as ATen's CPU kernels do.
#include <cmath>

#include "lowering/helpers.h"
#include "lowering/rule_table.h"

namespace tpu::lowering {
namespace {

using V = std::vector<Value>;

// A named input in the accumulation type of the result, broadcast to its shape.
Value Acc(Ctx& c, const char* name) {
  return Cast(c, c.In(name), AccOf(c.out[0].dtype), c.out[0].dims);
}
V Done(Ctx& c, Value r) { return {Cast(c, r, c.out[0].dtype)}; }
Value Un(Ctx& c, const char* op, Value x) { return ir::Unary(c.g, op, x); }
Value Cmp(Ctx& c, Value a, Value b, const char* dir) { return ir::Compare(c.g, a, b, dir); }
// Compares with a constant (a distinct name: Value is an integer id, so an overload would take 0).
Value CmpTo(Ctx& c, Value a, double b, const char* dir) { return Cmp(c, a, Splat(c, b, a), dir); }
Value IsNan(Ctx& c, Value x) { return Cmp(c, x, x, "NE"); }
Value And(Ctx& c, Value a, Value b) { return ir::Binary(c.g, "stablehlo.and", a, b); }
Value Not(Ctx& c, Value a) { return Un(c, "stablehlo.not", a); }

V NanToNum(Ctx& c) {
  Value x = Cast(c, c.In("self"), c.out[0].dtype);
  DType t = c.out[0].dtype;
  if (!rt::IsFloat(t)) return {x};
  Value r = ir::Select(c.g, IsNan(c, x), Splat(c, c.Double("nan", 0), x), x);
  r = ir::Select(c.g, CmpTo(c, x, INFINITY, "EQ"), Splat(c, c.Double("posinf", HighestOf(t)), x),
                 r);
  return {ir::Select(c.g, CmpTo(c, x, -INFINITY, "EQ"),
                     Splat(c, c.Double("neginf", LowestOf(t)), x), r)};
}

// The sign bit itself, so -0.0 and negative NaNs count as negative.
V Signbit(Ctx& c) {
  Value x = c.In("self");
  DType t = c.T(x).dtype;
  if (t == DType::kPred || rt::IsUnsigned(t)) return {Splat(c, 0, c.out[0])};
  if (!rt::IsFloat(t)) return {CmpTo(c, x, 0, "LT")};
  DType bits = rt::ItemSize(t) == 8   ? DType::kS64
               : rt::ItemSize(t) == 4 ? DType::kS32
                                      : DType::kS16;
  Value i = ir::BitcastConvert(c.g, x, Type{bits, c.T(x).dims});
  return {CmpTo(c, i, 0, "LT")};
}

V Sinc(Ctx& c) {
  Value x = Acc(c, "self");
  Value px = Mul(c, x, Splat(c, M_PI, x));
  Value r = Div(c, Un(c, "stablehlo.sine", px), px);
  return Done(c, ir::Select(c.g, CmpTo(c, x, 0, "EQ"), Splat(c, 1, x), r));
}

// -x log x for x > 0, 0 at 0, -inf below; NaN stays NaN.
V Entr(Ctx& c) {
  Value x = Acc(c, "self");
  Value r = Mul(c, Un(c, "stablehlo.negate", x), Un(c, "stablehlo.log", x));
  r = ir::Select(c.g, CmpTo(c, x, 0, "EQ"), Splat(c, 0, x), r);
  r = ir::Select(c.g, CmpTo(c, x, 0, "LT"), Splat(c, -INFINITY, x), r);
  return Done(c, r);
}

// x log1p(y), with 0 where x is 0 unless y is NaN.
V Xlog1py(Ctx& c) {
  Value x = Acc(c, "self"), y = Acc(c, "other");
  Value r = Mul(c, x, Un(c, "stablehlo.log_plus_one", y));
  r = ir::Select(c.g, CmpTo(c, x, 0, "EQ"), Splat(c, 0, x), r);
  return Done(c, ir::Select(c.g, IsNan(c, y), y, r));
}

// Hurwitz zeta(x, q), with Cephes' (and ATen's) answers at the poles and outside the domain.
V Zeta(Ctx& c) {
  Value x = Acc(c, "self"), q = Acc(c, "other");
  Value r = ir::Binary(c.g, "chlo.zeta", x, q);
  auto integral = [&](Value v) { return Cmp(c, v, Un(c, "stablehlo.floor", v), "EQ"); };
  Value q_low = CmpTo(c, q, 0, "LE");
  Value nan = Splat(c, NAN, x), inf = Splat(c, INFINITY, x);
  r = ir::Select(c.g, And(c, q_low, Not(c, integral(x))), nan, r);
  r = ir::Select(c.g, And(c, q_low, integral(q)), inf, r);
  r = ir::Select(c.g, CmpTo(c, x, 1, "LT"), nan, r);
  return Done(c, ir::Select(c.g, CmpTo(c, x, 1, "EQ"), inf, r));
}

V Nextafter(Ctx& c) {
  return {ir::Binary(c.g, "chlo.next_after", InAsOut(c, "self"), InAsOut(c, "other"))};
}

// The standard normal quantile: sqrt(2) erfinv(2p - 1).
V Ndtri(Ctx& c) {
  Value p = Acc(c, "self");
  Value y = Sub(c, Add(c, p, p), Splat(c, 1, p));
  return Done(c, Mul(c, Un(c, "chlo.erf_inv", y), Splat(c, M_SQRT2, p)));
}

// log of the standard normal CDF. Above -1 it is log1p(-erfc(x/sqrt2)/2); below, log(erfc)
// while erfc is representable, then the asymptotic series of Mills' ratio, which the tail
// reaches well before erfc underflows (its next term is under 1e-7 there).
V LogNdtr(Ctx& c) {
  Value x = Acc(c, "self");
  DType t = c.T(x).dtype;
  Value half = Splat(c, 0.5, x);
  Value e = Un(c, "chlo.erfc", Mul(c, x, Splat(c, -M_SQRT1_2, x)));  // erfc(-x/sqrt2) = 2 Phi(x)
  Value mid = Un(c, "stablehlo.log", Mul(c, e, half));
  Value hi = Un(c, "stablehlo.log_plus_one",
                Mul(c, Un(c, "chlo.erfc", Mul(c, x, Splat(c, M_SQRT1_2, x))), Splat(c, -0.5, x)));
  Value r2 = Div(c, Splat(c, 1, x), Mul(c, x, x));
  // 1 - 1/x^2 + 3/x^4 - 15/x^6 + 105/x^8, by Horner in 1/x^2.
  Value s = Splat(c, 105, x);
  for (double k : {-15.0, 3.0, -1.0, 1.0}) s = Add(c, Mul(c, s, r2), Splat(c, k, x));
  Value tail = Sub(c, Mul(c, Mul(c, x, x), Splat(c, -0.5, x)),
                   Add(c, Un(c, "stablehlo.log", Un(c, "stablehlo.negate", x)),
                       Splat(c, 0.5 * std::log(2 * M_PI), x)));
  tail = Add(c, tail, Un(c, "stablehlo.log", s));
  double cut = t == DType::kF64 ? -30 : -10;
  Value r = ir::Select(c.g, CmpTo(c, x, cut, "LT"), tail, mid);
  return Done(c, ir::Select(c.g, CmpTo(c, x, -1, "LT"), r, hi));
}

// sin(x)/x; its Taylor series near 0, where the quotient loses digits; 0 at the infinities.
V SphericalBesselJ0(Ctx& c) {
  Value x = Acc(c, "x");
  Value x2 = Mul(c, x, x);
  Value s = Splat(c, -1.0 / 39916800, x);
  for (double k : {1.0 / 362880, -1.0 / 5040, 1.0 / 120, -1.0 / 6, 1.0})
    s = Add(c, Mul(c, s, x2), Splat(c, k, x));
  Value r = Div(c, Un(c, "stablehlo.sine", x), x);
  r = ir::Select(c.g, CmpTo(c, Un(c, "stablehlo.abs", x), 0.5, "LT"), s, r);
  return Done(
      c, ir::Select(c.g, CmpTo(c, Un(c, "stablehlo.abs", x), INFINITY, "EQ"), Splat(c, 0, x), r));
}

// erfcx(x) = exp(x^2) erfc(x). Below 2 directly (it overflows to inf for very negative x, as on
// CPU); from 2 on, where erfc underflows first, Laplace's continued fraction
// 1 / (sqrt(pi) (x + (1/2) / (x + 1 / (x + (3/2) / (x + ...))))), evaluated from the tail, with
// enough terms for the dtype (relative error 2e-7 in float32, 1e-15 in float64 at x = 2).
V Erfcx(Ctx& c) {
  Value x = Acc(c, "self");
  const bool wide = c.T(x).dtype == DType::kF64;
  Value t = x;
  for (int k = wide ? 60 : 20; k > 0; --k) t = Add(c, x, Div(c, Splat(c, k / 2.0, x), t));
  Value tail = Div(c, Splat(c, 1.0, x), Mul(c, t, Splat(c, std::sqrt(M_PI), x)));
  Value direct = Mul(c, Un(c, "stablehlo.exponential", Mul(c, x, x)), Un(c, "chlo.erfc", x));
  return Done(c, ir::Select(c.g, CmpTo(c, x, 2.0, "LT"), direct, tail));
}

}  // namespace

void AddSpecialFunctionRules(RuleMap& m) {
  m["aten::special_erfcx"] = Erfcx;
  m["aten::nan_to_num"] = NanToNum;
  m["aten::nextafter"] = Nextafter;
  m["aten::signbit"] = Signbit;
  m["aten::sinc"] = Sinc;
  m["aten::special_entr"] = Entr;
  m["aten::special_log_ndtr"] = LogNdtr;
  m["aten::special_ndtri"] = Ndtri;
  m["aten::special_spherical_bessel_j0"] = SphericalBesselJ0;
  m["aten::special_xlog1py"] = Xlog1py;
  m["aten::special_zeta"] = Zeta;
}

}  // namespace tpu::lowering
