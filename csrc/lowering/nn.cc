// Neural-network ops: activations (+backward), norms, losses, convolution, pooling, dropout.
// Half types are computed in f32 and rounded once, as PyTorch's CPU kernels do.
#include <cmath>
#include <string>

#include "lowering/helpers.h"
#include "lowering/rule_table.h"

namespace tpu::lowering {
namespace {

using V = std::vector<Value>;

Value And(Ctx& c, Value a, Value b) { return ir::Binary(c.g, "stablehlo.and", a, b); }
Value Or(Ctx& c, Value a, Value b) { return ir::Binary(c.g, "stablehlo.or", a, b); }
Value Un(Ctx& c, const char* op, Value x) { return ir::Unary(c.g, op, x); }
Value Cmp(Ctx& c, Value a, Value b, const char* dir) { return ir::Compare(c.g, a, b, dir); }
Value Sel(Ctx& c, Value p, Value a, Value b) { return ir::Select(c.g, p, a, b); }
Value K(Ctx& c, double v, Value like) { return Splat(c, v, like); }
Value Scale(Ctx& c, Value x, double v) { return Mul(c, x, K(c, v, x)); }

// Named tensor in the compute dtype of output 0, broadcast to its dims.
Value Arg(Ctx& c, const char* name) {
  return Cast(c, c.In(name), AccOf(c.out[0].dtype), c.out[0].dims);
}
// A Scalar argument shaped and typed like `like`.
Value ScalarLike(Ctx& c, const char* name, Value like) {
  return Cast(c, c.In(name), c.T(like).dtype, c.T(like).dims);
}
V Done(Ctx& c, Value v) { return {Cast(c, v, c.out[0].dtype)}; }

Value Sum(Ctx& c, Value x, const Dims& dims) {
  return ir::Reduce(c.g, x, ir::Constant(c.g, 0, c.T(x).dtype), dims, "stablehlo.add");
}
Dims AllBut(int64_t rank, int64_t skip) {
  Dims d;
  for (int64_t i = 0; i < rank; ++i) {
    if (i != skip) d.push_back(i);
  }
  return d;
}
int64_t Numel(const Dims& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

// Result i typed as the Meta kernel says; zeros when the output is empty or masked off.
Value Zeros(Ctx& c, size_t i) {
  if (i >= c.out.size() || c.out[i].dtype == DType::kInvalid)
    return ir::Constant(c.g, 0, DType::kF32);
  return Splat(c, 0, c.out[i]);
}
Value OutAs(Ctx& c, size_t i, Value v) {
  if (i >= c.out.size() || c.out[i].numel() == 0) return Zeros(c, i);
  return ir::Reshape(c.g, Cast(c, v, c.out[i].dtype), c.out[i].dims);
}
bool Mask(Ctx& c, size_t i) {
  Dims m = c.Ints("output_mask");
  return i >= m.size() || m[i] != 0;
}

// ---------------------------------------------------------------------------------------------
// Activations.

V Relu(Ctx& c) {
  Value x = Arg(c, "self");
  return Done(c, Sel(c, Cmp(c, x, K(c, 0, x), "LT"), K(c, 0, x), x));  // NaN passes through
}

V Threshold(Ctx& c) {
  Value x = Arg(c, "self");
  Value le = Cmp(c, x, ScalarLike(c, "threshold", x), "LE");
  return Done(c, Sel(c, le, ScalarLike(c, "value", x), x));
}

V ThresholdBackward(Ctx& c) {
  Value g = Arg(c, "grad_output"), x = Arg(c, "self");
  return Done(c, Sel(c, Cmp(c, x, ScalarLike(c, "threshold", x), "LE"), K(c, 0, g), g));
}

constexpr double kSqrt2OverPi = 0.7978845608028654;  // sqrt(2 / pi)
constexpr double kGeluKappa = 0.044715;

V Gelu(Ctx& c) {
  Value x = Arg(c, "self");
  Value inner;
  if (c.Str("approximate", "none") == "tanh") {
    Value x3 = Mul(c, Mul(c, x, x), x);
    inner = Un(c, "stablehlo.tanh", Scale(c, Add(c, x, Scale(c, x3, kGeluKappa)), kSqrt2OverPi));
  } else {
    inner = Un(c, "chlo.erf", Scale(c, x, M_SQRT1_2));
  }
  return Done(c, Mul(c, Scale(c, x, 0.5), Add(c, K(c, 1, x), inner)));
}

V GeluBackward(Ctx& c) {
  Value g = Arg(c, "grad_output"), x = Arg(c, "self");
  Value one = K(c, 1, x);
  if (c.Str("approximate", "none") == "tanh") {
    Value x2 = Mul(c, x, x);
    Value inner = Scale(c, Add(c, x, Scale(c, Mul(c, x2, x), kGeluKappa)), kSqrt2OverPi);
    Value t = Un(c, "stablehlo.tanh", inner);
    Value left = Scale(c, x, 0.5), right = Add(c, one, t);
    Value dinner = Scale(c, Add(c, one, Scale(c, x2, 3 * kGeluKappa)), kSqrt2OverPi);
    Value dright = Mul(c, Mul(c, left, Sub(c, one, Mul(c, t, t))), dinner);
    return Done(c, Mul(c, g, Add(c, Scale(c, right, 0.5), dright)));
  }
  Value cdf = Scale(c, Add(c, one, Un(c, "chlo.erf", Scale(c, x, M_SQRT1_2))), 0.5);
  Value pdf = Scale(c, Un(c, "stablehlo.exponential", Scale(c, Mul(c, x, x), -0.5)),
                    M_2_SQRTPI * M_SQRT1_2 * 0.5);
  return Done(c, Mul(c, g, Add(c, cdf, Mul(c, x, pdf))));
}

Value Sigmoid(Ctx& c, Value x) {
  return Div(c, K(c, 1, x),
             Add(c, K(c, 1, x), Un(c, "stablehlo.exponential", Un(c, "stablehlo.negate", x))));
}

V Silu(Ctx& c) {
  Value x = Arg(c, "self");
  return Done(
      c,
      Div(c, x, Add(c, K(c, 1, x), Un(c, "stablehlo.exponential", Un(c, "stablehlo.negate", x)))));
}

V SiluBackward(Ctx& c) {
  Value g = Arg(c, "grad_output"), x = Arg(c, "self");
  Value s = Sigmoid(c, x), one = K(c, 1, x);
  return Done(c, Mul(c, Mul(c, g, s), Add(c, one, Mul(c, x, Sub(c, one, s)))));
}

V LeakyRelu(Ctx& c) {
  Value x = Arg(c, "self");
  Value neg = Mul(c, x, ScalarLike(c, "negative_slope", x));
  return Done(c, Sel(c, Cmp(c, x, K(c, 0, x), "GT"), x, neg));
}

V LeakyReluBackward(Ctx& c) {
  Value g = Arg(c, "grad_output"), x = Arg(c, "self");
  Value neg = Mul(c, g, ScalarLike(c, "negative_slope", g));
  return Done(c, Sel(c, Cmp(c, x, K(c, 0, x), "GT"), g, neg));
}

V Hardtanh(Ctx& c) {
  Value x = Arg(c, "self");
  Value lo = ScalarLike(c, "min_val", x), hi = ScalarLike(c, "max_val", x);
  Value r = Sel(c, Cmp(c, x, hi, "GT"), hi, x);
  return Done(c, Sel(c, Cmp(c, x, lo, "LT"), lo, r));
}

V HardtanhBackward(Ctx& c) {
  Value g = Arg(c, "grad_output"), x = Arg(c, "self");
  Value out = Or(c, Cmp(c, x, ScalarLike(c, "min_val", x), "LE"),
                 Cmp(c, x, ScalarLike(c, "max_val", x), "GE"));
  return Done(c, Sel(c, out, K(c, 0, g), g));
}

V Softplus(Ctx& c) {
  Value x = Arg(c, "self");
  Value beta = ScalarLike(c, "beta", x);
  Value bx = Mul(c, x, beta);
  Value soft = Div(c, Un(c, "stablehlo.log_plus_one", Un(c, "stablehlo.exponential", bx)), beta);
  return Done(c, Sel(c, Cmp(c, bx, ScalarLike(c, "threshold", x), "GT"), x, soft));
}

V SoftplusBackward(Ctx& c) {
  Value g = Arg(c, "grad_output"), x = Arg(c, "self");
  Value bx = Mul(c, x, ScalarLike(c, "beta", x));
  Value z = Un(c, "stablehlo.exponential", bx);
  Value soft = Div(c, Mul(c, g, z), Add(c, z, K(c, 1, z)));
  return Done(c, Sel(c, Cmp(c, bx, ScalarLike(c, "threshold", x), "GT"), g, soft));
}

V Elu(Ctx& c) {
  Value x = Arg(c, "self");
  Value negcoef = Mul(c, ScalarLike(c, "alpha", x), ScalarLike(c, "scale", x));
  Value neg =
      Mul(c, Un(c, "stablehlo.exponential_minus_one", Mul(c, x, ScalarLike(c, "input_scale", x))),
          negcoef);
  Value pos = Mul(c, x, ScalarLike(c, "scale", x));
  return Done(c, Sel(c, Cmp(c, x, K(c, 0, x), "LE"), neg, pos));
}

V EluBackward(Ctx& c) {
  Value g = Arg(c, "grad_output"), y = Arg(c, "self_or_result");
  Value negcoef = Mul(c, ScalarLike(c, "alpha", y), ScalarLike(c, "scale", y));
  Value in_scale = ScalarLike(c, "input_scale", y);
  Value neg = c.Bool("is_result", false) ? Mul(c, Mul(c, g, in_scale), Add(c, y, negcoef))
                                         : Mul(c, Mul(c, Mul(c, g, in_scale), negcoef),
                                               Un(c, "stablehlo.exponential", Mul(c, y, in_scale)));
  Value pos = Mul(c, g, ScalarLike(c, "scale", y));
  return Done(c, Sel(c, Cmp(c, y, K(c, 0, y), "LE"), neg, pos));
}

Value Relu6(Ctx& c, Value x) { return ir::Clamp(c.g, K(c, 0, x), x, K(c, 6, x)); }

V Hardsigmoid(Ctx& c) {
  Value x = Arg(c, "self");
  return Done(c, Div(c, Relu6(c, Add(c, x, K(c, 3, x))), K(c, 6, x)));
}

V HardsigmoidBackward(Ctx& c) {
  Value g = Arg(c, "grad_output"), x = Arg(c, "self");
  Value in = And(c, Cmp(c, x, K(c, -3, x), "GT"), Cmp(c, x, K(c, 3, x), "LT"));
  return Done(c, Sel(c, in, Div(c, g, K(c, 6, g)), K(c, 0, g)));
}

V Hardswish(Ctx& c) {
  Value x = Arg(c, "self");
  return Done(c, Div(c, Mul(c, x, Relu6(c, Add(c, x, K(c, 3, x)))), K(c, 6, x)));
}

V HardswishBackward(Ctx& c) {
  Value g = Arg(c, "grad_output"), x = Arg(c, "self");
  Value mid = Mul(c, g, Add(c, Div(c, x, K(c, 3, x)), K(c, 0.5, x)));
  Value r = Sel(c, Cmp(c, x, K(c, 3, x), "LE"), mid, g);
  return Done(c, Sel(c, Cmp(c, x, K(c, -3, x), "LT"), K(c, 0, g), r));
}

Value TanhSoftplus(Ctx& c, Value x) {
  return Un(c, "stablehlo.tanh",
            Un(c, "stablehlo.log_plus_one", Un(c, "stablehlo.exponential", x)));
}

V Mish(Ctx& c) {
  Value x = Arg(c, "self");
  return Done(c, Mul(c, x, TanhSoftplus(c, x)));
}

V MishBackward(Ctx& c) {
  Value g = Arg(c, "grad_output"), x = Arg(c, "self");
  Value t = TanhSoftplus(c, x);
  Value d = Add(c, t, Mul(c, Mul(c, x, Sigmoid(c, x)), Sub(c, K(c, 1, t), Mul(c, t, t))));
  return Done(c, Mul(c, g, d));
}

V Prelu(Ctx& c) {
  Value x = Arg(c, "self"), w = Arg(c, "weight");
  return Done(c, Sel(c, Cmp(c, x, K(c, 0, x), "GT"), x, Mul(c, w, x)));
}

// Both grads have self's shape (Meta); prelu's composite sums the weight grad.
V PreluBackward(Ctx& c) {
  Value g = Arg(c, "grad_output"), x = Arg(c, "self"), w = Arg(c, "weight");
  Value pos = Cmp(c, x, K(c, 0, x), "GT");
  Value gi = Sel(c, pos, g, Mul(c, w, g));
  Value gw = Sel(c, pos, K(c, 0, g), Mul(c, x, g));
  return {OutAs(c, 0, gi), OutAs(c, 1, gw)};
}

V DropoutBackward(Ctx& c) {
  Value g = Arg(c, "grad_output"), m = Arg(c, "mask");
  return Done(c, Scale(c, Mul(c, g, m), c.Double("scale", 1)));  // scale is a float, not a Scalar
}

// ---------------------------------------------------------------------------------------------
// Normalization.

// x (already in the compute dtype) broadcast from `stat` whose dims are x's `mapping` dims.
Value Bc(Ctx& c, Value stat, Value like, const Dims& mapping) {
  return ir::BroadcastInDim(c.g, stat, c.T(like).dims, mapping);
}

Value Rsqrt(Ctx& c, Value var, double eps) {
  return Un(c, "stablehlo.rsqrt", Add(c, var, K(c, eps, var)));
}

V LayerNorm(Ctx& c) {
  DType acc = AccOf(c.out[0].dtype);
  Value x = Cast(c, c.In("input"), acc);
  const Dims dims = c.T(x).dims;
  int64_t rank = c.T(x).rank();
  int64_t axis = rank - static_cast<int64_t>(c.Ints("normalized_shape").size());
  Dims outer = AllDims(axis), red;
  for (int64_t i = axis; i < rank; ++i) red.push_back(i);
  double m = static_cast<double>(Numel(Dims(dims.begin() + axis, dims.end())));
  Value mean = Scale(c, Sum(c, x, red), 1 / m);
  Value xc = Sub(c, x, Bc(c, mean, x, outer));
  Value rstd = Rsqrt(c, Scale(c, Sum(c, Mul(c, xc, xc), red), 1 / m), c.Double("eps", 1e-5));
  Value y = Mul(c, xc, Bc(c, rstd, x, outer));
  if (c.Has("weight")) y = Mul(c, y, Cast(c, c.In("weight"), acc, dims));
  if (c.Has("bias")) y = Add(c, y, Cast(c, c.In("bias"), acc, dims));
  return {Cast(c, y, c.out[0].dtype), OutAs(c, 1, mean), OutAs(c, 2, rstd)};
}

V LayerNormBackward(Ctx& c) {
  DType acc = AccOf(c.out[0].dtype);
  Value x = Cast(c, c.In("input"), acc), dy = Cast(c, c.In("grad_out"), acc);
  const Dims dims = c.T(x).dims;
  int64_t rank = c.T(x).rank();
  int64_t axis = rank - static_cast<int64_t>(c.Ints("normalized_shape").size());
  Dims outer = AllDims(axis), red;
  for (int64_t i = axis; i < rank; ++i) red.push_back(i);
  Dims stat_dims(dims.begin(), dims.begin() + axis);
  double m = static_cast<double>(Numel(Dims(dims.begin() + axis, dims.end())));
  auto stat = [&](const char* n) {
    return Bc(c, ir::Reshape(c.g, Cast(c, c.In(n), acc), stat_dims), x, outer);
  };
  Value rstd = stat("rstd");
  Value xhat = Mul(c, Sub(c, x, stat("mean")), rstd);
  V r(3);
  if (Mask(c, 0)) {
    Value gw = c.Has("weight") ? Mul(c, dy, Cast(c, c.In("weight"), acc, dims)) : dy;
    Value s1 = Bc(c, Sum(c, gw, red), x, outer);
    Value s2 = Bc(c, Sum(c, Mul(c, gw, xhat), red), x, outer);
    Value proj = Scale(c, Add(c, s1, Mul(c, xhat, s2)), 1 / m);
    r[0] = OutAs(c, 0, Mul(c, rstd, Sub(c, gw, proj)));
  } else {
    r[0] = Zeros(c, 0);
  }
  r[1] = Mask(c, 1) ? OutAs(c, 1, Sum(c, Mul(c, dy, xhat), outer)) : Zeros(c, 1);
  r[2] = Mask(c, 2) ? OutAs(c, 2, Sum(c, dy, outer)) : Zeros(c, 2);
  return r;
}

// Channel vector `name` (dims [C]) broadcast along dim 1 of `like`, or nullopt-like -1.
Value Channel(Ctx& c, const char* name, Value like) {
  if (!c.Has(name)) return -1;
  return Bc(c, Cast(c, c.In(name), c.T(like).dtype), like, {1});
}

V GroupNorm(Ctx& c) {
  DType acc = AccOf(c.out[0].dtype);
  Value x0 = Cast(c, c.In("input"), acc);
  const Dims dims = c.T(x0).dims;
  int64_t n = c.Int("N"), ch = c.Int("C"), hw = c.Int("HxW"), g = c.Int("group");
  Value x = ir::Reshape(c.g, x0, {n, g, ch / g * hw});
  double m = static_cast<double>(ch / g * hw);
  Value mean = Scale(c, Sum(c, x, {2}), 1 / m);
  Value xc = Sub(c, x, Bc(c, mean, x, {0, 1}));
  Value rstd = Rsqrt(c, Scale(c, Sum(c, Mul(c, xc, xc), {2}), 1 / m), c.Double("eps", 1e-5));
  Value y = ir::Reshape(c.g, Mul(c, xc, Bc(c, rstd, x, {0, 1})), {n, ch, hw});
  if (c.Has("weight")) y = Mul(c, y, Channel(c, "weight", y));
  if (c.Has("bias")) y = Add(c, y, Channel(c, "bias", y));
  return {OutAs(c, 0, ir::Reshape(c.g, y, dims)), OutAs(c, 1, mean), OutAs(c, 2, rstd)};
}

V GroupNormBackward(Ctx& c) {
  DType acc = AccOf(c.out[0].dtype);
  int64_t n = c.Int("N"), ch = c.Int("C"), hw = c.Int("HxW"), g = c.Int("group");
  Dims d4{n, g, ch / g, hw};
  Value x = ir::Reshape(c.g, Cast(c, c.In("input"), acc), d4);
  Value dy = ir::Reshape(c.g, Cast(c, c.In("grad_out"), acc), d4);
  auto stat = [&](const char* s) {
    return Bc(c, ir::Reshape(c.g, Cast(c, c.In(s), acc), {n, g}), x, {0, 1});
  };
  Value rstd = stat("rstd");
  Value xhat = Mul(c, Sub(c, x, stat("mean")), rstd);
  V r(3);
  if (Mask(c, 0)) {
    Value gdy = dy;
    if (c.Has("weight")) {
      Value w = ir::Reshape(c.g, Cast(c, c.In("weight"), acc), {g, ch / g});
      gdy = Mul(c, dy, Bc(c, w, x, {1, 2}));
    }
    Value s1 = Bc(c, Sum(c, gdy, {2, 3}), x, {0, 1});
    Value s2 = Bc(c, Sum(c, Mul(c, gdy, xhat), {2, 3}), x, {0, 1});
    Value proj = Scale(c, Add(c, s1, Mul(c, xhat, s2)), 1.0 / static_cast<double>(ch / g * hw));
    r[0] = OutAs(c, 0, Mul(c, rstd, Sub(c, gdy, proj)));
  } else {
    r[0] = Zeros(c, 0);
  }
  r[1] = Mask(c, 1) ? OutAs(c, 1, Sum(c, Mul(c, dy, xhat), {0, 3})) : Zeros(c, 1);
  r[2] = Mask(c, 2) ? OutAs(c, 2, Sum(c, dy, {0, 3})) : Zeros(c, 2);
  return r;
}

// Elements per channel (dim 1); no channels have none (group norm of an empty batch reaches
// batch norm with shape (1, 0, ...)).
double PerChannel(const Type& t) {
  return t.dims[1] == 0 ? 0.0 : static_cast<double>(t.numel() / t.dims[1]);
}

// Batch norm over all dims but 1. Returns out, save_mean, save_invstd, new running mean/var.
V BatchNorm(Ctx& c, bool training, bool functional) {
  DType acc = AccOf(c.out[0].dtype);
  Value x = Cast(c, c.In("input"), acc);
  int64_t rank = c.T(x).rank();
  Dims red = AllBut(rank, 1);
  double m = PerChannel(c.T(x));
  double eps = c.Double("eps", 1e-5), mom = c.Double("momentum", 0.1);
  bool stats = c.Has("running_mean") && c.Has("running_var");
  Value mean, var, rm = -1, rv = -1;
  if (stats) {
    rm = Cast(c, c.In("running_mean"), acc);
    rv = Cast(c, c.In("running_var"), acc);
  }
  if (training || !stats) {
    mean = Scale(c, Sum(c, x, red), 1 / m);
    Value xc = Sub(c, x, Bc(c, mean, x, {1}));
    var = Scale(c, Sum(c, Mul(c, xc, xc), red), 1 / m);
  } else {
    mean = rm;
    var = rv;
  }
  Value invstd = Rsqrt(c, var, eps);
  Value y = Mul(c, Sub(c, x, Bc(c, mean, x, {1})), Bc(c, invstd, x, {1}));
  if (c.Has("weight")) y = Mul(c, y, Channel(c, "weight", y));
  if (c.Has("bias")) y = Add(c, y, Channel(c, "bias", y));
  V r{Cast(c, y, c.out[0].dtype), OutAs(c, 1, mean), OutAs(c, 2, invstd)};
  if (training && stats) {
    Value keep = K(c, 1 - mom, rm), unbiased = Scale(c, var, m / std::max(m - 1, 1.0));
    rm = Add(c, Mul(c, keep, rm), Scale(c, mean, mom));
    rv = Add(c, Mul(c, keep, rv), Scale(c, unbiased, mom));
  }
  if (functional) {
    r.push_back(OutAs(c, 3, rm));
    r.push_back(OutAs(c, 4, rv));
  } else if (training && stats) {
    // Extra results are written back into the mutated running_mean(a!) / running_var(b!).
    r.push_back(Cast(c, rm, c.T(c.In("running_mean")).dtype));
    r.push_back(Cast(c, rv, c.T(c.In("running_var")).dtype));
  }
  return r;
}

V BatchNormBackward(Ctx& c) {
  DType acc = AccOf(c.out[0].dtype);
  Value x = Cast(c, c.In("input"), acc), dy = Cast(c, c.In("grad_out"), acc);
  int64_t rank = c.T(x).rank();
  Dims red = AllBut(rank, 1);
  double m = PerChannel(c.T(x));
  bool train = c.Bool("train", false);
  Value mean, invstd;
  if (train) {
    mean = Cast(c, c.In("save_mean"), acc);
    invstd = Cast(c, c.In("save_invstd"), acc);
  } else {
    mean = Cast(c, c.In("running_mean"), acc);
    invstd = Rsqrt(c, Cast(c, c.In("running_var"), acc), c.Double("eps", 1e-5));
  }
  Value xmu = Sub(c, x, Bc(c, mean, x, {1}));
  Value sum_dy = Sum(c, dy, red), dot = Sum(c, Mul(c, dy, xmu), red);
  V r(3);
  if (Mask(c, 0)) {
    Value scale = invstd;
    if (c.Has("weight")) scale = Mul(c, scale, Cast(c, c.In("weight"), acc));
    Value gi = dy;
    if (train) {
      Value proj = Scale(c, Mul(c, dot, Mul(c, invstd, invstd)), 1 / m);
      gi = Sub(c, Sub(c, dy, Mul(c, xmu, Bc(c, proj, x, {1}))),
               Bc(c, Scale(c, sum_dy, 1 / m), x, {1}));
    }
    r[0] = OutAs(c, 0, Mul(c, gi, Bc(c, scale, x, {1})));
  } else {
    r[0] = Zeros(c, 0);
  }
  r[1] = Mask(c, 1) ? OutAs(c, 1, Mul(c, dot, invstd)) : Zeros(c, 1);
  r[2] = Mask(c, 2) ? OutAs(c, 2, sum_dy) : Zeros(c, 2);
  return r;
}

// ---------------------------------------------------------------------------------------------
// Losses. reduction: 0 none, 1 mean, 2 sum.

Value Reduce(Ctx& c, Value loss) {
  int64_t red = c.Int("reduction", 1);
  if (red == 0) return loss;
  Value s = Sum(c, loss, AllDims(c.T(loss).rank()));
  if (red == 2) return s;
  return ir::Binary(c.g, "stablehlo.divide", s,
                    ir::ElementCount(c.g, loss, AllDims(c.T(loss).rank()), c.T(s).dtype));
}
// The gradient of Reduce: grad_output broadcast, divided by numel for mean.
Value ReduceGrad(Ctx& c, Value like) {
  Value g = Cast(c, c.In("grad_output"), c.T(like).dtype, c.T(like).dims);
  if (c.Int("reduction", 1) != 1) return g;
  Value n = ir::ElementCount(c.g, like, AllDims(c.T(like).rank()), c.T(g).dtype);
  return ir::Binary(c.g, "stablehlo.divide", g, ir::BroadcastTo(c.g, n, c.T(g).dims));
}
Value LossArg(Ctx& c, const char* name) {
  Value self = c.In("self");
  return Cast(c, c.In(name), AccOf(c.out[0].dtype), c.T(self).dims);
}

V MseLoss(Ctx& c) {
  Value d = Sub(c, LossArg(c, "self"), LossArg(c, "target"));
  return Done(c, Reduce(c, Mul(c, d, d)));
}

V MseLossBackward(Ctx& c) {
  Value d = Sub(c, LossArg(c, "self"), LossArg(c, "target"));
  return Done(c, Mul(c, Scale(c, d, 2), ReduceGrad(c, d)));
}

V BinaryCrossEntropy(Ctx& c) {
  Value x = LossArg(c, "self"), y = LossArg(c, "target");
  Value floor = K(c, -100, x);
  Value log_x = ir::Binary(c.g, "stablehlo.maximum", Un(c, "stablehlo.log", x), floor);
  Value log_1mx = ir::Binary(c.g, "stablehlo.maximum",
                             Un(c, "stablehlo.log_plus_one", Un(c, "stablehlo.negate", x)), floor);
  Value loss = Sub(c, Mul(c, Sub(c, y, K(c, 1, y)), log_1mx), Mul(c, y, log_x));
  if (c.Has("weight")) loss = Mul(c, loss, LossArg(c, "weight"));
  return Done(c, Reduce(c, loss));
}

V BinaryCrossEntropyBackward(Ctx& c) {
  Value x = LossArg(c, "self"), y = LossArg(c, "target");
  Value denom =
      ir::Binary(c.g, "stablehlo.maximum", Mul(c, Sub(c, K(c, 1, x), x), x), K(c, 1e-12, x));
  Value gi = Mul(c, ReduceGrad(c, x), Div(c, Sub(c, x, y), denom));
  if (c.Has("weight")) gi = Mul(c, gi, LossArg(c, "weight"));
  return Done(c, gi);
}

// Smooth L1 (huber = false, beta) and Huber (delta) share one shape.
V SmoothLoss(Ctx& c, bool huber) {
  double b = huber ? c.Double("delta", 1.0) : c.Double("beta", 1.0);
  Value z = Un(c, "stablehlo.abs", Sub(c, LossArg(c, "self"), LossArg(c, "target")));
  Value quad = Scale(c, Mul(c, z, z), huber ? 0.5 : (b == 0 ? 0 : 0.5 / b));
  Value lin = Sub(c, z, K(c, 0.5 * b, z));
  if (huber) lin = Scale(c, lin, b);
  return Done(c, Reduce(c, Sel(c, Cmp(c, z, K(c, b, z), "LT"), quad, lin)));
}

V SmoothLossBackward(Ctx& c, bool huber) {
  double b = huber ? c.Double("delta", 1.0) : c.Double("beta", 1.0);
  Value d = Sub(c, LossArg(c, "self"), LossArg(c, "target"));
  Value g = ReduceGrad(c, d);
  double edge = huber ? b : 1;
  Value mid = Mul(c, Scale(c, d, huber ? 1 : (b == 0 ? 0 : 1 / b)), g);
  Value r = Sel(c, Cmp(c, d, K(c, b, d), "GE"), Scale(c, g, edge), mid);
  return Done(c, Sel(c, Cmp(c, d, K(c, -b, d), "LE"), Scale(c, g, -edge), r));
}

// What nll_loss needs per target: one-hot hits, target weights (0 where ignored).
struct Nll {
  Value x, hit, keep, w;  // x/hit: self's shape; keep/w: target's shape
  Dims tmap;              // dims of self the target maps to
};

Nll NllPrep(Ctx& c) {
  Nll n;
  DType acc = AccOf(c.T(c.In("self")).dtype);
  n.x = Cast(c, c.In("self"), acc);
  const Dims& dims = c.T(n.x).dims;
  int64_t cdim = c.T(n.x).rank() == 1 ? 0 : 1;
  n.tmap = AllBut(c.T(n.x).rank(), cdim);
  Value t = Cast(c, c.In("target"), DType::kS64);
  Value cls = ir::Iota(c.g, Type{DType::kS64, dims}, cdim);
  n.hit = Cmp(c, cls, Bc(c, t, cls, n.tmap), "EQ");
  n.keep = Cmp(c, t, Splat(c, static_cast<double>(c.Int("ignore_index", -100)), t), "NE");
  Value w = K(c, 1, Cast(c, t, acc));
  if (c.Has("weight")) {
    Value wb = Bc(c, Cast(c, c.In("weight"), acc), n.x, {cdim});
    w = Sum(c, Sel(c, n.hit, wb, K(c, 0, wb)), {cdim});
  }
  n.w = Sel(c, n.keep, w, K(c, 0, w));
  return n;
}

V NllLoss(Ctx& c) {
  Nll n = NllPrep(c);
  int64_t cdim = c.T(n.x).rank() == 1 ? 0 : 1;
  Value t = Cast(c, c.In("target"), DType::kS64);
  Value in_range = And(c, Cmp(c, t, K(c, 0, t), "GE"),
                       Cmp(c, t, K(c, static_cast<double>(c.T(n.x).dims[cdim]), t), "LT"));
  Expect(c, Or(c, in_range, Un(c, "stablehlo.not", n.keep)), t, "IndexError",
         "Target {} is out of bounds.");
  Value picked = Sum(c, Sel(c, n.hit, n.x, K(c, 0, n.x)), {cdim});
  Value loss = Sel(c, n.keep, Mul(c, Un(c, "stablehlo.negate", picked), n.w), K(c, 0, n.w));
  int64_t red = c.Int("reduction", 1);
  if (red == 0) return {OutAs(c, 0, loss), Zeros(c, 1)};
  Dims all = AllDims(c.T(loss).rank());
  Value total = Sum(c, n.w, all), s = Sum(c, loss, all);
  return {OutAs(c, 0, red == 1 ? Div(c, s, total) : s), OutAs(c, 1, total)};
}

V NllLossBackward(Ctx& c) {
  Nll n = NllPrep(c);
  Value coef = Un(c, "stablehlo.negate", n.w);
  Value g = Cast(c, c.In("grad_output"), c.T(coef).dtype);
  g = c.T(g).rank() == 0 ? ir::BroadcastInDim(c.g, g, c.T(coef).dims, {}) : g;
  coef = Mul(c, coef, g);
  if (c.Int("reduction", 1) == 1) {
    Value total = Cast(c, c.In("total_weight"), c.T(coef).dtype);
    coef = Div(c, coef, ir::BroadcastInDim(c.g, total, c.T(coef).dims, {}));
  }
  Value hit = And(c, n.hit, Bc(c, n.keep, n.hit, n.tmap));
  return {OutAs(c, 0, Sel(c, hit, Bc(c, coef, n.x, n.tmap), K(c, 0, n.x)))};
}

// multi_margin_loss over [N, C] rows (a vector or a scalar is one row): for each class j other
// than the target y, w[y] * max(0, margin - x[y] + x[j])^p / C, summed over j.
struct Margin {
  Value x, hit, z, wy;  // x, hit, z: [N, C]; wy: [N] (target's weight, or 1)
  int64_t n, classes;
};

Margin MarginPrep(Ctx& c) {
  Margin m;
  DType acc = AccOf(c.T(c.In("self")).dtype);
  Value x = Cast(c, c.In("self"), acc);
  m.classes = c.T(x).rank() == 0 ? 1 : c.T(x).dims.back();
  m.n = c.T(x).numel() / std::max<int64_t>(m.classes, 1);
  m.x = ir::Reshape(c.g, x, {m.n, m.classes});
  Value t = ir::Reshape(c.g, Cast(c, c.In("target"), DType::kS64), {m.n});
  ExpectIndex(c, t, m.classes, false, "RuntimeError", "target out of range");
  Value cls = ir::Iota(c.g, Type{DType::kS64, {m.n, m.classes}}, 1);
  m.hit = Cmp(c, cls, ir::BroadcastInDim(c.g, t, {m.n, m.classes}, {0}), "EQ");
  Value xy = Sum(c, Sel(c, m.hit, m.x, K(c, 0, m.x)), {1});
  Value margin = Cast(c, c.In("margin"), acc, {m.n, m.classes});
  m.z = Add(c, Sub(c, margin, ir::BroadcastInDim(c.g, xy, {m.n, m.classes}, {0})), m.x);
  m.wy = K(c, 1, xy);
  if (c.Has("weight")) {
    Value w = ir::BroadcastInDim(c.g, Cast(c, c.In("weight"), acc), {m.n, m.classes}, {1});
    m.wy = Sum(c, Sel(c, m.hit, w, K(c, 0, w)), {1});
  }
  return m;
}

Value IsSquared(Ctx& c, const Margin& m) {
  Value p = Cast(c, c.In("p"), c.T(m.z).dtype, c.T(m.z).dims);
  return Cmp(c, p, K(c, 2, p), "EQ");
}

V MultiMarginLoss(Ctx& c) {
  Margin m = MarginPrep(c);
  Value active = Sel(c, Cmp(c, m.z, K(c, 0, m.z), "GT"), m.z, K(c, 0, m.z));
  Value squared = IsSquared(c, m);  // p is a runtime Scalar (1 or 2, checked by Meta)
  active = Sel(c, squared, Mul(c, active, active), active);
  Value per_row = Sum(c, Sel(c, m.hit, K(c, 0, active), active), {1});
  per_row = Div(c, Mul(c, per_row, m.wy), K(c, static_cast<double>(m.classes), per_row));
  int64_t red = c.Int("reduction", 1);
  if (red == 0) return {OutAs(c, 0, per_row)};
  Value total = Sum(c, per_row, {0});
  return {OutAs(c, 0, red == 1 ? Div(c, total, K(c, static_cast<double>(m.n), total)) : total)};
}

V MultiMarginLossBackward(Ctx& c) {
  Margin m = MarginPrep(c);
  Value on = And(c, Cmp(c, m.z, K(c, 0, m.z), "GT"), Un(c, "stablehlo.not", m.hit));
  Value d = Sel(c, IsSquared(c, m), Scale(c, m.z, 2), K(c, 1, m.z));
  Value scale = Div(c, m.wy, K(c, static_cast<double>(m.classes), m.wy));  // [N]
  Value g = Cast(c, c.In("grad_output"), c.T(scale).dtype);
  if (c.Int("reduction", 1) == 0 && c.T(g).numel() == m.n) {
    scale = Mul(c, scale, ir::Reshape(c.g, g, {m.n}));
  } else {
    g = ir::BroadcastInDim(c.g, ir::Reshape(c.g, g, {}), {m.n}, {});
    scale = Mul(c, scale, g);
    if (c.Int("reduction", 1) == 1) scale = Div(c, scale, K(c, static_cast<double>(m.n), scale));
  }
  Value gj =
      Sel(c, on, Mul(c, d, ir::BroadcastInDim(c.g, scale, {m.n, m.classes}, {0})), K(c, 0, m.z));
  Value gy = ir::BroadcastInDim(c.g, Sum(c, gj, {1}), {m.n, m.classes}, {0});
  return {OutAs(c, 0, Sel(c, m.hit, Un(c, "stablehlo.negate", gy), gj))};
}

// ---------------------------------------------------------------------------------------------
// Convolution (NC + spatial layout). Padding is applied with stablehlo.pad, which allows
// negative (cropping) edges, so every convolution below runs with zero padding.

Dims Expand(Dims v, size_t n, int64_t fill) {
  if (v.empty()) v.push_back(fill);
  if (v.size() == 1) v.resize(n, v[0]);
  return v;
}

struct ConvParams {
  size_t nsp;
  Dims stride, pad, dil;
  int64_t groups;
};

ConvParams Params(Ctx& c, size_t nsp) {
  return {nsp, Expand(c.Ints("stride"), nsp, 1), Expand(c.Ints("padding"), nsp, 0),
          Expand(c.Ints("dilation"), nsp, 1), c.Int("groups", 1)};
}

std::string Layout(const char* a, const char* b, size_t nsp) {
  std::string s = std::string("[") + a + ", " + b;
  for (size_t i = 0; i < nsp; ++i) s += ", " + std::to_string(i);
  return s + "]";
}

Value Conv(Ctx& c, Value lhs, Value rhs, const Dims& out, const Dims& strides, const Dims& rhs_dil,
           int64_t fgc, int64_t bgc, const std::string& layout) {
  size_t nsp = out.size() - 2;
  std::vector<Dims> zero(nsp, Dims{0, 0});
  return c.g.Op1("stablehlo.convolution", {lhs, rhs}, Type{c.T(lhs).dtype, out},
                 "window_strides = " + ir::I64Array(strides) + ", padding = " + ir::DenseI64(zero) +
                     ", lhs_dilation = " + ir::I64Array(Dims(nsp, 1)) + ", rhs_dilation = " +
                     ir::I64Array(rhs_dil) + ", dimension_numbers = " + layout +
                     ", feature_group_count = " + std::to_string(fgc) +
                     " : i64, batch_group_count = " + std::to_string(bgc) +
                     " : i64, precision_config = [#stablehlo<precision HIGHEST>, "
                     "#stablehlo<precision HIGHEST>]");
}

// Pads the spatial dims (2..) of x: lo[i] before, enough after to reach total[i], interior.
Value PadSpatial(Ctx& c, Value x, const Dims& lo, const Dims& total, const Dims& interior) {
  const Dims& d = c.T(x).dims;
  Dims l{0, 0}, h{0, 0}, in{0, 0};
  for (size_t i = 0; i < lo.size(); ++i) {
    int64_t n = d[i + 2], s = interior.empty() ? 0 : interior[i];
    l.push_back(lo[i]);
    h.push_back(total[i] - lo[i] - (n + std::max<int64_t>(n - 1, 0) * s));
    in.push_back(s);
  }
  return ir::Pad(c.g, x, ir::Constant(c.g, 0, c.T(x).dtype), l, h, in);
}

std::string ConvLayout(size_t nsp) {
  return "#stablehlo.conv<" + Layout("b", "f", nsp) + "x" + Layout("o", "i", nsp) + "->" +
         Layout("b", "f", nsp) + ">";
}

// y = conv(x, w) with out dims `out` (N, O, spatial...).
Value ConvForward(Ctx& c, Value x, Value w, const Dims& out, const ConvParams& p) {
  const Dims& wd = c.T(w).dims;
  Dims total;
  for (size_t i = 0; i < p.nsp; ++i) {
    total.push_back((out[i + 2] - 1) * p.stride[i] + p.dil[i] * (wd[i + 2] - 1) + 1);
  }
  return Conv(c, PadSpatial(c, x, p.pad, total, {}), w, out, p.stride, p.dil, p.groups, 1,
              ConvLayout(p.nsp));
}

// The input gradient of y = conv(x, w): a stride-1 conv of dy, dilated by the stride, with the
// spatially reversed kernel whose in/out channels are swapped within each group.
Value GradInput(Ctx& c, Value dy, Value w, const Dims& in, const ConvParams& p) {
  Dims wd = c.T(w).dims;
  int64_t g = p.groups, co = wd[0], ci_g = wd[1];
  Dims split{g, co / g, ci_g}, perm{0, 2, 1}, spatial;
  for (size_t i = 0; i < p.nsp; ++i) {
    split.push_back(wd[i + 2]);
    perm.push_back(static_cast<int64_t>(i) + 3);
    spatial.push_back(static_cast<int64_t>(i) + 2);
  }
  Value wt = ir::Transpose(c.g, ir::Reshape(c.g, w, split), perm);
  Dims wtd = wd;
  wtd[0] = g * ci_g;
  wtd[1] = co / g;
  wt = ir::Reverse(c.g, ir::Reshape(c.g, wt, wtd), spatial);
  Dims lo, total, interior;
  for (size_t i = 0; i < p.nsp; ++i) {
    int64_t reach = p.dil[i] * (wd[i + 2] - 1);
    lo.push_back(reach - p.pad[i]);
    total.push_back(in[i + 2] + reach);
    interior.push_back(p.stride[i] - 1);
  }
  Value dyp = PadSpatial(c, dy, lo, total, interior);
  return Conv(c, dyp, wt, in, Dims(p.nsp, 1), p.dil, g, 1, ConvLayout(p.nsp));
}

// The weight gradient of y = conv(x, w): correlates x with dy over the batch. Channels of x act
// as the batch and are split into groups with batch_group_count.
Value GradWeight(Ctx& c, Value x, Value dy, const Dims& wd, const ConvParams& p) {
  const Dims& od = c.T(dy).dims;
  Dims total;
  for (size_t i = 0; i < p.nsp; ++i) {
    total.push_back((wd[i + 2] - 1) * p.dil[i] + (od[i + 2] - 1) * p.stride[i] + 1);
  }
  std::string layout = "#stablehlo.conv<" + Layout("f", "b", p.nsp) + "x" +
                       Layout("i", "o", p.nsp) + "->" + Layout("f", "b", p.nsp) + ">";
  return Conv(c, PadSpatial(c, x, p.pad, total, {}), dy, wd, p.dil, p.stride, 1, p.groups, layout);
}

V Convolution(Ctx& c) {
  DType acc = AccOf(c.out[0].dtype);
  Value x = Cast(c, c.In("input"), acc), w = Cast(c, c.In("weight"), acc);
  const Dims& out = c.out[0].dims;
  if (c.T(x).rank() != c.T(w).rank()) throw LoweringError("unbatched convolution input");
  ConvParams p = Params(c, out.size() - 2);
  Value y = c.Bool("transposed", false) ? GradInput(c, x, w, out, p) : ConvForward(c, x, w, out, p);
  if (c.Has("bias")) y = Add(c, y, Channel(c, "bias", y));
  return Done(c, y);
}

V ConvolutionBackward(Ctx& c) {
  DType acc = AccOf(c.out[0].dtype);
  Value dy = Cast(c, c.In("grad_output"), acc), x = Cast(c, c.In("input"), acc);
  Value w = Cast(c, c.In("weight"), acc);
  const Dims xd = c.T(x).dims, wd = c.T(w).dims;
  ConvParams p = Params(c, xd.size() - 2);
  bool tr = c.Bool("transposed", false);
  V r(3);
  if (Mask(c, 0)) {
    r[0] = OutAs(c, 0, tr ? ConvForward(c, dy, w, xd, p) : GradInput(c, dy, w, xd, p));
  } else {
    r[0] = Zeros(c, 0);
  }
  if (Mask(c, 1)) {
    r[1] = OutAs(c, 1, tr ? GradWeight(c, dy, x, wd, p) : GradWeight(c, x, dy, wd, p));
  } else {
    r[1] = Zeros(c, 1);
  }
  r[2] = Mask(c, 2) ? OutAs(c, 2, Sum(c, dy, AllBut(c.T(dy).rank(), 1))) : Zeros(c, 2);
  return r;
}

// ---------------------------------------------------------------------------------------------
// 2-D and 3-D pooling over the last n dims, one strided slice ("tap") per kernel offset.

struct Pool {
  int64_t rank;
  int64_t n;     // spatial dims: the last n of rank
  Dims in, out;  // full dims of input and output
  Dims k, s, p, d;
};

Pool PoolOf(Ctx& c, const Dims& in, const Dims& out, int64_t n) {
  Pool q{static_cast<int64_t>(in.size()),     n,  in, out,
         Expand(c.Ints("kernel_size"), n, 1), {}, {}, {}};
  q.s = c.Ints("stride").empty() ? q.k : Expand(c.Ints("stride"), n, 1);
  q.p = Expand(c.Ints("padding"), n, 0);
  q.d = Expand(c.Ints("dilation"), n, 1);
  return q;
}

// Every kernel offset (one index per spatial dim), in row-major order.
std::vector<Dims> Offsets(const Pool& q) {
  std::vector<Dims> all{Dims{}};
  for (int64_t a = 0; a < q.n; ++a) {
    std::vector<Dims> next;
    for (const Dims& o : all) {
      for (int64_t i = 0; i < q.k[a]; ++i) {
        next.push_back(o);
        next.back().push_back(i);
      }
    }
    all = std::move(next);
  }
  return all;
}

int64_t SpatialDim(const Pool& q, int64_t a) { return q.rank - q.n + a; }

// Zero-padded x such that every tap is a strided slice.
Value PoolPad(Ctx& c, Value x, const Pool& q) {
  Dims lo(q.rank, 0), hi(q.rank, 0);
  for (int64_t a = 0; a < q.n; ++a) {
    int64_t dim = SpatialDim(q, a);
    lo[dim] = q.p[a];
    hi[dim] = (q.out[dim] - 1) * q.s[a] + (q.k[a] - 1) * q.d[a] + 1 - q.in[dim] - q.p[a];
  }
  return ir::Pad(c.g, x, ir::Constant(c.g, 0, c.T(x).dtype), lo, hi);
}

// out[.., o] = x[.., o*s + off*d - p] along every spatial dim (x padded by PoolPad).
Value Tap(Ctx& c, Value xp, const Pool& q, const Dims& off) {
  Dims start(q.rank, 0), limit = q.out, stride(q.rank, 1);
  for (int64_t a = 0; a < q.n; ++a) {
    int64_t dim = SpatialDim(q, a);
    start[dim] = off[a] * q.d[a];
    limit[dim] = start[dim] + (q.out[dim] - 1) * q.s[a] + 1;
    stride[dim] = q.s[a];
  }
  return ir::Slice(c.g, xp, start, limit, stride);
}

// Input coordinate (s64, output-shaped) along spatial axis a for kernel offset `off`.
Value Coord(Ctx& c, const Pool& q, int64_t a, int64_t off) {
  Value o = ir::Iota(c.g, Type{DType::kS64, q.out}, SpatialDim(q, a));
  return Add(c, Scale(c, o, static_cast<double>(q.s[a])),
             K(c, static_cast<double>(off * q.d[a] - q.p[a]), o));
}

Value InRange(Ctx& c, Value pos, int64_t n) {
  return And(c, Cmp(c, pos, K(c, 0, pos), "GE"),
             Cmp(c, pos, K(c, static_cast<double>(n), pos), "LT"));
}

// For kernel offset `off`: whether the tap reads inside the input, and the flat spatial index
// it reads (PyTorch's max-pool index).
std::pair<Value, Value> TapPosition(Ctx& c, const Pool& q, const Dims& off) {
  Value valid = -1, flat = -1;
  for (int64_t a = 0; a < q.n; ++a) {
    Value pos = Coord(c, q, a, off[a]);
    int64_t size = q.in[SpatialDim(q, a)];
    Value in = InRange(c, pos, size);
    valid = valid < 0 ? in : And(c, valid, in);
    flat = flat < 0 ? pos : Add(c, Scale(c, flat, static_cast<double>(size)), pos);
  }
  return {valid, flat};
}

// Inverse of Tap: scatters an output-shaped v to input positions (out-of-range ones dropped).
Value Place(Ctx& c, Value v, const Pool& q, const Dims& off) {
  Dims lo(q.rank, 0), hi(q.rank, 0), interior(q.rank, 0);
  for (int64_t a = 0; a < q.n; ++a) {
    int64_t dim = SpatialDim(q, a);
    lo[dim] = off[a] * q.d[a] - q.p[a];
    interior[dim] = q.s[a] - 1;
    hi[dim] = q.in[dim] - lo[dim] - ((q.out[dim] - 1) * q.s[a] + 1);
  }
  return ir::Pad(c.g, v, ir::Constant(c.g, 0, c.T(v).dtype), lo, hi, interior);
}

V MaxPool(Ctx& c, int64_t n) {
  Value x = c.In("self");
  Pool q = PoolOf(c, c.T(x).dims, c.out[0].dims, n);
  if (Numel(q.out) == 0) return {Zeros(c, 0), Zeros(c, 1)};
  Value xp = PoolPad(c, x, q);
  bool is_float = rt::IsFloat(c.T(x).dtype);
  Value best = Splat(c, 0, Type{c.T(x).dtype, q.out});
  Value idx = Splat(c, -1, Type{DType::kS64, q.out});
  for (const Dims& off : Offsets(q)) {
    Value v = Tap(c, xp, q, off);
    auto [valid, flat] = TapPosition(c, q, off);
    // PyTorch keeps the first max, but a NaN always replaces the running max.
    Value better = Or(c, Cmp(c, idx, K(c, -1, idx), "EQ"), Cmp(c, v, best, "GT"));
    if (is_float) better = Or(c, better, Cmp(c, v, v, "NE"));
    Value take = And(c, valid, better);
    best = Sel(c, take, v, best);
    idx = Sel(c, take, flat, idx);
  }
  return {Cast(c, best, c.out[0].dtype), Cast(c, idx, c.out[1].dtype)};
}

V MaxPoolBackward(Ctx& c, int64_t n) {
  Value self = c.In("self");
  DType acc = AccOf(c.out[0].dtype);
  Value g = Cast(c, c.In("grad_output"), acc);
  Pool q = PoolOf(c, c.T(self).dims, c.T(g).dims, n);
  Value idx = Cast(c, c.In("indices"), DType::kS64);
  Value gi = Splat(c, 0, Type{acc, q.in});
  if (Numel(q.out) == 0) return Done(c, gi);
  for (const Dims& off : Offsets(q)) {
    auto [valid, flat] = TapPosition(c, q, off);
    Value m = And(c, Cmp(c, idx, flat, "EQ"), valid);
    gi = Add(c, gi, Place(c, Sel(c, m, g, K(c, 0, g)), q, off));
  }
  return Done(c, gi);
}

// PyTorch's avg-pool divisor for every output position, in dtype t.
Value AvgDivisor(Ctx& c, const Pool& q, DType t) {
  if (c.Has("divisor_override")) {
    return Splat(c, static_cast<double>(c.Int("divisor_override")), Type{t, q.out});
  }
  bool include_pad = c.Bool("count_include_pad", true);
  Value count;
  for (int64_t a = 0; a < q.n; ++a) {
    int64_t n = q.in[SpatialDim(q, a)];
    Value start = Coord(c, q, a, 0);
    Value end = ir::Binary(c.g, "stablehlo.minimum",
                           Add(c, start, K(c, static_cast<double>(q.k[a]), start)),
                           K(c, static_cast<double>(n + q.p[a]), start));
    Value size = Sub(c, end, start);
    if (!include_pad) {
      Value s0 = ir::Binary(c.g, "stablehlo.maximum", start, K(c, 0, start));
      Value e0 = ir::Binary(c.g, "stablehlo.minimum", end, K(c, static_cast<double>(n), end));
      size = Sub(c, e0, s0);
    }
    count = a == 0 ? size : Mul(c, count, size);
  }
  return Cast(c, count, t);
}

V AvgPool(Ctx& c, int64_t n) {
  DType acc = AccOf(c.out[0].dtype);
  Value x = Cast(c, c.In("self"), acc);
  Pool q = PoolOf(c, c.T(x).dims, c.out[0].dims, n);
  q.d = Dims(n, 1);
  if (Numel(q.out) == 0) return {Zeros(c, 0)};
  Value xp = PoolPad(c, x, q), sum = -1;
  for (const Dims& off : Offsets(q)) {
    Value v = Tap(c, xp, q, off);
    sum = sum < 0 ? v : Add(c, sum, v);
  }
  return Done(c, Div(c, sum, AvgDivisor(c, q, acc)));
}

V AvgPoolBackward(Ctx& c, int64_t n) {
  DType acc = AccOf(c.out[0].dtype);
  Value g = Cast(c, c.In("grad_output"), acc);
  Pool q = PoolOf(c, c.T(c.In("self")).dims, c.T(g).dims, n);
  q.d = Dims(n, 1);
  Value gi = Splat(c, 0, Type{acc, q.in});
  if (Numel(q.out) == 0) return Done(c, gi);
  Value share = Div(c, g, AvgDivisor(c, q, acc));
  for (const Dims& off : Offsets(q)) gi = Add(c, gi, Place(c, share, q, off));
  return Done(c, gi);
}

// Adaptive pooling bins: a 0/1 (n_out x n_in) membership matrix and each bin's size.
std::pair<Value, Value> Bins(Ctx& c, int64_t n_in, int64_t n_out, DType t) {
  Type tt{DType::kS64, {n_out, n_in}};
  Value i = ir::Iota(c.g, tt, 0), h = ir::Iota(c.g, tt, 1);
  auto start = [&](Value o) {
    return Div(c, Mul(c, o, K(c, static_cast<double>(n_in), o)),
               K(c, static_cast<double>(n_out), o));
  };
  auto end = [&](Value o) {
    Value n = Add(c, Mul(c, Add(c, o, K(c, 1, o)), K(c, static_cast<double>(n_in), o)),
                  K(c, static_cast<double>(n_out - 1), o));
    return Div(c, n, K(c, static_cast<double>(n_out), o));
  };
  Value member = And(c, Cmp(c, h, start(i), "GE"), Cmp(c, h, end(i), "LT"));
  Value o = ir::Iota(c.g, Type{DType::kS64, {n_out}}, 0);
  return {Cast(c, member, t), Cast(c, Sub(c, end(o), start(o)), t)};
}

// Contracts dim `axis` of x with dim `mdim` of the bin matrix m; the new dim takes its place.
Value ApplyBins(Ctx& c, Value x, Value m, int64_t axis, int64_t mdim) {
  const Dims& xd = c.T(x).dims;
  int64_t r = c.T(x).rank();
  Dims out;
  Dims perm;
  for (int64_t k = 0; k < r; ++k) {
    if (k != axis) out.push_back(xd[k]);
  }
  out.push_back(c.T(m).dims[1 - mdim]);
  Value y = ir::DotGeneralHighest(c.g, x, m, {}, {}, {axis}, {mdim}, Type{c.T(x).dtype, out});
  // dot_general puts the new dim last; move it back to `axis`.
  for (int64_t k = 0; k < r - 1; ++k) perm.push_back(k);
  perm.insert(perm.begin() + axis, r - 1);
  return ir::Transpose(c.g, y, perm);
}

// Over the last `n` (2 or 3) dims: each output bin is the mean of its input bin.
V AdaptiveAvgPool(Ctx& c, int64_t n) {
  DType acc = AccOf(c.out[0].dtype);
  Value y = Cast(c, c.In("self"), acc);
  const Dims in = c.T(y).dims;
  const Dims& out = c.out[0].dims;
  int64_t r = static_cast<int64_t>(in.size());
  for (int64_t a = r - n; a < r; ++a) {
    auto [m, count] = Bins(c, in[a], out[a], acc);
    y = ApplyBins(c, y, m, a, 1);
    y = Div(c, y, ir::BroadcastInDim(c.g, count, c.T(y).dims, {a}));
  }
  return Done(c, y);
}

V AdaptiveAvgPoolBackward(Ctx& c, int64_t n) {
  DType acc = AccOf(c.out[0].dtype);
  Value g = Cast(c, c.In("grad_output"), acc);
  const Dims& in = c.out[0].dims;
  const Dims out = c.T(g).dims;
  int64_t r = static_cast<int64_t>(out.size());
  for (int64_t a = r - n; a < r; ++a) {
    auto [m, count] = Bins(c, in[a], out[a], acc);
    g = Div(c, g, ir::BroadcastInDim(c.g, count, c.T(g).dims, {a}));
    g = ApplyBins(c, g, m, a, 0);
  }
  return Done(c, g);
}

// hardshrink and softshrink: zero inside [-lambd, lambd]; softshrink moves the rest by lambd.
V Shrink(Ctx& c, bool soft) {
  Value x = Arg(c, "self"), l = ScalarLike(c, "lambd", x);
  Value above = Cmp(c, x, l, "GT"), below = Cmp(c, x, Un(c, "stablehlo.negate", l), "LT");
  Value kept = soft ? Sel(c, above, Sub(c, x, l), Add(c, x, l)) : x;
  return Done(c, Sel(c, Or(c, above, below), kept, K(c, 0, x)));
}

V ShrinkBackward(Ctx& c) {
  Value g = Arg(c, c.Has("grad_out") ? "grad_out" : "grad_output"), x = Arg(c, "self");
  Value l = ScalarLike(c, "lambd", x);
  Value outside = Or(c, Cmp(c, x, l, "GT"), Cmp(c, x, Un(c, "stablehlo.negate", l), "LT"));
  return Done(c, Sel(c, outside, g, K(c, 0, g)));
}

// glu: the first half of `dim` times the sigmoid of the second.
std::pair<Value, Value> Halves(Ctx& c, Value x, int64_t dim) {
  Dims d = c.T(x).dims, start(d.size(), 0), mid = d;
  dim = dim < 0 ? dim + static_cast<int64_t>(d.size()) : dim;
  mid[dim] = d[dim] / 2;
  Dims from = start;
  from[dim] = d[dim] / 2;
  return {ir::Slice(c.g, x, start, mid), ir::Slice(c.g, x, from, d)};
}

V Glu(Ctx& c) {
  Value x = Cast(c, c.In("self"), AccOf(c.out[0].dtype));
  auto [a, b] = Halves(c, x, c.Int("dim"));
  return Done(c, Mul(c, a, Un(c, "stablehlo.logistic", b)));
}

V GluBackward(Ctx& c) {
  DType acc = AccOf(c.out[0].dtype);
  Value x = Cast(c, c.In("self"), acc), g = Cast(c, c.In("grad_output"), acc);
  int64_t dim = c.Int("dim");
  auto [a, b] = Halves(c, x, dim);
  Value s = Un(c, "stablehlo.logistic", b);
  Value ga = Mul(c, g, s);
  Value gb = Mul(c, Mul(c, ga, a), Sub(c, K(c, 1, s), s));
  dim = dim < 0 ? dim + c.T(x).rank() : dim;
  return Done(c, ir::Concat(c.g, {ga, gb}, dim));
}

}  // namespace

// Backward of sigmoid/tanh from their output y: g * y * (1 - y) and g * (1 - y * y).
V SigmoidTanhBackward(Ctx& c, bool sigmoid) {
  DType t = c.out[0].dtype;
  Value g = Cast(c, c.In("grad_output"), t, c.out[0].dims);
  Value y = Cast(c, c.In("output"), t, c.out[0].dims);
  Value one = Splat(c, 1, y);
  Value d =
      sigmoid
          ? ir::Binary(c.g, "stablehlo.multiply", y, ir::Binary(c.g, "stablehlo.subtract", one, y))
          : ir::Binary(c.g, "stablehlo.subtract", one, ir::Binary(c.g, "stablehlo.multiply", y, y));
  // Complex: PyTorch's gradient convention takes the conjugate of the derivative.
  return {ir::Binary(c.g, "stablehlo.multiply", g, ir::Conj(c.g, d))};
}

// logit(x) = log(x / (1 - x)), x clamped to [eps, 1 - eps] when eps is given.
Value ClampEps(Ctx& c, Value x) {
  if (!c.Has("eps")) return x;
  double eps = c.Double("eps", 0);
  return ir::Clamp(c.g, Splat(c, eps, ir::Type{c.T(x).dtype, {}}), x,
                   Splat(c, 1 - eps, ir::Type{c.T(x).dtype, {}}));
}

V Logit(Ctx& c) {
  Value x = ClampEps(c, Cast(c, c.In("self"), c.out[0].dtype));
  Value r = ir::Binary(c.g, "stablehlo.divide", x,
                       ir::Binary(c.g, "stablehlo.subtract", Splat(c, 1, x), x));
  return {ir::Unary(c.g, "stablehlo.log", r)};
}

// d/dx logit = 1 / (x (1 - x)); zero outside [eps, 1 - eps] when eps is given.
V LogitBackward(Ctx& c) {
  DType t = c.out[0].dtype;
  Value g = Cast(c, c.In("grad_output"), t, c.out[0].dims);
  Value x = Cast(c, c.In("self"), t, c.out[0].dims);
  Value d = ir::Binary(c.g, "stablehlo.multiply", x,
                       ir::Binary(c.g, "stablehlo.subtract", Splat(c, 1, x), x));
  Value r = ir::Binary(c.g, "stablehlo.divide", g, d);
  if (!c.Has("eps")) return {r};
  double eps = c.Double("eps", 0);
  Value inside = ir::Binary(c.g, "stablehlo.and", ir::Compare(c.g, x, Splat(c, eps, x), "GE"),
                            ir::Compare(c.g, x, Splat(c, 1 - eps, x), "LE"));
  return {ir::Select(c.g, inside, r, Splat(c, 0, r))};
}

void AddNnRules(RuleMap& m) {
  m["aten::_adaptive_avg_pool2d"] = +[](Ctx& c) { return AdaptiveAvgPool(c, 2); };
  m["aten::_adaptive_avg_pool2d_backward"] = +[](Ctx& c) { return AdaptiveAvgPoolBackward(c, 2); };
  m["aten::_adaptive_avg_pool3d"] = +[](Ctx& c) { return AdaptiveAvgPool(c, 3); };
  m["aten::_adaptive_avg_pool3d_backward"] = +[](Ctx& c) { return AdaptiveAvgPoolBackward(c, 3); };
  m["aten::glu"] = Glu;
  m["aten::glu_backward"] = GluBackward;
  m["aten::hardshrink"] = +[](Ctx& c) { return Shrink(c, false); };
  m["aten::hardshrink_backward"] = ShrinkBackward;
  m["aten::softshrink"] = +[](Ctx& c) { return Shrink(c, true); };
  m["aten::softshrink_backward"] = ShrinkBackward;
  m["aten::_native_batch_norm_legit"] =
      +[](Ctx& c) { return BatchNorm(c, c.Bool("training", false), false); };
  m["aten::_native_batch_norm_legit_functional"] =
      +[](Ctx& c) { return BatchNorm(c, c.Bool("training", false), true); };
  m["aten::_native_batch_norm_legit_no_training"] =
      +[](Ctx& c) { return BatchNorm(c, false, false); };
  m["aten::_prelu_kernel"] = Prelu;
  m["aten::_prelu_kernel_backward"] = PreluBackward;
  m["aten::avg_pool2d"] = +[](Ctx& c) { return AvgPool(c, 2); };
  m["aten::avg_pool2d_backward"] = +[](Ctx& c) { return AvgPoolBackward(c, 2); };
  m["aten::avg_pool3d"] = +[](Ctx& c) { return AvgPool(c, 3); };
  m["aten::avg_pool3d_backward"] = +[](Ctx& c) { return AvgPoolBackward(c, 3); };
  m["aten::binary_cross_entropy"] = BinaryCrossEntropy;
  m["aten::binary_cross_entropy_backward"] = BinaryCrossEntropyBackward;
  m["aten::convolution"] = Convolution;
  m["aten::convolution_backward"] = ConvolutionBackward;
  m["aten::logit"] = Logit;
  m["aten::logit_backward"] = LogitBackward;
  m["aten::sigmoid_backward"] = +[](Ctx& c) { return SigmoidTanhBackward(c, true); };
  m["aten::tanh_backward"] = +[](Ctx& c) { return SigmoidTanhBackward(c, false); };
  m["aten::convolution_backward_overrideable"] = ConvolutionBackward;
  m["aten::convolution_overrideable"] = Convolution;
  m["aten::elu"] = Elu;
  m["aten::elu_backward"] = EluBackward;
  m["aten::gelu"] = Gelu;
  m["aten::gelu_backward"] = GeluBackward;
  m["aten::hardsigmoid"] = Hardsigmoid;
  m["aten::hardsigmoid_backward"] = HardsigmoidBackward;
  m["aten::hardswish"] = Hardswish;
  m["aten::hardswish_backward"] = HardswishBackward;
  m["aten::hardtanh"] = Hardtanh;
  m["aten::hardtanh_backward"] = HardtanhBackward;
  m["aten::huber_loss"] = +[](Ctx& c) { return SmoothLoss(c, true); };
  m["aten::huber_loss_backward"] = +[](Ctx& c) { return SmoothLossBackward(c, true); };
  m["aten::leaky_relu"] = LeakyRelu;
  m["aten::leaky_relu_backward"] = LeakyReluBackward;
  m["aten::max_pool2d_with_indices"] = +[](Ctx& c) { return MaxPool(c, 2); };
  m["aten::max_pool2d_with_indices_backward"] = +[](Ctx& c) { return MaxPoolBackward(c, 2); };
  m["aten::max_pool3d_with_indices"] = +[](Ctx& c) { return MaxPool(c, 3); };
  m["aten::max_pool3d_with_indices_backward"] = +[](Ctx& c) { return MaxPoolBackward(c, 3); };
  m["aten::mish"] = Mish;
  m["aten::mish_backward"] = MishBackward;
  m["aten::mse_loss"] = MseLoss;
  m["aten::multi_margin_loss"] = MultiMarginLoss;
  m["aten::multi_margin_loss_backward"] = MultiMarginLossBackward;
  m["aten::mse_loss_backward"] = MseLossBackward;
  m["aten::native_batch_norm"] =
      +[](Ctx& c) { return BatchNorm(c, c.Bool("training", false), false); };
  m["aten::native_batch_norm_backward"] = BatchNormBackward;
  m["aten::native_dropout_backward"] = DropoutBackward;
  m["aten::native_group_norm"] = GroupNorm;
  m["aten::native_group_norm_backward"] = GroupNormBackward;
  m["aten::native_layer_norm"] = LayerNorm;
  m["aten::native_layer_norm_backward"] = LayerNormBackward;
  m["aten::nll_loss2d_backward"] = NllLossBackward;
  m["aten::nll_loss2d_forward"] = NllLoss;
  m["aten::nll_loss_backward"] = NllLossBackward;
  m["aten::nll_loss_forward"] = NllLoss;
  m["aten::relu"] = Relu;
  m["aten::silu"] = Silu;
  m["aten::silu_backward"] = SiluBackward;
  m["aten::smooth_l1_loss"] = +[](Ctx& c) { return SmoothLoss(c, false); };
  m["aten::smooth_l1_loss_backward"] = +[](Ctx& c) { return SmoothLossBackward(c, false); };
  m["aten::softplus"] = Softplus;
  m["aten::softplus_backward"] = SoftplusBackward;
  m["aten::threshold"] = Threshold;
  m["aten::threshold_backward"] = ThresholdBackward;
}

}  // namespace tpu::lowering
