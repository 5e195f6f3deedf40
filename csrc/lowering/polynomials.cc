// The classical orthogonal polynomials of torch.special (Chebyshev T/U/V/W and their shifted
// forms, Hermite H/He, Laguerre L, Legendre P) evaluated at x for a degree tensor n.
// Each is its three-term recurrence, run as one stablehlo.while up to the largest degree and
// computed in the result dtype as ATen's CPU kernels do; an element takes the term of its own
// degree (truncated toward zero, as ATen casts it), and a negative degree gives 0.
#include "lowering/helpers.h"
#include "lowering/rule_table.h"

namespace tpu::lowering {
namespace {

enum class Family {
  kChebyshevT,
  kChebyshevU,
  kChebyshevV,
  kChebyshevW,
  kHermiteH,
  kHermiteHe,
  kLaguerre,
  kLegendre
};

Value Bin(Graph& g, const char* op, Value a, Value b) { return ir::Binary(g, op, a, b); }
Value Full(Graph& g, double v, const Type& t) { return ir::Constant(g, v, t.dtype, t.dims); }

// P_1(x); P_0 is 1 for every family.
Value First(Graph& g, Family f, Value x) {
  const Type& t = g.type(x);
  switch (f) {
    case Family::kChebyshevT:
    case Family::kHermiteHe:
    case Family::kLegendre:
      return x;
    case Family::kChebyshevU:
    case Family::kHermiteH:
      return Bin(g, "stablehlo.add", x, x);
    case Family::kChebyshevV:
      return Bin(g, "stablehlo.subtract", Bin(g, "stablehlo.add", x, x), Full(g, 1, t));
    case Family::kChebyshevW:
      return Bin(g, "stablehlo.add", Bin(g, "stablehlo.add", x, x), Full(g, 1, t));
    case Family::kLaguerre:
      return Bin(g, "stablehlo.subtract", Full(g, 1, t), x);
  }
  return x;
}

// P_{k+1} from p = P_{k-1} and q = P_k; k is an s64 scalar.
Value Next(Graph& g, Family f, Value x, Value p, Value q, Value k) {
  const Type& t = g.type(x);
  Value kf = ir::BroadcastInDim(g, ir::Convert(g, k, t.dtype), t.dims, {});
  auto mul = [&](Value a, Value b) { return Bin(g, "stablehlo.multiply", a, b); };
  auto sub = [&](Value a, Value b) { return Bin(g, "stablehlo.subtract", a, b); };
  auto add = [&](Value a, Value b) { return Bin(g, "stablehlo.add", a, b); };
  Value two_k_1 = add(add(kf, kf), Full(g, 1, t));
  Value k_1 = add(kf, Full(g, 1, t));
  switch (f) {
    case Family::kChebyshevT:
    case Family::kChebyshevU:
    case Family::kChebyshevV:
    case Family::kChebyshevW:
      return sub(mul(add(x, x), q), p);
    case Family::kHermiteH:
      return sub(mul(add(x, x), q), mul(add(kf, kf), p));
    case Family::kHermiteHe:
      return sub(mul(x, q), mul(kf, p));
    case Family::kLaguerre:
      return Bin(g, "stablehlo.divide", sub(mul(sub(two_k_1, x), q), mul(kf, p)), k_1);
    case Family::kLegendre:
      return Bin(g, "stablehlo.divide", sub(mul(mul(two_k_1, x), q), mul(kf, p)), k_1);
  }
  return q;
}

std::vector<Value> Polynomial(Ctx& c, Family f, bool shifted) {
  const Type& t = c.out[0];
  Value x = InAsOut(c, "x");
  if (shifted) x = Sub(c, Add(c, x, x), Splat(c, 1, t));
  Value n = ir::Convert(c.g, InAsOut(c, "n"), DType::kS64);
  Type nt{DType::kS64, t.dims};
  auto is = [&](Graph& g, Value deg, double k) {
    return ir::Compare(g, deg, ir::Constant(g, k, DType::kS64, t.dims), "EQ");
  };
  Value p = Splat(c, 1, t), q = First(c.g, f, x);
  Value out = ir::Select(c.g, is(c.g, n, 0), p, ir::Select(c.g, is(c.g, n, 1), q, Splat(c, 0, t)));
  // The loop's last degree (at least 1, where it stops at once).
  Value top =
      ir::Reduce(c.g, n, ir::Constant(c.g, 1, DType::kS64), AllDims(t.rank()), "stablehlo.maximum");
  // State: x, n, P_{k-1}, P_k, the result so far (k counts from 1 up to the largest degree).
  std::vector<Value> init{x, n, p, q, out};
  auto step = [&](Graph& h, Value k, std::vector<Value>& st) {
    Value r = Next(h, f, st[0], st[2], st[3], k);
    Value k1 = Bin(h, "stablehlo.add", k, ir::Constant(h, 1, DType::kS64));
    Value hit = ir::Compare(h, st[1], ir::BroadcastInDim(h, k1, nt.dims, {}), "EQ");
    return std::vector<Value>{st[0], st[1], st[3], r, ir::Select(h, hit, r, st[4])};
  };
  return {ForUpTo(c.g, 1, top, init, step)[4]};
}

}  // namespace

void AddPolynomialRules(RuleMap& m) {
  using F = Family;
  m["aten::special_chebyshev_polynomial_t"] =
      +[](Ctx& c) { return Polynomial(c, F::kChebyshevT, false); };
  m["aten::special_chebyshev_polynomial_u"] =
      +[](Ctx& c) { return Polynomial(c, F::kChebyshevU, false); };
  m["aten::special_chebyshev_polynomial_v"] =
      +[](Ctx& c) { return Polynomial(c, F::kChebyshevV, false); };
  m["aten::special_chebyshev_polynomial_w"] =
      +[](Ctx& c) { return Polynomial(c, F::kChebyshevW, false); };
  m["aten::special_shifted_chebyshev_polynomial_t"] =
      +[](Ctx& c) { return Polynomial(c, F::kChebyshevT, true); };
  m["aten::special_shifted_chebyshev_polynomial_u"] =
      +[](Ctx& c) { return Polynomial(c, F::kChebyshevU, true); };
  m["aten::special_shifted_chebyshev_polynomial_v"] =
      +[](Ctx& c) { return Polynomial(c, F::kChebyshevV, true); };
  m["aten::special_shifted_chebyshev_polynomial_w"] =
      +[](Ctx& c) { return Polynomial(c, F::kChebyshevW, true); };
  m["aten::special_hermite_polynomial_h"] =
      +[](Ctx& c) { return Polynomial(c, F::kHermiteH, false); };
  m["aten::special_hermite_polynomial_he"] =
      +[](Ctx& c) { return Polynomial(c, F::kHermiteHe, false); };
  m["aten::special_laguerre_polynomial_l"] =
      +[](Ctx& c) { return Polynomial(c, F::kLaguerre, false); };
  m["aten::special_legendre_polynomial_p"] =
      +[](Ctx& c) { return Polynomial(c, F::kLegendre, false); };
}

}  // namespace tpu::lowering
