// Special functions and search/histogram ops: isposinf/isneginf, heaviside, log_sigmoid, angle,
// frexp, Bessel i0/i0e/i1/i1e (Cephes Chebyshev series, as ATen), polygamma, kthvalue,
// bucketize/searchsorted/isin (counting comparisons), cummax/cummin, linalg_cross, cdist, histc,
// index_reduce, segment_reduce, _batch_norm_with_update, hash_tensor.
#include <algorithm>
#include <cmath>
#include <limits>

#include "lowering/helpers.h"
#include "lowering/rule_table.h"

namespace tpu::lowering {
namespace {

using V = std::vector<Value>;

Value Un(Ctx& c, const char* op, Value x) { return ir::Unary(c.g, op, x); }
Value IsNan(Ctx& c, Value x) { return ir::Compare(c.g, x, x, "NE"); }
Value Or(Ctx& c, Value a, Value b) { return ir::Binary(c.g, "stablehlo.or", a, b); }
Value And(Ctx& c, Value a, Value b) { return ir::Binary(c.g, "stablehlo.and", a, b); }
Value Not(Ctx& c, Value a) { return ir::Unary(c.g, "stablehlo.not", a); }

// Half types are computed in f32 (as ATen's CPU kernels do).

Dims Iota(int64_t n, int64_t from = 0) {
  Dims d(n);
  for (int64_t i = 0; i < n; ++i) d[i] = from + i;
  return d;
}

// 0-d operands are treated as 1-element vectors.
Value Lift(Ctx& c, Value x) { return c.T(x).rank() == 0 ? ir::Reshape(c.g, x, {1}) : x; }

// max/min of two scalars that propagates NaN (XLA:CPU's maximum/minimum drop it).
std::shared_ptr<ir::Graph> NanMaxMinRegion(DType t, bool is_max) {
  auto r = std::make_shared<ir::Graph>();
  Type s{t, {}};
  Value a = r->Param(s), b = r->Param(s);
  Value m = ir::Binary(*r, is_max ? "stablehlo.maximum" : "stablehlo.minimum", a, b);
  if (rt::IsFloat(t)) {
    m = ir::Select(*r, ir::Compare(*r, b, b, "NE"), b, m);
    m = ir::Select(*r, ir::Compare(*r, a, a, "NE"), a, m);
  }
  r->results = {m};
  return r;
}

// Reduction region for "sum"/"prod"/"amax"/"amin" (aliases "max"/"min"/"mean").
std::shared_ptr<ir::Graph> ReduceRegion(DType t, const std::string& reduce) {
  if (reduce == "amax" || reduce == "max") return NanMaxMinRegion(t, true);
  if (reduce == "amin" || reduce == "min") return NanMaxMinRegion(t, false);
  if (reduce == "prod") return ir::ScalarRegion(t, "stablehlo.multiply");
  if (reduce == "sum" || reduce == "mean") return ir::ScalarRegion(t, "stablehlo.add");
  if (reduce.empty()) return ir::OverwriteRegion(t);
  throw LoweringError("unsupported reduce '" + reduce + "'");
}

// Elementwise form of ReduceRegion.
Value Combine(Ctx& c, Value a, Value b, const std::string& reduce) {
  if (reduce == "sum") return Add(c, a, b);
  if (reduce == "prod") return Mul(c, a, b);
  bool is_max = reduce == "amax" || reduce == "max";
  Value m = ir::Binary(c.g, is_max ? "stablehlo.maximum" : "stablehlo.minimum", a, b);
  if (!rt::IsFloat(c.T(a).dtype)) return m;
  return ir::Select(c.g, IsNan(c, a), a, ir::Select(c.g, IsNan(c, b), b, m));
}

double ReduceIdentity(DType t, const std::string& reduce) {
  if (reduce == "prod") return 1;
  if (reduce == "amax" || reduce == "max") return LowestOf(t);
  if (reduce == "amin" || reduce == "min") return HighestOf(t);
  return 0;
}

Value ReduceWith(Ctx& c, Value x, double init, const Dims& dims, const std::string& reduce) {
  DType t = c.T(x).dtype;
  Dims out;
  for (int64_t i = 0; i < c.T(x).rank(); ++i) {
    if (std::find(dims.begin(), dims.end(), i) == dims.end()) out.push_back(c.T(x).dims[i]);
  }
  return c.g.Op1("stablehlo.reduce", {x, ir::Constant(c.g, init, t)}, Type{t, out},
                 "dimensions = " + ir::I64Array(dims), {ReduceRegion(t, reduce)});
}

// ---- elementwise ----

V IsInfSigned(Ctx& c, double inf) {
  Value x = c.In("self");
  if (!rt::IsFloat(c.T(x).dtype)) return {Splat(c, 0, c.out[0])};
  return {ir::Compare(c.g, x, Splat(c, inf, x), "EQ")};
}

V Heaviside(Ctx& c) {
  Value x = InAsOut(c, "self"), v = InAsOut(c, "values");
  Value zero = Splat(c, 0, x);
  Value pos = Cast(c, ir::Compare(c.g, x, zero, "GT"), c.out[0].dtype);
  return {ir::Select(c.g, ir::Compare(c.g, x, zero, "EQ"), v, pos)};
}

// ATen's CPU formula: out = min(x, 0) - log1p(exp(-|x|)), buffer = exp(-|x|).
V LogSigmoidForward(Ctx& c) {
  DType t = c.out[0].dtype;
  Value x = Cast(c, c.In("self"), AccOf(t));
  Value z = Un(c, "stablehlo.exponential", Un(c, "stablehlo.negate", Un(c, "stablehlo.abs", x)));
  Value zero = Splat(c, 0, x);
  Value mn = ir::Select(c.g, ir::Compare(c.g, x, zero, "GE"), zero, x);  // keeps NaN
  Value out = Sub(c, mn, Un(c, "stablehlo.log_plus_one", z));
  // CUDA-style empty buffers (dims {0}) are allowed: backward recomputes exp(-|x|).
  Value buf = c.out[1].dims == c.T(x).dims ? Cast(c, z, c.out[1].dtype) : Splat(c, 0, c.out[1]);
  return {Cast(c, out, t), buf};
}

V LogSigmoidBackward(Ctx& c) {
  const Type& out = c.out[0];
  DType acc = AccOf(out.dtype);
  Value x = Cast(c, c.In("self"), acc, out.dims);
  Value g = Cast(c, c.In("grad_output"), acc, out.dims);
  Value z = Un(c, "stablehlo.exponential", Un(c, "stablehlo.negate", Un(c, "stablehlo.abs", x)));
  Value neg = ir::Compare(c.g, x, Splat(c, 0, x), "LT");
  Value max_deriv = ir::Select(c.g, neg, Splat(c, 1, x), Splat(c, 0, x));
  Value sign = ir::Select(c.g, neg, Splat(c, 1, x), Splat(c, -1, x));
  Value frac = Div(c, z, Add(c, Splat(c, 1, z), z));
  return {Cast(c, Mul(c, Sub(c, max_deriv, Mul(c, sign, frac)), g), out.dtype)};
}

// Real inputs: pi for negatives, 0 otherwise, NaN stays NaN.
V Angle(Ctx& c) {
  if (rt::IsComplex(c.T(c.In("self")).dtype)) {
    Value z = c.In("self");
    return {Cast(c, ir::Binary(c.g, "stablehlo.atan2", ir::Imag(c.g, z), ir::Real(c.g, z)),
                 c.out[0].dtype)};
  }
  Value x = Cast(c, c.In("self"), c.out[0].dtype);
  Value r =
      ir::Select(c.g, ir::Compare(c.g, x, Splat(c, 0, x), "LT"), Splat(c, M_PI, x), Splat(c, 0, x));
  return {ir::Select(c.g, IsNan(c, x), x, r)};
}

// Mantissa in [0.5, 1) and exponent from the IEEE bits; subnormals are normalized with
// count_leading_zeros so the result does not depend on flush-to-zero.
V Frexp(Ctx& c) {
  DType t = c.out[0].dtype;
  bool f64 = t == DType::kF64;
  DType ft = f64 ? DType::kF64 : DType::kF32, bt = f64 ? DType::kS64 : DType::kS32;
  int64_t width = f64 ? 64 : 32, mbits = f64 ? 52 : 23, emask = f64 ? 0x7ff : 0xff;
  int64_t bias = f64 ? 1022 : 126;
  Value x = Cast(c, c.In("self"), ft);
  const Dims& dims = c.T(x).dims;
  auto k = [&](int64_t v) { return ir::IntConstant(c.g, static_cast<uint64_t>(v), bt, dims); };
  Value bits = ir::BitcastConvert(c.g, x, Type{bt, dims});
  Value efield = And(c, ir::Binary(c.g, "stablehlo.shift_right_logical", bits, k(mbits)), k(emask));
  int64_t frac_mask = (int64_t{1} << mbits) - 1;
  Value frac = And(c, bits, k(frac_mask));
  Value subnormal = ir::Compare(c.g, efield, k(0), "EQ");
  // Shift that moves a subnormal's leading one onto the implicit-one bit.
  Value shift = Sub(c, Un(c, "stablehlo.count_leading_zeros", frac), k(width - 1 - mbits));
  Value norm_frac =
      ir::Select(c.g, subnormal,
                 And(c, ir::Binary(c.g, "stablehlo.shift_left", frac, shift), k(frac_mask)), frac);
  Value e = Sub(c, ir::Select(c.g, subnormal, Sub(c, k(1), shift), efield), k(bias));
  Value sign = And(c, bits, k(f64 ? std::numeric_limits<int64_t>::min() : int64_t{-2147483648}));
  Value mbits_v = Or(c, sign, Or(c, k(bias << mbits), norm_frac));
  Value mant = ir::BitcastConvert(c.g, mbits_v, Type{ft, dims});
  Value special = Or(c, ir::Compare(c.g, x, Splat(c, 0, x), "EQ"),
                     Not(c, c.g.Op1("stablehlo.is_finite", {x}, Type{DType::kPred, dims})));
  mant = ir::Select(c.g, special, x, mant);
  e = ir::Select(c.g, special, k(0), e);
  return {Cast(c, mant, t), Cast(c, e, c.out[1].dtype)};
}

// ---- Bessel functions (ATen's calc_i0/i0e/i1/i1e) ----

const std::vector<double> kI0A = {
    -4.41534164647933937950E-18, 3.33079451882223809783E-17,  -2.43127984654795469359E-16,
    1.71539128555513303061E-15,  -1.16853328779934516808E-14, 7.67618549860493561688E-14,
    -4.85644678311192946090E-13, 2.95505266312963983461E-12,  -1.72682629144155570723E-11,
    9.67580903537323691224E-11,  -5.18979560163526290666E-10, 2.65982372468238665035E-9,
    -1.30002500998624804212E-8,  6.04699502254191894932E-8,   -2.67079385394061173391E-7,
    1.11738753912010371815E-6,   -4.41673835845875056359E-6,  1.64484480707288970893E-5,
    -5.75419501008210370398E-5,  1.88502885095841655729E-4,   -5.76375574538582365885E-4,
    1.63947561694133579842E-3,   -4.32430999505057594430E-3,  1.05464603945949983183E-2,
    -2.37374148058994688156E-2,  4.93052842396707084878E-2,   -9.49010970480476444210E-2,
    1.71620901522208775349E-1,   -3.04682672343198398683E-1,  6.76795274409476084995E-1};
const std::vector<double> kI0B = {
    -7.23318048787475395456E-18, -4.83050448594418207126E-18, 4.46562142029675999901E-17,
    3.46122286769746109310E-17,  -2.82762398051658348494E-16, -3.42548561967721913462E-16,
    1.77256013305652638360E-15,  3.81168066935262242075E-15,  -9.55484669882830764870E-15,
    -4.15056934728722208663E-14, 1.54008621752140982691E-14,  3.85277838274214270114E-13,
    7.18012445138366623367E-13,  -1.79417853150680611778E-12, -1.32158118404477131188E-11,
    -3.14991652796324136454E-11, 1.18891471078464383424E-11,  4.94060238822496958910E-10,
    3.39623202570838634515E-9,   2.26666899049817806459E-8,   2.04891858946906374183E-7,
    2.89137052083475648297E-6,   6.88975834691682398426E-5,   3.36911647825569408990E-3,
    8.04490411014108831608E-1};
// i1: ATen uses the full Cephes tables for double and their tails for float.
const std::vector<double> kI1A = {
    2.77791411276104639959E-18,  -2.11142121435816608115E-17, 1.55363195773620046921E-16,
    -1.10559694773538630805E-15, 7.60068429473540693410E-15,  -5.04218550472791168711E-14,
    3.22379336594557470981E-13,  -1.98397439776494371520E-12, 1.17361862988909016308E-11,
    -6.66348972350202774223E-11, 3.62559028155211703701E-10,  -1.88724975172282928790E-9,
    9.38153738649577178388E-9,   -4.44505912879632808065E-8,  2.00329475355213526229E-7,
    -8.56872026469545474066E-7,  3.47025130813767847674E-6,   -1.32731636560394358279E-5,
    4.78156510755005422638E-5,   -1.61760815825896745588E-4,  5.12285956168575772895E-4,
    -1.51357245063125314899E-3,  4.15642294431288815669E-3,   -1.05640848946261981558E-2,
    2.47264490306265168283E-2,   -5.29459812080949914269E-2,  1.02643658689847095384E-1,
    -1.76416518357834055153E-1,  2.52587186443633654823E-1};
const std::vector<double> kI1B = {
    7.51729631084210481353E-18,  4.41434832307170791151E-18,  -4.65030536848935832153E-17,
    -3.20952592199342395980E-17, 2.96262899764595013876E-16,  3.30820231092092828324E-16,
    -1.88035477551078244854E-15, -3.81440307243700780478E-15, 1.04202769841288027642E-14,
    4.27244001671195135429E-14,  -2.10154184277266431302E-14, -4.08355111109219731823E-13,
    -7.19855177624590851209E-13, 2.03562854414708950722E-12,  1.41258074366137813316E-11,
    3.25260358301548823856E-11,  -1.89749581235054123450E-11, -5.58974346219658380687E-10,
    -3.83538038596423702205E-9,  -2.63146884688951950684E-8,  -2.51223623787020892529E-7,
    -3.88256480887769039346E-6,  -1.10588938762623716291E-4,  -9.76109749136146840777E-3,
    7.78576235018280120474E-1};
constexpr size_t kI1AFloatFrom = 12;  // float tables: kI1A[12:] (17 terms), kI1B[18:] (7 terms)
constexpr size_t kI1BFloatFrom = 18;

// Cephes chbevl: Clenshaw recurrence over the coefficient table, in the same operation order.
Value Chbevl(Ctx& c, Value y, const std::vector<double>& coef, size_t from = 0) {
  Value b0 = Splat(c, coef[from], y), b1 = Splat(c, 0, y), b2 = b1;
  for (size_t i = from + 1; i < coef.size(); ++i) {
    b2 = b1;
    b1 = b0;
    b0 = Add(c, Sub(c, Mul(c, y, b1), b2), Splat(c, coef[i], y));
  }
  return Mul(c, Splat(c, 0.5, y), Sub(c, b0, b2));
}

// order 0 or 1; scaled: multiplied by exp(-|x|) (i0e, i1e).
V Bessel(Ctx& c, int order, bool scaled) {
  DType t = c.out[0].dtype, acc = AccOf(t);
  bool f64 = acc == DType::kF64;
  Value x0 = Cast(c, c.In("self"), acc);
  Value x = Un(c, "stablehlo.abs", x0);
  Value small_y = Sub(c, Div(c, x, Splat(c, 2, x)), Splat(c, 2, x));
  Value large_y = Sub(c, Div(c, Splat(c, 32, x), x), Splat(c, 2, x));
  Value small, large;
  if (order == 0) {
    small = Chbevl(c, small_y, kI0A);
    large = Chbevl(c, large_y, kI0B);
  } else {
    small = Chbevl(c, small_y, kI1A, f64 ? 0 : kI1AFloatFrom);
    large = Chbevl(c, large_y, kI1B, f64 ? 0 : kI1BFloatFrom);
  }
  Value ex = Un(c, "stablehlo.exponential", x);
  if (order == 0) {
    if (!scaled) small = Mul(c, ex, small);
    if (!scaled) large = Mul(c, ex, large);
  } else {
    small = scaled ? Mul(c, small, x) : Mul(c, Mul(c, ex, x), small);
    if (!scaled) large = Mul(c, ex, large);
  }
  large = Div(c, large, Un(c, "stablehlo.sqrt", x));
  Value r = ir::Select(c.g, ir::Compare(c.g, x, Splat(c, 8, x), "LE"), small, large);
  if (order == 1) {
    r = ir::Select(c.g, ir::Compare(c.g, x0, Splat(c, 0, x0), "LT"), Un(c, "stablehlo.negate", r),
                   r);
  }
  return {Cast(c, r, t)};
}

// ATen's calc_trigamma: reflection below 0.5, six recurrence steps, then the asymptotic series.
Value Trigamma(Ctx& c, Value x) {
  Value neg = ir::Compare(c.g, x, Splat(c, 0.5, x), "LT");
  Value sin_pi_x = Un(c, "stablehlo.sine", Mul(c, Splat(c, M_PI, x), x));
  Value refl =
      Un(c, "stablehlo.negate", Div(c, Splat(c, M_PI * M_PI, x), Mul(c, sin_pi_x, sin_pi_x)));
  Value r = ir::Select(c.g, neg, refl, Splat(c, 0, x));
  x = ir::Select(c.g, neg, Sub(c, Splat(c, 1, x), x), x);
  for (int i = 0; i < 6; ++i) {
    r = Add(c, r, Div(c, Splat(c, 1, x), Mul(c, x, x)));
    x = Add(c, x, Splat(c, 1, x));
  }
  Value ixx = Div(c, Splat(c, 1, x), Mul(c, x, x));
  Value poly = Sub(c, Splat(c, 1.0 / 30, x), Mul(c, ixx, Splat(c, 1.0 / 42, x)));
  poly = Sub(c, Splat(c, 1.0 / 6, x), Mul(c, ixx, poly));
  Value sum = Add(c, Add(c, Splat(c, 1, x), Div(c, Splat(c, 1, x), Mul(c, Splat(c, 2, x), x))),
                  Mul(c, ixx, poly));
  r = Add(c, r, Div(c, sum, x));
  return ir::Select(c.g, neg, Un(c, "stablehlo.negate", r), r);
}

// ATen's zeta(x, q) (Cephes) for a constant x > 1: the direct sum runs while i < 9 or q + i <= 9
// (a while loop: the count depends on q), then 12 Euler-Maclaurin terms; both stop early once a
// term is below MACHEP relative to the sum.
Value HurwitzZeta(Ctx& c, double x, Value q) {
  const Type t = c.T(q);
  const Type pt{DType::kPred, t.dims};
  constexpr double kMachep = 1.11022302462515654042E-16;
  // Loop state: a (= q + i), b (last term), s (sum), i, done (stopped early).
  auto region = [&](std::vector<Value>& p) {
    auto r = std::make_shared<ir::Graph>();
    for (const Type& ty : {t, t, t, t, pt}) p.push_back(r->Param(ty));
    return r;
  };
  auto more = [&](Ctx& rc, const std::vector<Value>& p) {
    Value go = Or(rc, ir::Compare(rc.g, p[3], Splat(rc, 9, p[3]), "LT"),
                  ir::Compare(rc.g, p[0], Splat(rc, 9, p[0]), "LE"));
    return And(rc, Not(rc, p[4]), go);
  };
  std::vector<Value> cp, bp;
  auto cond = region(cp);
  Ctx cc{*cond, {}, {}};
  cond->results = {ir::Reduce(*cond, more(cc, cp), ir::Constant(*cond, 0, DType::kPred),
                              Iota(t.rank()), "stablehlo.or")};
  auto body = region(bp);
  Ctx bc{*body, {}, {}};
  Value act = more(bc, bp);
  Value a = Add(bc, bp[0], Splat(bc, 1, bp[0]));
  Value b = ir::Binary(*body, "stablehlo.power", a, Splat(bc, -x, a));
  Value s = Add(bc, bp[2], b);
  Value i = Add(bc, bp[3], Splat(bc, 1, bp[3]));
  Value eps = Mul(bc, Splat(bc, kMachep, s), s);
  Value early = And(bc, ir::Compare(*body, Un(bc, "stablehlo.negate", eps), b, "LT"),
                    ir::Compare(*body, b, eps, "LT"));
  body->results = {ir::Select(*body, act, a, bp[0]), ir::Select(*body, act, b, bp[1]),
                   ir::Select(*body, act, s, bp[2]), ir::Select(*body, act, i, bp[3]),
                   Or(bc, bp[4], And(bc, act, early))};
  Value s0 = ir::Binary(c.g, "stablehlo.power", q, Splat(c, -x, q));
  V st = ir::While(c.g, {q, Splat(c, 0, q), s0, Splat(c, 0, q), Splat(c, 0, pt)}, cond, body);
  Value w = st[0];
  b = st[1];
  s = st[2];
  Value done = st[4];
  Value tail =
      Sub(c, Add(c, s, Div(c, Mul(c, b, w), Splat(c, x - 1, w))), Mul(c, Splat(c, 0.5, b), b));
  s = ir::Select(c.g, done, s, tail);
  static const double kA[] = {12.0,
                              -720.0,
                              30240.0,
                              -1209600.0,
                              47900160.0,
                              -1.8924375803183791606e9,
                              7.47242496e10,
                              -2.950130727918164224e12,
                              1.1646782814350067249e14,
                              -4.5979787224074726105e15,
                              1.8152105401943546773e17,
                              -7.1661652561756670113e18};
  double aa = 1, k = 0;
  for (double ai : kA) {
    aa *= x + k;
    b = Div(c, b, w);
    Value term = Div(c, Mul(c, Splat(c, aa, b), b), Splat(c, ai, b));
    Value next = Add(c, s, term);
    Value small =
        ir::Compare(c.g, Un(c, "stablehlo.abs", Div(c, term, next)), Splat(c, kMachep, next), "LT");
    s = ir::Select(c.g, done, s, next);
    done = Or(c, done, small);
    k += 1;
    aa *= x + k;
    b = Div(c, b, w);
    k += 1;
  }
  // Poles at non-positive integers.
  Value pole = And(c, ir::Compare(c.g, q, Splat(c, 0, q), "LE"),
                   ir::Compare(c.g, q, Un(c, "stablehlo.floor", q), "EQ"));
  return ir::Select(c.g, pole, Splat(c, INFINITY, q), s);
}

// ATen: digamma for n = 0, trigamma for n = 1, else (-1)^(n+1) n! zeta(n + 1, x) with the zeta
// sum in double (ATen's accumulate type on CPU).
V Polygamma(Ctx& c) {
  DType t = c.out[0].dtype, acc = AccOf(t);
  Value x = Cast(c, c.In("self"), acc);
  int64_t n = c.Int("n");
  if (n == 0) return {Cast(c, c.g.Op1("chlo.digamma", {x}, c.T(x)), t)};
  if (n == 1) return {Cast(c, Trigamma(c, x), t)};
  Value z = Cast(c, HurwitzZeta(c, static_cast<double>(n + 1), Cast(c, x, DType::kF64)), acc);
  double fact = acc == DType::kF64 ? std::exp(std::lgamma(n + 1.0))
                                   : std::exp(std::lgamma(static_cast<float>(n) + 1.0f));
  return {Cast(c, Mul(c, Splat(c, (n % 2 ? 1.0 : -1.0) * fact, z), z), t)};
}

// ---- sorting and searching ----

V KthValue(Ctx& c) {
  Value x = Lift(c, c.In("self"));
  const Type xt = c.T(x);
  int64_t dim = ir::WrapDim(c.Int("dim", -1), xt.rank()), k = c.Int("k");
  V s = CallRule(c, "aten::sort", "stable",
                 {{"self", ValueArg(x)},
                  {"stable", BoolArg(true)},
                  {"dim", IntArg(dim)},
                  {"descending", BoolArg(false)}},
                 {xt, Type{DType::kS64, xt.dims}});
  Dims start(xt.rank(), 0), limit = xt.dims;
  start[dim] = k - 1;
  limit[dim] = k;
  return {ir::Reshape(c.g, ir::Slice(c.g, s[0], start, limit), c.out[0].dims),
          ir::Reshape(c.g, ir::Slice(c.g, s[1], start, limit), c.out[1].dims)};
}

// Number of entries of `seq` (last dim, broadcast against `vals`' leading dims when seq is
// N-D) that sort before each value: the position binary search would return.
Value CountBefore(Ctx& c, Value seq, Value vals, bool right, DType out) {
  DType t = c.common == DType::kInvalid ? c.T(seq).dtype : c.common;
  seq = Cast(c, seq, t);
  vals = Cast(c, vals, t);
  const Dims& sd = c.T(seq).dims;
  Dims vd = c.T(vals).dims;
  int64_t m = sd.back(), vr = static_cast<int64_t>(vd.size());
  Dims full = vd;
  full.push_back(m);
  Value v = ir::BroadcastInDim(c.g, vals, full, Iota(vr));
  Dims smap;
  if (sd.size() == 1) {
    smap = {vr};
  } else {
    smap = Iota(vr - 1);
    smap.push_back(vr);
  }
  Value s = ir::BroadcastInDim(c.g, seq, full, smap);
  // ATen's bounds: lower counts !(b >= v), upper counts !(b > v) (NaN values go last).
  Value before = Not(c, ir::Compare(c.g, s, v, right ? "GT" : "GE"));
  Value n = ReduceWith(c, Cast(c, before, DType::kS64), 0, {vr}, "sum");
  return Cast(c, n, out);
}

V Bucketize(Ctx& c) {
  Value x = c.In("self");
  if (c.T(c.In("boundaries")).rank() != 1) {
    throw ArgError("boundaries tensor must be 1 dimension, but got dim(" +
                   std::to_string(c.T(c.In("boundaries")).rank()) + ")");
  }
  return {CountBefore(c, c.In("boundaries"), x, c.Bool("right", false), c.out[0].dtype)};
}

// trace: the sum of the main diagonal of a matrix.
V Trace(Ctx& c) {
  Value x = c.In("self");
  if (c.T(x).rank() != 2) {
    throw ArgError("trace: expected a matrix, but got tensor with dim " +
                   std::to_string(c.T(x).rank()));
  }
  DType t = c.out[0].dtype;
  Value v = Cast(c, x, t);
  Type it{DType::kS64, c.T(x).dims};
  Value diag = ir::Compare(c.g, ir::Iota(c.g, it, 0), ir::Iota(c.g, it, 1), "EQ");
  Value kept = ir::Select(c.g, diag, v, Splat(c, 0, v));
  return {ir::Reduce(c.g, kept, ir::Constant(c.g, 0, t), {0, 1},
                     t == DType::kPred ? "stablehlo.or" : "stablehlo.add")};
}

// A sorter only permutes the sequence, so the count (and thus the answer) is unchanged.
V SearchSorted(Ctx& c) {
  bool right = c.Bool("right", false) || c.Str("side", "") == "right";
  Value seq = c.In("sorted_sequence"), x = c.In("self");
  if (c.T(seq).rank() > 1 && c.T(x).rank() == 0) throw LoweringError("0-d input needs 1-D seq");
  return {CountBefore(c, seq, x, right, c.out[0].dtype)};
}

Value AnyEqual(Ctx& c, Value elements, Value tests, bool invert) {
  DType t = c.common == DType::kInvalid ? c.T(elements).dtype : c.common;
  Value e = Cast(c, elements, t);
  Value s = ir::Reshape(c.g, Cast(c, tests, t), {c.T(tests).numel()});
  Dims ed = c.T(e).dims;
  int64_t er = static_cast<int64_t>(ed.size());
  Dims full = ed;
  full.push_back(c.T(s).dims[0]);
  Value eq = ir::Compare(c.g, ir::BroadcastInDim(c.g, e, full, Iota(er)),
                         ir::BroadcastInDim(c.g, s, full, {er}), "EQ");
  Value any = ir::Reduce(c.g, eq, ir::Constant(c.g, 0, DType::kPred), {er}, "stablehlo.or");
  return invert ? Not(c, any) : any;
}

V IsIn(Ctx& c) {
  Value e = c.Has("elements") ? c.In("elements") : c.In("element");
  Value t = c.Has("test_elements") ? c.In("test_elements") : c.In("test_element");
  Value r = AnyEqual(c, e, t, c.Bool("invert", false));
  return {Cast(c, ir::Reshape(c.g, r, c.out[0].dims), c.out[0].dtype)};
}

// x shifted by k along dim (earlier elements move later), the first k filled with `fill`.
Value ShiftAlong(Ctx& c, Value x, int64_t dim, int64_t k, double fill) {
  const Dims& d = c.T(x).dims;
  Dims lo(d.size(), 0), zero(d.size(), 0), limit = d;
  lo[dim] = k;
  Value pad = ir::Pad(c.g, x, ir::Constant(c.g, fill, c.T(x).dtype), lo, zero);
  return ir::Slice(c.g, pad, zero, limit);
}

// _cummax_helper / _cummin_helper: an inclusive log-step scan over (value, index) pairs with
// ATen's step: take the later element if it is NaN, or if the running value is not NaN and
// the element is >= (<=) it (so ties take the later index). The op returns nothing: values
// and indices go back as extra results into its values(a!) / indices(b!) arguments.
V CumMaxMin(Ctx& c, bool is_max) {
  Type vt = c.T(c.In("values")), it = c.T(c.In("indices"));
  Value x = Cast(c, c.In("self"), vt.dtype);
  if (c.T(x).rank() == 0 || c.T(x).numel() == 0) return {x, Splat(c, 0, it)};
  int64_t dim = ir::WrapDim(c.Int("dim"), c.T(x).rank()), n = c.T(x).dims[dim];
  bool fp = rt::IsFloat(vt.dtype);
  Value idx = ir::Iota(c.g, Type{DType::kS64, c.T(x).dims}, dim);
  double ident = is_max ? LowestOf(vt.dtype) : HighestOf(vt.dtype);
  for (int64_t k = 1; k < n; k *= 2) {
    Value pv = ShiftAlong(c, x, dim, k, ident), pi = ShiftAlong(c, idx, dim, k, -1);
    Value take = ir::Compare(c.g, x, pv, is_max ? "GE" : "LE");
    if (fp) take = Or(c, IsNan(c, x), And(c, Not(c, IsNan(c, pv)), take));
    x = ir::Select(c.g, take, x, pv);
    idx = ir::Select(c.g, take, idx, pi);
  }
  return {x, Cast(c, idx, it.dtype)};
}

// ---- geometry ----

V LinalgCross(Ctx& c) {
  const Type& out = c.out[0];
  int64_t dim = ir::WrapDim(c.Int("dim", -1), out.rank());
  Value a = InAsOut(c, "self"), b = InAsOut(c, "other");
  auto part = [&](Value x, int64_t i) {
    Dims start(out.rank(), 0), limit = out.dims;
    start[dim] = i;
    limit[dim] = i + 1;
    return ir::Slice(c.g, x, start, limit);
  };
  auto term = [&](int64_t i, int64_t j) {
    return Sub(c, Mul(c, part(a, i), part(b, j)), Mul(c, part(a, j), part(b, i)));
  };
  return {ir::Concat(c.g, {term(1, 2), term(2, 0), term(0, 1)}, dim)};
}

// x ([..., P, M]) broadcast to batch + [P, M].
Value BatchTo(Ctx& c, Value x, const Dims& batch, DType t) {
  Dims d = batch;
  const Dims& xd = c.T(x).dims;
  d.insert(d.end(), xd.end() - 2, xd.end());
  return Cast(c, x, t, d);
}

// Pairwise differences: x1 [B, P, M] and x2 [B, R, M] -> [B, P, R, M].
Value PairDiff(Ctx& c, Value x1, Value x2) {
  Dims d1 = c.T(x1).dims, d2 = c.T(x2).dims;
  int64_t nb = static_cast<int64_t>(d1.size()) - 2;
  Dims full(d1.begin(), d1.end() - 1);
  full.push_back(d2[nb]);
  full.push_back(d1.back());
  Dims m1 = Iota(nb + 1), m2 = Iota(nb);
  m1.push_back(nb + 2);
  m2.push_back(nb + 1);
  m2.push_back(nb + 2);
  return Sub(c, ir::BroadcastInDim(c.g, x1, full, m1), ir::BroadcastInDim(c.g, x2, full, m2));
}

// ATen's _euclidean_dist: [-2 x1, |x1|^2, 1] . [x2, 1, |x2|^2]^T, clamped at 0, sqrt.
Value EuclideanDist(Ctx& c, Value x1, Value x2, const Type& out) {
  int64_t nb = out.rank() - 2, last = nb + 1;
  auto norm = [&](Value x) {
    Dims d = c.T(x).dims;
    d.back() = 1;
    return ir::Reshape(c.g, ReduceWith(c, Mul(c, x, x), 0, {last}, "sum"), d);
  };
  Value n1 = norm(x1), n2 = norm(x2);
  Value a = ir::Concat(c.g, {Mul(c, x1, Splat(c, -2, x1)), n1, Splat(c, 1, n1)}, last);
  Value b = ir::Concat(c.g, {x2, Splat(c, 1, n2), n2}, last);
  Value r = ir::DotGeneralHighest(c.g, a, b, Iota(nb), Iota(nb), {last}, {last}, out);
  return Un(c, "stablehlo.sqrt",
            ir::Select(c.g, ir::Compare(c.g, r, Splat(c, 0, r), "LT"), Splat(c, 0, r), r));
}

V CdistForward(Ctx& c) {
  const Type& out = c.out[0];
  Value x1 = c.In("x1"), x2 = c.In("x2");
  if (out.numel() == 0 || c.T(x1).dims.back() == 0) return {Splat(c, 0, out)};
  DType acc = AccOf(out.dtype);
  Dims batch(out.dims.begin(), out.dims.end() - 2);
  x1 = BatchTo(c, x1, batch, acc);
  x2 = BatchTo(c, x2, batch, acc);
  double p = c.Double("p", 2);
  int64_t mode = c.Int("compute_mode", 0), r1 = c.T(x1).dims[batch.size()],
          r2 = c.T(x2).dims[batch.size()];
  // ATen's choice: the matmul form for p == 2 on request or when either side has > 25 rows.
  if (p == 2 && (mode == 1 || (mode == 0 && (r1 > 25 || r2 > 25)))) {
    return {Cast(c, EuclideanDist(c, x1, x2, Type{acc, out.dims}), out.dtype)};
  }
  Value a = Un(c, "stablehlo.abs", PairDiff(c, x1, x2));
  Dims last{out.rank()};
  Value r;
  if (p == 0) {
    r = ReduceWith(c, Cast(c, ir::Compare(c.g, a, Splat(c, 0, a), "NE"), acc), 0, last, "sum");
  } else if (p == 1) {
    r = ReduceWith(c, a, 0, last, "sum");
  } else if (p == 2) {
    r = Un(c, "stablehlo.sqrt", ReduceWith(c, Mul(c, a, a), 0, last, "sum"));
  } else if (std::isinf(p)) {
    r = ReduceWith(c, a, 0, last, "max");
  } else {
    Value s = ReduceWith(c, ir::Binary(c.g, "stablehlo.power", a, Splat(c, p, a)), 0, last, "sum");
    r = ir::Binary(c.g, "stablehlo.power", s, Splat(c, 1 / p, s));
  }
  return {Cast(c, r, out.dtype)};
}

// ATen's per-pair gradient terms (cdist backward kernels), summed over the other set's rows.
V CdistBackward(Ctx& c) {
  const Type& out = c.out[0];
  double p = c.Double("p", 2);
  if (out.numel() == 0 || p == 0) return {Splat(c, 0, out)};
  DType acc = AccOf(out.dtype);
  Dims batch(out.dims.begin(), out.dims.end() - 2);
  Value x1 = BatchTo(c, c.In("x1"), batch, acc), x2 = BatchTo(c, c.In("x2"), batch, acc);
  Value diff = PairDiff(c, x1, x2);
  const Dims& full = c.T(diff).dims;
  int64_t nb = static_cast<int64_t>(batch.size());
  Dims gdims(full.begin(), full.end() - 1);
  auto spread = [&](const char* name) {
    return ir::BroadcastInDim(c.g, Cast(c, c.In(name), acc, gdims), full, Iota(nb + 2));
  };
  Value g = spread("grad"), dist = spread("cdist");
  Value zero = Splat(c, 0, diff), sign = Un(c, "stablehlo.sign", diff);
  Value ad = Un(c, "stablehlo.abs", diff);
  auto pw = [&](Value x, double e) {
    return ir::Binary(c.g, "stablehlo.power", x, Splat(c, e, x));
  };
  Value dist_zero = ir::Compare(c.g, dist, zero, "EQ");
  Value r;
  if (p == 1) {
    r = Mul(c, g, sign);
  } else if (p < 2) {
    r = Div(c, Mul(c, Mul(c, sign, pw(ad, p - 1)), g), pw(dist, p - 1));
    r = ir::Select(c.g, dist_zero, zero, r);
    if (p < 1) r = ir::Select(c.g, ir::Compare(c.g, diff, zero, "EQ"), zero, r);
  } else if (p == 2) {
    r = ir::Select(c.g, dist_zero, zero, Div(c, Mul(c, g, diff), dist));
  } else if (std::isinf(p)) {
    Value one = Splat(c, 1, diff);
    Value off = Un(c, "stablehlo.ceil", Un(c, "stablehlo.abs", Sub(c, ad, dist)));
    off = ir::Select(c.g, ir::Compare(c.g, off, one, "LT"), off, one);
    r = Mul(c, Mul(c, g, sign), Sub(c, one, off));
  } else {
    r = Div(c, Mul(c, Mul(c, diff, pw(ad, p - 2)), g), pw(dist, p - 1));
    r = ir::Select(c.g, dist_zero, zero, r);
  }
  return {Cast(c, ReduceWith(c, r, 0, {nb + 1}, "sum"), out.dtype)};
}

// pdist's pair k of rows i < j of an n-row input: k = i (2n - i - 1) / 2 + j - i - 1, in the
// row-major order of the upper triangle. An [n, n] s64 table of k; `none` off the triangle
// (both triangles when symmetric).
Value PairIndex(Ctx& c, int64_t n, bool symmetric, int64_t none) {
  Type t{DType::kS64, {n, n}};
  Value i = ir::Iota(c.g, t, 0), j = ir::Iota(c.g, t, 1);
  auto k = [&](Value a, Value b) {
    Value twice = Mul(c, a, Sub(c, Sub(c, Splat(c, 2.0 * n, a), a), Splat(c, 1, a)));
    return Sub(c, Add(c, Div(c, twice, Splat(c, 2, a)), b), Add(c, a, Splat(c, 1, a)));
  };
  Value lt = ir::Compare(c.g, i, j, "LT"), gt = ir::Compare(c.g, i, j, "GT");
  Value r = ir::Select(c.g, lt, k(i, j), Splat(c, static_cast<double>(none), t));
  return symmetric ? ir::Select(c.g, gt, k(j, i), r) : r;
}

// The p-norm distances of every pair of rows, as cdist(x, x) (never its matmul form, as ATen's
// pdist) read at the upper triangle.
V PdistForward(Ctx& c) {
  const Type& out = c.out[0];
  Value x = c.In("self");
  const Type xt = c.T(x);
  int64_t n = xt.dims[0];
  if (out.numel() == 0) return {Splat(c, 0, out)};
  Type full{out.dtype, {n, n}};
  Value d = CallRule(c, "aten::_cdist_forward", "",
                     {{"x1", ValueArg(x)},
                      {"x2", ValueArg(x)},
                      {"p", c.args[1].second},
                      {"compute_mode", IntArg(2)}},
                     {full})[0];
  int64_t pairs = out.numel();
  Value idx = ir::Reshape(c.g, PairIndex(c, n, false, pairs), {n * n, 1});
  return {ir::Scatter(c.g, Splat(c, 0, out), idx, ir::Reshape(c.g, d, {n * n}), {0}, 0,
                      ir::OverwriteRegion(out.dtype))};
}

// Each pair's gradient term goes to row i and, negated (it is odd in x_i - x_j), to row j: the
// same as cdist(x, x)'s backward with the pair values on both triangles.
V PdistBackward(Ctx& c) {
  const Type& out = c.out[0];
  Value x = c.In("self");
  int64_t n = c.T(x).dims[0];
  if (out.numel() == 0 || n < 2) return {Splat(c, 0, out)};
  int64_t pairs = c.T(c.In("grad")).numel();
  Value idx = ir::Reshape(c.g, PairIndex(c, n, true, pairs), {n, n, 1});
  auto square = [&](const char* name) {
    Value v = c.In(name);
    Value padded = ir::Concat(c.g, {v, ir::Constant(c.g, 0, c.T(v).dtype, {1})}, 0);
    return ir::Gather(c.g, padded, idx, {0}, 0);
  };
  return CallRule(c, "aten::_cdist_backward", "",
                  {{"grad", ValueArg(square("grad"))},
                   {"x1", ValueArg(x)},
                   {"x2", ValueArg(x)},
                   {"p", c.args[2].second},
                   {"cdist", ValueArg(square("pdist"))}},
                  {out});
}

// ---- histograms and indexed reductions ----

// ATen's histc: edges min/max (data range when equal, widened by 1 when still equal), bin
// (x - min) * bins / (max - min) truncated, the last edge inclusive, outside values dropped.
V Histc(Ctx& c) {
  const Type& out = c.out[0];
  DType acc = AccOf(out.dtype);
  int64_t bins = c.Int("bins", 100);
  Value x = ir::Reshape(c.g, Cast(c, c.In("self"), acc), {c.T(c.In("self")).numel()});
  Type s{acc, {}};
  Value lo = Cast(c, c.In("min"), acc), hi = Cast(c, c.In("max"), acc);
  if (c.T(x).numel() > 0) {
    Value same = ir::Compare(c.g, lo, hi, "EQ");
    lo = ir::Select(c.g, same, ReduceWith(c, x, HighestOf(acc), {0}, "min"), lo);
    hi = ir::Select(c.g, same, ReduceWith(c, x, LowestOf(acc), {0}, "max"), hi);
  }
  Value same = ir::Compare(c.g, lo, hi, "EQ");
  lo = ir::Select(c.g, same, Sub(c, lo, Splat(c, 1, s)), lo);
  hi = ir::Select(c.g, same, Add(c, hi, Splat(c, 1, s)), hi);
  const Dims& xd = c.T(x).dims;
  Value blo = ir::BroadcastInDim(c.g, lo, xd, {}), bhi = ir::BroadcastInDim(c.g, hi, xd, {});
  Value pos =
      Div(c, Mul(c, Sub(c, x, blo), Splat(c, static_cast<double>(bins), x)), Sub(c, bhi, blo));
  Value bin = Cast(c, pos, DType::kS64);
  bin = ir::Select(c.g, ir::Compare(c.g, bin, Splat(c, bins, bin), "EQ"), Splat(c, bins - 1, bin),
                   bin);
  Value inside =
      And(c, ir::Compare(c.g, x, blo, "GE"), ir::Compare(c.g, x, bhi, "LE"));  // false for NaN
  bin = ir::Select(c.g, inside, bin, Splat(c, bins, bin));  // out of bounds: dropped by scatter
  Value idx = ir::Reshape(c.g, bin, {xd[0], 1});
  Value r = ir::Scatter(c.g, Splat(c, 0, Type{acc, {bins}}), idx, Splat(c, 1, Type{acc, xd}), {0},
                        0, ir::ScalarRegion(acc, "stablehlo.add"));
  return {Cast(c, r, out.dtype)};
}

V IndexReduce(Ctx& c) {
  std::string reduce = c.Str("reduce", "prod");
  bool include_self = c.Bool("include_self", true);
  DType t = c.out[0].dtype;
  Value x = Lift(c, Cast(c, c.In("self"), t));
  int64_t dim = ir::WrapDim(c.Int("dim"), c.T(x).rank()), size = c.T(x).dims[dim];
  Value index = Lift(c, Cast(c, c.In("index"), DType::kS64));
  index = ir::Select(c.g, ir::Compare(c.g, index, Splat(c, 0, index), "LT"),
                     Add(c, index, Splat(c, size, index)), index);
  Dims udims = c.T(x).dims;
  udims[dim] = c.T(index).dims[0];
  Value src = ir::Reshape(c.g, Cast(c, c.In("source"), t), udims);
  Value idx = ir::Reshape(c.g, index, {udims[dim], 1});
  auto put = [&](Value base, Value upd, const std::string& op) {
    return ir::Scatter(c.g, base, idx, upd, {dim}, dim, ReduceRegion(t, op));
  };
  if (!include_self) x = put(x, Splat(c, ReduceIdentity(t, reduce), c.T(src)), "");
  Value r = put(x, src, reduce);
  if (reduce == "mean") {
    Value count = put(Splat(c, include_self ? 1 : 0, c.T(x)), Splat(c, 1, c.T(src)), "sum");
    count = ir::Select(c.g, ir::Compare(c.g, count, Splat(c, 0, count), "EQ"), Splat(c, 1, count),
                       count);
    r = rt::IsFloat(t) ? Div(c, r, count) : FloorDivide(c, r, count);
  }
  return {ir::Reshape(c.g, r, c.out[0].dims)};
}

// Segments along `axis` from lengths (or offsets) of shape data.shape[:axis] + [S(+1)], as a
// membership mask over [lead..., S, N, rest...] (data is [lead..., N, rest...]).
struct Segments {
  Value in;   // pred mask
  Dims full;  // its dims
  int64_t axis;
  Dims data_map;  // broadcast_in_dim mapping of data-shaped values into `full`
  Dims seg_map;   // ... and of segment-shaped values ([lead..., S, rest...])
};

Segments SegmentMask(Ctx& c, const Dims& dd, int64_t nseg) {
  Segments sg;
  sg.axis = ir::WrapDim(c.Int("axis", 0), static_cast<int64_t>(dd.size()));
  int64_t axis = sg.axis;
  Value start, end;
  if (c.Has("offsets")) {
    Value off = Cast(c, c.In("offsets"), DType::kS64);
    Dims lo(axis + 1, 0), hi = c.T(off).dims;
    hi[axis] = nseg;
    start = ir::Slice(c.g, off, lo, hi);
    lo[axis] = 1;
    hi[axis] = nseg + 1;
    end = ir::Slice(c.g, off, lo, hi);
  } else {
    Value len = Cast(c, c.In("lengths"), DType::kS64);
    // Inclusive prefix sum over the segment dim: end[s] = sum_{u <= s} len[u].
    Dims sq(dd.begin(), dd.begin() + axis);
    sq.push_back(nseg);
    sq.push_back(nseg);
    Value u = ir::Iota(c.g, Type{DType::kS64, sq}, axis + 1);
    Value s = ir::Iota(c.g, Type{DType::kS64, sq}, axis);
    Dims lmap = Iota(axis);
    lmap.push_back(axis + 1);
    Value lu = ir::BroadcastInDim(c.g, len, sq, lmap);
    Value keep = ir::Compare(c.g, u, s, "LE");
    end = ReduceWith(c, ir::Select(c.g, keep, lu, Splat(c, 0, lu)), 0, {axis + 1}, "sum");
    start = Sub(c, end, len);
  }
  sg.full = Dims(dd.begin(), dd.begin() + axis);
  sg.full.push_back(nseg);
  sg.full.insert(sg.full.end(), dd.begin() + axis, dd.end());
  Value pos = ir::Iota(c.g, Type{DType::kS64, sg.full}, axis + 1);
  Value bs = ir::BroadcastInDim(c.g, start, sg.full, Iota(axis + 1));
  Value be = ir::BroadcastInDim(c.g, end, sg.full, Iota(axis + 1));
  sg.in = And(c, ir::Compare(c.g, pos, bs, "GE"), ir::Compare(c.g, pos, be, "LT"));
  sg.data_map = Iota(axis);
  sg.seg_map = Iota(axis + 1);
  for (int64_t i = axis; i < static_cast<int64_t>(dd.size()); ++i) {
    sg.data_map.push_back(i + 1);
    if (i > axis) sg.seg_map.push_back(i + 1);
  }
  return sg;
}

// Reduces a data-shaped value per segment ([lead..., S, rest...]).
Value PerSegment(Ctx& c, const Segments& sg, Value v, const std::string& reduce) {
  double ident = ReduceIdentity(c.T(v).dtype, reduce);
  Value d = ir::BroadcastInDim(c.g, v, sg.full, sg.data_map);
  return ReduceWith(c, ir::Select(c.g, sg.in, d, Splat(c, ident, d)), ident, {sg.axis + 1}, reduce);
}

// Each element's segment value (0 outside every segment): data-shaped.
Value PerElement(Ctx& c, const Segments& sg, Value v) {
  Value d = ir::BroadcastInDim(c.g, v, sg.full, sg.seg_map);
  return ReduceWith(c, ir::Select(c.g, sg.in, d, Splat(c, 0, d)), 0, {sg.axis}, "sum");
}

// Empty segments give `initial` (or ATen's default: the identity, NaN for mean).
V SegmentReduce(Ctx& c) {
  const Type& out = c.out[0];
  DType t = AccOf(out.dtype);
  std::string reduce = c.Str("reduce", "sum");
  Value data = Cast(c, c.In("data"), t);
  Segments sg = SegmentMask(c, c.T(data).dims, out.dims[ir::WrapDim(c.Int("axis", 0), out.rank())]);
  Value r = PerSegment(c, sg, data, reduce);
  Value count = PerSegment(c, sg, Splat(c, 1, data), "sum");
  bool has_init = c.Has("initial");
  Value init = has_init ? Cast(c, c.In("initial"), t, out.dims) : -1;
  if (has_init) r = Combine(c, r, init, reduce == "mean" ? "sum" : reduce);
  if (reduce == "mean") {
    Value empty = ir::Compare(c.g, count, Splat(c, 0, count), "EQ");
    r = ir::Select(c.g, empty, has_init ? init : Splat(c, NAN, r), Div(c, r, count));
  }
  return {Cast(c, r, out.dtype)};
}

// ATen's CPU backward: sum copies the segment's grad, mean divides it by the length, max/min
// give it to the elements equal to the output (positive shares split among ties), prod uses
// output / x (or the product of the others where x is 0).
V SegmentReduceBackward(Ctx& c) {
  const Type& out = c.out[0];
  DType t = AccOf(out.dtype);
  std::string reduce = c.Str("reduce", "sum");
  Value data = Cast(c, c.In("data"), t), grad = Cast(c, c.In("grad"), t);
  Value output = Cast(c, c.In("output"), t);
  int64_t axis = ir::WrapDim(c.Int("axis", 0), out.rank());
  Segments sg = SegmentMask(c, c.T(data).dims, c.T(grad).dims[axis]);
  Value g = PerElement(c, sg, grad), zero = Splat(c, 0, data);
  Value r = g;
  if (reduce == "mean") {
    r = Div(c, g, PerElement(c, sg, PerSegment(c, sg, Splat(c, 1, data), "sum")));
  } else if (reduce == "max" || reduce == "min") {
    Value hit = Or(c, IsNan(c, data), ir::Compare(c.g, data, PerElement(c, sg, output), "EQ"));
    Value count = PerElement(c, sg, PerSegment(c, sg, Cast(c, hit, t), "sum"));
    r = ir::Select(c.g, hit, g, zero);
    Value split =
        And(c, ir::Compare(c.g, count, Splat(c, 2, count), "GE"), ir::Compare(c.g, r, zero, "GT"));
    r = ir::Select(c.g, split, Div(c, r, count), r);
  } else if (reduce == "prod") {
    Value is_zero = ir::Compare(c.g, data, zero, "EQ");
    Value zeros = PerElement(c, sg, PerSegment(c, sg, Cast(c, is_zero, t), "sum"));
    Value others = PerSegment(c, sg, ir::Select(c.g, is_zero, Splat(c, 1, data), data), "prod");
    if (c.Has("initial")) others = Mul(c, others, Cast(c, c.In("initial"), t, c.T(others).dims));
    Value nonzero = Div(c, Mul(c, g, PerElement(c, sg, output)), data);
    Value one_zero = ir::Compare(c.g, zeros, Splat(c, 1, zeros), "EQ");
    Value at_zero = ir::Select(c.g, one_zero, Mul(c, g, PerElement(c, sg, others)), zero);
    r = ir::Select(c.g, is_zero, at_zero, nonzero);
  } else if (reduce != "sum") {
    throw LoweringError("unsupported reduce '" + reduce + "'");
  }
  return {Cast(c, r, out.dtype)};
}

// ---- misc ----

// Training batch norm that updates running stats: native_batch_norm's rule plus an empty
// reserve; the new running_mean / running_var come back as extra results.
V BatchNormWithUpdate(Ctx& c) {
  std::vector<std::pair<std::string, Arg>> args;
  for (const char* n : {"input", "weight", "bias", "running_mean", "running_var"}) {
    args.emplace_back(n, *c.Find(n));
  }
  args.emplace_back("training", BoolArg(true));
  args.emplace_back("momentum", *c.Find("momentum"));
  args.emplace_back("eps", *c.Find("eps"));
  V r = CallRule(c, "aten::native_batch_norm", "", std::move(args), {c.out[0], c.out[1], c.out[2]});
  r.insert(r.begin() + 3, Splat(c, 0, c.out[3]));
  return r;
}

// batch_norm_backward (the backward of _batch_norm_with_update): save_var is the saved invstd.
V BatchNormBackwardUpdate(Ctx& c) {
  std::vector<std::pair<std::string, Arg>> args;
  for (const char* n : {"grad_out", "input", "weight", "running_mean", "running_var", "save_mean"})
    args.emplace_back(n, *c.Find(n));
  args.emplace_back("save_invstd", *c.Find("save_var"));
  args.emplace_back("train", BoolArg(c.Bool("update", true)));
  args.emplace_back("eps", *c.Find("eps"));
  args.emplace_back("output_mask", *c.Find("output_mask"));
  return CallRule(c, "aten::native_batch_norm_backward", "", std::move(args), c.out);
}

// mode 0: XOR of every element's 64 bits (floats as f64, integers sign-extended to s64).
V HashTensor(Ctx& c) {
  if (c.Int("mode", 0) != 0) throw LoweringError("hash_tensor: only mode 0 is supported");
  Value x = c.In("self");
  DType wide = rt::IsFloat(c.T(x).dtype) ? DType::kF64 : DType::kS64;
  x = Cast(c, x, wide);
  Value bits = ir::BitcastConvert(c.g, x, Type{DType::kU64, c.T(x).dims});
  Dims dims = ReduceDims(c, c.T(x).rank());
  Value r = ir::Reduce(c.g, bits, ir::Constant(c.g, 0, DType::kU64), dims, "stablehlo.xor");
  return {ir::Reshape(c.g, r, c.out[0].dims)};
}

}  // namespace

void AddSpecialRules(RuleMap& m) {
  m["aten::_batch_norm_with_update"] = BatchNormWithUpdate;
  m["aten::_cdist_backward"] = CdistBackward;
  m["aten::_cdist_forward"] = CdistForward;
  m["aten::_pdist_backward"] = PdistBackward;
  m["aten::_pdist_forward"] = PdistForward;
  m["aten::_cummax_helper"] = +[](Ctx& c) { return CumMaxMin(c, true); };
  m["aten::_cummin_helper"] = +[](Ctx& c) { return CumMaxMin(c, false); };
  m["aten::_segment_reduce_backward"] = SegmentReduceBackward;
  m["aten::angle"] = Angle;
  m["aten::batch_norm_backward"] = BatchNormBackwardUpdate;
  m["aten::bucketize"] = Bucketize;
  m["aten::trace"] = Trace;
  m["aten::frexp"] = Frexp;
  m["aten::hash_tensor"] = HashTensor;
  m["aten::heaviside"] = Heaviside;
  m["aten::histc"] = Histc;
  m["aten::i0"] = +[](Ctx& c) { return Bessel(c, 0, false); };
  m["aten::index_reduce"] = IndexReduce;
  m["aten::isin"] = IsIn;
  m["aten::isneginf"] = +[](Ctx& c) { return IsInfSigned(c, -INFINITY); };
  m["aten::isposinf"] = +[](Ctx& c) { return IsInfSigned(c, INFINITY); };
  m["aten::kthvalue"] = KthValue;
  m["aten::linalg_cross"] = LinalgCross;
  m["aten::log_sigmoid_backward"] = LogSigmoidBackward;
  m["aten::log_sigmoid_forward"] = LogSigmoidForward;
  m["aten::polygamma"] = Polygamma;
  m["aten::searchsorted"] = SearchSorted;
  m["aten::segment_reduce"] = SegmentReduce;
  m["aten::special_i0e"] = +[](Ctx& c) { return Bessel(c, 0, true); };
  m["aten::special_i1"] = +[](Ctx& c) { return Bessel(c, 1, false); };
  m["aten::special_modified_bessel_i0"] = +[](Ctx& c) { return Bessel(c, 0, false); };
  m["aten::special_modified_bessel_i1"] = +[](Ctx& c) { return Bessel(c, 1, false); };
  m["aten::special_i1e"] = +[](Ctx& c) { return Bessel(c, 1, true); };
}

}  // namespace tpu::lowering
