// Factory ops (fill, arange, linspace, eye) and random ops. torch.zeros/full/rand/randn/randint
// and dropout decompose into these (zero_, fill_, uniform_, normal_, random_, native_dropout).
//
// Random ops read the dispatcher's "generator" argument, a tensor<2xui64> [seed, offset] that is
// advanced by numel after each call, and draw bits with rng_bit_generator (THREE_FRY). ThreeFry
// spends one counter per 64 output bits, so one stream of n u32 or u64 values stays inside the
// offsets this call owns; a rule needing more draws further streams under different keys.
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <utility>

#include "lowering/helpers.h"
#include "lowering/random.h"
#include "lowering/rule_table.h"

namespace tpu::lowering {

// ---- Random bits and the distributions built on them.

// n random u32 or u64 values from the call's state. Stream k > 0 uses the key seed ^ k * golden
// ratio: an independent ThreeFry stream over the same offsets.
Value RandomBits(Ctx& c, const Dims& dims, DType bits, uint64_t stream) {
  Value state = c.In("generator");
  if (stream != 0) {
    Value mix = ir::IntConstant(c.g, stream * 0x9E3779B97F4A7C15ull, DType::kU64, {1});
    Value key = ir::Concat(c.g, {mix, ir::IntConstant(c.g, 0, DType::kU64, {1})}, 0);
    state = ir::Binary(c.g, "stablehlo.xor", state, key);
  }
  return c.g.Op("stablehlo.rng_bit_generator", {state}, {Type{DType::kU64, {2}}, Type{bits, dims}},
                "rng_algorithm = #stablehlo<rng_algorithm THREE_FRY>")[1];
}

// The shape random values of dims are drawn in: one entry per value, [rows, last dim] for two
// dims or more. Every dim of it is one of the values' dims or a product of some: a bounded
// program's draw for a [4, 4, s, s] attention mask is [16s, s], where a flat one, 16s^2, would
// fit no formula a*s + b. Entry k of a 1-D draw depends only on the state and k.
Dims DrawShape(const Dims& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  if (dims.size() < 2 || n == 0) return {n};
  return {n / dims.back(), dims.back()};
}

// Random bits per sample as PyTorch draws them: as many as the dtype's mantissa holds.
static int Digits(DType t) {
  switch (t) {
    case DType::kF16:
      return 11;
    case DType::kBF16:
      return 8;
    case DType::kF64:
      return 53;
    default:
      return 24;
  }
}

// Distributions are computed in f32 (f64 for f64 outputs) and converted at the end.
DType ComputeType(DType t) { return t == DType::kF64 ? DType::kF64 : DType::kF32; }

// Uniform samples in [0, 1), or in (0, 1) when `open` (safe for log), shaped dims, of dtype
// ComputeType(t), each k * 2^-d for Digits(t) random bits k (so converting to t stays below 1).
Value Uniform01(Ctx& c, const Dims& dims, DType t, uint64_t stream, bool open) {
  DType ct = ComputeType(t);
  // Open samples are (k + 1/2) * 2^-d: one bit fewer keeps them exact.
  int d = Digits(t) - (open ? 1 : 0);
  DType bt = ct == DType::kF64 ? DType::kU64 : DType::kU32;
  int width = ct == DType::kF64 ? 64 : 32;
  const Dims drawn = DrawShape(dims);
  Value bits = RandomBits(c, drawn, bt, stream);
  Value k = ir::Binary(c.g, "stablehlo.shift_right_logical", bits,
                       ir::IntConstant(c.g, width - d, bt, drawn));
  Value f = Cast(c, k, ct);
  if (open) f = ir::Binary(c.g, "stablehlo.add", f, Splat(c, 0.5, f));
  return ir::Reshape(
      c.g, ir::Binary(c.g, "stablehlo.multiply", f, Splat(c, std::ldexp(1.0, -d), f)), dims);
}

namespace {

using V = std::vector<Value>;

// A float argument that is a tensor in some overloads (normal.Tensor_float, bernoulli_.Tensor)
// and a plain double in others, as dtype t broadcast to dims.
Value FloatArg(Ctx& c, const std::string& name, double fallback, DType t, const Dims& dims) {
  const Arg* a = c.Find(name);
  if (a != nullptr && a->kind == Arg::Kind::kValue) return Cast(c, a->value, t, dims);
  return Splat(c, c.Double(name, fallback), Type{t, dims});
}

// ---- Deterministic factories.

V Fill(Ctx& c) { return {Cast(c, c.In("value"), c.out[0].dtype, c.out[0].dims)}; }

V Zero(Ctx& c) { return {Splat(c, 0, c.out[0])}; }

// start + i * step, as PyTorch's CPU kernel computes it: in int64 for integer outputs (start and
// step truncated first) and in double for floating ones.
V Arange(Ctx& c) {
  const Type& out = c.out[0];
  Type acc{rt::IsFloat(out.dtype) ? DType::kF64 : DType::kS64, out.dims};
  Value start = c.Has("start") ? Cast(c, c.In("start"), acc.dtype, acc.dims) : Splat(c, 0, acc);
  Value step = c.Has("step") ? Cast(c, c.In("step"), acc.dtype, acc.dims) : Splat(c, 1, acc);
  Value i = ir::Iota(c.g, acc, 0);
  return {Cast(c, Add(c, start, Mul(c, step, i)), out.dtype)};
}

// PyTorch's CPU linspace: start and end are first converted to the output dtype; the step is in
// the output dtype for floats and in double for integers; the first half counts up from start,
// the second half down from end (so both ends are exact). Its vectorized loop uses fused
// multiply-adds, reproduced by computing start + step * i in a wider float and rounding once.
Value LinspaceValues(Ctx& c, const Type& out, int64_t steps) {
  DType t = out.dtype;
  DType step_t = rt::IsFloat(t) ? t : DType::kF64;
  DType wide = rt::IsFloat(t) && t != DType::kF32 && t != DType::kF64 ? DType::kF32 : DType::kF64;
  Value start = Cast(c, Cast(c, c.In("start"), t), step_t);
  if (steps <= 1) return ir::BroadcastTo(c.g, start, out.dims);
  Value end = Cast(c, Cast(c, c.In("end"), t), step_t);
  Value step = Div(c, Sub(c, end, start), Splat(c, static_cast<double>(steps - 1), start));
  start = Cast(c, start, wide, out.dims);
  end = Cast(c, end, wide, out.dims);
  step = Cast(c, step, wide, out.dims);
  Value i = ir::Iota(c.g, Type{wide, out.dims}, 0);
  Value up = Add(c, start, Mul(c, step, i));
  Value rest = Sub(c, Splat(c, static_cast<double>(steps - 1), i), i);
  Value down = Sub(c, end, Mul(c, step, rest));
  Value idx = ir::Iota(c.g, Type{DType::kS64, out.dims}, 0);
  Value first_half = ir::Compare(c.g, idx, Splat(c, static_cast<double>(steps / 2), idx), "LT");
  // Floats round to the output dtype here; integers truncate the double in the caller.
  Value r = ir::Select(c.g, first_half, up, down);
  return rt::IsFloat(t) ? Cast(c, r, t) : r;
}

V Linspace(Ctx& c) {
  const Type& out = c.out[0];
  return {Cast(c, LinspaceValues(c, out, c.Int("steps")), out.dtype)};
}

// base ** linspace(start, end): the power in the output dtype for floats, in double for integers.
V Logspace(Ctx& c) {
  const Type& out = c.out[0];
  Value e = LinspaceValues(c, out, c.Int("steps"));
  Value base = Splat(c, c.Double("base", 10.0), e);
  return {Cast(c, ir::Binary(c.g, "stablehlo.power", base, e), out.dtype)};
}

V Eye(Ctx& c) {
  const Type& out = c.out[0];
  Type idx{DType::kS64, out.dims};
  Value eq = ir::Compare(c.g, ir::Iota(c.g, idx, 0), ir::Iota(c.g, idx, 1), "EQ");
  return {Cast(c, eq, out.dtype)};
}

// Standard normal samples of dtype ct (f32 or f64) by Box-Muller, using the cosine half.
Value StdNormal(Ctx& c, const Dims& dims, DType ct) {
  Value u1 = Uniform01(c, dims, ct, 0, /*open=*/true);
  Value u2 = Uniform01(c, dims, ct, 1);
  Value r = ir::Unary(c.g, "stablehlo.sqrt",
                      Mul(c, Splat(c, -2, u1), ir::Unary(c.g, "stablehlo.log", u1)));
  Value theta = Mul(c, u2, Splat(c, 2 * M_PI, u2));
  return Mul(c, r, ir::Unary(c.g, "stablehlo.cosine", theta));
}

V Uniform(Ctx& c) {
  const Type& out = c.out[0];
  double from = c.Double("from", 0), to = c.Double("to", 1);
  if (from > to) {
    std::ostringstream msg;
    msg << "uniform_ expects to return a [from, to) range, but found from=" << from
        << " > to=" << to;
    throw ArgError(msg.str());
  }
  Value u = Uniform01(c, out.dims, out.dtype);
  return {Cast(c, Add(c, Mul(c, u, Splat(c, to - from, u)), Splat(c, from, u)), out.dtype)};
}

// normal_(self, mean, std) and normal.{Tensor_float, float_Tensor, Tensor_Tensor}: mean and std
// are doubles or tensors broadcast to the output.
V Normal(Ctx& c) {
  const Type& out = c.out[0];
  DType ct = ComputeType(out.dtype);
  Value z = StdNormal(c, out.dims, ct);
  Value mean = FloatArg(c, "mean", 0, ct, out.dims), std = FloatArg(c, "std", 1, ct, out.dims);
  return {Cast(c, Add(c, Mul(c, z, std), mean), out.dtype)};
}

V LogNormal(Ctx& c) {
  const Type& out = c.out[0];
  DType ct = ComputeType(out.dtype);
  Value z = StdNormal(c, out.dims, ct);
  Value x = Add(c, Mul(c, z, Splat(c, c.Double("std", 2), z)), Splat(c, c.Double("mean", 1), z));
  return {Cast(c, ir::Unary(c.g, "stablehlo.exponential", x), out.dtype)};
}

// bernoulli_.float / bernoulli_.Tensor / bernoulli.p take p; functional bernoulli(self) draws
// with p = self. 1 where u < p.
V Bernoulli(Ctx& c) {
  const Type& out = c.out[0];
  const Arg* p_arg = c.Find("p");
  Value p_tensor = p_arg == nullptr                   ? c.In("self")
                   : p_arg->kind == Arg::Kind::kValue ? p_arg->value
                                                      : -1;
  DType ct = ComputeType(p_tensor >= 0 ? c.T(p_tensor).dtype : out.dtype);
  Value p = p_tensor >= 0 ? Cast(c, p_tensor, ct, out.dims) : FloatArg(c, "p", 0.5, ct, out.dims);
  if (p_tensor >= 0) {
    Value ok = ir::Binary(c.g, "stablehlo.and", ir::Compare(c.g, p, Splat(c, 0, p), "GE"),
                          ir::Compare(c.g, p, Splat(c, 1, p), "LE"));
    // PyTorch's CPU kernel raises this with TORCH_CHECK's default text.
    Expect(c, ok, -1, "RuntimeError",
           "Expected p_in >= 0 && p_in <= 1 to be true, but got false.  (Could this error message "
           "be improved?  If so, please report an enhancement request to PyTorch.)");
  }
  Value u = Uniform01(c, out.dims, ct);
  return {Cast(c, ir::Compare(c.g, u, p, "LT"), out.dtype)};
}

// Largest value plain random_ produces: 2^digits for floats, the type's max for integers.
uint64_t RandomMax(DType t) {
  switch (t) {
    case DType::kPred:
      return 1;
    case DType::kS8:
      return INT8_MAX;
    case DType::kS16:
      return INT16_MAX;
    case DType::kS32:
      return INT32_MAX;
    case DType::kS64:
      return INT64_MAX;
    case DType::kU8:
      return UINT8_MAX;
    case DType::kU16:
      return UINT16_MAX;
    case DType::kU32:
      return UINT32_MAX;
    case DType::kU64:
      return UINT64_MAX;
    default:
      return uint64_t{1} << Digits(t);
  }
}

// random_ (to=None: [0, RandomMax]), random_.to ([0, to)) and random_.from ([from, to), or
// [from, RandomMax] without to): bits % range + from, where range 0 stands for 2^64. Like
// PyTorch, 32 random bits when the range fits, else 64.
V Random(Ctx& c) {
  const Type& out = c.out[0];
  int64_t from = c.Int("from", 0);
  uint64_t range;
  if (c.Find("from") != nullptr) {
    range = c.Has("to") ? static_cast<uint64_t>(c.Int("to")) - static_cast<uint64_t>(from)
                        : RandomMax(out.dtype) - static_cast<uint64_t>(from) + 1;
  } else {
    range = c.Has("to") ? static_cast<uint64_t>(c.Int("to")) : RandomMax(out.dtype) + 1;
  }
  const Dims n = DrawShape(out.dims);
  Value r;
  if (range != 0 && range <= UINT32_MAX) {
    Value bits = RandomBits(c, n, DType::kU32, 0);
    r = ir::Binary(c.g, "stablehlo.remainder", bits, ir::IntConstant(c.g, range, DType::kU32, n));
    r = Cast(c, r, DType::kU64);
  } else {
    r = RandomBits(c, n, DType::kU64, 0);
    if (range != 0) {
      r = ir::Binary(c.g, "stablehlo.remainder", r, ir::IntConstant(c.g, range, DType::kU64, n));
    }
  }
  // Wrapping u64 addition is two's complement addition of a negative `from`.
  r = Add(c, r, ir::IntConstant(c.g, static_cast<uint64_t>(from), DType::kU64, n));
  if (out.dtype != DType::kU64) r = ir::BitcastConvert(c.g, r, Type{DType::kS64, n});
  return {ir::Reshape(c.g, Cast(c, r, out.dtype), out.dims)};
}

// -log(u) / lambda with u in (0, 1), so samples are never 0 or inf.
V Exponential(Ctx& c) {
  const Type& out = c.out[0];
  Value u = Uniform01(c, out.dims, out.dtype, 0, /*open=*/true);
  Value e = Div(c, ir::Unary(c.g, "stablehlo.log", u), Splat(c, -c.Double("lambd", 1), u));
  return {Cast(c, e, out.dtype)};
}

// Trials until the first success: ceil(log(u) / log(1 - p)), at least 1 (p = 1 gives 0 / -inf).
V Geometric(Ctx& c) {
  const Type& out = c.out[0];
  Value u = Uniform01(c, out.dims, ComputeType(out.dtype), 0, /*open=*/true);
  Value q = Splat(c, std::log1p(-c.Double("p", 0.5)), u);
  Value k = ir::Unary(c.g, "stablehlo.ceil", Div(c, ir::Unary(c.g, "stablehlo.log", u), q));
  return {Cast(c, ir::Binary(c.g, "stablehlo.maximum", k, Splat(c, 1, k)), out.dtype)};
}

// median + sigma * tan(pi * (u - 1/2)).
V Cauchy(Ctx& c) {
  const Type& out = c.out[0];
  Value u = Uniform01(c, out.dims, ComputeType(out.dtype), 0, /*open=*/true);
  Value t = ir::Unary(c.g, "chlo.tan", Mul(c, Sub(c, u, Splat(c, 0.5, u)), Splat(c, M_PI, u)));
  Value x = Mul(c, t, Splat(c, c.Double("sigma", 1), t));
  x = Add(c, x, Splat(c, c.Double("median", 0), t));
  return {Cast(c, x, out.dtype)};
}

// (input * mask / (1 - p), mask) with mask ~ bernoulli(1 - p), as PyTorch's CPU kernel; train
// None means training. Scale 0 when p = 1 (no division by zero).
V NativeDropout(Ctx& c) {
  Value x = c.In("input");
  const Type& t = c.T(x);
  Type mask_t{DType::kPred, t.dims};
  if (!c.Bool("train", true)) return {x, Splat(c, 1, mask_t)};
  double keep = 1 - c.Double("p", 0.5);
  double scale = keep == 0 ? 0 : 1 / keep;
  DType ct = ComputeType(t.dtype);
  Value u = Uniform01(c, t.dims, ct);
  Value mask = ir::Compare(c.g, u, Splat(c, keep, u), "LT");
  Value y = Mul(c, Mul(c, x, Cast(c, mask, t.dtype)), Splat(c, scale, t));
  return {y, mask};
}

V NativeDropoutBackward(Ctx& c) {
  const Type& out = c.out[0];
  Value g = InAsOut(c, "grad_output"), mask = InAsOut(c, "mask");
  return {Mul(c, Mul(c, g, mask), Splat(c, c.Double("scale", 1), out))};
}

// A uniform permutation: iota sorted by random 64-bit keys (ties have probability ~n^2/2^65).
V Randperm(Ctx& c) {
  const Type& out = c.out[0];
  int64_t n = c.Int("n");
  Value keys = RandomBits(c, {n}, DType::kU64, 0);
  Value iota = ir::Iota(c.g, Type{DType::kS64, {n}}, 0);
  auto less = std::make_shared<ir::Graph>();
  Value a = less->Param(Type{DType::kU64, {}}), b = less->Param(Type{DType::kU64, {}});
  less->Param(Type{DType::kS64, {}});
  less->Param(Type{DType::kS64, {}});
  less->results = {ir::Compare(*less, a, b, "LT")};
  V sorted = c.g.Op("stablehlo.sort", {keys, iota}, {c.T(keys), c.T(iota)},
                    "dimension = 0 : i64, is_stable = true", {less});
  return {ir::Reshape(c.g, Cast(c, sorted[1], out.dtype), out.dims)};
}

// multinomial: without replacement by the Gumbel-top-k trick (argsort of log p + Gumbel noise);
// with replacement by inverting each row's CDF at uniform samples.
// PyTorch's checks of multinomial's arguments, then of the probabilities' values (which differ
// by path: its with-replacement kernel words them its own way).
void CheckMultinomial(Ctx& c, Value p, int64_t n, int64_t k, bool replacement) {
  // The input's rank and dtype and k > 0 are checked before Meta (aten/arg_checks.cc).
  if (c.out[0].dtype != DType::kS64) throw ArgError("multinomial expects Long tensor out");
  if (!replacement && k > n) {
    throw ArgError("cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  }
  if (n > (int64_t{1} << 24)) throw ArgError("number of categories cannot exceed 2^24");
  Value negative = ir::Compare(c.g, p, Splat(c, 0, p), "LT");
  Value finite = ir::Compare(c.g, ir::Unary(c.g, "stablehlo.abs", p),
                             Splat(c, std::numeric_limits<float>::infinity(), p), "LT");
  Value not_nan = ir::Compare(c.g, p, p, "EQ");
  if (!replacement || k == 1) {
    Expect(c, ir::Binary(c.g, "stablehlo.and", ir::Unary(c.g, "stablehlo.not", negative), finite),
           -1, "RuntimeError", "probability tensor contains either `inf`, `nan` or element < 0");
  } else {
    Expect(c, ir::Unary(c.g, "stablehlo.not", negative), -1, "RuntimeError",
           "invalid multinomial distribution (encountering probability entry < 0)");
    Expect(c, ir::Binary(c.g, "stablehlo.and", finite, not_nan), -1, "RuntimeError",
           "invalid multinomial distribution (encountering probability entry = infinity or NaN)");
  }
  Value sums = ir::Reduce(c.g, p, ir::Constant(c.g, 0, DType::kF32), {1}, "stablehlo.add");
  Expect(c, ir::Compare(c.g, sums, Splat(c, 0, sums), "GT"), -1, "RuntimeError",
         "invalid multinomial distribution (sum of probabilities <= 0)");
}

V Multinomial(Ctx& c) {
  const Type& out = c.out[0];
  Value p = Cast(c, c.In("self"), DType::kF32);
  Dims pd = c.T(p).dims;
  int64_t n = pd.back(), k = c.Int("num_samples");
  int64_t rows = c.T(p).numel() / std::max<int64_t>(n, 1);
  p = ir::Reshape(c.g, p, {rows, n});
  CheckMultinomial(c, p, n, k, c.Bool("replacement", false));
  Type it{DType::kS64, {rows, n}};
  Value result;
  if (!c.Bool("replacement", false)) {
    Value u = Uniform01(c, {rows, n}, DType::kF32, 0, true);
    Value gumbel = ir::Unary(
        c.g, "stablehlo.negate",
        ir::Unary(c.g, "stablehlo.log",
                  ir::Unary(c.g, "stablehlo.negate", ir::Unary(c.g, "stablehlo.log", u))));
    Value keys = Add(c, ir::Unary(c.g, "stablehlo.log", p), gumbel);
    auto greater = std::make_shared<ir::Graph>();
    Value a = greater->Param(Type{DType::kF32, {}}), b = greater->Param(Type{DType::kF32, {}});
    greater->Param(Type{DType::kS64, {}});
    greater->Param(Type{DType::kS64, {}});
    greater->results = {ir::Compare(*greater, a, b, "GT")};
    V sorted = c.g.Op("stablehlo.sort", {keys, ir::Iota(c.g, it, 1)}, {c.T(keys), it},
                      "dimension = 1 : i64, is_stable = true", {greater});
    result = ir::Slice(c.g, sorted[1], {0, 0}, {rows, k});
  } else {
    // cdf[j] = sum of p[0..j] / total, by a lower-triangular ones matmul (n is a class count).
    Type mt{DType::kF32, {n, n}};
    Value tri = Cast(c,
                     ir::Compare(c.g, ir::Iota(c.g, Type{DType::kS64, {n, n}}, 0),
                                 ir::Iota(c.g, Type{DType::kS64, {n, n}}, 1), "LE"),
                     DType::kF32);
    Value cdf = ir::DotGeneralHighest(c.g, p, tri, {}, {}, {1}, {0}, Type{DType::kF32, {rows, n}});
    Value total = ir::Slice(c.g, cdf, {0, n - 1}, {rows, n});
    cdf = Div(c, cdf, ir::BroadcastInDim(c.g, ir::Reshape(c.g, total, {rows}), {rows, n}, {0}));
    Value u = Uniform01(c, {rows, k}, DType::kF32);
    Dims cube{rows, k, n};
    Value below = ir::Compare(c.g, ir::BroadcastInDim(c.g, cdf, cube, {0, 2}),
                              ir::BroadcastInDim(c.g, u, cube, {0, 1}), "LE");
    result = ir::Reduce(c.g, Cast(c, below, DType::kS64), ir::Constant(c.g, 0, DType::kS64), {2},
                        "stablehlo.add");
    result = ir::Clamp(c.g, ir::Constant(c.g, 0, DType::kS64), result,
                       ir::Constant(c.g, static_cast<double>(n - 1), DType::kS64));
  }
  return {ir::Reshape(c.g, Cast(c, result, out.dtype), out.dims)};
}

}  // namespace

void AddFactoryRules(RuleMap& m) {
  m["aten::arange"] = Arange;
  m["aten::bernoulli"] = Bernoulli;
  m["aten::cauchy"] = Cauchy;
  m["aten::exponential"] = Exponential;
  m["aten::eye"] = Eye;
  m["aten::fill"] = Fill;
  m["aten::geometric"] = Geometric;
  m["aten::linspace"] = Linspace;
  m["aten::log_normal"] = LogNormal;
  m["aten::logspace"] = Logspace;
  m["aten::multinomial"] = Multinomial;
  m["aten::native_dropout"] = NativeDropout;
  m["aten::native_dropout_backward"] = NativeDropoutBackward;
  m["aten::normal"] = Normal;
  m["aten::random"] = Random;
  m["aten::randperm"] = Randperm;
  m["aten::uniform"] = Uniform;
  m["aten::zero"] = Zero;
}

}  // namespace tpu::lowering
