// igamma and igammac: the regularized incomplete gamma functions P(a, x) and Q(a, x) = 1 - P.
// Below x = a + 1 the power series of P converges fast; above it, Legendre's continued fraction
// of Q (evaluated by Lentz's method). Each is one stablehlo.while that runs until every element
// has converged (at most 20000 terms), and the other function is 1 minus it. Edge values follow
// PyTorch's CPU kernel: NaN for negative arguments, P(0, x > 0) = 1, P(a, 0) = 0, P(a, inf) = 1.
#include <cmath>

#include "lowering/helpers.h"
#include "lowering/rule_table.h"

namespace tpu::lowering {
namespace {

using V = std::vector<Value>;

using Ops = Elementwise;

// Whether any element of pred p holds.
Value Any(const Ops& o, Value p) {
  return ir::Reduce(o.g, p, ir::Constant(o.g, 0, DType::kPred), AllDims(o.d.size()),
                    "stablehlo.or");
}
// |v| kept away from 0 (Lentz's tiny).
Value Tiny(const Ops& o, Value v) { return o.Sel(o.Lt(o.Abs(v), o.K(1e-30)), o.K(1e-30), v); }

// The next state, except where `stop` holds (converged elements keep theirs).
V Frozen(const Ops& q, Value stop, const V& old, const V& next) {
  V r(next.size());
  for (size_t i = 0; i < next.size(); ++i) r[i] = q.Sel(stop, old[i], next[i]);
  return r;
}

double Eps(DType t) { return t == DType::kF64 ? 2.3e-16 : 1.2e-7; }  // one ulp of 1
// Near x = a both need about sqrt(2 a log(1 / eps)) terms: 20000 covers a up to about 5e6.
constexpr double kMaxTerms = 20000;

// Runs `step(ops, state)` on every element until `done(ops, state)` holds for all (at most
// kMaxTerms times); converged elements keep their state.
template <typename Done, typename Step>
V Converge(Graph& g, const Type& t, const V& init, Done done, Step step) {
  auto cond = [&](Graph& h, Value j, const V& s) {
    Ops q{h, t.dtype, t.dims};
    Value left = ir::Compare(h, j, ir::Constant(h, kMaxTerms, DType::kS64), "LT");
    return ir::Binary(h, "stablehlo.and", left, Any(q, ir::Unary(h, "stablehlo.not", done(q, s))));
  };
  auto body = [&](Graph& h, Value, V& s) {
    Ops q{h, t.dtype, t.dims};
    return Frozen(q, done(q, s), s, step(q, s));
  };
  return detail::Counted(g, 0, 1, init, cond, body);
}

// sum_{n >= 0} x^n / (a (a+1) ... (a+n)), the series of P without its prefactor.
Value Series(Graph& g, Value a, Value x) {
  const Type t = g.type(a);
  Ops o{g, t.dtype, t.dims};
  Value term = o.Div(o.K(1), a);
  auto done = [&](const Ops& q, const V& s) {
    return ir::Compare(q.g, q.Abs(s[1]), q.Mul(q.Abs(s[3]), q.K(Eps(t.dtype))), "LE");
  };
  auto step = [&](const Ops& q, const V& s) {
    Value ap = q.Add(s[0], q.K(1));
    Value next = q.Mul(s[1], q.Div(s[2], ap));
    return V{ap, next, s[2], q.Add(s[3], next)};
  };
  return Converge(g, t, {a, term, x, term}, done, step)[3];
}

// Lentz's evaluation of Q's continued fraction, without its prefactor.
Value Fraction(Graph& g, Value a, Value x) {
  const Type t = g.type(a);
  Ops o{g, t.dtype, t.dims};
  Value b = o.Sub(o.Add(x, o.K(1)), a);
  Value d = o.Div(o.K(1), Tiny(o, b));
  // State: b, c, d, h, last factor, a, i (as a float).
  V init{b, o.K(1e30), d, d, o.K(0), a, o.K(0)};
  auto done = [&](const Ops& q, const V& s) {
    return ir::Compare(q.g, q.Abs(q.Sub(s[4], q.K(1))), q.K(Eps(t.dtype)), "LE");
  };
  auto step = [&](const Ops& q, const V& s) {
    Value i = q.Add(s[6], q.K(1));
    Value an = q.Mul(q.Sub(q.K(0), i), q.Sub(i, s[5]));
    Value bb = q.Add(s[0], q.K(2));
    Value dd = q.Div(q.K(1), Tiny(q, q.Add(q.Mul(an, s[2]), bb)));
    Value cc = Tiny(q, q.Add(bb, q.Div(an, s[1])));
    Value del = q.Mul(dd, cc);
    return V{bb, cc, dd, q.Mul(s[3], del), del, s[5], i};
  };
  return Converge(g, t, init, done, step)[3];
}

V Igamma(Ctx& c, bool upper) {
  const Type& out = c.out[0];
  const DType t = AccOf(out.dtype);
  if (out.numel() == 0) return {Splat(c, 0, out)};
  Graph& g = c.g;
  Ops o{g, t, out.dims};
  Value a = Cast(c, c.In("self"), t, out.dims), x = Cast(c, c.In("other"), t, out.dims);
  // Elements that take the other branch get harmless arguments (1, 1), so no loop runs long on
  // their account.
  Value use_series = o.Lt(x, o.Add(a, o.K(1)));
  Value sa = o.Sel(use_series, a, o.K(1)), sx = o.Sel(use_series, x, o.K(1));
  Value fa = o.Sel(use_series, o.K(1), a), fx = o.Sel(use_series, o.K(1), x);
  // x^a e^-x / Gamma(a). For a >= 10 its log, a log x - x - lgamma(a), cancels large terms, so
  // there it is -a (eta - log1p(eta)) + log(a / 2 pi) / 2 - (Stirling's series), eta = x / a - 1.
  auto prefactor = [&](Value aa, Value xx) {
    Value lg = ir::Unary(g, "chlo.lgamma", aa);
    Value direct = o.Sub(o.Sub(o.Mul(aa, ir::Unary(g, "stablehlo.log", xx)), xx), lg);
    Value eta = o.Sub(o.Div(xx, aa), o.K(1));
    Value dev = o.Mul(aa, o.Sub(eta, ir::Unary(g, "stablehlo.log_plus_one", eta)));
    Value inv = o.Div(o.K(1), aa), inv2 = o.Mul(inv, inv);
    Value series = o.Mul(
        inv,
        o.Sub(o.K(1.0 / 12), o.Mul(inv2, o.Sub(o.K(1.0 / 360), o.Mul(inv2, o.K(1.0 / 1260))))));
    Value half_log = o.Mul(o.K(0.5), ir::Unary(g, "stablehlo.log", o.Div(aa, o.K(2 * M_PI))));
    Value stirling = o.Sub(o.Sub(half_log, dev), series);
    Value e = o.Sel(o.Lt(aa, o.K(10)), direct, stirling);
    return ir::Unary(g, "stablehlo.exponential", e);
  };
  Value p = o.Mul(prefactor(sa, sx), Series(g, sa, sx));
  Value q = o.Mul(prefactor(fa, fx), Fraction(g, fa, fx));
  Value r = upper ? o.Sel(use_series, o.Sub(o.K(1), p), q) : o.Sel(use_series, p, o.Sub(o.K(1), q));
  // Edges, in CPU's order of precedence.
  auto eq = [&](Value v, double k) { return ir::Compare(g, v, o.K(k), "EQ"); };
  const double one = upper ? 0 : 1, zero = upper ? 1 : 0;
  Value inf_x = eq(x, INFINITY), inf_a = eq(a, INFINITY);
  r = o.Sel(eq(x, 0), o.K(zero), r);
  r = o.Sel(inf_x, o.K(one), r);
  r = o.Sel(inf_a, o.Sel(inf_x, o.K(NAN), o.K(zero)), r);
  r = o.Sel(eq(a, 0), o.Sel(ir::Compare(g, x, o.K(0), "GT"), o.K(one), o.K(NAN)), r);
  Value bad = ir::Binary(g, "stablehlo.or", o.Lt(a, o.K(0)), o.Lt(x, o.K(0)));
  bad = ir::Binary(
      g, "stablehlo.or", bad,
      ir::Binary(g, "stablehlo.or", ir::Compare(g, a, a, "NE"), ir::Compare(g, x, x, "NE")));
  r = o.Sel(bad, o.K(NAN), r);
  return {Cast(c, r, out.dtype)};
}

}  // namespace

void AddIgammaRules(RuleMap& m) {
  m["aten::igamma"] = +[](Ctx& c) { return Igamma(c, false); };
  m["aten::igammac"] = +[](Ctx& c) { return Igamma(c, true); };
}

}  // namespace tpu::lowering
