// Bessel functions of torch.special from their integral representations, summed by rules that
// converge geometrically for these integrands: the trapezoidal rule for the smooth periodic (J)
// and doubly exponentially decaying (K) ones,
//   J0(x) = (1/pi) int_0^pi cos(x sin t) dt,  J1(x) = (1/pi) int_0^pi sin t sin(x sin t) dt,
//   K0(x) = int_0^inf e^(-x cosh t) dt,       K1(x) = int_0^inf cosh t e^(-x cosh t) dt,
// and for Y (x > 0)
//   Y0(x) = (1/pi) int_0^pi sin(x sin t) dt - (2/pi) int_0^inf e^(-x sinh t) dt,
//   Y1(x) = (1/pi) int_0^pi sin(x sin t - t) dt - (2/pi) int_0^inf sinh t e^(-x sinh t) dt,
// Gauss-Legendre on [0, pi] and the trapezoidal rule after t = e^((pi/2) sinh u) on the half
// line. J and Y switch to Hankel's asymptotic expansion for large |x|, where the nodes no longer
// resolve the oscillation; K uses its series below 1e-4, where the integrand's tail would need
// more nodes. Scaled K (e^x K) is summed without the e^-x, so it never underflows. Airy's Ai is
// built from the same pieces (see AiryAi).
#include <cmath>
#include <vector>

#include "lowering/helpers.h"
#include "lowering/rule_table.h"

