// Bessel functions of torch.special from their integral representations, summed by the
// trapezoidal rule, which converges geometrically for these smooth periodic (J) or doubly
// exponentially decaying (K) integrands:
//   J0(x) = (1/pi) int_0^pi cos(x sin t) dt,  J1(x) = (1/pi) int_0^pi sin t sin(x sin t) dt,
//   K0(x) = int_0^inf e^(-x cosh t) dt,       K1(x) = int_0^inf cosh t e^(-x cosh t) dt.
// J switches to Hankel's asymptotic expansion above |x| = 60, where 64 nodes no longer resolve
// the oscillation; K uses its leading small-x terms below 1e-4, where the integrand's tail would
// need more nodes. Scaled K (e^x K) is summed without the e^-x, so it never underflows.
#include <cmath>
#include <vector>

#include "lowering/helpers.h"
#include "lowering/rule_table.h"

namespace tpu::lowering {
namespace {

using V = std::vector<Value>;

struct Ew {  // elementwise shorthand on one type
  Ctx& c;
  Type t;
  Value K(double v) const { return Splat(c, v, t); }
  Value B(const char* op, Value a, Value b) const { return ir::Binary(c.g, op, a, b); }
  Value U(const char* op, Value a) const { return ir::Unary(c.g, op, a); }
  Value Add(Value a, Value b) const { return B("stablehlo.add", a, b); }
  Value Mul(Value a, Value b) const { return B("stablehlo.multiply", a, b); }
  Value Div(Value a, Value b) const { return B("stablehlo.divide", a, b); }
  Value Sel(Value p, Value a, Value b) const { return ir::Select(c.g, p, a, b); }
  Value Cmp(Value a, double b, const char* dir) const { return ir::Compare(c.g, a, K(b), dir); }
};

constexpr int kNodes = 64;      // J's trapezoid nodes on [0, pi)
constexpr double kStep = 0.25;  // K's trapezoid step in t
constexpr int kSteps = 56;      // K's nodes: t up to 14 (14 / sqrt(x) above x = 1), where the
                                // integrand is below e^-25 of its peak for x >= 1e-4

// Hankel's P and Q for order nu (mu = 4 nu^2), to the (8x)^-6 terms.
std::pair<Value, Value> HankelPq(const Ew& e, Value ax, int nu) {
  const double mu = 4.0 * nu * nu;
  Value z = e.Div(e.K(1), e.Mul(e.K(8), ax));  // 1 / (8x)
  Value z2 = e.Mul(z, z);
  // Terms a_k = prod_{j=1..k} (mu - (2j - 1)^2) / (k! (8x)^k); P takes even k with alternating
  // signs, Q odd k.
  double a[7] = {1, 0, 0, 0, 0, 0, 0};
  for (int k = 1; k <= 6; ++k) a[k] = a[k - 1] * (mu - (2.0 * k - 1) * (2.0 * k - 1)) / k;
  Value p = e.Add(e.K(1),
                  e.Mul(z2, e.Add(e.K(-a[2]), e.Mul(z2, e.Add(e.K(a[4]), e.Mul(z2, e.K(-a[6])))))));
  Value q = e.Mul(z, e.Add(e.K(a[1]), e.Mul(z2, e.Add(e.K(-a[3]), e.Mul(z2, e.K(a[5]))))));
  return {p, q};
}

// J0 or J1 of x (order 0 is even, order 1 odd).
V BesselJ(Ctx& c, int order) {
  const Type t{AccOf(c.out[0].dtype), c.out[0].dims};
  Ew e{c, t};
  Value x = Cast(c, c.In("self"), t.dtype, t.dims);
  Value ax = e.U("stablehlo.abs", x);
  Value sum = e.K(0);
  for (int k = 0; k < kNodes; ++k) {
    const double th = M_PI * k / kNodes, s = std::sin(th);
    Value arg = e.Mul(ax, e.K(s));
    Value term =
        order == 0 ? e.U("stablehlo.cosine", arg) : e.Mul(e.K(s), e.U("stablehlo.sine", arg));
    sum = e.Add(sum, term);
  }
  Value quad = e.Div(sum, e.K(kNodes));
  auto [p, q] = HankelPq(e, ax, order);
  Value chi = e.B("stablehlo.subtract", ax, e.K(M_PI / 4 * (2 * order + 1)));
  Value amp = e.U("stablehlo.sqrt", e.Div(e.K(2 / M_PI), ax));
  Value far = e.Mul(amp, e.B("stablehlo.subtract", e.Mul(p, e.U("stablehlo.cosine", chi)),
                             e.Mul(q, e.U("stablehlo.sine", chi))));
  Value r = e.Sel(e.Cmp(ax, 60, "GT"), far, quad);
  if (order == 1) r = e.Sel(e.Cmp(x, 0, "LT"), e.U("stablehlo.negate", r), r);
  r = e.Sel(e.Cmp(ax, INFINITY, "EQ"), e.K(NAN), r);  // CPU's value at +-inf
  return {Cast(c, r, c.out[0].dtype)};
}

// K0 or K1 of x, times e^x when scaled.
V BesselK(Ctx& c, int order, bool scaled) {
  const Type t{AccOf(c.out[0].dtype), c.out[0].dims};
  Ew e{c, t};
  Value x = Cast(c, c.In(scaled ? "x" : "self"), t.dtype, t.dims);
  // e^(-x (cosh t - 1)) with cosh t - 1 = 2 sinh^2(t / 2), weighted by cosh t for K1. Above
  // x = 1 its peak narrows like 1 / sqrt(x), and so do the nodes' spacing and span.
  Value w = e.U("stablehlo.rsqrt", e.B("stablehlo.maximum", x, e.K(1)));
  Value sum = e.K(0);
  for (int k = 0; k <= kSteps; ++k) {
    Value half = e.Mul(w, e.K(k * kStep / 2));
    Value sinh_half =
        e.Mul(e.K(0.5), e.B("stablehlo.subtract", e.U("stablehlo.exponential", half),
                            e.U("stablehlo.exponential", e.U("stablehlo.negate", half))));
    Value ch1 = e.Mul(e.K(2), e.Mul(sinh_half, sinh_half));
    Value term = e.U("stablehlo.exponential", e.Mul(e.U("stablehlo.negate", x), ch1));
    if (order == 1) term = e.Mul(term, e.Add(ch1, e.K(1)));
    sum = e.Add(sum, k == 0 ? e.Mul(term, e.K(0.5)) : term);
  }
  Value r = e.Mul(e.Mul(sum, w), e.K(kStep));  // e^x K(x)
  // Below 1e-4, their series to x^2: with L = log(x / 2) + gamma and y = x^2 / 4,
  // K0 = -L (1 + y) + y and K1 = 1 / x + (x / 2) (L - 1/2) (the next terms are below 1e-16).
  Value l = e.Add(e.U("stablehlo.log", e.Mul(x, e.K(0.5))), e.K(0.5772156649015329));
  Value y = e.Mul(e.Mul(x, x), e.K(0.25));
  Value small = order == 0
                    ? e.B("stablehlo.subtract", y, e.Mul(l, e.Add(e.K(1), y)))
                    : e.Add(e.Div(e.K(1), x), e.Mul(e.Mul(x, e.K(0.5)), e.Add(l, e.K(-0.5))));
  Value expx = e.U("stablehlo.exponential", x);
  small = scaled ? e.Mul(small, expx) : small;
  if (!scaled) r = e.Mul(r, e.U("stablehlo.exponential", e.U("stablehlo.negate", x)));
  r = e.Sel(e.Cmp(x, 1e-4, "LT"), small, r);
  r = e.Sel(e.Cmp(x, 0, "EQ"), e.K(INFINITY), r);
  r = e.Sel(e.Cmp(x, INFINITY, "EQ"), e.K(0), r);
  r = e.Sel(e.Cmp(x, 0, "LT"), e.K(NAN), r);
  return {Cast(c, r, c.out[0].dtype)};
}

}  // namespace

void AddBesselRules(RuleMap& m) {
  m["aten::special_bessel_j0"] = +[](Ctx& c) { return BesselJ(c, 0); };
  m["aten::special_bessel_j1"] = +[](Ctx& c) { return BesselJ(c, 1); };
  m["aten::special_modified_bessel_k0"] = +[](Ctx& c) { return BesselK(c, 0, false); };
  m["aten::special_modified_bessel_k1"] = +[](Ctx& c) { return BesselK(c, 1, false); };
  m["aten::special_scaled_modified_bessel_k0"] = +[](Ctx& c) { return BesselK(c, 0, true); };
  m["aten::special_scaled_modified_bessel_k1"] = +[](Ctx& c) { return BesselK(c, 1, true); };
}

}  // namespace tpu::lowering