namespace tpu::lowering {
namespace {

using V = std::vector<Value>;

using Ew = Elementwise;

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

// Hankel's large-x form of J (cosine) or Y (sine): sqrt(2 / (pi x)) (P cos chi - Q sin chi) or
// (P sin chi + Q cos chi), chi = x - (2 nu + 1) pi / 4.
Value HankelFar(const Ew& e, Value ax, int nu, bool y) {
  auto [p, q] = HankelPq(e, ax, nu);
  Value chi = e.B("stablehlo.subtract", ax, e.K(M_PI / 4 * (2 * nu + 1)));
  Value cs = e.U("stablehlo.cosine", chi), sn = e.U("stablehlo.sine", chi);
  Value amp = e.U("stablehlo.sqrt", e.Div(e.K(2 / M_PI), ax));
  Value v =
      y ? e.Add(e.Mul(p, sn), e.Mul(q, cs)) : e.B("stablehlo.subtract", e.Mul(p, cs), e.Mul(q, sn));
  return e.Mul(amp, v);
}

// J0 or J1 of x (order 0 is even, order 1 odd).
V BesselJ(Ctx& c, int order) {
  const Type t{AccOf(c.out[0].dtype), c.out[0].dims};
  Ew e{c.g, t.dtype, t.dims};
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
  Value r = e.Sel(e.Cmp(ax, 60, "GT"), HankelFar(e, ax, order, false), quad);
  if (order == 1) r = e.Sel(e.Cmp(x, 0, "LT"), e.U("stablehlo.negate", r), r);
  r = e.Sel(e.Cmp(ax, INFINITY, "EQ"), e.K(NAN), r);  // CPU's value at +-inf
  return {Cast(c, r, c.out[0].dtype)};
}

// Gauss-Legendre nodes and weights on [0, pi] (Newton's method on P_n, in double on the host).
std::pair<std::vector<double>, std::vector<double>> LegendreNodes(int n) {
  std::vector<double> t(n), w(n);
  for (int i = 0; i < n; ++i) {
    double z = std::cos(M_PI * (i + 0.75) / (n + 0.5)), dp = 1;
    for (int it = 0; it < 100; ++it) {
      double p0 = 1, p1 = z;
      for (int k = 2; k <= n; ++k) {
        const double p2 = ((2.0 * k - 1) * z * p1 - (k - 1.0) * p0) / k;
        p0 = p1, p1 = p2;
      }
      dp = n * (z * p1 - p0) / (z * z - 1);
      const double dz = p1 / dp;
      z -= dz;
      if (std::abs(dz) < 1e-16) break;
    }
    t[i] = M_PI / 2 * (1 - z);
    w[i] = M_PI / ((1 - z * z) * dp * dp);  // the [-1, 1] weight 2 / ((1 - z^2) P'^2), times pi/2
  }
  return {t, w};
}

// int_0^pi f(t) dt by 64 Gauss-Legendre nodes: f(t) gives the integrand's value at node t.
template <typename F>
Value OverPi(const Ew& e, F f) {
  static const auto nodes = LegendreNodes(64);
  Value sum = e.K(0);
  for (size_t k = 0; k < nodes.first.size(); ++k) {
    sum = e.Add(sum, e.Mul(e.K(nodes.second[k]), f(nodes.first[k])));
  }
  return sum;
}

// int_0^inf weight(t) e^(-z sinh t) dt with t = e^((pi/2) sinh u), u in [-4, 4] at steps of 1/16:
// each node is exp(-z sinh t + log(weight(t) dt/du)), all but z known here.
template <typename W>
Value OverHalfLine(const Ew& e, Value z, W weight) {
  constexpr double h = 1.0 / 16;
  Value sum = e.K(0);
  for (int k = -64; k <= 64; ++k) {
    const double u = k * h, tt = std::exp(M_PI / 2 * std::sinh(u));
    const double logw = std::log(h * tt * M_PI / 2 * std::cosh(u) * weight(tt));
    if (!std::isfinite(logw)) continue;  // t so large that the node is 0 for every z > 0
    sum = e.Add(sum, e.U("stablehlo.exponential", e.Add(e.Mul(z, e.K(-std::sinh(tt))), e.K(logw))));
  }
  return sum;
}

// e^z K_nu(z) = int_0^inf e^(-z (cosh t - 1)) cosh(nu t) dt by the trapezoid, with cosh t - 1 =
// 2 sinh^2(t / 2). Above z = 1 the peak narrows like 1 / sqrt(z), and so do the nodes' spacing
// and span.
Value ScaledK(const Ew& e, Value z, double nu) {
  Value w = e.U("stablehlo.rsqrt", e.B("stablehlo.maximum", z, e.K(1)));
  auto cosh = [&](Value v) {
    return e.Mul(e.K(0.5), e.Add(e.U("stablehlo.exponential", v),
                                 e.U("stablehlo.exponential", e.U("stablehlo.negate", v))));
  };
  auto sinh = [&](Value v) {
    return e.Mul(e.K(0.5), e.B("stablehlo.subtract", e.U("stablehlo.exponential", v),
                               e.U("stablehlo.exponential", e.U("stablehlo.negate", v))));
  };
  Value sum = e.K(0);
  for (int k = 0; k <= kSteps; ++k) {
    Value tk = e.Mul(w, e.K(k * kStep));
    Value sh = sinh(e.Mul(tk, e.K(0.5)));
    Value ch1 = e.Mul(e.K(2), e.Mul(sh, sh));
    Value term = e.U("stablehlo.exponential", e.Mul(e.U("stablehlo.negate", z), ch1));
    if (nu == 1) {
      term = e.Mul(term, e.Add(ch1, e.K(1)));
    } else if (nu != 0) {
      term = e.Mul(term, cosh(e.Mul(tk, e.K(nu))));
    }
    sum = e.Add(sum, k == 0 ? e.Mul(term, e.K(0.5)) : term);
  }
  return e.Mul(e.Mul(sum, w), e.K(kStep));
}

// Y0 or Y1 of x (NaN below 0, -inf at 0).
V BesselY(Ctx& c, int order) {
  const Type t{AccOf(c.out[0].dtype), c.out[0].dims};
  Ew e{c.g, t.dtype, t.dims};
  Value x = Cast(c, c.In("self"), t.dtype, t.dims);
  // The two integrals (|x| <= 25 here).
  Value first = OverPi(e, [&](double th) {
    return e.Mul(e.K(1 / M_PI),
                 e.U("stablehlo.sine", e.Add(e.Mul(x, e.K(std::sin(th))), e.K(-order * th))));
  });
  Value second =
      OverHalfLine(e, x, [&](double tt) { return 2 / M_PI * (order == 1 ? std::sinh(tt) : 1.0); });
  Value r = e.B("stablehlo.subtract", first, second);
  // Below 2 (where the half-line integrand turns too sharp for the nodes), the series: with
  // y = x^2 / 4, L = log(x / 2) + gamma and H_k = 1 + 1/2 + ... + 1/k,
  //   Y0 = (2/pi) (L J0 + sum_{k>=1} (-1)^(k+1) H_k y^k / k!^2),
  //   Y1 = (2/pi) (L J1 - 1/x) - (x / (2 pi)) sum_{k>=0} (-y)^k (H_k + H_{k+1}) / (k! (k+1)!),
  // 14 terms each (the next is below 1e-20 at x = 2).
  Value y = e.Mul(e.Mul(x, x), e.K(0.25));
  Value l = e.Add(e.U("stablehlo.log", e.Mul(x, e.K(0.5))), e.K(0.5772156649015329));
  Value j = e.K(0), tail = e.K(0), yk = e.K(1);
  double fact = 1, harmonic = 0;  // k!, H_k
  for (int k = 0; k < 14; ++k) {
    if (k > 0) fact *= k, harmonic += 1.0 / k;
    const double sign = k % 2 == 0 ? 1 : -1, next = harmonic + 1.0 / (k + 1);
    if (order == 0) {
      j = e.Add(j, e.Mul(yk, e.K(sign / (fact * fact))));
      if (k > 0) tail = e.Add(tail, e.Mul(yk, e.K(-sign * harmonic / (fact * fact))));
    } else {
      j = e.Add(j, e.Mul(yk, e.K(sign / (fact * fact * (k + 1)))));
      tail = e.Add(tail, e.Mul(yk, e.K(sign * (harmonic + next) / (fact * fact * (k + 1)))));
    }
    yk = e.Mul(yk, y);
  }
  Value near;
  if (order == 0) {
    near = e.Mul(e.K(2 / M_PI), e.Add(e.Mul(l, j), tail));
  } else {
    Value half = e.Mul(x, e.K(0.5));
    Value j1 = e.Mul(half, j);
    near = e.B("stablehlo.subtract",
               e.Mul(e.K(2 / M_PI), e.B("stablehlo.subtract", e.Mul(l, j1), e.Div(e.K(1), x))),
               e.Mul(e.Mul(half, e.K(1 / M_PI)), tail));
  }
  r = e.Sel(e.Cmp(x, 2, "LT"), near, r);
  r = e.Sel(e.Cmp(x, 25, "GT"), HankelFar(e, x, order, true), r);
  r = e.Sel(e.Cmp(x, 0, "EQ"), e.K(-INFINITY), r);
  r = e.Sel(e.Cmp(x, INFINITY, "EQ"), e.K(NAN), r);
  r = e.Sel(e.Cmp(x, 0, "LT"), e.K(NAN), r);
  return {Cast(c, r, c.out[0].dtype)};
}

// K0 or K1 of x, times e^x when scaled.
V BesselK(Ctx& c, int order, bool scaled) {
  const Type t{AccOf(c.out[0].dtype), c.out[0].dims};
  Ew e{c.g, t.dtype, t.dims};
  Value x = Cast(c, c.In(scaled ? "x" : "self"), t.dtype, t.dims);
  Value r = ScaledK(e, x, order);  // e^x K(x)
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

// Airy's Ai. Below |x| = 1 its Maclaurin series; above, through Bessel functions of order 1/3
// with zeta = (2/3) |x|^(3/2):
//   x > 0:  Ai(x) = (1/pi) sqrt(x/3) K_1/3(zeta), K_1/3(zeta) = int_0^inf e^(-zeta cosh t)
//           cosh(t/3) dt, summed as K0 is;
//   x < 0:  Ai(x) = (sqrt|x| / 3) (J_1/3 + J_-1/3)(zeta) = (sqrt|x| / 3) ((2/pi) int_0^pi
//           cos(t/3) cos(zeta sin t) dt + (sqrt 3 / pi) int_0^inf e^(-zeta sinh t) sinh(t/3) dt),
//           summed as Y is, and for zeta > 25 the oscillating asymptotic series.
V AiryAi(Ctx& c) {
  const Type t{AccOf(c.out[0].dtype), c.out[0].dims};
  Ew e{c.g, t.dtype, t.dims};
  Value x = Cast(c, c.In("x"), t.dtype, t.dims);
  Value ax = e.U("stablehlo.abs", x);
  Value zeta = e.Mul(e.K(2.0 / 3), e.Mul(ax, e.U("stablehlo.sqrt", ax)));
  // Maclaurin: Ai(x) = c1 f(x) - c2 g(x), f = sum x^3k / ((2*3)(5*6)...), g = x sum x^3k /
  // ((3*4)(6*7)...).
  Value x3 = e.Mul(e.Mul(x, x), x);
  Value f = e.K(1), g = e.K(1), fk = e.K(1), gk = e.K(1);
  for (int k = 0; k < 20; ++k) {
    fk = e.Mul(fk, e.Mul(x3, e.K(1.0 / ((3.0 * k + 2) * (3.0 * k + 3)))));
    gk = e.Mul(gk, e.Mul(x3, e.K(1.0 / ((3.0 * k + 3) * (3.0 * k + 4)))));
    f = e.Add(f, fk), g = e.Add(g, gk);
  }
  Value near = e.B("stablehlo.subtract", e.Mul(e.K(0.355028053887817239), f),
                   e.Mul(e.K(0.258819403792806798), e.Mul(x, g)));
  // x > 0: K_1/3, summed as K0 is.
  Value kthird =
      e.Mul(e.U("stablehlo.exponential", e.U("stablehlo.negate", zeta)), ScaledK(e, zeta, 1.0 / 3));
  Value right = e.Mul(e.Mul(e.K(1 / M_PI), e.U("stablehlo.sqrt", e.Mul(ax, e.K(1.0 / 3)))), kthird);
  // x < 0, zeta <= 25.
  Value osc = OverPi(e, [&](double th) {
    return e.Mul(e.K(std::cos(th / 3) * 2 / M_PI),
                 e.U("stablehlo.cosine", e.Mul(zeta, e.K(std::sin(th)))));
  });
  Value line =
      OverHalfLine(e, zeta, [](double tt) { return std::sinh(tt / 3) * std::sqrt(3.0) / M_PI; });
  Value left = e.Mul(e.Mul(e.U("stablehlo.sqrt", ax), e.K(1.0 / 3)), e.Add(osc, line));
  // x < 0, zeta > 25: pi^-1/2 |x|^-1/4 (sin(zeta + pi/4) S_even - cos(zeta + pi/4) S_odd) with
  // u_k = u_{k-1} (6k - 5)(6k - 3)(6k - 1) / ((2k - 1) 216 k) and alternating signs in each sum.
  Value inv = e.Div(e.K(1), zeta);
  Value even = e.K(0), odd = e.K(0), pw = e.K(1);
  double uk = 1;
  for (int k = 0; k < 8; ++k) {
    if (k > 0) uk *= (6.0 * k - 5) * (6.0 * k - 3) * (6.0 * k - 1) / ((2.0 * k - 1) * 216 * k);
    const double sign = (k / 2) % 2 == 0 ? 1 : -1;
    Value term = e.Mul(pw, e.K(sign * uk));
    if (k % 2 == 0)
      even = e.Add(even, term);
    else
      odd = e.Add(odd, term);
    pw = e.Mul(pw, inv);
  }
  Value phase = e.Add(zeta, e.K(M_PI / 4));
  Value amp = e.Div(e.K(1 / std::sqrt(M_PI)), e.U("stablehlo.sqrt", e.U("stablehlo.sqrt", ax)));
  Value far = e.Mul(amp, e.B("stablehlo.subtract", e.Mul(e.U("stablehlo.sine", phase), even),
                             e.Mul(e.U("stablehlo.cosine", phase), odd)));
  left = e.Sel(e.Cmp(zeta, 25, "GT"), far, left);
  Value r = e.Sel(e.Cmp(x, 0, "GT"), right, left);
  r = e.Sel(e.Cmp(ax, 1, "LT"), near, r);
  r = e.Sel(e.Cmp(ax, INFINITY, "EQ"), e.K(NAN), r);
  return {Cast(c, r, c.out[0].dtype)};
}

}  // namespace

void AddBesselRules(RuleMap& m) {
  m["aten::special_airy_ai"] = AiryAi;
  m["aten::special_bessel_j0"] = +[](Ctx& c) { return BesselJ(c, 0); };
  m["aten::special_bessel_j1"] = +[](Ctx& c) { return BesselJ(c, 1); };
  m["aten::special_bessel_y0"] = +[](Ctx& c) { return BesselY(c, 0); };
  m["aten::special_bessel_y1"] = +[](Ctx& c) { return BesselY(c, 1); };
  m["aten::special_modified_bessel_k0"] = +[](Ctx& c) { return BesselK(c, 0, false); };
  m["aten::special_modified_bessel_k1"] = +[](Ctx& c) { return BesselK(c, 1, false); };
  m["aten::special_scaled_modified_bessel_k0"] = +[](Ctx& c) { return BesselK(c, 0, true); };
  m["aten::special_scaled_modified_bessel_k1"] = +[](Ctx& c) { return BesselK(c, 1, true); };
}

}  // namespace tpu::lowering
